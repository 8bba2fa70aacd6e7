// tests/threads.cpp — how many threads deduplicate() starts: as many as the
// program's work is worth (detail::threads_worth_starting), at most
// DedupOptions::threads. Every pthread_create of this program is counted by
// the benchmark harness's counter (benchmarks/thread_counter.cpp, this
// program's one copy of it: it interposes the function, so the build has no
// sanitizer, whose runtimes interpose it themselves).
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

#include "../benchmarks/thread_counter.cpp"
#include "wdedup/bench.hpp"
#include "wdedup/wdedup.hpp"

using namespace wdedup;

namespace {

/// Two methods of `n` tensors of `size` bytes each (every byte equal to its
/// tensor's index), the second method's equal to the first's.
struct Twin {
  std::vector<std::vector<std::uint8_t>> bytes;
  Program program;
  Twin(std::size_t n, std::size_t size) {
    for (std::size_t i = 0; i < 2 * n; ++i) bytes.emplace_back(size, static_cast<std::uint8_t>(i % n));
    for (std::size_t m = 0; m < 2; ++m) {
      Partition& p = program.add_method(m == 0 ? "prefill" : "decode").add_partition();
      for (std::size_t i = 0; i < n; ++i)
        p.add("t" + std::to_string(i), ByteSpan(bytes[m * n + i].data(), size), 64);
    }
  }
};

/// Threads one deduplicate() started, and its report's thread count.
std::pair<int, unsigned> started(const Program& program, unsigned threads) {
  const bool can_count = wbench::threads_started() >= 0;
  REQUIRE_MESSAGE(can_count, "no pthread_create to count (a static build?)");
  DedupOptions o;
  o.threads = threads;
  const long long before = wbench::threads_started();
  Expected<DedupResult> r = deduplicate<Strategy<OneBlob>>(program, o);
  REQUIRE(r.ok());
  return {static_cast<int>(wbench::threads_started() - before), r->report.threads};
}

}  // namespace

TEST_CASE("threads_worth_starting: one thread per 4 MiB of work, at least one, at most those given") {
  const std::uint64_t per = detail::kWorkPerStartedThread;
  REQUIRE(per == 4u << 20);  // (this test is built without WDEDUP_WORK_PER_STARTED_THREAD)
  REQUIRE(detail::kFinishBytesPerTensor == 1536);
  const Twin tiny(10, 1024);  // 20 tensors: 20 * (1536 + 1024) bytes of work
  CHECK(detail::threads_worth_starting(tiny.program, 20, 0) == 1);  // (never 0)
  CHECK(detail::threads_worth_starting(tiny.program, 20, 1) == 1);
  CHECK(detail::threads_worth_starting(tiny.program, 20, 2) == 1);
  CHECK(detail::threads_worth_starting(tiny.program, 20, 1024) == 1);
  // 2 * 2 tensors of 3 MiB: 12 MiB + 4 * 1536 of work, 3 threads' worth.
  const Twin mid(2, 3u << 20);
  CHECK(detail::threads_worth_starting(mid.program, 4, 2) == 2);
  CHECK(detail::threads_worth_starting(mid.program, 4, 3) == 3);
  CHECK(detail::threads_worth_starting(mid.program, 4, 4) == 3);
  CHECK(detail::threads_worth_starting(mid.program, 4, 1024) == 3);
  // The per-tensor share alone: 2 * 2731 empty-ish tensors of 1 byte are
  // 5462 * 1537 = 8,395,094 bytes of work, 2 threads' worth (8 MiB is
  // 8,388,608).
  const Twin many(2731, 1);
  CHECK(detail::threads_worth_starting(many.program, 5462, 64) == 2);
  // A size the checks will refuse (near 2^64) does not wrap the sum.
  Program huge;
  huge.add_method("m").add_partition().add("w", ByteSpan(nullptr, ~std::size_t{0} - 5), 1);
  CHECK(detail::threads_worth_starting(huge, 1, 8) == 8);
}

TEST_CASE("threads_worth_starting: a per-tensor share past the threads given is those threads, never more") {
  // 2 * 4096 tensors of 1 byte: 8192 * 1536 = 12,582,912 bytes of work
  // before any tensor's bytes, 3 threads' worth on its own (12 MiB). Given
  // 2, that share already passes their 8 MiB: 2, with no size read (the
  // work left, 8 MiB less 12 MiB, would wrap). Given 3 it is exactly their
  // 12 MiB: 3. Given 4 or 1024 the bytes count too, 12,591,104: 3.
  const Twin wide(4096, 1);
  CHECK(detail::threads_worth_starting(wide.program, 8192, 2) == 2);
  CHECK(detail::threads_worth_starting(wide.program, 8192, 3) == 3);
  CHECK(detail::threads_worth_starting(wide.program, 8192, 4) == 3);
  CHECK(detail::threads_worth_starting(wide.program, 8192, 1024) == 3);
}

TEST_CASE("a small program starts no thread, however many it is given") {
  // Until 2026-12-01 every call started all of them: 1023 threads for 20
  // tensors of 1 KiB at threads = 1024 (22 ms against 5.5 us on one).
  const Twin tiny(10, 1024);
  for (unsigned threads : {1u, 2u, 64u, 1024u}) {
    CAPTURE(threads);
    // (No structured bindings: clang 14 cannot capture them in CHECK.)
    const std::pair<int, unsigned> s = started(tiny.program, threads);
    CHECK(s.first == 0);
    CHECK(s.second == threads);  // the report gives what the call was given
  }
}

TEST_CASE("a program with work for threads starts some, never more than it was given") {
  const Twin mid(2, 3u << 20);  // 3 threads' worth
  CHECK(started(mid.program, 1).first == 0);
  // Each stage that runs beside the calling thread starts its threads: the
  // name check's comparing threads (started - 1), the store beside the
  // report (1), and one stage of the identity engine (started - 1, its
  // tasks permitting). With 2: 1 + 1 + 1.
  const std::pair<int, unsigned> two = started(mid.program, 2);
  CHECK(two.first == 3);
  CHECK(two.second == 2);
  // Worth 3, with 3 given or 1024: 2 + 1 + 1 (the engine's stage has fewer
  // tasks than threads).
  const std::pair<int, unsigned> three = started(mid.program, 3);
  const std::pair<int, unsigned> many = started(mid.program, 1024);
  CHECK(three.first == 4);
  CHECK(many.first == 4);
  CHECK(three.second == 3);
  CHECK(many.second == 1024);
}

TEST_CASE("the read pass runs on the threads it is given: threads - 1 started, the calling thread the last") {
  // Its shares run on as many threads as deduplicate() is given, or the
  // N-thread baseline is one thread's speed (a mutation test ran the shares
  // one after another and nothing failed).
  const bool can_count = wbench::threads_started() >= 0;
  REQUIRE_MESSAGE(can_count, "no pthread_create to count (a static build?)");
  std::vector<std::uint8_t> a(1 << 20, 1), b(3 << 20, 2);
  const std::vector<ByteSpan> spans{ByteSpan(a.data(), a.size()), ByteSpan(b.data(), b.size())};
  const std::uint64_t want = wdedup::bench::read_pass(spans, 1);
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (unsigned streams : {1u, 2u}) {
      CAPTURE(threads);
      CAPTURE(streams);
      const long long before = wbench::threads_started();
      wbench::reset_threads_at_once();
      CHECK(wdedup::bench::read_pass(spans, threads, streams) == want);
      CHECK(wbench::threads_started() - before == static_cast<long long>(threads) - 1);
      // At once: at most those, at least one where any was started (a
      // share of a few hundred KiB may end before the next thread starts).
      const long long at_once = wbench::threads_at_once();
      CHECK(at_once <= static_cast<long long>(threads) - 1);
      CHECK(at_once >= (threads > 1 ? 1 : 0));
    }
  }
}

TEST_CASE("bench::dedup_threads gives the threads deduplicate() runs on at once, for its baselines") {
  // A user trial (2026-12-02): given 1024 threads, the harness's read pass
  // started 1023 on a 20 MB model where deduplicate() ran on few, and its
  // ratio read 41x. The harness now gives every baseline dedup_threads().
  const Twin tiny(10, 1024), mid(2, 3u << 20), many(2731, 1);
  struct Case {
    const Program* program;
    std::size_t tensors;
  };
  for (const Case& k : {Case{&tiny.program, 20}, Case{&mid.program, 4}, Case{&many.program, 5462}}) {
    for (unsigned threads : {1u, 2u, 3u, 4u, 64u, 1024u}) {
      CAPTURE(k.tensors);
      CAPTURE(threads);
      const unsigned run = wdedup::bench::dedup_threads(*k.program, threads);
      CHECK(run == detail::threads_worth_starting(*k.program, k.tensors, threads));
      DedupOptions o;
      o.threads = threads;
      wbench::reset_threads_at_once();
      const long long before = wbench::threads_started();
      REQUIRE(deduplicate<Strategy<OneBlob>>(*k.program, o).ok());
      // Never more at once than dedup_threads says, and some where it says
      // more than one: at least one started, none where it says one. (How
      // many overlap depends on how long each runs.)
      const long long at_once = wbench::threads_at_once(), started = wbench::threads_started() - before;
      CHECK(at_once <= static_cast<long long>(run) - 1);
      CHECK((at_once >= 1) == (run > 1));
      CHECK((started == 0) == (run == 1));
    }
    // 0: every core, as deduplicate() counts them; past kMaxThreads, kMaxThreads.
    CHECK(wdedup::bench::dedup_threads(*k.program, 0) ==
          detail::threads_worth_starting(*k.program, k.tensors, detail::hardware_threads()));
    CHECK(wdedup::bench::dedup_threads(*k.program, 5000) ==
          detail::threads_worth_starting(*k.program, k.tensors, DedupOptions::kMaxThreads));
  }
  // The three programs' counts at 64 threads, by hand: 1, 3 and 2 (see
  // threads_worth_starting's test above).
  CHECK(wdedup::bench::dedup_threads(tiny.program, 64) == 1);
  CHECK(wdedup::bench::dedup_threads(mid.program, 64) == 3);
  CHECK(wdedup::bench::dedup_threads(many.program, 64) == 2);
}

TEST_CASE("bench::dedup_threads: given more than kMaxThreads, at most kMaxThreads, however much work there is") {
  // deduplicate() runs on at most kMaxThreads; a program with work for more
  // (a tensor said to be 8 GiB: dedup_threads reads its size only) must
  // not make its baselines run on more than that.
  if (sizeof(void*) < 8) return;
  static const std::uint8_t byte = 0;
  Program program;
  program.add_method("m").add_partition().add("big", ByteSpan(&byte, std::size_t{8} << 30), 1);
  CHECK(wdedup::bench::dedup_threads(program, 5000) == DedupOptions::kMaxThreads);
  CHECK(wdedup::bench::dedup_threads(program, DedupOptions::kMaxThreads) == DedupOptions::kMaxThreads);
  CHECK(wdedup::bench::dedup_threads(program, 3) == 3);
}

TEST_CASE("threads_at_once counts from the threads alive at the reset, not those that live on past it") {
  // A thread started before the reset and still running is not the timed
  // call's: it must not count among those the call ran on at once.
  REQUIRE_MESSAGE(wbench::threads_at_once() >= 0, "no pthread_create to count (a static build?)");
  std::atomic<bool> go{false};
  std::thread lingering([&go] {
    while (!go.load()) std::this_thread::yield();
  });
  wbench::reset_threads_at_once();
  CHECK(wbench::threads_at_once() == 0);
  std::thread one([] {});
  one.join();
  CHECK(wbench::threads_at_once() == 1);
  go = true;
  lingering.join();
}

TEST_CASE("monotonic_seconds: a 50 ms sleep reads as 50 ms or more, in seconds") {
  // The report's seconds and the benchmarks' times are differences of
  // these readings: nanoseconds read as microseconds made 50 ms about 50 s
  // (or less than nothing, across a second's turn).
  const double before = detail::monotonic_seconds();
  ::usleep(50000);
  const double slept = detail::monotonic_seconds() - before;
  CHECK(slept >= 0.05);
  CHECK(slept < 5.0);  // (a loaded host may oversleep, not by seconds)
}
