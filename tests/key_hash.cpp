// Tests for wdedup/runtime/detail/key_hash.hpp. The key hash is part of the
// file format (the lookup index in every wdedup file is built with it), so
// these golden vectors pin it: a change here means old files' indexes no
// longer find their keys, and must come with a new WDX version.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

#include "wdedup/runtime/detail/key_hash.hpp"

namespace {
struct Golden {
  const char* key;
  std::uint64_t seed0;
  std::uint64_t seed1234;  // seed 0x1234567890abcdef
};
// Inputs cover every code path: empty, 1-3 bytes, 4-8, 9-16, the 16-byte
// loop (exactly 16, 17..32, more).
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
};
}  // namespace

TEST_CASE("key_hash golden vectors (file format: must never change silently)") {
  for (const Golden& g : kGolden) {
    CAPTURE(g.key);
    CHECK(wdedup::detail::key_hash(g.key, std::strlen(g.key), 0) == g.seed0);
    CHECK(wdedup::detail::key_hash(g.key, std::strlen(g.key), 0x1234567890abcdefull) == g.seed1234);
  }
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
