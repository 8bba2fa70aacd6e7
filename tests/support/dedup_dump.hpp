// tests/support/dedup_dump.hpp — a deduplicate() result as text, for tests
// that compare results (thread counts, hashes, repeated calls): equal texts
// mean equal outputs. Used by tests/deduplicate.cpp and the deduplicate()
// fuzz target (which has no doctest, so this header includes none).
#ifndef WDEDUP_TESTS_SUPPORT_DEDUP_DUMP_HPP
#define WDEDUP_TESTS_SUPPORT_DEDUP_DUMP_HPP

#include <cstdint>
#include <string>

#include "wdedup/wdedup.hpp"

namespace wdedup_test {

/// Keys, buffers (which memory each is), alignments, layouts, functions
/// and the whole report but what may differ between equal results: the
/// thread count and the timings, and, unless `identity`, the identity
/// pass's counts (another hash changes them).
inline std::string dump(const wdedup::DedupResult& r, bool identity = true) {
  using namespace wdedup;
  std::string d;
  for (const StoreBuffer& b : r.store.buffers())
    d += "buffer " + std::to_string(b.bytes.size()) + " @" +
         std::to_string(reinterpret_cast<std::uintptr_t>(b.bytes.data())) + " align " + std::to_string(b.alignment) + "\n";
  for (const StoreKey& k : r.store.keys())
    d += "key " + k.key + " -> " + std::to_string(k.buffer_index) + " align " + std::to_string(k.alignment) + " " +
         detail::describe_layout(k.layout) + "\n";
  for (const FunctionMap& f : r.functions.functions) {
    d += "function " + f.method + "#" + std::to_string(f.partition_index) + " " + f.blob_key + ":" + f.function_name + "\n";
    for (const FunctionTensor& t : f.tensors) d += "  " + t.tensor_name + " = " + t.key + "\n";
  }
  Report p = r.report;
  p.threads = 0;
  p.seconds_total = p.seconds_identity = 0;
  if (identity) p.identity.hash_seconds = p.identity.compare_seconds = 0;
  else p.identity = IdentityReport{};
  d += "report " + p.to_json() + "\n";
  return d;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_DEDUP_DUMP_HPP
