// tests/support/nav.hpp — test-side flatbuffer and WDX1 navigation over a
// file image, deliberately independent of the reader's code, for tests that
// corrupt or rewrite a file's fields (malformed.cpp, import.cpp, mapped_file.cpp).
#ifndef WDEDUP_TESTS_SUPPORT_NAV_HPP
#define WDEDUP_TESTS_SUPPORT_NAV_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "wdedup/runtime.hpp"

namespace wdedup_test {

/// Test-side flatbuffer navigation (deliberately independent of the
/// reader's code) over a file image that the cases then corrupt.
struct Nav {
  std::vector<std::uint8_t>& b;

  std::uint16_t u16(std::uint64_t p) const { return wdedup::format::load_u16(b.data() + p); }
  std::uint32_t u32(std::uint64_t p) const { return wdedup::format::load_u32(b.data() + p); }
  std::uint64_t u64(std::uint64_t p) const { return wdedup::format::load_u64(b.data() + p); }
  void set_u8(std::uint64_t p, std::uint8_t v) { b.at(static_cast<std::size_t>(p)) = v; }
  void set_u16(std::uint64_t p, std::uint16_t v) { wdedup::format::store_u16(&b.at(static_cast<std::size_t>(p + 1)) - 1, v); }
  void set_u32(std::uint64_t p, std::uint32_t v) { wdedup::format::store_u32(&b.at(static_cast<std::size_t>(p + 3)) - 3, v); }
  void set_u64(std::uint64_t p, std::uint64_t v) { wdedup::format::store_u64(&b.at(static_cast<std::size_t>(p + 7)) - 7, v); }

  std::uint64_t root() const { return u32(0); }
  std::uint64_t vtable(std::uint64_t t) const {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(t) - static_cast<std::int32_t>(u32(t)));
  }
  /// Position of the vtable slot of field `id` of table t.
  std::uint64_t slot(std::uint64_t t, int id) const { return vtable(t) + 4 + 2 * static_cast<std::uint64_t>(id); }
  /// Position of field `id` of table t (0 if absent).
  std::uint64_t field(std::uint64_t t, int id) const {
    const std::uint64_t vt = vtable(t);
    const std::uint64_t s = 4 + 2 * static_cast<std::uint64_t>(id);
    if (s + 2 > u16(vt)) return 0;
    const std::uint16_t off = u16(vt + s);
    return off ? t + off : 0;
  }
  std::uint64_t ref(std::uint64_t t, int id) const {
    const std::uint64_t p = field(t, id);
    return p ? p + u32(p) : 0;
  }
  std::uint64_t segments() const { return ref(root(), wdedup::format::flat_tensor_field::kSegments); }
  std::uint64_t named_data() const { return ref(root(), wdedup::format::flat_tensor_field::kNamedData); }
  std::uint64_t element(std::uint64_t vec, std::uint32_t i) const {
    const std::uint64_t e = vec + 4 + 4 * std::uint64_t{i};
    return e + u32(e);
  }
  std::uint64_t segment(std::uint32_t i) const { return element(segments(), i); }
  std::uint64_t named(std::uint32_t i) const { return element(named_data(), i); }
  /// Positions of segment i's offset and size (0 if absent: segment 0's
  /// offset is 0, the default, which the flatbuffer leaves out).
  std::uint64_t segment_offset(std::uint32_t i) const {
    return field(segment(i), wdedup::format::data_segment_field::kOffset);
  }
  std::uint64_t segment_size(std::uint32_t i) const {
    return field(segment(i), wdedup::format::data_segment_field::kSize);
  }
  std::uint64_t key(std::uint32_t i) const { return ref(named(i), wdedup::format::named_data_field::kKey); }
  std::uint64_t layout(std::uint32_t i) const { return ref(named(i), wdedup::format::named_data_field::kTensorLayout); }
  std::uint64_t sizes(std::uint32_t i) const { return ref(layout(i), wdedup::format::tensor_layout_field::kSizes); }
  std::uint64_t dim_order(std::uint32_t i) const { return ref(layout(i), wdedup::format::tensor_layout_field::kDimOrder); }

  // WDX1 block
  std::uint64_t ext() const {
    std::uint64_t p = 0;
    wdedup::format::align_up(u64(wdedup::format::kHeaderFlatbufferOffsetPos) + u64(wdedup::format::kHeaderFlatbufferSizePos),
                             16, &p);
    return p;
  }
  std::uint64_t ext_table(std::size_t offset_field) const { return ext() + u32(ext() + offset_field); }
  std::uint64_t entry(std::uint32_t i) const {
    return ext_table(wdedup::format::ext_header::kEntriesOffset) + std::uint64_t{i} * wdedup::format::key_entry::kSize;
  }
  std::uint64_t slots() const { return ext_table(wdedup::format::ext_header::kSlotsOffset); }
  std::uint64_t seg_info(std::uint32_t i) const {
    return ext_table(wdedup::format::ext_header::kSegmentInfoOffset) + std::uint64_t{i} * wdedup::format::segment_info::kSize;
  }
  std::uint64_t function(std::uint32_t i) const {
    return ext_table(wdedup::format::ext_header::kFunctionsOffset) + std::uint64_t{i} * wdedup::format::function_record::kSize;
  }
  std::uint64_t function_tensor(std::uint32_t i) const {
    return ext_table(wdedup::format::ext_header::kFunctionTensorsOffset) + std::uint64_t{i} * wdedup::format::function_tensor::kSize;
  }
};

/// Moves segments #first and on `by` bytes later in `file`, as a rewrite
/// that gave segment #first - 1 `by` more bytes lays them out (ExecuTorch's
/// replace_data): their offsets and segment_data_size grow by `by`, `by`
/// zero bytes go in where segment #first's started, and the WDX1 block stays
/// as written. Returns that old start, or nothing (the file unchanged) if
/// some of those segments has no offset field to move.
inline std::optional<std::uint64_t> move_segments(std::vector<std::uint8_t>& file, std::uint32_t first,
                                                  std::uint64_t by) {
  namespace f = wdedup::format;
  Nav n{file};
  std::vector<std::uint64_t> fields;
  for (std::uint32_t i = first; i < n.u32(n.segments()); ++i) {
    fields.push_back(n.field(n.segment(i), f::data_segment_field::kOffset));
    if (fields.back() == 0) return std::nullopt;
  }
  if (fields.empty()) return std::nullopt;
  const std::uint64_t at = n.u64(f::kHeaderSegmentBasePos) + n.u64(fields.front());
  for (const std::uint64_t field : fields) n.set_u64(field, n.u64(field) + by);
  n.set_u64(f::kHeaderSegmentDataSizePos, n.u64(f::kHeaderSegmentDataSizePos) + by);
  file.insert(file.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::size_t>(by), std::uint8_t{0});
  return at;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_NAV_HPP
