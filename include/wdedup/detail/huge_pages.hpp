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
#ifndef WDEDUP_DETAIL_HUGE_PAGES_HPP
#define WDEDUP_DETAIL_HUGE_PAGES_HPP

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace wdedup {
namespace detail {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// `size` bytes (a multiple of kHugePage) at a kHugePage boundary, advised
/// to use huge pages, or nullptr if the mapping fails. Over-maps by one huge
/// page and trims the ends. Zero-filled, like any anonymous mapping.
inline void* map_huge_pages(std::size_t size) noexcept {
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

inline void unmap_huge_pages(void* p, std::size_t size) noexcept { ::munmap(p, size); }

/// `bytes` rounded up to whole huge pages: what map_huge_pages is given.
constexpr std::size_t whole_huge_pages(std::size_t bytes) noexcept { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

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
    if (n > (SIZE_MAX - 2 * kHugePage) / sizeof(T)) throw_bad_alloc();
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
