// Tests for wdedup/named_data_store.hpp: every behaviour of ExecuTorch's
// NamedDataStore, and the gaps we fix (lcm alignment, all-or-nothing).
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wdedup/named_data_store.hpp"

#include "support/no_access.hpp"
#include "support/require_value.hpp"
#include "support/store_dump.hpp"

using namespace wdedup;
using wdedup_test::dump;  // equal dumps mean equal stores

namespace {
ByteSpan span(const std::vector<std::uint8_t>& v) { return ByteSpan(v.data(), v.size()); }
std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7);
  return v;
}
}  // namespace

TEST_CASE("a new key with new bytes makes one buffer and one key") {
  NamedDataStore s;
  const auto a = bytes(100, 1);
  REQUIRE(s.add_named_data("a", span(a), 16).ok());
  CHECK(s.buffer_count() == 1);
  CHECK(s.key_count() == 1);
  CHECK(s.keys()[0].key == "a");
  CHECK(s.keys()[0].buffer_index == 0);
  CHECK(s.keys()[0].alignment == 16);
  CHECK(s.buffers()[0].alignment == 16);
  CHECK(s.buffers()[0].bytes.data() == a.data());
  CHECK(s.bytes_stored() == 100);
}

TEST_CASE("bytes_of: the bytes a key names, an empty span with no data pointer for a key not in the store") {
  NamedDataStore s;
  const auto a = bytes(16, 1), b = bytes(8, 2);
  REQUIRE(s.add_named_data("a", span(a)).ok());
  REQUIRE(s.add_named_data("b", span(b)).ok());
  CHECK(s.bytes_of("b").data() == b.data());
  CHECK(s.bytes_of("b").size() == 8);
  CHECK(s.bytes_of("c").data() == nullptr);
  CHECK(s.bytes_of("c").size() == 0);
  CHECK(s.bytes_of("").data() == nullptr);
}

TEST_CASE("a moved-from store is empty and usable, by construction and by assignment") {
  const auto a = bytes(16, 1), b = bytes(16, 2), c = bytes(8, 3);
  NamedDataStore s;
  REQUIRE(s.add_named_data("a", span(a), 4).ok());
  REQUIRE(s.add_named_data("b", span(b)).ok());
  const std::string before = dump(s);
  NamedDataStore moved(std::move(s));
  CHECK(dump(moved) == before);
  // The moved-from store used to probe an empty index (an out-of-bounds
  // read, ASan: SEGV in IdIndex::probe).
  CHECK(s.key_count() == 0);
  CHECK(s.buffer_count() == 0);
  CHECK(s.find("a") == nullptr);
  REQUIRE(s.add_named_data("c", span(c)).ok());
  REQUIRE(s.add_named_data("a", span(a)).ok());  // the same bytes as moved's, a buffer of its own here
  CHECK(s.key_count() == 2);
  CHECK(s.buffer_count() == 2);
  const StoreKey& c_key = REQUIRE_FOUND(s.find("c"));
  CHECK(c_key.buffer_index == 0);
  REQUIRE(s.merge(moved).ok());
  CHECK(s.key_count() == 3);
  CHECK(s.buffer_count() == 3);
  const StoreKey& b_key = REQUIRE_FOUND(s.find("b"));
  CHECK(b_key.buffer_index == 2);

  NamedDataStore target;
  target = std::move(moved);
  CHECK(dump(target) == before);
  CHECK(moved.find("b") == nullptr);
  REQUIRE(moved.add_named_data("b", span(b)).ok());
  CHECK(moved.key_count() == 1);
  const StoreKey& moved_b = REQUIRE_FOUND(moved.find("b"));
  CHECK(moved_b.buffer_index == 0);
}

TEST_CASE("same key, same bytes: no change") {
  NamedDataStore s;
  const auto a = bytes(64, 1);
  const auto a_copy = a;  // equal bytes, other memory
  REQUIRE(s.add_named_data("w", span(a), 8).ok());
  const std::string before = dump(s);
  REQUIRE(s.add_named_data("w", span(a_copy), 8).ok());
  CHECK(dump(s) == before);
  CHECK(s.buffer_count() == 1);
  CHECK(s.key_count() == 1);
  CHECK(s.buffers()[0].bytes.data() == a.data());  // the first bytes stay
}

TEST_CASE("same key, same bytes, another alignment: the key keeps both requests (lcm)") {
  NamedDataStore s;
  const auto a = bytes(64, 1);
  REQUIRE(s.add_named_data("w", span(a), 8).ok());
  REQUIRE(s.add_named_data("w", span(a), 12).ok());
  CHECK(s.key_count() == 1);
  CHECK(s.keys()[0].alignment == 24);
  CHECK(s.buffers()[0].alignment == 24);
}

TEST_CASE("same key, different bytes: error naming the key, both sizes and the first byte that differs, store unchanged") {
  NamedDataStore s;
  const auto a = bytes(100, 1);
  const auto b = bytes(120, 2);
  auto c = a;
  c[57] ^= 1;
  REQUIRE(s.add_named_data("layers.0.wq", span(a), 16).ok());
  const std::string before = dump(s);

  Expected<void> r = s.add_named_data("layers.0.wq", span(b), 16);
  CHECK(r.error() == Error::KeyConflict);
  CHECK(r.message() == "key 'layers.0.wq' already holds 100 bytes that differ from the 120 bytes added now");
  CHECK(dump(s) == before);

  r = s.add_named_data("layers.0.wq", span(c), 16);  // same size, one byte differs
  CHECK(r.error() == Error::KeyConflict);
  CHECK(r.message() == "key 'layers.0.wq' already holds 100 bytes that differ from the 100 bytes added now "
                       "(first difference at byte 57)");
  CHECK(dump(s) == before);

  // The same memory, more or fewer of its bytes: not the same bytes (a
  // check that took one pointer for equal bytes before comparing sizes
  // let both through, the key keeping its 100).
  NamedDataStore t;
  const auto big = bytes(120, 7);
  REQUIRE(t.add_named_data("k", ByteSpan(big.data(), 100), 16).ok());
  REQUIRE(t.buffers()[0].bytes.data() == big.data());
  const std::string with_k = dump(t);
  r = t.add_named_data("k", ByteSpan(big.data(), 120), 16);
  CHECK(r.error() == Error::KeyConflict);
  CHECK(r.message() == "key 'k' already holds 100 bytes that differ from the 120 bytes added now");
  r = t.add_named_data("k", ByteSpan(big.data(), 60), 16);
  CHECK(r.error() == Error::KeyConflict);
  CHECK(r.message() == "key 'k' already holds 100 bytes that differ from the 60 bytes added now");
  r = t.add_named_data("k", ByteSpan(big.data(), 1), 16);
  CHECK(r.error() == Error::KeyConflict);
  CHECK(r.message() == "key 'k' already holds 100 bytes that differ from the 1 byte added now");
  CHECK(dump(t) == with_k);
  REQUIRE(t.add_named_data("one", ByteSpan(big.data(), 1), 16).ok());
  const std::string with_one = dump(t);
  r = t.add_named_data("one", ByteSpan(big.data(), 2), 16);
  CHECK(r.error() == Error::KeyConflict);
  CHECK(r.message() == "key 'one' already holds 1 byte that differs from the 2 bytes added now");
  CHECK(dump(t) == with_one);
}

TEST_CASE("same key, same bytes, different layout: LayoutMismatch, store unchanged") {
  NamedDataStore s;
  const auto a = bytes(24, 1);
  REQUIRE(s.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Float, {2, 3})).ok());
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Float, {3, 2}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't' already has layout FLOAT [2, 3] dim_order [0, 1], not FLOAT [3, 2] dim_order [0, 1]");
  CHECK(dump(s) == before);
}

TEST_CASE("same key, same bytes, a layout of another scalar type: LayoutMismatch, store unchanged") {
  // FLOAT [6] and INT [6] describe the same 24 bytes: only the scalar type
  // tells them apart, and a key keeps the one it was added with.
  NamedDataStore s;
  const auto a = bytes(24, 1);
  REQUIRE(s.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Float, {6})).ok());
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Int, {6}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't' already has layout FLOAT [6] dim_order [0], not INT [6] dim_order [0]");
  CHECK(dump(s) == before);
  // The same through a merge: refused alike, nothing merged.
  NamedDataStore other;
  REQUIRE(other.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Int, {6})).ok());
  r = s.merge(other);
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() ==
        "merge failed, store unchanged: key 't' already has layout FLOAT [6] dim_order [0], not INT [6] dim_order [0]");
  CHECK(dump(s) == before);
}

TEST_CASE("same key, same bytes, a layout on one add only: LayoutMismatch says which add had none") {
  // Until a user trial the message read "already has layout no layout, not
  // FLOAT [64] ..." and "..., not no layout".
  const auto a = bytes(24, 1);
  NamedDataStore s;
  REQUIRE(s.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Float, {2, 3})).ok());
  Expected<void> r = s.add_named_data("t", span(a), 1);
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't' already has layout FLOAT [2, 3] dim_order [0, 1], and this add has no layout");

  NamedDataStore u;
  REQUIRE(u.add_named_data("t", span(a), 1).ok());
  const std::string before = dump(u);
  r = u.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Float, {2, 3}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't' already has no layout, and this add has layout FLOAT [2, 3] dim_order [0, 1]");
  CHECK(dump(u) == before);
}

TEST_CASE("same key, no bytes, layouts that differ in one size only: LayoutMismatch, store unchanged") {
  // A zero size makes any layout describe 0 bytes, so two layouts of an
  // empty tensor can differ in their first size alone, or their last.
  NamedDataStore s;
  REQUIRE(s.add_named_data("last", ByteSpan(), 1, Layout::contiguous(ScalarType::Float, {0, 3})).ok());
  REQUIRE(s.add_named_data("first", ByteSpan(), 1, Layout::contiguous(ScalarType::Float, {3, 0})).ok());
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("last", ByteSpan(), 1, Layout::contiguous(ScalarType::Float, {0, 4}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() ==
        "key 'last' already has layout FLOAT [0, 3] dim_order [0, 1], not FLOAT [0, 4] dim_order [0, 1]");
  CHECK(dump(s) == before);
  r = s.add_named_data("first", ByteSpan(), 1, Layout::contiguous(ScalarType::Float, {4, 0}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() ==
        "key 'first' already has layout FLOAT [3, 0] dim_order [0, 1], not FLOAT [4, 0] dim_order [0, 1]");
  CHECK(dump(s) == before);
}

TEST_CASE("different keys, same bytes: one buffer, each key keeps its alignment and layout") {
  NamedDataStore s;
  const auto a = bytes(48, 5);
  const auto a_copy = a;
  REQUIRE(s.add_named_data("tok_embeddings.weight", span(a), 16, Layout::contiguous(ScalarType::Half, {4, 6})).ok());
  REQUIRE(s.add_named_data("output.weight", span(a_copy), 32, Layout::contiguous(ScalarType::Half, {6, 4})).ok());
  REQUIRE(s.add_named_data("raw", span(a_copy), 1).ok());
  CHECK(s.buffer_count() == 1);
  REQUIRE(s.key_count() == 3);
  CHECK(s.keys()[0].buffer_index == 0);
  CHECK(s.keys()[1].buffer_index == 0);
  CHECK(s.keys()[2].buffer_index == 0);
  CHECK(s.keys()[0].alignment == 16);
  CHECK(s.keys()[1].alignment == 32);
  CHECK(s.keys()[2].alignment == 1);
  REQUIRE(s.keys()[0].layout.has_value());
  REQUIRE(s.keys()[1].layout.has_value());
  CHECK(s.keys()[0].layout->sizes == std::vector<std::int32_t>{4, 6});
  CHECK(s.keys()[1].layout->sizes == std::vector<std::int32_t>{6, 4});
  CHECK_FALSE(s.keys()[2].layout.has_value());
  CHECK(s.buffers()[0].alignment == 32);
  CHECK(s.bytes_of("raw").data() == a.data());
}

TEST_CASE("alignment 0 or negative is an error; non-powers of two are allowed") {
  NamedDataStore s;
  const auto a = bytes(10, 1);
  Expected<void> r = s.add_named_data("k", span(a), 0);
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'k': alignment must be a positive integer, got 0");
  r = s.add_named_data("k", span(a), -16);
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'k': alignment must be a positive integer, got -16");
  CHECK(s.key_count() == 0);
  CHECK(s.buffer_count() == 0);
  REQUIRE(s.add_named_data("k", span(a), 3).ok());
  CHECK(s.keys()[0].alignment == 3);
  const std::string before = dump(s);
  r = s.add_named_data("huge", span(a), (std::int64_t{1} << 32) + 1);  // the same bytes as "k"
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'huge': alignment 4294967297 exceeds the maximum of 4294967296");
  CHECK(dump(s) == before);
}

TEST_CASE("an alignment of exactly the maximum, and an lcm that reaches it exactly, are taken") {
  // kMaxAlignment itself is in range (the bound is inclusive), and so is an
  // lcm equal to it: only one above it is refused. 2^31 and 2^32 share a
  // factor, so their lcm is 2^32; 2^32 and 3 have none.
  const std::int64_t max = std::int64_t{1} << 32;
  NamedDataStore s;
  const auto a = bytes(10, 1), b = bytes(12, 2);
  REQUIRE(s.add_named_data("k", span(a), max).ok());
  const StoreKey& k_key = REQUIRE_FOUND(s.find("k"));
  CHECK(k_key.alignment == 4294967296u);
  CHECK(s.buffers()[0].alignment == 4294967296u);
  // The same key again, same bytes: lcm(2^32, 2^32) and lcm(2^32, 2^31).
  REQUIRE(s.add_named_data("k", span(a), max).ok());
  REQUIRE(s.add_named_data("k", span(a), max / 2).ok());
  // A new key on the same bytes: the buffer's lcm(2^32, 2) is 2^32.
  REQUIRE(s.add_named_data("k2", span(a), 2).ok());
  // A key at 2^31 raised to 2^32 by its own second request.
  REQUIRE(s.add_named_data("m", span(b), max / 2).ok());
  REQUIRE(s.add_named_data("m", span(b), max).ok());
  CHECK(dump(s) == "buffer 10 @" + std::to_string(reinterpret_cast<std::uintptr_t>(a.data())) +
                       " align 4294967296\nbuffer 12 @" + std::to_string(reinterpret_cast<std::uintptr_t>(b.data())) +
                       " align 4294967296\nkey k -> 0 align 4294967296 no layout\nkey k2 -> 0 align 2 no layout\n"
                       "key m -> 1 align 4294967296 no layout\n");
  // One past it is refused, and changes nothing.
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("k", span(a), 3);
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'k': lcm of alignments 4294967296 and 3 exceeds the maximum of 4294967296");
  CHECK(dump(s) == before);
  // A merge reaching exactly 2^32 is taken too: "k" (2^32) again at 2^31,
  // and new bytes at 2^32 next to a key at 2^31.
  NamedDataStore t;
  const auto a2 = bytes(10, 1), c = bytes(14, 3);
  REQUIRE(t.add_named_data("k", span(a2), max / 2).ok());
  REQUIRE(t.add_named_data("c", span(c), max / 2).ok());
  REQUIRE(t.add_named_data("c2", span(c), max).ok());
  REQUIRE(s.merge(t).ok());
  const StoreKey& merged_k = REQUIRE_FOUND(s.find("k"));
  CHECK(merged_k.alignment == 4294967296u);
  REQUIRE(s.buffer_count() == 3);
  CHECK(s.buffers()[2].alignment == 4294967296u);
  const StoreKey& c_key = REQUIRE_FOUND(s.find("c"));
  CHECK(c_key.alignment == 2147483648u);
  const StoreKey& c2_key = REQUIRE_FOUND(s.find("c2"));
  CHECK(c2_key.alignment == 4294967296u);
}

TEST_CASE("a shared buffer is placed at the lcm of every key's alignment") {
  NamedDataStore s;
  const auto a = bytes(30, 9);
  REQUIRE(s.add_named_data("x", span(a), 4).ok());
  REQUIRE(s.add_named_data("y", span(a), 6).ok());
  CHECK(s.buffers()[0].alignment == 12);
  REQUIRE(s.add_named_data("z", span(a), 10).ok());
  CHECK(s.buffers()[0].alignment == 60);
}

TEST_CASE("an alias asking for 4096 after a first key asked for 16 raises the buffer to 4096") {
  // ExecuTorch keeps the first key's alignment, leaving this alias misaligned.
  NamedDataStore s;
  const auto a = bytes(65, 1);
  REQUIRE(s.add_named_data("align16", span(a), 16).ok());
  REQUIRE(s.add_named_data("align16.alias_requesting_4096", span(a), 4096).ok());
  CHECK(s.buffer_count() == 1);
  CHECK(s.buffers()[0].alignment == 4096);
  CHECK(s.keys()[0].alignment == 16);
  CHECK(s.keys()[1].alignment == 4096);
}

TEST_CASE("an lcm over the maximum alignment is refused and changes nothing") {
  NamedDataStore s;
  const auto a = bytes(8, 1);
  REQUIRE(s.add_named_data("p", span(a), 65537).ok());  // prime
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("q", span(a), 65539);  // another prime: lcm > 2^32
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'q': lcm of alignments 65537 and 65539 exceeds the maximum of 4294967296 (its bytes "
                       "are held once with the equal bytes of other keys, which ask for 65537)");
  CHECK(dump(s) == before);
}

TEST_CASE("an existing key: an lcm over the maximum is refused and changes neither the key nor the buffer") {
  NamedDataStore s;
  const auto a = bytes(8, 1), pb = bytes(8, 2), pb_copy = pb;
  REQUIRE(s.add_named_data("w", span(a), 1).ok());
  REQUIRE(s.add_named_data("v", span(a), 65537).ok());  // the shared buffer now asks for 65537
  REQUIRE(s.add_named_data("p", span(pb), 65537).ok());
  const std::string before = dump(s);

  // "w"'s own lcm(1, 65539) fits; the buffer's lcm(65537, 65539) does not.
  Expected<void> r = s.add_named_data("w", span(a), 65539);
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'w': lcm of alignments 65537 and 65539 exceeds the maximum of 4294967296 (its bytes "
                       "are held once with the equal bytes of other keys, which ask for 65537)");
  CHECK(dump(s) == before);

  // "p" alone on its buffer: its own lcm(65537, 65539) does not fit either.
  r = s.add_named_data("p", span(pb_copy), 65539);
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'p': lcm of alignments 65537 and 65539 exceeds the maximum of 4294967296");
  CHECK(dump(s) == before);
  // The same through merge: this store's request named first, then the
  // merged store's, as the add names them.
  NamedDataStore t;
  REQUIRE(t.add_named_data("p", span(pb_copy), 65539).ok());
  r = s.merge(t);
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "merge failed, store unchanged: key 'p': lcm of alignments 65537 and 65539 exceeds the "
                       "maximum of 4294967296");
  CHECK(dump(s) == before);

  // ...and the store still takes a request that fits.
  REQUIRE(s.add_named_data("w", span(a), 2).ok());
  const StoreKey& w_key = REQUIRE_FOUND(s.find("w"));
  CHECK(w_key.alignment == 2);
  CHECK(s.buffers()[0].alignment == 131074);
}

TEST_CASE("an existing key whose buffer does not carry its alignment: the error names the key's own lcm") {
  // The bulk path (StoreAccess) may leave a buffer below a key's request
  // (the writer honours the key's anyway). Only the key's lcm overflows.
  NamedDataStore s;
  const auto a = bytes(8, 1);
  const std::uint32_t b = detail::StoreAccess::add_buffer(s, span(a), 1);
  detail::StoreAccess::add_key(s, "k", b, 65537, std::nullopt);
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("k", span(a), 65539);
  CHECK(r.error() == Error::InvalidAlignment);
  CHECK(r.message() == "key 'k': lcm of alignments 65537 and 65539 exceeds the maximum of 4294967296");
  CHECK(dump(s) == before);
}

TEST_CASE("layouts are checked against the bytes") {
  NamedDataStore s;
  const auto a = bytes(24, 1);
  REQUIRE(s.add_named_data("kept", span(a), 1).ok());  // the same bytes: a failed add must not touch its buffer
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("t", span(a), 4, Layout::contiguous(ScalarType::Float, {2, 2}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't': layout FLOAT [2, 2] dim_order [0, 1] describes 16 bytes but the data has 24 bytes");
  CHECK(dump(s) == before);
  // A count of 1 is singular on either side (a bool scalar is 1 byte).
  r = s.add_named_data("t", ByteSpan(a.data(), 1), 1, Layout::contiguous(ScalarType::Bool, {2}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't': layout BOOL [2] dim_order [0] describes 2 bytes but the data has 1 byte");
  CHECK(dump(s) == before);
  r = s.add_named_data("t", ByteSpan(a.data(), 2), 1, Layout::contiguous(ScalarType::Bool, {}));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't': layout BOOL [] dim_order [] describes 1 byte but the data has 2 bytes");
  CHECK(dump(s) == before);
  r = s.add_named_data("t", span(a), 4, Layout{ScalarType::Float, {2, 3}, {0, 0}});
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't': layout is inconsistent (FLOAT [2, 3] dim_order [0, 0]): dim_order names "
                       "dimension 0 twice");
  CHECK(dump(s) == before);
  r = s.add_named_data("t", span(a), 4, Layout{static_cast<ScalarType>(30), {6}, {0}});
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't': layout is inconsistent (type 30 [6] dim_order [0]): unknown scalar type 30");
  CHECK(dump(s) == before);
  // Each rule is named on its own: the one the layout breaks.
  const std::pair<Layout, const char*> broken[] = {
      {Layout::channels_last(ScalarType::Float, {2, 3}),
       "key 't': layout is inconsistent (FLOAT [2, 3] dim_order [0, 2, 3, 1]): rank 2 but dim_order has 4 entries"},
      {Layout{ScalarType::Float, {2, 3}, {0}},
       "key 't': layout is inconsistent (FLOAT [2, 3] dim_order [0]): rank 2 but dim_order has 1 entry"},
      {Layout{ScalarType::Float, {2}, {1}},
       "key 't': layout is inconsistent (FLOAT [2] dim_order [1]): dim_order[0] is 1, not below rank 1"},
      // The entry named is the one that breaks the rule, not the first.
      {Layout{ScalarType::Float, {2, 3}, {0, 5}},
       "key 't': layout is inconsistent (FLOAT [2, 3] dim_order [0, 5]): dim_order[1] is 5, not below rank 2"},
      {Layout{ScalarType::Float, {2, 3, 1}, {1, 0, 0}},
       "key 't': layout is inconsistent (FLOAT [2, 3, 1] dim_order [1, 0, 0]): dim_order names dimension 0 twice"},
      {Layout::contiguous(ScalarType::Float, {2, -3}),
       "key 't': layout is inconsistent (FLOAT [2, -3] dim_order [0, 1]): sizes[1] is negative (-3)"},
      {Layout::contiguous(ScalarType::Double, {INT32_MAX, INT32_MAX, 4}),
       "key 't': layout is inconsistent (DOUBLE [2147483647, 2147483647, 4] dim_order [0, 1, 2]): its byte count "
       "exceeds 2^64 - 1"},
  };
  for (const auto& [layout, message] : broken) {
    r = s.add_named_data("t", span(a), 4, layout);
    CHECK(r.error() == Error::LayoutMismatch);
    CHECK(r.message() == message);
    CHECK(dump(s) == before);
  }
  // Over rank 255 contiguous() cannot number the dimensions (a dim_order
  // entry is a byte): it leaves dim_order empty, and the rank is named.
  const Layout rank256 = Layout::contiguous(ScalarType::Byte, std::vector<std::int32_t>(256, 1));
  CHECK(rank256.dim_order.empty());
  CHECK(!rank256.nbytes());
  r = s.add_named_data("t", span(a), 4, rank256);
  CHECK(r.error() == Error::LayoutMismatch);
  // The sizes shown are the first 16 and their count, not all 256.
  CHECK(r.message() == "key 't': layout is inconsistent (BYTE [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
                       "... (256 in all)] dim_order []): rank 256 exceeds the maximum of 255");
  CHECK(dump(s) == before);
  CHECK(Layout::contiguous(ScalarType::Byte, std::vector<std::int32_t>(255, 1)).dim_order.size() == 255);
  CHECK(s.key_count() == 1);
  CHECK(s.buffer_count() == 1);
  // A zero size makes 0 bytes wherever it is, even after sizes whose
  // product overflows 64 bits.
  REQUIRE(s.add_named_data("z_last", ByteSpan(), 1, Layout::contiguous(ScalarType::Float, {INT32_MAX, INT32_MAX, INT32_MAX, 0})).ok());
  REQUIRE(s.add_named_data("z_first", ByteSpan(), 1, Layout::contiguous(ScalarType::Float, {0, INT32_MAX, INT32_MAX, INT32_MAX})).ok());
  const std::string before_overflow = dump(s);
  r = s.add_named_data("t", ByteSpan(), 1, Layout::contiguous(ScalarType::Float, {INT32_MAX, INT32_MAX, INT32_MAX, 1}));
  CHECK(r.error() == Error::LayoutMismatch);
  // (2^31 - 1)^3 * 4 bytes is about 2^95.
  CHECK(r.message() == "key 't': layout is inconsistent (FLOAT [2147483647, 2147483647, 2147483647, 1] "
                       "dim_order [0, 1, 2, 3]): its byte count exceeds 2^64 - 1");
  CHECK(dump(s) == before_overflow);
  CHECK(s.key_count() == 3);
  REQUIRE(s.add_named_data("cl", span(a), 1, Layout::channels_last(ScalarType::Byte, {1, 2, 3, 4})).ok());
  const StoreKey& cl_key = REQUIRE_FOUND(s.find("cl"));
  REQUIRE(cl_key.layout.has_value());
  CHECK(cl_key.layout->dim_order == std::vector<std::uint8_t>{0, 2, 3, 1});
}

TEST_CASE("an empty key is refused") {
  NamedDataStore s;
  const auto a = bytes(4, 1);
  REQUIRE(s.add_named_data("kept", span(a)).ok());
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("", span(a), 8);
  CHECK(r.error() == Error::InvalidName);
  CHECK(r.message() == "empty key");
  CHECK(dump(s) == before);
  // Refused as empty before anything else is looked at: not as "key ''"
  // with an alignment of 0.
  r = s.add_named_data("", span(a), 0);
  CHECK(r.error() == Error::InvalidName);
  CHECK(r.message() == "empty key");
  CHECK(dump(s) == before);
}

TEST_CASE("a null data pointer with a size is refused, naming the key; with no bytes it is an empty buffer") {
  NamedDataStore s;
  const auto a = bytes(64, 1);
  REQUIRE(s.add_named_data("kept", span(a)).ok());
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data("w", ByteSpan(nullptr, 64), 16);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "key 'w': the data pointer is null but the size is 64 bytes");
  CHECK(dump(s) == before);
  r = s.add_named_data("w", ByteSpan(nullptr, 1));
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "key 'w': the data pointer is null but the size is 1 byte");
  CHECK(dump(s) == before);
  REQUIRE(s.add_named_data("none", ByteSpan(nullptr, 0)).ok());
  CHECK(s.buffer_count() == 2);
  const StoreKey& none_key = REQUIRE_FOUND(s.find("none"));
  CHECK(s.buffers()[none_key.buffer_index].bytes.empty());
}

TEST_CASE("zero-size buffers are all the same buffer") {
  NamedDataStore s;
  const std::uint8_t x = 1, y = 2;
  REQUIRE(s.add_named_data("e1", ByteSpan(&x, 0)).ok());
  REQUIRE(s.add_named_data("e2", ByteSpan(&y, 0)).ok());
  CHECK(s.buffer_count() == 1);
  CHECK(s.key_count() == 2);
}

TEST_CASE("several same-size candidates: the right one is found and different bytes stay apart") {
  NamedDataStore s;
  std::vector<std::vector<std::uint8_t>> v;
  for (int i = 0; i < 5; ++i) v.push_back(bytes(256, static_cast<std::uint8_t>(i)));
  for (std::size_t i = 0; i < 5; ++i) REQUIRE(s.add_named_data("k" + std::to_string(i), span(v[i])).ok());
  CHECK(s.buffer_count() == 5);
  const auto copy3 = v[3];
  REQUIRE(s.add_named_data("again3", span(copy3)).ok());
  CHECK(s.buffer_count() == 5);
  const StoreKey& again3_key = REQUIRE_FOUND(s.find("again3"));
  CHECK(again3_key.buffer_index == 3);
  CHECK(s.find("missing") == nullptr);
}

TEST_CASE("buffers and keys are reported in first-insertion order") {
  NamedDataStore s;
  const auto a = bytes(10, 1), b = bytes(11, 2), c = bytes(12, 3);
  REQUIRE(s.add_named_data("c", span(c)).ok());
  REQUIRE(s.add_named_data("a", span(a)).ok());
  REQUIRE(s.add_named_data("c2", span(c)).ok());
  REQUIRE(s.add_named_data("b", span(b)).ok());
  REQUIRE(s.key_count() == 4);
  CHECK(s.keys()[0].key == "c");
  CHECK(s.keys()[1].key == "a");
  CHECK(s.keys()[2].key == "c2");
  CHECK(s.keys()[3].key == "b");
  CHECK(s.keys()[2].buffer_index == 0);
  CHECK(s.keys()[3].buffer_index == 2);
  CHECK(s.buffers()[1].bytes.size() == 10);
}

TEST_CASE("merge follows the same rules") {
  const auto a = bytes(32, 1), a2 = bytes(32, 1), b = bytes(40, 2), c = bytes(50, 3);
  NamedDataStore s, t;
  REQUIRE(s.add_named_data("a", span(a), 16).ok());
  REQUIRE(s.add_named_data("b", span(b), 8).ok());
  REQUIRE(t.add_named_data("a", span(a2), 16).ok());       // same key, same bytes
  REQUIRE(t.add_named_data("a_alias", span(a2), 4096, Layout::contiguous(ScalarType::Float, {8})).ok());  // new key, same bytes
  REQUIRE(t.add_named_data("c", span(c), 3, Layout::contiguous(ScalarType::Byte, {5, 10})).ok());  // new
  const auto b2 = bytes(40, 2);
  REQUIRE(t.add_named_data("b", span(b2), 64).ok());  // same key, same bytes, asking for more
  REQUIRE(s.merge(t).ok());
  CHECK(s.buffer_count() == 3);
  REQUIRE(s.key_count() == 4);
  // The existing key keeps both requests (lcm(8, 64)), as add_named_data
  // does: a merge that kept 8 wrote 8 to the file, and the request was lost.
  CHECK(s.keys()[1].key == "b");
  CHECK(s.keys()[1].alignment == 64);
  CHECK(s.buffers()[1].alignment == 64);
  CHECK(s.keys()[2].key == "a_alias");
  CHECK(s.keys()[2].buffer_index == 0);
  CHECK(s.keys()[2].alignment == 4096);
  CHECK(s.buffers()[0].alignment == 4096);
  CHECK(s.keys()[3].key == "c");
  CHECK(s.keys()[3].buffer_index == 2);
  CHECK(s.buffers()[2].alignment == 3);
  // New keys keep their layouts, on bytes held already or new.
  CHECK(wdedup_test::layout_text(s.keys()[2].layout) == "type 6 sizes 8 dim_order 0");
  CHECK(wdedup_test::layout_text(s.keys()[3].layout) == "type 0 sizes 5 10 dim_order 0 1");
  CHECK(wdedup_test::layout_text(s.keys()[0].layout) == "no layout");
}

TEST_CASE("merge is all-or-nothing on error") {
  const auto a = bytes(32, 1), b = bytes(40, 2), other = bytes(33, 4), d = bytes(8, 9);
  NamedDataStore s, t;
  REQUIRE(s.add_named_data("a", span(a), 16).ok());
  REQUIRE(s.add_named_data("b", span(b), 8).ok());
  REQUIRE(t.add_named_data("new1", span(d), 2).ok());   // would be added first...
  REQUIRE(t.add_named_data("a", span(other), 16).ok()); // ...then this conflicts
  const std::string before = dump(s);
  Expected<void> r = s.merge(t);
  CHECK(r.error() == Error::KeyConflict);
  CHECK(r.message() ==
        "merge failed, store unchanged: key 'a' already holds 32 bytes that differ from the 33 bytes added now");
  CHECK(dump(s) == before);
  CHECK(s.find("new1") == nullptr);
}

TEST_CASE("many same-size buffers: each copy finds its own buffer (that no other is read: the paged test below)") {
  NamedDataStore s;
  std::vector<std::vector<std::uint8_t>> v, copies;
  for (int i = 0; i < 3000; ++i) {
    v.push_back(bytes(16, 0));
    v.back()[0] = static_cast<std::uint8_t>(i);
    v.back()[1] = static_cast<std::uint8_t>(i >> 8);
  }
  copies = v;
  for (std::size_t i = 0; i < 3000; ++i) REQUIRE(s.add_named_data("k" + std::to_string(i), span(v[i])).ok());
  for (std::size_t i = 0; i < 3000; ++i) REQUIRE(s.add_named_data("c" + std::to_string(i), span(copies[i])).ok());
  CHECK(s.buffer_count() == 3000);
  const StoreKey& c2999_key = REQUIRE_FOUND(s.find("c2999"));
  CHECK(c2999_key.buffer_index == 2999);
  const StoreKey& c0_key = REQUIRE_FOUND(s.find("c0"));
  CHECK(c0_key.buffer_index == 0);
}

TEST_CASE("the buffer indexes read only the buffer they find: every other one may be unreadable") {
  // 3000 same-size buffers on pages of their own; then all but #1234 are
  // made unreadable. A scan, or a compare with any other buffer, faults.
  wdedup_test::PagedBuffers pages(3000, 16);
  NamedDataStore s;
  for (std::size_t i = 0; i < 3000; ++i) {
    pages.at(i)[0] = static_cast<std::uint8_t>(i);
    pages.at(i)[1] = static_cast<std::uint8_t>(i >> 8);
    REQUIRE(s.add_named_data("k" + std::to_string(i), ByteSpan(pages.at(i), 16)).ok());
  }
  pages.protect_all_but(1234);
  const std::vector<std::uint8_t> copy(pages.at(1234), pages.at(1234) + 16);
  std::vector<std::uint8_t> fresh = copy;
  fresh[15] = 1;
  REQUIRE(s.add_named_data("copy", span(copy)).ok());              // by content
  REQUIRE(s.add_named_data("same_memory", ByteSpan(pages.at(7), 16)).ok());  // by pointer, never read
  REQUIRE(s.add_named_data("fresh", span(fresh)).ok());            // no buffer has its hash
  const StoreKey& copy_key = REQUIRE_FOUND(s.find("copy"));
  CHECK(copy_key.buffer_index == 1234);
  const StoreKey& same_memory_key = REQUIRE_FOUND(s.find("same_memory"));
  CHECK(same_memory_key.buffer_index == 7);
  const StoreKey& fresh_key = REQUIRE_FOUND(s.find("fresh"));
  CHECK(fresh_key.buffer_index == 3000);
  CHECK(s.buffer_count() == 3001);
}

TEST_CASE("merge: a buffer alignment carried over that overflows the lcm fails whole, with the same prefix") {
  // `t` holds one buffer under "q" (alignment 1) and "r" (65537): the
  // buffer asks for 65537. `s` holds the same bytes under "p" at 65539.
  // Adding "q" alone is fine; carrying the buffer's 65537 over is not.
  const auto a = bytes(24, 5);
  NamedDataStore s, t;
  REQUIRE(s.add_named_data("p", span(a), 65539).ok());
  REQUIRE(t.add_named_data("q", span(a), 1).ok());
  REQUIRE(t.add_named_data("r", span(a), 65537).ok());
  const std::string before = dump(s);
  // Each merge below fails with InvalidAlignment and this message after
  // the prefix, and leaves `s` as it was.
  auto refused = [&](const NamedDataStore& other, const std::string& message) {
    const Expected<void> r = s.merge(other);
    CHECK(r.error() == Error::InvalidAlignment);
    CHECK(r.message() == "merge failed, store unchanged: " + message);
    CHECK(dump(s) == before);
  };
  // "q" asked for 1: the message says whose the two alignments are.
  refused(t,
          "key 'q': lcm of alignments 65539 and 65537 exceeds the maximum of 4294967296 (its bytes are held once "
          "with the equal bytes of other keys, which ask for 65539; in the merged store, the keys with these bytes "
          "ask for 65537)");
  // The key's own request overflowing: only the shared side is explained.
  NamedDataStore u;
  REQUIRE(u.add_named_data("q", span(a), 65537).ok());
  refused(u,
          "key 'q': lcm of alignments 65539 and 65537 exceeds the maximum of 4294967296 (its bytes are held once "
          "with the equal bytes of other keys, which ask for 65539)");
  // Bytes new to `s`, whose buffer in the merged store asks for more than
  // its key (a store filled through StoreAccess): the merged side is named.
  const auto c = bytes(24, 9);
  NamedDataStore v;
  const std::uint32_t vb = detail::StoreAccess::add_buffer(v, span(c), 65537);
  detail::StoreAccess::add_key(v, "w", vb, 65539, std::nullopt);
  refused(v,
          "key 'w': lcm of alignments 65539 and 65537 exceeds the maximum of 4294967296 (in the merged store, the "
          "keys with these bytes ask for 65537)");
}

TEST_CASE("merge carries a buffer's alignment when it is above its keys' own") {
  const std::vector<std::uint8_t> a(8, 1);
  NamedDataStore other;
  const std::uint32_t b = detail::StoreAccess::add_buffer(other, span(a), 4096);
  detail::StoreAccess::add_key(other, "k", b, 1, std::nullopt);
  NamedDataStore s;
  REQUIRE(s.merge(other).ok());
  REQUIRE(s.buffer_count() == 1);
  CHECK(s.buffers()[0].alignment == 4096);
  const StoreKey& k_key = REQUIRE_FOUND(s.find("k"));
  CHECK(k_key.alignment == 1);
  // Into a store that holds the bytes already, under that key or another:
  // the buffer is raised to 4096 (lcm with its 3), the keys keep theirs.
  const std::vector<std::uint8_t> a_copy = a;
  for (const char* held_as : {"k", "j"}) {
    CAPTURE(held_as);
    NamedDataStore t;
    REQUIRE(t.add_named_data(held_as, span(a_copy), 3).ok());
    REQUIRE(t.merge(other).ok());
    REQUIRE(t.buffer_count() == 1);
    CHECK(t.buffers()[0].alignment == 12288);
    const StoreKey& held = REQUIRE_FOUND(t.find(held_as));
    CHECK(held.alignment == 3);
    const StoreKey& merged = REQUIRE_FOUND(t.find("k"));
    CHECK(merged.alignment == (std::string_view(held_as) == "k" ? 3 : 1));
  }
}

TEST_CASE("merge into a bulk-filled store finds the bytes its buffers hold: each held once") {
  // A store deduplicate() filled (StoreAccess) has no buffer indexes: the
  // first add or merge into it builds them. Bytes the store holds, merged
  // in under new keys (from other memory, or the same), share its buffers.
  const auto a = bytes(24, 1), b = bytes(24, 2), a_copy = a;
  NamedDataStore s;
  detail::StoreAccess::add_key(s, "bulk.a", detail::StoreAccess::add_buffer(s, span(a), 4), 4, std::nullopt);
  detail::StoreAccess::add_key(s, "bulk.b", detail::StoreAccess::add_buffer(s, span(b), 4), 4, std::nullopt);
  NamedDataStore t;
  REQUIRE(t.add_named_data("alias.a", span(a_copy), 8).ok());
  REQUIRE(t.add_named_data("alias.b", span(b), 2).ok());
  REQUIRE(s.merge(t).ok());
  CHECK(s.buffer_count() == 2);
  const StoreKey& alias_a = REQUIRE_FOUND(s.find("alias.a"));
  CHECK(alias_a.buffer_index == 0);
  const StoreKey& alias_b = REQUIRE_FOUND(s.find("alias.b"));
  CHECK(alias_b.buffer_index == 1);
  CHECK(s.buffers()[0].alignment == 8);
  CHECK(s.buffers()[1].alignment == 4);
}

TEST_CASE("merge checks each key of the other store, even one on bytes this store already holds") {
  // A store filled through StoreAccess (the bulk path deduplicate() uses)
  // had none of add_named_data's checks. Keys on new bytes go through
  // add_named_data inside the merge; a key on bytes this store already
  // holds does not, so merge checks it itself: refused, naming it, and the
  // store is left as it was.
  const auto a = bytes(8, 1), a_copy = a;
  NamedDataStore s;
  REQUIRE(s.add_named_data("w", span(a), 4).ok());
  const std::string before = dump(s);
  struct Case {
    std::string key;
    std::uint64_t alignment;
    std::optional<Layout> layout;
    Error error;
    std::string message;
  };
  const Case cases[] = {
      {std::string("k\0x", 3), 1, std::nullopt, Error::InvalidName,
       "key 'k\\x00x' contains a NUL byte at offset 1; ExecuTorch compares keys only up to a NUL (strcmp, or "
       "strncmp after a length check), so it could not tell it from a key that agrees before the NUL"},
      {"", 1, std::nullopt, Error::InvalidName, "empty key"},
      {"v\xff", 1, std::nullopt, Error::InvalidName, "key 'v\\xff' is not valid UTF-8 at offset 1; a key is a flatbuffer string, which is UTF-8, and ExecuTorch's "
       "Python reader (flatc --json) cannot read a file holding one that is not"},
      {"v", 0, std::nullopt, Error::InvalidAlignment, "key 'v': alignment must be a positive integer, got 0"},
      {"v", (std::uint64_t{1} << 32) + 1, std::nullopt, Error::InvalidAlignment,
       "key 'v': alignment 4294967297 exceeds the maximum of 4294967296"},
      {"v", 1, Layout::contiguous(ScalarType::Float, {3}), Error::LayoutMismatch,
       "key 'v': layout FLOAT [3] dim_order [0] describes 12 bytes but the data has 8 bytes"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    NamedDataStore t;
    const std::uint32_t b = detail::StoreAccess::add_buffer(t, span(a_copy), 1);
    detail::StoreAccess::add_key(t, c.key, b, c.alignment, c.layout);
    Expected<void> r = s.merge(t);
    CHECK(r.error() == c.error);
    CHECK(r.message() == "merge failed, store unchanged: " + c.message);
    CHECK(dump(s) == before);
  }
}

TEST_CASE("merge gives what merging the other store's keys one at a time gives, or fails alike and changes nothing") {
  // Random stores over a few contents (some the same bytes in other
  // memory), alignments whose lcms may overflow, layouts that may differ.
  std::vector<std::vector<std::uint8_t>> pool;
  for (std::uint8_t i = 0; i < 6; ++i) pool.push_back(bytes(std::size_t{8} + 8u * (i / 2u), static_cast<std::uint8_t>(i * 40)));
  pool.push_back(pool[1]);  // the same bytes as pool[1], elsewhere
  pool.push_back(pool[4]);
  const std::int64_t aligns[] = {1, 2, 3, 4, 16, 4096, 65537, 65539};
  std::uint64_t x = 12345;
  auto next = [&x](std::uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>((x >> 33) % n);
  };
  auto fill = [&](NamedDataStore& s, std::size_t adds) {
    for (std::size_t i = 0; i < adds; ++i) {
      const std::vector<std::uint8_t>& v = pool[next(pool.size())];
      std::optional<Layout> layout;
      if (next(3) == 0) layout = Layout::contiguous(next(2) ? ScalarType::Byte : ScalarType::Char, {static_cast<std::int32_t>(v.size())});
      (void)s.add_named_data("k" + std::to_string(next(10)), span(v), aligns[next(8)], layout);
    }
  };
  int merged = 0, refused = 0;
  for (int round = 0; round < 400; ++round) {
    CAPTURE(round);
    NamedDataStore s, t;
    fill(s, next(8));
    fill(t, 1 + next(8));
    // The reference: each key of t alone (its buffer's alignment with it),
    // merged in t's order; the first failure is the merge's.
    NamedDataStore ref = s;
    Expected<void> want;
    for (const StoreKey& k : t.keys()) {
      NamedDataStore one;
      const StoreBuffer& b = t.buffers()[k.buffer_index];
      detail::StoreAccess::add_key(one, k.key, detail::StoreAccess::add_buffer(one, b.bytes, b.alignment), k.alignment,
                                   k.layout);
      want = ref.merge(one);
      if (!want) break;
    }
    const std::string before = dump(s);
    Expected<void> got = s.merge(t);
    REQUIRE(got.ok() == want.ok());
    if (got) {
      ++merged;
      CHECK(dump(s) == dump(ref));
    } else {
      ++refused;
      CHECK(got.error() == want.error());
      CHECK(got.message() == want.message());
      CHECK(dump(s) == before);
    }
  }
  CHECK(merged >= 100);  // both outcomes, often
  CHECK(refused >= 100);
}

namespace {
/// n 32-byte buffers, back to back, that XXH3 hashes to one value under
/// seed 0. XXH3 of 17-128 bytes multiplies (word ^ secret word) pairs: a
/// buffer whose words 0 and 2 are the default secret's hashes to one value
/// whatever words 1 and 3 hold.
std::vector<std::uint8_t> colliding_buffers(std::size_t n) {
  std::vector<std::uint8_t> mem(n * 32);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t* b = &mem[i * 32];
    const std::uint64_t v = i * 0x9E3779B97F4A7C15ull + 1;
    std::memcpy(b, XXH3_kSecret, 8);
    std::memcpy(b + 8, &v, 8);
    std::memcpy(b + 16, XXH3_kSecret + 16, 8);
    std::memcpy(b + 24, &v, 8);
  }
  const std::uint64_t h0 = Xxh3Hash{}(&mem[0], 32, 0);
  for (std::size_t i = 1; i < n; ++i) REQUIRE(Xxh3Hash{}(&mem[i * 32], 32, 0) == h0);
  return mem;
}
}  // namespace

TEST_CASE("bytes made to collide under a known seed do not chain: the content hash has a seed of its own") {
  const std::size_t n = 4096;
  const std::vector<std::uint8_t> mem = colliding_buffers(n);
  NamedDataStore s;
  for (std::size_t i = 0; i < n; ++i) REQUIRE(s.add_named_data("k" + std::to_string(i), ByteSpan(&mem[i * 32], 32)).ok());
  CHECK(s.buffer_count() == n);
  // Under seed 0 every add would walk one chain of all of them (n(n-1)/2
  // comparisons); under the store's own seed they spread.
  CHECK(detail::StoreAccess::longest_content_chain(s) <= 2);
  const std::vector<std::uint8_t> copy(mem.begin() + 32 * 777, mem.begin() + 32 * 778);
  REQUIRE(s.add_named_data("copy", span(copy)).ok());
  const StoreKey& copy_key = REQUIRE_FOUND(s.find("copy"));
  CHECK(copy_key.buffer_index == 777);
  // A copy of the store finds its bytes as the store does (same seed).
  NamedDataStore c = s;
  const std::vector<std::uint8_t> copy2(mem.begin() + 32 * 4000, mem.begin() + 32 * 4001);
  REQUIRE(c.add_named_data("copy2", span(copy2)).ok());
  const StoreKey& copy2_key = REQUIRE_FOUND(c.find("copy2"));
  CHECK(copy2_key.buffer_index == 4000);
}

TEST_CASE("bytes that collide under the store's content seed chain, and their bytes decide: no false merge") {
  // Colliding buffers under a store whose seed is set to 0: every add
  // walks the one chain and compares bytes.
  const std::size_t n = 64;
  const std::vector<std::uint8_t> mem = colliding_buffers(n);
  const std::uint64_t h0 = Xxh3Hash{}(&mem[0], 32, 0);
  NamedDataStore s;
  detail::StoreAccess::set_content_seed(s, 0);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(s.add_named_data("k" + std::to_string(i), ByteSpan(&mem[i * 32], 32)).ok());
  CHECK(s.buffer_count() == n);  // 64 contents, one hash: none merged
  CHECK(detail::StoreAccess::longest_content_chain(s) == n);
  // A copy (other memory, so not found by its pointer) of the chain's
  // first, a middle and its last buffer each finds its own.
  for (const std::size_t i : {std::size_t{0}, std::size_t{37}, n - 1}) {
    const std::vector<std::uint8_t> copy(mem.begin() + static_cast<std::ptrdiff_t>(32 * i),
                                         mem.begin() + static_cast<std::ptrdiff_t>(32 * (i + 1)));
    const std::string key = "copy" + std::to_string(i);
    REQUIRE(s.add_named_data(key, span(copy)).ok());
    const StoreKey& found = REQUIRE_FOUND(s.find(key));
    CHECK(found.buffer_index == i);
  }
  CHECK(s.buffer_count() == n);
  // Bytes of the same hash that no buffer holds: a new buffer, at the end.
  std::vector<std::uint8_t> other(mem.begin(), mem.begin() + 32);
  const std::uint64_t v = 0x0123456789ABCDEFull;
  std::memcpy(other.data() + 8, &v, 8);
  std::memcpy(other.data() + 24, &v, 8);
  REQUIRE(Xxh3Hash{}(other.data(), 32, 0) == h0);
  REQUIRE(s.add_named_data("other", span(other)).ok());
  const StoreKey& other_key = REQUIRE_FOUND(s.find("other"));
  CHECK(other_key.buffer_index == n);
  CHECK(s.buffer_count() == n + 1);
  CHECK(detail::StoreAccess::longest_content_chain(s) == n + 1);
}

TEST_CASE("a key with a NUL byte is refused when added, and messages escape control characters") {
  const auto a = bytes(8, 1);
  NamedDataStore s;
  REQUIRE(s.add_named_data("kept", span(a)).ok());
  const std::string before = dump(s);
  Expected<void> r = s.add_named_data(std::string_view("layer\0.w", 8), span(a));
  CHECK(r.error() == Error::InvalidName);
  CHECK(r.message() ==
        "key 'layer\\x00.w' contains a NUL byte at offset 5; ExecuTorch compares keys only up to a NUL (strcmp, "
        "or strncmp after a length check), so it could not tell it from a key that agrees before the NUL");
  CHECK(r.message().find('\0') == std::string::npos);  // printable whole with c_str()
  CHECK(dump(s) == before);
  CHECK(detail::quote_name(std::string_view("a\\b\n\t\x1f\x7f\xc3\xa9", 9)) == "'a\\\\b\\n\\t\\x1f\\x7f\xc3\xa9'");
  // What a terminal would act on is escaped as in the report's table: C1
  // controls (U+009B is a CSI), bytes that are not UTF-8, and the marks that
  // reorder text (U+202E would show "layer.w" of "w.reyal").
  CHECK(detail::quote_name("\xc2\x9b" "2J") == "'\\xc2\\x9b2J'");
  CHECK(detail::quote_name("a\xff\xe2\x82") == "'a\\xff\\xe2\\x82'");
  CHECK(detail::quote_name("\xe2\x80\xae" "w.reyal") == "'\\xe2\\x80\\xaew.reyal'");
  CHECK(detail::quote_name("a\xd8\x9c" "1") == "'a\\xd8\\x9c1'");  // U+061C, the Arabic letter mark
  CHECK(detail::quote_name("\xd8\xa8") == "'\xd8\xa8'");               // U+0628, a letter: copied
  CHECK(detail::quote_name("\xe2\x80\x94\xc2\xa0") == "'\xe2\x80\x94\xc2\xa0'");  // an em dash, a no-break space
  // An apostrophe is escaped inside the quotes, so the quote that ends a
  // name is its closing one: the key it's, not it followed by s'.
  CHECK(detail::quote_name("it's") == "'it\\'s'");
  CHECK(detail::quote_name("'") == "'\\''");
  CHECK(detail::quote_name("a\\'b") == "'a\\\\\\'b'");  // a\'b: the backslash, then the apostrophe
  // In a message made from a name read from a file (here a key given twice
  // with other bytes): nothing raw reaches the terminal.
  NamedDataStore t;
  const std::string hostile = "k\x1b]0;owned\x07\xc2\x9b\xe2\x80\xae";
  std::vector<std::uint8_t> one(2, 1), two(2, 2);
  REQUIRE(t.add_named_data(hostile, span(one)));
  Expected<void> again = t.add_named_data(hostile, span(two));
  CHECK(again.error() == Error::KeyConflict);
  CHECK(again.message().rfind("key 'k\\x1b]0;owned\\x07\\xc2\\x9b\\xe2\\x80\\xae' ", 0) == 0);
  CHECK(again.message().find('\x1b') == std::string::npos);
  CHECK(again.message().find("\xc2\x9b") == std::string::npos);
  REQUIRE(t.add_named_data("it's", span(one)));
  Expected<void> apostrophe = t.add_named_data("it's", span(two));
  CHECK(apostrophe.error() == Error::KeyConflict);
  CHECK(apostrophe.message().rfind("key 'it\\'s' ", 0) == 0);
}

TEST_CASE("a layout of exactly 16 dimensions is shown whole; from 17 the first 16 and the count") {
  // describe_layout shows at most 16 entries a list: 16 is no cut.
  NamedDataStore s;
  const auto a = bytes(8, 1);
  std::vector<std::int32_t> sizes16(15, 1);
  sizes16.push_back(-1);
  Expected<void> r = s.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Float, sizes16));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't': layout is inconsistent (FLOAT [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1] "
                       "dim_order [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]): sizes[15] is negative (-1)");
  std::vector<std::int32_t> sizes17(16, 1);
  sizes17.push_back(-1);
  r = s.add_named_data("t", span(a), 1, Layout::contiguous(ScalarType::Float, sizes17));
  CHECK(r.error() == Error::LayoutMismatch);
  CHECK(r.message() == "key 't': layout is inconsistent (FLOAT [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
                       "... (17 in all)] dim_order [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, ... (17 in "
                       "all)]): sizes[16] is negative (-1)");
  CHECK(s.key_count() == 0);
  CHECK(s.buffer_count() == 0);
}

TEST_CASE("a key that is not UTF-8 is refused when added, at the offset of its first stray byte") {
  // Keys are flatbuffer strings, UTF-8: ExecuTorch's Python reader decodes
  // the flatbuffer with flatc --json, which stops at one that is not.
  const auto a = bytes(8, 1);
  NamedDataStore s;
  REQUIRE(s.add_named_data("kept", span(a)).ok());
  const std::string before = dump(s);
  const std::string why =
      "; a key is a flatbuffer string, which is UTF-8, and ExecuTorch's Python reader (flatc --json) cannot read a "
      "file holding one that is not";
  const std::pair<std::string, std::string> refused[] = {
      {"w\xff", "key 'w\\xff' is not valid UTF-8 at offset 1"},
      {"\xc0\xaf", "key '\\xc0\\xaf' is not valid UTF-8 at offset 0"},                   // overlong '/'
      {"caf\xc3\xa9\xed\xa0\x80", "key 'caf\xc3\xa9\\xed\\xa0\\x80' is not valid UTF-8 at offset 5"},  // a surrogate
      {"ab\xe2\x82", "key 'ab\\xe2\\x82' is not valid UTF-8 at offset 2"},                // cut short
      {"\xf4\x90\x80\x80", "key '\\xf4\\x90\\x80\\x80' is not valid UTF-8 at offset 0"},  // past U+10FFFF
      // ASCII goes 8 bytes at a time: a stray byte past the first word.
      {"layers.10.attention.wq\x80", "key 'layers.10.attention.wq\\x80' is not valid UTF-8 at offset 22"},
  };
  for (const auto& c : refused) {
    CAPTURE(c.second);
    Expected<void> r = s.add_named_data(c.first, span(a));
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() == c.second + why);
    CHECK(dump(s) == before);
  }
  // Well-formed UTF-8 of every length is a key.
  for (const char* key : {"caf\xc3\xa9", "\xe9\xa2\x84\xe5\xa1\xab", "w.\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf",
                          "layers.10.attention.wq.\xc2\xa9"})
    CHECK(s.add_named_data(key, span(a)).ok());
  CHECK(s.key_count() == 6);
  CHECK(detail::first_non_utf8("") == std::string_view::npos);
  CHECK(detail::first_non_utf8("0123456789abcdef\xff") == 16);
  // A stray byte at each place of an 8-byte word that is read whole.
  for (std::size_t at = 0; at < 8; ++at) {
    std::string key = "0123456789abcdef01234567";
    key[8 + at] = '\x80';
    CHECK(detail::first_non_utf8(key) == 8 + at);
  }
  CHECK(detail::first_non_utf8("01234567\xc3\xa9" "01234567\xc3") == 18);
  // A sequence cut short by the end of the name is refused where the bytes
  // past that end would complete it (a name viewed inside a longer buffer):
  // "ab" and the first one or two of U+20AC's three bytes.
  const std::string euro = "ab\xe2\x82\xac";
  CHECK(detail::first_non_utf8(euro) == std::string_view::npos);
  CHECK(detail::first_non_utf8(std::string_view(euro.data(), 4)) == 2);
  CHECK(detail::first_non_utf8(std::string_view(euro.data(), 3)) == 2);
  CHECK(detail::is_key_text(euro));
  CHECK(!detail::is_key_text(std::string_view(euro.data(), 4)));
  CHECK(!detail::is_key_text(std::string_view(euro.data(), 3)));
}

TEST_CASE("is_key_text: UTF-8 with no NUL byte, one pass, exactly memchr and first_non_utf8 together") {
  using namespace std::string_literals;
  CHECK(detail::is_key_text(""));
  CHECK(detail::is_key_text("\x01\x7f\x01\x7f\x01\x7f\x01\x7f\x01"));  // the word test's ends
  CHECK(detail::is_key_text("layers.10.attention.wq.\xc2\xa9"));
  CHECK(!detail::is_key_text("\0"s));
  CHECK(!detail::is_key_text("0123456789abcdef\xff"));
  CHECK(!detail::is_key_text("\xc3\xa9\0"s));  // after a sequence
  // A NUL, or a stray byte, at each place of a word read whole, after one
  // that passes, and in the bytes past the last whole word.
  for (std::size_t at = 0; at < 19; ++at) {
    for (const char bad : {'\0', '\x80'}) {
      std::string key = "0123456789abcdef012";
      key[at] = bad;
      CAPTURE(at);
      CHECK(!detail::is_key_text(key));
    }
  }
  // A 0x00 byte borrows from the byte above it: 0x01 there becomes 0x00
  // less the borrow, still flagged by the 0x00 byte itself.
  CHECK(!detail::is_key_text("a\0\x01" "bcdefg"s));
  CHECK(!detail::is_key_text("abcdefg\0"s));
  // A NUL is UTF-8 (U+0000): first_non_utf8 alone passes it, at every place.
  CHECK(detail::first_non_utf8("a\0b"s) == std::string_view::npos);
  CHECK(detail::first_non_utf8("abcdefgh\0\0\0\0\0\0\0\0"s) == std::string_view::npos);
  // No word is read past the end: 7 and 15 bytes in heap blocks of exactly
  // that size (under AddressSanitizer a read past them is an error).
  for (const std::size_t size : {std::size_t{7}, std::size_t{15}}) {
    const std::unique_ptr<char[]> block(new char[size]);
    std::memset(block.get(), 'a', size);
    CHECK(detail::is_key_text(std::string_view(block.get(), size)));
    CHECK(detail::first_non_utf8(std::string_view(block.get(), size)) == std::string_view::npos);
  }
  // Every string of up to 9 bytes over 'a', 0xc3, 0xa9 and 0x00 agrees
  // with the two scans, and the ones that pass are the strings of 'a' and
  // "\xc3\xa9" (U+00E9): 1, 1, 2, 3, 5, ... (Fibonacci) by length, 143 in all.
  const char alphabet[] = {'a', '\xc3', '\xa9', '\0'};
  std::size_t passed = 0, disagreed = 0;
  for (std::size_t len = 0; len <= 9; ++len) {
    std::size_t count = 1;
    for (std::size_t i = 0; i < len; ++i) count *= 4;
    for (std::size_t code = 0; code < count; ++code) {
      std::string key(len, 'a');
      for (std::size_t i = 0, c = code; i < len; ++i, c /= 4) key[i] = alphabet[c % 4];
      const bool two_scans = key.find('\0') == std::string::npos && detail::first_non_utf8(key) == std::string_view::npos;
      const bool one = detail::is_key_text(key);
      passed += one ? 1 : 0;
      disagreed += one == two_scans ? 0 : 1;
    }
  }
  CHECK(disagreed == 0);
  CHECK(passed == 143);
}

namespace {
// An independent UTF-8 decoder, written from the Unicode Standard's table
// of well-formed byte sequences (Table 3-7, as RFC 3629): the offset of the
// first sequence that does not decode, or npos. Byte by byte, without the
// word-at-a-time scan of detail/utf8.hpp, for checking that one.
std::size_t reference_first_non_utf8(std::string_view s) {
  const auto in = [&](std::size_t i, unsigned lo, unsigned hi) {
    return i < s.size() && static_cast<unsigned char>(s[i]) >= lo && static_cast<unsigned char>(s[i]) <= hi;
  };
  for (std::size_t i = 0; i < s.size();) {
    const unsigned b = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;  // the sequence's length, 0 if ill-formed
    if (b <= 0x7F) n = 1;
    else if (b >= 0xC2 && b <= 0xDF) n = in(i + 1, 0x80, 0xBF) ? 2 : 0;
    else if (b == 0xE0) n = in(i + 1, 0xA0, 0xBF) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) n = in(i + 1, 0x80, 0xBF) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if (b == 0xED) n = in(i + 1, 0x80, 0x9F) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if (b == 0xF0) n = in(i + 1, 0x90, 0xBF) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    else if (b >= 0xF1 && b <= 0xF3) n = in(i + 1, 0x80, 0xBF) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    else if (b == 0xF4) n = in(i + 1, 0x80, 0x8F) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}
}  // namespace

TEST_CASE("first_non_utf8 and is_key_text agree with a byte-by-byte decoder on every edge of the table") {
  // Each byte at an edge of a range of Table 3-7 (and NUL, ASCII, 0xFF),
  // in every sequence of 1 to 3 of them, at offsets 0 to 16 of an ASCII
  // key (so across the 8-byte words the scan reads whole) and followed by
  // nothing or by more ASCII; then every 4-byte sequence of the bytes a
  // 4-byte form can start or continue with.
  const unsigned char edges[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                                 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  constexpr std::size_t kEdges = sizeof edges;
  std::size_t checked = 0, disagreed = 0, valid = 0;
  const auto check = [&](const std::string& key) {
    const std::size_t want = reference_first_non_utf8(key);
    const bool text = want == std::string_view::npos && key.find('\0') == std::string::npos;
    if (detail::first_non_utf8(key) != want || detail::is_key_text(key) != text) {
      if (++disagreed <= 5) {  // in hex: quote_name shares the code under test
        std::string hex;
        for (const char ch : key) {
          const unsigned b = static_cast<unsigned char>(ch);
          hex += "0123456789abcdef"[b >> 4];
          hex += "0123456789abcdef"[b & 15];
          hex += ' ';
        }
        FAIL_CHECK("disagrees on " << hex);
      }
    }
    ++checked;
    valid += want == std::string_view::npos ? 1 : 0;
  };
  std::string seq;
  for (std::size_t len = 1; len <= 3; ++len) {
    std::size_t count = 1;
    for (std::size_t i = 0; i < len; ++i) count *= kEdges;
    for (std::size_t code = 0; code < count; ++code) {
      seq.clear();
      for (std::size_t i = 0, c = code; i < len; ++i, c /= kEdges) seq += static_cast<char>(edges[c % kEdges]);
      for (std::size_t at = 0; at <= 16; ++at)
        for (const char* tail : {"", "xyz"}) check(std::string(at, 'k') + seq + tail);
    }
  }
  const unsigned char four[] = {0x41, 0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0, 0xEF, 0xF0, 0xF4, 0xF5};
  for (const unsigned char a : four)
    for (const unsigned char b : four)
      for (const unsigned char c : four)
        for (const unsigned char d : four)
          for (const std::size_t at : {std::size_t{0}, std::size_t{5}, std::size_t{7}})
            check(std::string(at, 'k') + std::string{static_cast<char>(a), static_cast<char>(b), static_cast<char>(c),
                                                     static_cast<char>(d)});
  CHECK(disagreed == 0);
  // Counted, so that a change of the edges or of the decoder shows: the
  // valid ones as Python's strict UTF-8 decoder counts the same strings
  // (bytes(...).decode('utf-8'), a third implementation).
  CHECK(checked == 597273);
  CHECK(valid == 10734);
}

TEST_CASE("quote_name copies well-formed UTF-8 only: overlong forms, surrogates, past U+10FFFF are escaped") {
  // RFC 3629's table: each lead byte's second-byte range, at both ends.
  CHECK(detail::quote_name("\xc0\xaf") == "'\\xc0\\xaf'");  // '/' in two bytes (overlong)
  CHECK(detail::quote_name("\xc1\xbf") == "'\\xc1\\xbf'");  // U+007F in two bytes (overlong)
  CHECK(detail::quote_name("\xc2\xa9") == "'\xc2\xa9'");    // U+00A9, the first lead byte's range: copied
  // The C1 controls at both ends, U+0080 and U+009F (APC), are escaped.
  CHECK(detail::quote_name("\xc2\x80") == "'\\xc2\\x80'");
  CHECK(detail::quote_name("\xc2\x9f") == "'\\xc2\\x9f'");
  CHECK(detail::quote_name("\xe0\x80\xaf") == "'\\xe0\\x80\\xaf'");  // '/' in three bytes (overlong)
  CHECK(detail::quote_name("\xe0\x9f\xbf") == "'\\xe0\\x9f\\xbf'");  // U+07FF in three bytes (overlong)
  CHECK(detail::quote_name("\xe0\xa0\x80") == "'\xe0\xa0\x80'");     // U+0800: copied
  CHECK(detail::quote_name("\xed\x9f\xbf") == "'\xed\x9f\xbf'");     // U+D7FF: copied
  CHECK(detail::quote_name("\xed\xa0\x80") == "'\\xed\\xa0\\x80'");  // U+D800, a surrogate
  CHECK(detail::quote_name("\xed\xbf\xbf") == "'\\xed\\xbf\\xbf'");  // U+DFFF, a surrogate
  CHECK(detail::quote_name("\xf0\x8f\xbf\xbf") == "'\\xf0\\x8f\\xbf\\xbf'");  // U+FFFF in four bytes (overlong)
  CHECK(detail::quote_name("\xf0\x90\x80\x80") == "'\xf0\x90\x80\x80'");      // U+10000: copied
  CHECK(detail::quote_name("\xf4\x8f\xbf\xbf") == "'\xf4\x8f\xbf\xbf'");      // U+10FFFF: copied
  CHECK(detail::quote_name("\xf4\x90\x80\x80") == "'\\xf4\\x90\\x80\\x80'");  // past U+10FFFF
  CHECK(detail::quote_name("\xf5\x80\x80\x80") == "'\\xf5\\x80\\x80\\x80'");  // no such lead byte
  // Every byte after the second must be a continuation byte too.
  CHECK(detail::quote_name("\xe2\x82\x41") == "'\\xe2\\x82A'");
  CHECK(detail::quote_name("\xf0\x9f\x98\x41") == "'\\xf0\\x9f\\x98A'");
  CHECK(detail::quote_name("\xf0\x9f\x41\x80") == "'\\xf0\\x9fA\\x80'");
  // The left-to-right and right-to-left marks, U+200E and U+200F, reorder text as the overrides do.
  CHECK(detail::quote_name("a\xe2\x80\x8e" "b") == "'a\\xe2\\x80\\x8e" "b'");
  CHECK(detail::quote_name("a\xe2\x80\x8f" "b") == "'a\\xe2\\x80\\x8f" "b'");
  CHECK(detail::quote_name("\xe2\x80\x8d") == "'\xe2\x80\x8d'");  // U+200D, the zero-width joiner: copied
}

TEST_CASE("quote_name escapes only the characters its ranges name: the ones either side are copied") {
  // U+2028..U+202E (the separators, embeddings and overrides) are E2 80
  // A8..AE, the isolates U+2066..U+2069 are E2 81 A6..A9: their first and
  // last are escaped, the characters just outside are not.
  CHECK(detail::quote_name("\xe2\x80\xa8\xe2\x80\xae") == "'\\xe2\\x80\\xa8\\xe2\\x80\\xae'");
  CHECK(detail::quote_name("\xe2\x80\xa7") == "'\xe2\x80\xa7'");  // U+2027, the hyphenation point
  CHECK(detail::quote_name("\xe2\x80\xaf") == "'\xe2\x80\xaf'");  // U+202F, the narrow no-break space
  CHECK(detail::quote_name("\xe2\x81\xa6\xe2\x81\xa9") == "'\\xe2\\x81\\xa6\\xe2\\x81\\xa9'");
  CHECK(detail::quote_name("\xe2\x81\xa5") == "'\xe2\x81\xa5'");  // U+2065, not assigned, before the isolates
  CHECK(detail::quote_name("\xe2\x81\xaa") == "'\xe2\x81\xaa'");  // U+206A, a deprecated format character after them
  // The isolates' last two bytes after another second byte: U+20A6 and
  // U+20A9, the naira and won signs (E2 82 A6, E2 82 A9), are text.
  CHECK(detail::quote_name("\xe2\x82\xa6" "5\xe2\x82\xa9") == "'\xe2\x82\xa6" "5\xe2\x82\xa9'");
  // Their last two bytes after another lead byte: U+3068, the hiragana to
  // (E3 81 A8), and U+300E, a white corner bracket (E3 80 8E), are text.
  CHECK(detail::quote_name("\xe3\x81\xa8\xe3\x80\x8e") == "'\xe3\x81\xa8\xe3\x80\x8e'");
  // U+061B, the Arabic semicolon (D8 9B), and U+061D (D8 9D), either side
  // of the letter mark U+061C (D8 9C), are copied.
  CHECK(detail::quote_name("\xd8\x9b\xd8\x9d") == "'\xd8\x9b\xd8\x9d'");
  // The C0 controls end at 0x1F and DEL (0x7F) is one byte: the space and
  // the tilde next to them are copied.
  CHECK(detail::quote_name("\x1f \x7e\x7f") == "'\\x1f ~\\x7f'");
}

TEST_CASE("a runtime Failure in a message: a failed system call by its reason, anything else by its offset") {
  CHECK(describe_failure(Failure{Error::IoError, "open failed (at = errno)", ENOENT}) ==
        "open failed: No such file or directory (IoError)");
  // The smallest errno, EPERM (1), is an errno too.
  CHECK(describe_failure(Failure{Error::IoError, "unlink failed (at = errno)", EPERM}) ==
        "unlink failed: Operation not permitted (IoError)");
  // A source of the caller's own may fail a system call with any code: the
  // code it gave is named, not IoError.
  CHECK(describe_failure(Failure{Error::OutOfMemory, "mmap failed (at = errno)", ENOMEM}) ==
        "mmap failed: Cannot allocate memory (OutOfMemory)");
  CHECK(describe_failure(Failure{Error::MalformedHeader, "flatbuffer identifier is not FT01", 4}) ==
        "flatbuffer identifier is not FT01 (MalformedHeader at 4)");
  // The marker only counts at the end, and `at` only as an errno it could
  // be (a source of the caller's own may put anything there).
  CHECK(describe_failure(Failure{Error::IoError, "x (at = errno) y", 2}) == "x (at = errno) y (IoError at 2)");
  CHECK(describe_failure(Failure{Error::IoError, "read failed (at = errno)", (1ull << 32) + 2}) ==
        "read failed (at = errno) (IoError at 4294967298)");
  CHECK(describe_failure(Failure{Error::IoError, "read failed (at = errno)", 0}) ==
        "read failed (at = errno) (IoError at 0)");
  CHECK(describe_failure(Failure{Error::IoError, nullptr, 2}) == " (IoError at 2)");  // no text, no crash
}

#if defined(__cpp_exceptions)
// Out of memory at each allocation an add makes, in turn: the add throws
// std::bad_alloc (as any container would) and the store is as it was, and
// still works. The replaced operator new fails once when armed.
#include "support/fail_each_allocation.hpp"
#include "support/failing_new.hpp"
using wdedup_test::g_fail_countdown;

namespace {
/// `s` afresh with 16 keys: "first" over `a`, "second" over `second` if
/// given, then fillers over `a`; the next key grows the key table and its
/// index.
void sixteen_keys(NamedDataStore& s, ByteSpan a, std::optional<ByteSpan> second) {
  s = NamedDataStore();
  REQUIRE(s.add_named_data("first", a, 8).ok());
  if (second) REQUIRE(s.add_named_data("second", *second, 8).ok());
  for (int i = 0; i < (second ? 14 : 15); ++i) REQUIRE(s.add_named_data("filler" + std::to_string(i), a, 8).ok());
}
/// `s` afresh with key "held.<i>" over `held[i]`, each at alignment 4.
void held_keys(NamedDataStore& s, const std::vector<std::vector<std::uint8_t>>& held) {
  s = NamedDataStore();
  for (std::size_t i = 0; i < held.size(); ++i)
    REQUIRE(s.add_named_data("held." + std::to_string(i), span(held[i]), 4).ok());
}
}  // namespace

TEST_CASE("out of memory during an add: std::bad_alloc, and the store is unchanged") {
  const auto a = bytes(16, 1), b = bytes(16, 2), c = bytes(16, 3), big = bytes(40, 4);
  const std::string long_key = "a.key.longer.than.the.small.string.buffer";
  struct Case {
    const char* what;
    ByteSpan data;
    bool size_hashed;  // a second buffer of the size is there already
  } cases[] = {
      {"new key, new bytes of a size seen once (that size is hashed now)", span(b), false},
      {"new key, bytes another key holds", span(a), false},
      {"new key, new bytes of a new size", span(big), false},
      {"new key, new bytes of a size already hashed", span(c), true},
  };
  for (const Case& k : cases) {
    const std::string what = k.what;
    CAPTURE(what);
    NamedDataStore s;
    std::string before;
    const long injected = wdedup_test::fail_each_allocation(
        g_fail_countdown,
        [&] {
          sixteen_keys(s, span(a), k.size_hashed ? std::optional<ByteSpan>(span(b)) : std::nullopt);
          before = dump(s);
        },
        [&] { (void)s.add_named_data(long_key, k.data, 4); },
        [&] {
          CHECK(dump(s) == before);
          CHECK(s.find(long_key) == nullptr);
          // ...and still works: the same add now succeeds, and finds its bytes.
          REQUIRE(s.add_named_data(long_key, k.data, 4).ok());
          CHECK(s.bytes_of(long_key).data() == k.data.data());
          const StoreKey& first_key = REQUIRE_FOUND(s.find("first"));
          CHECK(first_key.buffer_index == 0);
        },
        [&] { CHECK(s.find(long_key) != nullptr); });
    CHECK(injected >= 3);  // the key's string, the key table, the key index (and more for a new buffer)
  }
}
TEST_CASE("out of memory during a merge: std::bad_alloc, and the store is unchanged") {
  const auto a = bytes(16, 1), b = bytes(16, 2), c = bytes(16, 3), d = bytes(40, 4), b2 = b;
  NamedDataStore t;  // an existing key, a new key on existing bytes, new bytes twice, a new size
  REQUIRE(t.add_named_data("first", span(a), 8).ok());
  REQUIRE(t.add_named_data("alias.of.b.with.a.long.name", span(b2), 64).ok());
  REQUIRE(t.add_named_data("c", span(c), 4).ok());
  REQUIRE(t.add_named_data("c.again", span(c), 32).ok());
  REQUIRE(t.add_named_data("d", span(d), 2).ok());
  NamedDataStore s;
  std::string before;
  const long injected = wdedup_test::fail_each_allocation(
      g_fail_countdown,
      [&] {
        sixteen_keys(s, span(a), span(b));
        before = dump(s);
      },
      [&] { (void)s.merge(t); },
      [&] {
        CHECK(dump(s) == before);
        REQUIRE(s.merge(t).ok());  // ...and it still works
        CHECK(s.key_count() == 20);
      },
      [&] {
        CHECK(s.key_count() == 20);
        CHECK(s.buffer_count() == 4);
        const StoreKey& alias_key = REQUIRE_FOUND(s.find("alias.of.b.with.a.long.name"));
        CHECK(alias_key.buffer_index == 1);
        CHECK(s.buffers()[1].alignment == 64);
        const StoreKey& c_again_key = REQUIRE_FOUND(s.find("c.again"));
        CHECK(c_again_key.buffer_index == 2);
        CHECK(s.buffers()[2].alignment == 32);
        const StoreKey& d_key = REQUIRE_FOUND(s.find("d"));
        CHECK(d_key.buffer_index == 3);
      });
  CHECK(injected >= 5);
}

TEST_CASE("out of memory while the first add into a bulk-filled store builds its buffer indexes: the store is unchanged and still finds every buffer") {
  // A store deduplicate() filled (StoreAccess) has no buffer indexes: the
  // first add builds them all, allocating as it goes. An allocation that
  // fails there leaves the store as it was, and the indexes still to be
  // built: the next add finds the bytes a buffer holds, even the last
  // buffer's, and shares it rather than holding the bytes twice.
  std::vector<std::vector<std::uint8_t>> held;
  for (std::uint8_t i = 0; i < 40; ++i) held.push_back(bytes(i % 2 ? 24 : 32u + i, i));  // 20 of one size
  const std::vector<std::uint8_t> last_copy = held.back();  // the last buffer's bytes, in other memory
  const std::uint32_t last = static_cast<std::uint32_t>(held.size() - 1);
  NamedDataStore s;
  std::string before;
  const long injected = wdedup_test::fail_each_allocation(
      g_fail_countdown,
      [&] {
        s = NamedDataStore();
        for (std::size_t i = 0; i < held.size(); ++i)
          detail::StoreAccess::add_key(s, "bulk." + std::to_string(i),
                                       detail::StoreAccess::add_buffer(s, span(held[i]), 4), 4, std::nullopt);
        before = dump(s);
      },
      [&] { (void)s.add_named_data("copy.of.the.last.buffer", span(last_copy), 8); },
      [&] {
        CHECK(dump(s) == before);
        REQUIRE(s.add_named_data("copy.of.the.last.buffer", span(last_copy), 8).ok());  // ...and it still works
        CHECK(s.buffer_count() == 40);
        const StoreKey& last_copy_key = REQUIRE_FOUND(s.find("copy.of.the.last.buffer"));
        CHECK(last_copy_key.buffer_index == last);
        CHECK(s.buffers()[last].alignment == 8);
      },
      [&] {
        CHECK(s.buffer_count() == 40);
        const StoreKey& last_copy_key = REQUIRE_FOUND(s.find("copy.of.the.last.buffer"));
        CHECK(last_copy_key.buffer_index == last);
      },
      10000);
  CHECK(injected >= 5);
}

TEST_CASE("out of memory during an add or a merge into a store whose buffer indexes are full to their limit: the store is unchanged") {
  // 16 buffers of 8 sizes, the last one of a size of its own (three of 16
  // bytes, two each of 17 to 22, one of 23), fill every buffer index to its
  // load limit (half its slots): the (pointer, size) index holds 16 entries
  // in 32 slots, the size index 8 in 16, the content index 15 in 32. A 17th
  // buffer grows the (pointer, size) index, and the size index (a new size)
  // or the content index (the size held once: both its buffers are hashed
  // now). 16 buffers of 16 sizes fill the table of sizes to its capacity.
  // The add or merge makes that room before it changes anything.
  const std::vector<std::size_t> eight_sizes = {16, 16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21, 22, 22, 23};
  std::vector<std::size_t> sixteen_sizes;
  for (std::size_t n = 16; n < 32; ++n) sixteen_sizes.push_back(n);
  const auto held_once_size = bytes(23, 200), new_size = bytes(40, 201);
  struct Case {
    const char* what;
    const std::vector<std::size_t>* sizes;
    ByteSpan data;
  } cases[] = {
      {"8 sizes held, new bytes of the size held once", &eight_sizes, span(held_once_size)},
      {"8 sizes held, new bytes of a new size", &eight_sizes, span(new_size)},
      {"16 sizes held, new bytes of a new size", &sixteen_sizes, span(new_size)},
  };
  for (const Case& k : cases) {
    std::vector<std::vector<std::uint8_t>> held;
    for (std::size_t i = 0; i < k.sizes->size(); ++i) held.push_back(bytes((*k.sizes)[i], static_cast<std::uint8_t>(10 * i)));
    for (const bool merged : {false, true}) {
      const std::string what = k.what;
      CAPTURE(what);
      CAPTURE(merged);
      NamedDataStore s, t;
      REQUIRE(t.add_named_data("new", k.data, 8).ok());
      std::string before;
      const long injected = wdedup_test::fail_each_allocation(
          g_fail_countdown,
          [&] {
            held_keys(s, held);
            before = dump(s);
          },
          [&] { (void)(merged ? s.merge(t) : s.add_named_data("new", k.data, 8)); },
          [&] {
            CHECK(dump(s) == before);
            CHECK(s.find("new") == nullptr);
          },
          [&] {
            CHECK(s.buffer_count() == 17);
            CHECK(s.key_count() == 17);
            const StoreKey& new_key = REQUIRE_FOUND(s.find("new"));
            CHECK(new_key.buffer_index == 16);
            CHECK(s.buffers()[16].bytes.data() == k.data.data());
            CHECK(s.buffers()[16].alignment == 8);
          });
      CHECK(injected >= 3);
    }
  }
}
#endif

TEST_CASE("merge of a bulk-filled store: a buffer at alignment 0 or past the maximum, or a key past the buffers, is refused") {
  // StoreAccess (the bulk path) checks nothing. merge() took the other
  // store's buffer alignment into an lcm unchecked: alignment 0 divided by
  // zero (SIGFPE), on bytes this store holds and on new bytes alike; and a
  // key's buffer index was read past the other store's buffers.
  const auto a = bytes(8, 1), a_copy = a, c = bytes(8, 2);
  NamedDataStore s;
  REQUIRE(s.add_named_data("w", span(a), 4).ok());
  const std::string before = dump(s);
  for (const bool known_bytes : {true, false}) {
    for (const std::uint64_t alignment : {std::uint64_t{0}, (std::uint64_t{1} << 32) + 1}) {
      CAPTURE(known_bytes);
      CAPTURE(alignment);
      NamedDataStore t;
      const std::uint32_t b = detail::StoreAccess::add_buffer(t, known_bytes ? span(a_copy) : span(c), alignment);
      detail::StoreAccess::add_key(t, "k", b, 1, std::nullopt);
      Expected<void> r = s.merge(t);
      CHECK(r.error() == Error::InvalidAlignment);
      CHECK(r.message() == "merge failed, store unchanged: key 'k': its buffer in the merged store has alignment " +
                               std::to_string(alignment) + "; it must be in [1, 4294967296]");
      CHECK(dump(s) == before);
    }
  }
  NamedDataStore t;
  detail::StoreAccess::add_buffer(t, span(a_copy), 1);
  detail::StoreAccess::add_key(t, "k", 1, 1, std::nullopt);
  Expected<void> r = s.merge(t);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "merge failed, store unchanged: key 'k' points at buffer 1 but the merged store has 1 buffer");
  CHECK(dump(s) == before);
  // The count named is the merged store's (2), not this store's (1).
  NamedDataStore two;
  detail::StoreAccess::add_buffer(two, span(a_copy), 1);
  detail::StoreAccess::add_buffer(two, span(c), 1);
  detail::StoreAccess::add_key(two, "k", 2, 1, std::nullopt);
  r = s.merge(two);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "merge failed, store unchanged: key 'k' points at buffer 2 but the merged store has 2 buffers");
  CHECK(dump(s) == before);
}
