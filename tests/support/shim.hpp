// tests/support/shim.hpp — for the LD_PRELOAD shims the checks load
// (fail_mmap.cpp here; benchmarks/interrupt_json_write.cpp and
// wrong_first_digest.cpp): the definition of a function that the shim's own
// one hides, and the name of the file a descriptor is open on. Linux (the
// name comes from /proc). Nothing here allocates: a shim of mmap may run
// inside the allocator. Not installed.
#ifndef WDEDUP_TESTS_SUPPORT_SHIM_HPP
#define WDEDUP_TESTS_SUPPORT_SHIM_HPP

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace wdedup_shim {

/// The next definition of `name` after the shim's, as a `F` (a function
/// pointer type); null where there is none.
template <class F>
F next_symbol(const char* name) {
  F f = nullptr;
  void* sym = ::dlsym(RTLD_NEXT, name);
  static_assert(sizeof f == sizeof sym, "a function pointer the size of dlsym's");
  std::memcpy(&f, &sym, sizeof f);  // (a cast between object and function pointers is only conditionally allowed)
  return f;
}

/// The name (the last part of the path) of the file `fd` is open on, in
/// `path`; null where /proc/self/fd does not say.
inline const char* file_name_of(int fd, char (&path)[4096]) {
  if (fd < 0) return nullptr;
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return nullptr;
  path[n] = '\0';
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

}  // namespace wdedup_shim

#endif  // WDEDUP_TESTS_SUPPORT_SHIM_HPP
