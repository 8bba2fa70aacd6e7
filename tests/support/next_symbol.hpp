// tests/support/next_symbol.hpp — for the LD_PRELOAD shims the checks load
// (fail_mmap.cpp here; benchmarks/interrupt_json_write.cpp and
// wrong_first_digest.cpp): the definition of a function that the shim's own
// one hides, the next one in the lookup order. Not installed.
#ifndef WDEDUP_TESTS_SUPPORT_NEXT_SYMBOL_HPP
#define WDEDUP_TESTS_SUPPORT_NEXT_SYMBOL_HPP

#include <dlfcn.h>

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

}  // namespace wdedup_shim

#endif  // WDEDUP_TESTS_SUPPORT_NEXT_SYMBOL_HPP
