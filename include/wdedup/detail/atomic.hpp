// wdedup/detail/atomic.hpp — the atomic counters and flags the build-time
// half's threads share: load, store, fetch_add and compare-exchange on an
// integer or bool, with an explicit memory order on every call.
//
// Why not <atomic>: these five operations are all the library uses, and
// GCC and Clang give them as builtins (the ones libstdc++'s std::atomic is
// written with). <atomic> added 93M of the 2,397M instructions GCC executes
// for `-fsyntax-only` of <wdedup/wdedup.hpp> (callgrind, 2026-11-28): 4% of
// the umbrella's compile time, whose target is 1.0 s. Other compilers get
// the same interface over std::atomic.
//
// WDEDUP_DETAIL_ATOMIC_STD, defined before the first include, picks the
// std::atomic version on GCC and Clang too: the tests build it that way
// (test_atomic_std), or no compiler here would ever compile it. Every
// translation unit of a program must agree on it.
#ifndef WDEDUP_DETAIL_ATOMIC_HPP
#define WDEDUP_DETAIL_ATOMIC_HPP

#include <type_traits>

#if (defined(__GNUC__) || defined(__clang__)) && !defined(WDEDUP_DETAIL_ATOMIC_STD)
#define WDEDUP_DETAIL_ATOMIC_BUILTINS 1
#else
#include <atomic>
#endif

namespace wdedup {
namespace detail {

#ifdef WDEDUP_DETAIL_ATOMIC_BUILTINS
/// The memory orders the library uses, as the builtins number them.
enum class Order : int {
  relaxed = __ATOMIC_RELAXED,
  acquire = __ATOMIC_ACQUIRE,
  release = __ATOMIC_RELEASE,
  acq_rel = __ATOMIC_ACQ_REL,
};

/// An integer or bool that threads read and write atomically. Aligned to its
/// size: a 64-bit value is 4-aligned on i386 by default, and the builtins
/// are lock-free on it only when it is 8-aligned.
template <class T>
class Atomic {
  static_assert(std::is_integral<T>::value, "wdedup::detail::Atomic holds an integer or bool");

 public:
  constexpr Atomic() noexcept : v_() {}
  constexpr explicit Atomic(T v) noexcept : v_(v) {}
  Atomic(const Atomic&) = delete;
  Atomic& operator=(const Atomic&) = delete;

  T load(Order o) const noexcept { return __atomic_load_n(&v_, static_cast<int>(o)); }
  void store(T x, Order o) noexcept { __atomic_store_n(&v_, x, static_cast<int>(o)); }
  T fetch_add(T x, Order o) noexcept { return __atomic_fetch_add(&v_, x, static_cast<int>(o)); }
  /// As std::atomic's: on failure `expected` becomes the value found.
  bool compare_exchange_weak(T& expected, T desired, Order success, Order failure) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, true, static_cast<int>(success),
                                       static_cast<int>(failure));
  }
  bool compare_exchange_strong(T& expected, T desired, Order success, Order failure) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, false, static_cast<int>(success),
                                       static_cast<int>(failure));
  }

 private:
  alignas(sizeof(T)) T v_;
};
#else
enum class Order : int { relaxed, acquire, release, acq_rel };

template <class T>
class Atomic {
  static_assert(std::is_integral<T>::value, "wdedup::detail::Atomic holds an integer or bool");
  static constexpr std::memory_order to_std(Order o) noexcept {
    return o == Order::relaxed   ? std::memory_order_relaxed
           : o == Order::acquire ? std::memory_order_acquire
           : o == Order::release ? std::memory_order_release
                                 : std::memory_order_acq_rel;
  }

 public:
  constexpr Atomic() noexcept : v_() {}
  constexpr explicit Atomic(T v) noexcept : v_(v) {}
  Atomic(const Atomic&) = delete;
  Atomic& operator=(const Atomic&) = delete;

  T load(Order o) const noexcept { return v_.load(to_std(o)); }
  void store(T x, Order o) noexcept { v_.store(x, to_std(o)); }
  T fetch_add(T x, Order o) noexcept { return v_.fetch_add(x, to_std(o)); }
  bool compare_exchange_weak(T& expected, T desired, Order success, Order failure) noexcept {
    return v_.compare_exchange_weak(expected, desired, to_std(success), to_std(failure));
  }
  bool compare_exchange_strong(T& expected, T desired, Order success, Order failure) noexcept {
    return v_.compare_exchange_strong(expected, desired, to_std(success), to_std(failure));
  }

 private:
  std::atomic<T> v_;
};
#endif

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_ATOMIC_HPP
