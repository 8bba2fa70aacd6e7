// tests/support/fail_each_allocation.hpp — the loop of the tests of what
// running out of memory leaves (crash_safety.cpp, named_data_store.cpp,
// import.cpp, out_of_memory.cpp): allocation 0 of a call fails, then
// allocation 1, and so on, until the call runs with none failing. Each test
// keeps its own replaced operator new (failing_new.hpp's, or one that also
// counts bytes or is atomic); this takes its countdown. Only where
// exceptions are on: the failure is a std::bad_alloc.
#ifndef WDEDUP_TESTS_SUPPORT_FAIL_EACH_ALLOCATION_HPP
#define WDEDUP_TESTS_SUPPORT_FAIL_EACH_ALLOCATION_HPP

#if defined(__cpp_exceptions)
#include <doctest/doctest.h>

#include <new>

namespace wdedup_test {

/// Runs `call` with its n-th allocation failing, for n = 0, 1, ... until a
/// call returns without std::bad_alloc; returns that n, the number of
/// failures injected (each earlier call threw).
///  - `countdown`: the replaced operator new's counter (a long, or a
///    std::atomic<long>): set to n, the allocation n allocations later
///    throws; -1, none does.
///  - `prepare`: before each call, makes the state the call works on afresh.
///    Its allocations do not count: the countdown is armed after it.
///  - `after_failure`, `after_success`: what must hold once a call threw,
///    and once one returned (the countdown is off by then, so they may
///    allocate, and call again).
///  - `max_calls`: a call that throws std::bad_alloc at every n (one that
///    asks for more memory than there is, or allocates without end) fails
///    the test here instead of looping forever.
/// A failure names n (CAPTURE).
template <class Countdown, class Prepare, class Call, class AfterFailure, class AfterSuccess>
long fail_each_allocation(Countdown& countdown, Prepare&& prepare, Call&& call, AfterFailure&& after_failure,
                          AfterSuccess&& after_success, long max_calls = 100000) {
  for (long n = 0;; ++n) {
    REQUIRE(n < max_calls);
    CAPTURE(n);
    prepare();
    bool threw = false;
    countdown = n;
    try {
      call();
    } catch (const std::bad_alloc&) {
      threw = true;
    } catch (...) {
      countdown = -1;  // (anything else, a failed REQUIRE say, is doctest's to report: with memory)
      throw;
    }
    countdown = -1;
    if (!threw) {
      after_success();
      return n;
    }
    after_failure();
  }
}

}  // namespace wdedup_test

#endif  // __cpp_exceptions
#endif  // WDEDUP_TESTS_SUPPORT_FAIL_EACH_ALLOCATION_HPP
