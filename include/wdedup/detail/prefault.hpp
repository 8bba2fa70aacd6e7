// wdedup/detail/prefault.hpp — fresh memory mapped in bulk before the
// build-time half fills it. Build-time half.
//
// Why: deduplicate() fills tables of tens of megabytes per 100,000 tensors
// (its output alone is ~12 MB). On virtualised hosts a page fault costs
// ~10 us (12 us measured on the project's machine), so touching those pages
// one by one costs more than all the work done in them. Asked for in bulk
// the same pages cost 5-40x less.
#ifndef WDEDUP_DETAIL_PREFAULT_HPP
#define WDEDUP_DETAIL_PREFAULT_HPP

#include <cstddef>
#include <cstdint>

#include <sys/mman.h>

namespace wdedup {
namespace detail {

/// Maps every page of [p, p + bytes) in a few system calls, before it is
/// first written. Why: on a fresh heap a page fault costs ~10 us on
/// virtualised hosts (12 us measured here), so a 6 MB output table costs
/// ~18 ms in faults alone, more than all of the bookkeeping that fills it;
/// asked for in bulk (huge pages where the range allows, else a populate
/// call) the same pages cost ~0.5-3 ms. Pages already mapped (a reused
/// heap) cost a page-table walk. Ranges under 64 KiB are left to the
/// normal path: the calls would cost more than the faults they save.
/// Only a hint: where the kernel lacks the calls nothing changes.
inline void prefault(const void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  constexpr std::uintptr_t kPage = 4096, kHuge = std::uintptr_t{2} << 20;
  if (bytes < (std::size_t{64} << 10)) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t b = (a + kPage - 1) & ~(kPage - 1), e = (a + bytes) & ~(kPage - 1);
  const std::uintptr_t hb = (b + kHuge - 1) & ~(kHuge - 1), he = e & ~(kHuge - 1);
#if defined(MADV_HUGEPAGE)
  if (he > hb) madvise(reinterpret_cast<void*>(hb), he - hb, MADV_HUGEPAGE);
#endif
  madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

/// v.reserve(n), its pages mapped in bulk (see prefault).
template <class V>
void reserve_prefaulted(V& v, std::size_t n) {
  v.reserve(n);
  prefault(v.data(), n * sizeof(typename V::value_type));
}

/// n copies of `value` in fresh pages mapped in bulk (see prefault).
template <class V>
void assign_prefaulted(V& v, std::size_t n, const typename V::value_type& value) {
  reserve_prefaulted(v, n);
  v.assign(n, value);
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_PREFAULT_HPP
