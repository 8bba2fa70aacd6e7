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

/// key_mix without a 128-bit type: a schoolbook multiply with the same
/// result, what 32-bit targets use. Defined everywhere so that 64-bit tests
/// check it against the 128-bit product.
inline std::uint64_t key_mix_portable(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo;
  const std::uint64_t lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
  const std::uint64_t hi = hi_hi + (hi_lo >> 32) + (cross >> 32);
  const std::uint64_t lo = (cross << 32) | (lo_lo & 0xFFFFFFFFu);
  return lo ^ hi;
}

/// 64x64 -> 128 multiply, folded to 64 bits.
inline std::uint64_t key_mix(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 u128;
  const u128 r = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
#else
  return key_mix_portable(a, b);
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

/// Seeds a key index is built under, the first included, before keys that
/// collide under every one of them are given up on: build_index and the
/// writer both try as many.
constexpr int kIndexSeedAttempts = 4;
/// The seed tried after `seed` at attempt `attempt` (1, 2, ...): the hash
/// of its little-endian bytes, so that the writer derives the same seed
/// (and writes the same file) on any host.
inline std::uint64_t next_index_seed(std::uint64_t seed, int attempt) noexcept {
  std::uint8_t bytes[8];
  format::store_u64(bytes, seed);
  return key_hash(bytes, sizeof bytes, static_cast<std::uint64_t>(attempt));
}

/// What fill_slots found.
struct SlotFill {
  enum Result { kDone, kTooManyProbes, kDuplicate } result = kDone;
  std::uint32_t at = 0;  ///< the key being placed when it stopped
};

/// Fills `slot_count` (a power of two) slots at `slots` with keys 0 to
/// count - 1 (key_at(i): a KeyView), linear probing in key order, within
/// format::probe_budget: the order and the probes with which a reader's
/// check (validate_ext_slots) then finds them. Stops at a key equal to one
/// placed before it. Shared by build_index and the writer, so that a table
/// either builds is one a reader accepts.
template <class KeyAt>
SlotFill fill_slots(std::uint32_t count, const KeyAt& key_at, std::uint64_t seed, std::uint8_t* slots,
                    std::uint64_t slot_count) noexcept {
  std::memset(slots, 0, static_cast<std::size_t>(8 * slot_count));
  std::uint64_t budget = format::probe_budget(slot_count);
  const std::uint64_t mask = slot_count - 1;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto k = key_at(i);
    const std::uint64_t h = key_hash(k.data(), k.size(), seed);
    for (std::uint64_t at = h & mask;; at = (at + 1) & mask) {
      if (budget-- == 0) return SlotFill{SlotFill::kTooManyProbes, i};
      const std::uint64_t v = format::load_u64(slots + 8 * at);
      if (v == 0) {
        format::store_u64(slots + 8 * at, format::slot_value(h, i));
        break;
      }
      if ((v >> 32) == (h >> 32) && key_at(static_cast<std::uint32_t>(v) - 1) == k)
        return SlotFill{SlotFill::kDuplicate, i};
    }
  }
  return SlotFill{};
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_DETAIL_KEY_HASH_HPP
