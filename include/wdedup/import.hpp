// wdedup/import.hpp — .ptd stores read back into a Program: a plain store
// as one method, a store deduplicate() wrote as its methods and partitions.
// Build-time half.
//
// Why: a model whose methods were exported one at a time ships one .ptd per
// method (prefill.ptd, decode.ptd), each holding the shared weights again.
// Importing each file as a method and running deduplicate() over the
// Program gives one shared store. It also lets the benchmark harness time
// deduplicate() on a user's real weights (wdedup-bench --ptd).
//
// The tensors point into the store's memory, not copies: the map must be
// opened over a memory-backed source (MmapSource, BufferSource), and that
// source must outlive the Program and everything built from it.
#ifndef WDEDUP_IMPORT_HPP
#define WDEDUP_IMPORT_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wdedup/detail/min_max.hpp"
#include "wdedup/detail/name_index.hpp"
#include "wdedup/expected.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/program.hpp"
#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/named_data_map.hpp"
#include "wdedup/runtime/verify.hpp"

namespace wdedup {

struct ImportOptions {
  /// Largest alignment the import infers from a file that does not record
  /// one: the page size, beyond which an mmap'd tensor cannot be aligned.
  static constexpr std::int64_t kMaxInferred = 4096;
  /// The alignment given to each key of a file that does not record the
  /// alignment its keys asked for (ExecuTorch's files; wdedup's record it).
  /// 0 (the default) infers it from the file: the largest power of two, up
  /// to kMaxInferred, that divides the offset of the key's segment from the
  /// segment base (where ExecuTorch's writer aligns a segment) or its
  /// offset in the file (where wdedup's writer aligns one, also when it
  /// leaves its records out: WriteOptions::wdedup_extensions). So a merged
  /// store aligns every tensor at least as its source file did (at the cost
  /// of some padding where an offset was aligned by chance).
  /// Otherwise: this alignment for every key (any value in 1..2^32).
  std::int64_t unrecorded_alignment = 0;
  /// add_ptd_program: a key that no function's table names has no method or
  /// partition to go back to. By default the import is refused, naming the
  /// key (nothing is dropped without a word); a method name here takes them
  /// instead, in file order, as one partition of tensors named by their keys.
  std::string unmapped_keys_method;
  /// A store that records its segments' content hashes (one wdedup wrote:
  /// its WDX1 block) has every segment checked against them before its
  /// bytes are taken, after every other check: one XXH3 pass over its
  /// distinct segments (a mapped file not yet in the page cache is read
  /// from disk here, and deduplicate() reads it again where the inputs
  /// exceed memory). Bytes that changed since the file was written (a bad
  /// disk, a copy cut short and padded, an edit) are refused
  /// (MalformedSegment, naming the segment) where a merge would otherwise
  /// write them into a file whose fresh hashes match them. false takes the
  /// bytes as they are. Files without hashes (ExecuTorch's) have nothing to
  /// check either way.
  bool verify_content_hashes = true;
  /// How PtdFiles::add opens each file (add_ptd_method and add_ptd_program
  /// take a map their caller opened): e.g. `open.allow_moved_segments` for a
  /// wdedup file whose data ExecuTorch's replace_data replaced. The bytes
  /// replaced then no longer have their recorded content hash either, so
  /// such a file imports only with verify_content_hashes = false too.
  OpenOptions open;
};

namespace detail {

/// qsort's comparator for std::uint64_t.
inline int compare_u64(const void* a, const void* b) noexcept {
  const std::uint64_t x = *static_cast<const std::uint64_t*>(a), y = *static_cast<const std::uint64_t*>(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

/// The checks of the options and the store both imports make first. `who`
/// names the caller in messages. Refuses a store whose bytes are not in memory before reading
/// any of them (a FileSource would copy each one, and the copies would die
/// with their DataBuffers).
template <int = 0>
Expected<void> check_import_source(const char* who, const NamedDataMap& store, const ImportOptions& options) {
  const std::int64_t a = options.unrecorded_alignment;
  if (a < 0 || static_cast<std::uint64_t>(a) > kMaxAlignment)
    return Expected<void>(Error::InvalidAlignment,
                          cat(who, ": unrecorded_alignment ", a, " is not 0 (infer) or in 1..", kMaxAlignment));
  if (store.file_size() != 0 && store.source().view(0, store.file_size()) == nullptr)
    return Expected<void>(Error::InvalidArgument,
                          cat(who, ": the store is not in memory (its source copies what it reads, as a FileSource "
                                   "does); open it over an MmapSource or a BufferSource so that tensors can point "
                                   "into it"));
  if (store.keys_overlap())
    return Expected<void>(Error::MalformedKey,
                          cat(who, ": the store's ", *store.get_num_keys(), " key strings overlap in the file (they "
                                   "add up to more bytes than its flatbuffer holds): copying each would take far "
                                   "more memory than the file; no writer makes such keys"));
  return {};
}

/// ImportOptions::verify_content_hashes: every segment of `store` whose
/// content hash the file records must still have it. Segments are
/// disjoint or identical (open() checks), and each distinct range is hashed
/// once: 10,000 segments naming one 2.5 MB range took 1.85 s hashed one by
/// one. Each segment's recorded hash is compared with its range's.
template <int = 0>
Expected<void> check_content_hashes(const char* who, const NamedDataMap& store, const ImportOptions& options) {
  if (!options.verify_content_hashes || !store.has_extension()) return {};
  struct Seg {
    std::uint64_t offset, size, recorded;
    std::uint32_t index;
  };
  std::vector<Seg> segs;
  segs.reserve(store.segment_count());
  for (std::uint32_t i = 0; i < store.segment_count(); ++i) {
    const Result<SegmentInfo> seg = store.segment(i);
    if (seg && seg->has_content_hash)  // (open() checked every index)
      segs.push_back({seg->offset, seg->size, seg->content_hash, i});
  }
  // qsort rather than <algorithm> (see detail/min_max.hpp): std::sort here
  // brought <algorithm> back and 4% more instructions to every includer.
  // Sorted by range, then index, so each range's first segment is hashed.
  if (segs.size() > 1)
    std::qsort(segs.data(), segs.size(), sizeof(Seg), [](const void* pa, const void* pb) noexcept {
      const Seg& a = *static_cast<const Seg*>(pa);
      const Seg& b = *static_cast<const Seg*>(pb);
      if (a.offset != b.offset) return a.offset < b.offset ? -1 : 1;
      if (a.size != b.size) return a.size < b.size ? -1 : 1;
      return a.index < b.index ? -1 : (a.index > b.index ? 1 : 0);
    });
  std::uint64_t hash = 0;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    const Seg& g = segs[k];
    if (k == 0 || g.offset != segs[k - 1].offset || g.size != segs[k - 1].size) {
      const Result<std::uint64_t> h = segment_content_hash(store, g.index);
      if (!h) return Expected<void>(h.error(), cat(who, ": segment #", g.index, ": ", describe_failure(h.failure())));
      hash = *h;
    }
    if (hash != g.recorded)
      return Expected<void>(Error::MalformedSegment,
                            cat(who, ": segment #", g.index, " (", counted(g.size, "byte"), " at offset ", g.offset,
                                ") does not have the content hash the file records: its bytes (or that hash) "
                                "changed since it was written (ImportOptions::verify_content_hashes = false takes "
                                "them as they are)"));
  }
  return {};
}

/// A name from the file that is to name a method or tensor must be usable
/// (deduplicate() would refuse it later, far from the file): not empty, no
/// NUL byte, and UTF-8, as the keys made of it will be (unusable_key; a
/// method's name when `method`). `what()` says which one, e.g. "key #3":
/// called only for a name refused, so the common path builds no string
/// (importing 100k rows took 3.9-4.4 ms, against 10.8-11.1 ms building it
/// for every row).
template <class What>
Expected<void> check_import_name(const char* who, const What& what, std::string_view name, bool method = false) {
  if (std::string why = unusable_key(name, method); !why.empty())
    return Expected<void>(Error::InvalidName, cat(who, ": ", what(), why));
  return {};
}

/// `stem` if no method of `program` has that name, else the first of
/// "stem#2", "stem#3", ... that none has, found in one pass over the
/// methods. Trying each name in turn looked every method up again for each,
/// so files that share a name (adapters/<name>/adapter.ptd) took time cubic
/// in their count: 2,800 of them 8.4 s to add, against 0.26 s for as many
/// named apart.
template <int = 0>
std::string free_method_name(const Program& program, const std::string& stem) {
  // taken[0]: the stem is a method; taken[k], k >= 2: "stem#k" is. n
  // methods take at most n of the n + 2 names up to "stem#<n + 2>", so a
  // free one is among them and a larger k never matters.
  const std::size_t n = program.methods.size();
  std::vector<char> taken(n + 3, 0);
  for (const Method& m : program.methods) {
    const std::string& name = m.name;
    if (name.size() < stem.size() || name.compare(0, stem.size(), stem) != 0) continue;
    if (name.size() == stem.size()) {
      taken[0] = 1;
      continue;
    }
    // Only k as cat() writes it: decimal digits, no leading zero.
    const std::size_t at = stem.size() + 1;
    if (name[stem.size()] != '#' || name.size() == at || name[at] == '0') continue;
    std::size_t k = 0;
    std::size_t i = at;
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && k <= n + 2; ++i)
      k = k * 10 + static_cast<std::size_t>(name[i] - '0');
    if (i == name.size() && k >= 2 && k <= n + 2) taken[k] = 1;
  }
  if (taken[0] == 0) return stem;
  std::size_t k = 2;
  while (taken[k] != 0) ++k;
  return cat(stem, "#", k);
}

/// Appends key `index` of `store` to `part` as a tensor named `name`.
template <int = 0>
Expected<void> import_key(const char* who, const NamedDataMap& store, std::size_t index, std::string_view name,
                          const ImportOptions& options, Partition& part) {
  const KeyView key = *store.get_key(index);
  auto fail = [&](Error code, const auto&... what) {
    return Expected<void>(code, cat(who, ": key #", index, " ", quote_name(key), ": ", what...));
  };
  // The tensor points at the key's bytes where they lie in the source
  // (check_import_source found it in memory), not through key_data: over
  // memory opened with lent metadata that copies a key the memory does not
  // align as the key asks, and the copy, the tensor's size in memory, would
  // die with its DataBuffer. (The checks key_data makes first: the source
  // is the one opened.)
  if (Status st = store.check_source(); !st) return fail(st.error(), describe_failure(st.failure()));
  const KeyInfo info = *store.key_info(index);
  const ByteSpan bytes(store.source().view(info.offset, info.size), static_cast<std::size_t>(info.size));
  std::optional<Layout> layout;
  Result<TensorLayout> l = store.key_layout(index);
  if (!l.ok() && l.error() != Error::NotFound)  // a layout that breaks its rules is not "no layout"
    return fail(l.error(), describe_failure(l.failure()));
  if (l.ok()) {
    if (l->nbytes() != info.size)
      return fail(Error::LayoutMismatch, "its layout describes ", detail::counted(l->nbytes(), "byte"),
                  ", its segment holds ", info.size);
    layout.emplace(Layout::copy_of(*l));
  }
  std::int64_t alignment = options.unrecorded_alignment;
  if (store.has_extension()) {
    alignment = static_cast<std::int64_t>(info.alignment);
  } else if (alignment == 0) {
    auto inferred = [](std::uint64_t offset) {
      const std::uint64_t p2 = offset == 0 ? ImportOptions::kMaxInferred : pow2_part(offset);
      return static_cast<std::int64_t>(p2 < ImportOptions::kMaxInferred ? p2 : ImportOptions::kMaxInferred);
    };
    alignment = detail::max_of(inferred(info.offset - store.header().segment_base_offset), inferred(info.offset));
  }
  part.add(std::string(name), bytes, alignment, std::move(layout));
  return {};
}

/// The key of `merged` that holds what a file's key `name` held (`bytes`,
/// `layout`) now that `name` is not a key of it, for check_keys_kept to
/// say where it went; nullptr if none is found. Looked for where
/// deduplicate() puts such a key: `<method>/<name>` for the method the file
/// was imported as, then any `<method>/<name>` (one with the same bytes and
/// layout serves a program as well), then any key over the file's own
/// bytes (a hand-made function map named the key after another tensor).
/// Only for the few keys a message names: each is a pass over the keys.
template <int = 0>
const StoreKey* key_now_holding(const NamedDataStore& merged, std::string_view name, ByteSpan bytes,
                                const std::optional<Layout>& layout, std::string_view method) {
  auto holds = [&](const StoreKey& k) {
    return k.layout == layout && same_bytes(merged.buffers()[k.buffer_index].bytes, bytes);
  };
  if (!method.empty()) {
    const StoreKey* k = merged.find(cat(method, "/", name));
    if (k != nullptr && holds(*k)) return k;
  }
  for (const StoreKey& k : merged.keys()) {
    const std::string_view key = k.key;
    if (key.size() > name.size() && key[key.size() - name.size() - 1] == '/' &&
        key.compare(key.size() - name.size(), name.size(), name) == 0 && holds(k))
      return &k;
  }
  for (const StoreKey& k : merged.keys()) {
    const ByteSpan held = merged.buffers()[k.buffer_index].bytes;
    if (held.data() == bytes.data() && held.size() == bytes.size() && k.layout == layout) return &k;
  }
  return nullptr;
}

}  // namespace detail

/// Adds method `method` to `program`: one partition holding every key of
/// `store` in file order, each a tensor named by its key, with the key's
/// bytes (a view into the store), its alignment (recorded, or see
/// ImportOptions) and its layout (if any). Keys that share a segment become
/// tensors over the same bytes, which deduplicate() settles without reading
/// them twice. For a store that has function maps (a wdedup store that
/// deduplicate() wrote), use add_ptd_program, which restores its methods and
/// partitions.
///
/// Errors (the program is then unchanged):
/// - InvalidName: `method` is empty, holds a NUL byte, is not UTF-8 or is
///   already a method of `program`; a key is empty, holds a NUL byte or is
///   not UTF-8 (no tensor name can be any of these: deduplicate() makes
///   keys from method and tensor names);
/// - MalformedKey: a key appears twice (ExecuTorch's reader would give the
///   first for both; which one a merge should keep is not the import's guess),
///   or the keys' strings overlap in the file (store.keys_overlap());
/// - InvalidAlignment: options.unrecorded_alignment is not 0 or in 1..2^32;
/// - InvalidArgument: the store's bytes are not in memory (opened over a
///   FileSource), or the store has function maps;
/// - LayoutMismatch: a key's layout describes fewer bytes than its segment
///   holds (ExecuTorch's reader accepts that; a tensor's bytes are its
///   layout's, so deduplicate() would refuse it);
/// - MalformedSegment: a segment's bytes no longer have the content hash
///   the file records (ImportOptions::verify_content_hashes);
/// - what the reader returns for a key it cannot give (its code).
template <int = 0>
Expected<void> add_ptd_method(Program& program, const NamedDataMap& store, std::string method,
                              const ImportOptions& options = {}) {
  constexpr const char* who = "add_ptd_method";
  if (Expected<void> ok = detail::check_import_name(who, [] { return "the method name"; }, method, true); !ok) return ok;
  if (program.find_method(method) != nullptr)
    return Expected<void>(Error::InvalidName,
                          detail::cat(who, ": method ", detail::quote_name(method), " is already in the program"));
  if (Expected<void> ok = detail::check_import_source(who, store, options); !ok) return ok;
  if (store.function_count() != 0)
    return Expected<void>(Error::InvalidArgument,
                          detail::cat(who, ": the store has ", store.function_count(),
                                      " function maps (methods and partitions); add_ptd_program restores them"));
  const std::size_t count = *store.get_num_keys();
  Method m{std::move(method), {}};
  Partition& part = m.add_partition();
  part.tensors.reserve(count);
  detail::NameIndex names(count);
  for (std::size_t i = 0; i < count; ++i) {
    const KeyView key = *store.get_key(i);
    const std::string_view name(key.data(), key.size());
    auto what = [&] { return detail::cat("key #", i); };
    if (Expected<void> ok = detail::check_import_name(who, what, name); !ok) return ok;
    bool added = false;
    const std::uint32_t first = names.find_or_add(name, &added);
    if (!added)
      return Expected<void>(Error::MalformedKey, detail::cat(who, ": key ", detail::quote_name(name),
                                                             " appears twice, as keys #", first, " and #", i));
    if (Expected<void> ok = detail::import_key(who, store, i, name, options, part); !ok) return ok;
  }
  // Last: it reads every segment, and any refusal above needs none of them.
  if (Expected<void> ok = detail::check_content_hashes(who, store, options); !ok) return ok;
  program.methods.push_back(std::move(m));
  return {};
}

/// Adds the methods and partitions that `store`'s function maps describe:
/// for each function, its method (created in the order first met) gets
/// partition `partition_index`, holding one tensor per row of the
/// function's table, named by the row and holding its key's bytes,
/// alignment and layout. A partition's tensors come back in the order of
/// their keys, which deduplicate() numbers in order of first use (a table
/// in the file is sorted by name, so the original order is not stored).
/// That restores the order in which keys were first used, which is all
/// that decides which content gets a generated key and which its "~1":
/// deduplicating the result again with the same policy gives the same
/// keys, each with the same bytes, the same buffers and the same functions.
///
/// A key no function's table names is refused (InvalidArgument, naming it),
/// unless options.unmapped_keys_method names a method to take such keys.
///
/// Errors (the program is then unchanged): InvalidArgument for a store
/// without function maps (use add_ptd_method) or not in memory, or with a
/// key no function names (see above);
/// InvalidName for a method the program already has, or a method or
/// tensor name in the function maps (or unmapped_keys_method, or a key
/// no function names under it) that is empty, holds a NUL byte or is not
/// UTF-8 (deduplicate() could not take it back); MalformedFunctionMap
/// for a (method, partition) given twice, or a method whose partitions are
/// not 0..n-1; InvalidAlignment, LayoutMismatch, MalformedSegment and the reader's codes as
/// for add_ptd_method. Method names are checked first, then the partition
/// numbering (before anything is sized by it), then each function's rows,
/// then the keys no row names, and last the content hashes.
template <int = 0>
Expected<void> add_ptd_program(Program& program, const NamedDataMap& store, const ImportOptions& options = {}) {
  constexpr const char* who = "add_ptd_program";
  if (Expected<void> ok = detail::check_import_source(who, store, options); !ok) return ok;
  if (store.function_count() == 0)
    return Expected<void>(Error::InvalidArgument,
                          detail::cat(who, ": the store has no function maps; add_ptd_method imports it as one method"));
  const std::size_t n_functions = store.function_count();
  std::vector<Method> methods;
  detail::NameIndex method_index;
  std::vector<std::uint32_t> method_of(n_functions);  // function -> method
  std::vector<std::uint32_t> count, last;             // per method: functions, highest partition index
  for (std::size_t fi = 0; fi < n_functions; ++fi) {
    const FunctionView f = *store.function(fi);
    const std::string_view mname(f.method().data(), f.method().size());
    bool fresh = false;
    const std::uint32_t mi = method_index.find_or_add(mname, &fresh);
    if (fresh) {
      auto what = [&] { return detail::cat("function #", fi, "'s method name"); };
      if (Expected<void> ok = detail::check_import_name(who, what, mname, true); !ok) return ok;
      if (program.find_method(mname) != nullptr)
        return Expected<void>(Error::InvalidName,
                              detail::cat(who, ": method ", detail::quote_name(mname),
                                          " is already in the program (a store's methods keep their names: where "
                                          "a file named after its path took that one, add the store first; two "
                                          "stores that both hold it do not merge)"));
      methods.push_back(Method{std::string(mname), {}});
      count.push_back(0);
      last.push_back(0);
    }
    method_of[fi] = mi;
    ++count[mi];
    last[mi] = detail::max_of(last[mi], f.partition_index());
  }
  // A method's partitions 0..n-1 take its n functions, one each: an index
  // at n or past it leaves a partition below it without one. Found before
  // any index sizes anything, so what is sized adds up to the function
  // count: sizing each method by its highest index let a 179 KB file of
  // 2,896 one-function methods, each claiming partition 2,895, ask for
  // 200 MB (and more functions, for gigabytes).
  for (std::uint32_t mi = 0; mi < methods.size(); ++mi) {
    if (last[mi] < count[mi]) continue;
    std::vector<char> given(count[mi], 0);
    for (std::size_t fi = 0; fi < n_functions; ++fi)
      if (method_of[fi] == mi && store.function(fi)->partition_index() < count[mi])
        given[store.function(fi)->partition_index()] = 1;
    std::size_t gap = 0;
    while (given[gap] != 0) ++gap;  // one is: the function at last[mi] marks none of the count[mi]
    return Expected<void>(Error::MalformedFunctionMap,
                          detail::cat(who, ": method ", detail::quote_name(methods[mi].name), " has partition ",
                                      last[mi], " but no function for partition ", gap));
  }
  std::vector<std::vector<char>> seen;  // per method: partition index -> given
  for (std::uint32_t mi = 0; mi < methods.size(); ++mi) {
    seen.emplace_back(count[mi], 0);
    methods[mi].partitions.resize(count[mi]);
  }
  std::vector<char> mapped(*store.get_num_keys(), 0);  // key -> some row names it
  for (std::size_t fi = 0; fi < n_functions; ++fi) {
    const FunctionView f = *store.function(fi);
    const std::string_view mname(f.method().data(), f.method().size());
    const std::uint32_t mi = method_of[fi];
    Method& m = methods[mi];
    const std::uint32_t p = f.partition_index();  // < count[mi], checked above
    if (seen[mi][p])
      return Expected<void>(Error::MalformedFunctionMap, detail::cat(who, ": method ", detail::quote_name(mname),
                                                                     " partition ", p, " has two functions"));
    seen[mi][p] = 1;
    Partition& part = m.partitions[p];
    part.tensors.reserve(f.tensor_count());
    // Rows in key order (see above; the file's order is by name).
    // (key index << 32 | row): sorted as numbers, the pairs' order, with
    // qsort rather than <algorithm> (see detail/min_max.hpp).
    std::vector<std::uint64_t> order;
    order.reserve(f.tensor_count());
    for (std::size_t r = 0; r < f.tensor_count(); ++r) order.push_back(std::uint64_t{f.tensor(r)->key_index} << 32 | r);
    if (order.size() > 1) std::qsort(order.data(), order.size(), sizeof(std::uint64_t), detail::compare_u64);
    for (const std::uint64_t entry : order) {
      const auto r = static_cast<std::uint32_t>(entry);
      const FunctionTensorView row = *f.tensor(r);
      const std::string_view tname(row.tensor_name.data(), row.tensor_name.size());
      auto what = [&] { return detail::cat("method ", detail::quote_name(mname), " partition ", p, " tensor #", r); };
      if (Expected<void> ok = detail::check_import_name(who, what, tname); !ok) return ok;
      if (Expected<void> ok = detail::import_key(who, store, row.key_index, tname, options, part); !ok) return ok;
      mapped[row.key_index] = 1;
    }
  }
  // Keys no row names: refused, or into the method the caller named.
  const std::string& rest = options.unmapped_keys_method;
  bool rest_made = false;
  for (std::size_t k = 0; k < mapped.size(); ++k) {
    if (mapped[k]) continue;
    if (rest.empty()) {
      std::size_t unmapped = 0;
      for (char m : mapped) unmapped += m == 0;
      const std::string others = unmapped > 1 ? detail::cat(" (and ", unmapped - 1, " more)") : std::string();
      return Expected<void>(Error::InvalidArgument,
                            detail::cat(who, ": key #", k, " ", detail::quote_name(*store.get_key(k)), others,
                                        " is in no function's table, so no method or partition holds it; "
                                        "ImportOptions::unmapped_keys_method names a method to take such keys"));
    }
    if (!rest_made) {
      rest_made = true;
      auto what = [&] { return std::string("unmapped_keys_method"); };
      if (Expected<void> ok = detail::check_import_name(who, what, rest, true); !ok) return ok;
      bool fresh = false;
      method_index.find_or_add(rest, &fresh);
      if (!fresh || program.find_method(rest) != nullptr)
        return Expected<void>(Error::InvalidName,
                              detail::cat(who, ": unmapped_keys_method ", detail::quote_name(rest),
                                          " is already a method of ", fresh ? "the program" : "the store"));
      methods.push_back(Method{rest, {Partition{}}});
      seen.push_back({1});
    }
    const KeyView key = *store.get_key(k);
    const std::string_view name(key.data(), key.size());
    auto what = [&] { return detail::cat("key #", k); };
    if (Expected<void> ok = detail::check_import_name(who, what, name); !ok) return ok;
    if (Expected<void> ok = detail::import_key(who, store, k, name, options, methods.back().partitions[0]); !ok)
      return ok;
  }
  // Last: it reads every segment, and any refusal above needs none of them.
  if (Expected<void> ok = detail::check_content_hashes(who, store, options); !ok) return ok;
  program.methods.reserve(program.methods.size() + methods.size());
  for (Method& m : methods) program.methods.push_back(std::move(m));
  return {};
}

/// Whether `merged`, a store built from a program that imported `store`
/// (deduplicate()'s result.store), holds every key of `store` as the file
/// did: under its own name, with the same bytes and the same layout (or
/// none). That is what a program exported against the file finds its data
/// by: an ExecuTorch .pte asks its data map for each key by name and reads
/// no function maps, so a merged file can replace the per-method files
/// only where this holds.
///
/// It does not always. deduplicate() keeps a tensor name as its key only
/// where every method gives that name the same bytes and layout (README,
/// Store keys); a key whose bytes differ between the merged files (a mask,
/// a cache) is stored once per method, as `<method>/<key>`, which only a
/// reader of the function maps finds. A row of a hand-made function map
/// that named a key other than its tensor comes back as a key named after
/// the tensor.
///
/// Errors (every key is looked for; nothing changes):
/// - NotFound: keys the merged store does not have, all counted and the
///   first 8 named, each with the key of `merged` that now holds its bytes
///   and layout where one does ("'simple.b' (now 'decode/simple.b')"):
///   `<method>/<key>` for the `method` given (the name the file was
///   imported as), else any `<method>/<key>`, else a key over the file's
///   own bytes (a hand-made function map's tensor name);
/// - KeyConflict: the first key holding other bytes in `merged` (sizes,
///   and the first byte that differs);
/// - LayoutMismatch: the first key with another layout in `merged` (both
///   named);
/// - InvalidArgument: the store's bytes are not in memory.
/// Keys missing and a key held otherwise are both said, joined by "; and ",
/// the one met first in file order first, with its code.
/// Bytes are compared only where `merged` holds them elsewhere in memory,
/// which for a merge of two files is most of the second file's bytes.
template <int = 0>
Expected<void> check_keys_kept(const NamedDataMap& store, const NamedDataStore& merged, std::string_view method = {}) {
  constexpr const char* who = "check_keys_kept";
  if (Expected<void> ok = detail::check_import_source(who, store, ImportOptions{}); !ok) return ok;
  constexpr std::size_t kNamed = 8;
  const std::size_t count = *store.get_num_keys();
  std::size_t missing = 0, first_missing = 0;
  std::string names;
  // The first key held otherwise (other bytes, another layout): its index,
  // code and text. Keys after it are not compared; missing ones are still
  // counted.
  std::size_t first_other = count;
  Error other_code = Error::Ok;
  std::string other;
  for (std::size_t i = 0; i < count; ++i) {
    const KeyView key = *store.get_key(i);
    const std::string_view name(key.data(), key.size());
    const StoreKey* kept = merged.find(name);
    if (kept == nullptr) {
      if (missing++ == 0) first_missing = i;
      if (missing > kNamed) continue;  // counted, not named
    } else if (other_code != Error::Ok) {
      continue;
    }
    const KeyInfo info = *store.key_info(i);
    const ByteSpan bytes(store.source().view(info.offset, info.size), static_cast<std::size_t>(info.size));
    Result<TensorLayout> l = store.key_layout(i);
    const bool layout_read = l.ok() || l.error() == Error::NotFound;  // (the import refused any other)
    const std::optional<Layout> layout = l.ok() ? std::optional<Layout>(Layout::copy_of(*l)) : std::nullopt;
    if (kept == nullptr) {
      names += detail::cat(missing == 1 ? "" : ", ", detail::quote_name(name));
      if (!layout_read) continue;
      if (const StoreKey* now = detail::key_now_holding(merged, name, bytes, layout, method))
        names += detail::cat(" (now ", detail::quote_name(now->key), ")");
      continue;
    }
    const ByteSpan held = merged.buffers()[kept->buffer_index].bytes;
    if (!detail::same_bytes(held, bytes)) {
      other_code = Error::KeyConflict;
      other = detail::cat("key ", detail::quote_name(name), ": the merged store holds ",
                          detail::counted(held.size(), "byte that differs", "bytes that differ"), " from the file's ",
                          bytes.size(), detail::first_difference(held, bytes));
    } else if (!layout_read) {
      other_code = l.error();
      other = detail::cat("key ", detail::quote_name(name), ": ", describe_failure(l.failure()));
    } else if (kept->layout != layout) {
      other_code = Error::LayoutMismatch;
      other = detail::cat("key ", detail::quote_name(name), ": the merged store has ",
                          detail::describe_layout(kept->layout), ", the file ", detail::describe_layout(layout));
    }
    if (other_code != Error::Ok) first_other = i;
  }
  if (missing == 0 && other_code == Error::Ok) return {};
  const std::string not_found =
      missing == 0
          ? std::string()
          : detail::cat(missing, " of the file's ", detail::counted(count, "key"), missing == 1 ? " is" : " are",
                        " not in the merged store: ", names,
                        missing > kNamed ? detail::cat(" and ", missing - kNamed, " more") : "",
                        " (deduplicate() names each key after its tensor, and '<method>/<name>' where methods give "
                        "one name different bytes or layouts: a program that asks for ",
                        missing == 1 ? "it" : "them", " by name, as an ExecuTorch program does, does not find ",
                        missing == 1 ? "it" : "them", ")");
  if (other_code == Error::Ok) return Expected<void>(Error::NotFound, detail::cat(who, ": ", not_found));
  if (missing == 0) return Expected<void>(other_code, detail::cat(who, ": ", other));
  // Both: the code of the one met first in file order, which the message
  // gives first.
  return first_missing < first_other
             ? Expected<void>(Error::NotFound, detail::cat(who, ": ", not_found, "; and ", other))
             : Expected<void>(other_code, detail::cat(who, ": ", other, "; and ", not_found));
}

/// .ptd files mapped and imported as methods. Owns the mappings that the
/// imported tensors point into: keep it alive as long as the Program and
/// everything built from it.
class PtdFiles {
 public:
  /// Maps the file at `path` and adds it to `program`. A store with
  /// function maps (one deduplicate() wrote) comes back as its methods and
  /// partitions (add_ptd_program; `method` must then be empty). Any other
  /// is one method (add_ptd_method) named `method`, or if that is empty,
  /// after the file: its name without directories and ".ptd", then "#2",
  /// "#3", ... if that is taken. A file that cannot be mapped or read is an
  /// error with the reader's code, naming the path (escaped as names are:
  /// see detail/escape.hpp), its size, the failed check and its offset. On
  /// any error neither `program` nor this object changes.
  template <int = 0>
  Expected<void> add(Program& program, const std::string& path, std::string method = {},
                     const ImportOptions& options = {}) {
    // The path as messages give it: escaped as a name is (unquoted, so an
    // ordinary path reads as typed). A file's name can be someone else's
    // text as much as its keys are (a downloaded export): raw, the escape
    // sequence in "ev\x1b[31mil.ptd" reached the terminal through the
    // messages below, beside the method named after it, which was escaped.
    std::string shown;
    detail::append_escaped(shown, path);
    // `size`: the file's, once it is mapped (a Truncated check names where
    // the file would have to end, not how long it is).
    auto fail = [&](const Failure& f, std::string size = {}) {
      return Expected<void>(f.code, detail::cat(shown, size, ": ", describe_failure(f)));
    };
    if (path.empty()) return Expected<void>(Error::InvalidArgument, "PtdFiles::add: the path is empty");
    if (Expected<void> ok = detail::refuse_nul_in_path("read", path); !ok) return ok;
    Result<MmapSource> src = MmapSource::open(path.c_str());
    if (!src) return fail(src.failure());
    MmapSource file = std::move(src).value();
    Result<NamedDataMap> map = NamedDataMap::open(file, options.open);
    // A file of another kind fails the identifier check first: said in so
    // many words (a user trial's --ptd /bin/ls read as a broken .ptd).
    if (!map)
      return fail(map.failure(), detail::cat(" (", detail::counted(file.size(), "byte"),
                                             map.error() == Error::MalformedHeader &&
                                                     map.failure().at == format::kFileIdentifierOffset
                                                 ? ", not a .ptd file"
                                                 : "",
                                             ")"));
    // The method name would flatten it into one partition, which
    // add_ptd_method refuses; through this call the fix is to pass none.
    if (map->function_count() != 0 && !method.empty())
      return Expected<void>(Error::InvalidArgument,
                            detail::cat(shown, ": the file has ", map->function_count(),
                                        " function maps (methods and partitions, as deduplicate() writes them); "
                                        "PtdFiles::add restores them when given no method name, and does not merge "
                                        "them into method ", detail::quote_name(method)));
    // Reserved and copied first: once the program holds tensors into this
    // mapping, keeping the mapping must not fail.
    files_.reserve(files_.size() + 1);
    std::string kept_path = path, kept_method;
    Expected<void> added;
    if (map->function_count() != 0 && method.empty()) {
      added = add_ptd_program(program, *map, options);
    } else {
      if (method.empty()) {
        const std::size_t slash = path.rfind('/');
        std::string stem = path.substr(slash == std::string::npos ? 0 : slash + 1);
        if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".ptd") == 0) stem.resize(stem.size() - 4);
        method = detail::free_method_name(program, stem);
      }
      kept_method = method;
      added = add_ptd_method(program, *map, std::move(method), options);
    }
    if (!added) return Expected<void>(added.error(), detail::cat(shown, ": ", added.message()));
    files_.push_back(File{std::move(file), std::move(kept_path), options.open,
                          std::move(kept_method)});  // (the map is not used again)
    return {};
  }
  /// Files mapped so far.
  std::size_t size() const noexcept { return files_.size(); }

  /// check_keys_kept for every file added, in order: whether `merged` (the
  /// store deduplicate() built from the program) holds each file's keys as
  /// the file did, so that the merged file can stand in for each of them
  /// where a program asks for its data by key (an ExecuTorch .pte). Every
  /// file is checked; the error is the first file's code, its message each
  /// failing file's path and problem, joined by "; ".
  template <int = 0>
  Expected<void> check_keys_kept(const NamedDataStore& merged) const {
    Error code = Error::Ok;
    std::string message;
    for (const File& f : files_) {
      Result<NamedDataMap> map = NamedDataMap::open(f.source, f.open);
      Expected<void> kept = map ? wdedup::check_keys_kept(*map, merged, f.method)
                                : Expected<void>(map.error(), describe_failure(map.failure()));
      if (kept) continue;
      if (code == Error::Ok) code = kept.error();
      if (!message.empty()) message += "; ";
      detail::append_escaped(message, f.path);  // (as add() names it)
      message += ": " + kept.message();
    }
    if (code == Error::Ok) return {};
    return Expected<void>(code, std::move(message));
  }

 private:
  struct File {
    MmapSource source;
    std::string path;
    OpenOptions open;  ///< as the file was opened to be added (to open it again)
    std::string method;  ///< the method a file without function maps became
  };
  // The tensors point into each source's mapping, which stays where it is
  // when a source is moved (as the vector grows). (Not unique_ptr: <memory>
  // cost every includer of the umbrella header ~0.1 s.)
  std::vector<File> files_;
};

}  // namespace wdedup

#endif  // WDEDUP_IMPORT_HPP
