// wdedup/detail/early_pairs.hpp — hinted pairs queued while the hints are
// still being found, and compared by threads that need not wait for the
// name check to end. Build-time half.
//
// Why: deduplicate() learns each tensor's hint (the first tensor of its
// name) in its name check, which runs on one thread; the identity engine
// then compares each small tensor with its hint. With two or more threads,
// a second thread compares the pairs the check has queued while it goes on,
// so the check no longer runs alone. With one thread the pairs are compared
// right after the check, as the engine would (comparing one pair per tensor
// checked, to overlap the lookups with the loads, measured 1-1.5 ms slower
// on 100,000 small tensors of 4 KiB). Either way the comparison that reads
// a hint's first line also takes its fingerprint (the engine's stage 2),
// so the engine does not load that line again: it takes the verdicts and
// fingerprints (find_identical's EarlyVerdicts) instead of recomputing them.
#ifndef WDEDUP_DETAIL_EARLY_PAIRS_HPP
#define WDEDUP_DETAIL_EARLY_PAIRS_HPP

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wdedup/detail/arena.hpp"
#include "wdedup/detail/atomic.hpp"
#include "wdedup/detail/equal_run.hpp"
#include "wdedup/detail/identity.hpp"
#include "wdedup/detail/min_max.hpp"
#include "wdedup/runtime/span.hpp"

namespace wdedup {
namespace detail {

/// One producer queues pairs in input order (offer, then close); any number
/// of threads compare them (drain), each pair once, the producer too once
/// it has closed. Memory for n inputs is taken up front: nothing
/// reallocates while other threads read.
template <class Hash>
class EarlyPairs {
 public:
  /// Room for `n` inputs. `shared`: threads other than the producer will
  /// call drain() (one thread alone needs no atomic read-modify-writes).
  EarlyPairs(std::size_t n, const Hash& hash, bool shared, std::uint64_t seed)
      : hash_(&hash),
        seed_(seed),
        shared_(shared),
        n_(n),
        arena_(n * (sizeof(Pair) + 5 * sizeof(std::uint8_t) + sizeof(std::uint64_t)) + 7 * 64),
        queue_(arena_.alloc<Pair>(n)),
        verdict_(arena_.alloc<std::uint8_t>(n)),
        has_prefix_(arena_.alloc<std::uint8_t>(n)),
        fingerprinted_(arena_.alloc<std::uint8_t>(n)),
        prefix_(arena_.alloc<std::uint64_t>(n)),
        assumed_(arena_.alloc<std::uint8_t>(n)),
        assumed_prefix_(arena_.alloc<std::uint8_t>(n)) {
    if (n == 0) return;  // (the arena hands out no memory for 0 bytes)
    std::memset(verdict_, EarlyVerdicts::kUnknown, n);
    std::memset(has_prefix_, 0, n);
    std::memset(fingerprinted_, 0, n);
  }
  EarlyPairs(const EarlyPairs&) = delete;
  EarlyPairs& operator=(const EarlyPairs&) = delete;

  /// Producer: input i (bytes `in`) is hinted at input h < i (bytes `at`).
  /// Queued only if find_identical would compare them: equal sizes of 1 to
  /// kRunMaxBytes bytes, at different addresses (it settles the others
  /// without reading).
  void offer(std::uint32_t h, std::uint32_t i, ByteSpan at, ByteSpan in) noexcept {
    const std::size_t len = in.size();
    if (at.size() != len || len == 0 || len > identity::kRunMaxBytes || at.data() == in.data()) return;
    // The first pair of each hint also fingerprints it.
    const bool fp = fingerprinted_[h] == 0;
    fingerprinted_[h] = 1;
    queue_[queued_++] = Pair{at.data(), in.data(), i, fp ? h : identity::kNone, static_cast<std::uint32_t>(len)};
    queued_bytes_ += len;
    // Published kPublish at a time: a store to a line that another core
    // polls costs a transfer of that line (a store per pair, with claims by
    // the producer as well, made 2 threads slower than 1 on 100,000 small
    // tensors).
    if (queued_ % kPublish == 0) published_.store(queued_, detail::Order::release);
  }

  /// Producer: no more pairs.
  void close() noexcept {
    published_.store(queued_, detail::Order::release);
    closed_.store(true, detail::Order::release);
  }

  /// Any thread: compares pairs, up to kRun claimed at a time, until the
  /// producer has closed and every pair is claimed. Until it closes, the
  /// newest kGroup pairs stay queued, so that every group is compared
  /// while the next is prefetched (see equal_group: without, each page of
  /// small tensors starts with a full memory latency).
  void drain() noexcept {
    for (unsigned idle = 0;;) {
      const bool closed = closed_.load(detail::Order::acquire);
      const std::size_t keep = closed ? 0 : equal_run_impl::kGroup;
      std::size_t k;
      const std::size_t cnt = claim(identity::kRun, keep, &k);
      if (cnt != 0) {
        idle = 0;
        compare(k, cnt, k + cnt + keep);
        continue;
      }
      // Closed is stored after the last pair is published: read in this
      // order, a closed queue with nothing left to claim is done.
      if (closed && claimed_.load(detail::Order::acquire) >= published_.load(detail::Order::acquire)) return;
      // Waiting for the producer: spin a little, then give the core away
      // (there may be more threads than cores).
      if (++idle < 64)
        pause();
      else
        sched_yield();
    }
  }

  /// Producer, once closed: compares pairs like drain(), but stops while
  /// `leave` pairs are still unclaimed, for the other threads to finish.
  void drain_leaving(std::size_t leave) noexcept {
    std::size_t k;
    for (std::size_t cnt; (cnt = claim(identity::kRun, leave, &k)) != 0;) compare(k, cnt, k + cnt + leave);
  }

  /// Producer, once closed: the verdicts if every queued pair is equal,
  /// with the fingerprints taken so far, for work that goes on while other
  /// threads still compare (they write neither array it returns).
  /// all_equal() says, once every thread has finished, whether these were
  /// the verdicts.
  EarlyVerdicts assumed() noexcept {
    if (n_ != 0) std::memset(assumed_, EarlyVerdicts::kUnknown, n_);
    for (std::size_t a = 0; a < queued_; ++a) assumed_[queue_[a].input] = EarlyVerdicts::kEqual;
    // A fingerprint seen here is final: each is written once, before its flag.
    for (std::size_t i = 0; i < n_; ++i) assumed_prefix_[i] = __atomic_load_n(&has_prefix_[i], __ATOMIC_ACQUIRE);
    EarlyVerdicts v;
    v.verdict = Span<const std::uint8_t>(assumed_, n_);
    v.has_prefix = Span<const std::uint8_t>(assumed_prefix_, n_);
    v.prefix = Span<const std::uint64_t>(prefix_, n_);
    return v;
  }
  /// Pairs not yet claimed (a snapshot, once closed).
  std::size_t unclaimed() const noexcept {
    return published_.load(detail::Order::acquire) - claimed_.load(detail::Order::acquire);
  }
  /// Every pair compared so far was equal: final once every thread has
  /// finished (then: every queued pair).
  bool all_equal() const noexcept { return !differ_.load(detail::Order::relaxed); }

  /// What the engine takes; read after every thread has finished.
  EarlyVerdicts verdicts() const noexcept {
    EarlyVerdicts v;
    v.verdict = Span<const std::uint8_t>(verdict_, n_);
    v.has_prefix = Span<const std::uint8_t>(has_prefix_, n_);
    v.prefix = Span<const std::uint64_t>(prefix_, n_);
    return v;
  }
  /// Pairs queued so far, and their bytes (one side); producer, or after
  /// every thread has finished.
  std::size_t queued() const noexcept { return queued_; }
  std::uint64_t queued_bytes() const noexcept { return queued_bytes_; }

 private:
  struct Pair {
    const std::uint8_t* x;  ///< the hint's bytes
    const std::uint8_t* y;  ///< the input's bytes
    std::uint32_t input;
    std::uint32_t fingerprint;  ///< the hint, if this pair fingerprints it; else kNone
    std::uint32_t len;
  };

  static void pause() noexcept {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#endif
  }

  /// Claims up to `max` pairs, leaving the newest `keep` unclaimed; returns
  /// how many (k: the first), or 0. Each pair goes to exactly one claimer.
  std::size_t claim(std::size_t max, std::size_t keep, std::size_t* k) noexcept {
    std::size_t c = claimed_.load(detail::Order::relaxed);
    for (;;) {
      const std::size_t p = published_.load(detail::Order::acquire);
      // Not c + keep, which wraps for a `keep` near SIZE_MAX (and c may be
      // read ahead of p: then nothing is claimable either).
      if (p <= c || p - c <= keep) return 0;
      const std::size_t take = detail::min_of(max, p - c - keep);
      if (!shared_) {
        claimed_.store(c + take, detail::Order::relaxed);
        *k = c;
        return take;
      }
      if (claimed_.compare_exchange_weak(c, c + take, detail::Order::acq_rel, detail::Order::relaxed)) {
        *k = c;
        return take;
      }
    }
  }

  /// Compares pairs [k, k + cnt), kGroup at a time, each group prefetching
  /// the next if it is below `queued` (so queued: published already), and
  /// records the verdicts. Only a pair's claimer writes its entries, so no
  /// two threads write one.
  ///
  /// The fingerprints of the run's hints are hashed after its last
  /// comparison, from copies of their first bytes taken as each group
  /// starts (its first line is arriving then). Hashed between comparisons,
  /// right after each group, they cost the run about 100 ns a hint: 50,000
  /// pairs of 4 KiB took 25-29 ms against 20-21 ms without fingerprints, and
  /// 22-23 ms hashed this way (Zen 5 EPYC VM, 2026-11-26; hashing a buffer
  /// of ours in the same place cost nothing, so it is the wait for the
  /// hint's line in the middle of the memory traffic, not the hash).
  void compare(std::size_t k, std::size_t cnt, std::size_t queued) noexcept {
    constexpr std::size_t G = equal_run_impl::kGroup;
    constexpr std::size_t kHead = identity::kPrefixBytes;
    alignas(64) std::uint8_t head[identity::kRun][kHead];
    std::uint32_t head_of[identity::kRun];
    std::uint32_t head_len[identity::kRun];
    std::size_t heads = 0;
    const std::size_t end = k + cnt;
    for (std::size_t a = k; a < end;) {
      const std::size_t len = queue_[a].len;
      // Up to G pairs of one length; a short group repeats its last.
      std::size_t m = 1;
      while (m < G && a + m < end && queue_[a + m].len == len) ++m;
      const std::size_t next = a + m;
      const std::uint8_t* x[G];
      const std::uint8_t* y[G];
      const std::uint8_t* nx[G];
      const std::uint8_t* ny[G];
      for (std::size_t p = 0; p < G; ++p) {
        const std::size_t j = a + (p < m ? p : m - 1);
        const std::size_t ahead = next + p < queued && queue_[next + p].len == len ? next + p : j;
        x[p] = queue_[j].x;
        y[p] = queue_[j].y;
        nx[p] = queue_[ahead].x;
        ny[p] = queue_[ahead].y;
      }
      const std::size_t hl = detail::min_of<std::size_t>(len, kHead);
      for (std::size_t p = 0; p < m; ++p) {
        const Pair& q = queue_[a + p];
        if (q.fingerprint == identity::kNone) continue;
        // A whole kHead bytes (all but the tiniest tensors) as a copy of
        // constant size, a few vector moves: the copy of `hl` bytes is
        // compiled to a loop of 8-byte moves (100,000 small tensors,
        // callgrind: 76 instructions a hint, 3.8M in all; 0.6M this way).
        if (hl == kHead)
          std::memcpy(head[heads], q.x, kHead);
        else
          std::memcpy(head[heads], q.x, hl);
        head_of[heads] = q.fingerprint;
        head_len[heads++] = static_cast<std::uint32_t>(hl);
      }
      bool eq[G];
      equal_group_ahead(x, y, len, nx, ny, eq);
      for (std::size_t p = 0; p < m; ++p) settle(queue_[a + p], eq[p]);
      a = next;
    }
    for (std::size_t h = 0; h < heads; ++h) {
      prefix_[head_of[h]] = (*hash_)(head[h], head_len[h], identity::kPrefixSeed ^ seed_);
      // Released: assumed() may read it while other pairs are compared.
      __atomic_store_n(&has_prefix_[head_of[h]], std::uint8_t{1}, __ATOMIC_RELEASE);
    }
  }

  /// Records pair p's verdict.
  void settle(const Pair& p, bool equal) noexcept {
    verdict_[p.input] = equal ? EarlyVerdicts::kEqual : EarlyVerdicts::kDiffer;
    if (!equal) differ_.store(true, detail::Order::relaxed);  // rare: no line bounces
  }

  const Hash* hash_;
  /// Mixed into the fingerprint's seed: the engine's IdentityOptions::seed.
  std::uint64_t seed_;
  bool shared_;
  std::size_t n_;
  Arena arena_;
  Pair* queue_;
  std::uint8_t* verdict_;
  std::uint8_t* has_prefix_;
  std::uint8_t* fingerprinted_;  ///< producer only: the hint's first pair is queued
  std::uint64_t* prefix_;
  std::uint8_t* assumed_;         ///< producer only: assumed()'s verdicts
  std::uint8_t* assumed_prefix_;  ///< producer only: assumed()'s fingerprints taken
  std::size_t queued_ = 0;        ///< producer only
  std::uint64_t queued_bytes_ = 0;  ///< producer only
  static constexpr std::size_t kPublish = 32;
  alignas(64) detail::Atomic<std::size_t> published_{0};
  alignas(64) detail::Atomic<std::size_t> claimed_{0};
  alignas(64) detail::Atomic<bool> closed_{false};
  detail::Atomic<bool> differ_{false};  ///< some pair was not equal
};

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_EARLY_PAIRS_HPP
