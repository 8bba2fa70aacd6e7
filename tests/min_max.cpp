// Tests for wdedup/detail/min_max.hpp: min_of, max_of and clamp_to give
// std::min's, std::max's and std::clamp's results, the very object
// included: the first argument when two are equal, and `v` itself when it
// is at either end of a clamp's range.
#include "wdedup/detail/min_max.hpp"

#include <doctest/doctest.h>

#include <cstdint>

using wdedup::detail::clamp_to;
using wdedup::detail::max_of;
using wdedup::detail::min_of;

TEST_CASE("min_of and max_of: the smaller and the larger; the first argument when the two are equal") {
  const std::uint64_t three = 3, five = 5;
  CHECK(min_of(three, five) == 3);
  CHECK(min_of(five, three) == 3);
  CHECK(max_of(three, five) == 5);
  CHECK(max_of(five, three) == 5);
  const std::uint64_t a = 7, b = 7;
  CHECK(&min_of(a, b) == &a);
  CHECK(&min_of(b, a) == &b);
  CHECK(&max_of(a, b) == &a);
  CHECK(&max_of(b, a) == &b);
}

TEST_CASE("clamp_to: lo below the range, hi above it, v itself within it and at either end") {
  // The range of identity.hpp's task target: [256 KiB, 64 MiB].
  const std::uint64_t lo = 256u << 10, hi = 64u << 20;
  const std::uint64_t zero = 0, below = lo - 1, above = hi + 1, top = ~std::uint64_t{0}, inside = lo + 1;
  CHECK(&clamp_to(zero, lo, hi) == &lo);
  CHECK(&clamp_to(below, lo, hi) == &lo);
  CHECK(&clamp_to(above, lo, hi) == &hi);
  CHECK(&clamp_to(top, lo, hi) == &hi);
  CHECK(&clamp_to(inside, lo, hi) == &inside);
  CHECK(clamp_to(inside, lo, hi) == 262145);
  const std::uint64_t at_lo = lo, at_hi = hi;
  CHECK(&clamp_to(at_lo, lo, hi) == &at_lo);
  CHECK(&clamp_to(at_hi, lo, hi) == &at_hi);
}
