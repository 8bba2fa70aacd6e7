// benchmarks/two_level.hpp — the grouping of the harness's second reference,
// ExecuTorch's NamedDataStore as pytorch/executorch PR #18351 ("Use two-level
// dedup in named data store", merged 2026-03-19) made it: each buffer gets a
// fingerprint, its length and first 32 bytes; a buffer whose fingerprint no
// earlier buffer has is stored unhashed; one whose fingerprint an earlier
// buffer has is hashed (SHA-256) on arrival and its digest held against each
// earlier candidate of that fingerprint in turn, a candidate's digest
// computed on first need and kept; buffers merge on equal digests, their
// bytes never compared. Every buffer of a fingerprint that two or more share
// is hashed, then, and no other. The digest hashed on arrival is not the one
// kept (ExecuTorch's `new_sha` never enters its `buffer_sha256`): a buffer
// stored as a new candidate is hashed again when a later buffer of its
// fingerprint first reaches it, so n distinct buffers of one fingerprint
// cost 2n - 2 hashes. The digest is a parameter: dedup_bench.cpp
// gives SHA-256 (OpenSSL) on the run's threads, tests/bench.cpp a digest of
// its own, so that the grouping is tested without libcrypto. Not installed.
#ifndef WDEDUP_BENCHMARKS_TWO_LEVEL_HPP
#define WDEDUP_BENCHMARKS_TWO_LEVEL_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "wdedup/runtime/span.hpp"

namespace wbench {

/// The rows' name for this reference, as "SHA-256 ref" names the other
/// (steadiness.hpp holds only that one's speed against the run's pace: this
/// one hashes a share of the bytes that depends on the workload).
inline constexpr const char* kTwoLevelRef = "fp+SHA-256 ref";

/// The bytes of a buffer's start its fingerprint holds (all of a shorter
/// buffer's), as ExecuTorch's `data[:32]`.
inline constexpr std::size_t kFingerprintHeadBytes = 32;

/// What one run of the two-level grouping found and did.
struct TwoLevelCount {
  std::size_t distinct = 0;       ///< buffers the store keeps
  std::size_t hashed = 0;         ///< buffers hashed: those whose fingerprint another buffer has
  std::size_t hashed_again = 0;   ///< of them, buffers hashed a second time (stored candidates but a fingerprint's first)
  std::uint64_t bytes_hashed = 0; ///< over every hash, a second one included
};

/// Counts the distinct buffers of `buffers` as the two-level store does,
/// and makes the hashes it makes. `hash_each(which, digests)` must set
/// `digests[k]` to the digest of `buffers[which[k]]` for each k (`digests`
/// has `which.size()` elements). It is called first with every buffer to
/// hash, in program order within each fingerprint, then, where the store
/// hashes some again, with those (their digests, equal to the first ones,
/// are not used); not at all where no fingerprint repeats. The store's
/// order is kept where it decides a count: each buffer of a shared
/// fingerprint is held against that fingerprint's stored buffers (its
/// candidates) one by one, in the order they came, and is stored as a new
/// candidate where no digest is equal to its own.
template <class Digest, class HashEach>
TwoLevelCount two_level_count(const std::vector<wdedup::ByteSpan>& buffers, std::vector<Digest>& digests,
                              HashEach&& hash_each) {
  struct Fingerprint {
    std::uint64_t size = 0;
    std::array<std::uint8_t, kFingerprintHeadBytes> head{};  // zeros past a shorter buffer's end
    bool operator==(const Fingerprint& o) const { return size == o.size && head == o.head; }
  };
  struct FingerprintHash {
    std::size_t operator()(const Fingerprint& f) const noexcept {
      // The size and the head's words, mixed (any bit of either moves the
      // bucket: distinct heads of one size are the common case).
      std::uint64_t h = f.size * 0x9E3779B97F4A7C15ull;
      for (std::size_t i = 0; i < kFingerprintHeadBytes; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, f.head.data() + i, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
      }
      return static_cast<std::size_t>(h);
    }
  };
  TwoLevelCount out;
  const std::size_t n = buffers.size();
  // First level: each buffer's fingerprint group, numbered in first-seen order.
  std::unordered_map<Fingerprint, std::uint32_t, FingerprintHash> groups;
  groups.reserve(n);
  std::vector<std::uint32_t> group_of(n), members;
  for (std::size_t i = 0; i < n; ++i) {
    Fingerprint f;
    f.size = buffers[i].size();
    // (An empty span's data() may be null, which memcpy must not be given.)
    if (!buffers[i].empty())
      std::memcpy(f.head.data(), buffers[i].data(), std::min<std::size_t>(kFingerprintHeadBytes, buffers[i].size()));
    const auto [at, added] = groups.try_emplace(f, static_cast<std::uint32_t>(members.size()));
    if (added) members.push_back(0);
    group_of[i] = at->second;
    ++members[at->second];
  }
  // A fingerprint of one buffer is a buffer stored unhashed; the others'
  // buffers are hashed, laid out group by group (a counting sort, stable:
  // program order within a group).
  std::vector<std::size_t> start(members.size() + 1, 0);
  for (std::size_t g = 0; g < members.size(); ++g) {
    if (members[g] == 1) ++out.distinct;
    start[g + 1] = start[g] + (members[g] > 1 ? members[g] : 0);
  }
  std::vector<std::uint32_t> which(start.back());
  for (std::size_t i = 0; i < n; ++i)
    if (members[group_of[i]] > 1) which[start[group_of[i]]++] = static_cast<std::uint32_t>(i);
  out.hashed = which.size();
  for (const std::uint32_t i : which) out.bytes_hashed += buffers[i].size();
  if (which.empty()) return out;
  digests.resize(which.size());
  hash_each(which, digests);
  // Second level: within each group, a buffer whose digest no candidate has
  // is stored, and becomes a candidate. (`start` now holds each group's end.)
  // A candidate's digest is the store's once a later buffer first reaches
  // it: the group's first has none before (it was stored unhashed: that is
  // its one hash, above), the others had theirs on arrival and not kept, and
  // are hashed again.
  std::vector<std::size_t> candidates;
  std::vector<std::uint32_t> again;
  for (std::size_t k = 0; k < which.size();) {
    const std::size_t end = start[group_of[which[k]]];
    candidates.clear();
    // Candidates are reached in order, so those whose digest the store
    // keeps are the first `reached`: the most any buffer's loop has held.
    std::size_t reached = 0;
    for (; k < end; ++k) {
      bool stored = false;
      for (std::size_t j = 0; j < candidates.size() && !stored; ++j) {
        if (j == reached) {
          ++reached;
          if (j != 0) again.push_back(which[candidates[j]]);
        }
        stored = digests[candidates[j]] == digests[k];
      }
      if (!stored) candidates.push_back(k);
    }
    out.distinct += candidates.size();
  }
  out.hashed_again = again.size();
  for (const std::uint32_t i : again) out.bytes_hashed += buffers[i].size();
  if (!again.empty()) {
    std::vector<Digest> repeated(again.size());
    hash_each(again, repeated);
  }
  return out;
}

}  // namespace wbench

#endif  // WDEDUP_BENCHMARKS_TWO_LEVEL_HPP
