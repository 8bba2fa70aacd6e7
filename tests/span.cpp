// Tests for wdedup/runtime/span.hpp: a Span's size from each constructor
// (a pointer and a count, an array, a container, an untyped pointer), and
// its accessors: data(), size(), empty(), begin(), end(), [] and
// subspan(). Which pointers a ByteSpan takes is checked in
// tests/deduplicate.cpp (and tests/compile_fail/typed_pointer_bytes.cpp).
// Built with -fno-exceptions -fno-rtti.
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "wdedup/runtime/span.hpp"

using wdedup::ByteSpan;
using wdedup::Span;

TEST_CASE("Span: the size each constructor gives, and empty() exactly when it is 0") {
  const std::uint8_t bytes[5] = {10, 11, 12, 13, 14};
  const ByteSpan from_array = bytes;
  CHECK(from_array.data() == bytes);
  CHECK(from_array.size() == 5);
  const std::uint8_t one[1] = {7};
  CHECK(ByteSpan(one).size() == 1);
  CHECK(ByteSpan(bytes, 3).size() == 3);
  const void* untyped = bytes;
  CHECK(ByteSpan(untyped, 4).data() == bytes);
  CHECK(ByteSpan(untyped, 4).size() == 4);
  std::vector<std::uint8_t> v = {1, 2, 3, 4, 5, 6};
  const ByteSpan from_vector = v;
  CHECK(from_vector.data() == v.data());
  CHECK(from_vector.size() == 6);
  std::array<std::int32_t, 2> sizes = {2, 3};
  const Span<const std::int32_t> from_std_array = sizes;
  CHECK(from_std_array.size() == 2);
  CHECK(from_std_array[1] == 3);

  CHECK_FALSE(from_array.empty());
  CHECK(ByteSpan().empty());
  CHECK(ByteSpan().data() == nullptr);
  CHECK(ByteSpan().size() == 0);
  // No bytes at a real address is empty too; a null pointer with a count
  // is not (its size says so, as an unchecked allocation's would).
  CHECK(ByteSpan(bytes, 0).empty());
  CHECK_FALSE(ByteSpan(static_cast<const std::uint8_t*>(nullptr), 8).empty());
}

TEST_CASE("Span: begin() and end() bound exactly its elements; [] and subspan() index from its start") {
  std::int32_t values[6] = {100, 101, 102, 103, 104, 105};
  const Span<std::int32_t> all = values;
  CHECK(all.begin() == values);
  CHECK(all.end() == values + 6);
  std::int32_t sum = 0;
  for (std::int32_t x : all) sum += x;
  CHECK(sum == 615);
  CHECK(all[0] == 100);
  CHECK(all[5] == 105);
  all[2] = 7;  // a Span of non-const T writes through
  CHECK(values[2] == 7);

  const Span<std::int32_t> middle = all.subspan(2, 3);
  CHECK(middle.data() == values + 2);
  CHECK(middle.size() == 3);
  CHECK(middle[0] == 7);
  CHECK(middle[2] == 104);
  CHECK(middle.end() == values + 5);
  const Span<std::int32_t> tail = all.subspan(6, 0);
  CHECK(tail.data() == values + 6);
  CHECK(tail.empty());
  CHECK(tail.begin() == tail.end());
}
