// wdedup/detail/thread_budget.hpp — how many of the threads it is given
// deduplicate() starts: as many as its program's work is worth. In a
// header of its own so that bench.hpp gives its baselines the same count
// (bench::dedup_threads) without including deduplicate.hpp.
#ifndef WDEDUP_DETAIL_THREAD_BUDGET_HPP
#define WDEDUP_DETAIL_THREAD_BUDGET_HPP

#include <cstddef>
#include <cstdint>

#include "wdedup/detail/threads.hpp"
#include "wdedup/program.hpp"

namespace wdedup::detail {

/// The tensors of every partition of every method.
template <int = 0>
std::size_t tensor_count(const Program& program) noexcept {
  std::size_t n = 0;
  for (const Method& m : program.methods)
    for (const Partition& p : m.partitions) n += p.tensors.size();
  return n;
}

/// What finish() in deduplicate_impl costs per tensor on one thread while
/// others compare, in bytes a thread compares meanwhile. 100,000 tensors of
/// 4 KiB, 2 threads: finish took 7.3 ms (73 ns a tensor) beside the
/// comparisons; medians of 15 calls, 20.6-20.9 ms at 1536, 20.8-21.4 ms at
/// 1024, 20.7-21.7 ms at 2048, 20.9-21.8 ms at 3072.
constexpr std::uint64_t kFinishBytesPerTensor = 1536;

/// Work below which one more thread costs more to start than it saves, in
/// bytes a thread reads (a tensor counting kFinishBytesPerTensor besides its
/// bytes). Starting and joining a thread took 18-22 us on the Zen 5 EPYC VM
/// (2026-12-01: 20 tensors of 1 KiB took 5.5 us with 1 thread, 18 us with
/// 2, 1.2 ms with 64 and 22 ms with 1024, every thread started); 4 MiB is
/// about 100 us of reading at 40 GB/s, so a start costs at most about a
/// fifth of the work it takes on. WDEDUP_WORK_PER_STARTED_THREAD sets
/// another (at least 1; 1 starts every thread given, for any program): the
/// tests that run small programs on several threads set 1, so that their
/// threads are started (with 4 MiB they all ran on one, a review found).
/// Every file of a program must see the same value (set it on the command
/// line): deduplicate() is inline, and the linker keeps one of its copies.
#ifndef WDEDUP_WORK_PER_STARTED_THREAD
#define WDEDUP_WORK_PER_STARTED_THREAD (std::uint64_t{4} << 20)
#endif
constexpr std::uint64_t kWorkPerStartedThread = WDEDUP_WORK_PER_STARTED_THREAD;
static_assert(kWorkPerStartedThread >= 1 && kWorkPerStartedThread <= UINT64_MAX / kMaxWorkerThreads,
              "WDEDUP_WORK_PER_STARTED_THREAD must be at least 1 and at most (2^64 - 1) / 1024 (kMaxWorkerThreads)");

/// How many of `threads` threads the work of `program` (`tensors` tensors)
/// is worth starting: one per kWorkPerStartedThread, at least 1 (also for
/// `threads` 0), at most `threads` (at most kMaxWorkerThreads). Reads the
/// tensors' sizes only until there is work enough for all of them, so a
/// big program pays for a few tensors. Starting fewer changes no result
/// (they are identical for every thread count).
inline unsigned threads_worth_starting(const Program& program, std::size_t tensors, unsigned threads) noexcept {
  if (threads < 2) return 1;
  const std::uint64_t enough = std::uint64_t{threads} * kWorkPerStartedThread;
  std::uint64_t work = std::uint64_t{tensors} * kFinishBytesPerTensor;
  if (work >= enough) return threads;
  for (const Method& m : program.methods)
    for (const Partition& p : m.partitions)
      for (const Tensor& t : p.tensors) {
        // (Compared, not added first: a size the checks will refuse may be
        // near 2^64. Below `enough` after every step.)
        if (t.bytes.size() >= enough - work) return threads;
        work += t.bytes.size();
      }
  const std::uint64_t worth = work / kWorkPerStartedThread;
  return worth < 1 ? 1u : static_cast<unsigned>(worth);
}

}  // namespace wdedup::detail

#endif  // WDEDUP_DETAIL_THREAD_BUDGET_HPP
