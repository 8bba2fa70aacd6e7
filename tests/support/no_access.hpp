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

/// `n` bytes, readable and writable, between two pages that fault on any
/// access: a range placed at first() or last(size) proves that the code
/// under test reads nothing before it or past it.
struct Fenced {
  std::size_t page, room;
  std::uint8_t* base;
  explicit Fenced(std::size_t n)
      : page(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
        room((n + page - 1) / page * page),
        base(static_cast<std::uint8_t*>(
            mmap(nullptr, room + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {
    REQUIRE(base != MAP_FAILED);
    REQUIRE(mprotect(base, page, PROT_NONE) == 0);
    REQUIRE(mprotect(base + page + room, page, PROT_NONE) == 0);
  }
  ~Fenced() { munmap(base, room + 2 * page); }
  Fenced(const Fenced&) = delete;
  Fenced& operator=(const Fenced&) = delete;
  /// Where a range starts against the fence before it.
  std::uint8_t* first() const { return base + page; }
  /// Where a range of `size` bytes ends against the fence after it.
  std::uint8_t* last(std::size_t size) const { return base + page + room - size; }
};

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_NO_ACCESS_HPP
