// wdedup/runtime/detail/flatbuffer.hpp — a bounds-checked reader for the
// few flatbuffer shapes a .ptd file uses (tables, scalars, uoffsets, vectors,
// strings). Runtime half, internal: NamedDataMap validates every object once
// with the checked functions, then reads the validated state through the
// `trusted_*` accessors, which skip the checks.
//
// Why not flatbuffers' own verifier: it is a large header that pulls in
// <string>/<vector>, and the reader must stay light. The rules checked here
// are the same ones: every object inside the buffer, tables and vectors
// 4-aligned, vtables 2-aligned, 8-byte scalars 8-aligned, fields inside their
// table, strings NUL-terminated. All arithmetic is in 64 bits on values that
// are at most 32 bits wide, so no sum below can overflow.
#ifndef WDEDUP_RUNTIME_DETAIL_FLATBUFFER_HPP
#define WDEDUP_RUNTIME_DETAIL_FLATBUFFER_HPP

#include <cstddef>
#include <cstdint>

#include "wdedup/runtime/detail/format.hpp"
#include "wdedup/runtime/error.hpp"

namespace wdedup {
namespace detail {
namespace fb {

/// The bytes objects may live in: [begin, end) of `data` (absolute file
/// offsets; `data` points at file offset 0). `begin` is the header's
/// flatbuffer_offset, past the file's root offset and identifier. It is past
/// the whole FH01 header (8 to 48) at ExecuTorch's default of 48; at 40 (its
/// writer with tensor_alignment 8) objects may overlap the header's last
/// field, segment_data_size, which is harmless: every read is bounds-checked
/// against the region, and such a table is read as the bytes it is.
struct Region {
  const std::uint8_t* data = nullptr;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;

  /// [pos, pos + size) lies inside the region. `size` must be < 2^63.
  bool contains(std::uint64_t pos, std::uint64_t size) const noexcept {
    return pos >= begin && pos <= end && size <= end - pos;
  }
};

/// A validated table: its position, its vtable and the two vtable sizes.
struct Table {
  std::uint64_t pos = 0;
  std::uint64_t vtable = 0;
  std::uint16_t vtable_size = 0;
  std::uint16_t inline_size = 0;
};

/// A validated vector: `count` elements of `elem_size` bytes at `data_pos`.
/// An absent vector has count 0 and present == false.
struct Vector {
  std::uint64_t data_pos = 0;
  std::uint32_t count = 0;
  bool present = false;
};

/// A validated string: `size` bytes at `data_pos`, NUL at data_pos + size.
struct String {
  std::uint64_t data_pos = 0;
  std::uint32_t size = 0;
  bool present = false;
};

inline Failure fail(Error code, const char* what, std::uint64_t at) noexcept {
  return Failure{code, what, at};
}

/// Validates the table at `pos`: the table's soffset, its vtable and its
/// inline part all lie inside the region.
inline Result<Table> table_at(const Region& r, std::uint64_t pos) noexcept {
  if (pos % 4 != 0) return fail(Error::MalformedFlatbuffer, "table is not 4-byte aligned", pos);
  if (!r.contains(pos, 4))
    return fail(Error::MalformedFlatbuffer, "table lies outside the flatbuffer", pos);
  const auto soffset = static_cast<std::int32_t>(format::load_u32(r.data + pos));
  // vtable = table - soffset, in signed 64-bit arithmetic: pos is inside the
  // region (a file, < 2^63) and |soffset| <= 2^31, so nothing overflows.
  const std::int64_t vt = static_cast<std::int64_t>(pos) - static_cast<std::int64_t>(soffset);
  if (vt < 0 || !r.contains(static_cast<std::uint64_t>(vt), 4))
    return fail(Error::MalformedFlatbuffer, "vtable lies outside the flatbuffer", pos);
  Table t;
  t.pos = pos;
  t.vtable = static_cast<std::uint64_t>(vt);
  if (t.vtable % 2 != 0)
    return fail(Error::MalformedFlatbuffer, "vtable is not 2-byte aligned", t.vtable);
  t.vtable_size = format::load_u16(r.data + t.vtable);
  t.inline_size = format::load_u16(r.data + t.vtable + 2);
  if (t.vtable_size < 4 || t.vtable_size % 2 != 0)
    return fail(Error::MalformedFlatbuffer, "vtable size is not an even number >= 4", t.vtable);
  if (!r.contains(t.vtable, t.vtable_size))
    return fail(Error::MalformedFlatbuffer, "vtable runs past the flatbuffer", t.vtable);
  if (t.inline_size < 4)
    return fail(Error::MalformedFlatbuffer, "table inline size is below 4", t.vtable + 2);
  if (!r.contains(pos, t.inline_size))
    return fail(Error::MalformedFlatbuffer, "table runs past the flatbuffer", pos);
  return t;
}

/// Absolute position of field `id` of `t`, or 0 if the field is absent.
/// Checks that `width` bytes at that position lie inside the table and are
/// aligned to `width`.
inline Result<std::uint64_t> field_pos(const Region& r, const Table& t, int id,
                                       unsigned width) noexcept {
  const std::uint64_t slot = 4 + 2 * static_cast<std::uint64_t>(id);
  if (slot + 2 > t.vtable_size) return std::uint64_t{0};  // older writer: field absent
  const std::uint16_t off = format::load_u16(r.data + t.vtable + slot);
  if (off == 0) return std::uint64_t{0};
  if (off < 4 || static_cast<std::uint64_t>(off) + width > t.inline_size)
    return fail(Error::MalformedFlatbuffer, "field lies outside its table", t.vtable + slot);
  const std::uint64_t pos = t.pos + off;
  if (pos % width != 0)
    return fail(Error::MalformedFlatbuffer, "field is not aligned to its size", t.vtable + slot);
  return pos;
}

/// A scalar field of 1, 4 or 8 bytes, zero-extended; `def` if absent.
inline Result<std::uint64_t> scalar(const Region& r, const Table& t, int id, unsigned width,
                                    std::uint64_t def = 0) noexcept {
  Result<std::uint64_t> p = field_pos(r, t, id, width);
  if (!p) return p.failure();
  if (*p == 0) return def;
  switch (width) {
    case 1: return std::uint64_t{r.data[*p]};
    case 4: return std::uint64_t{format::load_u32(r.data + *p)};
    default: return format::load_u64(r.data + *p);
  }
}

/// Follows the uoffset stored at `pos` (already known to be inside the
/// region) and checks that the target can hold at least 4 bytes.
inline Result<std::uint64_t> follow(const Region& r, std::uint64_t pos, Error code,
                                    const char* what) noexcept {
  const std::uint64_t target = pos + format::load_u32(r.data + pos);
  if (!r.contains(target, 4)) return fail(code, what, pos);
  return target;
}

/// The table an offset field points to; present == false if absent.
inline Result<Table> table_field(const Region& r, const Table& t, int id, bool* present) noexcept {
  *present = false;
  Result<std::uint64_t> p = field_pos(r, t, id, 4);
  if (!p) return p.failure();
  if (*p == 0) return Table{};
  Result<std::uint64_t> target =
      follow(r, *p, Error::MalformedFlatbuffer, "table offset points outside the flatbuffer");
  if (!target) return target.failure();
  *present = true;
  return table_at(r, *target);
}

/// A vector field of `elem_size`-byte elements. Errors about the vector
/// itself (its offset, its length) carry `code`.
inline Result<Vector> vector_field(const Region& r, const Table& t, int id, unsigned elem_size,
                                   Error code) noexcept {
  Result<std::uint64_t> p = field_pos(r, t, id, 4);
  if (!p) return p.failure();
  if (*p == 0) return Vector{};
  Result<std::uint64_t> vpos = follow(r, *p, code, "vector offset points outside the flatbuffer");
  if (!vpos) return vpos.failure();
  if (*vpos % 4 != 0) return fail(code, "vector is not 4-byte aligned", *vpos);
  const std::uint32_t count = format::load_u32(r.data + *vpos);
  if (!r.contains(*vpos + 4, static_cast<std::uint64_t>(count) * elem_size))
    return fail(code, "vector length runs past the flatbuffer", *vpos);
  if (elem_size == 8 && (*vpos + 4) % 8 != 0)
    return fail(code, "vector of 8-byte elements is not 8-byte aligned", *vpos);
  return Vector{*vpos + 4, count, true};
}

/// A string field. Errors about the string carry `code`.
inline Result<String> string_field(const Region& r, const Table& t, int id, Error code) noexcept {
  Result<std::uint64_t> p = field_pos(r, t, id, 4);
  if (!p) return p.failure();
  if (*p == 0) return String{};
  Result<std::uint64_t> spos = follow(r, *p, code, "string offset points outside the flatbuffer");
  if (!spos) return spos.failure();
  if (*spos % 4 != 0) return fail(code, "string is not 4-byte aligned", *spos);
  const std::uint32_t size = format::load_u32(r.data + *spos);
  // +1: the terminating NUL flatbuffers always writes.
  if (!r.contains(*spos + 4, static_cast<std::uint64_t>(size) + 1))
    return fail(code, "string runs past the flatbuffer", *spos);
  if (r.data[*spos + 4 + size] != 0) return fail(code, "string is not NUL-terminated", *spos);
  return String{*spos + 4, size, true};
}

/// Element `i` of a vector of tables, validated.
inline Result<Table> table_element(const Region& r, const Vector& v, std::uint32_t i) noexcept {
  const std::uint64_t ep = v.data_pos + 4 * static_cast<std::uint64_t>(i);
  Result<std::uint64_t> target = follow(r, ep, Error::MalformedFlatbuffer,
                                        "vector element points outside the flatbuffer");
  if (!target) return target.failure();
  return table_at(r, *target);
}

// ---- trusted accessors: only for objects validated above -----------------------

/// Position of field `id` of the table at `table`, or 0 if absent.
inline std::uint64_t trusted_field(const std::uint8_t* d, std::uint64_t table, int id) noexcept {
  const auto soffset = static_cast<std::int32_t>(format::load_u32(d + table));
  const std::uint64_t vt =
      static_cast<std::uint64_t>(static_cast<std::int64_t>(table) - soffset);
  const std::uint64_t slot = 4 + 2 * static_cast<std::uint64_t>(id);
  if (slot + 2 > format::load_u16(d + vt)) return 0;
  const std::uint16_t off = format::load_u16(d + vt + slot);
  return off == 0 ? 0 : table + off;
}
/// Target of the uoffset at `pos`.
inline std::uint64_t trusted_follow(const std::uint8_t* d, std::uint64_t pos) noexcept {
  return pos + format::load_u32(d + pos);
}
/// Target of offset field `id`, or 0 if absent.
inline std::uint64_t trusted_ref(const std::uint8_t* d, std::uint64_t table, int id) noexcept {
  const std::uint64_t p = trusted_field(d, table, id);
  return p == 0 ? 0 : trusted_follow(d, p);
}
/// Table `i` of the vector of tables whose elements start at `data_pos`.
inline std::uint64_t trusted_element(const std::uint8_t* d, std::uint64_t data_pos,
                                     std::uint64_t i) noexcept {
  return trusted_follow(d, data_pos + 4 * i);
}

}  // namespace fb
}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_DETAIL_FLATBUFFER_HPP
