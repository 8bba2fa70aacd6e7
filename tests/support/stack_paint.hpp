// tests/support/stack_paint.hpp — the stack a call writes, measured on a
// painted stack: tests/stack_use.cpp (the runtime half's calls) and
// tests/stack_use_build.cpp (the build-time half's, and its worker threads').
//
// A stack of caller memory is filled with a byte pattern before a thread
// runs on it; after the join, the bytes no longer holding the pattern, less
// those a thread that does nothing overwrites, are what the call wrote. That
// is the high-water mark a stack check (an RTOS's canary, a guard page) sees.
// Not meaningful under a sanitizer, whose instrumented frames are its own
// (tests/meson.build builds neither test there).
#ifndef WDEDUP_TESTS_SUPPORT_STACK_PAINT_HPP
#define WDEDUP_TESTS_SUPPORT_STACK_PAINT_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <pthread.h>
#include <sys/mman.h>

#include <doctest/doctest.h>

namespace wdedup_test {

constexpr unsigned char kStackPaint = 0xA5;

/// `size` bytes of mmap'd memory (page-aligned, as pthread_attr_setstack
/// needs), every one holding kStackPaint, over a guard page: a thread given
/// a stack of caller memory gets none from the C library, and a call that
/// ran past this one would otherwise write into whatever lies below it
/// (another test stack) and be measured short. Move-only.
class PaintedStack {
 public:
  explicit PaintedStack(std::size_t size) : size_(size) {
    void* mem = ::mmap(nullptr, size + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(mem != MAP_FAILED);
    REQUIRE(::mprotect(mem, kGuard, PROT_NONE) == 0);
    base_ = static_cast<unsigned char*>(mem) + kGuard;
    std::memset(base_, kStackPaint, size_);
  }
  PaintedStack(PaintedStack&& o) noexcept : base_(o.base_), size_(o.size_) { o.base_ = nullptr; }
  PaintedStack& operator=(PaintedStack&&) = delete;
  PaintedStack(const PaintedStack&) = delete;
  ~PaintedStack() {
    if (base_ != nullptr) ::munmap(base_ - kGuard, size_ + kGuard);
  }

  void* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }

  /// Bytes from the lowest one not holding the paint to the top: the stack
  /// grows down, so that is the deepest byte written (a frame may leave some
  /// bytes above it unwritten).
  std::size_t written() const noexcept {
    std::size_t untouched = 0;
    while (untouched < size_ && base_[untouched] == kStackPaint) ++untouched;
    return size_ - untouched;
  }

 private:
  static constexpr std::size_t kGuard = 64 * 1024;  // (a page on every Linux target: 4-64 KiB)
  unsigned char* base_ = nullptr;
  std::size_t size_;
};

/// The stacks the measuring threads run on: room for any call measured
/// (the deepest, deduplicate() built at -O0, writes under 20 KiB).
constexpr std::size_t kPaintedSize = 256 * 1024;

namespace detail_stack {
struct Call {
  void (*fn)(void*);
  void* arg;
};
inline void* run_call(void* p) {
  const Call* c = static_cast<const Call*>(p);
  c->fn(c->arg);
  return nullptr;
}
}  // namespace detail_stack

/// Bytes of a painted stack that `fn(arg)`, run on a thread of its own,
/// left not holding the paint (the thread's start-up included).
inline std::size_t painted_bytes_written(void (*fn)(void*), void* arg) {
  PaintedStack stack(kPaintedSize);
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstack(&attr, stack.base(), stack.size()) == 0);
  detail_stack::Call call{fn, arg};
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attr, detail_stack::run_call, &call) == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  pthread_attr_destroy(&attr);
  return stack.written();
}

/// What a thread that does nothing writes of its stack: its start-up.
inline std::size_t idle_thread_stack() {
  static const std::size_t idle = painted_bytes_written([](void*) {}, nullptr);
  return idle;
}

/// What a thread that wrote `written` bytes of its painted stack wrote
/// beyond a thread that does nothing (its own frames, start-up taken off).
inline std::size_t beyond_idle(std::size_t written) {
  return written > idle_thread_stack() ? written - idle_thread_stack() : 0;
}

/// Stack bytes `f()` writes beyond what a thread that does nothing writes.
template <class F>
std::size_t stack_used(F& f) {
  return beyond_idle(painted_bytes_written([](void* p) { (*static_cast<F*>(p))(); }, &f));
}

/// Keeps a result alive past the optimizer (a call whose result is unused
/// may be dropped: it has no side effects).
inline volatile std::uintptr_t g_stack_sink;
template <class T>
void keep(const T& v) {
  g_stack_sink = g_stack_sink + static_cast<std::uintptr_t>(v.ok());
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_STACK_PAINT_HPP
