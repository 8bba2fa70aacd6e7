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

#include "harness.hpp"  // WBENCH_COUNTS_ITSELF

#if defined(WBENCH_COUNTS_ITSELF)
namespace {
std::atomic<long long> g_threads{0};
using RealCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
RealCreate real_create() {
  static const RealCreate real = reinterpret_cast<RealCreate>(::dlsym(RTLD_NEXT, "pthread_create"));
  return real;
}
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) noexcept {
  const RealCreate real = real_create();
  if (real == nullptr) return EAGAIN;  // (the harness's threads then fall back to fewer; the count says -1)
  g_threads.fetch_add(1, std::memory_order_relaxed);
  return real(thread, attr, start, arg);
}

long long wbench::threads_started() {
  return real_create() != nullptr ? g_threads.load(std::memory_order_relaxed) : -1;
}
#else
long long wbench::threads_started() { return -1; }
#endif
