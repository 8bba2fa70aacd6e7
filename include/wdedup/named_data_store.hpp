// wdedup/named_data_store.hpp — the build-time named-data store: keys that
// name byte buffers, identical bytes held once. ExecuTorch's NamedDataStore
// semantics, with its gaps fixed (alignment is the lcm of every key's
// request; a failed add or merge changes nothing). Build-time half.
//
// The store does not copy bytes: it keeps ByteSpans into caller memory,
// which must outlive the store and anything written from it.
//
// Compile time: functions that not every includer calls are templates on an
// unused `int` (call them as plain functions), so a TU compiles them only if
// it calls them.
#ifndef WDEDUP_NAMED_DATA_STORE_HPP
#define WDEDUP_NAMED_DATA_STORE_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wdedup/detail/flat_index.hpp"
#include "wdedup/expected.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/program.hpp"
#include "wdedup/table.hpp"

namespace wdedup {

/// Largest alignment (and lcm of alignments) a buffer may need: 4 GiB.
/// Beyond it the padding alone would dwarf any model.
constexpr std::uint64_t kMaxAlignment = std::uint64_t{1} << 32;

/// A unique byte buffer of the store.
struct StoreBuffer {
  ByteSpan bytes;
  /// lcm of the alignment asked for by every key that points here.
  std::uint64_t alignment = 1;
};

/// One key of the store.
struct StoreKey {
  std::string key;
  std::uint32_t buffer_index = 0;
  /// What this key asked for (lcm of its own requests if it was added twice).
  std::uint64_t alignment = 1;
  std::optional<Layout> layout;
};

namespace detail {

inline std::uint64_t gcd64(std::uint64_t a, std::uint64_t b) noexcept {
  while (b != 0) {
    const std::uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/// lcm(a, b) if it is at most kMaxAlignment, else nullopt.
inline std::optional<std::uint64_t> lcm_alignment(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t g = gcd64(a, b);
  const std::uint64_t q = a / g;
  if (q > kMaxAlignment / b) return std::nullopt;
  const std::uint64_t l = q * b;
  if (l > kMaxAlignment) return std::nullopt;
  return l;
}

inline bool same_bytes(ByteSpan a, ByteSpan b) noexcept {
  if (a.size() != b.size()) return false;
  if (a.data() == b.data() || a.size() == 0) return true;
  return std::memcmp(a.data(), b.data(), a.size()) == 0;
}

/// For two spans that are not the same bytes: " (first difference at byte
/// i)" where they are of one size, else "" (their sizes say it).
template <int = 0>
std::string first_difference(ByteSpan a, ByteSpan b) {
  if (a.size() != b.size()) return {};
  std::size_t i = 0;
  while (a.data()[i] == b.data()[i]) ++i;
  return cat(" (first difference at byte ", i, ")");
}

template <int = 0>
std::string describe_layout(const std::optional<Layout>& l) {
  if (!l) return "no layout";
  std::string s = scalar_type_name(l->scalar_type);
  if (s.empty()) s = "type " + std::to_string(static_cast<int>(l->scalar_type));
  // At most kShown entries a list: a rank of thousands (refused as over
  // 255) would otherwise make a message of kilobytes.
  constexpr std::size_t kShown = 16;
  auto list = [&s](const auto& v) {
    s += '[';
    for (std::size_t i = 0; i < v.size() && i < kShown; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    if (v.size() > kShown) s += cat(", ... (", v.size(), " in all)");
    s += ']';
  };
  s += ' ';
  list(l->sizes);
  s += " dim_order ";
  list(l->dim_order);
  return s;
}

/// The first rule `l` breaks (detail::check_layout states them), with the
/// values that break it, for a message; "" if none.
template <int = 0>
std::string layout_problem(const Layout& l) {
  std::uint64_t n = 0;
  const LayoutFault f = check_layout(l.scalar_type, l.sizes.data(), l.sizes.size(), l.dim_order.data(),
                                     l.dim_order.size(), &n);
  const std::size_t rank = l.sizes.size();
  switch (f.rule) {
    case LayoutRule::kNone: return {};
    case LayoutRule::kUnknownScalarType: return cat("unknown scalar type ", static_cast<int>(l.scalar_type));
    case LayoutRule::kRankOver255: return cat("rank ", rank, " exceeds the maximum of 255");
    case LayoutRule::kDimOrderLength:
      return cat("rank ", rank, " but dim_order has ", counted(l.dim_order.size(), "entry", "entries"));
    case LayoutRule::kDimOrderPastRank:
      return cat("dim_order[", f.at, "] is ", unsigned{l.dim_order[f.at]}, ", not below rank ", rank);
    case LayoutRule::kDimOrderTwice: return cat("dim_order names dimension ", unsigned{l.dim_order[f.at]}, " twice");
    case LayoutRule::kNegativeSize: return cat("sizes[", f.at, "] is negative (", l.sizes[f.at], ")");
    case LayoutRule::kByteCountOverflow: return "its byte count exceeds 2^64 - 1";
  }
  return layout_rule_message(f.rule);
}

/// Checks an (alignment, layout, bytes) triple for key `key`: the rules every
/// entry point shares. `where` prefixes the message (e.g. "method 'decode'
/// partition 0: "), and `noun` says what `key` is to the caller: a store
/// key, or, for deduplicate(), a tensor's name, which is not its key.
template <int = 0>
Expected<void> check_entry(std::string_view where, std::string_view key, ByteSpan bytes,
                                  std::int64_t alignment, const std::optional<Layout>& layout,
                                  std::string_view noun = "key") {
  if (key.empty()) return Expected<void>(Error::InvalidName, cat(where, "empty ", noun));
  // Refused here rather than when the store is written: ExecuTorch compares
  // keys only up to a NUL byte, so it could not tell such a key from others.
  if (const std::size_t nul = key.find('\0'); nul != std::string_view::npos)
    return Expected<void>(Error::InvalidName, cat(where, noun, " ", quote_name(key), " contains a NUL byte at offset ",
                                                  nul, "; ExecuTorch compares keys only up to a NUL (strcmp, or "
                                                  "strncmp after a length check), so it could not tell it from a "
                                                  "key that agrees before the NUL"));
  if (std::string problem = utf8_problem(key); !problem.empty())
    return Expected<void>(Error::InvalidName, cat(where, noun, " ", problem));
  if (alignment <= 0)
    return Expected<void>(Error::InvalidAlignment,
                          cat(where, noun, " ", quote_name(key), ": alignment must be a positive integer, got ",
                              alignment));
  if (static_cast<std::uint64_t>(alignment) > kMaxAlignment)
    return Expected<void>(Error::InvalidAlignment,
                          cat(where, noun, " ", quote_name(key), ": alignment ", alignment,
                              " exceeds the maximum of ", kMaxAlignment));
  // A null pointer with a size is a mapping or allocation that failed
  // upstream: a size that occurs once is never read before the store is
  // written, so the write would be the first to touch it.
  if (bytes.data() == nullptr && !bytes.empty())
    return Expected<void>(Error::InvalidArgument, cat(where, noun, " ", quote_name(key), ": the data pointer is null "
                                                      "but the size is ", counted(bytes.size(), "byte")));
  if (layout) {
    const std::optional<std::uint64_t> n = layout->nbytes();
    if (!n)
      return Expected<void>(Error::LayoutMismatch,
                            cat(where, noun, " ", quote_name(key), ": layout is inconsistent (",
                                describe_layout(layout), "): ", layout_problem(*layout)));
    if (*n != bytes.size())
      return Expected<void>(Error::LayoutMismatch,
                            cat(where, noun, " ", quote_name(key), ": layout ", describe_layout(layout),
                                " describes ", counted(*n, "byte"), " but the data has ",
                                counted(bytes.size(), "byte")));
  }
  return {};
}

struct StoreAccess;  // the bulk path used by deduplicate()

}  // namespace detail

/// Named byte buffers with content deduplication.
///
/// add_named_data(key, bytes, alignment, layout):
///  - same key, same bytes, same layout: no new key or buffer; an alignment
///    that differs is combined into the key's (lcm), so no request is lost;
///  - same key, different bytes: Error::KeyConflict naming the key, both
///    sizes and (equal sizes) the first byte that differs; the store is left
///    exactly as it was;
///  - same key, same bytes, different layout: Error::LayoutMismatch;
///  - different keys, same bytes: one buffer; each key keeps its own
///    alignment and layout; the buffer's alignment is the lcm of all of them;
///  - alignment <= 0 (or over kMaxAlignment): Error::InvalidAlignment;
///    non-powers of two are fine;
///  - an empty key, or one with a NUL byte: Error::InvalidName.
/// A failed add leaves the store exactly as it was; so does running out of
/// memory, which throws std::bad_alloc as the standard containers do.
/// Keys and buffers are reported in first-insertion order.
///
/// Finding a buffer with the same bytes hashes the contents of every size
/// that several buffers share (a size held once is compared directly). A
/// store that deduplicate() filled has no such index yet: the first
/// add_named_data or merge into it builds it, which reads every buffer
/// whose size another shares, once (on a model whose weights come from a
/// mapped file, that reads most of the file again). Later adds are O(1)
/// (expected: the content hash has a random seed of the store's own), and a
/// merge is O(the other store).
class NamedDataStore {
  /// The key-index's view of the keys (they move when keys_ grows).
  struct KeyOf {
    const Table<StoreKey>* keys;
    std::string_view operator()(std::uint32_t id) const { return (*keys)[id].key; }
  };

 public:
  template <int = 0>
  Expected<void> add_named_data(std::string_view key, ByteSpan bytes, std::int64_t alignment = 1,
                                std::optional<Layout> layout = std::nullopt) {
    if (Expected<void> c = detail::check_entry("", key, bytes, alignment, layout); !c) return c;
    const auto align = static_cast<std::uint64_t>(alignment);
    const std::uint64_t key_h = key_index_.hash(key);

    if (const std::uint32_t found = key_index_.find(key, key_h, key_of()); found != detail::IdIndex::kNone) {
      StoreKey& k = keys_[found];
      StoreBuffer& b = buffers_[k.buffer_index];
      if (Expected<void> r = same_entry(k, bytes, layout); !r) return r;
      const std::optional<std::uint64_t> key_align = detail::lcm_alignment(k.alignment, align);
      const std::optional<std::uint64_t> buf_align = detail::lcm_alignment(b.alignment, align);
      // Named separately: a store filled through StoreAccess may hold a
      // buffer whose alignment does not carry its key's (the writer allows
      // it), so either lcm can be the one that overflows.
      if (!key_align) return lcm_overflow(key, k.alignment, align);
      if (!buf_align) return lcm_overflow(key, b.alignment, align, true);
      k.alignment = *key_align;
      b.alignment = *buf_align;
      return {};
    }

    refresh_buffer_index();
    const std::optional<std::uint32_t> existing = find_buffer(bytes);
    std::uint64_t buf_align = align;
    if (existing) {
      const std::optional<std::uint64_t> l = detail::lcm_alignment(buffers_[*existing].alignment, align);
      if (!l) return lcm_overflow(key, buffers_[*existing].alignment, align, true);
      buf_align = *l;
    }
    // All checks passed. What can still fail is memory (std::bad_alloc, in
    // builds with exceptions): the new key is built and every container
    // and index is given room first, so the appends below cannot allocate,
    // and a throw leaves the store as it was. (Growing an index early
    // changes where entries sit, not what it finds.)
    StoreKey fresh_key;
    fresh_key.key.assign(key.data(), key.size());
    fresh_key.alignment = align;
    fresh_key.layout = std::move(layout);
    room_for_one(keys_);
    key_index_.reserve(keys_.size() + 1, key_of());
    if (!existing) {
      room_for_one(buffers_);
      room_for_one(content_next_);
      room_for_one(size_classes_);
      by_pointer_.reserve(buffers_.size() + 1);
      by_size_.reserve(size_classes_.size() + 1);
      by_content_.reserve(buffers_.size() + 1);
    }
    std::uint32_t index;
    if (existing) {
      index = *existing;
      buffers_[index].alignment = buf_align;
    } else {
      index = append_buffer(bytes, align);
    }
    fresh_key.buffer_index = index;
    const auto id = static_cast<std::uint32_t>(keys_.size());
    keys_.push_back(std::move(fresh_key));
    key_index_.insert(keys_[id].key, key_h, id, key_of());
    return {};
  }

  /// Adds every key of `other` (in its order) under the same rules. All or
  /// nothing: on the first failure the store is left exactly as it was and
  /// the error names the offending key. Takes time in proportion to
  /// `other`, not to this store: every key is first checked against the
  /// store as the keys before it would have left it, changing nothing; only
  /// then, with room made for everything, is the store changed. (A copy of
  /// the store changed and swapped in made n merges of one key O(n^2):
  /// 16,000 took 6.6 s, where as many adds take 5 ms; now 0.03 s.)
  template <int = 0>
  Expected<void> merge(const NamedDataStore& other) {
    auto failed = [](const Expected<void>& e) {
      return Expected<void>(e.error(), "merge failed, store unchanged: " + e.message());
    };
    // The index is built in place (what it finds does not change), so a
    // failed merge does not leave the next one to read every buffer again.
    refresh_buffer_index();
    // What the merge will do. Keys and buffers new to this store: the new
    // buffers, deduplicated among themselves, in a store of their own (its
    // buffer j becomes buffer buffers_.size() + j); a new key names either
    // an existing buffer or one of those, and keeps the hash its lookup
    // made. Alignments that rise: existing keys (each key of `other` once)
    // and existing buffers (several keys of `other` may raise one: `raised`
    // finds its entry).
    struct NewKey {
      const StoreKey* key;
      std::uint64_t key_hash;
      std::uint32_t buffer;
    };
    const auto nbuffers_now = static_cast<std::uint32_t>(buffers_.size());
    NamedDataStore fresh;
    std::vector<NewKey> new_keys;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> key_alignments, buffer_alignments;
    detail::FlatIndex raised;
    auto raise = [&](std::uint32_t b, std::string_view key, std::uint64_t a1, std::uint64_t a2) -> Expected<void> {
      bool inserted = false;
      const std::uint32_t at =
          raised.find_or_insert(b, 0, static_cast<std::uint32_t>(buffer_alignments.size()), inserted);
      if (inserted) buffer_alignments.emplace_back(b, buffers_[b].alignment);
      std::uint64_t& now = buffer_alignments[at].second;
      // a1 is the key's own request; a2 the other store's buffer's, which
      // that store's keys with these bytes ask for (said as such).
      for (const std::uint64_t a : {a1, a2}) {
        const std::optional<std::uint64_t> l = detail::lcm_alignment(now, a);
        if (!l) return lcm_overflow(key, now, a, true, a == a2 && a != a1);
        now = *l;
      }
      return {};
    };
    for (const StoreKey& k : other.keys_) {
      // A store filled through StoreAccess (the bulk path) had none of
      // add_named_data's checks: a key may point past its buffers, and a
      // buffer ask for alignment 0, which divided by zero in the lcms below
      // (SIGFPE) until a mutation sweep found it (2026-12-06).
      if (k.buffer_index >= other.buffers_.size())
        return failed(Expected<void>(Error::InvalidArgument,
                                     detail::cat("key ", detail::quote_name(k.key), " points at buffer ", k.buffer_index,
                                                 " but the merged store has ",
                                                 detail::counted(other.buffers_.size(), "buffer"))));
      const StoreBuffer& ob = other.buffers_[k.buffer_index];
      const auto align = static_cast<std::int64_t>(k.alignment);
      if (Expected<void> c = detail::check_entry("", k.key, ob.bytes, align, k.layout); !c) return failed(c);
      if (ob.alignment == 0 || ob.alignment > kMaxAlignment)
        return failed(Expected<void>(Error::InvalidAlignment,
                                     detail::cat("key ", detail::quote_name(k.key), ": its buffer in the merged store has "
                                                 "alignment ", ob.alignment, "; it must be in [1, ", kMaxAlignment, "]")));
      const std::uint64_t key_h = key_index_.hash(k.key);
      if (const std::uint32_t found = key_index_.find(k.key, key_h, key_of()); found != detail::IdIndex::kNone) {
        const StoreKey& mine = keys_[found];
        if (Expected<void> r = same_entry(mine, ob.bytes, k.layout); !r) return failed(r);
        const std::optional<std::uint64_t> key_align = detail::lcm_alignment(mine.alignment, k.alignment);
        if (!key_align) return failed(lcm_overflow(k.key, mine.alignment, k.alignment));
        if (Expected<void> r = raise(mine.buffer_index, k.key, k.alignment, ob.alignment); !r) return failed(r);
        key_alignments.emplace_back(found, *key_align);
      } else if (const std::optional<std::uint32_t> existing = find_buffer(ob.bytes)) {
        if (Expected<void> r = raise(*existing, k.key, k.alignment, ob.alignment); !r) return failed(r);
        new_keys.push_back(NewKey{&k, key_h, *existing});
      } else {
        // New bytes: `fresh` applies the rules among the merge's own new
        // buffers (an lcm of the keys' requests; same bytes, one buffer).
        if (Expected<void> r = fresh.add_named_data(k.key, ob.bytes, align, k.layout); !r) return failed(r);
        const std::uint32_t j = fresh.keys_.back().buffer_index;
        StoreBuffer& fb = fresh.buffers_[j];
        const std::optional<std::uint64_t> l = detail::lcm_alignment(fb.alignment, ob.alignment);
        if (!l) return failed(lcm_overflow(k.key, fb.alignment, ob.alignment, false, true));
        fb.alignment = *l;
        new_keys.push_back(NewKey{&k, key_h, nbuffers_now + j});
      }
    }
    // Everything checked. Room first, with the new keys built, so that
    // nothing below allocates: out of memory (std::bad_alloc) before this
    // point leaves the store as it was.
    const std::size_t nbuffers = buffers_.size() + fresh.buffers_.size();
    const std::size_t nkeys = keys_.size() + new_keys.size();
    Table<StoreKey> built;
    built.reserve(new_keys.size());
    for (const NewKey& n : new_keys) {
      StoreKey& s = built.emplace_back();
      s.key = n.key->key;
      s.buffer_index = n.buffer;
      s.alignment = n.key->alignment;
      s.layout = n.key->layout;
    }
    room_for(keys_, nkeys);
    key_index_.reserve(nkeys, key_of());
    if (!fresh.buffers_.empty()) {
      room_for(buffers_, nbuffers);
      room_for(content_next_, nbuffers);
      room_for(size_classes_, size_classes_.size() + fresh.buffers_.size());
      by_pointer_.reserve(nbuffers);
      by_size_.reserve(size_classes_.size() + fresh.buffers_.size());
      by_content_.reserve(nbuffers);
    }
    for (const auto& [i, a] : key_alignments) keys_[i].alignment = a;
    for (const auto& [b, a] : buffer_alignments) buffers_[b].alignment = a;
    for (const StoreBuffer& b : fresh.buffers_) append_buffer(b.bytes, b.alignment);
    for (std::size_t i = 0; i < built.size(); ++i) {
      const auto id = static_cast<std::uint32_t>(keys_.size());
      keys_.push_back(std::move(built[i]));
      key_index_.insert(keys_[id].key, new_keys[i].key_hash, id, key_of());
    }
    return {};
  }

  const Table<StoreBuffer>& buffers() const noexcept { return buffers_; }
  const Table<StoreKey>& keys() const noexcept { return keys_; }
  std::size_t key_count() const noexcept { return keys_.size(); }
  std::size_t buffer_count() const noexcept { return buffers_.size(); }

  /// The key's entry, or nullptr.
  template <int = 0>
  const StoreKey* find(std::string_view key) const {
    const std::uint32_t k = key_index_.find(key, key_index_.hash(key), key_of());
    return k == detail::IdIndex::kNone ? nullptr : &keys_[k];
  }
  /// The bytes a key names (empty span if absent).
  template <int = 0>
  ByteSpan bytes_of(std::string_view key) const {
    const StoreKey* k = find(key);
    return k ? buffers_[k->buffer_index].bytes : ByteSpan();
  }
  /// Sum of the unique buffers' sizes: what a file must hold, before padding.
  std::uint64_t bytes_stored() const noexcept {
    std::uint64_t n = 0;
    for (const StoreBuffer& b : buffers_) n += b.bytes.size();
    return n;
  }

 private:
  friend struct detail::StoreAccess;

  /// `shared`: `a` is the alignment of a buffer whose bytes other keys
  /// hold too (said, or the message reads as if `key` had asked for it).
  /// `merged`: `b` is a merged store's buffer's, not `key`'s own request.
  template <int = 0>
  static Expected<void> lcm_overflow(std::string_view key, std::uint64_t a, std::uint64_t b, bool shared = false,
                                     bool merged = false) {
    std::string why;
    if (shared) why = detail::cat("its bytes are held once with the equal bytes of other keys, which ask for ", a);
    if (merged) why += detail::cat(shared ? "; " : "", "in the merged store, the keys with these bytes ask for ", b);
    if (!why.empty()) why = " (" + why + ")";
    return Expected<void>(Error::InvalidAlignment, detail::cat("key ", detail::quote_name(key), ": lcm of alignments ",
                                                               a, " and ", b, " exceeds the maximum of ",
                                                               kMaxAlignment, why));
  }

  /// Whether key `k` may be added again with `bytes` and `layout`:
  /// KeyConflict (with the first byte that differs) or LayoutMismatch if not.
  template <int = 0>
  Expected<void> same_entry(const StoreKey& k, ByteSpan bytes, const std::optional<Layout>& layout) const {
    const ByteSpan held = buffers_[k.buffer_index].bytes;
    if (!detail::same_bytes(held, bytes))
      return Expected<void>(Error::KeyConflict,
                            detail::cat("key ", detail::quote_name(k.key), " already holds ",
                                        detail::counted(held.size(), "byte that differs", "bytes that differ"),
                                        " from the ", detail::counted(bytes.size(), "byte"), " added now",
                                        detail::first_difference(held, bytes)));
    if (k.layout != layout) {
      // A layout on one add only says which add had none (not "already has
      // layout no layout", as it read until a user trial).
      std::string why = k.layout && layout
                            ? detail::cat(" already has layout ", detail::describe_layout(k.layout), ", not ",
                                          detail::describe_layout(layout))
                        : k.layout ? detail::cat(" already has layout ", detail::describe_layout(k.layout),
                                                 ", and this add has no layout")
                                   : detail::cat(" already has no layout, and this add has layout ",
                                                 detail::describe_layout(layout));
      return Expected<void>(Error::LayoutMismatch, detail::cat("key ", detail::quote_name(k.key), why));
    }
    return {};
  }

  KeyOf key_of() const { return KeyOf{&keys_}; }
  /// Capacity for one more element (growing geometrically, as push_back
  /// would), so that the push_back after it cannot allocate.
  template <class V>
  static void room_for_one(V& v) {
    if (v.size() == v.capacity()) v.reserve(v.size() < 8 ? 16 : v.size() * 2);
  }
  /// Capacity for `n` elements, growing at least geometrically: a reserve
  /// of exactly n on every merge of a few keys moved the whole table each
  /// time (16,000 one-key merges: 1.06 s, against 4 ms of adds).
  template <class V>
  static void room_for(V& v, std::size_t n) {
    if (n > v.capacity()) v.reserve(n > 2 * v.capacity() ? n : 2 * v.capacity());
  }
  /// Appends a key and indexes it.
  template <int = 0>
  void append_key(std::string_view key, std::uint64_t key_h, std::uint32_t buffer, std::uint64_t alignment,
                  std::optional<Layout> layout) {
    const std::uint32_t id = push_key(key, buffer, alignment, std::move(layout));
    key_index_.insert(keys_[id].key, key_h, id, key_of());
  }
  /// A StoreKey made by construction, straight into keys_: emplace_back
  /// initialises the key from this conversion's result, which GCC and Clang
  /// build in place (no StoreKey or string is moved). A default key filled
  /// with assign() called libstdc++'s out-of-line _M_replace per key
  /// (deduplicate() on 100,000 small tensors, callgrind: its store of
  /// 50,000 keys took 9.5M instructions that way, 7.3M this way).
  struct KeyRow {
    std::string_view key;
    std::uint32_t buffer;
    std::uint64_t alignment;
    std::optional<Layout>* layout;
    operator StoreKey() const { return StoreKey{std::string(key), buffer, alignment, std::move(*layout)}; }
  };
  /// Appends a key without indexing it (the bulk path's caller indexes the
  /// keys itself). Built in place: the key's characters are copied once,
  /// into the StoreKey itself (no temporary string or StoreKey to move).
  template <int = 0>
  std::uint32_t push_key(std::string_view key, std::uint32_t buffer, std::uint64_t alignment,
                         std::optional<Layout> layout) {
    const auto id = static_cast<std::uint32_t>(keys_.size());
    keys_.emplace_back(KeyRow{key, buffer, alignment, &layout});
    return id;
  }

  /// `index_now = false` (the bulk path) leaves the buffer indexes for
  /// later: a store filled by deduplicate() must not hash its bytes, nor
  /// build indexes nobody may use, unless someone adds to it afterwards.
  template <int = 0>
  std::uint32_t append_buffer(ByteSpan bytes, std::uint64_t alignment, bool index_now = true) {
    const auto index = static_cast<std::uint32_t>(buffers_.size());
    buffers_.push_back(StoreBuffer{bytes, alignment});
    content_next_.push_back(kNone);
    if (index_now) index_buffer(index);
    else index_stale_ = true;
    return index;
  }

  /// Indexes buffer `index` by (pointer, size) and size; a size class that
  /// now holds two or more buffers gets its contents hashed.
  template <int = 0>
  void index_buffer(std::uint32_t index) {
    const ByteSpan bytes = buffers_[index].bytes;
    bool fresh = false;
    by_pointer_.find_or_insert(pointer_word(bytes), bytes.size(), index, fresh);
    const std::uint32_t c =
        by_size_.find_or_insert(bytes.size(), 0, static_cast<std::uint32_t>(size_classes_.size()), fresh);
    if (fresh) size_classes_.push_back(SizeClass{index, 0});
    SizeClass& sc = size_classes_[c];
    if (sc.count == 1) index_content(sc.first);
    if (sc.count >= 1) index_content(index);
    ++sc.count;
  }

  /// Builds what the bulk path left out: every buffer's (pointer, size) and
  /// size entries, and the content hash of every size that several share.
  template <int = 0>
  void refresh_buffer_index() {
    if (!index_stale_) return;
    by_pointer_.reset(buffers_.size());
    by_size_.reset(16);
    size_classes_.clear();
    by_content_.reset(16);
    content_next_.assign(buffers_.size(), kNone);
    for (std::uint32_t i = 0; i < buffers_.size(); ++i) index_buffer(i);
    index_stale_ = false;
  }

  static std::uint64_t pointer_word(ByteSpan b) noexcept { return reinterpret_cast<std::uintptr_t>(b.data()); }
  /// Buffers with the same content hash are chained through content_next_
  /// (a hash collision only lengthens the chain; bytes decide).
  template <int = 0>
  void index_content(std::uint32_t buffer) {
    const ByteSpan b = buffers_[buffer].bytes;
    bool fresh = false;
    std::uint32_t q = by_content_.find_or_insert(b.size(), Xxh3Hash{}(b.data(), b.size(), content_seed_), buffer, fresh);
    if (fresh) return;
    while (content_next_[q] != kNone) q = content_next_[q];
    content_next_[q] = buffer;
  }

  /// Cheap first: the same memory is found without reading it; a size seen
  /// once is compared directly (no hash); only sizes shared by several
  /// buffers are hashed, and then looked up in O(1), never scanned.
  template <int = 0>
  std::optional<std::uint32_t> find_buffer(ByteSpan bytes) const {
    const std::uint32_t c = by_size_.find(bytes.size(), 0);
    if (c == kNone) return std::nullopt;
    if (const std::uint32_t p = by_pointer_.find(pointer_word(bytes), bytes.size()); p != kNone) return p;
    const SizeClass& sc = size_classes_[c];
    if (sc.count == 1)
      return detail::same_bytes(buffers_[sc.first].bytes, bytes) ? std::optional<std::uint32_t>(sc.first)
                                                                 : std::nullopt;
    for (std::uint32_t q = by_content_.find(bytes.size(), Xxh3Hash{}(bytes.data(), bytes.size(), content_seed_));
         q != kNone;
         q = content_next_[q])
      if (detail::same_bytes(buffers_[q].bytes, bytes)) return q;
    return std::nullopt;
  }

  static constexpr std::uint32_t kNone = detail::FlatIndex::kNone;
  struct SizeClass {
    std::uint32_t first = 0;
    std::uint32_t count = 0;
  };

  Table<StoreBuffer> buffers_;
  Table<StoreKey> keys_;
  detail::IdIndex key_index_;  // key -> index in keys_
  // Buffer indexes (stale after the bulk path until refresh_buffer_index()).
  detail::FlatIndex by_pointer_;            // (data, size) -> buffer
  detail::FlatIndex by_size_;               // size -> index in size_classes_
  std::vector<SizeClass> size_classes_;
  detail::FlatIndex by_content_;            // (size, content hash) -> first buffer
  Table<std::uint32_t> content_next_;       // buffer -> next buffer with that content hash
  bool index_stale_ = false;
  // The content hash's seed, this store's own and random: with a known
  // seed, bytes chosen to collide (XXH3 of 17-128 bytes multiplies words
  // XORed with its secret: a first word equal to the secret's makes the
  // product 0, whatever follows) chain in one list that every add walks:
  // 65,536 such 32-byte buffers took 9.2 s to add, from a .ptd file too
  // (the demo's --per-method), against 0.047 s. A copy keeps the seed
  // with the index it made. Hashes never reach an output.
  std::uint64_t content_seed_ = detail::unpredictable_u64();
};

namespace detail {
/// deduplicate() already knows which bytes are identical (it confirmed them
/// in parallel); this lets it fill a store without hashing again.
struct StoreAccess {
  /// Room for `buffers` buffers and `keys` keys. The key index is the
  /// caller's to give (set_key_index): an empty one sized for the keys to
  /// add, or one that already holds them all.
  template <int = 0>
  static void reserve(NamedDataStore& s, std::size_t buffers, std::size_t keys) {
    s.buffers_.reserve(buffers);
    s.content_next_.reserve(buffers);
    s.keys_.reserve(keys);
  }
  template <int = 0>
  static std::uint32_t add_buffer(NamedDataStore& s, ByteSpan bytes, std::uint64_t alignment) {
    return s.append_buffer(bytes, alignment, /*index_now=*/false);
  }
  /// `key` must not be in the store yet.
  template <int = 0>
  static void add_key(NamedDataStore& s, std::string_view key, std::uint32_t buffer, std::uint64_t alignment,
                      std::optional<Layout> layout) {
    s.append_key(key, s.key_index_.hash(key), buffer, alignment, std::move(layout));
  }
  /// Appends a key that is not indexed: the caller hands over the index of
  /// every key with set_key_index once they are all added. Nothing checks
  /// that `key` is new here; the writer refuses a store that repeats one.
  template <int = 0>
  static void add_key_unindexed(NamedDataStore& s, std::string_view key, std::uint32_t buffer,
                                std::uint64_t alignment, std::optional<Layout> layout) {
    s.push_key(key, buffer, alignment, std::move(layout));
  }
  /// `index` maps every key's text (under its own seed) to its position, or is
  /// empty and sized for the keys add_key will add.
  template <int = 0>
  static void set_key_index(NamedDataStore& s, IdIndex&& index) { s.key_index_ = std::move(index); }
  /// Hands the key index back; the store is then only fit to be dropped.
  template <int = 0>
  static IdIndex take_key_index(NamedDataStore& s) noexcept { return std::move(s.key_index_); }
  /// Sets an empty store's content seed, for the tests: under a known seed
  /// they can make bytes collide and walk the chains.
  static void set_content_seed(NamedDataStore& s, std::uint64_t seed) noexcept { s.content_seed_ = seed; }
  /// The longest chain of buffers that share a content hash (what an add
  /// of bytes with that hash walks), for the tests.
  template <int = 0>
  static std::size_t longest_content_chain(const NamedDataStore& s) {
    std::vector<std::uint8_t> linked(s.content_next_.size(), 0);  // some buffer's next
    for (const std::uint32_t n : s.content_next_)
      if (n != NamedDataStore::kNone) linked[n] = 1;
    std::size_t longest = 0;
    for (std::uint32_t head = 0; head < s.content_next_.size(); ++head) {
      if (linked[head]) continue;
      std::size_t n = 1;
      for (std::uint32_t q = s.content_next_[head]; q != NamedDataStore::kNone; q = s.content_next_[q]) ++n;
      if (n > longest) longest = n;
    }
    return longest;
  }
};
}  // namespace detail

}  // namespace wdedup

#endif  // WDEDUP_NAMED_DATA_STORE_HPP
