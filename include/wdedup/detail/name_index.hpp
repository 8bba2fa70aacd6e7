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

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "wdedup/detail/flat_index.hpp"
#include "wdedup/table.hpp"

namespace wdedup {
namespace detail {

/// A name as NameIndex keeps it: a view, and a copy of its first kHead
/// characters. A lookup that finds a slot compares its name with the entry,
/// which it reads anyway, and follows the view only for characters past
/// kHead. The viewed characters sit in the caller's objects (a Tensor's
/// name), out of cache on big programs: 50,000 lookups that hit took ~2 ms
/// more when every hit followed the view (100,000 small tensors, cold
/// cache: the name check 2.6-4.6 ms against 1.9-2.5 ms now).
struct NameEntry {
  static constexpr std::size_t kHead = 12;
  const char* data;
  std::uint32_t size;
  char head[kHead];
};

/// What IdIndex gets from NameIndex's name_of: converts to the name's view
/// (for rehashing) and compares with a name using the copied head first.
struct NameRef {
  const NameEntry* e;
  operator std::string_view() const noexcept { return std::string_view(e->data, e->size); }
  friend bool same_name(NameRef r, std::string_view n) noexcept {
    constexpr std::size_t kHead = NameEntry::kHead;
    const NameEntry& entry = *r.e;
    if (entry.size != n.size()) return false;
    if (n.empty()) return true;  // (an empty view may have no data pointer)
    if (std::memcmp(entry.head, n.data(), n.size() < kHead ? n.size() : kHead) != 0) return false;
    return n.size() <= kHead || std::memcmp(entry.data + kHead, n.data() + kHead, n.size() - kHead) == 0;
  }
};

template <class = void>
class BasicNameIndex {
  struct NameOf {
    const Table<NameEntry>* names;
    NameRef operator()(std::uint32_t id) const { return NameRef{&(*names)[id]}; }
  };

 public:
  static constexpr std::uint32_t kNone = IdIndex::kNone;

  /// Sized so that `expected` names never rehash.
  explicit BasicNameIndex(std::size_t expected = 16) : index_(expected) { names_.reserve(expected); }

  /// The id of `name`, adding it (with the next id) if it is new. The
  /// viewed characters must outlive the index.
  std::uint32_t find_or_add(std::string_view name, bool* added = nullptr) {
    return find_or_add(name, index_.hash(name), added);
  }
  /// The same, with `h` = hash(name) computed by the caller.
  std::uint32_t find_or_add(std::string_view name, std::uint64_t h, bool* added = nullptr) {
    const std::uint32_t id = index_.find(name, h, name_of());
    if (added) *added = id == kNone;
    if (id != kNone) return id;
    return add(name, h);
  }

  /// The id of `name`, or kNone.
  std::uint32_t find(std::string_view name) const { return find(name, index_.hash(name)); }
  /// The same, with `h` = hash(name) computed by the caller.
  std::uint32_t find(std::string_view name, std::uint64_t h) const { return index_.find(name, h, name_of()); }

  std::string_view name(std::uint32_t id) const { return std::string_view(names_[id].data, names_[id].size); }
  /// Hands the index over (name -> id, with its seed); this
  /// index is then empty: find() finds nothing, name() still works.
  IdIndex release_index() {
    IdIndex out;
    std::swap(out, index_);
    return out;
  }
  /// Takes back an index release_index() handed over.
  void restore_index(IdIndex&& index) noexcept { index_ = std::move(index); }
  void prefetch(std::uint64_t h) const noexcept { index_.prefetch(h); }
  /// The hash find_or_add(name, h) takes: the index's own (see IdIndex::hash).
  std::uint64_t hash(std::string_view name) const noexcept { return index_.hash(name); }
  /// What HashAhead hashes and prefetches with.
  const IdIndex& index() const noexcept { return index_; }
  std::size_t size() const noexcept { return names_.size(); }

 private:
  /// Adds `name` (hash `h`, not present) with the next id. Out of line so
  /// that the lookup, which every call makes, is small enough to inline
  /// into the caller's loop: whole, find_or_add was a call with six saved
  /// registers and a 136-byte frame each time (deduplicate()'s name check on
  /// 100,000 small tensors, callgrind: 1.45M instructions less this way).
#if defined(__GNUC__) || defined(__clang__)
  __attribute__((noinline))
#endif
  std::uint32_t add(std::string_view name, std::uint64_t h) {
    const auto fresh = static_cast<std::uint32_t>(names_.size());
    NameEntry& e = names_.emplace_back();
    e.data = name.data();
    e.size = static_cast<std::uint32_t>(name.size());
    if (!name.empty()) std::memcpy(e.head, name.data(), name.size() < NameEntry::kHead ? name.size() : NameEntry::kHead);
    index_.insert(name, h, fresh, name_of());
    return fresh;
  }

  NameOf name_of() const { return NameOf{&names_}; }

  IdIndex index_;
  Table<NameEntry> names_;
};
/// (A template only so that its members compile where they are used.)
using NameIndex = BasicNameIndex<>;

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_NAME_INDEX_HPP
