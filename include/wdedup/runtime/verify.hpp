// wdedup/runtime/verify.hpp — optional integrity check: recomputes each
// segment's XXH3-64 and compares it with the content hash the WDX1 block
// stores. Runtime half, but deliberately NOT in the runtime umbrella: it
// includes xxhash.h (XXH_INLINE_ALL), which costs most of the umbrella's
// compile-time budget. No heap: non-memory sources are hashed in 4 KiB chunks.
#ifndef WDEDUP_RUNTIME_VERIFY_HPP
#define WDEDUP_RUNTIME_VERIFY_HPP

#include <cstddef>
#include <cstdint>

#include "wdedup/runtime/detail/xxhash.hpp"  // xxhash.h, header-only
#include "wdedup/runtime/named_data_map.hpp"

namespace wdedup {

/// XXH3_64bits (seed 0) of segment `index`, read from the map's source.
inline Result<std::uint64_t> segment_content_hash(const NamedDataMap& map, std::uint32_t index) noexcept {
  Result<SegmentInfo> s = map.segment(index);
  if (!s) return s.failure();
  const DataSource& src = map.source();
  if (Status st = map.check_source(); !st) return st.failure();
  if (const std::uint8_t* p = src.view(s->offset, s->size))
    return std::uint64_t{XXH3_64bits(p, static_cast<std::size_t>(s->size))};
  XXH3_state_t state;
  if (XXH3_64bits_reset(&state) != XXH_OK)
    return Result<std::uint64_t>(Error::InvalidArgument, "XXH3 reset failed", index);
  std::uint8_t chunk[4096];
  for (std::uint64_t done = 0; done < s->size;) {
    const std::uint64_t n = s->size - done < sizeof chunk ? s->size - done : sizeof chunk;
    Status st = src.read(s->offset + done, chunk, n);
    if (!st) return st.failure();
    XXH3_64bits_update(&state, chunk, static_cast<std::size_t>(n));
    done += n;
  }
  return std::uint64_t{XXH3_64bits_digest(&state)};
}

/// Checks segment `index` against its stored hash: MalformedSegment ("segment
/// content hash mismatch", at = the segment's file offset) if they differ,
/// NotFound if the file stores no hashes (a plain ExecuTorch file).
inline Status verify_segment(const NamedDataMap& map, std::uint32_t index) noexcept {
  Result<SegmentInfo> s = map.segment(index);
  if (!s) return s.failure();
  if (!s->has_content_hash) return Status(Error::NotFound, "file stores no content hashes", index);
  Result<std::uint64_t> h = segment_content_hash(map, index);
  if (!h) return h.failure();
  if (*h != s->content_hash) return Status(Error::MalformedSegment, "segment content hash mismatch", s->offset);
  return detail::ok_status();
}

/// verify_segment for every segment; stops at the first failure.
inline Status verify_segments(const NamedDataMap& map) noexcept {
  if (!map.has_extension()) return Status(Error::NotFound, "file stores no content hashes", 0);
  for (std::uint32_t i = 0; i < map.segment_count(); ++i) {
    Status st = verify_segment(map, i);
    if (!st) return st;
  }
  return detail::ok_status();
}

}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_VERIFY_HPP
