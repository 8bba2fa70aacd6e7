// Deduplicates a two-method program through an installed wdedup and writes
// the store to argv[1]: the build-time half, as an exporter uses it.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <wdedup/ptd_writer.hpp>
#include <wdedup/wdedup.hpp>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::vector<std::uint8_t> shared(4096), prefill_only(256, 0x11), decode_only(64, 0x22);
  for (std::size_t i = 0; i < shared.size(); ++i) shared[i] = static_cast<std::uint8_t>(i * 7);
  const std::vector<std::uint8_t> shared_copy = shared;  // other memory, same bytes
  wdedup::Program program;
  wdedup::Partition& prefill = program.add_method("prefill").add_partition();
  prefill.add("w", wdedup::ByteSpan(shared.data(), shared.size()), 64);
  prefill.add("mask", wdedup::ByteSpan(prefill_only.data(), prefill_only.size()));
  wdedup::Partition& decode = program.add_method("decode").add_partition();
  decode.add("w", wdedup::ByteSpan(shared_copy.data(), shared_copy.size()), 64);
  decode.add("mask", wdedup::ByteSpan(decode_only.data(), decode_only.size()));
  auto result = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob>>(program);
  if (!result) {
    std::printf("%s\n", result.message().c_str());
    return 1;
  }
  auto written = wdedup::write_ptd_file(result->store, result->functions, argv[1]);
  if (!written) {
    std::printf("%s\n", written.message().c_str());
    return 1;
  }
  std::printf("stored %llu of %llu bytes\n", (unsigned long long)result->report.bytes_stored,
              (unsigned long long)result->report.bytes_in);
  return 0;
}
