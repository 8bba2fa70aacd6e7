// wdedup/runtime/data_source.hpp — where a NamedDataMap gets its bytes: a
// small interface a custom runtime can implement (flash, a ROM section, an
// archive member), plus three ready sources: caller memory here, a
// read-only mmap and pread on a file descriptor in file_sources.hpp
// (POSIX), which this header includes unless WDEDUP_NO_POSIX is defined.
// Runtime half: no heap.
#ifndef WDEDUP_RUNTIME_DATA_SOURCE_HPP
#define WDEDUP_RUNTIME_DATA_SOURCE_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wdedup/runtime/error.hpp"

namespace wdedup {

/// The bytes of one .ptd file.
///
/// Contract for implementers:
///  - size() is constant for the source's lifetime.
///  - view(offset, size) returns a pointer to bytes [offset, offset + size)
///    if the source is memory-backed, else nullptr. Callers bounds-check
///    first; a source returns either a pointer for every in-bounds range or
///    for none, and the same pointer for a range every time: its bytes stay
///    where they are for its lifetime (NamedDataMap::open(src) asks for the
///    whole file and lends views into it from then on; check_source() asks
///    again and compares; a map opened with lent metadata memory asks for
///    each get_data). Memory-backed sources should start 8-byte aligned
///    (NamedDataMap::open checks).
///  - read(offset, dst, size) copies the whole range into dst and returns
///    wdedup::ok_status() (or Status()), or a Status made from an Error
///    naming what failed and where: never success after fewer bytes (a
///    pread that returns short must be retried until done, or fail; the
///    reader cannot tell a short read from the bytes it asked for). Its
///    Error reaches the caller as it is, so use IoError (or your own
///    meaning of another code), not NotFound, which reads as "no such
///    key". E.g.
///    `Status(Error::IoError, "pread failed (at = offset)", offset)`. It must be safe to
///    call from several threads at once (NamedDataMap's const queries call
///    it concurrently) and must not allocate.
///  - instance() is optional: a number no other source of this process
///    has had, the same for the source's lifetime, or 0 (the default: no
///    number). A map records it at open, and check_source() tells a source
///    that took the place of its own by it. MmapSource and FileSource
///    number each file they open; a move hands the number on.
///  - A NamedDataMap keeps the source's address: the source must stay where
///    it is, unmoved, while a map refers to it (keep it in a variable, a
///    std::unique_ptr, or a container that never relocates its elements).
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual std::uint64_t size() const noexcept = 0;
  virtual const std::uint8_t* view(std::uint64_t offset, std::uint64_t size) const noexcept = 0;
  virtual Status read(std::uint64_t offset, void* dst, std::uint64_t size) const noexcept = 0;
  virtual std::uint64_t instance() const noexcept { return 0; }

 protected:
  DataSource() = default;
  DataSource(const DataSource&) = default;
  DataSource& operator=(const DataSource&) = default;
};

namespace detail {
/// [offset, offset + size) fits in a source of `total` bytes, without overflow.
constexpr bool range_ok(std::uint64_t offset, std::uint64_t size, std::uint64_t total) noexcept {
  return offset <= total && size <= total - offset;
}

/// view() and read() over bytes already in memory: shared by BufferSource
/// and MmapSource, which differ only in who owns the memory.
class MemorySource : public DataSource {
 public:
  std::uint64_t size() const noexcept override { return size_; }
  const std::uint8_t* view(std::uint64_t offset, std::uint64_t size) const noexcept override {
    if (data_ == nullptr || !range_ok(offset, size, size_)) return nullptr;
    return data_ + offset;
  }
  Status read(std::uint64_t offset, void* dst, std::uint64_t size) const noexcept override {
    if (!range_ok(offset, size, size_)) return Status(Error::Truncated, "read past the end of the source", offset);
    // A BufferSource made of nullptr and a size (an unchecked allocation)
    // has no bytes to read: view() says so, and read() must not copy from
    // address 0.
    if (size != 0 && data_ == nullptr)
      return Status(Error::InvalidArgument, "the source's memory is null", offset);
    if (size != 0) std::memcpy(dst, data_ + offset, static_cast<std::size_t>(size));
    return ok_status();
  }
  /// The bytes (nullptr for an empty source).
  const std::uint8_t* data() const noexcept { return data_; }

 protected:
  MemorySource() noexcept = default;
  MemorySource(const std::uint8_t* data, std::uint64_t size) noexcept : data_(data), size_(size) {}
  // Copied only as a BufferSource: a public assignment would let a
  // BufferSource be assigned into an MmapSource through this base, which
  // would then unmap the buffer and leak its own mapping.
  MemorySource(const MemorySource&) = default;
  MemorySource& operator=(const MemorySource&) = default;

  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace detail

/// Caller memory (an embedded flash image, a file the caller loaded). The
/// memory must outlive the source and every map and view made from it.
class BufferSource final : public detail::MemorySource {
 public:
  BufferSource() noexcept = default;
  BufferSource(const void* data, std::size_t size) noexcept
      : MemorySource(static_cast<const std::uint8_t*>(data), size) {}
};

}  // namespace wdedup

// MmapSource and FileSource need POSIX (<sys/mman.h>, <fcntl.h>,
// <unistd.h>, <sys/stat.h>). A target without them (bare metal, an RTOS)
// defines WDEDUP_NO_POSIX: the runtime half is then DataSource,
// BufferSource and sources of its own, and includes none of those headers
// (a user trial's embedded runtime could not build before: this header
// included them whatever it used).
#ifndef WDEDUP_NO_POSIX
#include "wdedup/runtime/file_sources.hpp"
#endif

#endif  // WDEDUP_RUNTIME_DATA_SOURCE_HPP
