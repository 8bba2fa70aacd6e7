// wdedup/runtime/detail/key_hash.hpp — the hash of the lookup index stored
// in wdedup files. Runtime half.
//
// Why not XXH3 here: the runtime umbrella has a compile-time budget (0.15 s
// over an empty TU) and xxhash.h alone costs most of it. Keys are short
// names, so a small multiply-fold hash that reads 16 bytes per step is as
// fast as XXH3 on them. The value is part of the file format: it is pinned
// by golden vectors in tests/key_hash.cpp and must never change silently.
#ifndef WDEDUP_RUNTIME_DETAIL_KEY_HASH_HPP
#define WDEDUP_RUNTIME_DETAIL_KEY_HASH_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wdedup/runtime/detail/format.hpp"

namespace wdedup {
namespace detail {

/// 64x64 -> 128 multiply, folded to 64 bits.
inline std::uint64_t key_mix(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 u128;
  const u128 r = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
#else
  // Portable schoolbook multiply with the same result.
  const std::uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo;
  const std::uint64_t lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
  const std::uint64_t hi = hi_hi + (hi_lo >> 32) + (cross >> 32);
  const std::uint64_t lo = (cross << 32) | (lo_lo & 0xFFFFFFFFu);
  return lo ^ hi;
#endif
}

/// wdedup key hash, version 1.
inline std::uint64_t key_hash(const void* data, std::size_t len, std::uint64_t seed) noexcept {
  constexpr std::uint64_t k0 = 0x9E3779B97F4A7C15ull;
  constexpr std::uint64_t k1 = 0xC2B2AE3D27D4EB4Full;
  constexpr std::uint64_t k2 = 0x165667B19E3779F9ull;
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t n = len;
  std::uint64_t h = seed ^ k0;
  while (n > 16) {
    h = key_mix(format::load_u64(p) ^ k1, format::load_u64(p + 8) ^ h);
    p += 16;
    n -= 16;
  }
  std::uint64_t a = 0, b = 0;
  if (n > 8) {
    a = format::load_u64(p);
    b = format::load_u64(p + n - 8);
  } else if (n >= 4) {
    a = format::load_u32(p);
    b = format::load_u32(p + n - 4);
  } else if (n > 0) {
    a = (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[n >> 1]} << 8) | p[n - 1];
  }
  // The length goes in through the multiplier (xoring it into `a` let "ab"
  // and "abc" cancel out); k2 ^ len * k1 is never zero for any length below
  // 2^60, so no key loses the seed or the tail to a zero product.
  const std::uint64_t inner = key_mix(b ^ h, k2 ^ (static_cast<std::uint64_t>(len) * k1));
  return key_mix(a ^ k0, inner ^ k1);
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_DETAIL_KEY_HASH_HPP
