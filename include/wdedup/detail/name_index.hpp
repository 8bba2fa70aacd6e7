// wdedup/detail/name_index.hpp — a flat, open-addressing set of names that
// hands out dense ids. Build-time half.
//
// Why not std::unordered_map<std::string, ...>: deduplicate() looks up every
// tensor name a few times; with 100,000 tensors the node allocations, string
// copies and pointer chasing of a node-based map cost several times the
// whole identity pass. Names here are string_views into the Program (or into
// storage the caller keeps alive), stored once, probed in one flat array.
#ifndef WDEDUP_DETAIL_NAME_INDEX_HPP
#define WDEDUP_DETAIL_NAME_INDEX_HPP

#include <cstdint>
#include <string_view>
#include <utility>

#include "wdedup/detail/flat_index.hpp"
#include "wdedup/table.hpp"

namespace wdedup {
namespace detail {

class NameIndex {
  struct NameOf {
    const Table<std::string_view>* names;
    std::string_view operator()(std::uint32_t id) const { return (*names)[id]; }
  };

 public:
  static constexpr std::uint32_t kNone = IdIndex::kNone;

  /// Sized so that `expected` names never rehash.
  explicit NameIndex(std::size_t expected = 16) : index_(expected) { names_.reserve(expected); }

  /// The id of `name`, adding it (with the next id) if it is new. The
  /// viewed characters must outlive the index.
  std::uint32_t find_or_add(std::string_view name, bool* added = nullptr) {
    return find_or_add(name, IdIndex::hash(name), added);
  }
  /// The same, with `h` = IdIndex::hash(name) computed by the caller.
  std::uint32_t find_or_add(std::string_view name, std::uint64_t h, bool* added = nullptr) {
    const std::uint32_t id = index_.find(name, h, name_of());
    if (added) *added = id == kNone;
    if (id != kNone) return id;
    const auto fresh = static_cast<std::uint32_t>(names_.size());
    names_.push_back(name);
    index_.insert(name, h, fresh, name_of());
    return fresh;
  }

  /// The id of `name`, or kNone.
  std::uint32_t find(std::string_view name) const { return index_.find(name, IdIndex::hash(name), name_of()); }

  std::string_view name(std::uint32_t id) const { return names_[id]; }
  /// Hands the index over (name -> id, hashed with IdIndex::hash); this
  /// index is then empty: find() finds nothing, name() still works.
  IdIndex release_index() {
    IdIndex out;
    std::swap(out, index_);
    return out;
  }
  void prefetch(std::uint64_t h) const noexcept { index_.prefetch(h); }
  std::size_t size() const noexcept { return names_.size(); }

 private:
  NameOf name_of() const { return NameOf{&names_}; }

  IdIndex index_;
  Table<std::string_view> names_;
};

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_NAME_INDEX_HPP
