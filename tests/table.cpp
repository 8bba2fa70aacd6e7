// Tests for wdedup/table.hpp and detail/huge_pages.hpp: Table<T>, the vector
// of the build-time half's big outputs. Blocks of 1 MiB or more are huge-page
// mappings of their own (so their data sits at a 2 MiB boundary), smaller
// ones come from operator new; either way a Table behaves as a std::vector.
#include "wdedup/table.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>

using wdedup::Table;
using wdedup::detail::BulkAllocator;
using wdedup::detail::kHugePage;

namespace {
bool huge_aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kHugePage == 0; }
constexpr std::size_t kBigCount = (std::size_t{1} << 20) / sizeof(std::uint64_t);  // exactly 1 MiB of uint64
}  // namespace

TEST_CASE("Table: a block of 1 MiB or more is its own mapping at a huge-page boundary") {
  static_assert(BulkAllocator<char>::kBulkMin == std::size_t{1} << 20);
  Table<std::uint64_t> t(kBigCount, 7);
  CHECK(huge_aligned(t.data()));
  CHECK(t.size() == kBigCount);
  CHECK(t.front() == 7);
  CHECK(t.back() == 7);
  // A 3 MiB block spans two huge pages; its last element is writable.
  Table<char> big(std::size_t{3} << 20, 'x');
  CHECK(huge_aligned(big.data()));
  big.back() = 'y';
  CHECK(big[(std::size_t{3} << 20) - 2] == 'x');
  CHECK(big.back() == 'y');
}

TEST_CASE("Table: growth from a heap block to a mapping keeps every element; a small copy keeps its part") {
  Table<std::uint64_t> t;
  t.reserve(16);  // 128 bytes: operator new
  for (std::uint64_t i = 0; i < kBigCount + 1; ++i) t.push_back(i * 3);
  CHECK(huge_aligned(t.data()));  // past 1 MiB the block is a mapping
  CHECK(t.size() == kBigCount + 1);
  for (std::uint64_t i = 0; i < t.size(); ++i) REQUIRE(t[i] == i * 3);
  // Back under 1 MiB: a copy of the first ten (not shrink_to_fit, which is
  // only a request, and a no-op in builds without exceptions).
  const Table<std::uint64_t> head(t.begin(), t.begin() + 10);
  CHECK(head.size() == 10);
  CHECK(head[9] == 27);
  t.clear();
  CHECK(t.empty());
}

TEST_CASE("Table: copies, moves and swaps like std::vector (all allocators are equal)") {
  CHECK(BulkAllocator<int>() == BulkAllocator<int>());
  CHECK_FALSE(BulkAllocator<int>() != BulkAllocator<char>());
  Table<std::string> small = {"a", "bb", "a string too long for the small-string buffer"};
  Table<std::uint64_t> big(kBigCount, 5);
  big[123] = 9;

  Table<std::uint64_t> copy = big;  // a second mapping
  CHECK(copy.data() != big.data());
  CHECK(huge_aligned(copy.data()));
  CHECK(copy[123] == 9);
  copy[123] = 10;
  CHECK(big[123] == 9);

  const std::uint64_t* before = big.data();
  Table<std::uint64_t> moved = std::move(big);  // the mapping changes hands
  CHECK(moved.data() == before);
  CHECK(moved[123] == 9);

  Table<std::uint64_t> other(3, 1);
  other.swap(moved);
  CHECK(other.data() == before);
  CHECK(moved.size() == 3);

  Table<std::string> small_copy = small;
  CHECK(small_copy[2] == "a string too long for the small-string buffer");
  CHECK(small_copy == small);
}
