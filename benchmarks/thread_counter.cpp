// benchmarks/thread_counter.cpp — counts the threads the benchmark binary
// starts, so a row can say how many threads its baseline ran on, not assume
// it: an N-thread read pass or SHA-256 reference that quietly ran on one
// thread would flatter every ratio against it. Interposes pthread_create
// (std::thread reaches it too) and forwards to the C library's. Sanitizer
// builds interpose it themselves: there nothing is replaced and the count is
// -1, as it is where the C library's cannot be found.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <new>

#include "harness.hpp"  // WBENCH_COUNTS_ITSELF

#if defined(WBENCH_COUNTS_ITSELF)
namespace {
std::atomic<long long> g_threads{0};
// Threads started here and not yet returned from their start routine, and
// the most of them at once since the last reset: a call that starts one
// thread in each of several phases (deduplicate() does) starts more than it
// runs at once, and what a baseline must match is the latter.
std::atomic<long long> g_alive{0}, g_peak{0}, g_alive_at_reset{0};
using RealCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
RealCreate real_create() {
  static const RealCreate real = reinterpret_cast<RealCreate>(::dlsym(RTLD_NEXT, "pthread_create"));
  return real;
}

void raise_peak(long long alive) {
  long long peak = g_peak.load(std::memory_order_relaxed);
  while (alive > peak && !g_peak.compare_exchange_weak(peak, alive, std::memory_order_relaxed)) {
  }
}

struct Start {
  void* (*start)(void*);
  void* arg;
};

// Counted alive from before the real create (so a thread that has started
// and ended by the time create returns is still seen) until its start
// routine returns. (The library's and the harness's threads return; one
// ending by pthread_exit would stay counted alive.)
void* counted_start(void* p) {
  const Start s = *static_cast<Start*>(p);
  delete static_cast<Start*>(p);
  void* out = s.start(s.arg);
  g_alive.fetch_sub(1, std::memory_order_relaxed);
  return out;
}
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) noexcept {
  const RealCreate real = real_create();
  if (real == nullptr) return EAGAIN;  // (the harness's threads then fall back to fewer; the count says -1)
  Start* s = new (std::nothrow) Start{start, arg};
  if (s == nullptr) return EAGAIN;
  g_threads.fetch_add(1, std::memory_order_relaxed);
  raise_peak(g_alive.fetch_add(1, std::memory_order_relaxed) + 1);
  const int rc = real(thread, attr, counted_start, s);
  if (rc != 0) {
    g_threads.fetch_sub(1, std::memory_order_relaxed);
    g_alive.fetch_sub(1, std::memory_order_relaxed);
    delete s;
  }
  return rc;
}

long long wbench::threads_started() {
  return real_create() != nullptr ? g_threads.load(std::memory_order_relaxed) : -1;
}
// Counted from the threads alive at the reset: one that lives on (or ended
// by pthread_exit, which stays counted) is not the timed call's.
void wbench::reset_threads_at_once() {
  const long long alive = g_alive.load(std::memory_order_relaxed);
  g_alive_at_reset.store(alive, std::memory_order_relaxed);
  g_peak.store(alive, std::memory_order_relaxed);
}
long long wbench::threads_at_once() {
  if (real_create() == nullptr) return -1;
  return g_peak.load(std::memory_order_relaxed) - g_alive_at_reset.load(std::memory_order_relaxed);
}
#else
long long wbench::threads_started() { return -1; }
void wbench::reset_threads_at_once() {}
long long wbench::threads_at_once() { return -1; }
#endif
