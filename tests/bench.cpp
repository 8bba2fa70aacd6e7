// tests/bench.cpp — wdedup/bench.hpp: the read-pass baseline reads every
// byte exactly once (its sum is exact, for any thread count and either
// stream count), input_spans leaves out aliases and empty tensors, and the
// median/compare helpers count what they should and keep each side's time
// apart; and the harness's own pieces (benchmarks/*.hpp), among them the
// fingerprint + SHA-256 reference's grouping (two_level.hpp). No speed is
// asserted: only that a side which sleeps 20 ms took at least that, which
// the steady clock guarantees.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wdedup/bench.hpp>

#include "../benchmarks/harness.hpp"
#include "../benchmarks/steadiness.hpp"
#include "../benchmarks/targets.hpp"
#include "../benchmarks/timed_run.hpp"
#include "../benchmarks/two_level.hpp"
#include "support/sanitizers.hpp"  // WDEDUP_TEST_SANITIZER_MALLOC
#include "support/this_case_again.hpp"

// The harness's failure count, which its main.cpp keeps: here for the test
// of FailureScope below.
namespace wbench {
namespace {
unsigned g_test_failures = 0;
bool g_test_stop = false;  // as a Ctrl-C sets it
}  // namespace
void report_failure(const std::string&) { ++g_test_failures; }
unsigned failure_count() { return g_test_failures; }
bool stop_requested() { return g_test_stop; }
}  // namespace wbench

namespace {

/// The sum read_pass must return for spans whose sizes are multiples of 8
/// (then every 64-bit word lies wholly inside one span whatever the cuts).
std::uint64_t reference_sum(const std::vector<wdedup::ByteSpan>& spans) {
  std::uint64_t s = 0;
  for (const wdedup::ByteSpan& b : spans)
    for (std::size_t i = 0; i + 8 <= b.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, b.data() + i, 8);
      s += w;
    }
  return s;
}

}  // namespace

TEST_CASE("median: odd, even, empty") {
  CHECK(wdedup::bench::median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(wdedup::bench::median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(wdedup::bench::median({}) == 0.0);
  CHECK(wdedup::bench::median({7.0}) == 7.0);
}

TEST_CASE("median_over_fastest: the median over the fastest sample; 0 without samples or a fastest of 0") {
  using wdedup::bench::median_over_fastest;
  CHECK(median_over_fastest({2.0, 2.0, 2.0}) == 1.0);
  CHECK(median_over_fastest({3.0, 1.0, 2.0}) == 2.0);         // median 2, fastest 1
  CHECK(median_over_fastest({4.0, 1.0, 3.0, 2.0}) == 2.5);    // median of an even count: 2.5
  // Two stalled repetitions of five do not move it; a third would.
  CHECK(median_over_fastest({0.04, 0.8, 0.02, 0.04, 0.9}) == 2.0);
  CHECK(median_over_fastest({0.04, 0.8, 0.02, 0.7, 0.9}) == 35.0);
  CHECK(median_over_fastest({7.0}) == 1.0);
  CHECK(median_over_fastest({}) == 0.0);
  CHECK(median_over_fastest({0.0, 1.0, 2.0}) == 0.0);
}

TEST_CASE("Paired::steady: both sides' median_over_fastest at most the limit (kUnsteady by default)") {
  wdedup::bench::Paired p;
  CHECK(wdedup::bench::kUnsteady == 1.5);
  CHECK(p.steady());  // nothing measured: nothing unsteady
  p.samples = {1.0, 1.5, 1.5};
  p.baseline_samples = {1.0, 1.0, 1.0};
  CHECK(p.steady());  // 1.5: at the limit
  p.samples = {1.0, 1.6, 1.6};
  CHECK_FALSE(p.steady());
  CHECK(p.steady(1.6));
  p.samples = {1.0, 1.0, 1.0};
  p.baseline_samples = {2.0, 4.0, 4.0};  // the baseline alone unsteady
  CHECK_FALSE(p.steady());
  CHECK(p.steady(2.0));
  // Fewer than kSteadyMinSamples (3) a side: that side is not judged.
  CHECK(wdedup::bench::kSteadyMinSamples == 3);
  CHECK(wdedup::bench::steady({1.0, 5.0}));
  CHECK_FALSE(wdedup::bench::steady({1.0, 5.0, 5.0}));
  CHECK(wdedup::bench::steady({1.0, 5.0, 5.0}, 5.0));
  p.baseline_samples = {1.0, 5.0};
  CHECK(p.steady());
  p.samples = {1.0};
  p.baseline_samples = {1.0, 1.0, 9.0, 9.0};  // median 5x the fastest
  CHECK_FALSE(p.steady());
}

TEST_CASE("read_pass sums every 64-bit word once, for any threads and streams") {
  std::vector<std::uint8_t> mem(3 << 20);
  for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<std::uint8_t>(i * 131 + 7);
  // Sizes that are multiples of 64 (cuts fall on word boundaries) but not
  // of the threads' shares, one span tiny, one empty.
  const std::vector<wdedup::ByteSpan> spans = {
      wdedup::ByteSpan(mem.data(), 1 << 20), wdedup::ByteSpan(mem.data() + (1 << 20), 64 * 777),
      wdedup::ByteSpan(mem.data() + (1 << 20) + 64 * 777, 0), wdedup::ByteSpan(mem.data() + (2 << 20), 64 * 15001),
      wdedup::ByteSpan(mem.data() + (3 << 20) - 64, 64)};
  const std::uint64_t expect = reference_sum(spans);
  CHECK(wdedup::bench::total_bytes(spans) == (1u << 20) + 64 * 777 + 64 * 15001 + 64);
  for (unsigned threads : {1u, 2u, 3u, 7u})
    for (unsigned streams : {1u, 2u}) {
      CAPTURE(threads);
      CAPTURE(streams);
      CHECK(wdedup::bench::read_pass(spans, threads, streams) == expect);
    }
}

TEST_CASE("read_pass: inputs smaller than a cache line a thread, and empty ones, on many threads") {
  std::vector<std::uint8_t> mem(200);
  for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<std::uint8_t>(i * 7 + 1);
  // (Sizes that are multiples of 8: see reference_sum.)
  for (std::size_t n : {std::size_t{0}, std::size_t{8}, std::size_t{104}, std::size_t{200}}) {
    const std::vector<wdedup::ByteSpan> spans = {wdedup::ByteSpan(mem.data(), n)};
    for (unsigned threads : {2u, 3u, 7u})
      for (unsigned streams : {1u, 2u}) {
        // (Two streams: a share that starts at the input's end makes a
        // cursor past the last span, which must read nothing of it.)
        CAPTURE(n);
        CAPTURE(threads);
        CAPTURE(streams);
        CHECK(wdedup::bench::read_pass(spans, threads, streams) == reference_sum(spans));
      }
  }
}

TEST_CASE("read_pass: the tail bytes of an odd-sized span are added one by one") {
  const std::uint8_t bytes[11] = {1, 0, 0, 0, 0, 0, 0, 0, 5, 6, 7};
  const std::vector<wdedup::ByteSpan> spans = {wdedup::ByteSpan(bytes, 11)};
  CHECK(wdedup::bench::read_pass(spans, 1) == 1 + 5 + 6 + 7);
  CHECK(wdedup::bench::read_pass(spans, 1, 2) == 1 + 5 + 6 + 7);
  CHECK(wdedup::bench::read_pass({}, 2) == 0);
}

TEST_CASE("read_pass: a span of one byte, alone or between others, is read") {
  const std::uint8_t bytes[10] = {9, 1, 0, 0, 0, 0, 0, 0, 0, 4};
  const std::vector<wdedup::ByteSpan> spans = {wdedup::ByteSpan(bytes, 1), wdedup::ByteSpan(bytes + 1, 8),
                                               wdedup::ByteSpan(bytes + 9, 1)};
  for (unsigned threads : {1u, 2u})
    for (unsigned streams : {1u, 2u}) {
      CAPTURE(threads);
      CAPTURE(streams);
      CHECK(wdedup::bench::read_pass(spans, threads, streams) == 9 + 1 + 4);
    }
  CHECK(wdedup::bench::read_pass({wdedup::ByteSpan(bytes, 1)}, 1) == 9);
}

TEST_CASE("read_pass: shares, and two streams' halves, are cut on 64-byte boundaries") {
  // The sum groups words from the start of each piece read, so one byte set
  // to 1 says where its piece began: 1 << 8 * (its distance from there
  // mod 8), or 1 where it is a tail byte.
  std::vector<std::uint8_t> mem(1000, 0);
  // One span of 1000 bytes, byte 501 set. One thread, two streams: the
  // halves are [0, 448) and [448, 1000) (500 rounded down to 64), and 501 is
  // byte 5 of the word from 496: 1 << 40. Halves cut at 500 made it 1 << 8.
  mem[501] = 1;
  const std::vector<wdedup::ByteSpan> one = {wdedup::ByteSpan(mem.data(), 1000)};
  CHECK(wdedup::bench::read_pass(one, 1, 2) == std::uint64_t{1} << 40);
  CHECK(wdedup::bench::read_pass(one, 1, 1) == std::uint64_t{1} << 40);
  mem[501] = 0;
  // Spans of 3 and 997 bytes, byte 321 (the second span's 318th) set. Three
  // threads cut 1000 bytes at 320 and 640 (333 and 666 rounded down to 64):
  // the second share's piece starts at the span's byte 317, so 318 is byte
  // 1 of its first word: 1 << 8. Cuts at multiples of 8 alone (328 and 664)
  // left it in the first share, byte 6 of the span's word from 312: 1 << 48.
  mem[321] = 1;
  const std::vector<wdedup::ByteSpan> split = {wdedup::ByteSpan(mem.data(), 3), wdedup::ByteSpan(mem.data() + 3, 997)};
  CHECK(wdedup::bench::read_pass(split, 3, 1) == std::uint64_t{1} << 8);
  CHECK(wdedup::bench::read_pass(split, 1, 1) == std::uint64_t{1} << 48);
}

TEST_CASE("input_spans: program order, aliases (same pointer and size) and empty tensors left out") {
  std::vector<std::uint8_t> a(100, 1), b(100, 1);
  wdedup::Program p;
  wdedup::Partition& x = p.add_method("prefill").add_partition();
  x.add("emb", a);
  x.add("out", a);  // tied: same memory
  x.add("empty", wdedup::ByteSpan(a.data(), 0));
  x.add("head", wdedup::ByteSpan(a.data(), 50));  // same pointer, other size: read again
  p.add_method("decode").add_partition().add("emb", b);  // same bytes, other memory: read
  const std::vector<wdedup::ByteSpan> in = wdedup::bench::input_spans(p);
  REQUIRE(in.size() == 3);
  CHECK(in[0].data() == a.data());
  CHECK(in[0].size() == 100);
  CHECK(in[1].data() == a.data());
  CHECK(in[1].size() == 50);
  CHECK(in[2].data() == b.data());
  CHECK(wdedup::bench::total_bytes(in) == 250);
}

TEST_CASE("input_spans: an alias is kept at its first occurrence in program order, not a later one") {
  // emb, head (a's first half), then out (emb's alias): [a, a's half], in
  // that order. Keeping the alias's last occurrence gave [a's half, a].
  std::vector<std::uint8_t> a(100, 1);
  wdedup::Program p;
  wdedup::Partition& x = p.add_method("m").add_partition();
  x.add("emb", a);
  x.add("head", wdedup::ByteSpan(a.data(), 50));
  x.add("out", a);
  const std::vector<wdedup::ByteSpan> in = wdedup::bench::input_spans(p);
  REQUIRE(in.size() == 2);
  CHECK(in[0].data() == a.data());
  CHECK(in[0].size() == 100);
  CHECK(in[1].data() == a.data());
  CHECK(in[1].size() == 50);
}

TEST_CASE("dedup_threads: 0 is every core, as deduplicate() counts them; at most those given; one per 4 MiB") {
  // The example gives deduplicate() and its read pass --threads' 0 (every
  // core) by default, and the README tells a user to give the read pass
  // dedup_threads(program, threads): for 0 it must count the cores as
  // deduplicate() does (hardware_threads(), the affinity's). The harness
  // always passes a count: a dedup_threads that took 0 as one thread
  // passed every suite.
  using wdedup::bench::dedup_threads;
  constexpr unsigned kMax = wdedup::detail::kMaxWorkerThreads;  // DedupOptions::kMaxThreads, 1024
  const std::vector<std::uint8_t> big(4u << 20, 1), small(1024, 1);
  wdedup::Program wide;  // work for every thread: 1024 tensors over one 4 MiB range (aliases, nothing copied)
  wdedup::Partition& w = wide.add_method("m").add_partition();
  for (unsigned i = 0; i < kMax; ++i) w.add("w" + std::to_string(i), big);
  CHECK(dedup_threads(wide) == wdedup::detail::hardware_threads());
  CHECK(dedup_threads(wide, 0) == wdedup::detail::hardware_threads());
  CHECK(dedup_threads(wide, 3) == 3);
  CHECK(dedup_threads(wide, kMax) == kMax);
  CHECK(dedup_threads(wide, 5000) == kMax);
  // One thread more than kMax given, with work for it: kMax still.
  w.add("w" + std::to_string(kMax), big);
  CHECK(dedup_threads(wide, kMax + 1) == kMax);
  // Two 4 MiB tensors, each counting kFinishBytesPerTensor (1.5 KiB) more:
  // work for two of the 8 threads given, one per 4 MiB (kWorkPerStartedThread).
  wdedup::Program two;
  two.add_method("m").add_partition().add("a", big).add("b", big);
  CHECK(dedup_threads(two, 8) == 2);
  // 1 KiB: one thread, whatever is given.
  wdedup::Program one;
  one.add_method("m").add_partition().add("a", small);
  CHECK(dedup_threads(one, 0) == 1);
  CHECK(dedup_threads(one, 8) == 1);
}

TEST_CASE("compare: 0 repetitions count as 1, so a Paired always holds a measurement") {
  int subject = 0, baseline = 0;
  const wdedup::bench::Paired p = wdedup::bench::compare(0, [&] { ++subject; }, [&] { ++baseline; });
  CHECK(subject == 1);
  CHECK(baseline == 1);
  CHECK(p.samples.size() == 1);
  CHECK(p.baseline_samples.size() == 1);
}

TEST_CASE("a target's bounds are met at the bound itself") {
  // 1.00x against ">= 1x", 0 allocations against "0", 0.5 and 2 against
  // "within 2x": each is met (a mutation test found no row at a bound).
  using wbench::Row;
  using wbench::Target;
  auto row = [](double value, double ratio, Target t) {
    Row r;
    r.value = value;
    r.ratio = ratio;
    r.target = std::move(t);
    return r;
  };
  CHECK(*row(5, 1.0, Target::ratio_at_least(1.0, ">= 1x")).met());
  CHECK_FALSE(*row(5, 0.999999, Target::ratio_at_least(1.0, ">= 1x")).met());
  CHECK(*row(0, 0, Target::value_at_most(0, "0")).met());
  CHECK_FALSE(*row(1, 0, Target::value_at_most(0, "0")).met());
  const Target within{false, 0.5, 2.0, "within 2x"};
  CHECK(*row(1, 0.5, within).met());
  CHECK(*row(1, 2.0, within).met());
  CHECK_FALSE(*row(1, 2.000001, within).met());
  CHECK_FALSE(*row(1, 0.499999, within).met());
}

TEST_CASE("a target on the ratio is not met by a row without a ratio") {
  // (Set, then reset: a met() that read the empty optional anyway would
  // find 5.0 there in GCC's -O0 build, and call the target met.)
  wbench::Row r;
  r.ratio = 5.0;
  r.ratio.reset();
  r.target = wbench::Target::ratio_at_least(1.0, ">= 1x");
  REQUIRE(r.met().has_value());
  CHECK_FALSE(*r.met());
}

TEST_CASE("the harness's Config and Row helpers: --once runs the dedup workloads, the lookups' query count, "
          "a row's extra figures and workload") {
  wbench::Config c;
  c.only = {"runtime"};
  CHECK_FALSE(c.runs_dedup());
  c.once = true;
  CHECK(c.runs_dedup());
  // max(keys, 4096) queries, at most --lookups (1 << 20 by default).
  CHECK(wbench::lookup_queries(c, 16) == 4096);
  CHECK(wbench::lookup_queries(c, 65536) == 65536);
  CHECK(wbench::lookup_queries(c, 4000000) == 1u << 20);
  c.lookups = 1000;
  CHECK(wbench::lookup_queries(c, 65536) == 1000);
  wbench::Row r;
  r.name = "small tensors POSITIONAL: deduplicate";
  r.extra = {{"threads_at_once", 2.0}, {"input_on_huge_pages", 0.25}};
  CHECK(r.workload() == "small tensors POSITIONAL");
  CHECK(r.extra_value("input_on_huge_pages") == 0.25);
  CHECK(r.extra_value("threads_at_once") == 2.0);
  CHECK_FALSE(r.extra_value("other").has_value());
}

TEST_CASE("timed_run: the CPU time is the child's user and system time, as the kernel counts them") {
  // dd reading /dev/zero spends most of its time in the kernel: a CPU time
  // without the system part would be far off the children's count.
  struct rusage before, after;
  REQUIRE(::getrusage(RUSAGE_CHILDREN, &before) == 0);
  const wbench::RunTime t =
      wbench::timed_run({"dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=2000"}, "/dev/null");
  REQUIRE(::getrusage(RUSAGE_CHILDREN, &after) == 0);
  auto seconds = [](const timeval& a, const timeval& b) {
    return static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_usec - a.tv_usec) / 1e6;
  };
  const double user = seconds(before.ru_utime, after.ru_utime), sys = seconds(before.ru_stime, after.ru_stime);
  REQUIRE(t.wall >= 0);  // it ran, and exited 0
  REQUIRE(sys > 0.01);   // enough system time to tell the two apart
  CHECK(t.cpu == doctest::Approx(user + sys).epsilon(1e-9));
  // A command that fails or cannot start is no time.
  CHECK(wbench::timed_run({"false"}, "/dev/null").cpu == -1);
  const wbench::RunTime missing = wbench::timed_run({"/nonexistent/wdedup-no-such-tool"}, "/dev/null");
  CHECK(missing.cpu == -1);
  CHECK(missing.spawn_error == ENOENT);
}

namespace {
// The order in which a read pass first touches the pages of a region: each
// page starts unreadable, and the fault handler notes it and opens it.
std::uint8_t* g_region = nullptr;
std::size_t g_page = 0, g_pages = 0;
std::size_t g_fault_order[64];
volatile sig_atomic_t g_faults = 0;

void note_fault(int, siginfo_t* info, void*) {
  const auto* at = static_cast<const std::uint8_t*>(info->si_addr);
  if (g_region == nullptr || at < g_region || at >= g_region + g_pages * g_page) ::_exit(99);  // a real crash
  const std::size_t page = static_cast<std::size_t>(at - g_region) / g_page;
  if (g_faults < 64) g_fault_order[g_faults] = page;
  g_faults = g_faults + 1;
  ::mprotect(g_region + page * g_page, g_page, PROT_READ);
}

/// The pages in the order read_pass(region, 1 thread, streams) first
/// touched them.
std::vector<std::size_t> page_order(unsigned streams) {
  REQUIRE(::mprotect(g_region, g_pages * g_page, PROT_NONE) == 0);
  g_faults = 0;
  struct sigaction on{}, before{};
  on.sa_sigaction = note_fault;
  on.sa_flags = SA_SIGINFO;
  sigemptyset(&on.sa_mask);
  REQUIRE(::sigaction(SIGSEGV, &on, &before) == 0);
  const std::vector<wdedup::ByteSpan> spans{wdedup::ByteSpan(g_region, g_pages * g_page)};
  const std::uint64_t sum = wdedup::bench::read_pass(spans, 1, streams);
  ::sigaction(SIGSEGV, &before, nullptr);
  CHECK(sum == g_pages * g_page / 8 * 0x0101010101010101ull);  // every word 0x01..01
  return std::vector<std::size_t>(g_fault_order, g_fault_order + (g_faults < 64 ? g_faults : 64));
}
}  // namespace

TEST_CASE("read_pass: two streams read a share's two halves together, one stream reads it in order") {
  // The same sum either way: only the order of reads tells a two-stream
  // pass from one that ignores `streams` (a mutation test's survivor: the
  // stricter baseline would then be the plain read pass again).
  g_page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  g_pages = 16;
  void* m = ::mmap(nullptr, g_pages * g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  g_region = static_cast<std::uint8_t*>(m);
  std::memset(g_region, 1, g_pages * g_page);
  const std::vector<std::size_t> one = page_order(1), two = page_order(2);
  std::vector<std::size_t> in_order(g_pages);
  for (std::size_t i = 0; i < g_pages; ++i) in_order[i] = i;
  CHECK(one == in_order);
  // Two streams: the halves page by page, together: 0, 8, 1, 9, ..., 7, 15.
  std::vector<std::size_t> together;
  for (std::size_t i = 0; i < g_pages / 2; ++i) {
    together.push_back(i);
    together.push_back(i + g_pages / 2);
  }
  CHECK(two == together);
  ::munmap(m, g_pages * g_page);
  g_region = nullptr;
}

TEST_CASE("read_pass: two streams, where a half or a share starts exactly at a span's start, or after an empty span") {
  // Two spans of 1 KiB: one thread's second half starts at 1024, the
  // second span's first byte; two threads' second share does too. A cursor
  // left at the end of the first span there read nothing of the rest.
  std::vector<std::uint8_t> mem(2048);
  for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<std::uint8_t>(i * 13 + 5);
  const std::vector<wdedup::ByteSpan> two = {wdedup::ByteSpan(mem.data(), 1024),
                                             wdedup::ByteSpan(mem.data() + 1024, 1024)};
  for (unsigned threads : {1u, 2u}) {
    CAPTURE(threads);
    CHECK(wdedup::bench::read_pass(two, threads, 2) == reference_sum(two));
  }
  // An empty span first: the first half starts past it.
  const std::vector<wdedup::ByteSpan> after_empty = {wdedup::ByteSpan(mem.data(), 0),
                                                     wdedup::ByteSpan(mem.data(), 1024)};
  CHECK(wdedup::bench::read_pass(after_empty, 1, 2) == reference_sum(after_empty));
}

TEST_CASE("compare: runs each side reps times, alternating which goes first") {
  std::vector<char> order;
  const wdedup::bench::Paired p =
      wdedup::bench::compare(4, [&] { order.push_back('s'); }, [&] { order.push_back('b'); });
  CHECK(std::string(order.begin(), order.end()) == "sbbssbbs");
  CHECK(p.samples.size() == 4);
  CHECK(p.baseline_samples.size() == 4);
  // The figures are the samples' medians, and the ratio the median of the
  // per-repetition ratios (baseline time / subject time), not the quotient
  // of the two medians.
  CHECK(p.seconds == wdedup::bench::median(p.samples));
  CHECK(p.baseline_seconds == wdedup::bench::median(p.baseline_samples));
  std::vector<double> ratios;
  for (std::size_t r = 0; r < 4; ++r)
    ratios.push_back(p.samples[r] > 0 ? p.baseline_samples[r] / p.samples[r] : 0);
  CHECK(p.ratio == wdedup::bench::median(ratios));
  CHECK(wdedup::bench::gb_per_s(2000000000, 2.0) == 1.0);
  CHECK(wdedup::bench::gb_per_s(1, 0.0) == 0.0);
}

TEST_CASE("compare: the untimed step runs before each repetition, off both sides' clocks") {
  // As wdedup-bench releases the table cache and reads the input before
  // each deduplicate(): inside the subject it would be timed (a user trial
  // could not follow the example's advice to do it untimed, 2026-12-02).
  std::vector<char> order;
  const wdedup::bench::Paired plain =
      wdedup::bench::compare(2, [&] { order.push_back('s'); }, [&] { order.push_back('b'); });
  CHECK(std::string(order.begin(), order.end()) == "sbbs");  // none by default
  CHECK(plain.samples.size() == 2);
  order.clear();
  const wdedup::bench::Paired p = wdedup::bench::compare(
      3, [&] { order.push_back('s'); }, [&] { order.push_back('b'); },
      [&] {
        order.push_back('u');
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      });
  CHECK(std::string(order.begin(), order.end()) == "usbubsusb");
  REQUIRE(p.samples.size() == 3);
  REQUIRE(p.baseline_samples.size() == 3);
  // Neither side's time holds the step's 200 ms (at least, on the steady
  // clock): each side only appends a character, so only a stall of the
  // test of 200 ms in that very place could fail this.
  for (const double t : p.samples) CHECK(t < 0.2);
  for (const double t : p.baseline_samples) CHECK(t < 0.2);
  // An lvalue step works too, and is called, not copied away.
  int calls = 0;
  auto step = [&] { ++calls; };
  wdedup::bench::compare(0, [] {}, [] {}, step);
  CHECK(calls == 1);
}

TEST_CASE("run_shares: every share once, on threads of their own; zero shares count as one") {
  // (A mutex-free count: each share writes its own slot, read after the join.)
  int times[3] = {0, 0, 0};
  pthread_t by[3];
  wdedup::bench::detail::run_shares(3, [&](std::size_t t) {
    ++times[t];
    by[t] = ::pthread_self();
  });
  CHECK(times[0] == 1);
  CHECK(times[1] == 1);
  CHECK(times[2] == 1);
  CHECK(::pthread_equal(by[0], ::pthread_self()) != 0);  // share 0 on the calling thread
  CHECK(::pthread_equal(by[1], ::pthread_self()) == 0);  // the others on threads it started
  CHECK(::pthread_equal(by[2], ::pthread_self()) == 0);
  CHECK(::pthread_equal(by[1], by[2]) == 0);
  int zero = 0;
  wdedup::bench::detail::run_shares(0, [&](std::size_t t) {
    CHECK(t == 0);
    ++zero;
  });
  CHECK(zero == 1);
}

#if defined(__cpp_exceptions) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
namespace {
/// This process's address space in use (VmSize), in bytes; 0 if unknown.
std::uint64_t address_space_in_use() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmSize: %llu kB", &kib) == 1) break;
  std::fclose(f);
  return kib * 1024;
}
}  // namespace

constexpr const char* kThreadLimitChild = "WDEDUP_TEST_READ_PASS_UNDER_LIMIT";

TEST_CASE("compare: each side's time is its own sample, and the ratio is baseline time / subject time") {
  // The test above runs two empty lambdas, whose times are noise: it would
  // pass with the sides' samples swapped and the ratio inverted. Here the
  // baseline sleeps 20 ms (at least that on the steady clock) and the
  // subject does nothing, so each side's samples are told apart.
  const auto sleep_20ms = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  const wdedup::bench::Paired p = wdedup::bench::compare(3, [] {}, sleep_20ms);
  REQUIRE(p.baseline_samples.size() == 3);
  for (const double t : p.baseline_samples) CHECK(t >= 0.020);
  CHECK(p.baseline_seconds >= 0.020);
  CHECK(p.seconds < p.baseline_seconds);
  CHECK(p.ratio > 1.0);
  // And the other way round: the subject is the slow side.
  const wdedup::bench::Paired q = wdedup::bench::compare(3, sleep_20ms, [] {});
  for (const double t : q.samples) CHECK(t >= 0.020);
  CHECK(q.ratio < 1.0);
}

TEST_CASE("read_pass: a thread that cannot start leaves its share to the calling thread, every byte read") {
  // In a process whose address space has room for one more thread stack
  // (8 MiB) but not two, run_shares on 4 shares starts one thread, cannot
  // start the next two, and must do their shares on the calling thread after
  // the join: a baseline that skipped them would read fewer bytes than
  // deduplicate() examines. (Until 2026-11-30 read_pass used std::thread and
  // left with std::system_error instead.) The limited run is a fresh process
  // (this binary again, this case only): a fork of this one would inherit
  // glibc's cache of the stacks of earlier tests' threads, and every new
  // thread started on a cached stack under the limit (the case then
  // silently tested nothing in a whole-file run).
  if (std::getenv(kThreadLimitChild) != nullptr) {
    // 4 KiB of bytes 0 to 255, four times; the sum to expect is a one-thread
    // pass's, taken before the limit.
    std::vector<std::uint8_t> bytes(4096);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i);
    const std::vector<wdedup::ByteSpan> spans{wdedup::ByteSpan(bytes.data(), bytes.size())};
    const std::uint64_t want = wdedup::bench::read_pass(spans, 1);
    // A new thread's stack is what `ulimit -s` said when the process
    // started (glibc; 2 MiB under `ulimit -s unlimited`): pinned to 8 MiB,
    // the limit below leaves room for one whatever the shell's limit (with
    // 2 MiB stacks, or 64 KiB, all four threads started: exit 5).
    pthread_attr_t attr;
    if (::pthread_attr_init(&attr) != 0 || ::pthread_attr_setstacksize(&attr, std::size_t{8} << 20) != 0 ||
        ::pthread_setattr_default_np(&attr) != 0)
      ::_exit(7);
    ::pthread_attr_destroy(&attr);
    const std::uint64_t used = address_space_in_use();
    if (used == 0) ::_exit(3);
    const rlim_t limit = static_cast<rlim_t>(used + (std::uint64_t{8} << 20) + (std::uint64_t{3} << 20));
    const struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(4);
    // Which thread did each share: the calling thread's besides share 0
    // means a start failed and the share was not lost.
    const pthread_t self = ::pthread_self();
    int on_caller = 0;
    pthread_t by[4];
    int times[4] = {0, 0, 0, 0};
    wdedup::bench::detail::run_shares(4, [&](std::size_t t) {
      by[t] = ::pthread_self();
      ++times[t];
    });
    for (std::size_t t = 0; t < 4; ++t) {
      if (times[t] != 1) ::_exit(8);  // a share lost, or done twice
      if (t > 0 && ::pthread_equal(by[t], self)) ++on_caller;
    }
    if (on_caller == 0) ::_exit(5);  // every thread started: the limit did not bite
    // And read_pass, whose shares go the same way, reads every byte.
    if (wdedup::bench::read_pass(spans, 4) != want) ::_exit(9);
    ::_exit(0);
  }
  const int status = wdedup_test::this_case_again(kThreadLimitChild, "read_pass: a thread that cannot start*");
  CAPTURE(status);
  REQUIRE(WIFEXITED(status));  // not killed by std::terminate's abort
  // 0: shares left by threads that could not start were done, and read_pass
  // summed every byte; 5 would be every thread started (the case not
  // exercised), 8 a share not done or done twice, 9 a wrong sum, 3, 4, 7 a child that
  // could not set itself up, 127 a binary not run again.
  CHECK(WEXITSTATUS(status) == 0);
}
#endif

TEST_CASE("the harness's FailureScope: a failure while it lives voids the rows pushed meanwhile, no others") {
  // A wrong answer found after a timed loop's clock stops once left its rows
  // "met" (a review helper's finding): the run exited 1, but the table and
  // the JSON counted them.
  wbench::Results out;
  const auto push = [&](double ratio) {
    wbench::Row row;
    row.ratio = ratio;
    row.target = wbench::Target::ratio_at_least(1.0, ">= 1x");
    out.rows.push_back(row);
  };
  push(2.0);  // before any scope
  {
    const wbench::FailureScope scope(out);
    push(3.0);
    wbench::report_failure("a wrong answer");
    push(4.0);
  }
  {
    const wbench::FailureScope scope(out);
    push(5.0);  // a later measurement, answered right
  }
  REQUIRE(out.rows.size() == 4);
  const bool failed[] = {false, true, true, false};
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(out.rows[i].failed == failed[i]);
    REQUIRE(out.rows[i].met().has_value());
    CHECK(*out.rows[i].met() == !failed[i]);  // every ratio is above its target
  }
  CHECK(wbench::failure_count() == 1);
}

#if defined(__cpp_exceptions)  // (the harness itself is built with them)
TEST_CASE("the harness's FailureScope: left by a Ctrl-C's Interrupted, it drops its rows; by another exception, "
          "it keeps them") {
  wbench::Results out;
  const auto push = [&](double value) {
    wbench::Row row;
    row.value = value;
    out.rows.push_back(row);
  };
  push(1.0);
  const unsigned failures = wbench::failure_count();
  // A measurement a Ctrl-C stopped after it had pushed rows (a check after
  // them cut short): its rows go, the earlier ones stay.
  wbench::g_test_stop = true;
  try {
    const wbench::FailureScope scope(out);
    push(2.0);
    push(3.0);
    throw wbench::Interrupted{};
  } catch (const wbench::Interrupted&) {
  }
  REQUIRE(out.rows.size() == 1);
  CHECK(out.rows[0].value == 1.0);
  // A scope that ends normally after the Ctrl-C keeps its rows (the
  // measurement finished), and one that ends a group that failed marks them.
  {
    const wbench::FailureScope scope(out);
    push(4.0);
  }
  wbench::g_test_stop = false;
  try {
    const wbench::FailureScope scope(out);
    push(5.0);
    wbench::report_failure("refused");
    throw wbench::GroupFailed{};
  } catch (const wbench::GroupFailed&) {
  }
  REQUIRE(out.rows.size() == 3);
  CHECK(out.rows[1].value == 4.0);
  CHECK_FALSE(out.rows[1].failed);
  CHECK(out.rows[2].value == 5.0);
  CHECK(out.rows[2].failed);
  CHECK(wbench::failure_count() == failures + 1);
}
#endif

TEST_CASE("the harness's --input-pages huge: refused where the kernel gives no transparent huge page") {
  CHECK(wbench::huge_input_pages_problem("always [madvise] never") == "");
  CHECK(wbench::huge_input_pages_problem("[always] madvise never") == "");
  CHECK(wbench::huge_input_pages_problem("always madvise [never]") ==
        "--input-pages huge: transparent huge pages are off here (always madvise [never] in "
        "/sys/kernel/mm/transparent_hugepage/enabled)");
  CHECK(wbench::huge_input_pages_problem("unknown") ==
        "--input-pages huge: this kernel has no transparent huge pages "
        "(no /sys/kernel/mm/transparent_hugepage/enabled)");
}

TEST_CASE("the harness's scaling row: speed-ups from the medians, failed with the first thread count's rows") {
  // 1 thread: deduplicate 0.4 s, read pass 0.2 s; 2 threads: 0.25 s and 0.1 s.
  const wbench::Row r = wbench::scaling_row("small tensors POSITIONAL", 1, 2, 0.4, 0.2, false, 0.25, 0.1, 7);
  CHECK(r.group == "dedup");
  CHECK(r.name == "small tensors POSITIONAL: scaling vs 1 thr");
  CHECK(r.threads == 2);
  CHECK(r.value == doctest::Approx(1.6));
  CHECK(r.unit == "x");
  CHECK(r.baseline == "read pass");
  CHECK(r.baseline_value == doctest::Approx(2.0));
  REQUIRE(r.ratio.has_value());
  CHECK(*r.ratio == doctest::Approx(0.8));
  CHECK(r.reps == 7);
  CHECK(!r.failed);
  CHECK(!r.met().has_value());  // no target
  // Made of a median whose check failed at the first thread count: failed
  // too (it was a figure of a voided measurement, unmarked).
  CHECK(wbench::scaling_row("adversarial POSITIONAL", 1, 2, 0.4, 0.2, true, 0.25, 0.1, 7).failed);
}

namespace {
// A dedup row of `workload` at `threads` against SHA-256 at `sha` GB/s,
// with steady samples on both sides.
wbench::Row sha_row(const std::string& workload, const std::string& what, unsigned threads, double sha) {
  wbench::Row row;
  row.group = "dedup";
  row.name = workload + ": " + what;
  row.threads = threads;
  row.baseline = "SHA-256 ref";
  row.baseline_value = sha;
  row.samples = {1.0, 1.0, 1.0};
  row.baseline_samples = {1.0, 1.0, 1.0};
  return row;
}
}  // namespace

TEST_CASE("the harness's steadiness: SHA-256 baselines held against the run's pace") {
  wbench::Results run;
  run.rows.push_back(sha_row("llama 1+1", "deduplicate", 1, 1.5));
  run.rows.push_back(sha_row("llama 3+3", "deduplicate", 1, 1.6));
  // Two workloads: nothing to hold a pace against.
  CHECK_FALSE(wbench::sha256_pace(run, run.rows[0]).has_value());
  run.rows.push_back(sha_row("small tensors", "deduplicate", 1, 0.6));
  run.rows.push_back(sha_row("small tensors", "deduplicate", 2, 3.0));  // another thread count: its own pace
  // The same workload's other rows share its baseline: one workload.
  run.rows.push_back(sha_row("small tensors", "read pass", 1, 0.6));
  // At one thread: the median of 1.5, 1.6 and 0.6 is 1.5.
  REQUIRE(wbench::sha256_pace(run, run.rows[0]).has_value());
  CHECK(*wbench::sha256_pace(run, run.rows[0]) == 1.0);
  CHECK(*wbench::sha256_pace(run, run.rows[1]) == doctest::Approx(1.6 / 1.5));
  CHECK(*wbench::sha256_pace(run, run.rows[2]) == doctest::Approx(0.4));
  CHECK(*wbench::sha256_pace(run, run.rows[4]) == doctest::Approx(0.4));
  CHECK_FALSE(wbench::sha256_pace(run, run.rows[3]).has_value());
  CHECK_FALSE(wbench::off_pace(run, run.rows[0]));
  CHECK_FALSE(wbench::off_pace(run, run.rows[1]));
  CHECK(wbench::off_pace(run, run.rows[2]));
  // A failed row's baseline is no pace and sets none; nor does a speed of 0
  // (a workload of empty tensors).
  run.rows[2].failed = run.rows[4].failed = true;
  CHECK_FALSE(wbench::sha256_pace(run, run.rows[2]).has_value());
  CHECK_FALSE(wbench::sha256_pace(run, run.rows[0]).has_value());  // two workloads left
  run.rows.push_back(sha_row("empty", "deduplicate", 1, 0.0));
  CHECK_FALSE(wbench::sha256_pace(run, run.rows[0]).has_value());
  CHECK_FALSE(wbench::sha256_pace(run, run.rows.back()).has_value());
  run.rows.pop_back();
  run.rows[2].failed = run.rows[4].failed = false;
  // Far faster is off pace too (beyond 1.5x the median).
  run.rows.push_back(sha_row("adversarial", "deduplicate", 1, 2.5));  // median of 1.5, 1.6, 0.6, 2.5: 1.55
  CHECK(*wbench::sha256_pace(run, run.rows.back()) == doctest::Approx(2.5 / 1.55));
  CHECK(wbench::off_pace(run, run.rows.back()));
  CHECK(*wbench::sha256_pace(run, run.rows[0]) == doctest::Approx(1.5 / 1.55));
  // Rows of other groups or baselines have no pace.
  wbench::Row lookup;
  lookup.group = "runtime";
  lookup.baseline = "unordered_map";
  run.rows.push_back(lookup);
  CHECK_FALSE(wbench::sha256_pace(run, run.rows.back()).has_value());
  const wbench::Steadiness st = wbench::steadiness(run);
  // Two workload runs off pace, the small tensors' counted once for its two rows.
  REQUIRE(st.off_pace.size() == 2);
  CHECK(st.off_pace[0] == std::pair<std::string, unsigned>{"small tensors", 1});
  CHECK(st.off_pace[1] == std::pair<std::string, unsigned>{"adversarial", 1});
  CHECK(wbench::steadiness_text(run).rfind("SHA-256 off the run's pace: in 2 workload runs SHA-256 ran more", 0) == 0);
}

TEST_CASE("the harness's steadiness: a workload off pace at two thread counts is listed with each one's figures") {
  wbench::Results run;
  run.rows.push_back(sha_row("st", "deduplicate", 1, 0.5));
  run.rows.push_back(sha_row("st", "deduplicate", 2, 0.8));
  for (const unsigned threads : {1u, 2u}) {
    run.rows.push_back(sha_row("a", "deduplicate", threads, threads * 1.0));
    run.rows.push_back(sha_row("b", "deduplicate", threads, threads * 1.0));
  }
  CHECK(wbench::steadiness_text(run) ==
        "SHA-256 off the run's pace: in 2 workload runs SHA-256 ran more than 1.5x faster or slower\n"
        "than the median of the run's workloads at that thread count; the machine set their SHA-256 ratios:\n"
        "  SHA-256 of st, 1 thr: 0.5 GB/s, 0.50x the run's median\n"
        "  SHA-256 of st, 2 thr: 0.8 GB/s, 0.40x the run's median\n"
        "steady: every judged row's median is within 1.5x of its fastest repetition, both sides.\n");
}

TEST_CASE("the harness's steadiness: the fingerprint + SHA-256 reference's speed is no SHA-256 pace") {
  // It hashes what the workload makes it hash (none of a buffer whose
  // fingerprint no other has), so its GB/s are no measure of the machine's
  // SHA-256: its rows neither get a pace nor move the others'.
  wbench::Results run;
  run.rows.push_back(sha_row("llama 1+1", "deduplicate", 1, 1.5));
  run.rows.push_back(sha_row("llama 3+3", "deduplicate", 1, 1.6));
  run.rows.push_back(sha_row("small tensors", "deduplicate", 1, 1.55));
  wbench::Row fp = sha_row("ptd files", "deduplicate", 1, 40.0);
  fp.baseline = wbench::kTwoLevelRef;
  run.rows.push_back(fp);
  CHECK(std::string(wbench::kTwoLevelRef) == "fp+SHA-256 ref");
  CHECK_FALSE(wbench::sha256_pace(run, run.rows.back()).has_value());
  CHECK_FALSE(wbench::off_pace(run, run.rows.back()));
  CHECK(*wbench::sha256_pace(run, run.rows[0]) == doctest::Approx(1.5 / 1.55));  // the three alone
  CHECK(wbench::steadiness(run).off_pace.empty());
}

namespace {
std::vector<std::uint8_t> bytes_of(const char* s) { return std::vector<std::uint8_t>(s, s + std::strlen(s)); }

/// two_level_count over `buffers` with a digest that is the buffer's bytes
/// (equal exactly where the bytes are), or, with `digest_of_size`, its size
/// alone (a digest that collides); what it asked to hash, call by call.
struct TwoLevelRun {
  wbench::TwoLevelCount count;
  std::vector<std::vector<std::uint32_t>> hashed;  // each call's buffers
};
TwoLevelRun two_level_run(const std::vector<wdedup::ByteSpan>& buffers, bool digest_of_size = false) {
  TwoLevelRun r;
  std::vector<std::vector<std::uint8_t>> digests;
  auto hash_each = [&](const std::vector<std::uint32_t>& which, std::vector<std::vector<std::uint8_t>>& out) {
    r.hashed.push_back(which);
    REQUIRE(out.size() == which.size());
    for (std::size_t k = 0; k < which.size(); ++k) {
      const wdedup::ByteSpan b = buffers[which[k]];
      out[k] = digest_of_size ? std::vector<std::uint8_t>(1, static_cast<std::uint8_t>(b.size()))
                              : std::vector<std::uint8_t>(b.begin(), b.end());
    }
  };
  r.count = wbench::two_level_count(buffers, digests, hash_each);
  return r;
}
}  // namespace

TEST_CASE("the harness's fingerprint + SHA-256 reference: only buffers whose length and first 32 bytes repeat "
          "are hashed, and they merge on equal digests") {
  std::vector<std::uint8_t> a(64);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 7 + 1);
  std::vector<std::uint8_t> b = a, c = a, d = a, e(a.begin(), a.end() - 1), other(64, 0xEE), c2;
  c[32] ^= 1;  // past the fingerprint: the same fingerprint as a, other bytes
  c2 = c;      // a true duplicate of c, after the collision
  d[31] ^= 1;  // the fingerprint's last byte: a fingerprint of its own
  const std::vector<std::uint8_t> f = bytes_of("abcde"), g = bytes_of("abcde"), h = bytes_of("abcdf");
  // (Each its own memory, as ExecuTorch's store is given bytes, not places.)
  const std::vector<wdedup::ByteSpan> in = {wdedup::ByteSpan(a.data(), a.size()),     // 0
                                            wdedup::ByteSpan(b.data(), b.size()),     // 1: a's bytes
                                            wdedup::ByteSpan(c.data(), c.size()),     // 2: a's fingerprint
                                            wdedup::ByteSpan(d.data(), d.size()),     // 3
                                            wdedup::ByteSpan(e.data(), e.size()),     // 4: a's head, 63 bytes
                                            wdedup::ByteSpan(f.data(), f.size()),     // 5: shorter than 32
                                            wdedup::ByteSpan(g.data(), g.size()),     // 6: f's bytes
                                            wdedup::ByteSpan(h.data(), h.size()),     // 7
                                            wdedup::ByteSpan(other.data(), other.size()), // 8
                                            wdedup::ByteSpan(c2.data(), c2.size())};  // 9: c's bytes
  const TwoLevelRun r = two_level_run(in);
  // a's fingerprint (0, 1, 2, 9) and f's (5, 6), each group in the order
  // the buffers came, the groups in the order their fingerprints first did;
  // none of 3, 4, 7, 8, whose fingerprints no other buffer has. Then c
  // again: stored as a candidate after a, its digest on arrival not kept,
  // it is hashed again when c2 reaches it (a, the first, was stored
  // unhashed, and hashed once when b came).
  CHECK(r.hashed == std::vector<std::vector<std::uint32_t>>{{0, 1, 2, 9, 5, 6}, {2}});
  CHECK(r.count.hashed == 6);
  CHECK(r.count.hashed_again == 1);
  CHECK(r.count.bytes_hashed == 4 * 64 + 2 * 5 + 64);
  // Distinct: a (b with it), c (c2 with it), d, e, f (g with it), h, other.
  CHECK(r.count.distinct == 7);

  // n distinct buffers of one fingerprint: 2n - 2 hashes, as ExecuTorch's
  // store makes them (every candidate but the first and the last twice).
  std::vector<std::vector<std::uint8_t>> same_head(5, a);
  for (std::size_t i = 0; i < same_head.size(); ++i) same_head[i][40] = static_cast<std::uint8_t>(i);
  std::vector<wdedup::ByteSpan> one_fingerprint;
  for (const auto& v : same_head) one_fingerprint.emplace_back(v.data(), v.size());
  const TwoLevelRun five = two_level_run(one_fingerprint);
  CHECK(five.hashed == std::vector<std::vector<std::uint32_t>>{{0, 1, 2, 3, 4}, {1, 2, 3}});
  CHECK(five.count.distinct == 5);
  CHECK(five.count.hashed_again == 3);
  CHECK(five.count.bytes_hashed == (2 * 5 - 2) * 64);

  // It merges on digests alone: a digest that collides (here the size)
  // merges unequal bytes of one fingerprint, a, c and c2 with b, as SHA-256
  // would if two of them collided. (deduplicate() compares the bytes.)
  const TwoLevelRun collided = two_level_run(in, true);
  CHECK(collided.count.hashed == 6);
  CHECK(collided.count.hashed_again == 0);  // (every buffer merged with its group's first)
  CHECK(collided.count.distinct == 6);

  // A buffer equal to its fingerprint's first candidate stops there: the
  // later candidate c is never reached, so not hashed again.
  const TwoLevelRun first_match = two_level_run({in[0], in[2], in[1]});
  CHECK(first_match.hashed == std::vector<std::vector<std::uint32_t>>{{0, 1, 2}});
  CHECK(first_match.count.hashed_again == 0);
  CHECK(first_match.count.bytes_hashed == 3 * 64);
  CHECK(first_match.count.distinct == 2);

  // 1000 buffers of one size, each its own first 32 bytes: 1000
  // fingerprints (the size alone would make one), nothing hashed.
  std::vector<std::vector<std::uint8_t>> heads(1000, std::vector<std::uint8_t>(40, 0));
  std::vector<wdedup::ByteSpan> one_size;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    heads[i][0] = static_cast<std::uint8_t>(i);
    heads[i][31] = static_cast<std::uint8_t>(i >> 8);
    one_size.emplace_back(heads[i].data(), heads[i].size());
  }
  const TwoLevelRun sized = two_level_run(one_size);
  CHECK(sized.hashed.empty());
  CHECK(sized.count.distinct == 1000);

  // No fingerprint repeats: nothing hashed, no call.
  const std::vector<wdedup::ByteSpan> unique = {in[0], in[3], in[4], in[5], in[7], in[8]};
  const TwoLevelRun none = two_level_run(unique);
  CHECK(none.hashed.empty());
  CHECK(none.count.hashed == 0);
  CHECK(none.count.bytes_hashed == 0);
  CHECK(none.count.distinct == 6);
  CHECK(two_level_run({}).count.distinct == 0);

  // Empty buffers (null data) share the fingerprint of length 0: hashed, merged.
  const TwoLevelRun empty = two_level_run({wdedup::ByteSpan(nullptr, 0), wdedup::ByteSpan(nullptr, 0), in[0]});
  CHECK(empty.hashed == std::vector<std::vector<std::uint32_t>>{{0, 1}});
  CHECK(empty.count.bytes_hashed == 0);
  CHECK(empty.count.distinct == 2);
}

TEST_CASE("the harness's steadiness: which rows are judged and unsteady") {
  wbench::Row r = sha_row("w", "deduplicate", 1, 1.0);
  CHECK(wbench::judged(r));
  CHECK_FALSE(wbench::unsteady(r));
  r.samples = {1.0, 1.6, 1.6};  // median 1.6x the fastest
  CHECK(wbench::unsteady(r));
  r.samples = {1.0, 1.5, 1.5};  // at the limit
  CHECK_FALSE(wbench::unsteady(r));
  r.baseline_samples = {1.0, 2.0, 2.0};  // the baseline alone
  CHECK(wbench::unsteady(r));
  r.failed = true;  // a failed row is no result: not judged
  CHECK_FALSE(wbench::judged(r));
  CHECK_FALSE(wbench::unsteady(r));
  // Fewer than three samples a side say nothing: not judged.
  wbench::Row two;
  two.samples = {1.0, 5.0};
  two.baseline_samples = {1.0};
  CHECK_FALSE(wbench::judged(two));
  CHECK_FALSE(wbench::unsteady(two));
  // One judged side is enough; the other is left out.
  two.baseline_samples = {1.0, 3.0, 3.0};
  CHECK(wbench::judged(two));
  CHECK(wbench::unsteady(two));
  CHECK(wbench::side_spread(two.baseline_samples) == 3.0);
  CHECK_FALSE(wbench::side_spread(two.samples).has_value());
  // Three samples on the row's own side alone judge it too.
  wbench::Row own;
  own.samples = {1.0, 1.0, 1.0};
  own.baseline_samples = {1.0, 1.0};
  CHECK(wbench::judged(own));
}

TEST_CASE("the harness's steadiness: a SHA-256 baseline 1.5x the run's pace, either way, is on it") {
  // "More than 1.5x faster or slower": at 1.5x itself it is not off.
  wbench::Results run;
  run.rows.push_back(sha_row("a", "deduplicate", 1, 1.0));
  run.rows.push_back(sha_row("b", "deduplicate", 1, 1.0));
  run.rows.push_back(sha_row("c", "deduplicate", 1, 1.5));
  CHECK(*wbench::sha256_pace(run, run.rows[2]) == 1.5);
  CHECK_FALSE(wbench::off_pace(run, run.rows[2]));
  run.rows[0].baseline_value = run.rows[1].baseline_value = 1.5;
  run.rows[2].baseline_value = 1.0;
  CHECK(*wbench::sha256_pace(run, run.rows[2]) * 1.5 == 1.0);
  CHECK_FALSE(wbench::off_pace(run, run.rows[2]));
  CHECK(wbench::steadiness(run).off_pace.empty());
  // Only a dedup row's SHA-256 has a pace: another group's row named so has none.
  wbench::Row other = sha_row("d", "deduplicate", 1, 1.0);
  other.group = "runtime";
  run.rows.push_back(other);
  CHECK_FALSE(wbench::sha256_pace(run, run.rows.back()).has_value());
}

TEST_CASE("the harness's steadiness: the text under the table") {
  wbench::Results run;
  CHECK(wbench::steadiness_text(run).empty());  // nothing timed, nothing to say
  wbench::Row count;                            // an allocation count: untimed
  count.name = "heap allocations";
  run.rows.push_back(count);
  CHECK(wbench::steadiness_text(run).empty());
  wbench::Row once = sha_row("w", "deduplicate", 1, 1.0);
  once.samples = {1.0};
  once.baseline_samples = {2.0};
  run.rows.push_back(once);
  CHECK(wbench::steadiness_text(run) == "steadiness not judged: no row has 3 repetitions (--reps).\n");
  {
    // A row timed on its baseline side alone is a timed row too.
    wbench::Results baseline_only;
    wbench::Row b;
    b.baseline_samples = {2.0};
    baseline_only.rows.push_back(b);
    CHECK(wbench::steadiness_text(baseline_only) == "steadiness not judged: no row has 3 repetitions (--reps).\n");
    // An unsteady row judged on its baseline alone lists that side, no comma before it.
    b.name = "get_data";
    b.baseline = "memcpy";
    b.samples = {1.0, 9.0};
    b.baseline_samples = {1.0, 3.0, 3.0};
    baseline_only.rows[0] = b;
    CHECK(wbench::steadiness_text(baseline_only) ==
          "unsteady: 1 of 1 judged rows have a median over 1.5x their fastest repetition (median / fastest\n"
          "below; rows that share a measurement are each listed): the machine set those more than the code.\n"
          "Run again, or with more --reps.\n"
          "  get_data: baseline memcpy 3.00x\n");
  }
  // The build rows' repetitions are --compile-reps: the hint names the
  // flag of each kind of row timed (a run of the build group alone named
  // --reps, which does not change them).
  {
    wbench::Results build;
    wbench::Row header;
    header.group = "build";
    header.name = "runtime header";
    header.samples = {0.1, 0.2};
    header.baseline_samples = {0.05, 0.06};
    build.rows.push_back(header);
    CHECK(wbench::steadiness_text(build) == "steadiness not judged: no row has 3 repetitions (--compile-reps).\n");
    build.rows.push_back(once);
    CHECK(wbench::steadiness_text(build) ==
          "steadiness not judged: no row has 3 repetitions (--reps; build rows --compile-reps).\n");
  }
  run.rows.push_back(sha_row("llama 1+1", "deduplicate", 1, 1.5));
  run.rows.push_back(sha_row("llama 3+3", "deduplicate", 1, 1.6));
  CHECK(wbench::steadiness_text(run) ==
        "steady: every judged row's median is within 1.5x of its fastest repetition, both sides.\n");
  // The once-timed row is not judged, but its SHA-256 counts towards the
  // pace: the median of 1.0, 1.5, 1.6 and 0.6 is 1.25.
  run.rows.push_back(sha_row("small tensors", "deduplicate", 1, 0.6));
  run.rows.push_back(sha_row("small tensors", "identity engine", 1, 0.6));
  run.rows.back().samples = {2.0, 5.0, 6.0};  // median 2.5x the fastest
  wbench::Row lookup;
  lookup.group = "runtime";
  lookup.name = "get_tensor_layout, 16 keys";
  lookup.baseline = "unordered_map";
  lookup.samples = {10.0, 12.0, 30.0};
  lookup.baseline_samples = {10.0, 20.0, 20.0};
  run.rows.push_back(lookup);
  CHECK(wbench::steadiness_text(run) ==
        "SHA-256 off the run's pace: in 1 workload run SHA-256 ran more than 1.5x faster or slower\n"
        "than the median of the run's workloads at that thread count; the machine set their SHA-256 ratios:\n"
        "  SHA-256 of small tensors, 1 thr: 0.6 GB/s, 0.48x the run's median\n"
        "unsteady: 2 of 5 judged rows have a median over 1.5x their fastest repetition (median / fastest\n"
        "below; rows that share a measurement are each listed): the machine set those more than the code.\n"
        "Run again, or with more --reps.\n"
        "  small tensors: identity engine, 1 thr: 2.50x, baseline SHA-256 ref 1.00x\n"
        "  get_tensor_layout, 16 keys: 1.20x, baseline unordered_map 2.00x\n");
}

// ---- resident_peak -------------------------------------------------------------
TEST_CASE("ResidentPeak::added: the peak less what was resident before, 0 where the peak is not above it") {
  wdedup::bench::ResidentPeak r;
  r.known = true;
  r.before = 5 * 4096;
  r.peak = 8 * 4096;
  CHECK(r.added() == 3 * 4096);
  r.peak = r.before;
  CHECK(r.added() == 0);
  // (A peak below: pages the counters had not yet folded in when it was read.)
  r.peak = 4 * 4096;
  CHECK(r.added() == 0);
}

#if defined(__linux__)
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

/// Touches every page of `n` bytes of fresh anonymous memory and unmaps
/// them: resident only inside the call.
void touch_and_unmap(std::size_t n) {
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  std::memset(p, 1, n);
  REQUIRE(::munmap(p, n) == 0);
}

const void* volatile g_kept_block = nullptr;

}  // namespace

TEST_CASE("resident_peak: a call's peak is counted after it freed its memory; a call that touches none adds ~0") {
  const wdedup::bench::ResidentPeak none = wdedup::bench::resident_peak([] {});
  REQUIRE(none.known);
  CHECK(none.before > 0);
  CHECK(none.added() < kMiB);  // the kernel's per-CPU batches, at most

  // 64 MiB touched and unmapped inside the call: its peak, not its end.
  const wdedup::bench::ResidentPeak freed = wdedup::bench::resident_peak([] { touch_and_unmap(64 * kMiB); });
  REQUIRE(freed.known);
  CHECK(freed.added() >= 63 * kMiB);
  CHECK(freed.added() <= 66 * kMiB);

  // Kept on return: counted too, and resident after. The block's address
  // goes to a volatile: clang 19 at -O2 dropped the allocation and its
  // fill, which nothing read (this check then saw 0 bytes added).
  std::vector<char> kept;
  const wdedup::bench::ResidentPeak held = wdedup::bench::resident_peak([&] {
    kept.assign(32 * kMiB, 1);
    g_kept_block = kept.data();
  });
  REQUIRE(held.known);
  CHECK(held.added() >= 31 * kMiB);
  CHECK(held.added() <= 34 * kMiB);
  CHECK(held.peak >= held.before + 31 * kMiB);
}

TEST_CASE("process_resident_peak: the process's peak survives the resets resident_peak makes") {
  using wdedup::bench::detail::proc_status_bytes;
  const long long resident = proc_status_bytes("VmRSS");
  REQUIRE(resident > 0);
  // 96 MiB touched and unmapped inside a measured call, then a second call
  // whose reset drops the kernel's mark to what is resident after it.
  REQUIRE(wdedup::bench::resident_peak([] { touch_and_unmap(96 * kMiB); }).known);
  const long long after_call = wdedup::bench::process_resident_peak();
  REQUIRE(wdedup::bench::resident_peak([] {}).known);
  const long long after_reset = wdedup::bench::process_resident_peak();
  CHECK(after_call >= resident + static_cast<long long>(95 * kMiB));
  CHECK(after_reset >= after_call);
  // (What the kernel's mark alone now says, far below.)
  CHECK(proc_status_bytes("VmHWM") <= after_reset - static_cast<long long>(90 * kMiB));
}

TEST_CASE("proc_status_bytes: a field's kB in bytes, past lines longer than its buffer and across its reads") {
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/bench-proc-status.txt";
  const auto write = [&](const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(text.data(), 1, text.size(), f) == text.size());
    REQUIRE(std::fclose(f) == 0);
  };
  // A Groups line of 450 KB (a process in 65,536 groups) before the
  // figures, and a VmRSS line that a 4 KiB read cuts in two.
  std::string groups = "Groups:\t";
  for (int g = 0; g < 65536; ++g) groups += std::to_string(100000 + g) + " ";
  std::string text = "Name:\tx\n" + groups + "\nVmHWM:\t   12345 kB\n";
  text += std::string(4096 - text.size() % 4096 - 3, '#') + "\nVmRSS:\t  777 kB\nVmSwap:\t0 kB\n";
  write(text);
  using wdedup::bench::detail::proc_status_bytes;
  CHECK(proc_status_bytes("VmHWM", path.c_str()) == 12345 * 1024LL);
  CHECK(proc_status_bytes("VmRSS", path.c_str()) == 777 * 1024LL);
  CHECK(proc_status_bytes("VmSwap", path.c_str()) == 0);
  // Only a whole field name, at a line's start; a field without digits or
  // absent is -1, as is a file that cannot be opened.
  CHECK(proc_status_bytes("VmRS", path.c_str()) == -1);
  CHECK(proc_status_bytes("Name", path.c_str()) == -1);
  CHECK(proc_status_bytes("Groups", path.c_str()) == -1);  // longer than the buffer: no figure's line, skipped
  CHECK(proc_status_bytes("VmPeak", path.c_str()) == -1);
  write("Name:\tVmRSS: 5 kB\nVmRSS:\t9 kB\n");
  CHECK(proc_status_bytes("VmRSS", path.c_str()) == 9 * 1024LL);
  write("VmRSS:\t3 kB");  // no newline at the end: not a whole line
  CHECK(proc_status_bytes("VmRSS", path.c_str()) == -1);
  // A line whose name only starts with the field's ("VmRSSx" for "VmRSS")
  // is not the field's: the search goes on to the whole name's line.
  write("VmRSSx:\t5 kB\nVmRSS:\t9 kB\n");
  CHECK(proc_status_bytes("VmRSS", path.c_str()) == 9 * 1024LL);
  // What follows a line longer than the buffer is still that line, even
  // where it reads as a field's: here the first read ends exactly where
  // the rest of a line of 4,107 bytes starts with "VmRSS:".
  write("Name:\t" + std::string(4096 - 6, 'x') + "VmRSS:\t1 kB\nVmRSS:\t2 kB\n");
  CHECK(proc_status_bytes("VmRSS", path.c_str()) == 2 * 1024LL);
  std::remove(path.c_str());
  CHECK(proc_status_bytes("VmRSS", path.c_str()) == -1);
  CHECK(proc_status_bytes("VmRSS") > 0);  // this process's own
}

#if defined(__GLIBC__) && !defined(WDEDUP_TEST_SANITIZER_MALLOC)  // (the heap is glibc's)
TEST_CASE("resident_peak: heap memory freed before the call is given back first, so reusing it counts") {
  // 48 MiB in 4 KiB blocks from malloc's heap (below its mmap threshold),
  // freed but for a last block that pins the heap's top: without a trim the
  // allocator keeps those pages resident, and the call's blocks would take
  // them again unseen.
  constexpr std::size_t kBlock = 4096, kBlocks = 48 * kMiB / kBlock;
  std::vector<void*> blocks(kBlocks);
  for (void*& b : blocks) {
    b = std::malloc(kBlock);
    REQUIRE(b != nullptr);
    std::memset(b, 2, kBlock);
  }
  void* pin = std::malloc(kBlock);
  REQUIRE(pin != nullptr);
  for (void* b : blocks) std::free(b);
  const wdedup::bench::ResidentPeak again = wdedup::bench::resident_peak([&] {
    for (void*& b : blocks) {
      b = std::malloc(kBlock);
      REQUIRE(b != nullptr);
      std::memset(b, 3, kBlock);
    }
  });
  for (void* b : blocks) std::free(b);
  std::free(pin);
  REQUIRE(again.known);
  CHECK(again.added() >= 46 * kMiB);
  CHECK(again.added() <= 52 * kMiB);
}
#endif
#endif

namespace {

/// memory_limit_from's files under a directory of a test's own: a
/// /proc/meminfo, a /proc/self/cgroup, a /proc/self/mountinfo, and the
/// cgroup mounts it lists as directories below (`at` the path relative to
/// that directory).
struct FakeProc {
  std::string dir, meminfo, self, mountinfo;

  explicit FakeProc(const char* name)
      : dir(std::string(WDEDUP_TEST_TMPDIR) + "/" + name),
        meminfo(dir + "/meminfo"),
        self(dir + "/cgroup"),
        mountinfo(dir + "/mountinfo") {
    remove_tree();  // (a run stopped part-way left it)
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  }
  ~FakeProc() { remove_tree(); }
  FakeProc(const FakeProc&) = delete;
  FakeProc& operator=(const FakeProc&) = delete;

  void remove_tree() const {
    ::nftw(
        dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return std::remove(path); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  /// Writes `text` to `path` (absolute, or under dir), making its directories.
  void write(const std::string& path, const std::string& text) const {
    const std::string full = path[0] == '/' ? path : dir + "/" + path;
    for (std::size_t slash = full.find('/', dir.size() + 1); slash != std::string::npos;
         slash = full.find('/', slash + 1))
      ::mkdir(full.substr(0, slash).c_str(), 0755);
    FILE* f = std::fopen(full.c_str(), "w");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(text.data(), 1, text.size(), f) == text.size());
    REQUIRE(std::fclose(f) == 0);
  }
  /// A line of /proc/self/mountinfo: a mount of `root` at `at` under dir,
  /// escaped as the kernel escapes them, with optional fields before the "-"
  /// and `type_source_options` (e.g. "cgroup2 cgroup2 rw,nsdelegate") after.
  std::string mount(const std::string& root, const std::string& at, const std::string& type_source_options) const {
    const auto escape = [](const std::string& path) {
      std::string out;
      for (const char c : path) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
          const unsigned u = static_cast<unsigned char>(c);
          out += {'\\', static_cast<char>('0' + u / 64), static_cast<char>('0' + u / 8 % 8),
                  static_cast<char>('0' + u % 8)};
        } else {
          out += c;
        }
      }
      return out;
    };
    return "34 25 0:29 " + escape(root) + " " + escape(dir + "/" + at) +
           " rw,nosuid,nodev,noexec,relatime shared:9 master:2 - " + type_source_options + "\n";
  }
  wdedup::bench::MemoryLimit limit(std::uint64_t physical) const {
    return wdedup::bench::detail::memory_limit_from(meminfo.c_str(), self.c_str(), mountinfo.c_str(), physical);
  }
};

bool is(const wdedup::bench::MemoryLimit& got, std::uint64_t bytes, const char* source) {
  const bool same = got.known() && got.bytes == bytes && std::strcmp(got.source, source) == 0;
  // (A CAPTURE here would end with this call, before the CHECK that fails.)
  if (!same)
    MESSAGE("memory_limit gave " << got.bytes << " bytes from " << std::string(got.known() ? got.source : "nothing"));
  return same;
}

const char* const kAvailable = "MemAvailable in /proc/meminfo";
const char* const kPhysical = "this machine's physical memory";
const char* const kMemoryMax = "its cgroup's memory.max, less what the cgroup uses";
const char* const kLimitInBytes = "its cgroup's memory.limit_in_bytes, less what the cgroup uses";
const std::uint64_t kPhysicalBytes = 64u << 20;
const char* const kMeminfo =
    "MemTotal:       65536 kB\nMemFree:        10000 kB\nMemAvailable:   32768 kB\nBuffers: 1 kB\n";
const std::uint64_t kAvailableBytes = 32768u << 10;

}  // namespace

TEST_CASE("memory_limit: the smaller of MemAvailable and the cgroup's memory limit, else physical memory") {
  // A cgroup2 mount at "cg2" under the fixture's directory (not
  // /sys/fs/cgroup, which the test never reads); physical memory 64 MiB.
  const FakeProc p("bench-memory-limit");
  const std::string root = p.dir + "/cg2";
  const auto limit = [&] { return p.limit(kPhysicalBytes); };
  // Nothing readable: physical memory; nothing at all: not known.
  CHECK(is(limit(), kPhysicalBytes, kPhysical));
  CHECK_FALSE(p.limit(0).known());
  p.write(p.meminfo, kMeminfo);
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // Nothing available is 0 bytes available, not an unread file.
  p.write(p.meminfo, "MemTotal:       65536 kB\nMemAvailable:       0 kB\n");
  CHECK(is(limit(), 0, kAvailable));
  p.write(p.meminfo, kMeminfo);
  p.write(p.mountinfo, p.mount("/", "cg2", "cgroup2 cgroup2 rw,nsdelegate"));
  // A cgroup v1 line alone names no cgroup v2 ("12:memory:/a/b" is v1's,
  // and no v1 hierarchy is mounted).
  p.write(root + "/a/b/memory.max", "1048576\n");
  p.write(p.self, "12:memory:/a/b\n1:name=systemd:/a/b\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // Nor does a line of hierarchy 1 with no controllers: v2's is "0::".
  p.write(p.self, "1::/a/b\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // The cgroup's own limit, below MemAvailable (its v1 lines around it).
  p.write(p.self, "12:memory:/x\n0::/a/b\n1:name=systemd:/x\n");
  CHECK(is(limit(), 1048576, kMemoryMax));
  // An ancestor's lower limit holds the cgroup to it too; "max" is none.
  p.write(root + "/a/memory.max", "524288\n");
  CHECK(is(limit(), 524288, kMemoryMax));
  p.write(root + "/a/b/memory.max", "max\n");
  CHECK(is(limit(), 524288, kMemoryMax));
  p.write(root + "/a/memory.max", "max\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // The root's memory.max: a cgroup namespace's root (a container), whose
  // processes see "0::/".
  p.write(root + "/memory.max", "2097152\n");
  CHECK(is(limit(), 2097152, kMemoryMax));
  p.write(p.self, "0::/\n");
  CHECK(is(limit(), 2097152, kMemoryMax));
  std::remove((root + "/memory.max").c_str());
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // A cgroup limit above MemAvailable: MemAvailable, the smaller.
  p.write(p.self, "0::/a/b\n");
  p.write(root + "/a/b/memory.max", "1073741824\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // What is not a number is no limit: a figure with more, or past 19 digits.
  p.write(root + "/a/b/memory.max", "1048576 bytes\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  p.write(root + "/a/b/memory.max", "99999999999999999999\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // MemAvailable unread (a kernel before 3.14 has none): the cgroup's limit,
  // or physical memory where that is smaller.
  p.write(p.meminfo, "MemTotal:       65536 kB\nMemFree:        10000 kB\n");
  p.write(root + "/a/b/memory.max", "1048576\n");
  CHECK(is(limit(), 1048576, kMemoryMax));
  p.write(root + "/a/b/memory.max", "1073741824\n");
  CHECK(is(limit(), kPhysicalBytes, kPhysical));
  // No mountinfo (no /proc), one without the cgroup2 mount, or a line
  // without its "-": the limit is not found, and MemAvailable is as before.
  p.write(p.meminfo, kMeminfo);
  p.write(root + "/a/b/memory.max", "1048576\n");
  CHECK(is(limit(), 1048576, kMemoryMax));
  std::remove(p.mountinfo.c_str());
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  p.write(p.mountinfo, "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  p.write(p.mountinfo, "34 25 0:29 / " + root + " rw,relatime shared:9 cgroup2 cgroup2 rw\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
#if defined(__linux__)
  // This process's own: at most the machine's memory, from a limit it names.
  const wdedup::bench::MemoryLimit own = wdedup::bench::memory_limit();
  REQUIRE(own.known());
  CHECK(own.bytes > 0);
  CHECK(own.bytes <= wdedup::bench::physical_memory());
  CAPTURE(own.source);
  CHECK((std::strcmp(own.source, kAvailable) == 0 || std::strcmp(own.source, kMemoryMax) == 0 ||
         std::strcmp(own.source, kLimitInBytes) == 0 || std::strcmp(own.source, kPhysical) == 0));
#endif
}

TEST_CASE("memory_limit: cgroup2 found through /proc/self/mountinfo, wherever it is mounted and from whichever root") {
  const FakeProc p("bench-memory-limit-mounts");
  const auto limit = [&] { return p.limit(kPhysicalBytes); };
  p.write(p.meminfo, kMeminfo);
  // A hybrid system, as this one (v1 hierarchies under a tmpfs at
  // /sys/fs/cgroup, cgroup2 at /sys/fs/cgroup/unified). Neither the tmpfs
  // nor a tmpfs whose source is named cgroup2 holds the limit: their files
  // here say 4096.
  p.write(p.self, "4:memory:/\n1:name=systemd:/a/b\n0::/a/b\n");
  const std::string hybrid = p.mount("/", "fs", "tmpfs tmpfs rw,mode=755") +
                             p.mount("/", "fs/systemd", "cgroup cgroup rw,name=systemd") +
                             p.mount("/", "decoy", "tmpfs cgroup2 rw") +
                             p.mount("/", "fs/unified", "cgroup2 cgroup2 rw");
  p.write(p.mountinfo, hybrid);
  for (const char* decoy : {"fs/a/b/memory.max", "fs/memory.max", "decoy/a/b/memory.max", "decoy/memory.max"})
    p.write(decoy, "4096\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  p.write("fs/unified/a/b/memory.max", "1048576\n");
  CHECK(is(limit(), 1048576, kMemoryMax));
  p.write("fs/unified/a/memory.max", "524288\n");
  CHECK(is(limit(), 524288, kMemoryMax));
  p.write("fs/unified/memory.max", "262144\n");
  CHECK(is(limit(), 262144, kMemoryMax));

  // A container without a cgroup namespace: its cgroup /docker/c1 from the
  // hierarchy's root, mounted from that cgroup down. Its limit is the mount
  // point's own file; those above it are not shown.
  p.write(p.self, "0::/docker/c1\n");
  p.write(p.mountinfo, p.mount("/docker/c1", "ctr", "cgroup2 cgroup2 rw,nsdelegate"));
  p.write("ctr/memory.max", "2097152\n");
  p.write("ctr/docker/c1/memory.max", "4096\n");  // (not a path the mount shows)
  CHECK(is(limit(), 2097152, kMemoryMax));
  // A cgroup below it: its own limit, then the container's.
  p.write(p.self, "0::/docker/c1/inner\n");
  p.write("ctr/inner/memory.max", "1048576\n");
  CHECK(is(limit(), 1048576, kMemoryMax));
  p.write("ctr/inner/memory.max", "max\n");
  CHECK(is(limit(), 2097152, kMemoryMax));
  // A cgroup not under the mount's root ("/docker/c10" is not under
  // "/docker/c1", nor "/docker" or "/other"): the mount shows none of it, and
  // is not used.
  for (const char* other : {"0::/other\n", "0::/docker/c10\n", "0::/docker\n", "0::/dockerXc1/in\n"}) {
    CAPTURE(other);
    p.write(p.self, other);
    CHECK(is(limit(), kAvailableBytes, kAvailable));
  }
  // ... but a later mount of the hierarchy that shows it is.
  p.write(p.self, "0::/other\n");
  p.write(p.mountinfo, p.mount("/docker/c1", "ctr", "cgroup2 cgroup2 rw") + p.mount("/", "host", "cgroup2 cgroup2 rw"));
  p.write("host/other/memory.max", "3145728\n");
  CHECK(is(limit(), 3145728, kMemoryMax));

  // A mount point and a root with a space and a backslash, which mountinfo
  // writes as "\040" and "\134".
  const std::string spaced = p.mount("/my group\\1", "my cgroup\\2", "cgroup2 cgroup2 rw");
  CHECK(spaced.find("/my\\040group\\1341 ") != std::string::npos);
  CHECK(spaced.find("/my\\040cgroup\\1342 ") != std::string::npos);
  p.write(p.mountinfo, spaced);
  p.write(p.self, "0::/my group\\1/b\n");
  p.write("my cgroup\\2/b/memory.max", "1572864\n");
  CHECK(is(limit(), 1572864, kMemoryMax));
  p.write("my cgroup\\2/memory.max", "786432\n");
  CHECK(is(limit(), 786432, kMemoryMax));
}

TEST_CASE("memory_limit: cgroup v1's memory.limit_in_bytes, in the hierarchy of the memory controller") {
  const FakeProc p("bench-memory-limit-v1");
  const auto limit = [&] { return p.limit(kPhysicalBytes); };
  p.write(p.meminfo, kMeminfo);
  // The cpu hierarchy, a named one called "memory" (listed first, in both
  // files) and a tmpfs whose options name memory hold no limit of this
  // process: their files say 4096.
  p.write(p.mountinfo, p.mount("/", "cpu", "cgroup cgroup rw,cpu") +
                           p.mount("/", "named", "cgroup cgroup rw,name=memory") +
                           p.mount("/", "tmp", "tmpfs cgroup rw,memory") +
                           p.mount("/", "memory", "cgroup cgroup rw,memory") +
                           p.mount("/", "systemd", "cgroup cgroup rw,name=systemd"));
  for (const char* decoy : {"cpu/a/b/memory.limit_in_bytes", "cpu/x/memory.limit_in_bytes",
                            "named/a/b/memory.limit_in_bytes", "named/x/memory.limit_in_bytes",
                            "tmp/a/b/memory.limit_in_bytes", "memory/x/memory.limit_in_bytes"})
    p.write(decoy, "4096\n");
  p.write(p.self, "5:name=memory:/x\n3:cpu:/x\n4:memory:/a/b\n1:name=systemd:/x\n0::/x\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // The cgroup's own limit, then a lower one of an ancestor's.
  p.write("memory/a/b/memory.limit_in_bytes", "1048576\n");
  CHECK(is(limit(), 1048576, kLimitInBytes));
  p.write("memory/a/memory.limit_in_bytes", "524288\n");
  CHECK(is(limit(), 524288, kLimitInBytes));
  // "No limit", as v1 writes it: PAGE_COUNTER_MAX pages of 4 KiB (x86-64),
  // or of 64 KiB (arm64, ppc64); and the root's, which is always that.
  const std::string unlimited = "9223372036854771712\n", unlimited_64k = "9223372036854710272\n";
  p.write("memory/a/memory.limit_in_bytes", unlimited);
  p.write("memory/memory.limit_in_bytes", unlimited);
  CHECK(is(limit(), 1048576, kLimitInBytes));
  p.write("memory/a/b/memory.limit_in_bytes", unlimited_64k);
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // Not even where nothing else is known: 2^62 and up is no limit; below
  // it, a number is one.
  std::remove(p.meminfo.c_str());
  CHECK_FALSE(p.limit(0).known());
  p.write("memory/a/b/memory.limit_in_bytes", "4611686018427387904\n");
  CHECK_FALSE(p.limit(0).known());
  p.write("memory/a/b/memory.limit_in_bytes", "4611686018427383808\n");
  CHECK(is(p.limit(0), 4611686018427383808u, kLimitInBytes));
  p.write(p.meminfo, kMeminfo);
  // The memory controller mounted with another ("3:cpu,memory:/a/b").
  p.write(p.self, "3:cpu,memory:/a/b\n1:name=systemd:/x\n");
  p.write(p.mountinfo, p.mount("/", "cpu,memory", "cgroup cgroup rw,cpu,memory"));
  p.write("cpu,memory/a/b/memory.limit_in_bytes", "1048576\n");
  CHECK(is(limit(), 1048576, kLimitInBytes));
  p.write("cpu,memory/a/memory.limit_in_bytes", "524288\n");
  CHECK(is(limit(), 524288, kLimitInBytes));
  // Only a whole word of a list names the controller (cgroup2's super
  // options may hold "memory_recursiveprot").
  const auto lists = [](const char* list) { return wdedup::bench::detail::lists(list, std::strlen(list), "memory"); };
  CHECK(lists("memory"));
  CHECK(lists("rw,cpu,memory"));
  CHECK(lists("memory,cpu"));
  CHECK_FALSE(lists("rw,nsdelegate,memory_recursiveprot"));
  CHECK_FALSE(lists("rw,name=memory"));
  CHECK_FALSE(lists("memor,emory"));
  CHECK_FALSE(lists(""));
  // A container without a cgroup namespace (Docker on an older host): the
  // mount's root is its cgroup, and its limit the mount point's file.
  p.write(p.self, "4:memory:/docker/c1\n");
  p.write(p.mountinfo, p.mount("/docker/c1", "ctr", "cgroup cgroup ro,memory"));
  p.write("ctr/memory.limit_in_bytes", "2097152\n");
  CHECK(is(limit(), 2097152, kLimitInBytes));
  p.write(p.self, "4:memory:/docker/c2\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
}

TEST_CASE("memory_limit: with both cgroup v1 and v2 mounted, the lower limit, named by its file") {
  const FakeProc p("bench-memory-limit-both");
  const auto limit = [&] { return p.limit(kPhysicalBytes); };
  p.write(p.meminfo, kMeminfo);
  p.write(p.self, "4:memory:/a\n1:name=systemd:/a\n0::/a\n");
  p.write(p.mountinfo,
          p.mount("/", "memory", "cgroup cgroup rw,memory") + p.mount("/", "unified", "cgroup2 cgroup2 rw"));
  p.write("memory/a/memory.limit_in_bytes", "1048576\n");
  p.write("unified/a/memory.max", "2097152\n");
  CHECK(is(limit(), 1048576, kLimitInBytes));
  p.write("unified/a/memory.max", "524288\n");
  CHECK(is(limit(), 524288, kMemoryMax));
  // Equal limits: cgroup v2's, read first.
  p.write("memory/a/memory.limit_in_bytes", "524288\n");
  CHECK(is(limit(), 524288, kMemoryMax));
  // Each above MemAvailable: MemAvailable.
  p.write("memory/a/memory.limit_in_bytes", "1073741824\n");
  p.write("unified/a/memory.max", "1073741824\n");
  CHECK(is(limit(), kAvailableBytes, kAvailable));
  // Nothing else known (no MemAvailable, no physical memory): cgroup v2's
  // limit is taken as it is read, and v1's higher one does not replace it.
  std::remove(p.meminfo.c_str());
  p.write("unified/a/memory.max", "524288\n");
  CHECK(is(p.limit(0), 524288, kMemoryMax));
}

TEST_CASE("memory_limit: the room a cgroup's limit leaves, less what the cgroup uses but for inactive page cache") {
  const FakeProc p("bench-memory-limit-room");
  const auto limit = [&] { return p.limit(kPhysicalBytes); };
  p.write(p.meminfo, kMeminfo);
  // cgroup v2: memory.current, and memory.stat's inactive_file (the page
  // cache the kernel reclaims first, as MemAvailable counts it).
  p.write(p.self, "0::/a/b\n");
  p.write(p.mountinfo, p.mount("/", "cg2", "cgroup2 cgroup2 rw"));
  p.write("cg2/a/b/memory.max", "1048576\n");
  CHECK(is(limit(), 1048576, kMemoryMax));
  p.write("cg2/a/b/memory.current", "786432\n");
  CHECK(is(limit(), 262144, kMemoryMax));
  p.write("cg2/a/b/memory.stat", "anon 524288\ninactive_filex 1\nfile 262144\ninactive_file 262144\nactive_file 0\n");
  CHECK(is(limit(), 524288, kMemoryMax));
  // Each level's room: an ancestor's limit with less room left holds the
  // cgroup to it (its usage counts its children's).
  p.write("cg2/a/memory.max", "2097152\n");
  p.write("cg2/a/memory.current", "1835008\n");
  CHECK(is(limit(), 262144, kMemoryMax));
  // A cgroup using more than its limit has no room: 0, known.
  p.write("cg2/a/memory.current", "3145728\n");
  CHECK(is(limit(), 0, kMemoryMax));
  // Inactive page cache above the usage: none used. A figure of 20 digits is
  // no figure.
  p.write("cg2/a/memory.current", "1835008\n");
  p.write("cg2/a/memory.stat", "inactive_file 2097152\n");
  CHECK(is(limit(), 524288, kMemoryMax));
  p.write("cg2/a/memory.stat", "inactive_file 12345678901234567890\n");
  CHECK(is(limit(), 262144, kMemoryMax));
  // cgroup v1: memory.usage_in_bytes, and memory.stat's hierarchical
  // total_inactive_file (its inactive_file is the cgroup's own pages only).
  const FakeProc q("bench-memory-limit-room-v1");
  q.write(q.meminfo, kMeminfo);
  q.write(q.self, "4:memory:/a\n");
  q.write(q.mountinfo, q.mount("/", "memory", "cgroup cgroup rw,memory"));
  q.write("memory/a/memory.limit_in_bytes", "1048576\n");
  q.write("memory/a/memory.usage_in_bytes", "917504\n");
  CHECK(is(q.limit(kPhysicalBytes), 131072, kLimitInBytes));
  q.write("memory/a/memory.stat", "inactive_file 65536\ntotal_inactive_file 393216\n");
  CHECK(is(q.limit(kPhysicalBytes), 524288, kLimitInBytes));
  // A v1 ancestor's limit holds the cgroup only where that ancestor is
  // charged for its children (memory.use_hierarchy 1; 0 before 5.11 unless
  // set); the cgroup's own file does not matter for its own limit.
  q.write(q.self, "4:memory:/a/b\n");
  q.write("memory/a/b/memory.limit_in_bytes", "1048576\n");
  q.write("memory/a/b/memory.use_hierarchy", "0\n");
  CHECK(is(q.limit(kPhysicalBytes), 524288, kLimitInBytes));
  q.write("memory/a/memory.use_hierarchy", "0\n");
  CHECK(is(q.limit(kPhysicalBytes), 1048576, kLimitInBytes));
  q.write("memory/a/b/memory.limit_in_bytes", "262144\n");
  CHECK(is(q.limit(kPhysicalBytes), 262144, kLimitInBytes));
  q.write("memory/a/b/memory.limit_in_bytes", "1048576\n");
  q.write("memory/a/memory.use_hierarchy", "1\n");
  CHECK(is(q.limit(kPhysicalBytes), 524288, kLimitInBytes));
}

TEST_CASE("memory_limit: a cgroup outside its namespace's root is not looked for in the namespace's mount") {
  // A process moved out of its cgroup namespace's root (or one that entered
  // the namespace) sees its cgroup from that root with "..": the mount of
  // the namespace's root does not show it, and "<mount>/../../user.slice/s"
  // leads out of the mount (here to a file that says 4096).
  const FakeProc p("bench-memory-limit-dotdot");
  p.write(p.meminfo, kMeminfo);
  p.write(p.self, "0::/../../user.slice/s\n");
  p.write(p.mountinfo, p.mount("/", "ns/cg", "cgroup2 cgroup2 rw"));
  p.write("ns/cg/memory.max", "1048576\n");
  p.write("user.slice/s/memory.max", "4096\n");
  CHECK(is(p.limit(kPhysicalBytes), kAvailableBytes, kAvailable));
  // A mount whose root is "/../.." (the host's hierarchy, bound in) shows it.
  p.write(p.mountinfo, p.mount("/", "ns/cg", "cgroup2 cgroup2 rw") + p.mount("/../..", "host", "cgroup2 cgroup2 rw"));
  p.write("host/user.slice/s/memory.max", "2097152\n");
  CHECK(is(p.limit(kPhysicalBytes), 2097152, kMemoryMax));
  // The cgroup right above the namespace's root, "/..": the path ends in
  // "..", and "<mount>/.." (here a directory whose limit says 4096) is
  // outside the mount too.
  p.write(p.mountinfo, p.mount("/", "ns/cg", "cgroup2 cgroup2 rw"));
  p.write("ns/memory.max", "4096\n");
  p.write(p.self, "0::/..\n");
  CHECK(is(p.limit(kPhysicalBytes), kAvailableBytes, kAvailable));
  // ".." as a whole name only: "/..a" is a cgroup's name.
  p.write(p.self, "0::/..a/s\n");
  p.write("ns/cg/..a/s/memory.max", "3145728\n");
  CHECK(is(p.limit(kPhysicalBytes), 1048576, kMemoryMax));
}

// This machine's own layout: hybrid, no optional fields at all (field 7 is
// the "-").
TEST_CASE("memory_limit: mountinfo lines without optional fields, as this hybrid host writes them") {
  const FakeProc p("bench-memory-limit-noopt");
  p.write(p.meminfo, kMeminfo);
  p.write(p.self, "9:name=systemd:/\n4:memory:/process_api/b57e\n1:cpu:/\n0::/\n");
  p.write(p.mountinfo,
          "30 22 0:27 / " + p.dir + "/fs rw,relatime - tmpfs tmpfs rw,mode=755\n"
          "31 30 0:28 / " + p.dir + "/fs/cpu rw,relatime - cgroup cgroup rw,cpu\n"
          "34 30 0:31 / " + p.dir + "/fs/memory rw,relatime - cgroup cgroup rw,memory\n"
          "40 30 0:37 / " + p.dir + "/fs/unified rw,relatime - cgroup2 cgroup2 rw\n");
  p.write("fs/memory/process_api/b57e/memory.limit_in_bytes", "1048576\n");
  p.write("fs/memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
  p.write("fs/memory/memory.limit_in_bytes", "9223372036854771712\n");
  CHECK(is(p.limit(kPhysicalBytes), 1048576, kLimitInBytes));
}

TEST_CASE("memory_limit: mount lines longer than the line buffer (an overlay's) before and after the cgroup's") {
  const FakeProc p("bench-memory-limit-long");
  p.write(p.meminfo, kMeminfo);
  p.write(p.self, "0::/kubepods/burstable/pod1234/abcd\n");
  const std::string overlay = "500 400 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=" +
                              std::string(6000, 'L') + ",upperdir=/u,workdir=/w\n";
  for (std::size_t pad : {0u, 1u, 4095u, 4096u, 4097u}) {
    CAPTURE(pad);
    const std::string filler = std::string(pad, 'x') + "\n";  // shifts where the long line falls in the buffer
    p.write(p.mountinfo, "1 0 0:1 / /x rw - tmpfs " + filler + overlay +
                             "34 25 0:29 /kubepods/burstable/pod1234/abcd " + p.dir +
                             "/cg rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n" + overlay);
    p.write("cg/memory.max", "2097152\n");
    CHECK(is(p.limit(kPhysicalBytes), 2097152, kMemoryMax));
  }
}

TEST_CASE("memory_limit: tab and newline escapes, an empty source, a mount point holding ' -'") {
  const FakeProc p("bench-memory-limit-esc");
  p.write(p.meminfo, kMeminfo);
  p.write(p.self, "0::/a\tb\n");  // (a tab in a cgroup's name, raw in /proc/self/cgroup)
  p.write(p.mountinfo, "34 25 0:29 / " + p.dir + "/c\\011g\\012x\\040- rw shared:1 - cgroup2  rw\n");
  p.write("c\tg\nx -/a\tb/memory.max", "1048576\n");
  CHECK(is(p.limit(kPhysicalBytes), 1048576, kMemoryMax));
}

TEST_CASE("mountinfo_path: octal escapes decoded whole inside the field only; a path longer than the room cut there") {
  using wdedup::bench::detail::mountinfo_path;
  char out[8];
  const auto got = [&](std::size_t n) { return std::string(out, n); };
  CHECK(mountinfo_path("a\\040b", 6, out, sizeof out) == 3);
  CHECK(got(3) == "a b");
  CHECK(mountinfo_path("\\134", 4, out, sizeof out) == 1);
  CHECK(got(1) == "\\");
  // The field is "\04" (its 4th byte, '0', is past its end): no escape.
  CHECK(mountinfo_path("\\0400", 3, out, sizeof out) == 3);
  CHECK(got(3) == "\\04");
  // A first digit above 3 makes no byte: the kernel writes none such.
  CHECK(mountinfo_path("\\400", 4, out, sizeof out) == 4);
  CHECK(got(4) == "\\400");
  // Longer than `cap` (4): `cap`, and nothing written past out[3].
  std::memset(out, '#', sizeof out);
  CHECK(mountinfo_path("abcdef", 6, out, 4) == 4);
  CHECK(got(8) == "abcd####");
}

TEST_CASE("memory_limit: cgroup_dir at exactly its capacity, and the longest /proc/self/cgroup line") {
  const FakeProc p("bench-memory-limit-cap");
  p.write(p.self, "0::/abc\n");
  p.write(p.mountinfo, "34 25 0:29 / /m rw - cgroup2 cgroup2 rw\n");
  char file[64];
  std::size_t base = 0, len = 0;
  // "/m" + "/abc" + sizeof "/memory.limit_in_bytes" (23) = 29.
  CHECK(wdedup::bench::detail::cgroup_dir(p.self.c_str(), p.mountinfo.c_str(), wdedup::bench::detail::CgroupVersion::v2, file, 29, &base, &len));
  CHECK(base == 2);
  CHECK(len == 6);
  CHECK(std::string(file, len) == "/m/abc");
  CHECK_FALSE(wdedup::bench::detail::cgroup_dir(p.self.c_str(), p.mountinfo.c_str(), wdedup::bench::detail::CgroupVersion::v2, file, 28, &base, &len));
  // A /proc/self/cgroup line of 4095 bytes (the longest for_each_line gives) and a mount at "/".
  const std::string longpath = "/" + std::string(4091, 'p');
  p.write(p.self, "0::" + longpath + "\n");
  p.write(p.mountinfo, "34 25 0:29 / / rw - cgroup2 cgroup2 rw\n");
  char big[4096 + 256];
  CHECK(wdedup::bench::detail::cgroup_dir(p.self.c_str(), p.mountinfo.c_str(), wdedup::bench::detail::CgroupVersion::v2, big, sizeof big, &base, &len));
  CHECK(len == 1 + longpath.size());
  p.write(p.self, "0::" + longpath + "p\n");  // 4096 bytes: skipped, no cgroup
  CHECK_FALSE(wdedup::bench::detail::cgroup_dir(p.self.c_str(), p.mountinfo.c_str(), wdedup::bench::detail::CgroupVersion::v2, big, sizeof big, &base, &len));
}

TEST_CASE("the harness's targets: every target of what the run asks for, those never measured counted") {
  // A --quick run of every group on 2 threads: 5 workloads x 2 thread counts
  // x 2, the lookups of 4 stores and the scan's at 4096 keys, 2 allocation
  // counts, get_data and load_data_into, the write, 2 build rows.
  wbench::Config c;
  c.threads = {1, 2};
  CHECK(wbench::planned_targets(c, true) == 20 + 5 + 2 + 2 + 1 + 2);
  CHECK(wbench::planned_targets(c, false) == 30);  // (a sanitizer build counts no allocations)
  // Only what --only and --workloads leave in.
  c.only = {"runtime", "write"};
  c.key_counts = {16, 65536};
  CHECK(wbench::planned_targets(c, true) == 1 + 1 + 2 + 2 + 1);
  c.key_counts = {4096};
  CHECK(wbench::planned_targets(c, true) == 2 + 2 + 2 + 1);
  c.only = {"dedup", "build"};
  c.workloads = {"small-tensors", "ptd"};  // (the user's files have no target)
  c.threads = {1, 2, 4};
  CHECK(wbench::planned_targets(c, true) == 2 * 3 + 2);
  c.references = {"fp-sha256"};  // (untargeted: deduplicate() against the read pass alone)
  CHECK(wbench::planned_targets(c, true) == 1 * 3 + 2);
  c.references.clear();
  c.only = {"runtime"};
  c.key_counts.clear();  // no store: no allocation count, get_data and load_data_into still
  CHECK(wbench::planned_targets(c, true) == 2);
  c.once = true;  // (times nothing)
  CHECK(wbench::planned_targets(c, true) == 0);

  // Four rows with a target, three of them met, one failed; one without.
  wbench::Results r;
  for (const double ratio : {2.0, 3.0, 0.5, 4.0, 1.0}) {
    wbench::Row row;
    row.ratio = ratio;
    if (ratio != 1.0) row.target = wbench::Target::ratio_at_least(1.0, ">= 1x");
    row.failed = ratio == 4.0;
    r.rows.push_back(row);
  }
  const wbench::TargetCount t = wbench::count_targets(r, 10);
  CHECK(t.targets == 10);
  CHECK(t.met == 2);
  CHECK(t.not_measured == 6);
  CHECK(wbench::targets_line(t, "", false, true) == "2 of 10 targets met, 6 not measured (failed)");
  CHECK(wbench::targets_line(t, " (--quick)", true, false) ==
        "2 of 10 targets met (--quick), 6 not measured (interrupted)");
  CHECK(wbench::targets_line(t, "", true, true) == "2 of 10 targets met, 6 not measured (failed or interrupted)");
  CHECK(wbench::targets_line(t, "", false, false) == "2 of 10 targets met, 6 not measured (not run)");
  // Every one measured: nothing more said; one target is one.
  const wbench::TargetCount all = wbench::count_targets(r, 4);
  CHECK(all.targets == 4);
  CHECK(all.not_measured == 0);
  CHECK(wbench::targets_line(all, "", false, false) == "2 of 4 targets met");
  // More rows with a target than planned: each counted, none "not measured"
  // (planned - measured would wrap around).
  const wbench::TargetCount more = wbench::count_targets(r, 2);
  CHECK(more.targets == 4);
  CHECK(more.met == 2);
  CHECK(more.not_measured == 0);
  CHECK(wbench::targets_line(wbench::count_targets(wbench::Results{}, 1), "", false, true) ==
        "0 of 1 target met, 1 not measured (failed)");
}
