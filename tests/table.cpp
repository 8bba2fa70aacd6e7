// Tests for wdedup/table.hpp and detail/huge_pages.hpp: Table<T>, the vector
// of the build-time half's big outputs. Blocks of 1 MiB or more are huge-page
// mappings of their own (so their data sits at a 2 MiB boundary), smaller
// ones come from operator new; either way a Table behaves as a std::vector.
// Freed mappings are kept for reuse up to a limit (the table cache).
#include "wdedup/table.hpp"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/table_cache.hpp"

using wdedup::Table;
using wdedup::detail::BulkAllocator;
using wdedup::detail::kHugePage;

namespace {
bool huge_aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kHugePage == 0; }
constexpr std::size_t kBigCount = (std::size_t{1} << 20) / sizeof(std::uint64_t);  // exactly 1 MiB of uint64
}  // namespace

TEST_CASE("Table: a block of 1 MiB or more is its own mapping at a huge-page boundary") {
  static_assert(BulkAllocator<char>::kBulkMin == std::size_t{1} << 20);
  Table<std::uint64_t> t(kBigCount, 7);
  CHECK(huge_aligned(t.data()));
  CHECK(t.size() == kBigCount);
  CHECK(t.front() == 7);
  CHECK(t.back() == 7);
  // A 3 MiB block spans two huge pages; its last element is writable.
  Table<char> big(std::size_t{3} << 20, 'x');
  CHECK(huge_aligned(big.data()));
  big.back() = 'y';
  CHECK(big[(std::size_t{3} << 20) - 2] == 'x');
  CHECK(big.back() == 'y');
}

TEST_CASE("Table: growth from a heap block to a mapping keeps every element; a small copy keeps its part") {
  Table<std::uint64_t> t;
  t.reserve(16);  // 128 bytes: operator new
  for (std::uint64_t i = 0; i < kBigCount + 1; ++i) t.push_back(i * 3);
  CHECK(huge_aligned(t.data()));  // past 1 MiB the block is a mapping
  CHECK(t.size() == kBigCount + 1);
  for (std::size_t i = 0; i < t.size(); ++i) REQUIRE(t[i] == std::uint64_t{i} * 3);
  // Back under 1 MiB: a copy of the first ten (not shrink_to_fit, which is
  // only a request, and a no-op in builds without exceptions).
  const Table<std::uint64_t> head(t.begin(), t.begin() + 10);
  CHECK(head.size() == 10);
  CHECK(head[9] == 27);
  t.clear();
  CHECK(t.empty());
}

TEST_CASE("Table: copies, moves and swaps like std::vector (all allocators are equal)") {
  CHECK(BulkAllocator<int>() == BulkAllocator<int>());
  CHECK_FALSE(BulkAllocator<int>() != BulkAllocator<char>());
  Table<std::string> small = {"a", "bb", "a string too long for the small-string buffer"};
  Table<std::uint64_t> big(kBigCount, 5);
  big[123] = 9;

  Table<std::uint64_t> copy = big;  // a second mapping
  CHECK(copy.data() != big.data());
  CHECK(huge_aligned(copy.data()));
  CHECK(copy[123] == 9);
  copy[123] = 10;
  CHECK(big[123] == 9);

  const std::uint64_t* before = big.data();
  Table<std::uint64_t> moved = std::move(big);  // the mapping changes hands
  CHECK(moved.data() == before);
  CHECK(moved[123] == 9);

  Table<std::uint64_t> other(3, 1);
  other.swap(moved);
  CHECK(other.data() == before);
  CHECK(moved.size() == 3);

  Table<std::string> small_copy = small;
  CHECK(small_copy[2] == "a string too long for the small-string buffer");
  CHECK(small_copy == small);
}

TEST_CASE("a fresh mapping keeps its block and unmaps the rest of the huge page it over-mapped") {
  // map_fresh_huge_pages maps one huge page more than asked and trims it:
  // what followed the aligned block was a mapping of its own, left behind
  // (2 MiB less a bit per table, and never reused) without the trim.
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  for (const std::size_t size : {kHugePage, 3 * kHugePage}) {
    CAPTURE(size);
    void* const p = wdedup::detail::map_fresh_huge_pages(size);
    REQUIRE(p != nullptr);
    CHECK(huge_aligned(p));
    unsigned char resident = 0;
    CHECK(::mincore(static_cast<char*>(p) + size - page, page, &resident) == 0);  // the block's last page
    errno = 0;
    CHECK(::mincore(static_cast<char*>(p) + size, page, &resident) == -1);  // the next one: unmapped
    CHECK(errno == ENOMEM);
    ::munmap(p, size);
  }
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
TEST_CASE("a fresh mapping is advised to use huge pages: its VmFlags in /proc/self/smaps say hg") {
  // The advice is what the mapping is for (without it, under the kernel's
  // default "madvise" setting, a table is faulted in 4 KiB pages); nothing
  // else shows that it was given.
  if (::access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) return;  // no THP: nothing to advise
  void* const p = wdedup::detail::map_fresh_huge_pages(kHugePage);
  REQUIRE(p != nullptr);
  const std::uint64_t at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  REQUIRE(smaps.is_open());
  std::string line, flags;
  bool in = false, found = false;
  while (std::getline(smaps, line)) {
    const std::size_t dash = line.find('-'), space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find_first_not_of("0123456789abcdef") == dash) {
      const std::uint64_t start = std::stoull(line.substr(0, dash), nullptr, 16);
      const std::uint64_t end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      in = start <= at && at < end;
      found = found || in;
    } else if (in && line.rfind("VmFlags:", 0) == 0) {
      flags = line + " ";
    }
  }
  ::munmap(p, kHugePage);
  REQUIRE(found);
  CAPTURE(flags);
  CHECK(flags.find(" hg ") != std::string::npos);
}
#endif

#if defined(__cpp_exceptions)
TEST_CASE("BulkAllocator: a count whose size would wrap, or whose mapping fails, is out of memory (std::bad_alloc)") {
  // 2^61 eight-byte elements are 2^64 bytes: 0 once wrapped, which went to
  // operator new as a block of no bytes. Just past kMaxMapped, no wrap: the
  // same refusal.
  BulkAllocator<std::uint64_t> alloc;
  CHECK_THROWS_AS(alloc.allocate(std::size_t{1} << (sizeof(std::size_t) * 8 - 3)), std::bad_alloc);
  CHECK_THROWS_AS(alloc.allocate(wdedup::detail::kMaxMapped / 8 + 1), std::bad_alloc);
  // At kMaxMapped the count is not refused, and no system maps that much:
  // the failed mapping is out of memory too, never a null block.
  CHECK_THROWS_AS(alloc.allocate(wdedup::detail::kMaxMapped / 8), std::bad_alloc);
}
#endif

// ---- the table cache -----------------------------------------------------------

using wdedup_test::FreshCache;
using wdedup_test::kMiB;

TEST_CASE("table cache: a freed block is kept and handed to the next table that fits") {
  FreshCache fresh;
  CHECK(wdedup::table_cache_limit() == 64 * kMiB);
  CHECK(wdedup::table_cache_bytes() == 0);
  const char* first = nullptr;
  {
    Table<char> a(4 * kMiB, 'a');
    first = a.data();
    CHECK(wdedup::table_cache_bytes() == 0);
  }
  CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
  {
    // Same size: the same block, filled by the vector as any new one.
    Table<char> b(4 * kMiB, 'b');
    CHECK(b.data() == first);
    CHECK(b[0] == 'b');
    CHECK(b[4 * kMiB - 1] == 'b');
    CHECK(wdedup::table_cache_bytes() == 0);
  }
  CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
  {
    // Smaller: the front of the block; the rest stays cached and goes to
    // the next one.
    Table<char> c(2 * kMiB, 'c');
    CHECK(c.data() == first);
    CHECK(wdedup::table_cache_bytes() == 2 * kMiB);
    Table<char> d(2 * kMiB, 'd');
    CHECK(d.data() == first + 2 * kMiB);
    CHECK(wdedup::table_cache_bytes() == 0);
    CHECK(c[2 * kMiB - 1] == 'c');
    CHECK(d[0] == 'd');
  }
  // Both halves came back and merged: one 4 MiB block again.
  CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
  {
    Table<char> e(4 * kMiB, 'e');
    CHECK(e.data() == first);
  }
  {
    // Bigger than anything cached: a fresh mapping; the cache is untouched.
    Table<char> f(6 * kMiB, 'f');
    CHECK(f.data() != first);
    CHECK(huge_aligned(f.data()));
    CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
  }
  CHECK(wdedup::table_cache_bytes() == 10 * kMiB);
  wdedup::release_table_cache();
  CHECK(wdedup::table_cache_bytes() == 0);
  CHECK(wdedup::table_cache_limit() == 64 * kMiB);
}

TEST_CASE("table cache: the limit bounds what is kept; 0 keeps nothing") {
  FreshCache fresh;
  wdedup::set_table_cache_limit(6 * kMiB);
  CHECK(wdedup::table_cache_limit() == 6 * kMiB);
  {
    Table<char> a(4 * kMiB, 'a');
    Table<char> b(4 * kMiB, 'b');
  }
  // b went first (4 MiB kept), then a would have made 8 MiB: unmapped.
  CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
  wdedup::set_table_cache_limit(0);  // also unmaps what is kept
  CHECK(wdedup::table_cache_bytes() == 0);
  { Table<char> c(2 * kMiB, 'c'); }
  CHECK(wdedup::table_cache_bytes() == 0);
  // Small tables never involve the cache.
  wdedup::set_table_cache_limit(64 * kMiB);
  { Table<char> small(kMiB - 1, 's'); }
  CHECK(wdedup::table_cache_bytes() == 0);
}

#ifndef WDEDUP_POISON_REUSED_MEMORY
#error "the tests build with -DWDEDUP_POISON_REUSED_MEMORY (tests/meson.build)"
#endif
TEST_CASE("table cache: setting any limit, a higher one too, unmaps what is kept; the next blocks are kept") {
  // README: set_table_cache_limit unmaps what is kept now whatever the new
  // limit, so a caller raises it before the calls whose blocks it keeps.
  FreshCache fresh;
  { Table<char> a(4 * kMiB, 'a'); }
  CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
  wdedup::set_table_cache_limit(128 * kMiB);
  CHECK(wdedup::table_cache_limit() == 128 * kMiB);
  CHECK(wdedup::table_cache_bytes() == 0);
  { Table<char> b(2 * kMiB, 'b'); }
  CHECK(wdedup::table_cache_bytes() == 2 * kMiB);
  wdedup::set_table_cache_limit(128 * kMiB);  // the same limit again: unmapped all the same
  CHECK(wdedup::table_cache_bytes() == 0);
}

TEST_CASE("table cache: in the tests' builds a reused block is filled with 0xA5, never stale or zero") {
  FreshCache fresh;
  BulkAllocator<unsigned char> alloc;
  unsigned char* p = alloc.allocate(2 * kMiB);
  for (std::size_t i = 0; i < 2 * kMiB; i += 4096) p[i] = 0;
  alloc.deallocate(p, 2 * kMiB);
  unsigned char* q = alloc.allocate(2 * kMiB);
  REQUIRE(q == p);
  bool all = true;
  for (std::size_t i = 0; i < 2 * kMiB; i += 4096) all = all && q[i] == 0xA5 && q[i + 4095] == 0xA5;
  CHECK(all);
  alloc.deallocate(q, 2 * kMiB);
}

TEST_CASE("table cache: threads taking and giving blocks at once never share one") {
  FreshCache fresh;
  constexpr unsigned kThreads = 4, kRounds = 40;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < kThreads; ++t)
    pool.emplace_back([t, &bad] {
      for (unsigned r = 0; r < kRounds; ++r) {
        // 1, 2, 3 or 4 MiB of uint32: sizes that split and merge blocks.
        const std::size_t n = ((t + r) % 4 + 1) * kMiB / sizeof(std::uint32_t);
        Table<std::uint32_t> v(n, t * 1000 + r);
        std::this_thread::yield();
        for (std::size_t i = 0; i < n; i += 1024) bad[t] += v[i] != t * 1000 + r;
        bad[t] += v[n - 1] != t * 1000 + r;
      }
    });
  for (std::thread& th : pool) th.join();
  for (unsigned t = 0; t < kThreads; ++t) CHECK(bad[t] == 0);
  CHECK(wdedup::table_cache_bytes() <= 64 * kMiB);
  CHECK(wdedup::table_cache_bytes() % kHugePage == 0);
}

TEST_CASE("table cache: a block that fills the gap between two cached ones joins both into one") {
  FreshCache fresh;
  const char* first = nullptr;
  { first = Table<char>(8 * kMiB, 'x').data(); }
  REQUIRE(wdedup::table_cache_bytes() == 8 * kMiB);
  {
    auto a = std::make_unique<Table<char>>(2 * kMiB, 'a');
    auto b = std::make_unique<Table<char>>(2 * kMiB, 'b');
    REQUIRE(a->data() == first);
    REQUIRE(b->data() == first + 2 * kMiB);
    CHECK(wdedup::table_cache_bytes() == 4 * kMiB);  // [4, 8) MiB
    a.reset();                                        // [0, 2) and [4, 8): two blocks
    CHECK(wdedup::table_cache_bytes() == 6 * kMiB);
    b.reset();  // fills [2, 4): one block again (it joined only [4, 8) before)
    CHECK(wdedup::table_cache_bytes() == 8 * kMiB);
  }
  {
    // So a table of all 8 MiB is that block, not a fresh mapping beside it.
    Table<char> whole(8 * kMiB, 'w');
    CHECK(whole.data() == first);
    CHECK(wdedup::table_cache_bytes() == 0);
  }
  CHECK(wdedup::table_cache_bytes() == 8 * kMiB);
}

TEST_CASE("table cache: a block is taken best-fit, from the smallest cached block that holds it") {
  // Two cached blocks, 2 MiB at `first` and 4 MiB at first + 4 MiB, kept
  // apart by a table that stays: a 2 MiB table takes the 2 MiB block whole
  // (not the front of the 4 MiB one), and a 4 MiB table then takes the
  // other, both without a fresh mapping. Freed in either order, so the
  // smaller block is the first slot's once and the last's once (taking the
  // last block that holds the table passed with the smaller one last).
  for (const bool small_first : {false, true}) {
    CAPTURE(small_first);
    FreshCache fresh;
    const char* first = nullptr;
    { first = Table<char>(8 * kMiB, 'x').data(); }
    REQUIRE(wdedup::table_cache_bytes() == 8 * kMiB);
    auto a = std::make_unique<Table<char>>(2 * kMiB, 'a');
    const Table<char> between(2 * kMiB, 's');
    auto b = std::make_unique<Table<char>>(4 * kMiB, 'b');
    REQUIRE(a->data() == first);
    REQUIRE(between.data() == first + 2 * kMiB);
    REQUIRE(b->data() == first + 4 * kMiB);
    if (small_first) a.reset();
    b.reset();
    a.reset();
    REQUIRE(wdedup::table_cache_bytes() == 6 * kMiB);
    Table<char> small(2 * kMiB, 'c');
    CHECK(small.data() == first);
    CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
    Table<char> big(4 * kMiB, 'd');
    CHECK(big.data() == first + 4 * kMiB);
    CHECK(wdedup::table_cache_bytes() == 0);
  }
}

namespace {
/// Whether the page holding `p` is mapped (mincore fails with ENOMEM where not).
bool page_mapped(const void* p) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  unsigned char resident = 0;
  errno = 0;
  const int r = ::mincore(reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1)), 1, &resident);
  CHECK((r == 0 || errno == ENOMEM));
  return r == 0;
}
}  // namespace

TEST_CASE("table cache: a block it does not keep is unmapped, and so is every kept block it lets go") {
  // Past the limit a freed block is unmapped, not left mapped and
  // forgotten; release_table_cache unmaps each kept block, the last slot's
  // too (the blocks at `first` and first + 4 MiB, kept apart by a table
  // that stays).
  FreshCache fresh;
  const char* first = nullptr;
  { first = Table<char>(8 * kMiB, 'x').data(); }
  auto a = std::make_unique<Table<char>>(2 * kMiB, 'a');
  const Table<char> between(2 * kMiB, 's');
  auto b = std::make_unique<Table<char>>(2 * kMiB, 'b');
  REQUIRE(a->data() == first);
  REQUIRE(b->data() == first + 4 * kMiB);
  wdedup::set_table_cache_limit(4 * kMiB);
  a.reset();
  b.reset();
  REQUIRE(wdedup::table_cache_bytes() == 4 * kMiB);
  CHECK(page_mapped(first));
  CHECK(page_mapped(first + 4 * kMiB));
  wdedup::release_table_cache();
  CHECK(wdedup::table_cache_bytes() == 0);
  CHECK_FALSE(page_mapped(first));
  CHECK_FALSE(page_mapped(first + 4 * kMiB + 2 * kMiB - 1));
  CHECK(page_mapped(between.data()));
  // Over the limit (0): unmapped as it is freed.
  wdedup::set_table_cache_limit(0);
  const char* gone = nullptr;
  { gone = Table<char>(2 * kMiB, 'g').data(); }
  CHECK(wdedup::table_cache_bytes() == 0);
  CHECK_FALSE(page_mapped(gone));
}

TEST_CASE("table cache: a block that brings the cache exactly to its limit is kept") {
  FreshCache fresh;
  wdedup::set_table_cache_limit(4 * kMiB);
  { Table<char> a(4 * kMiB, 'a'); }
  CHECK(wdedup::table_cache_bytes() == 4 * kMiB);  // 4 MiB of a 4 MiB limit: kept
  { Table<char> b(2 * kMiB, 'b'); }  // takes 2 MiB of it and gives them back
  CHECK(wdedup::table_cache_bytes() == 4 * kMiB);
  wdedup::set_table_cache_limit(4 * kMiB - 1);
  { Table<char> c(4 * kMiB, 'c'); }  // one byte over: unmapped
  CHECK(wdedup::table_cache_bytes() == 0);
}

TEST_CASE("table cache: at most kSlots (16) separate blocks are kept; a 17th is unmapped") {
  // 34 blocks of 2 MiB cut from one 68 MiB block, so that they sit side by
  // side; every other one given back: 17 blocks, no two adjacent. Sixteen
  // fill the slots, the seventeenth (no cached neighbour to merge with) is
  // unmapped, not written past the slots.
  static_assert(wdedup::detail::MappingCache::kSlots == 16);
  FreshCache fresh;
  wdedup::set_table_cache_limit(128 * kMiB);
  constexpr std::size_t kBlocks = 34, kBlock = 2 * kMiB;
  const unsigned char* first = nullptr;
  { first = Table<unsigned char>(kBlocks * kBlock, 'x').data(); }
  REQUIRE(wdedup::table_cache_bytes() == kBlocks * kBlock);
  BulkAllocator<unsigned char> alloc;
  std::vector<unsigned char*> blocks;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(alloc.allocate(kBlock));
    REQUIRE(blocks.back() == first + i * kBlock);
  }
  REQUIRE(wdedup::table_cache_bytes() == 0);
  for (std::size_t i = 0; i < kBlocks; i += 2) alloc.deallocate(blocks[i], kBlock);
  CHECK(wdedup::table_cache_bytes() == 16 * kBlock);
  // The odd ones join their cached neighbours: every slot's block grows,
  // none is added, and the last odd one joins the block it follows.
  for (std::size_t i = 1; i < kBlocks; i += 2) alloc.deallocate(blocks[i], kBlock);
  CHECK(wdedup::table_cache_bytes() == 33 * kBlock);
}

// ThreadSanitizer intercepts fork() with locks of its own; what this tests is
// the cache's lock, in the builds without it.
#if defined(__SANITIZE_THREAD__)
#define WDEDUP_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WDEDUP_TEST_UNDER_TSAN 1
#endif
#endif
#ifndef WDEDUP_TEST_UNDER_TSAN
TEST_CASE("table cache: a child forked while another thread takes and gives blocks can make tables") {
  // Before the cache's fork handlers, a child forked while the other thread
  // held the cache's lock waited on it forever (154 children of 200 in a
  // review helper's driver, with this loop).
  FreshCache fresh;
  std::atomic<bool> stop{false};
  std::atomic<unsigned> rounds{0};
  std::thread churn([&stop, &rounds] {
    // The cache's own calls, back to back (map_huge_pages would fill each
    // block in the tests' builds, mostly outside the lock).
    auto& cache = wdedup::detail::mapping_cache();
    void* p = wdedup::detail::map_fresh_huge_pages(kHugePage);
    while (p != nullptr && !stop.load()) {
      cache.give(p, kHugePage);
      p = cache.take(kHugePage);
      rounds.fetch_add(1);
    }
    if (p != nullptr) cache.give(p, kHugePage);
  });
  while (rounds.load() < 1000) std::this_thread::yield();  // forks while it runs
  constexpr int kChildren = 60;
  int fine = 0, hung = 0;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::alarm(5);  // a child stuck on the lock dies of SIGALRM (one that is not takes microseconds)
      Table<char> t(2 * kMiB, 'c');
      ::_exit(t[2 * kMiB - 1] == 'c' ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    fine += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    hung += WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
  }
  stop.store(true);
  churn.join();
  CHECK(hung == 0);
  CHECK(fine == kChildren);
}
#endif
