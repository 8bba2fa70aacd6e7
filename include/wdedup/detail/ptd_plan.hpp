// wdedup/detail/ptd_plan.hpp — everything the .ptd writer decides before it
// writes a byte: validation of the store and function maps, the FlatTensor
// flatbuffer, the WDX1 extension block and the position of every segment.
// Build-time half; internal (namespace detail). The format is specified in
// wdedup/runtime/detail/format.hpp.
//
// Compile time: the functions here are templates (on an unused parameter)
// so that a TU that includes the writer without calling it does not compile
// them; name lookups use the flat detail::NameIndex, not std::unordered_map.
#ifndef WDEDUP_DETAIL_PTD_PLAN_HPP
#define WDEDUP_DETAIL_PTD_PLAN_HPP

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wdedup/detail/flatbuffer_builder.hpp"
#include "wdedup/detail/min_max.hpp"
#include "wdedup/detail/name_index.hpp"
#include "wdedup/expected.hpp"
#include "wdedup/function_map.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/runtime/detail/format.hpp"
#include "wdedup/runtime/detail/function_repeats.hpp"
#include "wdedup/runtime/detail/key_hash.hpp"
#include "wdedup/write_options.hpp"

namespace wdedup {

namespace detail {

/// Everything about a file except the segment bytes and their hashes.
struct PtdPlan {
  /// The head of the file: flatbuffer with the FH01 header and the WDX1
  /// block (content hashes still zero). Zeros follow up to the base.
  std::vector<std::uint8_t> metadata;
  std::vector<ByteSpan> segments;            ///< store buffer order
  std::vector<std::uint64_t> segment_offsets;  ///< absolute file offsets
  std::uint64_t flatbuffer_size = 0;
  std::uint64_t extension_offset = 0;  ///< 0 if no WDX1 block
  std::uint64_t extension_size = 0;
  /// Absolute offset of SegmentInfo[0] (0 if no WDX1 block).
  std::uint64_t segment_info_offset = 0;
  std::uint64_t segment_base_offset = 0;
  std::uint64_t segment_data_size = 0;
  std::uint64_t file_size = 0;
  WriteStats stats;

  bool has_extension() const noexcept { return extension_size != 0; }
  /// Where segment i's content hash lives inside `metadata`.
  std::uint64_t content_hash_pos(std::size_t segment) const noexcept {
    return segment_info_offset + segment * format::segment_info::kSize + format::segment_info::kContentHash;
  }
  void set_content_hash(std::size_t segment, std::uint64_t hash) noexcept {
    format::store_u64(metadata.data() + content_hash_pos(segment), hash);
  }
};

/// lcm(a, b) for a, b >= 1, or nullopt if it does not fit in 64 bits.
inline std::optional<std::uint64_t> lcm64(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t q = a / gcd64(a, b);
  if (q > UINT64_MAX / b) return std::nullopt;
  return q * b;
}

inline bool add_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t* out) noexcept {
  if (a > UINT64_MAX - b) return true;
  *out = a + b;
  return false;
}

/// Names a function for messages: "method 'decode' partition 1's function
/// ('decode__1' in blob 'combined_all')".
template <int = 0>
std::string describe_function(const FunctionMap& f) {
  return cat("method ", quote_name(f.method), " partition ", f.partition_index, "'s function (",
             quote_name(f.function_name), " in blob ", quote_name(f.blob_key), ")");
}

/// One row of a function's tensor table, as the file stores it.
struct ResolvedRow {
  std::string_view name;        ///< the tensor name
  std::uint32_t key_index = 0;  ///< its store key's index
};

/// Bytewise order of names (qsort's comparator: a few lines of C instead of
/// instantiating std::stable_sort, whose stability the rows do not need, as
/// a repeated name is an error).
inline int compare_rows(const void* a, const void* b) noexcept {
  const std::string_view x = static_cast<const ResolvedRow*>(a)->name;
  const std::string_view y = static_cast<const ResolvedRow*>(b)->name;
  const std::size_t n = x.size() < y.size() ? x.size() : y.size();
  const int c = n ? std::memcmp(x.data(), y.data(), n) : 0;
  if (c != 0) return c;
  return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
}

/// One function's tensor rows, resolved and sorted for the file.
struct ResolvedFunction {
  const FunctionMap* function = nullptr;
  /// (tensor name, store key index), sorted bytewise by name.
  std::vector<ResolvedRow> rows;
};

/// Per-buffer facts computed once: the lcm of its keys' alignments.
struct ValidatedInput {
  std::vector<std::uint64_t> segment_alignments;
  std::vector<ResolvedFunction> functions;
};

/// Checks everything that could make the file wrong or unwritable, before a
/// single byte is produced. The store normally guarantees most of this; the
/// writer checks again because deduplicate() fills stores through a bulk
/// path that skips add_named_data's checks.
template <int = 0>
Expected<ValidatedInput> validate_for_write(const NamedDataStore& store, const FunctionMaps& maps,
                                            const WriteOptions& options) {
  using R = Expected<ValidatedInput>;
  const Table<StoreKey>& keys = store.keys();
  const Table<StoreBuffer>& buffers = store.buffers();

  if (options.segment_alignment == 0 || options.segment_alignment > kMaxAlignment)
    return R(Error::InvalidAlignment, cat("segment_alignment must be in [1, ", kMaxAlignment, "], got ",
                                          options.segment_alignment));
  // slot_count (a power of two >= 2 * key_count) must fit in 32 bits.
  if (keys.size() > (std::size_t{1} << 30))
    return R(Error::InvalidArgument, cat("the store has ", keys.size(), " keys; a .ptd file holds at most ",
                                         std::size_t{1} << 30));
  if (buffers.size() > UINT32_MAX)
    return R(Error::InvalidArgument, cat("the store has ", buffers.size(), " buffers; at most ", UINT32_MAX));

  // Each segment is placed at lcm(segment_alignment, its alignment), which
  // must stay within kMaxAlignment like every other: alignments of 128 and
  // 2^32 - 1, each allowed, would otherwise put a 16-byte segment at
  // 512 GiB, all of it padding.
  const std::uint64_t sa = options.segment_alignment;
  auto placed_within = [sa](std::uint64_t a) {
    const std::optional<std::uint64_t> l = lcm_alignment(sa, a);
    return l && *l <= kMaxAlignment;
  };
  ValidatedInput out;
  out.segment_alignments.assign(buffers.size(), 0);
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    const std::uint64_t a = buffers[b].alignment;
    if (a == 0 || a > kMaxAlignment)
      return R(Error::InvalidAlignment,
               cat("buffer ", b, " has alignment ", a, "; it must be in [1, ", kMaxAlignment, "]"));
    if (!placed_within(a)) {
      std::string named;  // a key of the buffer, found on this path only
      for (const StoreKey& k : keys)
        if (k.buffer_index == b) {
          named = cat(" (key ", quote_name(k.key), ")");
          break;
        }
      return R(Error::InvalidAlignment, cat("buffer ", b, named, " has alignment ", a,
                                            ": its lcm with segment_alignment ", sa, " exceeds the maximum of ",
                                            kMaxAlignment));
    }
    out.segment_alignments[b] = a;
  }
  for (const StoreKey& k : keys) {
    if (k.key.empty()) return R(Error::InvalidName, "the store holds an empty key");
    if (k.key.find('\0') != std::string::npos)
      return R(Error::InvalidName, cat("key ", quote_name(k.key),
                                       " contains a NUL byte; ExecuTorch compares keys only up to a NUL "
                                       "(strcmp, or strncmp after a length check), so it could not tell it from a "
                                       "key that agrees before the NUL"));
    if (std::string problem = utf8_problem(k.key); !problem.empty())
      return R(Error::InvalidName, cat("key ", problem));
    if (k.buffer_index >= buffers.size())
      return R(Error::InvalidArgument, cat("key ", quote_name(k.key), " points at buffer ", k.buffer_index,
                                           " but the store has ", counted(buffers.size(), "buffer")));
    if (k.alignment == 0 || k.alignment > kMaxAlignment)
      return R(Error::InvalidAlignment, cat("key ", quote_name(k.key), " has alignment ", k.alignment,
                                            "; it must be in [1, ", kMaxAlignment, "]"));
    const ByteSpan bytes = buffers[k.buffer_index].bytes;
    if (k.layout) {
      const std::optional<std::uint64_t> n = k.layout->nbytes();
      if (!n)
        return R(Error::LayoutMismatch, cat("key ", quote_name(k.key), ": layout is inconsistent (",
                                            describe_layout(k.layout), "): ", layout_problem(*k.layout)));
      if (*n != bytes.size())
        return R(Error::LayoutMismatch, cat("key ", quote_name(k.key), ": layout ", describe_layout(k.layout),
                                            " describes ", counted(*n, "byte"), " but its buffer has ",
                                            counted(bytes.size(), "byte")));
    }
    std::uint64_t& seg = out.segment_alignments[k.buffer_index];
    const std::optional<std::uint64_t> l = lcm_alignment(seg, k.alignment);
    if (!l)
      return R(Error::InvalidAlignment, cat("key ", quote_name(k.key), ": lcm of alignments ", seg, " and ",
                                            k.alignment, " exceeds the maximum of ", kMaxAlignment));
    if (!placed_within(*l))
      return R(Error::InvalidAlignment, cat("key ", quote_name(k.key), ": its segment's alignment ", *l,
                                            " and segment_alignment ", sa, " have an lcm over the maximum of ",
                                            kMaxAlignment));
    seg = *l;
  }

  // Function maps: every row names an existing key; no function or tensor
  // name appears twice where a reader would have to pick one.
  // A reader checks the functions for repeats pair by pair, so a file
  // holds at most format::kMaxFunctions (2,896) of them. Without the WDX1
  // block no function is written, so no reader checks any: the cap is the
  // block's, like the pool's budgets in plan_ptd (the rows' keys and the
  // repeats below are the caller's mistakes, refused either way).
  if (options.wdedup_extensions && maps.functions.size() > format::kMaxFunctions)
    return R(Error::InvalidArgument, cat(maps.functions.size(), " functions (methods x partitions); a .ptd file's ",
                                         "function maps hold at most ", format::kMaxFunctions,
                                         " (without wdedup_extensions none are written)"));
  // The index the function maps need also finds a repeated key, for one
  // branch: add_named_data cannot repeat one, but the bulk path
  // (add_key_unindexed) does not look, and a reader refuses such a file.
  // Keys being unique, a key's id in the index is its position.
  NameIndex key_index(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    bool added = false;
    const std::uint32_t first = key_index.find_or_add(keys[i].key, &added);
    if (!added)
      return R(Error::InvalidName, cat("key ", quote_name(keys[i].key), " appears twice in the store (keys ", first,
                                       " and ", i, "); a reader could find only the first"));
  }
  // (method, partition) ids, "<method>\0<partition>"; reserved up front,
  // as the index views them.
  std::vector<std::string> function_ids;
  function_ids.reserve(maps.functions.size());
  NameIndex seen_functions(maps.functions.size());
  // "<blob key>\0<function name>": what a backend looks a function up by
  // (find_function(blob, name) returns the first), so no two may share it.
  std::vector<std::string> function_names;
  function_names.reserve(maps.functions.size());
  NameIndex seen_names(maps.functions.size());
  std::uint64_t total_rows = 0;
  out.functions.reserve(maps.functions.size());
  for (std::size_t fi = 0; fi < maps.functions.size(); ++fi) {
    const FunctionMap& f = maps.functions[fi];
    function_ids.push_back(cat(f.method, '\0', f.partition_index));
    bool added = false;
    seen_functions.find_or_add(function_ids.back(), &added);
    if (!added)
      return R(Error::InvalidArgument,
               cat(describe_function(f), ": method ", quote_name(f.method), " partition ", f.partition_index,
                   " appears twice in the function maps"));
    function_names.push_back(cat(f.blob_key, '\0', f.function_name));
    const std::uint32_t first = seen_names.find_or_add(function_names.back(), &added);
    if (!added)
      return R(Error::InvalidName,
               cat(describe_function(f), ": method ", quote_name(maps.functions[first].method), " partition ",
                   maps.functions[first].partition_index,
                   " has the same function name in the same blob; a reader could find only the first"));
    for (const std::string* s : {&f.method, &f.blob_key, &f.function_name})
      if (s->size() > UINT32_MAX)
        return R(Error::InvalidArgument, cat(describe_function(f), ": a name is longer than ", UINT32_MAX,
                                             " bytes"));
    // Names are looked up: an empty one, or one that a C-string lookup
    // (a backend's, strcmp) would cut at a NUL byte, names nothing. The
    // method's and the tensors' names must also be UTF-8: add_ptd_program
    // makes keys of them, as deduplicate() does, and refuses one that is
    // not. So no name in a file this writes is one add_ptd_program refuses.
    if (std::string why = unusable_key(f.method, true); !why.empty())
      return R(Error::InvalidName, cat(describe_function(f), ": method name", why));
    const std::pair<const char*, const std::string*> names[] = {{"blob key", &f.blob_key},
                                                                {"function name", &f.function_name}};
    for (const auto& [what, s] : names)
      if (std::string why = unusable_name(*s); !why.empty())
        return R(Error::InvalidName, cat(describe_function(f), ": ", what, why));
    ResolvedFunction rf;
    rf.function = &f;
    rf.rows.reserve(f.tensors.size());
    for (const FunctionTensor& t : f.tensors) {
      const std::uint32_t id = key_index.find(t.key);
      if (id == NameIndex::kNone)
        return R(Error::NotFound, cat(describe_function(f), ": tensor ", quote_name(t.tensor_name), " maps to key ",
                                      quote_name(t.key), ", which is not in the store"));
      if (t.tensor_name.size() > UINT32_MAX)
        return R(Error::InvalidArgument, cat(describe_function(f), ": a tensor name is longer than ",
                                             UINT32_MAX, " bytes"));
      if (std::string why = unusable_key(t.tensor_name); !why.empty())
        return R(Error::InvalidName, cat(describe_function(f), ": tensor name", why, " (key ", quote_name(t.key), ")"));
      rf.rows.push_back(ResolvedRow{t.tensor_name, id});
    }
    if (rf.rows.size() > 1) std::qsort(rf.rows.data(), rf.rows.size(), sizeof(ResolvedRow), compare_rows);
    for (std::size_t r = 1; r < rf.rows.size(); ++r)
      if (rf.rows[r].name == rf.rows[r - 1].name)
        return R(Error::InvalidName, cat(describe_function(f), ": tensor ", quote_name(rf.rows[r].name),
                                         " appears twice in its tensor table"));
    total_rows += rf.rows.size();
    out.functions.push_back(std::move(rf));
  }
  if (total_rows > UINT32_MAX)
    return R(Error::InvalidArgument, cat(total_rows, " function tensor rows; at most ", UINT32_MAX));
  return out;
}

/// Positions (Refs) of the flatbuffer objects the WDX1 block points at.
struct FlatTensorRefs {
  std::vector<FlatbufferBuilder::Ref> key_strings;
  std::vector<FlatbufferBuilder::Ref> layouts;  ///< 0 = no layout
};

/// Builds the FlatTensor flatbuffer in the order flatc builds it from the
/// JSON ExecuTorch's serializer produces (segments, then each named_data
/// entry with its key and layout, then the root), so the bytes match.
/// DataSegment.offset is omitted (it is 0) for the first `base_segments`
/// segments and written for all others, so the flatbuffer's size does not
/// depend on the offsets' values (see plan_ptd).
template <int = 0>
void build_flat_tensor(const NamedDataStore& store, const std::vector<std::uint64_t>& rel_offsets,
                       std::size_t base_segments, FlatbufferBuilder& fb, FlatTensorRefs& refs) {
  using Ref = FlatbufferBuilder::Ref;
  namespace ds = format::data_segment_field;
  namespace nd = format::named_data_field;
  namespace tl = format::tensor_layout_field;
  namespace ft = format::flat_tensor_field;
  const Table<StoreBuffer>& buffers = store.buffers();
  const Table<StoreKey>& keys = store.keys();

  std::vector<Ref> segment_refs(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    fb.start_table();
    fb.add_scalar<std::uint64_t>(ds::kSize, buffers[i].bytes.size(), 0);
    if (i >= base_segments) fb.add_scalar_always<std::uint64_t>(ds::kOffset, rel_offsets[i]);
    segment_refs[i] = fb.end_table();
  }
  const Ref segments = fb.create_offset_vector(segment_refs.data(), segment_refs.size());

  std::vector<Ref> named_refs(keys.size());
  refs.key_strings.assign(keys.size(), 0);
  refs.layouts.assign(keys.size(), 0);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const StoreKey& k = keys[i];
    refs.key_strings[i] = fb.create_string(k.key);
    Ref layout = 0;
    if (k.layout) {
      // Both vectors always exist, even for a rank-0 tensor: ExecuTorch
      // dereferences sizes() and dim_order() without a null check.
      const Ref sizes = fb.create_scalar_vector(k.layout->sizes.data(), k.layout->sizes.size());
      const Ref dim_order = fb.create_scalar_vector(k.layout->dim_order.data(), k.layout->dim_order.size());
      fb.start_table();
      fb.add_offset(tl::kDimOrder, dim_order);
      fb.add_offset(tl::kSizes, sizes);
      fb.add_scalar<std::int8_t>(tl::kScalarType, static_cast<std::int8_t>(k.layout->scalar_type), 0);
      layout = fb.end_table();
      refs.layouts[i] = layout;
    }
    fb.start_table();
    if (layout) fb.add_offset(nd::kTensorLayout, layout);
    fb.add_scalar<std::uint32_t>(nd::kSegmentIndex, k.buffer_index, 0);
    fb.add_offset(nd::kKey, refs.key_strings[i]);
    named_refs[i] = fb.end_table();
  }
  // Both vectors are written even when empty: ExecuTorch rejects a file
  // whose named_data or segments is null.
  const Ref named_data = fb.create_offset_vector(named_refs.data(), named_refs.size());

  fb.start_table();
  fb.add_offset(ft::kNamedData, named_data);
  fb.add_offset(ft::kSegments, segments);
  fb.add_scalar<std::uint32_t>(ft::kVersion, format::kFlatTensorVersion, 0);
  const Ref root = fb.end_table();
  fb.finish(root, format::kFileIdentifier);
}

/// An upper bound of the flatbuffer's size, to refuse a store that cannot
/// fit in a flatbuffer before building one.
template <int = 0>
std::uint64_t flat_tensor_size_bound(const NamedDataStore& store) {
  std::uint64_t n = 256 + 48 * std::uint64_t{store.buffer_count()};
  for (const StoreKey& k : store.keys()) {
    n += k.key.size() + 64;
    if (k.layout) n += 64 + 4 * std::uint64_t{k.layout->sizes.size()} + k.layout->dim_order.size();
  }
  return n;
}

/// Strings of the WDX1 pool, each stored once, NUL-terminated (the NUL is
/// not counted in the sizes stored beside offsets; it only helps debugging).
/// (A template only so that its members compile where it is used.)
template <class = void>
class BasicStringPool {
 public:
  std::uint32_t add(std::string_view s) {
    bool added = false;
    const std::uint32_t id = index_.find_or_add(s, &added);  // views into the caller's strings
    if (!added) return offsets_[id];
    const auto off = static_cast<std::uint32_t>(bytes_.size());
    bytes_.append(s.data(), s.size());
    bytes_ += '\0';
    offsets_.push_back(off);
    return off;
  }
  const std::string& bytes() const noexcept { return bytes_; }

 private:
  std::string bytes_;
  NameIndex index_;
  std::vector<std::uint32_t> offsets_;  ///< by index id
};
using StringPool = BasicStringPool<>;

inline std::uint32_t slot_count_for(std::uint64_t key_count) noexcept {
  std::uint64_t s = 1;
  while (s < 2 * key_count) s <<= 1;
  return static_cast<std::uint32_t>(s);
}

/// Sizes of the WDX1 tables, fixed by the counts alone.
struct ExtensionShape {
  std::uint32_t key_count = 0, slot_count = 0, segment_count = 0, function_count = 0, function_tensor_count = 0;
  std::uint32_t strings_size = 0;
  std::uint32_t entries = 0, slots = 0, segment_info = 0, functions = 0, function_tensors = 0, strings = 0;
  std::uint64_t block_size = 0;
};

template <int = 0>
Expected<ExtensionShape> extension_shape(const NamedDataStore& store, const ValidatedInput& in,
                                         std::uint64_t strings_size) {
  ExtensionShape s;
  s.key_count = static_cast<std::uint32_t>(store.key_count());
  s.slot_count = slot_count_for(s.key_count);
  s.segment_count = static_cast<std::uint32_t>(store.buffer_count());
  s.function_count = static_cast<std::uint32_t>(in.functions.size());
  std::uint64_t rows = 0;
  for (const ResolvedFunction& f : in.functions) rows += f.rows.size();
  s.function_tensor_count = static_cast<std::uint32_t>(rows);
  // Every table size is a multiple of 8, so every table starts 8-aligned.
  std::uint64_t at = format::ext_header::kSize;
  const auto place = [&at](std::uint64_t size) {
    const std::uint64_t start = at;
    at += size;
    return start;
  };
  const std::uint64_t entries = place(std::uint64_t{s.key_count} * format::key_entry::kSize);
  const std::uint64_t slots = place(std::uint64_t{s.slot_count} * 8);
  const std::uint64_t seg = place(std::uint64_t{s.segment_count} * format::segment_info::kSize);
  const std::uint64_t fns = place(std::uint64_t{s.function_count} * format::function_record::kSize);
  const std::uint64_t rows_at = place(rows * format::function_tensor::kSize);
  const std::uint64_t strings = place(strings_size);
  // Offsets and sizes inside the block are u32: the block must fit in 4 GiB.
  if (at > UINT32_MAX)
    return Expected<ExtensionShape>(Error::InvalidArgument,
                                    cat("the WDX1 extension block would take ", at,
                                        " bytes, more than its 32-bit offsets reach (", s.key_count, " keys, ",
                                        s.function_count, " functions, ", rows, " function tensor rows, ",
                                        strings_size, " bytes of names); write without wdedup_extensions"));
  s.entries = static_cast<std::uint32_t>(entries);
  s.slots = static_cast<std::uint32_t>(slots);
  s.segment_info = static_cast<std::uint32_t>(seg);
  s.functions = static_cast<std::uint32_t>(fns);
  s.function_tensors = static_cast<std::uint32_t>(rows_at);
  s.strings = static_cast<std::uint32_t>(strings);
  s.strings_size = static_cast<std::uint32_t>(strings_size);
  s.block_size = (at + 7) & ~std::uint64_t{7};
  return s;
}

/// Decides the whole file layout. On success the plan's metadata is final
/// except for the WDX1 content hashes (set_content_hash).
template <int = 0>
Expected<PtdPlan> plan_ptd(const NamedDataStore& store, const FunctionMaps& maps,
                           const WriteOptions& options) {
  using R = Expected<PtdPlan>;
  Expected<ValidatedInput> validated = validate_for_write(store, maps, options);
  if (!validated) return R(validated.build_error());
  const ValidatedInput& in = *validated;
  const Table<StoreBuffer>& buffers = store.buffers();
  const Table<StoreKey>& keys = store.keys();

  const std::uint64_t fb_bound = flat_tensor_size_bound(store);
  if (fb_bound > FlatbufferBuilder::kMaxSize - format::kFlatbufferOffset) {
    std::uint64_t key_bytes = 0;
    for (const StoreKey& k : keys) key_bytes += k.key.size();
    return R(Error::InvalidArgument,
             cat("the store's metadata (", keys.size(), " keys, ", key_bytes, " bytes of key names, ",
                 buffers.size(), " buffers) does not fit in a flatbuffer (at most ", FlatbufferBuilder::kMaxSize,
                 " bytes)"));
  }

  // The WDX1 strings pool and the block's shape depend only on the input.
  StringPool pool;
  if (options.wdedup_extensions) {
    for (const ResolvedFunction& f : in.functions) {
      pool.add(f.function->method);
      pool.add(f.function->blob_key);
      pool.add(f.function->function_name);
      for (const auto& row : f.rows) pool.add(row.name);
    }
  }
  // A reader checks the function maps for repeats at open with no heap,
  // within a budget of bytes, and refuses maps whose long names exhaust it
  // (check_function_repeats). The same check over the same pool here: a
  // file this writes always opens. (Repeats themselves were refused above.)
  if (options.wdedup_extensions && !in.functions.empty()) {
    const std::string& chars = pool.bytes();
    const auto view = [&](const std::string& name) { return KeyView(chars.data() + pool.add(name), name.size()); };
    std::vector<FunctionNames> names;
    names.reserve(in.functions.size());
    for (const ResolvedFunction& f : in.functions)
      names.push_back(FunctionNames{view(f.function->method), view(f.function->blob_key),
                                    view(f.function->function_name), f.function->partition_index});
    const RepeatCheck rc = check_function_repeats(static_cast<std::uint32_t>(names.size()), chars.size(),
                                                  format::kCheckBytesPerName,
                                                  [&](std::uint32_t i) noexcept { return names[i]; });
    if (rc.problem != RepeatCheck::kNone)
      return R(Error::InvalidName,
               cat(describe_function(*in.functions[rc.at].function), ": a reader could not check the function maps "
                   "for repeats (names over 128 bytes that agree in their first and last 64 bytes, function after "
                   "function, exceed what it compares) and would refuse the file; make such names differ within 64 "
                   "bytes of either end"));

    // The reader also reads every name within a budget (format::
    // name_check_budget): a long tensor name the pool holds once is read
    // for each row that names it. The same sum here, in the reader's order.
    std::uint64_t name_count = 0, read = 0;
    for (const ResolvedFunction& f : in.functions) {
      name_count += 3 + f.rows.size();
      read += f.function->method.size() + f.function->blob_key.size() + f.function->function_name.size();
      for (std::size_t k = 0; k < f.rows.size(); ++k)
        read += f.rows[k].name.size() + (k == 0 ? 0 : min_of(f.rows[k - 1].name.size(), f.rows[k].name.size()) + 1);
    }
    const std::uint64_t budget = format::name_check_budget(chars.size(), name_count);
    if (read > budget) {
      // The longest name of any kind (a long blob key counts once a function).
      std::string_view longest;
      const char* kind = "";
      const FunctionMap* in_function = nullptr;
      const auto consider = [&](std::string_view name, const char* what, const FunctionMap* f) {
        if (name.size() > longest.size()) {
          longest = name;
          kind = what;
          in_function = f;
        }
      };
      for (const ResolvedFunction& f : in.functions) {
        consider(f.function->method, "method name", f.function);
        consider(f.function->blob_key, "blob key", f.function);
        consider(f.function->function_name, "function name", f.function);
        for (const ResolvedRow& r : f.rows) consider(r.name, "tensor name", f.function);
      }
      // Names cut at 40 bytes: the message is about their length.
      const auto clip = [](std::string_view n) { return cat(quote_name(n.substr(0, 40)), n.size() > 40 ? "..." : ""); };
      const std::string longest_is = cat("; the longest is the ", kind, " ", clip(longest), " (", longest.size(),
                                         " bytes) of method ", clip(in_function->method), " partition ",
                                         in_function->partition_index);
      return R(Error::InvalidName,
               cat("the function maps' names are too long for a reader to check: it would read ", read,
                   " bytes of them, over its budget of ", budget, " (twice the ", chars.size(),
                   "-byte strings pool plus ", format::kCheckBytesPerName, " bytes for each of ", name_count,
                   " names), and refuse the file", longest_is, "; shorten the names"));
    }
  }
  ExtensionShape shape;
  if (options.wdedup_extensions) {
    Expected<ExtensionShape> s = extension_shape(store, in, pool.bytes().size());
    if (!s) return R(s.build_error());
    shape = *s;
  }

  // Segment placement. ExecuTorch places segment 0 at segment_base_offset
  // (offset 0, a field flatc omits as a default) and aligns later segments
  // relative to the base; we align absolutely. To keep segment 0 at offset
  // 0, the base itself is aligned to segment 0's alignment, and to that of
  // any empty segments before the first non-empty one (they sit at the base
  // too, as in ExecuTorch). Every later segment starts past the base, so
  // which offsets are 0 is known before the flatbuffer is built, and its
  // size does not depend on where the base lands. (Only when that lcm would
  // exceed kMaxAlignment does the run stop early, and a 0 offset after it is
  // then written explicitly: still a valid file.)
  const std::uint64_t sa = options.segment_alignment;
  std::uint64_t base_alignment = sa;
  std::size_t base_segments = 0;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::optional<std::uint64_t> l = lcm64(base_alignment, in.segment_alignments[i]);
    if (!l || *l > kMaxAlignment) break;
    base_alignment = *l;
    base_segments = i + 1;
    if (!buffers[i].bytes.empty()) break;
  }

  PtdPlan plan;
  FlatTensorRefs refs;
  std::vector<std::uint64_t> rel(buffers.size(), 0);
  std::vector<std::uint64_t> abs(buffers.size(), 0);
  FlatbufferBuilder fb(static_cast<std::size_t>(fb_bound));  // (under kMaxSize: checked above)
  build_flat_tensor(store, rel, base_segments, fb, refs);  // values do not change the size
  if (fb.overflowed())
    return R(Error::InvalidArgument, cat("the store's metadata does not fit in a flatbuffer (at most ",
                                         FlatbufferBuilder::kMaxSize, " bytes)"));
  const std::uint64_t fb_end = format::kFlatbufferOffset + fb.size();
  std::uint64_t meta_end = (fb_end + format::kExtAlignment - 1) & ~(format::kExtAlignment - 1);
  plan.extension_offset = options.wdedup_extensions ? meta_end : 0;
  if (options.wdedup_extensions) meta_end += shape.block_size;
  std::uint64_t base = 0;
  if (!format::align_up(meta_end, base_alignment, &base))
    return R(Error::InvalidArgument, "segment_base_offset overflows 64 bits");
  std::uint64_t end = base;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::optional<std::uint64_t> a = lcm64(sa, in.segment_alignments[i]);
    std::uint64_t at = 0;
    if (!a || !format::align_up(end, *a, &at) || add_overflows(at, buffers[i].bytes.size(), &end))
      return R(Error::InvalidArgument,
               cat("the file would exceed 2^64 bytes at segment ", i, " (", buffers[i].bytes.size(),
                   " bytes, alignment lcm(", sa, ", ", in.segment_alignments[i], "))"));
    abs[i] = at;
    rel[i] = at - base;
  }
  if (buffers.size() > 0) {
    fb = FlatbufferBuilder(static_cast<std::size_t>(fb_bound));
    build_flat_tensor(store, rel, base_segments, fb, refs);
  }
  plan.flatbuffer_size = fb.size();
  plan.extension_size = options.wdedup_extensions ? shape.block_size : 0;
  plan.segment_base_offset = base;
  plan.segment_data_size = end - base;
  plan.file_size = end;

  // ---- metadata bytes --------------------------------------------------------
  // Only the bytes that carry something are held in memory: the padding up
  // to segment_base_offset (as large as the first segment's alignment,
  // up to 4 GiB) is written from a shared block of zeros.
  const std::uint64_t meta_size = options.wdedup_extensions ? plan.extension_offset + plan.extension_size : fb_end;
  // (Up to 6 GiB: too much only where std::size_t is 32 bits.)
  if (Expected<void> fits = check_addressable("the file's metadata", meta_size); !fits) return R(fits.build_error());
  std::vector<std::uint8_t>& m = plan.metadata;
  m.assign(static_cast<std::size_t>(meta_size), 0);
  const std::uint8_t* fbd = fb.data();
  // ExecuTorch's layout: the flatbuffer's first 8 bytes (root offset and
  // identifier), the padded FH01 header, then the rest of the flatbuffer.
  // Only the root offset crosses the insertion point, so only it moves.
  std::memcpy(m.data(), fbd, 8);
  format::store_u32(m.data(), format::load_u32(fbd) + static_cast<std::uint32_t>(format::kFlatbufferOffset));
  std::memcpy(m.data() + format::kHeaderOffset, format::kHeaderMagic, 4);
  format::store_u32(m.data() + format::kHeaderLengthPos, format::kHeaderLength);
  format::store_u64(m.data() + format::kHeaderFlatbufferOffsetPos, format::kFlatbufferOffset);
  format::store_u64(m.data() + format::kHeaderFlatbufferSizePos, plan.flatbuffer_size);
  format::store_u64(m.data() + format::kHeaderSegmentBasePos, plan.segment_base_offset);
  format::store_u64(m.data() + format::kHeaderSegmentDataSizePos, plan.segment_data_size);
  std::memcpy(m.data() + format::kHeaderOffset + format::kFlatbufferOffset, fbd + 8, fb.size() - 8);
  // Absolute file position of a flatbuffer object.
  const auto file_pos = [&](FlatbufferBuilder::Ref r) -> std::uint64_t {
    return fb.position(r) + format::kFlatbufferOffset;
  };

  plan.segments.reserve(buffers.size());
  for (const StoreBuffer& b : buffers) plan.segments.push_back(b.bytes);
  plan.segment_offsets = abs;

  if (options.wdedup_extensions) {
    namespace eh = format::ext_header;
    std::uint8_t* x = m.data() + plan.extension_offset;
    std::memcpy(x + eh::kMagic, format::kExtMagic, 4);
    format::store_u32(x + eh::kVersion, format::kExtVersion);
    format::store_u64(x + eh::kBlockSize, shape.block_size);
    // Keys chosen to collide under the seed asked for (an untrusted export
    // converted) would take a reader more probes than it allows, and it
    // would refuse the file: then seeds derived from it are tried, as
    // build_index does, and the file stores the one used.
    // (The store's keys are distinct: fill_slots finds no duplicate.)
    const auto key_at = [&](std::uint32_t i) noexcept { return KeyView(keys[i].key); };
    std::uint64_t seed = options.hash_seed;
    int attempt = 0;
    while (fill_slots(shape.key_count, key_at, seed, x + shape.slots, shape.slot_count).result != SlotFill::kDone) {
      if (++attempt == kIndexSeedAttempts)
        return R(Error::InvalidArgument,
                 cat("the store's ", keys.size(), " keys collide in the key index under hash seed ",
                     options.hash_seed, " and the ", kIndexSeedAttempts - 1, " seeds derived from it, past the ",
                     format::probe_budget(shape.slot_count), " probes a reader allows (keys chosen to collide?); "
                     "write with another WriteOptions::hash_seed"));
      seed = next_index_seed(seed, attempt);
    }
    format::store_u64(x + eh::kHashSeed, seed);
    format::store_u32(x + eh::kKeyCount, shape.key_count);
    format::store_u32(x + eh::kSlotCount, shape.slot_count);
    format::store_u32(x + eh::kSegmentCount, shape.segment_count);
    format::store_u32(x + eh::kFunctionCount, shape.function_count);
    format::store_u32(x + eh::kFunctionTensorCount, shape.function_tensor_count);
    format::store_u32(x + eh::kStringsSize, shape.strings_size);
    format::store_u32(x + eh::kEntriesOffset, shape.entries);
    format::store_u32(x + eh::kSlotsOffset, shape.slots);
    format::store_u32(x + eh::kSegmentInfoOffset, shape.segment_info);
    format::store_u32(x + eh::kFunctionsOffset, shape.functions);
    format::store_u32(x + eh::kFunctionTensorsOffset, shape.function_tensors);
    format::store_u32(x + eh::kStringsOffset, shape.strings);

    namespace ke = format::key_entry;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const StoreKey& k = keys[i];
      std::uint8_t* e = x + shape.entries + i * ke::kSize;
      format::store_u64(e + ke::kDataOffset, abs[k.buffer_index]);
      format::store_u64(e + ke::kDataSize, buffers[k.buffer_index].bytes.size());
      format::store_u64(e + ke::kAlignment, k.alignment);
      // The flatbuffer is < 2 GiB, so these absolute positions fit in u32.
      format::store_u32(e + ke::kKeyOffset, static_cast<std::uint32_t>(file_pos(refs.key_strings[i]) + 4));
      format::store_u32(e + ke::kKeySize, static_cast<std::uint32_t>(k.key.size()));
      format::store_u32(e + ke::kSegmentIndex, k.buffer_index);
      format::store_u32(e + ke::kLayoutOffset,
                        refs.layouts[i] ? static_cast<std::uint32_t>(file_pos(refs.layouts[i])) : 0u);
    }

    plan.segment_info_offset = plan.extension_offset + shape.segment_info;
    for (std::size_t i = 0; i < buffers.size(); ++i)
      format::store_u64(x + shape.segment_info + i * format::segment_info::kSize + format::segment_info::kAlignment,
                        in.segment_alignments[i]);

    namespace fr = format::function_record;
    namespace ftr = format::function_tensor;
    std::uint32_t row = 0;
    for (std::size_t fi = 0; fi < in.functions.size(); ++fi) {
      const ResolvedFunction& f = in.functions[fi];
      std::uint8_t* r = x + shape.functions + fi * fr::kSize;
      format::store_u32(r + fr::kMethodOffset, pool.add(f.function->method));
      format::store_u32(r + fr::kMethodSize, static_cast<std::uint32_t>(f.function->method.size()));
      format::store_u32(r + fr::kPartitionIndex, f.function->partition_index);
      format::store_u32(r + fr::kBlobOffset, pool.add(f.function->blob_key));
      format::store_u32(r + fr::kBlobSize, static_cast<std::uint32_t>(f.function->blob_key.size()));
      format::store_u32(r + fr::kNameOffset, pool.add(f.function->function_name));
      format::store_u32(r + fr::kNameSize, static_cast<std::uint32_t>(f.function->function_name.size()));
      format::store_u32(r + fr::kTensorsBegin, row);
      format::store_u32(r + fr::kTensorsCount, static_cast<std::uint32_t>(f.rows.size()));
      for (const auto& t : f.rows) {
        std::uint8_t* tr = x + shape.function_tensors + std::uint64_t{row} * ftr::kSize;
        format::store_u32(tr + ftr::kNameOffset, pool.add(t.name));
        format::store_u32(tr + ftr::kNameSize, static_cast<std::uint32_t>(t.name.size()));
        format::store_u32(tr + ftr::kKeyIndex, t.key_index);
        ++row;
      }
    }
    if (!pool.bytes().empty()) std::memcpy(x + shape.strings, pool.bytes().data(), pool.bytes().size());
  }

  WriteStats& st = plan.stats;
  st.file_size = plan.file_size;
  st.flatbuffer_size = plan.flatbuffer_size;
  st.extension_size = plan.extension_size;
  st.metadata_size = format::kFlatbufferOffset + plan.flatbuffer_size + plan.extension_size;
  st.segment_base_offset = plan.segment_base_offset;
  st.data_bytes = store.bytes_stored();
  st.padding_bytes = st.file_size - st.metadata_size - st.data_bytes;
  st.key_count = static_cast<std::uint32_t>(keys.size());
  st.segment_count = static_cast<std::uint32_t>(buffers.size());
  // Without the WDX1 block no function map is written.
  st.function_count = options.wdedup_extensions ? static_cast<std::uint32_t>(in.functions.size()) : 0;
  return plan;
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_PTD_PLAN_HPP
