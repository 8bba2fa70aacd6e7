// examples/merge_ptd_files.cpp — your model was exported one method at a
// time, so each method's .ptd holds the shared weights again: merge the
// files into one store that holds them once, with a function map per
// method, and check that every method still reads its own bytes.
//
//   example_merge_ptd_files [OUT.ptd FILE.ptd...]
//
// Without arguments it first writes two such files itself (prefill.ptd and
// decode.ptd, sharing three weights, each with its own mask), then merges
// them. Built and run as a test.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <wdedup/runtime.hpp>
#include <wdedup/wdedup.hpp>

namespace {

// The stand-in for two separate exports: what each method's own .ptd holds.
bool write_method_alone(const std::string& path, const std::vector<std::vector<std::uint8_t>>& weights,
                        const std::vector<std::uint8_t>& mask) {
  wdedup::NamedDataStore store;
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (auto r = store.add_named_data("layers." + std::to_string(i) + ".weight",
                                      wdedup::ByteSpan(weights[i].data(), weights[i].size()), 64);
        !r) {
      std::printf("%s\n", r.message().c_str());
      return false;
    }
  if (auto r = store.add_named_data("mask", wdedup::ByteSpan(mask.data(), mask.size()), 16); !r) return false;
  auto written = wdedup::write_ptd_file(store, path);
  if (!written) std::printf("%s\n", written.message().c_str());
  return written.ok();
}

std::uint64_t file_size(const std::string& path) {
  auto s = wdedup::MmapSource::open(path.c_str());
  return s ? s->size() : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = "merged_example.ptd";
  std::vector<std::string> inputs;
  std::vector<std::vector<std::uint8_t>> weights;
  std::vector<std::uint8_t> prefill_mask(256, 0x11), decode_mask(64, 0x22);
  if (argc == 2) {
    std::fprintf(stderr, "usage: %s [OUT.ptd IN.ptd...] (no arguments: a self-contained demo)\n", argv[0]);
    return 2;
  }
  if (argc > 2) {
    out = argv[1];
    inputs.assign(argv + 2, argv + argc);
  } else {
    for (int i = 0; i < 3; ++i) {
      weights.emplace_back(8192 * (i + 1));
      for (std::size_t j = 0; j < weights.back().size(); ++j) weights.back()[j] = static_cast<std::uint8_t>(j * (i + 5));
    }
    inputs = {"prefill.ptd", "decode.ptd"};
    if (!write_method_alone(inputs[0], weights, prefill_mask) || !write_method_alone(inputs[1], weights, decode_mask))
      return 1;
  }

  // 1. Each file becomes a method named after it; the tensors point into
  //    the mapped files, which `files` keeps open.
  wdedup::PtdFiles files;
  wdedup::Program program;
  std::uint64_t bytes_before = 0;
  for (const std::string& path : inputs) {
    if (auto r = files.add(program, path); !r) {
      std::printf("%s\n", r.message().c_str());
      return 1;
    }
    bytes_before += file_size(path);
  }

  // 2. Deduplicate and write one store: identical bytes once, one function
  //    map per method (OneBlob: "prefill__0", "decode__0").
  auto result = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob>>(program);
  if (!result) {
    std::printf("%s\n", result.message().c_str());
    return 1;
  }
  auto written = wdedup::write_ptd_file(result->store, result->functions, out);
  if (!written) {
    std::printf("%s\n", written.message().c_str());
    return 1;
  }
  std::printf("%zu files, %llu bytes -> %s, %llu bytes (%llu tensor bytes stored once of %llu)\n", inputs.size(),
              (unsigned long long)bytes_before, out.c_str(), (unsigned long long)written->file_size,
              (unsigned long long)result->report.bytes_stored, (unsigned long long)result->report.bytes_in);

  // 3. Every method reads, through its function map, exactly the bytes its
  //    own file held.
  auto source = wdedup::MmapSource::open(out.c_str());
  auto merged = source ? wdedup::NamedDataMap::open(*source) : wdedup::Result<wdedup::NamedDataMap>(source.failure());
  if (!merged) return 1;
  bool ok = true;
  for (const wdedup::Method& m : program.methods) {
    auto fn = merged->find_function((m.name + "__0").c_str());
    if (!fn) return 1;
    for (const wdedup::Tensor& t : m.partitions[0].tensors) {
      auto key = fn->key_of(t.name);
      auto data = key ? merged->get_data(*key) : wdedup::Result<wdedup::DataBuffer>(wdedup::Error::NotFound);
      ok = ok && data && data->size() == t.bytes.size() && std::memcmp(data->data(), t.bytes.data(), t.bytes.size()) == 0;
    }
  }
  if (argc <= 2) {
    // The self-contained run also knows what to expect: 3 shared weights
    // (48 KiB) and two masks, stored once each, in a file smaller than the
    // two it replaces.
    ok = ok && program.methods.size() == 2 && program.methods[0].name == "prefill" &&
         result->store.buffer_count() == 5 && result->report.bytes_stored == 8192 * 6 + 256 + 64 &&
         written->file_size < bytes_before;
    for (const std::string& path : inputs) std::remove(path.c_str());
    std::remove(out.c_str());
  }
  std::printf("%s\n", ok ? "merge: OK" : "merge: WRONG BYTES");
  return ok ? 0 : 1;
}
