// Files past 4 GiB through FileSource and MmapSource: opened, sized and
// read at their true offsets. Built twice: for this machine, and (where a
// 32-bit program builds and runs: tests/meson.build) with -m32 and without
// _FILE_OFFSET_BITS=64, whose off_t has 32 bits. There the runtime makes
// the 64-bit calls itself; before, open() failed with EOVERFLOW, and a
// libc whose open() forces O_LARGEFILE would have read wrapped offsets.
// The writer, built there, refuses a file past what off_t reaches.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "support/ptd_files.hpp"
#include "wdedup/ptd_writer.hpp"
#include "wdedup/runtime.hpp"

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

/// A sparse file of `size` bytes holding `n` bytes at `at` and `n2` at
/// `at2` (64-bit calls: the test itself is built with a 32-bit off_t in
/// one of its builds).
bool make_sparse(const std::string& path, std::uint64_t size, std::uint64_t at, const char* bytes, std::size_t n,
                 std::uint64_t at2, const char* bytes2, std::size_t n2) {
#if defined(__GLIBC__) && defined(__USE_LARGEFILE64)
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_LARGEFILE, 0644);
  if (fd < 0) return false;
  const bool ok = ::ftruncate64(fd, static_cast<off64_t>(size)) == 0 &&
                  ::pwrite64(fd, bytes, n, static_cast<off64_t>(at)) == static_cast<ssize_t>(n) &&
                  ::pwrite64(fd, bytes2, n2, static_cast<off64_t>(at2)) == static_cast<ssize_t>(n2);
#else  // (musl, macOS: off_t has 64 bits everywhere)
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = ::ftruncate(fd, static_cast<off_t>(size)) == 0 &&
                  ::pwrite(fd, bytes, n, static_cast<off_t>(at)) == static_cast<ssize_t>(n) &&
                  ::pwrite(fd, bytes2, n2, static_cast<off_t>(at2)) == static_cast<ssize_t>(n2);
#endif
  return ::close(fd) == 0 && ok;
}

}  // namespace

TEST_CASE("a sparse file of 5 GiB: FileSource reads past 2 and 4 GiB; MmapSource maps it or says it cannot, and maps a window of it") {
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/large_file_" + std::to_string(8 * sizeof(void*)) + ".bin";
  const std::uint64_t size = 5 * kGiB + 16, at = 4 * kGiB - 4;
  const char marks[] = "wdedup: across 4 GiB";  // 20 bytes from 4 GiB - 4
  // And 20 past 4 GiB, for a window there: an offset cut to 32 bits would
  // read the zeros at 4096 + 10.
  const std::uint64_t at2 = 4 * kGiB + 4096 + 10;
  const char marks2[] = "wdedup: past 4 GiB!!";
  if (!make_sparse(path, size, at, marks, sizeof marks - 1, at2, marks2, sizeof marks2 - 1)) {
    MESSAGE("cannot make a sparse 5 GiB file in " WDEDUP_TEST_TMPDIR ": not tried");
    return;
  }
  {
    wdedup::Result<wdedup::FileSource> src = wdedup::FileSource::open(path.c_str());
    REQUIRE_MESSAGE(src.ok(), src.failure().what, " ", src.failure().at);
    CHECK(src->size() == size);
    char got[20] = {};
    REQUIRE(src->read(at, got, sizeof got).ok());
    CHECK(std::memcmp(got, marks, sizeof got) == 0);
    // Past 2 GiB (a 32-bit off_t's limit), in the holes: zeros.
    char zeros[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    REQUIRE(src->read(2 * kGiB + 1, zeros, sizeof zeros).ok());
    CHECK(std::memcmp(zeros, "\0\0\0\0\0\0\0\0", 8) == 0);
    // The last bytes, and one past them.
    REQUIRE(src->read(size - 8, zeros, sizeof zeros).ok());
    const wdedup::Status past = src->read(size - 4, zeros, sizeof zeros);
    CHECK(past.error() == wdedup::Error::Truncated);
    CHECK(past.failure().at == size - 4);
  }
  {
    wdedup::Result<wdedup::MmapSource> m = wdedup::MmapSource::open(path.c_str());
    if (sizeof(void*) < 8) {
      // More than a 32-bit address space: refused, with the size.
      CHECK(m.error() == wdedup::Error::IoError);
      CHECK(std::string(m.failure().what) == "file too large to map");
      CHECK(m.failure().at == size);
    } else {
      REQUIRE(m.ok());
      CHECK(m->size() == size);
      const std::uint8_t* v = m->view(at, 20);
      REQUIRE(v != nullptr);
      CHECK(std::memcmp(v, marks, 20) == 0);
    }
  }
  if (sizeof(void*) < 8) {
    // A window 100 bytes into its page whose length fits a 32-bit size_t
    // alone but not with those 100 bytes: refused with its length, where the
    // mapping's size (100 + length) would wrap to 0. One byte shorter fits
    // and is asked of mmap, which has no 4 GiB to give.
    const std::uint64_t fits = SIZE_MAX - 100;
    wdedup::Result<wdedup::MmapSource> wraps = wdedup::MmapSource::open(path.c_str(), wdedup::FileWindow{100, fits + 1});
    CHECK(wraps.error() == wdedup::Error::IoError);
    CHECK(std::string(wraps.failure().what) == "file too large to map");
    CHECK(wraps.failure().at == fits + 1);
    wdedup::Result<wdedup::MmapSource> most = wdedup::MmapSource::open(path.c_str(), wdedup::FileWindow{100, fits});
    CHECK(most.error() == wdedup::Error::IoError);
    CHECK(std::string(most.failure().what) == "mmap failed (at = errno)");
    CHECK(most.failure().at == ENOMEM);
  }
  {
    // A window of it, past 2 and 4 GiB: a 32-bit program maps it too (the
    // mapping starts at the page before `at`, past a 32-bit off_t), from the
    // path or from a descriptor.
#if defined(__GLIBC__) && defined(__USE_LARGEFILE64)
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_LARGEFILE);
#else
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
#endif
    REQUIRE(fd >= 0);
    const wdedup::FileWindow around{at - 100, 200}, past{4 * kGiB + 4096, 4096};
    for (int how = 0; how < 2; ++how) {
      CAPTURE(how);
      wdedup::Result<wdedup::MmapSource> m =
          how == 0 ? wdedup::MmapSource::open(path.c_str(), around) : wdedup::MmapSource::from_fd(fd, around);
      REQUIRE_MESSAGE(m.ok(), m.failure().what, " ", m.failure().at);
      CHECK(m->size() == 200);
      const std::uint8_t* v = m->view(100, 20);
      REQUIRE(v != nullptr);
      CHECK(std::memcmp(v, marks, 20) == 0);
      CHECK(reinterpret_cast<std::uintptr_t>(m->data()) % 4096 == (at - 100) % 4096);
      wdedup::Result<wdedup::MmapSource> z =
          how == 0 ? wdedup::MmapSource::open(path.c_str(), past) : wdedup::MmapSource::from_fd(fd, past);
      REQUIRE(z.ok());
      CHECK(z->size() == 4096);
      CHECK(std::memcmp(z->data() + 10, marks2, 20) == 0);
      CHECK(std::vector<std::uint8_t>(z->data(), z->data() + 10) == std::vector<std::uint8_t>(10, 0));
      wdedup::Result<wdedup::FileSource> f =
          how == 0 ? wdedup::FileSource::open(path.c_str(), around) : wdedup::FileSource::from_fd(fd, around);
      REQUIRE(f.ok());
      char got[20] = {};
      REQUIRE(f->read(100, got, sizeof got).ok());
      CHECK(std::memcmp(got, marks, sizeof got) == 0);
      CHECK(f->read(190, got, 20).error() == wdedup::Error::Truncated);  // the window ends at 200
    }
    CHECK(::close(fd) == 0);
  }
  CHECK(::unlink(path.c_str()) == 0);
}

#if defined(__linux__) && defined(__LP64__)
TEST_CASE("an offset past what off_t holds is refused by the pread call (EOVERFLOW), not passed on negative") {
  // 64-bit Linux: off_t holds up to 2^63 - 1. FileSource's pread call
  // refuses 2^63 and 2^64 - 1 itself, EOVERFLOW, where a cast to off_t would
  // hand the kernel a negative offset (EINVAL). 2^63 - 1 is passed on: the
  // kernel refuses a byte there as reaching past off_t (EINVAL); 2^62 reads
  // nothing past the file's end (0).
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/large_file_off_t_" + std::to_string(8 * sizeof(void*)) + ".bin";
  REQUIRE(wdedup_test::write_file(path, std::vector<std::uint8_t>(16, 7)));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  char b = 0;
  for (const std::uint64_t past : {std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    CAPTURE(past);
    errno = 0;
    CHECK(wdedup::detail::file_pread(fd, &b, 1, past) == -1);
    CHECK(errno == EOVERFLOW);
  }
  errno = 0;
  CHECK(wdedup::detail::file_pread(fd, &b, 1, (std::uint64_t{1} << 63) - 1) == -1);
  CHECK(errno == EINVAL);
  CHECK(wdedup::detail::file_pread(fd, &b, 1, std::uint64_t{1} << 62) == 0);
  CHECK(wdedup::detail::file_pread(fd, &b, 1, 15) == 1);
  CHECK(b == 7);
  CHECK(::close(fd) == 0);
  CHECK(::unlink(path.c_str()) == 0);
}

TEST_CASE("an offset past what off_t holds is refused by the mmap call (EOVERFLOW), not passed on") {
  // The same bound in detail::file_mmap: 2^64 - 1 is refused there,
  // EOVERFLOW, where the kernel, handed it, would refuse an offset that is
  // not page-aligned (EINVAL); 2^63 is refused there (the kernel would say
  // EOVERFLOW too). 2^63 - 1 is passed on, and the kernel refuses it as not
  // page-aligned (EINVAL). 0 maps the file's bytes. (MmapSource asks only
  // within a file whose size an off_t held.)
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/large_file_mmap_off_t_" + std::to_string(8 * sizeof(void*)) + ".bin";
  REQUIRE(wdedup_test::write_file(path, std::vector<std::uint8_t>(16, 7)));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  for (const std::uint64_t past : {std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    CAPTURE(past);
    errno = 0;
    CHECK(wdedup::detail::file_mmap(4096, fd, past) == MAP_FAILED);
    CHECK(errno == EOVERFLOW);
  }
  errno = 0;
  CHECK(wdedup::detail::file_mmap(4096, fd, (std::uint64_t{1} << 63) - 1) == MAP_FAILED);
  CHECK(errno == EINVAL);
  void* const p = wdedup::detail::file_mmap(16, fd, 0);
  REQUIRE(p != MAP_FAILED);
  CHECK(std::memcmp(p, std::vector<std::uint8_t>(16, 7).data(), 16) == 0);
  CHECK(::munmap(p, 16) == 0);
  CHECK(::close(fd) == 0);
  CHECK(::unlink(path.c_str()) == 0);
}
#endif

TEST_CASE("the writer refuses a file past what this build's off_t reaches, before making anything") {
  if (sizeof(off_t) >= 8) {
    MESSAGE("off_t has 64 bits in this build: nothing to refuse (the -m32 build without "
            "_FILE_OFFSET_BITS=64 runs this)");
    return;
  }
  // One byte asking for 2^31 alignment: its segment starts at 2 GiB.
  wdedup::NamedDataStore store;
  const std::uint8_t one = 42;
  REQUIRE(store.add_named_data("w", wdedup::ByteSpan(&one, 1), std::int64_t{1} << 31).ok());
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/large_file_writer_32";
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/store.ptd";
  const std::vector<std::uint8_t> before = {'o', 'l', 'd'};
  REQUIRE(wdedup_test::write_file(path, before));
  const wdedup::Expected<wdedup::WriteStats> w = wdedup::write_ptd_file(store, path);
  REQUIRE(!w);
  CHECK(w.error() == wdedup::Error::IoError);
  CHECK(w.message() == "cannot write '" + path + "': the file would be 2147483649 bytes, more than this program's "
                       "32-bit off_t reaches (2^31 - 1); build it with -D_FILE_OFFSET_BITS=64");
  // The destination is as it was, and no temporary file was made.
  CHECK(wdedup_test::read_file(path) == before);
  CHECK(wdedup_test::dir_entries(dir) == std::vector<std::string>{"store.ptd"});
  CHECK(::unlink(path.c_str()) == 0);
  CHECK(::rmdir(dir.c_str()) == 0);
}

TEST_CASE("a 32-bit off_t build replaces an existing file past 2 GiB with a smaller one") {
  // lstat of the old file fails there (EOVERFLOW), though the writer needs
  // only its type, mode and owner, and the new file fits.
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/large_file_replace_" + std::to_string(8 * sizeof(void*));
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/store.ptd";
  // 3 GiB, sparse: made by truncate(1), as this program cannot make a file past its off_t.
  const bool sparse = std::system(("truncate -s 3G '" + path + "'").c_str()) == 0 && ::chmod(path.c_str(), 0640) == 0;
  if (!sparse) {
    ::unlink(path.c_str());
    MESSAGE("cannot make a sparse 3 GiB file in " WDEDUP_TEST_TMPDIR ": not tried");
    return;
  }
  wdedup::NamedDataStore store;
  const std::vector<std::uint8_t> data(100, 7);
  REQUIRE(store.add_named_data("w", wdedup::ByteSpan(data.data(), data.size()), 64).ok());
  errno = 0;
  CHECK(wdedup::detail::can_create_file(path));
  const wdedup::Expected<wdedup::WriteStats> w = wdedup::write_ptd_file(store, path);
  CHECK_MESSAGE(w.ok(), (w.ok() ? std::string() : w.message()));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  if (w.ok()) CHECK(static_cast<std::uint64_t>(st.st_size) == w->file_size);
  CHECK(wdedup_test::dir_entries(dir) == std::vector<std::string>{"store.ptd"});
  CHECK(::unlink(path.c_str()) == 0);
  CHECK(::rmdir(dir.c_str()) == 0);
}
