// tests/stack_use_build.cpp — the build-time half's stack use: deduplicate()
// under each built-in strategy, the writers and the import write at most
// kCallerBudget bytes of the calling thread's stack, and each worker thread
// deduplicate() starts at most kWorkerBudget of its own, however many
// tensors (README "Stack"). Exporters run them on threads they did not size:
// a thread pool's, macOS's secondary threads (512 KiB), musl's (128 KiB).
//
// The calling thread's stack is measured as in tests/stack_use.cpp
// (support/stack_paint.hpp). The workers' are painted too: this program's
// pthread_create gives a thread started without attributes (the library's
// workers; every thread of this test that is not one sets a stack) a
// painted stack of its own, kept until take_workers() reads it. Not built under a
// sanitizer, whose frames are its own and whose runtime interposes
// pthread_create (tests/meson.build).
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "support/ptd_files.hpp"
#include "support/stack_paint.hpp"
#include "wdedup/wdedup.hpp"
#include "wdedup/workload/llama.hpp"

using namespace wdedup;
using namespace wdedup_test;

namespace {

/// What the README promises. Measured here on x86-64 (GCC 12 -O2 / clang
/// 14 -O0): the calling thread 10.9 / 17.0 KiB at most (write_ptd_file /
/// deduplicate() the deepest), a worker 5.1 / 5.9 KiB (eight runs each).
constexpr std::size_t kCallerBudget = 32 * 1024;
constexpr std::size_t kWorkerBudget = 16 * 1024;

/// From 100 tensors to 100,000 the deepest call may grow by this much and
/// no more: the sorts' recursion, a few frames a doubling (the writers grow
/// 1.1 KiB, deduplicate() not at all). A recursion as deep as the tensor
/// count would be megabytes.
constexpr std::size_t kGrowthAllowed = 4 * 1024;

/// A worker that found no task left writes about 0.5 KiB beyond an idle
/// thread (it checks the shared counters and returns); one that compared
/// pairs, several. Deeper than this, a worker did the library's work.
constexpr std::size_t kIdleWorkerAtMost = 1024;

constexpr std::size_t kWorkerStackSize = 1024 * 1024;

std::mutex g_workers_mutex;
std::vector<PaintedStack>* g_worker_stacks = nullptr;  // (never freed: the interposer may outlive main's locals)

std::vector<PaintedStack>& worker_stacks() {
  if (g_worker_stacks == nullptr) g_worker_stacks = new std::vector<PaintedStack>();
  return *g_worker_stacks;
}

/// The most any worker started since the last call wrote of its stack
/// (beyond an idle thread's start-up), and how many there were; forgets them.
struct Workers {
  std::size_t started;
  std::size_t deepest;
};
Workers take_workers() {
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  Workers w{worker_stacks().size(), 0};
  for (const PaintedStack& s : worker_stacks()) w.deepest = std::max(w.deepest, beyond_idle(s.written()));
  worker_stacks().clear();
  return w;
}

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) noexcept {
  using RealCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const RealCreate real = reinterpret_cast<RealCreate>(::dlsym(RTLD_NEXT, "pthread_create"));
  if (real == nullptr) return EAGAIN;
  if (attr != nullptr) return real(thread, attr, start, arg);
  // A library worker: on a painted stack, kept (the library joins it
  // before take_workers() reads it). A failed REQUIRE in here (no memory
  // to map) ends the program: this function is noexcept.
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  worker_stacks().emplace_back(kWorkerStackSize);
  pthread_attr_t painted;
  pthread_attr_init(&painted);
  pthread_attr_setstack(&painted, worker_stacks().back().base(), kWorkerStackSize);
  const int rc = real(thread, &painted, start, arg);
  pthread_attr_destroy(&painted);
  if (rc != 0) worker_stacks().pop_back();  // (no thread: not a worker)
  return rc;
}

namespace {

/// The calling thread's stack `f()` writes (after one call first: a
/// dynamically linked program's first call of each libc function runs the
/// loader's lazy binding on the caller's stack, once per process; README
/// "Stack" gives that apart).
template <class F>
std::size_t caller_stack(F f) {
  f();
  return stack_used(f);
}

/// Whether a program's second method points at the first's bytes or at a
/// copy of its own. Tensors at one address are equal without a look, and
/// only a copy's bytes are compared, on the workers too (the first kind of
/// program gives the workers' comparisons nothing to do).
enum class Copy { Shared, Own };

/// A program of `n` tensors of 64 bytes in one partition, each content
/// twice (tensor 2k and 2k + 1), plus `n` more in a second method equal to
/// the first's: every tensor is in a group of four.
struct Pairs {
  std::vector<std::uint8_t> bytes;
  Program program;
  Pairs(std::size_t n, Copy copy) : bytes(n * 64 * (copy == Copy::Own ? 2 : 1)) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < 64; ++j) bytes[i * 64 + j] = static_cast<std::uint8_t>((i / 2) >> (j % 4 * 8));
    const std::uint8_t* decode_bytes = bytes.data();
    if (copy == Copy::Own) {
      std::memcpy(bytes.data() + n * 64, bytes.data(), n * 64);
      decode_bytes = bytes.data() + n * 64;
    }
    const struct {
      const char* name;
      const std::uint8_t* bytes;
    } methods[] = {{"prefill", bytes.data()}, {"decode", decode_bytes}};
    for (const auto& m : methods) {
      Partition& p = program.add_method(m.name).add_partition();
      for (std::size_t i = 0; i < n; ++i) p.add("t" + std::to_string(i), ByteSpan(m.bytes + i * 64, 64), 16);
    }
  }
};

/// `n` tensors of 4 KiB, distinct, sharing their first and last KiB (the
/// adversarial workload's shape: one size, one fingerprint).
struct SameEnds {
  std::vector<std::uint8_t> bytes;
  Program program;
  explicit SameEnds(std::size_t n) : bytes(n * 4096, 0x5A) {
    Partition& p = program.add_method("forward").add_partition();
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 1024; j < 3072; j += 8) bytes[i * 4096 + j] = static_cast<std::uint8_t>(i + j / 8);
      bytes[i * 4096 + 2048] = static_cast<std::uint8_t>(i >> 8);
      p.add("w" + std::to_string(i), ByteSpan(bytes.data() + i * 4096, 4096));
    }
  }
};

/// The deepest stack a set of calls wrote: the calling thread's, a worker's.
struct Deepest {
  std::size_t caller = 0;
  std::size_t worker = 0;
  void take(const Deepest& d) {
    caller = std::max(caller, d.caller);
    worker = std::max(worker, d.worker);
  }
};

/// deduplicate() under `Policy` on `program` at 1 and 2 threads: the
/// calling thread within kCallerBudget, each worker within kWorkerBudget.
/// At 2 threads a call with work for a second thread (`worth_two`) must
/// have started workers (one a phase).
template <class Policy>
Deepest check_deduplicate(const char* what, const Program& program, bool worth_two) {
  Deepest deepest;
  for (unsigned threads : {1u, 2u}) {
    DedupOptions o;
    o.threads = threads;
    take_workers();
    bool ok = true;
    const std::size_t used = caller_stack([&] {
      Expected<DedupResult> r = deduplicate<Strategy<Policy>>(program, o);
      ok = ok && r.ok();  // (a refused program would measure its refusal)
    });
    const Workers w = take_workers();
    INFO(std::string(what), ", ", std::string(Policy::name), ", ", threads, threads == 1 ? " thread" : " threads",
         ": calling thread ", used, " bytes, ", w.started, " workers, deepest ", w.deepest, " bytes");
    CHECK(ok);
    CHECK(used <= kCallerBudget);
    CHECK(w.deepest <= kWorkerBudget);
    if (threads == 2 && worth_two)
      CHECK(w.started >= 1);
    else
      CHECK(w.started == 0);
    deepest.take(Deepest{used, w.deepest});
  }
  return deepest;
}

/// check_deduplicate under each built-in strategy.
Deepest check_every_strategy(const char* what, const Program& program, bool worth_two) {
  Deepest deepest;
  deepest.take(check_deduplicate<Positional>(what, program, worth_two));
  deepest.take(check_deduplicate<OneBlob>(what, program, worth_two));
  deepest.take(check_deduplicate<Disabled>(what, program, worth_two));
  return deepest;
}

/// The writers and the import of what they wrote: the deepest of them.
std::size_t check_write_and_import(const char* what, const Program& program) {
  Expected<DedupResult> r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  std::vector<std::uint8_t> file;
  const std::size_t serialized = caller_stack([&] {
    Expected<std::vector<std::uint8_t>> bytes = serialize_ptd(r->store, r->functions);
    keep(bytes);
    if (bytes.ok()) file = std::move(*bytes);
  });
  REQUIRE_FALSE(file.empty());
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/stack_use_build.ptd";
  bool wrote = true;
  const std::size_t written = caller_stack([&] { wrote = wrote && write_ptd_file(r->store, r->functions, path.c_str()).ok(); });
  CHECK(wrote);
  CHECK(read_file(path) == file);  // (the same bytes as in memory)
  std::remove(path.c_str());
  BufferSource src(file.data(), file.size());
  Result<NamedDataMap> map = NamedDataMap::open(src);
  REQUIRE(map.ok());
  bool imported_all = true;
  const std::size_t imported = caller_stack([&] {
    Program again;
    imported_all = imported_all && add_ptd_program(again, *map).ok() && again.methods.size() == program.methods.size();
  });
  CHECK(imported_all);
  INFO(std::string(what), ": serialize_ptd ", serialized, " bytes, write_ptd_file ", written, ", add_ptd_program ", imported);
  CHECK(serialized <= kCallerBudget);
  CHECK(written <= kCallerBudget);
  CHECK(imported <= kCallerBudget);
  return std::max({serialized, written, imported});
}

}  // namespace

TEST_CASE("the measure: a worker's painted stack counts a frame of a known size, whole") {
  // A thread started without attributes, as the library starts its workers.
  take_workers();
  pthread_t t;
  auto touch = [](void*) -> void* {
    volatile unsigned char buffer[6000];
    for (std::size_t i = 0; i < sizeof buffer; ++i) buffer[i] = static_cast<unsigned char>(i);
    return nullptr;
  };
  REQUIRE(pthread_create(&t, nullptr, touch, nullptr) == 0);
  REQUIRE(pthread_join(t, nullptr) == 0);
  const Workers w = take_workers();
  CHECK(w.started == 1);
  // (The idle thread taken off ran the measure's own start routine, up to
  // 64 bytes that a worker started directly does not: so a worker's figure
  // may be up to 64 bytes under what it wrote; the frame's bookkeeping, a
  // few over.)
  CHECK(w.deepest >= 6000 - 64);
  CHECK(w.deepest < 6000 + 512);
}

TEST_CASE("deduplicate(): the Llama-shaped programs stay within the stack budgets, workers included") {
  // 2 x 10 MB of tensors: work for a second thread (4 MiB a thread) under
  // every strategy (the store merges equal bytes whatever the strategy,
  // which only groups the blobs).
  for (std::uint32_t partitions : {1u, 3u}) {
    LlamaConfig c = LlamaConfig::tiny();
    c.prefill_partitions = c.decode_partitions = partitions;
    Expected<LlamaWorkload> w = LlamaWorkload::generate(c);
    REQUIRE(w.ok());
    check_every_strategy(partitions == 1 ? "llama tiny 1+1" : "llama tiny 3+3", w->program(), true);
  }
  LlamaConfig c = LlamaConfig::tiny();
  c.prefill_partitions = 3;
  c.decode_partitions = 2;  // (unequal: OneBlob and Disabled only)
  Expected<LlamaWorkload> w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  check_deduplicate<OneBlob>("llama tiny 3+2", w->program(), true);
  check_deduplicate<Disabled>("llama tiny 3+2", w->program(), true);
}

TEST_CASE("deduplicate(): small tensors and same-ended ones stay within the budgets") {
  // Work by the thread rule (bytes and 1.5 KiB a tensor; 4 MiB a thread):
  // 2 x 100 tensors 320 KB, one thread's worth; 2 x 100,000 320 MB and
  // 2,000 of 4 KiB 11 MB, more.
  const Pairs few(100, Copy::Shared), many(100000, Copy::Shared);
  const Deepest at_100 = check_every_strategy("2 x 100 tensors", few.program, false);
  const Deepest at_100k = check_every_strategy("2 x 100,000 tensors", many.program, true);
  INFO("deepest call: ", at_100.caller, " bytes at 2 x 100 tensors, ", at_100k.caller, " at 2 x 100,000");
  CHECK(at_100k.caller <= at_100.caller + kGrowthAllowed);
  // Each method with its own copy: 100,000 pairs of 64 bytes to compare,
  // which the name check hands the worker from its start. Some worker must
  // have done that work, or the worker budget was checked on idle threads.
  const Pairs copies(100000, Copy::Own);
  const Deepest own = check_every_strategy("2 x 100,000 tensors, two copies", copies.program, true);
  INFO("deepest worker with two copies: ", own.worker, " bytes");
  CHECK(own.worker > kIdleWorkerAtMost);
  // Distinct tensors of one size and one fingerprint: every one is hashed
  // whole, under every strategy.
  const SameEnds same(2000);
  check_every_strategy("2,000 same-ended tensors", same.program, true);
}

TEST_CASE("the writers and the import stay within the calling thread's budget") {
  LlamaConfig c = LlamaConfig::tiny();
  c.prefill_partitions = 3;
  c.decode_partitions = 2;
  Expected<LlamaWorkload> w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  check_write_and_import("llama tiny 3+2", w->program());
  const Pairs few(100, Copy::Shared), many(100000, Copy::Shared);
  const std::size_t at_100 = check_write_and_import("2 x 100 tensors", few.program);
  const std::size_t at_100k = check_write_and_import("2 x 100,000 tensors", many.program);
  INFO("deepest call: ", at_100, " bytes at 2 x 100 tensors, ", at_100k, " at 2 x 100,000");
  CHECK(at_100k <= at_100 + kGrowthAllowed);
}
