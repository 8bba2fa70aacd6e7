// sized_store OUT SIZE:ALIGNMENT... — writes a store whose one function,
// decode__0 (method decode, partition 0, Strategy<OneBlob>), holds a tensor
// w0, w1, ... of each SIZE bytes at each ALIGNMENT, in that order. For the
// custom runtime's arena tests (examples/check_runtime_failures.py): a
// tensor bigger than its 16 MiB arena, or one asking for an alignment no
// address in it has, needs a store larger than any the example exports.
// Each tensor's bytes differ from every other's (its index in each byte),
// so none is merged away.
#include "instances.hpp"  // first: see there (the engine and writer from instances.cpp)

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <wdedup/ptd_writer.hpp>
#include <wdedup/wdedup.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT SIZE:ALIGNMENT...\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<std::int64_t> alignments;
  for (int i = 2; i < argc; ++i) {
    std::uint64_t size = 0;
    std::int64_t alignment = 0;
    int used = 0;
    if (std::sscanf(argv[i], "%" SCNu64 ":%" SCNd64 "%n", &size, &alignment, &used) != 2 ||
        static_cast<std::size_t>(used) != std::strlen(argv[i])) {
      std::fprintf(stderr, "%s: '%s' is not SIZE:ALIGNMENT\n", argv[0], argv[i]);
      return 2;
    }
    bytes.emplace_back(size, static_cast<std::uint8_t>(i));
    alignments.push_back(alignment);
  }
  wdedup::Program program;
  wdedup::Partition& decode = program.add_method("decode").add_partition();
  for (std::size_t i = 0; i < bytes.size(); ++i)
    decode.add("w" + std::to_string(i), wdedup::ByteSpan(bytes[i].data(), bytes[i].size()), alignments[i]);
  auto result = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob>>(program);
  if (!result) {
    std::fprintf(stderr, "%s: %s\n", argv[0], result.message().c_str());
    return 1;
  }
  if (auto written = wdedup::write_ptd_file(result->store, result->functions, argv[1]); !written) {
    std::fprintf(stderr, "%s: %s\n", argv[0], written.message().c_str());
    return 1;
  }
  return 0;
}
