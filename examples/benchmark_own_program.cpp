// examples/benchmark_own_program.cpp — how to measure deduplicate() on YOUR
// model: put your buffers in a wdedup::Program, then time deduplicate
// against a read pass over the same bytes measured in the same run (the
// physical limit: no exact deduplication can skip reading its input), and
// print the ratio, and what a call adds to resident memory at its peak.
// Absolute GB/s depend on the machine; the ratio travels.
//
//   example_benchmark_own_program [--mb N] [--threads N] [--reps N]
//
// Built with the project (meson: examples/example_benchmark_own_program, run
// as a test), or on its own from the clone:
//   g++ -std=c++17 -O2 -I include examples/benchmark_own_program.cpp -pthread
//
// Here the "model" is two methods that share most of their weights in
// separate memory, as two separately exported graphs do. Replace
// make_buffers() with your own bytes (an mmap'd file, tensors you hold), and
// drop the check of its distinct count at the end of main (kStandInCheck).
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

/// The distinct buffers make_buffers(count, ...) holds: every prefill
/// tensor, and the decode copies that differ (every 8th). The example runs
/// as a test, which checks deduplicate() found exactly these; your own
/// bytes have their own count: set this to false.
constexpr bool kStandInCheck = true;
std::size_t stand_in_distinct(std::size_t count) { return count + count / 8; }

/// The command line: --mb N, --threads N, --reps N, --help. A flag this
/// program does not know, a flag without its value, or a value that is not
/// an integer in range ends the run with exit code 2 and a message: a typo
/// must not silently time something else than was asked.
struct Args {
  unsigned mb = 32;  // small by default: this runs as a test
  unsigned threads = 0;  // 0 = every core; deduplicate() takes at most kMaxThreads
  unsigned reps = 9;
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: example_benchmark_own_program [--mb N] [--threads N] [--reps N]\n"
               "  --mb N        MiB (2^20 bytes) of stand-in weights, 1..1000000 (default 32)\n"
               "  --threads N   threads of deduplicate() and the read pass, 1..%u (default: every core)\n"
               "  --reps N      paired repetitions, 1..1000000 (default 9)\n",
               wdedup::DedupOptions::kMaxThreads);
}

[[noreturn]] void refuse(const std::string& what) {
  std::fprintf(stderr, "example_benchmark_own_program: %s\n", what.c_str());
  usage(stderr);
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      usage(stdout);
      if (std::fflush(stdout) != 0 || std::ferror(stdout)) {  // (the text did not reach its reader)
        std::fprintf(stderr, "example_benchmark_own_program: writing to standard output failed: %s\n",
                     std::strerror(errno));
        std::exit(1);
      }
      std::exit(0);
    }
    unsigned* out = flag == "--mb" ? &a.mb : flag == "--threads" ? &a.threads : flag == "--reps" ? &a.reps : nullptr;
    if (out == nullptr) refuse("unknown option '" + flag + "'");
    if (i + 1 >= argc) refuse(flag + " needs a value");
    const char* v = argv[++i];
    const unsigned long max = out == &a.threads ? wdedup::DedupOptions::kMaxThreads : 1000000;
    // Digits only: strtoul alone would take " 5", "+5" and "-1" (as a huge number).
    char* end = nullptr;
    errno = 0;
    const unsigned long n = v[0] >= '0' && v[0] <= '9' ? std::strtoul(v, &end, 10) : 0;
    if (end == nullptr || errno != 0 || *end != '\0' || n == 0 || n > max)
      refuse(flag + " needs an integer in 1.." + std::to_string(max) + ", got '" + v + "'");
    *out = static_cast<unsigned>(n);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  const unsigned mb = args.mb, threads = args.threads, reps = args.reps;
  // Refused up front rather than ended by the allocator (or the kernel).
  // (Against what this process can be given now, not the machine's total.)
  if (const wdedup::bench::MemoryLimit have = wdedup::bench::memory_limit();
      have.known() && std::uint64_t{mb} << 20 > have.bytes) {
    std::fprintf(stderr, "example_benchmark_own_program: --mb %u is more than the %llu MiB this process can have (%s)\n",
                 mb, static_cast<unsigned long long>(have.bytes >> 20), have.source);
    return 2;
  }

  // 1. Your buffers, as a Program (tensors point at your memory; no copy).
  const std::size_t size = 256 * 1024, count = std::max<std::size_t>(1, std::size_t{mb} * 1024 * 1024 / size / 2);
  const std::vector<std::vector<std::uint8_t>> buffers = make_buffers(count, size);
  wdedup::Program program;
  for (std::size_t m = 0; m < 2; ++m) {
    wdedup::Partition& part = program.add_method(m == 0 ? "prefill" : "decode").add_partition();
    for (std::size_t i = 0; i < count; ++i) part.add("w" + std::to_string(i), buffers[m * count + i]);
  }

  // 2. The same bytes for both contenders: every distinct memory range once.
  const std::vector<wdedup::ByteSpan> input = wdedup::bench::input_spans(program);
  const std::uint64_t bytes = wdedup::bench::total_bytes(input);

  // 3. Warm both the same way (pages faulted in, threads and allocator used once).
  //    The read pass runs on the threads deduplicate() runs on: at most
  //    --threads, one per 4 MiB of work (given more, it would start threads
  //    deduplicate() does not, and be the slower for it).
  const unsigned run = wdedup::bench::dedup_threads(program, threads);
  std::uint64_t checksum = wdedup::bench::read_pass(input, run);
  wdedup::DedupOptions options;
  options.threads = threads;
  auto first = wdedup::deduplicate<wdedup::Strategy<wdedup::Positional>>(program, options);
  if (!first) {
    std::fprintf(stderr, "deduplicate failed: %s\n", first.message().c_str());
    return 1;
  }

  // The call measured in steps 4 and 5. A failed call is no figure: it would
  // time as a fast one, and its memory as a small one.
  const auto call = [&] {
    auto r = wdedup::deduplicate<wdedup::Strategy<wdedup::Positional>>(program, options);
    if (!r) {
      std::fprintf(stderr, "deduplicate failed: %s\n", r.message().c_str());
      std::exit(1);
    }
    checksum += r->report.bytes_stored;
  };

  // 4. Subject and baseline interleaved; medians; ratio = read time / dedup time.
  // Before each repetition, off the clock, the table memory the call before
  // kept (the table cache) is released and the input read twice, as
  // wdedup-bench does: each call then costs what a one-shot export's does.
  // (A program deduplicating several models in one process keeps that
  // memory; on many small tensors its calls run a few percent faster. Drop
  // the fourth argument to time that.)
  const wdedup::bench::Paired p = wdedup::bench::compare(
      reps,
      call,
      [&] { checksum += wdedup::bench::read_pass(input, run); },
      [&] {
        wdedup::release_table_cache();
        checksum += wdedup::bench::read_pass(input, run);
        checksum += wdedup::bench::read_pass(input, run);
      });

  // 5. What a call costs in memory: the resident memory it adds at its peak,
  //    its result included (one more call, untimed, started as above).
  wdedup::release_table_cache();
  checksum += wdedup::bench::read_pass(input, run);
  const wdedup::bench::ResidentPeak mem = wdedup::bench::resident_peak(call);

  std::printf("input: %zu tensors, %.1f MB examined; stored %.1f MB in %zu buffers\n", 2 * count,
              static_cast<double>(bytes) / 1e6, static_cast<double>(first->report.bytes_stored) / 1e6,
              static_cast<std::size_t>(first->report.buffers));
  std::printf("deduplicate: %.2f GB/s   read pass (same bytes, same threads: %u): %.2f GB/s\n",
              wdedup::bench::gb_per_s(bytes, p.seconds), run, wdedup::bench::gb_per_s(bytes, p.baseline_seconds));
  std::printf("ratio: %.2fx of the read pass (median of %u paired runs; 1.0 = as fast as reading every byte once)\n",
              p.ratio, reps);
  if (const double added = static_cast<double>(mem.added()); mem.known)
    std::printf("memory: a call adds %.2f MB of resident memory at its peak, its result included (%.2f%% of the "
                "bytes examined)\n",
                added / 1e6, 100.0 * added / static_cast<double>(bytes));
  // On a shared machine, say when the medians are the machine's more than the code's.
  if (!p.steady())
    std::printf("unsteady: median / fastest run %.2fx (deduplicate), %.2fx (read pass), over %.1fx: run again\n",
                wdedup::bench::median_over_fastest(p.samples), wdedup::bench::median_over_fastest(p.baseline_samples),
                wdedup::bench::kUnsteady);
  std::printf("(checksum %llu)\n", static_cast<unsigned long long>(checksum));
  if (kStandInCheck && first->report.buffers != stand_in_distinct(count)) {
    std::fprintf(stderr,
                 "deduplicate() stored %zu buffers, but make_buffers built %zu distinct ones (with your own bytes, "
                 "set kStandInCheck to false)\n",
                 static_cast<std::size_t>(first->report.buffers), stand_in_distinct(count));
    return 1;
  }
  return 0;
}
