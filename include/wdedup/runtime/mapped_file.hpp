// wdedup/runtime/mapped_file.hpp — a .ptd file mapped and opened in one
// movable object. Runtime half: no heap, no exceptions.
//
// Why: a NamedDataMap keeps the address of its DataSource (ExecuTorch's
// FlatTensorDataMap keeps its DataLoader's the same way), so the source must
// stay where it was when the map was opened. A function that opens a file
// and returns the two, or a delegate object that holds them and is moved,
// cannot keep that promise with the two types alone. MappedFile holds both
// and, whenever it is moved, points its map at its own source. The mapping
// itself never moves, so the map's metadata and every view it gave out stay
// valid across moves.
#ifndef WDEDUP_RUNTIME_MAPPED_FILE_HPP
#define WDEDUP_RUNTIME_MAPPED_FILE_HPP

#if defined(WDEDUP_NO_POSIX)
#error "wdedup/runtime/mapped_file.hpp (MappedFile maps files) needs POSIX, and WDEDUP_NO_POSIX is defined"
#else

#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/error.hpp"
#include "wdedup/runtime/file_sources.hpp"
#include "wdedup/runtime/named_data_map.hpp"

namespace wdedup {

/// An MmapSource and the NamedDataMap opened over it, as one move-only
/// value: return it from a function, keep it in a growing array, move the
/// object that holds it. Views from get_data() point into the mapping and
/// live as long as it does, wherever the MappedFile has moved to; they die
/// with the last MappedFile that held the mapping (as they die with the
/// MmapSource). A moved-from MappedFile may only be destroyed or assigned
/// to. The map is lent out const only (build_index() is here), so that
/// nothing replaces it with another file's; a copy of it (NamedDataMap is
/// a copyable handle) keeps the source of the MappedFile it was copied
/// from, and after that object moves, its check_source() fails.
class MappedFile {
 public:
  /// Maps `path` (MmapSource::open's failures) and opens it
  /// (NamedDataMap::open's, with `options`). Allocates nothing.
  static Result<MappedFile> open(const char* path, const OpenOptions& options = {}) noexcept {
    Result<MmapSource> source = MmapSource::open(path);
    if (!source) return source.failure();
    Result<NamedDataMap> map = NamedDataMap::open(*source, options);
    if (!map) return map.failure();
    return MappedFile(static_cast<MmapSource&&>(*source), *map);
  }

  MappedFile(MappedFile&& o) noexcept : MappedFile(static_cast<MmapSource&&>(o.source_), o.map_) {}
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      source_ = static_cast<MmapSource&&>(o.source_);  // unmaps this one's file first
      map_ = o.map_;
      map_.rebind_source(source_);
    }
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const NamedDataMap& map() const noexcept { return map_; }
  /// map(), as a pointer: `file->get_data(key)`.
  const NamedDataMap* operator->() const noexcept { return &map_; }
  const MmapSource& source() const noexcept { return source_; }

  /// NamedDataMap::build_index, for a file without wdedup's index: the
  /// index (in the memory lent, which must outlive this object and those it
  /// is moved to) moves with this object.
  Status build_index(Span<std::uint8_t> memory) noexcept { return map_.build_index(memory); }
  Status build_index(Span<std::uint8_t> memory, std::uint64_t seed) noexcept {
    return map_.build_index(memory, seed);
  }

 private:
  // (`map` was opened over `source`, or is the map of a MappedFile whose
  // source this is, before the move into source_.)
  MappedFile(MmapSource&& source, const NamedDataMap& map) noexcept
      : source_(static_cast<MmapSource&&>(source)), map_(map) {
    map_.rebind_source(source_);
  }

  MmapSource source_;
  NamedDataMap map_;
};

}  // namespace wdedup

#endif  // WDEDUP_NO_POSIX
#endif  // WDEDUP_RUNTIME_MAPPED_FILE_HPP
