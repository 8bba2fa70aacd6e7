// benchmarks/harness.hpp — what every benchmark of wdedup-bench shares: the
// run configuration, one result row (figure, same-run baseline, ratio,
// target), progress output, and the heap-allocation counter. Not installed.
#ifndef WDEDUP_BENCHMARKS_HARNESS_HPP
#define WDEDUP_BENCHMARKS_HARNESS_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>  // std::uncaught_exceptions
#include <optional>
#include <string>
#include <utility>
#include <vector>

// Where the harness can count heap allocations and started threads itself
// (alloc_counter.cpp, thread_counter.cpp): glibc on Linux, without a
// sanitizer, whose runtime replaces malloc and interposes pthread_create.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define WBENCH_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WBENCH_SANITIZED 1
#endif
#if !defined(WBENCH_SANITIZED) && defined(__GLIBC__) && defined(__linux__)
#define WBENCH_COUNTS_ITSELF 1
#endif

namespace wdedup {
struct Program;
}  // namespace wdedup

namespace wbench {

/// --references' names, in the order the JSON's facts list them.
inline constexpr const char* kReferenceNames[] = {"sha256", "fp-sha256"};
/// --workloads' names, in the order the dedup group runs them.
inline constexpr const char* kWorkloadNames[] = {"llama-1+1",   "llama-3+3",  "llama-3+2", "small-tensors",
                                                 "adversarial", "same-names", "ptd"};

struct Config {
  bool quick = false;
  unsigned reps = 7;
  std::vector<unsigned> threads;  ///< thread counts for the dedup workloads
  // Llama generator (0 = the preset's value).
  std::string model = "small";
  std::uint32_t layers = 0, dim = 0, hidden_dim = 0, vocab_size = 0, n_heads = 0, n_kv_heads = 0,
                max_seq_len = 0;
  // Synthetic workloads.
  std::uint64_t small_tensors = 100000, small_tensor_size = 4096;
  std::uint64_t adversarial_count = 2048, adversarial_size = 256 * 1024;
  /// Pages for the synthetic workloads' memory (--input-pages): "default"
  /// (the system's transparent-huge-page policy decides, as for any
  /// program's new[]), "huge" or "small" (asked for with madvise before
  /// the memory is first touched).
  std::string input_pages = "default";
  // The user's own weights: .ptd files, one method each (workload "ptd").
  std::vector<std::string> ptd_files;
  // Runtime.
  std::vector<std::uint64_t> key_counts{16, 256, 4096, 65536};
  std::uint64_t lookups = 1u << 20;         ///< lookups per timed pass (ours, unordered_map)
  std::uint64_t scan_strcmps = 20000000;    ///< budget of strcmp calls per timed scan pass
  std::uint64_t big_tensor = 1ull << 30;    ///< the "1 GiB" tensor of get_data / load_data_into
  std::uint64_t write_bytes = 2000000000;   ///< the "2 GB" store
  // Build cost.
  std::string cxx = "g++";
  std::string include_dir;
  unsigned compile_reps = 7;
  // Where files go.
  std::string tmpdir = ".";
  std::string json_path = "results.json";
  std::vector<std::string> only;  ///< groups to run; empty = all
  std::vector<std::string> workloads;  ///< dedup workloads to run; empty = all
  /// Reference approaches timed against deduplicate() (--references, one
  /// of kReferenceNames each): "sha256" (the 8x target's), "fp-sha256"
  /// (untargeted); empty = both.
  std::vector<std::string> references;
  bool progress = false;
  /// Dedup workloads only: one read pass and one deduplicate() per thread
  /// count, nothing timed (what scripts/profile.sh runs under callgrind).
  bool once = false;

  bool wants(const std::string& group) const { return any_of(only, group); }
  /// The dedup workloads run: --once runs them (an --only without dedup
  /// is refused with it).
  bool runs_dedup() const { return once || wants("dedup"); }
  bool wants_workload(const std::string& w) const { return any_of(workloads, w); }
  bool wants_reference(const std::string& r) const { return any_of(references, r); }

 private:
  static bool any_of(const std::vector<std::string>& list, const std::string& x) {
    if (list.empty()) return true;
    for (const std::string& g : list)
      if (g == x) return true;
    return false;
  }
};

// ---- what the runtime group holds at once (check_sizes, main.cpp) ---------------
//
// A lookup store of N keys (run_lookups, runtime_bench.cpp), measured as the
// process's peak resident memory (/usr/bin/time -f %M, and VmRSS / VmHWM
// along the way; -O2 build, --quick --only runtime --big-tensor 4096 --reps
// 1, 2026-12-05). At 1,000,000 keys, step by step: 514 MiB with the store
// built (each key's name as a std::string and its heap block, 80 bytes, and
// its 16 bytes of data, kept to the end; the NamedDataStore's entry, name
// copy, layout and index slots for it, ~435), 963 MiB while write_ptd_file
// wrote it (its plan of the file beside the store, ~470), and 1,052 MiB at
// the end, the store freed: the file mapped (318 bytes a key) and mapped
// again for the allocation count; unordered_maps from the names to their
// layouts and to their indices, with their name copies and buckets, ~230;
// a copy of every name while the queries are drawn, 80; the unordered_map
// the open time builds, ~120; and what the allocator kept of the store's
// memory. Peaks: 319 MiB at 250,000 keys, 1,052 MiB at 1,000,000, 2,030 MiB
// at 2,000,000 and 3,990 MiB at 4,000,000, 1,025 bytes a key from one to
// the next; 1,130 MiB at 1,048,577 (2^20 + 1), where each vector has just
// doubled its capacity, 1,124 bytes a key. (The 16 bytes a key counted here
// before were the tensors' alone: a review saw 1.08 GB at 1,000,000 keys.)
// 1,152 a key, with the queries below, is above every one of those peaks:
// 2.5% above at 1,048,577 keys, 10% at 4,000,000.
constexpr std::uint64_t kLookupBytesPerKey = 1152;
// Each query, beyond: a present key's name and a missing one's (80 bytes
// each, as above) and their right answers (8 each). 250,000 keys with
// 250,000 queries (--lookups 250000) peaked 34.4 MiB above 32,768 queries:
// 166 bytes a query.
constexpr std::uint64_t kLookupBytesPerQuery = 192;
// The --big-tensor tensor is held twice at once (run_data): its array
// while write_ptd_file writes it to a file the page cache (or a tmpfs)
// holds, then that file mapped and a destination as large for
// load_data_into. 256 MiB peaked at 518 MiB, 1 GiB at 2.1 GB (the review).
constexpr std::uint64_t kBigTensorCopies = 2;

// ---- what a dedup workload holds at once (check_sizes, main.cpp) ----------------
//
// Each tensor of the small-tensor, adversarial and same-names workloads, beyond its
// bytes: its Tensor record in the workload's Program (its name a short
// std::string), what a deduplicate() call holds for it (the call's tables, and
// its key and FunctionTensor strings in the result) and what the baselines hold
// for it (a digest each). Measured as the run's peak resident size (the JSON's
// resident_peak_bytes: bench::process_resident_peak, which counts the peaks
// bench::resident_peak's resets cleared, where getrusage and
// `/usr/bin/time -f %M` do not) less a run of 2 tensors' (7.5 MiB), over the
// count (debugoptimized build, --only dedup, glibc 2.36, 2 cores). Small tensors of 4,096 bytes:
// 638-760 at 16,386 to 262,146 tensors; adversarial ones: 769-924 at 8,193 to
// 131,073, the most just past a vector's doubling (32,769). With malloc's
// memory on transparent huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, as
// THP "always" gives it): 835-855 and 1,031-1,068 (32,769 adversarial tensors,
// --threads 1,2 to 1,32). (The figures of 414f70b
// and 51b0778, 420-742, were getrusage's peak, which is only the peak since the
// last reset, less a 2-tensor run's, which from a Python parent is that
// parent's own size: 13.6 MiB here, where the run holds 7.5.) The fingerprint +
// SHA-256 reference (two_level.hpp: a digest kept a hashed tensor, its grouping's
// tables during its call) added about 35: 792 and 951 at 65,538 small and 32,769
// adversarial tensors, against 758 and 916 for the code before it, run by run on one
// 2-core VM (its second pass, the buffers hashed again, holds 32 bytes for each:
// none on the small tensors, and within those figures on the adversarial ones).
// The most on huge pages, 1,068 with those 35 added, comes to 1,103: 1,536 is 39%
// above it. bench_args checks those two runs against it, and one of the same names. The same names (as
// many tensors as --small-tensors, every one a buffer of its own, every key
// generated): 854 at 100,000, against 717 for the small tensors in the same
// release build (2026-12-07, --only dedup --threads 1,2 --reps 1, a run each).
constexpr std::uint64_t kDedupBytesPerTensor = 1536;

/// The queries run_lookups draws for a store of `keys` keys: every key in
/// random order (in several rounds for a small store), at most
/// max(keys, 4096) of them and at most --lookups.
inline std::uint64_t lookup_queries(const Config& c, std::uint64_t keys) {
  const std::uint64_t most = keys > 4096 ? keys : 4096;
  return c.lookups < most ? c.lookups : most;
}

/// The store size whose lookups have a target against the strcmp scan
/// (run_lookups; counted by planned_targets, targets.hpp).
constexpr std::uint64_t kScanTargetKeys = 4096;

/// A pass/fail range on a row's ratio (or, for absolute targets such as
/// compile time and allocation counts, on its value): met if
/// lo <= x <= hi for the bounds that are set.
struct Target {
  bool on_value = false;  ///< false: on the ratio
  std::optional<double> lo, hi;
  std::string text;  ///< as the issue states it

  static Target ratio_at_least(double v, std::string text) { return Target{false, v, std::nullopt, std::move(text)}; }
  static Target value_at_most(double v, std::string text) { return Target{true, std::nullopt, v, std::move(text)}; }
};

/// One figure of the run.
struct Row {
  std::string group;  ///< dedup, runtime, write, build, alloc
  std::string name;   ///< e.g. "llama 1+1 POSITIONAL"
  unsigned threads = 0;  ///< 0: not threaded
  double value = 0;
  std::string unit;
  std::string baseline;  ///< what it is compared with ("" = nothing)
  double baseline_value = 0;
  std::string baseline_unit;
  std::optional<double> ratio;
  std::string ratio_meaning;
  std::optional<Target> target;
  unsigned reps = 0;
  std::vector<double> samples, baseline_samples;  ///< seconds (or the unit's raw samples)
  std::vector<std::pair<std::string, double>> extra;
  std::string note;
  /// A check failed in the group that measured it (a wrong answer, an
  /// inconsistent count): its figure is no result, and its target not met.
  bool failed = false;

  /// The extra figure named `key`, or nullopt.
  std::optional<double> extra_value(const std::string& key) const {
    for (const auto& [k, v] : extra)
      if (k == key) return v;
    return std::nullopt;
  }
  /// The workload a dedup row is of: its name before the first ':'.
  std::string workload() const { return name.substr(0, name.find(':')); }

  std::optional<bool> met() const {
    if (!target) return std::nullopt;
    if (failed) return false;
    if (!target->on_value && !ratio) return false;
    const double x = target->on_value ? value : *ratio;
    return (!target->lo || x >= *target->lo) && (!target->hi || x <= *target->hi);
  }
};

struct Results {
  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::string>> notes;  ///< run-level facts
};

/// Why `--input-pages huge` cannot be had, from the kernel's transparent
/// huge page setting (thp_policy(): the line of
/// /sys/kernel/mm/transparent_hugepage/enabled, "unknown" without it), or ""
/// where it can. Under "[never]" madvise(MADV_HUGEPAGE) gives no huge page:
/// the run would time 4 KiB pages and record "huge".
inline std::string huge_input_pages_problem(const std::string& thp) {
  if (thp == "unknown")
    return "--input-pages huge: this kernel has no transparent huge pages "
           "(no /sys/kernel/mm/transparent_hugepage/enabled)";
  if (thp.find("[never]") != std::string::npos)
    return "--input-pages huge: transparent huge pages are off here (" + thp +
           " in /sys/kernel/mm/transparent_hugepage/enabled)";
  return "";
}

/// The first byte at which `a` and `b` (n bytes each) differ, or n: the
/// untimed checks' and the workloads' measure of where bytes part. A
/// cache line at a time by memcmp, then byte by byte inside the one that
/// differs (a byte loop over 50,000 pairs of 4 KiB took a fifth of a
/// second; memcmp over the whole of each before a byte loop read a pair
/// that differs twice).
inline std::size_t first_difference(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  std::size_t at = 0;
  for (std::size_t len = 0; at < n; at += len) {
    len = n - at < 64 ? n - at : 64;
    if (std::memcmp(a + at, b + at, len) != 0) break;
  }
  while (at < n && a[at] == b[at]) ++at;
  return at;
}

/// A workload's "scaling vs <first> thr" row at `threads`: deduplicate()'s
/// speed-up over the first thread count, against the read pass's, from the
/// medians (seconds) at both. `base_failed`: a check failed at the first
/// thread count, whose rows are marked failed; this row, made of its median,
/// is too (a failure at `threads` marks it with that count's rows).
inline Row scaling_row(const std::string& label, unsigned first_threads, unsigned threads, double dedup_base,
                       double read_base, bool base_failed, double m_dedup, double m_read, unsigned reps) {
  Row r;
  r.group = "dedup";
  r.name = label + ": scaling vs " + std::to_string(first_threads) + " thr";
  r.threads = threads;
  r.value = dedup_base / m_dedup;
  r.unit = "x";
  r.baseline = "read pass";
  r.baseline_value = read_base / m_read;
  r.baseline_unit = "x";
  r.ratio = r.value / r.baseline_value;
  r.ratio_meaning = "deduplicate speed-up / read-pass speed-up, both over the first thread count";
  r.reps = reps;
  r.failed = base_failed;
  return r;
}

/// Progress on stderr, only when it is a terminal (Config::progress).
void progress(const Config& c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/// Ends a progress line (if one is shown).
void progress_done(const Config& c);

/// Heap allocations (operator new, malloc and friends) since start-up, or -1
/// where they are not counted (sanitizer builds, non-glibc systems).
long long allocation_count();

/// Threads started (pthread_create) since start-up, or -1 where they are not
/// counted (sanitizer builds, non-glibc systems).
long long threads_started();

/// The most threads started here that were alive at once (besides the
/// calling one) since reset_threads_at_once(), less those alive at the
/// reset, or -1 where threads are not counted. Reset right before a timed call, read right after: what it ran
/// on at once, where threads_started() counts every start.
void reset_threads_at_once();
long long threads_at_once();

/// A unique path under c.tmpdir for a file named after `stem`.
std::string temp_path(const Config& c, const std::string& stem);

/// Records a correctness failure (wrong result, not a slow one): the run
/// still finishes and writes its JSON, then exits non-zero.
void report_failure(const std::string& what);
bool any_failure();
/// Failures reported so far in the run.
unsigned failure_count();

/// What ends the run after a first Ctrl-C, at its next step: main() catches
/// it and keeps the rows finished before (main.cpp).
struct Interrupted {};
/// Throws Interrupted once a Ctrl-C asked the run to stop; progress() and
/// report_failure() call it, so every step of every group is one.
void stop_point();
/// Whether a Ctrl-C asked the run to stop.
bool stop_requested();

/// Marks the rows pushed to `out` while it lives as failed if a failure is
/// reported meanwhile: around one measurement (a workload at one thread
/// count, a store of one key count) whose answers are checked after the
/// clock stops, so a wrong answer voids that measurement's rows and no
/// other's.
class FailureScope {
 public:
  explicit FailureScope(Results& out)
      : out_(out), first_(out.rows.size()), failures_(failure_count()), unwinding_(std::uncaught_exceptions()) {}
  FailureScope(const FailureScope&) = delete;
  FailureScope& operator=(const FailureScope&) = delete;
  ~FailureScope() {
    // Left by a Ctrl-C's Interrupted: the measurement it stopped is left
    // out whole, rows already pushed included (a check after them that a
    // Ctrl-C cut short could not mark them).
    if (std::uncaught_exceptions() > unwinding_ && stop_requested()) {
      out_.rows.resize(first_);
      return;
    }
    if (failure_count() != failures_)
      for (std::size_t i = first_; i < out_.rows.size(); ++i) out_.rows[i].failed = true;
  }

 private:
  Results& out_;
  std::size_t first_;
  unsigned failures_;
  int unwinding_;
};
/// What ends a group that cannot go on (deduplicate() refused its input):
/// main() catches it, so the other groups and the rows so far still reach
/// the table and the JSON.
struct GroupFailed {};
/// report_failure(what), then ends the group.
[[noreturn]] void fail_group(const std::string& what);

/// /sys/kernel/mm/transparent_hugepage/enabled (e.g. "always [madvise]
/// never"), or "unknown".
std::string thp_policy();

/// Keeps a value observable so no computation feeding it can be dropped.
void consume(std::uint64_t v);
std::uint64_t consumed();

/// ", more than the <size> this process can have (<which limit>)" where
/// `bytes` of memory are more than bench::memory_limit() (MemAvailable, the
/// room a cgroup's memory limit leaves, v2's or v1's, or physical memory),
/// else "": the end of a refusal that names what asked for them (main.cpp).
std::string past_memory_limit(std::uint64_t bytes);

/// Why the Llama settings (--model and the shape flags) cannot generate
/// the workloads this run asks for, naming the flags and their values; ""
/// if they can. Checked before anything runs.
std::string check_llama(const Config& c);
/// Why the build-cost group cannot run (--include-dir has no wdedup
/// headers, --cxx does not compile an empty TU), naming the flag; "" if it
/// can. Checked before anything runs, where the group is asked for.
std::string check_build(const Config& c);
/// Why deduplicate() refuses a --ptd program under the policy its workload
/// will run (deduplicate()'s message), or "" if it takes it. Untimed.
std::string ptd_dedup_problem(const wdedup::Program& p);
/// Whether any Llama workload runs (for the record: llama_model).
bool runs_llama(const Config& c);

// The benchmark groups (one file each).
void run_dedup(const Config& c, Results& out);
void run_runtime(const Config& c, Results& out);
void run_write(const Config& c, Results& out);
void run_build_cost(const Config& c, Results& out);

}  // namespace wbench

#endif  // WDEDUP_BENCHMARKS_HARNESS_HPP
