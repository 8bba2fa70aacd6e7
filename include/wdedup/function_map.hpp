// wdedup/function_map.hpp — what a backend needs besides the bytes: for
// every (method, partition) the blob it is compiled into, its function name
// inside that blob, and its tensor table (tensor name -> store key).
// Build-time half; the reader's twin is NamedDataMap::find_function.
#ifndef WDEDUP_FUNCTION_MAP_HPP
#define WDEDUP_FUNCTION_MAP_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wdedup/table.hpp"

namespace wdedup {

/// One row of a function's tensor table.
struct FunctionTensor {
  std::string tensor_name;  ///< the tensor's own name inside the partition
  std::string key;          ///< the store key that holds its bytes
};

/// One (method, partition) function.
struct FunctionMap {
  std::string method;
  std::uint32_t partition_index = 0;
  std::string blob_key;       ///< e.g. "combined_all", "combined_partition_0"
  std::string function_name;  ///< e.g. "decode__0" (OneBlob), "decode" (Positional)
  Table<FunctionTensor> tensors;  ///< in the partition's tensor order

  /// The store key of a tensor of this function, or nullptr.
  const std::string* key_of(std::string_view tensor_name) const {
    for (const FunctionTensor& t : tensors)
      if (t.tensor_name == tensor_name) return &t.key;
    return nullptr;
  }
};

/// All functions, in program order (methods in insertion order, partitions
/// by index), with the per-method view ExecuTorch's backends keep.
struct FunctionMaps {
  std::vector<FunctionMap> functions;

  /// The function compiled for (method, partition), or nullptr.
  const FunctionMap* find(std::string_view method, std::uint32_t partition) const {
    for (const FunctionMap& f : functions)
      if (f.method == method && f.partition_index == partition) return &f;
    return nullptr;
  }
  /// The first function with this name (names are unique within a blob;
  /// under Positional a method's name repeats across partition blobs).
  const FunctionMap* find_by_name(std::string_view function_name) const {
    for (const FunctionMap& f : functions)
      if (f.function_name == function_name) return &f;
    return nullptr;
  }
  const FunctionMap* find_by_name(std::string_view blob_key, std::string_view function_name) const {
    for (const FunctionMap& f : functions)
      if (f.blob_key == blob_key && f.function_name == function_name) return &f;
    return nullptr;
  }
  /// Every partition of a method, in index order (a method with several
  /// partitions keeps them all: none overwrites another).
  template <int = 0>
  std::vector<const FunctionMap*> of_method(std::string_view method) const {
    std::vector<const FunctionMap*> out;
    for (const FunctionMap& f : functions)
      if (f.method == method) out.push_back(&f);
    return out;
  }
};

}  // namespace wdedup

#endif  // WDEDUP_FUNCTION_MAP_HPP
