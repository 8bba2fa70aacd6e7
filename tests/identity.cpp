// Tests for wdedup/detail/identity.hpp: the content-identity engine.
// Every case runs with 1, 2 and 8 threads and checks that the result and
// every count are the same; counts are asserted exactly where they follow
// from the algorithm (see find_identical's stage list).
#include "wdedup/detail/identity.hpp"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include "support/no_access.hpp"
#include "support/pattern.hpp"

namespace {

using wdedup::AlwaysCollideHash;
using wdedup::ByteSpan;
using wdedup::Xxh3Hash;
using wdedup::detail::find_identical;
using wdedup::detail::IdentityOptions;
using wdedup::detail::IdentityStats;
using Bytes = std::vector<std::uint8_t>;
using wdedup_test::NoAccess;
using wdedup_test::pattern;
using wdedup_test::spans_of;
/// Bytes of the prefix fingerprint, hashed for every input of a size class
/// with three or more distinct buffers.
constexpr std::size_t kPrefix = wdedup::detail::identity::kPrefixBytes;

struct Run {
  std::vector<std::uint32_t> result;
  IdentityStats stats;
};

void check_same_counts(const IdentityStats& a, const IdentityStats& b) {
  CHECK(a.inputs == b.inputs);
  CHECK(a.bytes_in == b.bytes_in);
  CHECK(a.skipped_empty == b.skipped_empty);
  CHECK(a.skipped_unique_size == b.skipped_unique_size);
  CHECK(a.skipped_same_pointer == b.skipped_same_pointer);
  CHECK(a.matched_hint == b.matched_hint);
  CHECK(a.compared_directly == b.compared_directly);
  CHECK(a.hashed == b.hashed);
  CHECK(a.bytes_hashed == b.bytes_hashed);
  CHECK(a.byte_comparisons == b.byte_comparisons);
  CHECK(a.bytes_compared == b.bytes_compared);
  CHECK(a.hash_collisions == b.hash_collisions);
}

/// Runs with 1, 2 and 8 threads; all must agree. Returns the 1-thread run.
/// `hints` as find_identical takes them: empty, or one per input.
template <class Hash = Xxh3Hash>
Run run(const std::vector<ByteSpan>& in, std::size_t block_size = 0, const Hash& hash = Hash{},
        const std::vector<std::uint32_t>& hints = {}) {
  Run first;
  for (unsigned threads : {1u, 2u, 8u}) {
    IdentityOptions opts;
    opts.threads = threads;
    opts.block_size = block_size;
    Run r;
    r.result = find_identical(in, hints, hash, opts, &r.stats);
    if (threads == 1) {
      first = r;
      continue;
    }
    INFO("threads = " << threads);
    CHECK(r.result == first.result);
    check_same_counts(r.stats, first.stats);
  }
  return first;
}

/// The reference: smallest j with equal bytes, by memcmp of all pairs.
std::vector<std::uint32_t> brute_force(const std::vector<ByteSpan>& in) {
  std::vector<std::uint32_t> r(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    r[i] = static_cast<std::uint32_t>(i);
    for (std::size_t j = 0; j < i; ++j) {
      if (in[j].size() == in[i].size() &&
          (in[i].size() == 0 || std::memcmp(in[j].data(), in[i].data(), in[i].size()) == 0)) {
        r[i] = static_cast<std::uint32_t>(j);
        break;
      }
    }
  }
  return r;
}

}  // namespace

TEST_CASE("identity: no inputs") {
  const Run r = run({});
  CHECK(r.result.empty());
  CHECK(r.stats.inputs == 0);
  CHECK(r.stats.bytes_in == 0);
  CHECK(r.stats.byte_comparisons == 0);
  CHECK(r.stats.bytes_hashed == 0);
}

TEST_CASE("identity: unique sizes are never read") {
  NoAccess mem(1 << 16);
  const std::vector<ByteSpan> in{{mem.p, 10}, {mem.p + 100, 20}, {mem.p + 200, 30}, {mem.p, 40}, {mem.p, 11}};
  const Run r = run(in);
  CHECK(r.result == std::vector<std::uint32_t>{0, 1, 2, 3, 4});
  CHECK(r.stats.inputs == 5);
  CHECK(r.stats.bytes_in == 111);
  CHECK(r.stats.skipped_unique_size == 5);
  CHECK(r.stats.skipped_empty == 0);
  CHECK(r.stats.skipped_same_pointer == 0);
  CHECK(r.stats.hashed == 0);
  CHECK(r.stats.bytes_hashed == 0);
  CHECK(r.stats.byte_comparisons == 0);
  CHECK(r.stats.compared_directly == 0);
}

TEST_CASE("identity: same pointer and size is equal without reading") {
  NoAccess mem(1 << 16);
  // Size 4096: three inputs, one distinct pointer; size 100: one input.
  const std::vector<ByteSpan> in{{mem.p, 4096}, {mem.p, 4096}, {mem.p, 100}, {mem.p, 4096}};
  const Run r = run(in);
  CHECK(r.result == std::vector<std::uint32_t>{0, 0, 2, 0});
  CHECK(r.stats.skipped_same_pointer == 2);
  CHECK(r.stats.skipped_unique_size == 2);
  CHECK(r.stats.byte_comparisons == 0);
  CHECK(r.stats.bytes_hashed == 0);
}

TEST_CASE("identity: same pointers among distinct buffers") {
  const std::vector<Bytes> bufs{pattern(50, 1), pattern(50, 2), pattern(50, 1)};
  SUBCASE("different bytes, pointers out of order") {
    // Addresses B, A, B, A: not monotonic, so the pointer map is used.
    const std::vector<ByteSpan> in{{bufs[1].data(), 50}, {bufs[0].data(), 50}, {bufs[1].data(), 50},
                                   {bufs[0].data(), 50}};
    const Run r = run(in);
    CHECK(r.result == std::vector<std::uint32_t>{0, 1, 0, 1});
    CHECK(r.stats.skipped_same_pointer == 2);
    CHECK(r.stats.compared_directly == 2);
    CHECK(r.stats.byte_comparisons == 1);
    CHECK(r.stats.bytes_compared == 50);
    CHECK(r.stats.hashed == 0);
  }
  SUBCASE("overlapping views a byte apart are other pointers, out of order") {
    // Views of one buffer at offsets 1, 0, 2, 1: only the last is a same
    // pointer (input 0's); the others start a byte apart, hold other bytes,
    // and must be compared, never taken for one pointer.
    const std::uint8_t* b = bufs[0].data();
    const std::vector<ByteSpan> in{{b + 1, 40}, {b, 40}, {b + 2, 40}, {b + 1, 40}};
    const Run r = run(in);
    CHECK(r.result == std::vector<std::uint32_t>{0, 1, 2, 0});
    CHECK(r.result == brute_force(in));
    CHECK(r.stats.skipped_same_pointer == 1);
  }
  SUBCASE("equal bytes") {
    const std::vector<ByteSpan> in{{bufs[0].data(), 50}, {bufs[2].data(), 50}, {bufs[0].data(), 50}};
    const Run r = run(in);
    CHECK(r.result == std::vector<std::uint32_t>{0, 0, 0});
    CHECK(r.stats.skipped_same_pointer == 1);
    CHECK(r.stats.compared_directly == 2);
    CHECK(r.stats.byte_comparisons == 1);
  }
}

TEST_CASE("identity: zero-size inputs are equal to each other, never read") {
  NoAccess mem(1 << 16);
  const std::vector<ByteSpan> in{{mem.p, 0}, {mem.p + 64, 3}, {nullptr, 0}, {mem.p + 128, 0}};
  const Run r = run(in);
  CHECK(r.result == std::vector<std::uint32_t>{0, 1, 0, 0});
  CHECK(r.stats.skipped_empty == 3);
  CHECK(r.stats.skipped_unique_size == 1);
  CHECK(r.stats.bytes_in == 3);
  CHECK(r.stats.byte_comparisons == 0);
}

TEST_CASE("identity: pairs are compared directly") {
  const Bytes a = pattern(1000, 7);
  for (std::size_t at : {std::size_t{999}, std::size_t{0}, std::size_t{500}}) {
    INFO("difference at byte " << at);
    Bytes b = a;
    b[at] ^= 0x40;
    const Bytes same = a;
    const Run r = run({ByteSpan(a.data(), a.size()), ByteSpan(b.data(), b.size()), ByteSpan(same.data(), same.size())});
    // Three of one size are fingerprinted (kPrefix bytes each). A difference
    // in the prefix leaves a pair {a, same}; otherwise the three form a group:
    // b is compared with the leader a, fails, and is hashed.
    CHECK(r.result == std::vector<std::uint32_t>{0, 1, 0});
    CHECK(r.stats.hashed == 3);
    if (at < kPrefix) {
      CHECK(r.stats.bytes_hashed == 3 * kPrefix);
      CHECK(r.stats.byte_comparisons == 1);
      CHECK(r.stats.compared_directly == 2);
    } else {
      CHECK(r.stats.bytes_hashed == 3 * kPrefix + 1000);
      CHECK(r.stats.byte_comparisons == 2);
      CHECK(r.stats.bytes_compared == 2000);
      CHECK(r.stats.compared_directly == 0);
    }
    CHECK(r.stats.hash_collisions == 0);
    const Run p = run({ByteSpan(a.data(), a.size()), ByteSpan(b.data(), b.size())});
    CHECK(p.result == std::vector<std::uint32_t>{0, 1});
    CHECK(p.stats.compared_directly == 2);
    CHECK(p.stats.hashed == 0);
    CHECK(p.stats.bytes_hashed == 0);
    CHECK(p.stats.byte_comparisons == 1);
    CHECK(p.stats.bytes_compared == 1000);
  }
  const Bytes c = a;
  const Run e = run({ByteSpan(a.data(), a.size()), ByteSpan(c.data(), c.size())});
  CHECK(e.result == std::vector<std::uint32_t>{0, 0});
  CHECK(e.stats.compared_directly == 2);
  CHECK(e.stats.byte_comparisons == 1);
  CHECK(e.stats.bytes_compared == 1000);
}

TEST_CASE("identity: groups of three or more") {
  SUBCASE("distinct prefixes: the fingerprint splits the class") {
    const Bytes a = pattern(512, 1), b = pattern(512, 2), c = pattern(512, 3), d = pattern(512, 4);
    const Bytes a2 = a, a3 = a, b2 = b;
    const std::vector<ByteSpan> in{{a.data(), 512}, {b.data(), 512},  {a2.data(), 512}, {c.data(), 512},
                                   {b2.data(), 512}, {a3.data(), 512}, {d.data(), 512}};
    const Run r = run(in);
    CHECK(r.result == std::vector<std::uint32_t>{0, 1, 0, 3, 1, 0, 6});
    CHECK(r.stats.hashed == 7);
    CHECK(r.stats.bytes_hashed == 7 * kPrefix);
    CHECK(r.stats.byte_comparisons == 3);  // a vs a2, a vs a3; b vs b2
    CHECK(r.stats.bytes_compared == 3 * 512);
    CHECK(r.stats.compared_directly == 5);
    CHECK(r.stats.hash_collisions == 0);
  }
  SUBCASE("shared prefix: members that leave the leader are hashed") {
    const Bytes base = pattern(1024, 9);
    std::vector<Bytes> v(3, base);
    v[1][600] ^= 1;
    v[2][600] ^= 2;
    const std::vector<Bytes> bufs{v[0], v[1], v[0], v[2], v[1], v[0]};  // A B A C B A
    const std::vector<ByteSpan> in = spans_of(bufs);
    const Run r = run(in);
    CHECK(r.result == std::vector<std::uint32_t>{0, 1, 0, 3, 1, 0});
    // Leader A meets the 5 others; B, C, B are hashed; the second B is
    // confirmed against the first.
    CHECK(r.stats.byte_comparisons == 6);
    CHECK(r.stats.bytes_compared == 6 * 1024);
    CHECK(r.stats.bytes_hashed == 6 * kPrefix + 3 * 1024);
    CHECK(r.stats.hash_collisions == 0);
    CHECK(r.stats.compared_directly == 0);
    CHECK(r.stats.hashed == 6);

    const Run c = run(in, 0, AlwaysCollideHash{});
    CHECK(c.result == r.result);
    CHECK(c.stats.byte_comparisons == 7);  // C also tried against B
    CHECK(c.stats.hash_collisions == 1);
    CHECK(c.stats.bytes_hashed == 6 * kPrefix + 3 * 1024);
  }
}

TEST_CASE("identity: a class of three or more in blocks past kRunMaxBytes is compared one member at a time") {
  // Blocks of 128 KiB (IdentityOptions::block_size), past the 64 KiB up to
  // which members are compared in runs: each member meets the leader alone.
  // A B A C B A, 200 KiB each: B and C differ from A at byte 600 (its
  // first block), B2 from B nowhere; the A class reads on into the second
  // block (72 KiB).
  constexpr std::size_t kSize = 200 * 1024, kBlock = 128 * 1024;
  static_assert(kBlock > wdedup::detail::identity::kRunMaxBytes, "the test needs blocks past the runs' limit");
  const Bytes base = pattern(kSize, 11);
  std::vector<Bytes> v(3, base);
  v[1][600] ^= 1;
  v[2][600] ^= 2;
  const std::vector<Bytes> bufs{v[0], v[1], v[0], v[2], v[1], v[0]};
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Run r = run(in, kBlock);
  CHECK(r.result == std::vector<std::uint32_t>{0, 1, 0, 3, 1, 0});
  CHECK(r.result == brute_force(in));
  // First block: the leader A meets the five others (5), B, C and B leave
  // and are hashed, the second B is confirmed against the first (1).
  // Second block, 72 KiB: A meets its two (2); B's pair in one memcmp (1).
  CHECK(r.stats.byte_comparisons == 9);
  CHECK(r.stats.bytes_compared == 6 * kBlock + 3 * (kSize - kBlock));
  CHECK(r.stats.hashed == 6);
  CHECK(r.stats.bytes_hashed == 6 * kPrefix + 3 * kBlock);
  CHECK(r.stats.compared_directly == 0);
  CHECK(r.stats.hash_collisions == 0);
  const Run c = run(in, kBlock, AlwaysCollideHash{});
  CHECK(c.result == r.result);
  CHECK(c.stats.hash_collisions == 1);  // C tried against B
}

TEST_CASE("identity: a constant hash never merges different bytes") {
  SUBCASE("all distinct") {
    std::vector<Bytes> bufs;
    for (std::uint64_t i = 0; i < 20; ++i) bufs.push_back(pattern(300, 100 + i));
    const Run r = run(spans_of(bufs), 0, AlwaysCollideHash{});
    std::vector<std::uint32_t> identity(20);
    for (std::uint32_t i = 0; i < 20; ++i) identity[i] = i;
    CHECK(r.result == identity);
    // 19 comparisons with the leader, then member j of the other 19 is tried
    // against the j distinct contents before it: 19 * 18 / 2.
    CHECK(r.stats.byte_comparisons == 19 + 171);
    CHECK(r.stats.hash_collisions == 171);
    CHECK(r.stats.bytes_compared == 190 * 300);
    CHECK(r.stats.bytes_hashed == 20 * kPrefix + 19 * 300);
    CHECK(r.stats.compared_directly == 0);
  }
  SUBCASE("with duplicates") {
    const Bytes a = pattern(300, 1), b = pattern(300, 2), c = pattern(300, 3), d = pattern(300, 4);
    const std::vector<Bytes> bufs{a, b, a, c, b, a, d, c, a, b};
    const std::vector<std::uint32_t> want{0, 1, 0, 3, 1, 0, 6, 3, 0, 1};
    const Run r = run(spans_of(bufs), 0, AlwaysCollideHash{});
    CHECK(r.result == want);
    // Leader: 9. Then B: 0, C: 1, B: 1, D: 2, C: 2, B: 1 -> 7, of which
    // C~B, D~B, D~C, C~B are collisions.
    CHECK(r.stats.byte_comparisons == 16);
    CHECK(r.stats.hash_collisions == 4);
    CHECK(r.stats.bytes_hashed == 10 * kPrefix + 6 * 300);
    // A real hash: the prefix splits A{4} B{3} C{2} D{1}; 3 + 2 + 1 memcmp.
    const Run x = run(spans_of(bufs));
    CHECK(x.result == want);
    CHECK(x.stats.byte_comparisons == 6);
    CHECK(x.stats.hash_collisions == 0);
    CHECK(x.stats.compared_directly == 9);
    CHECK(x.stats.bytes_hashed == 10 * kPrefix);
  }
}

TEST_CASE("identity: a hash that gives two sizes one key never merges across them") {
  // Keys mix each input's size class in (kClassSalt), so two sizes share a
  // key only by chance; this hash makes them always share: its fingerprint
  // of an input of size n cancels n's class term (classes are numbered in
  // order of first appearance: 10 bytes class 0, 20 bytes class 1). A
  // grouping that trusted the key would put 20-byte inputs in a 10-byte
  // leader's group and compare only its 10 bytes: d starts with a's.
  struct CancelClassHash {
    std::uint64_t operator()(const void*, std::size_t n, std::uint64_t) const noexcept {
      return wdedup::detail::mix64((n == 10 ? 0 : 1) + wdedup::detail::identity::kClassSalt);
    }
  };
  const Bytes a = pattern(10, 1), b = pattern(10, 2), c = pattern(10, 3), e = pattern(20, 5), f = pattern(20, 6);
  Bytes d = pattern(20, 4);
  std::copy(a.begin(), a.end(), d.begin());
  // Three of each size (a fingerprinted class), and one copy in each.
  const std::vector<Bytes> bufs{a, b, c, d, e, f, b, e};
  const std::vector<ByteSpan> in = spans_of(bufs);
  const std::vector<std::uint32_t> want{0, 1, 2, 3, 4, 5, 1, 4};
  REQUIRE(brute_force(in) == want);
  CHECK(run(in, 0, CancelClassHash{}).result == want);
}

TEST_CASE("identity: members proven unique stop being read") {
  // Two pages per input; the second is unreadable. The first block (one
  // page) tells the inputs apart, so the second is never touched.
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::uint8_t* p = static_cast<std::uint8_t*>(
      mmap(nullptr, 6 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(p != MAP_FAILED);
  std::vector<ByteSpan> in;
  for (std::size_t i = 0; i < 3; ++i) {
    std::uint8_t* q = p + 2 * i * page;
    const Bytes b = pattern(page, 50 + i);
    std::memcpy(q, b.data(), page);
    std::memset(q, 0xab, 1024);  // same first KiB: same fingerprint
    REQUIRE(mprotect(q + page, page, PROT_NONE) == 0);
    in.emplace_back(q, 2 * page);
  }
  const Run r = run(in, page);
  CHECK(r.result == std::vector<std::uint32_t>{0, 1, 2});
  CHECK(r.stats.byte_comparisons == 2);
  CHECK(r.stats.bytes_hashed == 3 * kPrefix + 2 * page);
  const Run c = run(in, page, AlwaysCollideHash{});
  CHECK(c.result == std::vector<std::uint32_t>{0, 1, 2});
  CHECK(c.stats.byte_comparisons == 3);
  CHECK(c.stats.hash_collisions == 1);
  munmap(p, 6 * page);
}

TEST_CASE("identity: inputs split into ranges") {
  // block 4096: a pair's ranges are 128 blocks (512 KiB), a triple's 85.
  constexpr std::size_t kBlock = 4096;
  constexpr std::size_t kSize = (3u << 20) + 5;  // head 4096 + 6 pair ranges
  const Bytes a = pattern(kSize, 11);
  SUBCASE("pair") {
    const Bytes same = a;
    const Run e = run({ByteSpan(a.data(), kSize), ByteSpan(same.data(), kSize)}, kBlock);
    CHECK(e.result == std::vector<std::uint32_t>{0, 0});
    CHECK(e.stats.byte_comparisons == 7);
    CHECK(e.stats.bytes_compared == kSize);
    for (std::size_t at : {kSize - 1, std::size_t{5000}}) {
      INFO("difference at " << at);
      Bytes b = a;
      b[at] ^= 1;
      const Run r = run({ByteSpan(a.data(), kSize), ByteSpan(b.data(), kSize)}, kBlock);
      CHECK(r.result == std::vector<std::uint32_t>{0, 1});
      CHECK(r.stats.byte_comparisons == 7);  // ranges are independent work items
      CHECK(r.stats.bytes_compared == kSize);
      CHECK(r.stats.compared_directly == 2);
    }
    Bytes b = a;
    b[10] ^= 1;
    const Run r = run({ByteSpan(a.data(), kSize), ByteSpan(b.data(), kSize)}, kBlock);
    CHECK(r.result == std::vector<std::uint32_t>{0, 1});
    CHECK(r.stats.byte_comparisons == 1);  // settled by the first block
    CHECK(r.stats.bytes_compared == kBlock);
  }
  SUBCASE("triple, difference only in the last range") {
    const Bytes a2 = a;
    Bytes c = a;
    c[kSize - 1] ^= 1;
    const Run r = run({ByteSpan(a.data(), kSize), ByteSpan(a2.data(), kSize), ByteSpan(c.data(), kSize)}, kBlock);
    CHECK(r.result == std::vector<std::uint32_t>{0, 0, 2});
    // Head: 2. Body: 9 ranges of 85 blocks and one of 3 (4096, 4096, 5),
    // two comparisons per block with the leader.
    CHECK(r.stats.byte_comparisons == 2 + 9 * 85 * 2 + 3 * 2);
    CHECK(r.stats.bytes_hashed == 3 * kPrefix + 5);  // only c's last 5-byte block
    CHECK(r.stats.hash_collisions == 0);
  }
  SUBCASE("triple, difference only in the first block") {
    const Bytes a2 = a;
    Bytes c = a;
    c[300] ^= 1;
    const Run r = run({ByteSpan(a.data(), kSize), ByteSpan(a2.data(), kSize), ByteSpan(c.data(), kSize)}, kBlock);
    CHECK(r.result == std::vector<std::uint32_t>{0, 0, 2});
    CHECK(r.stats.byte_comparisons == 2 + 6);  // then a, a2 are a pair
    CHECK(r.stats.bytes_hashed == 3 * kPrefix + kBlock);
  }
  SUBCASE("default options: ranges of 8 MiB") {
    constexpr std::size_t kBig = (64u << 10) + (8u << 20) + 100;
    const Bytes x = pattern(kBig, 12);
    const Bytes y = x;
    Bytes z = x;
    z[kBig - 1] ^= 1;
    const Run e = run({ByteSpan(x.data(), kBig), ByteSpan(y.data(), kBig)});
    CHECK(e.result == std::vector<std::uint32_t>{0, 0});
    CHECK(e.stats.byte_comparisons == 3);
    const Run d = run({ByteSpan(x.data(), kBig), ByteSpan(z.data(), kBig)});
    CHECK(d.result == std::vector<std::uint32_t>{0, 1});
    CHECK(d.stats.byte_comparisons == 3);
  }
}

TEST_CASE("identity: big groups are split into member chunks and merged") {
  // 200 inputs of 512 bytes sharing their first 300 bytes: one candidate
  // group; with block 512 its first block is done in 4 chunks of 50.
  std::vector<Bytes> templates;
  for (int t = 0; t < 5; ++t) {
    Bytes b = pattern(512, 1);
    b[300] = static_cast<std::uint8_t>(t);
    b[511] = static_cast<std::uint8_t>(t * 7);
    templates.push_back(b);
  }
  std::mt19937 rng(3);
  std::vector<Bytes> bufs;
  for (int i = 0; i < 200; ++i) bufs.push_back(templates[rng() % 5]);
  const std::vector<ByteSpan> in = spans_of(bufs);
  const std::vector<std::uint32_t> want = brute_force(in);
  const Run r = run(in, 512);
  CHECK(r.result == want);
  CHECK(r.stats.hash_collisions == 0);
  const Run c = run(in, 512, AlwaysCollideHash{});
  CHECK(c.result == want);
  CHECK(c.stats.hash_collisions > 0);
}

namespace {
/// The chunk tests' check: `in`, 200 inputs of 512 bytes whose input i has
/// the content first seen at input i mod `contents`, is grouped as brute
/// force groups it, under Xxh3Hash and under a constant hash (which makes
/// collisions), block 512.
void check_chunk_merge(const std::vector<ByteSpan>& in, std::uint32_t contents) {
  std::vector<std::uint32_t> want(200);
  for (std::uint32_t i = 0; i < 200; ++i) want[i] = i % contents;
  REQUIRE(brute_force(in) == want);
  CHECK(run(in, 512).result == want);
  const Run c = run(in, 512, AlwaysCollideHash{});
  CHECK(c.result == want);
  CHECK(c.stats.hash_collisions > 0);
}
}  // namespace

TEST_CASE("identity: member chunks that merge compare every byte, their first line too") {
  // As above, but the 5 contents differ only at byte 10, inside the first
  // line: a merge of chunks that took the first line as settled (it was
  // fingerprinted) would make one group of all 200.
  std::vector<Bytes> templates;
  for (int t = 0; t < 5; ++t) {
    Bytes b = pattern(512, 9);
    b[10] = static_cast<std::uint8_t>(t);
    templates.push_back(b);
  }
  std::vector<Bytes> bufs;
  for (int i = 0; i < 200; ++i) bufs.push_back(templates[static_cast<std::size_t>(i * 7 % 5)]);
  const std::vector<ByteSpan> in = spans_of(bufs);
  // Input i has template 7i mod 5, first seen at input i mod 5.
  check_chunk_merge(in, 5);
}

TEST_CASE("identity: member chunks that merge compare every byte of the first block, its last one too") {
  // 200 inputs of 512 bytes (block 512: 4 chunks of 50), two contents
  // that differ only in byte 511, the first block's last, taken in turn.
  // Under a constant hash every chunk's representatives meet in one bucket,
  // where only a comparison of all 512 bytes keeps them apart.
  Bytes a = pattern(512, 11), b = a;
  b[511] ^= 0x80;
  std::vector<Bytes> bufs;
  for (int i = 0; i < 200; ++i) bufs.push_back(i % 2 == 0 ? a : b);
  const std::vector<ByteSpan> in = spans_of(bufs);
  check_chunk_merge(in, 2);
}

/// The reference for many inputs: first index of each distinct content.
std::vector<std::uint32_t> by_map(const std::vector<ByteSpan>& in) {
  std::map<Bytes, std::uint32_t> first;
  std::vector<std::uint32_t> r(in.size());
  for (std::size_t i = 0; i < in.size(); ++i)
    r[i] = first.emplace(Bytes(in[i].begin(), in[i].end()), static_cast<std::uint32_t>(i)).first->second;
  return r;
}

TEST_CASE("identity: many small inputs, compared several pairs at a time") {
  // Enough inputs for big bucket and group tables; pairs of one
  // size go through the prefetching comparison runs, with planted
  // differences at both ends, at a 64-byte step and in the unaligned tail.
  std::mt19937_64 rng(7);
  const std::size_t sizes[] = {96, 100, 4096};
  const std::size_t flips[] = {0, 63, 64, 95, 99, 511, 512, 4095};
  std::vector<Bytes> bufs;
  for (int i = 0; i < 40000; ++i) {
    const std::size_t size = sizes[rng() % 3];
    if (i % 2 == 1 && bufs.back().size() == size) {  // a copy, sometimes altered
      Bytes b = bufs.back();
      const std::size_t at = flips[rng() % std::size(flips)];
      if (rng() % 4 == 0 && at < size) b[at] ^= 0x10;
      bufs.push_back(std::move(b));
    } else {
      bufs.push_back(pattern(size, rng()));
    }
  }
  // Move the copies far from their originals, as methods' buffers are.
  std::shuffle(bufs.begin() + 20000, bufs.end(), rng);
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Run r = run(in);
  CHECK(r.result == by_map(in));
  CHECK(r.stats.hash_collisions == 0);
}

TEST_CASE("identity: a group that splits only past its first block is not counted as compared directly") {
  // Three inputs of 256 bytes in blocks of 64: one fingerprint, and all
  // equal to the leader over the first block (nothing hashed there). The
  // third differs at byte 200, which the rest of the bytes (one range of
  // three blocks) finds: it is hashed there, so the group is not one whose
  // members all equal their first.
  const Bytes a = pattern(256, 21), a2 = a;
  Bytes c = a;
  c[200] ^= 1;
  const std::vector<ByteSpan> in{{a.data(), 256}, {a2.data(), 256}, {c.data(), 256}};
  const Run r = run(in, 64);
  CHECK(r.result == std::vector<std::uint32_t>{0, 0, 2});
  CHECK(r.stats.hashed == 3);
  CHECK(r.stats.compared_directly == 0);
  CHECK(r.stats.bytes_hashed == 3 * kPrefix + 64);  // the fingerprints, then c's block [192, 256)
  CHECK(r.stats.byte_comparisons == 2 + 3 * 2);     // the first block, then three more, each a2 and c
  CHECK(r.stats.hash_collisions == 0);
  // Without the difference: nothing hashed past the fingerprints, and the
  // group is compared directly.
  const Bytes a3 = a;
  const Run e = run({{a.data(), 256}, {a2.data(), 256}, {a3.data(), 256}}, 64);
  CHECK(e.result == std::vector<std::uint32_t>{0, 0, 0});
  CHECK(e.stats.compared_directly == 3);
  CHECK(e.stats.bytes_hashed == 3 * kPrefix);
}

TEST_CASE("identity: distinct inputs that differ only near their end") {
  // 300 inputs of 4 KiB, equal but for 8 bytes just before the last KiB:
  // every byte up to there must be compared. block 256: the first block is
  // done in 5 chunks of 60, merged; the class of 300 is then swept: each
  // member against the leader block by block up to its first difference.
  constexpr std::size_t kSize = 4096, kBlock = 256, kN = 300;
  const Bytes base = pattern(kSize, 77);
  std::vector<Bytes> bufs(kN, base);
  for (std::size_t i = 0; i < kN; ++i) {
    const std::uint64_t tag = ~std::uint64_t{i};
    std::memcpy(bufs[i].data() + kSize - 1024 - 8, &tag, 8);
  }
  const Run r = run(spans_of(bufs), kBlock);
  std::vector<std::uint32_t> identity(kN);
  for (std::uint32_t i = 0; i < kN; ++i) identity[i] = i;
  CHECK(r.result == identity);
  // Chunks: 5 x 59 with their leaders, then 4 merges; the sweep: 299
  // members, blocks 1 to 11 (the tag is in block 11), then nothing more:
  // every member's first difference hashed differently.
  CHECK(r.stats.byte_comparisons == 5 * 59 + 4 + 11 * 299);
  // Fingerprints, the 5 chunk leaders' first blocks (for the merge), and
  // the block with the tag of everyone but the first.
  CHECK(r.stats.bytes_hashed == kN * kPrefix + 5 * kBlock + (kN - 1) * kBlock);
  CHECK(r.stats.hash_collisions == 0);
  CHECK(r.stats.compared_directly == 0);
  const Run c = run(spans_of(bufs), kBlock, AlwaysCollideHash{});
  CHECK(c.result == identity);
  CHECK(c.stats.hash_collisions == 298 * 299 / 2);
}

TEST_CASE("identity: a swept class is compared in steps smaller than its blocks") {
  // 300 inputs of 99,304 bytes (block 16 KiB: the class of 300 is swept in
  // steps of 2 KiB, identity::kSweepStep, the last one 1,000 bytes), equal
  // to the leader but where planted. By i % 3 == 1 (100 members): byte
  // 20,000 changed alike, so they leave the leader in the sweep's second
  // step, [18432, 20480); those with i % 6 == 1 also differ at byte 90,000,
  // which only reading on (in 16 KiB blocks from 20,480) finds. 2 and 5:
  // the last byte changed alike, found in the last, partial step.
  constexpr std::size_t kSize = 99304, kBlock = 16384, kN = 300;
  static_assert(wdedup::detail::identity::kSweepStep == 2048, "the counts below assume 2 KiB steps");
  const Bytes base = pattern(kSize, 13);
  std::vector<Bytes> bufs(kN, base);
  for (std::size_t i = 0; i < kN; ++i) {
    if (i % 3 != 1) continue;
    bufs[i][20000] ^= 0xA1;
    if (i % 6 == 1) bufs[i][90000] ^= 0x5C;
  }
  for (std::size_t i : {2u, 5u}) bufs[i][kSize - 1] ^= 0x33;
  const std::vector<ByteSpan> in = spans_of(bufs);
  std::vector<std::uint32_t> want(kN, 0);
  for (std::uint32_t i = 0; i < kN; ++i)
    if (i % 3 == 1) want[i] = i % 6 == 1 ? 1 : 4;
  want[2] = want[5] = 2;
  CHECK(want == brute_force(in));
  const Run r = run(in, kBlock);
  CHECK(r.result == want);
  // Comparisons: the first block in 5 chunks of 60 (59 each) and 4 merges;
  // the sweep's 41 steps, [16384, 99304): 197 members equal to the leader
  // to the end and 2 and 5 take all 41, the 100 others 2; the merge
  // confirms 99 of those 100 and 5 against 2; reading on, 99 members in
  // each of 5 blocks, and 49 of the 50 that leave in the last confirmed.
  CHECK(r.stats.byte_comparisons == (5 * 59 + 4) + (199 * 41 + 100 * 2) + (99 + 1) + (5 * 99 + 49));
  // Hashed: fingerprints, the chunk leaders' first blocks, the first-
  // difference steps (100 of 2 KiB, 2 of 1,000 bytes), and the 50 that
  // leave in the last block read on, [86016, 99304).
  CHECK(r.stats.bytes_hashed == kN * kPrefix + 5 * kBlock + 100 * 2048 + 2 * 1000 + 50 * 13288);
  CHECK(r.stats.hash_collisions == 0);
  const Run c = run(in, kBlock, AlwaysCollideHash{});
  CHECK(c.result == want);
}

TEST_CASE("identity: a class of kItemBlocks (256) members is refined block by block; one of 257 is swept") {
  // Equal inputs of 8 KiB, block 4 KiB. The first block: chunks of at
  // most 64 members, each compared with its chunk's first, then the
  // chunks' firsts with the first chunk's (256: 4 chunks, 252 + 3
  // comparisons; 257: 5 chunks, 252 + 4). The second block: 256 members
  // are one (class, range) item, each compared with the leader once over
  // 4 KiB (255); 257 are swept, each against the leader in two 2 KiB steps
  // (2 x 256).
  CHECK(wdedup::detail::identity::kItemBlocks == 256);
  const Bytes a = pattern(8192, 31);
  for (const std::size_t k : {std::size_t{256}, std::size_t{257}}) {
    CAPTURE(k);
    const std::vector<Bytes> bufs(k, a);
    const Run r = run(spans_of(bufs), 4096);
    CHECK(r.result == std::vector<std::uint32_t>(k, 0));
    CHECK(r.stats.hashed == k);
    CHECK(r.stats.byte_comparisons == (k == 256 ? 255u + 255u : 256u + 2 * 256u));
    CHECK(r.stats.bytes_compared == (k == 256 ? 510u * 4096 : 256u * 4096 + 512u * 2048));
  }
}

TEST_CASE("identity: swept classes, randomized against brute force") {
  // Classes of 280 inputs of 20,000 bytes, all equal over their first
  // 8,192 bytes, so with blocks of 2,048 to 8,192 bytes the class of 280
  // (more than kItemBlocks) is swept, in steps equal to the block or
  // smaller (2 KiB), starting on or off a multiple of 2 KiB (block 3,000).
  // Members are the base or a copy of an earlier member (families), either
  // with up to two bytes changed: at a step's first or last byte (steps
  // start at multiples of 2,048, or at 3,000 + 2,048 k), in the last
  // partial step, or anywhere after the first 8,192 bytes.
  std::mt19937_64 rng(20261129);
  constexpr std::size_t kSize = 20000, kN = 280, kShared = 8192;
  for (int round = 0; round < 4; ++round) {
    INFO("round " << round);
    const Bytes base = pattern(kSize, 300 + static_cast<std::uint64_t>(round));
    std::vector<Bytes> bufs;
    bufs.reserve(kN);
    auto below = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    for (std::size_t i = 0; i < kN; ++i) {
      Bytes b = i > 0 && below(2) != 0 ? bufs[below(i)] : base;
      for (std::size_t flips = below(3); flips > 0; --flips) {
        std::size_t at = 0;
        switch (below(4)) {
          case 0: at = 2048 * (4 + below(6)); break;  // a step's first byte, 8192 to 18432
          case 1: at = 3000 + 2048 * (3 + below(6)); break;  // 9144 to 19384
          case 2: at = kSize - 1 - below(kSize % 2048); break;  // the last partial step
          default: at = kShared + below(kSize - kShared); break;
        }
        if (below(2) != 0 && at > kShared) --at;  // or the step's last byte before it
        REQUIRE(at < kSize);
        b[at] ^= static_cast<std::uint8_t>(1 + below(255));
      }
      bufs.push_back(std::move(b));
    }
    // Every member stays in the class: equal to the first over kShared bytes.
    std::size_t same_head = 0;
    for (const Bytes& b : bufs) same_head += std::memcmp(b.data(), base.data(), kShared) == 0;
    REQUIRE(same_head == kN);
    const std::vector<ByteSpan> in = spans_of(bufs);
    const std::vector<std::uint32_t> want = brute_force(in);
    for (std::size_t block : {std::size_t{2048}, std::size_t{3000}, std::size_t{4096}, std::size_t{8192}}) {
      INFO("block " << block);
      CHECK(run(in, block).result == want);
      CHECK(run(in, block, AlwaysCollideHash{}).result == want);
    }
  }
}

TEST_CASE("identity: block_size below a cache line is raised to 64") {
  std::vector<Bytes> bufs{pattern(1000, 1), pattern(1000, 1), pattern(1000, 2)};
  bufs[1][999] ^= 1;
  const Run tiny = run(spans_of(bufs), 1);
  const Run line = run(spans_of(bufs), 64);
  CHECK(tiny.result == line.result);
  check_same_counts(tiny.stats, line.stats);
}

constexpr std::uint32_t kNoHint = 0xffffffffu;

TEST_CASE("identity: an input equal to its hint is settled by that comparison alone") {
  // Sizes 256 (a, b, and a copy of each) and 100 (c, alone): a's and b's
  // copies hint at them. Matched, the copies leave their size class, so a
  // and b are a pair (no fingerprint) and c is unique by size.
  const Bytes a = pattern(256, 1), b = pattern(256, 2), c = pattern(100, 3), a2 = a, b2 = b;
  const std::vector<ByteSpan> in{{a.data(), 256}, {b.data(), 256}, {c.data(), 100}, {b2.data(), 256},
                                 {a2.data(), 256}};
  const std::vector<std::uint32_t> hints{kNoHint, kNoHint, kNoHint, 1, 0};
  const Run r = run(in, 0, Xxh3Hash{}, hints);
  CHECK(r.result == std::vector<std::uint32_t>{0, 1, 2, 1, 0});
  CHECK(r.stats.matched_hint == 2);
  CHECK(r.stats.skipped_unique_size == 1);
  CHECK(r.stats.compared_directly == 2);
  CHECK(r.stats.hashed == 0);
  CHECK(r.stats.bytes_hashed == 0);
  CHECK(r.stats.byte_comparisons == 2 + 1);  // two hints, then the pair {a, b}
  CHECK(r.stats.bytes_compared == 3 * 256);
  // Without hints, the four of size 256 are fingerprinted instead.
  const Run plain = run(in);
  CHECK(plain.result == r.result);
  CHECK(plain.stats.matched_hint == 0);
  CHECK(plain.stats.hashed == 4);
}

TEST_CASE("identity: a hint that fails or cannot apply changes nothing") {
  NoAccess mem(1 << 16);
  const Bytes a = pattern(300, 4), a2 = a, d = pattern(300, 5);
  Bytes near = a;
  near[299] ^= 1;  // differs in its last byte only
  const Bytes big = pattern(wdedup::detail::identity::kRunMaxBytes + 1, 6), big2 = big;
  // 0 a, 1 near (hint 0: compared, differs), 2 d (hint 9: a later input),
  // 3 the same pointer as a (hint 0: an alias already, not compared),
  // 4 a2 (hint 3: an alias, skipped; found by the engine), 5 an empty input
  // (hint 0), 6 never-readable memory of size 7 (hint 0: another size, not
  // read), 7 and 8 two equal inputs above kRunMaxBytes (8 hints at 7: too
  // big to be tried), 9 a2 again in its own memory (hint 9: itself).
  const Bytes a3 = a;
  const std::vector<ByteSpan> in{{a.data(), 300},  {near.data(), 300}, {d.data(), 300},
                                 {a.data(), 300},  {a2.data(), 300},   {mem.p, 0},
                                 {mem.p, 7},       {big.data(), big.size()}, {big2.data(), big2.size()},
                                 {a3.data(), 300}};
  const std::vector<std::uint32_t> hints{kNoHint, 0, 9, 0, 3, 0, 0, kNoHint, 7, 9};
  const Run r = run(in, 0, Xxh3Hash{}, hints);
  CHECK(r.result == brute_force(in));
  CHECK(r.result == std::vector<std::uint32_t>{0, 1, 2, 0, 0, 5, 6, 7, 7, 0});
  CHECK(r.stats.matched_hint == 0);
  CHECK(r.stats.skipped_same_pointer == 1);
  const Run plain = run(in);
  CHECK(plain.result == r.result);
  // The failed hint is one more comparison, of the 300 bytes it was given.
  CHECK(r.stats.byte_comparisons == plain.stats.byte_comparisons + 1);
  CHECK(r.stats.bytes_compared == plain.stats.bytes_compared + 300);
  CHECK(r.stats.hashed == plain.stats.hashed);
}

TEST_CASE("identity: a pair of an input and the hint it differs from is not compared again") {
  // Eight inputs of 4 KiB, one size class, four pairs by fingerprint, in
  // one run of pairs: 0 a and 1 its copy; 2 b and 3 b but its last byte,
  // hinted at 2 (compared there, differs); 4 c and 5 its copy; 6 d and 7 d
  // but its last byte, without a hint. The failed hint's pair is settled by
  // that comparison; the other three are compared, each labelled as its own
  // group (the run skips b's pair between a's and c's).
  const Bytes a = pattern(4096, 41), b = pattern(4096, 42), c = pattern(4096, 43), d = pattern(4096, 44);
  Bytes b_last = b, d_last = d;
  b_last[4095] ^= 1;
  d_last[4095] ^= 1;
  const std::vector<Bytes> bufs{a, a, b, b_last, c, c, d, d_last};
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Run r = run(in, 0, Xxh3Hash{}, {kNoHint, kNoHint, kNoHint, 2, kNoHint, kNoHint, kNoHint, kNoHint});
  CHECK(r.result == brute_force(in));
  CHECK(r.result == std::vector<std::uint32_t>{0, 0, 2, 3, 4, 4, 6, 7});
  CHECK(r.stats.matched_hint == 0);
  CHECK(r.stats.hashed == 8);
  CHECK(r.stats.compared_directly == 8);
  // b's hint, then a's, c's and d's pairs: b's pair was read twice before.
  CHECK(r.stats.byte_comparisons == 4);
  CHECK(r.stats.bytes_compared == 4 * 4096);
  const Run plain = run(in);
  CHECK(plain.result == r.result);
  CHECK(plain.stats.byte_comparisons == 4);
}

TEST_CASE("identity: a pair whose second member failed another hint is compared") {
  // 0 h, 1 p, 2 p's copy hinted at 0: the hint fails, and 2 then meets 1 in
  // a pair by fingerprint, which the failed hint says nothing about: it is
  // compared, and 2 is 1's (settled unread, it would be a content of its own).
  const Bytes h = pattern(4096, 51), p = pattern(4096, 52);
  const std::vector<Bytes> bufs{h, p, p};
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Run r = run(in, 0, Xxh3Hash{}, {kNoHint, kNoHint, 0});
  CHECK(r.result == std::vector<std::uint32_t>{0, 1, 1});
  CHECK(r.stats.matched_hint == 0);
  CHECK(r.stats.compared_directly == 2);
  CHECK(r.stats.byte_comparisons == 2);
  CHECK(r.stats.bytes_compared == 2 * 4096);
}

TEST_CASE("identity: a pair an early verdict says differs is settled unread") {
  // Two inputs of 4 KiB on never-readable memory, 1 hinted at 0, and the
  // caller's verdict (EarlyVerdicts, as deduplicate() hands over the pairs it
  // compared while checking names) that they differ: a class of two, no
  // fingerprint, and the pair settled by that verdict, counted as one
  // comparison of 4,096 bytes. Compared again, the engine read a page that
  // faults.
  NoAccess mem(4 * 4096);
  const std::vector<ByteSpan> in{{mem.p, 4096}, {mem.p + 2 * 4096, 4096}};
  const std::vector<std::uint32_t> hints{kNoHint, 0};
  const std::vector<std::uint8_t> verdict{wdedup::detail::EarlyVerdicts::kUnknown,
                                          wdedup::detail::EarlyVerdicts::kDiffer};
  wdedup::detail::EarlyVerdicts early;
  early.verdict = wdedup::Span<const std::uint8_t>(verdict.data(), verdict.size());
  for (unsigned threads : {1u, 2u}) {
    CAPTURE(threads);
    IdentityOptions opts;
    opts.threads = threads;
    IdentityStats stats;
    const std::vector<std::uint32_t> result = find_identical(
        in, wdedup::Span<const std::uint32_t>(hints.data(), hints.size()), Xxh3Hash{}, opts, &stats, early);
    CHECK(result == std::vector<std::uint32_t>{0, 1});
    CHECK(stats.compared_directly == 2);
    CHECK(stats.hashed == 0);
    CHECK(stats.byte_comparisons == 1);
    CHECK(stats.bytes_compared == 4096);
  }
}

TEST_CASE("identity: an input of exactly kRunMaxBytes is tried against its hint, one of a byte more is not") {
  // 0 a and 1 its copy (hint 0), 64 KiB each; 2 b and 3 its copy (hint 2),
  // a byte more. The copy of a is settled by its hint and leaves its size
  // class (a lone a: unique by size); b and its copy are a pair of the
  // engine's, compared directly in their first block (64 KiB), then in
  // their last byte.
  constexpr std::size_t kMax = wdedup::detail::identity::kRunMaxBytes;
  const Bytes a = pattern(kMax, 31), a2 = a, b = pattern(kMax + 1, 32), b2 = b;
  const std::vector<ByteSpan> in{{a.data(), kMax}, {a2.data(), kMax}, {b.data(), kMax + 1}, {b2.data(), kMax + 1}};
  const Run r = run(in, 0, Xxh3Hash{}, {kNoHint, 0, kNoHint, 2});
  CHECK(r.result == std::vector<std::uint32_t>{0, 0, 2, 2});
  CHECK(r.stats.matched_hint == 1);
  CHECK(r.stats.skipped_unique_size == 1);
  CHECK(r.stats.compared_directly == 2);
  CHECK(r.stats.hashed == 0);
  CHECK(r.stats.byte_comparisons == 3);
  CHECK(r.stats.bytes_compared == kMax + kMax + 1);
}

TEST_CASE("identity: hints that hint at matched hints") {
  // 0 a, 1 a (hint 0), 2 a (hint 1, itself matched), 3 b, 4 b (hint 3): the
  // results name the first of each content, whatever the chain.
  const Bytes a = pattern(64, 8), b = pattern(64, 9);
  const std::vector<Bytes> bufs{a, a, a, b, b};
  const Run r = run(spans_of(bufs), 0, Xxh3Hash{}, {kNoHint, 0, 1, kNoHint, 3});
  CHECK(r.result == std::vector<std::uint32_t>{0, 0, 0, 3, 3});
  CHECK(r.stats.matched_hint == 3);
  CHECK(r.stats.compared_directly == 2);  // a against b: a pair that differs
  CHECK(r.stats.byte_comparisons == 3 + 1);
  CHECK(r.stats.hashed == 0);
}

TEST_CASE("identity: an input that shares its pointer with a matched hint") {
  // 0 a, 1 a (new memory), 2 a (new memory, hint 1), 3: input 2's pointer
  // again. 2 is settled by its hint (1), and 3 is an alias of 2: both must
  // still name 0, the first input with those bytes, not 1.
  const Bytes a = pattern(64, 8);
  const std::vector<Bytes> bufs{a, a, a};
  std::vector<ByteSpan> in = spans_of(bufs);
  in.push_back(in[2]);
  const Run r = run(in, 0, Xxh3Hash{}, {kNoHint, kNoHint, 1, kNoHint});
  CHECK(r.result == std::vector<std::uint32_t>{0, 0, 0, 0});
  CHECK(r.stats.matched_hint == 1);
  CHECK(r.stats.skipped_same_pointer == 1);
}

TEST_CASE("identity: fingerprints made ahead are used under the seed they were made with, and only then") {
  // Three equal inputs of 100 bytes: a class of three, fingerprinted.
  // Input 0's fingerprint is handed over (EarlyVerdicts::prefix), and the
  // hash counts its calls. Under the seed it was made with (7) it is used:
  // two calls, for inputs 1 and 2. Under seed 0 (each call draws its own)
  // it is not, whatever it holds: three calls, and one class.
  struct CountingHash {
    std::size_t* calls;
    std::uint64_t operator()(const void* p, std::size_t n, std::uint64_t seed) const {
      ++*calls;
      return Xxh3Hash{}(p, n, seed);
    }
  };
  const Bytes a = pattern(100, 21);
  const std::vector<Bytes> bufs{a, a, a};
  const std::vector<ByteSpan> in = spans_of(bufs);
  const std::vector<std::uint8_t> has_prefix{1, 0, 0};
  for (const std::uint64_t seed : {std::uint64_t{7}, std::uint64_t{0}}) {
    CAPTURE(seed);
    const std::vector<std::uint64_t> prefix{
        seed != 0 ? Xxh3Hash{}(a.data(), kPrefix, wdedup::detail::identity::kPrefixSeed ^ seed) : 12345, 0, 0};
    wdedup::detail::EarlyVerdicts early;
    early.has_prefix = wdedup::Span<const std::uint8_t>(has_prefix.data(), has_prefix.size());
    early.prefix = wdedup::Span<const std::uint64_t>(prefix.data(), prefix.size());
    IdentityOptions opts;
    opts.threads = 1;
    opts.seed = seed;
    std::size_t calls = 0;
    IdentityStats stats;
    const std::vector<std::uint32_t> result =
        find_identical(in, wdedup::Span<const std::uint32_t>(), CountingHash{&calls}, opts, &stats, early);
    CHECK(result == std::vector<std::uint32_t>{0, 0, 0});
    CHECK(calls == (seed != 0 ? 2u : 3u));
    CHECK(stats.hashed == 3);
    CHECK(stats.bytes_hashed == 3 * kPrefix);
  }
}

TEST_CASE("identity: randomized against brute force") {
  std::mt19937_64 rng(20240611);
  const std::size_t sizes[] = {0, 1, 5, 63, 64, 65, 255, 256, 257, 600, 4096, 9000};
  for (int round = 0; round < 12; ++round) {
    INFO("round " << round);
    std::vector<Bytes> bufs;
    std::vector<ByteSpan> in;
    std::vector<Bytes> family;  // one template per size: shared prefixes
    for (std::size_t s : sizes) family.push_back(pattern(s, 1000 + static_cast<std::uint64_t>(round)));
    const std::size_t n = 200 + static_cast<std::size_t>(rng() % 200);
    bufs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned what = rng() % 8;
      if (what == 0 && !in.empty()) {  // the same span again
        in.push_back(in[static_cast<std::size_t>(rng() % in.size())]);
        continue;
      }
      if (what <= 2 && !bufs.empty()) {  // a planted duplicate in new memory
        bufs.push_back(bufs[static_cast<std::size_t>(rng() % bufs.size())]);
      } else {
        const std::size_t si = static_cast<std::size_t>(rng() % std::size(sizes));
        Bytes b = what == 3 ? pattern(sizes[si], rng()) : family[si];
        // Flip a byte or two near the start, the middle or the end.
        for (auto flips = static_cast<unsigned>(rng() % 3); flips > 0 && !b.empty(); --flips) {
          const auto at = static_cast<std::size_t>(
              rng() % 3 == 0 ? rng() % std::min<std::size_t>(b.size(), 300)
              : rng() % 2    ? b.size() - 1 - rng() % std::min<std::size_t>(b.size(), 70)
                             : rng() % b.size());
          b[at] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        }
        bufs.push_back(std::move(b));
      }
      in.emplace_back(bufs.back().data(), bufs.back().size());
    }
    const std::vector<std::uint32_t> want = brute_force(in);
    for (std::size_t block : {std::size_t{64}, std::size_t{100}, std::size_t{4096}, std::size_t{0}}) {
      INFO("block " << block);
      const Run r = run(in, block);
      CHECK(r.result == want);
      CHECK(r.stats.inputs == in.size());
      const Run c = run(in, block, AlwaysCollideHash{});
      CHECK(c.result == want);
    }
    // Hints of every kind: none, later or out of range, at an earlier input
    // of any size (mostly wrong), at the first equal one, or at another
    // earlier equal one (which may itself be hinted or share a pointer).
    std::vector<std::uint32_t> hints(in.size());
    for (std::uint32_t i = 0; i < in.size(); ++i) {
      const auto what = static_cast<unsigned>(rng() % 5);
      std::vector<std::uint32_t> equal_before;
      for (std::uint32_t j = 0; j < i; ++j)
        if (want[j] == want[i]) equal_before.push_back(j);
      const auto any_equal = [&] { return equal_before[static_cast<std::size_t>(rng() % equal_before.size())]; };
      hints[i] = what == 0 ? kNoHint
                 : what == 1 ? static_cast<std::uint32_t>(i + rng() % 3)
                 : what == 2 || i == 0 ? static_cast<std::uint32_t>(rng() % (i + 1))
                 : what == 3 || equal_before.empty() ? want[i]
                                                     : any_equal();
    }
    for (std::size_t block : {std::size_t{64}, std::size_t{0}}) {
      INFO("hinted, block " << block);
      CHECK(run(in, block, Xxh3Hash{}, hints).result == want);
      CHECK(run(in, block, AlwaysCollideHash{}, hints).result == want);
    }
  }
}

TEST_CASE("identity: a swept class whose members differ only in the last, partial block, or leave in pairs") {
  // 300 inputs of 4,196 bytes (block 256: the class is swept, and its last
  // block holds 100 bytes) equal to the leader but where planted: 10 and 20
  // differ from it only in the last byte, alike; 30 only in the last full
  // block; 40 and 50 leave it in block 5 with the same bytes, and 50 differs
  // from 40 again in the last block; 60 and 70 leave it there with other
  // bytes, and 70 differs from 60 in block 7. Every difference must be read:
  // the last block as the others, and a family of two read on like a bigger one.
  constexpr std::size_t kSize = 4196, kBlock = 256, kN = 300;
  const Bytes base = pattern(kSize, 9);
  std::vector<Bytes> bufs(kN, base);
  bufs[10][kSize - 1] ^= 1;
  bufs[20][kSize - 1] ^= 1;
  bufs[30][4000] ^= 2;
  for (std::size_t i : {40u, 50u}) bufs[i][1300] = static_cast<std::uint8_t>(base[1300] ^ 0xC3);
  for (std::size_t i : {60u, 70u}) bufs[i][1300] = static_cast<std::uint8_t>(base[1300] ^ 0x3C);
  bufs[50][kSize - 2] ^= 4;
  bufs[70][1900] ^= 8;
  const std::vector<ByteSpan> in = spans_of(bufs);
  const std::vector<std::uint32_t> want = brute_force(in);
  CHECK(want[10] == 10);
  CHECK(want[20] == 10);
  CHECK(want[30] == 30);
  CHECK(want[40] == 40);
  CHECK(want[50] == 50);
  CHECK(want[60] == 60);
  CHECK(want[70] == 70);
  CHECK(want[299] == 0);
  const Run r = run(in, kBlock);
  CHECK(r.result == want);
  const Run c = run(in, kBlock, AlwaysCollideHash{});
  CHECK(c.result == want);
}

TEST_CASE("identity: two swept members that leave the leader in one step and differ in its last byte do not collide") {
  // 300 inputs of 4 KiB, block 256 (the class is swept in steps of 256):
  // 10 and 20 leave the leader at byte 1,300, alike, in the step [1280,
  // 1536); 20 also differs in byte 1,535, that step's last. The step's
  // hash, over all 256 bytes, tells them apart: no collision, nothing
  // compared after their first difference.
  constexpr std::size_t kSize = 4096, kBlock = 256, kN = 300;
  const Bytes base = pattern(kSize, 17);
  std::vector<Bytes> bufs(kN, base);
  for (std::size_t i : {10u, 20u}) bufs[i][1300] ^= 0xC3;
  bufs[20][1535] ^= 1;
  const std::vector<ByteSpan> in = spans_of(bufs);
  std::vector<std::uint32_t> want(kN, 0);
  want[10] = 10;
  want[20] = 20;
  REQUIRE(brute_force(in) == want);
  const Run r = run(in, kBlock);
  CHECK(r.result == want);
  CHECK(r.stats.hash_collisions == 0);
  // Chunks: 5 x 59 with their leaders, then 4 merges; the sweep: 297
  // members equal to the leader in all 15 steps, 10 and 20 in 5 each.
  CHECK(r.stats.byte_comparisons == 5 * 59 + 4 + 297 * 15 + 2 * 5);
  // Fingerprints, the chunk leaders' first blocks, the two first-difference steps.
  CHECK(r.stats.bytes_hashed == kN * kPrefix + 5 * kBlock + 2 * kBlock);
  const Run c = run(in, kBlock, AlwaysCollideHash{});
  CHECK(c.result == want);
  CHECK(c.stats.hash_collisions == 1);  // 20 against 10 (the chunks' firsts are equal)
}

TEST_CASE("identity: a swept class with families that leave the leader in the same block") {
  // 300 inputs of 4 KiB sharing block 0 (block 256, so the class of 300 is
  // swept). By i % 5: 0 equal to the leader; 1 and 2 leave it in block 5
  // with two different contents, and family 1 splits again in block 9;
  // 3 leaves it in block 7, all alike; 4 leaves it in block 11, each one
  // different. Members that leave in one block with one hash must be
  // confirmed and read on; the others are settled by their first difference.
  constexpr std::size_t kSize = 4096, kBlock = 256, kN = 300;
  const Bytes base = pattern(kSize, 5);
  std::vector<Bytes> bufs(kN, base);
  for (std::size_t i = 0; i < kN; ++i) {
    Bytes& b = bufs[i];
    switch (i % 5) {
      case 1:
        b[1300] = 0xA1;
        if (i % 10 == 1) b[2400] ^= 0xff;
        break;
      case 2: b[1300] = 0xB2; break;
      case 3: b[1900] ^= 0x5a; break;
      case 4:
        b[3000] = static_cast<std::uint8_t>(i);
        b[3001] = static_cast<std::uint8_t>(~(i >> 8));
        break;
      default: break;
    }
  }
  // Make sure the planted values really differ from the base.
  REQUIRE(base[1300] != 0xA1);
  REQUIRE(base[1300] != 0xB2);
  const std::vector<ByteSpan> in = spans_of(bufs);
  const std::vector<std::uint32_t> want = brute_force(in);
  CHECK(want[1] == 1);
  CHECK(want[11] == 1);
  CHECK(want[6] == 6);
  CHECK(want[7] == 2);
  CHECK(want[3] == 3);
  CHECK(want[299] == 299);
  const Run r = run(in, kBlock);
  CHECK(r.result == want);
  CHECK(r.stats.hash_collisions == 0);
  // Fingerprints; the 5 chunk leaders' first blocks; in the sweep, the
  // first-difference block of the 240 members that leave the leader; then,
  // reading on in family 1 (60 members), the 30 that leave its leader in
  // block 9. Families 2 and 3 read on without hashing: all alike.
  CHECK(r.stats.bytes_hashed == kN * kPrefix + 5 * kBlock + 240 * kBlock + 30 * kBlock);
  const Run c = run(in, kBlock, AlwaysCollideHash{});
  CHECK(c.result == want);
  CHECK(c.stats.hash_collisions > 0);
}

TEST_CASE("find_identical: a block of 32 MiB with a pair read on (a range of 128 blocks, 2^32 bytes)") {
  // Stage 5 cuts a class of k members into ranges of kItemBlocks / k blocks;
  // for a pair that is 128 blocks, 2^32 bytes with blocks of 32 MiB: 0 in a
  // 32-bit size_t (the m32 suite), and the cutting loop never ended (it
  // grew its list until std::bad_alloc). The pair is two overlapping views
  // of one run of equal bytes; the third input leaves it in its first block.
  constexpr std::size_t kBlock = std::size_t{1} << 25;
  const Bytes same(kBlock + 2, 0x5c);
  Bytes other = same;
  other[5] = 0x5d;  // differs in its first block: the pair {0, 1} reads on alone
  const std::vector<ByteSpan> in = {ByteSpan(same.data(), kBlock + 1), ByteSpan(same.data() + 1, kBlock + 1),
                                    ByteSpan(other.data() + 1, kBlock + 1)};
  const Run r = run(in, kBlock);
  CHECK(r.result == std::vector<std::uint32_t>{0, 0, 2});
}
