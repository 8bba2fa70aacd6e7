// wdedup/table.hpp — Table<T>: the vector type of the build-time half's big
// outputs (store keys and buffers, function tensor tables). Build-time half.
//
// A std::vector whose blocks of 1 MiB or more are huge-page mappings of
// their own (detail/huge_pages.hpp says why: on virtualised hosts, filling
// fresh 4 KiB pages cost deduplicate() more than the work done in them).
// It is used like any vector; only code that names the type needs Table<T>
// (or auto) instead of std::vector<T>. Freed blocks are kept for the next
// table, up to a limit the functions below set and report.
#ifndef WDEDUP_TABLE_HPP
#define WDEDUP_TABLE_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <vector>

#include "wdedup/detail/huge_pages.hpp"

namespace wdedup {

template <class T>
using Table = std::vector<T, detail::BulkAllocator<T>>;

/// The huge-page blocks of big tables (Table<T> blocks of 1 MiB or more, and
/// deduplicate()'s scratch) are not unmapped when freed: up to a limit, they
/// are kept for the next big table, so a process that deduplicates again
/// does not map, fault in and zero them again (detail/huge_pages.hpp has the
/// measurements). The limit is 64 MiB unless set; 0 unmaps every block as it
/// is freed. Setting it unmaps what is kept now. Thread-safe.
inline void set_table_cache_limit(std::size_t bytes) noexcept { detail::mapping_cache().set_limit(bytes); }
inline std::size_t table_cache_limit() noexcept { return detail::mapping_cache().limit(); }
/// Bytes kept now: mapped, not in use.
inline std::size_t table_cache_bytes() noexcept { return detail::mapping_cache().bytes(); }
/// Unmaps every kept block (the limit stays).
inline void release_table_cache() noexcept { detail::mapping_cache().release(); }

}  // namespace wdedup

#endif  // WDEDUP_TABLE_HPP
