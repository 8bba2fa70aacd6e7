// tools/read_back.hpp — the demo's read-back: a store it wrote, opened with
// the runtime half, must give every function's every tensor exactly the
// bytes the program gave it. A header of its own so that the tests can
// show it failing (tests/llama_workload.cpp corrupts a written file): in
// the demo it only ever succeeds.
#ifndef WDEDUP_TOOLS_READ_BACK_HPP
#define WDEDUP_TOOLS_READ_BACK_HPP

#include <cstddef>
#include <cstring>
#include <string>

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
  for (const wdedup::FunctionMap& f : r.functions.functions) {
    const std::string where = f.method + "#" + std::to_string(f.partition_index);
    auto fv = map->find_function(f.method, f.partition_index);
    if (!fv || fv->function_name() != f.function_name || fv->blob_key() != f.blob_key) {
      out.problem = "function " + where + " missing or different in the file";
      return out;
    }
    const wdedup::Partition& part = program.find_method(f.method)->partitions[f.partition_index];
    for (const wdedup::Tensor& t : part.tensors) {
      auto key = fv->key_of(t.name);
      auto data = key ? map->get_data(*key) : wdedup::Result<wdedup::DataBuffer>(wdedup::Error::NotFound);
      if (!data || data->size() != t.bytes.size() ||
          (t.bytes.size() != 0 && std::memcmp(data->data(), t.bytes.data(), t.bytes.size()) != 0)) {
        out.problem = where + " tensor '" + t.name + "' does not read back";
        return out;
      }
      ++out.tensors;
    }
  }
  out.keys = *map->get_num_keys();
  out.functions = map->function_count();
  return out;
}

}  // namespace wdedup_demo

#endif  // WDEDUP_TOOLS_READ_BACK_HPP
