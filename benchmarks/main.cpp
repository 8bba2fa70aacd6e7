// benchmarks/main.cpp — wdedup-bench: every benchmark of issue 4 in one run.
// Each figure is a median over repetitions, next to a baseline measured in
// the same process on the same bytes, and reported as a ratio; the whole
// run is printed as a table and written as JSON. `--quick` is what CI runs
// (small sizes, few repetitions, no timing assertions).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>  // SYS_getdents64
#endif

// (tools/) split_items, same_file_twice, real_path, stdout_flushed, the stop
// signals: shared with the demo
#include "cli.hpp"
#include "harness.hpp"
#include "steadiness.hpp"
#include "targets.hpp"
#include "wdedup/deduplicate.hpp"  // DedupOptions::kMaxThreads
#include "wdedup/detail/atomic_file.hpp"  // parent_dir, can_create_file, write_whole_file
#include "wdedup/import.hpp"  // PtdFiles: --ptd files checked before the run
#include "wdedup/report.hpp"
#include "wdedup/bench.hpp"  // memory_limit
#include "wdedup/workload/llama.hpp"  // LlamaConfig::dimension_problem

#ifndef WBENCH_INCLUDE_DIR
#define WBENCH_INCLUDE_DIR ""
#endif

namespace wbench {

namespace {
std::atomic<std::uint64_t> g_sink{0};
std::atomic<unsigned> g_temp_counter{0};
bool g_progress_open = false;
// Whether stderr is a terminal (progress rewrites its line there), set
// once by parse_args.
bool g_stderr_is_terminal = false;
std::vector<std::string> g_failure_messages;  // each failure reported, in order
}  // namespace

// The signal of a first Ctrl-C (0: none yet): the run stops at its next
// step, keeping the measurements finished before it (see main).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "a handler's flag must be lock-free");

bool stop_requested() { return g_stop_signal.load(std::memory_order_relaxed) != 0; }
void stop_point() {
  if (stop_requested()) throw Interrupted{};
}

void report_failure(const std::string& what) {
  // After a Ctrl-C, what fails is what it stopped (a compiler child gets the
  // terminal's SIGINT too): the stop, not a failure.
  stop_point();
  if (g_progress_open) {
    std::fprintf(stderr, "\n");
    g_progress_open = false;
  }
  std::fprintf(stderr, "wdedup-bench: FAILURE: %s\n", what.c_str());
  g_failure_messages.push_back(what);
}
bool any_failure() { return !g_failure_messages.empty(); }
const std::vector<std::string>& failures() { return g_failure_messages; }
unsigned failure_count() { return static_cast<unsigned>(g_failure_messages.size()); }
void fail_group(const std::string& what) {
  report_failure(what);
  throw GroupFailed{};
}

void consume(std::uint64_t v) { g_sink.fetch_add(v, std::memory_order_relaxed); }
std::uint64_t consumed() { return g_sink.load(std::memory_order_relaxed); }

void progress(const Config& c, const char* fmt, ...) {
  // Every group says where it is at each step, repetitions included: where
  // a Ctrl-C ends the run (stop_point).
  stop_point();
  if (!c.progress) return;
  char line[200];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  // --progress into a file or a pipe: one line each, without the carriage
  // return and erase that rewrite a terminal's line (a user trial's log
  // held them all run together on one line).
  if (!g_stderr_is_terminal) {
    std::fprintf(stderr, "%s\n", line);
    std::fflush(stderr);
    return;
  }
  // Cut to the terminal's width (asked each time: it may be resized): a
  // line that wraps leaves its first rows behind when the next one
  // replaces it (the build group's lines are 112 characters). Cut short of
  // the last column, where a terminal's cursor waits to wrap. (Every
  // progress text is ASCII: a byte is a column.)
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 4) {
    const std::size_t fits = ws.ws_col - 1u;
    if (std::strlen(line) > fits) std::memcpy(line + fits - 3, "...", 4);
  }
  std::fprintf(stderr, "\r\033[K%s", line);
  std::fflush(stderr);
  g_progress_open = true;
}

void progress_done(const Config& c) {
  if (!c.progress || !g_progress_open) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  g_progress_open = false;
}

std::string temp_path(const Config& c, const std::string& stem) {
  return c.tmpdir + "/wdedup-bench-" + std::to_string(::getpid()) + "-" +
         std::to_string(g_temp_counter.fetch_add(1)) + "-" + stem;
}

std::string past_memory_limit(std::uint64_t bytes) {
  const wdedup::bench::MemoryLimit have = wdedup::bench::memory_limit();
  if (!have.known() || bytes <= have.bytes) return "";
  return ", more than the " + wdedup::detail::human_bytes(have.bytes) + " this process can have (" + have.source +
         ")";
}

}  // namespace wbench

namespace {

// ---- an interrupted run removes its files --------------------------------------
// A run stopped by Ctrl-C or a kill died with its files in --tmpdir: the
// write group's store (2 GB at --model 1b, as write_ptd_file's hidden
// temporary while it writes), the runtime group's key stores, the build
// group's TUs. Every one of them is named by temp_path, wdedup-bench-<pid>-...,
// or is write_ptd_file's temporary of one, .wdedup-bench-<pid>-...; the
// handler unlinks those names and the signal then ends the process as it
// would have. It lists the directory with getdents64 and unlinks with
// unlinkat, system calls that are safe in a handler (opendir and readdir,
// which allocate, are not), on a descriptor opened before the run. Linux
// only (getdents64); elsewhere an interrupted run leaves its files. (A
// second signal waits for the first handler to end the process: two at
// once would share the listing's buffer and the descriptor's offset.)
#if defined(__linux__)
// Set once, after the prefix, while the handler is already in place (it is
// installed before the arguments are read): a handler that finds no
// descriptor removes nothing here.
std::atomic<int> g_tmpdir_fd{-1};
char g_own_prefix[64];  // "wdedup-bench-<pid>-"
std::size_t g_own_prefix_len = 0;

bool own_file(const char* name) {
  if (name[0] == '.') ++name;  // write_ptd_file's temporary of one
  return std::strncmp(name, g_own_prefix, g_own_prefix_len) == 0;
}

/// Unlinks this run's files in the directory; how many it found (removed
/// or not: one renamed meanwhile is found again under its new name).
unsigned remove_own_files(int dir_fd) {
  unsigned found = 0;
  alignas(8) static char buf[8192];
  if (::lseek(dir_fd, 0, SEEK_SET) != 0) return 0;
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir_fd, buf, sizeof buf);
    if (n <= 0) return found;
    for (long at = 0; at < n;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + at + 16, sizeof reclen);
      if (reclen == 0) return found;  // (never from the kernel; no endless loop if it were)
      const char* name = buf + at + 19;
      if (own_file(name)) {
        ++found;
        ::unlinkat(dir_fd, name, 0);
      }
      at += reclen;
    }
  }
}

/// Removes this run's files: in the handler below, or at the end of a run
/// a Ctrl-C stopped. (Removing entries while listing may skip some: list
/// again until a pass finds none.)
void remove_own_files_now() {
  const int dir_fd = g_tmpdir_fd.load(std::memory_order_acquire);
  if (dir_fd < 0) return;
  for (int pass = 0; pass < 8 && remove_own_files(dir_fd) != 0; ++pass) {
  }
}

/// The run's files are in --tmpdir, once the arguments have named it.
void remove_own_files_on_signals(const wbench::Config& c) {
  const int len = std::snprintf(g_own_prefix, sizeof g_own_prefix, "wdedup-bench-%ld-", static_cast<long>(::getpid()));
  g_own_prefix_len = static_cast<std::size_t>(len);
  // (Checked by parse_args: it can create files there.)
  g_tmpdir_fd.store(::open(c.tmpdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), std::memory_order_release);
}
#else
void remove_own_files_now() {}
void remove_own_files_on_signals(const wbench::Config&) {}
#endif

// The JSON's hidden temporary, beside --json rather than in --tmpdir (made
// by parse_args's check that it can be written, and by the write at the
// end): the library says where it is (TemporaryWatch), and the handler
// removes it too. A second Ctrl-C during the JSON's write left it behind.
const wdedup::detail::TemporaryWatch kJsonWatch{wdedup_cli::TemporaryFile::note, nullptr};

extern "C" void remove_own_files_and_die(int sig) {
  wdedup_cli::first_handler_only();
  wdedup_cli::TemporaryFile::remove();
  remove_own_files_now();
  wdedup_cli::die_by(sig);
}

// ---- a Ctrl-C keeps what was measured ----------------------------------------
// The first SIGINT asks the run to stop at its next step (wbench::stop_point,
// at every repetition of every group): the measurement it interrupted is
// left out, the ones finished before it are printed and written, the run's
// files removed, and the process then ends by SIGINT as it would have. A
// second SIGINT ends it at once, as SIGTERM and SIGHUP do (the handler
// above). (SA_RESTART: a write or a wait the first one lands in goes on.)
extern "C" void stop_after_this_step(int sig) {
  int none = 0;
  if (!wbench::g_stop_signal.compare_exchange_strong(none, sig)) return remove_own_files_and_die(sig);
  // (The terminal's Ctrl-C ends the whole foreground job: a `| tee log` or
  // `| less` reading our output dies of it too. A write to that pipe fails
  // with EPIPE, not SIGPIPE, which main ignores from the start: the run
  // still writes its JSON and removes its files.)
  static const char kSaid[] =
      "\nwdedup-bench: stopping at the next step, keeping the measurements finished so far (Ctrl-C again to stop "
      "at once)\n";
  const ssize_t n = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);
  (void)n;
}

/// (A SIGINT the run was started ignoring, a background job's, stays so.)
void keep_results_on_ctrl_c() { wdedup_cli::handle_stop_signal(SIGINT, stop_after_this_step, SA_RESTART); }

using wbench::Config;
using wbench::Results;
using wbench::Row;

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: wdedup-bench [options]\n"
      "  --quick                 small sizes, few repetitions (what CI runs: the figures and\n"
      "                          the targets' yes/NO are printed, but mean nothing at these sizes)\n"
      "  --json FILE             where to write every figure (default results.json)\n"
      "  --tmpdir DIR            where stores are written (default: the JSON file's directory)\n"
      "  --only G[,G...]         run only these groups: dedup, runtime (with the alloc rows),\n"
      "                          write, build\n"
      "  --reps N                repetitions per figure (default 7; --quick 3), except: the write\n"
      "                          rows take at most 5 (each writes the store 5 times), the\n"
      "                          open-time row at least 11 (an open takes a few ms), the\n"
      "                          allocation counts 1, the build rows --compile-reps; every\n"
      "                          row's JSON \"reps\" is the count it used\n"
      "  --threads N[,N...]      thread counts for the dedup workloads, each at most %u\n"
      "                          (default 1,2,all cores)\n"
      "  --workloads W[,W...]    dedup workloads to run (default all): llama-1+1, llama-3+3,\n"
      "                          llama-3+2, small-tensors, adversarial, same-names, ptd (with\n"
      "                          --ptd)\n"
      "  --references R[,R...]   references deduplicate() is timed against (default both):\n"
      "                          sha256: ExecuTorch's NamedDataStore before pytorch/executorch\n"
      "                          #18351, SHA-256 of every buffer (the 8x target's); fp-sha256:\n"
      "                          since #18351, SHA-256 only where a buffer's length and first 32\n"
      "                          bytes repeat (no target; as slow as sha256 where most repeat)\n"
      "Llama workload (prefill + decode, fp16):\n"
      "  --model tiny|small|1b   generator preset (default small: 2x313 MB of tensors, 494 MB in\n"
      "                          memory; 1b: 2x3.0 GB, 4.96 GB; --quick: tiny)\n"
      "  --full                  Llama-1B shapes (= --model 1b)\n"
      "  --layers N --dim N --hidden-dim N --vocab-size N --heads N --kv-heads N --max-seq-len N\n"
      "                          (llama-3+3 and llama-3+2 need at least 3 layers)\n"
      "Synthetic workloads:\n"
      "  --small-tensors N       count of 4 KiB tensors, 50%% duplicates; even (default 100000;\n"
      "                          --quick 10000). Also same-names' count: as many, the second\n"
      "                          method's under the first's names, each unlike its namesake in\n"
      "                          its last byte (no duplicates, no targets)\n"
      "  --adversarial N,BYTES   distinct tensors sharing first/last KiB (default 2048,262144;\n"
      "                          --quick 256,65536)\n"
      "  --input-pages default|huge|small\n"
      "                          pages of these three workloads' memory: default (what new[] gets:\n"
      "                          the system's transparent-huge-page policy decides), huge or small\n"
      "                          (madvise before it is first touched). Every timed run prints\n"
      "                          each dedup workload's share on huge pages and writes it to the JSON\n"
      "Your own weights:\n"
      "  --ptd FILE[,FILE...]    .ptd files, one method each, named after the file\n"
      "                          (prefill.ptd,decode.ptd); a store wdedup wrote comes back as\n"
      "                          its methods and partitions; each file once (checked before\n"
      "                          anything runs). Workload 'ptd': with --ptd it is the only dedup\n"
      "                          workload, unless --workloads names others (and 'ptd'); the\n"
      "                          runtime, write and build groups still run (--only dedup)\n"
      "Runtime and writer:\n"
      "  --keys N[,N...]         store sizes for the lookup benchmark (default 16,256,4096,65536);\n"
      "                          open time and allocations are measured on the largest\n"
      "  --lookups N             lookups per timed pass (default 1048576; --quick 32768)\n"
      "  --big-tensor BYTES      the large get_data / load_data_into tensor (default 1 GiB;\n"
      "                          --quick 16 MiB)\n"
      "  --write-bytes BYTES     size of the written store (default 2000000000; --quick 32 MiB)\n"
      "Build cost:\n"
      "  --cxx COMPILER          compiler timed with -std=c++17 -fsyntax-only (default g++)\n"
      "  --include-dir DIR       wdedup's include directory (default: this source tree's)\n"
      "  --compile-reps N        compilations per header (default 7; --quick 2, the warm-up one of them)\n"
      "Profiling:\n"
      "  --once                  only the dedup workloads, each a read pass and a deduplicate()\n"
      "                          once per thread count: nothing timed, no JSON written (for\n"
      "                          scripts/profile.sh)\n"
      "Output:\n"
      "  --progress / --no-progress   progress on stderr (default: only if stderr is a terminal)\n"
      "A first Ctrl-C stops the run at its next step and keeps what was measured (the table, and the\n"
      "JSON with \"interrupted\": true); a second stops it at once.\n",
      wdedup::DedupOptions::kMaxThreads);
}

/// Keys a .ptd file can hold (its key indices are 32-bit).
constexpr std::uint64_t kMaxKeys = 0xFFFFFFFFu;

bool parse_u64(const char* s, std::uint64_t* out) {
  // strtoull would skip leading blanks and take a sign (" -1" as 2^64 - 1):
  // only digits are a number here.
  if (s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

/// Whether `s` is decimal digits alone: a number, if one parse_u64 refused
/// then one too large for 64 bits.
bool all_digits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

/// Why `item` of list flag `flag` is too large, against the flag's limit.
std::string list_limit(const std::string& flag, const std::string& item) {
  using wdedup::detail::cat;
  if (flag == "--threads")
    return cat("--threads ", item, " is more than wdedup::DedupOptions::kMaxThreads (",
               wdedup::DedupOptions::kMaxThreads, ")");
  if (flag == "--keys") return cat("--keys ", item, " is more than a .ptd file holds (", kMaxKeys, ")");
  // --adversarial COUNT,BYTES: either past 64 bits is more memory than that.
  return "--adversarial asks for more than 2^64 bytes of memory";
}

/// A comma-separated list of numbers. An item of digits too large for 64
/// bits is kept as 2^64 - 1, and the first such item's text goes to
/// `too_large`, for a message in the flag's own terms.
bool parse_list(const std::string& s, std::vector<std::uint64_t>* out, std::string* too_large) {
  out->clear();
  too_large->clear();
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    std::uint64_t v = 0;
    if (!parse_u64(item.c_str(), &v)) {
      if (!all_digits(item)) return false;
      v = ~std::uint64_t(0);
      if (too_large->empty()) *too_large = item;
    }
    out->push_back(v);
    at = comma + 1;
  }
  return !out->empty();
}

/// The first value a list gives twice, or nullptr: a value given twice
/// would only repeat its rows (and, for --keys, leave "the largest store"
/// ambiguous), so each list flag refuses it.
template <class T>
const T* repeated(const std::vector<T>& list) {
  for (std::size_t k = 0; k < list.size(); ++k)
    if (std::count(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(k), list[k]) != 0) return &list[k];
  return nullptr;
}

/// The --ptd files, before anything runs (the ptd workload is made last,
/// after minutes of the others): each one file once, and each a .ptd the
/// import takes. Two names of one file (a link, a hard link) share their
/// pages, so deduplicate() would read half the bytes its figures count:
/// the same file twice ran at 1.44x of its read pass, a copy at 0.83x.
bool check_ptd_files(const Config& c) {
  // (A file that cannot be looked at: the import below names the error.)
  if (const auto [j, k] = wdedup_cli::same_file_twice(c.ptd_files); k != 0) {
    std::fprintf(stderr,
                 "wdedup-bench: --ptd names one file twice (%s and %s): their mappings share pages, so the "
                 "figures would count bytes never read; copy the file to time identical methods\n",
                 c.ptd_files[j].c_str(), c.ptd_files[k].c_str());
    return false;
  }
  // The JSON goes where no input is: written over a --ptd file, itself or
  // through a symbolic link, it would replace the user's weights with the
  // figures. (Not a hard link's other name: the write renames over the
  // name it is given, and the input keeps its bytes.)
  if (const std::string json_id = wdedup_cli::real_path(c.json_path); !json_id.empty())
    for (const std::string& input : c.ptd_files)
      if (wdedup_cli::real_path(input) == json_id) {
        std::fprintf(stderr, "wdedup-bench: --json %s names the --ptd input %s: the results would replace it\n",
                     c.json_path.c_str(), input.c_str());
        return false;
      }
  wdedup::PtdFiles files;
  wdedup::Program scratch;
  for (const std::string& path : c.ptd_files)
    if (wdedup::Expected<void> added = files.add(scratch, path); !added) {
      std::fprintf(stderr, "wdedup-bench: --ptd %s\n", added.message().c_str());
      return false;
    }
  // And deduplicate() takes them (a file the import takes may still ask
  // for alignments whose lcm no store holds): once, untimed, under the
  // policy the workload will use, rather than after the other workloads.
  // Not under --once: a profile must hold one deduplicate() (the
  // workload's own call reports a refusal there).
  if (c.once) return true;
  try {
    if (const std::string why = wbench::ptd_dedup_problem(scratch); !why.empty()) {
      std::fprintf(stderr, "wdedup-bench: --ptd files: deduplicate() refuses them: %s\n", why.c_str());
      return false;
    }
  } catch (const std::bad_alloc&) {
    // (Outside any group: main's handler has not started yet.)
    std::fprintf(stderr, "wdedup-bench: --ptd files: out of memory deduplicating them\n");
    return false;
  }
  // Bytes to time (after deduplicate()'s refusals, which name more):
  // files whose keys hold none (ExecuTorch's empty.ptd) gave rows of
  // 0 GB/s whose ratios were the timer's noise.
  if (wdedup::bench::total_bytes(wdedup::bench::input_spans(scratch)) == 0) {
    std::size_t keys = 0;
    for (const wdedup::Method& m : scratch.methods)
      for (const wdedup::Partition& part : m.partitions) keys += part.tensors.size();
    std::fprintf(stderr, "wdedup-bench: --ptd files hold no tensor bytes (%s in all): nothing to time\n",
                 wdedup_cli::counted(keys, "key").c_str());
    return false;
  }
  return true;
}

/// The memory a size flag asks for, refused before the run when it cannot
/// be had: a product past 2^64 wrapped (--small-tensors 2^52 allocated 4 KiB
/// and wrote past it), and one past what this process can have (MemAvailable,
/// its cgroup's memory limit: bench::memory_limit) would end in an
/// out-of-memory kill part-way, or a failed group. "" if every size fits.
std::string check_sizes(const Config& c) {
  struct Ask {
    bool runs;
    const char* flag;
    std::uint64_t count, size;  ///< count items of size bytes
    std::uint64_t plus = 0;     ///< and these bytes
    std::string why = "";       ///< how the estimate is made, if not count * size
    std::uint64_t each = 0;     ///< and these bytes an item, beyond its size
  };
  const bool runtime = !c.once && c.wants("runtime");
  // (The groups run one after the other, each freeing its memory: each size
  // is held against the limit on its own.)
  const std::uint64_t keys =
      c.key_counts.empty() ? 0 : *std::max_element(c.key_counts.begin(), c.key_counts.end());
  // (The synthetic dedup workloads: their tensors' bytes, and what each tensor
  // costs besides, kDedupBytesPerTensor in harness.hpp.)
  const std::string per_tensor = " (the tensors' bytes and " + std::to_string(wbench::kDedupBytesPerTensor) +
                                 " more a tensor: its record and name, and what deduplicate() and the baselines "
                                 "hold for it)";
  const Ask asks[] = {
      {c.runs_dedup() && c.wants_workload("small-tensors"), "--small-tensors", c.small_tensors, c.small_tensor_size, 0,
       per_tensor, wbench::kDedupBytesPerTensor},
      // (same-names: as many tensors of that size, run after the small
      // tensors have freed theirs.)
      {c.runs_dedup() && c.wants_workload("same-names"), "--small-tensors", c.small_tensors, c.small_tensor_size, 0,
       per_tensor, wbench::kDedupBytesPerTensor},
      {c.runs_dedup() && c.wants_workload("adversarial"), "--adversarial", c.adversarial_count, c.adversarial_size, 0,
       per_tensor, wbench::kDedupBytesPerTensor},
      {runtime, "--big-tensor", wbench::kBigTensorCopies, c.big_tensor, 0,
       " (the tensor twice: its array and its file, then the file mapped and a copy of it)"},
      {!c.once && c.wants("write"), "--write-bytes", 1, c.write_bytes},
      // (Only the largest store is held at a time.)
      {runtime && keys != 0, "--keys", keys, wbench::kLookupBytesPerKey,
       wbench::lookup_queries(c, keys) * wbench::kLookupBytesPerQuery,
       " (the " + std::to_string(keys) + "-key store, at " + std::to_string(wbench::kLookupBytesPerKey) +
           " bytes a key and " + std::to_string(wbench::kLookupBytesPerQuery) +
           " a query: names, maps, the store and its file)"},
  };
  for (const Ask& a : asks) {
    if (!a.runs) continue;
    const std::uint64_t item = a.size + a.each;
    if (item < a.size || (item != 0 && a.count > (UINT64_MAX - a.plus) / item))
      return std::string(a.flag) + " asks for more than 2^64 bytes of memory";
    const std::uint64_t bytes = a.count * item + a.plus;
    const auto asks_for = [&] {
      return std::string(a.flag) + " asks for " + wdedup::detail::human_bytes(bytes) + " of memory" + a.why;
    };
    // (On a 32-bit target the workloads index their memory with a size_t.)
    if (bytes > SIZE_MAX) return asks_for() + ", more than a 32-bit program addresses";
    if (const std::string past = wbench::past_memory_limit(bytes); !past.empty()) return asks_for() + past;
  }
  if (!c.once && c.wants("runtime") && c.lookups > SIZE_MAX)
    return "--lookups " + std::to_string(c.lookups) + " is more than a 32-bit program counts (" +
           std::to_string(SIZE_MAX) + ")";
  return "";
}

int parse_args(int argc, char** argv, Config* c) {
  // --quick changes the defaults; explicit options given anywhere win.
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--quick") == 0) {
      c->quick = true;
      c->reps = 3;
      c->compile_reps = 2;  // the warm-up and one compilation beside an empty TU
      c->model = "tiny";
      c->small_tensors = 10000;
      c->adversarial_count = 256;
      c->adversarial_size = 64 * 1024;
      c->lookups = 1u << 15;
      c->scan_strcmps = 1000000;
      c->big_tensor = 16u << 20;
      c->write_bytes = 32u << 20;
    }
  bool tmpdir_given = false;
  wbench::g_stderr_is_terminal = ::isatty(2) != 0;
  c->progress = wbench::g_stderr_is_terminal;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    const char* v = nullptr;
    auto value = [&](bool numeric = false) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "wdedup-bench: %s needs a value\n", opt.c_str());
        return false;
      }
      v = argv[++i];
      // "--json --quick" would write the results to a file named --quick
      // and run the full benchmark: an option is never taken as a value.
      // (No value here starts with '-' but a negative integer given to a
      // number flag (`numeric`), which is taken as one and refused by the
      // flag's own check, "needs a positive integer, got '-1'"; a path that
      // does, "-5" too, is written ./-name.)
      const bool negative_integer = numeric && v[0] == '-' && v[1] != '\0' &&
                                    std::strspn(v + 1, "0123456789") == std::strlen(v + 1);
      if (v[0] == '-' && !negative_integer) {
        std::fprintf(stderr, "wdedup-bench: %s needs a value, got the option '%s' (a path starting with '-' is "
                             "written ./%s)\n", opt.c_str(), v, v);
        return false;
      }
      return true;
    };
    // A list flag's items, each non-empty.
    auto items = [&](std::vector<std::string>* out) {
      if (!value()) return false;
      if (*v == '\0') {
        std::fprintf(stderr, "wdedup-bench: %s needs at least one item, got ''\n", opt.c_str());
        return false;
      }
      if (!wdedup_cli::split_items(v, out)) {
        std::fprintf(stderr, "wdedup-bench: %s %s has an empty item (a stray comma)\n", opt.c_str(), v);
        return false;
      }
      return true;
    };
    // A number flag's value. One too large for its type is named against
    // the flag's own limit: a Llama dimension's (`dimension`), else the
    // type's.
    auto number = [&](auto* out, bool dimension = false) {
      using T = std::remove_pointer_t<decltype(out)>;
      std::uint64_t n = 0;
      if (!value(true)) return false;
      const bool parsed = parse_u64(v, &n);
      if (all_digits(v) && (!parsed || n > std::uint64_t(~T(0)))) {
        const std::string why = dimension ? wdedup::LlamaConfig::dimension_problem(opt, std::string_view(v))
                                          : wdedup::detail::cat(opt, " ", v, " is more than ", std::uint64_t(~T(0)));
        std::fprintf(stderr, "wdedup-bench: %s\n", why.c_str());
        return false;
      }
      if (!parsed || n == 0) {
        std::fprintf(stderr, "wdedup-bench: %s needs a positive integer, got '%s'\n", opt.c_str(), v);
        return false;
      }
      *out = static_cast<T>(n);
      return true;
    };
    std::vector<std::uint64_t> list;
    if (opt == "--help" || opt == "-h") {
      usage(stdout);
      // (A help text that did not reach its reader is a failed run, as the demo's.)
      std::exit(wdedup_cli::stdout_flushed("wdedup-bench") ? 0 : 1);
    } else if (opt == "--quick") {
    } else if (opt == "--full") {
      c->model = "1b";
    } else if (opt == "--progress") {
      c->progress = true;
    } else if (opt == "--no-progress") {
      c->progress = false;
    } else if (opt == "--once") {
      c->once = true;
    } else if (opt == "--json") {
      if (!value()) return 2;
      c->json_path = v;
      if (c->json_path.empty()) {  // (it was "cannot write --json : Is a directory")
        std::fprintf(stderr, "wdedup-bench: --json needs a file, got ''\n");
        return 2;
      }
    } else if (opt == "--tmpdir") {
      if (!value()) return 2;
      c->tmpdir = v;
      // "" would put every store under "/" (temp_path appends "/name").
      if (c->tmpdir.empty()) {
        std::fprintf(stderr, "wdedup-bench: --tmpdir needs a directory, got ''\n");
        return 2;
      }
      tmpdir_given = true;
    } else if (opt == "--only") {
      // (Empty would mean "every group": a typo must not start the full run.)
      if (!items(&c->only)) return 2;
      for (const std::string& g : c->only)
        if (g != "dedup" && g != "runtime" && g != "write" && g != "build") {
          std::fprintf(stderr, "wdedup-bench: unknown group '%s' (dedup, runtime, write, build; the alloc rows "
                               "are runtime's)\n", g.c_str());
          return 2;
        }
      if (const std::string* twice = repeated(c->only)) {
        std::fprintf(stderr, "wdedup-bench: --only %s gives %s twice\n", v, twice->c_str());
        return 2;
      }
    } else if (opt == "--workloads") {
      if (!items(&c->workloads)) return 2;
      for (const std::string& w : c->workloads)
        if (std::none_of(std::begin(wbench::kWorkloadNames), std::end(wbench::kWorkloadNames),
                         [&](const char* name) { return w == name; })) {
          std::string known;
          for (const char* name : wbench::kWorkloadNames) known += (known.empty() ? "" : ", ") + std::string(name);
          std::fprintf(stderr, "wdedup-bench: unknown workload '%s' (%s)\n", w.c_str(), known.c_str());
          return 2;
        }
      if (const std::string* twice = repeated(c->workloads)) {
        std::fprintf(stderr, "wdedup-bench: --workloads %s gives %s twice\n", v, twice->c_str());
        return 2;
      }
    } else if (opt == "--references") {
      if (!items(&c->references)) return 2;
      for (const std::string& r : c->references)
        if (std::none_of(std::begin(wbench::kReferenceNames), std::end(wbench::kReferenceNames),
                         [&](const char* name) { return r == name; })) {
          std::fprintf(stderr, "wdedup-bench: unknown reference '%s' (sha256, fp-sha256)\n", r.c_str());
          return 2;
        }
      if (const std::string* twice = repeated(c->references)) {
        std::fprintf(stderr, "wdedup-bench: --references %s gives %s twice\n", v, twice->c_str());
        return 2;
      }
    } else if (opt == "--ptd") {
      // Every --ptd adds its files ("--ptd a.ptd --ptd b.ptd" is a,b: the
      // second used to replace the first, timing one file of two).
      std::vector<std::string> files;
      if (!items(&files)) return 2;
      c->ptd_files.insert(c->ptd_files.end(), files.begin(), files.end());
    } else if (opt == "--model") {
      if (!value()) return 2;
      c->model = v;
    } else if (opt == "--input-pages") {
      if (!value()) return 2;
      if (std::strcmp(v, "default") != 0 && std::strcmp(v, "huge") != 0 && std::strcmp(v, "small") != 0) {
        std::fprintf(stderr, "wdedup-bench: --input-pages needs default, huge or small, got '%s'\n", v);
        return 2;
      }
      c->input_pages = v;
      if (c->input_pages == "huge")
        if (const std::string why = wbench::huge_input_pages_problem(wbench::thp_policy()); !why.empty()) {
          std::fprintf(stderr, "wdedup-bench: %s\n", why.c_str());
          return 2;
        }
    } else if (opt == "--cxx") {
      if (!value()) return 2;
      c->cxx = v;
    } else if (opt == "--include-dir") {
      if (!value()) return 2;
      c->include_dir = v;
    } else if (opt == "--reps") {
      if (!number(&c->reps)) return 2;
    } else if (opt == "--compile-reps") {
      if (!number(&c->compile_reps)) return 2;
    } else if (opt == "--layers") {
      if (!number(&c->layers, true)) return 2;
    } else if (opt == "--dim") {
      if (!number(&c->dim, true)) return 2;
    } else if (opt == "--hidden-dim") {
      if (!number(&c->hidden_dim, true)) return 2;
    } else if (opt == "--vocab-size") {
      if (!number(&c->vocab_size, true)) return 2;
    } else if (opt == "--heads") {
      if (!number(&c->n_heads, true)) return 2;
    } else if (opt == "--kv-heads") {
      if (!number(&c->n_kv_heads, true)) return 2;
    } else if (opt == "--max-seq-len") {
      if (!number(&c->max_seq_len, true)) return 2;
    } else if (opt == "--small-tensors") {
      if (!number(&c->small_tensors)) return 2;
      // Half are copies of the other half: an odd count left one without
      // its copy, so the "comparisons alone" row (which reads every byte
      // once) had other bytes than the read pass and was dropped unsaid.
      if (c->small_tensors % 2 != 0) {
        std::fprintf(stderr, "wdedup-bench: --small-tensors %s: N must be even (half the tensors are copies of "
                     "the other half)\n", v);
        return 2;
      }
    } else if (opt == "--lookups") {
      if (!number(&c->lookups)) return 2;
    } else if (opt == "--big-tensor") {
      if (!number(&c->big_tensor)) return 2;
    } else if (opt == "--write-bytes") {
      if (!number(&c->write_bytes)) return 2;
    } else if (opt == "--threads" || opt == "--keys" || opt == "--adversarial") {
      if (!value(true)) return 2;
      std::string too_large;
      if (!parse_list(v, &list, &too_large) || std::count(list.begin(), list.end(), 0u) != 0) {
        std::fprintf(stderr, "wdedup-bench: %s needs positive integers separated by commas, got '%s'\n",
                     opt.c_str(), v);
        return 2;
      }
      // Past 64 bits: named against the flag's own limit, as below.
      if (!too_large.empty()) {
        std::fprintf(stderr, "wdedup-bench: %s\n", list_limit(opt, too_large).c_str());
        return 2;
      }
      if (const std::uint64_t* twice = opt != "--adversarial" ? repeated(list) : nullptr) {
        std::fprintf(stderr, "wdedup-bench: %s %s gives %llu twice\n", opt.c_str(), v,
                     static_cast<unsigned long long>(*twice));
        return 2;
      }
      if (opt == "--threads") {
        c->threads.clear();
        for (std::uint64_t t : list) {
          if (t > wdedup::DedupOptions::kMaxThreads) {
            std::fprintf(stderr, "wdedup-bench: %s\n", list_limit(opt, std::to_string(t)).c_str());
            return 2;
          }
          c->threads.push_back(static_cast<unsigned>(t));
        }
      } else if (opt == "--keys") {
        for (std::uint64_t k : list)
          if (k > kMaxKeys) {
            std::fprintf(stderr, "wdedup-bench: %s\n", list_limit(opt, std::to_string(k)).c_str());
            return 2;
          }
        c->key_counts = list;
      } else {
        if (list.size() != 2) {
          std::fprintf(stderr, "wdedup-bench: --adversarial needs COUNT,BYTES\n");
          return 2;
        }
        c->adversarial_count = list[0];
        c->adversarial_size = list[1];
      }
    } else {
      std::fprintf(stderr, "wdedup-bench: unknown option '%s'\n", opt.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (c->adversarial_size < 4096) {
    std::fprintf(stderr, "wdedup-bench: --adversarial %llu,%llu: BYTES must be at least 4096 (two shared KiB and "
                         "more)\n", static_cast<unsigned long long>(c->adversarial_count),
                 static_cast<unsigned long long>(c->adversarial_size));
    return 2;
  }
  const bool ptd_named = std::count(c->workloads.begin(), c->workloads.end(), "ptd") != 0;
  if (ptd_named && c->ptd_files.empty()) {
    std::fprintf(stderr, "wdedup-bench: workload 'ptd' needs --ptd FILE[,FILE...]\n");
    return 2;
  }
  if (!c->ptd_files.empty() && !c->workloads.empty() && !ptd_named) {
    std::fprintf(stderr, "wdedup-bench: --ptd gives files, but --workloads does not name 'ptd'\n");
    return 2;
  }
  // Someone timing their own files wants those, not the built-in workloads.
  if (!c->ptd_files.empty() && c->workloads.empty()) c->workloads = {"ptd"};
  if (!c->ptd_files.empty() && !c->runs_dedup()) {
    std::fprintf(stderr, "wdedup-bench: --ptd gives files, but --only does not run dedup\n");
    return 2;
  }
  // --once runs the dedup workloads and nothing else: with an --only that
  // leaves dedup out it would run what was not asked for (it did).
  if (c->once && !c->wants("dedup")) {
    std::fprintf(stderr, "wdedup-bench: --once runs only dedup, but --only does not run dedup\n");
    return 2;
  }
  if (c->threads.empty()) {
    const unsigned all =
        wdedup::detail::hardware_threads();  // what threads = 0 starts: the affinity's cores, capped
    for (unsigned t : {1u, 2u, all})
      if (t <= all && std::find(c->threads.begin(), c->threads.end(), t) == c->threads.end())
        c->threads.push_back(t);
  }
  if (!tmpdir_given) c->tmpdir = wdedup::detail::parent_dir(c->json_path);
  if (c->include_dir.empty()) c->include_dir = WBENCH_INCLUDE_DIR;
  // The results are written after the run: a place they cannot go to is
  // refused before it, not after minutes of measuring.
  if (!wdedup::detail::can_create_file(c->json_path, kJsonWatch)) {
    std::fprintf(stderr, "wdedup-bench: cannot write --json %s: %s\n", c->json_path.c_str(),
                 wdedup::detail::cannot_create_reason(c->json_path, errno, kJsonWatch).c_str());
    return 2;
  }
  // Likewise the directory the runtime, write and build benchmarks write
  // their stores to (the default, the JSON's, was checked just above).
  if (tmpdir_given && !wdedup::detail::can_create_file(wbench::temp_path(*c, "probe"))) {
    std::fprintf(stderr, "wdedup-bench: cannot create files in --tmpdir %s: %s\n", c->tmpdir.c_str(),
                 std::strerror(errno));
    return 2;
  }
  // A check's answer: "" passes, anything else is said and refused.
  auto refused = [](const std::string& bad) {
    if (!bad.empty()) std::fprintf(stderr, "wdedup-bench: %s\n", bad.c_str());
    return !bad.empty();
  };
  if (!c->once && c->wants("build") && refused(wbench::check_build(*c))) return 2;
  if (refused(check_sizes(*c))) return 2;
  // The Llama settings, whatever --only says: a run records them, so a
  // wrong one is refused rather than written down.
  if (refused(wbench::check_llama(*c))) return 2;
  // Last: it imports (and deduplicates) the files, the one slow check.
  if (!c->ptd_files.empty() && c->wants_workload("ptd") && !check_ptd_files(*c)) return 2;
  return 0;
}

// ---- output ------------------------------------------------------------------

// The report's JSON strings: valid UTF-8 whatever bytes a name or a path
// holds (a --ptd file's name is the user's).
using wdedup::detail::json_string;

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  // Counts (bytes, tensors) exactly; measurements to 6 significant digits.
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string json_array(const std::vector<double>& v) {
  std::string o = "[";
  for (std::size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + json_number(v[i]);
  return o + "]";
}

std::string to_json(const Config& c, const Results& r, const std::string& command, const std::string& date,
                    bool interrupted, const wbench::TargetCount& t) {
  std::string o = "{\n";
  o += "  \"tool\": \"wdedup-bench\",\n";
  o += "  \"command\": " + json_string(command) + ",\n";
  o += "  \"date\": " + json_string(date) + ",\n";
  o += "  \"interrupted\": " + std::string(interrupted ? "true" : "false") + ",\n";
  o += "  \"quick\": " + std::string(c.quick ? "true" : "false") + ",\n";
  o += "  \"reps\": " + std::to_string(c.reps) + ",\n";
  // (The whole run's, for bench_args: the memory estimate's check.)
  const long long peak = wdedup::bench::process_resident_peak();
  o += "  \"resident_peak_bytes\": " + (peak >= 0 ? std::to_string(peak) : std::string("null")) + ",\n";
  o += "  \"facts\": {";
  for (std::size_t i = 0; i < r.notes.size(); ++i)
    o += (i ? ", " : "") + json_string(r.notes[i].first) + ": " + json_string(r.notes[i].second);
  o += "},\n  \"results\": [";
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const Row& w = r.rows[i];
    o += i ? ",\n    {" : "\n    {";
    o += "\"group\": " + json_string(w.group) + ", \"name\": " + json_string(w.name);
    o += ", \"threads\": " + std::to_string(w.threads);
    o += ", \"value\": " + json_number(w.value) + ", \"unit\": " + json_string(w.unit);
    if (!w.baseline.empty())
      o += ", \"baseline\": " + json_string(w.baseline) + ", \"baseline_value\": " + json_number(w.baseline_value) +
           ", \"baseline_unit\": " + json_string(w.baseline_unit);
    o += ", \"ratio\": " + (w.ratio ? json_number(*w.ratio) : std::string("null"));
    if (!w.ratio_meaning.empty()) o += ", \"ratio_meaning\": " + json_string(w.ratio_meaning);
    if (w.target) {
      o += ", \"target\": {\"text\": " + json_string(w.target->text) + ", \"on\": " +
           json_string(w.target->on_value ? "value" : "ratio");
      if (w.target->lo) o += ", \"min\": " + json_number(*w.target->lo);
      if (w.target->hi) o += ", \"max\": " + json_number(*w.target->hi);
      o += std::string("}, \"met\": ") + (*w.met() ? "true" : "false");
    }
    if (w.failed) o += ", \"failed\": true";
    o += ", \"reps\": " + std::to_string(w.reps);
    if (!w.samples.empty()) o += ", \"samples\": " + json_array(w.samples);
    if (!w.baseline_samples.empty()) o += ", \"baseline_samples\": " + json_array(w.baseline_samples);
    // Each side's median over its fastest repetition (bench.hpp), and
    // whether the row is steady (both at most bench::kUnsteady).
    using wdedup::bench::median_over_fastest;
    if (!w.samples.empty()) o += ", \"median_over_fastest\": " + json_number(median_over_fastest(w.samples));
    if (!w.baseline_samples.empty())
      o += ", \"baseline_median_over_fastest\": " + json_number(median_over_fastest(w.baseline_samples));
    if (wbench::judged(w)) o += std::string(", \"steady\": ") + (unsteady(w) ? "false" : "true");
    if (const std::optional<double> pace = sha256_pace(r, w))
      o += ", \"sha256_vs_run_median\": " + json_number(*pace);
    if (!w.extra.empty()) {
      o += ", \"extra\": {";
      for (std::size_t k = 0; k < w.extra.size(); ++k)
        o += (k ? ", " : "") + json_string(w.extra[k].first) + ": " + json_number(w.extra[k].second);
      o += "}";
    }
    if (!w.note.empty()) o += ", \"note\": " + json_string(w.note);
    o += "}";
  }
  o += "\n  ],\n";
  // `t`: every target the run set, those of rows that never came (a group
  // that failed, a Ctrl-C) included: targets_met of targets, as the table says.
  const wbench::Steadiness st = steadiness(r);
  o += "  \"targets\": " + std::to_string(t.targets) + ",\n  \"targets_met\": " + std::to_string(t.met) +
       ",\n  \"targets_not_measured\": " + std::to_string(t.not_measured) +
       ",\n  \"unsteady_rows\": " + std::to_string(st.unsteady) +
       ",\n  \"sha256_off_pace_runs\": " + std::to_string(st.off_pace.size()) + ",\n";
  // What failed (the lines said as FAILURE on stderr): a group that stopped
  // leaves no rows, so its absence alone would not say it failed.
  const std::vector<std::string>& failed = wbench::failures();
  o += "  \"failures\": [";
  for (std::size_t i = 0; i < failed.size(); ++i) o += (i ? ", " : "") + json_string(failed[i]);
  o += "]\n}\n";
  return o;
}

std::string fmt_value(double v, const std::string& unit) {
  char buf[64];
  if (unit.empty()) {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  } else if (unit == "allocs") {  // a count: "3 allocs", not "3.00 allocs"
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit.c_str());
  } else {
    const double a = std::fabs(v);
    std::snprintf(buf, sizeof buf, a >= 100 ? "%.0f %s" : a >= 10 ? "%.1f %s" : a >= 1 ? "%.2f %s" : "%.3g %s", v,
                  unit.c_str());
  }
  return buf;
}

/// The table, and under it `targets` (targets_line) and what else a reader
/// needs to read it.
void print_table(const Results& r, const std::string& input_pages, const std::string& targets) {
  auto baseline_text = [](const Row& w) {
    return w.baseline.empty() ? std::string("-") : w.baseline + " " + fmt_value(w.baseline_value, w.baseline_unit);
  };
  // The name and baseline columns are as wide as their longest entry (at
  // least 44 and 30), counted in a terminal's columns as the report's table
  // counts them: a long one ("fallocate+write()+fsync 1.12 GB/s") would
  // otherwise push the columns after it out of line. (Every name and
  // baseline is the harness's own ASCII today, a --ptd run's included: its
  // files are named in the notes under the table, not in the rows.)
  auto columns = [](const std::string& s) { return static_cast<int>(wdedup::detail::table_columns(s)); };
  int name_w = 44, base_w = 30;
  for (const Row& w : r.rows) {
    name_w = std::max(name_w, columns(w.name));
    base_w = std::max(base_w, columns(baseline_text(w)));
  }
  // printf pads by bytes: a name with multi-byte code points gets the
  // difference added to its width.
  auto width = [&](int w, const std::string& s) { return w + static_cast<int>(s.size()) - columns(s); };
  std::printf("%-8s %-*s %3s %13s  %-*s %9s  %-12s %s\n", "group", name_w, "benchmark", "thr", "figure", base_w,
              "baseline (same run)", "ratio", "target", "met");
  std::string last;
  for (const Row& w : r.rows) {
    if (w.group != last && !last.empty()) std::printf("\n");
    last = w.group;
    const std::string base = baseline_text(w);
    char ratio[32] = "-";
    // Three significant digits, without an exponent (6170x, not 6.17e+03x).
    if (w.ratio) std::snprintf(ratio, sizeof ratio, *w.ratio >= 1000 ? "%.0fx" : "%.3gx", *w.ratio);
    const char* met = w.failed ? "FAILED" : !w.met() ? "" : *w.met() ? "yes" : "NO";
    char thr[16] = "-";
    if (w.threads) std::snprintf(thr, sizeof thr, "%u", w.threads);
    std::printf("%-8s %-*s %3s %13s  %-*s %9s  %-12s %s\n", w.group.c_str(), width(name_w, w.name), w.name.c_str(),
                thr, fmt_value(w.value, w.unit).c_str(), width(base_w, base), base.c_str(), ratio,
                w.target ? w.target->text.c_str() : "", met);
  }
  std::printf("\n%s.\nratio = baseline time / wdedup time (above 1: wdedup faster),\n"
              "except: 'scaling vs N thr' (wdedup's speed-up over its first thread count, over the read pass's)\n"
              "and build rows (empty TU time / this TU's, their target on the figure); each row's JSON\n"
              "ratio_meaning says which.\n",
              targets.c_str());
  // Where the input sits moves the read pass more than deduplicate() (see
  // benchmarks/README.md): each dedup workload's share on huge pages, once.
  std::vector<std::string> seen;
  std::string shares;
  for (const Row& w : r.rows) {
    if (w.group != "dedup") continue;
    const std::string label = w.workload();
    const std::optional<double> share = w.extra_value("input_on_huge_pages");
    if (!share || std::find(seen.begin(), seen.end(), label) != seen.end()) continue;
    seen.push_back(label);
    char pct[32];
    if (*share < 0) std::snprintf(pct, sizeof pct, "unknown");
    else std::snprintf(pct, sizeof pct, "%.0f%%", 100 * *share);
    shares += (shares.empty() ? "" : ", ") + label + " " + pct;
  }
  // (`input_pages` is the JSON's fact: "none ran" where neither workload
  // whose pages it sets did, a Llama or --ptd run.)
  if (!shares.empty() && input_pages == "none ran")
    std::printf("dedup input on huge pages: %s (--input-pages: none ran of the small-tensor, adversarial and "
                "same-names workloads, whose pages it sets).\n",
                shares.c_str());
  else if (!shares.empty())
    std::printf("dedup input on huge pages: %s (--input-pages %s: the small-tensor, adversarial and same-names "
                "workloads).\n",
                shares.c_str(), input_pages.c_str());
  // Where the engine reads little of what the rows are timed on (a tensor
  // whose size no other has is settled unread), the GB/s are no speed of
  // comparing: a user trial timed a store wdedup had already written, at
  // "213 GB/s, 1.79x the read pass", and took it for one. Its counters are
  // of one side of each comparison (the other side is as long).
  std::vector<std::string> read_little;
  for (const Row& w : r.rows) {
    if (w.group != "dedup" || w.name.find(": identity engine") == std::string::npos) continue;
    const std::string label = w.workload();
    if (std::find(read_little.begin(), read_little.end(), label) != read_little.end()) continue;
    const double examined = w.extra_value("bytes_examined").value_or(0),
                 hashed = w.extra_value("bytes_hashed").value_or(0),
                 compared = w.extra_value("bytes_compared").value_or(0);
    const double read = std::min(examined, hashed + 2 * compared);
    if (examined > 0 && read < 0.5 * examined) {
      read_little.push_back(label);
      std::printf("%s: deduplicate() reads about %.0f%% of the %.0f bytes its rows are timed on: a tensor whose "
                  "size no other has is settled unread (an input already deduplicated, or one method alone), so its "
                  "GB/s and ratios are no speed of comparing.\n",
                  label.c_str(), 100 * read / examined, examined);
    }
  }
  // Where deduplicate() ran on fewer threads than given (one per 4 MiB of
  // work), its baselines did too; the thr column says what was given.
  std::vector<std::pair<std::string, unsigned>> fewer;
  for (const Row& w : r.rows) {
    if (w.group != "dedup" || w.threads <= 1) continue;
    const std::string label = w.workload();
    const std::optional<double> run = w.extra_value("threads_run");
    if (run && *run < w.threads &&
        std::find(fewer.begin(), fewer.end(), std::make_pair(label, w.threads)) == fewer.end()) {
      fewer.emplace_back(label, w.threads);
      std::printf("%s, %u thr: deduplicate() ran on %.0f (one thread per 4 MiB of work), and so did its "
                  "baselines.\n",
                  label.c_str(), w.threads, *run);
    }
  }
  // What a call takes, in time: what a user timing their own model asks
  // first, which GB/s over bytes of every size hide. One line a workload,
  // from its deduplicate() rows against the read pass (their samples are
  // seconds a call), one figure per thread count.
  std::vector<std::string> timed;
  for (const Row& w : r.rows) {
    const std::string label = w.workload();
    if (w.group != "dedup" || w.name != label + ": deduplicate" ||
        std::find(timed.begin(), timed.end(), label) != timed.end())
      continue;
    timed.push_back(label);
    // Its rows against the read pass, one a thread count: their samples
    // (seconds a call) and what one untimed call added to resident memory
    // (resident_added_bytes: -1 where it could not be measured).
    std::string times, held;
    std::size_t calls = 0, figures = 0;
    double most = 0;
    for (const Row& t : r.rows) {
      if (t.group != "dedup" || t.name != w.name || t.baseline != "read pass" || t.failed) continue;
      char one[64];
      if (!t.samples.empty()) {
        const double sec = wdedup::bench::median(t.samples);
        if (sec >= 1) std::snprintf(one, sizeof one, "%.3g s at %u thr", sec, t.threads);
        else std::snprintf(one, sizeof one, "%.3g ms at %u thr", sec * 1e3, t.threads);
        times += (times.empty() ? "" : ", ") + std::string(one);
        calls = t.samples.size();
        ++figures;
      }
      if (const double added = t.extra_value("resident_added_bytes").value_or(-1); added >= 0) {
        std::snprintf(one, sizeof one, "%.3g MB at %u thr", added / 1e6, t.threads);
        held += (held.empty() ? "" : ", ") + std::string(one);
        most = std::max(most, added);
      }
    }
    const double bytes = w.extra_value("bytes_examined").value_or(0);
    const double scaled = bytes >= 1e9 ? bytes / 1e9 : bytes / 1e6;
    const char* unit = bytes >= 1e9 ? "GB" : "MB";
    // (A figure of one call is no median: --reps 1 said "medians of 1 calls".)
    const std::string of = calls != 1    ? "medians of " + std::to_string(calls) + " calls"
                           : figures > 1 ? std::string("one call each")
                                         : std::string("one call");
    if (!times.empty())
      std::printf("%s: a deduplicate() call takes %s (%s, over %.3g %s).\n", label.c_str(), times.c_str(),
                  of.c_str(), scaled, unit);
    // And what it takes in memory, against the bytes it examines.
    if (!held.empty() && bytes > 0)
      std::printf("%s: a deduplicate() call adds %s of resident memory at its peak, its result included (one "
                  "untimed call each; at most %.3g%% of the %.3g %s it examines).\n",
                  label.c_str(), held.c_str(), 100 * most / bytes, scaled, unit);
  }
  // Which rows the machine set more than the code (steadiness.hpp).
  std::fputs(wbench::steadiness_text(r).c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // Before the arguments are read: their check of --json makes and removes
  // a temporary beside it, which a stop signal must not leave behind.
  wdedup_cli::handle_stop_signals(remove_own_files_and_die);
  Config c;
  if (int rc = parse_args(argc, argv, &c); rc != 0) return rc;
  remove_own_files_on_signals(c);
  keep_results_on_ctrl_c();
  // A reader of stdout that goes before the table (`| head`, a `less` quit
  // during the run, a `| tee` a Ctrl-C ended) must not cost the run its
  // JSON: the table's first write ended the process by SIGPIPE, after
  // every measurement and before the JSON was written. Such a write now
  // fails with EPIPE, the JSON is written, and the run says so on stderr
  // and exits 1 (end() below; by SIGINT after a Ctrl-C).
  ::signal(SIGPIPE, SIG_IGN);

  // As a shell would take it back (a --ptd path with a space was two
  // words): a word of other characters than these is single-quoted.
  std::string command = "wdedup-bench";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789_-+=,./:@%") == std::string::npos;
    if (plain) {
      command += " " + a;
      continue;
    }
    command += " '";
    for (char ch : a) command += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    command += "'";
  }
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));

  Results r;
  struct utsname u;
  if (::uname(&u) == 0) r.notes.push_back({"machine", std::string(u.sysname) + " " + u.release + " " + u.machine});
  // The machine's cores, and those this process may run on (its CPU
  // affinity: taskset, a cpuset), which set the default --threads: under
  // `taskset -c 0` the two-thread rows are missing, and this says why.
  const unsigned all_cores = std::thread::hardware_concurrency(), usable = wdedup::detail::hardware_threads();
  r.notes.push_back({"cores", std::to_string(all_cores)});
  r.notes.push_back({"cores_usable", std::to_string(usable)});
  // gcc's __VERSION__ is the number alone ("12.2.0"); clang's names it.
#if defined(__clang__)
  r.notes.push_back({"compiler", __VERSION__});
#elif defined(__GNUC__) && !defined(__INTEL_COMPILER)
  r.notes.push_back({"compiler", "gcc " __VERSION__});
#else
  r.notes.push_back({"compiler", __VERSION__});
#endif
#if defined(__OPTIMIZE__)
  r.notes.push_back({"optimized", "yes"});
#else
  r.notes.push_back({"optimized", "NO (figures of an unoptimized build mean little)"});
#endif
  std::string threads;
  for (unsigned t : c.threads) threads += (threads.empty() ? "" : ",") + std::to_string(t);
  // Settings only of what ran: a flag for a group or workload that did not
  // run is recorded as such, not as if it had set something.
  r.notes.push_back({"dedup_threads", c.runs_dedup() ? threads : "none ran"});
  std::string references;
  for (const char* ref : wbench::kReferenceNames)
    if (c.wants_reference(ref)) references += (references.empty() ? "" : ",") + std::string(ref);
  r.notes.push_back({"references", c.runs_dedup() ? references : "none ran"});
  // What the Llama workloads ran as, or that none ran (a --ptd run).
  r.notes.push_back({"llama_model", wbench::runs_llama(c) ? c.model : "none ran"});
  // (--input-pages advises only the small-tensor, adversarial and same-names inputs.)
  // The table's line of huge-page shares says the same.
  const bool paged = c.runs_dedup() && (c.wants_workload("small-tensors") || c.wants_workload("adversarial") ||
                                        c.wants_workload("same-names"));
  const std::string input_pages = paged ? c.input_pages : "none ran";
  r.notes.push_back({"input_pages", input_pages});
  r.notes.push_back({"transparent_hugepage", wbench::thp_policy()});
  // Where the runtime, write and build groups put their files: the write
  // figures are that filesystem's.
  r.notes.push_back({"tmpdir", c.tmpdir});

  // Which Llama model the "llama" rows are of (their names do not say; the
  // default is 'small', not the 1B of the targets: --model 1b).
  // A shape flag changes the preset: the line says so (a user trial read
  // "--model tiny" over a run of --dim 512 --layers 6).
  std::string llama = wbench::runs_llama(c) ? ", Llama workloads: --model " + c.model : "";
  if (wbench::runs_llama(c))
    for (const auto& [flag, value] : {std::pair<const char*, std::uint32_t>{"--layers", c.layers}, {"--dim", c.dim},
                                      {"--hidden-dim", c.hidden_dim}, {"--vocab-size", c.vocab_size},
                                      {"--heads", c.n_heads}, {"--kv-heads", c.n_kv_heads},
                                      {"--max-seq-len", c.max_seq_len}})
      if (value != 0) llama += std::string(" ") + flag + " " + std::to_string(value);
  const std::string cores_text = usable < all_cores ? std::to_string(all_cores) + " cores, " + std::to_string(usable) +
                                                     " of them usable here (the CPU affinity)"
                                               : std::to_string(all_cores) + " cores";
  std::printf("wdedup-bench: %s\n%s, %s%s%s\n", command.c_str(), date, cores_text.c_str(), llama.c_str(),
              !c.quick                ? ""
              : c.ptd_files.empty()   ? ", --quick (small sizes: figures are not meaningful)"
                                      : ", --quick (small sizes and few repetitions, the --ptd files at their own "
                                        "size: figures are not meaningful)");
  // More threads than cores share them: figures then say little about
  // either side, and nothing else would say why.
  if (c.runs_dedup())
    for (unsigned t : c.threads)
      if (t > usable) {
        std::printf("note: --threads %u is more than the %u cores this process may run on: threads share cores\n", t,
                    usable);
        break;
      }
  std::printf("\n");
  std::fflush(stdout);

  // Sizes too large for this machine end the group that asked for them, not
  // the run: the rows so far still reach the table and the JSON.
  auto run = [&](void (*group)(const Config&, Results&)) {
    try {
      group(c, r);
    } catch (const wbench::GroupFailed&) {
      // (said by fail_group)
    } catch (const std::bad_alloc&) {
      wbench::report_failure("out of memory (smaller --model, --keys, --big-tensor, --write-bytes, "
                             "--small-tensors or --adversarial sizes fit)");
    }
  };
  // A Ctrl-C ends the groups at their next step (wbench::Interrupted), the
  // measurement it stopped left out.
  bool interrupted = false;
  try {
    if (c.once) {
      // Nothing is timed: only what a profiler should see (scripts/profile.sh).
      run(wbench::run_dedup);
    } else {
      if (c.wants("dedup")) run(wbench::run_dedup);
      if (c.wants("runtime")) run(wbench::run_runtime);
      if (c.wants("write")) run(wbench::run_write);
      if (c.wants("build")) run(wbench::run_build_cost);
    }
  } catch (const wbench::Interrupted&) {
    interrupted = true;
  }
  wbench::progress_done(c);
  // The targets of every group and workload asked for, those that were
  // never measured included (a group that failed, a Ctrl-C).
  const std::size_t planned = wbench::planned_targets(c, wbench::allocation_count() >= 0);
  const wbench::TargetCount counted_targets = wbench::count_targets(r, planned);
  if (c.once) {
    std::printf("--once: nothing timed\n");
  } else {
    // No rows, no table: a header over nothing and "0 of 0 targets met"
    // (a Ctrl-C during the first group said that). An interrupted run says
    // so below.
    if (!r.rows.empty())
      print_table(r, input_pages,
                  wbench::targets_line(counted_targets,
                                       c.quick ? " (--quick: small sizes, the yes/NO mean nothing)" : "",
                                       interrupted, wbench::any_failure()));
    else if (!interrupted)
      std::printf("nothing was measured: %s.\n",
                  wbench::targets_line(counted_targets, "", false, wbench::any_failure()).c_str());
    // Under the table too, which a group that stopped would leave silent.
    for (const std::string& what : wbench::failures()) std::printf("FAILED: %s\n", what.c_str());
  }
  if (interrupted && !r.rows.empty())
    std::printf("INTERRUPTED (Ctrl-C): the rows above are the measurements finished before it; the one it stopped, "
                "and the rest, did not run.\n");
  else if (interrupted)
    std::printf("INTERRUPTED (Ctrl-C) before any measurement finished.\n");
  r.notes.push_back({"checksum", std::to_string(wbench::consumed())});
  bool json_written = false;

  auto end = [&](int rc) {
    const bool out_lost = std::fflush(stdout) != 0 || std::ferror(stdout);
    if (wbench::stop_requested()) {  // (interrupted, or a Ctrl-C after the last step)
      // Ended as the signal would have ended it, its files gone.
      remove_own_files_now();
      wdedup_cli::die_by(SIGINT);
    }
    if (out_lost) {
      std::fprintf(stderr, "wdedup-bench: writing to standard output failed: the table is lost; %s\n",
                   json_written ? ("every figure is in " + c.json_path).c_str() : "no JSON was written either");
      return 1;
    }
    return rc;
  };
  // --once times nothing, so it writes no JSON: bench.sh passes the same
  // --json as a full run, whose figures an empty file would replace.
  if (c.once) {
    if (!interrupted) std::printf("no JSON written: %s left as it was\n", c.json_path.c_str());
    return end(interrupted || wbench::any_failure() ? 1 : 0);
  }
  // Nothing finished: the last run's results stay as they were.
  if (interrupted && r.rows.empty()) {
    std::printf("nothing was measured: %s left as it was\n", c.json_path.c_str());
    return end(1);
  }
  const std::string json = to_json(c, r, command, date, interrupted, counted_targets);
  // Whole or not at all: a cut-off file over the last run's figures loses both.
  if (wdedup::Expected<void> w =
          wdedup::detail::write_whole_file(c.json_path, json, false, wdedup::detail::default_file_ops(), kJsonWatch);
      !w) {
    std::fprintf(stderr, "wdedup-bench: %s\n", w.message().c_str());
    return end(1);
  }
  json_written = true;
  std::printf("wrote %s\n", c.json_path.c_str());
  return end(wbench::any_failure() ? 1 : 0);
}
