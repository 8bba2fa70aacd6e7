// examples/custom_policy.cpp — deduplicate a four-method model with a policy
// of our own (PairedMethods: one blob per pair of methods) and print what
// each blob would ship. Built and run as a test: it exits non-zero if the
// result is not what the policy promises.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <wdedup/wdedup.hpp>

#include "pair_policy.hpp"

int main() {
  // Two context lengths, each with a prefill and a decode method. All four
  // share the weights; each pair has its own rotary table.
  std::vector<std::uint8_t> weights(4096), rope_short(512), rope_long(2048);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<std::uint8_t>(i * 31 + 7);
  for (std::size_t i = 0; i < rope_short.size(); ++i) rope_short[i] = static_cast<std::uint8_t>(i * 13);
  for (std::size_t i = 0; i < rope_long.size(); ++i) rope_long[i] = static_cast<std::uint8_t>(i * 17 + 1);
  // Each method holds its own copy, as separately lowered graphs do.
  std::vector<std::vector<std::uint8_t>> copies(4, weights);

  wdedup::Program program;
  const char* names[] = {"prefill_2k", "decode_2k", "prefill_8k", "decode_8k"};
  for (std::size_t m = 0; m < 4; ++m) {
    wdedup::Partition& p = program.add_method(names[m]).add_partition();
    p.add("layers.0.wq.weight", wdedup::ByteSpan(copies[m].data(), copies[m].size()), 64);
    const std::vector<std::uint8_t>& rope = m < 2 ? rope_short : rope_long;
    p.add("rope.freqs", wdedup::ByteSpan(rope.data(), rope.size()), 16);
  }

  auto result = wdedup::deduplicate<wdedup::Strategy<PairedMethods>>(program);
  if (!result) {
    std::fprintf(stderr, "deduplicate failed: %s\n", result.message().c_str());
    return 1;
  }
  std::fputs(result->report.to_table().c_str(), stdout);
  for (const wdedup::FunctionMap& f : result->functions.functions)
    std::printf("%-12s -> blob %-7s function %s\n", f.method.c_str(), f.blob_key.c_str(), f.function_name.c_str());

  // What the policy promises: two blobs of two functions each, every
  // (method, blob, function) as named, weights stored once.
  const wdedup::Report& r = result->report;
  bool ok = r.blobs == 2 && r.functions == 4 && r.bytes_stored == 4096 + 512 + 2048 && r.per_blob.size() == 2 &&
            r.per_blob[0].blob_key == "pair_0" && r.per_blob[0].functions == 2 &&
            r.per_blob[1].blob_key == "pair_1" && r.per_blob[1].functions == 2 &&
            r.bytes_shared_across_blobs == 4096;
  const char* blobs[] = {"pair_0", "pair_0", "pair_1", "pair_1"};
  for (std::size_t m = 0; m < 4; ++m) {
    const wdedup::FunctionMap* f = result->functions.find(names[m], 0);
    ok = ok && f != nullptr && f->blob_key == blobs[m] && f->function_name == std::string(names[m]) + "__0";
  }
  std::printf("%s\n", ok ? "custom policy: OK" : "custom policy: UNEXPECTED RESULT");
  return ok ? 0 : 1;
}
