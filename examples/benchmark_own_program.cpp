// examples/benchmark_own_program.cpp — how to measure deduplicate() on YOUR
// model: put your buffers in a wdedup::Program, then time deduplicate
// against a read pass over the same bytes measured in the same run (the
// physical limit: no exact deduplication can skip reading its input), and
// print the ratio. Absolute GB/s depend on the machine; the ratio travels.
//
//   example_benchmark_own_program [--mb N] [--threads N] [--reps N]
//
// Here the "model" is two methods that share most of their weights in
// separate memory, as two separately exported graphs do. Replace
// make_buffers() with your own bytes (an mmap'd file, tensors you hold).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <wdedup/bench.hpp>
#include <wdedup/wdedup.hpp>

namespace {

/// Stand-in for your weights: `count` tensors of `size` bytes for prefill,
/// and a copy of them for decode in which every 8th tensor differs.
std::vector<std::vector<std::uint8_t>> make_buffers(std::size_t count, std::size_t size) {
  std::vector<std::vector<std::uint8_t>> b(2 * count, std::vector<std::uint8_t>(size));
  std::uint64_t x = 1;
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t k = 0; k + 8 <= size; k += 8) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      std::memcpy(&b[i][k], &x, 8);
    }
    b[count + i] = b[i];
    if (i % 8 == 7) b[count + i][0] ^= 1;
  }
  return b;
}

/// The integer in 1..max after `name`, or `fallback`; anything else ends
/// the run with a message (0 and "abc" were taken for 0 before).
unsigned arg(int argc, char** argv, const char* name, unsigned fallback, unsigned long max = 1000000) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) != 0) continue;
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(argv[i + 1], &end, 10);
    if (errno != 0 || end == argv[i + 1] || *end != '\0' || argv[i + 1][0] == '-' || v == 0 || v > max) {
      std::fprintf(stderr, "%s needs an integer in 1..%lu, got '%s'\n", name, max, argv[i + 1]);
      std::exit(2);
    }
    return static_cast<unsigned>(v);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned mb = arg(argc, argv, "--mb", 32);  // small by default: this runs as a test
  // 0 = every core; deduplicate() takes at most kMaxThreads.
  const unsigned threads = arg(argc, argv, "--threads", 0, wdedup::DedupOptions::kMaxThreads);
  const unsigned reps = arg(argc, argv, "--reps", 9);

  // 1. Your buffers, as a Program (tensors point at your memory; no copy).
  const std::size_t size = 256 * 1024, count = std::max<std::size_t>(1, std::size_t{mb} * 1024 * 1024 / size / 2);
  const std::vector<std::vector<std::uint8_t>> buffers = make_buffers(count, size);
  wdedup::Program program;
  for (int m = 0; m < 2; ++m) {
    wdedup::Partition& part = program.add_method(m == 0 ? "prefill" : "decode").add_partition();
    for (std::size_t i = 0; i < count; ++i) part.add("w" + std::to_string(i), buffers[m * count + i]);
  }

  // 2. The same bytes for both contenders: every distinct memory range once.
  const std::vector<wdedup::ByteSpan> input = wdedup::bench::input_spans(program);
  const std::uint64_t bytes = wdedup::bench::total_bytes(input);

  // 3. Warm both the same way (pages faulted in, threads and allocator used once).
  std::uint64_t checksum = wdedup::bench::read_pass(input, threads);
  wdedup::DedupOptions options;
  options.threads = threads;
  auto first = wdedup::deduplicate<wdedup::Strategy<wdedup::Positional>>(program, options);
  if (!first) {
    std::fprintf(stderr, "deduplicate failed: %s\n", first.message().c_str());
    return 1;
  }

  // 4. Subject and baseline interleaved; medians; ratio = read time / dedup time.
  const wdedup::bench::Paired p = wdedup::bench::compare(
      reps,
      [&] {
        auto r = wdedup::deduplicate<wdedup::Strategy<wdedup::Positional>>(program, options);
        checksum += r ? r->report.bytes_stored : 0;
      },
      [&] { checksum += wdedup::bench::read_pass(input, threads); });

  std::printf("input: %zu tensors, %.1f MB examined; stored %.1f MB in %zu buffers\n", 2 * count, bytes / 1e6,
              first->report.bytes_stored / 1e6, static_cast<std::size_t>(first->report.buffers));
  std::printf("deduplicate: %.2f GB/s   read pass (same bytes, same threads): %.2f GB/s\n",
              wdedup::bench::gb_per_s(bytes, p.seconds), wdedup::bench::gb_per_s(bytes, p.baseline_seconds));
  std::printf("ratio: %.2fx of the read pass (median of %u paired runs; 1.0 = as fast as reading every byte once)\n",
              p.ratio, reps);
  std::printf("(checksum %llu)\n", static_cast<unsigned long long>(checksum));
  return first->report.buffers == count + count / 8 ? 0 : 1;  // what make_buffers built
}
