// Tests for wdedup/detail/early_pairs.hpp: hinted pairs queued by one
// producer and compared by any number of threads, and what the identity
// engine does with their verdicts. Verdicts must be exactly memcmp's,
// fingerprints exactly the engine's, whoever compared them; and the engine
// fed with them must give the same result and counts as without.
#include "wdedup/detail/early_pairs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "wdedup/detail/identity.hpp"
#include "wdedup/detail/threads.hpp"
#include "wdedup/hash.hpp"

#include "support/pattern.hpp"

namespace {

using wdedup::ByteSpan;
using wdedup::Xxh3Hash;
using wdedup::detail::EarlyPairs;
using wdedup::detail::EarlyVerdicts;
using Bytes = std::vector<std::uint8_t>;
/// The engine's seed the fingerprints are made under (IdentityOptions::seed).
constexpr std::uint64_t kSeed = 0x5eed5eed12345679ull;
using wdedup_test::pattern;
using wdedup_test::spans_of;
namespace identity = wdedup::detail::identity;

constexpr std::uint32_t kNoHint = 0xffffffffu;

/// A program-like set: `names` first tensors, then `copies` more rounds of
/// each name hinted at its first, with sizes that vary by name. Of seven
/// copies, three differ from their first (first byte, middle, last byte),
/// one is a byte shorter (empty if its first has one byte), one is the
/// first's own memory (a tied weight), two are equal copies.
struct Inputs {
  std::vector<Bytes> bufs;
  std::vector<ByteSpan> spans;
  std::vector<std::uint32_t> hints;
  std::vector<std::uint32_t> alias_of;  ///< kNoHint, or the input whose memory this one is
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
    in.alias_of.push_back(kNoHint);
  }
  for (std::size_t c = 0; c < copies; ++c)
    for (std::size_t k = 0; k < names; ++k) {
      Bytes b = in.bufs[k];
      const std::size_t n = b.size();
      std::uint32_t alias = kNoHint;
      switch (rng() % 7) {
        case 0: b[0] ^= 1; break;
        case 1: b[n / 2] ^= 2; break;
        case 2: b[n - 1] ^= 4; break;
        case 3: b.pop_back(); break;
        case 4: alias = static_cast<std::uint32_t>(k); break;
        default: break;  // equal
      }
      in.bufs.push_back(std::move(b));
      in.hints.push_back(static_cast<std::uint32_t>(k));
      in.alias_of.push_back(alias);
    }
  for (std::size_t i = 0; i < in.bufs.size(); ++i) {
    const Bytes& b = in.bufs[in.alias_of[i] == kNoHint ? i : in.alias_of[i]];
    in.spans.emplace_back(b.data(), b.size());
  }
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

/// `names` buffers of `size` bytes (pattern(size, seed + k)), then a copy
/// of each: buffer names + k is a copy of buffer k.
std::vector<Bytes> names_then_copies(std::size_t names, std::size_t size, std::uint64_t seed) {
  std::vector<Bytes> bufs;
  for (std::uint64_t k = 0; k < names; ++k) bufs.push_back(pattern(size, seed + k));
  for (std::size_t k = 0; k < names; ++k) bufs.push_back(bufs[k]);
  return bufs;
}

/// Offers each copy of names_then_copies hinted at its name.
void offer_copies(EarlyPairs<Xxh3Hash>& early, const std::vector<ByteSpan>& in) {
  const std::uint32_t names = static_cast<std::uint32_t>(in.size() / 2);
  for (std::uint32_t i = names; i < 2 * names; ++i) early.offer(i - names, i, in[i - names], in[i]);
}

}  // namespace

TEST_CASE("early pairs: only what the engine would compare is queued; each hint is fingerprinted once") {
  Bytes a = pattern(4096, 1), b = a, small = pattern(100, 2), big = pattern(identity::kRunMaxBytes + 1, 3),
        big2 = big, other = pattern(4096, 4), c = pattern(200, 5), d = pattern(300, 6), e = c;
  auto sp = [](const Bytes& v, std::size_t n) { return ByteSpan(v.data(), n); };
  const std::vector<ByteSpan> inputs = {
      sp(a, a.size()),                   // 0
      sp(b, b.size()),                   // 1: hinted at 0, equal
      sp(small, small.size()),           // 2: hinted at 0, another size: not queued
      sp(b, 0),                          // 3: hinted at 0, empty: not queued
      sp(a, a.size()),                   // 4: hinted at 0, the same address: not queued
      sp(big, big.size()),               // 5
      sp(big2, big2.size()),             // 6: hinted at 5, above kRunMaxBytes: not queued
      sp(big, identity::kRunMaxBytes),   // 7
      sp(big2, identity::kRunMaxBytes),  // 8: hinted at 7, equal (the largest queued)
      sp(other, other.size()),           // 9: hinted at 0, different
      sp(c, c.size()),                   // 10
      sp(d, d.size()),                   // 11: hinted at 10, another size: not queued
      sp(e, e.size()),                   // 12: hinted at 10, equal
      sp(c, 0),                          // 13: empty
      sp(e, 0),                          // 14: hinted at 13, empty too, in other memory: not queued
  };
  const std::uint32_t hint_of[15] = {kNoHint, 0, 0, 0, 0, kNoHint, 5, kNoHint, 7, 0, kNoHint, 10, 10, kNoHint, 13};
  const Xxh3Hash hash;
  EarlyPairs<Xxh3Hash> early(inputs.size(), hash, false, kSeed);
  for (std::uint32_t i = 0; i < inputs.size(); ++i)
    if (hint_of[i] != kNoHint) early.offer(hint_of[i], i, inputs[hint_of[i]], inputs[i]);
  CHECK(early.queued() == 4);  // 1, 8, 9, 12
  early.close();
  early.drain();
  const EarlyVerdicts v = early.verdicts();
  REQUIRE(v.verdict.size() == 15);
  const std::uint8_t kU = EarlyVerdicts::kUnknown, kE = EarlyVerdicts::kEqual, kD = EarlyVerdicts::kDiffer;
  const std::uint8_t expect[15] = {kU, kE, kU, kU, kU, kU, kU, kU, kE, kD, kU, kU, kE, kU, kU};
  for (std::size_t i = 0; i < 15; ++i) {
    CAPTURE(i);
    CHECK(v.verdict[i] == expect[i]);
  }
  // A hint is fingerprinted by its first queued pair: 0, 7 and 10 (by 12:
  // 11 was not queued); 5 and 13 have none.
  for (std::size_t i = 0; i < 15; ++i) {
    CAPTURE(i);
    CHECK(v.has_prefix[i] == (i == 0 || i == 7 || i == 10 ? 1 : 0));
  }
  CHECK(v.prefix[0] == hash(a.data(), identity::kPrefixBytes, identity::kPrefixSeed ^ kSeed));
  CHECK(v.prefix[7] == hash(big.data(), identity::kPrefixBytes, identity::kPrefixSeed ^ kSeed));
  CHECK(v.prefix[10] == hash(c.data(), identity::kPrefixBytes, identity::kPrefixSeed ^ kSeed));
}

TEST_CASE("early pairs: a hint with several queued copies is hashed once, by its first") {
  // Hint 0 (40 bytes) has three queued copies (3, 4, 6), hint 1 (4 KiB)
  // one (5; 7 is a byte shorter), hint 2 none (8 is its own memory). The
  // hash records each call: two, for hints 0 and 1, on their first
  // min(size, kPrefixBytes) bytes under the engine's seed.
  struct Call {
    std::size_t n;
    std::uint64_t seed;
    std::uint64_t bytes_hash;
  };
  struct RecordingHash {
    std::vector<Call>* calls;
    std::uint64_t operator()(const void* p, std::size_t n, std::uint64_t seed) const {
      calls->push_back({n, seed, Xxh3Hash{}(p, n, 0)});
      return Xxh3Hash{}(p, n, seed);
    }
  };
  const Bytes a0 = pattern(40, 1), a1 = pattern(4096, 2), a2 = pattern(1, 3);
  Bytes differ = a0;
  differ[0] ^= 1;
  const Bytes c3 = a0, c5 = a1, c6 = a0, c7(a1.begin(), a1.end() - 1);
  const std::vector<ByteSpan> in = {
      ByteSpan(a0.data(), a0.size()),         ByteSpan(a1.data(), a1.size()), ByteSpan(a2.data(), a2.size()),
      ByteSpan(c3.data(), c3.size()),         ByteSpan(differ.data(), differ.size()),
      ByteSpan(c5.data(), c5.size()),         ByteSpan(c6.data(), c6.size()), ByteSpan(c7.data(), c7.size()),
      ByteSpan(a2.data(), a2.size()),
  };
  const std::uint32_t hint_of[9] = {kNoHint, kNoHint, kNoHint, 0, 0, 1, 0, 1, 2};
  std::vector<Call> calls;
  const RecordingHash hash{&calls};
  EarlyPairs<RecordingHash> early(in.size(), hash, false, kSeed);
  for (std::uint32_t i = 0; i < in.size(); ++i)
    if (hint_of[i] != kNoHint) early.offer(hint_of[i], i, in[hint_of[i]], in[i]);
  CHECK(early.queued() == 4);  // 3, 4, 5, 6
  early.close();
  early.drain();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].n == 40);
  CHECK(calls[0].seed == (identity::kPrefixSeed ^ kSeed));
  CHECK(calls[0].bytes_hash == Xxh3Hash{}(a0.data(), 40, 0));
  CHECK(calls[1].n == identity::kPrefixBytes);
  CHECK(calls[1].seed == (identity::kPrefixSeed ^ kSeed));
  CHECK(calls[1].bytes_hash == Xxh3Hash{}(a1.data(), identity::kPrefixBytes, 0));
  const EarlyVerdicts v = early.verdicts();
  const std::uint8_t kU = EarlyVerdicts::kUnknown, kE = EarlyVerdicts::kEqual, kD = EarlyVerdicts::kDiffer;
  const std::uint8_t expect[9] = {kU, kU, kU, kE, kD, kE, kE, kU, kU};
  for (std::size_t i = 0; i < 9; ++i) {
    CAPTURE(i);
    CHECK(v.verdict[i] == expect[i]);
    CHECK(v.has_prefix[i] == (i < 2 ? 1 : 0));
  }
}

TEST_CASE("early pairs: verdicts are memcmp's and fingerprints the engine's, for any number of threads") {
  const Inputs in = make_inputs(300, 3, 11);
  const Xxh3Hash hash;
  for (unsigned threads : {1u, 2u, 4u}) {
    CAPTURE(threads);
    EarlyPairs<Xxh3Hash> early(in.spans.size(), hash, threads >= 2, kSeed);
    fill(early, in, threads);
    const EarlyVerdicts v = early.verdicts();
    std::size_t queued = 0, equal = 0, differ = 0, unknown = 0;
    std::vector<std::uint8_t> has_queued_copy(in.spans.size(), 0);
    for (std::size_t i = 0; i < in.spans.size(); ++i) {
      CAPTURE(i);
      if (in.hints[i] == kNoHint) {
        CHECK(v.verdict[i] == EarlyVerdicts::kUnknown);
        // Fingerprinted iff one of its copies was queued (found below).
        if (v.has_prefix[i] != 0) {
          const std::size_t len = std::min<std::size_t>(in.spans[i].size(), identity::kPrefixBytes);
          CHECK(v.prefix[i] == hash(in.spans[i].data(), len, identity::kPrefixSeed ^ kSeed));
        }
        continue;
      }
      CHECK(v.has_prefix[i] == 0);
      const ByteSpan x = in.spans[in.hints[i]], y = in.spans[i];
      // Queued only if find_identical would compare: same size, other memory.
      if (x.size() != y.size() || x.data() == y.data() || y.size() == 0) {
        CHECK(v.verdict[i] == EarlyVerdicts::kUnknown);
        ++unknown;
        continue;
      }
      ++queued;
      has_queued_copy[in.hints[i]] = 1;
      const bool same = std::memcmp(x.data(), y.data(), y.size()) == 0;
      CHECK(v.verdict[i] == (same ? EarlyVerdicts::kEqual : EarlyVerdicts::kDiffer));
      ++(same ? equal : differ);
    }
    CHECK(early.queued() == queued);
    std::size_t no_prefix = 0;
    for (std::size_t k = 0; k < 300; ++k) {
      CAPTURE(k);
      CHECK(v.has_prefix[k] == has_queued_copy[k]);
      no_prefix += has_queued_copy[k] == 0;
    }
    CHECK(no_prefix == 8);  // names none of whose copies was queued
    // Every case occurs: mt19937_64 is specified exactly by the standard,
    // so this seed always gives these counts of the 900 copies.
    CHECK(equal == 256);
    CHECK(differ == 397);
    CHECK(unknown == 247);
  }
}

TEST_CASE("early pairs: the engine given their verdicts gives the same result and counts") {
  const Inputs in = make_inputs(500, 2, 23);
  const Xxh3Hash hash;
  for (unsigned threads : {1u, 2u, 8u}) {
    CAPTURE(threads);
    wdedup::detail::IdentityOptions opts;
    opts.threads = threads;
    opts.seed = kSeed;  // the early fingerprints' own: used, not ignored
    wdedup::detail::IdentityStats plain, fed;
    const std::vector<std::uint32_t> expect = wdedup::detail::find_identical(in.spans, in.hints, hash, opts, &plain);
    EarlyPairs<Xxh3Hash> early(in.spans.size(), hash, threads >= 2, kSeed);
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
    // Every copy equal to its first, of the same size in other memory, is
    // matched by its hint (the engine settles same-memory copies unread).
    std::uint64_t equal = 0;
    for (std::size_t i = 500; i < in.spans.size(); ++i) {
      const ByteSpan x = in.spans[in.hints[i]], y = in.spans[i];
      equal += x.size() == y.size() && x.data() != y.data() && y.size() != 0 &&
               std::memcmp(x.data(), y.data(), y.size()) == 0;
    }
    CHECK(fed.matched_hint == equal);
    CHECK(fed.skipped_same_pointer == plain.skipped_same_pointer);
  }
}

TEST_CASE("early pairs: the producer leaves pairs to others and assumes them equal; all_equal says if they were") {
  // Ten names of 4 KiB, then a copy of each hinted at it; copy 7 differs.
  std::vector<Bytes> bufs = names_then_copies(10, 4096, 100);
  bufs[17][4095] ^= 1;
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Xxh3Hash hash;
  EarlyPairs<Xxh3Hash> early(in.size(), hash, false, kSeed);
  offer_copies(early, in);
  CHECK(early.queued() == 10);
  CHECK(early.queued_bytes() == 10 * 4096);
  early.close();
  CHECK(early.unclaimed() == 10);
  early.drain_leaving(4);  // compares pairs 0-5 (inputs 10-15)
  CHECK(early.unclaimed() == 4);
  CHECK(early.all_equal());
  const EarlyVerdicts a = early.assumed();
  REQUIRE(a.verdict.size() == 20);
  REQUIRE(a.has_prefix.size() == 20);
  for (std::size_t i = 0; i < 20; ++i) {
    CAPTURE(i);
    CHECK(a.verdict[i] == (i >= 10 ? EarlyVerdicts::kEqual : EarlyVerdicts::kUnknown));
    CHECK(a.has_prefix[i] == (i < 6 ? 1 : 0));  // the hints of the pairs compared
    if (i < 6) CHECK(a.prefix[i] == hash(bufs[i].data(), identity::kPrefixBytes, identity::kPrefixSeed ^ kSeed));
  }
  early.drain();
  CHECK(early.unclaimed() == 0);
  CHECK_FALSE(early.all_equal());
  const EarlyVerdicts v = early.verdicts();
  for (std::size_t i = 10; i < 20; ++i) {
    CAPTURE(i);
    CHECK(v.verdict[i] == (i == 17 ? EarlyVerdicts::kDiffer : EarlyVerdicts::kEqual));
    CHECK(v.has_prefix[i - 10] == 1);
  }
  // assumed()'s arrays are a snapshot: the later comparisons did not touch them.
  for (std::size_t i = 6; i < 10; ++i) CHECK(a.has_prefix[i] == 0);
  CHECK(a.verdict[17] == EarlyVerdicts::kEqual);
}

TEST_CASE("early pairs: assumed() while other threads compare sees only final fingerprints") {
  const Inputs in = make_inputs(2000, 1, 31);
  const Xxh3Hash hash;
  for (unsigned threads : {2u, 4u}) {
    CAPTURE(threads);
    EarlyPairs<Xxh3Hash> early(in.spans.size(), hash, true, kSeed);
    EarlyVerdicts a;
    wdedup::detail::run_workers(threads, [&](std::size_t w) {
      if (w != 0) return early.drain();
      for (std::uint32_t i = 0; i < in.spans.size(); ++i)
        if (in.hints[i] != kNoHint) early.offer(in.hints[i], i, in.spans[in.hints[i]], in.spans[i]);
      early.close();
      early.drain_leaving(early.queued() / 2);
      a = early.assumed();
      early.drain();
    });
    const EarlyVerdicts v = early.verdicts();
    bool all_equal = true;
    std::size_t taken = 0;
    for (std::size_t i = 0; i < in.spans.size(); ++i) {
      CAPTURE(i);
      CHECK(a.verdict[i] == (v.verdict[i] == EarlyVerdicts::kUnknown ? EarlyVerdicts::kUnknown : EarlyVerdicts::kEqual));
      all_equal = all_equal && v.verdict[i] != EarlyVerdicts::kDiffer;
      if (a.has_prefix[i] == 0) continue;
      ++taken;
      CHECK(v.has_prefix[i] == 1);
      const std::size_t len = std::min<std::size_t>(in.spans[i].size(), identity::kPrefixBytes);
      CHECK(a.prefix[i] == hash(in.spans[i].data(), len, identity::kPrefixSeed ^ kSeed));
    }
    CHECK(early.all_equal() == all_equal);
    CHECK_FALSE(all_equal);  // make_inputs makes differing copies
    CHECK(taken > 0);        // the producer compared half of the pairs itself
  }
}

TEST_CASE("early pairs: drain_leaving with a count near SIZE_MAX claims nothing (c + leave must not wrap)") {
  // deduplicate() computes `leave` from the tensor count, the thread count
  // and the pair size; in 32 bits (size_t) 186,413 names of one byte in two
  // methods on 16 threads made it 2^32 - 11,776, and claimed + leave wrapped:
  // the producer claimed pairs past the queue's end and compared garbage.
  // Here: 40 pairs queued, 32 published (kPublish), 4 of them claimed.
  const std::vector<Bytes> bufs = names_then_copies(40, 64, 200);
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Xxh3Hash hash;
  EarlyPairs<Xxh3Hash> early(in.size(), hash, false, kSeed);
  offer_copies(early, in);
  REQUIRE(early.unclaimed() == 32);
  early.drain_leaving(28);
  REQUIRE(early.unclaimed() == 28);
  for (std::size_t leave : {SIZE_MAX, SIZE_MAX - 2, SIZE_MAX - 27}) {
    CAPTURE(leave);
    early.drain_leaving(leave);
    CHECK(early.unclaimed() == 28);
  }
  early.close();
  early.drain();
  CHECK(early.unclaimed() == 0);
  CHECK(early.all_equal());
  const EarlyVerdicts v = early.verdicts();
  for (std::size_t i = 40; i < 80; ++i) CHECK(v.verdict[i] == EarlyVerdicts::kEqual);
}

TEST_CASE("early pairs: another thread's drain() waits for the producer to close, then has compared every pair") {
  // Forty names of 100 bytes, a copy of each hinted at it; copy 33 differs
  // in its last byte. The other thread drains from the start; the producer
  // offers only once it is in, a while later, then closes and compares
  // nothing itself. drain() must not take a queue with nothing published
  // yet for a finished one.
  std::vector<Bytes> bufs = names_then_copies(40, 100, 300);
  bufs[73][99] ^= 1;
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Xxh3Hash hash;
  EarlyPairs<Xxh3Hash> early(in.size(), hash, true, kSeed);
  std::atomic<bool> draining{false};
  wdedup::detail::run_workers(2, [&](std::size_t w) {
    if (w != 0) {
      draining.store(true);
      return early.drain();
    }
    // Bounded: run_workers runs no worker whose thread did not start, and
    // then this case fails (unclaimed 40) rather than hangs.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!draining.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    offer_copies(early, in);
    early.close();
  });
  CHECK(early.unclaimed() == 0);
  CHECK_FALSE(early.all_equal());
  const EarlyVerdicts v = early.verdicts();
  for (std::size_t i = 0; i < 80; ++i) {
    CAPTURE(i);
    CHECK(v.verdict[i] == (i < 40 ? EarlyVerdicts::kUnknown : i == 73 ? EarlyVerdicts::kDiffer : EarlyVerdicts::kEqual));
    CHECK(v.has_prefix[i] == (i < 40 ? 1 : 0));
  }
}

TEST_CASE("early pairs: what was never compared reads as unknown, whatever the memory held before") {
  // The arrays come from an arena whose first chunk (64 KiB, from operator
  // new) is likely cut from a block of 96 KiB freed just before, full of
  // 0xff: an entry the constructor or assumed() leaves unset reads 0xff,
  // not 0. Ten names of 4 KiB, a copy of each hinted at it; the producer
  // compares six pairs.
  const std::vector<Bytes> bufs = names_then_copies(10, 4096, 400);
  const std::vector<ByteSpan> in = spans_of(bufs);
  const Xxh3Hash hash;
  // (A block after it, held until then, keeps it off the heap's top,
  // which free() may hand back to the system, to come back as zeros.)
  constexpr std::size_t kBlock = std::size_t{96} << 10;
  std::uint8_t* volatile dirty = new std::uint8_t[kBlock];
  std::uint8_t* volatile keep = new std::uint8_t[kBlock];
  std::memset(dirty, 0xff, kBlock);
  delete[] dirty;
  EarlyPairs<Xxh3Hash> early(in.size(), hash, false, kSeed);
  delete[] keep;
  offer_copies(early, in);
  early.close();
  early.drain_leaving(4);
  const EarlyVerdicts a = early.assumed();
  const EarlyVerdicts v = early.verdicts();
  for (std::size_t i = 0; i < 20; ++i) {
    CAPTURE(i);
    CHECK(v.verdict[i] == (i >= 10 && i < 16 ? EarlyVerdicts::kEqual : EarlyVerdicts::kUnknown));
    CHECK(v.has_prefix[i] == (i < 6 ? 1 : 0));
    CHECK(a.verdict[i] == (i >= 10 ? EarlyVerdicts::kEqual : EarlyVerdicts::kUnknown));
    CHECK(a.has_prefix[i] == (i < 6 ? 1 : 0));
  }
  early.drain();
}
