// wdedup/runtime/file_sources.hpp — the two sources that read a file:
// MmapSource (a read-only private mapping) and FileSource (pread), opened
// from a path or from a descriptor the caller holds, over the whole file or
// a window of it. POSIX; data_source.hpp includes this header unless
// WDEDUP_NO_POSIX is defined. Runtime half: no heap.
#ifndef WDEDUP_RUNTIME_FILE_SOURCES_HPP
#define WDEDUP_RUNTIME_FILE_SOURCES_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#if defined(WDEDUP_NO_POSIX)
#error "wdedup/runtime/file_sources.hpp (MmapSource, FileSource) needs POSIX, and WDEDUP_NO_POSIX is defined"
#else

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wdedup/runtime/data_source.hpp"
#include "wdedup/runtime/error.hpp"

namespace wdedup {

/// Where the .ptd file a source reads lies in the file it opens: `length`
/// bytes from `offset`, the whole file by default. A .ptd kept inside a
/// bigger file (an Android APK's uncompressed asset, whose start and length
/// AAsset_openFileDescriptor64 gives; a bundle of a program and its data)
/// is read in place: its offsets count from the window's start, and the
/// source's size() is the window's length.
struct FileWindow {
  static constexpr std::uint64_t kToEnd = ~std::uint64_t{0};
  std::uint64_t offset = 0;
  std::uint64_t length = kToEnd;  ///< kToEnd: up to the file's end
};

namespace detail {

/// The text of a failed pread: a Status holds one static string and one
/// number, the offset here, so the errno goes into the string, named for
/// those a read of an open regular file can give.
constexpr const char* pread_failure(int e) noexcept {
  switch (e) {
    case EIO: return "pread failed: EIO, an I/O error (at = offset)";
    case EBADF: return "pread failed: EBADF, the descriptor is not open for reading (at = offset)";
    case EISDIR: return "pread failed: EISDIR, the descriptor is a directory (at = offset)";
    case EINVAL: return "pread failed: EINVAL, the descriptor cannot be read at an offset (at = offset)";
    case EFAULT: return "pread failed: EFAULT, the destination is not writable memory (at = offset)";
    case EOVERFLOW: return "pread failed: EOVERFLOW, an offset past what off_t holds (at = offset)";
    case ENXIO: return "pread failed: ENXIO, the device is gone (at = offset)";
    case EAGAIN: return "pread failed: EAGAIN, no data ready on a non-blocking descriptor (at = offset)";
    case ENOMEM: return "pread failed: ENOMEM (at = offset)";
    case ESTALE: return "pread failed: ESTALE, the network file system lost the file (at = offset)";
    default: return "pread failed: an errno other than EIO, EBADF, EISDIR, EINVAL, EFAULT, EOVERFLOW, ENXIO, EAGAIN, "
                    "ENOMEM or ESTALE (at = offset)";
  }
}

// Files over 2 GiB on 32-bit ABIs whose off_t has 32 bits unless the
// includer builds with _FILE_OFFSET_BITS=64 (glibc's i386 and armhf,
// Bionic's arm and x86): there the 64-bit calls are made, so such a file
// opens and is read at its true offsets whatever the includer defines. A
// 32-bit off_t elsewhere refuses an offset it cannot hold (EOVERFLOW)
// rather than wrap it and read other bytes.
#if !defined(__LP64__) && (!defined(_FILE_OFFSET_BITS) || _FILE_OFFSET_BITS != 64) && \
    ((defined(__GLIBC__) && defined(__USE_LARGEFILE64)) || defined(__BIONIC__))
using FileStat = struct stat64;
inline int file_stat(const char* path, FileStat* st) noexcept { return ::stat64(path, st); }
inline int file_fstat(int fd, FileStat* st) noexcept { return ::fstat64(fd, st); }
inline ssize_t file_pread(int fd, void* dst, std::size_t n, std::uint64_t offset) noexcept {
  return ::pread64(fd, dst, n, static_cast<off64_t>(offset));
}
inline void* file_mmap(std::size_t length, int fd, std::uint64_t offset) noexcept {
  return ::mmap64(nullptr, length, PROT_READ, MAP_PRIVATE, fd, static_cast<off64_t>(offset));
}
constexpr int kOpenLargeFile = O_LARGEFILE;
#else
using FileStat = struct stat;
inline int file_stat(const char* path, FileStat* st) noexcept { return ::stat(path, st); }
inline int file_fstat(int fd, FileStat* st) noexcept { return ::fstat(fd, st); }
inline ssize_t file_pread(int fd, void* dst, std::size_t n, std::uint64_t offset) noexcept {
  constexpr std::uint64_t kMaxOffset = (std::uint64_t{1} << (8 * sizeof(off_t) - 1)) - 1;
  if (offset > kMaxOffset) {
    errno = EOVERFLOW;
    return -1;
  }
  return ::pread(fd, dst, n, static_cast<off_t>(offset));
}
inline void* file_mmap(std::size_t length, int fd, std::uint64_t offset) noexcept {
  constexpr std::uint64_t kMaxOffset = (std::uint64_t{1} << (8 * sizeof(off_t) - 1)) - 1;
  if (offset > kMaxOffset) {
    errno = EOVERFLOW;
    return MAP_FAILED;
  }
  return ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(offset));
}
constexpr int kOpenLargeFile = 0;
#endif

/// A number for a source that opens a file, unique in the process (its
/// instance()): a map tells by it a source that took its own's place, where
/// the size and even the address (a mapping put where a freed one was) may
/// be the same. Unique, that is, among the sources of one executable or
/// shared object built with -fvisibility=hidden (a delegate plugin): each
/// such object has its own `last`, so two plugins number from 1 alike, and
/// the check tells sources apart only among those one object opened (a map
/// and its sources passed between plugins may meet a number twice).
inline std::uint64_t next_source_instance() noexcept {
  static std::uint64_t last = 0;
  return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

/// The size of the regular file open as `fd`, which stays open whatever
/// the outcome.
inline Status regular_file_size(int fd, std::uint64_t* size) noexcept {
  FileStat st;
  if (file_fstat(fd, &st) != 0) return Status(Error::IoError, "fstat failed (at = errno)", static_cast<std::uint64_t>(errno));
  if (!S_ISREG(st.st_mode) || st.st_size < 0) {
    // Which kind, as the writer says it: "not a regular file" alone left a
    // user to find out what the path was.
    return Status(Error::IoError,
                  S_ISDIR(st.st_mode)                             ? "not a regular file but a directory"
                  : S_ISFIFO(st.st_mode)                          ? "not a regular file but a FIFO"
                  : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)    ? "not a regular file but a device"
                  : S_ISSOCK(st.st_mode)                          ? "not a regular file but a socket"
                                                                  : "not a regular file",
                  0);
  }
  *size = static_cast<std::uint64_t>(st.st_size);
  return ok_status();
}

/// Opens `path` read-only and checks that it is a regular file. On success
/// the caller owns *fd; on failure nothing is left open.
inline Status open_regular_file(const char* path, int* fd, std::uint64_t* size) noexcept {
  // (open(2) takes no null path: glibc declares it nonnull, and the kernel's
  // EFAULT would say "bad address" of an unset getenv("MODEL").)
  if (path == nullptr) return Status(Error::InvalidArgument, "the path is null", 0);
  // O_NONBLOCK: opening a FIFO for reading otherwise blocks until some
  // process opens it for writing, before the check below can refuse it.
  // It is cleared once the file is known to be regular: a local file
  // system ignores it for reads, but a FUSE one passes it on, and its
  // reads could then fail with EAGAIN.
  // An open interrupted by a signal (one whose handler was installed
  // without SA_RESTART) is made again, as an interrupted pread is.
  int f = -1;
  do f = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | kOpenLargeFile);
  while (f < 0 && errno == EINTR);
  // But a regular file under another holder's write lease (Samba and NFS
  // servers take them) refuses a non-blocking open, where a blocking one
  // waits for the lease to be given up, as ExecuTorch's loader would: a
  // regular file is opened again, blocking. (That wait is where a signal
  // interrupts it.)
  if (f < 0 && errno == EWOULDBLOCK) {
    FileStat st;
    if (file_stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      do f = ::open(path, O_RDONLY | O_CLOEXEC | kOpenLargeFile);
      while (f < 0 && errno == EINTR);
    } else {
      errno = EWOULDBLOCK;
    }
  }
  if (f < 0) return Status(Error::IoError, "open failed (at = errno)", static_cast<std::uint64_t>(errno));
  if (Status st = regular_file_size(f, size); !st) {
    ::close(f);
    return st;
  }
  if (const int flags = ::fcntl(f, F_GETFL); flags >= 0 && (flags & O_NONBLOCK) != 0)
    ::fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  *fd = f;
  return ok_status();
}

/// Checks that the caller's descriptor `fd` reads a regular file, whose
/// size it gives, and its open flags (F_GETFL) where asked (FileSource
/// refuses O_DIRECT by them). The descriptor stays the caller's, as it was
/// (its flags are shared with every duplicate, so O_NONBLOCK is left set:
/// reads of a regular file on a local file system ignore it).
inline Status readable_file_size(int fd, std::uint64_t* size, int* open_flags = nullptr) noexcept {
  const int flags = ::fcntl(fd, F_GETFL);
  if (open_flags != nullptr) *open_flags = flags;
  if (flags < 0)
    return Status(Error::IoError, "fcntl(F_GETFL) failed: not an open descriptor? (at = errno)",
                  static_cast<std::uint64_t>(errno));
  // mmap and pread would refuse such a descriptor only at the first read
  // (pread) with EBADF, far from the call that took it; refused here, with
  // the errno they would give. Not "!= O_WRONLY": Linux's access mode 3
  // (open(path, 3): neither read nor write, for ioctls) reads nothing either.
  bool readable = (flags & O_ACCMODE) == O_RDONLY || (flags & O_ACCMODE) == O_RDWR;
#ifdef O_PATH
  readable = readable && (flags & O_PATH) == 0;  // Linux: a path, no file opened
#endif
  if (!readable)
    return Status(Error::IoError, "the descriptor is not open for reading (at = errno)",
                  static_cast<std::uint64_t>(EBADF));
  return regular_file_size(fd, size);
}

/// The window's offset and length in a file of `file_size` bytes: inside
/// the file, or InvalidArgument with the file's size.
inline Status resolve_window(std::uint64_t file_size, FileWindow window, std::uint64_t* offset,
                             std::uint64_t* length) noexcept {
  if (window.offset > file_size)
    return Status(Error::InvalidArgument, "the window starts past the end of the file (at = the file's size)",
                  file_size);
  const std::uint64_t rest = file_size - window.offset;
  if (window.length != FileWindow::kToEnd && window.length > rest)
    return Status(Error::InvalidArgument, "the window ends past the end of the file (at = the file's size)",
                  file_size);
  *offset = window.offset;
  *length = window.length == FileWindow::kToEnd ? rest : window.length;
  return ok_status();
}

/// The bytes a mapping must start before a window at `offset` (mmap takes
/// page-aligned offsets only).
inline std::uint64_t page_offset(std::uint64_t offset) noexcept {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t p = page > 0 ? static_cast<std::uint64_t>(page) : 4096;
  return offset % p;
}
}  // namespace detail

/// A whole file, or a window of one, mapped read-only and private. The
/// mapping is page-aligned, so data at a file offset that is a multiple of A
/// is at an address that is a multiple of A for every power of two A up to
/// the page size; in a window, data at window offset X lies where file
/// offset window.offset + X would. Move-only; unmaps in the destructor. As
/// with any mapping, a file truncated by another process while mapped
/// raises SIGBUS on access. The map checks the file's structure once, in
/// open(); a file rewritten in place while mapped is not checked again, so
/// its offsets may then point anywhere. Replace files by rename
/// (write_ptd_file does), never in place.
class MmapSource final : public detail::MemorySource {
 public:
  /// Maps `path`, or the window of it.
  static Result<MmapSource> open(const char* path, FileWindow window = {}) noexcept {
    int fd = -1;
    std::uint64_t size = 0;
    if (Status st = detail::open_regular_file(path, &fd, &size); !st) return st.failure();
    Result<MmapSource> mapped = map(fd, size, window);
    ::close(fd);  // the mapping keeps the file alive
    return mapped;
  }
  /// Maps the file open as `fd` (for reading), or the window of it: a
  /// descriptor handed over by a process that may open the file where this
  /// one may not, or an Android asset's (AAsset_openFileDescriptor64 gives
  /// its start and length in the APK). The descriptor stays the caller's,
  /// who may close it as soon as this returns: the mapping keeps the file.
  static Result<MmapSource> from_fd(int fd, FileWindow window = {}) noexcept {
    std::uint64_t size = 0;
    if (Status st = detail::readable_file_size(fd, &size); !st) return st.failure();
    return map(fd, size, window);
  }

  MmapSource(MmapSource&& o) noexcept
      : MemorySource(o.data_, o.size_), page_offset_(o.page_offset_), instance_(o.instance_) {
    o.data_ = nullptr;
    o.size_ = 0;
    o.page_offset_ = 0;
    o.instance_ = 0;
  }
  MmapSource& operator=(MmapSource&& o) noexcept {
    if (this != &o) {
      unmap();
      data_ = o.data_;
      size_ = o.size_;
      page_offset_ = o.page_offset_;
      instance_ = o.instance_;
      o.data_ = nullptr;
      o.size_ = 0;
      o.page_offset_ = 0;
      o.instance_ = 0;
    }
    return *this;
  }
  MmapSource(const MmapSource&) = delete;
  MmapSource& operator=(const MmapSource&) = delete;
  ~MmapSource() override { unmap(); }

  std::uint64_t instance() const noexcept override { return instance_; }

 private:
  MmapSource(const std::uint8_t* data, std::uint64_t size, std::size_t page_offset) noexcept
      : MemorySource(data, size), page_offset_(page_offset), instance_(detail::next_source_instance()) {}

  static Result<MmapSource> map(int fd, std::uint64_t file_size, FileWindow window) noexcept {
    std::uint64_t offset = 0, length = 0;
    if (Status st = detail::resolve_window(file_size, window, &offset, &length); !st) return st.failure();
    // The mapping starts at the page the window starts in.
    const std::uint64_t lead = detail::page_offset(offset);
    if (length > SIZE_MAX - lead) return Result<MmapSource>(Error::IoError, "file too large to map", length);
    if (length == 0) return MmapSource(nullptr, 0, 0);  // mmap rejects length 0
    const std::size_t span = static_cast<std::size_t>(lead + length);
    void* p = detail::file_mmap(span, fd, offset - lead);
    if (p == MAP_FAILED)
      return Result<MmapSource>(Error::IoError, "mmap failed (at = errno)", static_cast<std::uint64_t>(errno));
    return MmapSource(static_cast<const std::uint8_t*>(p) + lead, length, static_cast<std::size_t>(lead));
  }
  void unmap() noexcept {
    if (data_ != nullptr)
      ::munmap(const_cast<std::uint8_t*>(data_ - page_offset_), static_cast<std::size_t>(size_) + page_offset_);
    data_ = nullptr;
    size_ = 0;
    page_offset_ = 0;
    instance_ = 0;
  }

  std::size_t page_offset_ = 0;  // where the window starts in the mapping's first page
  std::uint64_t instance_ = 0;
};

/// A file, or a window of one, read with pread: for runtimes that cannot
/// or will not map the file. Not memory-backed, so NamedDataMap needs lent
/// metadata memory and get_data copies. Move-only; closes its descriptor
/// in the destructor.
class FileSource final : public DataSource {
 public:
  /// Opens `path`, or the window of it.
  static Result<FileSource> open(const char* path, FileWindow window = {}) noexcept {
    int fd = -1;
    std::uint64_t size = 0, offset = 0, length = 0;
    if (Status st = detail::open_regular_file(path, &fd, &size); !st) return st.failure();
    if (Status st = detail::resolve_window(size, window, &offset, &length); !st) {
      ::close(fd);
      return st.failure();
    }
    return FileSource(fd, offset, length);
  }
  /// Reads the file open as `fd` (for reading), or the window of it (see
  /// MmapSource::from_fd). The descriptor stays the caller's: this source
  /// reads through a duplicate of its own (close-on-exec), so the caller
  /// may close `fd` as soon as this returns. The two share the file's open
  /// flags; pread moves neither's file position. Closing the duplicate (when
  /// the source goes; metadata_size_from_fd at once) releases every POSIX
  /// record lock (fcntl F_SETLK) this process holds on the file, the
  /// caller's too: lock it with F_OFD_SETLK or flock, which a close of
  /// another descriptor leaves, or map it (MmapSource::from_fd closes nothing).
  static Result<FileSource> from_fd(int fd, FileWindow window = {}) noexcept {
    std::uint64_t size = 0, offset = 0, length = 0;
    int flags = 0;
    if (Status st = detail::readable_file_size(fd, &size, &flags); !st) return st.failure();
#ifdef O_DIRECT
    // The duplicate shares O_DIRECT, under which a pread must be aligned to
    // the device's blocks in offset, length and buffer: every read of this
    // source would fail (EINVAL), far from here, and the flag cannot be
    // dropped without dropping it from the caller's descriptor too. A
    // mapping ignores the flag. (A review found such a descriptor taken.)
    if ((flags & O_DIRECT) != 0)
      return Result<FileSource>(Error::IoError,
                                "the descriptor is open with O_DIRECT, whose reads must be aligned to the "
                                "device's blocks: open the file without it, or map it (MmapSource::from_fd, "
                                "MappedFile::from_fd) (at = errno)",
                                static_cast<std::uint64_t>(EINVAL));
#endif
    if (Status st = detail::resolve_window(size, window, &offset, &length); !st) return st.failure();
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
      return Result<FileSource>(Error::IoError, "fcntl(F_DUPFD_CLOEXEC) failed (at = errno)",
                                static_cast<std::uint64_t>(errno));
    return FileSource(own, offset, length);
  }

  FileSource(FileSource&& o) noexcept : fd_(o.fd_), offset_(o.offset_), size_(o.size_), instance_(o.instance_) {
    o.fd_ = -1;
    o.offset_ = 0;
    o.size_ = 0;
    o.instance_ = 0;
  }
  FileSource& operator=(FileSource&& o) noexcept {
    if (this != &o) {
      close_fd();
      fd_ = o.fd_;
      offset_ = o.offset_;
      size_ = o.size_;
      instance_ = o.instance_;
      o.fd_ = -1;
      o.offset_ = 0;
      o.size_ = 0;
      o.instance_ = 0;
    }
    return *this;
  }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  ~FileSource() override { close_fd(); }

  /// The window's bytes (the file's, without one).
  std::uint64_t size() const noexcept override { return size_; }
  const std::uint8_t* view(std::uint64_t, std::uint64_t) const noexcept override { return nullptr; }
  /// Reads `size` bytes at `offset` in the window; Truncated past its end,
  /// even where the file goes on.
  Status read(std::uint64_t offset, void* dst, std::uint64_t size) const noexcept override {
    if (!detail::range_ok(offset, size, size_))
      return Status(Error::Truncated, "read past the end of the file", offset);
    auto* out = static_cast<std::uint8_t*>(dst);
    // (offset_ + size_ is inside the file, whose size an off_t held.)
    std::uint64_t at = offset_ + offset;
    while (size > 0) {
      // pread's count is capped well below SSIZE_MAX; loop for the rest.
      const std::size_t chunk = size > (std::uint64_t{1} << 30) ? (std::size_t{1} << 30)
                                                                : static_cast<std::size_t>(size);
      const ssize_t n = detail::file_pread(fd_, out, chunk, at);
      if (n < 0) {
        const int e = errno;
        if (e == EINTR) continue;
        return Status(Error::IoError, detail::pread_failure(e), at - offset_);
      }
      if (n == 0) return Status(Error::Truncated, "file shrank while open", at - offset_);
      out += n;
      at += static_cast<std::uint64_t>(n);
      size -= static_cast<std::uint64_t>(n);
    }
    return detail::ok_status();
  }
  /// The descriptor it reads (its own: from_fd's duplicate).
  int fd() const noexcept { return fd_; }
  /// Where its window starts in the file (0 without one).
  std::uint64_t window_offset() const noexcept { return offset_; }
  std::uint64_t instance() const noexcept override { return instance_; }

 private:
  FileSource(int fd, std::uint64_t offset, std::uint64_t size) noexcept
      : fd_(fd), offset_(offset), size_(size), instance_(detail::next_source_instance()) {}
  void close_fd() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    offset_ = 0;
    size_ = 0;
    instance_ = 0;
  }

  int fd_ = -1;
  std::uint64_t offset_ = 0;
  std::uint64_t size_ = 0;
  std::uint64_t instance_ = 0;
};

}  // namespace wdedup

#endif  // WDEDUP_NO_POSIX
#endif  // WDEDUP_RUNTIME_FILE_SOURCES_HPP
