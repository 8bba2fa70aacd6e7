// wdedup/runtime/verify.hpp — optional integrity check: recomputes each
// segment's XXH3-64 and compares it with the content hash the WDX1 block
// stores. Runtime half, but deliberately NOT in the runtime umbrella: it
// includes xxhash.h (XXH_INLINE_ALL), which costs most of the umbrella's
// compile-time budget. No heap: non-memory sources are hashed in 4 KiB chunks
// on the stack, or in pieces of memory the caller lends.
#ifndef WDEDUP_RUNTIME_VERIFY_HPP
#define WDEDUP_RUNTIME_VERIFY_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>

#include "wdedup/runtime/detail/xxhash.hpp"  // xxhash.h, header-only
#include "wdedup/runtime/named_data_map.hpp"

namespace wdedup {

namespace detail {
/// The stack buffer of the overloads that take no scratch memory.
constexpr std::size_t kVerifyChunk = 4096;
}  // namespace detail

/// XXH3_64bits (seed 0) of segment `index`, read from the map's source. A
/// source without a view (a FileSource) is read into `scratch`, a piece at
/// a time: any size of 1 byte or more, its bytes overwritten (so not memory
/// the map or the source reads from: the map's metadata or index). An empty
/// `scratch` for such a source is InvalidArgument ("no scratch memory to
/// read the segment into", at = the segment's index).
///
/// Why the caller may lend it: the overload without it reads through a
/// 4 KiB buffer on the stack (about 5 KiB of stack in all), and a task
/// stack on a small target may be 4 to 8 KiB. With `scratch` this
/// function's own frame is XXH3's 576-byte state, 64-byte aligned, and a
/// few words: about 1 KiB. A bigger buffer means fewer reads (a 1 GiB
/// segment: 262,144 reads of 4 KiB).
inline Result<std::uint64_t> segment_content_hash(const NamedDataMap& map, std::uint32_t index,
                                                  Span<std::uint8_t> scratch) noexcept {
  Result<SegmentInfo> s = map.segment(index);
  if (!s) return s.failure();
  const DataSource& src = map.source();
  if (Status st = map.check_source(); !st) return st.failure();
  if (const std::uint8_t* p = src.view(s->offset, s->size))
    return std::uint64_t{XXH3_64bits(p, static_cast<std::size_t>(s->size))};
  if (scratch.empty() && s->size != 0)
    return Result<std::uint64_t>(Error::InvalidArgument, "no scratch memory to read the segment into", index);
  XXH3_state_t state;
  if (XXH3_64bits_reset(&state) != XXH_OK)
    return Result<std::uint64_t>(Error::InvalidArgument, "XXH3 reset failed", index);
  for (std::uint64_t done = 0; done < s->size;) {
    const std::uint64_t n = s->size - done < scratch.size() ? s->size - done : scratch.size();
    Status st = src.read(s->offset + done, scratch.data(), n);
    if (!st) return st.failure();
    XXH3_64bits_update(&state, scratch.data(), static_cast<std::size_t>(n));
    done += n;
  }
  return std::uint64_t{XXH3_64bits_digest(&state)};
}

/// The same, through a 4 KiB buffer on the stack.
inline Result<std::uint64_t> segment_content_hash(const NamedDataMap& map, std::uint32_t index) noexcept {
  std::uint8_t chunk[detail::kVerifyChunk];
  return segment_content_hash(map, index, Span<std::uint8_t>(chunk, sizeof chunk));
}

/// Checks segment `index` against its stored hash: MalformedSegment ("segment
/// content hash mismatch", at = the segment's file offset) if they differ,
/// NotFound if the file stores no hashes (a plain ExecuTorch file).
/// `scratch` as for segment_content_hash.
inline Status verify_segment(const NamedDataMap& map, std::uint32_t index, Span<std::uint8_t> scratch) noexcept {
  Result<SegmentInfo> s = map.segment(index);
  if (!s) return s.failure();
  if (!s->has_content_hash) return Status(Error::NotFound, "file stores no content hashes", index);
  Result<std::uint64_t> h = segment_content_hash(map, index, scratch);
  if (!h) return h.failure();
  if (*h != s->content_hash) return Status(Error::MalformedSegment, "segment content hash mismatch", s->offset);
  return detail::ok_status();
}

/// The same, through a 4 KiB buffer on the stack.
inline Status verify_segment(const NamedDataMap& map, std::uint32_t index) noexcept {
  std::uint8_t chunk[detail::kVerifyChunk];
  return verify_segment(map, index, Span<std::uint8_t>(chunk, sizeof chunk));
}

/// verify_segment for every segment; stops at the first failure.
inline Status verify_segments(const NamedDataMap& map, Span<std::uint8_t> scratch) noexcept {
  if (!map.has_extension()) return Status(Error::NotFound, "file stores no content hashes", 0);
  for (std::uint32_t i = 0; i < map.segment_count(); ++i) {
    Status st = verify_segment(map, i, scratch);
    if (!st) return st;
  }
  return detail::ok_status();
}

/// The same, through a 4 KiB buffer on the stack.
inline Status verify_segments(const NamedDataMap& map) noexcept {
  std::uint8_t chunk[detail::kVerifyChunk];
  return verify_segments(map, Span<std::uint8_t>(chunk, sizeof chunk));
}

}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_VERIFY_HPP
