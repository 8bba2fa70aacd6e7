// wdedup/bench.hpp — measure deduplicate() on your own Program honestly: a
// same-run baseline (one read pass over every input byte, the physical
// limit of any exact deduplication), interleaved repetitions and medians.
// Build-time half; not part of the umbrella header (include it on its own).
//
//   using S = wdedup::Strategy<wdedup::Positional>;
//   std::vector<wdedup::ByteSpan> in = wdedup::bench::input_spans(program);
//   wdedup::DedupOptions opts;
//   opts.threads = threads;
//   const unsigned run = wdedup::bench::dedup_threads(program, threads);  // what it starts
//   std::uint64_t sink = wdedup::bench::read_pass(in, run);      // warm both
//   if (!wdedup::deduplicate<S>(program, opts)) return 1;        // (and check it works)
//   wdedup::bench::Paired p = wdedup::bench::compare(7,
//       [&] { if (!wdedup::deduplicate<S>(program, opts)) std::abort(); },
//       [&] { sink += wdedup::bench::read_pass(in, run); });
//   // p.ratio: read-pass time / dedup time (1.0 = as fast as reading the bytes);
//   // GB/s: bench::gb_per_s(bench::total_bytes(in), p.seconds), bytes counted
//   // once per distinct (pointer, size) range (input_spans)
// examples/benchmark_own_program.cpp is this, whole.
#ifndef WDEDUP_BENCH_HPP
#define WDEDUP_BENCH_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "wdedup/detail/atomic.hpp"
#include "wdedup/detail/min_max.hpp"
#include "wdedup/detail/thread_budget.hpp"
#include "wdedup/detail/threads.hpp"
#include "wdedup/program.hpp"
#include "wdedup/runtime/span.hpp"

// Why no <algorithm>, <chrono> or <thread>: the library's own threads,
// clock, min/max and qsort do the job, and those three headers were a fifth
// of what gcc executed for a translation unit that includes every public
// header (detail/threads.hpp, detail/min_max.hpp say why for the library).

namespace wdedup {
namespace bench {

/// Monotonic seconds from an arbitrary origin.
inline double now_seconds() noexcept { return wdedup::detail::monotonic_seconds(); }

/// Bytes of physical memory, or 0 where the system does not say. What a
/// process can be given now is less: memory_limit().
inline std::uint64_t physical_memory() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

/// Median of `samples` (the mean of the middle two for an even count; 0 for
/// none). Medians, not means: on a shared machine one descheduled run would
/// drag a mean anywhere.
template <int = 0>
double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::qsort(samples.data(), samples.size(), sizeof(double), [](const void* a, const void* b) {
    const double x = *static_cast<const double*>(a), y = *static_cast<const double*>(b);
    return (x > y) - (x < y);
  });
  const std::size_t mid = samples.size() / 2;
  if (samples.size() % 2 == 1) return samples[mid];
  return (samples[mid - 1] + samples[mid]) / 2;
}

/// How much slower the typical repetition ran than the fastest: the median
/// of `samples` (times) over their minimum. 1 is a perfectly steady run; 0
/// means no samples, or a fastest time of 0 (nothing to compare with).
/// Repeating the same work on the same bytes moves little on a quiet
/// machine; a median far above the fastest was set by the machine (another
/// tenant, a vCPU the host did not run, host faults on memory it had taken
/// back), not by the code, and says little about either.
inline double median_over_fastest(const std::vector<double>& samples) {
  if (samples.empty()) return 0;
  double fastest = samples[0];
  for (double s : samples) fastest = wdedup::detail::min_of(fastest, s);
  return fastest > 0 ? median(samples) / fastest : 0;
}

/// Above this median_over_fastest, a figure is unsteady. Measured on this
/// project's 2-core Zen 5 EPYC VM (2026-11-30): in the four full benchmark
/// runs before 11:00 UTC, of 89 timed rows each, at most two rows passed
/// 1.5 (the fsync'd write's baseline, at 1.58-1.79), against 1.8-4.7 for
/// deduplicate() on the small tensors in partial runs the host stalled.
constexpr double kUnsteady = 1.5;
/// Samples a side needs before its median_over_fastest is judged: of one it
/// is always 1, and of two the median is their mean.
constexpr std::size_t kSteadyMinSamples = 3;

/// Whether one side's samples ran steadily: median_over_fastest at most
/// `limit`, or fewer than kSteadyMinSamples samples (not judged).
inline bool steady(const std::vector<double>& samples, double limit = kUnsteady) {
  return samples.size() < kSteadyMinSamples || median_over_fastest(samples) <= limit;
}

/// Every tensor's bytes in program order, each memory range once: a tensor
/// whose (pointer, size) repeats an earlier one (a tied weight) is left out.
/// deduplicate() never reads such an alias, so a baseline that read it again
/// would flatter deduplicate. Empty tensors are left out too. Views that
/// only overlap (one inside another, or sharing part of their bytes) are
/// kept, each whole: deduplicate() examines each of them, so the baseline
/// reads what it reads.
template <int = 0>
std::vector<ByteSpan> input_spans(Span<const Method> methods) {
  std::vector<ByteSpan> all;
  for (const Method& m : methods)
    for (const Partition& part : m.partitions)
      for (const Tensor& t : part.tensors)
        if (!t.bytes.empty()) all.push_back(t.bytes);
  // Sort positions by (pointer, size, position) and keep the first of each
  // run: the first occurrence in program order.
  struct Entry {
    std::uintptr_t at;
    std::size_t size, pos;
  };
  std::vector<Entry> order(all.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = Entry{reinterpret_cast<std::uintptr_t>(all[i].data()), all[i].size(), i};
  if (order.size() > 1)
    std::qsort(order.data(), order.size(), sizeof(Entry), [](const void* a, const void* b) {
      const Entry& x = *static_cast<const Entry*>(a);
      const Entry& y = *static_cast<const Entry*>(b);
      if (x.at != y.at) return x.at < y.at ? -1 : 1;
      if (x.size != y.size) return x.size < y.size ? -1 : 1;
      return x.pos < y.pos ? -1 : x.pos > y.pos ? 1 : 0;
    });
  std::vector<char> keep(all.size(), 0);
  for (std::size_t k = 0; k < order.size(); ++k)
    keep[order[k].pos] = k == 0 || order[k - 1].at != order[k].at || order[k - 1].size != order[k].size;
  std::vector<ByteSpan> out;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (keep[i]) out.push_back(all[i]);
  return out;
}

template <int = 0>
std::vector<ByteSpan> input_spans(const Program& program) {
  return input_spans(Span<const Method>(program.methods.data(), program.methods.size()));
}

/// Sum of the spans' sizes.
inline std::uint64_t total_bytes(const std::vector<ByteSpan>& spans) noexcept {
  std::uint64_t n = 0;
  for (const ByteSpan& s : spans) n += s.size();
  return n;
}

namespace detail {

/// Calls share(t) for every t in [0, n), each on a thread of its own (t = 0
/// on the calling one), started per call as deduplicate() starts its own
/// (the library's POSIX workers). A thread that cannot be started is
/// skipped there; its share is done here after the join, so every share is
/// done (by fewer threads than asked: a baseline is then slower, never
/// smaller). n = 0 counts as 1. `share` is called through a const
/// reference (a `mutable` lambda does not compile), from several threads
/// at once.
template <class Share>
void run_shares(std::size_t n, const Share& share) {
  if (n == 0) n = 1;  // (run_workers calls share(0) whatever n is)
  std::vector<char> done(n, 0);
  wdedup::detail::run_workers(n, [&](std::size_t t) {
    share(t);
    done[t] = 1;
  });
  for (std::size_t t = 0; t < n; ++t)
    if (!done[t]) share(t);
}

/// Sums the 64-bit words of [p, p + n) (the last < 8 bytes one by one).
/// Four independent accumulators let the compiler vectorize the loop and
/// keep the loads, not the adds, on the critical path.
inline std::uint64_t sum_words_portable(const std::uint8_t* p, std::size_t n) noexcept {
  std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    std::uint64_t w[4];
    std::memcpy(w, p + i, 32);  // unaligned-safe; compiles to plain loads
    a0 += w[0];
    a1 += w[1];
    a2 += w[2];
    a3 += w[3];
  }
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    a0 += w;
  }
  for (; i < n; ++i) a1 += p[i];
  return a0 + a1 + a2 + a3;
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define WDEDUP_BENCH_AVX2 1
/// The same sum with 32-byte AVX2 loads, chosen at run time where the CPU
/// has them. A baseline must be the fastest honest read: glibc's memcmp and
/// XXH3 use AVX2 whatever the build flags say, so on data that sits in cache
/// a 16-byte SSE2 loop would make deduplication look faster than reading.
__attribute__((target("avx2"))) inline std::uint64_t sum_words_avx2(const std::uint8_t* p, std::size_t n) noexcept {
  // Unsigned lanes: the sum wraps, as sum_words_portable's does; signed
  // lanes overflowed on ordinary data (undefined, and GCC's UBSan said so).
  typedef unsigned long long v4 __attribute__((vector_size(32), aligned(1)));
  v4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 += *reinterpret_cast<const v4*>(p + i);
    a1 += *reinterpret_cast<const v4*>(p + i + 32);
    a2 += *reinterpret_cast<const v4*>(p + i + 64);
    a3 += *reinterpret_cast<const v4*>(p + i + 96);
  }
  const v4 a = a0 + a1 + a2 + a3;
  std::uint64_t sum = static_cast<std::uint64_t>(a[0]) + static_cast<std::uint64_t>(a[1]) +
                      static_cast<std::uint64_t>(a[2]) + static_cast<std::uint64_t>(a[3]);
  return sum + sum_words_portable(p + i, n - i);
}
#endif

#if defined(WDEDUP_BENCH_AVX2)
__attribute__((target("avx2"))) inline std::uint64_t sum_words2_avx2(const std::uint8_t* p, const std::uint8_t* q,
                                                                    std::size_t n) noexcept {
  typedef unsigned long long v4 __attribute__((vector_size(32), aligned(1)));  // (unsigned: see above)
  v4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 += *reinterpret_cast<const v4*>(p + i);
    b0 += *reinterpret_cast<const v4*>(q + i);
    a1 += *reinterpret_cast<const v4*>(p + i + 32);
    b1 += *reinterpret_cast<const v4*>(q + i + 32);
    a2 += *reinterpret_cast<const v4*>(p + i + 64);
    b2 += *reinterpret_cast<const v4*>(q + i + 64);
    a3 += *reinterpret_cast<const v4*>(p + i + 96);
    b3 += *reinterpret_cast<const v4*>(q + i + 96);
  }
  const v4 a = a0 + a1 + a2 + a3 + b0 + b1 + b2 + b3;
  std::uint64_t sum = static_cast<std::uint64_t>(a[0]) + static_cast<std::uint64_t>(a[1]) +
                      static_cast<std::uint64_t>(a[2]) + static_cast<std::uint64_t>(a[3]);
  return sum + sum_words_portable(p + i, n - i) + sum_words_portable(q + i, n - i);
}
#endif

/// Sums the 64-bit words of [p, p + n) (the last < 8 bytes one by one).
inline std::uint64_t sum_words(const std::uint8_t* p, std::size_t n) noexcept {
#if defined(WDEDUP_BENCH_AVX2)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return sum_words_avx2(p, n);
#endif
  return sum_words_portable(p, n);
}

/// Sums n bytes at p and n bytes at q, the two read together (interleaved).
inline std::uint64_t sum_words2(const std::uint8_t* p, const std::uint8_t* q, std::size_t n) noexcept {
#if defined(WDEDUP_BENCH_AVX2)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return sum_words2_avx2(p, q, n);
#endif
  std::uint64_t a = 0;
  for (std::size_t i = 0; i < n; i += 4096) {
    const std::size_t k = n - i < 4096 ? n - i : 4096;
    a += sum_words_portable(p + i, k) + sum_words_portable(q + i, k);
  }
  return a;
}

/// Walks bytes [begin, end) of the concatenation of spans piece by piece.
struct SpanCursor {
  const std::vector<ByteSpan>* spans;
  std::size_t index = 0;     ///< current span
  std::uint64_t offset = 0;  ///< within it
  std::uint64_t left = 0;    ///< bytes still to walk

  SpanCursor(const std::vector<ByteSpan>& s, std::uint64_t begin, std::uint64_t end) : spans(&s), left(end - begin) {
    while (index < s.size() && begin >= s[index].size()) begin -= s[index++].size();
    offset = begin;
  }
  /// Contiguous bytes available at the cursor.
  std::uint64_t run() const noexcept {
    return left == 0 ? 0 : wdedup::detail::min_of<std::uint64_t>(left, (*spans)[index].size() - offset);
  }
  const std::uint8_t* ptr() const noexcept { return (*spans)[index].data() + offset; }
  void advance(std::uint64_t n) noexcept {
    offset += n;
    left -= n;
    while (left > 0 && offset == (*spans)[index].size()) {
      ++index;
      offset = 0;
    }
  }
};

/// Sums bytes [begin, end) as two streams, its halves, read together.
inline std::uint64_t sum_range2(const std::vector<ByteSpan>& spans, std::uint64_t begin, std::uint64_t end) noexcept {
  const std::uint64_t mid = begin + ((end - begin) / 2 & ~std::uint64_t{63});
  SpanCursor a(spans, begin, mid), b(spans, mid, end);
  std::uint64_t sum = 0;
  while (a.run() > 0 && b.run() > 0) {
    const std::uint64_t n = wdedup::detail::min_of(a.run(), b.run());
    sum += sum_words2(a.ptr(), b.ptr(), static_cast<std::size_t>(n));
    a.advance(n);
    b.advance(n);
  }
  for (SpanCursor* c : {&a, &b})
    for (std::uint64_t n; (n = c->run()) > 0; c->advance(n)) sum += sum_words(c->ptr(), static_cast<std::size_t>(n));
  return sum;
}

/// Sums bytes [begin, end) of the concatenation of `spans`.
inline std::uint64_t sum_range(const std::vector<ByteSpan>& spans, std::uint64_t begin, std::uint64_t end) noexcept {
  std::uint64_t sum = 0, at = 0;
  for (const ByteSpan& s : spans) {
    const std::uint64_t lo = wdedup::detail::max_of(begin, at), hi = wdedup::detail::min_of(end, at + s.size());
    if (lo < hi) sum += sum_words(s.data() + (lo - at), static_cast<std::size_t>(hi - lo));
    at += s.size();
    if (at >= end) break;
  }
  return sum;
}

}  // namespace detail

/// The threads deduplicate() runs `program` on when given `threads` (0:
/// every core, as it counts them): at most those, one per 4 MiB of work
/// (its tensors' bytes and 1.5 KiB a tensor; see WDEDUP_WORK_PER_STARTED_THREAD),
/// at least one. Give a baseline the same count, read_pass(in,
/// dedup_threads(program, threads)): given more threads than the work is
/// worth, a read pass starts every one (a share may be empty) where
/// deduplicate() starts few. (A user trial's 20 MB program at 1024 threads:
/// 41.4x "the read pass" given 1024, 0.71x at one thread.)
inline unsigned dedup_threads(const Program& program, unsigned threads = 0) noexcept {
  if (threads == 0) threads = wdedup::detail::hardware_threads();
  if (threads > wdedup::detail::kMaxWorkerThreads) threads = wdedup::detail::kMaxWorkerThreads;
  return wdedup::detail::threads_worth_starting(program, wdedup::detail::tensor_count(program), threads);
}

/// The physical limit: one sequential pass over every byte of `spans`,
/// summing 64-bit words, cut into `threads` contiguous equal shares (0 =
/// every core), one thread each, the calling thread included. Returns the
/// sum: use it (accumulate it into something you print) so the compiler
/// cannot drop the pass. Threads are started per call, as deduplicate()
/// starts its own, so both pay the same start-up cost. It starts every
/// thread it is given, on any input (a share may be empty): to compare it
/// with deduplicate(), give it dedup_threads(program, threads).
///
/// `streams` = 2 reads each thread's share as its two halves at once. One
/// core's hardware prefetcher follows one stream only so far; two streams
/// (as memcmp reads) get noticeably more bandwidth from memory on many
/// machines, so deduplication can beat a one-stream pass. The two-stream
/// pass is the stricter baseline.
template <int = 0>
std::uint64_t read_pass(const std::vector<ByteSpan>& spans, unsigned threads = 0, unsigned streams = 1) {
  if (threads == 0) threads = wdedup::detail::hardware_threads();
  const std::uint64_t total = total_bytes(spans);
  auto sum = [&](std::uint64_t b, std::uint64_t e) {
    return streams >= 2 ? detail::sum_range2(spans, b, e) : detail::sum_range(spans, b, e);
  };
  if (threads == 1) return sum(0, total);
  std::vector<std::uint64_t> sums(threads, 0);
  detail::run_shares(threads, [&](std::size_t t) {
    // Shares end on 64-byte boundaries so no two threads touch one cache line.
    auto cut = [&](std::size_t k) { return k == threads ? total : (total / threads * k) & ~std::uint64_t{63}; };
    sums[t] = sum(cut(t), cut(t + 1));
  });
  std::uint64_t out = 0;
  for (std::uint64_t v : sums) out += v;
  return out;
}

/// What compare() measured. `ratio` > 1 means the subject was faster.
struct Paired {
  double seconds = 0;           ///< median subject time
  double baseline_seconds = 0;  ///< median baseline time
  /// Median over repetitions of baseline time / subject time, each pair
  /// measured back to back: drift in machine load cancels within a pair.
  double ratio = 0;
  std::vector<double> samples, baseline_samples;

  /// Whether both sides ran steadily enough for their medians to describe
  /// the code: median_over_fastest at most `limit` on each side with
  /// kSteadyMinSamples samples or more (a side with fewer is not judged,
  /// so a compare() of one or two repetitions is always "steady"). An
  /// unsteady measurement is best taken again, on a quieter machine or with
  /// more repetitions, rather than read.
  bool steady(double limit = kUnsteady) const {
    return bench::steady(samples, limit) && bench::steady(baseline_samples, limit);
  }
};

/// compare()'s default untimed step: none.
struct NothingBetween {
  void operator()() const noexcept {}
};

/// Runs `subject` and `baseline` `reps` times each (at least once: 0 counts
/// as 1, so a Paired always holds a measurement), interleaved: even
/// repetitions run the subject first, odd ones the baseline first, so
/// neither always inherits the other's cache or frequency state. Warm up
/// before calling (run each once): compare() measures every call it makes.
/// `untimed`, if given, runs before each repetition, off the clock: e.g.
/// release_table_cache() and a read pass, so that each deduplicate() starts
/// as a one-shot export's does, as wdedup-bench's do (inside the subject it
/// would be timed: its page faults after).
template <class Subject, class Baseline, class Untimed = NothingBetween>
Paired compare(unsigned reps, Subject&& subject, Baseline&& baseline, Untimed&& untimed = Untimed{}) {
  Paired p;
  std::vector<double> ratios;
  for (unsigned r = 0; r < wdedup::detail::max_of(1u, reps); ++r) {
    untimed();
    double ts = 0, tb = 0;
    auto time_subject = [&] {
      const double t0 = now_seconds();
      subject();
      ts = now_seconds() - t0;
    };
    auto time_baseline = [&] {
      const double t0 = now_seconds();
      baseline();
      tb = now_seconds() - t0;
    };
    if (r % 2 == 0) {
      time_subject();
      time_baseline();
    } else {
      time_baseline();
      time_subject();
    }
    p.samples.push_back(ts);
    p.baseline_samples.push_back(tb);
    ratios.push_back(ts > 0 ? tb / ts : 0);
  }
  p.seconds = median(p.samples);
  p.baseline_seconds = median(p.baseline_samples);
  p.ratio = median(ratios);
  return p;
}

/// Gigabytes (1e9 bytes) per second.
inline double gb_per_s(std::uint64_t bytes, double seconds) noexcept {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

/// What a call added to the process's resident memory at its peak
/// (resident_peak).
struct ResidentPeak {
  /// Whether it was measured: on Linux, where /proc/self/clear_refs takes
  /// "5" (since 4.0) and /proc/self/status reads. Elsewhere the call runs
  /// and nothing is known.
  bool known = false;
  std::uint64_t before = 0;  ///< bytes resident right before the call
  std::uint64_t peak = 0;    ///< the most bytes resident during it
  /// Bytes the call added at its peak (0 where it added none).
  std::uint64_t added() const noexcept { return peak > before ? peak - before : 0; }
};

namespace detail {

/// Calls on_line(line, length) for each line of the file at `path` (without
/// its '\n') until it returns true; false where the file cannot be opened.
/// A line that does not fit the 4 KiB buffer with its '\n' (4,096 bytes
/// and more without it) is skipped (no line this is asked
/// for is: a figure's, a cgroup's path, a cgroup mount's; a mount of
/// another type may be, an overlay's with many layers), and so is a last
/// line without its '\n' (cut short: the kernel ends each line of these
/// files with one).
/// open and read, not stdio.
template <class OnLine>
bool for_each_line(const char* path, OnLine&& on_line) noexcept {
#if defined(__linux__)
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  std::size_t held = 0;   // bytes in buf, from the start of a line
  bool skipping = false;  // inside a line longer than buf
  for (bool done = false; !done;) {
    const ssize_t n = ::read(fd, buf + held, sizeof buf - held);
    if (n <= 0) break;
    held += static_cast<std::size_t>(n);
    std::size_t at = 0;
    for (;;) {
      const void* nl = std::memchr(buf + at, '\n', held - at);
      if (nl == nullptr) break;
      const std::size_t end = static_cast<std::size_t>(static_cast<const char*>(nl) - buf);
      if (!skipping && on_line(static_cast<const char*>(buf + at), end - at)) {
        done = true;
        break;
      }
      skipping = false;
      at = end + 1;
    }
    // Keep the unfinished line; one that fills the buffer is dropped, and
    // the rest of it skipped to its end.
    if (at == 0 && held == sizeof buf) {
      held = 0;
      skipping = true;
    } else {
      std::memmove(buf, buf + at, held - at);
      held -= at;
    }
  }
  ::close(fd);
  return true;
#else
  (void)path;
  (void)on_line;
  return false;
#endif
}

/// Reads the decimal digits of line[from, n), at most 19 of them (which
/// cannot overflow 64 bits), into `*out`; returns where they end (`from`
/// where there are none). Every number the files read here hold is shorter;
/// a longer one ends short of its line, which each reader takes as no number.
inline std::size_t decimal_at(const char* line, std::size_t from, std::size_t n, std::uint64_t* out) noexcept {
  std::uint64_t v = 0;
  std::size_t i = from;
  for (; i < n && i - from < 19 && line[i] >= '0' && line[i] <= '9'; ++i)
    v = v * 10 + static_cast<std::uint64_t>(line[i] - '0');
  *out = v;
  return i;
}

/// The "<field>: N kB" line of /proc/self/status (or /proc/meminfo), in
/// bytes; -1 where it cannot be read. Read a line at a time through
/// for_each_line's buffer, as the file has no size limit (a process in
/// 65,536 groups has a Groups line of ~450 KB, skipped: no figure's line is
/// that long). (open and read, not stdio: nothing allocated between the
/// reset and the call.)
inline long long proc_status_bytes(const char* field, const char* path = "/proc/self/status") noexcept {
  const std::size_t len = std::strlen(field);
  long long out = -1;
  for_each_line(path, [&](const char* line, std::size_t n) {
    if (n <= len || std::memcmp(line, field, len) != 0 || line[len] != ':') return false;
    std::size_t p = len + 1;
    while (p < n && (line[p] == ' ' || line[p] == '\t')) ++p;
    std::uint64_t kib = 0;
    if (decimal_at(line, p, n, &kib) != p) out = static_cast<long long>(kib * 1024);
    return true;
  });
  return out;
}

/// The highest peak resident size resident_peak read before resetting the
/// kernel's mark (-1: none yet), which process_resident_peak counts.
inline wdedup::detail::Atomic<long long> g_peak_before_reset{-1};  // (not <atomic>: detail/atomic.hpp says why)

/// Resets the process's peak resident size to what is resident now.
inline bool reset_resident_peak() noexcept {
#if defined(__linux__)
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
#else
  return false;
#endif
}

}  // namespace detail

/// The memory a run can be given now, and which limit says so
/// (memory_limit()).
struct MemoryLimit {
  std::uint64_t bytes = 0;
  /// The limit that set `bytes`: "MemAvailable in /proc/meminfo", "its
  /// cgroup's memory.max, less what the cgroup uses" (cgroup v2), "its
  /// cgroup's memory.limit_in_bytes, less what the cgroup uses" (cgroup v1)
  /// or "this machine's physical memory"; nullptr where none of them could
  /// be read (`bytes` is then 0 and means nothing).
  const char* source = nullptr;
  bool known() const noexcept { return source != nullptr; }
};

namespace detail {

/// The number a cgroup limit file holds, or false where it holds none: v2's
/// "max", and v1's way of saying the same, PAGE_COUNTER_MAX pages (2^63
/// less a page on a 64-bit kernel, whatever its page size: 9223372036854771712
/// with 4 KiB pages), which anything from 2^62 up is taken to be. (A 32-bit
/// kernel's, (2^31 - 1) 4 KiB pages, is below that, and above any memory it
/// has: it never wins against physical memory.)
inline bool read_cgroup_limit(const char* path, std::uint64_t* out) noexcept {
  bool found = false;
  for_each_line(path, [&](const char* line, std::size_t n) {
    const std::size_t end = decimal_at(line, 0, n, out);
    found = end != 0 && end == n && *out < (std::uint64_t{1} << 62);  // ("max" and anything else: no number)
    return true;
  });
  return found;
}

/// Which cgroup hierarchy holds a memory limit: v2's (one hierarchy, every
/// controller) or v1's memory controller's (one hierarchy per controller, or
/// per set of them mounted together).
enum class CgroupVersion { v1, v2 };

/// Whether the comma-separated `list` (of `n` bytes) names `word` ("cpu,memory"
/// names "memory"; "name=memory" and "memory_x" do not).
inline bool lists(const char* list, std::size_t n, const char* word) noexcept {
  const std::size_t len = std::strlen(word);
  for (std::size_t at = 0; at <= n;) {
    const void* comma = std::memchr(list + at, ',', n - at);
    const std::size_t end = comma != nullptr ? static_cast<std::size_t>(static_cast<const char*>(comma) - list) : n;
    if (end - at == len && std::memcmp(list + at, word, len) == 0) return true;
    at = end + 1;
  }
  return false;
}

/// A path as /proc/self/mountinfo writes it, into `out`: its length, or
/// `cap` where it does not fit. The kernel writes a space, tab, newline or
/// backslash as "\040", "\011", "\012", "\134" (a mount point
/// "/mnt/my cgroup" is "/mnt/my\040cgroup"), which keeps the line's fields
/// apart.
inline std::size_t mountinfo_path(const char* field, std::size_t n, char* out, std::size_t cap) noexcept {
  std::size_t len = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (len == cap) return cap;
    char c = field[i];
    if (c == '\\' && i + 3 < n && field[i + 1] >= '0' && field[i + 1] <= '3' && field[i + 2] >= '0' &&
        field[i + 2] <= '7' && field[i + 3] >= '0' && field[i + 3] <= '7') {
      c = static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    }
    out[len++] = c;
  }
  return len;
}

/// The directory of this process's cgroup in hierarchy `version`, written
/// into `file`; false where it cannot be found. /proc/self/cgroup
/// (`self_cgroup`) names the cgroup from the hierarchy's root: "0::/a/b"
/// (v2), "4:memory:/a/b" or "3:cpu,memory:/a/b" (v1, the memory
/// controller's). /proc/self/mountinfo (`mountinfo`) says where the
/// hierarchy is mounted, which is not always /sys/fs/cgroup (a hybrid system
/// mounts cgroup2 at /sys/fs/cgroup/unified, v1's memory at
/// /sys/fs/cgroup/memory), and from which of its cgroups down: a container
/// without a cgroup namespace sees its cgroup as "/docker/<id>", mounted
/// with that root at /sys/fs/cgroup, so the cgroup's directory is the mount
/// point itself. A mount whose root the cgroup is not under shows none of
/// it; the first that does is taken. `*base` is the mount point's length
/// (the walk up the ancestors stops there), `*len` the directory's; `file`
/// holds `cap` bytes, room for a limit file's name past the directory.
inline bool cgroup_dir(const char* self_cgroup, const char* mountinfo, CgroupVersion version, char* file,
                       std::size_t cap, std::size_t* base, std::size_t* len) noexcept {
  char path[4096];  // (a line of for_each_line's, at most)
  std::size_t path_len = 0;
  for_each_line(self_cgroup, [&](const char* line, std::size_t n) {
    // "<hierarchy ID>:<controllers>:<path>": v2's line is "0::<path>".
    const void* colon = std::memchr(line, ':', n);
    if (colon == nullptr) return false;
    const std::size_t c1 = static_cast<std::size_t>(static_cast<const char*>(colon) - line);
    colon = std::memchr(line + c1 + 1, ':', n - c1 - 1);
    if (colon == nullptr) return false;
    const std::size_t c2 = static_cast<std::size_t>(static_cast<const char*>(colon) - line);
    const bool ours = version == CgroupVersion::v2 ? c1 == 1 && line[0] == '0' && c2 == 2
                                                   : lists(line + c1 + 1, c2 - c1 - 1, "memory");
    if (!ours) return false;
    path_len = n - c2 - 1;  // (from its '/': a path without one is under no mount's root)
    std::memcpy(path, line + c2 + 1, path_len);
    return true;
  });
  if (path_len == 0) return false;
  bool found = false;
  for_each_line(mountinfo, [&](const char* line, std::size_t n) {
    // "36 35 0:31 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory":
    // the root and the mount point are its 4th and 5th fields; the type,
    // the source and the super options follow the "-" that ends the
    // optional fields ("shared:9"), however many there are.
    std::size_t at = 0;
    const auto next = [&](std::size_t* field_len) {
      const char* field = line + at;
      const void* space = std::memchr(field, ' ', n - at);
      *field_len = space != nullptr ? static_cast<std::size_t>(static_cast<const char*>(space) - field) : n - at;
      at = space != nullptr ? at + *field_len + 1 : n;
      return field;
    };
    std::size_t root_n = 0, point_n = 0, type_n = 0, options_n = 0, skip = 0;
    for (int i = 0; i < 3; ++i) next(&skip);
    const char* const root = next(&root_n);
    const char* const point = next(&point_n);
    next(&skip);  // (the mount's options)
    for (const char* f = next(&skip); skip != 0 && !(skip == 1 && *f == '-');) f = next(&skip);
    const char* const type = next(&type_n);
    next(&skip);  // (the source)
    const char* const options = next(&options_n);
    if (version == CgroupVersion::v2 ? type_n != 7 || std::memcmp(type, "cgroup2", 7) != 0
                                     : type_n != 6 || std::memcmp(type, "cgroup", 6) != 0 ||
                                           !lists(options, options_n, "memory"))
      return false;
    // The cgroup is under the root where its path is the root's, or goes on
    // past it after a '/' (root "/a" holds "/a/b", not "/ab"); every path is
    // under "/", and keeps its own '/' past it.
    std::size_t root_len = mountinfo_path(root, root_n, file, cap);
    if (root_len == 1 && file[0] == '/') root_len = 0;
    if (root_len >= cap || root_len > path_len || std::memcmp(file, path, root_len) != 0 ||
        (root_len < path_len && path[root_len] != '/'))
      return false;
    // A cgroup outside the root of its cgroup namespace (a process moved
    // there, or one that entered the namespace) is named from that root
    // with ".." ("0::/../../user.slice/s"): the mount, the namespace's
    // root, does not show it, and the path would lead out of the mount.
    for (std::size_t i = root_len; i + 3 <= path_len; ++i)
      if (std::memcmp(path + i, "/..", 3) == 0 && (i + 3 == path_len || path[i + 3] == '/')) return false;
    const std::size_t point_len = mountinfo_path(point, point_n, file, cap);
    const std::size_t below = path_len - root_len;
    if (point_len >= cap || point_len + below + sizeof "/memory.limit_in_bytes" > cap) return false;
    std::memcpy(file + point_len, path + root_len, below);
    *base = point_len;
    *len = point_len + below;
    found = true;
    return true;
  });
  return found;
}

/// The number on the "<field> N" line of a memory.stat file, or 0 where it
/// has none or cannot be read.
inline std::uint64_t memory_stat_field(const char* path, const char* field) noexcept {
  const std::size_t len = std::strlen(field);
  std::uint64_t out = 0;
  for_each_line(path, [&](const char* line, std::size_t n) {
    if (n <= len || std::memcmp(line, field, len) != 0 || line[len] != ' ') return false;
    std::uint64_t v = 0;
    if (decimal_at(line, len + 1, n, &v) == n) out = v;
    return true;
  });
  return out;
}

/// The least room this process's cgroup and its ancestors leave in
/// hierarchy `version`: at each level that sets a limit (v2's memory.max,
/// v1's memory.limit_in_bytes), the limit less what the cgroup uses, its
/// usage (memory.current, memory.usage_in_bytes) but for the inactive page
/// cache the kernel reclaims first (memory.stat's inactive_file, v1's
/// hierarchical total_inactive_file), as MemAvailable counts the machine's;
/// 0 where it uses more. A limit alone would pass a run into a container
/// whose other processes hold most of it. False where no level sets one: no
/// line of that hierarchy in `self_cgroup`, no mount of it in `mountinfo`
/// that shows the cgroup, no limit file, each "max" (v2) or its huge number
/// (v1). The kernel holds a cgroup to each ancestor's limit too (v1 only to
/// an ancestor whose memory.use_hierarchy is 1, as every kernel since 5.11
/// has it, and earlier ones as systemd and Docker set them up).
/// Only the ancestors the mount shows are read: inside a container (a
/// cgroup namespace, or a mount from the container's cgroup down) its own
/// limit is the mount point's, and those above it are the host's to know.
inline bool cgroup_memory_limit(const char* self_cgroup, const char* mountinfo, CgroupVersion version,
                                std::uint64_t* out) noexcept {
  char file[4096 + 256];
  std::size_t base = 0, len = 0;
  if (!cgroup_dir(self_cgroup, mountinfo, version, file, sizeof file, &base, &len)) return false;
  const bool v2 = version == CgroupVersion::v2;
  const char* const names[] = {v2 ? "/memory.max" : "/memory.limit_in_bytes",
                               v2 ? "/memory.current" : "/memory.usage_in_bytes", "/memory.stat"};
  // (cgroup_dir left room for the longest of them past the directory.)
  const auto at = [&](const char* name) {
    std::memcpy(file + len, name, std::strlen(name) + 1);
    return static_cast<const char*>(file);
  };
  bool found = false;
  // The cgroup itself, then each ancestor up to the mount point ("/a/b",
  // "/a", "").
  for (bool own = true;; own = false) {
    while (len > base && file[len - 1] == '/') --len;  // ("/" itself is the root)
    // A v1 ancestor whose memory.use_hierarchy is 0 (kernels before 5.11)
    // is not charged for its children: its limit is not theirs. (A cgroup's
    // descendants take its 1, so the ancestor's own file says.)
    std::uint64_t hierarchy = 1;
    const bool charged = v2 || own || !read_cgroup_limit(at("/memory.use_hierarchy"), &hierarchy) || hierarchy != 0;
    std::uint64_t limit = 0;
    if (charged && read_cgroup_limit(at(names[0]), &limit)) {
      std::uint64_t usage = 0;
      if (!read_cgroup_limit(at(names[1]), &usage)) usage = 0;
      const std::uint64_t inactive = memory_stat_field(at(names[2]), v2 ? "inactive_file" : "total_inactive_file");
      const std::uint64_t used = usage > inactive ? usage - inactive : 0;
      const std::uint64_t room = limit > used ? limit - used : 0;
      if (!found || room < *out) {
        *out = room;
        found = true;
      }
    }
    if (len == base) break;
    while (len > base && file[len - 1] != '/') --len;
  }
  return found;
}

/// memory_limit() from these files and this physical memory (tests give
/// their own).
inline MemoryLimit memory_limit_from(const char* meminfo, const char* self_cgroup, const char* mountinfo,
                                     std::uint64_t physical) noexcept {
  MemoryLimit out;
  if (physical != 0) out = MemoryLimit{physical, "this machine's physical memory"};
  // ("MemAvailable:   23648000 kB", as /proc/self/status words its sizes.)
  if (const long long available = proc_status_bytes("MemAvailable", meminfo);
      available >= 0 && (!out.known() || static_cast<std::uint64_t>(available) <= out.bytes))
    out = MemoryLimit{static_cast<std::uint64_t>(available), "MemAvailable in /proc/meminfo"};
  // Both hierarchies: a hybrid system has both mounted, and a limit is in
  // the one its memory controller is bound to (which leaves the other's
  // files out).
  std::uint64_t cgroup = 0;
  if (cgroup_memory_limit(self_cgroup, mountinfo, CgroupVersion::v2, &cgroup) && (!out.known() || cgroup < out.bytes))
    out = MemoryLimit{cgroup, "its cgroup's memory.max, less what the cgroup uses"};
  if (cgroup_memory_limit(self_cgroup, mountinfo, CgroupVersion::v1, &cgroup) && (!out.known() || cgroup < out.bytes))
    out = MemoryLimit{cgroup, "its cgroup's memory.limit_in_bytes, less what the cgroup uses"};
  return out;
}

}  // namespace detail

/// The memory this process can be given now: the smaller of MemAvailable
/// (/proc/meminfo: what the kernel can give without swapping, free memory
/// and caches it can drop) and the room its cgroup's memory limit leaves
/// where one is set, cgroup v2's memory.max or v1's memory.limit_in_bytes
/// less what the cgroup uses (its own or an ancestor's: past the limit the
/// kernel reclaims, then kills within the cgroup, whatever the machine has
/// free), the cgroup's directory found through
/// /proc/self/mountinfo (hybrid systems and containers mount the
/// hierarchies elsewhere than /sys/fs/cgroup); physical memory where neither
/// can be read (off Linux). A tool compares what a run asks for with this
/// before the run, rather than meet the out-of-memory killer part-way:
/// physical memory alone let runs start that other processes' memory, or a
/// container's limit, left no room for.
inline MemoryLimit memory_limit() noexcept {
  return detail::memory_limit_from("/proc/meminfo", "/proc/self/cgroup", "/proc/self/mountinfo", physical_memory());
}

/// Runs `f` once and says how much resident memory it added at its peak:
/// what the call costs a machine in memory (its allocations, its mapped
/// tables, its threads' stacks, and whatever it leaves held on return,
/// such as a result it assigns), as the kernel counts pages. Freed heap
/// memory is first given back to the system (glibc's malloc_trim):
/// memory an earlier call freed and the allocator kept would otherwise be
/// reused unseen, and the figure would depend on what ran before. Not all
/// of it: malloc_trim leaves the free top of each thread arena (the arenas
/// malloc gives threads other than the main one) resident, up to glibc's
/// trim threshold, which is 128 KiB but grows to twice the largest block
/// malloc mapped on its own and freed (at most 64 MiB). A call whose
/// threads take over arenas an earlier call's threads left reuses those
/// pages unseen: with 16 MiB so kept, a worker thread's 16 MiB of small
/// blocks added 0 (glibc 2.36). Figures of calls that run on more than one
/// thread can be that much low; MALLOC_ARENA_MAX=1 puts every thread on the
/// main arena, which is trimmed whole. The kernel's counters may lag by up
/// to a batch of pages per CPU (at least 32 pages each: 256 KiB on 2 CPUs,
/// MiBs on big machines). Not a timing: the trim and the reads of /proc
/// take time of their own.
template <class F>
ResidentPeak resident_peak(F&& f) {
  ResidentPeak r;
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
  // (The process's peak so far, before the reset clears it.)
  const long long so_far = detail::proc_status_bytes("VmHWM");
  using wdedup::detail::Order;
  for (long long kept = detail::g_peak_before_reset.load(Order::relaxed); so_far > kept;)
    if (detail::g_peak_before_reset.compare_exchange_weak(kept, so_far, Order::relaxed, Order::relaxed)) break;
  const bool reset = detail::reset_resident_peak();
  const long long before = reset ? detail::proc_status_bytes("VmRSS") : -1;
  f();
  const long long peak = before >= 0 ? detail::proc_status_bytes("VmHWM") : -1;
  if (before >= 0 && peak >= 0) {
    r.known = true;
    r.before = static_cast<std::uint64_t>(before);
    r.peak = static_cast<std::uint64_t>(peak);
  }
  return r;
}

/// The process's peak resident size so far, in bytes, resident_peak's
/// resets included: the kernel's mark (VmHWM), or the highest one a
/// resident_peak call read before it cleared the mark, where that is
/// higher. (After such a reset, VmHWM, getrusage's ru_maxrss and
/// /usr/bin/time -f %M give only the peak since.) -1 where
/// /proc/self/status cannot be read (off Linux).
inline long long process_resident_peak() noexcept {
  const long long now = detail::proc_status_bytes("VmHWM");
  const long long kept = detail::g_peak_before_reset.load(wdedup::detail::Order::relaxed);
  return now < 0 ? -1 : (kept > now ? kept : now);
}

}  // namespace bench
}  // namespace wdedup

#endif  // WDEDUP_BENCH_HPP
