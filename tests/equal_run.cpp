// Tests for wdedup/detail/equal_run.hpp: the prefetching comparison of runs
// of pairs. Every kernel (AVX2 where the CPU has it, SSE2, the dispatcher)
// must give exactly memcmp's answer for every length, alignment and
// position of a difference, including the tail past the last whole line.
#include "wdedup/detail/equal_run.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/no_access.hpp"

namespace {

using Kernel = void (*)(const std::uint8_t* const*, const std::uint8_t* const*, const std::uint8_t*, std::size_t,
                        std::size_t, bool*);

struct NamedKernel {
  const char* name;
  Kernel fn;
};

std::vector<NamedKernel> kernels() {
  namespace impl = wdedup::detail::equal_run_impl;
  std::vector<NamedKernel> k{{"dispatch", &impl::dispatch}};
#if defined(WDEDUP_EQUAL_RUN_VECTORS)
  k.push_back({"sse2", &impl::run_sse2});
  if (impl::has_avx2()) k.push_back({"avx2", &impl::run_avx2});
#endif
  return k;
}

using GroupKernel = void (*)(const std::uint8_t* const*, const std::uint8_t* const*, std::size_t,
                             const std::uint8_t* const*, const std::uint8_t* const*, bool*);

struct NamedGroupKernel {
  const char* name;
  GroupKernel fn;
};

/// The kernels of equal_group_ahead: the dispatcher and, where built, each
/// vector width (SSE2 is what a CPU without AVX2 runs).
std::vector<NamedGroupKernel> group_kernels() {
  namespace impl = wdedup::detail::equal_run_impl;
  std::vector<NamedGroupKernel> k{{"dispatch_group", &impl::dispatch_group}};
#if defined(WDEDUP_EQUAL_RUN_VECTORS)
  k.push_back({"group_sse2", &impl::group_sse2});
  if (impl::has_avx2()) k.push_back({"group_avx2", &impl::group_avx2});
#endif
  return k;
}

/// Deterministic bytes (splitmix64), so a failure is reproducible.
void fill(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = static_cast<std::uint8_t>(z ^ (z >> 31));
  }
}

// Lengths around every boundary of the kernel: a cache line (64), the
// early-exit stride, the tail handed to memcmp.
constexpr std::size_t kStride = wdedup::detail::equal_run_impl::kExitStride;
const std::size_t kLengths[] = {0, 1, 7, 63, 64, 65, 127, 128, 511, 512, 1000, kStride - 1, kStride, kStride + 1,
                                kStride + 64, 3 * kStride + 17, 4096, 4097, 16384 + 13};

}  // namespace

TEST_CASE("equal_pairs: every kernel agrees with memcmp on every length, alignment and difference") {
  for (const NamedKernel& k : kernels()) {
    const std::string kernel = k.name;  // (a const char* would print as a pointer)
    CAPTURE(kernel);
    for (std::size_t n : kLengths) {
      CAPTURE(n);
      for (std::size_t align : {0u, 1u, 16u, 33u, 63u}) {
        CAPTURE(align);
        // Pair 0: equal. Pair 1: differs in its first byte. Pair 2: in its
        // last byte. Pair 3: in the byte at n / 2. Pair 4: equal (after
        // three unequal ones, so state does not leak from pair to pair).
        constexpr std::size_t kPairs = 5;
        const std::size_t pitch = n + 128;
        std::vector<std::uint8_t> a(kPairs * pitch + 64), b(kPairs * pitch + 64);
        const std::uint8_t* x[kPairs];
        const std::uint8_t* y[kPairs];
        bool expect[kPairs];
        for (std::size_t i = 0; i < kPairs; ++i) {
          std::uint8_t* pa = a.data() + i * pitch + align;
          std::uint8_t* pb = b.data() + i * pitch + (align * 7 + i) % 64;  // y misaligned differently
          fill(pa, n, 1000 + i);
          std::memcpy(pb, pa, n);
          if (n > 0 && i == 1) pb[0] ^= 0x01;
          if (n > 0 && i == 2) pb[n - 1] ^= 0x80;
          if (n > 0 && i == 3) pb[n / 2] ^= 0x10;
          x[i] = pa;
          y[i] = pb;
          expect[i] = std::memcmp(pa, pb, n) == 0;
        }
        REQUIRE(expect[0]);
        REQUIRE(expect[4]);
        bool eq[kPairs] = {};
        k.fn(x, y, nullptr, kPairs, n, eq);
        for (std::size_t i = 0; i < kPairs; ++i) {
          CAPTURE(i);
          CHECK(eq[i] == expect[i]);
        }
      }
    }
  }
}

TEST_CASE("equal_group_ahead: every group kernel agrees with memcmp on every length, alignment and difference") {
  // A group of four pairs: equal; differing in the first byte; in the
  // last; at n / 2 (for n of 0 all equal). The next pairs, only
  // prefetched, are the group itself one line on.
  constexpr std::size_t G = wdedup::detail::equal_run_impl::kGroup;
  static_assert(G == 4, "the pairs below are four");
  for (const NamedGroupKernel& k : group_kernels()) {
    const std::string kernel = k.name;
    CAPTURE(kernel);
    for (std::size_t n : kLengths) {
      CAPTURE(n);
      for (std::size_t align : {0u, 1u, 16u, 33u, 63u}) {
        CAPTURE(align);
        for (std::size_t rotate = 0; rotate < G; ++rotate) {  // each pair in each place of the group
          CAPTURE(rotate);
          const std::size_t pitch = n + 128;
          std::vector<std::uint8_t> a(G * pitch + 128), b(G * pitch + 128);
          const std::uint8_t* x[G];
          const std::uint8_t* y[G];
          const std::uint8_t* nx[G];
          const std::uint8_t* ny[G];
          bool expect[G];
          for (std::size_t i = 0; i < G; ++i) {
            const std::size_t kind = (i + rotate) % G;
            std::uint8_t* pa = a.data() + i * pitch + align;
            std::uint8_t* pb = b.data() + i * pitch + (align * 7 + i) % 64;
            fill(pa, n, 2000 + i);
            std::memcpy(pb, pa, n);
            if (n > 0 && kind == 1) pb[0] ^= 0x01;
            if (n > 0 && kind == 2) pb[n - 1] ^= 0x80;
            if (n > 0 && kind == 3) pb[n / 2] ^= 0x10;
            x[i] = pa;
            y[i] = pb;
            nx[i] = pa + 64;
            ny[i] = pb + 64;
            expect[i] = std::memcmp(pa, pb, n) == 0;
          }
          bool eq[G] = {false, true, false, true};  // stale values that must be overwritten
          k.fn(x, y, n, nx, ny, eq);
          for (std::size_t i = 0; i < G; ++i) {
            CAPTURE(i);
            CHECK(eq[i] == expect[i]);
            CHECK(eq[i] == (n == 0 || (i + rotate) % G == 0));  // every other kind differs once n > 0
          }
        }
      }
    }
  }
}

TEST_CASE("equal_to_one: members against one block, a difference at every line of it") {
  const std::size_t n = 2 * kStride + 100;  // two whole strides and a tail
  std::vector<std::uint8_t> one(n);
  fill(one.data(), n, 7);
  // One member per position class: each line start, each line end, the
  // tail; plus equal members in between.
  std::vector<std::size_t> where;
  for (std::size_t o = 0; o < n; o += 64) {
    where.push_back(o);
    where.push_back(std::min(n - 1, o + 63));
  }
  where.push_back(n - 1);
  for (const NamedKernel& k : kernels()) {
    const std::string kernel = k.name;
    CAPTURE(kernel);
    std::vector<std::vector<std::uint8_t>> members;
    std::vector<bool> expect;
    for (std::size_t pos : where) {
      members.push_back(one);
      members.back()[pos] ^= 0xff;
      expect.push_back(false);
      members.push_back(one);
      expect.push_back(true);
    }
    std::vector<const std::uint8_t*> x;
    for (const auto& m : members) x.push_back(m.data());
    std::vector<char> eq(x.size(), 2);
    // In runs of up to 64, as the engine calls it.
    for (std::size_t i = 0; i < x.size(); i += 64) {
      const std::size_t cnt = std::min<std::size_t>(64, x.size() - i);
      bool out[64];
      k.fn(x.data() + i, nullptr, one.data(), cnt, n, out);
      for (std::size_t g = 0; g < cnt; ++g) eq[i + g] = out[g];
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      CAPTURE(i);
      CHECK(static_cast<bool>(eq[i]) == expect[i]);
    }
  }
}

TEST_CASE("equal_to_one: members side by side, every combination of verdicts, lengths and run sizes") {
  // Members against one block go kGroup (4) at a time through one loop; a
  // member found different is dropped from the loop (it reads the block
  // instead), the loop stops when all four differ, and a run that is not a
  // multiple of four ends with a group of 3, 2 or 1. Members 0 and 1 take
  // every pair of difference positions; the others a pattern that puts equal
  // and unequal members beside them. One member aliases the block itself.
  constexpr std::size_t kMax = 9;
  static_assert(wdedup::detail::equal_run_impl::kGroup == 4, "the counts below are chosen around groups of four");
  for (const NamedKernel& k : kernels()) {
    const std::string kernel = k.name;
    CAPTURE(kernel);
    for (std::size_t n : kLengths) {
      CAPTURE(n);
      if (n == 0) continue;  // (length 0: below, every member equal)
      // Where member i differs (n: nowhere): first byte, last byte, the
      // middle, the first byte of the second stride, the last byte of the
      // last whole line.
      const std::size_t whole = n & ~std::size_t{63};
      std::vector<std::size_t> where = {n, 0, n - 1, n / 2};
      if (n > kStride) where.push_back(kStride);
      if (whole > 0 && whole < n) where.push_back(whole - 1);
      std::vector<std::uint8_t> one(n + 1);
      fill(one.data() + 1, n, 77);  // odd-aligned block
      for (std::size_t w0 : where)
        for (std::size_t w1 : where)
          for (std::size_t count = 1; count <= kMax; ++count) {
            CAPTURE(w0);
            CAPTURE(w1);
            CAPTURE(count);
            std::vector<std::vector<std::uint8_t>> m(kMax);
            const std::uint8_t* x[kMax];
            std::size_t diff_at[kMax] = {w0, w1};
            for (std::size_t i = 2; i < kMax; ++i) diff_at[i] = where[(i * 3 + w0 + 2 * w1) % where.size()];
            for (std::size_t i = 0; i < kMax; ++i) {
              const std::size_t shift = i % 3;  // members at different alignments
              m[i].assign(one.begin() + 1, one.end());
              m[i].insert(m[i].begin(), shift, std::uint8_t{0});
              if (diff_at[i] < n) m[i][shift + diff_at[i]] ^= 0x20;
              x[i] = m[i].data() + shift;
            }
            if (diff_at[6] == n) x[6] = one.data() + 1;  // the block itself, as a member
            bool eq[kMax];
            for (std::size_t i = 0; i < kMax; ++i) eq[i] = i % 2 == 0;  // stale values that must be overwritten
            k.fn(x, nullptr, one.data() + 1, count, n, eq);
            for (std::size_t i = 0; i < count; ++i) {
              CAPTURE(i);
              CHECK(eq[i] == (diff_at[i] == n));
            }
            for (std::size_t i = count; i < kMax; ++i) CHECK(eq[i] == (i % 2 == 0));
          }
    }
    // Length 0: every member equal, nothing read.
    const std::uint8_t* null_ptrs[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
    bool eq[5] = {};
    k.fn(null_ptrs, nullptr, nullptr, 5, 0, eq);
    for (bool e : eq) CHECK(e);
  }
}

TEST_CASE("equal_pairs: a single pair, aliasing pointers and the public entry points") {
  std::vector<std::uint8_t> buf(10000);
  fill(buf.data(), buf.size(), 99);
  const std::uint8_t* p = buf.data() + 3;
  bool eq[2] = {false, false};
  // The same pointer on both sides, and a run of one (it prefetches itself).
  wdedup::detail::equal_pairs(&p, &p, 1, 9000, eq);
  CHECK(eq[0]);
  // Overlapping ranges shifted by one byte differ (the bytes are random).
  const std::uint8_t* q = buf.data() + 4;
  wdedup::detail::equal_pairs(&p, &q, 1, 9000, eq);
  CHECK_FALSE(eq[0]);
  const std::uint8_t* xs[2] = {p, q};
  wdedup::detail::equal_to_one(xs, p, 2, 9000, eq);
  CHECK(eq[0]);
  CHECK_FALSE(eq[1]);
  // A zero-length comparison is always equal and reads nothing.
  const std::uint8_t* null_ptr = nullptr;
  wdedup::detail::equal_pairs(&null_ptr, &null_ptr, 1, 0, eq);
  CHECK(eq[0]);
}

TEST_CASE("equal_pairs: a group of pairs at a time, every combination of verdicts and difference positions") {
  // Pairs go through equal_group kGroup (4) at a time: one may differ and the
  // others not (they then go on alone from the end of that stride), several
  // may differ, in any stride or only in the tail. Runs that are not a
  // multiple of four leave a short group, which repeats its last pair.
  constexpr std::size_t kMax = 9;
  static_assert(wdedup::detail::equal_run_impl::kGroup == 4, "the counts below are chosen around groups of four");
  for (const NamedKernel& k : kernels()) {
    const std::string kernel = k.name;
    CAPTURE(kernel);
    for (std::size_t n : {std::size_t{65}, kStride, kStride + 1, 3 * kStride + 17, std::size_t{4096}}) {
      CAPTURE(n);
      // Where pair i differs (n: nowhere): first byte, inside the first
      // stride, the first byte of a later stride, the last whole line, the
      // tail past the last whole line.
      const std::size_t tail = n & ~std::size_t{63};
      std::vector<std::size_t> where = {n, 0, n - 1};
      if (n > 100) where.push_back(100);
      if (n > kStride) where.push_back(kStride);
      if (tail < n && tail > 0) where.push_back(tail - 1);
      for (std::size_t w0 : where)
        for (std::size_t w1 : where)
          for (std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5},
                                    std::size_t{8}, kMax}) {
            CAPTURE(w0);
            CAPTURE(w1);
            CAPTURE(count);
            std::vector<std::vector<std::uint8_t>> a(kMax), b(kMax);
            const std::uint8_t* x[kMax];
            const std::uint8_t* y[kMax];
            // Pairs 0 and 1 take every combination; the others a pattern
            // that puts equal and unequal pairs beside them in every group.
            std::size_t diff_at[kMax] = {w0, w1};
            for (std::size_t i = 2; i < kMax; ++i) diff_at[i] = where[(i * 5 + w0 + w1) % where.size()];
            for (std::size_t i = 0; i < kMax; ++i) {
              a[i].resize(n);
              fill(a[i].data(), n, 50 + i);
              b[i] = a[i];
              if (diff_at[i] < n) b[i][diff_at[i]] ^= 0x04;
              x[i] = a[i].data();
              y[i] = b[i].data();
            }
            bool eq[kMax];
            for (std::size_t i = 0; i < kMax; ++i) eq[i] = i % 2 == 0;  // stale values that must be overwritten
            k.fn(x, y, nullptr, count, n, eq);
            for (std::size_t i = 0; i < count; ++i) {
              CAPTURE(i);
              CHECK(eq[i] == (diff_at[i] == n));
            }
            // Past the count nothing is written.
            for (std::size_t i = count; i < kMax; ++i) CHECK(eq[i] == (i % 2 == 0));
          }
    }
  }
}

TEST_CASE("equal_group_ahead: the next pairs are only prefetched, pointers may alias, a pair may repeat") {
  constexpr std::size_t G = wdedup::detail::equal_run_impl::kGroup;
  std::vector<std::uint8_t> buf(3 * 4096);
  fill(buf.data(), buf.size(), 5);
  std::vector<std::uint8_t> copy(buf.begin(), buf.begin() + 4096);
  // Pairs: equal; a shifted (different) view; the first pair again (as a
  // caller fills a short group); equal but for the last byte.
  std::vector<std::uint8_t> last = copy;
  last[4095] ^= 1;
  const std::uint8_t* x[G] = {buf.data(), buf.data(), buf.data(), buf.data()};
  const std::uint8_t* y[G] = {copy.data(), buf.data() + 1, copy.data(), last.data()};
  // The next pairs: bytes that differ from everything, never compared.
  const std::uint8_t* nx[G] = {buf.data() + 4096, buf.data() + 8192, buf.data() + 4096, buf.data() + 8192};
  const std::uint8_t* ny[G] = {buf.data() + 8192, buf.data() + 4096, buf.data() + 8192, buf.data() + 4096};
  bool eq[G] = {false, true, false, true};
  wdedup::detail::equal_group_ahead(x, y, 4096, nx, ny, eq);
  CHECK(eq[0]);
  CHECK_FALSE(eq[1]);
  CHECK(eq[2]);
  CHECK_FALSE(eq[3]);
  // Every pair the same pointers (a pair compared with itself as partner).
  const std::uint8_t* same[G] = {buf.data(), buf.data(), buf.data(), buf.data()};
  for (bool& e : eq) e = false;
  wdedup::detail::equal_group_ahead(same, same, 5000, same, same, eq);
  for (bool e : eq) CHECK(e);
  // Zero length: equal, nothing read.
  const std::uint8_t* null_ptrs[G] = {nullptr, nullptr, nullptr, nullptr};
  for (bool& e : eq) e = false;
  wdedup::detail::equal_group_ahead(null_ptrs, null_ptrs, 0, null_ptrs, null_ptrs, eq);
  for (bool e : eq) CHECK(e);
}

TEST_CASE("every kernel reads nothing before either side's first byte nor past its last") {
  // Each side sits against a page that faults on any access, after it or
  // before it: a kernel that reads one byte too many crashes this case.
  // Equal, and differing in the first byte, then in the last.
  constexpr std::size_t G = wdedup::detail::equal_run_impl::kGroup;
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{63}, std::size_t{64},
                        std::size_t{65}, std::size_t{127}, std::size_t{4095}, std::size_t{4096}, std::size_t{4097},
                        kStride + 1, 2 * kStride - 1}) {
    CAPTURE(n);
    wdedup_test::Fenced fx(n), fy(n);
    for (const bool at_end : {false, true}) {
      CAPTURE(at_end);
      std::uint8_t* const xp = at_end ? fx.last(n) : fx.first();
      std::uint8_t* const yp = at_end ? fy.last(n) : fy.first();
      fill(xp, n, 900 + n);
      for (std::size_t where : {n, std::size_t{0}, n - 1}) {  // where y differs (n: nowhere)
        CAPTURE(where);
        std::memcpy(yp, xp, n);
        if (where < n) yp[where] ^= 0x40;
        const bool expect = where == n;
        const std::uint8_t* x[G] = {xp, xp, xp, xp};
        const std::uint8_t* y[G] = {yp, yp, yp, yp};
        for (const NamedKernel& k : kernels()) {
          const std::string kernel = k.name;
          CAPTURE(kernel);
          for (std::size_t count : {std::size_t{1}, G}) {
            CAPTURE(count);
            bool eq[G] = {!expect, !expect, !expect, !expect};
            k.fn(x, y, nullptr, count, n, eq);
            for (std::size_t i = 0; i < count; ++i) CHECK(eq[i] == expect);
            for (bool& e : eq) e = !expect;
            k.fn(x, nullptr, yp, count, n, eq);
            for (std::size_t i = 0; i < count; ++i) CHECK(eq[i] == expect);
          }
        }
        for (const NamedGroupKernel& k : group_kernels()) {
          const std::string kernel = k.name;
          CAPTURE(kernel);
          bool eq[G] = {!expect, !expect, !expect, !expect};
          k.fn(x, y, n, x, y, eq);
          for (bool e : eq) CHECK(e == expect);
        }
      }
    }
  }
}
