// Tests for wdedup/detail/atomic.hpp: the atomic counters and flags of the
// build-time half's threads (the builtins in place of <atomic>). Values and
// return values as std::atomic gives them, the alignment the builtins need
// to be lock-free (on i386 too: the 32-bit suite runs this), and counts
// from threads that share one (CI runs it under ThreadSanitizer as well).
#include "wdedup/detail/atomic.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

using wdedup::detail::Atomic;
using wdedup::detail::Order;

// Built twice: test_atomic over the builtins, test_atomic_std over the
// std::atomic version other compilers get (tests/meson.build).
#ifdef WDEDUP_DETAIL_ATOMIC_STD
#ifdef WDEDUP_DETAIL_ATOMIC_BUILTINS
#error "WDEDUP_DETAIL_ATOMIC_STD is defined, but detail/atomic.hpp chose the builtins"
#endif
#elif (defined(__GNUC__) || defined(__clang__)) && !defined(WDEDUP_DETAIL_ATOMIC_BUILTINS)
#error "GCC or Clang, but detail/atomic.hpp did not choose the builtins"
#endif

static_assert(alignof(Atomic<std::uint64_t>) == 8, "a 64-bit atomic is 8-aligned, on i386 too");
static_assert(sizeof(Atomic<std::uint64_t>) == 8 && sizeof(Atomic<bool>) == 1 && sizeof(Atomic<int>) == sizeof(int));

TEST_CASE("Atomic: load, store and fetch_add return what std::atomic's do") {
  Atomic<std::uint64_t> zero;
  CHECK(zero.load(Order::relaxed) == 0);

  Atomic<std::size_t> n{5};
  CHECK(n.load(Order::acquire) == 5);
  CHECK(n.fetch_add(3, Order::relaxed) == 5);  // the value before
  CHECK(n.load(Order::relaxed) == 8);
  n.store(41, Order::release);
  CHECK(n.fetch_add(1, Order::acq_rel) == 41);
  CHECK(n.load(Order::acquire) == 42);

  Atomic<int> i{-2};
  CHECK(i.fetch_add(-3, Order::relaxed) == -2);
  CHECK(i.load(Order::relaxed) == -5);

  Atomic<bool> flag{false};
  CHECK_FALSE(flag.load(Order::acquire));
  flag.store(true, Order::release);
  CHECK(flag.load(Order::acquire));

  // Wraps as an unsigned integer does.
  Atomic<std::uint64_t> top{~std::uint64_t{0}};
  CHECK(top.fetch_add(2, Order::relaxed) == ~std::uint64_t{0});
  CHECK(top.load(Order::relaxed) == 1);
}

TEST_CASE("Atomic: compare_exchange stores only on a match, and reports the value it found") {
  Atomic<int> v{0};
  int expected = 1;
  CHECK_FALSE(v.compare_exchange_strong(expected, 7, Order::relaxed, Order::relaxed));
  CHECK(expected == 0);  // the value found
  CHECK(v.load(Order::relaxed) == 0);
  CHECK(v.compare_exchange_strong(expected, 7, Order::acq_rel, Order::relaxed));
  CHECK(expected == 0);
  CHECK(v.load(Order::relaxed) == 7);

  // The weak form may fail spuriously: retried until it stores, as callers do.
  Atomic<std::size_t> w{10};
  std::size_t seen = 10;
  while (!w.compare_exchange_weak(seen, 12, Order::acq_rel, Order::relaxed)) REQUIRE(seen == 10);
  CHECK(w.load(Order::relaxed) == 12);
  seen = 11;
  CHECK_FALSE(w.compare_exchange_weak(seen, 99, Order::acq_rel, Order::relaxed));
  CHECK(seen == 12);
  CHECK(w.load(Order::relaxed) == 12);
}

TEST_CASE("Atomic: threads that share a counter count every increment, and claim every ticket once") {
  constexpr std::size_t kThreads = 4;
  constexpr std::size_t kEach = 100000;
  Atomic<std::size_t> count{0};
  // Tickets claimed with compare_exchange_weak, as EarlyPairs claims pairs.
  constexpr std::size_t kTickets = 50000;
  Atomic<std::size_t> next{0};
  std::vector<std::vector<std::uint8_t>> claimed(kThreads, std::vector<std::uint8_t>(kTickets, 0));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t k = 0; k < kEach; ++k) count.fetch_add(1, Order::relaxed);
      for (std::size_t c = next.load(Order::relaxed); c < kTickets;) {
        if (next.compare_exchange_weak(c, c + 1, Order::acq_rel, Order::relaxed)) {
          claimed[t][c] = 1;
          c = c + 1;
        }
      }
    });
  for (std::thread& th : threads) th.join();
  CHECK(count.load(Order::acquire) == kThreads * kEach);
  CHECK(next.load(Order::acquire) == kTickets);
  std::size_t once = 0;
  for (std::size_t c = 0; c < kTickets; ++c) {
    int holders = 0;
    for (std::size_t t = 0; t < kThreads; ++t) holders += claimed[t][c];
    once += holders == 1;
  }
  CHECK(once == kTickets);
}

TEST_CASE("Atomic: a release store, fetch_add or compare_exchange publishes the plain writes before it to an acquire load") {
  // The orders reach the operation. Under ThreadSanitizer (scripts/test.sh's
  // tsan runs this) an acquire load, or a release store or compare-exchange,
  // dropped to relaxed leaves a plain read below racing with its write, and
  // it reports the race. Each reader waits for its flag, so the values read
  // are those written.
  int stored = 0, added = 0, exchanged = 0;  // plain ints, published by the atomics
  Atomic<bool> ready{false};
  Atomic<std::size_t> count{0};
  Atomic<int> state{0};
  std::thread writer([&] {
    stored = 41;
    ready.store(true, Order::release);
    added = 42;
    count.fetch_add(1, Order::acq_rel);
    exchanged = 43;
    int expected = 0;
    while (!state.compare_exchange_weak(expected, 1, Order::acq_rel, Order::relaxed)) expected = 0;
  });
  while (!ready.load(Order::acquire)) std::this_thread::yield();
  const int seen_stored = stored;
  while (count.load(Order::acquire) != 1) std::this_thread::yield();
  const int seen_added = added;
  int one = 1;
  while (!state.compare_exchange_strong(one, 2, Order::acquire, Order::relaxed)) {
    REQUIRE(one == 0);
    one = 1;
    std::this_thread::yield();
  }
  const int seen_exchanged = exchanged;
  writer.join();
  CHECK(seen_stored == 41);
  CHECK(seen_added == 42);
  CHECK(seen_exchanged == 43);
  CHECK(count.load(Order::relaxed) == 1);
  CHECK(state.load(Order::relaxed) == 2);
}
