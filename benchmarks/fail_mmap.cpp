// benchmarks/fail_mmap.cpp — for check_args.py only: loaded into
// wdedup-bench with LD_PRELOAD, it makes mmap(2) of some files fail with
// ENOMEM, as it does where a process has run out of address space or
// mappings. The runtime group's stores are then refused by MmapSource, the
// one failure of that group a test can produce from outside (the others
// need a wrong library): the group must name the file and go on with what
// it can still measure. A file is refused when its name ends with one of
// the comma-separated suffixes in $WBENCH_FAIL_MMAP_OF; every other mapping
// (anonymous ones, the allocator's) goes through. Linux only (/proc/self/fd
// names the file).
//
// Meson builds with _FILE_OFFSET_BITS=64, under which glibc's <sys/mman.h>
// names mmap "mmap64" too: both would define one symbol. Without it each
// name is its own, and the shim defines both.
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "next_symbol.hpp"

namespace {

using Mmap = void* (*)(void*, std::size_t, int, int, int, off_t);
using Mmap64 = void* (*)(void*, std::size_t, int, int, int, off64_t);

/// Whether `fd` is open on a file whose name ends with one of `suffixes`
/// (comma-separated).
bool refused(int fd) {
  const char* suffixes = std::getenv("WBENCH_FAIL_MMAP_OF");
  if (fd < 0 || suffixes == nullptr || *suffixes == '\0') return false;
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  const std::size_t len = static_cast<std::size_t>(n);
  for (const char* s = suffixes; *s != '\0';) {
    const char* comma = std::strchr(s, ',');
    const std::size_t k = comma != nullptr ? static_cast<std::size_t>(comma - s) : std::strlen(s);
    if (k != 0 && k <= len && std::memcmp(path + len - k, s, k) == 0) return true;
    s += k + (comma != nullptr ? 1 : 0);
  }
  return false;
}

/// MAP_FAILED with ENOMEM for a refused file, else `real`'s answer.
template <class F, class Off>
void* shim(F real, void* addr, std::size_t length, int prot, int flags, int fd, Off offset) {
  if (refused(fd)) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  if (real == nullptr) {
    errno = ENOSYS;
    return MAP_FAILED;
  }
  return real(addr, length, prot, flags, fd, offset);
}

}  // namespace

// Both names: the library maps through mmap64 where glibc declares it
// (detail::file_mmap), through mmap elsewhere.
extern "C" void* mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) {
  static const Mmap real = wbench_shim::next_symbol<Mmap>("mmap");
  return shim(real, addr, length, prot, flags, fd, offset);
}
extern "C" void* mmap64(void* addr, std::size_t length, int prot, int flags, int fd, off64_t offset) {
  static const Mmap64 real = wbench_shim::next_symbol<Mmap64>("mmap64");
  return shim(real, addr, length, prot, flags, fd, offset);
}
