// wdedup/detail/equal_run.hpp — byte-for-byte comparison of a run of equal-
// length pairs, the confirmation step of the identity engine. Build-time half.
//
// Why not memcmp, one pair after another: small tensors sit on pages of
// their own at scattered places, and the hardware prefetcher neither crosses
// a page nor guesses the next pair, so each pair starts with a full memory
// latency and its page streams in slowly. Here pairs are compared kGroup at
// a time, 2 * kGroup streams in flight, and while one group is compared the
// next group is prefetched, the first page of each pair's first side and
// the first line of its second: each page is already on its way when its
// comparison starts, and the hardware prefetcher streams the rest of the
// second side from its first touches. (Measured
// history: on the EPYC VM of 2026-11-23 one pair at a time wanted every
// line of the next prefetched, 12 ms against 25 ms for 50,000 pairs of
// 4 KiB; the Xeon VM two pairs at a time with their first 1 KiB, 27.1 ms
// against 30.3 ms. The Zen 5 EPYC VM of 2026-11-26 is slowed by that much
// prefetching: see kGroup.) The lines
// are prefetched into L2 (prefetcht1), not L1, which has few fill buffers.
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
/// Pairs compared in one loop, and bytes of each pair of the next group
/// that loop prefetches. 50,000 pairs of 4 KiB, one side at random places,
/// one thread, Zen 5 EPYC VM (2026-11-26, medians of 21, same process, a
/// 410 MB one-stream read pass 12-13 ms): 2 pairs with 1 KiB ahead (the
/// Xeon's choice, where 4 or 8 lines did as well and four pairs no better)
/// 20.8-21.0 ms; 2 pairs with 64 B 15.4-15.8 ms, with 256 B 17.3-18.0 ms;
/// 3 pairs with 64 B 14.0-14.3 ms; 4 pairs with 64 B 14.2-15.6 ms, 256 B
/// 15.1-16.4 ms; 8 pairs 18.5-19.2 ms. Sixteen lines a pair in flight fill
/// the core's queue of misses that the comparisons' own loads wait in. In
/// EarlyPairs, with its bookkeeping per pair, 3 pairs took 18.5-19.3 ms,
/// 4 pairs 17.2-17.5 ms, 5 pairs 16.7-17.2 ms: four keeps most of that with
/// four accumulators.
///
/// The first side's whole first page, not its first line: on the Zen 4
/// EPYC VM (2026-11-29, the same 50,000 pairs, medians of 15, four
/// processes, read pass 16.8-17.9 ms) 4 pairs took 17.7-19.4 ms with 4 KiB
/// of one side and 64 B of the other, 20.2-21.8 ms with 64 B of both, and
/// 19.2-19.8 ms with 4 KiB of both; which side is the random one did not
/// matter (18.6-19.1 ms the other way round), nor did 3 pairs (18.2-19.0).
/// Spread over the group's first page, the prefetches keep the queue of
/// misses fed without filling it. The Xeon measured one side's page as no
/// slower than a line (29.1-29.2 ms against 29.3-31.2); the Zen 5 EPYC was
/// slowed by both sides' pages (16.8-17.5 ms against 14.2-15.6) and has not
/// run one side's. The first side is the earlier tensor (a hint, a
/// representative): the one a program's order puts at scattered places.
constexpr std::size_t kGroup = 4;
constexpr std::size_t kAheadFirstBytes = 4096;
constexpr std::size_t kAheadSecondBytes = 64;

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define WDEDUP_EQUAL_RUN_VECTORS 1
/// `type`: unaligned, aliasing vectors of W bytes, which the input is read
/// as: a dereference is one unaligned load. `acc`: the accumulators, local
/// variables aligned to W as vectors are. (Not `type`: an array of an
/// aligned(1) vector may sit at a 16-byte boundary, and clang 14 under ASan
/// still read one such accumulator with an aligned 32-byte load, which
/// faulted.) (Member typedefs, not template arguments: GCC drops a typedef's
/// attributes when it is passed as a template argument.)
template <std::size_t W>
struct Vec {
  typedef long long type __attribute__((vector_size(W), aligned(1), may_alias));
  typedef long long acc __attribute__((vector_size(W)));
};

/// Whether any bit of acc is set. (By reference: a vector passed by value
/// draws a note on the ABI of 32-byte arguments from GCC in every includer.
/// W is given, not deduced, so that the type is Vec's.)
template <std::size_t W>
__attribute__((always_inline)) inline bool any_bit(const typename Vec<W>::acc& acc) noexcept {
  long long bits = 0;
  for (std::size_t k = 0; k < W / sizeof(long long); ++k) bits |= acc[k];
  return bits != 0;
}

/// The last n - whole bytes (under one line, after the vector loop's
/// whole lines) equal.
__attribute__((always_inline)) inline bool tail_equal(const std::uint8_t* x, const std::uint8_t* y, std::size_t whole,
                                                      std::size_t n) noexcept {
  return whole == n || std::memcmp(x + whole, y + whole, n - whole) == 0;
}

/// Compares the G members x[p] of n bytes with `one` in one loop: each
/// line of `one` is loaded once for all of them, and their G streams are
/// read side by side, so that G of their misses are in flight at once. A
/// member found different is swapped for `one` itself (read again from
/// cache, always equal) so the loop needs no branch per member; the loop
/// stops once every member differs.
///
/// Why side by side rather than one member after another with the next
/// one's lines prefetched (the kernel until 2026-11-30): on the Zen 5 EPYC
/// VM (2026-11-30, 2047 members of 256 KiB against their leader from 64
/// KiB on, in steps of 2 KiB, 9 repetitions, two processes) one after
/// another took 22-26 ms, 0.59-0.67x of a one-stream read pass of the same
/// bytes; four side by side 12.4-12.5 ms (1.17x), eight 13.9-14.3 ms,
/// two 17.0-18.7 ms. Always inlined, so that under run_avx2's target
/// attribute all of it is compiled for AVX2 (W bytes at a time; W divides
/// 64).
template <std::size_t W, std::size_t G>
__attribute__((always_inline)) inline void group_to_one(const std::uint8_t* const* x, const std::uint8_t* one,
                                                        std::size_t n, bool* eq) noexcept {
  using V = typename Vec<W>::type;
  constexpr std::size_t kPerLine = 64 / W;
  const std::size_t whole = n & ~std::size_t{63};
  const std::uint8_t* s[G];
  bool differ[G];
  for (std::size_t p = 0; p < G; ++p) {
    s[p] = x[p];
    differ[p] = false;
  }
  std::size_t left = G;
  for (std::size_t o = 0; o < whole && left > 0; o += kExitStride) {
    const std::size_t end = whole - o < kExitStride ? whole : o + kExitStride;
    typename Vec<W>::acc acc[G] = {};
    for (std::size_t q = o; q < end; q += 64) {
      const V* l = reinterpret_cast<const V*>(one + q);
      for (std::size_t k = 0; k < kPerLine; ++k) {
        const V lk = l[k];
        for (std::size_t p = 0; p < G; ++p) acc[p] |= reinterpret_cast<const V*>(s[p] + q)[k] ^ lk;
      }
    }
    for (std::size_t p = 0; p < G; ++p) {
      if (!differ[p] && any_bit<W>(acc[p])) {
        differ[p] = true;
        s[p] = one;
        --left;
      }
    }
  }
  for (std::size_t p = 0; p < G; ++p) eq[p] = !differ[p] && tail_equal(x[p], one, whole, n);
}

/// Compares the kGroup pairs (x[p], y[p]) of n bytes in one loop and
/// prefetches the next group's pairs, kAheadFirstBytes of each nx[p] and
/// kAheadSecondBytes of each ny[p], while it reads its own first page. A
/// pair found different stops being read: the others go on alone from the
/// end of that stride. A caller with fewer pairs repeats one (its lines are
/// then read twice, from cache).
template <std::size_t W>
__attribute__((always_inline)) inline void equal_group(const std::uint8_t* const* x, const std::uint8_t* const* y,
                                                       std::size_t n, const std::uint8_t* const* nx,
                                                       const std::uint8_t* const* ny, bool* eq) noexcept {
  using V = typename Vec<W>::type;
  constexpr std::size_t kPerLine = 64 / W;
  const std::size_t whole = n & ~std::size_t{63};
  const std::size_t ahead_x = whole < kAheadFirstBytes ? whole : kAheadFirstBytes;
  const std::size_t ahead_y = whole < kAheadSecondBytes ? whole : kAheadSecondBytes;
  for (std::size_t o = 0; o < whole; o += kExitStride) {
    const std::size_t end = whole - o < kExitStride ? whole : o + kExitStride;
    typename Vec<W>::acc acc[kGroup] = {};
    for (std::size_t q = o; q < end; q += 64) {
      // The builtin itself: a helper function would not be inlined across
      // the target attribute, and GCC drops a call to it as side-effect free.
      if (q < ahead_x)
        for (std::size_t p = 0; p < kGroup; ++p) __builtin_prefetch(nx[p] + q, 0, 2);
      if (q < ahead_y)
        for (std::size_t p = 0; p < kGroup; ++p) __builtin_prefetch(ny[p] + q, 0, 2);
      for (std::size_t p = 0; p < kGroup; ++p) {
        const V* a = reinterpret_cast<const V*>(x[p] + q);
        const V* b = reinterpret_cast<const V*>(y[p] + q);
        for (std::size_t k = 0; k < kPerLine; ++k) acc[p] |= a[k] ^ b[k];
      }
    }
    bool differ[kGroup];
    bool any = false;
    for (std::size_t p = 0; p < kGroup; ++p) any |= differ[p] = any_bit<W>(acc[p]);
    if (any) {
      for (std::size_t p = 0; p < kGroup; ++p) {
        eq[p] = false;
        if (differ[p]) continue;
        const std::uint8_t* rest = x[p] + end;
        group_to_one<W, 1>(&rest, y[p] + end, n - end, &eq[p]);
      }
      return;
    }
  }
  for (std::size_t p = 0; p < kGroup; ++p) eq[p] = tail_equal(x[p], y[p], whole, n);
}

/// The loop over a run, W bytes at a time. y == nullptr: every x is
/// compared with `one` (a block already hot in cache, so not prefetched),
/// kGroup members side by side. Otherwise pairs go kGroup at a time, each
/// group prefetching the next.
template <std::size_t W>
__attribute__((always_inline)) inline void run(const std::uint8_t* const* x, const std::uint8_t* const* y,
                                               const std::uint8_t* one, std::size_t count, std::size_t n,
                                               bool* eq) noexcept {
  if (y == nullptr) {
    static_assert(kGroup == 4, "the members' loop below is written out for groups of four");
    std::size_t i = 0;
    for (; count - i >= 4; i += 4) group_to_one<W, 4>(x + i, one, n, eq + i);
    switch (count - i) {
      case 3: group_to_one<W, 3>(x + i, one, n, eq + i); break;
      case 2: group_to_one<W, 2>(x + i, one, n, eq + i); break;
      case 1: group_to_one<W, 1>(x + i, one, n, eq + i); break;
      default: break;
    }
    return;
  }
  for (std::size_t i = 0; i < count; i += kGroup) {
    // A short last group repeats its last pair; the last group prefetches
    // itself (its lines are being read anyway).
    const std::uint8_t* gx[kGroup];
    const std::uint8_t* gy[kGroup];
    const std::uint8_t* nx[kGroup];
    const std::uint8_t* ny[kGroup];
    for (std::size_t p = 0; p < kGroup; ++p) {
      const std::size_t j = i + p < count ? i + p : count - 1;
      const std::size_t next = i + kGroup + p < count ? i + kGroup + p : j;
      gx[p] = x[j];
      gy[p] = y[j];
      nx[p] = x[next];
      ny[p] = y[next];
    }
    bool geq[kGroup];
    equal_group<W>(gx, gy, n, nx, ny, geq);
    for (std::size_t p = 0; p < kGroup && i + p < count; ++p) eq[i + p] = geq[p];
  }
}

__attribute__((target("avx2"))) inline void group_avx2(const std::uint8_t* const* x, const std::uint8_t* const* y,
                                                    std::size_t n, const std::uint8_t* const* nx,
                                                    const std::uint8_t* const* ny, bool* eq) noexcept {
  equal_group<32>(x, y, n, nx, ny, eq);
}
inline void group_sse2(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t n,
                     const std::uint8_t* const* nx, const std::uint8_t* const* ny, bool* eq) noexcept {
  equal_group<16>(x, y, n, nx, ny, eq);
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

inline void dispatch_group(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t n,
                         const std::uint8_t* const* nx, const std::uint8_t* const* ny, bool* eq) noexcept {
#if defined(WDEDUP_EQUAL_RUN_VECTORS)
  if (has_avx2()) return group_avx2(x, y, n, nx, ny, eq);
  return group_sse2(x, y, n, nx, ny, eq);
#else
  (void)nx;
  (void)ny;
  for (std::size_t p = 0; p < kGroup; ++p) eq[p] = x[p] == y[p] || std::memcmp(x[p], y[p], n) == 0;
#endif
}

}  // namespace equal_run_impl

/// eq[i] = bytes [x[i], x[i] + n) == bytes [y[i], y[i] + n), for i < count,
/// pair after pair, each prefetching the next. Pointers may alias.
inline void equal_pairs(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t count, std::size_t n,
                        bool* eq) noexcept {
  equal_run_impl::dispatch(x, y, nullptr, count, n, eq);
}

/// eq[p] = bytes [x[p], x[p] + n) == bytes [y[p], y[p] + n), p < kGroup
/// (every array has kGroup entries), while each next pair (nx[p], ny[p])
/// is prefetched (see kAheadFirstBytes): a group at a time, for a caller
/// that learns its pairs as it goes (detail/early_pairs.hpp). Pointers may
/// alias, and a pair may be given twice.
inline void equal_group_ahead(const std::uint8_t* const* x, const std::uint8_t* const* y, std::size_t n,
                              const std::uint8_t* const* nx, const std::uint8_t* const* ny, bool* eq) noexcept {
  equal_run_impl::dispatch_group(x, y, n, nx, ny, eq);
}

/// eq[i] = bytes [x[i], x[i] + n) == bytes [one, one + n): many members
/// against one block that stays in cache, four side by side (group_to_one;
/// nothing is prefetched: four streams keep memory busy).
inline void equal_to_one(const std::uint8_t* const* x, const std::uint8_t* one, std::size_t count, std::size_t n,
                         bool* eq) noexcept {
  equal_run_impl::dispatch(x, nullptr, one, count, n, eq);
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_EQUAL_RUN_HPP
