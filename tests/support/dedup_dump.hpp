// tests/support/dedup_dump.hpp — a deduplicate() result as text, for tests
// that compare results (thread counts, hashes, repeated calls): equal texts
// mean equal outputs. Used by tests/deduplicate.cpp and the deduplicate()
// fuzz target (which has no doctest, so this header includes none).
#ifndef WDEDUP_TESTS_SUPPORT_DEDUP_DUMP_HPP
#define WDEDUP_TESTS_SUPPORT_DEDUP_DUMP_HPP

#include <cstdint>
#include <string>

#include "store_dump.hpp"
#include "wdedup/wdedup.hpp"

namespace wdedup_test {

/// Buffers (which memory each is), keys, alignments, whole layouts, functions
/// and the whole report but what may differ between equal results: the
/// thread count and the timings, and, unless `identity`, the identity
/// pass's counts (another hash changes them).
inline std::string dump(const wdedup::DedupResult& r, bool identity = true) {
  using namespace wdedup;
  std::string d = dump(r.store);
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
