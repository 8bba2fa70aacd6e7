// tests/support/failing_new.hpp — a replaced global operator new that fails
// one chosen allocation, for the tests of what running out of memory leaves
// (named_data_store.cpp: an add; crash_safety.cpp: a write). Set
// wdedup_test::g_fail_countdown to n: the allocation n allocations from
// then throws std::bad_alloc, once; -1 (the start): never. One thread only.
// Include it in one file of a test program (it defines the operators), and
// only where exceptions are on. (import.cpp and out_of_memory.cpp keep
// their own: one also counts the bytes asked for, the other is atomic and
// replaces the array forms.)
#ifndef WDEDUP_TESTS_SUPPORT_FAILING_NEW_HPP
#define WDEDUP_TESTS_SUPPORT_FAILING_NEW_HPP

#include <cstddef>
#include <cstdlib>
#include <new>

namespace wdedup_test {
inline long g_fail_countdown = -1;  // fail the allocation this many allocations from now; -1: never
}  // namespace wdedup_test

void* operator new(std::size_t n) {
  if (wdedup_test::g_fail_countdown >= 0 && wdedup_test::g_fail_countdown-- == 0) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// (GCC flags free() in a replaced operator delete as a mismatch once it
// inlines the pair; here the two are matched by construction.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
// noinline: GCC 11 inlined them into the library's code above the point
// of inclusion, where the pragma does not reach, and stopped the build
// (-Werror).
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }

#endif  // WDEDUP_TESTS_SUPPORT_FAILING_NEW_HPP
