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
#include <vector>

#include <pthread.h>
#include <time.h>
#include <unistd.h>

namespace wdedup {
namespace detail {

/// Online cores (at least 1).
inline unsigned hardware_threads() noexcept {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

/// Seconds on a monotonic clock (for durations only).
inline double monotonic_seconds() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <class Fn>
struct WorkerStart {
  const Fn* fn;
  std::size_t index;
};

template <class Fn>
void* worker_main(void* p) {
  const auto* s = static_cast<const WorkerStart<Fn>*>(p);
  (*s->fn)(s->index);
  return nullptr;
}

/// Calls fn(w) for every w in [0, n): w = 0 on the calling thread, the
/// others on threads of their own; returns when all have returned. A thread
/// that cannot be started is skipped, so fn must not rely on every index
/// running: workers should pull their work from a shared counter, and then
/// a missing thread only costs speed.
template <class Fn>
void run_workers(std::size_t n, const Fn& fn) {
  std::vector<WorkerStart<Fn>> starts(n);
  std::vector<pthread_t> ids(n);
  std::vector<char> started(n, 0);
  for (std::size_t w = 1; w < n; ++w) {
    starts[w] = WorkerStart<Fn>{&fn, w};
    started[w] = pthread_create(&ids[w], nullptr, &worker_main<Fn>, &starts[w]) == 0;
  }
  fn(std::size_t{0});
  for (std::size_t w = 1; w < n; ++w)
    if (started[w]) pthread_join(ids[w], nullptr);
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_THREADS_HPP
