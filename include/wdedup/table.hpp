// wdedup/table.hpp — Table<T>: the vector type of the build-time half's big
// outputs (store keys and buffers, function tensor tables). Build-time half.
//
// A std::vector whose blocks of 1 MiB or more are huge-page mappings of
// their own (detail/huge_pages.hpp says why: on virtualised hosts, filling
// fresh 4 KiB pages cost deduplicate() more than the work done in them).
// It is used like any vector; only code that names the type needs Table<T>
// (or auto) instead of std::vector<T>.
#ifndef WDEDUP_TABLE_HPP
#define WDEDUP_TABLE_HPP

#include <vector>

#include "wdedup/detail/huge_pages.hpp"

namespace wdedup {

template <class T>
using Table = std::vector<T, detail::BulkAllocator<T>>;

}  // namespace wdedup

#endif  // WDEDUP_TABLE_HPP
