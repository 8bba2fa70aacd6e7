// Tests for wdedup/runtime/detail/key_hash.hpp. The key hash is part of the
// file format (the lookup index in every wdedup file is built with it), so
// these golden vectors pin it: a change here means old files' indexes no
// longer find their keys, and must come with a new WDX version.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "wdedup/runtime/detail/key_hash.hpp"
#include "wdedup/runtime/key_view.hpp"

namespace {
struct Golden {
  const char* key;
  std::uint64_t seed0;
  std::uint64_t seed1234;  // seed 0x1234567890abcdef
};
// Inputs cover every code path: empty, 1-3 bytes, 4-8, 9-16, the 16-byte
// loop (exactly 16, 17..32, more). The values were checked against a
// separate Python implementation of the same definition (2026-11-27).
constexpr Golden kGolden[] = {
    {"", 0xddb1c1a5a86787d7ull, 0xc0e938852d991fe9ull},
    {"a", 0xd5c801c44e54b6c7ull, 0x98b5733d5867b93dull},
    {"ab", 0x6e0b0547428d4a4cull, 0x36892872434be788ull},
    {"abc", 0x1ae30786658b3424ull, 0xbd47e6ac9d8f35f4ull},
    {"abcd", 0xe5ed2e285a779c18ull, 0x9392b8d4920bbd18ull},
    {"tok_embeddings.w", 0xd44f467befbb4468ull, 0x81db7cda3007a68aull},
    {"layers.0.attention.wq.weight", 0x557867d3849b07bbull, 0xb05403f4b4ac5b4full},
    {"decode/attention_mask~1", 0x9e00efaaaa7a40a2ull, 0xaec3ab9f538280e7ull},
    {"0123456789abcdef0123456789abcdef0", 0x0fd64cbcd16aacbfull, 0x86aec2139b07ad07ull},
    // Each length at a branch's edge: 5 and 7 (two 4-byte reads), 8 (the
    // last of them), 9 (two 8-byte reads), 12, 15, 17 (one loop step and a
    // 1-byte tail), 31 and 32 (one step and 15 or 16 bytes).
    {"w.q.b", 0xdde4f16e7e305929ull, 0xdb17908a5943c0cfull},
    {"w.q.bia", 0x6551584732e81feaull, 0x37d92e4a4cf410c0ull},
    {"w.q.bias", 0xd80d69aef2793376ull, 0xfb468b1a134b8d27ull},
    {"w.q.bias0", 0xdf4815d3586fd791ull, 0x741c8769653b2ab6ull},
    {"norm.weight.", 0x8518ea14f75b52f4ull, 0x72160eb268539a30ull},
    {"norm.weight.abc", 0xf9c65a23dd8b4bd5ull, 0xbb5f07c353777ed7ull},
    {"0123456789abcdef0", 0x75a6d5b885b499a6ull, 0xfbf5f8912df36b85ull},
    {"0123456789abcdef0123456789abcde", 0xe11d3a6867288b81ull, 0xe4a3f38a840b7d60ull},
    {"0123456789abcdef0123456789abcdef", 0x20a7f242dce43c6cull, 0x63266a8bc8716ae9ull},
};
}  // namespace

TEST_CASE("key_hash golden vectors (file format: must never change silently)") {
  for (const Golden& g : kGolden) {
    CAPTURE(g.key);
    CHECK(wdedup::detail::key_hash(g.key, std::strlen(g.key), 0) == g.seed0);
    CHECK(wdedup::detail::key_hash(g.key, std::strlen(g.key), 0x1234567890abcdefull) == g.seed1234);
  }
}

#if defined(WDEDUP_TEST_M32)
TEST_CASE("the -m32 build is a 32-bit build without a 128-bit type: the golden vectors above ran key_mix_portable") {
  // key_hash_m32 exists for that path; a build that lost -m32 (or a
  // compiler with __int128 on 32 bits) would pass the vectors on the other.
  CHECK(sizeof(void*) == 4);
  CHECK(sizeof(std::size_t) == 4);
#if defined(__SIZEOF_INT128__)
  FAIL("__SIZEOF_INT128__ is defined: key_mix is not the portable multiply here");
#endif
}
#endif

TEST_CASE("key_mix: the portable multiply (32-bit targets) gives the 128-bit product's fold") {
  // Where the compiler has no 128-bit type, key_mix is key_mix_portable: it
  // must give the same values or 32-bit builds would write, and look up,
  // other indexes. Operands at the carries' edges, then pseudo-random ones.
  const std::uint64_t edges[] = {0, 1, 0xFFFFFFFFull, 0x100000000ull, 0xFFFFFFFF00000000ull,
                                 0x8000000000000000ull, ~std::uint64_t{0}, 0x9E3779B97F4A7C15ull};
  for (std::uint64_t a : edges)
    for (std::uint64_t b : edges) {
      CAPTURE(a);
      CAPTURE(b);
      CHECK(wdedup::detail::key_mix_portable(a, b) == wdedup::detail::key_mix(a, b));
    }
  std::uint64_t x = 0x243F6A8885A308D3ull;
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t a = x = x * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t b = x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (wdedup::detail::key_mix_portable(a, b) != wdedup::detail::key_mix(a, b)) {
      CAPTURE(a);
      CAPTURE(b);
      FAIL("key_mix_portable differs");
    }
  }
  // A known fold: (2^64 - 1)^2 = 2^128 - 2^65 + 1, whose halves are
  // 0xFFFFFFFFFFFFFFFE and 1.
  CHECK(wdedup::detail::key_mix_portable(~std::uint64_t{0}, ~std::uint64_t{0}) == 0xFFFFFFFFFFFFFFFFull);
}

TEST_CASE("key_hash reads only the bytes it is given") {
  const char buf[] = "layers.0.wq.weightXYZ";
  CHECK(wdedup::detail::key_hash(buf, 18, 0) == wdedup::detail::key_hash("layers.0.wq.weight", 18, 0));
  CHECK(wdedup::detail::key_hash(buf, 18, 0) != wdedup::detail::key_hash(buf, 19, 0));
}

TEST_CASE("key_hash separates short keys that differ only in length or last byte") {
  // A regression: xoring the length into the last bytes once made "ab" == "abc".
  CHECK(wdedup::detail::key_hash("ab", 2, 0) != wdedup::detail::key_hash("abc", 3, 0));
  CHECK(wdedup::detail::key_hash("a", 1, 0) != wdedup::detail::key_hash("aa", 2, 0));
  CHECK(wdedup::detail::key_hash("", 0, 0) != 0);
  CHECK(wdedup::detail::key_hash("x", 1, 0) != wdedup::detail::key_hash("x", 1, 1));
}

TEST_CASE("fill_slots: a table that needs exactly probe_budget probes is filled, one probe more is refused") {
  // 1,024 slots: a budget of 64 * 1,024 + 1,024 = 66,560 probes. 364 keys
  // with home slot 0 take 1 + 2 + ... + 364 = 66,430 probes (slots 0 to
  // 363), then 130 keys with their own home slots in 512..641 one each:
  // 66,560 in all. One more key (home slot 700) is one probe past it.
  const std::uint32_t slots = 1024, cluster = 364, singles = 130;
  REQUIRE(wdedup::format::probe_budget(slots) == 66560);
  REQUIRE(cluster * (cluster + 1) / 2 + singles == 66560);
  std::vector<std::string> at_zero, single(slots), last;
  std::uint32_t found = 0;
  char buf[17];
  for (std::uint64_t c = 0; at_zero.size() < cluster || found < singles || last.empty(); ++c) {
    std::snprintf(buf, sizeof buf, "k%015llx", static_cast<unsigned long long>(c));
    const auto home = static_cast<std::size_t>(wdedup::detail::key_hash(buf, 16, 0) & (slots - 1));
    if (home == 0 && at_zero.size() < cluster) at_zero.push_back(buf);
    if (home >= 512 && home < 512 + singles && single[home].empty()) {
      single[home] = buf;
      ++found;
    }
    if (home == 700 && last.empty()) last.push_back(buf);
  }
  std::vector<std::string> keys = at_zero;
  for (std::uint32_t h = 512; h < 512 + singles; ++h) keys.push_back(single[h]);
  keys.push_back(last[0]);
  const auto key_at = [&](std::uint32_t i) { return wdedup::KeyView(keys[i].data(), keys[i].size()); };
  std::vector<std::uint8_t> table(std::size_t{slots} * 8);
  const std::uint32_t n = cluster + singles;
  const wdedup::detail::SlotFill exact = wdedup::detail::fill_slots(n, key_at, 0, table.data(), slots);
  CHECK(exact.result == wdedup::detail::SlotFill::kDone);
  CHECK(wdedup::format::load_u64(table.data() + 8 * 363) == wdedup::format::slot_value(
                                                                   wdedup::detail::key_hash(keys[363].data(), 16, 0), 363));
  const wdedup::detail::SlotFill over = wdedup::detail::fill_slots(n + 1, key_at, 0, table.data(), slots);
  CHECK(over.result == wdedup::detail::SlotFill::kTooManyProbes);
  CHECK(over.at == n);
}
