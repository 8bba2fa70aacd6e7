// tests/support/colliding_keys.hpp — a plain .ptd file whose keys were
// chosen to collide in the built index under one seed, for the tests of
// build_index's seeds (tests/named_data_map.cpp, tests/mapped_file.cpp).
#ifndef WDEDUP_TESTS_SUPPORT_COLLIDING_KEYS_HPP
#define WDEDUP_TESTS_SUPPORT_COLLIDING_KEYS_HPP

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "support/wdedup_file.hpp"
#include "wdedup/runtime/detail/key_hash.hpp"

namespace wdedup_test {

/// The seed kCollidingKeys keys are chosen for.
constexpr std::uint64_t kCollidingSeed = 0xC0111DE;
constexpr std::uint32_t kCollidingKeys = 1024;

/// A file without a WDX1 block (nothing at open looks at its keys' hashes)
/// of kCollidingKeys empty keys "w.<i>" whose hash under kCollidingSeed
/// puts them all in the first 16 of the built index's 2,048 slots
/// (NamedDataMap::index_memory_size(1024) / 8): one run of 1,024, about
/// 524,000 probes to build (the budget is 64 a slot, 132,096), and a scan of
/// it per lookup. `names`, if given, gets the keys in the order added.
inline std::vector<std::uint8_t> colliding_keys_file(std::vector<std::string>* names = nullptr) {
  constexpr std::uint64_t kSlots = 2048;
  wdedup::NamedDataStore store;
  char buf[32];
  for (std::uint32_t i = 0, found = 0; found < kCollidingKeys; ++i) {
    const int n = std::snprintf(buf, sizeof buf, "w.%u", i);
    const std::string name(buf, static_cast<std::size_t>(n));
    if ((wdedup::detail::key_hash(name.data(), name.size(), kCollidingSeed) & (kSlots - 1)) >= 16) continue;
    REQUIRE(store.add_named_data(name, wdedup::ByteSpan(), 1));
    if (names) names->push_back(name);
    ++found;
  }
  wdedup::WriteOptions plain;
  plain.wdedup_extensions = false;
  return write_or_die(store, wdedup::FunctionMaps{}, plain);
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_COLLIDING_KEYS_HPP
