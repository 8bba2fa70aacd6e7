// Tests for wdedup/detail/early_pairs.hpp: hinted pairs queued by one
// producer and compared by any number of threads, and what the identity
// engine does with their verdicts. Verdicts must be exactly memcmp's,
// fingerprints exactly the engine's, whoever compared them; and the engine
// fed with them must give the same result and counts as without.
#include "wdedup/detail/early_pairs.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "wdedup/detail/identity.hpp"
#include "wdedup/detail/threads.hpp"
#include "wdedup/hash.hpp"

namespace {

using wdedup::ByteSpan;
using wdedup::Xxh3Hash;
using wdedup::detail::EarlyPairs;
using wdedup::detail::EarlyVerdicts;
using Bytes = std::vector<std::uint8_t>;
namespace identity = wdedup::detail::identity;

constexpr std::uint32_t kNoHint = 0xffffffffu;

Bytes pattern(std::size_t n, std::uint64_t seed) {
  Bytes b(n);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = static_cast<std::uint8_t>(x >> 24);
  }
  return b;
}

/// A program-like set: `names` first tensors, then `copies` more rounds of
/// each name hinted at its first, with sizes that vary by name; three
/// copies in five differ from their first (first byte, middle, last byte).
struct Inputs {
  std::vector<Bytes> bufs;
  std::vector<ByteSpan> spans;
  std::vector<std::uint32_t> hints;
};

Inputs make_inputs(std::size_t names, std::size_t copies, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t sizes[] = {1, 63, 64, 65, 100, 4096, 5000};
  Inputs in;
  std::vector<std::size_t> size_of(names);
  for (std::size_t k = 0; k < names; ++k) {
    size_of[k] = sizes[rng() % std::size(sizes)];
    in.bufs.push_back(pattern(size_of[k], rng()));
    in.hints.push_back(kNoHint);
  }
  for (std::size_t c = 0; c < copies; ++c)
    for (std::size_t k = 0; k < names; ++k) {
      Bytes b = in.bufs[k];
      const std::size_t n = b.size();
      switch (rng() % 5) {
        case 0: b[0] ^= 1; break;
        case 1: b[n / 2] ^= 2; break;
        case 2: b[n - 1] ^= 4; break;
        default: break;  // equal
      }
      in.bufs.push_back(std::move(b));
      in.hints.push_back(static_cast<std::uint32_t>(k));
    }
  for (const Bytes& b : in.bufs) in.spans.emplace_back(b.data(), b.size());
  return in;
}

/// Offers every hinted input, with `threads` - 1 threads draining while the
/// producer offers, then the producer drains too.
void fill(EarlyPairs<Xxh3Hash>& early, const Inputs& in, unsigned threads) {
  auto produce = [&] {
    for (std::uint32_t i = 0; i < in.spans.size(); ++i)
      if (in.hints[i] != kNoHint) early.offer(in.hints[i], i, in.spans[in.hints[i]], in.spans[i]);
    early.close();
    early.drain();
  };
  if (threads < 2)
    produce();
  else
    wdedup::detail::run_workers(threads, [&](std::size_t w) { w == 0 ? produce() : early.drain(); });
}

}  // namespace

TEST_CASE("early pairs: only what the engine would compare is queued") {
  Bytes a = pattern(4096, 1), b = a, small = pattern(100, 2), big = pattern(identity::kRunMaxBytes + 1, 3),
        big2 = big;
  const Xxh3Hash hash;
  EarlyPairs<Xxh3Hash> early(10, hash, false);
  early.offer(0, 1, ByteSpan(a.data(), a.size()), ByteSpan(b.data(), b.size()));            // queued
  early.offer(0, 2, ByteSpan(a.data(), a.size()), ByteSpan(small.data(), small.size()));    // sizes differ
  early.offer(0, 3, ByteSpan(a.data(), 0), ByteSpan(b.data(), 0));                          // empty
  early.offer(0, 4, ByteSpan(a.data(), a.size()), ByteSpan(a.data(), a.size()));            // same address
  early.offer(5, 6, ByteSpan(big.data(), big.size()), ByteSpan(big2.data(), big2.size()));  // above kRunMaxBytes
  early.offer(5, 7, ByteSpan(big.data(), identity::kRunMaxBytes), ByteSpan(big2.data(), identity::kRunMaxBytes));
  CHECK(early.queued() == 2);
  early.close();
  early.drain();
  const EarlyVerdicts v = early.verdicts();
  REQUIRE(v.verdict.size() == 10);
  const std::uint8_t expect[10] = {0, EarlyVerdicts::kEqual, 0, 0, 0, 0, 0, EarlyVerdicts::kEqual, 0, 0};
  for (std::size_t i = 0; i < 10; ++i) {
    CAPTURE(i);
    CHECK(v.verdict[i] == expect[i]);
  }
  // Each hint's first queued pair fingerprinted it: inputs 0 and 5.
  for (std::size_t i = 0; i < 10; ++i) {
    CAPTURE(i);
    CHECK(v.has_prefix[i] == (i == 0 || i == 5 ? 1 : 0));
  }
  CHECK(v.prefix[0] == hash(a.data(), identity::kPrefixBytes, identity::kPrefixSeed));
  CHECK(v.prefix[5] == hash(big.data(), identity::kPrefixBytes, identity::kPrefixSeed));
}

TEST_CASE("early pairs: verdicts are memcmp's and fingerprints the engine's, for any number of threads") {
  const Inputs in = make_inputs(300, 3, 11);
  const Xxh3Hash hash;
  for (unsigned threads : {1u, 2u, 4u}) {
    CAPTURE(threads);
    EarlyPairs<Xxh3Hash> early(in.spans.size(), hash, threads >= 2);
    fill(early, in, threads);
    CHECK(early.queued() == 900);  // every copy: same size, own memory, at most 5000 bytes
    const EarlyVerdicts v = early.verdicts();
    std::size_t equal = 0;
    for (std::size_t i = 0; i < in.spans.size(); ++i) {
      CAPTURE(i);
      if (in.hints[i] == kNoHint) {
        CHECK(v.verdict[i] == EarlyVerdicts::kUnknown);
        // Every first tensor has copies, so each was fingerprinted once.
        REQUIRE(v.has_prefix[i] == 1);
        const std::size_t len = std::min<std::size_t>(in.spans[i].size(), identity::kPrefixBytes);
        CHECK(v.prefix[i] == hash(in.spans[i].data(), len, identity::kPrefixSeed));
        continue;
      }
      const bool same = std::memcmp(in.spans[i].data(), in.spans[in.hints[i]].data(), in.spans[i].size()) == 0;
      CHECK(v.verdict[i] == (same ? EarlyVerdicts::kEqual : EarlyVerdicts::kDiffer));
      CHECK(v.has_prefix[i] == 0);
      equal += same;
    }
    // Both verdicts occur: mt19937_64 is specified exactly by the standard,
    // and this seed leaves 392 of the 900 copies unmutated.
    CHECK(equal == 392);
  }
}

TEST_CASE("early pairs: the engine given their verdicts gives the same result and counts") {
  const Inputs in = make_inputs(500, 2, 23);
  const Xxh3Hash hash;
  for (unsigned threads : {1u, 2u, 8u}) {
    CAPTURE(threads);
    wdedup::detail::IdentityOptions opts;
    opts.threads = threads;
    wdedup::detail::IdentityStats plain, fed;
    const std::vector<std::uint32_t> expect = wdedup::detail::find_identical(in.spans, in.hints, hash, opts, &plain);
    EarlyPairs<Xxh3Hash> early(in.spans.size(), hash, threads >= 2);
    fill(early, in, threads);
    const std::vector<std::uint32_t> got =
        wdedup::detail::find_identical(in.spans, in.hints, hash, opts, &fed, early.verdicts());
    CHECK(got == expect);
    CHECK(fed.matched_hint == plain.matched_hint);
    CHECK(fed.skipped_unique_size == plain.skipped_unique_size);
    CHECK(fed.compared_directly == plain.compared_directly);
    CHECK(fed.hashed == plain.hashed);
    CHECK(fed.bytes_hashed == plain.bytes_hashed);
    CHECK(fed.byte_comparisons == plain.byte_comparisons);
    CHECK(fed.bytes_compared == plain.bytes_compared);
    CHECK(fed.hash_collisions == plain.hash_collisions);
    // Every copy equal to its first is matched by its hint.
    std::uint64_t equal = 0;
    for (std::size_t i = 500; i < in.spans.size(); ++i)
      equal += std::memcmp(in.spans[i].data(), in.spans[in.hints[i]].data(), in.spans[i].size()) == 0;
    CHECK(fed.matched_hint == equal);
  }
}
