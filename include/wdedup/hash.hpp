// wdedup/hash.hpp — content-hash policies for the build-time half.
// A hash only nominates candidates: every merge is confirmed byte-for-byte,
// so a policy may be weak (tests use one that always collides) without ever
// causing a false merge. A policy is called as
// `std::uint64_t h(const void* data, std::size_t size, std::uint64_t seed)`
// from deduplicate()'s worker threads, inside noexcept code: it must not
// throw (an exception there ends the process).
#ifndef WDEDUP_HASH_HPP
#define WDEDUP_HASH_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>

#include "wdedup/runtime/detail/xxhash.hpp"  // xxhash.h, header-only

namespace wdedup {

/// The default: XXH3-64 (header-only through XXH_INLINE_ALL).
struct Xxh3Hash {
  std::uint64_t operator()(const void* data, std::size_t size, std::uint64_t seed) const noexcept {
    return XXH3_64bits_withSeed(data, size, seed);
  }
};

/// A deliberately useless policy: every input collides. For tests that must
/// show collisions never merge different bytes.
struct AlwaysCollideHash {
  std::uint64_t operator()(const void*, std::size_t, std::uint64_t) const noexcept { return 0; }
};

}  // namespace wdedup

#endif  // WDEDUP_HASH_HPP
