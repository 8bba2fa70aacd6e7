// wdedup/import.hpp — a .ptd store read back as one method of a Program.
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

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wdedup/expected.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/program.hpp"
#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/named_data_map.hpp"

namespace wdedup {

struct ImportOptions {
  /// The alignment given to a key whose file does not record one. Files
  /// ExecuTorch wrote do not (only their segment offsets are aligned, 128
  /// by default), wdedup's files do. 1 asks for nothing: the writer still
  /// starts every segment at a multiple of 128.
  std::int64_t unrecorded_alignment = 1;
};

/// Adds method `method` to `program`: one partition holding every key of
/// `store` in file order, each a tensor named by its key, with the key's
/// bytes (a view into the store), its alignment and its layout (if any).
/// Keys that share a segment become tensors over the same bytes, which
/// deduplicate() settles without reading them twice.
///
/// Errors (the program is then unchanged):
/// - InvalidName: `method` is empty or already a method of `program`;
/// - InvalidAlignment: options.unrecorded_alignment is not in 1..2^32;
/// - InvalidArgument: the store's bytes are not in memory (opened over a
///   FileSource): a tensor could not point into them;
/// - LayoutMismatch: a key's layout describes fewer bytes than its segment
///   holds (ExecuTorch's reader accepts that; a tensor's bytes are its
///   layout's, so deduplicate() would refuse it);
/// - what the reader returns for a key it cannot give (its code).
template <int = 0>
Expected<void> add_ptd_method(Program& program, const NamedDataMap& store, std::string method,
                              const ImportOptions& options = {}) {
  if (method.empty()) return Expected<void>(Error::InvalidName, "add_ptd_method: the method name is empty");
  if (program.find_method(method) != nullptr)
    return Expected<void>(Error::InvalidName,
                          detail::cat("add_ptd_method: method ", detail::quote_name(method), " is already in the program"));
  const std::int64_t fallback = options.unrecorded_alignment;
  if (fallback <= 0 || static_cast<std::uint64_t>(fallback) > kMaxAlignment)
    return Expected<void>(Error::InvalidAlignment, detail::cat("add_ptd_method: unrecorded_alignment ", fallback,
                                                               " is not in 1..", kMaxAlignment));
  const std::size_t count = *store.get_num_keys();
  Method m{std::move(method), {}};
  Partition& part = m.add_partition();
  part.tensors.reserve(count);
  auto fail = [&](Error code, KeyView key, const auto&... what) {
    return Expected<void>(code, detail::cat("add_ptd_method: method ", detail::quote_name(m.name), " key ",
                                            detail::quote_name(key), ": ", what...));
  };
  for (std::size_t i = 0; i < count; ++i) {
    const KeyView key = *store.get_key(i);
    Result<DataBuffer> data = store.key_data(i);
    if (!data)
      return fail(data.error(), key, "the reader says ", data.failure().what, " (", error_name(data.error()), " at ",
                  data.failure().at, ")");
    if (data->owns_memory())
      return fail(Error::InvalidArgument, key,
                  "the store is not in memory (its bytes came as a copy); open it over an MmapSource or a "
                  "BufferSource so that tensors can point into it");
    const KeyInfo info = *store.key_info(i);
    std::optional<Layout> layout;
    if (Result<TensorLayout> l = store.key_layout(i); l.ok()) {
      if (l->nbytes() != data->size())
        return fail(Error::LayoutMismatch, key, "its layout describes ", l->nbytes(), " bytes, its segment holds ",
                    data->size());
      layout.emplace(Layout{l->scalar_type, std::vector<std::int32_t>(l->sizes.begin(), l->sizes.end()),
                            std::vector<std::uint8_t>(l->dim_order.begin(), l->dim_order.end())});
    }
    const std::int64_t alignment = store.has_extension() ? static_cast<std::int64_t>(info.alignment) : fallback;
    part.add(std::string(key.data(), key.size()), data->bytes(), alignment, std::move(layout));
  }
  program.methods.push_back(std::move(m));
  return {};
}

/// .ptd files mapped and imported as methods. Owns the mappings that the
/// imported tensors point into: keep it alive as long as the Program and
/// everything built from it.
class PtdFiles {
 public:
  /// Maps the file at `path` and adds it to `program` (add_ptd_method) as
  /// method `method`; an empty `method` names it after the file: its name
  /// without directories and ".ptd", then "#2", "#3", ... if that is taken.
  /// A file that cannot be mapped or read is an error with the reader's
  /// code, naming the path, the failed check and its offset. On any error
  /// neither `program` nor this object changes.
  template <int = 0>
  Expected<void> add(Program& program, const std::string& path, std::string method = {},
                     const ImportOptions& options = {}) {
    auto fail = [&](const Failure& f) {
      return Expected<void>(f.code, detail::cat(path, ": ", f.what, " (", error_name(f.code), " at ", f.at, ")"));
    };
    Result<MmapSource> src = MmapSource::open(path.c_str());
    if (!src) return fail(src.failure());
    auto file = std::make_unique<MmapSource>(std::move(src).value());
    Result<NamedDataMap> map = NamedDataMap::open(*file);
    if (!map) return fail(map.failure());
    if (method.empty()) {
      const std::size_t slash = path.rfind('/');
      std::string stem = path.substr(slash == std::string::npos ? 0 : slash + 1);
      if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".ptd") == 0) stem.resize(stem.size() - 4);
      method = stem;
      for (unsigned k = 2; program.find_method(method) != nullptr; ++k) method = detail::cat(stem, "#", k);
    }
    if (Expected<void> added = add_ptd_method(program, *map, std::move(method), options); !added)
      return Expected<void>(added.error(), detail::cat(path, ": ", added.message()));
    files_.push_back(std::move(file));
    return {};
  }
  /// Files mapped so far.
  std::size_t size() const noexcept { return files_.size(); }

 private:
  // unique_ptr: the map and tensors point at each source's mapping, which
  // must not move when the vector grows.
  std::vector<std::unique_ptr<MmapSource>> files_;
};

}  // namespace wdedup

#endif  // WDEDUP_IMPORT_HPP
