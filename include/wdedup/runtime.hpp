// wdedup/runtime.hpp — the runtime half in one include: the NamedDataMap
// reader, its data sources, MappedFile (a mapped file and its map in one
// movable value) and the error/span/key-view/layout vocabulary.
// Light on purpose (no <string>, <string_view>, <vector>, xxhash or Boost)
// so that embedding it costs almost nothing to compile; see
// wdedup/wdedup.hpp for the build-time half.
// Content-hash verification lives apart, in wdedup/runtime/verify.hpp.
#ifndef WDEDUP_RUNTIME_HPP
#define WDEDUP_RUNTIME_HPP

#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/error.hpp"
#include "wdedup/runtime/key_view.hpp"
#include "wdedup/runtime/mapped_file.hpp"
#include "wdedup/runtime/named_data_map.hpp"
#include "wdedup/runtime/span.hpp"
#include "wdedup/runtime/tensor_layout.hpp"

#endif  // WDEDUP_RUNTIME_HPP
