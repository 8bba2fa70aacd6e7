// wdedup/runtime/mapped_file.hpp — a .ptd file and its map in one movable
// object: MappedFile (mapped), PreadFile (read with pread, metadata in
// memory you lend). Runtime half: no heap, no exceptions.
//
// Why: a NamedDataMap keeps the address of its DataSource (ExecuTorch's
// FlatTensorDataMap keeps its DataLoader's the same way), so the source must
// stay where it was when the map was opened. A function that opens a file
// and returns the two, or a delegate object that holds them and is moved,
// cannot keep that promise with the two types alone. MappedFile holds both
// and, whenever it is moved, points its map at its own source. The mapping
// itself never moves, so the map's metadata and every view it gave out stay
// valid across moves. PreadFile is the same for a FileSource, whose map
// keeps its metadata in memory the caller lends, which does not move either
// (two user trials asked for it: a pread-only delegate held the three in an
// object that could not move).
#ifndef WDEDUP_RUNTIME_MAPPED_FILE_HPP
#define WDEDUP_RUNTIME_MAPPED_FILE_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#if defined(WDEDUP_NO_POSIX)
#error "wdedup/runtime/mapped_file.hpp (MappedFile, PreadFile) needs POSIX, and WDEDUP_NO_POSIX is defined"
#else

#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/error.hpp"
#include "wdedup/runtime/file_sources.hpp"
#include "wdedup/runtime/named_data_map.hpp"

namespace wdedup {

namespace detail {

/// A source and the NamedDataMap opened over it, as one move-only value:
/// MappedFile (an MmapSource) and PreadFile (a FileSource with lent
/// metadata memory). A map keeps its source's address; whenever this
/// object moves, it points its map at its own source. What else the map
/// holds points into the mapping or the lent memory, which do not move.
template <class Source>
class SourceWithMap {
 public:
  SourceWithMap(SourceWithMap&& o) noexcept : SourceWithMap(static_cast<Source&&>(o.source_), o.map_) {}
  SourceWithMap& operator=(SourceWithMap&& o) noexcept {
    if (this != &o) {
      source_ = static_cast<Source&&>(o.source_);  // lets this one's file go first
      map_ = o.map_;
      map_.rebind_source(source_);
    }
    return *this;
  }
  SourceWithMap(const SourceWithMap&) = delete;
  SourceWithMap& operator=(const SourceWithMap&) = delete;

  const NamedDataMap& map() const noexcept { return map_; }
  /// map(), as a pointer: `file->get_data(key)`.
  const NamedDataMap* operator->() const noexcept { return &map_; }
  const Source& source() const noexcept { return source_; }

  /// NamedDataMap::build_index, for a file without wdedup's index: the
  /// index (in the memory lent, which must outlive this object and those it
  /// is moved to) moves with this object.
  Status build_index(Span<std::uint8_t> memory) noexcept { return map_.build_index(memory); }
  Status build_index(Span<std::uint8_t> memory, std::uint64_t seed) noexcept {
    return map_.build_index(memory, seed);
  }

 protected:
  // (`map` was opened over `source`, or is the map of an object whose
  // source this is, before the move into source_.)
  SourceWithMap(Source&& source, const NamedDataMap& map) noexcept
      : source_(static_cast<Source&&>(source)), map_(map) {
    map_.rebind_source(source_);
  }
  ~SourceWithMap() = default;

 private:
  Source source_;
  NamedDataMap map_;
};

}  // namespace detail

/// An MmapSource and the NamedDataMap opened over it, as one move-only
/// value: return it from a function, keep it in a growing array, move the
/// object that holds it. Views from get_data() point into the mapping and
/// live as long as it does, wherever the MappedFile has moved to; they die
/// with the last MappedFile that held the mapping (as they die with the
/// MmapSource). A moved-from MappedFile may only be destroyed or assigned
/// to. The map is lent out const only (build_index() is here), so that
/// nothing replaces it with another file's; a copy of it (NamedDataMap is
/// a copyable handle) keeps the source of the MappedFile it was copied
/// from, and after that object moves, its check_source() fails while a
/// live source lies in that place (none can be checked after the place is
/// freed: a copy must not outlive it).
class MappedFile : public detail::SourceWithMap<MmapSource> {
 public:
  /// Maps `path`, or the window of it (MmapSource::open's failures), and
  /// opens it (NamedDataMap::open's, with `options`). Allocates nothing.
  static Result<MappedFile> open(const char* path, const OpenOptions& options = {},
                                 FileWindow window = {}) noexcept {
    return over(MmapSource::open(path, window), options);
  }
  /// The same for the file open as `fd`, which stays the caller's
  /// (MmapSource::from_fd).
  static Result<MappedFile> from_fd(int fd, const OpenOptions& options = {}, FileWindow window = {}) noexcept {
    return over(MmapSource::from_fd(fd, window), options);
  }

 private:
  static Result<MappedFile> over(Result<MmapSource>&& source, const OpenOptions& options) noexcept {
    if (!source) return source.failure();
    Result<NamedDataMap> map = NamedDataMap::open(*source, options);
    if (!map) return map.failure();
    return MappedFile(static_cast<MmapSource&&>(*source), *map);
  }

  MappedFile(MmapSource&& source, const NamedDataMap& map) noexcept
      : SourceWithMap(static_cast<MmapSource&&>(source), map) {}
};

/// A FileSource (pread, no mapping) and the NamedDataMap opened over it
/// with metadata memory you lend, as one move-only value: what MappedFile
/// is for a runtime that cannot or will not map files. The metadata memory
/// (at least metadata_size(path) bytes, 8-byte aligned) is yours: it must
/// outlive this object and every object it is moved to, and it does not
/// move with them, so keys, layouts and FunctionViews taken from the map
/// stay valid across moves. get_data() returns copies (see FileSource);
/// load_data_into() reads into your buffer. A moved-from PreadFile may only
/// be destroyed or assigned to, and its map's reads fail (check_source()).
/// Allocates nothing but get_data()'s copies.
class PreadFile : public detail::SourceWithMap<FileSource> {
 public:
  /// Opens `path`, or the window of it (FileSource::open's failures), and
  /// its map over `metadata_memory` (NamedDataMap::open's, with `options`):
  /// too little memory is BufferTooSmall, `at` the bytes it needs.
  static Result<PreadFile> open(const char* path, Span<std::uint8_t> metadata_memory,
                                const OpenOptions& options = {}, FileWindow window = {}) noexcept {
    return over(FileSource::open(path, window), metadata_memory, options);
  }
  /// The same for the file open as `fd`, which stays the caller's
  /// (FileSource::from_fd reads through a duplicate).
  static Result<PreadFile> from_fd(int fd, Span<std::uint8_t> metadata_memory, const OpenOptions& options = {},
                                   FileWindow window = {}) noexcept {
    return over(FileSource::from_fd(fd, window), metadata_memory, options);
  }
  /// The metadata memory open() needs for the file at `path` (or the
  /// window of it) as it is now: NamedDataMap::metadata_size over a
  /// FileSource of it.
  static Result<std::uint64_t> metadata_size(const char* path, FileWindow window = {}) noexcept {
    return metadata_size_of(FileSource::open(path, window));
  }
  /// The same for from_fd().
  static Result<std::uint64_t> metadata_size_from_fd(int fd, FileWindow window = {}) noexcept {
    return metadata_size_of(FileSource::from_fd(fd, window));
  }

 private:
  static Result<PreadFile> over(Result<FileSource>&& source, Span<std::uint8_t> metadata_memory,
                                const OpenOptions& options) noexcept {
    if (!source) return source.failure();
    Result<NamedDataMap> map = NamedDataMap::open(*source, metadata_memory, options);
    if (!map) return map.failure();
    return PreadFile(static_cast<FileSource&&>(*source), *map);
  }
  static Result<std::uint64_t> metadata_size_of(Result<FileSource>&& source) noexcept {
    if (!source) return source.failure();
    return NamedDataMap::metadata_size(*source);
  }

  PreadFile(FileSource&& source, const NamedDataMap& map) noexcept
      : SourceWithMap(static_cast<FileSource&&>(source), map) {}
};

}  // namespace wdedup

#endif  // WDEDUP_NO_POSIX
#endif  // WDEDUP_RUNTIME_MAPPED_FILE_HPP
