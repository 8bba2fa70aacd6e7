// wdedup/detail/huge_pages.hpp — memory for the build-time half's big
// tables, in transparent huge pages. Build-time half.
//
// Why: deduplicate() fills tens of megabytes of tables per 100,000 tensors,
// all of it fresh memory on every call. A first-touch fault of a 4 KiB page
// costs microseconds on virtualised hosts; measured on this project's 2-core
// VM, first-touching 32 MB took 82 ms in 4 KiB pages, 13 ms when the same
// pages were populated in one madvise call, and 1.5 ms in 2 MiB huge pages.
// malloc never gives huge pages to a table: its big blocks are mappings at
// 4 KiB boundaries, so at best the 2 MiB-aligned middle of a table can use
// them (glibc's own glibc.malloc.hugetlb tunable exists for this reason,
// but it is the whole process's setting, not a library's to change).
// Freed blocks are kept for the next call, up to a limit (MappingCache).
#ifndef WDEDUP_DETAIL_HUGE_PAGES_HPP
#define WDEDUP_DETAIL_HUGE_PAGES_HPP

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <pthread.h>
#include <sys/mman.h>

namespace wdedup {
namespace detail {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// A fresh mapping of `size` bytes (a multiple of kHugePage) at a kHugePage
/// boundary, advised to use huge pages, or nullptr if the mapping fails.
/// Over-maps by one huge page and trims the ends. Zero-filled.
inline void* map_fresh_huge_pages(std::size_t size) noexcept {
  void* raw = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (at + kHugePage - 1) & ~std::uintptr_t{kHugePage - 1};
  if (aligned > at) ::munmap(raw, aligned - at);
  const std::uintptr_t end = at + size + kHugePage;
  if (end > aligned + size) ::munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  ::madvise(p, size, MADV_HUGEPAGE);  // advice only: without THP, 4 KiB pages
#endif
  return p;
}

/// Freed huge-page blocks kept for the next big table instead of unmapped.
///
/// Why: deduplicate() on 100,000 tensors maps ~36 MB of tables and scratch
/// and frees them when its result goes. Mapping that again on the next call
/// costs the mmap/munmap calls, a fault and a kernel zeroing per 2 MiB page,
/// and on hosts that take freed guest memory back (this project's VM runs
/// with free page reporting) a host fault per page as well. One call gains
/// too: the identity engine's scratch, freed before the outputs are built,
/// becomes their memory. Measured on the 100k small-tensor workload at one
/// thread: a single call in a fresh process, 31-50 ms without the cache and
/// 30-32 ms with it; inside the benchmark (other work between calls), a
/// median of 44.9 against 34.5 ms. Allocators do the same (glibc keeps freed
/// heap below its trim threshold); ours is bounded by a limit the user sets
/// (set_table_cache_limit) and can be emptied.
///
/// A block is taken best-fit (the rest of a bigger block stays cached) and
/// given back whole, merged with a cached neighbour; if the cache would pass
/// its limit or run out of slots, the block is unmapped instead. Reused
/// memory is not zeroed: callers (std::vector, the engine's arena)
/// initialize what they read. With WDEDUP_POISON_REUSED_MEMORY defined (the
/// test suite defines it) a reused block is filled with 0xA5 first, so code
/// that relied on zeros fails its tests; no other build pays for the fill.
class MappingCache {
 public:
  static constexpr std::size_t kSlots = 16;
  static constexpr std::size_t kDefaultLimit = std::size_t{64} << 20;

  /// constexpr: the process's cache is constant-initialized, so tables made
  /// by other static constructors find it ready.
  constexpr MappingCache() noexcept = default;

  /// A cached block of at least `size` bytes (its first `size`), or nullptr.
  void* take(std::size_t size) noexcept {
    Lock lock(mu_);
    std::size_t best = count_;
    for (std::size_t i = 0; i < count_; ++i)
      if (blocks_[i].size >= size && (best == count_ || blocks_[i].size < blocks_[best].size)) best = i;
    if (best == count_) return nullptr;
    Block& b = blocks_[best];
    void* const p = b.p;
    bytes_ -= size;
    if (b.size > size) {
      b.p = static_cast<char*>(b.p) + size;
      b.size -= size;
    } else {
      b = blocks_[--count_];
    }
    return p;
  }
  /// Keeps [p, p + size) if it fits the limit, else unmaps it. Merged with
  /// the cached blocks right before and right after it, both: a block that
  /// fills the gap between two cached ones makes them one again (merged with
  /// one only, the range stayed two blocks, and a table that needed all of
  /// it was mapped afresh beside them).
  void give(void* p, std::size_t size) noexcept {
    {
      Lock lock(mu_);
      if (bytes_ + size <= limit_) {
        std::size_t before = count_, after = count_;
        for (std::size_t i = 0; i < count_; ++i) {
          if (static_cast<char*>(blocks_[i].p) + blocks_[i].size == p) before = i;
          if (static_cast<char*>(p) + size == blocks_[i].p) after = i;
        }
        if (before != count_ || after != count_ || count_ < kSlots) {
          bytes_ += size;
          if (before != count_ && after != count_) {
            blocks_[before].size += size + blocks_[after].size;
            blocks_[after] = blocks_[--count_];
          } else if (before != count_) {
            blocks_[before].size += size;
          } else if (after != count_) {
            blocks_[after].p = p;
            blocks_[after].size += size;
          } else {
            blocks_[count_++] = Block{p, size};
          }
          return;
        }
      }
    }
    ::munmap(p, size);
  }
  /// pthread_atfork's: a child forked while another thread held the lock
  /// would wait on it forever, at its first big table. The fork waits
  /// for the holder instead (its sections are short and call nothing), and
  /// the child starts with the lock free and the blocks, which it inherits
  /// mapped, still cached.
  void lock_for_fork() noexcept { pthread_mutex_lock(&mu_); }
  void unlock_after_fork() noexcept { pthread_mutex_unlock(&mu_); }
  /// Unmaps every cached block.
  void release() noexcept { release_and_limit(nullptr); }
  /// Unmaps every cached block; from now on keeps at most `limit` bytes.
  void set_limit(std::size_t limit) noexcept { release_and_limit(&limit); }
  std::size_t limit() noexcept {
    Lock lock(mu_);
    return limit_;
  }
  std::size_t bytes() noexcept {
    Lock lock(mu_);
    return bytes_;
  }

 private:
  struct Block {
    void* p;
    std::size_t size;
  };
  struct Lock {
    explicit Lock(pthread_mutex_t& m) noexcept : m_(m) { pthread_mutex_lock(&m_); }
    ~Lock() { pthread_mutex_unlock(&m_); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    pthread_mutex_t& m_;
  };

  void release_and_limit(const std::size_t* limit) noexcept {
    Block out[kSlots];
    std::size_t n = 0;
    {
      Lock lock(mu_);
      if (limit != nullptr) limit_ = *limit;
      for (; n < count_; ++n) out[n] = blocks_[n];
      count_ = 0;
      bytes_ = 0;
    }
    for (std::size_t i = 0; i < n; ++i) ::munmap(out[i].p, out[i].size);  // outside the lock
  }

  // glibc's initializer spells its null list pointers as 0, which a user's
  // -Wzero-as-null-pointer-constant would otherwise report here.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wzero-as-null-pointer-constant"
#endif
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  Block blocks_[kSlots] = {};
  std::size_t count_ = 0, bytes_ = 0, limit_ = kDefaultLimit;
};

/// The process's cache. Constant-initialized and trivially destructible:
/// usable from any static constructor or destructor (tables freed at exit).
/// Its fork handlers are registered on first use (see lock_for_fork).
inline MappingCache g_mapping_cache;
inline MappingCache& mapping_cache() noexcept {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, [] {
    pthread_atfork([] { g_mapping_cache.lock_for_fork(); }, [] { g_mapping_cache.unlock_after_fork(); },
                   [] { g_mapping_cache.unlock_after_fork(); });
  });
  return g_mapping_cache;
}

/// `size` bytes (a multiple of kHugePage) at a kHugePage boundary, or
/// nullptr if there is no memory: a block from the cache if one is big
/// enough (not zeroed), else a fresh mapping (zero-filled).
inline void* map_huge_pages(std::size_t size) noexcept {
  if (void* p = mapping_cache().take(size)) {
#ifdef WDEDUP_POISON_REUSED_MEMORY
    std::memset(p, 0xA5, size);
#endif
    return p;
  }
  return map_fresh_huge_pages(size);
}

/// Gives a block from map_huge_pages back: to the cache, or unmapped.
inline void unmap_huge_pages(void* p, std::size_t size) noexcept { mapping_cache().give(p, size); }

/// `bytes` rounded up to whole huge pages: what map_huge_pages is given.
/// Callers keep `bytes` at most kMaxMapped, where it cannot wrap to 0.
constexpr std::size_t whole_huge_pages(std::size_t bytes) noexcept { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }
/// The most bytes any mapping here is asked for (map_fresh_huge_pages maps
/// one more huge page than it keeps).
constexpr std::size_t kMaxMapped = SIZE_MAX - 2 * kHugePage;

/// Out of memory, reported as operator new reports it: std::bad_alloc, or
/// abort in builds without exceptions.
[[noreturn]] inline void throw_bad_alloc() {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
  throw std::bad_alloc();
#else
  std::abort();
#endif
}

/// A stateless standard allocator: blocks of kBulkMin bytes or more are
/// their own huge-page mappings (rounded up to whole huge pages), smaller
/// ones come from operator new. Which one a block is follows from its size
/// alone, so deallocate needs no bookkeeping, and any two allocators are
/// equal (tables copy, move and swap like plain vectors). A big block whose
/// mapping fails is out of memory, as for operator new: it never falls
/// back to the heap, which would make the size rule ambiguous.
///
/// The cost: a block of 1 to 2 MiB occupies a whole huge page once touched.
/// Only build-time tables use it, and they are freed with the result.
template <class T>
struct BulkAllocator {
  using value_type = T;
  /// Below this, a block is not worth a mapping of its own.
  static constexpr std::size_t kBulkMin = std::size_t{1} << 20;

  BulkAllocator() noexcept = default;
  template <class U>
  BulkAllocator(const BulkAllocator<U>&) noexcept {}  // NOLINT: rebinding, as the standard requires

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                  "BulkAllocator<T>: T needs more alignment than operator new gives");
    if (n > kMaxMapped / sizeof(T)) throw_bad_alloc();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kBulkMin) return static_cast<T*>(::operator new(bytes));
    void* p = map_huge_pages(whole_huge_pages(bytes));
    if (p == nullptr) throw_bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kBulkMin)
      ::operator delete(p);
    else
      unmap_huge_pages(p, whole_huge_pages(bytes));
  }
};

template <class T, class U>
bool operator==(const BulkAllocator<T>&, const BulkAllocator<U>&) noexcept {
  return true;
}
template <class T, class U>
bool operator!=(const BulkAllocator<T>&, const BulkAllocator<U>&) noexcept {
  return false;
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_HUGE_PAGES_HPP
