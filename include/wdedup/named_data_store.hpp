// wdedup/named_data_store.hpp — the build-time named-data store: keys that
// name byte buffers, identical bytes held once. ExecuTorch's NamedDataStore
// semantics, with its gaps fixed (alignment is the lcm of every key's
// request; a failed add or merge changes nothing). Build-time half.
//
// The store does not copy bytes: it keeps ByteSpans into caller memory,
// which must outlive the store and anything written from it.
#ifndef WDEDUP_NAMED_DATA_STORE_HPP
#define WDEDUP_NAMED_DATA_STORE_HPP

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wdedup/expected.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/program.hpp"

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

inline std::string describe_layout(const std::optional<Layout>& l) {
  if (!l) return "no layout";
  std::string s = scalar_type_name(l->scalar_type);
  if (s.empty()) s = "type " + std::to_string(static_cast<int>(l->scalar_type));
  s += " [";
  for (std::size_t i = 0; i < l->sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(l->sizes[i]);
  s += "] dim_order [";
  for (std::size_t i = 0; i < l->dim_order.size(); ++i)
    s += (i ? ", " : "") + std::to_string(l->dim_order[i]);
  return s + "]";
}

/// Checks an (alignment, layout, bytes) triple for key `key`: the rules every
/// entry point shares. `where` prefixes the message (e.g. "method 'decode'
/// partition 0: ").
inline Expected<void> check_entry(std::string_view where, std::string_view key, ByteSpan bytes,
                                  std::int64_t alignment, const std::optional<Layout>& layout) {
  if (key.empty()) return Expected<void>(Error::InvalidName, cat(where, "empty key"));
  if (alignment <= 0)
    return Expected<void>(Error::InvalidAlignment,
                          cat(where, "key ", quote_name(key), ": alignment must be a positive integer, got ",
                              alignment));
  if (static_cast<std::uint64_t>(alignment) > kMaxAlignment)
    return Expected<void>(Error::InvalidAlignment,
                          cat(where, "key ", quote_name(key), ": alignment ", alignment,
                              " exceeds the maximum of ", kMaxAlignment));
  if (layout) {
    const std::optional<std::uint64_t> n = layout->nbytes();
    if (!n)
      return Expected<void>(Error::LayoutMismatch,
                            cat(where, "key ", quote_name(key), ": layout is inconsistent (",
                                describe_layout(layout),
                                "): unknown type, negative size, dim_order not a permutation of "
                                "0..rank-1, or a byte count over 64 bits"));
    if (*n != bytes.size())
      return Expected<void>(Error::LayoutMismatch,
                            cat(where, "key ", quote_name(key), ": layout ", describe_layout(layout),
                                " describes ", *n, " bytes but the data has ", bytes.size(), " bytes"));
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
///  - same key, different bytes: Error::KeyConflict naming the key and both
///    sizes; the store is left exactly as it was;
///  - same key, same bytes, different layout: Error::LayoutMismatch;
///  - different keys, same bytes: one buffer; each key keeps its own
///    alignment and layout; the buffer's alignment is the lcm of all of them;
///  - alignment <= 0 (or over kMaxAlignment): Error::InvalidAlignment;
///    non-powers of two are fine.
/// Keys and buffers are reported in first-insertion order.
class NamedDataStore {
 public:
  Expected<void> add_named_data(std::string_view key, ByteSpan bytes, std::int64_t alignment = 1,
                                std::optional<Layout> layout = std::nullopt) {
    if (Expected<void> c = detail::check_entry("", key, bytes, alignment, layout); !c) return c;
    const auto align = static_cast<std::uint64_t>(alignment);
    const std::string key_str(key);

    if (auto it = key_index_.find(key_str); it != key_index_.end()) {
      StoreKey& k = keys_[it->second];
      StoreBuffer& b = buffers_[k.buffer_index];
      if (!detail::same_bytes(b.bytes, bytes)) {
        return Expected<void>(
            Error::KeyConflict,
            detail::cat("key ", detail::quote_name(key), " already holds ", b.bytes.size(),
                        " bytes that differ from the ", bytes.size(), " bytes added now"));
      }
      if (k.layout != layout) {
        return Expected<void>(
            Error::LayoutMismatch,
            detail::cat("key ", detail::quote_name(key), " already has layout ",
                        detail::describe_layout(k.layout), ", not ", detail::describe_layout(layout)));
      }
      const std::optional<std::uint64_t> key_align = detail::lcm_alignment(k.alignment, align);
      const std::optional<std::uint64_t> buf_align = detail::lcm_alignment(b.alignment, align);
      if (!key_align || !buf_align) return lcm_overflow(key, b.alignment, align);
      k.alignment = *key_align;
      b.alignment = *buf_align;
      return {};
    }

    refresh_content_index();
    const std::optional<std::uint32_t> existing = find_buffer(bytes);
    std::uint64_t buf_align = align;
    if (existing) {
      const std::optional<std::uint64_t> l = detail::lcm_alignment(buffers_[*existing].alignment, align);
      if (!l) return lcm_overflow(key, buffers_[*existing].alignment, align);
      buf_align = *l;
    }
    // All checks passed: from here on nothing can fail, so the store is
    // either fully updated or untouched.
    std::uint32_t index;
    if (existing) {
      index = *existing;
      buffers_[index].alignment = buf_align;
    } else {
      index = append_buffer(bytes, align);
    }
    key_index_.emplace(key_str, static_cast<std::uint32_t>(keys_.size()));
    keys_.push_back(StoreKey{key_str, index, align, std::move(layout)});
    return {};
  }

  /// Adds every key of `other` (in its order) under the same rules. All or
  /// nothing: on the first failure the store is left exactly as it was and
  /// the error names the offending key.
  Expected<void> merge(const NamedDataStore& other) {
    NamedDataStore next = *this;
    for (const StoreKey& k : other.keys_) {
      const ByteSpan bytes = other.buffers_[k.buffer_index].bytes;
      Expected<void> r =
          next.add_named_data(k.key, bytes, static_cast<std::int64_t>(k.alignment), k.layout);
      if (!r)
        return Expected<void>(r.error(), "merge failed, store unchanged: " + r.message());
      // A buffer's alignment in `other` may exceed its keys' own (it is the
      // lcm over keys); carry it over so merging never loses a request.
      StoreBuffer& nb = next.buffers_[next.keys_[next.key_index_.at(k.key)].buffer_index];
      const std::optional<std::uint64_t> l =
          detail::lcm_alignment(nb.alignment, other.buffers_[k.buffer_index].alignment);
      if (!l) return lcm_overflow(k.key, nb.alignment, other.buffers_[k.buffer_index].alignment);
      nb.alignment = *l;
    }
    *this = std::move(next);
    return {};
  }

  const std::vector<StoreBuffer>& buffers() const noexcept { return buffers_; }
  const std::vector<StoreKey>& keys() const noexcept { return keys_; }
  std::size_t key_count() const noexcept { return keys_.size(); }
  std::size_t buffer_count() const noexcept { return buffers_.size(); }

  /// The key's entry, or nullptr.
  const StoreKey* find(std::string_view key) const {
    auto it = key_index_.find(std::string(key));
    return it == key_index_.end() ? nullptr : &keys_[it->second];
  }
  /// The bytes a key names (empty span if absent).
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

  static Expected<void> lcm_overflow(std::string_view key, std::uint64_t a, std::uint64_t b) {
    return Expected<void>(Error::InvalidAlignment,
                          detail::cat("key ", detail::quote_name(key), ": lcm of alignments ", a, " and ", b,
                                      " exceeds the maximum of ", kMaxAlignment));
  }

  /// `index_now = false` (the bulk path) leaves hashing for later: a store
  /// filled by deduplicate() must not read its bytes again unless someone
  /// adds to it afterwards.
  std::uint32_t append_buffer(ByteSpan bytes, std::uint64_t alignment, bool index_now = true) {
    const auto index = static_cast<std::uint32_t>(buffers_.size());
    buffers_.push_back(StoreBuffer{bytes, alignment});
    by_pointer_.emplace(pointer_key(bytes), index);
    SizeClass& c = by_size_[bytes.size()];
    if (c.count == 0) c.first = index;
    if (!index_now) content_stale_ = true;
    else if (c.count >= 1) index_content(index);  // the class now has two or more buffers
    if (index_now && c.count == 1) index_content(c.first);
    ++c.count;
    return index;
  }

  /// Hashes what the bulk path left unhashed: every buffer of a size that
  /// several buffers share.
  void refresh_content_index() {
    if (!content_stale_) return;
    by_content_.clear();
    for (std::uint32_t i = 0; i < buffers_.size(); ++i)
      if (by_size_.at(buffers_[i].bytes.size()).count >= 2) index_content(i);
    content_stale_ = false;
  }

  /// Buffers are located by (pointer, size) first: bytes already in the
  /// store under the same memory are equal without reading them.
  static std::uint64_t pointer_key(ByteSpan b) noexcept {
    return reinterpret_cast<std::uintptr_t>(b.data()) * 0x9E3779B97F4A7C15ull ^ b.size();
  }
  static std::uint64_t content_key(std::uint64_t size, std::uint64_t hash) noexcept {
    return hash ^ (size * 0xC2B2AE3D27D4EB4Full);
  }
  void index_content(std::uint32_t buffer) {
    const ByteSpan b = buffers_[buffer].bytes;
    by_content_.emplace(content_key(b.size(), Xxh3Hash{}(b.data(), b.size(), 0)), buffer);
  }

  /// Cheap first: the same memory is found without reading it; a size seen
  /// once is compared directly (no hash); only sizes shared by several
  /// buffers are hashed, and then looked up in O(1), never scanned.
  std::optional<std::uint32_t> find_buffer(ByteSpan bytes) const {
    auto it = by_size_.find(bytes.size());
    if (it == by_size_.end()) return std::nullopt;
    for (auto [p, end] = by_pointer_.equal_range(pointer_key(bytes)); p != end; ++p)
      if (buffers_[p->second].bytes.data() == bytes.data() && buffers_[p->second].bytes.size() == bytes.size())
        return p->second;
    if (it->second.count == 1)
      return detail::same_bytes(buffers_[it->second.first].bytes, bytes) ? std::optional<std::uint32_t>(it->second.first)
                                                                        : std::nullopt;
    const std::uint64_t key = content_key(bytes.size(), Xxh3Hash{}(bytes.data(), bytes.size(), 0));
    for (auto [c, end] = by_content_.equal_range(key); c != end; ++c)
      if (detail::same_bytes(buffers_[c->second].bytes, bytes)) return c->second;
    return std::nullopt;
  }

  struct SizeClass {
    std::uint32_t first = 0;
    std::uint32_t count = 0;
  };

  std::vector<StoreBuffer> buffers_;
  std::vector<StoreKey> keys_;
  std::unordered_map<std::string, std::uint32_t> key_index_;
  std::unordered_map<std::uint64_t, SizeClass> by_size_;
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_pointer_;  // pointer_key -> buffer
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_content_;  // content_key -> buffer (shared sizes only)
  bool content_stale_ = false;
};

namespace detail {
/// deduplicate() already knows which bytes are identical (it confirmed them
/// in parallel); this lets it fill a store without hashing again.
struct StoreAccess {
  static void reserve(NamedDataStore& s, std::size_t buffers, std::size_t keys) {
    s.buffers_.reserve(buffers);
    s.by_pointer_.reserve(buffers);
    s.keys_.reserve(keys);
    s.key_index_.reserve(keys);
  }
  static std::uint32_t add_buffer(NamedDataStore& s, ByteSpan bytes, std::uint64_t alignment) {
    return s.append_buffer(bytes, alignment, /*index_now=*/false);
  }
  static void add_key(NamedDataStore& s, std::string key, std::uint32_t buffer, std::uint64_t alignment,
                      std::optional<Layout> layout) {
    s.key_index_.emplace(key, static_cast<std::uint32_t>(s.keys_.size()));
    s.keys_.push_back(StoreKey{std::move(key), buffer, alignment, std::move(layout)});
  }
  static void set_buffer_alignment(NamedDataStore& s, std::uint32_t buffer, std::uint64_t alignment) {
    s.buffers_[buffer].alignment = alignment;
  }
};
}  // namespace detail

}  // namespace wdedup

#endif  // WDEDUP_NAMED_DATA_STORE_HPP
