// tests/support/pattern.hpp — deterministic pseudo-random bytes (xorshift),
// so that a failing test fails the same way on every machine.
#ifndef WDEDUP_TESTS_SUPPORT_PATTERN_HPP
#define WDEDUP_TESTS_SUPPORT_PATTERN_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

#include "wdedup/runtime/span.hpp"

namespace wdedup_test {

/// n bytes that depend only on n and seed.
inline std::vector<std::uint8_t> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> b(n);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = static_cast<std::uint8_t>(x >> 24);
  }
  return b;
}

/// Spans over `bufs`, in order: the inputs a test hands the engine.
inline std::vector<wdedup::ByteSpan> spans_of(const std::vector<std::vector<std::uint8_t>>& bufs) {
  std::vector<wdedup::ByteSpan> s;
  for (const std::vector<std::uint8_t>& b : bufs) s.emplace_back(b.data(), b.size());
  return s;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_PATTERN_HPP
