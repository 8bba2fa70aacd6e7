// wdedup/runtime/detail/format.hpp — the on-disk format, in one place, shared
// by the writer (build-time half) and the reader (runtime half).
//
// A wdedup file is an ExecuTorch FlatTensor .ptd file (README "File format"):
//
//   0    u32  flatbuffer root offset (uoffset, relative to byte 0)
//   4    "FT01"  flatbuffer file identifier
//   8    FH01 extended header, 40 bytes (fields below), then 8 zero bytes
//   56   the rest of the flatbuffer (FlatTensor root table, vectors, strings);
//        the flatbuffer ends at kFlatbufferOffset + flatbuffer_size
//   ...  optional wdedup extension block, at align_up(flatbuffer end, 16),
//        starting with "WDX1"; ExecuTorch's reader never looks there
//   base segment data: segment i at base + segments[i].offset
//
// Every segment's *absolute* file position is a multiple of the lcm of the
// alignments its keys asked for (ExecuTorch only aligns relative to base).
// All integers are little-endian.
#ifndef WDEDUP_RUNTIME_DETAIL_FORMAT_HPP
#define WDEDUP_RUNTIME_DETAIL_FORMAT_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace wdedup {
namespace format {

// ---- FlatTensor (ExecuTorch) -------------------------------------------------

constexpr char kFileIdentifier[4] = {'F', 'T', '0', '1'};  ///< bytes 4..7
constexpr std::size_t kFileIdentifierOffset = 4;

constexpr char kHeaderMagic[4] = {'F', 'H', '0', '1'};     ///< bytes 8..11
constexpr std::size_t kHeaderOffset = 8;
constexpr std::uint32_t kHeaderLength = 40;  ///< value of the length field we write
constexpr std::uint32_t kMinHeaderLength = 40;  ///< a longer header is allowed on read
// Field positions, absolute in the file.
constexpr std::size_t kHeaderLengthPos = 12;            ///< u32
constexpr std::size_t kHeaderFlatbufferOffsetPos = 16;  ///< u64
constexpr std::size_t kHeaderFlatbufferSizePos = 24;    ///< u64
constexpr std::size_t kHeaderSegmentBasePos = 32;       ///< u64
constexpr std::size_t kHeaderSegmentDataSizePos = 40;   ///< u64
/// Bytes the header occupies inside the flatbuffer (40 padded to 16): the
/// flatbuffer_offset we write, as ExecuTorch's Python serializer does. (Its
/// C++ save_ptd pads to its tensor_alignment instead: 40, 48, 64, ... up to
/// 4096. The reader takes any offset past the header.)
constexpr std::uint64_t kFlatbufferOffset = 48;
/// Smallest file that can hold identifier and header.
constexpr std::size_t kMinFileSize = kHeaderOffset + kMinHeaderLength;

/// FlatTensor schema version we write and accept.
constexpr std::uint32_t kFlatTensorVersion = 0;

// Flatbuffer field slots (vtable index = field id; byte offset in the
// vtable = 4 + 2 * id).
namespace flat_tensor_field {
constexpr int kVersion = 0;    ///< uint32
constexpr int kSegments = 1;   ///< [DataSegment]
constexpr int kNamedData = 2;  ///< [NamedData]
}  // namespace flat_tensor_field
namespace data_segment_field {
constexpr int kOffset = 0;  ///< uint64, relative to segment_base_offset
constexpr int kSize = 1;    ///< uint64
}  // namespace data_segment_field
namespace named_data_field {
constexpr int kKey = 0;           ///< string
constexpr int kSegmentIndex = 1;  ///< uint32
constexpr int kTensorLayout = 2;  ///< TensorLayout (optional)
}  // namespace named_data_field
namespace tensor_layout_field {
constexpr int kScalarType = 0;  ///< byte (ScalarType)
constexpr int kSizes = 1;       ///< [int32]
constexpr int kDimOrder = 2;    ///< [uint8]
}  // namespace tensor_layout_field

/// Default relative alignment of segment_base_offset, as ExecuTorch's
/// export pipeline uses (128). Segments are then aligned absolutely.
constexpr std::uint64_t kDefaultSegmentAlignment = 128;

// ---- wdedup extension block ("WDX1") ----------------------------------------
//
// Placed at align_up(kFlatbufferOffset + flatbuffer_size, 16), before
// segment_base_offset. All offsets inside it are relative to the block start
// unless marked "absolute". All tables are 8-byte aligned inside the block;
// block_size includes the padding to a multiple of 8. Strings in the pool
// are NUL-terminated and may be shared by several records. Readers must not
// assume segment 0 starts right after the metadata: the base is aligned to
// the first segment's alignment.

/// Functions a WDX1 block written by wdedup holds at most. A reader checks
/// every pair of them for a repeated (method, partition) or (blob key,
/// function name), which find_function could not tell apart (no heap to
/// sort them in): 2,896 functions are ~4.2M pairs of hashes, a few ms at
/// open. The writer refuses more; a reader takes more without that check.
constexpr std::uint32_t kMaxFunctions = 2896;
/// Bytes of names a reader reads per name of the function maps at open
/// (each row's tensor name, each function's method, blob key and name), on
/// top of the strings pool once, before it calls them too long to check:
/// what bounds open()'s work on a hostile file. The writer checks its
/// function maps against the same bound (detail::check_function_repeats).
constexpr std::uint64_t kCheckBytesPerName = 1024;
/// The bytes of names a reader reads at open before it calls a block's
/// names too long to check: twice the strings pool and kCheckBytesPerName
/// for each of `names` (rows plus three a function). It reads each name
/// once for its NUL check, and each row's name again beside the row before
/// (as many bytes as the shorter of the two, plus one); a name the pool
/// holds once may be read for every row that names it. The writer adds up
/// the same reads and refuses a block that needs more.
constexpr std::uint64_t name_check_budget(std::uint64_t strings_size, std::uint64_t names) noexcept {
  return 2 * (strings_size + kCheckBytesPerName * names);
}

constexpr char kExtMagic[4] = {'W', 'D', 'X', '1'};
constexpr std::uint32_t kExtVersion = 1;
constexpr std::uint64_t kExtAlignment = 16;

/// Extension header: 80 bytes.
namespace ext_header {
constexpr std::size_t kMagic = 0;                 ///< char[4] "WDX1"
constexpr std::size_t kVersion = 4;               ///< u32 = kExtVersion
constexpr std::size_t kBlockSize = 8;             ///< u64, whole block incl. this header
constexpr std::size_t kHashSeed = 16;             ///< u64, seed of detail::key_hash
constexpr std::size_t kKeyCount = 24;             ///< u32, == named_data length
constexpr std::size_t kSlotCount = 28;            ///< u32, power of two, >= 2 * key_count, >= 1
constexpr std::size_t kSegmentCount = 32;         ///< u32, == segments length
constexpr std::size_t kFunctionCount = 36;        ///< u32
constexpr std::size_t kFunctionTensorCount = 40;  ///< u32
constexpr std::size_t kStringsSize = 44;          ///< u32
constexpr std::size_t kEntriesOffset = 48;        ///< u32 -> KeyEntry[key_count]
constexpr std::size_t kSlotsOffset = 52;          ///< u32 -> u64[slot_count]
constexpr std::size_t kSegmentInfoOffset = 56;    ///< u32 -> SegmentInfo[segment_count]
constexpr std::size_t kFunctionsOffset = 60;      ///< u32 -> FunctionRecord[function_count]
constexpr std::size_t kFunctionTensorsOffset = 64;///< u32 -> FunctionTensor[function_tensor_count]
constexpr std::size_t kStringsOffset = 68;        ///< u32 -> char[strings_size]
constexpr std::size_t kReserved = 72;             ///< u64, 0
constexpr std::size_t kSize = 80;
}  // namespace ext_header

/// One per named_data entry, same order. Lets a lookup resolve a key
/// without walking the flatbuffer; checked against the flatbuffer at open.
namespace key_entry {
// (The data offset and size are as written: a rewrite may move segments
// since, which OpenOptions::allow_moved_segments reads past.)
constexpr std::size_t kDataOffset = 0;     ///< u64, absolute file offset of the data
constexpr std::size_t kDataSize = 8;       ///< u64, == segment size
constexpr std::size_t kAlignment = 16;     ///< u64, alignment this key asked for (>= 1)
constexpr std::size_t kKeyOffset = 24;     ///< u32, absolute offset of the key's chars
constexpr std::size_t kKeySize = 28;       ///< u32, key length (no NUL)
constexpr std::size_t kSegmentIndex = 32;  ///< u32
constexpr std::size_t kLayoutOffset = 36;  ///< u32, absolute offset of the TensorLayout table, 0 = none
constexpr std::size_t kSize = 40;
}  // namespace key_entry

/// Hash slots: u64 = (u64(tag) << 32) | (entry index + 1); 0 = empty.
/// tag = upper 32 bits of key_hash(key, seed); home slot = hash & (slot_count - 1);
/// collisions probe linearly. A lookup always compares the key itself.
constexpr std::uint64_t slot_value(std::uint64_t hash, std::uint32_t entry) noexcept {
  return (hash & 0xFFFFFFFF00000000ull) | (static_cast<std::uint64_t>(entry) + 1);
}

/// Probes a reader allows for looking every key up in a table of `slots`
/// (64 a slot, in all, plus 1,024): a valid table at load factor 1/2 takes
/// about 1.5 a key, and keys chosen to collide under a known seed must not
/// make open() quadratic. The writer places its keys within the same
/// budget, under another seed if it must.
constexpr std::uint64_t probe_budget(std::uint64_t slots) noexcept { return 64 * slots + 1024; }

/// One per segment, same order as FlatTensor.segments.
namespace segment_info {
constexpr std::size_t kContentHash = 0;  ///< u64, XXH3_64bits(data, seed 0)
constexpr std::size_t kAlignment = 8;    ///< u64, lcm of its keys' alignments
constexpr std::size_t kSize = 16;
}  // namespace segment_info

/// One per (method, partition) function.
namespace function_record {
constexpr std::size_t kMethodOffset = 0;     ///< u32, into strings
constexpr std::size_t kMethodSize = 4;       ///< u32
constexpr std::size_t kPartitionIndex = 8;   ///< u32
constexpr std::size_t kBlobOffset = 12;      ///< u32, into strings
constexpr std::size_t kBlobSize = 16;        ///< u32
constexpr std::size_t kNameOffset = 20;      ///< u32, into strings: the function name
constexpr std::size_t kNameSize = 24;        ///< u32
constexpr std::size_t kTensorsBegin = 28;    ///< u32, index into function tensors
constexpr std::size_t kTensorsCount = 32;    ///< u32
constexpr std::size_t kReserved = 36;        ///< u32, 0
constexpr std::size_t kSize = 40;
}  // namespace function_record

/// A function's tensor table row; rows of one function are sorted by name
/// (bytewise), so a tensor can be found by binary search.
namespace function_tensor {
constexpr std::size_t kNameOffset = 0;  ///< u32, into strings: the tensor's own name
constexpr std::size_t kNameSize = 4;    ///< u32
constexpr std::size_t kKeyIndex = 8;    ///< u32, index of the store key (named_data order)
constexpr std::size_t kReserved = 12;   ///< u32, 0
constexpr std::size_t kSize = 16;
}  // namespace function_tensor

// ---- little-endian helpers ---------------------------------------------------

inline std::uint16_t load_u16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t load_u32(const std::uint8_t* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}
inline std::uint64_t load_u64(const std::uint8_t* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}
inline void store_u16(std::uint8_t* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) noexcept {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  std::memcpy(p, &v, 4);
}
inline void store_u64(std::uint8_t* p, std::uint64_t v) noexcept {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  std::memcpy(p, &v, 8);
}

/// align_up for any positive alignment (not only powers of two). Returns
/// false on overflow.
inline bool align_up(std::uint64_t value, std::uint64_t alignment, std::uint64_t* out) noexcept {
  const std::uint64_t rem = value % alignment;
  if (rem == 0) {
    *out = value;
    return true;
  }
  const std::uint64_t add = alignment - rem;
  if (value > UINT64_MAX - add) return false;
  *out = value + add;
  return true;
}

}  // namespace format
}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_DETAIL_FORMAT_HPP
