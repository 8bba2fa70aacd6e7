// tests/support/no_access.hpp — pages that fault on any access: bytes
// placed there prove that the code under test never reads them.
#ifndef WDEDUP_TESTS_SUPPORT_NO_ACCESS_HPP
#define WDEDUP_TESTS_SUPPORT_NO_ACCESS_HPP

#include <doctest/doctest.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace wdedup_test {

/// `n` bytes (whole pages) mapped PROT_NONE, unmapped when it goes.
struct NoAccess {
  std::size_t size;
  std::uint8_t* p;
  explicit NoAccess(std::size_t n)
      : size(n), p(static_cast<std::uint8_t*>(mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {
    REQUIRE(p != MAP_FAILED);
  }
  ~NoAccess() { munmap(p, size); }
  NoAccess(const NoAccess&) = delete;
  NoAccess& operator=(const NoAccess&) = delete;
};

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_NO_ACCESS_HPP
