// wdedup/runtime/named_data_map.hpp — the runtime reader: ExecuTorch's
// NamedDataMap over a .ptd file (plain FlatTensor, or wdedup's with the WDX1
// index and function maps). Runtime half: no heap, no exceptions, no RTTI.
//
// open() validates everything once, with overflow-safe arithmetic, and never
// reads outside the file; queries then trust the validated state, so they
// are cheap, allocate nothing and hold no mutable state (any number of
// threads may query one map at once).
#ifndef WDEDUP_RUNTIME_NAMED_DATA_MAP_HPP
#define WDEDUP_RUNTIME_NAMED_DATA_MAP_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/detail/flatbuffer.hpp"
#include "wdedup/runtime/detail/format.hpp"
#include "wdedup/runtime/detail/function_repeats.hpp"
#include "wdedup/runtime/detail/key_hash.hpp"
#include "wdedup/runtime/error.hpp"
#include "wdedup/runtime/key_view.hpp"
#include "wdedup/runtime/span.hpp"
#include "wdedup/runtime/tensor_layout.hpp"

// TensorLayout::sizes views the file's int32 vector in place.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wdedup's NamedDataMap views tensor sizes in place and needs a little-endian host"
#endif

namespace wdedup {

/// Bytes handed out by NamedDataMap::get_data (ExecuTorch's FreeableBuffer):
/// either a view into the source (nothing to free) or a malloc'd copy that
/// the destructor frees. Move-only.
class DataBuffer {
 public:
  DataBuffer() noexcept = default;
  /// A view of memory owned by someone else.
  static DataBuffer view(const void* data, std::size_t size) noexcept {
    return DataBuffer(data, size, nullptr);
  }
  /// Takes ownership of `allocation` (from std::malloc, posix_memalign or
  /// std::aligned_alloc: what std::free frees);
  /// `data` points inside it.
  static DataBuffer adopt(void* allocation, const void* data, std::size_t size) noexcept {
    return DataBuffer(data, size, allocation);
  }

  DataBuffer(DataBuffer&& o) noexcept : data_(o.data_), size_(o.size_), owned_(o.owned_) {
    o.data_ = nullptr;
    o.size_ = 0;
    o.owned_ = nullptr;
  }
  DataBuffer& operator=(DataBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = o.data_;
      size_ = o.size_;
      owned_ = o.owned_;
      o.data_ = nullptr;
      o.size_ = 0;
      o.owned_ = nullptr;
    }
    return *this;
  }
  DataBuffer(const DataBuffer&) = delete;
  DataBuffer& operator=(const DataBuffer&) = delete;
  ~DataBuffer() { reset(); }

  const void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  ByteSpan bytes() const noexcept { return ByteSpan(static_cast<const std::uint8_t*>(data_), size_); }
  /// True for a copy this buffer frees; false for a zero-copy view.
  bool owns_memory() const noexcept { return owned_ != nullptr; }
  /// Hands a copy's memory over instead of freeing it: returns the
  /// allocation (free it with std::free; data() may point inside it) and
  /// empties the buffer; nullptr for a view, which has nothing to free. Read
  /// data() and size() first. What a delegate needs to give the bytes to an
  /// ExecuTorch FreeableBuffer without a heap object per buffer:
  ///   const void* p = b.data(); std::size_t n = b.size(); void* a = b.release();
  ///   FreeableBuffer(p, n, [](void* ctx, void*, std::size_t) { std::free(ctx); }, a);
  [[nodiscard]] void* release() noexcept {
    void* const allocation = owned_;
    owned_ = nullptr;
    data_ = nullptr;
    size_ = 0;
    return allocation;
  }
  /// Frees a copy now (ExecuTorch's FreeableBuffer::Free) and empties the buffer.
  void reset() noexcept {
    if (owned_ != nullptr) std::free(owned_);
    data_ = nullptr;
    size_ = 0;
    owned_ = nullptr;
  }

 private:
  DataBuffer(const void* data, std::size_t size, void* owned) noexcept
      : data_(data), size_(size), owned_(owned) {}

  const void* data_ = nullptr;
  std::size_t size_ = 0;
  void* owned_ = nullptr;
};

/// The FH01 extended header, as read from the file.
struct FileHeader {
  std::uint32_t length = 0;  ///< >= 40
  std::uint64_t flatbuffer_offset = 0;
  std::uint64_t flatbuffer_size = 0;  ///< the flatbuffer spans [0, offset + size)
  std::uint64_t segment_base_offset = 0;  ///< 0 in a file with no segments (ExecuTorch documents it)
  std::uint64_t segment_data_size = 0;
};

/// Where a key's bytes are, without loading them.
struct KeyInfo {
  KeyView key;
  std::uint32_t key_index = 0;      ///< position in named_data (get_key order)
  std::uint32_t segment_index = 0;
  std::uint64_t offset = 0;         ///< absolute file offset of the data
  std::uint64_t size = 0;           ///< bytes (the segment's size)
  std::uint64_t alignment = 1;      ///< requested alignment; 1 if the file does not say
  bool has_layout = false;
};

/// One data segment.
struct SegmentInfo {
  std::uint64_t offset = 0;     ///< absolute file offset
  std::uint64_t size = 0;
  /// A multiple of each of its keys' alignments (their lcm as deduplicate()
  /// writes it; a store filled through StoreAccess may ask for more), which
  /// open() checks, with its offset (in a map whose segments moved, only
  /// its power-of-two part: OpenOptions::allow_moved_segments); 1 if the
  /// file does not say.
  std::uint64_t alignment = 1;
  std::uint64_t content_hash = 0;  ///< XXH3_64bits(data, seed 0), if has_content_hash
  bool has_content_hash = false;
};

/// One row of a function's tensor table.
struct FunctionTensorView {
  KeyView tensor_name;          ///< the tensor's own name inside the partition
  KeyView key;                  ///< the store key holding its bytes
  std::uint32_t key_index = 0;  ///< that key's index (get_key order)
};

/// One (method, partition) function of a wdedup file: the blob it is
/// compiled into, its name there, and its tensor table. A view into the
/// map's metadata; valid while the metadata memory is (not tied to the
/// NamedDataMap object, which may be moved or copied freely).
class FunctionView {
 public:
  KeyView method() const noexcept { return method_; }
  std::uint32_t partition_index() const noexcept { return partition_; }
  KeyView blob_key() const noexcept { return blob_; }
  KeyView function_name() const noexcept { return name_; }
  std::size_t tensor_count() const noexcept { return count_; }

  /// Row i (rows are sorted by tensor name, bytewise).
  Result<FunctionTensorView> tensor(std::size_t i) const noexcept {
    if (i >= count_) return Result<FunctionTensorView>(Error::InvalidArgument, "tensor index out of range", i);
    return row(i);
  }
  /// The row for `tensor_name` (binary search), or NotFound.
  Result<FunctionTensorView> find_tensor(KeyView tensor_name) const noexcept {
    std::size_t lo = 0, hi = count_;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      const FunctionTensorView r = row(mid);
      const int c = r.tensor_name.compare(tensor_name);
      if (c == 0) return r;
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    return Result<FunctionTensorView>(Error::NotFound, "no such tensor in this function", 0);
  }
  /// The store key of `tensor_name`, or NotFound.
  Result<KeyView> key_of(KeyView tensor_name) const noexcept {
    Result<FunctionTensorView> r = find_tensor(tensor_name);
    if (!r) return r.failure();
    return r->key;
  }

 private:
  friend class NamedDataMap;

  FunctionTensorView row(std::size_t i) const noexcept {
    namespace ft = format::function_tensor;
    namespace ke = format::key_entry;
    const std::uint8_t* r = rows_ + i * ft::kSize;
    const std::uint32_t key_index = format::load_u32(r + ft::kKeyIndex);
    const std::uint8_t* e = entries_ + static_cast<std::size_t>(key_index) * ke::kSize;
    FunctionTensorView v;
    v.tensor_name = KeyView(strings_ + format::load_u32(r + ft::kNameOffset),
                                     format::load_u32(r + ft::kNameSize));
    v.key = KeyView(reinterpret_cast<const char*>(meta_) + format::load_u32(e + ke::kKeyOffset),
                             format::load_u32(e + ke::kKeySize));
    v.key_index = key_index;
    return v;
  }

  KeyView method_, blob_, name_;
  std::uint32_t partition_ = 0;
  std::size_t count_ = 0;
  const std::uint8_t* rows_ = nullptr;
  const char* strings_ = nullptr;
  const std::uint8_t* entries_ = nullptr;
  const std::uint8_t* meta_ = nullptr;
};

namespace detail {

/// Validates the FT01 identifier and FH01 header (the first 48 bytes of the
/// file, `head`) against the file size. Shared by open and metadata_size,
/// so both fail the same way on the same file.
inline Result<FileHeader> parse_header(const std::uint8_t* head, std::uint64_t file_size) noexcept {
  using R = Result<FileHeader>;
  namespace f = format;
  if (std::memcmp(head + f::kFileIdentifierOffset, f::kFileIdentifier, 4) != 0)
    return R(Error::MalformedHeader, "flatbuffer identifier is not FT01", f::kFileIdentifierOffset);
  if (std::memcmp(head + f::kHeaderOffset, f::kHeaderMagic, 4) != 0)
    return R(Error::MalformedHeader, "extended header magic is not FH01", f::kHeaderOffset);
  FileHeader h;
  h.length = f::load_u32(head + f::kHeaderLengthPos);
  h.flatbuffer_offset = f::load_u64(head + f::kHeaderFlatbufferOffsetPos);
  h.flatbuffer_size = f::load_u64(head + f::kHeaderFlatbufferSizePos);
  h.segment_base_offset = f::load_u64(head + f::kHeaderSegmentBasePos);
  h.segment_data_size = f::load_u64(head + f::kHeaderSegmentDataSizePos);
  if (h.length < f::kMinHeaderLength)
    return R(Error::MalformedHeader, "extended header length is below 40", f::kHeaderLengthPos);
  // ExecuTorch's writer inserts the header, padded to its tensor_alignment,
  // after the flatbuffer's first 8 bytes, and records the padded length as
  // flatbuffer_offset (48 by default, 40 with tensor_alignment 8): the
  // header must fit in it.
  if (h.flatbuffer_offset < std::uint64_t{h.length})
    return R(Error::MalformedHeader, "flatbuffer_offset is below the extended header's length",
             f::kHeaderFlatbufferOffsetPos);
  if (h.flatbuffer_size > UINT64_MAX - h.flatbuffer_offset)
    return R(Error::MalformedHeader, "flatbuffer_offset + flatbuffer_size overflows",
             f::kHeaderFlatbufferSizePos);
  const std::uint64_t fb_end = h.flatbuffer_offset + h.flatbuffer_size;
  // A cut file says where what it lacks ends (the file's size is the
  // caller's to name: the import prints both).
  if (fb_end > file_size)
    return R(Error::Truncated, "file ends inside the flatbuffer (at = the flatbuffer's end)", fb_end);
  // ExecuTorch's serializer documents segment_base_offset as "zero if there
  // are no segments"; its reader never checks the field. Such a file, with no
  // segment data either, is read as empty (open() then refuses it if its
  // flatbuffer lists a segment after all).
  if (h.segment_base_offset < fb_end && !(h.segment_base_offset == 0 && h.segment_data_size == 0))
    return R(Error::MalformedHeader, "segment_base_offset lies inside the flatbuffer",
             f::kHeaderSegmentBasePos);
  if (h.segment_data_size > UINT64_MAX - h.segment_base_offset)
    return R(Error::MalformedHeader, "segment_base_offset + segment_data_size overflows",
             f::kHeaderSegmentDataSizePos);
  // (A file cut before its segment data starts says so: "inside" sent a
  // reader looking for a partial segment.)
  const std::uint64_t data_end = h.segment_base_offset + h.segment_data_size;
  if (h.segment_base_offset >= file_size && data_end > file_size)
    return R(Error::Truncated, "file ends before the segment data (at = the segment data's end)", data_end);
  if (data_end > file_size)
    return R(Error::Truncated, "file ends inside the segment data (at = the segment data's end)", data_end);
  return h;
}

/// Largest alignment a wdedup file may record (the build-time kMaxAlignment).
constexpr std::uint64_t kMaxFileAlignment = std::uint64_t{1} << 32;

/// Segments out of order are put in order kSegmentBatch at a time, on the
/// stack (no heap to sort in): each pass reads every segment and keeps the
/// next kSegmentBatch by offset. ExecuTorch's own in-place rewriter
/// (extension/backend_data's initialize_and_save) writes the segments it
/// replaces first, so its files come out of order.
constexpr std::uint32_t kSegmentBatch = 64;
/// Segment reads those passes may take: n segments cost n * ceil(n / 64),
/// which allows 23,168 segments out of order (tens of ms). More, out of
/// order, is refused as MalformedSegment, or a small file could keep
/// open() busy for minutes.
constexpr std::uint64_t kUnsortedSegmentReads = std::uint64_t{1} << 23;

/// A segment's place in offset order: by offset, then by index.
struct SegmentKey {
  std::uint64_t offset;
  std::uint32_t index;
};
constexpr bool segment_before(const SegmentKey& a, const SegmentKey& b) noexcept {
  return a.offset < b.offset || (a.offset == b.offset && a.index < b.index);
}
inline void swap_keys(SegmentKey& a, SegmentKey& b) noexcept {
  const SegmentKey t = a;
  a = b;
  b = t;
}
/// Max-heap of `n` keys: restores it below `i`.
inline void segment_sift_down(SegmentKey* h, std::uint32_t n, std::uint32_t i) noexcept {
  for (;;) {
    std::uint32_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && segment_before(h[c], h[c + 1])) ++c;
    if (!segment_before(h[i], h[c])) return;
    swap_keys(h[i], h[c]);
    i = c;
  }
}
inline void segment_sift_up(SegmentKey* h, std::uint32_t i) noexcept {
  while (i > 0) {
    const std::uint32_t p = (i - 1) / 2;
    if (!segment_before(h[p], h[i])) return;
    swap_keys(h[p], h[i]);
    i = p;
  }
}

/// Segments seen in offset order must each start a new group (at or past
/// the end of the last) or repeat the group's range exactly.
struct SegmentSweep {
  std::uint64_t start = 0, end = 0;
  bool take(std::uint64_t off, std::uint64_t size) noexcept {
    if (off >= end) {
      start = off;
      end = off + size;
      return true;
    }
    return off == start && off + size == end;
  }
};

/// Slots of an index over `key_count` keys (at most 2^32 - 1, what a file
/// can hold): a power of two >= 2 * key_count, >= 1.
constexpr std::uint64_t index_slot_count(std::uint64_t key_count) noexcept {
  std::uint64_t n = 1;
  while (n < 2 * key_count) n <<= 1;
  return n;
}

/// Largest power of two dividing a (a > 0).
constexpr std::uint64_t pow2_part(std::uint64_t a) noexcept { return a & (~a + 1); }

/// `size` bytes aligned to `align` (a power of two, at least a pointer's),
/// for std::free, or nullptr: posix_memalign, or where WDEDUP_NO_POSIX says
/// there is no POSIX, C11's aligned_alloc, whose size must be a multiple of
/// the alignment (a C library may refuse another).
inline void* aligned_memory(std::size_t align, std::size_t size) noexcept {
#if defined(WDEDUP_NO_POSIX)
  if (size > SIZE_MAX - (align - 1)) return nullptr;
  return std::aligned_alloc(align, (size + (align - 1)) & ~(align - 1));
#else
  void* p = nullptr;
  return posix_memalign(&p, align, size) == 0 ? p : nullptr;
#endif
}

/// Where the WDX1 block starts, if one fits before the segment data.
inline bool ext_position(const FileHeader& h, std::uint64_t* pos) noexcept {
  std::uint64_t p = 0;
  if (!format::align_up(h.flatbuffer_offset + h.flatbuffer_size, format::kExtAlignment, &p))
    return false;
  if (p > h.segment_base_offset || h.segment_base_offset - p < 4) return false;
  *pos = p;
  return true;
}

/// Checks the WDX1 version and block size (`head16` = the block's first 16
/// bytes) and returns the block size.
inline Result<std::uint64_t> ext_block_size(const std::uint8_t* head16, std::uint64_t pos,
                                            const FileHeader& h) noexcept {
  using R = Result<std::uint64_t>;
  namespace eh = format::ext_header;
  if (format::load_u32(head16 + eh::kVersion) != format::kExtVersion)
    return R(Error::UnsupportedVersion, "WDX1 version is not 1", pos + eh::kVersion);
  const std::uint64_t size = format::load_u64(head16 + eh::kBlockSize);
  const std::uint64_t room = h.segment_base_offset - pos;
  // The writer pads the block to a multiple of 8 (format.hpp).
  if (size < eh::kSize || size > room || size % 8 != 0)
    return R(Error::MalformedIndex, "WDX1 block size is below 80, not a multiple of 8, or runs into the segment data",
             pos + eh::kBlockSize);
  return size;
}

}  // namespace detail

/// How NamedDataMap::open() reads a file.
struct OpenOptions {
  /// A wdedup file whose segments were moved or resized after it was
  /// written, by a tool that rewrote the flatbuffer's segment offsets and
  /// sizes but copied the WDX1 block as it was: ExecuTorch's
  /// FlatTensorDataMap::replace_data does this (it copies the file up to
  /// segment_base_offset, block included, then lays the segments out
  /// again). Its block's recorded data ranges then differ from the
  /// flatbuffer's. By default open() refuses such a file (MalformedIndex,
  /// "key entry's data offset/size differs from its segment", or first, for
  /// a segment moved to where its recorded alignment no longer holds,
  /// "segment alignment is 0, too large, or not met by its offset"), since
  /// a block that disagrees with the flatbuffer may as well mean a damaged
  /// flatbuffer. true reads the data where the flatbuffer says, as
  /// ExecuTorch does (segments_moved() then says so), and keeps the block's
  /// index, alignments and function maps, which every other check still
  /// finds in agreement with the flatbuffer. The segments must lie as a
  /// rewrite lays them out (in index order, each after the one before,
  /// segment_data_size ending at the last), and each must still meet the
  /// power-of-two part of its recorded alignment (all a view is aligned
  /// to): replace_data keeps it, aligning each segment to the lowest set
  /// bit of its old offset, unless its caller gives a replacement a smaller
  /// one, which is refused either way. Content hashes stay as recorded, so
  /// verify_segment(map, i) fails for each segment whose bytes were
  /// replaced. A layout stays as recorded too: after a replacement of
  /// another size, get_tensor_layout() describes the old bytes.
  bool allow_moved_segments = false;
};

namespace detail {
template <class Source>
class SourceWithMap;
}  // namespace detail

/// ExecuTorch's NamedDataMap over one .ptd file, plus wdedup's extras.
///
/// Lifetimes: the DataSource (and lent metadata memory, if any) must outlive
/// the map and every view it returns (keys, layouts, DataBuffer views,
/// FunctionViews), and stay where it is: the map keeps its address, so a
/// source must not be moved, moved over or relocated (a std::vector of
/// sources that grows) while a map refers to it. A map whose source reads
/// (not one opened in place, as MmapSource's are) notices a source whose
/// size changed and refuses to read it (InvalidArgument); one opened in
/// place does not check on its reads, but its check_source() tells (by
/// the address of its bytes as well). `auto&& s = *MmapSource::open(p);` holds the source
/// itself (a temporary Result's operator* gives the value, moved out), so
/// it may be bound so; the source must then stay in `s`. The map itself is
/// a small copyable handle: the views do not depend on the map object,
/// which may be moved or copied freely. (MappedFile holds an MmapSource
/// and its map as one value that may be moved, PreadFile a FileSource and
/// its map over lent metadata memory.)
class NamedDataMap {
 public:
  /// The largest alignment get_data()'s copy keeps (a page): a key's may
  /// be up to 2^32, for which posix_memalign reserves about the alignment
  /// in address space for every copy (4 GiB for 5 bytes), and which a
  /// 32-bit size_t does not hold. A view of mapped memory keeps a key's
  /// alignment up to its page, likewise.
  static constexpr std::uint64_t kMaxCopyAlignment = 4096;

  // ---- opening ---------------------------------------------------------------

  /// The map keeps a reference to its source, which must outlive it: a
  /// temporary source (`open(*MmapSource::open(path))`, whose mapping is
  /// gone at the end of the statement) is refused at compile time.
  template <class Source, class... Memory,
            detail::traits::enable_if_t<!detail::traits::is_reference<Source>::value, int> = 0>
  static Result<NamedDataMap> open(Source&&, Memory...) noexcept {
    static_assert(sizeof(Source) == 0,
                  "NamedDataMap::open(source): the source must outlive the map, and this one is a temporary "
                  "(it would be destroyed at the end of the statement, leaving the map dangling); keep it in a "
                  "variable: auto src = MmapSource::open(path); auto map = NamedDataMap::open(*src);");
    return Result<NamedDataMap>(Error::InvalidArgument);
  }

  /// Opens a memory-backed source (MmapSource, BufferSource): the metadata
  /// is read in place. The source's memory must be 8-byte aligned
  /// (Error::Misaligned otherwise); a source that is not memory-backed gets
  /// Error::InvalidArgument (use metadata_size and the lending overload), as
  /// does a BufferSource whose memory is null ("the source's memory is null").
  static Result<NamedDataMap> open(const DataSource& src, const OpenOptions& options = {}) noexcept {
    using R = Result<NamedDataMap>;
    const std::uint64_t size = src.size();
    if (size < format::kMinFileSize)
      return R(Error::Truncated, "file is smaller than the FT01 identifier and FH01 header", size);
    const std::uint8_t* file = src.view(0, size);
    if (file == nullptr) {
      // Two causes give no view: a source that is not memory-backed, and a
      // memory source whose memory is null (a BufferSource of an unchecked
      // allocation). A one-byte read tells them apart and names the second
      // (its read fails InvalidArgument, "the source's memory is null"); a
      // file whose read fails otherwise (EIO) keeps the hint to lend
      // memory. This is only the error path.
      std::uint8_t first = 0;
      if (Status st = src.read(0, &first, 1); !st && st.error() == Error::InvalidArgument) return st.failure();
      return R(Error::InvalidArgument, "source is not memory-backed: lend metadata memory", 0);
    }
    if (reinterpret_cast<std::uintptr_t>(file) % 8 != 0)
      return R(Error::Misaligned, "source memory is not 8-byte aligned",
               reinterpret_cast<std::uintptr_t>(file) % 8);
    return parse(src, file, size, file, options);
  }

  /// Bytes of metadata (flatbuffer and WDX1 block: the head of the file) the
  /// lending overload of open() copies. Reads the header through src.read.
  static Result<std::uint64_t> metadata_size(const DataSource& src) noexcept {
    using R = Result<std::uint64_t>;
    const std::uint64_t size = src.size();
    if (size < format::kMinFileSize)
      return R(Error::Truncated, "file is smaller than the FT01 identifier and FH01 header", size);
    std::uint8_t head[format::kMinFileSize];
    Status st = src.read(0, head, sizeof head);
    if (!st) return st.failure();
    Result<FileHeader> h = detail::parse_header(head, size);
    if (!h) return h.failure();
    std::uint64_t ext = 0;
    if (detail::ext_position(*h, &ext)) {
      std::uint8_t eh[16];
      // ext_position guarantees 4 bytes; read the rest only for a WDX1 block.
      st = src.read(ext, eh, 4);
      if (!st) return st.failure();
      if (std::memcmp(eh, format::kExtMagic, 4) == 0) {
        if (h->segment_base_offset - ext < format::ext_header::kSize)
          return R(Error::MalformedIndex, "WDX1 header runs into the segment data", ext);
        st = src.read(ext, eh, 16);
        if (!st) return st.failure();
        Result<std::uint64_t> bs = detail::ext_block_size(eh, ext, *h);
        if (!bs) return bs;
        return ext + *bs;
      }
    }
    // At least the header itself, which a flatbuffer_offset of 40 and an
    // empty flatbuffer would end before.
    const std::uint64_t fb_end = h->flatbuffer_offset + h->flatbuffer_size;
    return fb_end > format::kMinFileSize ? fb_end : std::uint64_t{format::kMinFileSize};
  }

  /// Opens any source (FileSource, or a custom one) by copying the metadata
  /// head into `metadata_memory` (at least metadata_size(src) bytes, 8-byte
  /// aligned; it must outlive the map). Data then comes through src.view
  /// when the source is memory-backed and the view is aligned as the key
  /// asks (the source's memory may lie anywhere here), else through
  /// src.read into an aligned copy.
  static Result<NamedDataMap> open(const DataSource& src, Span<std::uint8_t> metadata_memory,
                                   const OpenOptions& options = {}) noexcept {
    using R = Result<NamedDataMap>;
    if (reinterpret_cast<std::uintptr_t>(metadata_memory.data()) % 8 != 0)
      return R(Error::Misaligned, "metadata memory is not 8-byte aligned",
               reinterpret_cast<std::uintptr_t>(metadata_memory.data()) % 8);
    Result<std::uint64_t> need = metadata_size(src);
    if (!need) return need.failure();
    if (metadata_memory.size() < *need)
      return R(Error::BufferTooSmall, "metadata memory is smaller than metadata_size()", *need);
    Status st = src.read(0, metadata_memory.data(), *need);
    if (!st) return st.failure();
    return parse(src, metadata_memory.data(), *need, nullptr, options);
  }

  // ---- ExecuTorch's NamedDataMap --------------------------------------------

  /// The layout stored with `key`. NotFound if the key is absent or was
  /// stored without a layout; MalformedLayout (naming the rule, `at` the
  /// layout's position) if its layout breaks its rules or describes more
  /// bytes than its segment holds (open() lets such a file through, as
  /// ExecuTorch's reader does).
  Result<TensorLayout> get_tensor_layout(KeyView key) const noexcept {
    std::uint32_t i = 0;
    if (!lookup(key, &i)) return Result<TensorLayout>(Error::NotFound, "no such key", 0);
    return layout_of(i);
  }

  /// The bytes of `key`: a zero-copy view for memory-backed sources (cost
  /// independent of the size; the pointer is aligned to the key's alignment
  /// up to the source's own alignment: the page size for an MmapSource of a
  /// whole file, that of the window's offset for one of a window), else
  /// a malloc'd copy aligned to the key's alignment up to kMaxCopyAlignment.
  /// Either way, of an alignment that is not a power of two (48) only its
  /// power-of-two part (16): a page-aligned mapping can give no more.
  Result<DataBuffer> get_data(KeyView key) const noexcept {
    std::uint32_t i = 0;
    if (!lookup(key, &i)) return Result<DataBuffer>(Error::NotFound, "no such key", 0);
    return data_of(i);
  }

  /// Copies the tensor `key` into `buffer`: as ExecuTorch does, the bytes
  /// its layout describes (at most its segment's, and maybe fewer), or the
  /// whole segment for a key without a layout. The rest of `buffer` is not
  /// written. BufferTooSmall (and nothing written) if `size` is below that
  /// count; `at` is the count. MalformedLayout (nothing written) for a key
  /// whose layout get_tensor_layout refuses. `buffer` may be null only for
  /// a zero-size tensor.
  Status load_data_into(KeyView key, void* buffer, std::size_t size) const noexcept {
    std::uint32_t i = 0;
    if (!lookup(key, &i)) return Status(Error::NotFound, "no such key", 0);
    const KeyInfo k = info_at(i);
    const Result<TensorLayout> layout = layout_of(i);
    // A layout that breaks its rules (open() lets the file through, as
    // ExecuTorch does) gives no byte count to copy: its failure, not the
    // whole segment.
    if (!layout.ok() && layout.error() != Error::NotFound) return layout.failure();
    const std::uint64_t n = layout.ok() ? layout->nbytes() : k.size;
    if (static_cast<std::uint64_t>(size) < n)
      return Status(Error::BufferTooSmall, "buffer is smaller than the data", n);
    if (n == 0) return detail::ok_status();  // a zero-size tensor needs no buffer
    if (buffer == nullptr) return Status(Error::InvalidArgument, "buffer is null", 0);
    if (file_ != nullptr) {
      std::memcpy(buffer, file_ + k.offset, static_cast<std::size_t>(n));
      return detail::ok_status();
    }
    return read_source(k.offset, buffer, n);
  }

  /// Number of keys.
  Result<std::size_t> get_num_keys() const noexcept { return static_cast<std::size_t>(key_count_); }

  /// Key `index`, in file order. The view is NUL-terminated in the file
  /// (data()[size()] == 0), so it also serves as a C string.
  Result<KeyView> get_key(std::size_t index) const noexcept {
    if (index >= key_count_)
      return Result<KeyView>(Error::InvalidArgument, "key index out of range", index);
    return key_at(static_cast<std::uint32_t>(index));
  }

  // ---- wdedup extras ---------------------------------------------------------

  /// Where `key`'s bytes are, or NotFound.
  Result<KeyInfo> find(KeyView key) const noexcept {
    std::uint32_t i = 0;
    if (!lookup(key, &i)) return Result<KeyInfo>(Error::NotFound, "no such key", 0);
    return info_at(i);
  }
  /// KeyInfo of key `index`.
  Result<KeyInfo> key_info(std::size_t index) const noexcept {
    if (index >= key_count_) return Result<KeyInfo>(Error::InvalidArgument, "key index out of range", index);
    return info_at(static_cast<std::uint32_t>(index));
  }
  /// get_data of key `index`, with no lookup: walking every key of a plain
  /// ExecuTorch file by name would scan the keys once per key.
  Result<DataBuffer> key_data(std::size_t index) const noexcept {
    if (index >= key_count_) return Result<DataBuffer>(Error::InvalidArgument, "key index out of range", index);
    return data_of(static_cast<std::uint32_t>(index));
  }
  /// get_tensor_layout of key `index`, with no lookup.
  Result<TensorLayout> key_layout(std::size_t index) const noexcept {
    if (index >= key_count_) return Result<TensorLayout>(Error::InvalidArgument, "key index out of range", index);
    return layout_of(static_cast<std::uint32_t>(index));
  }

  /// O(1) lookups available: a wdedup file (index stored in the file) or
  /// build_index succeeded. Otherwise a map of more than 32 keys scans them
  /// (no allocation); one of at most 32 looks keys up through a table of
  /// one-byte tags filled at open, which an index would not beat, so it is
  /// never consulted there.
  bool has_index() const noexcept { return ext_ != 0 || built_slots_ != nullptr; }
  /// The keys' strings overlap in the file: they take more bytes (4 + size
  /// + 1 each) than its flatbuffer holds. No writer makes such keys (each is
  /// written once, and equal keys are refused), but a crafted file can make
  /// N distinct keys of about 4N bytes each out of one pool of 4N (a string
  /// can start inside another and share its end), so anything that reads
  /// every key whole takes time quadratic in the file's size (a 4.3 MB file
  /// of 32,000 such keys: 6.9 s to hash them). Such a plain file is read
  /// (lookups scan, comparing a key only as far as the query's length), but
  /// a WDX1 one is refused at open, build_index() refuses it, and so does
  /// the import (wdedup/import.hpp), which would copy every key.
  bool keys_overlap() const noexcept { return keys_overlap_; }
  /// True for a file with the WDX1 extension block.
  bool has_extension() const noexcept { return ext_ != 0; }
  /// True when the file was opened with OpenOptions::allow_moved_segments
  /// and some key's data range is no longer the one its WDX1 block
  /// records: data is read where the flatbuffer says.
  bool segments_moved() const noexcept { return segments_moved_; }

  /// Bytes build_index needs for `key_count` keys (get_num_keys()). More
  /// keys than a file can hold (2^32 - 1) give UINT64_MAX: memory no one has.
  static std::uint64_t index_memory_size(std::size_t key_count) noexcept {
    if (key_count > UINT32_MAX) return UINT64_MAX;
    return 8 * detail::index_slot_count(key_count);
  }
  /// Builds a hash index over the keys in lent memory (8-byte aligned, at
  /// least index_memory_size(keys) bytes, outliving the map): O(1) lookups
  /// for plain ExecuTorch files, no heap. Does nothing if has_index().
  /// MalformedKey if two keys are equal (a scan would silently pick the
  /// first). MalformedIndex, without hashing a key, if keys_overlap().
  /// Not thread-safe: call before sharing the map.
  ///
  /// The hash seed is not a constant: keys chosen to collide under a known
  /// seed pile into one run of slots, which made building quadratic and
  /// every lookup a scan of that run (32,768 chosen keys: 0.2 s to build,
  /// 8 us a lookup). It is derived from the addresses of the memory and the
  /// map, which differ from process to process under ASLR; and if the
  /// slots still take too many probes, the build is retried under other
  /// seeds, which keys chosen against one do not collide under. If every
  /// seed tried fails, MalformedIndex, and lookups go on scanning.
  Status build_index(Span<std::uint8_t> memory) noexcept {
    const std::uint64_t where[2] = {reinterpret_cast<std::uintptr_t>(memory.data()),
                                    reinterpret_cast<std::uintptr_t>(this)};
    std::uint64_t seed = detail::key_hash(where, sizeof where, key_count_);
    Status st = detail::ok_status();
    for (int attempt = 0; attempt < detail::kIndexSeedAttempts;
         ++attempt, seed = detail::next_index_seed(seed, attempt)) {
      st = build_index(memory, seed);
      if (st.error() != Error::MalformedIndex) return st;
    }
    return st;
  }
  /// build_index under `seed` alone (a caller with a source of randomness
  /// passes one). MalformedIndex if the keys take more than 64 probes per
  /// slot in all to place (a valid set takes about 1.5 per key): the memory
  /// is then left unused and lookups go on scanning.
  Status build_index(Span<std::uint8_t> memory, std::uint64_t seed) noexcept {
    if (has_index()) return detail::ok_status();
    if (reinterpret_cast<std::uintptr_t>(memory.data()) % 8 != 0)
      return Status(Error::Misaligned, "index memory is not 8-byte aligned",
                    reinterpret_cast<std::uintptr_t>(memory.data()) % 8);
    const std::uint64_t slots = detail::index_slot_count(key_count_);
    if (memory.size() / 8 < slots)
      return Status(Error::BufferTooSmall, "index memory is smaller than index_memory_size()", 8 * slots);
    if (keys_overlap())
      return Status(Error::MalformedIndex, kKeysOverlap, named_pos_);
    std::uint8_t* s = memory.data();
    const detail::SlotFill fill =
        detail::fill_slots(key_count_, [this](std::uint32_t i) noexcept { return key_at(i); }, seed, s, slots);
    if (fill.result == detail::SlotFill::kTooManyProbes)
      return Status(Error::MalformedIndex, "keys collide in the built index under this seed (at = keys placed)",
                    fill.at);
    if (fill.result == detail::SlotFill::kDuplicate) return Status(Error::MalformedKey, "duplicate key", key_pos(fill.at));
    built_slots_ = s;
    built_slot_count_ = slots;
    built_seed_ = seed;
    return detail::ok_status();
  }

  std::uint32_t segment_count() const noexcept { return segment_count_; }
  /// Indexes are std::size_t, as key_info's and function's: one past
  /// 2^32 - 1 is out of range, not taken modulo 2^32.
  Result<SegmentInfo> segment(std::size_t index) const noexcept {
    if (index >= segment_count_)
      return Result<SegmentInfo>(Error::InvalidArgument, "segment index out of range", index);
    const auto i = static_cast<std::uint32_t>(index);
    SegmentInfo s;
    seg_range(i, &s.offset, &s.size);
    s.offset += header_.segment_base_offset;
    if (ext_ != 0) {
      const std::uint8_t* si = meta_ + seginfo_ + std::uint64_t{i} * format::segment_info::kSize;
      s.content_hash = format::load_u64(si + format::segment_info::kContentHash);
      s.alignment = format::load_u64(si + format::segment_info::kAlignment);
      s.has_content_hash = true;
    }
    return s;
  }

  std::size_t function_count() const noexcept { return function_count_; }
  Result<FunctionView> function(std::size_t i) const noexcept {
    if (i >= function_count_) return Result<FunctionView>(Error::InvalidArgument, "function index out of range", i);
    return function_at(static_cast<std::uint32_t>(i));
  }
  /// The function compiled for (method, partition), or NotFound: "no
  /// function for this method" (at 0) for a method no function names (a
  /// misspelled one, say), else "method has no function for this partition
  /// (at = the method's function count)", the partitions it does have.
  Result<FunctionView> find_function(KeyView method, std::size_t partition) const noexcept {
    std::uint64_t of_method = 0;
    for (std::uint32_t i = 0; i < function_count_; ++i) {
      const FunctionView f = function_at(i);
      if (f.method_ != method) continue;
      if (f.partition_ == partition) return f;
      ++of_method;
    }
    if (of_method == 0) return Result<FunctionView>(Error::NotFound, "no function for this method", 0);
    return Result<FunctionView>(Error::NotFound,
                                "method has no function for this partition (at = the method's function count)",
                                of_method);
  }
  /// The first function with this name (a name repeats across blobs under
  /// a positional policy), or NotFound.
  Result<FunctionView> find_function(KeyView function_name) const noexcept {
    for (std::uint32_t i = 0; i < function_count_; ++i) {
      const FunctionView f = function_at(i);
      if (f.name_ == function_name) return f;
    }
    return Result<FunctionView>(Error::NotFound, "no function with this name", 0);
  }
  /// The function named `function_name` inside blob `blob_key`, or NotFound.
  Result<FunctionView> find_function(KeyView blob_key, KeyView function_name) const noexcept {
    for (std::uint32_t i = 0; i < function_count_; ++i) {
      const FunctionView f = function_at(i);
      if (f.name_ == function_name && f.blob_ == blob_key) return f;
    }
    return Result<FunctionView>(Error::NotFound, "no function with this name in this blob", 0);
  }

  const FileHeader& header() const noexcept { return header_; }
  /// FlatTensor schema version (always format::kFlatTensorVersion after open).
  std::uint32_t version() const noexcept { return format::kFlatTensorVersion; }
  std::uint64_t file_size() const noexcept { return file_size_; }
  /// Every get_data is a zero-copy view (the map was opened in place).
  bool is_memory_backed() const noexcept { return file_ != nullptr; }
  const DataSource& source() const noexcept { return *src_; }
  /// Whether the source is still the one opened: InvalidArgument if its
  /// size changed since open (moved from, or moved or assigned over; see
  /// Lifetimes), if its instance() did (another file's MmapSource or
  /// FileSource in its place), or, for a map opened in place, if its bytes
  /// are no longer where they were. Where the map's source once lay
  /// another source of the same size may lie now: the next element of a
  /// vector moved over it, a second mapping of the same file, even at the
  /// address of the first (a user trial's copy of a MappedFile's map,
  /// 2026-12-02, passed the size check with its mapping gone, and crashed
  /// in get_data; a review then put a mapping of another file where the
  /// freed one had been, which passed the address check too). Checked
  /// before every read of the source; a map opened in place reads its
  /// memory, not the source. It reads the source where it was: it tells a
  /// source moved from, moved over or replaced in that place, never one
  /// whose storage was freed (a vector that grew, an object destroyed),
  /// which no check through the pointer can (a user trial's ASan run).
  Status check_source() const noexcept {
    if (src_->size() != file_size_ || src_->instance() != src_instance_ ||
        (file_ != nullptr && src_->view(0, file_size_) != file_))
      return Status(Error::InvalidArgument, "the source is not the one opened (moved or replaced since open)",
                    src_->size());
    return detail::ok_status();
  }

 private:
  // What a zero-size copy points at: not null, and aligned like a mapping.
  alignas(4096) static constexpr std::uint8_t kEmptyByte = 0;

  // Every slot empty, so no map's bytes are left indeterminate (only maps
  // of at most kTagKeys keys read the slots; open() fills theirs).
  NamedDataMap() noexcept { std::memset(tag_slots_, kNoTag, sizeof tag_slots_); }

  // MappedFile and PreadFile move their source and point their map at the
  // new place (detail::SourceWithMap). Only for a source of the same file
  // and size: everything else the map holds points into the mapping (or
  // lent memory), which does not move.
  template <class Source>
  friend class detail::SourceWithMap;
  void rebind_source(const DataSource& src) noexcept { src_ = &src; }

  // ---- queries over validated state ------------------------------------------

  /// Key i's WDX1 entry (ext_ != 0): from a pointer kept at open, not
  /// meta_ + entries_, an add fewer on the way to every key and layout.
  const std::uint8_t* entry(std::uint32_t i) const noexcept {
    return entry_base_ + std::uint64_t{i} * format::key_entry::kSize;
  }
  std::uint64_t named_table(std::uint32_t i) const noexcept {
    return detail::fb::trusted_element(meta_, named_pos_, i);
  }
  /// Absolute offset of key i's characters.
  std::uint64_t key_pos(std::uint32_t i) const noexcept {
    if (ext_ != 0)
      return format::load_u32(entry(i) + format::key_entry::kKeyOffset);
    return detail::fb::trusted_ref(meta_, named_table(i), format::named_data_field::kKey) + 4;
  }
  KeyView key_at(std::uint32_t i) const noexcept {
    const char* base = reinterpret_cast<const char*>(meta_);
    if (ext_ != 0) {
      const std::uint8_t* e = entry(i);
      return KeyView(base + format::load_u32(e + format::key_entry::kKeyOffset),
                              format::load_u32(e + format::key_entry::kKeySize));
    }
    const std::uint64_t s = detail::fb::trusted_ref(meta_, named_table(i), format::named_data_field::kKey);
    return KeyView(base + s + 4, format::load_u32(meta_ + s));
  }
  /// Absolute position of key i's TensorLayout table, 0 if none.
  std::uint64_t layout_pos(std::uint32_t i) const noexcept {
    if (ext_ != 0)
      return format::load_u32(entry(i) + format::key_entry::kLayoutOffset);
    return detail::fb::trusted_ref(meta_, named_table(i), format::named_data_field::kTensorLayout);
  }
  std::uint32_t segment_index_fb(std::uint32_t i) const noexcept {
    const std::uint64_t p =
        detail::fb::trusted_field(meta_, named_table(i), format::named_data_field::kSegmentIndex);
    return p == 0 ? 0 : format::load_u32(meta_ + p);
  }
  /// Segment i's offset (relative to the base) and size.
  void seg_range(std::uint32_t i, std::uint64_t* offset, std::uint64_t* size) const noexcept {
    const std::uint64_t t = detail::fb::trusted_element(meta_, segments_pos_, i);
    const std::uint64_t po = detail::fb::trusted_field(meta_, t, format::data_segment_field::kOffset);
    const std::uint64_t ps = detail::fb::trusted_field(meta_, t, format::data_segment_field::kSize);
    *offset = po == 0 ? 0 : format::load_u64(meta_ + po);
    *size = ps == 0 ? 0 : format::load_u64(meta_ + ps);
  }
  /// get_tensor_layout and key_layout of key i.
  Result<TensorLayout> layout_of(std::uint32_t i) const noexcept {
    const std::uint64_t lt = layout_pos(i);
    if (lt == 0) return Result<TensorLayout>(Error::NotFound, "key has no tensor layout", i);
    // Only a file with a layout that broke its rules at open pays for the
    // check again, key by key (see validate_keys), out of line: inlined, it
    // took every get_tensor_layout from 13 to 23 ns at 16 keys (and +10 ns
    // at 256 and 4096; Zen 4 EPYC VM), in files that have no such layout.
    if (layouts_faulty_) return checked_layout(i, lt);
    return layout_at(i, lt);
  }
#if defined(__GNUC__) || defined(__clang__)
  __attribute__((noinline))
#endif
  Result<TensorLayout> checked_layout(std::uint32_t i, std::uint64_t lt) const noexcept {
    const TensorLayout l = layout_at(i, lt);
    if (const char* why = layout_problem(l.scalar_type, l.sizes.data(), l.sizes.size(), l.dim_order.data(),
                                         l.dim_order.size(), info_at(i).size))
      return Result<TensorLayout>(Error::MalformedLayout, why, lt);
    return l;
  }
  /// Which rule a layout breaks (a fixed message), or nullptr: its own
  /// rules (check_layout) and no more bytes than its segment holds.
  static const char* layout_problem(ScalarType type, const std::int32_t* sizes, std::size_t rank,
                                    const std::uint8_t* dim_order, std::size_t dim_order_len,
                                    std::uint64_t segment_size) noexcept {
    std::uint64_t nbytes = 0;
    if (const detail::LayoutFault f = detail::check_layout(type, sizes, rank, dim_order, dim_order_len, &nbytes);
        f.rule != detail::LayoutRule::kNone)
      return detail::layout_rule_message(f.rule);
    if (nbytes > segment_size) return "layout describes more bytes than its segment holds";
    return nullptr;
  }
  /// A read from the source, unless it is no longer the one opened (which
  /// would give another file's bytes or a misleading Truncated).
  Status read_source(std::uint64_t offset, void* dst, std::uint64_t n) const noexcept {
    if (Status st = check_source(); !st) return st;
    return src_->read(offset, dst, n);
  }
  /// get_data and key_data of key i.
  Result<DataBuffer> data_of(std::uint32_t i) const noexcept {
    using R = Result<DataBuffer>;
    const KeyInfo k = info_at(i);
    if (file_ != nullptr) return DataBuffer::view(file_ + k.offset, static_cast<std::size_t>(k.size));
    if (Status st = check_source(); !st) return st.failure();
    const std::uint64_t pow2 = detail::pow2_part(k.alignment);
    const std::uint64_t align = pow2 < kMaxCopyAlignment ? pow2 : kMaxCopyAlignment;
    // Opened with lent metadata, a memory source may lie anywhere (its
    // metadata is copied): its bytes are lent in place only where they are
    // aligned as the key asks, else copied. (A review found views at odd
    // addresses for keys asking 64 and 4096 over a BufferSource at p + 1.)
    if (const std::uint8_t* p = src_->view(k.offset, k.size);
        p != nullptr && reinterpret_cast<std::uintptr_t>(p) % align == 0)
      return DataBuffer::view(p, static_cast<std::size_t>(k.size));
    if (k.size > SIZE_MAX - 64) return R(Error::OutOfMemory, "data does not fit in memory", k.size);
    if (k.size == 0) return DataBuffer::view(&kEmptyByte, 0);
    void* mem = nullptr;
    // malloc(n) is aligned only for the types that fit in n bytes: jemalloc
    // (FreeBSD's libc, Android's before Scudo) gives 8-byte blocks 8-byte
    // alignment where max_align_t asks for 16. A copy smaller than its
    // alignment comes from posix_memalign (whose alignment is at least a
    // pointer's).
    if (align <= alignof(std::max_align_t) && k.size >= align) {
      mem = std::malloc(static_cast<std::size_t>(k.size));
    } else {
      mem = detail::aligned_memory(static_cast<std::size_t>(align < sizeof(void*) ? sizeof(void*) : align),
                                   static_cast<std::size_t>(k.size));
    }
    if (mem == nullptr) return R(Error::OutOfMemory, "allocating the copy failed", k.size);
    Status st = src_->read(k.offset, mem, k.size);  // (check_source() passed above)
    if (!st) {
      std::free(mem);
      return st.failure();
    }
    return DataBuffer::adopt(mem, mem, static_cast<std::size_t>(k.size));
  }
  KeyInfo info_at(std::uint32_t i) const noexcept {
    KeyInfo k;
    k.key = key_at(i);
    k.key_index = i;
    if (ext_ != 0) {
      namespace ke = format::key_entry;
      const std::uint8_t* e = entry(i);
      k.offset = format::load_u64(e + ke::kDataOffset);
      k.size = format::load_u64(e + ke::kDataSize);
      k.alignment = format::load_u64(e + ke::kAlignment);
      k.segment_index = format::load_u32(e + ke::kSegmentIndex);
      k.has_layout = format::load_u32(e + ke::kLayoutOffset) != 0;
      if (segments_moved_) {  // the flatbuffer's range, not the block's
        seg_range(k.segment_index, &k.offset, &k.size);
        k.offset += header_.segment_base_offset;
      }
      return k;
    }
    k.segment_index = segment_index_fb(i);
    seg_range(k.segment_index, &k.offset, &k.size);
    k.offset += header_.segment_base_offset;
    k.has_layout = layout_pos(i) != 0;
    return k;
  }
  /// Offset of field `id` within the (validated) table at `t`, 0 if absent.
  static std::uint64_t field_offset(const std::uint8_t* d, std::uint64_t t, int id) noexcept {
    const std::uint64_t p = detail::fb::trusted_field(d, t, id);
    return p == 0 ? 0 : p - t;
  }
  // Always inlined: at -O2 GCC 12 called it out of line once checked_layout
  // used it too, and the caller read the returned layout back from the
  // stack with wider loads than the callee's stores (no store forwarding):
  // get_tensor_layout took 22.9 ns at 16 keys against 13.7 ns at -O3, and
  // 14.2 ns at both with the attribute (Zen 4 EPYC VM, 2026-11-29). Handing
  // checked_layout the layout instead (one caller) put it in memory on
  // every lookup: 22.6 ns at -O3 too.
#if defined(__GNUC__) || defined(__clang__)
  __attribute__((always_inline))
#endif
  TensorLayout layout_at(std::uint32_t i, std::uint64_t t) const noexcept {
    LayoutFields f;
    if (small_layouts_) {
      f.scalar_type = small_types_[i];
      f.sizes = small_sizes_[i];
      f.dim_order = small_dims_[i];
    } else {
      f = layout_fields(t);
    }
    TensorLayout l;
    l.scalar_type = static_cast<ScalarType>(f.scalar_type);
    if (f.sizes != 0)
      l.sizes = Span<const std::int32_t>(reinterpret_cast<const std::int32_t*>(meta_ + f.sizes + 4),
                                         format::load_u32(meta_ + f.sizes));
    if (f.dim_order != 0)
      l.dim_order = Span<const std::uint8_t>(meta_ + f.dim_order + 4, format::load_u32(meta_ + f.dim_order));
    return l;
  }
  /// A (validated) layout table's scalar type, and the positions of its
  /// sizes and dim_order vectors (0: absent).
  struct LayoutFields {
    std::int8_t scalar_type = 0;
    std::uint64_t sizes = 0, dim_order = 0;
  };
#if defined(__GNUC__) || defined(__clang__)
  __attribute__((always_inline))
#endif
  LayoutFields layout_fields(std::uint64_t t) const noexcept {
    namespace tl = format::tensor_layout_field;
    // With one field layout for every table (checked at open), a field is
    // at a known offset: two dependent loads (the table's vtable offset,
    // then the vtable entry) fewer on the way to each field, a third of a
    // lookup's latency.
    std::uint64_t st;
    LayoutFields f;
    if (layout_uniform_) {
      st = layout_fields_[0] == 0 ? 0 : t + layout_fields_[0];
      f.sizes = layout_fields_[1] == 0 ? 0 : detail::fb::trusted_follow(meta_, t + layout_fields_[1]);
      f.dim_order = layout_fields_[2] == 0 ? 0 : detail::fb::trusted_follow(meta_, t + layout_fields_[2]);
    } else {
      st = detail::fb::trusted_field(meta_, t, tl::kScalarType);
      f.sizes = detail::fb::trusted_ref(meta_, t, tl::kSizes);
      f.dim_order = detail::fb::trusted_ref(meta_, t, tl::kDimOrder);
    }
    f.scalar_type = st == 0 ? 0 : static_cast<std::int8_t>(meta_[st]);
    return f;
  }
  /// Decodes the layouts of a map of at most kTagKeys keys into the map
  /// object (small_types_, small_sizes_, small_dims_), so that a lookup's
  /// vectors come from the tag's slot and the map object: without,
  /// the key's entry (or named_data table) and then its layout table's
  /// offset to the vector are two more dependent loads: a 16-key
  /// get_tensor_layout took 14.1-14.2 ns in the harness, now 12.1-12.3
  /// (Zen 4 EPYC VM, GCC 12 -O3; std::unordered_map, which holds each
  /// layout in its node, 14.6-17.0 ns in the same processes). The map
  /// object grows by 288 bytes, to 784 on 64-bit targets (792 since its
  /// source's instance is kept). Positions are
  /// kept in 32 bits, which hold every one when the flatbuffer ends below
  /// 4 GiB (FlatTensor's schema has only 32-bit offsets, and FlatBuffers'
  /// builders stop such buffers at 2 GiB); past that, layouts are decoded
  /// at each lookup as for bigger maps. (layout_of still reads the key's
  /// entry, to say NotFound for a key without a layout; a predicted branch,
  /// off the chain to the vectors.)
  void cache_small_layouts() noexcept {
    if (key_count_ > kTagKeys || header_.flatbuffer_offset + header_.flatbuffer_size > UINT32_MAX) return;
    for (std::uint32_t i = 0; i < key_count_; ++i) {
      const std::uint64_t t = layout_pos(i);
      const LayoutFields f = t == 0 ? LayoutFields{} : layout_fields(t);  // (no layout: layout_of says so first)
      small_types_[i] = f.scalar_type;
      small_sizes_[i] = static_cast<std::uint32_t>(f.sizes);
      small_dims_[i] = static_cast<std::uint32_t>(f.dim_order);
    }
    small_layouts_ = true;
  }

  /// Index lookup: home slot, linear probing, tag then key compared.
  bool probe(const std::uint8_t* slots, std::uint64_t slot_count, std::uint64_t seed,
             KeyView key, std::uint32_t* out) const noexcept {
    const std::uint64_t h = detail::key_hash(key.data(), key.size(), seed);
    const std::uint64_t mask = slot_count - 1;
    std::uint64_t at = h & mask;
    for (std::uint64_t n = 0; n < slot_count; ++n, at = (at + 1) & mask) {
      const std::uint64_t v = format::load_u64(slots + 8 * at);
      if (v == 0) return false;
      if ((v >> 32) == (h >> 32)) {
        const auto e = static_cast<std::uint32_t>(v) - 1;
        if (same_key(key_at(e), key)) {
          *out = e;
          return true;
        }
      }
    }
    return false;
  }
  /// Up to this many keys, a lookup needs no hash chain: open() keeps a
  /// table of 256 one-byte slots in the map object itself, indexed by a
  /// key's tag (scan_tag), and a lookup reads the slot of the query's tag
  /// and compares that one key (normally the only one tried). A hash, slot,
  /// entry, key chain of dependent loads costs more than that at this size;
  /// so did comparing the keys in turn, whose loop ends on a branch taken at
  /// a random key: on the 2-core Xeon VM, get_tensor_layout latency at 16 /
  /// 32 keys was 26-28 / 36-41 ns that way and 19 / 19.5 ns hashed, against
  /// 27-28 / 27-30 ns for std::unordered_map; on the EPYC VM it was the
  /// other way round (the hash chain 0.60x of unordered_map at 16 keys, the
  /// comparison loop 1.08x). Comparing the query's tag with every key's at
  /// once (SSE2 pcmpeqb, then the lowest match) took 16.0-16.6 ns at 16
  /// keys on the Zen 5 EPYC VM, and the slot 14.5-14.8 ns: the broadcast,
  /// compare, mask and bit scan are a dozen cycles of the chain, where the
  /// slot is one load (13.8 ns with entry() too; unordered_map 14.4-16.3).
  static constexpr std::uint32_t kTagKeys = 32;
  /// Multipliers open() tries for the tags (place_tags).
  static constexpr int kTagTries = 16;
  /// An empty tag slot (the others hold a key index, below kTagKeys): not
  /// index + 1, whose subtraction would be one more step of every lookup.
  static constexpr std::uint8_t kNoTag = 0xFF;
  /// A key's tag: its length and its first, middle and last 8 bytes
  /// (keys under 8 bytes: all of them) mixed into one byte: the words
  /// rotated apart and xored, then the top byte of one product by `mul`
  /// (odd), which depends on every bit of the word. It is on the latency
  /// path of every lookup: one multiply instead of three folded took 1.4 ns
  /// off a 16-key lookup (Zen 5 EPYC VM, 18.7 -> 17.3 ns).
  static std::uint8_t scan_tag(KeyView key, std::uint64_t mul) noexcept {
    const auto* p = reinterpret_cast<const std::uint8_t*>(key.data());
    const std::size_t n = key.size();
    std::uint64_t a = 0, b = 0, c = 0;
    if (n >= 8) {
      a = format::load_u64(p);
      b = format::load_u64(p + (n - 8) / 2);
      c = format::load_u64(p + n - 8);
    } else {
      for (std::size_t i = 0; i < n; ++i) a |= std::uint64_t{p[i]} << (8 * i);
    }
    return static_cast<std::uint8_t>(((a ^ (b << 1 | b >> 63) ^ (c << 2 | c >> 62) ^ n) * mul) >> 56);
  }
  /// Fills tag_slots_ (a map of at most kTagKeys keys): key i goes in the
  /// slot of its tag, or the next free one after it (linear probing, in
  /// file order, so of equal keys the first is found, as scan finds it).
  /// A key not in its own slot costs its lookups a second compare and a
  /// mispredicted branch, so of kTagTries multipliers the one under which
  /// the keys sit the fewest slots past their own is kept (32 keys all in place under one
  /// multiplier: 13% of multipliers, so 90% of maps of 32 keys and nearly
  /// every smaller one end with none out of place).
  void place_tags() noexcept {
    std::uint32_t best_moves = UINT32_MAX;  // of the try now in tag_slots_
    for (int t = 0; t < kTagTries && best_moves != 0; ++t) {
      // Odd multipliers, one key hash of the try's number each (as
      // build_index derives its seeds).
      const std::uint64_t mul = detail::key_hash(&t, sizeof t, kTagKeys) | 1;
      std::uint8_t slots[256];
      std::memset(slots, kNoTag, sizeof slots);
      std::uint32_t moves = 0;
      for (std::uint32_t i = 0; i < key_count_; ++i) {
        std::uint8_t s = scan_tag(key_at(i), mul);
        for (; slots[s] != kNoTag; ++s) ++moves;  // (wraps at 256; 32 keys leave 224 free)
        slots[s] = static_cast<std::uint8_t>(i);
      }
      if (moves < best_moves) {
        best_moves = moves;
        tag_mul_ = mul;
        std::memcpy(tag_slots_, slots, sizeof slots);
      }
    }
  }
  /// Lookup in a map of at most kTagKeys keys: the key in the slot of the
  /// query's tag, then the next slots up to an empty one. Ends: at most 32
  /// of the 256 slots are taken.
  bool tag_lookup(KeyView key, std::uint32_t* out) const noexcept {
    for (std::uint8_t s = scan_tag(key, tag_mul_);; ++s) {
      const std::uint32_t k = tag_slots_[s];
      if (k == kNoTag) return false;
      if (same_key(key_at(k), key)) {
        *out = k;
        return true;
      }
    }
  }
  /// Lookup in a plain file of more than kTagKeys keys without an index
  /// (build_index not called): same_key against every key in turn, with
  /// the query's first and last 8 bytes read once, outside the loop.
  bool scan(KeyView key, std::uint32_t* out) const noexcept {
    const std::size_t n = key.size();
    const auto* q = reinterpret_cast<const std::uint8_t*>(key.data());
    if (n < 8) {
      for (std::uint32_t i = 0; i < key_count_; ++i) {
        if (same_key(key_at(i), key)) {
          *out = i;
          return true;
        }
      }
      return false;
    }
    const std::uint64_t head = format::load_u64(q), tail = format::load_u64(q + n - 8);
    for (std::uint32_t i = 0; i < key_count_; ++i) {
      const KeyView k = key_at(i);
      if (k.size() != n) continue;
      const auto* c = reinterpret_cast<const std::uint8_t*>(k.data());
      if (format::load_u64(c) != head || format::load_u64(c + n - 8) != tail) continue;
      if (same_middle(c, q, n)) {
        *out = i;
        return true;
      }
    }
    return false;
  }
  /// Bytes [8, n - 8) of two n-byte keys (n >= 8) equal, a word at a time:
  /// inline, where a memcmp call would cost as much as the rest of a lookup.
  static bool same_middle(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) noexcept {
    for (std::size_t o = 8; o + 8 < n; o += 8)
      if (format::load_u64(a + o) != format::load_u64(b + o)) return false;
    return true;
  }
  /// Two keys equal: as KeyView's ==, without a memcmp call for keys of 8
  /// bytes or more (the tail word overlaps the last middle one).
  static bool same_key(KeyView a, KeyView b) noexcept {
    const std::size_t n = a.size();
    if (n != b.size()) return false;
    if (n < 8) return a == b;
    const auto* x = reinterpret_cast<const std::uint8_t*>(a.data());
    const auto* y = reinterpret_cast<const std::uint8_t*>(b.data());
    return format::load_u64(x) == format::load_u64(y) && format::load_u64(x + n - 8) == format::load_u64(y + n - 8) &&
           same_middle(x, y, n);
  }
  /// The tag lookup inline, the rest out of line: with all three inlined,
  /// every lookup paid the bigger function's register saves (missing keys,
  /// Zen 5 EPYC VM: 16 keys 7.4 -> 6.6 ns, 32 keys 11.5 -> 8.4 ns).
  bool lookup(KeyView key, std::uint32_t* out) const noexcept {
    if (key_count_ <= kTagKeys) return tag_lookup(key, out);
    return lookup_indexed(key, out);
  }
#if defined(__GNUC__) || defined(__clang__)
  __attribute__((noinline))
#endif
  bool lookup_indexed(KeyView key, std::uint32_t* out) const noexcept {
    if (ext_ != 0) return probe(meta_ + slots_, slot_count_, seed_, key, out);
    if (built_slots_ != nullptr) return probe(built_slots_, built_slot_count_, built_seed_, key, out);
    return scan(key, out);
  }

  FunctionView function_at(std::uint32_t i) const noexcept {
    namespace fr = format::function_record;
    const std::uint8_t* r = meta_ + functions_ + std::uint64_t{i} * fr::kSize;
    const char* s = reinterpret_cast<const char*>(meta_ + strings_);
    FunctionView f;
    f.method_ = KeyView(s + format::load_u32(r + fr::kMethodOffset), format::load_u32(r + fr::kMethodSize));
    f.partition_ = format::load_u32(r + fr::kPartitionIndex);
    f.blob_ = KeyView(s + format::load_u32(r + fr::kBlobOffset), format::load_u32(r + fr::kBlobSize));
    f.name_ = KeyView(s + format::load_u32(r + fr::kNameOffset), format::load_u32(r + fr::kNameSize));
    f.count_ = format::load_u32(r + fr::kTensorsCount);
    f.rows_ = meta_ + ftensors_ +
              std::uint64_t{format::load_u32(r + fr::kTensorsBegin)} * format::function_tensor::kSize;
    f.strings_ = s;
    f.entries_ = entry_base_;
    f.meta_ = meta_;
    return f;
  }

  // ---- validation (open) -----------------------------------------------------

  static Result<NamedDataMap> parse(const DataSource& src, const std::uint8_t* meta,
                                    std::uint64_t meta_size, const std::uint8_t* file,
                                    const OpenOptions& options) noexcept;
  Status validate_segments(const detail::fb::Region& r, const detail::fb::Vector& segs) const noexcept;
  Status validate_keys(const detail::fb::Region& r, const detail::fb::Vector& named) noexcept;
  /// The WDX1 block's place and size (0: none, an ExecuTorch file), checked
  /// right after the file header: metadata_size() checks the same first, so
  /// a file with faults in both is refused for the same one in place and
  /// through lent memory.
  Result<std::uint64_t> locate_ext(std::uint64_t meta_size, std::uint64_t* pos) const noexcept;
  Status validate_ext(std::uint64_t x, std::uint64_t block, const OpenOptions& options) noexcept;
  Status validate_ext_entries(const OpenOptions& options) noexcept;
  Status validate_ext_slots() const noexcept;
  Status validate_ext_functions() const noexcept;
  /// Why keys are not hashed (validate_ext_slots, build_index): keys_overlap().
  static constexpr const char* kKeysOverlap =
      "key strings overlap (they add up to more bytes than the flatbuffer), too long to hash";
  /// A key's WDX1 data range differs from its segment's (validate_ext_entries).
  static constexpr const char* kMovedOffset =
      "key entry's data offset differs from its segment: the segments moved since the WDX1 block was written "
      "(as ExecuTorch's replace_data moves them), or either side is damaged; OpenOptions::allow_moved_segments "
      "reads them where the flatbuffer says";
  static constexpr const char* kMovedOutOfOrder =
      "segments moved since the WDX1 block was written, but not as a rewrite lays them out (in index order, "
      "each after the one before, segment_data_size ending at the last; at = the segment index, or 40: "
      "segment_data_size)";
  static constexpr const char* kMovedSize =
      "key entry's data size differs from its segment: the segments were resized since the WDX1 block was "
      "written (as ExecuTorch's replace_data resizes them), or either side is damaged; "
      "OpenOptions::allow_moved_segments reads them where the flatbuffer says";

  const DataSource* src_ = nullptr;
  const std::uint8_t* meta_ = nullptr;  ///< file offset 0 of the metadata head
  const std::uint8_t* file_ = nullptr;  ///< the whole file, if opened in place
  std::uint64_t file_size_ = 0;
  std::uint64_t src_instance_ = 0;  ///< src_->instance() at open (check_source)
  FileHeader header_;
  std::uint64_t segments_pos_ = 0;  ///< first element of FlatTensor.segments
  std::uint64_t named_pos_ = 0;     ///< first element of FlatTensor.named_data
  std::uint32_t segment_count_ = 0;
  std::uint32_t key_count_ = 0;
  // WDX1 block (absolute positions; ext_ == 0: none)
  std::uint64_t ext_ = 0;
  std::uint64_t seed_ = 0;
  std::uint64_t slot_count_ = 0;
  const std::uint8_t* entry_base_ = nullptr;  ///< meta_ + entries_
  std::uint64_t entries_ = 0, slots_ = 0, seginfo_ = 0, functions_ = 0, ftensors_ = 0, strings_ = 0;
  std::uint32_t function_count_ = 0, ftensor_count_ = 0, strings_size_ = 0;
  // build_index
  const std::uint8_t* built_slots_ = nullptr;
  std::uint64_t built_slot_count_ = 0;
  std::uint64_t built_seed_ = 0;
  // TensorLayout tables: when every one has its fields at the same offsets
  // (scalar_type, sizes, dim_order; 0 = absent), layout_at skips the vtable.
  bool layouts_seen_ = false;  ///< (a bool, not a count: with layouts_faulty_ the map keeps its size)
  bool layout_uniform_ = false;
  bool keys_overlap_ = false;  ///< see keys_overlap() (a bool: it fits in padding, as do the two below)
  bool layouts_faulty_ = false;  ///< some layout breaks its rules: layout_of checks each (also in padding)
  bool small_layouts_ = false;   ///< small_* hold every key's layout (cache_small_layouts; in padding too)
  bool segments_moved_ = false;  ///< see segments_moved() (in padding too)
  std::uint16_t layout_fields_[3] = {0, 0, 0};
  // Maps of at most kTagKeys keys: the index of the key in each tag's slot
  // (kNoTag: none), and the tags' multiplier (see place_tags).
  std::uint64_t tag_mul_ = 0;
  std::uint8_t tag_slots_[256];
  // Maps of at most kTagKeys keys: each key's layout, decoded at open
  // (cache_small_layouts): its scalar type and the positions of its sizes
  // and dim_order vectors (0: absent).
  std::int8_t small_types_[kTagKeys] = {};
  std::uint32_t small_sizes_[kTagKeys] = {};
  std::uint32_t small_dims_[kTagKeys] = {};
};

// ---- validation --------------------------------------------------------------

inline Result<NamedDataMap> NamedDataMap::parse(const DataSource& src, const std::uint8_t* meta,
                                                std::uint64_t meta_size, const std::uint8_t* file,
                                                const OpenOptions& options) noexcept {
  using R = Result<NamedDataMap>;
  namespace fb = detail::fb;
  namespace ftf = format::flat_tensor_field;
  NamedDataMap m;
  m.src_ = &src;
  m.meta_ = meta;
  m.file_ = file;
  m.file_size_ = src.size();
  m.src_instance_ = src.instance();
  if (m.file_size_ < format::kMinFileSize || meta_size < format::kMinFileSize)
    return R(Error::Truncated, "file is smaller than the FT01 identifier and FH01 header", m.file_size_);
  Result<FileHeader> h = detail::parse_header(meta, m.file_size_);
  if (!h) return h.failure();
  m.header_ = *h;
  const std::uint64_t fb_end = h->flatbuffer_offset + h->flatbuffer_size;
  if (fb_end > meta_size)  // only if the file changed since metadata_size()
    return R(Error::Truncated, "metadata memory ends inside the flatbuffer", meta_size);
  std::uint64_t ext_pos = 0;
  Result<std::uint64_t> ext_block = m.locate_ext(meta_size, &ext_pos);
  if (!ext_block) return ext_block.failure();

  // Objects live after the header; the root offset and identifier precede it.
  const fb::Region r{meta, h->flatbuffer_offset, fb_end};
  const std::uint64_t root_pos = format::load_u32(meta);
  if (!r.contains(root_pos, 4))
    return R(Error::MalformedFlatbuffer, "root offset points outside the flatbuffer", 0);
  Result<fb::Table> root = fb::table_at(r, root_pos);
  if (!root) return root.failure();
  Result<std::uint64_t> version = fb::scalar(r, *root, ftf::kVersion, 4);
  if (!version) return version.failure();
  if (*version != format::kFlatTensorVersion)
    return R(Error::UnsupportedVersion, "FlatTensor version is not 0", root_pos);

  // Both vectors must be there, if empty: ExecuTorch refuses a file
  // without either ("malformed PTD file"), so one it cannot read is not
  // read here as an empty store.
  Result<fb::Vector> segs = fb::vector_field(r, *root, ftf::kSegments, 4, Error::MalformedFlatbuffer);
  if (!segs) return segs.failure();
  if (!segs->present) return R(Error::MalformedFlatbuffer, "FlatTensor has no segments vector", root_pos);
  if (h->segment_base_offset == 0 && segs->count != 0)
    return R(Error::MalformedHeader,
             "segment_base_offset is 0, which says the file has no segments, but its flatbuffer lists some",
             format::kHeaderSegmentBasePos);
  m.segments_pos_ = segs->data_pos;
  m.segment_count_ = segs->count;
  Status st = m.validate_segments(r, *segs);
  if (!st) return st.failure();

  Result<fb::Vector> named = fb::vector_field(r, *root, ftf::kNamedData, 4, Error::MalformedFlatbuffer);
  if (!named) return named.failure();
  if (!named->present) return R(Error::MalformedFlatbuffer, "FlatTensor has no named_data vector", root_pos);
  m.named_pos_ = named->data_pos;
  m.key_count_ = named->count;
  st = m.validate_keys(r, *named);
  if (!st) return st.failure();

  if (*ext_block != 0) {
    st = m.validate_ext(ext_pos, *ext_block, options);
    if (!st) return st.failure();
  }
  if (m.key_count_ <= kTagKeys) m.place_tags();
  m.cache_small_layouts();
  return m;
}

inline Status NamedDataMap::validate_segments(const detail::fb::Region& r,
                                              const detail::fb::Vector& segs) const noexcept {
  namespace fb = detail::fb;
  namespace dsf = format::data_segment_field;
  // Pass 1: every segment's table and range; note whether the non-empty
  // segments come in ascending order (every writer but ExecuTorch's
  // in-place rewriter emits them so).
  bool sorted = true;
  std::uint64_t prev_start = 0, non_empty = 0;
  for (std::uint32_t i = 0; i < segs.count; ++i) {
    Result<fb::Table> t = fb::table_element(r, segs, i);
    if (!t) return t.failure();
    Result<std::uint64_t> off = fb::scalar(r, *t, dsf::kOffset, 8);
    if (!off) return off.failure();
    Result<std::uint64_t> size = fb::scalar(r, *t, dsf::kSize, 8);
    if (!size) return size.failure();
    if (*size > UINT64_MAX - *off)
      return Status(Error::MalformedSegment, "segment offset + size overflows", t->pos);
    if (*off + *size > header_.segment_data_size)
      return Status(Error::MalformedSegment, "segment runs past segment_data_size", t->pos);
    if (*size != 0) {
      if (*off < prev_start) sorted = false;
      prev_start = *off;
      ++non_empty;
    }
  }
  // Pass 2: segments are disjoint or identical, never partly overlapping:
  // one sweep in offset order. Sorted, that is file order.
  const char* const partial = "segments overlap partially (at = segment index)";
  detail::SegmentSweep sweep;
  if (sorted) {
    for (std::uint32_t i = 0; i < segs.count; ++i) {
      std::uint64_t off = 0, size = 0;
      seg_range(i, &off, &size);
      if (size != 0 && !sweep.take(off, size)) return Status(Error::MalformedSegment, partial, i);
    }
    return detail::ok_status();
  }
  // Otherwise in batches: each pass keeps, in a max-heap on the stack, the
  // kSegmentBatch smallest (offset, index) past the last batch's, then
  // sorts and sweeps them.
  constexpr std::uint32_t kBatch = detail::kSegmentBatch;
  const std::uint64_t passes = (non_empty + kBatch - 1) / kBatch;
  if (passes * segs.count > detail::kUnsortedSegmentReads)
    return Status(Error::MalformedSegment,
                  "segments are out of order and too many to check for overlap (at = segment count)", segs.count);
  detail::SegmentKey heap[kBatch];
  detail::SegmentKey last{0, 0};
  bool have_last = false;
  for (;;) {
    std::uint32_t filled = 0;
    for (std::uint32_t i = 0; i < segs.count; ++i) {
      std::uint64_t off = 0, size = 0;
      seg_range(i, &off, &size);
      if (size == 0) continue;
      const detail::SegmentKey k{off, i};
      if (have_last && !detail::segment_before(last, k)) continue;
      if (filled < kBatch) {
        heap[filled] = k;
        detail::segment_sift_up(heap, filled++);
      } else if (detail::segment_before(k, heap[0])) {
        heap[0] = k;
        detail::segment_sift_down(heap, filled, 0);
      }
    }
    if (filled == 0) return detail::ok_status();
    for (std::uint32_t n = filled; n > 1; --n) {  // heap sort: ascending
      detail::swap_keys(heap[0], heap[n - 1]);
      detail::segment_sift_down(heap, n - 1, 0);
    }
    for (std::uint32_t j = 0; j < filled; ++j) {
      std::uint64_t off = 0, size = 0;
      seg_range(heap[j].index, &off, &size);
      if (!sweep.take(off, size)) return Status(Error::MalformedSegment, partial, heap[j].index);
    }
    if (filled < kBatch) return detail::ok_status();
    last = heap[filled - 1];
    have_last = true;
  }
}

inline Status NamedDataMap::validate_keys(const detail::fb::Region& r,
                                          const detail::fb::Vector& named) noexcept {
  namespace fb = detail::fb;
  namespace ndf = format::named_data_field;
  namespace tlf = format::tensor_layout_field;
  // 4 + size + 1 bytes a key string (under 2^32 keys of under 2^32 bytes:
  // no overflow), against the flatbuffer's size: keys_overlap().
  std::uint64_t key_string_bytes = 0;
  // 4 bytes a size and 1 a dim_order entry, in vectors of each layout's
  // own unless layouts share them, which no writer does. Shared, one
  // rank-255 layout can be named from every 4-byte entry of named_data and
  // checked again each time (a 4 MB file took 1.9 s to open, against 0.15 s
  // for rank 1): past the flatbuffer's size, refused before it is checked.
  std::uint64_t layout_bytes = 0;
  for (std::uint32_t i = 0; i < named.count; ++i) {
    Result<fb::Table> t = fb::table_element(r, named, i);
    if (!t) return t.failure();
    Result<fb::String> key = fb::string_field(r, *t, ndf::kKey, Error::MalformedKey);
    if (!key) return key.failure();
    if (!key->present) return Status(Error::MalformedKey, "named data has no key", t->pos);
    key_string_bytes += std::uint64_t{key->size} + 5;
    Result<std::uint64_t> seg = fb::scalar(r, *t, ndf::kSegmentIndex, 4);
    if (!seg) return seg.failure();
    if (*seg >= segment_count_)
      return Status(Error::MalformedKey, "segment_index out of range", t->pos);
    bool has_layout = false;
    Result<fb::Table> lt = fb::table_field(r, *t, ndf::kTensorLayout, &has_layout);
    if (!lt) return lt.failure();
    if (!has_layout) continue;
    Result<std::uint64_t> type = fb::scalar(r, *lt, tlf::kScalarType, 1);
    if (!type) return type.failure();
    Result<fb::Vector> sizes = fb::vector_field(r, *lt, tlf::kSizes, 4, Error::MalformedLayout);
    if (!sizes) return sizes.failure();
    Result<fb::Vector> dims = fb::vector_field(r, *lt, tlf::kDimOrder, 1, Error::MalformedLayout);
    if (!dims) return dims.failure();
    layout_bytes += 4 * std::uint64_t{sizes->count} + dims->count;
    if (layout_bytes > r.end - r.begin)
      return Status(Error::MalformedLayout,
                    "layouts share their sizes or dim_order (they add up to more bytes than the flatbuffer)",
                    lt->pos);
    // A layout that breaks its own rules (check_layout), or describes more
    // bytes than its segment holds, does not stop open(): ExecuTorch's
    // FlatTensorDataMap::load never reads a layout, and its serializer
    // writes whatever layout it is given (its own test payload has sizes
    // [2, 2, 2] with dim_order [0, 1]), so every other key of such a file
    // reads there. That key's get_tensor_layout, key_layout and
    // load_data_into give MalformedLayout, naming the rule (layout_of).
    // Fewer bytes than the segment is no fault: ExecuTorch's get_data
    // returns the segment, its load_data_into copies the layout's bytes;
    // so do ours. Sizes are read in place as int32 (alignment checked by
    // vector_field); copied out to stay strict-aliasing clean here.
    std::int32_t sz[256];
    if (sizes->count > 255) {
      layouts_faulty_ = true;
    } else {
      for (std::uint32_t d = 0; d < sizes->count; ++d)
        sz[d] = static_cast<std::int32_t>(format::load_u32(r.data + sizes->data_pos + 4 * std::uint64_t{d}));
      std::uint64_t seg_off = 0, seg_size = 0;
      seg_range(static_cast<std::uint32_t>(*seg), &seg_off, &seg_size);
      if (layout_problem(static_cast<ScalarType>(static_cast<std::int8_t>(*type)), sz, sizes->count,
                         r.data + dims->data_pos, dims->count, seg_size) != nullptr)
        layouts_faulty_ = true;
    }
    // Where this layout's fields sit in its table (0: absent). Writers give
    // every layout one vtable, so these are the same for all (see layout_at).
    const std::uint16_t at[3] = {
        static_cast<std::uint16_t>(field_offset(r.data, lt->pos, tlf::kScalarType)),
        static_cast<std::uint16_t>(field_offset(r.data, lt->pos, tlf::kSizes)),
        static_cast<std::uint16_t>(field_offset(r.data, lt->pos, tlf::kDimOrder))};
    if (!layouts_seen_) {
      layouts_seen_ = true;
      layout_fields_[0] = at[0];
      layout_fields_[1] = at[1];
      layout_fields_[2] = at[2];
      layout_uniform_ = true;
    } else if (at[0] != layout_fields_[0] || at[1] != layout_fields_[1] || at[2] != layout_fields_[2]) {
      layout_uniform_ = false;
    }
  }
  keys_overlap_ = key_string_bytes > header_.flatbuffer_size;
  return detail::ok_status();
}

inline Result<std::uint64_t> NamedDataMap::locate_ext(std::uint64_t meta_size, std::uint64_t* pos) const noexcept {
  using R = Result<std::uint64_t>;
  namespace eh = format::ext_header;
  std::uint64_t x = 0;
  if (!detail::ext_position(header_, &x) || x + 4 > meta_size) return std::uint64_t{0};
  if (std::memcmp(meta_ + x, format::kExtMagic, 4) != 0) return std::uint64_t{0};  // ExecuTorch file
  if (header_.segment_base_offset - x < eh::kSize)
    return R(Error::MalformedIndex, "WDX1 header runs into the segment data", x);
  if (x + eh::kSize > meta_size)
    return R(Error::Truncated, "metadata memory ends inside the WDX1 header", meta_size);
  Result<std::uint64_t> bs = detail::ext_block_size(meta_ + x, x, header_);
  if (!bs) return bs;
  if (x + *bs > meta_size) return R(Error::Truncated, "metadata memory ends inside the WDX1 block", meta_size);
  *pos = x;
  return bs;  // at least the header's 80 bytes: never 0
}

inline Status NamedDataMap::validate_ext(std::uint64_t x, std::uint64_t block, const OpenOptions& options) noexcept {
  namespace eh = format::ext_header;
  const std::uint8_t* b = meta_ + x;
  const auto u32 = [b](std::size_t f) { return format::load_u32(b + f); };
  if (u32(eh::kKeyCount) != key_count_)
    return Status(Error::MalformedIndex, "WDX1 key_count differs from named_data", x + eh::kKeyCount);
  if (u32(eh::kSegmentCount) != segment_count_)
    return Status(Error::MalformedIndex, "WDX1 segment_count differs from segments", x + eh::kSegmentCount);
  const std::uint64_t slots = u32(eh::kSlotCount);
  if (slots == 0 || (slots & (slots - 1)) != 0 || slots < 2 * std::uint64_t{key_count_})
    return Status(Error::MalformedIndex, "WDX1 slot_count is not a power of two >= 2 * key_count",
                  x + eh::kSlotCount);
  if (format::load_u64(b + eh::kReserved) != 0)
    return Status(Error::MalformedIndex, "WDX1 reserved field is not 0", x + eh::kReserved);

  // A table: 8-aligned, inside the block, after the header when non-empty
  // (format.hpp; the writer places every table so, and the strings pool
  // too, though nothing reads it by more than a byte: a block laid out
  // otherwise was not written by wdedup and is refused, not half-trusted).
  // `outside` and `misaligned` are the two messages, literals: no heap.
  const auto table = [&](std::size_t field, std::uint64_t count, std::uint64_t elem, std::uint64_t* pos, Error code,
                         const char* outside, const char* misaligned) {
    const std::uint64_t off = u32(field);
    const std::uint64_t bytes = count * elem;  // < 2^38: no overflow
    if (off > block || bytes > block - off || (bytes != 0 && off < eh::kSize))
      return Status(code, outside, x + field);
    if (off % 8 != 0) return Status(code, misaligned, x + field);
    *pos = x + off;
    return Status();
  };
  const std::uint32_t nfunc = u32(eh::kFunctionCount), nrows = u32(eh::kFunctionTensorCount);
  const std::uint32_t nstr = u32(eh::kStringsSize);
  Status tables = table(eh::kEntriesOffset, key_count_, format::key_entry::kSize, &entries_, Error::MalformedIndex,
                        "WDX1 key entries lie outside the block", "WDX1 key entries are not 8-aligned in the block");
  if (tables)
    tables = table(eh::kSlotsOffset, slots, 8, &slots_, Error::MalformedIndex, "WDX1 slots lie outside the block",
                   "WDX1 slots are not 8-aligned in the block");
  if (tables)
    tables = table(eh::kSegmentInfoOffset, segment_count_, format::segment_info::kSize, &seginfo_,
                   Error::MalformedIndex, "WDX1 segment infos lie outside the block",
                   "WDX1 segment infos are not 8-aligned in the block");
  if (tables)
    tables = table(eh::kFunctionsOffset, nfunc, format::function_record::kSize, &functions_,
                   Error::MalformedFunctionMap, "WDX1 function records lie outside the block",
                   "WDX1 function records are not 8-aligned in the block");
  if (tables)
    tables = table(eh::kFunctionTensorsOffset, nrows, format::function_tensor::kSize, &ftensors_,
                   Error::MalformedFunctionMap, "WDX1 function tensors lie outside the block",
                   "WDX1 function tensors are not 8-aligned in the block");
  if (tables)
    tables = table(eh::kStringsOffset, nstr, 1, &strings_, Error::MalformedFunctionMap,
                   "WDX1 strings lie outside the block", "WDX1 strings are not 8-aligned in the block");
  if (!tables) return tables;

  seed_ = format::load_u64(b + eh::kHashSeed);
  slot_count_ = slots;
  function_count_ = nfunc;
  ftensor_count_ = nrows;
  strings_size_ = nstr;
  // Entries are checked against the flatbuffer first: the slot and function
  // checks read keys through them (key_at reads entries once ext_ is set).
  ext_ = x;
  entry_base_ = meta_ + entries_;
  Status st = validate_ext_entries(options);
  if (st) st = validate_ext_slots();
  if (st) st = validate_ext_functions();
  return st;
}

inline Status NamedDataMap::validate_ext_entries(const OpenOptions& options) noexcept {
  namespace ke = format::key_entry;
  namespace si = format::segment_info;
  // Segment infos first: entries are checked against them. A segment must
  // meet its recorded alignment; one moved (allow_moved_segments) only its
  // power-of-two part, all that a rewrite keeps: ExecuTorch's replace_data
  // aligns a segment to the lowest set bit of its old offset, so one that
  // asked 3 (at a multiple of lcm(128, 3) = 384, say 768) may move to 1024.
  // (A view is aligned to that part alone either way: data_of.) Whether the
  // file moved is known only after the entries: under the option the first
  // segment that meets only that part is kept, and refused after them if
  // nothing moved, as without the option.
  static constexpr const char* kMisaligned = "segment alignment is 0, too large, or not met by its offset";
  std::uint64_t inexact_at = 0;  // that segment's alignment field (0: none)
  for (std::uint32_t s = 0; s < segment_count_; ++s) {
    const std::uint64_t p = seginfo_ + std::uint64_t{s} * si::kSize;
    const std::uint64_t align = format::load_u64(meta_ + p + si::kAlignment);
    std::uint64_t off = 0, size = 0;
    seg_range(s, &off, &size);
    const std::uint64_t at = header_.segment_base_offset + off;
    if (align == 0 || align > detail::kMaxFileAlignment)
      return Status(Error::MalformedIndex, kMisaligned, p + si::kAlignment);
    if (at % align != 0) {  // (one division a segment where it is met, the usual case)
      if (!options.allow_moved_segments || at % detail::pow2_part(align) != 0)
        return Status(Error::MalformedIndex, kMisaligned, p + si::kAlignment);
      if (inexact_at == 0) inexact_at = p + si::kAlignment;
    }
  }
  for (std::uint32_t i = 0; i < key_count_; ++i) {
    const std::uint64_t p = entries_ + std::uint64_t{i} * ke::kSize;
    const std::uint8_t* e = meta_ + p;
    const std::uint64_t t = named_table(i);
    const std::uint64_t ks = detail::fb::trusted_ref(meta_, t, format::named_data_field::kKey);
    if (format::load_u32(e + ke::kKeyOffset) != ks + 4 || format::load_u32(e + ke::kKeySize) != format::load_u32(meta_ + ks))
      return Status(Error::MalformedIndex, "key entry's key differs from named_data", p + ke::kKeyOffset);
    const std::uint32_t seg = segment_index_fb(i);
    if (format::load_u32(e + ke::kSegmentIndex) != seg)
      return Status(Error::MalformedIndex, "key entry's segment_index differs from named_data", p + ke::kSegmentIndex);
    std::uint64_t off = 0, size = 0;
    seg_range(seg, &off, &size);
    // A range that differs: the segments moved since the block was written
    // (OpenOptions::allow_moved_segments), or one side is damaged.
    if (format::load_u64(e + ke::kDataOffset) != header_.segment_base_offset + off) {
      if (!options.allow_moved_segments)
        return Status(Error::MalformedIndex, kMovedOffset, p + ke::kDataOffset);
      segments_moved_ = true;
    }
    if (format::load_u64(e + ke::kDataSize) != size) {
      if (!options.allow_moved_segments) return Status(Error::MalformedIndex, kMovedSize, p + ke::kDataSize);
      segments_moved_ = true;
    }
    const std::uint64_t lt = detail::fb::trusted_ref(meta_, t, format::named_data_field::kTensorLayout);
    if (format::load_u32(e + ke::kLayoutOffset) != lt)
      return Status(Error::MalformedIndex, "key entry's layout differs from named_data", p + ke::kLayoutOffset);
    const std::uint64_t align = format::load_u64(e + ke::kAlignment);
    const std::uint64_t seg_align =
        format::load_u64(meta_ + seginfo_ + std::uint64_t{seg} * si::kSize + si::kAlignment);
    if (align == 0 || seg_align % align != 0)
      return Status(Error::MalformedIndex, "key alignment is 0 or does not divide its segment's",
                    p + ke::kAlignment);
  }
  if (!segments_moved_)
    return inexact_at == 0 ? detail::ok_status() : Status(Error::MalformedIndex, kMisaligned, inexact_at);
  // Moved: only as a rewrite lays segments out (replace_data among them),
  // one after another in index order, segment_data_size ending at the
  // last. So a damaged segment offset that lands on another segment's
  // bytes is not read as a move; one that stays between its neighbours is
  // (verify_segment's hash tells it apart). Zero-size segments keep a
  // default offset: skipped.
  // replace_data places zero-size segments too, each at the next offset
  // its alignment allows, and sets segment_data_size to where the last
  // segment ends: after a trailing zero-size one (a store whose last
  // buffer is empty), at that segment's offset, past the data.
  // (The last segment starts at or past `end` only where it is empty: one
  // with bytes ends `end` itself.)
  std::uint64_t end = 0, last_off = 0;
  for (std::uint32_t s = 0; s < segment_count_; ++s) {
    std::uint64_t off = 0, size = 0;
    seg_range(s, &off, &size);
    last_off = off;
    if (size == 0) continue;
    if (off < end) return Status(Error::MalformedIndex, kMovedOutOfOrder, s);
    end = off + size;
  }
  const bool empty_tail = last_off >= end;
  if (header_.segment_data_size != end && !(empty_tail && header_.segment_data_size == last_off))
    return Status(Error::MalformedIndex, kMovedOutOfOrder, format::kHeaderSegmentDataSizePos);
  return detail::ok_status();
}

inline Status NamedDataMap::validate_ext_slots() const noexcept {
  if (keys_overlap()) return Status(Error::MalformedIndex, kKeysOverlap, named_pos_);
  const std::uint8_t* s = meta_ + slots_;
  std::uint64_t used = 0;
  for (std::uint64_t j = 0; j < slot_count_; ++j) {
    const std::uint64_t v = format::load_u64(s + 8 * j);
    if (v == 0) continue;
    const std::uint64_t e = v & 0xFFFFFFFFu;
    if (e == 0 || e > key_count_)
      return Status(Error::MalformedIndex, "slot names a key entry out of range", slots_ + 8 * j);
    ++used;
  }
  if (used != key_count_)
    return Status(Error::MalformedIndex, "slot table holds a different number of keys than key_count", slots_);
  // Every key must be found, at its own entry, by the lookup queries use.
  // With exactly key_count used slots, this also proves each used slot names
  // a distinct key with the right tag. Probing is bounded: a valid table at
  // load factor <= 1/2 probes ~1.5 slots per key; an adversarial one must not
  // turn open() quadratic.
  std::uint64_t budget = format::probe_budget(slot_count_);
  const std::uint64_t mask = slot_count_ - 1;
  for (std::uint32_t i = 0; i < key_count_; ++i) {
    const KeyView k = key_at(i);
    const std::uint64_t h = detail::key_hash(k.data(), k.size(), seed_);
    std::uint64_t at = h & mask;
    for (;;) {
      if (budget-- == 0)
        return Status(Error::MalformedIndex, "slot table probe sequences are too long", slots_);
      const std::uint64_t v = format::load_u64(s + 8 * at);
      if (v == 0)
        return Status(Error::MalformedIndex, "key cannot be found through the slot table", key_pos(i));
      if ((v >> 32) == (h >> 32)) {
        const auto e = static_cast<std::uint32_t>(v) - 1;
        if (e == i) break;
        if (key_at(e) == k) return Status(Error::MalformedKey, "duplicate key", key_pos(i));
      }
      at = (at + 1) & mask;
    }
  }
  return detail::ok_status();
}

inline Status NamedDataMap::validate_ext_functions() const noexcept {
  namespace fr = format::function_record;
  namespace ft = format::function_tensor;
  // Names may share the pool's bytes (the writer stores each string once,
  // and rows of several functions name it), so one long string can be
  // every row's name, and reading each name would cost rows x its length
  // (a 4 MB file: 131,072 rows of ~2 MB names, 4.5 s). The bytes read are
  // therefore bounded: each name is read twice (its NUL check, then its
  // comparison with its neighbour), within twice the pool plus 2 KiB a
  // name, which a real file exceeds only with names over 1 KiB on average.
  const std::uint64_t names = std::uint64_t{ftensor_count_} + 3 * std::uint64_t{function_count_};
  std::uint64_t compare_budget = format::name_check_budget(strings_size_, names);
  // Takes `bytes` from `budget`, or says there are not that many left.
  const auto take = [](std::uint64_t& budget, std::uint64_t bytes) {
    if (bytes > budget) return false;
    budget -= bytes;
    return true;
  };
  const auto spend = [&](std::uint64_t bytes) { return take(compare_budget, bytes); };
  // Each name: inside the pool, NUL-terminated there (a backend may hand
  // its data() to a C-string lookup), not empty and without a NUL byte
  // (a C-string lookup would cut it): what the writer refuses to write.
  // Returns the problem (kNameFine if none); messages are static, per
  // field and problem, as every Status message is.
  enum NameProblem { kNameFine, kOutside, kUnterminated, kEmpty, kTooLong, kHasNul };
  enum NameField { kTensorField, kMethodField, kBlobField, kFunctionField };
  static constexpr const char* kNameMessages[4][6] = {
      {"", "tensor name lies outside the strings", "tensor name is not NUL-terminated", "tensor name is empty",
       "tensor names too long to check (over 1 KiB a name on average, or sharing one long string)",
       "tensor name holds a NUL byte"},
      {"", "method name lies outside the strings", "method name is not NUL-terminated", "method name is empty",
       "method names too long to check (over 1 KiB a name on average, or sharing one long string)",
       "method name holds a NUL byte"},
      {"", "blob key lies outside the strings", "blob key is not NUL-terminated", "blob key is empty",
       "blob keys too long to check (over 1 KiB a name on average, or sharing one long string)",
       "blob key holds a NUL byte"},
      {"", "function name lies outside the strings", "function name is not NUL-terminated", "function name is empty",
       "function names too long to check (over 1 KiB a name on average, or sharing one long string)",
       "function name holds a NUL byte"}};
  const auto check_name = [&](std::uint64_t p, NameField field) -> Status {
    const std::uint64_t off = format::load_u32(meta_ + p), size = format::load_u32(meta_ + p + 4);
    NameProblem problem = kNameFine;
    if (off > strings_size_ || size > strings_size_ - off) {
      problem = kOutside;
    } else {
      const char* chars = reinterpret_cast<const char*>(meta_ + strings_ + off);
      if (size == strings_size_ - off || chars[size] != '\0') problem = kUnterminated;
      else if (size == 0) problem = kEmpty;
      else if (!spend(size)) problem = kTooLong;
      else if (std::memchr(chars, 0, static_cast<std::size_t>(size)) != nullptr) problem = kHasNul;  // in memory: fits
    }
    if (problem == kNameFine) return detail::ok_status();
    return Status(Error::MalformedFunctionMap, kNameMessages[field][problem], p);
  };
  for (std::uint32_t j = 0; j < ftensor_count_; ++j) {
    const std::uint64_t p = ftensors_ + std::uint64_t{j} * ft::kSize;
    if (Status st = check_name(p + ft::kNameOffset, kTensorField); !st) return st;
    if (format::load_u32(meta_ + p + ft::kKeyIndex) >= key_count_)
      return Status(Error::MalformedFunctionMap, "tensor key_index out of range", p + ft::kKeyIndex);
    if (format::load_u32(meta_ + p + ft::kReserved) != 0)
      return Status(Error::MalformedFunctionMap, "tensor reserved field is not 0", p + ft::kReserved);
  }
  // Functions' rows tile the row table in order (as the writer lays them
  // out): each function's rows start where the previous one's end, so the
  // sortedness checks below read every row once. Overlapping ranges would
  // let a small file make them quadratic (32,000 functions claiming every
  // row of a 2 MB file took 2.5 s).
  std::uint64_t next_row = 0;
  for (std::uint32_t i = 0; i < function_count_; ++i) {
    const std::uint64_t p = functions_ + std::uint64_t{i} * fr::kSize;
    const std::uint8_t* r = meta_ + p;
    if (Status st = check_name(p + fr::kMethodOffset, kMethodField); !st) return st;
    if (Status st = check_name(p + fr::kBlobOffset, kBlobField); !st) return st;
    if (Status st = check_name(p + fr::kNameOffset, kFunctionField); !st) return st;
    const std::uint64_t begin = format::load_u32(r + fr::kTensorsBegin);
    const std::uint64_t count = format::load_u32(r + fr::kTensorsCount);
    if (begin > ftensor_count_ || count > ftensor_count_ - begin)
      return Status(Error::MalformedFunctionMap, "function's tensor rows lie outside the table",
                    p + fr::kTensorsBegin);
    if (begin != next_row)
      return Status(Error::MalformedFunctionMap, "function's tensor rows do not start where the previous one's end",
                    p + fr::kTensorsBegin);
    next_row = begin + count;
    if (format::load_u32(r + fr::kReserved) != 0)
      return Status(Error::MalformedFunctionMap, "function reserved field is not 0", p + fr::kReserved);
    // Rows sorted strictly by name: binary search needs it, and a repeated
    // name would make key_of ambiguous.
    const FunctionView f = function_at(i);
    for (std::size_t k = 1; k < count; ++k) {  // count < 2^32
      const KeyView a = f.row(k - 1).tensor_name, b = f.row(k).tensor_name;
      if (!spend((a.size() < b.size() ? a.size() : b.size()) + 1))
        return Status(Error::MalformedFunctionMap, kNameMessages[kTensorField][kTooLong],
                      ftensors_ + (begin + k) * ft::kSize);
      if (!(a < b))
        return Status(Error::MalformedFunctionMap, "function's tensor rows are not sorted by unique name",
                      ftensors_ + (begin + k) * ft::kSize);
    }
  }
  if (next_row != ftensor_count_)
    return Status(Error::MalformedFunctionMap, "rows belong to no function (at = first such row)", next_row);
  // No two functions for one (method, partition), nor with one name in one
  // blob (detail::check_function_repeats). Files with more functions than
  // format::kMaxFunctions, which the writer does not write, are read
  // without this check.
  if (function_count_ > format::kMaxFunctions) return detail::ok_status();
  const detail::RepeatCheck rc = detail::check_function_repeats(
      function_count_, strings_size_, format::kCheckBytesPerName, [this](std::uint32_t i) noexcept {
        const FunctionView f = function_at(i);
        return detail::FunctionNames{f.method_, f.blob_, f.name_, f.partition_};
      });
  const std::uint64_t at = functions_ + std::uint64_t{rc.at} * fr::kSize;
  switch (rc.problem) {
    case detail::RepeatCheck::kNone:
      break;
    case detail::RepeatCheck::kPlace:
      return Status(Error::MalformedFunctionMap, "two functions for one method and partition (at = the second)", at);
    case detail::RepeatCheck::kName:
      return Status(Error::MalformedFunctionMap, "two functions with one name in one blob (at = the second)", at);
    case detail::RepeatCheck::kTooLong:
      return Status(Error::MalformedFunctionMap,
                    "function map names too long to check for repeats (names over 128 bytes that agree at both "
                    "ends, pair after pair)",
                    at);
  }
  return detail::ok_status();
}

}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_NAMED_DATA_MAP_HPP
