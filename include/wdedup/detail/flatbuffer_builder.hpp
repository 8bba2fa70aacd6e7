// wdedup/detail/flatbuffer_builder.hpp — a small flatbuffer builder for the
// .ptd writer. Build-time half; internal (namespace detail).
//
// Why our own and not flatbuffers' FlatBufferBuilder: wdedup must not depend
// on the flatbuffers library. Why it builds back to front and places padding
// exactly as flatc does: ExecuTorch's serializer emits the FlatTensor
// flatbuffer with `flatc --binary` from JSON, so following the same rules
// (scalar padding, vtable dedup, field order) makes our metadata identical
// byte for byte to what ExecuTorch writes for the same store, which the
// compatibility test checks against its fixtures. The rules, as facts of the
// flatbuffers format and of flatc 2.x:
//  - the buffer grows downwards; everything referenced is built before the
//    referrer, so every uoffset points forward (to higher addresses);
//  - a scalar is padded so that its distance from the END of the buffer is a
//    multiple of its size; the finished buffer is padded at the front to the
//    largest alignment used ("minalign"), so alignment from the end becomes
//    alignment from the start;
//  - strings: u32 length, bytes, NUL, padded so the length is 4-aligned;
//  - vectors: u32 count then elements, the count 4-aligned and the elements
//    aligned to their size;
//  - a table is its soffset to a vtable followed by its fields; fields equal
//    to their default are omitted; a vtable identical (size, table size and
//    offsets) to an earlier one is shared, earliest first.
#ifndef WDEDUP_DETAIL_FLATBUFFER_BUILDER_HPP
#define WDEDUP_DETAIL_FLATBUFFER_BUILDER_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

#include "wdedup/runtime/detail/format.hpp"

namespace wdedup {
namespace detail {

/// Builds one flatbuffer back to front. A `Ref` is an object's distance from
/// the end of the buffer (what flatbuffers calls an Offset before Finish);
/// after finish(), position(ref) turns it into an offset from the start.
/// (A template only so that its members compile in the TUs that use them.)
template <class = void>
class BasicFlatbufferBuilder {
 public:
  using Ref = std::uint32_t;

  /// Largest buffer the flatbuffers format allows (its uoffsets are signed
  /// 32-bit on read in some implementations).
  static constexpr std::size_t kMaxSize = 0x7FFFFFFF;

  explicit BasicFlatbufferBuilder(std::size_t initial_capacity = 1024)
      : storage_(initial_capacity ? initial_capacity : 1), head_(storage_.size()) {}

  /// Bytes written so far (after finish(): the whole buffer).
  std::size_t size() const noexcept { return storage_.size() - head_; }
  /// The buffer's first byte (valid until the next push).
  const std::uint8_t* data() const noexcept { return storage_.data() + head_; }
  /// Offset from the buffer's start of an object, once finished.
  std::size_t position(Ref ref) const noexcept { return size() - ref; }
  /// Whether the buffer ever exceeded kMaxSize (then its content is invalid).
  bool overflowed() const noexcept { return overflow_; }
  std::size_t min_alignment() const noexcept { return minalign_; }

  // ---- raw pushes -------------------------------------------------------------

  /// Zero bytes so that size() becomes a multiple of `alignment` (a power of two).
  void align(std::size_t alignment) {
    track_alignment(alignment);
    fill_zero(padding(size(), alignment));
  }
  /// Zero bytes so that, after `len` more bytes, size() is a multiple of `alignment`.
  void pre_align(std::size_t len, std::size_t alignment) {
    track_alignment(alignment);
    fill_zero(padding(size() + len, alignment));
  }
  void push_bytes(const void* bytes, std::size_t n) {
    std::uint8_t* p = make_room(n);
    if (n) std::memcpy(p, bytes, n);
  }
  /// An aligned little-endian scalar; returns its Ref.
  template <class T>
  Ref push_scalar(T value) {
    static_assert(std::is_integral<T>::value, "push_scalar takes integers");
    align(sizeof(T));
    std::uint8_t* p = make_room(sizeof(T));
    store_le(p, value);
    return static_cast<Ref>(size());
  }
  /// The value a uoffset stored at the next 4-aligned slot must hold to
  /// point at `target` (flatbuffers' ReferTo).
  Ref refer_to(Ref target) {
    align(sizeof(std::uint32_t));
    return static_cast<Ref>(size() - target + sizeof(std::uint32_t));
  }

  // ---- objects ----------------------------------------------------------------

  Ref create_string(std::string_view s) {
    pre_align(s.size() + 1, sizeof(std::uint32_t));
    fill_zero(1);
    push_bytes(s.data(), s.size());
    return push_scalar(static_cast<std::uint32_t>(s.size()));
  }

  /// A vector of scalars, elements in the given order.
  template <class T>
  Ref create_scalar_vector(const T* elements, std::size_t count) {
    static_assert(std::is_integral<T>::value, "create_scalar_vector takes integers");
    start_vector(count, sizeof(T));
    for (std::size_t i = count; i-- > 0;) push_scalar(elements[i]);
    return push_scalar(static_cast<std::uint32_t>(count));
  }

  /// A vector of offsets to objects built earlier, in the given order.
  Ref create_offset_vector(const Ref* targets, std::size_t count) {
    start_vector(count, sizeof(std::uint32_t));
    for (std::size_t i = count; i-- > 0;) push_scalar(refer_to(targets[i]));
    return push_scalar(static_cast<std::uint32_t>(count));
  }

  /// Starts a table; add fields in the order they should be laid out from
  /// the end (flatc: by size, largest first; within a size, highest id first).
  void start_table() {
    fields_.clear();
    table_start_ = size();
  }
  /// A scalar field, omitted if equal to its default (as flatc does).
  template <class T>
  void add_scalar(int field_id, T value, T default_value) {
    if (value == default_value) return;
    add_scalar_always(field_id, value);
  }
  /// A scalar field written even if it equals its default.
  template <class T>
  void add_scalar_always(int field_id, T value) {
    fields_.push_back(FieldLoc{push_scalar(value), vtable_slot(field_id)});
  }
  /// An offset field pointing at an object built earlier.
  void add_offset(int field_id, Ref target) {
    const Ref value = refer_to(target);
    fields_.push_back(FieldLoc{push_scalar(value), vtable_slot(field_id)});
  }
  /// Ends the table: writes its soffset and its vtable (or reuses an
  /// identical earlier vtable). Returns the table's Ref.
  Ref end_table() {
    const Ref table = push_scalar(std::int32_t{0});
    // A size_t that only grows from 4: GCC then sees the vector is never
    // empty (a uint16_t could wrap to 0, and -Wnull-dereference at -O1 and
    // above reported the stores below as writing through a null data()).
    std::size_t vtable_size = 4;
    for (const FieldLoc& f : fields_)
      if (f.slot + std::size_t{2} > vtable_size) vtable_size = f.slot + std::size_t{2};
    std::vector<std::uint8_t> vt(vtable_size, 0);
    format::store_u16(vt.data(), static_cast<std::uint16_t>(vtable_size));
    format::store_u16(vt.data() + 2, static_cast<std::uint16_t>(table - table_start_));
    for (const FieldLoc& f : fields_)
      format::store_u16(vt.data() + f.slot, static_cast<std::uint16_t>(table - f.ref));
    fields_.clear();

    Ref vtable = 0;
    for (Ref earlier : vtables_) {
      const std::uint8_t* e = data() + position(earlier);
      if (format::load_u16(e) == vtable_size && std::memcmp(e, vt.data(), vtable_size) == 0) {
        vtable = earlier;
        break;
      }
    }
    if (vtable == 0) {
      push_bytes(vt.data(), vt.size());  // vtables need only 2-byte alignment: they follow a 4-aligned soffset
      vtable = static_cast<Ref>(size());
      vtables_.push_back(vtable);
    }
    // soffset = table position - vtable position, in start-relative terms.
    const std::int64_t soff = static_cast<std::int64_t>(vtable) - static_cast<std::int64_t>(table);
    store_le(storage_.data() + (storage_.size() - table), static_cast<std::int32_t>(soff));
    return table;
  }

  /// Finishes the buffer: pads it to its largest alignment, then writes the
  /// 4-byte file identifier and the root uoffset at the front.
  void finish(Ref root, const char identifier[4]) {
    pre_align(2 * sizeof(std::uint32_t), minalign_);
    push_bytes(identifier, 4);
    push_scalar(refer_to(root));
  }

 private:
  struct FieldLoc {
    Ref ref;             ///< where the field's value is
    std::uint16_t slot;  ///< its byte offset inside the vtable
  };

  static std::uint16_t vtable_slot(int field_id) { return static_cast<std::uint16_t>(4 + 2 * field_id); }
  static std::size_t padding(std::size_t n, std::size_t alignment) {
    return (alignment - (n & (alignment - 1))) & (alignment - 1);
  }
  void track_alignment(std::size_t alignment) {
    if (alignment > minalign_) minalign_ = alignment;
  }

  void start_vector(std::size_t count, std::size_t element_size) {
    pre_align(count * element_size, sizeof(std::uint32_t));
    pre_align(count * element_size, element_size);
  }

  template <class T>
  static void store_le(std::uint8_t* p, T value) {
    using U = typename std::make_unsigned<T>::type;
    U u = static_cast<U>(value);
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      p[i] = static_cast<std::uint8_t>(u & 0xFF);
      u = static_cast<U>(u >> 4 >> 4);  // two shifts: no shift-by-width warning for 1-byte types
    }
  }

  void fill_zero(std::size_t n) {
    std::uint8_t* p = make_room(n);
    if (n) std::memset(p, 0, n);
  }

  /// Grows downwards: returns a pointer to n fresh bytes in front of the
  /// current content. Growth doubles and moves the content to the back.
  std::uint8_t* make_room(std::size_t n) {
    if (n > head_) {
      const std::size_t used = size();
      std::size_t cap = storage_.size();
      while (cap - used < n) cap *= 2;
      std::vector<std::uint8_t> next(cap);
      if (used) std::memcpy(next.data() + cap - used, storage_.data() + head_, used);
      storage_.swap(next);
      head_ = cap - used;
    }
    head_ -= n;
    if (size() > kMaxSize) overflow_ = true;
    return storage_.data() + head_;
  }

  std::vector<std::uint8_t> storage_;
  std::size_t head_;
  std::size_t minalign_ = 1;
  std::size_t table_start_ = 0;
  std::vector<FieldLoc> fields_;
  std::vector<Ref> vtables_;
  bool overflow_ = false;
};
using FlatbufferBuilder = BasicFlatbufferBuilder<>;

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_FLATBUFFER_BUILDER_HPP
