// wdedup/detail/identity_stats.hpp — the counters of the identity pass,
// shared by the engine that fills them (detail/identity.hpp) and the report
// that prints them (report.hpp), so the report needs no engine headers.
// Build-time half.
#ifndef WDEDUP_DETAIL_IDENTITY_STATS_HPP
#define WDEDUP_DETAIL_IDENTITY_STATS_HPP

#include <cstdint>

namespace wdedup {
namespace detail {

/// What find_identical did. Every count is the same for any thread count;
/// only the two timings vary from run to run.
struct IdentityStats {
  std::uint64_t inputs = 0, bytes_in = 0;
  /// Size 0: equal to each other, never read.
  std::uint64_t skipped_empty = 0;
  /// The only input of its size (same-pointer copies and matched hints
  /// aside): never read, unless as a hint.
  std::uint64_t skipped_unique_size = 0;
  /// Same pointer and size as an earlier input: equal to it, not read.
  std::uint64_t skipped_same_pointer = 0;
  /// Equal to the earlier input the caller hinted at (deduplicate(): the
  /// first tensor of the same name), found by that one comparison: neither
  /// fingerprinted nor grouped. (The unique-size count leaves these aside.)
  std::uint64_t matched_hint = 0;
  /// Inputs of candidate groups (same size and, for sizes shared by three or
  /// more buffers, same prefix fingerprint) resolved by byte comparison alone,
  /// no block hashed: every pair, and groups whose members all equal their
  /// first. Such an input also counts in `hashed` if it was fingerprinted.
  /// A pair of an input and the hint it was found to differ from is
  /// settled by that comparison (counted once, with the hints) and counts
  /// here too.
  std::uint64_t compared_directly = 0;
  /// Inputs whose bytes were hashed at least partly: every input, matched
  /// hints and same-pointer repeats aside, of a size three or more such
  /// inputs share (the fingerprint), and no other. It counts memory ranges,
  /// not contents: three equal copies in three places are three.
  std::uint64_t hashed = 0;
  std::uint64_t bytes_hashed = 0;
  /// Byte comparisons (memcmp or its lockstep equivalent) and the lengths
  /// they were given (a comparison may stop at the first difference).
  std::uint64_t byte_comparisons = 0;
  std::uint64_t bytes_compared = 0;
  /// Equal block hash, different bytes, seen by a comparison.
  std::uint64_t hash_collisions = 0;
  /// Wall time spent hashing / comparing, summed over threads (varies by
  /// run). Only the engine's own: comparisons and fingerprints a caller made
  /// ahead (find_identical's EarlyVerdicts; deduplicate() makes them while
  /// it checks names) are in the counts above, not in these.
  double hash_seconds = 0, compare_seconds = 0;
};

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_IDENTITY_STATS_HPP
