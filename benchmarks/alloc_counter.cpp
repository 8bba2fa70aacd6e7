// benchmarks/alloc_counter.cpp — counts every heap allocation the benchmark
// binary makes, so "open + 1M lookups allocate nothing" is measured, not
// assumed. Replaces the global operator new family and, on glibc, malloc and
// friends (forwarding to glibc's __libc_* entry points). Sanitizer builds
// bring their own allocator: there nothing is replaced and the count is -1.
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "harness.hpp"  // WBENCH_COUNTS_ITSELF

namespace {
std::atomic<std::uint64_t> g_allocations{0};
}

long long wbench::allocation_count() {
#if defined(WBENCH_COUNTS_ITSELF)
  return static_cast<long long>(g_allocations.load(std::memory_order_relaxed));
#else
  return -1;
#endif
}

#if defined(WBENCH_COUNTS_ITSELF)

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* __libc_valloc(std::size_t);
void* __libc_pvalloc(std::size_t);
void __libc_free(void*);

void* malloc(std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t m) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(n, m);
}
void* realloc(void* p, std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void free(void* p) noexcept { __libc_free(p); }
void* memalign(std::size_t a, std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(a, n);
}
void* aligned_alloc(std::size_t a, std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(a, n);
}
void* valloc(std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_valloc(n);
}
void* pvalloc(std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_pvalloc(n);
}
int posix_memalign(void** out, std::size_t a, std::size_t n) noexcept {
  if (a < sizeof(void*) || (a & (a - 1)) != 0) return EINVAL;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"

namespace {
// As the standard operator new: while `attempt` finds no memory, the
// new_handler, if one is set, gets its chance; then bad_alloc is thrown.
// main() catches it, reports the group that ran out and keeps the rows so
// far (an abort lost them all).
template <class Attempt>
void* allocate_or_throw(Attempt attempt) {
  for (;;) {
    if (void* p = attempt()) return p;
    const std::new_handler h = std::get_new_handler();
    if (h == nullptr) throw std::bad_alloc();
    h();
  }
}
void* counted_new(std::size_t n) {
  return allocate_or_throw([n] { return malloc(n == 0 ? 1 : n); });
}
void* counted_new_aligned(std::size_t n, std::align_val_t a) {
  std::size_t al = static_cast<std::size_t>(a);
  if (al < sizeof(void*)) al = sizeof(void*);
  return allocate_or_throw([n, al]() -> void* {
    void* p = nullptr;
    return posix_memalign(&p, al, n == 0 ? 1 : n) == 0 ? p : nullptr;
  });
}
}  // namespace

void* operator new(std::size_t n) { return counted_new(n); }
void* operator new[](std::size_t n) { return counted_new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return malloc(n == 0 ? 1 : n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return malloc(n == 0 ? 1 : n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_new_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_new_aligned(n, a); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  void* p = nullptr;
  std::size_t al = static_cast<std::size_t>(a);
  return posix_memalign(&p, al < sizeof(void*) ? sizeof(void*) : al, n == 0 ? 1 : n) == 0 ? p : nullptr;
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return operator new(n, a, t);
}
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, std::size_t) noexcept { free(p); }
void operator delete[](void* p, std::size_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }

#endif  // WBENCH_COUNTS_ITSELF
