// tests/hash.cpp — wdedup/hash.hpp and the XXH3-64 content hashes the writer
// stores and verify_segment checks: the values are XXH3-64's (the expected
// ones were computed outside wdedup, by hash-wasm 4.13's xxhash3: xxHash's
// C code built to WebAssembly by another project, through none of our
// headers or flags), one-shot and piecewise hashing agree, and all of it
// builds and holds at every optimization level. meson builds this file
// twice: test_hash with the build's own flags, and test_hash_og at -Og,
// where GCC 12 could not compile xxHash 0.8.1's streaming API under
// XXH_INLINE_ALL (see wdedup/runtime/detail/xxhash.hpp).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "support/ptd_files.hpp"
#include "wdedup/detail/min_max.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/ptd_writer.hpp"
#include "wdedup/runtime/named_data_map.hpp"
#include "wdedup/runtime/verify.hpp"

using namespace wdedup;

namespace {

/// The bytes the expected values were computed over: byte i is
/// (131 i + i / 2048) mod 256.
std::vector<std::uint8_t> bytes_of(std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i * 131 + (i >> 11)) & 0xFF);
  return b;
}

struct Vector {
  std::size_t size;
  std::uint64_t seed, expected;
};

// One size in each of XXH3-64's length classes (0, 1-3, 17-128, 129-240,
// above 240 in one block, several blocks) and one above the writer's 512 KiB
// hash chunk, at seed 0 (the content hash) and at a non-zero seed (what
// deduplicate() uses). From hash-wasm 4.13's xxhash3(bytes, seedLow, 0), on Node.js 20.
constexpr Vector kVectors[] = {
    {0, 0, 0x2d06800538d394c2},           {0, 0x9e3779b9, 0x64ce21f217f362b1},
    {3, 0, 0x6811538b444fc6dc},           {3, 0x9e3779b9, 0xfe7d64c19a96adae},
    {17, 0, 0x57c52d21ce492c1e},          {17, 0x9e3779b9, 0xbd771cc4f50b91c0},
    {129, 0, 0xb1ada52285757beb},         {129, 0x9e3779b9, 0xa6e3e5a143929097},
    {241, 0, 0x44dbd3180a664e27},         {241, 0x9e3779b9, 0xa64c463317410ece},
    {4096, 0, 0x70ab4e90ded9e0ed},        {4096, 0x9e3779b9, 0x6b312285aacba909},
    {600000, 0, 0xa09438de23509601},      {600000, 0x9e3779b9, 0x695736a9162921d4},
};

/// The table's seed-0 value (the content hash) for `size` bytes.
std::uint64_t content_hash_of(std::size_t size) {
  for (const Vector& v : kVectors)
    if (v.size == size && v.seed == 0) return v.expected;
  FAIL("no seed-0 vector of " << size << " bytes");
  return 0;
}

}  // namespace

TEST_CASE("Xxh3Hash is XXH3-64 of the bytes with the given seed") {
  for (const Vector& v : kVectors) {
    CAPTURE(v.size);
    CAPTURE(v.seed);
    const std::vector<std::uint8_t> b = bytes_of(v.size);
    CHECK(Xxh3Hash{}(b.data(), b.size(), v.seed) == v.expected);
  }
}

TEST_CASE("AlwaysCollideHash is 0 for any bytes, size and seed: every input collides with every other") {
  // The tests that show a collision never merges different bytes use it;
  // a hash that told some inputs apart would leave them less to show.
  const std::vector<std::uint8_t> a = bytes_of(241), b(241, 0xFF);
  CHECK(AlwaysCollideHash{}(a.data(), a.size(), 0) == 0);
  CHECK(AlwaysCollideHash{}(b.data(), b.size(), 0x9e3779b9) == 0);
  CHECK(AlwaysCollideHash{}(a.data(), 17, 1) == 0);
  CHECK(AlwaysCollideHash{}(b.data(), 0, ~std::uint64_t{0}) == 0);
}

TEST_CASE("XXH3's streaming API, as the writer and verify_segment use it, agrees with the one-shot hash") {
  // In pieces of 4 KiB (verify_segment's chunk), of 7 bytes (pieces that end
  // inside XXH3's 64-byte stripes) and of 512 KiB (the writer's chunk).
  for (const Vector& v : kVectors) {
    if (v.seed != 0) continue;
    CAPTURE(v.size);
    const std::vector<std::uint8_t> b = bytes_of(v.size);
    for (std::size_t piece : {std::size_t{4096}, std::size_t{7}, std::size_t{512} * 1024}) {
      CAPTURE(piece);
      XXH3_state_t state;
      REQUIRE(XXH3_64bits_reset(&state) == XXH_OK);
      bool updated = true;  // one assertion, not one per piece (85,715 of 7 bytes)
      for (std::size_t at = 0; at < b.size() && updated; at += piece)
        updated = XXH3_64bits_update(&state, b.data() + at, detail::min_of(piece, b.size() - at)) == XXH_OK;
      REQUIRE(updated);
      CHECK(XXH3_64bits_digest(&state) == v.expected);
    }
  }
}

TEST_CASE("a 600,000-byte segment: the file writer hashes it in 512 KiB pieces, verify_segment in 4 KiB ones") {
  struct Key {
    const char* name;
    std::size_t size;  // a size of kVectors
  };
  constexpr Key kKeys[] = {{"big", 600000}, {"small", 241}};
  const std::vector<std::uint8_t> big = bytes_of(kKeys[0].size), small = bytes_of(kKeys[1].size);
  NamedDataStore store;
  REQUIRE(store.add_named_data(kKeys[0].name, ByteSpan(big.data(), big.size()), 64).ok());
  REQUIRE(store.add_named_data(kKeys[1].name, ByteSpan(small.data(), small.size()), 64).ok());
  // Named after the process: meson runs test_hash and test_hash_og side by side.
  const std::string path =
      std::string(WDEDUP_TEST_TMPDIR) + "/hash_" + std::to_string(static_cast<long long>(::getpid())) + ".ptd";
  Expected<WriteStats> w = write_ptd_file(store, FunctionMaps{}, path, WriteOptions{});
  REQUIRE_MESSAGE(w.ok(), w.message());
  CHECK(w->segment_count == 2);

  for (wdedup_test::Via via : {wdedup_test::Via::File, wdedup_test::Via::Mmap}) {  // chunked, then one-shot
    CAPTURE(wdedup_test::via_name(via));
    std::unique_ptr<wdedup_test::Opened> o = wdedup_test::open_via(via, path);
    REQUIRE(o->ok());
    const NamedDataMap& map = o->map();
    for (const Key& key : kKeys) {
      CAPTURE(key.name);
      Result<KeyInfo> k = map.find(key.name);
      REQUIRE(k.ok());
      Result<SegmentInfo> seg = map.segment(k->segment_index);
      REQUIRE(seg.ok());
      REQUIRE(seg->has_content_hash);
      const std::uint64_t expected = content_hash_of(key.size);
      CHECK(seg->size == key.size);
      CHECK(seg->content_hash == expected);
      Result<std::uint64_t> h = segment_content_hash(map, k->segment_index);
      REQUIRE(h.ok());
      CHECK(*h == expected);
    }
    CHECK(verify_segments(map).ok());
  }
  std::remove(path.c_str());
}
