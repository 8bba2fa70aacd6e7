// tests/support/no_access.hpp — pages that fault on any access: bytes
// placed there prove that the code under test never reads them.
#ifndef WDEDUP_TESTS_SUPPORT_NO_ACCESS_HPP
#define WDEDUP_TESTS_SUPPORT_NO_ACCESS_HPP

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

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

/// `n` byte ranges of `size` bytes (at most a page), each at the start of a
/// page of its own, readable until protect_all_but(): then every page but
/// one faults on access, proving which ranges the code under test reads.
struct PagedBuffers {
  std::size_t page, n;
  std::uint8_t* base;
  PagedBuffers(std::size_t count, std::size_t)
      : page(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
        n(count),
        base(static_cast<std::uint8_t*>(
            mmap(nullptr, count * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {
    REQUIRE(base != MAP_FAILED);
  }
  ~PagedBuffers() { munmap(base, n * page); }
  PagedBuffers(const PagedBuffers&) = delete;
  PagedBuffers& operator=(const PagedBuffers&) = delete;
  std::uint8_t* at(std::size_t i) const { return base + i * page; }
  void protect_all_but(std::size_t keep) {
    if (keep > 0) REQUIRE(mprotect(base, keep * page, PROT_NONE) == 0);
    if (keep + 1 < n) REQUIRE(mprotect(at(keep + 1), (n - keep - 1) * page, PROT_NONE) == 0);
  }
};

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_NO_ACCESS_HPP
