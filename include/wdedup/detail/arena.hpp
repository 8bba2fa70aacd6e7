// wdedup/detail/arena.hpp — per-call scratch memory for the identity
// engine, which keeps a few arrays per input. Build-time half (the tables
// deduplicate() keeps or returns are Table<T>s instead: wdedup/table.hpp).
//
// Why: those arrays are fresh memory on every call, and on a VM a first-touch
// page fault costs microseconds. 100,000 small tensors need ~8 MB of scratch:
// ~2,000 faults of 4 KiB pages, measured at 16 ms of a 37 ms identity pass on
// this project's 2-core VM (against 21 ms when the memory was warm). One
// arena with transparent huge pages takes a handful of faults instead, and a
// bump pointer makes every array a pointer increment. Linux-specific advice
// (MADV_HUGEPAGE) is applied where it exists; elsewhere the arena is a plain
// bump allocator over big mmap'd chunks.
#ifndef WDEDUP_DETAIL_ARENA_HPP
#define WDEDUP_DETAIL_ARENA_HPP

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "wdedup/detail/huge_pages.hpp"

namespace wdedup {
namespace detail {

/// A bump allocator whose memory is freed all at once, when it is destroyed.
/// Not thread-safe: take arrays on one thread, then share them.
class Arena {
 public:
  /// `expect`: about how many bytes the caller will take (the first chunk's
  /// size; more chunks come as needed).
  explicit Arena(std::size_t expect = 0) noexcept : next_size_(expect) {}
  ~Arena() {
    while (head_ != nullptr) {
      Chunk* c = head_;
      head_ = c->prev;
      if (c->mapped)
        unmap_huge_pages(c, c->size);
      else
        ::operator delete(c, std::align_val_t(kAlign));
    }
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// Uninitialized room for n objects of T, 64-byte aligned (no two arrays
  /// share a cache line, so threads writing different arrays do not contend).
  template <class T>
  T* alloc(std::size_t n) {
    static_assert(alignof(T) <= kAlign, "Arena::alloc: T needs more than 64-byte alignment");
    // A size that would wrap (here, or rounded up to a line, a chunk's
    // header and whole huge pages in take and grow) is out of memory, as
    // BulkAllocator reports it, not a smaller chunk than asked for.
    if (n > kMaxMapped / sizeof(T)) throw_bad_alloc();
    return static_cast<T*>(take(n * sizeof(T)));
  }

  /// Bytes taken from chunks so far (for tests).
  std::size_t bytes_taken() const noexcept { return taken_; }

 private:
  static constexpr std::size_t kAlign = 64;
  static constexpr std::size_t kMinChunk = std::size_t{64} << 10;

  struct alignas(kAlign) Chunk {
    Chunk* prev;
    std::size_t size;  ///< bytes, header included
    bool mapped;
  };

  void* take(std::size_t bytes) {
    bytes = (bytes + kAlign - 1) & ~(kAlign - 1);
    if (bytes > left_) grow(bytes);
    void* p = cur_;
    cur_ += bytes;
    left_ -= bytes;
    taken_ += bytes;
    return p;
  }

  void grow(std::size_t bytes) {
    std::size_t size = sizeof(Chunk) + bytes;
    if (size < next_size_) size = next_size_;
    if (size < kMinChunk) size = kMinChunk;
    // (alloc keeps `bytes` below this; an `expect` or a doubled size near
    // SIZE_MAX would round up to 0 whole huge pages.)
    if (size > kMaxMapped) throw_bad_alloc();
    Chunk* c = nullptr;
    if (size >= kHugePage) {  // mapped, advised to use huge pages
      size = whole_huge_pages(size);
      c = map_huge(size);
    }
    if (c == nullptr) {
      // Small, or mmap failed: the heap. operator new reports failure as
      // any std::vector would (std::bad_alloc, or abort without exceptions).
      c = static_cast<Chunk*>(::operator new(size, std::align_val_t(kAlign)));
      c->mapped = false;
    }
    c->prev = head_;
    c->size = size;
    head_ = c;
    cur_ = reinterpret_cast<std::uint8_t*>(c) + sizeof(Chunk);
    left_ = size - sizeof(Chunk);
    next_size_ = size <= kMaxMapped / 2 ? size * 2 : kMaxMapped;
  }

  /// `size` bytes at a huge-page boundary, or nullptr.
  static Chunk* map_huge(std::size_t size) noexcept {
    Chunk* c = static_cast<Chunk*>(map_huge_pages(size));
    if (c != nullptr) c->mapped = true;
    return c;
  }

  Chunk* head_ = nullptr;
  std::uint8_t* cur_ = nullptr;
  std::size_t left_ = 0;
  std::size_t next_size_;
  std::size_t taken_ = 0;
};

/// A standard allocator over an Arena: deallocation is a no-op, the arena
/// frees everything at once. For std::vector scratch that lives one call.
template <class T>
struct ArenaAllocator {
  using value_type = T;
  Arena* arena;

  explicit ArenaAllocator(Arena& a) noexcept : arena(&a) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& o) noexcept : arena(o.arena) {}  // NOLINT: rebinding, as std requires

  T* allocate(std::size_t n) { return arena->alloc<T>(n); }
  void deallocate(T*, std::size_t) noexcept {}
};

// Templates on both types, as the allocator requirements compare rebound
// copies (hidden friends of one type made ArenaAllocator<int> ==
// ArenaAllocator<char> ambiguous: each side converts to the other).
template <class T, class U>
bool operator==(const ArenaAllocator<T>& a, const ArenaAllocator<U>& b) noexcept {
  return a.arena == b.arena;
}
template <class T, class U>
bool operator!=(const ArenaAllocator<T>& a, const ArenaAllocator<U>& b) noexcept {
  return a.arena != b.arena;
}

template <class T>
using ArenaVector = std::vector<T, ArenaAllocator<T>>;

/// An ArenaVector of n copies of v (n = 0: empty, to be grown).
template <class T>
ArenaVector<T> arena_vector(Arena& a, std::size_t n = 0, const T& v = T()) {
  return ArenaVector<T>(n, v, ArenaAllocator<T>(a));
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_ARENA_HPP
