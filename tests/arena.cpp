// Tests for wdedup/detail/arena.hpp: the per-call scratch arena of the
// build-time passes. Alignment, exact accounting, growth across chunks (heap
// and mapped ones), and ArenaVector as a std::vector.
#include "wdedup/detail/arena.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "support/table_cache.hpp"

using wdedup::detail::Arena;
using wdedup::detail::arena_vector;
using wdedup::detail::ArenaAllocator;
using wdedup::detail::ArenaVector;
using wdedup_test::FreshCache;
using wdedup_test::kMiB;

namespace {
bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }
}  // namespace

TEST_CASE("Arena: every array is 64-byte aligned, sizes round up to 64, arrays do not overlap") {
  Arena a(1000);
  char* x = a.alloc<char>(1);
  std::uint64_t* y = a.alloc<std::uint64_t>(9);  // 72 bytes -> 128
  std::uint32_t* z = a.alloc<std::uint32_t>(16);  // 64 bytes
  CHECK(aligned64(x));
  CHECK(aligned64(y));
  CHECK(aligned64(z));
  CHECK(a.bytes_taken() == 64 + 128 + 64);
  // Within one chunk the bump pointer is contiguous.
  CHECK(reinterpret_cast<char*>(y) - x == 64);
  CHECK(reinterpret_cast<char*>(z) - reinterpret_cast<char*>(y) == 128);
  std::memset(x, 0xaa, 64);
  std::memset(y, 0xbb, 72);
  std::memset(z, 0xcc, 64);
  CHECK(static_cast<unsigned char>(x[63]) == 0xaa);
  CHECK(y[8] == 0xbbbbbbbbbbbbbbbbull);
  CHECK(z[15] == 0xccccccccu);
}

TEST_CASE("Arena: a heap chunk made for one array bigger than the next chunk holds its header and the array") {
  // 512 KiB after the first 64 KiB chunk: more than the next chunk (128
  // KiB), less than a huge page, so a heap chunk sized by the request. Its
  // 64-byte header must come on top: short of it, the array would run
  // past the chunk, and the next array would start outside it (ASan sees
  // the memset overflow).
  Arena a(0);
  std::uint8_t* first = a.alloc<std::uint8_t>(1000);
  std::memset(first, 0x11, 1000);
  const std::size_t big = std::size_t{512} << 10;
  std::uint8_t* p = a.alloc<std::uint8_t>(big);
  std::memset(p, 0x5a, big);
  // The chunk is exactly full: the next array starts a new chunk, past
  // the big one's header-sized heap block, never right at its end (with
  // the header short, the count of what is left wrapped and it did).
  std::uint8_t* q = a.alloc<std::uint8_t>(64);
  std::memset(q, 0xa5, 64);
  CHECK((q < p || q > p + big));
  CHECK(a.bytes_taken() == 1024 + big + 64);
  CHECK(first[999] == 0x11);
  CHECK(p[big - 1] == 0x5a);
}

TEST_CASE("Arena: grows past its first chunk, into mapped huge-page chunks, keeping earlier arrays") {
  Arena a(0);  // first chunk: the 64 KiB minimum
  std::uint8_t* first = a.alloc<std::uint8_t>(1000);
  std::memset(first, 0x11, 1000);
  // 3 MiB: bigger than any chunk so far, and mapped (>= 2 MiB).
  const std::size_t big = std::size_t{3} << 20;
  std::uint8_t* second = a.alloc<std::uint8_t>(big);
  CHECK(aligned64(second));
  std::memset(second, 0x22, big);
  // More small ones after it, then another big one.
  std::uint8_t* third = a.alloc<std::uint8_t>(5000);
  std::memset(third, 0x33, 5000);
  std::uint8_t* fourth = a.alloc<std::uint8_t>(big);
  std::memset(fourth, 0x44, big);
  CHECK(a.bytes_taken() == 1024 + big + 5056 + big);
  for (std::size_t i = 0; i < 1000; ++i) REQUIRE(first[i] == 0x11);
  CHECK(second[0] == 0x22);
  CHECK(second[big - 1] == 0x22);
  CHECK(third[4999] == 0x33);
  CHECK(fourth[big - 1] == 0x44);
}

#if defined(__cpp_exceptions)
TEST_CASE("Arena: a count whose size would wrap is out of memory (std::bad_alloc), not a smaller array") {
  // 2^61 eight-byte objects are 2^64 bytes: 0 once wrapped, which the arena
  // handed out as an empty array (a review helper's note). SIZE_MAX / 8
  // wraps only once rounded up to a line and a chunk.
  Arena arena;
  const std::size_t wraps_to_zero = std::size_t{1} << (sizeof(std::size_t) * 8 - 3);
  for (std::size_t n : {wraps_to_zero, SIZE_MAX / 8}) {
    CAPTURE(n);
    CHECK_THROWS_AS(arena.alloc<std::uint64_t>(n), std::bad_alloc);
  }
  CHECK(arena.bytes_taken() == 0);
  CHECK(aligned64(arena.alloc<std::uint64_t>(1)));  // and it still works
  CHECK(arena.bytes_taken() == 64);
  // A first chunk asked for near SIZE_MAX rounded up to 0 huge pages: a
  // mapping unmapped whole, handed out (a review helper's SIGSEGV).
  Arena huge(SIZE_MAX);
  CHECK_THROWS_AS(huge.alloc<char>(1), std::bad_alloc);
  CHECK(huge.bytes_taken() == 0);
}
#endif

TEST_CASE("ArenaVector: a std::vector whose memory comes from the arena") {
  Arena a(4096);
  ArenaVector<std::uint32_t> v = arena_vector<std::uint32_t>(a, 5, 7u);
  CHECK(v.size() == 5);
  CHECK(v[4] == 7u);
  const std::size_t before = a.bytes_taken();
  CHECK(before == 64);  // 20 bytes, rounded up
  for (std::uint32_t i = 0; i < 1000; ++i) v.push_back(i);
  CHECK(v.size() == 1005);
  CHECK(v[5] == 0u);
  CHECK(v[1004] == 999u);
  // Growth took more from the arena (old blocks are released with it).
  CHECK(a.bytes_taken() > before + 1000 * 4);
  ArenaVector<std::uint8_t> e = arena_vector<std::uint8_t>(a);
  CHECK(e.empty());
  // Rebound copies compare as the allocator requirements ask: equal over
  // one arena, whatever their types.
  Arena other(4096);
  const ArenaAllocator<int> ai(a);
  CHECK(ai == ArenaAllocator<char>(a));
  CHECK_FALSE(ai != ArenaAllocator<char>(a));
  CHECK(ai != ArenaAllocator<char>(other));
  // Over two arenas they are unequal: a vector move-assigned from one over
  // the other arena moves its elements, never taking a block the other frees.
  CHECK_FALSE(ai == ArenaAllocator<char>(other));
  CHECK(ArenaAllocator<char>(ai) == ai);
}

TEST_CASE("Arena: a mapped chunk goes back to the table cache as whole huge pages, no more, and is reused") {
  // The arena's 3 MiB array sits in a chunk of 3 MiB + its 64-byte header,
  // mapped as 4 MiB: the cache must get exactly those 4 MiB back. Given the
  // unrounded size it held 3 MiB + 64 (a block no table can use whole);
  // given more than the mapping, it held memory it did not own and would
  // hand it out.
  FreshCache fresh;
  wdedup::detail::MappingCache& cache = wdedup::detail::mapping_cache();
  REQUIRE(cache.bytes() == 0);
  std::uint8_t* first = nullptr;
  {
    Arena a(0);
    first = a.alloc<std::uint8_t>(3 * kMiB);
    std::memset(first, 0x5a, 3 * kMiB);
    CHECK(reinterpret_cast<std::uintptr_t>(first - 64) % wdedup::detail::kHugePage == 0);  // header first
    CHECK(cache.bytes() == 0);
  }
  CHECK(cache.bytes() == 4 * kMiB);
  {
    // The next arena of the same size takes the same block back.
    Arena b(0);
    std::uint8_t* again = b.alloc<std::uint8_t>(3 * kMiB);
    CHECK(again == first);
    CHECK(cache.bytes() == 0);
  }
  CHECK(cache.bytes() == 4 * kMiB);
  cache.set_limit(64 * kMiB);
  CHECK(cache.bytes() == 0);
}

TEST_CASE("Arena: an array that fills its chunk exactly stays in it; the first chunk is at least 64 KiB") {
  // Arena(0)'s first chunk is the 64 KiB minimum, 65,472 bytes after its
  // header: 64 bytes and then 65,408 fill it exactly, side by side. A
  // chunk sized by the first request alone (128 bytes) or one given up
  // when an array fits it exactly put the second array in a new chunk.
  Arena a(0);
  std::uint8_t* x = a.alloc<std::uint8_t>(64);
  std::uint8_t* y = a.alloc<std::uint8_t>(65408);
  CHECK(y - x == 64);
  CHECK(a.bytes_taken() == 65472);
  std::memset(x, 0x11, 64);
  std::memset(y, 0x22, 65408);
  // Full now: the next array starts a new chunk, outside this one.
  std::uint8_t* z = a.alloc<std::uint8_t>(64);
  std::memset(z, 0x33, 64);
  CHECK((z < x || z >= x + 65472));
  CHECK(a.bytes_taken() == 65536);
  CHECK(y[65407] == 0x22);
}

TEST_CASE("Arena: chunks double, the first is `expect` bytes, and every mapped chunk goes back to the table cache") {
  // After the first 64 KiB heap chunk (next: 128 KiB) a 3 MiB array needs
  // 3 MiB + 64: mapped as 4 MiB (next: 8 MiB). The next 3 MiB array does
  // not fit the 1 MiB left: a chunk of the doubled 8 MiB. Both mapped
  // chunks come back, 12 MiB (8 MiB if chunks did not double, or if only
  // the last chunk were freed).
  FreshCache fresh;
  wdedup::detail::MappingCache& cache = wdedup::detail::mapping_cache();
  {
    Arena a(0);
    (void)a.alloc<std::uint8_t>(1000);
    std::uint8_t* p = a.alloc<std::uint8_t>(3 * kMiB);
    std::uint8_t* q = a.alloc<std::uint8_t>(3 * kMiB);
    CHECK(reinterpret_cast<std::uintptr_t>(p - 64) % wdedup::detail::kHugePage == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(q - 64) % wdedup::detail::kHugePage == 0);
    CHECK(a.bytes_taken() == 1024 + 6 * kMiB);
  }
  CHECK(cache.bytes() == 12 * kMiB);
  cache.release();
  // `expect` sizes the first chunk: 6 MiB, mapped, for a 64-byte array;
  // exactly one huge page (2 MiB) is mapped too, not taken from the heap.
  for (const std::size_t expect : {6 * kMiB, 2 * kMiB}) {
    CAPTURE(expect);
    {
      Arena a(expect);
      std::uint8_t* p = a.alloc<std::uint8_t>(64);
      CHECK(reinterpret_cast<std::uintptr_t>(p - 64) % wdedup::detail::kHugePage == 0);
    }
    CHECK(cache.bytes() == expect);
    cache.release();
  }
}
