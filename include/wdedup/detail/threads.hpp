// wdedup/detail/threads.hpp — the little of threads and clocks the
// build-time half needs: start workers and join them, count the cores, read
// a monotonic clock. Build-time half (per-call scratch: detail/arena.hpp).
//
// Why not <thread>, <chrono> and <memory>: together they add about 0.3 s to
// every translation unit that includes wdedup (they drag in <system_error>,
// <tuple>, <functional> pieces, ratio arithmetic). We need none of that:
// POSIX threads and clock_gettime do the job in a few lines, and the
// library already relies on POSIX (mmap, fsync, rename).
#ifndef WDEDUP_DETAIL_THREADS_HPP
#define WDEDUP_DETAIL_THREADS_HPP

#include <cstddef>
#include <exception>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

namespace wdedup {
namespace detail {

/// The most threads a call starts (DedupOptions::kMaxThreads: an explicit
/// count past it is refused, and "every core" stops there).
constexpr unsigned kMaxWorkerThreads = 1024;

/// "Every core": the cores this thread may run on (its affinity mask, which
/// taskset, a cpuset or a container's CPU list sets), or the online cores
/// where no mask can be read (other systems; a mask past 1024 CPUs); at
/// least 1, at most kMaxWorkerThreads. Counting the online cores alone
/// started 2 threads under `taskset -c 0` and, on a host of 4096 cores,
/// 4096: past the count whose results are promised identical. (A CPU quota,
/// cgroup cpu.max, is time, not cores: it is not counted.)
inline unsigned hardware_threads() noexcept {
  long n = 0;
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
  if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0) return 1u;
  return n > long{kMaxWorkerThreads} ? kMaxWorkerThreads : static_cast<unsigned>(n);
}

/// Seconds on a monotonic clock (for durations only).
inline double monotonic_seconds() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define WDEDUP_DETAIL_EXCEPTIONS 1
#else
#define WDEDUP_DETAIL_EXCEPTIONS 0
#endif

/// Calls f(); if it throws, calls undo() and rethrows. Without exceptions,
/// just f(). For a thread that must leave shared state in order for the
/// others (who may be waiting on it) when it fails, e.g. out of memory.
template <class F, class Undo>
void call_or_undo(F&& f, Undo&& undo) {
#if WDEDUP_DETAIL_EXCEPTIONS
  try {
    f();
  } catch (...) {
    undo();
    throw;
  }
#else
  (void)undo;
  f();
#endif
}

template <class Fn>
struct WorkerStart {
  const Fn* fn;
  std::size_t index;
#if WDEDUP_DETAIL_EXCEPTIONS
  std::exception_ptr error;  ///< what fn threw on this thread, if anything
#endif
};

template <class Fn>
void* worker_main(void* p) {
  auto* s = static_cast<WorkerStart<Fn>*>(p);
#if WDEDUP_DETAIL_EXCEPTIONS
  // An exception must not leave a thread's start routine (std::terminate):
  // it is carried to the calling thread, which rethrows it after the join.
  try {
    (*s->fn)(s->index);
  } catch (...) {
    s->error = std::current_exception();
  }
#else
  (*s->fn)(s->index);
#endif
  return nullptr;
}

/// Calls fn(w) for every w in [0, n): w = 0 on the calling thread, the
/// others on threads of their own; returns when all have returned. A thread
/// that cannot be started is skipped, so fn must not rely on every index
/// running: workers should pull their work from a shared counter, and then
/// a missing thread only costs speed.
///
/// If fn throws (out of memory), every thread is still joined before the
/// exception leaves: the calling thread's, else the lowest index's. The
/// others run on until they return, so no thread may wait forever for one
/// that threw: what a thread others wait on must be handed back when it
/// throws (call_or_undo).
template <class Fn>
void run_workers(std::size_t n, const Fn& fn) {
  std::vector<WorkerStart<Fn>> starts(n);
  std::vector<pthread_t> ids(n);
  std::vector<char> started(n, 0);
  for (std::size_t w = 1; w < n; ++w) {
    starts[w].fn = &fn;
    starts[w].index = w;
    started[w] = pthread_create(&ids[w], nullptr, &worker_main<Fn>, &starts[w]) == 0;
  }
#if WDEDUP_DETAIL_EXCEPTIONS
  std::exception_ptr error;
  try {
    fn(std::size_t{0});
  } catch (...) {
    error = std::current_exception();
  }
#else
  fn(std::size_t{0});
#endif
  for (std::size_t w = 1; w < n; ++w)
    if (started[w]) pthread_join(ids[w], nullptr);
#if WDEDUP_DETAIL_EXCEPTIONS
  for (std::size_t w = 1; w < n && !error; ++w) error = starts[w].error;
  if (error) std::rethrow_exception(error);
#endif
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_THREADS_HPP
