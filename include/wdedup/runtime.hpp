// wdedup/runtime.hpp — the runtime half in one include: the NamedDataMap
// reader, its data sources, MappedFile and PreadFile (a file and its map
// in one movable value) and the error/span/key-view/layout vocabulary.
// With WDEDUP_NO_POSIX defined (a target without mmap or pread), the
// sources that read files, MappedFile and PreadFile are left out, and no
// POSIX header is included.
// Light on purpose (no <string>, <string_view>, <vector>, xxhash or Boost)
// so that embedding it costs almost nothing to compile; see
// wdedup/wdedup.hpp for the build-time half.
// Content-hash verification lives apart, in wdedup/runtime/verify.hpp.
#ifndef WDEDUP_RUNTIME_HPP
#define WDEDUP_RUNTIME_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/error.hpp"
#include "wdedup/runtime/key_view.hpp"
#include "wdedup/runtime/named_data_map.hpp"
#ifndef WDEDUP_NO_POSIX  // (MappedFile maps files: see data_source.hpp)
#include "wdedup/runtime/mapped_file.hpp"
#endif
#include "wdedup/runtime/span.hpp"
#include "wdedup/runtime/tensor_layout.hpp"

#endif  // WDEDUP_RUNTIME_HPP
