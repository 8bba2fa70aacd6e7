// wdedup/detail/identity.hpp — the content-identity engine: which of N byte
// ranges hold identical bytes. Build-time half. Exact whatever the hash: a
// hash only nominates candidates, every merge is confirmed byte for byte.
//
// Budget: about one read of the input, so no byte is read twice from memory
// when that can be avoided. Inputs are grouped by size and a one-cache-line
// prefix fingerprint; then every candidate group is walked block by block,
// each member compared with the group's first member (the leader) while the
// leader's block is hot in cache, and only members that disagree with it are
// hashed, right after their comparison. Members proven unique stop being
// read. Per-call arrays come from one huge-page arena (detail/arena.hpp).
#ifndef WDEDUP_DETAIL_IDENTITY_HPP
#define WDEDUP_DETAIL_IDENTITY_HPP

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "wdedup/detail/arena.hpp"
#include "wdedup/detail/atomic.hpp"
#include "wdedup/detail/equal_run.hpp"
#include "wdedup/detail/flat_index.hpp"
#include "wdedup/detail/identity_stats.hpp"
#include "wdedup/detail/min_max.hpp"
#include "wdedup/detail/threads.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/runtime/span.hpp"

namespace wdedup {
namespace detail {

struct IdentityOptions {
  /// Worker threads; 0 = every online core. Changes speed
  /// only: results and every count in IdentityStats are the same for any value.
  unsigned threads = 0;
  /// Refinement block (0 = the default; at least 64 bytes are used). Sets
  /// how much of a unique member is read before it is proven unique, and how
  /// work is split: one work item reads about 256 blocks. 64 KiB keeps a
  /// member's block and its leader's block in L2 together; against 16 KiB it
  /// measured as fast or faster, against 256 KiB twice as fast on distinct
  /// tensors that differ only near their end.
  std::size_t block_size = 64 * 1024;
  /// Mixed into the seeds of the prefix fingerprint and the block hashes
  /// (XORed with kPrefixSeed and kBlockSeed). 0: each call draws its own at
  /// random. With seeds anyone can read, bytes chosen to collide (XXH3 of
  /// 17-128 bytes multiplies words XORed with its secret plus the seed: a
  /// word equal to that zeroes the product) made one group of 65,536
  /// tensors of 128 bytes take 11.2 s instead of 0.06 s, and chosen
  /// fingerprints filled one stage-3 bucket (131,072 tensors: 5.0 s instead
  /// of 0.02 s). Results do not depend on it: every merge is confirmed
  /// byte for byte. A caller that fingerprinted ahead (EarlyVerdicts::prefix)
  /// passes the seed it used; with 0, such prefixes are not used.
  std::uint64_t seed = 0;
};

/// Work a caller did ahead of find_identical, on the same inputs and hints
/// (detail/early_pairs.hpp fills it while deduplicate() checks names). Each
/// span is empty or has one entry per input. Only exact facts: a verdict is
/// a byte-for-byte comparison, a prefix the engine's own fingerprint.
struct EarlyVerdicts {
  static constexpr std::uint8_t kUnknown = 0, kEqual = 1, kDiffer = 2;
  /// verdict[i]: whether input i equals its hint (kUnknown: not compared).
  Span<const std::uint8_t> verdict;
  /// has_prefix[i] != 0: prefix[i] is hash(first min(size, kPrefixBytes)
  /// bytes of input i, kPrefixSeed), the stage-2 fingerprint.
  Span<const std::uint8_t> has_prefix;
  Span<const std::uint64_t> prefix;
};

namespace identity {

constexpr std::uint32_t kNone = 0xffffffffu;
/// Bytes of the prefix fingerprint: one cache line. Enough to split unrelated
/// tensors of a size class into their duplicate groups; more costs far more
/// than it reads, as soon as a few lines of a page are touched the hardware
/// prefetcher streams the rest (measured on 100k tensors of 4 KiB: 256
/// bytes took 5-8x the time of 64).
constexpr std::size_t kPrefixBytes = 64;
/// Blocks read by one work item, over all its members: big enough that the
/// per-item bookkeeping vanishes, small enough to balance two or more threads.
constexpr std::size_t kItemBlocks = 256;
/// A big candidate group is split into member chunks of about this many
/// blocks for its first block; chunks are then merged by (hash, memcmp).
constexpr std::size_t kHeadChunkBlocks = 64;
constexpr std::size_t kMinChunkMembers = 8;
/// Classes of more than kItemBlocks members are swept instead (see
/// find_identical's stage (5), section 6 of its code): members against
/// their leader in steps of at most kSweepStep bytes (the leader's step
/// stays in L1), kSweepGroup members walked together (that many sequential
/// streams for the prefetchers), and kSweepChunk members per work item; a
/// group of members that leave the leader alike reads on in blocks of up
/// to kSweepBlock.
/// Measured on 2048 tensors of 256 KiB that differ only near their end
/// (the harness's adversarial workload), `deduplicate()` against a read
/// pass of the same bytes, medians of 11 in one process, two runs each:
/// - Zen 4 EPYC VM (32 KiB L1D), 2026-11-29, one thread: 16 KiB steps in
///   groups of 8 (the choice until then) 30.6-31.8 ms against a 18.3-20.1
///   ms read pass (0.58-0.65x); 2 KiB in groups of 4 23.4-24.7 ms
///   (0.79-0.82x), 1 KiB in groups of 4 or 2 KiB in groups of 6 as good;
///   2 KiB in groups of 8 or more, 32-46 ms; 4 KiB or more in any group,
///   25.5 ms or more; one or two members at a time, 27-41 ms. Two threads:
///   2 KiB x 4 17.0-17.5 ms against 16 KiB x 8 19.2-19.6 ms (read pass
///   15.1-15.8 ms). A kernel of its own showed why: one stream compared
///   with a 16 KiB block that should stay in L1 took 1.36-1.38x a read pass
///   of the stream, with a 4 KiB block 1.07-1.08x: the stream's lines push
///   the leader's out of a 32 KiB L1.
/// - Earlier (EPYC VM, 2026-11-23): 16 KiB in groups of 8 21 ms against
///   24 ms for one member after another (15 ms for a read pass); 8 KiB or
///   32 KiB, or groups of 4 to 32, no better. With 16 KiB in groups of 8
///   the harness measured 0.96x of the read pass on the Xeon VM and
///   0.54-0.57x on the Zen 5 EPYC VM (2026-11-28); the new sizes are not
///   measured on those.
/// - Zen 5 EPYC VM (48 KiB L1D), 2026-11-30: all of the above compared a
///   group's members one after another, the next one's lines prefetched;
///   there that took 0.55-0.59x of the read pass in the identity engine
///   alone, whatever the step (1-16 KiB) or group (2-8). Since then the
///   members of a group are read side by side in one loop (equal_run's
///   group_to_one): 0.78-0.79x, then 0.88-0.96x once the host was quieter,
///   for 2 KiB x 4 (two threads 0.83-0.87x); 1, 4, 8 and 16 KiB steps
///   within that spread (0.80-0.95x), groups of 8 0.71-0.77x. The Zen 4
///   EPYC and the Xeon have not run it.
constexpr std::size_t kSweepStep = 2 * 1024;
constexpr std::size_t kSweepGroup = 4;
constexpr std::size_t kSweepBlock = 16 * 1024;
constexpr std::size_t kSweepChunk = 64;
/// first_diff of a swept member equal to its leader to the end.
constexpr std::uint64_t kNoDiff = ~std::uint64_t{0};
/// Smallest block_size used: below a cache line, blocks only add overhead.
constexpr std::size_t kMinBlock = 64;
/// Seeds keep the prefix and block hashes independent of each other; each
/// call XORs its own random seed into both (IdentityOptions::seed).
constexpr std::uint64_t kPrefixSeed = 0x9e3779b97f4a7c15ull;
constexpr std::uint64_t kBlockSeed = 0xc2b2ae3d27d4eb4full;
/// A candidate's key is mix64(fingerprint ^ mix64(class + kClassSalt)), so
/// inputs of two sizes share a bucket only by chance. Only by chance: a
/// hash whose fingerprints cancel the class term gives every class one key,
/// and the grouping compares classes as well as keys.
constexpr std::uint64_t kClassSalt = 0x9e3779b97f4a7c15ull;

/// Stage timings (IdentityStats) on a monotonic clock, in seconds.
struct Clock {
  using time_point = double;
  static double now() noexcept { return monotonic_seconds(); }
};

inline double seconds_between(double a, double b) noexcept { return b - a; }

/// The caller's hash under seeds XORed with a call's own (IdentityOptions::seed).
template <class Hash>
struct SeededHash {
  const Hash& hash;
  std::uint64_t seed;
  std::uint64_t operator()(const void* p, std::size_t n, std::uint64_t s) const { return hash(p, n, s ^ seed); }
};

inline void prefetch_read(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}


/// Per-thread counters, summed after each parallel stage. Summing integers is
/// order-independent, so the totals are the same for any schedule.
struct Counters {
  std::uint64_t bytes_hashed = 0, byte_comparisons = 0, bytes_compared = 0, hash_collisions = 0;
  double hash_seconds = 0, compare_seconds = 0;

  void add_to(IdentityStats& s) const noexcept {
    s.bytes_hashed += bytes_hashed;
    s.byte_comparisons += byte_comparisons;
    s.bytes_compared += bytes_compared;
    s.hash_collisions += hash_collisions;
    s.hash_seconds += hash_seconds;
    s.compare_seconds += compare_seconds;
  }
};

inline bool equal_bytes(const std::uint8_t* a, const std::uint8_t* b, std::size_t n, Counters& c) noexcept {
  ++c.byte_comparisons;
  c.bytes_compared += n;
  return a == b || std::memcmp(a, b, n) == 0;
}

/// The representative of member j, members being bucketed one after another
/// by a hash key (a, b): the first earlier member under that key whose bytes
/// equal j's (`same(q)` compares them), tried in order along the chain
/// `next` of members with that key; a mismatch is a hash collision. If none
/// is equal, j is a representative itself, chained after the others (or the
/// key's first). So a hash only nominates: classes are exact for any hash.
template <class Same>
std::uint32_t bucket_and_confirm(FlatIndex& index, std::uint32_t* next, std::uint64_t a, std::uint64_t b,
                                 std::uint32_t j, const Same& same, Counters& c) {
  bool inserted = false;
  std::uint32_t q = index.find_or_insert(a, b, j, inserted);
  if (inserted) return j;
  for (;;) {
    if (same(q)) return q;
    ++c.hash_collisions;
    if (next[q] == kNone) {
      next[q] = j;
      return j;
    }
    q = next[q];
  }
}

/// Pairs (or members) compared in one equal_pairs()/equal_to_one() run:
/// pairs go four at a time, each four prefetching the next, so a run keeps
/// memory busy from its second group on; members go four side by side. 64
/// makes the unprefetched first group rare.
constexpr std::size_t kRun = 64;
/// Blocks up to this long go through those runs; longer ranges stream
/// well enough through memcmp alone (the prefetcher has time to ramp up).
constexpr std::size_t kRunMaxBytes = 64 * 1024;
/// Bytes of member blocks compared before the ones that differ from their
/// leader are hashed: half of a 1 MiB L2, so they are hashed from cache.
constexpr std::size_t kHotBytes = 512 * 1024;

/// equal_bytes() for `count` <= kRun pairs of `n` bytes (y == nullptr: each
/// x against `one`). Counts `count` comparisons of n bytes, whether or not
/// a pair stopped early, so counts do not depend on the kernel.
inline void equal_run(const std::uint8_t* const* x, const std::uint8_t* const* y, const std::uint8_t* one,
                      std::size_t count, std::size_t n, bool* eq, Counters& c) noexcept {
  c.byte_comparisons += count;
  c.bytes_compared += static_cast<std::uint64_t>(count) * n;
  if (y != nullptr)
    equal_pairs(x, y, count, n, eq);
  else
    equal_to_one(x, one, count, n, eq);
}

/// Classes of member positions, flattened: class i is items[ends[i-1], ends[i]).
struct ClassList {
  std::vector<std::uint32_t> items;
  std::vector<std::uint32_t> ends;

  void clear() noexcept {
    items.clear();
    ends.clear();
  }
  bool empty() const noexcept { return ends.empty(); }
  std::size_t size() const noexcept { return ends.size(); }
  std::uint32_t begin_of(std::size_t i) const noexcept { return i == 0 ? 0 : ends[i - 1]; }
  template <int = 0>
  void close() { ends.push_back(static_cast<std::uint32_t>(items.size())); }
};

/// Scratch of one worker thread, reused across items to avoid allocation.
struct alignas(64) Worker {
  Counters counters;
  std::vector<std::uint32_t> same, resid, rep, next, count, labels, positions;
  std::vector<std::uint64_t> resid_hash;
  std::vector<const std::uint8_t*> base;
  ClassList active, refined;
  FlatIndex index;
};

/// Runs fn(task, worker) for every task on up to workers.size() threads that
/// pull tasks from an atomic counter. Results must go to per-task slots, so
/// they do not depend on which thread ran what.
template <class Fn>
void run_tasks(std::size_t n_tasks, std::vector<Worker>& workers, const Fn& fn) {
  if (n_tasks == 0) return;
  const std::size_t n_threads = detail::min_of(workers.size(), n_tasks);
  detail::Atomic<std::size_t> next{0};
  // Workers pull tasks, so a thread that could not start only costs speed.
  run_workers(n_threads, [&](std::size_t w) {
    for (;;) {
      const std::size_t t = next.fetch_add(1, detail::Order::relaxed);
      if (t >= n_tasks) return;
      fn(t, workers[w]);
    }
  });
}

/// Cuts units (with byte weights) into tasks of about `target` bytes: the
/// scheduling grain. Units, not tasks, decide what is computed.
template <class Weights>
std::vector<std::size_t> cut_tasks(const Weights& weight, std::uint64_t target) {
  std::vector<std::size_t> ends;
  std::uint64_t acc = 0;
  for (std::size_t u = 0; u < weight.size(); ++u) {
    acc += weight[u];
    if (acc >= target) {
      ends.push_back(u + 1);
      acc = 0;
    }
  }
  if (ends.empty() ? !weight.empty() : ends.back() != weight.size()) ends.push_back(weight.size());
  return ends;
}

/// Splits one class of members (positions cls[0..n), in input order, all
/// labelled cls[0]) by the bytes [off, off + len) of each.
///
/// Members are first compared with the class leader cls[0] (up to kRun at
/// a time, four side by side): duplicates are the common case, and comparing with a block already
/// in L1/L2 costs less than hashing (XXH3 runs at about half of memcmp's
/// speed without AVX2). Only members that differ from the leader are hashed, then
/// bucketed by hash and confirmed against each earlier representative with
/// that hash (a mismatch is a collision: the next one is tried), so any hash
/// — even a constant — gives exact classes.
///
/// On return lab[m] is the first member of m's new class. Classes of two or
/// more members go to `out` (if given). If `rep_hash` is given, every class
/// representative's block hash is stored there (for merging chunks).
/// Returns whether anything was hashed.
template <class Hash>
bool refine_block(const std::uint8_t* const* base, const std::uint32_t* cls, std::size_t n, std::size_t off,
                  std::size_t len, const Hash& hash, std::uint32_t* lab, std::uint64_t* rep_hash,
                  ClassList* out, Worker& w) {
  Counters& c = w.counters;
  const Clock::time_point t0 = Clock::now();
  double hash_time = 0;
  const std::uint32_t leader = cls[0];
  const std::uint8_t* lead = base[leader] + off;
  if (rep_hash != nullptr) {
    rep_hash[leader] = hash(lead, len, kBlockSeed);
    c.bytes_hashed += len;
    const Clock::time_point t1 = Clock::now();
    hash_time += seconds_between(t0, t1);
  }
  w.same.clear();
  w.resid.clear();
  w.resid_hash.clear();
  w.same.push_back(leader);
  // A member that left the leader is hashed right after its comparison,
  // while its block is still in L1/L2: hashing all of them afterwards read
  // every such block from memory a second time (on 2048 tensors that all
  // differ from their leader in one block, a tenth of the whole pass).
  auto hash_left = [&](const std::uint8_t* const* x, const bool* eq, std::size_t cnt) {
    const Clock::time_point th = Clock::now();
    for (std::size_t g = 0; g < cnt; ++g)
      if (!eq[g]) w.resid_hash.push_back(hash(x[g], len, kBlockSeed));
    hash_time += seconds_between(th, Clock::now());
  };
  const std::uint8_t* x[kRun];
  bool eq[kRun];
  // Members per run: at most kRun, and no more than half of L2 holds, so
  // the blocks of a run are still cached when the ones that differ are hashed.
  const std::size_t run = len <= kRunMaxBytes ? detail::max_of<std::size_t>(1, detail::min_of(kRun, kHotBytes / len)) : 1;
  for (std::size_t i = 1; i < n; i += run) {
    const std::size_t cnt = detail::min_of(run, n - i);
    bool any_left = false;
    for (std::size_t g = 0; g < cnt; ++g) x[g] = base[cls[i + g]] + off;
    if (len <= kRunMaxBytes) {
      equal_run(x, nullptr, lead, cnt, len, eq, c);
    } else {
      eq[0] = equal_bytes(x[0], lead, len, c);
    }
    for (std::size_t g = 0; g < cnt; ++g) {
      (eq[g] ? w.same : w.resid).push_back(cls[i + g]);
      any_left |= !eq[g];
    }
    if (any_left) hash_left(x, eq, cnt);
  }
  if (out != nullptr && w.same.size() >= 2) {
    out->items.insert(out->items.end(), w.same.begin(), w.same.end());
    out->close();
  }
  const std::size_t r = w.resid.size();
  if (r == 0) {
    c.compare_seconds += seconds_between(t0, Clock::now()) - hash_time;
    c.hash_seconds += hash_time;
    return rep_hash != nullptr;
  }
  c.bytes_hashed += static_cast<std::uint64_t>(r) * len;

  // Bucket by hash; confirm against the representatives in order.
  w.index.reset(r);
  w.next.assign(r, kNone);  // next representative with the same hash
  w.rep.resize(r);
  for (std::size_t j = 0; j < r; ++j) {
    const std::uint8_t* p = base[w.resid[j]] + off;
    auto same = [&](std::uint32_t q) { return equal_bytes(p, base[w.resid[q]] + off, len, c); };
    w.rep[j] = bucket_and_confirm(w.index, w.next.data(), w.resid_hash[j], 0, static_cast<std::uint32_t>(j), same, c);
  }

  w.count.assign(r, 0);
  for (std::size_t j = 0; j < r; ++j) {
    lab[w.resid[j]] = w.resid[w.rep[j]];
    ++w.count[w.rep[j]];
    if (rep_hash != nullptr && w.rep[j] == j) rep_hash[w.resid[j]] = w.resid_hash[j];
  }
  if (out != nullptr) {
    // Emit classes of two or more, members in order; next[] (free now) holds
    // each emitted representative's write cursor.
    std::size_t cursor = out->items.size();
    for (std::size_t j = 0; j < r; ++j) {
      w.next[j] = kNone;
      if (w.rep[j] != j || w.count[j] < 2) continue;
      w.next[j] = static_cast<std::uint32_t>(cursor);
      cursor += w.count[j];
      out->ends.push_back(static_cast<std::uint32_t>(cursor));
    }
    out->items.resize(cursor);
    for (std::size_t j = 0; j < r; ++j) {
      const std::uint32_t q = w.rep[j];
      if (w.next[q] != kNone) out->items[w.next[q]++] = w.resid[j];
    }
  }
  c.compare_seconds += seconds_between(t0, Clock::now()) - hash_time;
  c.hash_seconds += hash_time;
  return true;
}

/// Refines members w.base[0..k), equal before `lo` and all labelled 0 in
/// w.labels, over bytes [lo, hi) in blocks of `blk`: on return w.labels[j]
/// is the first member of j's class. Pairs are settled by one comparison of
/// the rest of the range; bigger classes block by block (refine_block), and
/// members proven unique stop being read. Returns whether anything was hashed.
template <class Hash>
bool refine_range(std::size_t k, std::size_t lo, std::size_t hi, std::size_t blk, const Hash& hash, Worker& w) {
  w.active.clear();
  for (std::size_t j = 0; j < k; ++j) w.active.items.push_back(static_cast<std::uint32_t>(j));
  w.active.close();
  bool hashed = false;
  for (std::size_t off = lo; off < hi && !w.active.empty(); off += blk) {
    const std::size_t len = detail::min_of(blk, hi - off);
    w.refined.clear();
    for (std::size_t a = 0; a < w.active.size(); ++a) {
      const std::uint32_t* cl = w.active.items.data() + w.active.begin_of(a);
      const std::size_t cn = w.active.ends[a] - w.active.begin_of(a);
      if (cn == 2) {
        // Two members: the rest of the range in one memcmp, no hashing.
        const Clock::time_point t0 = Clock::now();
        if (!equal_bytes(w.base[cl[0]] + off, w.base[cl[1]] + off, hi - off, w.counters)) w.labels[cl[1]] = cl[1];
        w.counters.compare_seconds += seconds_between(t0, Clock::now());
        continue;
      }
      hashed |= refine_block(w.base.data(), cl, cn, off, len, hash, w.labels.data(), nullptr, &w.refined, w);
    }
    std::swap(w.active, w.refined);
  }
  return hashed;
}

}  // namespace identity

/// Which inputs hold identical bytes: result[i] is the smallest j with
/// bytes(inputs[j]) == bytes(inputs[i]), so result[i] == i for the first
/// occurrence of each content. Exact for any `hash` (it only proposes
/// candidates), and the result and all counts in `*stats` (if non-null) are
/// the same for any thread count. Inputs must stay readable during the call;
/// they may overlap or repeat. Requires inputs.size() < 2^32 - 1.
///
/// `hints` (empty, or one per input) lets a caller nominate, for input i,
/// an earlier input hints[i] < i that probably holds the same bytes (any
/// other value: no hint); deduplicate() nominates the first tensor of the
/// same name. A hint is only a candidate: it is compared byte for byte like
/// any other, so any hints, even wrong ones, give the same result.
///
/// `early` hands over comparisons with hints and fingerprints a caller has
/// already made (see EarlyVerdicts): the engine uses them instead of making
/// them again, and counts them in `*stats` as if it had (so the counts do
/// not depend on who made them; only compare_seconds leaves them out).
///
/// Stages: (1) group by size; empty, unique-size and same-pointer inputs are
/// settled without reading. (1b) A small input (up to kRunMaxBytes) of the
/// same size as its hint is compared with it; if equal, it is settled by
/// that comparison and leaves its size class; if not, a candidate group of
/// just the two is not compared again in (3). (2) Size classes of three or
/// more distinct buffers are split by a fingerprint of their first kPrefixBytes, so
/// duplicates meet in small candidate groups (a two-buffer class is a group
/// as it is). (3) The first block of every group is refined: pairs by
/// comparison (runs of up to kRun pairs, each prefetching the next, when
/// small), bigger groups by refine_block, very big ones in member chunks
/// merged afterwards. (4) What is still together is refined over the rest
/// of its bytes: classes of up to kItemBlocks members in ranges of about
/// kItemBlocks blocks, one work item per (class, range), a class's ranges
/// independent and their partitions intersected at the end; (5) bigger
/// classes are swept, chunks of kSweepChunk members against the class's
/// first, each up to its first difference, then merged per class.
/// Work items (a pair, a chunk of members, a range of a class's bytes) are
/// cut by sizes, counts and block_size only; the thread count sets only how
/// many items a task takes (task_target). Threads take tasks from an atomic
/// counter and write to per-item slots, and a run of small pairs, which
/// ends at its task's end, is counted pair by pair, so the result and the
/// counts are the same for any thread count.
///
/// Runs on opts.threads threads started per stage (POSIX threads; if one
/// cannot start, the others do its share). Allocation failure throws
/// std::bad_alloc, as any std::vector would.
template <class Hash>
std::vector<std::uint32_t> find_identical(Span<const ByteSpan> inputs, Span<const std::uint32_t> hints,
                                          const Hash& user_hash, const IdentityOptions& opts, IdentityStats* stats,
                                          const EarlyVerdicts& early_in = {}) {
  static_assert(std::is_invocable_r_v<std::uint64_t, const Hash&, const void*, std::size_t, std::uint64_t>,
                "find_identical(inputs, hash, opts, stats) requires 'hash' to be callable as "
                "std::uint64_t(const void* data, std::size_t size, std::uint64_t seed) const — "
                "see wdedup::Xxh3Hash in wdedup/hash.hpp");
  using namespace identity;
  // Every hash below is under this call's seeds (see IdentityOptions::seed);
  // fingerprints made ahead are used only under the seed they were made with.
  const SeededHash<Hash> hash{user_hash, opts.seed != 0 ? opts.seed : unpredictable_u64() | 1};
  EarlyVerdicts early = early_in;
  if (opts.seed == 0) {
    early.has_prefix = {};
    early.prefix = {};
  }
  const std::size_t n = inputs.size();
  assert(n < kNone && "find_identical: at most 2^32 - 2 inputs");
  assert((hints.empty() || hints.size() == n) && "find_identical: one hint per input, or none");
  assert((early.verdict.empty() || early.verdict.size() == n) && "find_identical: one verdict per input, or none");
  assert(early.has_prefix.size() == early.prefix.size() && (early.prefix.empty() || early.prefix.size() == n) &&
         "find_identical: one early prefix per input, or none");
  IdentityStats st;
  st.inputs = n;
  std::vector<std::uint32_t> result(n);
  for (std::size_t i = 0; i < n; ++i) result[i] = static_cast<std::uint32_t>(i);
  // Every per-input array below lives in one arena (see detail/arena.hpp:
  // first-touch page faults were the biggest cost on many small inputs).
  Arena arena(n * 96);

  const std::size_t block = detail::max_of(kMinBlock, opts.block_size != 0 ? opts.block_size : IdentityOptions{}.block_size);
  std::size_t n_threads = opts.threads != 0 ? opts.threads : hardware_threads();
  if (n_threads == 0) n_threads = 1;
  std::vector<Worker> workers(n_threads);
  Counters serial;  // work done outside parallel stages
  auto ptr = [&](std::uint32_t i) { return inputs[i].data(); };
  auto task_target = [&](std::uint64_t total) {
    return detail::clamp_to<std::uint64_t>(total / (n_threads * 16), 256u << 10, 64u << 20);
  };

  // -- 1. Size classes (stable). ---------------------------------------------
  // cls[i]: the size class of input i; kNone once i is settled unread
  // (empty, or the same buffer as an earlier input).
  ArenaVector<std::uint32_t> cls = arena_vector<std::uint32_t>(arena, n, kNone);
  std::vector<std::uint32_t> class_count;
  std::vector<std::uint64_t> class_size;
  // Pointers that rise through the inputs (one mapped file, allocations in
  // order) cannot repeat: the same-pointer check then needs no map.
  bool rising = true;
  FlatIndex index;
  {
    std::uint32_t first_empty = kNone, last_class = kNone;
    std::uint64_t last_size = 0;
    std::uintptr_t last_ptr = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t size = inputs[i].size();
      st.bytes_in += size;
      if (size == 0) {
        ++st.skipped_empty;
        if (first_empty == kNone) first_empty = static_cast<std::uint32_t>(i);
        result[i] = first_empty;
        continue;
      }
      const std::uintptr_t p = reinterpret_cast<std::uintptr_t>(inputs[i].data());
      rising = rising && p > last_ptr;
      last_ptr = p;
      if (last_class == kNone || size != last_size) {  // runs of one size are common
        bool inserted = false;
        last_class = index.find_or_insert(size, 0, static_cast<std::uint32_t>(class_size.size()), inserted);
        if (inserted) {
          class_size.push_back(size);
          class_count.push_back(0);
        }
        last_size = size;
      }
      cls[i] = last_class;
      ++class_count[last_class];
    }
  }
  const std::size_t n_classes = class_size.size();

  // -- 2. Same pointers; what each class needs. -----------------------------
  enum : std::uint8_t { kUnique = 0, kPairClass = 1, kFingerprint = 2 };
  std::vector<std::uint8_t> class_role(n_classes);
  std::vector<std::uint32_t> aliases;  // result[i] holds the earlier input with i's pointer
  if (!rising) {
    // Members of each class in input order; repeats of a pointer (or of a
    // pointer seen before within the class) become aliases.
    std::vector<std::uint32_t> begin(n_classes + 1, 0);
    ArenaVector<std::uint32_t> members =
        arena_vector<std::uint32_t>(arena, static_cast<std::size_t>(n - st.skipped_empty));
    for (std::size_t c = 0; c < n_classes; ++c) begin[c + 1] = begin[c] + class_count[c];
    {
      std::vector<std::uint32_t> cursor(begin.begin(), begin.end() - 1);
      for (std::size_t i = 0; i < n; ++i)
        if (cls[i] != kNone) members[cursor[cls[i]]++] = static_cast<std::uint32_t>(i);
    }
    for (std::size_t c = 0; c < n_classes; ++c) {
      const std::uint32_t* m = members.data() + begin[c];
      const std::size_t cnt = class_count[c];
      bool monotonic = true;
      auto at = [&](std::size_t j) { return reinterpret_cast<std::uintptr_t>(ptr(m[j])); };
      for (std::size_t j = 1; j < cnt && monotonic; ++j) monotonic = at(j - 1) < at(j);
      if (!monotonic) {
        monotonic = true;
        for (std::size_t j = 1; j < cnt && monotonic; ++j) monotonic = at(j - 1) > at(j);
      }
      if (monotonic) continue;
      index.reset(cnt);
      for (std::size_t j = 0; j < cnt; ++j) {
        bool inserted = false;
        const std::uint32_t first = index.find_or_insert(at(j), 0, m[j], inserted);
        if (inserted) continue;
        result[m[j]] = first;
        cls[m[j]] = kNone;
        aliases.push_back(m[j]);
        --class_count[c];  // from here on: distinct buffers of the class
      }
    }
    st.skipped_same_pointer = aliases.size();
  }

  // -- Hints: stage (1b) above. ------------------------------------------------
  // A program repeats most weights under one name in every method, so a
  // tensor is usually equal to its hint: one comparison settles it, and it
  // is neither fingerprinted nor grouped (100,000 tensors of 4 KiB, each
  // hinted at its duplicate: the engine took 33.8 ms against 38.5 ms, one
  // thread). Only small inputs: a big one's fingerprint and grouping cost
  // nothing beside its bytes, and stage 4 splits its bytes across threads.
  // hinted: inputs equal to their hint, in input order; result[i] holds the
  // hint until the end (a hint may be hinted itself, so increasing order).
  ArenaVector<std::uint32_t> hinted = arena_vector<std::uint32_t>(arena);
  // failed_hint[i] != 0: input i was compared with hints[i] and differs
  // from it (null: no hint failed). Where the two are later a candidate
  // group of their own, the group is settled by that comparison, not read
  // again: methods that share names but not bytes (a fine-tuned copy under
  // the same names; the harness's same-names workload, 100,000 tensors of
  // 4 KiB, each of the second method's unlike its namesake in the last
  // byte) read every such pair twice, 409.6 MB compared instead of 204.8.
  std::uint8_t* failed_hint = nullptr;
  if (!hints.empty()) {
    // Reserved whole (a bump in the arena): grown pair by pair they were
    // copied again at every doubling.
    ArenaVector<std::uint32_t> tried = arena_vector<std::uint32_t>(arena);
    ArenaVector<std::uint64_t> weight = arena_vector<std::uint64_t>(arena);
    // verdict[a] of tried[a]: the caller's (counted here as if compared
    // here), or kUnknown until the tasks below compare it.
    ArenaVector<std::uint8_t> verdict = arena_vector<std::uint8_t>(arena);
    tried.reserve(n);
    weight.reserve(n);
    verdict.reserve(n);
    hinted.reserve(n);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t h = hints[i];
      if (h >= i || cls[i] == kNone || cls[h] != cls[i] || inputs[i].size() > kRunMaxBytes) continue;
      const std::uint8_t v = early.verdict.empty() ? EarlyVerdicts::kUnknown : early.verdict[i];
      tried.push_back(static_cast<std::uint32_t>(i));
      verdict.push_back(v);
      weight.push_back(v == EarlyVerdicts::kUnknown ? 2 * inputs[i].size() : 0);
      total += weight.back();
      if (v != EarlyVerdicts::kUnknown) {
        ++serial.byte_comparisons;
        serial.bytes_compared += inputs[i].size();
      }
    }
    const std::vector<std::size_t> tasks = total == 0 ? std::vector<std::size_t>() : cut_tasks(weight, task_target(total));
    run_tasks(tasks.size(), workers, [&](std::size_t t, Worker& w) {
      const Clock::time_point t0 = Clock::now();
      const std::uint8_t* x[kRun];
      const std::uint8_t* y[kRun];
      std::size_t at[kRun];
      bool eq[kRun];
      for (std::size_t a = t == 0 ? 0 : tasks[t - 1], end = tasks[t]; a < end;) {
        if (verdict[a] != EarlyVerdicts::kUnknown) {
          ++a;
          continue;
        }
        // A run: up to kRun pairs still unknown, of one length.
        const std::size_t len = inputs[tried[a]].size();
        std::size_t cnt = 0;
        for (; cnt < kRun && a < end; ++a) {
          if (verdict[a] != EarlyVerdicts::kUnknown) continue;
          if (inputs[tried[a]].size() != len) break;
          at[cnt] = a;
          x[cnt] = ptr(hints[tried[a]]);
          y[cnt] = ptr(tried[a]);
          ++cnt;
        }
        equal_run(x, y, nullptr, cnt, len, eq, w.counters);
        for (std::size_t g = 0; g < cnt; ++g) verdict[at[g]] = eq[g] ? EarlyVerdicts::kEqual : EarlyVerdicts::kDiffer;
      }
      w.counters.compare_seconds += seconds_between(t0, Clock::now());
    });
    for (std::size_t a = 0; a < tried.size(); ++a) {
      if (verdict[a] == EarlyVerdicts::kDiffer) {
        if (failed_hint == nullptr) {
          failed_hint = arena.alloc<std::uint8_t>(n);
          std::memset(failed_hint, 0, n);
        }
        failed_hint[tried[a]] = 1;
      }
      if (verdict[a] != EarlyVerdicts::kEqual) continue;
      const std::uint32_t i = tried[a];
      result[i] = hints[i];
      --class_count[cls[i]];
      cls[i] = kNone;
      hinted.push_back(i);
    }
    st.matched_hint = hinted.size();
  }
  std::size_t n_cand = 0;
  for (std::size_t c = 0; c < n_classes; ++c) {
    const std::uint32_t cnt = class_count[c];
    class_role[c] = cnt == 1 ? kUnique : cnt == 2 ? kPairClass : kFingerprint;
    if (cnt == 1) ++st.skipped_unique_size;
    if (cnt >= 2) n_cand += cnt;
    if (cnt >= 3) st.hashed += cnt;
  }

  // -- 3. Candidate groups. --------------------------------------------------
  // A candidate shares its size with another buffer. Its key: the size class
  // mixed with, for classes of three or more, a hash of its first
  // kPrefixBytes (a pair needs no fingerprint: it is a group already). For a
  // fixed class the key is a bijection of the hash, so equal (class, key)
  // means equal (class, fingerprint).
  auto is_cand = [&](std::size_t i) { return cls[i] != kNone && class_role[cls[i]] != kUnique; };
  auto early_prefix = [&](std::size_t i) { return !early.has_prefix.empty() && early.has_prefix[i] != 0; };
  std::uint64_t* const key = arena.alloc<std::uint64_t>(n);
  {
    constexpr std::size_t kChunk = 4096;
    // A small input's prefix is one cache line on a page of its own: start
    // loading a few candidates ahead, or each one costs a memory latency.
    constexpr std::size_t kAhead = 16;
    run_tasks((n + kChunk - 1) / kChunk, workers, [&](std::size_t t, Worker& w) {
      const Clock::time_point t0 = Clock::now();
      const std::size_t lo = t * kChunk, hi = detail::min_of(n, lo + kChunk);
      for (std::size_t i = lo; i < hi; ++i) {
        if (i + kAhead < hi && is_cand(i + kAhead) && !early_prefix(i + kAhead))
          prefetch_read(ptr(static_cast<std::uint32_t>(i + kAhead)));
        if (!is_cand(i)) continue;
        std::uint64_t fp = 0;
        if (class_role[cls[i]] == kFingerprint) {
          const std::size_t len = detail::min_of<std::size_t>(inputs[i].size(), kPrefixBytes);
          fp = early_prefix(i) ? early.prefix[i] : hash(ptr(static_cast<std::uint32_t>(i)), len, kPrefixSeed);
          w.counters.bytes_hashed += len;
        }
        key[i] = mix64(fp ^ mix64(cls[i] + kClassSalt));
      }
      w.counters.hash_seconds += seconds_between(t0, Clock::now());
    });
  }
  // Group candidates by (class, key): bucket by the top bits of the key
  // (about four candidates per bucket), then match exactly within each
  // bucket.
  //   lead[i]: the first candidate of i's group; rank[i]: i's place in it;
  //   size_at[l] for a lead l: the group's size, then its first slot.
  // One thread: these passes write lead/rank/size_at at scattered inputs,
  // and threads working on different buckets shared those cache lines. On
  // 100k inputs and 2 threads the parallel version took 5.7-8 ms against
  // 2-2.5 ms for this one.
  std::uint32_t* const lead = arena.alloc<std::uint32_t>(n);
  std::uint32_t* const rank = arena.alloc<std::uint32_t>(n);
  std::uint32_t* const size_at = arena.alloc<std::uint32_t>(n);
  ArenaVector<std::uint32_t> group_begin = arena_vector<std::uint32_t>(arena, 1, 0),
                             group_members = arena_vector<std::uint32_t>(arena);
  ArenaVector<const std::uint8_t*> group_ptr = arena_vector<const std::uint8_t*>(arena);
  ArenaVector<std::size_t> group_len = arena_vector<std::size_t>(arena);
  if (n_cand != 0) {
    unsigned bits = 0;
    while ((std::size_t{4} << bits) < n_cand) ++bits;
    const std::size_t n_buckets = std::size_t{1} << bits;
    auto bucket = [&](std::uint64_t k) -> std::size_t {
      return bits == 0 ? 0 : static_cast<std::size_t>(k >> (64 - bits));
    };
    // Counting sort by bucket: each bucket holds its candidates in input order.
    ArenaVector<std::uint32_t> cursor = arena_vector<std::uint32_t>(arena, n_buckets + 1, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (is_cand(i)) ++cursor[bucket(key[i]) + 1];
    for (std::size_t b = 0; b < n_buckets; ++b) cursor[b + 1] += cursor[b];
    ArenaVector<std::uint32_t> bucket_end = arena_vector<std::uint32_t>(arena, n_buckets);
    for (std::size_t b = 0; b < n_buckets; ++b) bucket_end[b] = cursor[b + 1];
    // Records are scattered whole, so the walk reads them in order.
    struct Rec {
      std::uint64_t key;
      std::uint32_t i, cls;
    };
    Rec* const order = arena.alloc<Rec>(n_cand);
    for (std::size_t i = 0; i < n; ++i)
      if (is_cand(i)) order[cursor[bucket(key[i])]++] = Rec{key[i], static_cast<std::uint32_t>(i), cls[i]};
    // The walk also counts the groups of two or more and their members.
    std::size_t n_grp = 0, n_slots = 0;
    for (std::size_t b = 0; b < n_buckets; ++b) {
      const std::size_t s0 = b == 0 ? 0 : bucket_end[b - 1];
      for (std::size_t t = s0; t < bucket_end[b]; ++t) {
        const Rec& r = order[t];
        std::uint32_t l = r.i;
        for (std::size_t q = s0; q < t; ++q) {
          const Rec& o = order[q];
          if (o.key == r.key && o.cls == r.cls && lead[o.i] == o.i) {
            l = o.i;
            break;
          }
        }
        lead[r.i] = l;
        if (l == r.i) {
          rank[r.i] = 0;
          size_at[l] = 1;
          continue;
        }
        rank[r.i] = size_at[l]++;
        if (size_at[l] == 2) ++n_grp;
        n_slots += size_at[l] == 2 ? 2 : 1;
      }
    }
    // Groups of two or more, numbered in order of first member (a lone
    // fingerprint is a unique content); group_ptr keeps the members' data
    // pointers in group order for the loops that walk them. A lead comes
    // before its members, so one pass numbers and places; size_at[l] of a
    // lead becomes its group's first slot (kNone: alone).
    group_begin.resize(n_grp + 1);
    group_len.resize(n_grp);
    group_members.resize(n_slots);
    group_ptr.resize(n_slots);
    std::uint32_t g = 0, slot = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!is_cand(i)) continue;
      if (lead[i] == i) {
        if (size_at[i] < 2) {
          size_at[i] = kNone;
          continue;
        }
        const std::uint32_t size = size_at[i];
        size_at[i] = slot;
        slot += size;
        group_begin[g + 1] = slot;
        group_len[g++] = inputs[i].size();
      }
      if (size_at[lead[i]] == kNone) continue;
      const std::uint32_t at = size_at[lead[i]] + rank[i];
      group_members[at] = static_cast<std::uint32_t>(i);
      group_ptr[at] = ptr(static_cast<std::uint32_t>(i));
    }
  }
  const std::size_t n_groups = group_begin.size() - 1;
  auto group_size = [&](std::size_t g) -> std::size_t { return group_begin[g + 1] - group_begin[g]; };
  auto group_bytes = [&](std::size_t g) -> std::size_t { return group_len[g]; };
  ArenaVector<std::uint8_t> group_hashed = arena_vector<std::uint8_t>(arena, n_groups, 0);
  // -- 4. First block of every candidate group (parallel). ------------------
  struct HeadUnit {
    std::uint32_t group, lo, hi;
  };
  ArenaVector<HeadUnit> head_units = arena_vector<HeadUnit>(arena);
  ArenaVector<std::uint64_t> head_weight = arena_vector<std::uint64_t>(arena);
  head_units.reserve(n_groups);  // one unit per group, more only for big groups
  head_weight.reserve(n_groups);
  ArenaVector<std::uint8_t> multi_chunk = arena_vector<std::uint8_t>(arena, n_groups, 0);
  for (std::size_t g = 0; g < n_groups; ++g) {
    const std::size_t k = group_size(g), h = detail::min_of(group_bytes(g), block);
    const std::size_t per = detail::max_of(kMinChunkMembers, kHeadChunkBlocks * block / h);
    const std::size_t chunks = k == 2 ? 1 : (k + per - 1) / per;
    multi_chunk[g] = chunks > 1;
    for (std::size_t j = 0; j < chunks; ++j) {
      head_units.push_back(HeadUnit{static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(j * k / chunks),
                                    static_cast<std::uint32_t>((j + 1) * k / chunks)});
      head_weight.push_back(static_cast<std::uint64_t>(head_units.back().hi - head_units.back().lo) * h);
    }
  }
  // head_lab[slot]: position (in its group) of the slot's first equal member.
  std::uint32_t* const head_lab = arena.alloc<std::uint32_t>(group_members.size());
  std::vector<std::uint64_t> rep_hash;
  // Every group has at least one unit, so more units than groups means a
  // group in several chunks.
  if (head_units.size() > n_groups) rep_hash.assign(group_members.size(), 0);
  ArenaVector<std::uint8_t> head_hashed = arena_vector<std::uint8_t>(arena, head_units.size(), 0);
  {
    std::uint64_t total = 0;
    for (std::uint64_t x : head_weight) total += x;
    const std::vector<std::size_t> tasks = cut_tasks(head_weight, task_target(total));
    run_tasks(tasks.size(), workers, [&](std::size_t t, Worker& w) {
      Clock::time_point pairs_t0{};
      bool in_pairs = false;
      auto is_pair = [&](const HeadUnit& x) { return x.hi - x.lo == 2 && group_size(x.group) == 2; };
      // A pair of an input and the hint it was found to differ from (its
      // members are in input order, the hint first): settled unread.
      auto failed_pair = [&](std::uint32_t g) {
        const std::uint32_t second = group_members[group_begin[g] + 1];
        return failed_hint != nullptr && failed_hint[second] != 0 &&
               hints[second] == group_members[group_begin[g]];
      };
      auto label_pair = [&](std::uint32_t g, bool equal) {
        std::uint32_t* l = head_lab + group_begin[g];
        l[0] = 0;
        l[1] = equal ? 0 : 1;
      };
      for (std::size_t u = t == 0 ? 0 : tasks[t - 1], end = tasks[t]; u < end;) {
        const HeadUnit hu = head_units[u];
        const std::uint8_t* const* gp = group_ptr.data() + group_begin[hu.group];
        std::uint32_t* lab = head_lab + group_begin[hu.group];
        const std::size_t h = detail::min_of(group_bytes(hu.group), block);
        if (is_pair(hu)) {
          // Pairs: no hashing. Runs of small ones of one size go through
          // equal_run, each pair prefetching the next; pairs are often
          // small, so runs of them are timed, not each pair.
          if (!in_pairs) pairs_t0 = Clock::now();
          in_pairs = true;
          const std::uint8_t* x[kRun];
          const std::uint8_t* y[kRun];
          std::uint32_t group_of[kRun];
          bool eq[kRun];
          std::size_t cnt = 0, taken = 0;  // pairs compared; units taken (failed hints too)
          if (h <= kRunMaxBytes) {
            for (; cnt < kRun && u + taken < end; ++taken) {
              const HeadUnit& v = head_units[u + taken];
              if (!is_pair(v) || detail::min_of(group_bytes(v.group), block) != h) break;
              if (failed_pair(v.group)) {
                label_pair(v.group, false);
                continue;
              }
              x[cnt] = group_ptr[group_begin[v.group]];
              y[cnt] = group_ptr[group_begin[v.group] + 1];
              group_of[cnt++] = v.group;
            }
            if (cnt != 0) equal_run(x, y, nullptr, cnt, h, eq, w.counters);
          } else {
            // (Hints are tried only up to kRunMaxBytes: no failed pair here.)
            cnt = taken = 1;
            group_of[0] = hu.group;
            eq[0] = equal_bytes(gp[0], gp[1], h, w.counters);
          }
          for (std::size_t g = 0; g < cnt; ++g) label_pair(group_of[g], eq[g]);
          u += taken;
          continue;
        }
        if (in_pairs) w.counters.compare_seconds += seconds_between(pairs_t0, Clock::now());
        in_pairs = false;
        const std::size_t cnt = hu.hi - hu.lo;
        w.positions.resize(cnt);
        for (std::size_t j = 0; j < cnt; ++j) {
          w.positions[j] = static_cast<std::uint32_t>(j);
          lab[hu.lo + j] = 0;
        }
        head_hashed[u] = refine_block(gp + hu.lo, w.positions.data(), cnt, 0, h, hash, lab + hu.lo,
                                      multi_chunk[hu.group] ? rep_hash.data() + group_begin[hu.group] + hu.lo : nullptr,
                                      nullptr, w);
        for (std::size_t j = 0; j < cnt; ++j) lab[hu.lo + j] += hu.lo;  // chunk position -> group position
        ++u;
      }
      if (in_pairs) w.counters.compare_seconds += seconds_between(pairs_t0, Clock::now());
    });
    for (std::size_t u = 0; u < head_units.size(); ++u) group_hashed[head_units[u].group] |= head_hashed[u];
  }
  // Merge the chunks of big groups: each chunk's representatives against the
  // earlier chunks' ones with the same hash. Sequential, but it touches one
  // block per distinct content per chunk.
  {
    std::vector<std::uint32_t> next, remap;
    const Clock::time_point t0 = Clock::now();
    for (std::size_t g = 0; g < n_groups; ++g) {
      if (!multi_chunk[g]) continue;
      const std::size_t k = group_size(g), h = detail::min_of(group_bytes(g), block);
      const std::uint8_t* const* gp = group_ptr.data() + group_begin[g];
      std::uint32_t* lab = head_lab + group_begin[g];
      const std::uint64_t* rh = rep_hash.data() + group_begin[g];
      index.reset(k);
      next.assign(k, kNone);
      remap.resize(k);
      for (std::size_t j = 0; j < k; ++j) {
        if (lab[j] != j) {  // not a chunk representative: follow its representative
          lab[j] = remap[lab[j]];
          continue;
        }
        auto same = [&](std::uint32_t q) { return equal_bytes(gp[j], gp[q], h, serial); };
        remap[j] = bucket_and_confirm(index, next.data(), rh[j], 0, static_cast<std::uint32_t>(j), same, serial);
        lab[j] = remap[j];
      }
    }
    serial.compare_seconds += seconds_between(t0, Clock::now());
  }

  // -- 5. The rest of the bytes, by (class, range) items (parallel). --------
  std::vector<std::uint32_t> body_begin{0}, body_members, body_group;
  {
    std::vector<std::uint32_t> count, cursor;
    for (std::size_t g = 0; g < n_groups; ++g) {
      const std::size_t k = group_size(g);
      const std::uint32_t* m = group_members.data() + group_begin[g];
      const std::uint32_t* lab = head_lab + group_begin[g];
      for (std::size_t j = 0; j < k; ++j) result[m[j]] = m[lab[j]];
      if (group_bytes(g) <= block) continue;
      count.assign(k, 0);
      for (std::size_t j = 0; j < k; ++j) ++count[lab[j]];
      cursor.assign(k, kNone);
      for (std::size_t j = 0; j < k; ++j) {
        if (lab[j] != j || count[j] < 2) continue;
        cursor[j] = static_cast<std::uint32_t>(body_members.size());
        body_members.resize(body_members.size() + count[j]);
        body_begin.push_back(static_cast<std::uint32_t>(body_members.size()));
        body_group.push_back(static_cast<std::uint32_t>(g));
      }
      for (std::size_t j = 0; j < k; ++j)
        if (cursor[lab[j]] != kNone) body_members[cursor[lab[j]]++] = m[j];
    }
  }
  const std::size_t n_body = body_group.size();
  struct BodyUnit {
    std::uint32_t cls;
    std::size_t lo, hi;  ///< a byte range, refined in blocks of `block`
  };
  std::vector<BodyUnit> body_units;
  std::vector<std::uint64_t> body_weight;
  std::vector<std::uint32_t> body_unit_begin{0};
  // Big classes are swept (below); the others are cut into (class, range)
  // items of about kItemBlocks blocks over all their members.
  struct SweepUnit {
    std::uint32_t cls, lo, hi;  ///< members [lo, hi) of the class (the leader, 0, is in none)
  };
  ArenaVector<SweepUnit> sweep_units = arena_vector<SweepUnit>(arena);
  std::vector<std::uint64_t> sweep_weight;
  std::vector<std::uint32_t> sweep_classes;
  const std::size_t sweep_step = detail::min_of(block, kSweepStep);
  const std::size_t sweep_block = detail::min_of(block, kSweepBlock);
  for (std::size_t c = 0; c < n_body; ++c) {
    const std::size_t k = body_begin[c + 1] - body_begin[c];
    const std::size_t size = inputs[body_members[body_begin[c]]].size();
    if (k > kItemBlocks) {
      sweep_classes.push_back(static_cast<std::uint32_t>(c));
      for (std::size_t lo = 1; lo < k; lo += kSweepChunk) {
        const std::size_t hi = detail::min_of(k, lo + kSweepChunk);
        sweep_units.push_back(SweepUnit{static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(lo),
                                        static_cast<std::uint32_t>(hi)});
        sweep_weight.push_back(static_cast<std::uint64_t>(hi - lo) * (size - block));
      }
      body_unit_begin.push_back(static_cast<std::uint32_t>(body_units.size()));
      continue;
    }
    // Saturated, not wrapped: in 32 bits a block of 32 MiB made 128 blocks
    // 2^32 = 0 bytes, and the loop below never advanced.
    const std::size_t per = kItemBlocks / k;
    const std::size_t range = block > SIZE_MAX / per ? SIZE_MAX : per * block;
    for (std::size_t lo = block; lo < size; lo += detail::min_of(range, size - lo)) {
      const std::size_t hi = lo + detail::min_of(range, size - lo);
      body_units.push_back(BodyUnit{static_cast<std::uint32_t>(c), lo, hi});
      body_weight.push_back(static_cast<std::uint64_t>(k) * (hi - lo));
    }
    body_unit_begin.push_back(static_cast<std::uint32_t>(body_units.size()));
  }
  // Labels of a (class, range) item, left empty when the range splits nothing.
  std::vector<std::vector<std::uint32_t>> body_lab(body_units.size());
  std::vector<std::uint8_t> body_hashed(body_units.size(), 0);
  {
    std::uint64_t total = 0;
    for (std::uint64_t x : body_weight) total += x;
    const std::vector<std::size_t> tasks = cut_tasks(body_weight, task_target(total));
    run_tasks(tasks.size(), workers, [&](std::size_t t, Worker& w) {
      for (std::size_t u = t == 0 ? 0 : tasks[t - 1]; u < tasks[t]; ++u) {
        const BodyUnit bu = body_units[u];
        const std::uint32_t* m = body_members.data() + body_begin[bu.cls];
        const std::size_t k = body_begin[bu.cls + 1] - body_begin[bu.cls];
        w.base.resize(k);
        for (std::size_t j = 0; j < k; ++j) w.base[j] = ptr(m[j]);
        w.labels.assign(k, 0);
        body_hashed[u] = refine_range(k, bu.lo, bu.hi, block, hash, w);
        for (std::size_t j = 0; j < k; ++j) {
          if (w.labels[j] != 0) {
            body_lab[u] = w.labels;
            break;
          }
        }
      }
    });
  }
  // A class's members are equal iff equal in every range: intersect the
  // range partitions, keeping each class labelled by its first member.
  {
    std::vector<std::uint32_t> lab;
    for (std::size_t c = 0; c < n_body; ++c) {
      const std::uint32_t* m = body_members.data() + body_begin[c];
      const std::size_t k = body_begin[c + 1] - body_begin[c];
      lab.assign(k, 0);
      bool split = false;
      for (std::size_t u = body_unit_begin[c]; u < body_unit_begin[c + 1]; ++u) {
        group_hashed[body_group[c]] |= body_hashed[u];
        const std::vector<std::uint32_t>& lr = body_lab[u];
        if (lr.empty()) continue;
        split = true;
        index.reset(k);
        for (std::size_t j = 0; j < k; ++j) {
          bool inserted = false;
          lab[j] = index.find_or_insert(lab[j], lr[j], static_cast<std::uint32_t>(j), inserted);
        }
      }
      if (split)
        for (std::size_t j = 0; j < k; ++j) result[m[j]] = m[lab[j]];
    }
  }

  // -- 6. Big classes, swept (parallel, then merged per class). -----------
  // Every member is compared with the class leader step after step (of
  // sweep_step bytes) up to its first difference, where that step is hashed
  // at once (it is in L1) and the member stops. A member equal to the
  // leader to the end is in the leader's class. Two members whose first
  // differences fall in different steps differ (one of them equals the
  // leader there, the other does not); two whose first differences share a
  // step are equal before it, so they are bucketed by (step, hash of that
  // step), confirmed byte for byte, and only a confirmed group of two or
  // more reads on. Each member's bytes are read once, in kSweepGroup
  // sequential streams, against a leader step that stays in L1; a (class,
  // range) item would read every member's block at a stride of a whole
  // tensor, which the prefetchers cannot follow.
  if (!sweep_classes.empty()) {
    const std::size_t slots = body_members.size();
    std::uint64_t* const first_diff = arena.alloc<std::uint64_t>(slots);
    std::uint64_t* const diff_hash = arena.alloc<std::uint64_t>(slots);
    std::uint64_t total = 0;
    for (std::uint64_t x : sweep_weight) total += x;
    const std::vector<std::size_t> tasks = cut_tasks(sweep_weight, task_target(total));
    run_tasks(tasks.size(), workers, [&](std::size_t t, Worker& w) {
      const Clock::time_point t0 = Clock::now();
      double hash_time = 0;
      const std::uint8_t* x[kSweepGroup];
      bool eq[kSweepGroup];
      std::uint32_t live[kSweepGroup];
      for (std::size_t u = t == 0 ? 0 : tasks[t - 1]; u < tasks[t]; ++u) {
        const SweepUnit su = sweep_units[u];
        const std::uint32_t* m = body_members.data() + body_begin[su.cls];
        const std::size_t at = body_begin[su.cls];
        const std::size_t size = inputs[m[0]].size();
        const std::uint8_t* leader_bytes = ptr(m[0]);
        for (std::size_t g0 = su.lo; g0 < su.hi; g0 += kSweepGroup) {
          std::size_t nl = detail::min_of<std::size_t>(kSweepGroup, su.hi - g0);
          for (std::size_t i = 0; i < nl; ++i) live[i] = static_cast<std::uint32_t>(g0 + i);
          for (std::size_t off = block; off < size && nl > 0; off += sweep_step) {
            const std::size_t len = detail::min_of(sweep_step, size - off);
            for (std::size_t i = 0; i < nl; ++i) x[i] = ptr(m[live[i]]) + off;
            equal_run(x, nullptr, leader_bytes + off, nl, len, eq, w.counters);
            std::size_t keep = 0;
            for (std::size_t i = 0; i < nl; ++i) {
              if (eq[i]) {
                live[keep++] = live[i];
                continue;
              }
              const Clock::time_point th = Clock::now();
              first_diff[at + live[i]] = off;
              diff_hash[at + live[i]] = hash(x[i], len, kBlockSeed);
              w.counters.bytes_hashed += len;
              hash_time += seconds_between(th, Clock::now());
            }
            nl = keep;
          }
          for (std::size_t i = 0; i < nl; ++i) first_diff[at + live[i]] = kNoDiff;
        }
      }
      w.counters.hash_seconds += hash_time;
      w.counters.compare_seconds += seconds_between(t0, Clock::now()) - hash_time;
    });
    // Merge each class: bucket by (first difference, its step's hash),
    // confirm against the bucket's representatives in order (a mismatch is
    // a hash collision: the next one is tried), then read on for confirmed
    // groups of two or more. Sequential: it reads one step per member that
    // shares a bucket, nothing for the others.
    const Clock::time_point t0 = Clock::now();
    Worker& w = workers[0];
    std::vector<std::uint32_t> lab, next, order, cursor;
    for (std::uint32_t c : sweep_classes) {
      const std::uint32_t* m = body_members.data() + body_begin[c];
      const std::uint64_t* fd = first_diff + body_begin[c];
      const std::uint64_t* dh = diff_hash + body_begin[c];
      const std::size_t k = body_begin[c + 1] - body_begin[c];
      const std::size_t size = inputs[m[0]].size();
      lab.assign(k, 0);
      next.assign(k, kNone);
      index.reset(k);
      bool any_diff = false;
      for (std::size_t j = 1; j < k; ++j) {
        if (fd[j] == kNoDiff) continue;
        any_diff = true;
        const std::size_t off = static_cast<std::size_t>(fd[j]), len = detail::min_of(sweep_step, size - off);
        auto same = [&](std::uint32_t q) { return equal_bytes(ptr(m[j]) + off, ptr(m[q]) + off, len, w.counters); };
        lab[j] = bucket_and_confirm(index, next.data(), dh[j], fd[j], static_cast<std::uint32_t>(j), same, w.counters);
      }
      if (!any_diff) continue;  // all equal to the leader: result already says so
      group_hashed[body_group[c]] = 1;
      // Confirmed groups of two or more not yet read to the end: refine the
      // rest of their bytes. Members of a group in order, by counting sort.
      cursor.assign(k + 1, 0);
      for (std::size_t j = 1; j < k; ++j)
        if (lab[j] != 0) ++cursor[lab[j] + 1];
      for (std::size_t j = 0; j < k; ++j) cursor[j + 1] += cursor[j];
      order.resize(cursor[k]);
      for (std::size_t j = 1; j < k; ++j)
        if (lab[j] != 0) order[cursor[lab[j]]++] = static_cast<std::uint32_t>(j);
      for (std::size_t r = 1, b = 0; r < k; ++r) {
        if (lab[r] != r) continue;
        const std::size_t e = cursor[r], cnt = e - b;  // cursor[r]: end of r's members
        const std::size_t from = static_cast<std::size_t>(fd[r]);  // an offset into the tensor: fits
        const std::size_t done = from + detail::min_of(sweep_step, size - from);
        if (cnt >= 2 && done < size) {
          w.base.resize(cnt);
          for (std::size_t i = 0; i < cnt; ++i) w.base[i] = ptr(m[order[b + i]]);
          w.labels.assign(cnt, 0);
          refine_range(cnt, done, size, sweep_block, hash, w);
          for (std::size_t i = 0; i < cnt; ++i) lab[order[b + i]] = order[b + w.labels[i]];
        }
        b = e;
      }
      for (std::size_t j = 0; j < k; ++j) result[m[j]] = m[lab[j]];
    }
    serial.compare_seconds += seconds_between(t0, Clock::now());
  }

  for (std::size_t g = 0; g < n_groups; ++g)
    if (!group_hashed[g]) st.compared_directly += group_size(g);
  // Hinted inputs first, in increasing order (a hint may be hinted
  // itself), then aliases: an alias's target (the first input with its
  // pointer) may be hinted, while a hint's target is never an alias (the
  // hint stage skips inputs without a class). Each then reads a final
  // result: the first input with its bytes.
  for (std::uint32_t i : hinted) result[i] = result[result[i]];
  for (std::uint32_t i : aliases) result[i] = result[result[i]];
  if (stats != nullptr) {
    serial.add_to(st);
    for (const Worker& w : workers) w.counters.add_to(st);
    *stats = st;
  }
  return result;
}

/// find_identical without hints.
template <class Hash>
std::vector<std::uint32_t> find_identical(Span<const ByteSpan> inputs, const Hash& hash,
                                          const IdentityOptions& opts, IdentityStats* stats) {
  return find_identical(inputs, Span<const std::uint32_t>(), hash, opts, stats);
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_IDENTITY_HPP
