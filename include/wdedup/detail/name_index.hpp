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
#include <vector>

#include "wdedup/runtime/detail/key_hash.hpp"

namespace wdedup {
namespace detail {

class NameIndex {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  explicit NameIndex(std::size_t expected = 16) { rehash(capacity_for(expected)); }

  /// The id of `name`, adding it (with the next id) if it is new. The
  /// viewed characters must outlive the index.
  std::uint32_t find_or_add(std::string_view name, bool* added = nullptr) {
    const std::uint64_t h = key_hash(name.data(), name.size(), 0);
    std::size_t slot = probe(name, h);
    if (slots_[slot] != 0) {
      if (added) *added = false;
      return static_cast<std::uint32_t>(slots_[slot] & 0xFFFFFFFFu) - 1;
    }
    if ((names_.size() + 1) * 2 > slots_.size()) {
      rehash(slots_.size() * 2);
      slot = probe(name, h);
    }
    const auto id = static_cast<std::uint32_t>(names_.size());
    names_.push_back(name);
    slots_[slot] = (h & 0xFFFFFFFF00000000ull) | (static_cast<std::uint64_t>(id) + 1);
    if (added) *added = true;
    return id;
  }

  /// The id of `name`, or kNone.
  std::uint32_t find(std::string_view name) const {
    const std::uint64_t s = slots_[probe(name, key_hash(name.data(), name.size(), 0))];
    return s == 0 ? kNone : static_cast<std::uint32_t>(s & 0xFFFFFFFFu) - 1;
  }

  std::string_view name(std::uint32_t id) const { return names_[id]; }
  std::size_t size() const noexcept { return names_.size(); }

 private:
  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }

  /// The slot holding `name`, or the empty slot where it would go.
  std::size_t probe(std::string_view name, std::uint64_t h) const {
    const std::size_t mask = slots_.size() - 1;
    const std::uint64_t tag = h & 0xFFFFFFFF00000000ull;
    for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
      const std::uint64_t s = slots_[i];
      if (s == 0) return i;
      if ((s & 0xFFFFFFFF00000000ull) == tag && names_[(s & 0xFFFFFFFFu) - 1] == name) return i;
    }
  }

  void rehash(std::size_t capacity) {
    std::vector<std::uint64_t> old;
    old.swap(slots_);
    slots_.assign(capacity, 0);
    const std::size_t mask = capacity - 1;
    for (std::uint64_t s : old) {
      if (s == 0) continue;
      const std::string_view n = names_[(s & 0xFFFFFFFFu) - 1];
      std::size_t i = static_cast<std::size_t>(key_hash(n.data(), n.size(), 0)) & mask;
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<std::uint64_t> slots_;
  std::vector<std::string_view> names_;
};

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_NAME_INDEX_HPP
