// tests/support/fail_mmap.cpp — loaded with LD_PRELOAD into the demo
// (tools/check_demo.py) and wdedup-bench (benchmarks/check_args.py), it
// makes mmap(2) of some files fail with ENOMEM, as it does where a process
// has run out of address space or mappings: MmapSource and MappedFile then
// refuse them. So a test produces from outside what nothing else can: a
// demo store that does not read back (it must leave the old file), and a
// harness store that cannot be mapped (the group names it and goes on). A
// file is refused when its name (the last part of its path) contains one
// of the comma-separated strings in $WDEDUP_TEST_FAIL_MMAP_OF; every other
// mapping (anonymous ones, the allocator's) goes through. Linux only
// (/proc/self/fd names the file).
//
// Meson builds with _FILE_OFFSET_BITS=64, under which glibc's <sys/mman.h>
// names mmap "mmap64" too: both would define one symbol. Without it each
// name is its own, and the shim defines both.
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <sys/mman.h>
#include <sys/types.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "shim.hpp"

namespace {

using Mmap = void* (*)(void*, std::size_t, int, int, int, off_t);
using Mmap64 = void* (*)(void*, std::size_t, int, int, int, off64_t);

/// Whether `fd` is open on a file whose name contains one of `parts`
/// (comma-separated).
bool refused(int fd) {
  const char* parts = std::getenv("WDEDUP_TEST_FAIL_MMAP_OF");
  if (parts == nullptr || *parts == '\0') return false;
  char path[4096];
  const char* name = wdedup_shim::file_name_of(fd, path);
  if (name == nullptr) return false;
  for (const char* s = parts; *s != '\0';) {
    const char* comma = std::strchr(s, ',');
    const std::size_t k = comma != nullptr ? static_cast<std::size_t>(comma - s) : std::strlen(s);
    if (k != 0 && std::string_view(name).find(std::string_view(s, k)) != std::string_view::npos) return true;
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
  static const Mmap real = wdedup_shim::next_symbol<Mmap>("mmap");
  return shim(real, addr, length, prot, flags, fd, offset);
}
extern "C" void* mmap64(void* addr, std::size_t length, int prot, int flags, int fd, off64_t offset) {
  static const Mmap64 real = wdedup_shim::next_symbol<Mmap64>("mmap64");
  return shim(real, addr, length, prot, flags, fd, offset);
}
