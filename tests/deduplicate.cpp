// Tests for wdedup/deduplicate.hpp: input validation, exactness under forced
// hash collisions, determinism across thread counts, alignment rules.
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <algorithm>
#include <clocale>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sys/mman.h>
#include <wchar.h>  // wcwidth, the oracle of the table's columns
#if defined(__GLIBC__)
#include <malloc.h>  // mallopt(M_PERTURB)
#endif

#include "wdedup/wdedup.hpp"

#include "support/dedup_dump.hpp"
#include "support/no_access.hpp"
#include "support/pattern.hpp"
#include "support/require_value.hpp"

using namespace wdedup;

namespace {

ByteSpan span(const std::vector<std::uint8_t>& v) { return ByteSpan(v.data(), v.size()); }

using wdedup_test::dump;

// Many same-size tensors, a third of them duplicates, in three methods with
// unequal partition counts.
struct Mixed {
  std::vector<std::vector<std::uint8_t>> data;
  Program program;
  explicit Mixed(std::uint32_t seed) {
    std::mt19937 rng(seed);
    const std::size_t sizes[] = {64, 64, 64, 1000, 4096, 0, 7};
    for (int i = 0; i < 120; ++i) {
      const std::size_t n = sizes[rng() % 7];
      if (i >= 3 && rng() % 3 == 0) {
        data.push_back(data[rng() % data.size()]);  // a duplicate (maybe of another size class)
      } else {
        std::vector<std::uint8_t> v(n);
        for (auto& b : v) b = static_cast<std::uint8_t>(rng());
        data.push_back(std::move(v));
      }
    }
    const char* methods[] = {"prefill", "decode", "verify"};
    std::size_t next = 0;
    for (int m = 0; m < 3; ++m) {
      Method& method = program.add_method(methods[m]);
      for (int p = 0; p < m + 1; ++p) {
        Partition& part = method.add_partition();
        for (int t = 0; t < 120 / 6; ++t, ++next) part.add("t" + std::to_string(t), span(data[next]));
      }
    }
  }
};

}  // namespace

// Bytes from untyped pointers, as mmap and ExecuTorch's FreeableBuffer give
// them, and from pointers to the other one-byte types, whose count is bytes
// too (a file read into a std::vector<char>, std::byte buffers, int8
// weights); a pointer to a wider type does not convert (its count would be
// taken for bytes), nor does a container of chars (a name where bytes are
// asked for).
static_assert(std::is_constructible<ByteSpan, const void*, std::size_t>::value, "const void*");
static_assert(std::is_constructible<ByteSpan, void*, std::size_t>::value, "void*");
static_assert(std::is_constructible<ByteSpan, std::uint8_t*, std::size_t>::value, "uint8_t*");
static_assert(std::is_constructible<ByteSpan, std::nullptr_t, std::size_t>::value, "nullptr");
static_assert(std::is_constructible<ByteSpan, const char*, std::size_t>::value, "const char*");
static_assert(std::is_constructible<ByteSpan, char*, std::size_t>::value, "char*");
static_assert(std::is_constructible<ByteSpan, const std::int8_t*, std::size_t>::value, "const int8_t*");
static_assert(std::is_constructible<ByteSpan, std::int8_t*, std::size_t>::value, "int8_t*");
static_assert(std::is_constructible<ByteSpan, const std::byte*, std::size_t>::value, "const std::byte*");
static_assert(std::is_constructible<ByteSpan, std::byte*, std::size_t>::value, "std::byte*");
static_assert(!std::is_constructible<ByteSpan, const float*, std::size_t>::value, "float*");
static_assert(!std::is_constructible<ByteSpan, const std::uint16_t*, std::size_t>::value, "uint16_t*");
static_assert(!std::is_constructible<ByteSpan, const bool*, std::size_t>::value, "bool*");
static_assert(!std::is_constructible<ByteSpan, const char* const*, std::size_t>::value, "char**");
static_assert(!std::is_constructible<ByteSpan, std::string&>::value, "std::string");
static_assert(!std::is_constructible<ByteSpan, std::vector<char>&>::value, "std::vector<char>");
static_assert(std::is_constructible<ByteSpan, std::vector<std::uint8_t>&>::value, "std::vector<uint8_t>");
static_assert(!std::is_constructible<Span<const float>, const void*, std::size_t>::value, "only bytes");
static_assert(!std::is_constructible<Span<const char>, const std::uint8_t*, std::size_t>::value, "only ByteSpan");

TEST_CASE("tensors given as untyped or one-byte pointers (void*, char*, std::byte*, int8_t*) are the same bytes") {
  std::vector<std::uint8_t> a(4096);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 7);
  std::vector<char> b(a.size());
  std::vector<std::byte> c(a.size());
  std::vector<std::int8_t> d(a.size());
  std::vector<std::uint8_t> e(a.begin(), a.end());
  std::memcpy(b.data(), a.data(), a.size());
  std::memcpy(c.data(), a.data(), a.size());
  std::memcpy(d.data(), a.data(), a.size());
  const void* pa = a.data();
  void* pe = e.data();
  Program p;
  p.add_method("m1").add_partition().add("w", ByteSpan(pa, a.size()));
  p.add_method("m2").add_partition().add("w", ByteSpan(b.data(), b.size()));
  p.add_method("m3").add_partition().add("w", ByteSpan(c.data(), c.size()));
  p.add_method("m4").add_partition().add("w", ByteSpan(d.data(), d.size()));
  p.add_method("m5").add_partition().add("w", ByteSpan(pe, e.size()));
  // Each pointer arrives as itself, with its count of bytes.
  CHECK(p.methods[1].partitions[0].tensors[0].bytes.data() == reinterpret_cast<const std::uint8_t*>(b.data()));
  CHECK(p.methods[2].partitions[0].tensors[0].bytes.data() == reinterpret_cast<const std::uint8_t*>(c.data()));
  CHECK(p.methods[3].partitions[0].tensors[0].bytes.data() == reinterpret_cast<const std::uint8_t*>(d.data()));
  CHECK(p.methods[4].partitions[0].tensors[0].bytes.size() == 4096);
  auto r = deduplicate<Strategy<Positional>>(p);
  REQUIRE(r.ok());
  REQUIRE(r->store.buffer_count() == 1);
  const ByteSpan held = r->store.bytes_of("w");
  CHECK(held.data() == a.data());
  CHECK(held.size() == 4096);
  CHECK(r->report.bytes_in == 5 * 4096);
  CHECK(r->report.bytes_saved == 4 * 4096);
}

TEST_CASE("forced hash collisions never merge different bytes") {
  Mixed m(7);
  auto exact = deduplicate<Strategy<OneBlob>>(m.program, {}, Xxh3Hash{});
  auto colliding = deduplicate<Strategy<OneBlob>>(m.program, {}, AlwaysCollideHash{});
  REQUIRE(exact.ok());
  REQUIRE(colliding.ok());
  // Identical stores, keys and tables: the hash only nominates candidates.
  // (All but the identity pass's counts, which the collisions change.)
  CHECK(dump(*exact, false) == dump(*colliding, false));
  // Independent check: every key's bytes equal every tensor that uses it.
  for (const FunctionMap& f : colliding->functions.functions) {
    const Partition& part = REQUIRE_FOUND(m.program.find_method(f.method)).partitions[f.partition_index];
    for (std::size_t i = 0; i < part.tensors.size(); ++i) {
      const ByteSpan stored = colliding->store.bytes_of(f.tensors[i].key);
      REQUIRE(stored.size() == part.tensors[i].bytes.size());
      CHECK(std::equal(stored.begin(), stored.end(), part.tensors[i].bytes.begin()));
    }
  }
  // The collisions were seen and resolved by comparing bytes.
  CHECK(colliding->report.identity.hash_collisions > 0);
  CHECK(colliding->report.identity.byte_comparisons > exact->report.identity.byte_comparisons);
}

TEST_CASE("forced collisions on distinct same-size tensors: zero merges, every collision counted") {
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 10; ++i) data.push_back(std::vector<std::uint8_t>(512, static_cast<std::uint8_t>(i)));
  Program program;
  Partition& p = program.add_method("m").add_partition();
  for (std::size_t i = 0; i < 10; ++i) p.add("t" + std::to_string(i), span(data[i]));
  auto r = deduplicate<Strategy<OneBlob>>(program, {}, AlwaysCollideHash{});
  REQUIRE(r.ok());
  CHECK(r->store.buffer_count() == 10);
  CHECK(r->report.bytes_saved == 0);
  // The engine first compares each member with the group's first (9
  // comparisons, no hash), then hashes the 9 that differ: all collide, and
  // each is confirmed against every earlier distinct one (36 collisions).
  CHECK(r->report.identity.byte_comparisons == 9 + 36);
  CHECK(r->report.identity.hash_collisions == 36);
}

TEST_CASE("results are identical for 1, 2 and 8 threads") {
  Mixed m(11);
  std::string reference;
  for (unsigned threads : {1u, 2u, 8u}) {
    DedupOptions o;
    o.threads = threads;
    auto r = deduplicate<Strategy<OneBlob>>(m.program, o);
    REQUIRE(r.ok());
    CHECK(r->report.threads == threads);
    if (reference.empty()) reference = dump(*r);
    else CHECK(dump(*r) == reference);
  }
  auto w = LlamaWorkload::generate(LlamaConfig::tiny());
  REQUIRE(w.ok());
  reference.clear();
  for (unsigned threads : {1u, 2u, 8u}) {
    DedupOptions o;
    o.threads = threads;
    auto r = deduplicate<Strategy<Positional>>(w->program(), o);
    REQUIRE(r.ok());
    if (reference.empty()) reference = dump(*r);
    else CHECK(dump(*r) == reference);
  }
}

// 2,000 tensors of 4 KiB in method "a", the same names in "b" over copies
// in other memory (a name's copy differs in its last byte if listed in
// `differ`), and one more name "w.last" with a layout in "a" only (so it is
// never consistent) if `relayout`. With two or more threads the name check
// ends long before the other threads have compared those pairs, and runs
// the rest of deduplicate() beside them as if every pair were equal.
struct SmallCopies {
  /// What some cases add to the 2,000 pairs (both after them).
  enum Extra : unsigned {
    kNone = 0,
    /// a real tensor named "a/w.1999" (method a, bytes of its own): the key
    /// a differing w.1999 is given must not be taken twice.
    kNameLikeKey = 1,
    /// "tie" in both methods: a's an own copy of b's w.1999 bytes, b's the
    /// very memory of b's w.1999. While b's w.1999 is assumed equal to a's,
    /// b's tie is an alias of it and so differs from a's tie; once w.1999 is
    /// known to differ, the two ties are equal.
    kTie = 2,
  };
  std::vector<std::vector<std::uint8_t>> data;
  Program program;
  SmallCopies(std::vector<std::size_t> differ, bool relayout, unsigned extra = kNone) {
    constexpr std::size_t kNames = 2000, kSize = 4096;
    data.reserve(2 * kNames + 4);
    std::mt19937 rng(5);
    for (std::size_t i = 0; i < kNames; ++i) {
      std::vector<std::uint8_t> v(kSize);
      for (auto& b : v) b = static_cast<std::uint8_t>(rng());
      data.push_back(std::move(v));
    }
    for (std::size_t i = 0; i < kNames; ++i) {
      data.push_back(data[i]);
      if (std::find(differ.begin(), differ.end(), i) != differ.end()) data.back().back() ^= 1;
    }
    Partition& a = program.add_method("a").add_partition();
    Partition& b = program.add_method("b").add_partition();
    for (std::size_t i = 0; i < kNames; ++i) a.add("w." + std::to_string(i), span(data[i]));
    for (std::size_t i = 0; i < kNames; ++i) b.add("w." + std::to_string(i), span(data[kNames + i]));
    if (relayout) {
      data.emplace_back(24, 7);
      data.push_back(data.back());
      a.add("w.last", span(data[2 * kNames]), 1, Layout::contiguous(ScalarType::Float, {2, 3}));
      b.add("w.last", span(data[2 * kNames + 1]));
    }
    if (extra & kNameLikeKey) {
      data.emplace_back(kSize, 0x5A);
      a.add("a/w.1999", span(data.back()));
    }
    if (extra & kTie) {
      data.push_back(data[2 * kNames - 1]);
      a.add("tie", span(data.back()));
      b.add("tie", span(data[2 * kNames - 1]));
    }
  }
};

TEST_CASE("small tensors, 1 to 8 threads: the same result whether every same-name pair is equal or not") {
  // A row of a method's function table, and the tensor whose bytes (an
  // index into SmallCopies::data) its key gives: a differing copy's are its
  // own buffer (or an earlier equal one's), never its name's first.
  struct Row {
    std::size_t method;
    std::string tensor, key;
    std::size_t data;
  };
  struct Case {
    std::vector<std::size_t> differ;
    bool relayout;
    std::size_t keys, buffers;
    std::vector<std::string> generated;  // keys with a '/' (all generated, but kNameLikeKey's tensor)
    std::vector<Row> rows;
    // Every pair once: a differing copy's pair with its name's first is
    // settled by that comparison (it was compared again, 2001 for one copy
    // that differs, before the engine kept failed hints), unless a third
    // tensor of its fingerprint makes it a group of three (kTie).
    std::uint64_t comparisons;
    unsigned extra = SmallCopies::kNone;
  };
  const Case cases[] = {
      {{}, false, 2000, 2000, {}, {}, 2000},
      {{}, true, 2002, 2001, {"a/w.last", "b/w.last"}, {}, 2001},
      // The last pair differs: with two or more threads it is compared
      // after the work that assumed it equal, which is undone (keys were
      // the names, the name index was the store's).
      {{1999}, false, 2001, 2001, {"a/w.1999", "b/w.1999"},
       {{0, "w.1999", "a/w.1999", 1999}, {1, "w.1999", "b/w.1999", 3999}}, 2000},
      // The last two differ and one name was never consistent: the undone
      // run had patched the function tables for w.last as well.
      {{1998, 1999}, true, 2004, 2003, {"a/w.1998", "a/w.1999", "a/w.last", "b/w.1998", "b/w.1999", "b/w.last"},
       {{0, "w.1998", "a/w.1998", 1998}, {1, "w.1998", "b/w.1998", 3998}, {0, "w.1999", "a/w.1999", 1999},
        {1, "w.1999", "b/w.1999", 3999}},
       2001},
      // The first pair differs: known before the checking thread would
      // assume anything, so it does not.
      {{0}, false, 2001, 2001, {"a/w.0", "b/w.0"}, {{0, "w.0", "a/w.0", 0}, {1, "w.0", "b/w.0", 2000}}, 2000},
      // The undone run took the store's name index to give a differing
      // w.1999 the keys a/w.1999 and b/w.1999; "a/w.1999" is a tensor's
      // name here, which the run after must still find taken (a mutant that
      // left the index out made two keys "a/w.1999").
      {{1999}, false, 2002, 2002, {"a/w.1999", "a/w.1999~1", "b/w.1999"},
       {{0, "w.1999", "a/w.1999~1", 1999}, {0, "a/w.1999", "a/w.1999", 4000}, {1, "w.1999", "b/w.1999", 3999}}, 2000,
       SmallCopies::kNameLikeKey},
      // The undone run found "tie" inconsistent (b's an alias of a w.1999
      // assumed equal to a's) and patched its function-table rows; in the
      // run after, "tie" is consistent, and its rows are the plain ones (a
      // mutant that kept the patched rows named keys that do not exist).
      {{1999}, false, 2002, 2001, {"a/w.1999", "b/w.1999"},
       {{0, "w.1999", "a/w.1999", 1999}, {1, "w.1999", "b/w.1999", 4000}, {0, "tie", "tie", 4000}, {1, "tie", "tie", 4000}},
       2003, SmallCopies::kTie},
  };
  for (const Case& c : cases) {
    CAPTURE(c.differ.size());
    CAPTURE(c.relayout);
    CAPTURE(c.extra);
    const SmallCopies s(c.differ, c.relayout, c.extra);
    std::string reference;
    for (unsigned threads : {1u, 2u, 3u, 8u}) {
      CAPTURE(threads);
      DedupOptions o;
      o.threads = threads;
      auto r = deduplicate<Strategy<Positional>>(s.program, o);
      REQUIRE(r.ok());
      CHECK(r->store.key_count() == c.keys);
      CHECK(r->store.buffer_count() == c.buffers);
      std::vector<std::string> generated;
      for (const StoreKey& k : r->store.keys())
        if (k.key.find('/') != std::string::npos) generated.push_back(k.key);
      std::sort(generated.begin(), generated.end());
      CHECK(generated == c.generated);
      for (const Row& row : c.rows) {
        CAPTURE(row.tensor);
        const auto& table = r->functions.functions[row.method].tensors;
        const auto t = std::find_if(table.begin(), table.end(),
                                    [&](const FunctionTensor& f) { return f.tensor_name == row.tensor; });
        REQUIRE(t != table.end());
        CHECK(t->key == row.key);
        CHECK(r->store.bytes_of(t->key).data() == s.data[row.data].data());
      }
      CHECK(r->report.identity.byte_comparisons == c.comparisons);
      if (reference.empty()) reference = dump(*r);
      else CHECK(dump(*r) == reference);
    }
  }
}

TEST_CASE("a second call on reused (table cache) memory gives the same result as on fresh memory") {
  // 40,000 tensors: the function table (64 B a row) and the engine's scratch
  // pass 1 MiB, so they are huge-page blocks the cache keeps between calls
  // (filled with 0xA5 on reuse in the tests' builds: nothing may rely on
  // fresh memory being zero).
  constexpr std::size_t kTensors = 40000;
  std::vector<std::uint8_t> bytes(kTensors * 8);
  Program p;
  Partition& a = p.add_method("a").add_partition();
  Partition& b = p.add_method("b").add_partition();
  for (std::size_t i = 0; i < kTensors / 2; ++i) {
    const std::uint64_t v = i * 0x9E3779B97F4A7C15ull;
    std::memcpy(bytes.data() + 16 * i, &v, 8);
    std::memcpy(bytes.data() + 16 * i + 8, &v, 8);  // b's copy at other memory
    a.add("t" + std::to_string(i), ByteSpan(bytes.data() + 16 * i, 8));
    b.add("t" + std::to_string(i), ByteSpan(bytes.data() + 16 * i + 8, 8));
  }
  set_table_cache_limit(0);  // first call: fresh mappings only
  std::string fresh;
  {
    auto r = deduplicate<Strategy<Positional>>(p);
    REQUIRE(r.ok());
    CHECK(r->report.buffers == kTensors / 2);
    CHECK(r->report.keys == kTensors / 2);
    fresh = dump(*r);
  }
  CHECK(table_cache_bytes() == 0);
  set_table_cache_limit(64u << 20);
  { auto warm = deduplicate<Strategy<Positional>>(p); }  // its blocks stay cached
  const std::size_t kept = table_cache_bytes();
  CHECK(kept >= (std::size_t{4} << 20));  // at least the function table and the engine's arena
  CHECK(kept % (std::size_t{2} << 20) == 0);
  for (unsigned threads : {1u, 2u}) {
    DedupOptions o;
    o.threads = threads;
    auto r = deduplicate<Strategy<Positional>>(p, o);
    REQUIRE(r.ok());
    CHECK(dump(*r) == fresh);
  }
  CHECK(table_cache_bytes() == kept);  // the same blocks, back again
}

TEST_CASE("bad input: typed errors naming method, partition, tensor and sizes; nothing produced") {
  std::vector<std::uint8_t> a(24, 1);
  SUBCASE("empty method name") {
    Program p;
    p.add_method("").add_partition();
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() == "method #0 has an empty name");
  }
  SUBCASE("more threads than kMaxThreads: refused before any is started") {
    Program p;
    p.add_method("decode").add_partition().add("w", span(a));
    DedupOptions o;
    o.threads = 0x80000000u;
    auto r = deduplicate<Strategy<OneBlob>>(p, o);
    CHECK(r.error() == Error::InvalidArgument);
    CHECK(r.message() == "DedupOptions::threads is 2147483648; at most 1024 (0: every core)");
    o.threads = DedupOptions::kMaxThreads + 1;
    r = deduplicate<Strategy<OneBlob>>(p, o);
    CHECK(r.error() == Error::InvalidArgument);
    CHECK(r.message() == "DedupOptions::threads is 1025; at most 1024 (0: every core)");
    o.threads = DedupOptions::kMaxThreads;
    r = deduplicate<Strategy<OneBlob>>(p, o);
    REQUIRE(r.ok());
    CHECK(r->report.threads == 1024);
    CHECK(r->store.key_count() == 1);
  }
  SUBCASE("duplicate method name") {
    Program p;
    p.add_method("decode");
    p.add_method("prefill");
    p.add_method("decode");
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() == "method name 'decode' is used twice (methods #0 and #2)");
  }
  SUBCASE("duplicate tensor name in a partition") {
    Program p;
    p.add_method("decode").add_partition().add("v", span(a)).add("w", span(a)).add("x", span(a)).add("w", span(a));
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() == "method 'decode' partition 0: tensor name 'w' is used twice (tensors #1 and #3)");
  }
  SUBCASE("a NUL byte in a tensor name or a method name (no key can hold one)") {
    Program p;
    p.add_method("decode").add_partition().add("w", span(a)).add(std::string("x\0y", 3), span(a));
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() ==
          "method 'decode' partition 0: tensor 'x\\x00y' contains a NUL byte at offset 1; ExecuTorch compares keys "
          "only up to a NUL (strcmp, or strncmp after a length check), so it could not tell it from a key that agrees "
          "before the NUL");
    // Only a name's first occurrence is scanned for NUL (validate_program):
    // one in every method is refused at the first, the same either way.
    Program twice;
    twice.add_method("prefill").add_partition().add(std::string("x\0y", 3), span(a));
    twice.add_method("decode").add_partition().add(std::string("x\0y", 3), span(a));
    r = deduplicate<Strategy<OneBlob>>(twice);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() ==
          "method 'prefill' partition 0: tensor 'x\\x00y' contains a NUL byte at offset 1; ExecuTorch compares keys "
          "only up to a NUL (strcmp, or strncmp after a length check), so it could not tell it from a key that agrees "
          "before the NUL");
    Program q;
    q.add_method(std::string("de\0code", 7)).add_partition().add("w", span(a));
    r = deduplicate<Strategy<OneBlob>>(q);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() == "method name 'de\\x00code' contains a NUL byte at offset 2");
  }
  SUBCASE("a tensor name that is not UTF-8 (no key can be: flatbuffer strings are UTF-8)") {
    Program p;
    p.add_method("prefill").add_partition().add("w", span(a));
    p.add_method("decode").add_partition().add("w", span(a)).add("layers.0.w\xc3", span(a));
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() ==
          "method 'decode' partition 0: tensor 'layers.0.w\\xc3' is not valid UTF-8 at offset 10; a key is a "
          "flatbuffer string, which is UTF-8, and ExecuTorch's Python reader (flatc --json) cannot read a file "
          "holding one that is not");
    // A method name too: keys are made of it where methods give one name
    // other bytes ('<method>/<name>').
    Program m;
    m.add_method("prefill").add_partition().add("w", span(a));
    m.add_method("decod\xe8").add_partition().add("w", span(a));
    r = deduplicate<Strategy<OneBlob>>(m);
    CHECK(r.error() == Error::InvalidName);
    CHECK(r.message() ==
          "method name 'decod\\xe8' is not valid UTF-8 at offset 5 (keys are made of method names: "
          "'<method>/<name>'); a key is a flatbuffer string, which is UTF-8, and ExecuTorch's Python reader "
          "(flatc --json) cannot read a file holding one that is not");
    // Well-formed UTF-8 names are keys as they are.
    Program q;
    q.add_method("prefill").add_partition().add("caf\xc3\xa9", span(a));
    q.add_method("decode").add_partition().add("caf\xc3\xa9", span(a));
    auto ok = deduplicate<Strategy<OneBlob>>(q);
    REQUIRE(ok.ok());
    REQUIRE(ok->store.key_count() == 1);
    CHECK(ok->store.find("caf\xc3\xa9") != nullptr);
  }
  SUBCASE("bad alignment") {
    Program p;
    p.add_method("decode").add_partition();
    p.methods[0].add_partition().add("w", span(a), -8);
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::InvalidAlignment);
    CHECK(r.message() == "method 'decode' partition 1: tensor 'w': alignment must be a positive integer, got -8");
  }
  SUBCASE("a null data pointer with a size") {
    // A failed mapping handed on: the tensor's size occurs once, so nothing
    // reads it before the write, which would be the first to touch it.
    Program p;
    Partition& part = p.add_method("decode").add_partition();
    part.add("w", span(a)).add("nul", ByteSpan(nullptr, 64));
    part.add("empty", ByteSpan(nullptr, 0));  // no bytes: nothing to read, accepted
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::InvalidArgument);
    CHECK(r.message() == "method 'decode' partition 0: tensor 'nul': the data pointer is null but the size is 64 bytes");
    Program q;
    q.add_method("decode").add_partition().add("w", span(a)).add("empty", ByteSpan(nullptr, 0));
    CHECK(deduplicate<Strategy<OneBlob>>(q).ok());
  }
  SUBCASE("alignments whose lcm is over the maximum: at the first tensor that makes it so") {
    const std::int64_t max = std::int64_t{1} << 32;
    std::vector<std::uint8_t> c(8, 9);
    SUBCASE("two keys sharing bytes") {
      Program p;
      p.add_method("decode").add_partition().add("x", span(a), max).add("y", span(a), 3);
      auto r = deduplicate<Strategy<OneBlob>>(p);
      CHECK(r.error() == Error::InvalidAlignment);
      CHECK(r.message() == "method 'decode' partition 0 tensor 'y': lcm of alignments 4294967296 and 3 exceeds "
                           "4294967296: key 'y' shares its bytes with keys whose alignments' lcm is 4294967296");
    }
    SUBCASE("one key, twice") {
      Program p;
      p.add_method("decode").add_partition().add("x", span(a), 3);
      p.add_method("prefill").add_partition().add("x", span(a), max);
      auto r = deduplicate<Strategy<OneBlob>>(p);
      CHECK(r.error() == Error::InvalidAlignment);
      CHECK(r.message() == "method 'prefill' partition 0 tensor 'x': lcm of alignments 3 and 4294967296 for key "
                           "'x' exceeds 4294967296");
    }
    SUBCASE("the earlier of a shared-bytes and a one-key overflow") {
      Program p;
      Method& d = p.add_method("decode");
      d.add_partition().add("x", span(a), max).add("y", span(a), 3);  // first: decode 0 'y'
      d.add_partition().add("z", span(c), max);
      p.add_method("prefill").add_partition().add("z", span(c), 3);  // later: key 'z'
      auto r = deduplicate<Strategy<OneBlob>>(p);
      CHECK(r.error() == Error::InvalidAlignment);
      CHECK(r.message() == "method 'decode' partition 0 tensor 'y': lcm of alignments 4294967296 and 3 exceeds "
                           "4294967296: key 'y' shares its bytes with keys whose alignments' lcm is 4294967296");
    }
  }
  SUBCASE("layout disagrees with the bytes") {
    Program p;
    p.add_method("prefill").add_partition().add("w", span(a), 1, Layout::contiguous(ScalarType::Float, {5}));
    auto r = deduplicate<Strategy<OneBlob>>(p);
    CHECK(r.error() == Error::LayoutMismatch);
    CHECK(r.message() ==
          "method 'prefill' partition 0: tensor 'w': layout FLOAT [5] dim_order [0] describes 20 bytes but the data has 24 bytes");
  }
}

TEST_CASE("any thread count: the error is the first one in program order, the result the same") {
  // Whatever runs in parallel, name and layout errors must come out as one
  // pass in program order meets them first.
  std::vector<std::uint8_t> a(24, 1);
  for (unsigned threads : {1u, 2u, 8u}) {
    CAPTURE(threads);
    DedupOptions o;
    o.threads = threads;
    {  // a name error before an alignment error
      Program p;
      p.add_method("decode").add_partition().add("w", span(a)).add("w", span(a)).add("v", span(a), 0);
      auto r = deduplicate<Strategy<OneBlob>>(p, o);
      CHECK(r.error() == Error::InvalidName);
      CHECK(r.message() == "method 'decode' partition 0: tensor name 'w' is used twice (tensors #0 and #1)");
    }
    {  // an alignment error before a name error
      Program p;
      p.add_method("decode").add_partition().add("v", span(a), 0).add("w", span(a)).add("w", span(a));
      auto r = deduplicate<Strategy<OneBlob>>(p, o);
      CHECK(r.error() == Error::InvalidAlignment);
      CHECK(r.message() == "method 'decode' partition 0: tensor 'v': alignment must be a positive integer, got 0");
    }
    {  // only a name error, in a later method
      Program p;
      p.add_method("prefill").add_partition().add("w", span(a)).add("v", span(a));
      p.add_method("decode").add_partition().add("w", span(a)).add("", span(a));
      auto r = deduplicate<Strategy<OneBlob>>(p, o);
      CHECK(r.error() == Error::InvalidName);
      CHECK(r.message() == "method 'decode' partition 0: tensor #1 has an empty name");
    }
    {  // valid: the same result as one thread
      Program p;
      p.add_method("prefill").add_partition().add("w", span(a)).add("v", span(a));
      p.add_method("decode").add_partition().add("v", span(a)).add("u", span(a), 8);
      auto r = deduplicate<Strategy<OneBlob>>(p, o);
      REQUIRE(r);
      CHECK(r->store.key_count() == 3);
      CHECK(r->store.buffer_count() == 1);
      CHECK(r->store.buffers()[0].alignment == 8);
    }
  }
}

TEST_CASE("alignment: a key used with 16 and 4096 gets 4096; a buffer gets the lcm of its keys") {
  std::vector<std::uint8_t> w(100, 3), w2 = w, w3 = w;
  Program program;
  program.add_method("prefill").add_partition().add("w", span(w), 16).add("alias", span(w3), 12);
  program.add_method("decode").add_partition().add("w", span(w2), 4096);
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  REQUIRE(r->store.key_count() == 2);
  CHECK(r->store.keys()[0].key == "w");
  CHECK(r->store.keys()[0].alignment == 4096);
  CHECK(r->store.keys()[1].key == "alias");
  CHECK(r->store.keys()[1].alignment == 12);
  CHECK(r->store.buffers()[0].alignment == 12288);  // lcm(4096, 12)
}

TEST_CASE("alignment: every tensor asks for 64: every key and every buffer gets 64") {
  // One alignment for all takes deduplicate()'s shortcut (no per-site lcm):
  // the buffers must still carry it, as the keys do (a buffer left at 1
  // held keys of 64). "w" is one key over two tensors; "m" differs between
  // the methods, so it gets generated keys (the store's index is then built,
  // not handed over).
  std::vector<std::uint8_t> w(100, 3), w2 = w, m1(16, 1), m2(16, 2);
  Program program;
  program.add_method("prefill").add_partition().add("w", span(w), 64).add("m", span(m1), 64);
  program.add_method("decode").add_partition().add("w", span(w2), 64).add("m", span(m2), 64);
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  REQUIRE(r->store.key_count() == 3);
  REQUIRE(r->store.buffer_count() == 3);
  const char* const want[] = {"w", "prefill/m", "decode/m"};
  for (std::size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(r->store.keys()[k].key == want[k]);
    CHECK(r->store.keys()[k].buffer_index == k);
    CHECK(r->store.keys()[k].alignment == 64);
    CHECK(r->store.buffers()[k].alignment == 64);
  }
  // All consistent (the name index handed over as the key index): the same.
  Program same;
  same.add_method("prefill").add_partition().add("w", span(w), 64).add("m", span(m1), 64);
  same.add_method("decode").add_partition().add("w", span(w2), 64);
  auto s = deduplicate<Strategy<OneBlob>>(same);
  REQUIRE(s.ok());
  REQUIRE(s->store.buffer_count() == 2);
  CHECK(s->store.keys()[0].alignment == 64);
  CHECK(s->store.keys()[1].alignment == 64);
  CHECK(s->store.buffers()[0].alignment == 64);
  CHECK(s->store.buffers()[1].alignment == 64);
}

TEST_CASE("alignment: tensors of alignment 1 and then one of 16: each key and buffer keeps its own") {
  // The first alignment seen is 1, the default: a later 16 still makes the
  // alignments differ, so no key takes the shortcut's one alignment for all.
  std::vector<std::uint8_t> a(8, 1), b(8, 2), c(8, 3);
  Program program;
  program.add_method("m").add_partition().add("a", span(a), 1).add("b", span(b), 1).add("c", span(c), 16);
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  REQUIRE(r->store.key_count() == 3);
  REQUIRE(r->store.buffer_count() == 3);
  const char* const want[] = {"a", "b", "c"};
  const std::uint64_t align[] = {1, 1, 16};
  for (std::size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(r->store.keys()[k].key == want[k]);
    CHECK(r->store.keys()[k].alignment == align[k]);
    CHECK(r->store.buffers()[k].alignment == align[k]);
  }
}

TEST_CASE("forced collisions on 100 tensors of 64 KiB that differ only in their first line: 5 buffers, each its own") {
  // Five contents that differ only at byte 10, 20 tensors each: one group
  // for the engine, in member chunks, where no fingerprint tells them
  // apart and every byte must be compared, the first line's too.
  std::vector<std::vector<std::uint8_t>> contents;
  for (int k = 0; k < 5; ++k) {
    std::vector<std::uint8_t> b = wdedup_test::pattern(65536, 9);
    b[10] = static_cast<std::uint8_t>(k);
    contents.push_back(b);
  }
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 100; ++i) data.push_back(contents[static_cast<std::size_t>(i * 7 % 5)]);
  Program program;
  Partition& p = program.add_method("m").add_partition();
  for (std::size_t i = 0; i < 100; ++i) p.add("t" + std::to_string(i), span(data[i]));
  for (unsigned threads : {1u, 2u, 8u}) {
    CAPTURE(threads);
    DedupOptions o;
    o.threads = threads;
    auto r = deduplicate<Strategy<OneBlob>>(program, o, AlwaysCollideHash{});
    REQUIRE(r.ok());
    CHECK(r->store.buffer_count() == 5);
    CHECK(r->report.bytes_saved == 95 * 65536);
    // Tensor i holds content 7i mod 5, first held by tensor i mod 5.
    for (std::size_t i = 0; i < 100; ++i) CHECK(r->store.bytes_of("t" + std::to_string(i)).data() == data[i % 5].data());
  }
}

TEST_CASE("same bytes under one name, with a layout in one method and none in the other: separate keys, one buffer") {
  std::vector<std::uint8_t> w(24, 3), w2 = w;
  for (const bool layout_first : {false, true}) {
    CAPTURE(layout_first);
    Program program;
    Partition& prefill = program.add_method("prefill").add_partition();
    Partition& decode = program.add_method("decode").add_partition();
    if (layout_first) {
      prefill.add("w", span(w), 1, Layout::contiguous(ScalarType::Float, {2, 3}));
      decode.add("w", span(w2));
    } else {
      prefill.add("w", span(w));
      decode.add("w", span(w2), 1, Layout::contiguous(ScalarType::Float, {2, 3}));
    }
    auto r = deduplicate<Strategy<OneBlob>>(program);
    REQUIRE(r.ok());
    REQUIRE(r->store.key_count() == 2);
    CHECK(r->store.keys()[0].key == "prefill/w");
    CHECK(r->store.keys()[1].key == "decode/w");
    CHECK(r->store.keys()[0].layout.has_value() == layout_first);
    CHECK(r->store.keys()[1].layout.has_value() == !layout_first);
    CHECK(r->store.buffer_count() == 1);
    CHECK(r->store.bytes_of("decode/w").data() == w.data());
  }
}

TEST_CASE("same bytes under one name but another layout in two methods: separate keys, one buffer") {
  // FLOAT [2, 3] and [3, 2], and FLOAT [6] and INT [6], describe the same 24
  // bytes; a different shape makes the name inconsistent, and so does the
  // scalar type alone.
  const struct {
    Layout prefill, decode;
  } cases[] = {{Layout::contiguous(ScalarType::Float, {2, 3}), Layout::contiguous(ScalarType::Float, {3, 2})},
               {Layout::contiguous(ScalarType::Float, {6}), Layout::contiguous(ScalarType::Int, {6})}};
  for (const auto& c : cases) {
    CAPTURE(c.decode.sizes.size());
    CAPTURE(static_cast<int>(c.decode.scalar_type));
    CHECK_FALSE(c.prefill == c.decode);
    std::vector<std::uint8_t> w(24, 3), w2 = w;
    Program program;
    program.add_method("prefill").add_partition().add("w", span(w), 1, c.prefill);
    program.add_method("decode").add_partition().add("w", span(w2), 1, c.decode);
    auto r = deduplicate<Strategy<OneBlob>>(program);
    REQUIRE(r.ok());
    REQUIRE(r->store.key_count() == 2);
    CHECK(r->store.keys()[0].key == "prefill/w");
    CHECK(r->store.keys()[1].key == "decode/w");
    CHECK(r->store.buffer_count() == 1);
    CHECK(r->store.keys()[0].buffer_index == 0);
    CHECK(r->store.keys()[1].buffer_index == 0);
    CHECK(r->store.keys()[0].layout == c.prefill);
    CHECK(r->store.keys()[1].layout == c.decode);
    const FunctionMap& prefill0 = REQUIRE_FOUND(r->functions.find("prefill", 0));
    const FunctionMap& decode0 = REQUIRE_FOUND(r->functions.find("decode", 0));
    const std::string& prefill_key = REQUIRE_FOUND(prefill0.key_of("w"));
    const std::string& decode_key = REQUIRE_FOUND(decode0.key_of("w"));
    CHECK(prefill_key == "prefill/w");
    CHECK(decode_key == "decode/w");
  }
}

TEST_CASE("the report's largest alias groups: at most five, largest saving first, ties in order of first use") {
  // Seven names of 16 bytes (t0..t6), then "mid" of 32 and "big" of 64, each
  // the same bytes in both methods and distinct between names: nine alias
  // groups of 2 tensors under 1 key. The largest savings were used last;
  // t3..t6 tie with t2 for the last place, and lose it: they came later.
  // An empty tensor in both methods shares a buffer too, but saves nothing:
  // no alias group.
  std::vector<std::vector<std::uint8_t>> data;
  for (std::uint8_t i = 0; i < 7; ++i) data.push_back(std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(i + 1)));
  data.push_back(std::vector<std::uint8_t>(32, 98));
  data.push_back(std::vector<std::uint8_t>(64, 99));
  Program program;
  for (const char* method : {"prefill", "decode"}) {
    Partition& part = program.add_method(method).add_partition();
    part.add("empty", ByteSpan());
    for (std::size_t i = 0; i < 7; ++i) part.add("t" + std::to_string(i), span(data[i]));
    part.add("mid", span(data[7]));
    part.add("big", span(data[8]));
  }
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(r->report.alias_groups == 9);
  const std::vector<AliasGroup>& top = r->report.largest_alias_groups;
  REQUIRE(top.size() == 5);
  const char* const want[] = {"big", "mid", "t0", "t1", "t2"};
  const std::uint64_t size[] = {64, 32, 16, 16, 16};
  for (std::size_t k = 0; k < 5; ++k) {
    CAPTURE(k);
    CHECK(top[k].first_key == want[k]);
    CHECK(top[k].tensors == 2);
    CHECK(top[k].keys == 1);
    CHECK(top[k].size == size[k]);
    CHECK(top[k].bytes_saved == size[k]);
  }
  // With only the empty tensors shared: none.
  Program empty_only;
  for (const char* method : {"prefill", "decode"}) {
    Partition& part = empty_only.add_method(method).add_partition();
    part.add("empty", ByteSpan());
    part.add(std::string("own_") + method, span(data[method[0] == 'p' ? 0 : 1]));
  }
  auto e = deduplicate<Strategy<OneBlob>>(empty_only);
  REQUIRE(e.ok());
  CHECK(e->report.alias_groups == 0);
  CHECK(e->report.largest_alias_groups.empty());
  CHECK(e->report.to_table().find("\n  alias groups 0\n\n") != std::string::npos);
}

TEST_CASE("the report's largest alias groups: six equal savings, the sixth loses the tie") {
  // Six contents of 16 bytes, each in both methods: six alias groups that
  // save 16 bytes each. Ties go in order of first use, so t5 is left out
  // (a '<' where '<=' belongs kept t5 over t4).
  std::vector<std::vector<std::uint8_t>> data;
  for (std::uint8_t i = 0; i < 6; ++i) data.push_back(std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(i + 1)));
  Program program;
  for (const char* method : {"prefill", "decode"}) {
    Partition& part = program.add_method(method).add_partition();
    for (std::size_t i = 0; i < 6; ++i) part.add("t" + std::to_string(i), span(data[i]));
  }
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(r->report.alias_groups == 6);
  const std::vector<AliasGroup>& top = r->report.largest_alias_groups;
  REQUIRE(top.size() == 5);
  for (std::size_t k = 0; k < 5; ++k) {
    CAPTURE(k);
    CHECK(top[k].first_key == "t" + std::to_string(k));
    CHECK(top[k].bytes_saved == 16);
  }
}

TEST_CASE("the report counts a content shared by three methods, or three partitions, once in each") {
  // One 100-byte content in methods a, b and c: each method uses 100
  // distinct bytes, all of them shared with another method (a second
  // count of the same content gave b 200, more than it uses).
  const std::vector<std::uint8_t> w(100, 7);
  Program three;
  for (const char* method : {"a", "b", "c"}) three.add_method(method).add_partition().add("w", span(w));
  auto r = deduplicate<Strategy<OneBlob>>(three);
  REQUIRE(r.ok());
  REQUIRE(r->report.per_method.size() == 3);
  const std::uint64_t attributed[] = {100, 0, 0};
  for (std::size_t m = 0; m < 3; ++m) {
    CAPTURE(m);
    const MethodReport& mr = r->report.per_method[m];
    CHECK(mr.bytes_in == 100);
    CHECK(mr.bytes_distinct == 100);
    CHECK(mr.bytes_shared_with_other_methods == 100);
    CHECK(mr.bytes_attributed == attributed[m]);
  }
  // One method of three partitions, each holding the content: three blobs
  // (Positional combines nothing with one method), each holding 100
  // distinct bytes shared with the other blobs.
  Program parts;
  Method& m = parts.add_method("m");
  for (int p = 0; p < 3; ++p) m.add_partition().add("w", span(w));
  auto q = deduplicate<Strategy<Positional>>(parts);
  REQUIRE(q.ok());
  REQUIRE(q->report.per_blob.size() == 3);
  for (std::size_t b = 0; b < 3; ++b) {
    CAPTURE(b);
    const BlobReport& br = q->report.per_blob[b];
    CHECK(br.blob_key == "m_partition_" + std::to_string(b));
    CHECK(br.bytes_in == 100);
    CHECK(br.bytes_distinct == 100);
    CHECK(br.bytes_shared_across == 100);
  }
  // The total counts it once per blob beyond the first (blobs - 1 times).
  CHECK(q->report.bytes_shared_across_blobs == 200);
}

TEST_CASE("the report's byte counts in human units never read 1024 of one unit") {
  // Until a user trial, sizes just below a MiB or GiB were rounded up to
  // "1024.00 KiB" and "1024.00 MiB": the next unit is what they round to.
  CHECK(detail::human_bytes(1023) == "1023 B");
  CHECK(detail::human_bytes(1024) == "1.00 KiB");
  CHECK(detail::human_bytes(1048570) == "1023.99 KiB");
  CHECK(detail::human_bytes(1048575) == "1.00 MiB");
  CHECK(detail::human_bytes(1048576) == "1.00 MiB");
  CHECK(detail::human_bytes(1073741823) == "1.00 GiB");
  CHECK(detail::human_bytes(1073736000) == "1023.99 MiB");
  CHECK(detail::human_bytes(1099511627775ull) == "1.00 TiB");
  CHECK(detail::human_bytes(~std::uint64_t{0}) == "16777216.00 TiB");  // the last unit has no next one
  CHECK(detail::human_bytes(std::uint64_t{1} << 50) == "1024.00 TiB");  // nor there, where it reads 1024
  CHECK(detail::human_bytes((std::uint64_t{1} << 50) - 1) == "1024.00 TiB");
  // Under a locale whose decimal point is a comma (the table is for people,
  // and printf writes the locale's), the same.
  const char* const wanted = std::getenv("WDEDUP_TEST_COMMA_LOCALE");  // as in the JSON test below
  if (std::setlocale(LC_NUMERIC, wanted != nullptr ? wanted : "de_DE.UTF-8") != nullptr) {
    CHECK(detail::human_bytes(1048575) == "1,00 MiB");
    CHECK(detail::human_bytes(1048570) == "1023,99 KiB");
    std::setlocale(LC_NUMERIC, "C");
  }
}

namespace {
// A policy whose name and blob key hold control characters (neither is
// refused: only a null, empty or NUL-holding name is).
struct EscapedNames {
  static constexpr const char* name = "ESC\x1b[0m";
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) { return "blob\x07"; }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t) { return p.methods[m].name; }
};
}  // namespace

TEST_CASE("the report's table escapes names: control characters, bytes that are not UTF-8, backslashes") {
  // (The messages' escaping, detail/escape.hpp: the table's is the same
  // without the quotes, and so without escaping an apostrophe.)
  CHECK(detail::table_name("layers.0.wq") == "layers.0.wq");
  CHECK(detail::table_name("w\x1b[2J\xff") == "w\\x1b[2J\\xff");
  CHECK(detail::table_name("a\\b") == "a\\\\b");
  CHECK(detail::table_name("it's") == "it's");  // unquoted: an apostrophe ends nothing
  CHECK(detail::table_name("\xc3\xa9t\xc3\xa9") == "\xc3\xa9t\xc3\xa9");  // "été", copied
  CHECK(detail::table_name("\xc2\x9b" "1m") == "\\xc2\\x9b1m");            // U+009B, a C1 control (CSI)
  CHECK(detail::table_name("\xc2\xa0") == "\xc2\xa0");                     // U+00A0, not a control
  CHECK(detail::table_name("x\xe2\x82") == "x\\xe2\\x82");                 // a sequence cut short
  CHECK(detail::table_name("\x7f\n\t") == "\\x7f\\n\\t");
  CHECK(detail::table_name("abc\xe2\x80\xae" "cba") == "abc\\xe2\\x80\\xaecba");  // U+202E, right-to-left override
  CHECK(detail::table_name("\xe2\x81\xa6x\xe2\x81\xa9") == "\\xe2\\x81\\xa6x\\xe2\\x81\\xa9");  // an isolate
  CHECK(detail::table_name("a\xe2\x80\xa8" "b") == "a\\xe2\\x80\\xa8" "b");  // U+2028
  CHECK(detail::table_name("\xe2\x80\x94") == "\xe2\x80\x94");  // U+2014, an em dash: copied
  std::vector<std::uint8_t> a(4, 1), b = a;
  Program program;
  program.add_method("pre\x1b]0;x\x07").add_partition().add("w\x1b[2J", span(a));
  program.add_method("decode").add_partition().add("w\x1b[2J", span(b));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  const std::string table = r->report.to_table();
  CHECK(table.find('\x1b') == std::string::npos);
  CHECK(table.find('\x07') == std::string::npos);
  CHECK(table.find("\n  pre\\x1b]0;x\\x07 ") != std::string::npos);
  CHECK(table.find("\n    w\\x1b[2J ") != std::string::npos);
  // JSON keeps the names themselves (escaped as JSON escapes them).
  CHECK(r->report.to_json().find("{\"method\":\"pre\\u001b]0;x\\u0007\",") != std::string::npos);
  CHECK(r->report.to_json().find("{\"first_key\":\"w\\u001b[2J\",") != std::string::npos);
  // The strategy's name and the blob keys are escaped too, in both.
  DedupOptions o;
  o.threads = 1;
  auto e = deduplicate<Strategy<EscapedNames>>(program, o);
  REQUIRE_MESSAGE(e.ok(), e.message());
  const std::string escaped = e->report.to_table();
  CHECK(escaped.find('\x1b') == std::string::npos);
  CHECK(escaped.find('\x07') == std::string::npos);
  CHECK(escaped.rfind("wdedup report — strategy ESC\\x1b[0m, 1 thread\n", 0) == 0);
  CHECK(escaped.find("\n  blob\\x07 ") != std::string::npos);
  const std::string json = e->report.to_json();
  CHECK(json.rfind("{\"strategy\":\"ESC\\u001b[0m\",\"threads\":1,", 0) == 0);
  CHECK(json.find("\"per_blob\":[{\"blob_key\":\"blob\\u0007\",\"functions\":2,") != std::string::npos);
}

TEST_CASE("the report's table counts a name's columns as a terminal shows them") {
  CHECK(detail::table_columns("") == 0);
  CHECK(detail::table_columns("layers.0.wq") == 11);
  CHECK(detail::table_columns("caf\xC3\xA9") == 4);                       // U+00E9: one column, two bytes
  CHECK(detail::table_columns("de\xCC\x81" "code") == 6);                 // e + U+0301, combining: none
  CHECK(detail::table_columns("\xE9\xA2\x84\xE5\xA1\xAB\xE5\x85\x85") == 6);  // U+9884 U+586B U+5145: two each
  CHECK(detail::table_columns("\xED\x95\x9C") == 2);                     // U+D55C, a Hangul syllable
  CHECK(detail::table_columns("\xF0\x9F\x98\x80") == 2);                // U+1F600, an emoji
  CHECK(detail::table_columns("\xF0\xA0\x80\x80") == 2);                // U+20000, CJK extension B
  CHECK(detail::table_columns("\xF0\x90\x80\x80") == 1);                // U+10000, Linear B: four bytes, one column
  CHECK(detail::table_columns("\xF0\x9F\x98\x80" "ab") == 4);            // an emoji, then two more
  CHECK(detail::table_columns("\xEF\xBC\xA1") == 2);                     // U+FF21, fullwidth A
  CHECK(detail::table_columns("\xEF\xBD\xA1") == 1);                     // U+FF61, halfwidth
  CHECK(detail::table_columns("\xE3\x80\xBF") == 1);                     // U+303F, the one narrow CJK symbol
  CHECK(detail::table_columns("a\xE2\x80\x8B" "b") == 2);                // U+200B, zero width
  CHECK(detail::table_columns("\xEF\xB8\x8F") == 0);                     // U+FE0F, a variation selector
  CHECK(detail::table_columns("\xE0\xA4\xBE") == 1);                     // U+093E, a Devanagari sign: a block left out
  CHECK(detail::table_columns("\xF4\x8F\xBF\xBD") == 1);                 // U+10FFFD, past the last block
  // A sequence cut short by the end of the view is counted from the bytes
  // in it (E9 A2 of U+9884's E9 A2 84: U+0262, one column), not completed
  // from the byte past the end.
  CHECK(detail::table_columns(std::string_view("\xE9\xA2\x84", 2)) == 1);
  // The block ends glibc gives no width (the wcwidth check below skips
  // them) take their block's columns, and the code point after an end the
  // columns of what follows it: no block ends a code point early or late.
  // (Not after 1AFF and A97F: glibc gives U+1B00 and U+A980, a script's
  // own marks, 0, where the table leaves them 1.) The wide block from
  // U+16FE0 (ideographic symbols) to U+18D7F (Tangut Supplement) and the
  // one from U+1AFF0 (Kana Extended-B): glibc gives U+16FE0, U+18D00 to
  // U+18D08 and U+1AFF0 2, which the table gave 1 while its blocks began
  // at U+17000 and U+1B000 and the first ended at U+18CFF.
  struct End {
    std::uint32_t c;
    std::size_t columns;
  };
  const End ends[] = {{0x1AFF, 0},  {0x20FF, 0},  {0x2100, 1},  {0xA4CF, 2},  {0xA4D0, 1},  {0xA97F, 2},
                      {0xFAFF, 2},  {0xFB00, 1},  {0xFE6F, 2},  {0xFE70, 1},  {0xFF00, 2},  {0x16FDF, 1},
                      {0x16FE0, 2}, {0x18CFF, 2}, {0x18D00, 2}, {0x18D08, 2}, {0x18D7F, 2}, {0x18D80, 1},
                      {0x1AFEF, 1}, {0x1AFF0, 2}, {0x1B2FF, 2}, {0x1B300, 1}, {0x1F2FF, 2}, {0x1FAFF, 2},
                      {0x1FB00, 1}, {0x2FFFD, 2}, {0x2FFFE, 1}, {0x3FFFD, 2}, {0x3FFFE, 1}, {0xE01F0, 1}};
  // A code point as the failures name it, "U+1AFF".
  const auto u_plus = [](std::uint32_t c) {
    char name[16];
    std::snprintf(name, sizeof name, "U+%04X", static_cast<unsigned>(c));
    return std::string(name);
  };
  for (const End& e : ends) {
    const std::string name = u_plus(e.c);
    INFO(name);
    CHECK(detail::code_point_columns(e.c) == e.columns);
  }
  // The blocks are sorted and disjoint (the lookup stops at the first
  // block that ends at or past the code point), and each block's first and
  // last code point that glibc's wcwidth knows take what it says they take.
  std::uint32_t after = 0x80;
  for (const detail::ColumnBlock& b : detail::kColumnBlocks) {
    CHECK(b.first >= after);
    CHECK(b.first <= b.last);
    after = b.last + 1;
  }
  const std::string was = std::setlocale(LC_CTYPE, nullptr);
  if (std::setlocale(LC_CTYPE, "C.UTF-8") == nullptr) {
    MESSAGE("no C.UTF-8 locale: the blocks are not checked against wcwidth");
    return;
  }
  int checked = 0;
  for (const detail::ColumnBlock& b : detail::kColumnBlocks)
    for (const std::uint32_t c : {b.first, b.last}) {
      const int w = ::wcwidth(static_cast<wchar_t>(c));
      if (w < 0) continue;  // unassigned in glibc's Unicode
      const std::string name = u_plus(c);
      INFO(name);
      CHECK(static_cast<std::size_t>(w) == detail::code_point_columns(c));
      ++checked;
    }
  std::setlocale(LC_CTYPE, was.c_str());
  CHECK(checked == 55);
}

TEST_CASE("the report prints as a table and as JSON") {
  std::vector<std::uint8_t> a(10, 1), b = a;
  Program program;
  program.add_method("prefill").add_partition().add("w", span(a));
  program.add_method("decode").add_partition().add("w", span(b));
  DedupOptions o;
  o.threads = 1;
  auto r = deduplicate<Strategy<OneBlob>>(program, o);
  REQUIRE(r.ok());
  const std::string json = r->report.to_json();
  CHECK(json.rfind("{\"strategy\":\"ONE_BLOB\",\"threads\":1,\"methods\":2,\"functions\":2,\"blobs\":1,"
                   "\"tensors\":2,\"keys\":1,\"buffers\":1,\"bytes_in\":20,\"bytes_stored\":10,\"bytes_saved\":10,"
                   "\"bytes_shared_across_blobs\":0,\"alias_groups\":1,\"largest_alias_groups\":[{\"first_key\":\"w\","
                   "\"tensors\":2,\"keys\":1,\"size\":10,\"bytes_saved\":10}],",
                   0) == 0);
  CHECK(json.find("\"per_blob\":[{\"blob_key\":\"combined_all\",\"functions\":2,\"tensors\":2,\"bytes_in\":20,"
                  "\"bytes_distinct\":10,\"bytes_shared_inside\":10,\"bytes_shared_across\":0}]") != std::string::npos);
  const std::string table = r->report.to_table();
  CHECK(table.find("wdedup report — strategy ONE_BLOB, 1 thread\n") == 0);
  CHECK(table.find("  bytes saved               10  (10 B, 50.0%)") != std::string::npos);
  CHECK(table.find("\n  alias groups 1; largest:\n    w ") != std::string::npos);
  // No alias group: no "largest:" with nothing after it.
  std::vector<std::uint8_t> c(10, 2);
  Program distinct;
  distinct.add_method("prefill").add_partition().add("w", span(a));
  distinct.add_method("decode").add_partition().add("w", span(c));
  auto d = deduplicate<Strategy<OneBlob>>(distinct, o);
  REQUIRE(d.ok());
  const std::string none = d->report.to_table();
  CHECK(none.find("\n  alias groups 0\n\n  identity: ") != std::string::npos);
  CHECK(none.find("largest") == std::string::npos);
  // decode's w is settled by comparing it with prefill's (the first w),
  // which is then the only tensor of its size.
  CHECK(json.find(",\"identity\":{\"tensors\":2,\"bytes_in\":20,\"skipped_empty\":0,\"skipped_unique_size\":1,"
                  "\"skipped_same_pointer\":0,\"matched_hint\":1,\"compared_directly\":0,\"hashed\":0,"
                  "\"bytes_hashed\":0,\"byte_comparisons\":1,\"bytes_compared\":10,\"hash_collisions\":0,") !=
        std::string::npos);
  CHECK(table.find("  identity: 2 tensors; skipped by cheap checks: 1 unique size, 0 same pointer, 0 empty; "
                   "1 equal to the first of their name; 0 compared directly; 0 hashed (0 B)\n") != std::string::npos);
  // Times in JSON are written the same in every locale: printf's %f takes
  // the locale's decimal point, and "0,000229" is no JSON number.
  CHECK(detail::json_seconds(0.000229) == "0.000229");
  CHECK(detail::json_seconds(1.5) == "1.500000");
  CHECK(detail::json_seconds(12.0000004) == "12.000000");
  CHECK(detail::json_seconds(0) == "0.000000");
  CHECK(detail::json_seconds(-1) == "0.000000");
  CHECK(detail::json_seconds(std::numeric_limits<double>::quiet_NaN()) == "0.000000");
  const std::size_t at = json.find("\"seconds_total\":");
  REQUIRE(at != std::string::npos);
  CHECK(json.find(',', at + 16) > json.find('.', at + 16));  // a point before the next comma
  // A comma-decimal locale: the build's own (tests/meson.build compiles
  // one and names it here, which makes it required), or the host's.
  const char* const wanted = std::getenv("WDEDUP_TEST_COMMA_LOCALE");
  const bool comma = std::setlocale(LC_NUMERIC, wanted != nullptr ? wanted : "de_DE.UTF-8") != nullptr;
  if (wanted != nullptr) {
    // (A doctest::String: a const char* would be printed as an address.)
    const std::string why = "the build's locale " + std::string(wanted) + " cannot be used (LOCPATH)";
    REQUIRE_MESSAGE(comma, doctest::String(why.c_str()));
  }
  if (comma) {
    char probe[16];
    std::snprintf(probe, sizeof probe, "%.1f", 0.5);
    CHECK(std::string(probe) == "0,5");
    const std::string in_de = r->report.to_json();
    CHECK(in_de.find("_seconds\":0,") == std::string::npos);
    CHECK(in_de.find("\"seconds_total\":" + detail::json_seconds(r->report.seconds_total)) != std::string::npos);
    std::setlocale(LC_NUMERIC, "C");
  } else {
    MESSAGE("no de_DE.UTF-8 locale here: json_seconds checked directly");
  }
  CHECK(detail::json_string("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
  // JSON is UTF-8; names may hold any byte but NUL. Valid UTF-8 (2, 3 and
  // 4 bytes) is copied; every other byte becomes the code point of its value.
  CHECK(detail::json_string("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  CHECK(detail::json_string("pre\xFFill") == "\"pre\\u00ffill\"");
  CHECK(detail::json_string("\xC3") == "\"\\u00c3\"");                 // cut short
  CHECK(detail::json_string("\xC0\xAF") == "\"\\u00c0\\u00af\"");       // overlong
  CHECK(detail::json_string("\xED\xA0\x80") == "\"\\u00ed\\u00a0\\u0080\""); // a surrogate
  CHECK(detail::json_string("\xF4\x90\x80\x80") == "\"\\u00f4\\u0090\\u0080\\u0080\"");  // past U+10FFFF
  CHECK(detail::json_string("\x01\x7F") == "\"\\u0001\x7F\"");
  // Every control character below 0x20 is escaped, the last (0x1F) too; the
  // space (0x20) is not. \b and \f as \u escapes, which JSON allows.
  CHECK(detail::json_string(std::string("\x1F \x00x\b\f", 6)) == "\"\\u001f \\u0000x\\u0008\\u000c\"");
}

TEST_CASE("the report prints every figure in its own place, as a table and as JSON") {
  // Figures all different, so that a field printed in another's place, or
  // twice, is seen (JSON's bytes_attributed read bytes_saved, and the
  // table's columns could swap, and no test saw it).
  Report r;
  r.strategy = "POSITIONAL";
  r.threads = 3;
  r.methods = 2; r.functions = 4; r.blobs = 5; r.tensors = 6; r.keys = 7; r.buffers = 8;
  r.bytes_in = 4000; r.bytes_stored = 3000; r.bytes_saved = 1000; r.bytes_shared_across_blobs = 11;
  r.alias_groups = 2;
  r.largest_alias_groups = {{"a", 3, 2, 100, 200}, {"b", 2, 1, 50, 50}};
  r.per_method = {{"prefill", 1, 12, 2500, 2400, 300, 2000, 500}, {"decode", 2, 13, 1500, 1400, 301, 1000, 500}};
  r.per_blob = {{"x", 1, 21, 22, 23, 24, 25}, {"y", 2, 31, 32, 33, 34, 35}};
  IdentityReport& i = r.identity;
  i.inputs = 41; i.bytes_in = 42; i.skipped_empty = 43; i.skipped_unique_size = 44; i.skipped_same_pointer = 45;
  i.matched_hint = 46; i.compared_directly = 47; i.hashed = 48; i.bytes_hashed = 49; i.byte_comparisons = 50;
  i.bytes_compared = 51; i.hash_collisions = 52; i.hash_seconds = 0.25; i.compare_seconds = 0.5;
  r.seconds_total = 1.25; r.seconds_identity = 0.75;
  CHECK(r.to_json() ==
        "{\"strategy\":\"POSITIONAL\",\"threads\":3,\"methods\":2,\"functions\":4,\"blobs\":5,\"tensors\":6,\"keys\":7,"
        "\"buffers\":8,\"bytes_in\":4000,\"bytes_stored\":3000,\"bytes_saved\":1000,\"bytes_shared_across_blobs\":11,"
        "\"alias_groups\":2,\"largest_alias_groups\":[{\"first_key\":\"a\",\"tensors\":3,\"keys\":2,\"size\":100,"
        "\"bytes_saved\":200},{\"first_key\":\"b\",\"tensors\":2,\"keys\":1,\"size\":50,\"bytes_saved\":50}],"
        "\"per_method\":[{\"method\":\"prefill\",\"partitions\":1,\"tensors\":12,\"bytes_in\":2500,\"bytes_distinct\":2400,"
        "\"bytes_shared_with_other_methods\":300,\"bytes_attributed\":2000,\"bytes_saved\":500},{\"method\":\"decode\","
        "\"partitions\":2,\"tensors\":13,\"bytes_in\":1500,\"bytes_distinct\":1400,\"bytes_shared_with_other_methods\":301,"
        "\"bytes_attributed\":1000,\"bytes_saved\":500}],\"per_blob\":[{\"blob_key\":\"x\",\"functions\":1,\"tensors\":21,"
        "\"bytes_in\":22,\"bytes_distinct\":23,\"bytes_shared_inside\":24,\"bytes_shared_across\":25},{\"blob_key\":\"y\","
        "\"functions\":2,\"tensors\":31,\"bytes_in\":32,\"bytes_distinct\":33,\"bytes_shared_inside\":34,"
        "\"bytes_shared_across\":35}],\"identity\":{\"tensors\":41,\"bytes_in\":42,\"skipped_empty\":43,"
        "\"skipped_unique_size\":44,\"skipped_same_pointer\":45,\"matched_hint\":46,\"compared_directly\":47,\"hashed\":48,"
        "\"bytes_hashed\":49,\"byte_comparisons\":50,\"bytes_compared\":51,\"hash_collisions\":52,\"hash_seconds\":0.250000,"
        "\"compare_seconds\":0.500000},\"seconds_total\":1.250000,\"seconds_identity\":0.750000}");
  CHECK(r.to_table() ==
        "wdedup report — strategy POSITIONAL, 3 threads\n"
        "  methods 2, functions 4, blobs 5, tensors 6, keys 7, buffers 8\n"
        "  bytes in                4000  (3.91 KiB)\n"
        "  bytes stored            3000  (2.93 KiB)\n"
        "  bytes saved             1000  (1000 B, 25.0%)\n"
        "  shared across blobs       11  (11 B: shipped again by a backend compiling one blob at a time)\n"
        "\n"
        "  per method            partitions  tensors        bytes in     distinct  shared w/ others       saved\n"
        "  prefill                        1       12            2500         2400               300         500\n"
        "  decode                         2       13            1500         1400               301         500\n"
        "\n"
        "  per blob                        functions  tensors        bytes in     distinct  shared inside  shared across\n"
        "  x                                       1       21              22           23             24             25\n"
        "  y                                       2       31              32           33             34             35\n"
        "\n"
        "  alias groups 2; largest:\n"
        "    a                                               3 tensors   2 keys          100 B each, saves 200 B\n"
        "    b                                               2 tensors   1 key            50 B each, saves 50 B\n"
        "\n"
        "  identity: 41 tensors; skipped by cheap checks: 44 unique size, 45 same pointer, 43 empty; 46 equal to the "
        "first of their name; 47 compared directly; 48 hashed (49 B)\n"
        "  byte comparisons 50 (51 B), hash collisions 52\n"
        "  time: total 1.250 s, checks and identity 0.750 s (engine cpu: hashing 0.250 s, comparing 0.500 s)\n");
  // Names longer than a column widen it, so that the figures stay in line
  // under their headings, up to 64 columns; a name counts its characters,
  // not its bytes (caf\xC3\xA9 is 4 columns); an escape counts as printed.
  Report longer = r;
  longer.per_method[0].method = "prefill_with_kv_cache_128";  // 25
  longer.per_method[1].method = "caf\xC3\xA9";
  longer.per_blob[1].blob_key = std::string(70, 'y');  // past 64: its own row only
  longer.per_blob[0].blob_key = std::string(40, 'x');
  longer.largest_alias_groups[1].first_key = "layers.0.attention.wq\n" + std::string(27, 'k');  // 50 printed
  const std::string t = longer.to_table();
  const std::string x40(40, 'x'), y70(70, 'y'), k27(27, 'k');
  CHECK(t.find("\n"
               "  per method                 partitions  tensors        bytes in     distinct  shared w/ others       saved\n"
               "  prefill_with_kv_cache_128           1       12            2500         2400               300         500\n"
               "  caf\xC3\xA9                                2       13            1500         1400               301         500\n"
               "\n"
               "  per blob" + std::string(56, ' ') + "  functions  tensors        bytes in     distinct  shared inside  shared across\n"
               "  " + x40 + std::string(24, ' ') + "          1       21              22           23             24             25\n"
               "  " + y70 + "          2       31              32           33             34             35\n"
               "\n"
               "  alias groups 2; largest:\n"
               "    a                                                     3 tensors   2 keys          100 B each, saves 200 B\n"
               "    layers.0.attention.wq\\n" + k27 + "    2 tensors   1 key            50 B each, saves 50 B\n") !=
        std::string::npos);
  // Wide and zero-width characters: the rows stay in line as a terminal
  // shows them (U+9884 U+586B U+5145, two columns each; e + U+0301, one).
  Report wide = r;
  wide.per_method[0].method = "\xE9\xA2\x84\xE5\xA1\xAB\xE5\x85\x85";
  wide.per_method[1].method = "de\xCC\x81" "code";
  CHECK(wide.to_table().find("\n"
                             "  per method            partitions  tensors        bytes in     distinct  shared w/ others"
                             "       saved\n"
                             "  \xE9\xA2\x84\xE5\xA1\xAB\xE5\x85\x85"
                             "                         1       12            2500         2400               300"
                             "         500\n"
                             "  de\xCC\x81" "code"
                             "                         2       13            1500         1400               301"
                             "         500\n") != std::string::npos);
  // Nothing in: 0.0% saved, not 0/0 (nan); 0 threads and 0 tensors are
  // plural, as every count but 1.
  CHECK(Report().to_table() ==
        "wdedup report — strategy , 0 threads\n"
        "  methods 0, functions 0, blobs 0, tensors 0, keys 0, buffers 0\n"
        "  bytes in                   0  (0 B)\n"
        "  bytes stored               0  (0 B)\n"
        "  bytes saved                0  (0 B, 0.0%)\n"
        "  shared across blobs        0  (0 B: shipped again by a backend compiling one blob at a time)\n"
        "\n"
        "  per method            partitions  tensors        bytes in     distinct  shared w/ others       saved\n"
        "\n"
        "  per blob                        functions  tensors        bytes in     distinct  shared inside  shared across\n"
        "\n"
        "  alias groups 0\n"
        "\n"
        "  identity: 0 tensors; skipped by cheap checks: 0 unique size, 0 same pointer, 0 empty; 0 equal to the "
        "first of their name; 0 compared directly; 0 hashed (0 B)\n"
        "  byte comparisons 0 (0 B), hash collisions 0\n"
        "  time: total 0.000 s, checks and identity 0.000 s (engine cpu: hashing 0.000 s, comparing 0.000 s)\n");
  Report one_tensor;
  one_tensor.identity.inputs = 1;
  CHECK(one_tensor.to_table().find("\n  identity: 1 tensor; skipped by cheap checks: 0 unique size,") !=
        std::string::npos);
  // An alias group's keys too: 0 is plural (deduplicate() never names a
  // buffer by no key, but a Report is a plain struct anyone can fill).
  Report no_key;
  no_key.alias_groups = 1;
  no_key.largest_alias_groups = {{"z", 2, 0, 8, 8}};
  CHECK(no_key.to_table().find("\n  alias groups 1; largest:\n    z" + std::string(43, ' ') +
                               "    2 tensors   0 keys            8 B each, saves 8 B\n") != std::string::npos);
  // JSON's times are rounded to the microsecond, not cut, and capped at
  // 10^12 s (past 2^64 microseconds the conversion is undefined).
  CHECK(detail::json_seconds(0.0000019) == "0.000002");
  CHECK(detail::json_seconds(2.9999996) == "3.000000");
  CHECK(detail::json_seconds(2e12) == "1000000000000.000000");  // capped from 10^12 s on, not from further up
  CHECK(detail::json_seconds(1e300) == "1000000000000.000000");
  CHECK(detail::json_seconds(std::numeric_limits<double>::infinity()) == "1000000000000.000000");
  // A tab and a carriage return as JSON's short escapes.
  CHECK(detail::json_string("\t\r") == "\"\\t\\r\"");
  // A sequence cut short by the end of the view is cut short, though the
  // bytes past the view would complete it: C3 is \u00c3, not the start of
  // a copied "\xC3\xA9".
  CHECK(detail::json_string(std::string_view("caf\xC3\xA9", 4)) == "\"caf\\u00c3\"");
}

TEST_CASE("a store filled by deduplicate() still deduplicates later adds") {
  std::vector<std::uint8_t> a(64, 1), b(64, 2), c(64, 3), b_copy = b;
  Program program;
  program.add_method("m").add_partition().add("a", span(a)).add("b", span(b)).add("c", span(c));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  // A refused add leaves the store as it was, also the first add after
  // deduplicate() (the one that builds the buffer index) ...
  const auto refused_unchanged = [&] {
    const std::string before = dump(*r);
    auto refused = r->store.add_named_data("b", span(c));
    CHECK(refused.error() == Error::KeyConflict);
    CHECK(refused.message() == "key 'b' already holds 64 bytes that differ from the 64 bytes added now "
                                    "(first difference at byte 0)");
    CHECK(dump(*r) == before);
  };
  refused_unchanged();
  // ... which then deduplicates as the first would have.
  REQUIRE(r->store.add_named_data("b_again", span(b_copy), 8).ok());
  CHECK(r->store.buffer_count() == 3);
  const StoreKey& b_again = REQUIRE_FOUND(r->store.find("b_again"));
  CHECK(b_again.buffer_index == 1);
  refused_unchanged();
}

TEST_CASE("a store filled by deduplicate() indexes its buffers on the first later add") {
  // The bulk path builds no buffer index; the first add_named_data builds it:
  // by pointer (same memory, never read), by size (a size held once is
  // compared directly) and by content (sizes several buffers share).
  std::vector<std::uint8_t> a(64, 1), b(64, 2), u(10, 7), a_copy = a, u_copy = u, d(64, 9);
  Program program;
  program.add_method("m").add_partition().add("a", span(a)).add("b", span(b)).add("u", span(u));
  auto r = deduplicate<Strategy<Positional>>(program);
  REQUIRE(r.ok());
  REQUIRE(r->store.buffer_count() == 3);
  NamedDataStore& s = r->store;
  REQUIRE(s.add_named_data("b_same_memory", span(b)).ok());
  REQUIRE(s.add_named_data("a_copy", span(a_copy), 4).ok());
  REQUIRE(s.add_named_data("u_copy", span(u_copy)).ok());
  REQUIRE(s.add_named_data("d", span(d)).ok());
  CHECK(s.buffer_count() == 4);
  const StoreKey& b_same_memory = REQUIRE_FOUND(s.find("b_same_memory"));
  const StoreKey& a_copy_key = REQUIRE_FOUND(s.find("a_copy"));
  const StoreKey& u_copy_key = REQUIRE_FOUND(s.find("u_copy"));
  const StoreKey& d_key = REQUIRE_FOUND(s.find("d"));
  const StoreKey& a_key = REQUIRE_FOUND(s.find("a"));
  CHECK(b_same_memory.buffer_index == 1);
  CHECK(a_copy_key.buffer_index == 0);
  CHECK(s.buffers()[0].alignment == 4);
  CHECK(u_copy_key.buffer_index == 2);
  CHECK(d_key.buffer_index == 3);
  CHECK(a_key.key == "a");
  CHECK(s.find("zz") == nullptr);
  // ...and keeps them current for every add after that.
  std::vector<std::uint8_t> d_copy = d;
  REQUIRE(s.add_named_data("d_copy", span(d_copy)).ok());
  const StoreKey& d_copy_key = REQUIRE_FOUND(s.find("d_copy"));
  CHECK(d_copy_key.buffer_index == 3);
  CHECK(s.buffer_count() == 4);
  CHECK(s.key_count() == 8);
}

TEST_CASE("a store filled by deduplicate(): once indexed, an add reads only the buffer it finds") {
  // The first add builds the buffer indexes (reading the buffers of shared
  // sizes); after it, with every buffer's page but #700's unreadable, a
  // copy of #700 is found by content and a range already held by pointer.
  wdedup_test::PagedBuffers pages(1000, 32);
  Program program;
  Partition& part = program.add_method("m").add_partition();
  for (std::size_t i = 0; i < 1000; ++i) {
    std::memcpy(pages.at(i), &i, sizeof i);
    part.add("t" + std::to_string(i), ByteSpan(pages.at(i), 32));
  }
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  NamedDataStore& s = r->store;
  const std::vector<std::uint8_t> first(64, 5);
  REQUIRE(s.add_named_data("first", span(first)).ok());
  pages.protect_all_but(700);
  const std::vector<std::uint8_t> copy(pages.at(700), pages.at(700) + 32);
  REQUIRE(s.add_named_data("copy", span(copy)).ok());
  REQUIRE(s.add_named_data("same_memory", ByteSpan(pages.at(3), 32)).ok());
  const StoreKey& copy_key = REQUIRE_FOUND(s.find("copy"));
  const StoreKey& same_memory = REQUIRE_FOUND(s.find("same_memory"));
  CHECK(copy_key.buffer_index == 700);
  CHECK(same_memory.buffer_index == 3);
  CHECK(s.buffer_count() == 1001);
}

TEST_CASE("the store's key index finds every key, whether the name index was handed over or not") {
  // Every name consistent: key k is name k, and deduplicate() hands the name
  // index over as the store's key index. 'w' differs between the methods in
  // the second program, so its keys are generated and the index is built.
  std::vector<std::uint8_t> a(32, 1), b(32, 2), c(48, 3), c2(48, 4);
  for (int generated = 0; generated < 2; ++generated) {
    CAPTURE(generated);
    Program program;
    program.add_method("prefill").add_partition().add("w", span(c)).add("x", span(a)).add("y", span(b));
    program.add_method("decode").add_partition().add("y", span(b)).add("w", span(generated ? c2 : c)).add("z", span(a));
    auto r = deduplicate<Strategy<OneBlob>>(program);
    REQUIRE(r.ok());
    NamedDataStore& s = r->store;
    std::vector<std::string> keys;
    for (const StoreKey& k : s.keys()) keys.push_back(k.key);
    if (generated)
      CHECK(keys == std::vector<std::string>{"prefill/w", "x", "y", "decode/w", "z"});
    else
      CHECK(keys == std::vector<std::string>{"w", "x", "y", "z"});
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const StoreKey* k = s.find(keys[i]);
      REQUIRE(k != nullptr);
      CHECK(k == &s.keys()[i]);
    }
    CHECK(s.find("prefill") == nullptr);
    CHECK(s.find(generated ? "w" : "decode/w") == nullptr);
    // Adds after it grow the same index (past a rehash) and find old and new keys.
    std::vector<std::vector<std::uint8_t>> extra;
    for (int i = 0; i < 40; ++i) extra.push_back(std::vector<std::uint8_t>(8, static_cast<std::uint8_t>(i)));
    for (std::size_t i = 0; i < 40; ++i) REQUIRE(s.add_named_data("extra." + std::to_string(i), span(extra[i])).ok());
    CHECK(s.key_count() == keys.size() + 40);
    for (const std::string& k : keys) CHECK(s.find(k) != nullptr);
    const StoreKey& extra39 = REQUIRE_FOUND(s.find("extra.39"));
    CHECK(extra39.key == "extra.39");
    const std::string before = dump(*r);
    auto refused = s.add_named_data(keys[0], span(extra[0]));  // 48 bytes of 3 held, 8 of 0 added
    CHECK(refused.error() == Error::KeyConflict);
    CHECK(refused.message() == "key '" + keys[0] + "' already holds 48 bytes that differ from the 8 bytes added now");
    CHECK(dump(*r) == before);
  }
}

// The name index keeps a name's size in 32 bits: a name of 2^32 + 3 bytes was
// indexed, and made a store key, as its first 3 bytes ("abc"), while the
// function table named the full name, which the store then could not find.
// 4 GiB for the name, made once (one thread: a second one would copy it into
// the function tables while the check runs). Not where size_t has 32 bits,
// and only where tests/meson.build defines WDEDUP_TEST_4GIB_NAME: in an
// optimized build without a sanitizer (scripts/test.sh's reference build).
// What it checks does not depend on the compiler or the build, and each run
// cost 7-20 s in the full suite on the Zen 5 EPYC VM, whose host backs the
// 4 GiB anew each time (TSan's shadow of it would take several times that).
// The buffer is reserved, then asked for transparent huge pages, then
// filled: on 4 KiB pages the fill took 15 s there (a million page faults at
// ~10 us), on 2 MiB pages 0.7-9 s. (Where THP is off, madvise fails or does
// nothing: the fill is only slower.) glibc's malloc must not fill it first:
// meson runs each test with MALLOC_PERTURB_ set, which has malloc write
// every byte it hands out (20 s of this test in the full suite, against
// 1 s without), so the perturbation is off for this one allocation and
// back on after it (as MALLOC_PERTURB_ gives it).
#if SIZE_MAX > UINT32_MAX && defined(WDEDUP_TEST_4GIB_NAME)
TEST_CASE("a tensor name longer than 2^32 - 1 bytes is refused, not truncated") {
  static const std::uint8_t w[4] = {1, 2, 3, 4};
  const std::size_t size = 3 + (std::size_t{1} << 32);
  std::string long_name = "abc";
#if defined(M_PERTURB)
  (void)mallopt(M_PERTURB, 0);
#endif
  long_name.reserve(size);
#if defined(M_PERTURB)
  const char* perturb = std::getenv("MALLOC_PERTURB_");
  (void)mallopt(M_PERTURB, perturb != nullptr ? std::atoi(perturb) : 0);
#endif
#if defined(MADV_HUGEPAGE)
  const std::uintptr_t page = 4096, begin = reinterpret_cast<std::uintptr_t>(long_name.data());
  const std::uintptr_t first = (begin + page - 1) & ~(page - 1), last = (begin + size) & ~(page - 1);
  if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
  long_name.resize(size, 'z');
  Program p;
  p.add_method("m").add_partition().add(std::move(long_name), ByteSpan(w, 4), 1);
  DedupOptions one;
  one.threads = 1;
  auto r = deduplicate<Strategy<Disabled>>(p, one);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Error::InvalidName);
  CHECK(r.message() == "method 'm' partition 0: tensor #0's name is 4294967299 bytes long; at most 4294967295");
}
#endif

TEST_CASE("bytes made to collide under the engine's fixed seeds do not: each call hashes under a seed of its own") {
  // 128-byte tensors with one 64-byte prefix (one fingerprint: one group).
  // In the second half, each 16-byte block's first word is XXH3's secret
  // word for it plus kBlockSeed, which zeroes that block's multiply: under
  // kBlockSeed itself every tensor hashes alike, and a comparison reads to
  // byte 120, where they differ. Under that fixed seed, 65,536 of them took
  // 11.2 s (every member walked one chain of equal hashes).
  const std::size_t n = 2048, size = 128;
  const std::uint64_t seed = detail::identity::kBlockSeed;
  std::vector<std::uint8_t> buf(n * size);
  const std::size_t in_off[4] = {64, 80, 96, 112}, secret_off[4] = {112, 80, 48, 16};
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t* p = &buf[i * size];
    std::memset(p, 0x5a, 64);
    for (std::size_t b = 64; b < size; ++b) p[b] = static_cast<std::uint8_t>(b * 37 + i);
    for (std::size_t k = 0; k < 4; ++k) {
      std::uint64_t w = 0;
      std::memcpy(&w, XXH3_kSecret + secret_off[k], 8);
      w += seed;
      std::memcpy(p + in_off[k], &w, 8);
    }
    const std::uint64_t differ = i;
    std::memcpy(p + 120, &differ, 8);
  }
  const std::uint64_t h0 = Xxh3Hash{}(&buf[0], size, seed);
  for (std::size_t i = 1; i < n; ++i) REQUIRE(Xxh3Hash{}(&buf[i * size], size, seed) == h0);  // the premise
  Program program;
  Partition& part = program.add_method("forward").add_partition();
  for (std::size_t i = 0; i < n; ++i) part.add("t" + std::to_string(i), ByteSpan(&buf[i * size], size));
  DedupOptions o;
  o.threads = 1;
  auto r = deduplicate<Strategy<OneBlob>>(program, o);
  REQUIRE(r.ok());
  CHECK(r->store.buffer_count() == n);
  // Under the fixed seed every comparison in the group met an equal hash
  // with other bytes; under the call's own, none does.
  CHECK(r->report.identity.hash_collisions <= 2);
}

TEST_CASE("threads = 0 starts as many threads as the calling thread has cores in its affinity mask") {
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t before;
  CPU_ZERO(&before);
  REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
  // Restored however the test ends: later tests run on this thread.
  struct Restore {
    const cpu_set_t& mask;
    ~Restore() { sched_setaffinity(0, sizeof mask, &mask); }
  } restore{before};
  const int allowed = CPU_COUNT(&before);
  CHECK(detail::hardware_threads() == std::min(static_cast<unsigned>(allowed), DedupOptions::kMaxThreads));
  std::size_t first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  CHECK(detail::hardware_threads() == 1);
  const std::vector<std::uint8_t> a(4096, 7);
  Program p;
  p.add_method("prefill").add_partition().add("w", span(a));
  p.add_method("decode").add_partition().add("w", span(a));
  Expected<DedupResult> r = deduplicate<Strategy<OneBlob>>(p);  // DedupOptions{}: threads 0
  REQUIRE(r.ok());
  CHECK(r->report.threads == 1);
  CHECK(r->store.key_count() == 1);
#else
  CHECK(detail::hardware_threads() >= 1);
#endif
}

TEST_CASE("Layout equality: two layouts that differ only in dim_order are not equal") {
  const Layout nchw = Layout::contiguous(ScalarType::Float, {1, 2, 3, 4});
  const Layout nhwc = Layout::channels_last(ScalarType::Float, {1, 2, 3, 4});
  REQUIRE(nchw.dim_order == std::vector<std::uint8_t>{0, 1, 2, 3});
  CHECK_FALSE(nchw == nhwc);
  CHECK(nchw != nhwc);
  CHECK(nchw == Layout::contiguous(ScalarType::Float, {1, 2, 3, 4}));
  // A dim_order longer than the other's, the rest alike: unequal either
  // way round. (The shorter one's third byte, past its end, still holds 2.)
  const Layout three{ScalarType::Float, {2, 3}, {0, 1, 2}};
  Layout two{ScalarType::Float, {2, 3}, {0, 1, 2}};
  two.dim_order.pop_back();
  CHECK_FALSE(three == two);
  CHECK_FALSE(two == three);
  CHECK(three != two);
}

TEST_CASE("Layout::view is the runtime's view of the layout's own vectors; copy_of makes an owning Layout of one") {
  const Layout nhwc = Layout::channels_last(ScalarType::Half, {1, 2, 3, 4});
  const TensorLayout v = nhwc.view();
  CHECK(v.scalar_type == ScalarType::Half);
  CHECK(v.sizes.data() == nhwc.sizes.data());
  CHECK(v.dim_order.data() == nhwc.dim_order.data());
  CHECK(std::vector<std::int32_t>(v.sizes.begin(), v.sizes.end()) == std::vector<std::int32_t>{1, 2, 3, 4});
  CHECK(std::vector<std::uint8_t>(v.dim_order.begin(), v.dim_order.end()) == std::vector<std::uint8_t>{0, 2, 3, 1});
  const Layout copy = Layout::copy_of(v);
  CHECK(copy == nhwc);
  CHECK(copy.scalar_type == ScalarType::Half);
  CHECK(copy.sizes == std::vector<std::int32_t>{1, 2, 3, 4});
  CHECK(copy.dim_order == std::vector<std::uint8_t>{0, 2, 3, 1});
  CHECK(copy.sizes.data() != nhwc.sizes.data());
  // Rank 0: empty sizes and dim_order, both ways.
  const Layout scalar = Layout::contiguous(ScalarType::Float, {});
  const TensorLayout sv = scalar.view();
  CHECK(sv.scalar_type == ScalarType::Float);
  CHECK(sv.sizes.size() == 0);
  CHECK(sv.dim_order.size() == 0);
  CHECK(Layout::copy_of(sv) == scalar);
  // Sizes and dim_order of different lengths (a layout refused for that)
  // are viewed as they are: 2 sizes, 3 dim_order entries.
  const Layout uneven{ScalarType::Float, {2, 3}, {0, 1, 2}};
  CHECK(uneven.view().sizes.size() == 2);
  CHECK(uneven.view().dim_order.size() == 3);
}

TEST_CASE("Layout equality compares every dim_order entry, the first and the last") {
  // Only an inconsistent dim_order can differ from another in one entry
  // alone (two permutations differ in two places at least), but
  // operator== is public, and compares what it is given.
  const Layout a{ScalarType::Float, {2, 3}, {0, 1}};
  const Layout last{ScalarType::Float, {2, 3}, {0, 0}};
  const Layout first{ScalarType::Float, {2, 3}, {1, 1}};
  CHECK_FALSE(a == last);
  CHECK(a != last);
  CHECK_FALSE(a == first);
  CHECK(a != first);
}
