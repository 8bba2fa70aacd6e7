// wdedup/detail/equal_run.hpp — byte-for-byte comparison of a run of equal-
// length pairs, the confirmation step of the identity engine. Build-time half.
//
// Why not memcmp, one pair after another: small tensors sit on pages of
// their own at scattered places, and the hardware prefetcher neither crosses
// a page nor guesses the next pair, so each pair starts with a full memory
// latency and its page streams in slowly. Here, while pair i is compared,
// every cache line of pair i + 1 is prefetched at the same offset: the memory
// system always has the next pair in flight (measured on this project's
// 2-core EPYC VM, 50,000 pairs of 4 KiB, one side at random places: 28 ms
// with memcmp, 25 ms with this loop unprefetched, 12 ms prefetched, against
// 10 ms for one sequential AVX2 read pass of the same 400 MB). The lines
// are prefetched into L2 (prefetcht1), not L1: 128 lines in flight are
// more than L1's fill buffers hold, and on the 2-core Xeon VM the
// comparisons of 100,000 small tensors took 34.5 ms against 37.5 ms with
// prefetcht0 (6 alternating runs each; prefetcht2 the same as t1, two or
// three pairs ahead no better).
//
// Vectors are GCC/Clang vector extensions, not intrinsics: <immintrin.h>
// would cost every includer ~0.1 s of compile time. The 32-byte kernel is
// compiled for AVX2 by a function attribute and chosen at run time, so the
// library still runs on any x86-64 and needs no -mavx2.
#ifndef WDEDUP_DETAIL_EQUAL_RUN_HPP
#define WDEDUP_DETAIL_EQUAL_RUN_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace wdedup {
namespace detail {
namespace equal_run_impl {

/// Bytes compared between checks for a difference: pairs that differ stop
/// early. A check every 512 bytes made the loop 25% slower on 4 KiB pairs.
constexpr std::size_t kExitStride = 2048;
/// Bytes of each following pair that equal_two prefetches (16 lines: 4 or
/// 8 did as well, whole pairs worse; see equal_two).
constexpr std::size_t kAheadBytes = 1024;

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define WDEDUP_EQUAL_RUN_VECTORS 1
/// Unaligned, aliasing vectors of W bytes: a dereference is one unaligned
/// load. (A member typedef, not a template argument: GCC drops a typedef's
/// attributes when it is passed as a template argument.)
template <std::size_t W>
struct Vec {
  typedef long long type __attribute__((vector_size(W), aligned(1), may_alias));
};

/// Whether any bit of acc is set. (By reference: a vector passed by value
/// draws a note on the ABI of 32-byte arguments from GCC in every includer.)
template <class V>
__attribute__((always_inline)) inline bool any_bit(const V& acc) noexcept {
  long long bits = 0;
  for (std::size_t k = 0; k < sizeof(V) / sizeof(long long); ++k) bits |= acc[k];
  return bits != 0;
}

/// The last n - whole bytes (under one line, after the vector loop's
/// whole lines) equal.
__attribute__((always_inline)) inline bool tail_equal(const std::uint8_t* x, const std::uint8_t* y, std::size_t whole,
                                                      std::size_t n) noexcept {
  return whole == n || std::memcmp(x + whole, y + whole, n - whole) == 0;
}

/// Compares pair (x, y) of n bytes and prefetches nx and ny at the offsets
/// it reads, W bytes at a time (W divides 64). Always inlined, so that
/// under run_avx2's target attribute all of it is compiled for AVX2.
template <std::size_t W, bool kPrefetchY>
__attribute__((always_inline)) inline bool equal_one(const std::uint8_t* x, const std::uint8_t* y, std::size_t n,
                                                     const std::uint8_t* nx, const std::uint8_t* ny) noexcept {
  using V = typename Vec<W>::type;
  constexpr std::size_t kPerLine = 64 / W;
  const std::size_t whole = n & ~std::size_t{63};
  for (std::size_t o = 0; o < whole; o += kExitStride) {
    const std::size_t end = whole - o < kExitStride ? whole : o + kExitStride;
    V acc{};
    for (std::size_t q = o; q < end; q += 64) {
      // The builtin itself: a helper function would not be inlined across
      // the target attribute, and GCC drops a call to it as side-effect free.
      __builtin_prefetch(nx + q, 0, 2);
      if (kPrefetchY) __builtin_prefetch(ny + q, 0, 2);
      const V* a = reinterpret_cast<const V*>(x + q);
      const V* b = reinterpret_cast<const V*>(y + q);
      for (std::size_t k = 0; k < kPerLine; ++k) acc |= a[k] ^ b[k];
    }
    if (any_bit(acc)) return false;
  }
  return tail_equal(x, y, whole, n);
}

/// Compares pairs (x[0], y[0]) and (x[1], y[1]) of n bytes in one loop and
/// prefetches the first kAheadBytes of nx[0], ny[0], nx[1], ny[1] while it
/// reads its own first lines; the hardware prefetcher streams the rest of
/// those pages once they are touched. Four streams in flight get more from
/// memory than two (50,000 pairs of 4 KiB at random places, one thread:
/// 27.1 ms against 30.3 ms for one pair at a time with every line of the
/// next pair prefetched, 34.4 ms for a sequential one-stream read pass;
/// prefetching whole pairs, or four pairs at once, did no better). A pair
/// found different stops being read: the other one goes on alone.
template <std::size_t W>
__attribute__((always_inline)) inline void equal_two(const std::uint8_t* const* x, const std::uint8_t* const* y,
                                                     std::size_t n, const std::uint8_t* const* nx,
                                                     const std::uint8_t* const* ny, bool* eq) noexcept {
  using V = typename Vec<W>::type;
  constexpr std::size_t kPerLine = 64 / W;
  const std::size_t whole = n & ~std::size_t{63};
  const std::size_t ahead = whole < kAheadBytes ? whole : kAheadBytes;
  for (std::size_t o = 0; o < whole; o += kExitStride) {
    const std::size_t end = whole - o < kExitStride ? whole : o + kExitStride;
    V acc0{}, acc1{};
    for (std::size_t q = o; q < end; q += 64) {
      if (q < ahead) {
        __builtin_prefetch(nx[0] + q, 0, 2);
        __builtin_prefetch(ny[0] + q, 0, 2);
        __builtin_prefetch(nx[1] + q, 0, 2);
        __builtin_prefetch(ny[1] + q, 0, 2);
      }
      const V* a0 = reinterpret_cast<const V*>(x[0] + q);
      const V* b0 = reinterpret_cast<const V*>(y[0] + q);
      const V* a1 = reinterpret_cast<const V*>(x[1] + q);
      const V* b1 = reinterpret_cast<const V*>(y[1] + q);
      for (std::size_t k = 0; k < kPerLine; ++k) {
        acc0 |= a0[k] ^ b0[k];
        acc1 |= a1[k] ^ b1[k];
      }
    }
    const bool d0 = any_bit(acc0), d1 = any_bit(acc1);
    if (d0 || d1) {
      eq[0] = !d0 && equal_one<W, false>(x[0] + end, y[0] + end, n - end, x[0] + end, y[0] + end);
      eq[1] = !d1 && equal_one<W, false>(x[1] + end, y[1] + end, n - end, x[1] + end, y[1] + end);
      return;
    }
  }
  for (std::size_t p = 0; p < 2; ++p) eq[p] = tail_equal(x[p], y[p], whole, n);
}

/// The loop over a run, W bytes at a time. y == nullptr: every x is
/// compared with `one` (a block already hot in cache, so not prefetched).
/// Otherwise pairs go two at a time, each two prefetching the next two.
template <std::size_t W>
__attribute__((always_inline)) inline void run(const std::uint8_t* const* x, const std::uint8_t* const* y,
                                               const std::uint8_t* one, std::size_t count, std::size_t n,
                                               bool* eq) noexcept {
  if (y == nullptr) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t next = i + 1 < count ? i + 1 : i;
      eq[i] = equal_one<W, false>(x[i], one, n, x[next], one);
    }
    return;
  }
  std::size_t i = 0;
  for (; i + 1 < count; i += 2) {
    // The last two prefetch themselves (their lines are being read anyway).
    const std::size_t a = i + 2 < count ? i + 2 : i, b = i + 3 < count ? i + 3 : a;
    const std::uint8_t* nx[2] = {x[a], x[b]};
    const std::uint8_t* ny[2] = {y[a], y[b]};
    equal_two<W>(x + i, y + i, n, nx, ny, eq + i);
  }
  if (i < count) eq[i] = equal_one<W, true>(x[i], y[i], n, x[i], y[i]);
}

__attribute__((target("avx2"))) inline void two_avx2(const std::uint8_t* const* x, const std::uint8_t* const* y,
                                                    std::size_t n, const std::uint8_t* const* nx,
                                                    const std::uint8_t* const* ny, bool* eq) noexcept {
  equal_two<32>(x, y, n, nx, ny, eq);
}
inline void two_sse2(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t n,
                     const std::uint8_t* const* nx, const std::uint8_t* const* ny, bool* eq) noexcept {
  equal_two<16>(x, y, n, nx, ny, eq);
}
__attribute__((target("avx2"))) inline void run_avx2(const std::uint8_t* const* x, const std::uint8_t* const* y,
                                                    const std::uint8_t* one, std::size_t count, std::size_t n,
                                                    bool* eq) noexcept {
  run<32>(x, y, one, count, n, eq);
}
inline void run_sse2(const std::uint8_t* const* x, const std::uint8_t* const* y, const std::uint8_t* one,
                     std::size_t count, std::size_t n, bool* eq) noexcept {
  run<16>(x, y, one, count, n, eq);
}
inline bool has_avx2() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

inline void dispatch(const std::uint8_t* const* x, const std::uint8_t* const* y, const std::uint8_t* one,
                     std::size_t count, std::size_t n, bool* eq) noexcept {
#if defined(WDEDUP_EQUAL_RUN_VECTORS)
  if (has_avx2()) return run_avx2(x, y, one, count, n, eq);
  return run_sse2(x, y, one, count, n, eq);
#else
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* b = y != nullptr ? y[i] : one;
    eq[i] = x[i] == b || std::memcmp(x[i], b, n) == 0;
  }
#endif
}

inline void dispatch_two(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t n,
                         const std::uint8_t* const* nx, const std::uint8_t* const* ny, bool* eq) noexcept {
#if defined(WDEDUP_EQUAL_RUN_VECTORS)
  if (has_avx2()) return two_avx2(x, y, n, nx, ny, eq);
  return two_sse2(x, y, n, nx, ny, eq);
#else
  (void)nx;
  (void)ny;
  for (std::size_t p = 0; p < 2; ++p) eq[p] = x[p] == y[p] || std::memcmp(x[p], y[p], n) == 0;
#endif
}

}  // namespace equal_run_impl

/// eq[i] = bytes [x[i], x[i] + n) == bytes [y[i], y[i] + n), for i < count,
/// pair after pair, each prefetching the next. Pointers may alias.
inline void equal_pairs(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t count, std::size_t n,
                        bool* eq) noexcept {
  equal_run_impl::dispatch(x, y, nullptr, count, n, eq);
}

/// eq[p] = bytes [x[p], x[p] + n) == bytes [y[p], y[p] + n), p = 0, 1,
/// while the first lines of the pairs (nx[p], ny[p]) are prefetched: two
/// pairs at a time, for a caller that learns its pairs as it goes
/// (detail/early_pairs.hpp). Pointers may alias.
inline void equal_two_ahead(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t n,
                            const std::uint8_t* const* nx, const std::uint8_t* const* ny, bool* eq) noexcept {
  equal_run_impl::dispatch_two(x, y, n, nx, ny, eq);
}

/// eq[i] = bytes [x[i], x[i] + n) == bytes [one, one + n): many members
/// against one block that stays in cache (only the members are prefetched).
inline void equal_to_one(const std::uint8_t* const* x, const std::uint8_t* one, std::size_t count, std::size_t n,
                         bool* eq) noexcept {
  equal_run_impl::dispatch(x, nullptr, one, count, n, eq);
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_EQUAL_RUN_HPP
