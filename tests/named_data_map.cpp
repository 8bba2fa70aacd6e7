// NamedDataMap's API: the three sources, ExecuTorch's five methods with the
// reference reader's bugs fixed (BufferTooSmall writes nothing; a key
// without layout is NotFound), zero-copy views and their alignment, the
// WDX1 index, lent-memory indexes for plain files, segments, function maps
// and content-hash verification — on fixtures and on real writer output;
// and how a source's read failures reach the caller.
// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run
// (tests/doctest_main.cpp).
#include "support/wdedup_file.hpp"  // first: see the note there

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/colliding_keys.hpp"
#include "support/nav.hpp"
#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "wdedup/runtime.hpp"
#include "wdedup/runtime/verify.hpp"

using namespace wdedup;
using namespace wdedup_test;
using Bytes = std::vector<std::uint8_t>;

namespace {

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
std::uint64_t pow2_part(std::uint64_t a) { return a & (~a + 1); }
std::string str(std::string_view s) { return std::string(s); }

// A file rewritten between NamedDataMap::metadata_size() and the lent
// open's copy: metadata_size() reads the 48-byte header (and a WDX1 block's
// first bytes) from `before`; the copy, the one read of more than the header
// from offset 0, comes from `after`. Not memory-backed.
struct ChangingSource final : DataSource {
  Bytes before, after;
  std::uint64_t size() const noexcept override { return before.size(); }
  const std::uint8_t* view(std::uint64_t, std::uint64_t) const noexcept override { return nullptr; }
  Status read(std::uint64_t offset, void* dst, std::uint64_t n) const noexcept override {
    const Bytes& b = offset == 0 && n > format::kMinFileSize ? after : before;
    if (offset > b.size() || n > b.size() - offset) return Status(Error::Truncated, "read past the end", offset);
    std::memcpy(dst, b.data() + offset, static_cast<std::size_t>(n));
    return detail::ok_status();
  }
};

}  // namespace

// pread as the kernel may return it: FileSource reads through pread64 (the
// build's _FILE_OFFSET_BITS=64 sends ::pread there), which this program
// defines. Off, it reads; a test may make each call return at most
// g_pread_max bytes, fail every other call with EINTR, as a signal
// arriving during a read of a slow (network) file does, or fail every call
// at or past an offset with EIO, as a failing disk does; or have each call
// read nothing and return its whole count, each call's offset and count
// recorded (g_pread_pretend: a read of gigabytes costs no memory). (64-bit
// Linux only: there the offset goes to the system call in one argument.)
#if defined(__linux__) && defined(__LP64__) && defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64
#include <sys/syscall.h>
namespace {
int g_pread_max = 0;              // > 0: at most this many bytes a call
bool g_pread_eintr = false;       // every other call fails with EINTR
off64_t g_pread_eio_from = -1;    // >= 0: a call at this offset or past it fails with EIO
bool g_pread_pretend = false;     // each call reads nothing, returns n, and is recorded
long g_pread_calls = 0;           // calls made while any of them is on
off64_t g_pread_offsets[8] = {};  // g_pread_pretend: the first 8 calls' offsets
std::size_t g_pread_counts[8] = {};  // and counts
}  // namespace
extern "C" ssize_t pread64(int fd, void* buf, std::size_t n, off64_t offset) {
  if (g_pread_max > 0 || g_pread_eintr || g_pread_eio_from >= 0 || g_pread_pretend) {
    const long call = g_pread_calls++;
    if (g_pread_pretend) {
      if (call < 8) {
        g_pread_offsets[call] = offset;
        g_pread_counts[call] = n;
      }
      return static_cast<ssize_t>(n);
    }
    if (g_pread_eintr && call % 2 == 0) {
      errno = EINTR;
      return -1;
    }
    if (g_pread_eio_from >= 0 && offset >= g_pread_eio_from) {
      errno = EIO;
      return -1;
    }
    if (g_pread_max > 0 && n > static_cast<std::size_t>(g_pread_max)) n = static_cast<std::size_t>(g_pread_max);
  }
  return static_cast<ssize_t>(::syscall(SYS_pread64, fd, buf, n, offset));
}
#define WDEDUP_TEST_PREAD_INTERPOSED 1

// open likewise (::open is open64 there): a test may make the next
// g_open_eintr calls fail with EINTR, as a signal arriving during the open
// of a file on a network or FUSE file system does, even a non-blocking one.
namespace {
int g_open_eintr = 0;         // the next this many calls fail with EINTR
int g_open_ewouldblock = 0;   // then the next this many with EWOULDBLOCK (a lease held)
long g_open_calls = 0;        // calls made since a test set g_open_eintr or g_open_ewouldblock
}  // namespace
extern "C" int open64(const char* path, int flags, ...) {
  unsigned mode = 0;
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, unsigned);
    va_end(ap);
  }
  if (g_open_eintr > 0 || g_open_ewouldblock > 0 || g_open_calls > 0) ++g_open_calls;
  if (g_open_eintr > 0) {
    --g_open_eintr;
    errno = EINTR;
    return -1;
  }
  if (g_open_ewouldblock > 0) {
    --g_open_ewouldblock;
    errno = EWOULDBLOCK;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}

// fstat likewise (::fstat is fstat64 there): a test may make the next
// g_fstat_eio calls fail with EIO, as a network file system's may.
namespace {
int g_fstat_eio = 0;  // the next this many calls fail with EIO
}  // namespace
extern "C" int fstat64(int fd, struct stat64* st) noexcept {
  if (g_fstat_eio > 0) {
    --g_fstat_eio;
    errno = EIO;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH));
}

// mmap likewise (::mmap is mmap64 there): a test may make the next
// g_mmap_enomem mappings of a file fail with ENOMEM, as where the address
// space or the count of mappings has run out. Anonymous mappings go through.
namespace {
int g_mmap_enomem = 0;  // the next this many file mappings fail with ENOMEM
}  // namespace
extern "C" void* mmap64(void* addr, std::size_t length, int prot, int flags, int fd, off64_t offset) noexcept {
  if (g_mmap_enomem > 0 && fd >= 0) {
    --g_mmap_enomem;
    errno = ENOMEM;
    return MAP_FAILED;
  }
  return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, length, prot, flags, fd, offset));
}
#endif

TEST_CASE("sources: open errors, sizes and move-only ownership") {
  const std::string simple = fixture("simple.ptd");
  SUBCASE("missing files are IoError with errno in at") {
    Result<MmapSource> m = MmapSource::open("/nonexistent/wdedup.ptd");
    CHECK(m.error() == Error::IoError);
    CHECK(m.failure().at == ENOENT);
    CHECK(FileSource::open("/nonexistent/wdedup.ptd").error() == Error::IoError);
  }
  SUBCASE("a directory or a device is not a regular file, and the message says which") {
    Result<MmapSource> m = MmapSource::open(WDEDUP_FIXTURES_DIR);
    CHECK(m.error() == Error::IoError);
    CHECK(std::string(m.failure().what) == "not a regular file but a directory");
    Result<FileSource> f = FileSource::open(WDEDUP_FIXTURES_DIR);
    CHECK(f.error() == Error::IoError);
    CHECK(std::string(f.failure().what) == "not a regular file but a directory");
    CHECK(std::string(MmapSource::open("/dev/null").failure().what) == "not a regular file but a device");
    // A block device too (a disk or a loop device: /dev/null is a character
    // one), where this process may open one (root may).
    std::string block;
    for (const std::string& name : dir_entries("/dev")) {
      const std::string dev = "/dev/" + name;
      struct stat st {};
      if (::stat(dev.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) continue;
      const int fd = ::open(dev.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) continue;
      ::close(fd);
      block = dev;
      break;
    }
    if (block.empty()) {
      MESSAGE("no block device this process can open: not checked");
    } else {
      CAPTURE(block);
      Result<MmapSource> bm = MmapSource::open(block.c_str());
      CHECK(bm.error() == Error::IoError);
      CHECK(std::string(bm.failure().what) == "not a regular file but a device");
      CHECK(bm.failure().at == 0);
      CHECK(std::string(FileSource::open(block.c_str()).failure().what) == "not a regular file but a device");
    }
  }
  SUBCASE("a FIFO is refused at once, not waited on for a writer") {
    // Opened without O_NONBLOCK, a FIFO with no writer blocks open(2)
    // forever (this test would then hang until meson's timeout).
    const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/runtime_fifo.ptd";
    ::unlink(path.c_str());
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    Result<MmapSource> m = MmapSource::open(path.c_str());
    CHECK(m.error() == Error::IoError);
    CHECK(std::string(m.failure().what) == "not a regular file but a FIFO");
    Result<FileSource> f = FileSource::open(path.c_str());
    CHECK(f.error() == Error::IoError);
    CHECK(std::string(f.failure().what) == "not a regular file but a FIFO");
    ::unlink(path.c_str());
  }
  SUBCASE("a file under a write lease is opened once the holder gives it up, as a blocking open is") {
    // The lease holder is this process: the open that breaks the lease
    // sends it SIGIO, whose handler gives the lease up. A non-blocking open
    // would fail at once with EWOULDBLOCK.
    const std::string path = write_temp("runtime_leased.ptd", read_file(simple));
    static int lease_fd = -1;
    lease_fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(lease_fd >= 0);
    struct sigaction give_up {}, before{};
    give_up.sa_handler = [](int) { ::fcntl(lease_fd, F_SETLEASE, F_UNLCK); };
    give_up.sa_flags = SA_RESTART;
    REQUIRE(::sigaction(SIGIO, &give_up, &before) == 0);
    // A read lease (all an O_RDONLY descriptor can hold) conflicts with a
    // write open only; so take a write lease through a writable descriptor.
    ::close(lease_fd);
    lease_fd = ::open(path.c_str(), O_RDWR);
    REQUIRE(lease_fd >= 0);
    if (::fcntl(lease_fd, F_SETLEASE, F_WRLCK) != 0) {
      MESSAGE("leases not available here (errno ", errno, "): not checked");
    } else {
      Result<FileSource> f = FileSource::open(path.c_str());
      REQUIRE(f.ok());
      CHECK(f->size() == 896);
      CHECK(::fcntl(lease_fd, F_GETLEASE) == F_UNLCK);
    }
    ::sigaction(SIGIO, &before, nullptr);
    ::close(lease_fd);
  }
  SUBCASE("a signal that interrupts the wait for a lease does not fail the open") {
    // The blocking open waits for the lease holder (here this process, whose
    // SIGIO handler does nothing); SIGALRM, whose handler has no SA_RESTART,
    // interrupts that wait (EINTR) and gives the lease up: opened again, the
    // file opens.
    const std::string path = write_temp("runtime_leased_eintr.ptd", read_file(simple));
    static int lease_fd = -1;
    lease_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(lease_fd >= 0);
    struct sigaction nothing {}, give_up{}, before_io{}, before_alarm{};
    nothing.sa_handler = [](int) {};
    give_up.sa_handler = [](int) { ::fcntl(lease_fd, F_SETLEASE, F_UNLCK); };  // no SA_RESTART
    REQUIRE(::sigaction(SIGIO, &nothing, &before_io) == 0);
    REQUIRE(::sigaction(SIGALRM, &give_up, &before_alarm) == 0);
    if (::fcntl(lease_fd, F_SETLEASE, F_WRLCK) != 0) {
      MESSAGE("leases not available here (errno ", errno, "): not checked");
    } else {
      itimerval in_200ms{};
      in_200ms.it_value.tv_usec = 200000;
      REQUIRE(::setitimer(ITIMER_REAL, &in_200ms, nullptr) == 0);
      for (int via = 0; via < 2; ++via) {
        if (via == 1) {  // again for MmapSource, with a new lease and timer
          REQUIRE(::fcntl(lease_fd, F_SETLEASE, F_WRLCK) == 0);
          REQUIRE(::setitimer(ITIMER_REAL, &in_200ms, nullptr) == 0);
        }
        Failure f;
        if (via == 0) {
          Result<FileSource> r = FileSource::open(path.c_str());
          f = r.failure();
          CHECK(r.ok());
        } else {
          Result<MmapSource> r = MmapSource::open(path.c_str());
          f = r.failure();
          CHECK(r.ok());
        }
        const std::string what = f.what;
        CAPTURE(what);
        CHECK(f.at != EINTR);
        CHECK(::fcntl(lease_fd, F_GETLEASE) == F_UNLCK);
      }
    }
    itimerval off{};
    ::setitimer(ITIMER_REAL, &off, nullptr);
    ::sigaction(SIGIO, &before_io, nullptr);
    ::sigaction(SIGALRM, &before_alarm, nullptr);
    ::close(lease_fd);
  }
  SUBCASE("an empty file maps to nothing and is Truncated for the reader") {
    const std::string path = write_temp("runtime_empty_file.ptd", {});
    Result<MmapSource> m = MmapSource::open(path.c_str());
    REQUIRE(m.ok());
    CHECK(m->size() == 0);
    CHECK(m->data() == nullptr);
    Result<NamedDataMap> map = NamedDataMap::open(*m);
    CHECK(map.error() == Error::Truncated);
    CHECK(map.failure().at == 0);
  }
  SUBCASE("MmapSource and FileSource move their resource") {
    Result<MmapSource> m = MmapSource::open(simple.c_str());
    REQUIRE(m.ok());
    const std::uint8_t* data = m->data();
    MmapSource a(std::move(*m));
    CHECK(a.data() == data);
    CHECK(a.size() == 896);
    CHECK(m->data() == nullptr);
    CHECK(m->size() == 0);
    MmapSource b = std::move(a);
    CHECK(b.view(0, 896) == data);
    CHECK(b.view(1, 896) == nullptr);  // out of range
    std::uint8_t tail[7] = {};
    CHECK(b.read(890, tail, 7).error() == Error::Truncated);
    CHECK(b.view(896, 0) == data + 896);  // an empty range at the end is in bounds
    CHECK(b.read(896, tail, 0).ok());
    CHECK(b.read(897, tail, 0).error() == Error::Truncated);

    Result<FileSource> f = FileSource::open(simple.c_str());
    REQUIRE(f.ok());
    const int fd = f->fd();
    FileSource g(std::move(*f));
    CHECK(g.fd() == fd);
    CHECK(f->fd() == -1);
    CHECK(g.size() == 896);
    CHECK(g.view(0, 8) == nullptr);  // never memory-backed
    std::uint8_t head[8];
    REQUIRE(g.read(0, head, 8).ok());
    CHECK(std::memcmp(head + 4, "FT01", 4) == 0);
    CHECK(g.read(896, head, 1).error() == Error::Truncated);
  }
  SUBCASE("an MmapSource or FileSource moved over lets its own mapping or descriptor go") {
    const std::string other = fixture("layouts.ptd");
    Result<MmapSource> x = MmapSource::open(simple.c_str());
    Result<MmapSource> y = MmapSource::open(other.c_str());
    REQUIRE(x.ok());
    REQUIRE(y.ok());
    const std::uint8_t* const mine = x->data();
    const std::uint8_t* const theirs = y->data();
    const std::uint64_t their_size = y->size();
    *x = std::move(*y);
    CHECK(x->data() == theirs);
    CHECK(x->size() == their_size);
    CHECK(y->data() == nullptr);
    // The mapping x held is unmapped: msync of a range with no mapping
    // fails with ENOMEM (the mapping starts at a page).
    errno = 0;
    CHECK(::msync(const_cast<std::uint8_t*>(mine), 896, MS_ASYNC) == -1);
    CHECK(errno == ENOMEM);
    CHECK(::msync(const_cast<std::uint8_t*>(theirs), static_cast<std::size_t>(their_size), MS_ASYNC) == 0);

    Result<FileSource> fx = FileSource::open(simple.c_str());
    Result<FileSource> fy = FileSource::open(other.c_str());
    REQUIRE(fx.ok());
    REQUIRE(fy.ok());
    const int my_fd = fx->fd(), their_fd = fy->fd();
    *fx = std::move(*fy);
    CHECK(fx->fd() == their_fd);
    CHECK(fy->fd() == -1);
    errno = 0;
    CHECK(::fcntl(my_fd, F_GETFD) == -1);  // closed
    CHECK(errno == EBADF);
  }
}

TEST_CASE("the value of a temporary Result is the value itself: `auto&& src = *open(...)` holds the source") {
  // It was a T&& into the Result, which died at the end of the statement:
  // the map below then read a dead source (ASan: stack-use-after-scope).
  static_assert(std::is_same<decltype(*std::declval<Result<MmapSource>>()), MmapSource>::value, "");
  static_assert(std::is_same<decltype(std::declval<Result<MmapSource>>().value()), MmapSource>::value, "");
  static_assert(std::is_same<decltype(*std::declval<Result<MmapSource>&>()), MmapSource&>::value, "");
  const std::string simple = fixture("simple.ptd");
  auto&& src = *MmapSource::open(simple.c_str());
  Result<NamedDataMap> map = NamedDataMap::open(src);
  REQUIRE(map.ok());
  const std::size_t num_keys = REQUIRE_VALUE(map->get_num_keys());
  CHECK(num_keys == 3);
}

TEST_CASE("an MmapSource cannot be assigned a BufferSource through their common base") {
  // detail::MemorySource's copy assignment, were it public, would slice a
  // BufferSource into an MmapSource: its destructor would then munmap the
  // caller's buffer and leak the mapping. BufferSource still copies.
  CHECK_FALSE(std::is_copy_assignable<detail::MemorySource>::value);
  CHECK_FALSE(std::is_copy_constructible<detail::MemorySource>::value);
  CHECK_FALSE(std::is_assignable<detail::MemorySource&, const BufferSource&>::value);
  CHECK(std::is_copy_assignable<BufferSource>::value);
  CHECK(std::is_copy_constructible<BufferSource>::value);
  CHECK_FALSE(std::is_copy_assignable<MmapSource>::value);
}

TEST_CASE("a FileSource whose read fails names the errno, with the offset in `at`") {
  // The source's descriptor made a directory's (dup2): pread gives EISDIR.
  const std::string simple = fixture("simple.ptd");
  Result<FileSource> f = FileSource::open(simple.c_str());
  REQUIRE(f.ok());
  const Status st = read_from_directory(*f, WDEDUP_FIXTURES_DIR, 64);
  CHECK(st.error() == Error::IoError);
  CHECK(std::string(st.failure().what) == "pread failed: EISDIR, the descriptor is a directory (at = offset)");
  CHECK(st.failure().at == 64);
  // Each errno the text names, and one it does not.
  const std::pair<int, const char*> texts[] = {
      {EIO, "pread failed: EIO, an I/O error (at = offset)"},
      {EBADF, "pread failed: EBADF, the descriptor is not open for reading (at = offset)"},
      {EISDIR, "pread failed: EISDIR, the descriptor is a directory (at = offset)"},
      {EINVAL, "pread failed: EINVAL, the descriptor cannot be read at an offset (at = offset)"},
      {EFAULT, "pread failed: EFAULT, the destination is not writable memory (at = offset)"},
      {EOVERFLOW, "pread failed: EOVERFLOW, an offset past what off_t holds (at = offset)"},
      {ENXIO, "pread failed: ENXIO, the device is gone (at = offset)"},
      {EAGAIN, "pread failed: EAGAIN, no data ready on a non-blocking descriptor (at = offset)"},
      {ENOMEM, "pread failed: ENOMEM (at = offset)"},
      {ESTALE, "pread failed: ESTALE, the network file system lost the file (at = offset)"},
      {EPERM, "pread failed: an errno other than EIO, EBADF, EISDIR, EINVAL, EFAULT, EOVERFLOW, ENXIO, EAGAIN, "
              "ENOMEM or ESTALE (at = offset)"},
  };
  for (const auto& t : texts) {
    CAPTURE(t.first);
    CHECK(std::string(detail::pread_failure(t.first)) == t.second);
  }
}

TEST_CASE("a BufferSource of nullptr and a size fails its reads instead of reading address 0") {
  // As from an unchecked allocation: view() gives nothing, so open() asks
  // for lent metadata memory, whose read copied from address 0 (SIGSEGV).
  BufferSource src(nullptr, 896);
  // Named for what it is, not as a source that is not memory-backed.
  Result<NamedDataMap> in_place = NamedDataMap::open(src);
  CHECK(in_place.error() == Error::InvalidArgument);
  CHECK(std::string(in_place.failure().what) == "the source's memory is null");
  CHECK(in_place.failure().at == 0);
  std::uint8_t b[8] = {};
  const Status st = src.read(0, b, sizeof b);
  CHECK(st.error() == Error::InvalidArgument);
  // Named, with where the read starts.
  const Status at_8 = src.read(8, b, sizeof b);
  CHECK(at_8.error() == Error::InvalidArgument);
  CHECK(std::string(at_8.failure().what) == "the source's memory is null");
  CHECK(at_8.failure().at == 8);
  CHECK(src.read(8, b, 0).ok());  // nothing to copy
  // No view of any range either (not address 0 plus the offset).
  CHECK(src.view(0, 8) == nullptr);
  CHECK(src.view(8, 8) == nullptr);
  CHECK(src.view(896, 0) == nullptr);
  CHECK(NamedDataMap::metadata_size(src).error() == Error::InvalidArgument);
  AlignedBytes meta(4096, 8);
  CHECK(NamedDataMap::open(src, meta.span()).error() == Error::InvalidArgument);
}

TEST_CASE("the map object's size is what the README says (its 256 tag slots and 32 layouts)") {
  // README, "File format": 792 bytes on 64-bit targets; on 32-bit ones 776
  // where a 64-bit integer is aligned to 8 in a struct (armv7's EABI), 760
  // where to 4 (i386). A field added to the map grows every map a runtime
  // keeps; this says when one does (the source's instance: 8 more).
  struct Probe {
    char c;
    std::uint64_t u;
  };
  const std::size_t expected = sizeof(void*) == 8 ? 792 : offsetof(Probe, u) == 8 ? 776 : 760;
  CHECK(sizeof(NamedDataMap) == expected);
}

TEST_CASE("a map of few keys whose layout lies past 4 GiB in its flatbuffer reads it there") {
  // A map of up to 32 keys keeps its layouts' positions in 32 bits
  // (cache_small_layouts), which hold every one only where the flatbuffer
  // ends below 4 GiB. Here layouts.ptd (ExecuTorch's, 11 keys) gets a copy
  // of its flatbuffer at D, just below 4 GiB, with its first key's layout
  // field pointing into the copy, past 4 GiB: every key must read as in
  // the original. (Anonymous memory: only the pages written are backed.)
  if (sizeof(void*) < 8) return;  // (no 4 GiB of address space)
  const Bytes orig = read_fixture("layouts.ptd");
  BufferSource osrc(orig.data(), orig.size());
  Result<NamedDataMap> om = NamedDataMap::open(osrc);
  REQUIRE(om.ok());
  const std::size_t om_keys = REQUIRE_VALUE(om->get_num_keys());
  REQUIRE(om_keys == 11);
  namespace fb = detail::fb;
  const std::uint8_t* o = orig.data();
  const std::uint64_t fb_end = format::load_u64(o + format::kHeaderFlatbufferOffsetPos) +
                               format::load_u64(o + format::kHeaderFlatbufferSizePos);
  const std::uint64_t base = format::load_u64(o + format::kHeaderSegmentBasePos);
  const std::uint64_t seg_bytes = format::load_u64(o + format::kHeaderSegmentDataSizePos);
  const std::uint64_t named = fb::trusted_ref(o, format::load_u32(o), format::flat_tensor_field::kNamedData) + 4;
  const std::uint64_t field =
      fb::trusted_field(o, fb::trusted_element(o, named, 0), format::named_data_field::kTensorLayout);
  REQUIRE(field != 0);
  const std::uint64_t t = fb::trusted_follow(o, field);
  // The copy's key-0 layout at D + t >= 4 GiB, reached from `field` by a
  // 32-bit offset: D in [2^32 - t, 2^32 - 1 - t + field], 16-aligned.
  const std::uint64_t four = std::uint64_t{1} << 32;
  const std::uint64_t d = (four - t + 15) / 16 * 16;
  REQUIRE(d + t - field < four);
  const std::uint64_t new_base = (d + fb_end + 4095) / 4096 * 4096;
  const std::uint64_t size = new_base + seg_bytes;
  void* mem = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    MESSAGE("cannot map ", size, " bytes of address space: not tried");
    return;
  }
  auto* b = static_cast<std::uint8_t*>(mem);
  std::memcpy(b, o, static_cast<std::size_t>(fb_end));
  std::memcpy(b + d, o, static_cast<std::size_t>(fb_end));
  std::memcpy(b + new_base, o + base, static_cast<std::size_t>(seg_bytes));
  format::store_u64(b + format::kHeaderFlatbufferSizePos,
                    d + fb_end - format::load_u64(o + format::kHeaderFlatbufferOffsetPos));
  format::store_u64(b + format::kHeaderSegmentBasePos, new_base);
  format::store_u32(b + field, static_cast<std::uint32_t>(d + t - field));
  {
    BufferSource src(b, static_cast<std::size_t>(size));
    Result<NamedDataMap> m = NamedDataMap::open(src);
    REQUIRE_MESSAGE(m.ok(), m.failure().what, " at ", m.failure().at);
    const std::size_t m_keys = REQUIRE_VALUE(m->get_num_keys());
    REQUIRE(m_keys == 11);
    for (std::size_t i = 0; i < 11; ++i) {
      CAPTURE(i);
      const KeyView k = REQUIRE_VALUE(om->get_key(i));
      const KeyView mk = REQUIRE_VALUE(m->get_key(i));
      CHECK(mk == k);
      Result<TensorLayout> want = om->get_tensor_layout(k), got = m->get_tensor_layout(k);
      REQUIRE(got.ok() == want.ok());
      if (!want.ok()) {
        CHECK(got.error() == want.error());
        continue;
      }
      CHECK(got->scalar_type == want->scalar_type);
      CHECK(std::vector<std::int32_t>(got->sizes.begin(), got->sizes.end()) ==
            std::vector<std::int32_t>(want->sizes.begin(), want->sizes.end()));
      CHECK(std::vector<std::uint8_t>(got->dim_order.begin(), got->dim_order.end()) ==
            std::vector<std::uint8_t>(want->dim_order.begin(), want->dim_order.end()));
      // Key 0's layout is the copy's, past 4 GiB; the others' the original's.
      const std::uint64_t at = addr(got->sizes.data()) - addr(b);
      if (i == 0) CHECK(at >= four);
      else if (!got->sizes.empty()) CHECK(at < fb_end);
    }
  }
  ::munmap(mem, static_cast<std::size_t>(size));
}

TEST_CASE("open: in place for memory, lent metadata otherwise") {
  const std::string simple = fixture("simple.ptd");
  Result<FileSource> file = FileSource::open(simple.c_str());
  REQUIRE(file.ok());

  SUBCASE("a FileSource cannot be opened in place") {
    Result<NamedDataMap> m = NamedDataMap::open(*file);
    CHECK(m.error() == Error::InvalidArgument);
    CHECK(std::string(m.failure().what) == "source is not memory-backed: lend metadata memory");
    // A source that is not memory-backed and whose reads fail (EIO from
    // the start) keeps that hint: only a null buffer's InvalidArgument
    // read is named instead.
    const Bytes& w = wdedup_file_bytes();
    FailingSource failing(w.data(), w.size(), 0);
    Result<NamedDataMap> f = NamedDataMap::open(failing);
    CHECK(f.error() == Error::InvalidArgument);
    CHECK(std::string(f.failure().what) == "source is not memory-backed: lend metadata memory");
  }
  SUBCASE("metadata_size is the flatbuffer for plain files, through the WDX1 block for wdedup files") {
    Result<std::uint64_t> n = NamedDataMap::metadata_size(*file);
    REQUIRE(n.ok());
    CHECK(*n == 48 + 232);
    const Bytes& w = wdedup_file_bytes();
    ReadOnlySource ro(w.data(), w.size());
    Result<std::uint64_t> wn = NamedDataMap::metadata_size(ro);
    REQUIRE(wn.ok());
    const std::uint64_t fb_end = 48 + format::load_u64(w.data() + format::kHeaderFlatbufferSizePos);
    const std::uint64_t ext = (fb_end + 15) / 16 * 16;
    CHECK(std::memcmp(w.data() + ext, "WDX1", 4) == 0);
    CHECK(*wn == ext + format::load_u64(w.data() + ext + format::ext_header::kBlockSize));
  }
  SUBCASE("lent memory must be large enough and 8-byte aligned") {
    AlignedBytes small(279, 8);
    Result<NamedDataMap> m = NamedDataMap::open(*file, small.span());
    CHECK(m.error() == Error::BufferTooSmall);
    CHECK(m.failure().at == 280);
    AlignedBytes skewed(280, 8, 4);
    Result<NamedDataMap> misaligned = NamedDataMap::open(*file, skewed.span());
    CHECK(misaligned.error() == Error::Misaligned);
    CHECK(std::string(misaligned.failure().what) == "metadata memory is not 8-byte aligned");
    CHECK(misaligned.failure().at == 4);  // the address modulo 8
    AlignedBytes exact(280, 8);
    Result<NamedDataMap> ok = NamedDataMap::open(*file, exact.span());
    REQUIRE(ok.ok());
    CHECK_FALSE(ok->is_memory_backed());
    // Keys and layouts are views into the lent memory.
    Result<std::string_view> k = ok->get_key(0);
    REQUIRE(k.ok());
    CHECK(addr(k->data()) >= addr(exact.data()));
    CHECK(addr(k->data()) < addr(exact.data()) + 280);
  }
  SUBCASE("in-place memory must be 8-byte aligned") {
    const Bytes bytes = read_file(simple);
    AlignedBytes skewed(bytes, 8, 4);
    BufferSource src(skewed.data(), skewed.size());
    Result<NamedDataMap> m = NamedDataMap::open(src);
    CHECK(m.error() == Error::Misaligned);
    CHECK(m.failure().at == 4);
    // The lent path accepts any source alignment: it copies the metadata.
    AlignedBytes meta(280, 8);
    CHECK(NamedDataMap::open(src, meta.span()).ok());
  }
  SUBCASE("a file whose flatbuffer grew between metadata_size() and the copy is Truncated") {
    // The lent path sizes the copy from one read of the header and reads
    // the header again from the copy: a file rewritten in between (here its
    // flatbuffer_size 232 -> 240, so the flatbuffer would end at 288, past
    // the 280 bytes copied) must not be read past the copy.
    ChangingSource src;
    src.before = read_file(simple);
    src.after = src.before;
    REQUIRE(format::load_u64(src.before.data() + format::kHeaderFlatbufferSizePos) == 232);
    format::store_u64(src.after.data() + format::kHeaderFlatbufferSizePos, 240);
    Result<std::uint64_t> need = NamedDataMap::metadata_size(src);
    REQUIRE(need.ok());
    CHECK(*need == 280);
    AlignedBytes meta(512, 8);
    Result<NamedDataMap> m = NamedDataMap::open(src, meta.span());
    CHECK(m.error() == Error::Truncated);
    CHECK(std::string(m.failure().what) == "metadata memory ends inside the flatbuffer");
    CHECK(m.failure().at == 280);
    // Unchanged, the same source opens.
    src.after = src.before;
    CHECK(NamedDataMap::open(src, meta.span()).ok());
  }
  SUBCASE("a wdedup file whose WDX1 block moved between metadata_size() and the copy is Truncated") {
    // The WDX1 block starts at the flatbuffer's end rounded up to 16, so a
    // grown flatbuffer moves it. metadata_size() sized the copy to the old
    // block's end M; at the block's new place, its header or the block
    // itself would run past M, and the open must stop at M.
    namespace eh = format::ext_header;
    ChangingSource src;
    src.before = wdedup_file_bytes();
    const std::uint64_t fb_size = format::load_u64(src.before.data() + format::kHeaderFlatbufferSizePos);
    const std::uint64_t x = (48 + fb_size + 15) / 16 * 16;
    REQUIRE(std::memcmp(src.before.data() + x, "WDX1", 4) == 0);
    const std::uint64_t block = format::load_u64(src.before.data() + x + eh::kBlockSize);
    Result<std::uint64_t> need = NamedDataMap::metadata_size(src);
    REQUIRE(need.ok());
    const std::uint64_t m_end = *need;
    REQUIRE(m_end == x + block);
    // Room for the moves below before the segment data, so neither is
    // refused as running into it first.
    REQUIRE(format::load_u64(src.before.data() + format::kHeaderSegmentBasePos) >= m_end + 16);
    REQUIRE(block >= eh::kSize + 16);
    AlignedBytes meta(static_cast<std::size_t>(m_end), 8);
    // The block's first `n` bytes moved to `to`, the flatbuffer grown to end there.
    const auto moved_to = [&](std::uint64_t to, std::uint64_t n) {
      src.after = src.before;
      format::store_u64(src.after.data() + format::kHeaderFlatbufferSizePos, to - 48);
      std::memmove(src.after.data() + to, src.before.data() + x, static_cast<std::size_t>(n));
      return NamedDataMap::open(src, meta.span());
    };
    // Its header past M, at the first 16-aligned place where it is (so it
    // ends at most 16 bytes past M, before the segment data): the magic is
    // inside the copy, the rest not. Its first 16 bytes moved, all a reader
    // could look at before M.
    const std::uint64_t header_past = ((m_end - eh::kSize) / 16 + 1) * 16;
    REQUIRE(header_past > x);
    REQUIRE(header_past + 4 <= m_end);
    REQUIRE(header_past + eh::kSize > m_end);
    Result<NamedDataMap> h = moved_to(header_past, 16);
    CHECK(h.error() == Error::Truncated);
    CHECK(std::string(h.failure().what) == "metadata memory ends inside the WDX1 header");
    CHECK(h.failure().at == m_end);
    // 16 bytes on: its 80-byte header is inside the copy, its end 16 past M.
    Result<NamedDataMap> b = moved_to(x + 16, block);
    CHECK(b.error() == Error::Truncated);
    CHECK(std::string(b.failure().what) == "metadata memory ends inside the WDX1 block");
    CHECK(b.failure().at == m_end);
    // Unchanged, the same source opens.
    src.after = src.before;
    CHECK(NamedDataMap::open(src, meta.span()).ok());
  }
  SUBCASE("a source smaller than the header is Truncated") {
    const std::uint8_t tiny[47] = {};
    BufferSource src(tiny, sizeof tiny);
    CHECK(NamedDataMap::open(src).error() == Error::Truncated);
    CHECK(NamedDataMap::metadata_size(src).error() == Error::Truncated);
    BufferSource none(nullptr, 0);
    CHECK(NamedDataMap::open(none).error() == Error::Truncated);
  }
}

TEST_CASE("get_tensor_layout: exact layouts; NotFound without a layout or a key") {
  for (Via via : kAllVias) {
    CAPTURE(via_name(via));
    std::unique_ptr<Opened> o = open_via(via, fixture("layouts.ptd"));
    REQUIRE(o->ok());
    const NamedDataMap& m = o->map();
    Result<TensorLayout> cl = m.get_tensor_layout("float32.channels_last.1x2x3x2");
    REQUIRE(cl.ok());
    CHECK(cl->scalar_type == ScalarType::Float);
    REQUIRE(cl->sizes.size() == 4);
    CHECK(cl->sizes[0] == 1);
    CHECK(cl->sizes[1] == 2);
    CHECK(cl->sizes[2] == 3);
    CHECK(cl->sizes[3] == 2);
    REQUIRE(cl->dim_order.size() == 4);
    CHECK(cl->dim_order[1] == 2);
    CHECK(cl->dim_order[3] == 1);
    CHECK(cl->nbytes() == 48);
    CHECK(addr(cl->sizes.data()) % 4 == 0);  // an in-place int32 view

    Result<TensorLayout> scalar = m.get_tensor_layout("int64.scalar");
    REQUIRE(scalar.ok());
    CHECK(scalar->scalar_type == ScalarType::Long);
    CHECK(scalar->sizes.size() == 0);
    CHECK(scalar->nbytes() == 8);

    Result<TensorLayout> none = m.get_tensor_layout("raw.no_layout");
    CHECK(none.error() == Error::NotFound);  // the reference reader crashed here
    CHECK(std::string(none.failure().what) == "key has no tensor layout");
    CHECK(none.failure().at == 10);  // the key's index
    Result<TensorLayout> absent = m.get_tensor_layout("float32.2x3.missing");
    CHECK(absent.error() == Error::NotFound);
    CHECK(std::string(absent.failure().what) == "no such key");
    CHECK(m.get_tensor_layout("").error() == Error::NotFound);
    // A null C string: the empty key, NotFound (strlen(nullptr) crashed).
    const char* const no_name = nullptr;
    CHECK(m.get_tensor_layout(no_name).error() == Error::NotFound);
    CHECK(m.get_data(no_name).error() == Error::NotFound);
  }
}

TEST_CASE("load_data_into: a too-small buffer is BufferTooSmall and nothing is written") {
  for (Via via : kAllVias) {
    CAPTURE(via_name(via));
    std::unique_ptr<Opened> o = open_via(via, fixture("simple.ptd"));
    REQUIRE(o->ok());
    const NamedDataMap& m = o->map();
    Bytes buf(200, 0xCD);
    Status st = m.load_data_into("simple.b", buf.data(), 99);  // simple.b holds 100 bytes
    CHECK(st.error() == Error::BufferTooSmall);
    CHECK(st.failure().at == 100);
    CHECK(buf == Bytes(200, 0xCD));
    CHECK(m.load_data_into("simple.b", buf.data(), 0).error() == Error::BufferTooSmall);
    CHECK(m.load_data_into("simple.b", nullptr, 0).error() == Error::BufferTooSmall);
    CHECK(buf == Bytes(200, 0xCD));
    // A null buffer that claims room for the data: only a zero-size tensor
    // may pass null, so this is refused before the copy, which would write
    // through it.
    Status null_buffer = m.load_data_into("simple.b", nullptr, 200);
    CHECK(null_buffer.error() == Error::InvalidArgument);
    CHECK(std::string(null_buffer.failure().what) == "buffer is null");
    CHECK(null_buffer.failure().at == 0);

    // Exactly the data size, or more: the data is written, nothing past it.
    REQUIRE(m.load_data_into("simple.b", buf.data(), 200).ok());
    const Bytes file = read_file(fixture("simple.ptd"));
    CHECK(std::memcmp(buf.data(), file.data() + 512, 100) == 0);
    CHECK(buf[100] == 0xCD);
    CHECK(buf.back() == 0xCD);
    CHECK(m.load_data_into("nope", buf.data(), 200).error() == Error::NotFound);
  }
  // A zero-size tensor needs no buffer at all.
  std::unique_ptr<Opened> o = open_via(Via::File, fixture("layouts.ptd"));
  REQUIRE(o->ok());
  CHECK(o->map().load_data_into("float32.zero_sized.2x0x3", nullptr, 0).ok());
}

TEST_CASE("get_data: a zero-copy view for memory sources, an owned copy for files") {
  const std::string path = fixture("large_segment.ptd");
  Result<MmapSource> src = MmapSource::open(path.c_str());
  REQUIRE(src.ok());
  Result<NamedDataMap> m = NamedDataMap::open(*src);
  REQUIRE(m.ok());
  Result<DataBuffer> a = m->get_data("large.weight");
  Result<DataBuffer> b = m->get_data("large.weight.alias2");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // 4 MiB, no copy: both aliases are the same bytes of the mapping.
  CHECK(a->size() == 4194304);
  CHECK(a->data() == src->data() + 384);
  CHECK(b->data() == a->data());
  CHECK_FALSE(a->owns_memory());
  CHECK(addr(a->data()) % 128 == 0);  // page-aligned mapping + absolute file offset 384

  // DataBuffer is move-only; a moved-from buffer is empty.
  DataBuffer moved = std::move(a).value();
  CHECK(moved.size() == 4194304);
  CHECK(a->size() == 0);
  CHECK(a->data() == nullptr);
  moved.reset();
  CHECK(moved.size() == 0);

  // FileSource: a malloc'd copy with the same bytes, freed by the buffer.
  std::unique_ptr<Opened> f = open_via(Via::File, path);
  REQUIRE(f->ok());
  Result<DataBuffer> c = f->map().get_data("large.weight.alias1");
  REQUIRE(c.ok());
  CHECK(c->owns_memory());
  CHECK(c->size() == 4194304);
  CHECK(std::memcmp(c->data(), src->data() + 384, 4194304) == 0);
  CHECK(f->map().get_data("missing").error() == Error::NotFound);

  // release(): the copy handed over (as to an ExecuTorch FreeableBuffer),
  // not freed; the buffer left empty. The caller frees it (ASan and LSan
  // see a double free or a leak if either side gets it wrong).
  const void* bytes = c->data();
  void* allocation = c->release();
  REQUIRE(allocation != nullptr);
  CHECK(addr(bytes) >= addr(allocation));
  CHECK_FALSE(c->owns_memory());
  CHECK(c->data() == nullptr);
  CHECK(c->size() == 0);
  CHECK(std::memcmp(bytes, src->data() + 384, 4194304) == 0);  // still there
  std::free(allocation);
  // A view has nothing to hand over.
  Result<DataBuffer> v = m->get_data("large.weight");
  REQUIRE(v.ok());
  CHECK(v->release() == nullptr);
  CHECK(v->data() == nullptr);
}

TEST_CASE("get_data through a FileSource: every copy has the key's alignment, whatever malloc gives") {
  // malloc promises alignof(max_align_t) (16 here); a key asking for 32,
  // 64 or 4096 gets memory aligned to that. One copy can be aligned by luck,
  // so 16 of each are held at once: were they malloc's, each would miss
  // the alignment with a chance of 1 in 2 (32) or 3 in 4 (64). A copy
  // smaller than its alignment comes from posix_memalign, which takes no
  // alignment below sizeof(void*) (EINVAL): one of 1 or 3 bytes asking 2
  // or 4 asks it for a pointer's alignment (a mutation test's survivor).
  const std::vector<std::uint8_t> bytes = pattern(48, 5);
  NamedDataStore store;
  struct Key {
    const char* name;
    std::int64_t alignment;
    std::size_t from;  ///< distinct bytes each: no aliases
    std::size_t size;
  };
  const Key keys[] = {{"a8", 8, 0, 40},        {"a32", 32, 1, 40},      {"a64", 64, 2, 40},
                      {"a4096", 4096, 3, 40},  {"one_byte_a2", 2, 4, 1}, {"one_byte_a4", 4, 5, 1},
                      {"three_bytes_a4", 4, 6, 3}};
  for (const Key& k : keys)
    REQUIRE(store.add_named_data(k.name, ByteSpan(bytes.data() + k.from, k.size), k.alignment).ok());
  REQUIRE(store.buffer_count() == 7);
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(store, FunctionMaps{}, WriteOptions{});
  REQUIRE(file);
  std::unique_ptr<Opened> o = open_via(Via::File, write_temp("file_copy_alignment.ptd", *file));
  REQUIRE(o->ok());
  for (const Key& k : keys) {
    CAPTURE(k.name);
    std::vector<DataBuffer> copies;
    for (int i = 0; i < 16; ++i) {
      Result<DataBuffer> d = o->map().get_data(k.name);
      REQUIRE_MESSAGE(d.ok(), d.failure().what);
      CHECK(d->owns_memory());
      REQUIRE(d->size() == k.size);
      CHECK(std::memcmp(d->data(), bytes.data() + k.from, k.size) == 0);
      CHECK(addr(d->data()) % static_cast<std::uint64_t>(k.alignment) == 0);
      copies.push_back(std::move(d).value());
    }
  }
}

TEST_CASE("get_data of a zero-size key: a pointer that is not null, aligned as the key asks, through every source") {
  // In place it points into the file; a FileSource has nothing to copy and
  // nothing to allocate, and still gives a pointer a caller may test for
  // null as a failure (the small file's "empty" asks for 8).
  for (Via via : kAllVias) {
    CAPTURE(via_name(via));
    std::unique_ptr<Opened> o = open_via(via, wdedup_file_path());
    REQUIRE(o->ok());
    for (const bool by_index : {false, true}) {
      CAPTURE(by_index);
      const std::uint32_t empty_index = REQUIRE_VALUE(o->map().find("empty")).key_index;
      Result<DataBuffer> d = by_index ? o->map().key_data(empty_index) : o->map().get_data("empty");
      REQUIRE(d.ok());
      CHECK(d->size() == 0);
      CHECK_FALSE(d->owns_memory());
      CHECK(d->data() != nullptr);
      CHECK(addr(d->data()) % 8 == 0);
    }
  }
}

TEST_CASE("get_data of a zero-size key opened in place points into the file, even where the memory misses the key's alignment") {
  // "z" (no bytes, asking 64) lies at 640 in the file, a multiple of 64;
  // the file lies at 8 past a multiple of 64 in memory: its view is the
  // file's address plus 640 (8 past a multiple of 64: the view keeps a
  // key's alignment only up to the source's own), not another pointer.
  const std::uint8_t abc[3] = {1, 2, 3};
  NamedDataStore store;
  REQUIRE(store.add_named_data("a", ByteSpan(abc, 3)).ok());
  REQUIRE(store.add_named_data("z", ByteSpan(), 64).ok());
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(store, FunctionMaps{}, WriteOptions{});
  REQUIRE(file);
  const AlignedBytes memory(*file, 64, 8);
  BufferSource src(memory.data(), memory.size());
  const NamedDataMap m = REQUIRE_VALUE(NamedDataMap::open(src));
  const KeyInfo z = REQUIRE_VALUE(m.find("z"));
  CHECK(z.size == 0);
  CHECK(z.offset == 640);  // a multiple of 64
  for (const bool by_index : {false, true}) {
    CAPTURE(by_index);
    const DataBuffer d = REQUIRE_VALUE(by_index ? m.key_data(z.key_index) : m.get_data("z"));
    CHECK(d.size() == 0);
    CHECK_FALSE(d.owns_memory());
    CHECK(d.data() == memory.data() + z.offset);
    CHECK(addr(d.data()) % 64 == 8);
  }
}

TEST_CASE("get_data with lent metadata over memory anywhere: views aligned as each key asks, else aligned copies") {
  // open(src, metadata) takes a memory source at any address (the metadata
  // is copied); its bytes are lent in place only where that meets the
  // key's alignment.
  const std::vector<std::uint8_t> bytes = pattern(48, 9);
  NamedDataStore store;
  const std::pair<const char*, std::int64_t> keys[] = {{"a1", 1}, {"a8", 8}, {"a64", 64}, {"a4096", 4096}};
  std::size_t from = 0;
  for (const auto& [name, alignment] : keys)
    REQUIRE(store.add_named_data(name, ByteSpan(bytes.data() + from++, 40), alignment).ok());
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(store, FunctionMaps{}, WriteOptions{});
  REQUIRE(file);
  for (const std::size_t misalign : {std::size_t{0}, std::size_t{1}, std::size_t{8}}) {
    CAPTURE(misalign);
    std::unique_ptr<Opened> o = open_bytes_lent(*file, misalign);
    REQUIRE(o->ok());
    const std::uint8_t* at = o->bytes.data();
    from = 0;
    for (const auto& key : keys) {
      // (Not a structured binding: clang 14 cannot capture one, as CAPTURE does.)
      const char* const name = key.first;
      const std::int64_t alignment = key.second;
      CAPTURE(name);
      Result<DataBuffer> d = o->map().get_data(name);
      REQUIRE(d.ok());
      REQUIRE(d->size() == 40);
      CHECK(std::memcmp(d->data(), bytes.data() + from++, 40) == 0);
      CHECK(addr(d->data()) % static_cast<std::uint64_t>(alignment) == 0);
      // In place where the file's absolute alignment carries over: all
      // four at 0, only "a1" at 1, "a1" and "a8" at 8.
      const bool in_place = misalign == 0 || alignment == 1 || (misalign == 8 && alignment == 8);
      CHECK(d->owns_memory() == !in_place);
      if (in_place) CHECK(addr(d->data()) >= addr(at));
    }
  }
}

TEST_CASE("get_data with lent metadata: a key asking more than a page is lent in place where its bytes are page-aligned") {
  // A copy is aligned to at most kMaxCopyAlignment (4096), so a view at a
  // page boundary is as aligned as any copy could be: a key asking 8192,
  // over memory at 4096 past a multiple of 8192, is a view, not a copy.
  const std::vector<std::uint8_t> bytes = pattern(40, 3);
  NamedDataStore store;
  REQUIRE(store.add_named_data("a8192", ByteSpan(bytes.data(), bytes.size()), 8192).ok());
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(store, FunctionMaps{}, WriteOptions{});
  REQUIRE(file);
  auto o = std::make_unique<Opened>();
  o->bytes = AlignedBytes(*file, 8192, 4096);
  o->buffer = BufferSource(o->bytes.data(), o->bytes.size());
  o->source = &o->buffer;
  open_lent(*o);
  REQUIRE(o->ok());
  const KeyInfo k = REQUIRE_VALUE(o->map().find("a8192"));
  REQUIRE(k.alignment == 8192);
  REQUIRE(k.offset % 8192 == 0);
  Result<DataBuffer> d = o->map().get_data("a8192");
  REQUIRE(d.ok());
  REQUIRE(d->size() == 40);
  CHECK(std::memcmp(d->data(), bytes.data(), 40) == 0);
  CHECK_FALSE(d->owns_memory());
  CHECK(d->data() == o->bytes.data() + k.offset);
  CHECK(addr(d->data()) % 4096 == 0);
  CHECK(addr(d->data()) % 8192 == 4096);
}

TEST_CASE("get_num_keys and get_key follow file order; keys are C strings") {
  std::unique_ptr<Opened> o = open_via(Via::Mmap, fixture("aliases.ptd"));
  REQUIRE(o->ok());
  const NamedDataMap& m = o->map();
  const std::size_t num_keys = REQUIRE_VALUE(m.get_num_keys());
  REQUIRE(num_keys == 6);
  const KeyView key0 = REQUIRE_VALUE(m.get_key(0));
  CHECK(str(key0) == "prefill/layers.0.wq");
  const KeyView key5 = REQUIRE_VALUE(m.get_key(5));
  CHECK(str(key5) == "decode/only");
  const KeyView key3 = REQUIRE_VALUE(m.get_key(3));
  CHECK(std::strcmp(key3.data(), "decode/layers.0.wq") == 0);
  Result<std::string_view> bad = m.get_key(6);
  CHECK(bad.error() == Error::InvalidArgument);
  CHECK(bad.failure().at == 6);
  CHECK(std::string(bad.failure().what) == "key index out of range");
  CHECK(m.key_info(6).error() == Error::InvalidArgument);
  CHECK(std::string(m.key_info(6).failure().what) == "key index out of range");
  CHECK(m.key_info(6).failure().at == 6);
  // Aliases share a segment and therefore an offset.
  const KeyInfo decode_wq = REQUIRE_VALUE(m.find("decode/layers.0.wq"));
  const KeyInfo prefill_wq = REQUIRE_VALUE(m.find("prefill/layers.0.wq"));
  CHECK(decode_wq.offset == prefill_wq.offset);
  CHECK(decode_wq.segment_index == 0);

  std::unique_ptr<Opened> e = open_via(Via::Buffer, fixture("empty.ptd"));
  REQUIRE(e->ok());
  const std::size_t e_keys = REQUIRE_VALUE(e->map().get_num_keys());
  CHECK(e_keys == 0);
  CHECK(e->map().segment_count() == 0);
  CHECK(e->map().get_key(0).error() == Error::InvalidArgument);
  CHECK(e->map().find("x").error() == Error::NotFound);
}

TEST_CASE("key_data and key_layout: get_data and get_tensor_layout by key index, no lookup") {
  for (Via via : kAllVias) {
    CAPTURE(via_name(via));
    for (const std::string& path : {fixture("layouts.ptd"), fixture("aliases.ptd"), wdedup_file_path()}) {
      CAPTURE(path);
      std::unique_ptr<Opened> o = open_via(via, path);
      REQUIRE(o->ok());
      const NamedDataMap& m = o->map();
      const std::size_t n = REQUIRE_VALUE(m.get_num_keys());
      for (std::size_t i = 0; i < n; ++i) {
        const KeyView key = REQUIRE_VALUE(m.get_key(i));
        CAPTURE(str(key));
        Result<DataBuffer> by_index = m.key_data(i);
        Result<DataBuffer> by_name = m.get_data(key);
        REQUIRE(by_index.ok());
        REQUIRE(by_name.ok());
        // A copy only from a file, or from caller memory at an odd address
        // for a key that asks more than alignment 1, and never of nothing.
        const std::uint64_t alignment = REQUIRE_VALUE(m.key_info(i)).alignment;
        const bool copied = by_name->size() != 0 &&
                            (via == Via::File || (via == Via::BufferLent && pow2_part(alignment) > 1));
        CHECK(by_index->owns_memory() == copied);
        REQUIRE(by_index->size() == by_name->size());
        if (!copied) CHECK(by_index->data() == by_name->data());
        if (by_name->size() != 0) CHECK(std::memcmp(by_index->data(), by_name->data(), by_name->size()) == 0);
        Result<TensorLayout> l = m.key_layout(i);
        Result<TensorLayout> ln = m.get_tensor_layout(key);
        REQUIRE(l.ok() == ln.ok());
        if (!l.ok()) {
          CHECK(l.error() == Error::NotFound);
          CHECK(std::string(l.failure().what) == "key has no tensor layout");
          continue;
        }
        CHECK(l->scalar_type == ln->scalar_type);
        CHECK(l->sizes.data() == ln->sizes.data());
        CHECK(l->sizes.size() == ln->sizes.size());
        CHECK(l->dim_order.data() == ln->dim_order.data());
        CHECK(l->dim_order.size() == ln->dim_order.size());
      }
      CHECK(m.key_data(n).error() == Error::InvalidArgument);
      CHECK(m.key_data(n).failure().at == n);
      CHECK(m.key_layout(n).error() == Error::InvalidArgument);
      CHECK(m.key_layout(n).failure().at == n);
    }
  }
  // layouts.ptd key 0: float32 [2, 3]; key 10: no layout.
  std::unique_ptr<Opened> o = open_via(Via::Mmap, fixture("layouts.ptd"));
  REQUIRE(o->ok());
  Result<TensorLayout> l0 = o->map().key_layout(0);
  REQUIRE(l0.ok());
  CHECK(l0->scalar_type == ScalarType::Float);
  REQUIRE(l0->sizes.size() == 2);
  CHECK(l0->sizes[0] == 2);
  CHECK(l0->sizes[1] == 3);
  CHECK(o->map().key_layout(10).error() == Error::NotFound);
  const std::size_t data10_size = REQUIRE_VALUE(o->map().key_data(10)).size();
  CHECK(data10_size == 10);
}

TEST_CASE("build_index: O(1) lookups for plain files in lent memory") {
  CHECK(NamedDataMap::index_memory_size(0) == 8);
  CHECK(NamedDataMap::index_memory_size(1) == 16);
  CHECK(NamedDataMap::index_memory_size(3) == 64);
  CHECK(NamedDataMap::index_memory_size(4) == 64);
  CHECK(NamedDataMap::index_memory_size(5) == 128);
  CHECK(NamedDataMap::index_memory_size(4096) == 65536);
  // The most keys a file can hold, and past it: memory no one has (the
  // doubling would overflow, or never end, for counts near 2^63).
  CHECK(NamedDataMap::index_memory_size(UINT32_MAX) == (std::uint64_t{1} << 36));
  if (sizeof(std::size_t) == 8) {
    CHECK(NamedDataMap::index_memory_size(std::size_t{UINT32_MAX} + 1) == UINT64_MAX);
    CHECK(NamedDataMap::index_memory_size(static_cast<std::size_t>(std::uint64_t{1} << 62) + 1) == UINT64_MAX);
  }

  std::unique_ptr<Opened> o = open_via(Via::Mmap, fixture("many_keys.ptd"));
  REQUIRE(o->ok());
  NamedDataMap& m = o->map();
  CHECK_FALSE(m.has_index());
  CHECK_FALSE(m.has_extension());
  const std::size_t n = REQUIRE_VALUE(m.get_num_keys());
  REQUIRE(n == 4096);
  const std::size_t need = static_cast<std::size_t>(NamedDataMap::index_memory_size(n));

  AlignedBytes small(need - 8, 8);
  Status st = m.build_index(small.span());
  CHECK(st.error() == Error::BufferTooSmall);
  CHECK(st.failure().at == need);
  // One byte short is too small as well: the last slot would not fit.
  AlignedBytes one_short(need - 1, 8);
  st = m.build_index(one_short.span());
  CHECK(st.error() == Error::BufferTooSmall);
  CHECK(st.failure().at == need);
  AlignedBytes skewed(need, 8, 4);
  st = m.build_index(skewed.span());
  CHECK(st.error() == Error::Misaligned);
  CHECK(std::string(st.failure().what) == "index memory is not 8-byte aligned");
  CHECK(st.failure().at == 4);  // the address modulo 8
  CHECK_FALSE(m.has_index());

  // Answers before and after are identical.
  std::vector<KeyInfo> before;
  for (std::size_t i = 0; i < n; ++i) {
    const KeyView key = REQUIRE_VALUE(m.get_key(i));
    before.push_back(REQUIRE_VALUE(m.find(key)));
  }
  AlignedBytes index(need, 8);
  REQUIRE(m.build_index(index.span()).ok());
  CHECK(m.has_index());
  for (std::size_t i = 0; i < n; ++i) {
    const KeyInfo k = REQUIRE_VALUE(m.find(before[i].key));
    CHECK(k.key_index == i);
    CHECK(k.offset == before[i].offset);
    CHECK(k.size == before[i].size);
  }
  CHECK(m.find("model.layers.0.self_attn.q_proj.weightX").error() == Error::NotFound);
  // The answers above are the scan's too, so they alone cannot tell that a
  // lookup reads the index. It does: with the lent slots cleared (each slot
  // empty), no key is found, though every one still is in the file; with
  // them put back, every one is found again.
  const Bytes slots(index.data(), index.data() + need);
  CHECK(slots != Bytes(need, 0));
  std::memset(index.data(), 0, need);
  for (const std::size_t i : {std::size_t{0}, n / 2, n - 1}) {
    CAPTURE(i);
    CHECK(m.find(before[i].key).error() == Error::NotFound);
    CHECK(m.get_data(before[i].key).error() == Error::NotFound);
  }
  std::memcpy(index.data(), slots.data(), need);
  for (std::size_t i = 0; i < n; ++i) {
    const KeyInfo k = REQUIRE_VALUE(m.find(before[i].key));
    CHECK(k.key_index == i);
  }
  // Already indexed: a second call does nothing.
  CHECK(m.build_index(Span<std::uint8_t>()).ok());
}

TEST_CASE("build_index: duplicate keys are MalformedKey; scans still return the first") {
  Bytes bytes = read_file(fixture("simple.ptd"));
  // Rename "simple.b" to "simple.a" in place (same length).
  const std::string needle = "simple.b";
  auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  REQUIRE(it != bytes.end());
  *(it + 7) = 'a';
  std::unique_ptr<Opened> o = open_bytes(bytes);
  REQUIRE(o->ok());  // a plain file is not checked for duplicates at open (that needs memory)
  NamedDataMap& m = o->map();
  const KeyInfo a_before = REQUIRE_VALUE(m.find("simple.a"));
  CHECK(a_before.key_index == 0);
  AlignedBytes index(static_cast<std::size_t>(NamedDataMap::index_memory_size(3)), 8);
  Status st = m.build_index(index.span());
  CHECK(st.error() == Error::MalformedKey);
  CHECK(st.failure().at == static_cast<std::uint64_t>(it - bytes.begin()));
  CHECK_FALSE(m.has_index());
  const KeyInfo a_after = REQUIRE_VALUE(m.find("simple.a"));
  CHECK(a_after.key_index == 0);
}

TEST_CASE("build_index: keys chosen to collide under one seed do not survive another") {
  // (support/colliding_keys.hpp: 1,024 keys in the first 16 of 2,048 slots
  // under kChosen.)
  constexpr std::uint64_t kChosen = kCollidingSeed;
  constexpr std::uint32_t kKeys = kCollidingKeys;
  const std::uint64_t slots = NamedDataMap::index_memory_size(kKeys) / 8;
  REQUIRE(slots == 2048);
  std::vector<std::string> names;
  const std::vector<std::uint8_t> file = colliding_keys_file(&names);
  std::unique_ptr<Opened> o = open_bytes(file);
  REQUIRE(o->ok());
  NamedDataMap& m = o->map();
  AlignedBytes index(static_cast<std::size_t>(8 * slots), 8);

  // Under the seed they were chosen for: refused once the probes run over
  // budget, and the map goes on scanning.
  Status st = m.build_index(index.span(), kChosen);
  CHECK(st.error() == Error::MalformedIndex);
  CHECK(std::string(st.failure().what) == "keys collide in the built index under this seed (at = keys placed)");
  CHECK(st.failure().at > 16);
  CHECK(st.failure().at < kKeys);
  CHECK_FALSE(m.has_index());
  const KeyInfo k700 = REQUIRE_VALUE(m.find(names[700]));
  CHECK(k700.key_index == 700);
  // The same keys under ordinary seeds: built, and every key found.
  REQUIRE(m.build_index(index.span(), kChosen + 1).ok());
  CHECK(m.has_index());
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    const KeyInfo k = REQUIRE_VALUE(m.find(names[i]));
    CHECK(k.key_index == i);
  }
  CHECK(m.find("w.x").error() == Error::NotFound);

  // build_index(memory) picks its own seed, and retries under others.
  std::unique_ptr<Opened> o2 = open_bytes(file);
  REQUIRE(o2->ok());
  REQUIRE(o2->map().build_index(index.span()).ok());
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    const KeyInfo k = REQUIRE_VALUE(o2->map().find(names[i]));
    CHECK(k.key_index == i);
  }
}

TEST_CASE("wdedup file: stored index, absolute alignment, layouts, segments and hashes") {
  const std::vector<ExpectedKey>& keys = small_file_keys();
  for (Via via : kAllVias) {
    CAPTURE(via_name(via));
    std::unique_ptr<Opened> o = open_via(via, wdedup_file_path());
    REQUIRE(o->result.has_value());
    REQUIRE_MESSAGE(o->ok(), error_name(o->error()), ": ", o->result->failure().what);
    const NamedDataMap& m = o->map();
    CHECK(m.has_extension());
    CHECK(m.has_index());
    const std::size_t num_keys = REQUIRE_VALUE(m.get_num_keys());
    REQUIRE(num_keys == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const ExpectedKey& e = keys[i];
      CAPTURE(e.key);
      const KeyView key = REQUIRE_VALUE(m.get_key(i));
      CHECK(str(key) == e.key);
      Result<KeyInfo> k = m.find(e.key);
      REQUIRE(k.ok());
      CHECK(k->key_index == i);
      CHECK(k->alignment == e.alignment);
      CHECK(k->size == e.bytes.size());
      CHECK(k->has_layout == e.has_layout);
      CHECK(k->offset % e.alignment == 0);  // absolute file alignment, even for 3
      CHECK(k->offset % 128 == 0);          // the writer's default segment alignment
      Result<DataBuffer> d = m.get_data(e.key);
      REQUIRE(d.ok());
      REQUIRE(d->size() == e.bytes.size());
      if (!e.bytes.empty()) CHECK(std::memcmp(d->data(), e.bytes.data(), e.bytes.size()) == 0);
      // The pointer honours the alignment's power-of-two part: up to the page
      // for a mapping, fully for a copy (8 for the 8-aligned buffer source;
      // at an odd address, a view for alignment 1 and a copy for more).
      const std::uint64_t p2 = pow2_part(e.alignment);
      const std::uint64_t guaranteed = via == Via::Mmap                           ? std::min<std::uint64_t>(p2, 4096)
                                       : via == Via::File || via == Via::BufferLent ? p2
                                                                                    : std::min<std::uint64_t>(p2, 8);
      CHECK(addr(d->data()) % guaranteed == 0);
      Result<TensorLayout> l = m.get_tensor_layout(e.key);
      CHECK(l.ok() == e.has_layout);
    }
    // Aliases: one segment, each key keeps its own alignment and layout;
    // the segment's alignment is the lcm of them.
    const KeyInfo q = REQUIRE_VALUE(m.find("w.q")), v = REQUIRE_VALUE(m.find("w.v"));
    CHECK(q.segment_index == v.segment_index);
    CHECK(q.offset == v.offset);
    CHECK(q.offset % 4096 == 0);
    const SegmentInfo qs = REQUIRE_VALUE(m.segment(q.segment_index));
    CHECK(qs.alignment == 4096);
    Result<TensorLayout> lv = m.get_tensor_layout("w.v");
    REQUIRE(lv.ok());
    CHECK(lv->dim_order.size() == 4);
    CHECK(lv->dim_order[1] == 2);
    Result<TensorLayout> lq = m.get_tensor_layout("w.q");
    REQUIRE(lq.ok());
    CHECK(lq->sizes.size() == 2);
    CHECK(lq->sizes[0] == 4);
    CHECK(m.get_tensor_layout("w.k").error() == Error::NotFound);
    Result<TensorLayout> le = m.get_tensor_layout("empty");
    REQUIRE(le.ok());
    CHECK(le->nbytes() == 0);
    CHECK(m.find("w.x").error() == Error::NotFound);
    CHECK(m.find("").error() == Error::NotFound);

    // Segments carry XXH3 content hashes that verify.
    REQUIRE(m.segment_count() == 6);  // w.q and w.v share one
    for (std::uint32_t s = 0; s < m.segment_count(); ++s) {
      Result<SegmentInfo> si = m.segment(s);
      REQUIRE(si.ok());
      CHECK(si->has_content_hash);
      CHECK(si->offset % si->alignment == 0);
      const std::uint64_t hash = REQUIRE_VALUE(segment_content_hash(m, s));
      CHECK(si->content_hash == hash);
      CHECK(verify_segment(m, s).ok());
    }
    CHECK(verify_segments(m).ok());
    CHECK(m.segment(6).error() == Error::InvalidArgument);
    CHECK(m.segment(6).failure().at == 6);
    if (sizeof(std::size_t) > 4) {
      // Past 2^32 - 1 the index is out of range, not segment 1 (until
      // 2026-12-04 segment() took a std::uint32_t, so 2^32 + 1 arrived as 1).
      const auto past = static_cast<std::size_t>(std::uint64_t{1} << 32) + 1;
      CHECK(m.segment(past).error() == Error::InvalidArgument);
      CHECK(m.segment(past).failure().at == (std::uint64_t{1} << 32) + 1);
    }
  }
}

TEST_CASE("wdedup file: function maps") {
  std::unique_ptr<Opened> o = open_via(Via::Mmap, wdedup_file_path());
  REQUIRE(o->ok());
  const NamedDataMap& m = o->map();
  REQUIRE(m.function_count() == 3);

  Result<FunctionView> f0 = m.function(0);
  REQUIRE(f0.ok());
  CHECK(str(f0->method()) == "prefill");
  CHECK(f0->partition_index() == 0);
  CHECK(str(f0->blob_key()) == "combined_all");
  CHECK(str(f0->function_name()) == "prefill__0");
  REQUIRE(f0->tensor_count() == 3);
  // Rows are sorted by tensor name.
  const FunctionTensorView t0 = REQUIRE_VALUE(f0->tensor(0));
  const FunctionTensorView t1 = REQUIRE_VALUE(f0->tensor(1));
  const FunctionTensorView t2 = REQUIRE_VALUE(f0->tensor(2));
  CHECK(str(t0.tensor_name) == "norm");
  CHECK(str(t0.key) == "norm");
  CHECK(t0.key_index == 3);
  CHECK(str(t1.tensor_name) == "wk");
  CHECK(str(t2.tensor_name) == "wq");
  CHECK(str(t2.key) == "w.q");
  CHECK(f0->tensor(3).error() == Error::InvalidArgument);
  CHECK(std::string(f0->tensor(3).failure().what) == "tensor index out of range");
  CHECK(f0->tensor(3).failure().at == 3);
  const KeyView wk = REQUIRE_VALUE(f0->key_of("wk"));
  CHECK(str(wk) == "w.k");
  CHECK(f0->key_of("wv").error() == Error::NotFound);
  // (a tensor of another function: "wv" is decode's)
  CHECK(std::string(f0->key_of("wv").failure().what) == "no such tensor in this function");
  CHECK(f0->key_of("wv").failure().at == 0);
  CHECK(std::string(f0->find_tensor("wv").failure().what) == "no such tensor in this function");
  CHECK(f0->key_of("").error() == Error::NotFound);
  const FunctionTensorView wq = REQUIRE_VALUE(f0->find_tensor("wq"));
  CHECK(wq.key_index == 0);

  Result<FunctionView> d1 = m.find_function("decode", 1);
  REQUIRE(d1.ok());
  CHECK(str(d1->function_name()) == "decode");
  CHECK(str(d1->blob_key()) == "combined_partition_1");
  const KeyView odd = REQUIRE_VALUE(d1->key_of("odd"));
  CHECK(str(odd) == "odd3");
  const KeyView e = REQUIRE_VALUE(d1->key_of("e"));
  CHECK(str(e) == "empty");
  const KeyView raw = REQUIRE_VALUE(d1->key_of("raw"));
  CHECK(str(raw) == "raw");
  // A partition the method lacks says how many functions the method has; a
  // method no function names (misspelled, say) says that instead.
  const char* const no_partition = "method has no function for this partition (at = the method's function count)";
  Result<FunctionView> d2 = m.find_function("decode", 2);
  CHECK(d2.error() == Error::NotFound);
  CHECK(std::string(d2.failure().what) == no_partition);
  CHECK(d2.failure().at == 2);
  if (sizeof(std::size_t) > 4) {  // not partition 1 modulo 2^32
    const auto past = static_cast<std::size_t>(std::uint64_t{1} << 32) + 1;
    CHECK(m.find_function("decode", past).error() == Error::NotFound);
    CHECK(std::string(m.find_function("decode", past).failure().what) == no_partition);
  }
  Result<FunctionView> p1 = m.find_function("prefill", 1);
  CHECK(p1.error() == Error::NotFound);
  CHECK(std::string(p1.failure().what) == no_partition);
  CHECK(p1.failure().at == 1);
  for (const char* method : {"prefil", "Decode", "", "decode__0"}) {
    CAPTURE(method);
    Result<FunctionView> none = m.find_function(method, 0);
    CHECK(none.error() == Error::NotFound);
    CHECK(std::string(none.failure().what) == "no function for this method");
    CHECK(none.failure().at == 0);
  }

  const FunctionView decode0 = REQUIRE_VALUE(m.find_function("decode__0"));
  const FunctionView decode = REQUIRE_VALUE(m.find_function("decode"));
  CHECK(decode0.partition_index() == 0);
  CHECK(str(decode0.method()) == "decode");
  CHECK(decode.partition_index() == 1);  // the first function named "decode"
  CHECK(m.find_function("nope").error() == Error::NotFound);
  CHECK(std::string(m.find_function("nope").failure().what) == "no function with this name");
  CHECK(m.find_function("nope").failure().at == 0);
  const FunctionView in_blob = REQUIRE_VALUE(m.find_function("combined_all", "decode__0"));
  CHECK(str(in_blob.method()) == "decode");
  CHECK(m.find_function("combined_partition_1", "decode__0").error() == Error::NotFound);
  // A name that exists, in another blob than the one asked: the message
  // says which lookup failed.
  CHECK(std::string(m.find_function("combined_partition_1", "decode__0").failure().what) ==
        "no function with this name in this blob");
  CHECK(m.find_function("combined_partition_1", "decode__0").failure().at == 0);
  CHECK(m.function(3).error() == Error::InvalidArgument);
  CHECK(std::string(m.function(3).failure().what) == "function index out of range");
  CHECK(m.function(3).failure().at == 3);

  // A FunctionView is tied to the metadata, not to the map object.
  Result<FunctionView> kept = m.function(1);
  NamedDataMap copy = m;
  NamedDataMap moved = std::move(copy);
  REQUIRE(kept.ok());
  const KeyView kept_wv = REQUIRE_VALUE(kept->key_of("wv"));
  CHECK(str(kept_wv) == "w.v");
  const FunctionView moved1 = REQUIRE_VALUE(moved.function(1));
  const KeyView moved_wk = REQUIRE_VALUE(moved1.key_of("wk"));
  CHECK(str(moved_wk) == "w.k");

  // Plain files have no functions and no hashes.
  std::unique_ptr<Opened> plain = open_via(Via::Mmap, fixture("simple.ptd"));
  REQUIRE(plain->ok());
  CHECK(plain->map().function_count() == 0);
  CHECK(plain->map().find_function("decode", 0).error() == Error::NotFound);
  CHECK(plain->map().function(0).error() == Error::InvalidArgument);
  const SegmentInfo plain0 = REQUIRE_VALUE(plain->map().segment(0));
  CHECK_FALSE(plain0.has_content_hash);
  CHECK(plain0.alignment == 1);
  CHECK(verify_segments(plain->map()).error() == Error::NotFound);
  CHECK(verify_segment(plain->map(), 0).error() == Error::NotFound);
  CHECK(verify_segment(plain->map(), 2).failure().at == 2);  // the segment's index
  // A segment past the last: the map's refusal, from both calls.
  const Result<std::uint64_t> past = segment_content_hash(plain->map(), 3);
  CHECK(past.error() == Error::InvalidArgument);
  CHECK(std::string(past.failure().what) == "segment index out of range");
  CHECK(past.failure().at == 3);
  CHECK(verify_segment(plain->map(), 3).error() == Error::InvalidArgument);
  // A plain file of no segments stores no hashes either: not "all verified".
  std::unique_ptr<Opened> empty = open_via(Via::Mmap, fixture("empty.ptd"));
  REQUIRE(empty->ok());
  REQUIRE(empty->map().segment_count() == 0);
  const Status none = verify_segments(empty->map());
  CHECK(none.error() == Error::NotFound);
  CHECK(std::string(none.failure().what) == "file stores no content hashes");
}

TEST_CASE("writer output: plain files, many keys, non-power-of-two base alignment") {
  std::vector<std::vector<std::uint8_t>> data;
  const Bytes big = many_keys_wdedup_bytes(5000, &data);
  std::unique_ptr<Opened> o = open_bytes(big);
  REQUIRE_MESSAGE(o->ok(), error_name(o->error()), ": ", o->result->failure().what);
  const NamedDataMap& m = o->map();
  const std::size_t num_keys = REQUIRE_VALUE(m.get_num_keys());
  REQUIRE(num_keys == 5000);
  CHECK(m.function_count() == 50);
  for (std::size_t i = 0; i < 5000; ++i) {
    const std::string key = "layer." + std::to_string(i / 8) + ".tensor_" + std::to_string(i);
    Result<KeyInfo> k = m.find(key);
    REQUIRE(k.ok());
    CHECK(k->key_index == i);
    CHECK(k->size == data[i / 2].size());
    Result<DataBuffer> d = m.get_data(key);
    REQUIRE(d.ok());
    CHECK(std::memcmp(d->data(), data[i / 2].data(), d->size()) == 0);
    Result<FunctionView> f = m.function(i / 100);
    REQUIRE(f.ok());
    const KeyView fk = REQUIRE_VALUE(f->key_of("t" + std::to_string(i)));
    CHECK(str(fk) == key);
  }
  CHECK(verify_segments(m).ok());
  // A scan finds the same keys, so the lookups above cannot tell that they
  // read the WDX1 block's index. They do: the map was opened in place, so
  // with the block's slots cleared in the caller's bytes (each slot empty)
  // no key is found, and with them put back every one is.
  {
    namespace eh = format::ext_header;
    std::uint8_t* const file = o->bytes.data();
    const std::uint64_t ext = (48 + format::load_u64(file + format::kHeaderFlatbufferSizePos) + 15) / 16 * 16;
    REQUIRE(std::memcmp(file + ext, "WDX1", 4) == 0);
    std::uint8_t* const slots = file + ext + format::load_u32(file + ext + eh::kSlotsOffset);
    const std::size_t slot_bytes = 8 * std::size_t{format::load_u32(file + ext + eh::kSlotCount)};
    CHECK(slot_bytes == 8 * 16384);  // the power of two >= 2 * 5000
    const Bytes kept(slots, slots + slot_bytes);
    std::memset(slots, 0, slot_bytes);
    const std::size_t probed[] = {0, 2500, 4999};
    auto key_at = [](std::size_t i) { return "layer." + std::to_string(i / 8) + ".tensor_" + std::to_string(i); };
    for (const std::size_t i : probed) {
      CAPTURE(key_at(i));
      CHECK(m.find(key_at(i)).error() == Error::NotFound);
      CHECK(m.get_data(key_at(i)).error() == Error::NotFound);
    }
    std::memcpy(slots, kept.data(), slot_bytes);
    for (const std::size_t i : probed) {
      CAPTURE(key_at(i));
      Result<KeyInfo> k = m.find(key_at(i));
      REQUIRE(k.ok());
      CHECK(k->key_index == i);
    }
  }

  // The same store without the extension block: a plain FlatTensor file
  // that needs scans (or build_index) and records no alignment.
  NamedDataStore store;
  const Bytes bytes = pattern(40, 9);
  REQUIRE(store.add_named_data("a", ByteSpan(bytes.data(), bytes.size()), 64).ok());
  REQUIRE(store.add_named_data("b", ByteSpan(bytes.data(), bytes.size()), 3).ok());
  WriteOptions plain;
  plain.wdedup_extensions = false;
  std::unique_ptr<Opened> p = open_bytes(write_or_die(store, FunctionMaps{}, plain));
  REQUIRE(p->ok());
  CHECK_FALSE(p->map().has_extension());
  CHECK_FALSE(p->map().has_index());
  const KeyInfo pa = REQUIRE_VALUE(p->map().find("a"));
  const KeyInfo pb = REQUIRE_VALUE(p->map().find("b"));
  CHECK(pb.alignment == 1);
  CHECK(pb.offset == pa.offset);

  // A base alignment that is not a power of two.
  WriteOptions odd;
  odd.segment_alignment = 3;
  std::unique_ptr<Opened> q = open_bytes(write_or_die(store, FunctionMaps{}, odd));
  REQUIRE_MESSAGE(q->ok(), error_name(q->error()), ": ", q->result->failure().what);
  const KeyInfo qa = REQUIRE_VALUE(q->map().find("a"));
  const SegmentInfo q0 = REQUIRE_VALUE(q->map().segment(0));
  CHECK(qa.offset % 192 == 0);  // lcm(3, 64, 3)
  CHECK(q0.alignment == 192);
}

namespace {
// Calls check(map) for each way a lookup can go on the store of n keys: a
// wdedup file (its WDX1 index), and a plain one scanned or through the
// index build_index() makes.
template <class Check>
void each_lookup_path(const NamedDataStore& store, std::size_t n, Check check) {
  for (const bool ext : {true, false}) {
    for (const bool indexed : {false, true}) {
      if (ext && indexed) continue;  // a wdedup file has its index already
      CAPTURE(ext);
      CAPTURE(indexed);
      WriteOptions o;
      o.wdedup_extensions = ext;
      std::unique_ptr<Opened> f = open_bytes(write_or_die(store, FunctionMaps{}, o));
      REQUIRE(f->ok());
      NamedDataMap& m = f->map();
      AlignedBytes index(static_cast<std::size_t>(NamedDataMap::index_memory_size(n)), 8);
      if (indexed) REQUIRE(m.build_index(index.span()).ok());
      CHECK(m.has_index() == (ext || indexed));
      check(m);
    }
  }
}
}  // namespace

TEST_CASE("lookups: small stores scanned, large ones hashed; keys alike but for one middle byte") {
  // Up to 32 keys a lookup reads the slot of the query's one-byte tag, then
  // compares the key there (first and last 8 bytes, then the middle a word
  // at a time); past that it hashes. Keys of every
  // length 1-40 that are equal but for one byte, placed in the first word,
  // the last, or the middle, so each comparison path must tell them apart.
  auto key_of = [](std::size_t i, char mark) {
    const std::size_t len = 1 + i % 40;
    std::string k(len, 'p');
    k[len / 2] = mark;
    return k;
  };
  auto stored = [&](std::size_t i) { return key_of(i, static_cast<char>('A' + i / 40)); };
  for (const std::size_t n : {1u, 31u, 32u, 33u, 200u}) {
    for (const bool byte_first : {false, true}) {
      // byte_first: key 0 is a BYTE tensor, whose scalar_type the writer
      // omits (the default), so not every layout table has the same fields.
      std::vector<Bytes> data;
      data.reserve(n);
      NamedDataStore store;
      for (std::size_t i = 0; i < n; ++i) {
        const bool as_bytes = byte_first && i == 0;
        data.push_back(pattern(as_bytes ? i + 1 : 4 * (i + 1), static_cast<std::uint8_t>(i)));
        const Layout l = Layout::contiguous(as_bytes ? ScalarType::Byte : ScalarType::Float,
                                            {static_cast<int>(i + 1)});
        REQUIRE(store.add_named_data(stored(i), ByteSpan(data[i].data(), data[i].size()), 4, l).ok());
      }
      CAPTURE(n);
      CAPTURE(byte_first);
      each_lookup_path(store, n, [&](const NamedDataMap& m) {
        for (std::size_t i = 0; i < n; ++i) {
          const std::string k = stored(i);
          CAPTURE(k);
          Result<KeyInfo> info = m.find(k);
          REQUIRE(info.ok());
          CHECK(info->key_index == i);
          Result<TensorLayout> l = m.get_tensor_layout(k);
          REQUIRE(l.ok());
          CHECK(l->scalar_type == (byte_first && i == 0 ? ScalarType::Byte : ScalarType::Float));
          REQUIRE(l->sizes.size() == 1);
          CHECK(l->sizes[0] == static_cast<std::int32_t>(i + 1));
          REQUIRE(l->dim_order.size() == 1);
          CHECK(l->dim_order[0] == 0);
          Result<DataBuffer> d = m.get_data(k);
          REQUIRE(d.ok());
          const auto* b = static_cast<const std::uint8_t*>(d->data());
          CHECK(Bytes(b, b + d->size()) == data[i]);
          // The same length, first and last words, one byte apart; and one
          // byte longer.
          CHECK(m.find(key_of(i, 'z')).error() == Error::NotFound);
          CHECK(m.get_tensor_layout(key_of(i, 'z')).error() == Error::NotFound);
          CHECK(m.find(k + "x").error() == Error::NotFound);
        }
        CHECK(m.find("").error() == Error::NotFound);
      });
    }
  }
}

TEST_CASE("lookups: a query with a stored key's 32-bit tag and home slot is told apart by comparing the keys") {
  // Under seed 0x7E57C011 "tensor.332940" and "tensor.1221797" hash to the
  // same upper 32 bits (the tag a slot keeps) and the same home slot of
  // 128 (a birthday search over "tensor.<n>" found them). A map of the
  // first and 32 more keys (33: looked up through its index, of 128 slots)
  // holds the first in the second's home slot, with its tag: only the
  // comparison of the keys says the second is not there. Through the WDX1
  // block's index (the writer's hash_seed) and build_index's.
  constexpr std::uint64_t kSeed = 0x7E57C011;
  const std::string stored = "tensor.332940", query = "tensor.1221797";
  const std::uint64_t hs = detail::key_hash(stored.data(), stored.size(), kSeed);
  const std::uint64_t hq = detail::key_hash(query.data(), query.size(), kSeed);
  REQUIRE((hs >> 32) == (hq >> 32));
  REQUIRE(hs % 128 == hq % 128);
  std::uint8_t bytes[33];
  NamedDataStore store;
  for (std::size_t i = 0; i < 33; ++i) {
    bytes[i] = static_cast<std::uint8_t>(i);
    const std::string key = i == 0 ? stored : "filler." + std::to_string(i);
    REQUIRE(store.add_named_data(key, ByteSpan(bytes + i, 1)).ok());
  }
  for (const bool ext : {true, false}) {
    CAPTURE(ext);
    WriteOptions o;
    o.wdedup_extensions = ext;
    o.hash_seed = kSeed;
    Bytes file = write_or_die(store, FunctionMaps{}, o);
    if (ext) {
      const Nav n{file};
      REQUIRE(n.u64(n.ext() + format::ext_header::kHashSeed) == kSeed);
      REQUIRE(n.u32(n.ext() + format::ext_header::kSlotCount) == 128);
    }
    std::unique_ptr<Opened> f = open_bytes(file);
    REQUIRE(f->ok());
    NamedDataMap& m = f->map();
    AlignedBytes index(static_cast<std::size_t>(NamedDataMap::index_memory_size(33)), 8);
    REQUIRE(index.size() == 8 * 128);
    if (!ext) REQUIRE(m.build_index(index.span(), kSeed).ok());
    REQUIRE(m.has_index());
    REQUIRE(m.find(stored).ok());
    CHECK(m.find(stored)->key_index == 0);
    CHECK(m.find(query).error() == Error::NotFound);
    CHECK(m.get_data(query).error() == Error::NotFound);
    CHECK(m.get_tensor_layout(query).error() == Error::NotFound);
    Bytes buf(8);
    CHECK(m.load_data_into(query, buf.data(), buf.size()).error() == Error::NotFound);
  }
}

TEST_CASE("lookups: a stored key's first 8 or more bytes are not that key, through every lookup") {
  // "model.layers.0.weight_scale" is stored; its first 21 bytes,
  // "model.layers.0.weight", and its first 8 are not keys. The scan of a
  // plain file of more than 32 keys (no index) reads a key's first and last
  // 8 bytes at the query's length: only the comparison of the lengths
  // before it keeps the longer key from matching its own prefix. The tags
  // (up to 32 keys) and the indexes hash the length in; all are checked.
  const std::string stored = "model.layers.0.weight_scale";
  for (const std::size_t n : {2u, 33u}) {
    std::vector<std::uint8_t> bytes(n);
    NamedDataStore store;
    for (std::size_t i = 0; i < n; ++i) {
      bytes[i] = static_cast<std::uint8_t>(i + 1);
      REQUIRE(store.add_named_data(i == 0 ? stored : "filler." + std::to_string(i), ByteSpan(&bytes[i], 1)).ok());
    }
    CAPTURE(n);
    each_lookup_path(store, n, [&](const NamedDataMap& m) {
      REQUIRE(m.find(stored).ok());
      CHECK(str(m.find(stored)->key) == stored);
      const DataBuffer stored_data = REQUIRE_VALUE(m.get_data(stored));
      CHECK(*static_cast<const std::uint8_t*>(stored_data.data()) == 1);
      for (const std::size_t len : {stored.size() - 1, std::size_t{21}, std::size_t{16}, std::size_t{9}, std::size_t{8}}) {
        const std::string prefix = stored.substr(0, len);
        CAPTURE(prefix);
        CHECK(m.find(prefix).error() == Error::NotFound);
        CHECK(m.get_data(prefix).error() == Error::NotFound);
        Bytes buf(8);
        CHECK(m.load_data_into(prefix, buf.data(), buf.size()).error() == Error::NotFound);
      }
    });
  }
}

TEST_CASE("lookups: 32 keys with one tag (alike in length, first, middle and last 8 bytes)") {
  // 40-byte keys that differ only in bytes 9 and 10, which no tag reads
  // (it reads bytes 0-7, 16-23 and 32-39): every key of a family has the
  // same tag, so open() puts them in one run of slots, in file order, and
  // only the comparison of the keys themselves tells them apart. Byte 0
  // names the family and moves its tag: a run of 32 from a tag above 224
  // wraps past the last slot (1 family in 8; some of these 48 do).
  auto key_of = [](char family, std::size_t i) {
    std::string k(40, 'q');
    k[0] = family;
    k[9] = static_cast<char>('a' + i / 26);
    k[10] = static_cast<char>('a' + i % 26);
    return k;
  };
  for (char family = '0'; family < '0' + 48; ++family) {
    for (const std::size_t n : {2u, 9u, 32u}) {
      CAPTURE(family);
      CAPTURE(n);
      std::vector<Bytes> data;
      NamedDataStore store;
      for (std::size_t i = 0; i < n; ++i) data.push_back(pattern(8 + i, static_cast<std::uint8_t>(i)));
      for (std::size_t i = 0; i < n; ++i)
        REQUIRE(store.add_named_data(key_of(family, i), ByteSpan(data[i].data(), data[i].size()), 1).ok());
      for (const bool ext : {true, false}) {
        CAPTURE(ext);
        WriteOptions o;
        o.wdedup_extensions = ext;
        std::unique_ptr<Opened> f = open_bytes(write_or_die(store, FunctionMaps{}, o));
        REQUIRE(f->ok());
        for (std::size_t i = n; i-- > 0;) {
          Result<KeyInfo> info = f->map().find(key_of(family, i));
          REQUIRE(info.ok());
          CHECK(info->key_index == i);
          CHECK(info->size == 8 + i);
        }
        CHECK(f->map().find(key_of(family, n)).error() == Error::NotFound);  // same tag, not a key
        CHECK(f->map().find(key_of(static_cast<char>(family + 48), 0)).error() == Error::NotFound);
      }
    }
  }
}

TEST_CASE("read failures: get_data and load_data_into return the source's failure") {
  const Bytes simple = read_fixture("simple.ptd");
  if (simple.size() != 896) return;  // read_fixture has failed the test
  const std::uint64_t base = format::load_u64(simple.data() + format::kHeaderSegmentBasePos);
  REQUIRE(base == 384);
  Bytes buf(300, 0xCD);  // room for simple.c's 256 bytes

  SUBCASE("every data read fails: each key reports its own offset") {
    FailingSource src(simple.data(), simple.size(), base);
    AlignedBytes meta(280, 8);
    Result<NamedDataMap> m = NamedDataMap::open(src, meta.span());  // metadata reads succeed
    REQUIRE(m.ok());
    // simple.json: segments at base + 0, 128 and 256.
    const char* keys[] = {"simple.a", "simple.b", "simple.c"};
    const std::uint64_t at[] = {384, 512, 640};
    for (int i = 0; i < 3; ++i) {
      const std::string key = keys[i];
      CAPTURE(key);
      Result<DataBuffer> d = m->get_data(keys[i]);
      CHECK(d.error() == Error::IoError);
      CHECK(d.failure().at == at[i]);
      CHECK(d.failure().what == FailingSource::kWhat);  // passed through, not replaced
      CHECK(std::string(d.failure().what) == "injected read failure");
      Status st = m->load_data_into(keys[i], buf.data(), buf.size());
      CHECK(st.error() == Error::IoError);
      CHECK(st.failure().at == at[i]);
      CHECK(st.failure().what == FailingSource::kWhat);
    }
    // Lookups and size checks come before any read.
    CHECK(m->get_data("simple.x").error() == Error::NotFound);
    CHECK(m->load_data_into("simple.b", buf.data(), 99).error() == Error::BufferTooSmall);
    const KeyInfo b = REQUIRE_VALUE(m->find("simple.b"));
    CHECK(b.offset == 512);
  }
  SUBCASE("a failure inside one key's data leaves the keys before it readable") {
    FailingSource src(simple.data(), simple.size(), 512 + 50);  // inside simple.b
    AlignedBytes meta(280, 8);
    Result<NamedDataMap> m = NamedDataMap::open(src, meta.span());
    REQUIRE(m.ok());
    Result<DataBuffer> a = m->get_data("simple.a");
    REQUIRE(a.ok());
    CHECK(a->owns_memory());
    CHECK(a->size() == 37);
    CHECK(std::memcmp(a->data(), simple.data() + 384, 37) == 0);
    Result<DataBuffer> b = m->get_data("simple.b");
    CHECK(b.error() == Error::IoError);
    CHECK(b.failure().at == 512);  // where the failed read started
  }
  SUBCASE("wdedup file: metadata_size and open fail where their reads do") {
    const Bytes& w = wdedup_file_bytes();
    const std::uint64_t ext = (48 + format::load_u64(w.data() + format::kHeaderFlatbufferSizePos) + 15) / 16 * 16;
    REQUIRE(std::memcmp(w.data() + ext, "WDX1", 4) == 0);
    const std::uint64_t need = ext + format::load_u64(w.data() + ext + format::ext_header::kBlockSize);
    AlignedBytes meta(static_cast<std::size_t>(need), 8);
    struct Case {
      std::uint64_t fail_from;
      std::uint64_t metadata_at;  // UINT64_MAX: metadata_size succeeds
      std::uint64_t open_at;      // UINT64_MAX: open succeeds
    };
    const Case cases[] = {
        {0, 0, 0},                       // the 48-byte header
        {ext, ext, ext},                 // the 4-byte WDX1 magic probe
        {ext + 4, ext, ext},             // the 16-byte WDX1 header
        {need - 1, UINT64_MAX, 0},       // open's copy of [0, need)
        {need, UINT64_MAX, UINT64_MAX},  // metadata fully readable
    };
    for (const Case& c : cases) {
      CAPTURE(c.fail_from);
      FailingSource src(w.data(), w.size(), c.fail_from);
      Result<std::uint64_t> n = NamedDataMap::metadata_size(src);
      if (c.metadata_at == UINT64_MAX) {
        REQUIRE(n.ok());
        CHECK(*n == need);
      } else {
        CHECK(n.error() == Error::IoError);
        CHECK(n.failure().at == c.metadata_at);
        CHECK(n.failure().what == FailingSource::kWhat);
      }
      Result<NamedDataMap> m = NamedDataMap::open(src, meta.span());
      if (c.open_at == UINT64_MAX) {
        REQUIRE(m.ok());
        // Segment data starts past the metadata: every get_data fails there.
        const KeyInfo v = REQUIRE_VALUE(m->find("w.v"));
        Result<DataBuffer> d = m->get_data("w.v");  // 4096-aligned copy (posix_memalign)
        CHECK(d.error() == Error::IoError);
        CHECK(d.failure().at == v.offset);
        CHECK(m->get_data("empty").ok());  // zero bytes: nothing to read
      } else {
        CHECK(m.error() == Error::IoError);
        CHECK(m.failure().at == c.open_at);
      }
    }
  }
}

TEST_CASE("FileSource: a file that shrinks while open is Truncated where it now ends") {
  const Bytes simple = read_fixture("simple.ptd");
  if (simple.size() != 896) return;  // read_fixture has failed the test
  const std::string path = write_temp("runtime_shrinking.ptd", simple);
  std::unique_ptr<Opened> o = open_via(Via::File, path);
  REQUIRE(o->ok());
  const NamedDataMap& m = o->map();

  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 600) == 0);  // 88 of simple.b's 100 bytes (512..612) remain
  ::close(fd);
  CHECK(o->file->size() == 896);  // a source's size is fixed when it opens

  // simple.b: pread returns 88 bytes, then 0 at offset 600.
  Result<DataBuffer> b = m.get_data("simple.b");
  CHECK(b.error() == Error::Truncated);
  CHECK(std::string(b.failure().what) == "file shrank while open");
  CHECK(b.failure().at == 600);
  Bytes buf(100, 0xCD);
  Status st = m.load_data_into("simple.b", buf.data(), buf.size());
  CHECK(st.error() == Error::Truncated);
  CHECK(std::string(st.failure().what) == "file shrank while open");
  CHECK(st.failure().at == 600);
  // simple.c (640..896) lies wholly past the new end: the first pread returns 0.
  Result<DataBuffer> c = m.get_data("simple.c");
  CHECK(c.error() == Error::Truncated);
  CHECK(std::string(c.failure().what) == "file shrank while open");
  CHECK(c.failure().at == 640);
  // simple.a (384..421) is still there.
  Result<DataBuffer> a = m.get_data("simple.a");
  REQUIRE(a.ok());
  CHECK(a->size() == 37);
  CHECK(std::memcmp(a->data(), simple.data() + 384, 37) == 0);
  // Past the size the source was opened with is a different failure.
  std::uint8_t one = 0;
  Status past = o->file->read(896, &one, 1);
  CHECK(past.error() == Error::Truncated);
  CHECK(std::string(past.failure().what) == "read past the end of the file");
  CHECK(past.failure().at == 896);
}

#ifdef WDEDUP_TEST_PREAD_INTERPOSED
TEST_CASE("FileSource: short preads are continued where they ended, and interrupted ones (EINTR) made again") {
  // The small wdedup file through a FileSource whose preads return at most
  // 7 bytes, then whose every other pread fails with EINTR: the lent
  // metadata (its head, up to the WDX1 block's end) and every key's copy
  // must come out whole, as with plain reads.
  const Bytes& bytes = wdedup_file_bytes();
  for (const int mode : {0, 1}) {
    CAPTURE(mode);
    g_pread_calls = 0;
    g_pread_max = mode == 0 ? 7 : 0;
    g_pread_eintr = mode == 1;
    std::unique_ptr<Opened> o = open_via(Via::File, wdedup_file_path());
    REQUIRE(o->result.has_value());
    REQUIRE_MESSAGE(o->ok(), o->result->failure().what);
    std::vector<std::uint8_t> head(o->metadata.size());
    std::memcpy(head.data(), o->metadata.data(), head.size());
    CHECK(std::equal(head.begin(), head.end(), bytes.begin()));
    for (const ExpectedKey& k : small_file_keys()) {
      CAPTURE(k.key);
      Result<DataBuffer> d = o->map().get_data(k.key);
      REQUIRE_MESSAGE(d.ok(), d.failure().what);
      const auto* p = static_cast<const std::uint8_t*>(d->data());
      CHECK(Bytes(p, p + d->size()) == k.bytes);
      Bytes buf(k.bytes.size() + 1, 0xCD);
      REQUIRE(o->map().load_data_into(k.key, buf.data(), buf.size()).ok());
      CHECK(std::equal(k.bytes.begin(), k.bytes.end(), buf.begin()));
    }
    CHECK(verify_segments(o->map()).ok());
    g_pread_max = 0;
    g_pread_eintr = false;
    // Both ways took more calls than there are reads: the interposer was used.
    CHECK(g_pread_calls > 2 * static_cast<long>(small_file_keys().size()));
  }
}
#endif

#ifdef WDEDUP_TEST_PREAD_INTERPOSED
TEST_CASE("FileSource: a pread that fails after a short one names where it failed, in the window") {
  // The small wdedup file through a window from its byte 64: a read of 20
  // bytes at 29 (file offset 93) gets 7 from its first pread (93..100), and
  // the next, at 100, fails with EIO: `at` is 36, where that failed pread
  // started in the window (not 29, where the read started, nor 100, the
  // file's offset), and the 7 bytes read are the file's.
  const Bytes& bytes = wdedup_file_bytes();
  REQUIRE(bytes.size() > 200);
  Result<FileSource> f = FileSource::open(wdedup_file_path().c_str(), FileWindow{64});
  REQUIRE(f.ok());
  Bytes buf(20, 0xCD);
  g_pread_calls = 0;
  g_pread_max = 7;
  g_pread_eio_from = 100;
  const Status st = f->read(29, buf.data(), buf.size());
  g_pread_max = 0;
  g_pread_eio_from = -1;
  CHECK(st.error() == Error::IoError);
  CHECK(std::string(st.failure().what) == "pread failed: EIO, an I/O error (at = offset)");
  CHECK(st.failure().at == 36);
  CHECK(g_pread_calls == 2);
  CHECK(Bytes(buf.begin(), buf.begin() + 7) == Bytes(bytes.begin() + 93, bytes.begin() + 100));
  CHECK(buf[7] == 0xCD);
}

TEST_CASE("FileSource: a read of 3 GiB and 5 bytes is made in preads of 1 GiB at most, each where the last ended") {
  // pread's count is capped at 1 GiB (the code's comment: well below
  // SSIZE_MAX, where a kernel other than Linux's refuses a count past
  // INT_MAX): a sparse file of 3 GiB + 5 bytes read whole takes four calls,
  // at 0, 1, 2 and 3 GiB, of 1 GiB, 1 GiB, 1 GiB and 5 bytes. The calls
  // read nothing (g_pread_pretend) into address space reserved, never
  // touched.
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30, kSize = 3 * kGiB + 5;
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/runtime_3gib_sparse.bin";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  const bool sized = ::ftruncate(fd, static_cast<off_t>(kSize)) == 0;
  ::close(fd);
  if (!sized) {
    MESSAGE("cannot make a sparse 3 GiB file in " WDEDUP_TEST_TMPDIR ": not tried");
    ::unlink(path.c_str());
    return;
  }
  Result<FileSource> f = FileSource::open(path.c_str());
  REQUIRE(f.ok());
  REQUIRE(f->size() == kSize);
  void* const space = ::mmap(nullptr, static_cast<std::size_t>(kSize), PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(space != MAP_FAILED);
  g_pread_calls = 0;
  g_pread_pretend = true;
  const Status st = f->read(0, space, kSize);
  g_pread_pretend = false;
  CHECK(st.ok());
  CHECK(g_pread_calls == 4);
  const off64_t offsets[4] = {0, off64_t{1} << 30, off64_t{2} << 30, off64_t{3} << 30};
  const std::size_t counts[4] = {std::size_t{1} << 30, std::size_t{1} << 30, std::size_t{1} << 30, 5};
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(g_pread_offsets[i] == offsets[i]);
    CHECK(g_pread_counts[i] == counts[i]);
  }
  ::munmap(space, static_cast<std::size_t>(kSize));
  ::unlink(path.c_str());
}
#endif

TEST_CASE("a source moved or replaced after open is refused, not read") {
  // The map keeps its source's address. A FileSource moved from reads
  // nothing (size 0); one replaced by another file's would read that file's
  // bytes at this file's offsets. Both are refused once the size differs.
  const std::string simple = fixture("simple.ptd"), layouts = fixture("layouts.ptd");
  Result<FileSource> src = FileSource::open(simple.c_str());
  REQUIRE(src.ok());
  std::vector<std::uint8_t> metadata(4096);
  Result<NamedDataMap> m = NamedDataMap::open(*src, Span<std::uint8_t>(metadata.data(), metadata.size()));
  REQUIRE(m.ok());
  std::uint8_t buf[256];
  REQUIRE(m->load_data_into("simple.a", buf, sizeof buf).ok());

  FileSource moved = std::move(*src);  // *src is now empty
  Status st = m->load_data_into("simple.a", buf, sizeof buf);
  CHECK(st.error() == Error::InvalidArgument);
  CHECK(std::string(st.failure().what) == "the source is not the one opened (moved or replaced since open)");
  CHECK(st.failure().at == 0);
  Result<DataBuffer> d = m->get_data("simple.a");
  CHECK(d.error() == Error::InvalidArgument);
  CHECK(segment_content_hash(*m, 0).error() == Error::InvalidArgument);

  Result<FileSource> other = FileSource::open(layouts.c_str());
  REQUIRE(other.ok());
  const std::uint64_t other_size = other->size();
  REQUIRE(other_size != 896);
  *src = std::move(*other);  // another file where the map's source was
  st = m->load_data_into("simple.a", buf, sizeof buf);
  CHECK(st.error() == Error::InvalidArgument);
  CHECK(st.failure().at == other_size);

  *src = std::move(moved);  // the file it opened, back in place: reads again
  REQUIRE(m->load_data_into("simple.a", buf, sizeof buf).ok());
  const Bytes file = read_file(simple);
  CHECK(std::memcmp(buf, file.data() + 384, 37) == 0);
}

TEST_CASE("a memory source replaced after an open with lent metadata: its views are refused too") {
  // Opened with lent metadata, a map over memory asks the source for views
  // (get_data) instead of reading its own copy: a larger source put in its
  // place would hand out another file's bytes as a success.
  const Bytes simple = read_fixture("simple.ptd"), layouts = read_fixture("layouts.ptd");
  REQUIRE(layouts.size() > simple.size());
  std::vector<std::uint64_t> a((simple.size() + 7) / 8), b((layouts.size() + 7) / 8);
  std::memcpy(a.data(), simple.data(), simple.size());
  std::memcpy(b.data(), layouts.data(), layouts.size());
  BufferSource src(a.data(), simple.size());
  std::vector<std::uint8_t> metadata(4096);
  Result<NamedDataMap> m = NamedDataMap::open(src, Span<std::uint8_t>(metadata.data(), metadata.size()));
  REQUIRE(m.ok());
  REQUIRE(m->get_data("simple.a").ok());
  src = BufferSource(b.data(), layouts.size());
  Result<DataBuffer> d = m->get_data("simple.a");
  CHECK(d.error() == Error::InvalidArgument);
  CHECK(std::string(d.failure().what) == "the source is not the one opened (moved or replaced since open)");
  CHECK(d.failure().at == layouts.size());
  std::uint8_t buf[64];
  CHECK(m->load_data_into("simple.a", buf, sizeof buf).error() == Error::InvalidArgument);
  src = BufferSource(a.data(), simple.size());  // the same memory again
  Result<DataBuffer> again = m->get_data("simple.a");
  REQUIRE(again.ok());
  CHECK(std::memcmp(again->data(), simple.data() + 384, 37) == 0);
}

#ifdef WDEDUP_TEST_PREAD_INTERPOSED
TEST_CASE("sources: an open interrupted by a signal (EINTR) is made again, not failed") {
  // The first, non-blocking open of the path fails with EINTR once: both
  // sources open the file on the next call, and read its 896 bytes.
  const std::string simple = fixture("simple.ptd");
  const Bytes file = read_file(simple);
  REQUIRE(file.size() == 896);
  for (const int via : {0, 1}) {
    CAPTURE(via);
    g_open_calls = 0;
    g_open_eintr = 1;
    std::uint8_t first[8] = {};
    std::uint64_t size = 0;
    if (via == 0) {
      Result<MmapSource> m = MmapSource::open(simple.c_str());
      REQUIRE_MESSAGE(m.ok(), m.failure().what, " at ", m.failure().at);
      size = m->size();
      REQUIRE(m->read(0, first, sizeof first).ok());
    } else {
      Result<FileSource> f = FileSource::open(simple.c_str());
      REQUIRE_MESSAGE(f.ok(), f.failure().what, " at ", f.failure().at);
      size = f->size();
      REQUIRE(f->read(0, first, sizeof first).ok());
    }
    CHECK(size == 896);
    CHECK(std::memcmp(first, file.data(), sizeof first) == 0);
    // The interrupted call and the one made again, no other.
    CHECK(g_open_eintr == 0);
    CHECK(g_open_calls == 2);
    g_open_calls = 0;
  }
}
#endif

#ifdef WDEDUP_TEST_PREAD_INTERPOSED
namespace {
// Opens simple.ptd each of four ways (`open_via(via, path, fd)`: by path or
// through the caller's descriptor `fd`) with the next call of one system
// function failing (`fail_next`, its interposer's count): each is IoError
// `what` with `at` = `err` after that one failed call, and leaves no
// descriptor open but the caller's.
template <typename OpenVia>
void check_failed_call(int& fail_next, const char* what, int err, OpenVia open_via) {
  const std::string simple = fixture("simple.ptd");
  const int mine = ::open(simple.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(mine >= 0);
  const std::size_t fds = dir_entries("/proc/self/fd").size();
  for (int via = 0; via < 4; ++via) {
    CAPTURE(via);
    fail_next = 1;
    const Failure f = open_via(via, simple, mine);
    CHECK(fail_next == 0);  // the one call made, and failed
    fail_next = 0;
    CHECK(f.code == Error::IoError);
    CHECK(std::string(f.what) == what);
    CHECK(f.at == err);
    CHECK(dir_entries("/proc/self/fd").size() == fds);
  }
  CHECK(::close(mine) == 0);
}
}  // namespace

TEST_CASE("sources: an fstat that fails is IoError with its errno in at, and leaves nothing open") {
  // The fstat that sizes the file fails (EIO) for each way to open one, by
  // path and by descriptor: "fstat failed (at = errno)", at = EIO (5).
  check_failed_call(g_fstat_eio, "fstat failed (at = errno)", EIO, [](int via, const std::string& path, int fd) {
    return via == 0   ? MmapSource::open(path.c_str()).failure()
           : via == 1 ? FileSource::open(path.c_str()).failure()
           : via == 2 ? MmapSource::from_fd(fd).failure()
                      : FileSource::from_fd(fd).failure();
  });
}

TEST_CASE("sources: an mmap that fails is IoError with its errno in at, and leaves nothing open") {
  // MmapSource's one mmap fails (ENOMEM), of the whole file and of a window
  // of it ({100, 500}), from the path and from a descriptor: "mmap failed
  // (at = errno)", at = ENOMEM (12).
  check_failed_call(g_mmap_enomem, "mmap failed (at = errno)", ENOMEM, [](int via, const std::string& path, int fd) {
    const FileWindow window = via % 2 == 0 ? FileWindow{} : FileWindow{100, 500};
    return via < 2 ? MmapSource::open(path.c_str(), window).failure() : MmapSource::from_fd(fd, window).failure();
  });
}
#endif

#ifdef WDEDUP_TEST_PREAD_INTERPOSED
namespace {
/// Opens `path` by MmapSource and by FileSource with the first open failing
/// EWOULDBLOCK: each is IoError "open failed (at = errno)" at EWOULDBLOCK
/// (11) after that one call, no second (blocking) open made.
void check_ewouldblock_reported(const std::string& path) {
  for (const int via : {0, 1}) {
    CAPTURE(via);
    g_open_calls = 0;
    g_open_ewouldblock = 1;
    const Failure f = via == 0 ? MmapSource::open(path.c_str()).failure() : FileSource::open(path.c_str()).failure();
    g_open_ewouldblock = 0;
    CHECK(g_open_calls == 1);
    g_open_calls = 0;
    CHECK(f.code == Error::IoError);
    CHECK(std::string(f.what) == "open failed (at = errno)");
    CHECK(f.at == EWOULDBLOCK);
  }
}
}  // namespace

TEST_CASE("sources: a non-blocking open refused (EWOULDBLOCK) of a path that is no regular file is reported with EWOULDBLOCK") {
  // The first open fails with EWOULDBLOCK, as under another holder's write
  // lease; the path is then looked at (stat) to open a regular file again,
  // blocking. Here it names no file, so stat fails (ENOENT): the open's
  // failure is reported, "open failed (at = errno)" at EWOULDBLOCK (11),
  // not stat's errno, and no second open is made.
  const std::string missing = std::string(WDEDUP_TEST_TMPDIR) + "/runtime_leased_gone.ptd";
  ::unlink(missing.c_str());
  check_ewouldblock_reported(missing);
}
#endif

#ifdef WDEDUP_TEST_PREAD_INTERPOSED
TEST_CASE("sources: a non-blocking open refused (EWOULDBLOCK) of a directory is reported with EWOULDBLOCK, not opened again") {
  // As the missing path above, but the path names something: a directory,
  // which stat finds. Only a regular file is opened again, blocking (a
  // blocking open of a FIFO would wait for a writer): the open's failure is
  // reported, "open failed (at = errno)" at EWOULDBLOCK (11), after the one
  // call, not "not a regular file but a directory" after a second.
  check_ewouldblock_reported(WDEDUP_TEST_TMPDIR);
}

TEST_CASE("FileSource: a regular file refused a non-blocking open (EWOULDBLOCK) is opened again, close-on-exec and blocking") {
  // The blocking open made after EWOULDBLOCK (a write lease held) gives the
  // descriptor the source keeps: close-on-exec like the first open's, and
  // without O_NONBLOCK. Two opens, and the file's 896 bytes read through it.
  const std::string simple = fixture("simple.ptd");
  g_open_calls = 0;
  g_open_ewouldblock = 1;
  Result<FileSource> f = FileSource::open(simple.c_str());
  g_open_ewouldblock = 0;
  CHECK(g_open_calls == 2);
  g_open_calls = 0;
  REQUIRE(f.ok());
  CHECK(f->size() == 896);
  CHECK((::fcntl(f->fd(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((::fcntl(f->fd(), F_GETFL) & O_NONBLOCK) == 0);
  std::uint8_t head[8] = {};
  REQUIRE(f->read(0, head, sizeof head).ok());
  CHECK(std::memcmp(head + 4, "FT01", 4) == 0);
}
#endif

TEST_CASE("FileSource: the descriptor it opens from a path is close-on-exec, as from_fd's duplicate is") {
  // A child that execs must not inherit the model file's descriptor.
  Result<FileSource> src = FileSource::open(fixture("simple.ptd").c_str());
  REQUIRE(src.ok());
  const int fd_flags = ::fcntl(src->fd(), F_GETFD);
  REQUIRE(fd_flags >= 0);
  CHECK((fd_flags & FD_CLOEXEC) != 0);
}

TEST_CASE("FileSource: the descriptor is left blocking once the file is known to be regular") {
  // Opened O_NONBLOCK so that a FIFO cannot hang the open; a FUSE file
  // system would pass the flag on to reads, which could then fail with EAGAIN.
  Result<FileSource> src = FileSource::open(fixture("simple.ptd").c_str());
  REQUIRE(src.ok());
  const int flags = ::fcntl(src->fd(), F_GETFL);
  REQUIRE(flags >= 0);
  CHECK((flags & O_NONBLOCK) == 0);
}

TEST_CASE("verify_segment through a FileSource: a 10,000-byte segment hashed in 4 KiB chunks") {
  // 10,000 = 2 * 4096 + 1808: two full chunks and a partial one. A key
  // after it keeps the segment away from the end of the file.
  const Bytes big = pattern(10000, 11), tail = pattern(20, 12);
  NamedDataStore store;
  REQUIRE(store.add_named_data("big", ByteSpan(big.data(), big.size()), 1).ok());
  REQUIRE(store.add_named_data("tail", ByteSpan(tail.data(), tail.size()), 1).ok());
  const Bytes good = write_or_die(store, FunctionMaps{}, WriteOptions{});

  std::unique_ptr<Opened> o = open_via(Via::File, write_temp("runtime_verify_chunks.ptd", good));
  REQUIRE(o->result.has_value());
  REQUIRE_MESSAGE(o->ok(), error_name(o->error()), ": ", o->result->failure().what);
  const KeyInfo k = REQUIRE_VALUE(o->map().find("big"));
  REQUIRE(k.size == 10000);
  const std::uint64_t off = k.offset;
  REQUIRE(std::memcmp(good.data() + off, big.data(), big.size()) == 0);  // the offset is the real one
  Result<SegmentInfo> seg = o->map().segment(k.segment_index);
  REQUIRE(seg.ok());
  CHECK(seg->offset == off);
  CHECK(seg->size == 10000);
  // The stored hash is XXH3-64 (seed 0) of exactly these bytes, and the
  // chunked hash agrees with the one-shot hash.
  CHECK(seg->content_hash == XXH3_64bits(big.data(), big.size()));
  const std::uint64_t hash = REQUIRE_VALUE(segment_content_hash(o->map(), k.segment_index));
  CHECK(hash == seg->content_hash);
  CHECK(verify_segment(o->map(), k.segment_index).ok());
  CHECK(verify_segments(o->map()).ok());

  // One flipped byte in the second chunk, then in the partial last one.
  for (const std::uint64_t at : {std::uint64_t{5000}, std::uint64_t{9999}}) {
    CAPTURE(at);
    Bytes bad = good;
    bad[static_cast<std::size_t>(off + at)] ^= 0x01;
    for (Via via : {Via::File, Via::Mmap}) {  // chunked and one-shot hashing
      CAPTURE(via_name(via));
      std::unique_ptr<Opened> b = open_via(via, write_temp("runtime_verify_chunks_bad.ptd", bad));
      REQUIRE(b->ok());  // open does not hash
      Status st = verify_segment(b->map(), k.segment_index);
      CHECK(st.error() == Error::MalformedSegment);
      CHECK(std::string(st.failure().what) == "segment content hash mismatch");
      CHECK(st.failure().at == off);  // the segment's file offset
      Status all = verify_segments(b->map());
      CHECK(all.error() == Error::MalformedSegment);
      CHECK(all.failure().at == off);
      const std::uint32_t tail_segment = REQUIRE_VALUE(o->map().find("tail")).segment_index;
      CHECK(verify_segment(b->map(), tail_segment).ok());
    }
  }

  // A read failing at byte 5000 fails the chunk that holds it, [4096, 8192).
  FailingSource src(good.data(), good.size(), off + 5000);
  AlignedBytes meta(static_cast<std::size_t>(REQUIRE_VALUE(NamedDataMap::metadata_size(src))), 8);
  Result<NamedDataMap> m = NamedDataMap::open(src, meta.span());
  REQUIRE(m.ok());
  Result<std::uint64_t> h = segment_content_hash(*m, k.segment_index);
  CHECK(h.error() == Error::IoError);
  CHECK(h.failure().at == off + 4096);
  Status st = verify_segment(*m, k.segment_index);
  CHECK(st.error() == Error::IoError);
  CHECK(st.failure().at == off + 4096);
  CHECK(st.failure().what == FailingSource::kWhat);
}

TEST_CASE("verify through memory the caller lends: any size from 1 byte, read in pieces of that size") {
  // A source without a view that records every read: the pieces must be
  // the scratch's size (the last one shorter) and cover the segment once.
  struct Recording final : DataSource {
    const std::uint8_t* data;
    std::uint64_t n;
    mutable std::vector<std::pair<std::uint64_t, std::uint64_t>> reads;
    Recording(const std::uint8_t* d, std::uint64_t size) : data(d), n(size) {}
    std::uint64_t size() const noexcept override { return n; }
    const std::uint8_t* view(std::uint64_t, std::uint64_t) const noexcept override { return nullptr; }
    Status read(std::uint64_t offset, void* dst, std::uint64_t size) const noexcept override {
      if (offset > n || size > n - offset) return Status(Error::Truncated, "read past the end", offset);
      reads.emplace_back(offset, size);
      if (size) std::memcpy(dst, data + offset, static_cast<std::size_t>(size));
      return detail::ok_status();
    }
  };
  const Bytes big = pattern(10000, 21), tail = pattern(20, 22);
  NamedDataStore store;
  REQUIRE(store.add_named_data("big", ByteSpan(big.data(), big.size()), 1).ok());
  REQUIRE(store.add_named_data("tail", ByteSpan(tail.data(), tail.size()), 1).ok());
  REQUIRE(store.add_named_data("nothing", ByteSpan(), 1).ok());
  const Bytes good = write_or_die(store, FunctionMaps{}, WriteOptions{});
  Recording src(good.data(), good.size());
  AlignedBytes meta(static_cast<std::size_t>(REQUIRE_VALUE(NamedDataMap::metadata_size(src))), 8);
  Result<NamedDataMap> m = NamedDataMap::open(src, meta.span());
  REQUIRE(m.ok());
  const KeyInfo k = REQUIRE_VALUE(m->find("big"));
  const std::uint64_t off = REQUIRE_VALUE(m->segment(k.segment_index)).offset;
  const std::uint64_t want = XXH3_64bits(big.data(), big.size());
  for (const std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{10000},
                                  std::size_t{65536}}) {
    CAPTURE(piece);
    std::vector<std::uint8_t> scratch(piece);
    src.reads.clear();
    Result<std::uint64_t> h = segment_content_hash(*m, k.segment_index, Span<std::uint8_t>(scratch.data(), piece));
    REQUIRE(h.ok());
    CHECK(*h == want);
    const std::size_t count = (10000 + piece - 1) / piece;
    REQUIRE(src.reads.size() == count);
    CHECK(src.reads.front() == std::make_pair(off, std::uint64_t{piece < 10000 ? piece : 10000}));
    CHECK(src.reads.back() == std::make_pair(off + (count - 1) * piece, std::uint64_t{10000 - (count - 1) * piece}));
    CHECK(verify_segment(*m, k.segment_index, Span<std::uint8_t>(scratch.data(), piece)).ok());
    CHECK(verify_segments(*m, Span<std::uint8_t>(scratch.data(), piece)).ok());
  }
  // No scratch for a source that must be read: refused by name, nothing read.
  src.reads.clear();
  Result<std::uint64_t> none = segment_content_hash(*m, k.segment_index, Span<std::uint8_t>());
  CHECK(none.error() == Error::InvalidArgument);
  CHECK(std::string(none.failure().what) == "no scratch memory to read the segment into");
  CHECK(none.failure().at == k.segment_index);
  CHECK(src.reads.empty());
  CHECK(verify_segments(*m, Span<std::uint8_t>()).error() == Error::InvalidArgument);
  // A segment of no bytes has nothing to read: no scratch is needed.
  const std::uint32_t nothing = REQUIRE_VALUE(m->find("nothing")).segment_index;
  const SegmentInfo nothing_segment = REQUIRE_VALUE(m->segment(nothing));
  REQUIRE(nothing_segment.size == 0);
  src.reads.clear();
  Result<std::uint64_t> empty_hash = segment_content_hash(*m, nothing, Span<std::uint8_t>());
  REQUIRE(empty_hash.ok());
  CHECK(*empty_hash == XXH3_64bits(nullptr, 0));
  CHECK(verify_segment(*m, nothing, Span<std::uint8_t>()).ok());
  CHECK(src.reads.empty());
  // Through a view (a BufferSource) the scratch is not needed, so none is fine.
  std::unique_ptr<Opened> v = open_bytes(good);
  REQUIRE(v->ok());
  const std::uint64_t through_view = REQUIRE_VALUE(segment_content_hash(v->map(), k.segment_index, Span<std::uint8_t>()));
  CHECK(through_view == want);
  // The overloads without scratch read through their 4 KiB buffer on the
  // stack: 4096, 4096 and 1808 bytes; verify_segments then "tail", 20 bytes.
  using Reads = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  const Reads in_4k{{off, 4096}, {off + 4096, 4096}, {off + 8192, 1808}};
  src.reads.clear();
  const std::uint64_t stack_hash = REQUIRE_VALUE(segment_content_hash(*m, k.segment_index));
  CHECK(stack_hash == want);
  CHECK(src.reads.size() == 3);
  CHECK(src.reads == in_4k);
  src.reads.clear();
  CHECK(verify_segment(*m, k.segment_index).ok());
  CHECK(src.reads.size() == 3);
  CHECK(src.reads == in_4k);
  const KeyInfo tail_key = REQUIRE_VALUE(m->find("tail"));
  const std::uint64_t tail_off = REQUIRE_VALUE(m->segment(tail_key.segment_index)).offset;
  Reads every = in_4k;
  every.emplace_back(tail_off, 20);
  src.reads.clear();
  CHECK(verify_segments(*m).ok());
  CHECK(src.reads == every);
  CHECK(src.reads.size() == 4);
  // A flipped byte in the last piece is found through 3-byte pieces.
  Bytes bad = good;
  bad[static_cast<std::size_t>(off + 9999)] ^= 0x40;
  Recording bad_src(bad.data(), bad.size());
  Result<NamedDataMap> bm = NamedDataMap::open(bad_src, meta.span());
  REQUIRE(bm.ok());
  std::uint8_t three[3];
  const Status st = verify_segment(*bm, k.segment_index, Span<std::uint8_t>(three, 3));
  CHECK(st.error() == Error::MalformedSegment);
  CHECK(st.failure().at == off);
}

TEST_CASE("check_source: a map opened in place fails once its BufferSource points at other memory of the same size") {
  // A memory-backed source of the caller's (instance() 0) whose bytes moved:
  // the same size, the same instance, another address. Only the address
  // check in check_source() tells it (the bytes are even identical).
  const Bytes first = read_fixture("simple.ptd");
  const Bytes second = first;  // same size and bytes, another address
  REQUIRE(first.data() != second.data());
  BufferSource src(first.data(), first.size());
  Result<NamedDataMap> m = NamedDataMap::open(src);
  REQUIRE(m.ok());
  REQUIRE(m->check_source().ok());
  src = BufferSource(second.data(), second.size());
  REQUIRE(src.size() == m->file_size());
  REQUIRE(src.instance() == 0);
  const Status st = m->check_source();
  CHECK(st.error() == Error::InvalidArgument);
  src = BufferSource(first.data(), first.size());  // back where it was
  CHECK(m->check_source().ok());
}
