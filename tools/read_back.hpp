// tools/read_back.hpp — the demo's read-back: a store it wrote, opened with the
// runtime half, must give every partition of the program a function (the one
// the deduplication result made for it) and every tensor of it exactly the
// bytes the program gave it, the layout it gave (none if it gave none), at an
// offset of its requested alignment and, mapped, at an address of it. The walk
// is over the program, not over the result: a function the result lost, and so
// the file too, is missing, not unnoticed. A header of its own so that the
// tests can show it failing (tests/llama_workload.cpp corrupts a written file,
// drops a function, changes a layout): in the demo it only ever succeeds.
#ifndef WDEDUP_TOOLS_READ_BACK_HPP
#define WDEDUP_TOOLS_READ_BACK_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <unistd.h>

#include <wdedup/runtime.hpp>
#include <wdedup/wdedup.hpp>

namespace wdedup_demo {

struct ReadBack {
  /// Empty when every tensor read back; else what did not, and where.
  std::string problem;
  std::size_t keys = 0, functions = 0, tensors = 0;
  bool ok() const { return problem.empty(); }
};

inline ReadBack read_back(const std::string& path, const wdedup::Program& program, const wdedup::DedupResult& r) {
  ReadBack out;
  auto source = wdedup::MmapSource::open(path.c_str());
  if (!source) {
    out.problem = "cannot map " + path + ": " + wdedup::describe_failure(source.failure());
    return out;
  }
  auto map = wdedup::NamedDataMap::open(*source);
  if (!map) {
    out.problem = "cannot open " + path + ": " + wdedup::describe_failure(map.failure());
    return out;
  }
  // A mapping is page-aligned: a key at an offset of its alignment is at an
  // address of it for every power of two up to the page size.
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t page = page_size > 0 ? static_cast<std::uint64_t>(page_size) : 4096;
  std::size_t partitions = 0;
  for (const wdedup::Method& m : program.methods)
    for (std::size_t p = 0; p < m.partitions.size(); ++p, ++partitions) {
      const auto index = static_cast<std::uint32_t>(p);
      // Names as the library's messages give them (quoted, escaped): a
      // program imported from someone's files may hold any bytes.
      const std::string where = wdedup::detail::quote_name(m.name) + "#" + std::to_string(p);
      const wdedup::FunctionMap* f = r.functions.find(m.name, index);
      auto fv = map->find_function(m.name, index);
      if (!fv || (f && (fv->function_name() != f->function_name || fv->blob_key() != f->blob_key))) {
        out.problem = "function " + where + " missing or different in the file";
        return out;
      }
      if (!f) {
        out.problem = "function " + where + " is in the file but not in the deduplication result";
        return out;
      }
      const wdedup::Partition& part = m.partitions[p];
      if (fv->tensor_count() != part.tensors.size()) {
        out.problem = wdedup::detail::cat("function ", where, " has ",
                                          wdedup::detail::counted(fv->tensor_count(), "tensor"), " in the file, ",
                                          part.tensors.size(), " in the program");
        return out;
      }
      for (const wdedup::Tensor& t : part.tensors) {
        const std::string tensor = where + " tensor " + wdedup::detail::quote_name(t.name);
        // One lookup by name; the data and layout then by its index.
        auto key = fv->key_of(t.name);
        auto info = key ? map->find(*key) : wdedup::Result<wdedup::KeyInfo>(wdedup::Error::NotFound);
        auto data =
            info ? map->key_data(info->key_index) : wdedup::Result<wdedup::DataBuffer>(wdedup::Error::NotFound);
        if (!data || data->size() != t.bytes.size() ||
            (t.bytes.size() != 0 && std::memcmp(data->data(), t.bytes.data(), t.bytes.size()) != 0)) {
          out.problem = tensor + " does not read back";
          return out;
        }
        // Its layout, or none where it gave none (the runtime's NotFound):
        // deduplicate() keeps a tensor without a layout off the keys of
        // those with one, so a layout there was not the program's.
        {
          auto layout = map->key_layout(info->key_index);
          if (t.layout ? !layout || wdedup::Layout::copy_of(*layout) != *t.layout
                       : layout || layout.error() != wdedup::Error::NotFound) {
            out.problem = tensor + (t.layout ? " does not read back its layout" : " reads back a layout it was not given");
            return out;
          }
        }
        // Any positive alignment (not only powers of two) is asked of the
        // file offset; of the mapped address, its power-of-two part up to
        // the page size.
        const auto align = static_cast<std::uint64_t>(t.alignment > 0 ? t.alignment : 1);
        const std::uint64_t pow2 = align & (~align + 1);
        const std::uint64_t address_align = pow2 < page ? pow2 : page;
        if (info->offset % align != 0) {
          out.problem = tensor + " is not at an offset of its alignment " + std::to_string(align);
          return out;
        }
        if (reinterpret_cast<std::uintptr_t>(data->data()) % address_align != 0) {
          out.problem = tensor + " is not mapped at an address of its alignment " + std::to_string(address_align);
          return out;
        }
        ++out.tensors;
      }
    }
  // Every partition has its function: any more, in the file or in the
  // result, belong to no partition of the program.
  if (map->function_count() != partitions || r.functions.functions.size() != partitions) {
    const bool file = map->function_count() != partitions;
    out.problem = wdedup::detail::cat(file ? "the file has " : "the deduplication result has ",
                                      wdedup::detail::counted(file ? map->function_count() : r.functions.functions.size(),
                                                              "function"),
                                      ", the program ", wdedup::detail::counted(partitions, "partition"));
    return out;
  }
  auto keys = map->get_num_keys();
  if (!keys) {
    out.problem = "cannot count the keys of " + path + ": " + wdedup::describe_failure(keys.failure());
    return out;
  }
  out.keys = *keys;
  out.functions = map->function_count();
  return out;
}

}  // namespace wdedup_demo

#endif  // WDEDUP_TOOLS_READ_BACK_HPP
