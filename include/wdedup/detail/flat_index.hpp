// wdedup/detail/flat_index.hpp — the two open-addressing tables the
// build-time half uses instead of node-based maps. Build-time half.
//
// Why not std::unordered_map: deduplicate() and the store touch one entry
// per tensor; with 100,000 tensors a node allocation, a std::string copy
// and a pointer chase per entry cost more than reading every tensor. These
// tables are flat arrays sized once, with no allocation per entry.
#ifndef WDEDUP_DETAIL_FLAT_INDEX_HPP
#define WDEDUP_DETAIL_FLAT_INDEX_HPP

#include <cstdint>
#include <string_view>
#include <vector>

#include "wdedup/detail/random.hpp"
#include "wdedup/table.hpp"
#include "wdedup/runtime/detail/key_hash.hpp"

namespace wdedup {
namespace detail {

inline std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

/// A map from a pair of 64-bit words to a 32-bit value (size classes,
/// pointers, hash buckets).
template <class = void>
class BasicFlatIndex {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  BasicFlatIndex() = default;
  BasicFlatIndex(const BasicFlatIndex&) = default;
  BasicFlatIndex& operator=(const BasicFlatIndex&) = default;
  /// A moved-from map is empty and usable (its counts go with its slots).
  BasicFlatIndex(BasicFlatIndex&& o) noexcept : slots_(std::move(o.slots_)), mask_(o.mask_), count_(o.count_) { o.clear(); }
  BasicFlatIndex& operator=(BasicFlatIndex&& o) noexcept {
    if (this != &o) {
      slots_ = std::move(o.slots_);
      mask_ = o.mask_;
      count_ = o.count_;
      o.clear();
    }
    return *this;
  }

  /// Empties the map, sized so `expected` inserts never rehash.
  void reset(std::size_t expected) {
    std::size_t cap = 16;
    while (cap < expected * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    count_ = 0;
  }
  /// Room for `n` entries: the next inserts up to n do not allocate.
  void reserve(std::size_t n) {
    while (n * 2 > slots_.size()) grow();
  }
  /// The value stored under (a, b); inserts `value` first if there is none.
  std::uint32_t find_or_insert(std::uint64_t a, std::uint64_t b, std::uint32_t value, bool& inserted) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    for (std::size_t i = slot_of(a, b);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.value == kNone) {
        s = Slot{a, b, value};
        ++count_;
        inserted = true;
        return value;
      }
      if (s.a == a && s.b == b) {
        inserted = false;
        return s.value;
      }
    }
  }
  /// The value stored under (a, b), or kNone.
  std::uint32_t find(std::uint64_t a, std::uint64_t b) const noexcept {
    if (slots_.empty()) return kNone;
    for (std::size_t i = slot_of(a, b);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kNone) return kNone;
      if (s.a == a && s.b == b) return s.value;
    }
  }

 private:
  struct Slot {
    std::uint64_t a = 0, b = 0;
    std::uint32_t value = kNone;
  };
  static std::size_t home(std::uint64_t a, std::uint64_t b, std::size_t mask) noexcept {
    return static_cast<std::size_t>(mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ull))) & mask;
  }
  std::size_t slot_of(std::uint64_t a, std::uint64_t b) const noexcept { return home(a, b, mask_); }
  void clear() noexcept {
    slots_.clear();
    mask_ = 0;
    count_ = 0;
  }
  /// Doubles the table (16 slots at first). The bigger table is made before
  /// the old one is let go: if allocating it throws, the map is unchanged.
  void grow() {
    const std::size_t cap = slots_.size() < 16 ? 16 : slots_.size() * 2;
    Table<Slot> bigger(cap, Slot{});
    const std::size_t mask = cap - 1;
    for (const Slot& s : slots_) {
      if (s.value == kNone) continue;
      std::size_t i = home(s.a, s.b, mask);
      while (bigger[i].value != kNone) i = (i + 1) & mask;
      bigger[i] = s;
    }
    slots_.swap(bigger);
    mask_ = mask;
  }

  Table<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
};
/// (A template only so that its members compile where they are used.)
using FlatIndex = BasicFlatIndex<>;

/// Whether a stored name equals `b` (overloaded, by argument-dependent
/// lookup, for stored names that can answer faster).
inline bool same_name(std::string_view a, std::string_view b) noexcept { return a == b; }

/// A set of names handing out dense ids, where the names live with the
/// caller: every call takes `name_of(id)`, so they may sit in a vector that
/// grows (and moves its strings) between calls. A slot keeps 32 bits of the
/// name's hash next to the id, so a probe compares names only on a likely hit.
template <class = void>
class BasicIdIndex {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  explicit BasicIdIndex(std::size_t expected = 0) : slots_(capacity_for(expected), 0), seed_(unpredictable_u64()) {}
  /// An empty index whose hash is `other`'s (same seed), so that a caller
  /// who looks a name up in both hashes it once. (No seed of its own is
  /// drawn: that is two system calls.)
  static BasicIdIndex sharing_hash_with(const BasicIdIndex& other) { return BasicIdIndex(0, other.seed_); }
  BasicIdIndex(const BasicIdIndex&) = default;
  BasicIdIndex& operator=(const BasicIdIndex&) = default;
  /// A moved-from index is empty and usable: it finds nothing, and its
  /// first insert gives it slots again (a moved-from NamedDataStore used to
  /// probe an empty table with mask SIZE_MAX). The seed goes with the
  /// entries (and stays with the moved-from index too: any seed will do).
  BasicIdIndex(BasicIdIndex&& o) noexcept : slots_(std::move(o.slots_)), count_(o.count_), seed_(o.seed_) {
    o.slots_.clear();
    o.count_ = 0;
  }
  BasicIdIndex& operator=(BasicIdIndex&& o) noexcept {
    if (this != &o) {
      slots_ = std::move(o.slots_);
      count_ = o.count_;
      seed_ = o.seed_;
      o.slots_.clear();
      o.count_ = 0;
    }
    return *this;
  }

  /// key_hash under this index's own seed, which is random: names chosen to
  /// collide under a known seed (a hostile .ptd file's keys, imported and
  /// deduplicated) would pile into one run of slots, making every insert
  /// walk it. 65,536 such keys took an import 3.9-6.9 s, and deduplicate()
  /// on the result 4 s, against 15-23 ms and 33 ms for as many plain keys.
  /// Slots never reach an output (ids go in insertion order), so results do
  /// not depend on the seed. Each index draws its own (not one per process:
  /// a library built with hidden symbols, or loaded RTLD_LOCAL, would hold a
  /// process seed of its own, and a store made there would be looked up
  /// under another), and a hash is only good for the index that made it.
  std::uint64_t hash(std::string_view name) const noexcept { return key_hash(name.data(), name.size(), seed_); }

  /// The id of `name` (hash `h`), or kNone.
  template <class NameOf>
  std::uint32_t find(std::string_view name, std::uint64_t h, const NameOf& name_of) const {
    if (slots_.empty()) return kNone;
    const std::uint64_t s = slots_[probe(name, h, name_of)];
    return s == 0 ? kNone : static_cast<std::uint32_t>(s) - 1;
  }
  /// Room for `n` names: inserts up to n do not allocate.
  template <class NameOf>
  void reserve(std::size_t n, const NameOf& name_of) {
    if (n * 2 > slots_.size()) rehash(capacity_for(n), name_of);
  }
  /// Adds `id` under `name` (hash `h`), which must not be present.
  template <class NameOf>
  void insert(std::string_view name, std::uint64_t h, std::uint32_t id, const NameOf& name_of) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2, name_of);
    slots_[probe(name, h, name_of)] = (h & kTagMask) | (static_cast<std::uint64_t>(id) + 1);
    ++count_;
  }
  /// Starts loading the slot where a probe for hash `h` begins: callers
  /// that know the next names hash them ahead and hide the cache miss.
  void prefetch(std::uint64_t h) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    if (!slots_.empty()) __builtin_prefetch(slots_.data() + (static_cast<std::size_t>(h) & (slots_.size() - 1)));
#else
    (void)h;
#endif
  }

 private:
  static constexpr std::uint64_t kTagMask = 0xFFFFFFFF00000000ull;

  BasicIdIndex(std::size_t expected, std::uint64_t seed) : slots_(capacity_for(expected), 0), seed_(seed) {}

  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
  /// The slot holding `name`, or the empty slot where it would go.
  template <class NameOf>
  std::size_t probe(std::string_view name, std::uint64_t h, const NameOf& name_of) const {
    const std::size_t mask = slots_.size() - 1;
    const std::uint64_t tag = h & kTagMask;
    for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
      const std::uint64_t s = slots_[i];
      if (s == 0) return i;
      if ((s & kTagMask) == tag && same_name(name_of(static_cast<std::uint32_t>(s) - 1), name)) return i;
    }
  }
  template <class NameOf>
  void rehash(std::size_t capacity, const NameOf& name_of) {
    Table<std::uint64_t> old(capacity, 0);
    old.swap(slots_);
    const std::size_t mask = capacity - 1;
    for (std::uint64_t s : old) {
      if (s == 0) continue;
      const std::string_view n = name_of(static_cast<std::uint32_t>(s) - 1);
      std::size_t i = static_cast<std::size_t>(hash(n)) & mask;
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  Table<std::uint64_t> slots_;
  std::size_t count_ = 0;
  std::uint64_t seed_;
};
/// (A template only so that its members compile where they are used.)
using IdIndex = BasicIdIndex<>;

/// Hashes the names of a run of items a few items ahead of their probes in
/// `index` and starts loading each one's slot: on big tables every probe is
/// otherwise a cache miss. name_at(j) gives item j's name.
template <class NameAt>
class HashAhead {
 public:
  static constexpr std::size_t kAhead = 8;

  HashAhead(std::size_t count, const NameAt& name_at, const IdIndex& index)
      : count_(count), name_at_(name_at), index_(index) {
    for (std::size_t j = 0; j < kAhead && j < count; ++j) fill(j);
  }
  /// index.hash of item i's name; call for i = 0, 1, 2, ... in order.
  std::uint64_t take(std::size_t i) {
    const std::uint64_t h = ring_[i % kAhead];
    if (i + kAhead < count_) fill(i + kAhead);
    return h;
  }

 private:
  void fill(std::size_t j) {
    ring_[j % kAhead] = index_.hash(name_at_(j));
    index_.prefetch(ring_[j % kAhead]);
  }

  std::size_t count_;
  const NameAt& name_at_;
  const IdIndex& index_;
  std::uint64_t ring_[kAhead] = {};
};

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_FLAT_INDEX_HPP
