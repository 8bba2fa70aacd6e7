// tests/support/table_cache.hpp — a test case's table cache, empty at its
// start and at its end: the cache (wdedup/table.hpp, detail/huge_pages.hpp)
// is process-wide, and the arena's mapped chunks and Tables share it.
#ifndef WDEDUP_TESTS_SUPPORT_TABLE_CACHE_HPP
#define WDEDUP_TESTS_SUPPORT_TABLE_CACHE_HPP

#include <cstddef>

#include "wdedup/table.hpp"

namespace wdedup_test {

constexpr std::size_t kMiB = std::size_t{1} << 20;

/// Starts a case from an empty cache with the default limit (setting a
/// limit gives back what the cache held), and leaves it that way.
struct FreshCache {
  FreshCache() { wdedup::set_table_cache_limit(64 * kMiB); }
  ~FreshCache() { wdedup::set_table_cache_limit(64 * kMiB); }
};

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_TABLE_CACHE_HPP
