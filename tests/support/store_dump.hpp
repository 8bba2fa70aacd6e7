// tests/support/store_dump.hpp — a NamedDataStore, and a tensor's layout,
// as text, for the tests that compare stores (a failed add leaves the store
// as it was, a moved store is the one it was moved from, deduplicate()'s
// results at any thread count: tests/named_data_store.cpp,
// tests/deduplicate.cpp through dedup_dump.hpp, the deduplicate() fuzz
// target) and programs (program_snapshot.hpp). No doctest: the fuzz target
// has none.
#ifndef WDEDUP_TESTS_SUPPORT_STORE_DUMP_HPP
#define WDEDUP_TESTS_SUPPORT_STORE_DUMP_HPP

#include <cstdint>
#include <optional>
#include <string>

#include "wdedup/named_data_store.hpp"

namespace wdedup_test {

/// The whole layout: scalar type, every size and every dim_order entry
/// (detail::describe_layout, the library's message form, shows the first
/// 16 sizes), or "no layout".
inline std::string layout_text(const std::optional<wdedup::Layout>& layout) {
  if (!layout) return "no layout";
  std::string s = "type " + std::to_string(static_cast<int>(layout->scalar_type)) + " sizes";
  for (const std::int32_t d : layout->sizes) s += " " + std::to_string(d);
  s += " dim_order";
  for (const std::uint8_t d : layout->dim_order) s += " " + std::to_string(unsigned{d});
  return s;
}

/// Each buffer (its size, which memory it is, its alignment), then each key
/// (its buffer, alignment and layout): equal texts mean equal stores.
inline std::string dump(const wdedup::NamedDataStore& s) {
  std::string d;
  for (const wdedup::StoreBuffer& b : s.buffers())
    d += "buffer " + std::to_string(b.bytes.size()) + " @" +
         std::to_string(reinterpret_cast<std::uintptr_t>(b.bytes.data())) + " align " + std::to_string(b.alignment) +
         "\n";
  for (const wdedup::StoreKey& k : s.keys())
    d += "key " + k.key + " -> " + std::to_string(k.buffer_index) + " align " + std::to_string(k.alignment) + " " +
         layout_text(k.layout) + "\n";
  return d;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_STORE_DUMP_HPP
