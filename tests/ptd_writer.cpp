// tests/ptd_writer.cpp — the .ptd writer (wdedup/ptd_writer.hpp): golden
// bytes of small files, segment placement and alignment, the WDX1 block,
// identical output through every entry point, validation, and a round trip
// through the runtime reader (NamedDataMap).
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wdedup/hash.hpp"
#include "wdedup/ptd_writer.hpp"
#include "wdedup/runtime/named_data_map.hpp"
#include "support/pattern.hpp"
#include "support/ptd_files.hpp"
#include "support/require_value.hpp"

using namespace wdedup;

namespace {

namespace eh = format::ext_header;
namespace ke = format::key_entry;
namespace fr = format::function_record;
namespace ftr = format::function_tensor;

std::uint16_t u16(const std::vector<std::uint8_t>& f, std::uint64_t at) { return format::load_u16(f.data() + at); }
std::uint32_t u32(const std::vector<std::uint8_t>& f, std::uint64_t at) { return format::load_u32(f.data() + at); }
std::uint64_t u64(const std::vector<std::uint8_t>& f, std::uint64_t at) { return format::load_u64(f.data() + at); }

std::string hex(const std::vector<std::uint8_t>& f, std::uint64_t from, std::uint64_t to) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (auto i = static_cast<std::size_t>(from); i < to; ++i) {
    s += digits[f[i] >> 4];
    s += digits[f[i] & 15];
  }
  return s;
}

bool all_zero(const std::vector<std::uint8_t>& f, std::uint64_t from, std::uint64_t to) {
  for (auto i = static_cast<std::size_t>(from); i < to; ++i)
    if (f[i] != 0) return false;
  return true;
}

/// A minimal flatbuffer walker over a whole file (positions are absolute),
/// independent of wdedup's reader.
struct Walk {
  const std::vector<std::uint8_t>& f;
  std::uint64_t root() const { return u32(f, 0); }
  /// Position of field `id` of the table at `table`, or 0 if absent.
  std::uint64_t field(std::uint64_t table, int id) const {
    const auto soff = static_cast<std::int32_t>(u32(f, table));
    const std::uint64_t vt = static_cast<std::uint64_t>(static_cast<std::int64_t>(table) - soff);
    const std::uint16_t vsize = u16(f, vt);
    const auto slot = static_cast<std::uint16_t>(4 + 2 * id);
    if (slot >= vsize) return 0;
    const std::uint16_t o = u16(f, vt + slot);
    return o ? table + o : 0;
  }
  std::uint64_t deref(std::uint64_t pos) const { return pos + u32(f, pos); }
  /// Target of offset field `id` (0 if absent).
  std::uint64_t object(std::uint64_t table, int id) const {
    const std::uint64_t p = field(table, id);
    return p ? deref(p) : 0;
  }
  std::uint32_t count(std::uint64_t vec) const { return u32(f, vec); }
  std::uint64_t element(std::uint64_t vec, std::uint32_t i) const { return deref(vec + 4 + 4 * std::uint64_t{i}); }
  std::string string(std::uint64_t s) const {
    return std::string(reinterpret_cast<const char*>(f.data() + s + 4), u32(f, s));
  }
  std::uint64_t segments() const { return object(root(), format::flat_tensor_field::kSegments); }
  std::uint64_t named_data() const { return object(root(), format::flat_tensor_field::kNamedData); }
  std::uint64_t u64_field(std::uint64_t table, int id) const {
    const std::uint64_t p = field(table, id);
    return p ? u64(f, p) : 0;
  }
  std::uint64_t segment_offset(std::uint32_t i) const {
    return u64_field(element(segments(), i), format::data_segment_field::kOffset);
  }
  std::uint64_t segment_size(std::uint32_t i) const {
    return u64_field(element(segments(), i), format::data_segment_field::kSize);
  }
};

struct Header {
  std::uint64_t fb_offset, fb_size, base, data_size;
};
Header header(const std::vector<std::uint8_t>& f) {
  return Header{u64(f, format::kHeaderFlatbufferOffsetPos), u64(f, format::kHeaderFlatbufferSizePos),
                u64(f, format::kHeaderSegmentBasePos), u64(f, format::kHeaderSegmentDataSizePos)};
}
/// Where a file's WDX1 block starts: after its flatbuffer (at 48), on 16.
std::uint64_t ext_at(const std::vector<std::uint8_t>& f) { return (48 + header(f).fb_size + 15) / 16 * 16; }

std::vector<std::uint8_t> serialize(const NamedDataStore& s, const WriteOptions& o = {},
                                    const FunctionMaps& maps = {}) {
  Expected<std::vector<std::uint8_t>> r = serialize_ptd(s, maps, o);
  REQUIRE_MESSAGE(r.ok(), r.message());
  return std::move(r).value();
}

WriteOptions no_ext(std::uint64_t segment_alignment = 128) {
  WriteOptions o;
  o.wdedup_extensions = false;
  o.segment_alignment = segment_alignment;
  return o;
}

void add(NamedDataStore& s, std::string_view key, ByteSpan bytes, std::int64_t align = 1,
         std::optional<Layout> layout = std::nullopt) {
  Expected<void> r = s.add_named_data(key, bytes, align, std::move(layout));
  REQUIRE_MESSAGE(r.ok(), r.message());
}

using wdedup_test::pattern;    // tests/support/pattern.hpp
using wdedup_test::read_file;  // tests/support/ptd_files.hpp

std::string tmp_path(const std::string& name) { return std::string(WDEDUP_TEST_TMPDIR) + "/ptd_writer_" + name; }

/// A destination that already holds other bytes, for "a refused write
/// leaves it untouched": its old bytes.
std::vector<std::uint8_t> occupy(const std::string& path) {
  const std::vector<std::uint8_t> old{'o', 'l', 'd', ' ', 'b', 'y', 't', 'e', 's', '\n'};
  REQUIRE(wdedup_test::write_file(path, old));
  return old;
}

/// The temporaries a write to `path` would leave behind if it stopped
/// midway (".<name>.tmp-XXXXXX", beside it).
std::vector<std::string> temporaries_of(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = "." + p.filename().string() + ".tmp-";
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(p.parent_path(), ec), end; !ec && it != end; it.increment(ec))
    if (const std::string n = it->path().filename().string(); n.compare(0, prefix.size(), prefix) == 0) out.push_back(n);
  return out;
}

// The small store of the golden tests: an alias asking 4096 after its first
// key asked 16, two keys asking 3 and 4 of the same bytes (lcm 12), a
// channels-last Half tensor and a zero-size buffer.
const std::uint8_t kA[5] = {1, 2, 3, 4, 5};
const std::uint8_t kC[6] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15};
const std::uint8_t kE[8] = {0xE0, 0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7};

NamedDataStore small_store() {
  NamedDataStore s;
  add(s, "w.a", ByteSpan(kA, 5), 16);
  add(s, "w.b", ByteSpan(kA, 5), 4096);
  add(s, "w.c", ByteSpan(kC, 6), 3, Layout::contiguous(ScalarType::Short, {3}));
  add(s, "w.d", ByteSpan(kC, 6), 4, Layout::contiguous(ScalarType::Short, {3}));
  add(s, "w.e", ByteSpan(kE, 8), 1, Layout::channels_last(ScalarType::Half, {1, 2, 2, 1}));
  add(s, "w.z", ByteSpan(kE, 0), 1);
  return s;
}

FunctionMaps small_maps() {
  FunctionMaps m;
  m.functions.push_back(FunctionMap{"decode", 0, "combined_all", "decode__0", {{"wq", "w.a"}, {"bias", "w.c"}, {"ln", "w.e"}}});
  m.functions.push_back(FunctionMap{"prefill", 0, "combined_all", "prefill__0", {{"wq", "w.b"}, {"bias", "w.d"}}});
  m.functions.push_back(FunctionMap{"decode", 1, "combined_all", "decode__1", {}});
  return m;
}

}  // namespace

TEST_CASE("empty store: ExecuTorch's bytes without WDX1; a minimal WDX1 block with it") {
  const NamedDataStore empty;
  const std::vector<std::uint8_t> plain = serialize(empty, no_ext());
  // Identical to ExecuTorch's empty.ptd: root table with both vectors, empty.
  CHECK(hex(plain, 0, plain.size()) ==
        "44000000465430314648303128000000"
        "30000000000000002800000000000000"
        "80000000000000000000000000000000"
        "000000000000000000000a000c000000"
        "040008000a0000000c00000004000000"
        "00000000000000000000000000000000"
        "00000000000000000000000000000000"
        "00000000000000000000000000000000");

  const std::vector<std::uint8_t> f = serialize(empty);
  REQUIRE(f.size() == 256);
  CHECK(hex(f, 0, 32) == hex(plain, 0, 32));    // same root offset, identifier, header up to the base
  CHECK(hex(f, 48, 88) == hex(plain, 48, 88));  // same flatbuffer
  const Header h = header(f);
  CHECK(h.fb_offset == 48);
  CHECK(h.fb_size == 40);
  CHECK(h.base == 256);  // align_up(96 + 88, 128)
  CHECK(h.data_size == 0);
  const std::uint64_t x = 96;  // align_up(48 + 40, 16)
  CHECK(std::memcmp(f.data() + x, "WDX1", 4) == 0);
  CHECK(u32(f, x + eh::kVersion) == 1);
  CHECK(u64(f, x + eh::kBlockSize) == 88);
  CHECK(u64(f, x + eh::kHashSeed) == 0);
  CHECK(u32(f, x + eh::kKeyCount) == 0);
  CHECK(u32(f, x + eh::kSlotCount) == 1);
  CHECK(u32(f, x + eh::kSegmentCount) == 0);
  CHECK(u32(f, x + eh::kFunctionCount) == 0);
  CHECK(u32(f, x + eh::kFunctionTensorCount) == 0);
  CHECK(u32(f, x + eh::kStringsSize) == 0);
  CHECK(u32(f, x + eh::kEntriesOffset) == 80);
  CHECK(u32(f, x + eh::kSlotsOffset) == 80);
  CHECK(u32(f, x + eh::kSegmentInfoOffset) == 88);
  CHECK(u32(f, x + eh::kFunctionsOffset) == 88);
  CHECK(u32(f, x + eh::kFunctionTensorsOffset) == 88);
  CHECK(u32(f, x + eh::kStringsOffset) == 88);
  CHECK(u64(f, x + eh::kReserved) == 0);
  CHECK(u64(f, x + 80) == 0);  // the one empty slot
  CHECK(all_zero(f, 88, 96));
  CHECK(all_zero(f, x + 88, 256));
}

TEST_CASE("small store without WDX1: golden bytes, header, root offset, segment offsets") {
  const NamedDataStore s = small_store();
  REQUIRE(s.buffer_count() == 4);
  CHECK(s.buffers()[0].alignment == 4096);  // lcm(16, 4096)
  CHECK(s.buffers()[1].alignment == 12);    // lcm(3, 4)
  const std::vector<std::uint8_t> f = serialize(s, no_ext());
  const Header h = header(f);
  CHECK(h.fb_offset == 48);
  CHECK(h.fb_size == 464);
  // Segment 0 asks for 4096, so the base is 4096-aligned and segment 0 sits
  // at offset 0, where ExecuTorch puts it.
  CHECK(h.base == 4096);
  CHECK(h.data_size == 384);
  CHECK(f.size() == 4480);
  CHECK(u32(f, 0) == 0x44);  // root table right after the header and vtable
  // The whole flatbuffer, byte for byte (flatc's layout: see
  // tests/executorch_compat.cpp, which compares with flatc itself).
  CHECK(hex(f, 0, 512) ==
        "44000000465430314648303128000000"
        "3000000000000000d001000000000000"
        "00100000000000008001000000000000"
        "000000000000000000000a000c000000"
        "040008000a0000004001000004000000"
        "060000002401000008010000c0000000"
        "78000000240000000c00000008000c00"
        "04000800080000000800000003000000"
        "03000000772e7a00baffffff38000000"
        "02000000040000006affffff00000005"
        "10000000040000000400000000020301"
        "04000000010000000200000002000000"
        "0100000003000000772e650000000a00"
        "1000040008000c000a0000002c000000"
        "0100000004000000baffffff00000002"
        "10000000040000000100000000000000"
        "010000000300000003000000772e6400"
        "00000a001200040008000c000a000000"
        "38000000010000001000000000000a00"
        "1000070008000c000a00000000000002"
        "10000000040000000100000000000000"
        "010000000300000003000000772e6300"
        "eeffffff0400000003000000772e6200"
        "00000600080004000600000004000000"
        "03000000772e61000400000068000000"
        "44000000200000000c00000000000600"
        "10000400060000008001000000000000"
        "00000000e8ffffff0001000000000000"
        "08000000000000000000000008001800"
        "04000c00080000008000000000000000"
        "06000000000000000000000008000c00"
        "00000400080000000500000000000000");
  CHECK(all_zero(f, 512, 4096));

  const Walk w{f};
  REQUIRE(w.count(w.segments()) == 4);
  // Relative offsets, and absolute positions that honour every request.
  CHECK(w.segment_offset(0) == 0);
  CHECK(w.segment_offset(1) == 128);  // 4224 = 11 * 384 = lcm(128, 12) multiple
  CHECK(w.segment_offset(2) == 256);
  CHECK(w.segment_offset(3) == 384);  // zero-size buffer: size field omitted
  CHECK(w.segment_size(0) == 5);
  CHECK(w.segment_size(1) == 6);
  CHECK(w.segment_size(2) == 8);
  CHECK(w.segment_size(3) == 0);
  CHECK(w.field(w.element(w.segments(), 3), format::data_segment_field::kSize) == 0);
  CHECK((4096 + w.segment_offset(1)) % 12 == 0);
  CHECK(std::memcmp(f.data() + 4096, kA, 5) == 0);
  CHECK(std::memcmp(f.data() + 4224, kC, 6) == 0);
  CHECK(std::memcmp(f.data() + 4352, kE, 8) == 0);
  CHECK(all_zero(f, 4101, 4224));
  CHECK(all_zero(f, 4230, 4352));
  CHECK(all_zero(f, 4360, 4480));

  // named_data in store key order, segment indices in buffer order.
  REQUIRE(w.count(w.named_data()) == 6);
  const char* keys[] = {"w.a", "w.b", "w.c", "w.d", "w.e", "w.z"};
  const std::uint32_t segs[] = {0, 0, 1, 1, 2, 3};
  for (std::uint32_t i = 0; i < 6; ++i) {
    const std::uint64_t nd = w.element(w.named_data(), i);
    CHECK(w.string(w.object(nd, format::named_data_field::kKey)) == keys[i]);
    const std::uint64_t si = w.field(nd, format::named_data_field::kSegmentIndex);
    CHECK((si ? u32(f, si) : 0u) == segs[i]);
    // Every string is NUL-terminated.
    const std::uint64_t str = w.object(nd, format::named_data_field::kKey);
    CHECK(f[static_cast<std::size_t>(str + 4 + u32(f, str))] == 0);
  }
}

TEST_CASE("absolute alignment: a 4096 request lands on a 4096 multiple whatever precedes it") {
  const auto small = pattern(33, 1), big = pattern(100, 2), mid = pattern(65, 3);
  NamedDataStore s;
  add(s, "first", ByteSpan(small.data(), small.size()), 16);
  add(s, "mid", ByteSpan(mid.data(), mid.size()), 16);
  add(s, "mid.alias", ByteSpan(mid.data(), mid.size()), 4096);  // raises a later segment to 4096
  add(s, "big", ByteSpan(big.data(), big.size()), 64);
  for (bool ext : {false, true}) {
    for (std::uint64_t sa : {1ull, 16ull, 128ull, 48ull}) {
      CAPTURE(ext);
      CAPTURE(sa);
      WriteOptions o;
      o.wdedup_extensions = ext;
      o.segment_alignment = sa;
      const std::vector<std::uint8_t> f = serialize(s, o);
      const Header h = header(f);
      const Walk w{f};
      CHECK(h.base % sa == 0);
      const std::uint64_t p0 = h.base + w.segment_offset(0), p1 = h.base + w.segment_offset(1),
                          p2 = h.base + w.segment_offset(2);
      CHECK(w.segment_offset(0) == 0);
      CHECK(p0 % 16 == 0);
      CHECK(p1 % 4096 == 0);
      CHECK(p1 % sa == 0);
      CHECK(p2 % 64 == 0);
      CHECK(p2 % sa == 0);
      // Each segment at the first position that satisfies it (no waste).
      std::uint64_t expect1 = 0, expect2 = 0;
      const std::uint64_t lcm1 = REQUIRE_VALUE(detail::lcm64(sa, 4096)), lcm2 = REQUIRE_VALUE(detail::lcm64(sa, 64));
      REQUIRE(format::align_up(p0 + 33, lcm1, &expect1));
      REQUIRE(format::align_up(p1 + 65, lcm2, &expect2));
      CHECK(p1 == expect1);
      CHECK(p2 == expect2);
      CHECK(f.size() == p2 + 100);
      CHECK(h.data_size == f.size() - h.base);
    }
  }
}

TEST_CASE("non-power-of-two alignments: lcm(3, 4) = 12, with and without a segment alignment") {
  const std::uint8_t one[1] = {0xAA};
  NamedDataStore s;
  add(s, "one", ByteSpan(one, 1), 1);
  add(s, "c3", ByteSpan(kC, 6), 3);
  add(s, "c4", ByteSpan(kC, 6), 4);
  add(s, "e5", ByteSpan(kE, 8), 5);
  const std::vector<std::uint8_t> f = serialize(s, no_ext(1));
  const Header h = header(f);
  const Walk w{f};
  CHECK(h.base == 48 + h.fb_size + (16 - (48 + h.fb_size) % 16) % 16);  // only 16-aligned, like ExecuTorch
  const std::uint64_t p1 = h.base + w.segment_offset(1), p2 = h.base + w.segment_offset(2);
  CHECK(p1 % 12 == 0);
  CHECK(p1 - (h.base + 1) < 12);
  CHECK(p2 % 5 == 0);
  CHECK(p2 - (p1 + 6) < 5);
  CHECK(std::memcmp(f.data() + p1, kC, 6) == 0);
  CHECK(std::memcmp(f.data() + p2, kE, 8) == 0);

  // With segment_alignment 128: lcm(128, 12) = 384, lcm(128, 5) = 640.
  const std::vector<std::uint8_t> g = serialize(s, no_ext(128));
  const Header hg = header(g);
  const Walk wg{g};
  CHECK((hg.base + wg.segment_offset(1)) % 384 == 0);
  CHECK((hg.base + wg.segment_offset(2)) % 640 == 0);

  WriteOptions seven = no_ext(7);  // any positive segment alignment works
  const std::vector<std::uint8_t> k = serialize(s, seven);
  const Header hk = header(k);
  const Walk wk{k};
  CHECK(hk.base % 7 == 0);
  CHECK((hk.base + wk.segment_offset(1)) % 84 == 0);
  CHECK((hk.base + wk.segment_offset(2)) % 35 == 0);
}

TEST_CASE("a first segment that is empty sits at the base together with the next one") {
  const auto d = pattern(10, 5);
  NamedDataStore s;
  add(s, "empty", ByteSpan(d.data(), 0), 256);
  add(s, "data", ByteSpan(d.data(), d.size()), 3);
  const std::vector<std::uint8_t> f = serialize(s, no_ext());
  const Header h = header(f);
  const Walk w{f};
  CHECK(h.base % 768 == 0);  // lcm(128, 256, 3)
  CHECK(w.segment_offset(0) == 0);
  CHECK(w.segment_offset(1) == 0);
  CHECK(w.field(w.element(w.segments(), 1), format::data_segment_field::kOffset) == 0);  // omitted, as flatc does
  CHECK(f.size() == h.base + 10);
}

TEST_CASE("tensor layouts: scalar types, rank 0, zero sizes, channels-last") {
  const auto b24 = pattern(24, 1), b8 = pattern(8, 2), b5 = pattern(5, 3), b16 = pattern(16, 4), b48 = pattern(48, 5);
  NamedDataStore s;
  add(s, "f32", ByteSpan(b24.data(), 24), 4, Layout::contiguous(ScalarType::Float, {2, 3}));
  add(s, "f16", ByteSpan(b8.data(), 8), 2, Layout::contiguous(ScalarType::Half, {4}));
  add(s, "bf16", ByteSpan(b8.data(), 8), 2, Layout::contiguous(ScalarType::BFloat16, {2, 2}));
  add(s, "i8", ByteSpan(b5.data(), 5), 1, Layout::contiguous(ScalarType::Char, {5}));
  add(s, "u8", ByteSpan(b5.data(), 5), 1, Layout::contiguous(ScalarType::Byte, {5, 1}));
  add(s, "i64.scalar", ByteSpan(b8.data(), 8), 8, Layout::contiguous(ScalarType::Long, {}));
  add(s, "f64", ByteSpan(b16.data(), 16), 8, Layout::contiguous(ScalarType::Double, {2}));
  add(s, "zero", ByteSpan(b8.data(), 0), 4, Layout::contiguous(ScalarType::Float, {2, 0, 3}));
  add(s, "nhwc", ByteSpan(b48.data(), 48), 16, Layout::channels_last(ScalarType::Float, {1, 2, 3, 2}));
  add(s, "raw", ByteSpan(b48.data(), 48), 1);

  for (bool ext : {false, true}) {
    CAPTURE(ext);
    WriteOptions o;
    o.wdedup_extensions = ext;
    const std::vector<std::uint8_t> f = serialize(s, o);
    const Walk w{f};
    REQUIRE(w.count(w.named_data()) == s.key_count());
    for (std::uint32_t i = 0; i < s.key_count(); ++i) {
      const StoreKey& k = s.keys()[i];
      CAPTURE(k.key);
      const std::uint64_t nd = w.element(w.named_data(), i);
      const std::uint64_t tl = w.object(nd, format::named_data_field::kTensorLayout);
      REQUIRE((tl != 0) == k.layout.has_value());
      if (!tl) continue;
      const std::uint64_t st = w.field(tl, format::tensor_layout_field::kScalarType);
      CHECK((st ? static_cast<int>(static_cast<std::int8_t>(f[static_cast<std::size_t>(st)])) : 0) == static_cast<int>(k.layout->scalar_type));
      CHECK((k.layout->scalar_type != ScalarType::Byte || st == 0));  // default omitted, as flatc does
      // Both vectors are present even for rank 0 (ExecuTorch dereferences them).
      const std::uint64_t sizes = w.object(tl, format::tensor_layout_field::kSizes);
      const std::uint64_t dims = w.object(tl, format::tensor_layout_field::kDimOrder);
      REQUIRE(sizes != 0);
      REQUIRE(dims != 0);
      REQUIRE(w.count(sizes) == k.layout->sizes.size());
      REQUIRE(w.count(dims) == k.layout->dim_order.size());
      CHECK(sizes % 4 == 0);
      for (std::uint32_t d = 0; d < w.count(sizes); ++d) {
        CHECK(static_cast<std::int32_t>(u32(f, sizes + 4 + 4 * d)) == k.layout->sizes[d]);
        CHECK(f[static_cast<std::size_t>(dims + 4 + d)] == k.layout->dim_order[d]);
      }
      if (ext) {  // the WDX1 entry points at this very table
        const std::uint64_t x = 48 + header(f).fb_size + (16 - (48 + header(f).fb_size) % 16) % 16;
        CHECK(u32(f, x + u32(f, x + eh::kEntriesOffset) + i * ke::kSize + ke::kLayoutOffset) == tl);
      }
    }
  }
}

TEST_CASE("WDX1 block: entries, hash slots, segment info, function records, strings") {
  const NamedDataStore s = small_store();
  const FunctionMaps maps = small_maps();
  WriteOptions o;
  o.hash_seed = 0x1234;
  const std::vector<std::uint8_t> f = serialize(s, o, maps);
  const Header h = header(f);
  const std::uint64_t x = 512;  // align_up(48 + 464, 16): the flatbuffer is the one of the golden test
  REQUIRE(h.fb_size == 464);
  REQUIRE(std::memcmp(f.data() + x, "WDX1", 4) == 0);
  CHECK(u32(f, x + eh::kVersion) == format::kExtVersion);
  CHECK(u64(f, x + eh::kHashSeed) == 0x1234);
  CHECK(u32(f, x + eh::kKeyCount) == 6);
  CHECK(u32(f, x + eh::kSlotCount) == 16);
  CHECK(u32(f, x + eh::kSegmentCount) == 4);
  CHECK(u32(f, x + eh::kFunctionCount) == 3);
  CHECK(u32(f, x + eh::kFunctionTensorCount) == 5);
  // Strings, each once: decode, combined_all, decode__0, bias, ln, wq,
  // prefill, prefill__0, decode__1 (with NULs).
  static const char kPool[] = "decode\0combined_all\0decode__0\0bias\0ln\0wq\0prefill\0prefill__0\0decode__1";
  const std::string pool_text(kPool, sizeof kPool);  // the array's own final NUL included
  CHECK(u32(f, x + eh::kStringsSize) == pool_text.size());
  const std::uint32_t entries = u32(f, x + eh::kEntriesOffset), slots = u32(f, x + eh::kSlotsOffset),
                      seginfo = u32(f, x + eh::kSegmentInfoOffset), functions = u32(f, x + eh::kFunctionsOffset),
                      rows = u32(f, x + eh::kFunctionTensorsOffset), strings = u32(f, x + eh::kStringsOffset);
  CHECK(entries == 80);
  CHECK(slots == 80 + 6 * 40);
  CHECK(seginfo == slots + 16 * 8);
  CHECK(functions == seginfo + 4 * 16);
  CHECK(rows == functions + 3 * 40);
  CHECK(strings == rows + 5 * 16);
  const std::uint64_t block = (strings + pool_text.size() + 7) / 8 * 8;
  CHECK(u64(f, x + eh::kBlockSize) == block);
  CHECK(u64(f, x + eh::kReserved) == 0);
  CHECK(std::string(reinterpret_cast<const char*>(f.data() + x + strings), pool_text.size()) == pool_text);
  CHECK(h.base == 4096);
  CHECK(all_zero(f, x + strings + pool_text.size(), h.base));

  // Key entries.
  const std::uint64_t data_at[] = {4096, 4096, 4224, 4224, 4352, 4480};
  const std::uint64_t sizes[] = {5, 5, 6, 6, 8, 0};
  const std::uint64_t aligns[] = {16, 4096, 3, 4, 1, 1};
  const std::uint32_t segs[] = {0, 0, 1, 1, 2, 3};
  const Walk w{f};
  for (std::uint32_t i = 0; i < 6; ++i) {
    const std::uint64_t e = x + entries + i * ke::kSize;
    const std::string& key = s.keys()[i].key;
    CAPTURE(key);
    CHECK(u64(f, e + ke::kDataOffset) == data_at[i]);
    CHECK(u64(f, e + ke::kDataSize) == sizes[i]);
    CHECK(u64(f, e + ke::kAlignment) == aligns[i]);
    CHECK(u32(f, e + ke::kKeySize) == key.size());
    CHECK(std::string(reinterpret_cast<const char*>(f.data() + u32(f, e + ke::kKeyOffset)), key.size()) == key);
    CHECK(u32(f, e + ke::kKeyOffset) == w.object(w.element(w.named_data(), i), format::named_data_field::kKey) + 4);
    CHECK(u32(f, e + ke::kSegmentIndex) == segs[i]);
    CHECK(u32(f, e + ke::kLayoutOffset) == w.object(w.element(w.named_data(), i), format::named_data_field::kTensorLayout));
  }
  // Hash slots: each key is found from its home slot by linear probing, and
  // exactly key_count slots are used.
  int used = 0;
  for (std::uint32_t sl = 0; sl < 16; ++sl) used += u64(f, x + slots + 8 * sl) != 0;
  CHECK(used == 6);
  for (std::uint32_t i = 0; i < 6; ++i) {
    const std::string& key = s.keys()[i].key;
    const std::uint64_t hk = detail::key_hash(key.data(), key.size(), 0x1234);
    std::uint32_t at = static_cast<std::uint32_t>(hk & 15);
    int probes = 0;
    while (u64(f, x + slots + 8 * at) != format::slot_value(hk, i) && probes < 16) {
      CHECK(u64(f, x + slots + 8 * at) != 0);  // no empty slot before the key's own
      at = (at + 1) & 15;
      ++probes;
    }
    CHECK(probes < 16);
  }
  // Segment info: XXH3-64 of the bytes (seed 0) and the lcm of the keys' alignments.
  const ByteSpan seg_bytes[] = {ByteSpan(kA, 5), ByteSpan(kC, 6), ByteSpan(kE, 8), ByteSpan(kE, 0)};
  const std::uint64_t seg_aligns[] = {4096, 12, 1, 1};
  for (std::uint32_t i = 0; i < 4; ++i) {
    const std::uint64_t si = x + seginfo + i * 16;
    CHECK(u64(f, si + format::segment_info::kContentHash) == XXH3_64bits(seg_bytes[i].data(), seg_bytes[i].size()));
    CHECK(u64(f, si + format::segment_info::kAlignment) == seg_aligns[i]);
  }
  // Function records in map order; rows sorted by tensor name.
  const auto str = [&](std::uint32_t off, std::uint32_t size) {
    return std::string(reinterpret_cast<const char*>(f.data() + x + strings + off), size);
  };
  struct Want {
    const char* method;
    std::uint32_t partition;
    const char* name;
    std::uint32_t begin, count;
  } want[] = {{"decode", 0, "decode__0", 0, 3}, {"prefill", 0, "prefill__0", 3, 2}, {"decode", 1, "decode__1", 5, 0}};
  for (std::uint32_t i = 0; i < 3; ++i) {
    const std::uint64_t r = x + functions + i * fr::kSize;
    CHECK(str(u32(f, r + fr::kMethodOffset), u32(f, r + fr::kMethodSize)) == want[i].method);
    CHECK(u32(f, r + fr::kPartitionIndex) == want[i].partition);
    CHECK(str(u32(f, r + fr::kBlobOffset), u32(f, r + fr::kBlobSize)) == "combined_all");
    CHECK(str(u32(f, r + fr::kNameOffset), u32(f, r + fr::kNameSize)) == want[i].name);
    CHECK(u32(f, r + fr::kTensorsBegin) == want[i].begin);
    CHECK(u32(f, r + fr::kTensorsCount) == want[i].count);
    CHECK(u32(f, r + fr::kReserved) == 0);
  }
  CHECK(u32(f, x + functions + 2 * fr::kSize + fr::kMethodOffset) == 0);  // "decode" stored once
  const char* row_names[] = {"bias", "ln", "wq", "bias", "wq"};
  const std::uint32_t row_keys[] = {2, 4, 0, 3, 1};  // w.c, w.e, w.a; w.d, w.b
  for (std::uint32_t i = 0; i < 5; ++i) {
    const std::uint64_t r = x + rows + i * ftr::kSize;
    CHECK(str(u32(f, r + ftr::kNameOffset), u32(f, r + ftr::kNameSize)) == row_names[i]);
    CHECK(u32(f, r + ftr::kKeyIndex) == row_keys[i]);
    CHECK(u32(f, r + ftr::kReserved) == 0);
  }
  // The flatbuffer is the same with or without the block; only the header's
  // segment_base_offset and what follows the flatbuffer differ.
  const std::vector<std::uint8_t> plain = serialize(s, no_ext(), maps);
  CHECK(hex(f, 48, 512) == hex(plain, 48, 512));
  CHECK(hex(f, 0, 32) == hex(plain, 0, 32));
}

TEST_CASE("the hash seed changes the slots and the seed field, nothing else") {
  const NamedDataStore s = small_store();
  WriteOptions a, b;
  b.hash_seed = 99;
  const std::vector<std::uint8_t> fa = serialize(s, a), fb = serialize(s, b);
  REQUIRE(fa.size() == fb.size());
  const std::uint64_t x = 512, slots = x + u32(fa, x + eh::kSlotsOffset);
  CHECK(u64(fb, x + eh::kHashSeed) == 99);
  CHECK(u64(fa, x + eh::kHashSeed) == WriteOptions{}.hash_seed);
  // The slots do change (40 of their 128 bytes, for these keys and seeds):
  // without this, a writer that ignored the seed for placing keys would pass.
  std::size_t slot_bytes_changed = 0;
  for (auto i = static_cast<std::size_t>(slots); i < slots + 128; ++i) slot_bytes_changed += fa[i] != fb[i];
  CHECK(slot_bytes_changed == 40);
  for (std::size_t i = 0; i < fa.size(); ++i)
    if (fa[i] != fb[i]) CHECK(((i >= x + eh::kHashSeed && i < x + eh::kHashSeed + 8) || (i >= slots && i < slots + 128)));
}

TEST_CASE("stats") {
  const NamedDataStore s = small_store();
  std::vector<std::uint8_t> bytes;
  VectorSink sink(bytes);
  WriteOptions o = no_ext();
  Expected<WriteStats> st = write_ptd(s, sink, o);
  REQUIRE(st.ok());
  CHECK(st->file_size == 4480);
  CHECK(st->flatbuffer_size == 464);
  CHECK(st->extension_size == 0);
  CHECK(st->metadata_size == 512);
  CHECK(st->segment_base_offset == 4096);
  CHECK(st->data_bytes == 19);
  CHECK(st->padding_bytes == 4480 - 512 - 19);
  CHECK(st->key_count == 6);
  CHECK(st->segment_count == 4);
  CHECK(st->function_count == 0);
  CHECK(bytes.size() == st->file_size);
  // Function maps count only where they are written: in the WDX1 block.
  const FunctionMaps maps = small_maps();
  bytes.clear();
  st = write_ptd(s, maps, sink, o);
  REQUIRE(st.ok());
  CHECK(st->function_count == 0);
  bytes.clear();
  st = write_ptd(s, maps, sink, WriteOptions{});
  REQUIRE(st.ok());
  CHECK(st->function_count == maps.functions.size());
  CHECK(maps.functions.size() == 3);
  // With the WDX1 block after a flatbuffer whose end is not 16-aligned (an
  // empty store's: 48 + 40 = 88), the gap up to the block (96) is padding:
  // 8 bytes there and 72 from the block's end (96 + 88 = 184) to the
  // segment base (256, the next multiple of 128).
  bytes.clear();
  st = write_ptd(NamedDataStore(), sink, WriteOptions{});
  REQUIRE(st.ok());
  CHECK(st->flatbuffer_size == 40);
  CHECK(st->extension_size == 88);
  CHECK(st->metadata_size == 48 + 40 + 88);
  CHECK(st->segment_base_offset == 256);
  CHECK(st->file_size == 256);
  CHECK(st->data_bytes == 0);
  CHECK(st->padding_bytes == 8 + 72);
  REQUIRE(bytes.size() == 256);
  CHECK(all_zero(bytes, 88, 96));
  CHECK(hex(bytes, 96, 100) == "57445831");  // "WDX1"
  CHECK(all_zero(bytes, 184, 256));
}

namespace {
/// Records how the writer calls a sink.
class RecordingSink final : public ByteSink {
 public:
  std::vector<std::uint8_t> bytes;
  std::vector<std::size_t> calls;
  Expected<void> write(const void* data, std::size_t size) override {
    calls.push_back(size);
    const auto* p = static_cast<const std::uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
    return {};
  }
};

/// Sizes as "256 524288 1" (doctest shows a string's value, not a vector's).
std::string sizes_text(const std::vector<std::size_t>& sizes) {
  std::string out;
  for (const std::size_t n : sizes) out += (out.empty() ? "" : " ") + std::to_string(n);
  return out;
}

/// Every way of writing `s` is refused with `code` and `message`:
/// serialize_ptd, write_ptd (the sink never called) and write_ptd_file over
/// `path`, which holds `old` and keeps it, with no temporary left beside it.
/// With `maps` null, through the overloads that take no function maps.
void check_refused(const NamedDataStore& s, const FunctionMaps* maps, const WriteOptions& o, const std::string& path,
                   const std::vector<std::uint8_t>& old, Error code, const std::string& message) {
  Expected<std::vector<std::uint8_t>> r = maps ? serialize_ptd(s, *maps, o) : serialize_ptd(s, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == code);
  CHECK(r.message() == message);
  RecordingSink sink;
  Expected<WriteStats> w = maps ? write_ptd(s, *maps, sink, o) : write_ptd(s, sink, o);
  CHECK(w.error() == code);
  CHECK(w.message() == message);
  CHECK(sink.calls.empty());
  Expected<WriteStats> fw = maps ? write_ptd_file(s, *maps, path, o) : write_ptd_file(s, path, o);
  CHECK(fw.error() == code);
  CHECK(fw.message() == message);
  CHECK(read_file(path) == old);
  CHECK(temporaries_of(path).empty());
}
}  // namespace

TEST_CASE("serialize_ptd, write_ptd into a sink and write_ptd_file write identical bytes") {
  // A large segment (hashed and written in chunks), small ones, padding.
  const auto big = pattern(3 * 1024 * 1024 + 17, 11), small = pattern(100, 12);
  NamedDataStore s = small_store();
  add(s, "big", ByteSpan(big.data(), big.size()), 4096);
  add(s, "small", ByteSpan(small.data(), small.size()), 64, Layout::contiguous(ScalarType::Float, {25}));
  const FunctionMaps maps = small_maps();
  for (bool ext : {false, true}) {
    CAPTURE(ext);
    WriteOptions o;
    o.wdedup_extensions = ext;
    const std::vector<std::uint8_t> mem = serialize(s, o, maps);
    RecordingSink sink;
    Expected<WriteStats> st = write_ptd(s, maps, sink, o);
    REQUIRE(st.ok());
    CHECK(sink.bytes == mem);
    CHECK(st->file_size == mem.size());
    const std::string path = tmp_path(ext ? "identical_ext.ptd" : "identical.ptd");
    Expected<WriteStats> fs = write_ptd_file(s, maps, path, o);
    REQUIRE_MESSAGE(fs.ok(), fs.message());
    const std::vector<std::uint8_t> file = read_file(path);
    CHECK(file == mem);
    CHECK(fs->file_size == st->file_size);
    CHECK(fs->padding_bytes == st->padding_bytes);
    if (ext) {  // the big segment's hash, computed chunk by chunk in the file path, is XXH3-64 of its bytes
      const StoreKey& big_key = REQUIRE_FOUND(s.find("big"));
      REQUIRE(big_key.buffer_index == 4);
      const std::uint64_t x = ext_at(file);
      const std::uint64_t info = x + u32(file, x + eh::kSegmentInfoOffset) + 4 * format::segment_info::kSize;
      CHECK(u64(file, info + format::segment_info::kContentHash) == XXH3_64bits(big.data(), big.size()));
    }
    ::unlink(path.c_str());
  }
}

TEST_CASE("the overloads without function maps write with the options given, not the defaults") {
  // Without WDX1 and with segment_alignment 1, the small store's segments
  // sit at 0, 8 (4104, a multiple of 12), 14 and 22 past the base at 4096:
  // a file of 4,118 bytes (4,480 with segment_alignment 128).
  const NamedDataStore s = small_store();
  const WriteOptions o = no_ext(1);
  const std::vector<std::uint8_t> want = serialize(s, o);
  REQUIRE(want.size() == 4118);
  CHECK(header(want).base == 4096);
  const Walk w{want};
  CHECK(w.segment_offset(1) == 8);
  CHECK(w.segment_offset(2) == 14);
  CHECK(w.segment_offset(3) == 22);
  Expected<std::vector<std::uint8_t>> mem = serialize_ptd(s, o);
  REQUIRE_MESSAGE(mem.ok(), mem.message());
  CHECK(mem->size() == 4118);
  CHECK(*mem == want);
  RecordingSink sink;
  Expected<WriteStats> st = write_ptd(s, sink, o);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(sink.bytes == want);
  CHECK(st->extension_size == 0);
  const std::string path = tmp_path("options_without_maps.ptd");
  Expected<WriteStats> fs = write_ptd_file(s, path, o);
  REQUIRE_MESSAGE(fs.ok(), fs.message());
  CHECK(read_file(path) == want);
  CHECK(fs->file_size == want.size());
  ::unlink(path.c_str());
}

TEST_CASE("validation: every error names what is wrong, and nothing is written") {
  const NamedDataStore s = small_store();
  const std::string path = tmp_path("never_written.ptd");
  const std::vector<std::uint8_t> old = occupy(path);
  const auto expect = [&](const FunctionMaps& maps, const WriteOptions& o, Error code, const std::string& message) {
    check_refused(s, &maps, o, path, old, code, message);
  };

  SUBCASE("a tensor mapped to a key that is not in the store") {
    FunctionMaps m = small_maps();
    m.functions[1].tensors.push_back({"wk", "w.missing"});
    expect(m, {}, Error::NotFound,
           "method 'prefill' partition 0's function ('prefill__0' in blob 'combined_all'): tensor 'wk' maps to key "
           "'w.missing', which is not in the store");
  }
  SUBCASE("a tensor name twice in one function") {
    FunctionMaps m = small_maps();
    m.functions[0].tensors.push_back({"ln", "w.a"});
    expect(m, {}, Error::InvalidName,
           "method 'decode' partition 0's function ('decode__0' in blob 'combined_all'): tensor 'ln' appears twice in its "
           "tensor table");
  }
  SUBCASE("a tensor name twice in one function, first in sorted order (rows 0 and 1)") {
    FunctionMaps m = small_maps();
    m.functions[0].tensors.push_back({"A", "w.a"});  // 'A' sorts before every other name
    m.functions[0].tensors.push_back({"A", "w.b"});
    expect(m, {}, Error::InvalidName,
           "method 'decode' partition 0's function ('decode__0' in blob 'combined_all'): tensor 'A' appears twice in its "
           "tensor table");
  }
  SUBCASE("a method, blob key, function or tensor name that is empty or holds a NUL byte") {
    // Every one is looked up by name; none could be found (nor imported back).
    using namespace std::string_literals;
    FunctionMaps m = small_maps();
    m.functions[0].method = "";
    expect(m, {}, Error::InvalidName,
           "method '' partition 0's function ('decode__0' in blob 'combined_all'): method name is empty");
    m = small_maps();
    m.functions[1].blob_key = "comb\0ined"s;
    expect(m, {}, Error::InvalidName,
           "method 'prefill' partition 0's function ('prefill__0' in blob 'comb\\x00ined'): blob key "
           "'comb\\x00ined' contains a NUL byte at offset 4");
    m = small_maps();
    m.functions[2].function_name = "";
    expect(m, no_ext(), Error::InvalidName,
           "method 'decode' partition 1's function ('' in blob 'combined_all'): function name is empty");
    m = small_maps();
    m.functions[0].tensors[1].tensor_name = "bi\0as"s;
    expect(m, {}, Error::InvalidName,
           "method 'decode' partition 0's function ('decode__0' in blob 'combined_all'): tensor name 'bi\\x00as' contains "
           "a NUL byte at offset 2 (key 'w.c')");
    m = small_maps();
    m.functions[1].tensors[0].tensor_name = "";
    expect(m, {}, Error::InvalidName,
           "method 'prefill' partition 0's function ('prefill__0' in blob 'combined_all'): tensor name is empty (key "
           "'w.b')");
  }
  SUBCASE("a method or tensor name that is not UTF-8: the import, which makes keys of them, would refuse the file") {
    // Written before, then refused by add_ptd_program (a fuzzing review,
    // 2026-12-06): the writer checked function-map names for empty and NUL
    // only. The 8-byte word check's edges: a surrogate across the first
    // word, a lead byte cut off at the end of the second.
    const std::string why = "; a key is a flatbuffer string, which is UTF-8, and ExecuTorch's Python reader (flatc --json) "
                            "cannot read a file holding one that is not";
    FunctionMaps m = small_maps();
    m.functions[1].method = "\xc0\x80";  // an overlong NUL
    expect(m, {}, Error::InvalidName,
           "method '\\xc0\\x80' partition 0's function ('prefill__0' in blob 'combined_all'): method name "
           "'\\xc0\\x80' is not valid UTF-8 at offset 0 (keys are made of method names: '<method>/<name>')" + why);
    m = small_maps();
    m.functions[0].tensors[2].tensor_name = "xxxxxxx\xed\xa0\x80";  // a surrogate, U+D800
    expect(m, no_ext(), Error::InvalidName,
           "method 'decode' partition 0's function ('decode__0' in blob 'combined_all'): tensor name "
           "'xxxxxxx\\xed\\xa0\\x80' is not valid UTF-8 at offset 7" + why + " (key 'w.e')");
    m = small_maps();
    m.functions[1].tensors[1].tensor_name = "xxxxxxxxxxxxxxx\xc2";
    expect(m, {}, Error::InvalidName,
           "method 'prefill' partition 0's function ('prefill__0' in blob 'combined_all'): tensor name "
           "'xxxxxxxxxxxxxxx\\xc2' is not valid UTF-8 at offset 15" + why + " (key 'w.d')");
  }
  SUBCASE("the same (method, partition) twice") {
    FunctionMaps m = small_maps();
    m.functions.push_back(FunctionMap{"decode", 1, "other_blob", "decode__1b", {}});
    expect(m, {}, Error::InvalidArgument,
           "method 'decode' partition 1's function ('decode__1b' in blob 'other_blob'): method 'decode' partition 1 appears "
           "twice in the function maps");
  }
  SUBCASE("the same function name in the same blob twice") {
    // find_function(blob, name) would only ever find the first.
    FunctionMaps m = small_maps();
    m.functions.push_back(FunctionMap{"encode", 0, "combined_all", "prefill__0", {}});
    expect(m, {}, Error::InvalidName,
           "method 'encode' partition 0's function ('prefill__0' in blob 'combined_all'): method 'prefill' partition 0 has "
           "the same function name in the same blob; a reader could find only the first");
    // The first function is named by its own partition, not the repeat's.
    m = small_maps();
    m.functions.push_back(FunctionMap{"encode", 3, "combined_all", "prefill__0", {}});
    expect(m, {}, Error::InvalidName,
           "method 'encode' partition 3's function ('prefill__0' in blob 'combined_all'): method 'prefill' partition 0 has "
           "the same function name in the same blob; a reader could find only the first");
    // One name in two blobs is fine (Positional: "decode" in each
    // combined_partition_<i>).
    m = small_maps();
    m.functions.push_back(FunctionMap{"encode", 0, "other_blob", "prefill__0", {}});
    CHECK(serialize_ptd(s, m, {}).ok());
  }
  SUBCASE("more functions than a reader checks for repeats") {
    FunctionMaps m;
    for (std::uint32_t i = 0; i <= wdedup::format::kMaxFunctions; ++i)
      m.functions.push_back(FunctionMap{"m" + std::to_string(i), 0, "blob", "f" + std::to_string(i), {}});
    expect(m, {}, Error::InvalidArgument,
           "2897 functions (methods x partitions); a .ptd file's function maps hold at most 2896 (without "
           "wdedup_extensions none are written)");
    // Without the WDX1 block the maps are not written, so no reader's cap
    // applies: the same maps write a plain FlatTensor file, identical to
    // the one written with no maps at all.
    Expected<std::vector<std::uint8_t>> plain = serialize_ptd(s, m, no_ext());
    REQUIRE(plain.ok());
    Expected<std::vector<std::uint8_t>> no_maps = serialize_ptd(s, FunctionMaps{}, no_ext());
    REQUIRE(no_maps.ok());
    CHECK(*plain == *no_maps);
    std::vector<std::uint8_t> bytes;
    VectorSink sink(bytes);
    Expected<WriteStats> st = write_ptd(s, m, sink, no_ext());
    REQUIRE(st.ok());
    CHECK(st->function_count == 0);
    CHECK(bytes == *plain);
  }
  SUBCASE("long function-map names a reader could not check for repeats") {
    // 150-byte names that differ only in their middle: a reader's
    // fingerprints (first and last 64 bytes) all match, and comparing them
    // pair after pair exceeds the bytes it compares at open. The writer runs
    // the same check and refuses before writing (it wrote the file, which
    // then failed to open, until it did).
    const auto name = [](char end, std::uint32_t i) {
      return std::string(70, end) + std::to_string(1000 + i) + std::string(76, end);
    };
    FunctionMaps m;
    for (std::uint32_t i = 0; i < 32; ++i) m.functions.push_back(FunctionMap{name('m', i), 0, "blob", name('f', i), {}});
    // Named: the 28th, where the bytes a reader compares run out.
    expect(m, {}, Error::InvalidName,
           "method '" + name('m', 27) + "' partition 0's function ('" + name('f', 27) +
               "' in blob 'blob'): a reader could not check the function maps for repeats (names over 128 bytes "
               "that agree in their first and last 64 bytes, function after function, exceed what it compares) and "
               "would refuse the file; make such names differ within 64 bytes of either end");
    // Fewer such names fit what a reader compares: written, and they open.
    m.functions.resize(16);
    Expected<std::vector<std::uint8_t>> bytes = serialize_ptd(s, m, {});
    REQUIRE(bytes.ok());
    BufferSource src(bytes->data(), bytes->size());
    Result<NamedDataMap> map = NamedDataMap::open(src);
    REQUIRE(map.ok());
    CHECK(map->function_count() == 16);
  }
  SUBCASE("segment alignment 0 or too large; 2^32 itself is planned") {
    WriteOptions o;
    o.segment_alignment = 0;
    expect({}, o, Error::InvalidAlignment, "segment_alignment must be in [1, 4294967296], got 0");
    o.segment_alignment = kMaxAlignment + 1;
    expect({}, o, Error::InvalidAlignment, "segment_alignment must be in [1, 4294967296], got 4294967297");
    o.segment_alignment = kMaxAlignment;  // (small_store's alignment 12 has no lcm with it under the maximum)
    NamedDataStore one;
    add(one, "k", ByteSpan(kE, 8), 1);
    Expected<detail::PtdPlan> plan = detail::plan_ptd(one, FunctionMaps{}, o);
    REQUIRE_MESSAGE(plan.ok(), plan.message());
    CHECK(plan->segment_offsets[0] == kMaxAlignment);
  }
  SUBCASE("function maps are checked even without the WDX1 block") {
    FunctionMaps m;
    m.functions.push_back(FunctionMap{"m", 0, "b", "f", {{"t", "nope"}}});
    expect(m, no_ext(), Error::NotFound,
           "method 'm' partition 0's function ('f' in blob 'b'): tensor 't' maps to key 'nope', which is not in the store");
  }
}

TEST_CASE("validation of stores filled through the bulk path") {
  // add_named_data refuses all of these; the bulk path (deduplicate's)
  // checks nothing, so the writer does, before a byte is written.
  const auto bytes = pattern(8, 1);
  const ByteSpan data(bytes.data(), 8);
  const std::string path = tmp_path("bulk_never_written.ptd");
  const std::vector<std::uint8_t> old = occupy(path);
  const auto expect = [&](const NamedDataStore& s, Error code, const std::string& message) {
    for (bool ext : {true, false}) {
      CAPTURE(ext);
      WriteOptions o;
      o.wdedup_extensions = ext;
      check_refused(s, nullptr, o, path, old, code, message);
    }
  };
  using SA = detail::StoreAccess;

  SUBCASE("a key pointing past the buffers") {
    NamedDataStore s;
    SA::add_key(s, "k", 3, 1, std::nullopt);
    expect(s, Error::InvalidArgument, "key 'k' points at buffer 3 but the store has 0 buffers");
  }
  SUBCASE("a key pointing one past the last buffer") {
    NamedDataStore s;
    SA::add_key(s, "k", SA::add_buffer(s, data, 1) + 1, 1, std::nullopt);
    expect(s, Error::InvalidArgument, "key 'k' points at buffer 1 but the store has 1 buffer");
  }
  SUBCASE("a layout that does not match the bytes: more of them, or fewer") {
    const std::pair<std::int32_t, const char*> mismatches[] = {
        {3, "key 'k': layout FLOAT [3] dim_order [0] describes 12 bytes but its buffer has 8 bytes"},
        {1, "key 'k': layout FLOAT [1] dim_order [0] describes 4 bytes but its buffer has 8 bytes"},
    };
    for (const auto& m : mismatches) {
      CAPTURE(m.first);
      NamedDataStore s;
      const std::uint32_t b = SA::add_buffer(s, data, 1);
      SA::add_key(s, "k", b, 1, Layout::contiguous(ScalarType::Float, {m.first}));
      expect(s, Error::LayoutMismatch, m.second);
    }
  }
  SUBCASE("an inconsistent layout") {
    NamedDataStore s;
    const std::uint32_t b = SA::add_buffer(s, data, 1);
    SA::add_key(s, "k", b, 1, Layout{ScalarType::Float, {2}, {1}});  // dim_order not a permutation
    expect(s, Error::LayoutMismatch,
           "key 'k': layout is inconsistent (FLOAT [2] dim_order [1]): dim_order[0] is 1, not below rank 1");
  }
  SUBCASE("a key containing NUL (ExecuTorch compares keys only up to a NUL)") {
    NamedDataStore s;
    const std::uint32_t b = SA::add_buffer(s, data, 1);
    SA::add_key(s, std::string_view("a\0b", 3), b, 1, std::nullopt);
    expect(s, Error::InvalidName,
           "key 'a\\x00b' contains a NUL byte; ExecuTorch compares keys only up to a NUL (strcmp, or strncmp after "
           "a length check), so it could not tell it from a key that agrees before the NUL");
  }
  SUBCASE("a key that is not UTF-8 (flatc --json, ExecuTorch's Python reader, stops at it)") {
    NamedDataStore s;
    const std::uint32_t b = SA::add_buffer(s, data, 1);
    SA::add_key(s, "kept", b, 1, std::nullopt);
    SA::add_key(s, "w.\xed\xa0\x80", b, 1, std::nullopt);  // a surrogate
    expect(s, Error::InvalidName,
           "key 'w.\\xed\\xa0\\x80' is not valid UTF-8 at offset 2; a key is a flatbuffer string, which is UTF-8, "
           "and ExecuTorch's Python reader (flatc --json) cannot read a file holding one that is not");
  }
  SUBCASE("an empty key") {
    NamedDataStore s;
    const std::uint32_t b = SA::add_buffer(s, data, 1);
    SA::add_key(s, "kept", b, 1, std::nullopt);
    SA::add_key(s, "", b, 1, std::nullopt);
    expect(s, Error::InvalidName, "the store holds an empty key");
  }
  SUBCASE("a key alignment of 0 or over the maximum") {
    NamedDataStore s0, big;
    SA::add_key(s0, "k", SA::add_buffer(s0, data, 1), 0, std::nullopt);
    expect(s0, Error::InvalidAlignment, "key 'k' has alignment 0; it must be in [1, 4294967296]");
    SA::add_key(big, "k", SA::add_buffer(big, data, 1), kMaxAlignment + 1, std::nullopt);
    expect(big, Error::InvalidAlignment, "key 'k' has alignment 4294967297; it must be in [1, 4294967296]");
  }
  SUBCASE("a buffer alignment of 0 or over the maximum") {
    NamedDataStore s0, big;
    SA::add_buffer(s0, data, 1);
    SA::add_key(s0, "k", SA::add_buffer(s0, data, 0), 1, std::nullopt);
    expect(s0, Error::InvalidAlignment, "buffer 1 has alignment 0; it must be in [1, 4294967296]");
    SA::add_key(big, "k", SA::add_buffer(big, data, kMaxAlignment + 1), 1, std::nullopt);
    expect(big, Error::InvalidAlignment, "buffer 0 has alignment 4294967297; it must be in [1, 4294967296]");
  }
  SUBCASE("a key and its buffer whose alignments' lcm is over the maximum") {
    NamedDataStore s;
    SA::add_key(s, "k", SA::add_buffer(s, data, 65539), 65537, std::nullopt);
    expect(s, Error::InvalidAlignment,
           "key 'k': lcm of alignments 65539 and 65537 exceeds the maximum of 4294967296");
  }
  SUBCASE("a segment whose lcm with segment_alignment is over the maximum (padding of up to 512 GiB)") {
    // Each alignment is allowed alone; the segment would be placed at
    // lcm(128, 2^32 - 1) = 549,755,813,760.
    NamedDataStore s;
    REQUIRE(s.add_named_data("k", data, 4294967295).ok());
    expect(s, Error::InvalidAlignment,
           "buffer 0 (key 'k') has alignment 4294967295: its lcm with segment_alignment 128 exceeds the maximum of "
           "4294967296");
    // A buffer that several keys share is named by its first key, not by
    // a later one, nor by a key of another buffer.
    const auto other = pattern(8, 2);
    NamedDataStore shared;
    REQUIRE(shared.add_named_data("a", ByteSpan(other.data(), 8), 1).ok());
    REQUIRE(shared.add_named_data("k", data, 4294967295).ok());
    REQUIRE(shared.add_named_data("k2", data, 1).ok());
    REQUIRE(shared.buffer_count() == 2);
    expect(shared, Error::InvalidAlignment,
           "buffer 1 (key 'k') has alignment 4294967295: its lcm with segment_alignment 128 exceeds the maximum of "
           "4294967296");
    // The bulk path may leave the buffer below its key's request: the key's
    // is checked as well.
    NamedDataStore bulk;
    SA::add_key(bulk, "k", SA::add_buffer(bulk, data, 1), 4294967295, std::nullopt);
    expect(bulk, Error::InvalidAlignment,
           "key 'k': its segment's alignment 4294967295 and segment_alignment 128 have an lcm over the maximum of "
           "4294967296");
    // Each alignment alone is placed within the maximum; their lcm is not:
    // lcm(65537, 1023) = 67,044,351, and with 128 over 2^33. (Planned
    // first: a writer that let it through would hold 8 GiB of padding.)
    NamedDataStore joint;
    SA::add_key(joint, "k", SA::add_buffer(joint, data, 65537), 1023, std::nullopt);
    REQUIRE_FALSE(detail::plan_ptd(joint, FunctionMaps{}, WriteOptions{}).ok());
    expect(joint, Error::InvalidAlignment,
           "key 'k': its segment's alignment 67044351 and segment_alignment 128 have an lcm over the maximum of "
           "4294967296");
    NamedDataStore keyless;
    SA::add_buffer(keyless, data, 4294967295);
    expect(keyless, Error::InvalidAlignment,
           "buffer 0 has alignment 4294967295: its lcm with segment_alignment 128 exceeds the maximum of 4294967296");
    // 2^32 itself is a multiple of 128: the largest alignment there is, allowed.
    NamedDataStore max;
    REQUIRE(max.add_named_data("k", data, std::int64_t{1} << 32).ok());
    Expected<detail::PtdPlan> plan = detail::plan_ptd(max, FunctionMaps{}, WriteOptions{});
    REQUIRE(plan);
    CHECK(plan->segment_offsets[0] == std::uint64_t{1} << 32);
  }
  SUBCASE("segments whose sizes and padding add up past 2^64 bytes: the segment that overflows is named") {
    // A span's size is the caller's word (the bulk path checks nothing):
    // planning reads no segment byte, so sizes no memory could hold stay
    // sizes. Segment 1 ends 2^40 - 128 bytes short of 2^64 (past the
    // metadata and 128 of padding); segment 2's 2^40 bytes would not fit.
    if constexpr (sizeof(std::size_t) >= 8) {
      const std::uint64_t tera = std::uint64_t{1} << 40;
      NamedDataStore s;
      SA::add_key(s, "a", SA::add_buffer(s, data, 1), 1, std::nullopt);
      SA::add_key(s, "b", SA::add_buffer(s, ByteSpan(bytes.data(), static_cast<std::size_t>(0 - tera)), 1), 1,
                  std::nullopt);
      SA::add_key(s, "c", SA::add_buffer(s, ByteSpan(bytes.data(), static_cast<std::size_t>(tera)), 1), 1,
                  std::nullopt);
      expect(s, Error::InvalidArgument,
             "the file would exceed 2^64 bytes at segment 2 (1099511627776 bytes, alignment lcm(128, 1))");
    }
  }
  SUBCASE("the same key twice (NamedDataMap::open would refuse the file)") {
    NamedDataStore s;
    const std::uint32_t b = SA::add_buffer(s, data, 1);
    SA::add_key_unindexed(s, "a", b, 1, std::nullopt);
    SA::add_key_unindexed(s, "k", b, 1, std::nullopt);
    SA::add_key_unindexed(s, "k", b, 4, std::nullopt);
    expect(s, Error::InvalidName,
           "key 'k' appears twice in the store (keys 1 and 2); a reader could find only the first");
  }
  SUBCASE("a key alignment the buffer does not carry is still honoured") {
    NamedDataStore s;
    const std::uint32_t b = SA::add_buffer(s, data, 1);
    SA::add_key(s, "k", b, 1024, std::nullopt);
    const std::vector<std::uint8_t> f = serialize(s, no_ext(1));
    CHECK((header(f).base + Walk{f}.segment_offset(0)) % 1024 == 0);
    // With WDX1: the segment info gives the segment's alignment, 1024,
    // not its buffer's 1; the key entry its own request.
    WriteOptions o;
    o.segment_alignment = 1;
    const std::vector<std::uint8_t> g = serialize(s, o);
    const std::uint64_t x = ext_at(g);
    REQUIRE(std::memcmp(g.data() + x, "WDX1", 4) == 0);
    CHECK(u64(g, x + u32(g, x + eh::kSegmentInfoOffset) + format::segment_info::kAlignment) == 1024);
    CHECK(u64(g, x + u32(g, x + eh::kEntriesOffset) + format::key_entry::kAlignment) == 1024);
  }
}

TEST_CASE("the most functions a file may hold: written, opened, each found as itself") {
  // 2,896 functions: the reader checks every pair for a repeat (4.2M).
  const NamedDataStore s = small_store();
  FunctionMaps m;
  for (std::uint32_t i = 0; i < wdedup::format::kMaxFunctions; ++i)
    m.functions.push_back(FunctionMap{"method" + std::to_string(i / 4), i % 4, "blob" + std::to_string(i % 2),
                                      "f" + std::to_string(i), {{"t", "w.a"}}});
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, m, {});
  REQUIRE(file.ok());
  wdedup::BufferSource src(file->data(), file->size());
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
  REQUIRE(map.ok());
  REQUIRE(map->function_count() == wdedup::format::kMaxFunctions);
  for (const std::uint32_t i : {0u, 1u, 1447u, 2895u}) {
    CAPTURE(i);
    wdedup::Result<wdedup::FunctionView> f = map->find_function("method" + std::to_string(i / 4), i % 4);
    REQUIRE(f.ok());
    CHECK(std::string(f->function_name()) == "f" + std::to_string(i));
    CHECK(std::string(f->blob_key()) == "blob" + std::to_string(i % 2));
  }
  // At exactly that many the reader still checks for repeats: function 1
  // made method0's partition 0 again is refused.
  std::vector<std::uint8_t> b = *file;
  namespace f = wdedup::format;
  std::uint64_t ext = 0;
  REQUIRE(f::align_up(f::kFlatbufferOffset + f::load_u64(b.data() + f::kHeaderFlatbufferSizePos), f::kExtAlignment, &ext));
  const std::uint64_t f1 = ext + f::load_u32(b.data() + ext + f::ext_header::kFunctionsOffset) + f::function_record::kSize;
  f::store_u32(b.data() + f1 + f::function_record::kPartitionIndex, 0);
  wdedup::BufferSource repeated(b.data(), b.size());
  wdedup::Result<wdedup::NamedDataMap> refused = wdedup::NamedDataMap::open(repeated);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == Error::MalformedFunctionMap);
  CHECK(std::string(refused.failure().what) == "two functions for one method and partition (at = the second)");
  CHECK(refused.failure().at == f1);

  // One more than that (a hand-made file: the writer writes no more) is
  // read without the check, as the README says ("A file with more ... is
  // read without this check"): a 2,897th record, a copy of function 0's
  // names (method0, partition 0, blob0, f0) with no rows, inserted after
  // the others. The tables after the records (rows, then strings) move 40
  // bytes on, into the padding before the segment data.
  namespace eh = f::ext_header;
  namespace fr = f::function_record;
  std::vector<std::uint8_t> more = *file;
  const std::uint64_t records = ext + f::load_u32(more.data() + ext + eh::kFunctionsOffset);
  const std::uint64_t rows = ext + f::load_u32(more.data() + ext + eh::kFunctionTensorsOffset);
  const std::uint64_t block = f::load_u64(more.data() + ext + eh::kBlockSize);
  REQUIRE(rows == records + fr::kSize * wdedup::format::kMaxFunctions);
  REQUIRE(f::load_u32(more.data() + ext + eh::kStringsOffset) > rows - ext);  // the strings come after the rows
  REQUIRE(ext + block + fr::kSize <= f::load_u64(more.data() + f::kHeaderSegmentBasePos));
  std::uint8_t extra[fr::kSize];
  std::memcpy(extra, more.data() + records, fr::kSize);
  f::store_u32(extra + fr::kTensorsBegin, f::load_u32(more.data() + ext + eh::kFunctionTensorCount));
  f::store_u32(extra + fr::kTensorsCount, 0);
  const auto rows_at = static_cast<std::ptrdiff_t>(rows), block_end = static_cast<std::ptrdiff_t>(ext + block);
  std::memmove(more.data() + rows_at + fr::kSize, more.data() + rows_at, static_cast<std::size_t>(block_end - rows_at));
  std::memcpy(more.data() + rows_at, extra, fr::kSize);
  for (const std::size_t field : {eh::kFunctionTensorsOffset, eh::kStringsOffset})
    f::store_u32(more.data() + ext + field, f::load_u32(more.data() + ext + field) + fr::kSize);
  f::store_u32(more.data() + ext + eh::kFunctionCount, wdedup::format::kMaxFunctions + 1);
  f::store_u64(more.data() + ext + eh::kBlockSize, block + fr::kSize);
  wdedup::BufferSource unchecked(more.data(), more.size());
  wdedup::Result<wdedup::NamedDataMap> read = wdedup::NamedDataMap::open(unchecked);
  REQUIRE_MESSAGE(read.ok(), std::string(read.failure().what), " at ", read.failure().at);
  CHECK(read->function_count() == wdedup::format::kMaxFunctions + 1);
  wdedup::Result<wdedup::FunctionView> last = read->function(wdedup::format::kMaxFunctions);
  REQUIRE(last.ok());
  CHECK(std::string(last->method()) == "method0");
  CHECK(last->partition_index() == 0);
  CHECK(last->tensor_count() == 0);
  // Lookups give the first of the two.
  wdedup::Result<wdedup::FunctionView> first = read->find_function("method0", 0);
  REQUIRE(first.ok());
  CHECK(first->tensor_count() == 1);
  const wdedup::Result<wdedup::KeyView> key = first->key_of("t");
  REQUIRE(key.ok());
  CHECK(std::string(*key) == "w.a");
}

TEST_CASE("long names the writer takes, the reader opens; only names alike at both ends are too many to check") {
  const NamedDataStore s = small_store();
  auto open_status = [&](const FunctionMaps& m) {
    Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, m, {});
    REQUIRE(file.ok());
    // Copied: the map views its source, which must outlive the checks.
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(file).value());
    wdedup::BufferSource src(bytes->data(), bytes->size());
    wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
    return map ? std::string("ok") : std::string(map.failure().what);
  };
  // kMaxFunctions function names of 200 bytes that agree in their first and
  // last `same` bytes: a run of 'a's, the number, 'z's to the end.
  const auto alike_at_ends = [](std::size_t same) {
    FunctionMaps m;
    for (std::uint32_t i = 0; i < wdedup::format::kMaxFunctions; ++i) {
      std::string name = std::string(same, 'a') + std::to_string(i);
      name += std::string(200 - name.size(), 'z');
      m.functions.push_back(FunctionMap{"m" + std::to_string(i), 0, "blob", name, {}});
    }
    return m;
  };
  const auto padded = [](const std::string& head, std::uint32_t i, std::size_t size) {
    std::string n = head + std::to_string(i);
    n.insert(head.size(), size - n.size(), '_');  // the number at the end, all names one size
    return n;
  };
  {
    // 300 functions, method, blob and function names of 100 bytes each,
    // differing only at the end (one size: every pair's sizes agree).
    FunctionMaps m;
    for (std::uint32_t i = 0; i < 300; ++i)
      m.functions.push_back(FunctionMap{padded("method", i, 100), 0, padded("blob", i % 3, 100),
                                        padded("function", i, 100), {{"t", "w.a"}}});
    CHECK(open_status(m) == "ok");
  }
  {
    // 8 functions sharing 100 tensor names of 600 bytes: each read for its
    // NUL check and its comparison with its neighbour.
    FunctionMaps m;
    for (std::uint32_t f = 0; f < 8; ++f) {
      FunctionMap fm{"m" + std::to_string(f), 0, "blob", "f" + std::to_string(f), {}};
      for (std::uint32_t t = 0; t < 100; ++t) fm.tensors.push_back({padded("tensor", t, 600), "w.a"});
      m.functions.push_back(std::move(fm));
    }
    CHECK(open_status(m) == "ok");
  }
  {
    // 2,896 function names of 200 bytes that agree in their first and last
    // 32 bytes, not 64: fingerprints (64 bytes at each end) tell them apart,
    // so no pair is compared byte by byte and the budget holds.
    CHECK(open_status(alike_at_ends(32)) == "ok");
  }
  {
    // 2,896 function names of 200 bytes that agree in their first and last
    // 64 bytes: fingerprints alike, so every pair's bytes are compared, past
    // what open() allows (the pool plus 1 KiB a name): a reader refuses such
    // maps, not slow. Both run detail::check_function_repeats: the reader
    // over the file's pool, the writer over the pool it is about to write,
    // so the writer refuses them first and no file it writes fails to open.
    const FunctionMaps m = alike_at_ends(64);
    Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, m, {});
    CHECK(file.error() == Error::InvalidName);
    CHECK(file.message().find(": a reader could not check the function maps for repeats") != std::string::npos);
    // The check itself over a pool as the writer lays it out (each string
    // once): too long, where the bytes it compares run out.
    std::string pool;
    std::map<std::string, std::size_t> at;
    const auto place = [&](const std::string& v) {
      const auto it = at.emplace(v, pool.size());
      if (it.second) pool += v + '\0';
      return it.first->second;
    };
    for (const FunctionMap& f : m.functions)
      for (const std::string* v : {&f.method, &f.blob_key, &f.function_name}) place(*v);
    std::vector<wdedup::detail::FunctionNames> names;
    for (const FunctionMap& f : m.functions) {
      const auto view = [&](const std::string& v) { return wdedup::KeyView(pool.data() + at[v], v.size()); };
      names.push_back({view(f.method), view(f.blob_key), view(f.function_name), f.partition_index});
    }
    const wdedup::detail::RepeatCheck rc = wdedup::detail::check_function_repeats(
        static_cast<std::uint32_t>(names.size()), pool.size(), wdedup::format::kCheckBytesPerName,
        [&](std::uint32_t i) noexcept { return names[i]; });
    CHECK(rc.problem == wdedup::detail::RepeatCheck::kTooLong);
    CHECK(file.message().rfind(wdedup::detail::describe_function(m.functions[rc.at]) + ": ", 0) == 0);
  }
}

namespace {

/// check_function_repeats over two functions, `a` then `b`, in a pool of
/// `pool_size` bytes at 0 bytes a name: a budget of exactly pool_size.
wdedup::detail::RepeatCheck check_two(const wdedup::detail::FunctionNames& a, const wdedup::detail::FunctionNames& b,
                                      std::uint64_t pool_size) {
  const wdedup::detail::FunctionNames names[2] = {a, b};
  return wdedup::detail::check_function_repeats(2, pool_size, 0, [&](std::uint32_t i) noexcept { return names[i]; });
}

}  // namespace

TEST_CASE("check_function_repeats: bytes compared up to exactly the budget are within it") {
  // Two functions, partitions 0 and 1 of "m", with the same blob key and
  // function name in separate buffers: their names' fingerprints agree, so
  // the name (4 bytes) and the blob key (2 bytes) are compared byte by
  // byte, 6 bytes in all. A budget of 6 (the pool's size here, 0 a name)
  // covers them: the repeated name is found. A budget of 5 does not.
  const std::string a_name = "abcd", b_name = "abcd", a_blob = "xy", b_blob = "xy", method = "m";
  const wdedup::detail::FunctionNames a{wdedup::KeyView(method), wdedup::KeyView(a_blob), wdedup::KeyView(a_name), 0};
  const wdedup::detail::FunctionNames b{wdedup::KeyView(method), wdedup::KeyView(b_blob), wdedup::KeyView(b_name), 1};
  const wdedup::detail::RepeatCheck exact = check_two(a, b, 6);
  CHECK(exact.problem == wdedup::detail::RepeatCheck::kName);
  CHECK(exact.at == 1);
  const wdedup::detail::RepeatCheck short_by_one = check_two(a, b, 5);
  CHECK(short_by_one.problem == wdedup::detail::RepeatCheck::kTooLong);
  CHECK(short_by_one.at == 1);
}

TEST_CASE("check_function_repeats at a budget of 0: what fingerprints and addresses settle, no byte compared") {
  // Functions of methods "m0" and "m1" (partition 0), checked with a budget
  // of 0 (an empty pool, 0 a name): a comparison of any byte runs out.
  const std::string m0 = "m0", m1 = "m1", name = "fwd", other_name = "fwd", b0 = "b0", b1 = "b1";
  const auto function = [](const std::string& method, const std::string& blob, const std::string& function_name) {
    return wdedup::detail::FunctionNames{wdedup::KeyView(method), wdedup::KeyView(blob),
                                         wdedup::KeyView(function_name), 0};
  };
  // One name "fwd" (two buffers, so not one pool string) in blobs "b0" and
  // "b1": a name's fingerprint hashes its blob key too, so the two differ
  // and nothing is compared. (A fingerprint of the name alone would match
  // and compare "fwd", past the budget: kTooLong.)
  const wdedup::detail::RepeatCheck two_blobs = check_two(function(m0, b0, name), function(m1, b1, other_name), 0);
  CHECK(two_blobs.problem == wdedup::detail::RepeatCheck::kNone);
  CHECK(two_blobs.at == 0);
  // A blob key and a name that are the same two strings (one address each,
  // as in a file's pool): same() says equal by address before it charges
  // the budget, so the repeat is found, at the second.
  const wdedup::detail::RepeatCheck pooled = check_two(function(m0, b0, name), function(m1, b0, name), 0);
  CHECK(pooled.problem == wdedup::detail::RepeatCheck::kName);
  CHECK(pooled.at == 1);
}

TEST_CASE("long tensor names shared by many functions: the writer refuses what a reader could not check") {
  // The pool holds each name once, but a reader reads a name for every row
  // that names it (its NUL check, and its comparison with the row before),
  // within format::name_check_budget. Such files were written, then
  // refused at open ("tensor names too long to check").
  const NamedDataStore s = small_store();
  const auto maps = [](std::uint32_t functions, std::size_t name_size) {
    FunctionMaps m;
    for (std::uint32_t f = 0; f < functions; ++f) {
      FunctionMap fm{"m" + std::to_string(f), 0, "blob", "f" + std::to_string(f), {}};
      for (std::uint32_t t = 0; t < 20; ++t) {
        std::string name(name_size, 'n');
        name += std::to_string(t + 10);  // 20 names of one size, sorted as numbered
        fm.tensors.push_back({name, "w.a"});
      }
      m.functions.push_back(std::move(fm));
    }
    return m;
  };
  // Every size either is refused by the writer or opens.
  for (const std::uint32_t functions : {1u, 4u, 32u}) {
    std::size_t largest_written = 0, smallest_refused = 0;
    for (std::size_t size = 1000; size <= 3000 && smallest_refused == 0; size += 8) {
      CAPTURE(functions);
      CAPTURE(size);
      Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, maps(functions, size), {});
      if (!file) {
        CHECK(file.error() == Error::InvalidName);
        smallest_refused = size;
        continue;
      }
      auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(file).value());
      wdedup::BufferSource src(bytes->data(), bytes->size());
      wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
      CHECK_MESSAGE(map.ok(), map.failure().what);
      largest_written = size;
    }
    CAPTURE(functions);
    CHECK(largest_written != 0);
    if (functions > 1) CHECK(smallest_refused == largest_written + 8);
  }
  // The message: the sums, and the longest name.
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, maps(32, 3000), {});
  REQUIRE(!file.ok());
  // Names: 32 functions x (3 + 20 rows). Read: each function's "mN" (2 or
  // 3 bytes), "blob" and "fN", and 20 rows of 3002 bytes, each but the
  // first compared with the one before over 3002 + 1 bytes. Pool: the 20
  // tensor names, "blob" and 64 short names, each with its NUL.
  const std::uint64_t read = (10 * 2 + 22 * 3) * 2 + 32 * 4 + 32 * (20 * 3002 + 19 * 3003);
  const std::uint64_t pool = 20 * 3003 + 5 + (10 * 3 + 22 * 4) * 2;
  const std::uint64_t names = 32 * 23;
  CHECK(file.error() == Error::InvalidName);
  CHECK(file.message() == "the function maps' names are too long for a reader to check: it would read " +
                              std::to_string(read) + " bytes of them, over its budget of " +
                              std::to_string(2 * (pool + 1024 * names)) + " (twice the " + std::to_string(pool) +
                              "-byte strings pool plus 1024 bytes for each of 736 names), and refuse the file; the "
                              "longest is the tensor name '" + std::string(40, 'n') +
                              "'... (3002 bytes) of method 'm0' partition 0; shorten the names");
  // A long blob key shared by every function counts once a function: named.
  FunctionMaps shared_key;
  const std::string blob(10000, 'b');
  for (std::uint32_t f = 0; f < 100; ++f)
    shared_key.functions.push_back(FunctionMap{"m" + std::to_string(f), 0, blob, "f" + std::to_string(f), {{"t", "w.a"}}});
  file = serialize_ptd(s, shared_key, {});
  CHECK(file.error() == Error::InvalidName);
  const std::string tail = "; the longest is the blob key '" + std::string(40, 'b') +
                           "'... (10000 bytes) of method 'm0' partition 0; shorten the names";
  REQUIRE(file.message().size() > tail.size());
  CHECK(file.message().substr(file.message().size() - tail.size()) == tail);
  CHECK(file.message().size() < 400);
  // A method name of exactly 40 bytes is shown whole, with no "...".
  FunctionMaps long_method = maps(32, 3000);
  long_method.functions[0].method = std::string(40, 'm');
  file = serialize_ptd(s, long_method, {});
  CHECK(file.error() == Error::InvalidName);
  const std::string method_tail = "; the longest is the tensor name '" + std::string(40, 'n') + "'... (3002 bytes) of method '" +
                                  std::string(40, 'm') + "' partition 0; shorten the names";
  REQUIRE(file.message().size() > method_tail.size());
  CHECK(file.message().substr(file.message().size() - method_tail.size()) == method_tail);
  // write_ptd_file: refused before the destination is touched.
  const std::string dest = tmp_path("long_shared_names.ptd");
  const std::vector<std::uint8_t> old = occupy(dest);
  Expected<WriteStats> w = write_ptd_file(s, maps(32, 3000), dest);
  CHECK(w.error() == Error::InvalidName);
  CHECK(read_file(dest) == old);
  CHECK(temporaries_of(dest).empty());
}

TEST_CASE("function maps whose names a reader reads exactly up to its budget are written, and open") {
  // The reader refuses maps only past its budget (bytes > budget): maps
  // that spend it to the byte are a file it opens, so the writer takes
  // them. Three functions, one blob key shared by all three (each byte of
  // it is read three times and held once in the pool: one byte of it is one
  // byte more read than budget), and twenty tensor names of 1,835 bytes in
  // each function. With L = 1833 and a blob key of B bytes:
  //   read   = 3 x (2 + B + 2) + 3 x (20 x 1835 + 19 x 1836) = 303 + 3B + 117L
  //   pool   = 20 x 1836 + (B + 1) + 6 x 3                   = 79 + B + 20L
  //   budget = 2 x (pool + 1024 x 3 x 23)                      = 141470 + 2B + 40L
  // so B = 26 reads exactly the budget, 214,842 bytes, and B = 27 one past it.
  const NamedDataStore s = small_store();
  const auto maps = [](std::size_t blob_size) {
    FunctionMaps m;
    for (std::uint32_t f = 0; f < 3; ++f) {
      FunctionMap fm{"m" + std::to_string(f), 0, std::string(blob_size, 'b'), "f" + std::to_string(f), {}};
      for (std::uint32_t t = 0; t < 20; ++t) fm.tensors.push_back({std::string(1833, 'n') + std::to_string(t + 10), "w.a"});
      m.functions.push_back(std::move(fm));
    }
    return m;
  };
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, maps(26), {});
  REQUIRE_MESSAGE(file.ok(), file.message());
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(file).value());
  wdedup::BufferSource src(bytes->data(), bytes->size());
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
  REQUIRE_MESSAGE(map.ok(), map.failure().what);
  CHECK(map->function_count() == 3);
  // One byte more: refused, with the sums.
  file = serialize_ptd(s, maps(27), {});
  CHECK(file.error() == Error::InvalidName);
  CHECK(file.message() == "the function maps' names are too long for a reader to check: it would read 214845 "
                             "bytes of them, over its budget of 214844 (twice the 36766-byte strings pool plus 1024 "
                             "bytes for each of 69 names), and refuse the file; the longest is the tensor name '" +
                                 std::string(40, 'n') + "'... (1835 bytes) of method 'm0' partition 0; shorten the names");
}

TEST_CASE("a function's rows are sorted bytewise: a name before the longer names it begins, bytes as unsigned") {
  // The reader finds a function's tensor by binary search over its rows, so
  // the writer sorts them as the reader compares: "w" before "w.b" before
  // "w.bias" (a prefix first), and "w\xc3\xbf" ('w' then U+00FF) after all
  // of them (0xC3 above '.', not below it as a signed char would be). Given
  // in reverse, they come out in that order, each found by name.
  const NamedDataStore s = small_store();
  FunctionMaps maps;
  maps.functions.push_back(FunctionMap{
      "m", 0, "blob", "f", {{"w\xc3\xbf", "w.e"}, {"w.bias", "w.d"}, {"w.b", "w.c"}, {"w", "w.b"}, {"v", "w.a"}}});
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, maps, {});
  REQUIRE_MESSAGE(file.ok(), file.message());
  const std::vector<std::uint8_t> bytes = std::move(file).value();
  wdedup::BufferSource src(bytes.data(), bytes.size());
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
  REQUIRE_MESSAGE(map.ok(), map.failure().what);
  wdedup::Result<wdedup::FunctionView> f = map->find_function("m", 0);
  REQUIRE(f.ok());
  REQUIRE(f->tensor_count() == 5);
  const char* names[] = {"v", "w", "w.b", "w.bias", "w\xc3\xbf"};
  const char* keys[] = {"w.a", "w.b", "w.c", "w.d", "w.e"};
  for (std::size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    wdedup::Result<wdedup::FunctionTensorView> row = f->tensor(i);
    REQUIRE(row.ok());
    CHECK(row->tensor_name == names[i]);
    CHECK(row->key == keys[i]);
    wdedup::Result<std::string_view> key = f->key_of(names[i]);
    REQUIRE(key.ok());
    CHECK(*key == keys[i]);
  }
}

namespace {

// The seeds the writer tries for a store asked to be written under seed 0:
// 0, then each derived from the one before it (next_index_seed).
std::vector<std::uint64_t> index_seeds_from_zero() {
  std::vector<std::uint64_t> seeds{0};
  for (int attempt = 1; attempt < wdedup::detail::kIndexSeedAttempts; ++attempt)
    seeds.push_back(wdedup::detail::next_index_seed(seeds.back(), attempt));
  return seeds;
}

// A store of 512 keys "k<15 hex digits>" of 64 bytes each (512 keys: a
// table of 1,024 slots) whose hash under each of `seeds` puts them in the
// table's first `window` slots: one run of slots to place them in, past the
// 66,560 probes a reader allows for 512 keys homed in the first 192 or fewer.
NamedDataStore keys_homed_low(const std::vector<std::uint64_t>& seeds, std::uint64_t window) {
  static const std::vector<std::uint8_t> bytes(64, 7);  // a store borrows the bytes it is given
  NamedDataStore s;
  char buf[17];
  for (std::uint64_t c = 0; s.keys().size() < 512; ++c) {
    std::snprintf(buf, sizeof buf, "k%015llx", static_cast<unsigned long long>(c));
    bool low = true;
    for (std::uint64_t seed : seeds) low = low && (wdedup::detail::key_hash(buf, 16, seed) & 1023) < window;
    if (low) REQUIRE(s.add_named_data(buf, ByteSpan(bytes.data(), bytes.size()), 16).ok());
  }
  return s;
}

// Where fill_slots stops placing the store's keys in a table of 1,024
// slots: the key it gave up at, or -1 if it placed them all.
std::int64_t fill_1024(const NamedDataStore& s, std::uint64_t seed) {
  std::vector<std::uint8_t> table(1024 * 8);
  const auto key_at = [&](std::uint32_t i) { return wdedup::KeyView(s.keys()[i].key); };
  const wdedup::detail::SlotFill r = wdedup::detail::fill_slots(512, key_at, seed, table.data(), 1024);
  if (r.result == wdedup::detail::SlotFill::kDone) return -1;
  REQUIRE(r.result == wdedup::detail::SlotFill::kTooManyProbes);
  return r.at;
}

// The file opens with its index, and every key reads its 64 bytes.
void check_opens_indexed(const std::vector<std::uint8_t>& f, const NamedDataStore& s) {
  wdedup::BufferSource src(f.data(), f.size());
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
  REQUIRE_MESSAGE(map.ok(), map.failure().what);
  CHECK(map->has_index());
  for (const StoreKey& k : s.keys()) {
    wdedup::Result<wdedup::DataBuffer> d = map->get_data(k.key);
    REQUIRE(d.ok());
    CHECK(d->size() == 64);
  }
}

}  // namespace

TEST_CASE("keys chosen to collide under the seed: the writer places them under a derived seed, and the file opens") {
  // 512 keys whose hash under seed 0 has its low 10 bits zero: one home
  // slot in a table of 1,024, 131,328 probes to look them all up, past the
  // 66,560 a reader allows. Written under seed 0, a reader refused the
  // file ("slot table probe sequences are too long").
  const std::vector<std::uint64_t> seeds = index_seeds_from_zero();
  const NamedDataStore s = keys_homed_low({0}, 1);
  CHECK(fill_1024(s, 0) == 364);
  const std::uint64_t derived = seeds[1];
  CHECK(derived == wdedup::detail::key_hash("\0\0\0\0\0\0\0\0", 8, 1));
  CHECK(fill_1024(s, derived) == -1);

  Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, FunctionMaps{}, {});
  REQUIRE(file.ok());
  const std::vector<std::uint8_t>& f = *file;
  CHECK(u64(f, ext_at(f) + eh::kHashSeed) == derived);
  CHECK(u32(f, ext_at(f) + eh::kSlotCount) == 1024);
  check_opens_indexed(f, s);
  // A seed asked for that the keys do not collide under is kept.
  WriteOptions o;
  o.hash_seed = derived;
  Expected<std::vector<std::uint8_t>> again = serialize_ptd(s, FunctionMaps{}, o);
  REQUIRE(again.ok());
  CHECK(*again == f);
}

TEST_CASE("keys chosen to collide under the seed and the next derived one: the third seed is derived from the second") {
  // Keys homed in the first 128 of 1,024 slots under seeds 0 and 1: each
  // seed is refused at key 426 or 432, and the writer takes seed 2, derived
  // from seed 1 (not from the seed asked for: next_index_seed(0, 2) is
  // another seed, 0x3f3dd0c3d8a86d23 here, under which they fit too).
  const std::vector<std::uint64_t> seeds = index_seeds_from_zero();
  REQUIRE(seeds.size() == 4);
  CHECK(seeds[1] == 0x860e859a4cd07552);
  CHECK(seeds[2] == 0x73b21415aec43b99);
  CHECK(wdedup::detail::next_index_seed(0, 2) == 0x43cbaf8adb046737);
  const NamedDataStore s = keys_homed_low({seeds[0], seeds[1]}, 128);
  CHECK(fill_1024(s, seeds[0]) == 426);
  CHECK(fill_1024(s, seeds[1]) == 432);
  CHECK(fill_1024(s, seeds[2]) == -1);
  CHECK(fill_1024(s, 0x43cbaf8adb046737) == -1);

  Expected<std::vector<std::uint8_t>> file = serialize_ptd(s, FunctionMaps{}, {});
  REQUIRE(file.ok());
  CHECK(u64(*file, ext_at(*file) + eh::kHashSeed) == seeds[2]);
  check_opens_indexed(*file, s);
}

TEST_CASE("keys that collide under the seed and all three derived from it are refused, and nothing is written") {
  // Keys homed in the first 192 of 1,024 slots under all four seeds: each
  // is refused at key 466 to 474.
  const std::vector<std::uint64_t> seeds = index_seeds_from_zero();
  REQUIRE(seeds.size() == 4);
  CHECK(seeds[3] == 0x6cd0c7a51687e916);
  const NamedDataStore s = keys_homed_low(seeds, 192);
  CHECK(fill_1024(s, seeds[0]) == 470);
  CHECK(fill_1024(s, seeds[1]) == 466);
  CHECK(fill_1024(s, seeds[2]) == 474);
  CHECK(fill_1024(s, seeds[3]) == 470);

  const std::string message =
      "the store's 512 keys collide in the key index under hash seed 0 and the 3 seeds derived from it, past the "
      "66560 probes a reader allows (keys chosen to collide?); write with another WriteOptions::hash_seed";
  const std::string dest = tmp_path("colliding_keys.ptd");
  check_refused(s, nullptr, {}, dest, occupy(dest), Error::InvalidArgument, message);

  // As the message says: another seed asked for places them.
  WriteOptions o;
  o.hash_seed = 1;
  Expected<std::vector<std::uint8_t>> other = serialize_ptd(s, FunctionMaps{}, o);
  REQUIRE(other.ok());
  CHECK(u64(*other, ext_at(*other) + eh::kHashSeed) == 1);
  check_opens_indexed(*other, s);
}

TEST_CASE("a failing sink stops the writer and its error is passed on") {
  class FailingSink final : public ByteSink {
   public:
    explicit FailingSink(Error code) : code_(code) {}
    std::size_t calls = 0;
    Expected<void> write(const void*, std::size_t) override {
      if (++calls == 3) return Expected<void>(code_, "disk on fire");
      return {};
    }

   private:
    Error code_;
  } sink(Error::IoError);
  Expected<WriteStats> r = write_ptd(small_store(), sink);
  CHECK(r.error() == Error::IoError);
  // Calls: metadata [0, 1024), zeros up to the 4096-aligned base, segment 0.
  CHECK(r.message() == "writing .ptd bytes [4096, 4101) to the sink failed: disk on fire");
  CHECK(sink.calls == 3);
  // The sink's own code, whatever it is, not IoError in its place.
  FailingSink full(Error::OutOfMemory);
  r = write_ptd(small_store(), full);
  CHECK(r.error() == Error::OutOfMemory);
  CHECK(r.message() == "writing .ptd bytes [4096, 4101) to the sink failed: disk on fire");
  CHECK(full.calls == 3);
}

TEST_CASE("a sink gets padding in pieces of at most 64 KiB of zeros, segment data in 512 KiB pieces, no empty piece") {
  // Segment 0: 512 KiB + 1 byte, two pieces. Segment 1: empty, no piece of
  // its own, only the padding up to it. Segment 2 asks 256 KiB: the zeros
  // before it are more than one 64 KiB block.
  const auto a = pattern(512 * 1024 + 1, 31), b = pattern(1000, 32);
  NamedDataStore s;
  add(s, "a", ByteSpan(a.data(), a.size()), 1);
  add(s, "e", ByteSpan(a.data(), 0), 1);
  add(s, "b", ByteSpan(b.data(), b.size()), 256 * 1024);
  RecordingSink sink;
  Expected<WriteStats> st = write_ptd(s, sink, no_ext());
  REQUIRE(st.ok());
  // The flatbuffer ends at 256, a multiple of 128: the base, no padding
  // before segment 0. Segment 0 ends at 256 + 524289 = 524545; segment 1
  // at the next multiple of 128, 524672 (127 zeros); segment 2 at 786432
  // = 3 * 256 KiB, after 261760 = 3 * 65536 + 65152 zeros.
  const Header h = header(sink.bytes);
  CHECK(h.fb_size == 208);
  CHECK(h.base == 256);
  const Walk w{sink.bytes};
  CHECK(w.segment_offset(1) == 524672 - 256);
  CHECK(w.segment_offset(2) == 786432 - 256);
  CHECK(sizes_text(sink.calls) == "256 524288 1 127 65536 65536 65536 65152 1000");
  REQUIRE(sink.bytes.size() == 787432);
  CHECK(st->file_size == 787432);
  CHECK(std::memcmp(sink.bytes.data() + 256, a.data(), a.size()) == 0);
  CHECK(all_zero(sink.bytes, 524545, 786432));
  CHECK(std::memcmp(sink.bytes.data() + 786432, b.data(), b.size()) == 0);

  // A file without segments ends in padding too, up to its base: 88 bytes
  // of metadata (an empty store's), then 65536 + 1 zeros up to a base of
  // 65625, or 65536 + 65448 up to 128 KiB.
  const struct {
    std::uint64_t base;
    const char* calls;
  } ends[] = {{65625, "88 65536 1"}, {128 * 1024, "88 65536 65448"}};
  for (const auto& end : ends) {
    CAPTURE(end.base);
    RecordingSink empty_sink;
    REQUIRE(write_ptd(NamedDataStore(), empty_sink, no_ext(end.base)).ok());
    CHECK(sizes_text(empty_sink.calls) == std::string(end.calls));
    REQUIRE(empty_sink.bytes.size() == end.base);
    CHECK(all_zero(empty_sink.bytes, 88, end.base));
  }
}

TEST_CASE("write_ptd_file gathers pieces into writev calls of 512 KiB or 256 pieces") {
  // Segment 0: 1 MiB, two pieces of 512 KiB; then 200 one-byte segments,
  // each after 127 zeros but the first (at 1 MiB past a 128-aligned base).
  class CountingOps final : public detail::FileOps {
   public:
    std::vector<std::size_t> pieces, bytes;
    ssize_t writev(int fd, const struct iovec* iov, int count) override {
      pieces.push_back(static_cast<std::size_t>(count));
      std::size_t n = 0;
      for (int i = 0; i < count; ++i) n += iov[i].iov_len;
      bytes.push_back(n);
      return FileOps::writev(fd, iov, count);
    }
  };
  const auto big = pattern(1024 * 1024, 41);
  std::vector<std::uint8_t> ones(200);
  for (std::size_t i = 0; i < ones.size(); ++i) ones[i] = static_cast<std::uint8_t>(i);
  NamedDataStore s;
  add(s, "big", ByteSpan(big.data(), big.size()), 1);
  for (std::size_t i = 0; i < ones.size(); ++i) add(s, "one." + std::to_string(i), ByteSpan(&ones[i], 1), 1);
  const std::string path = tmp_path("batches.ptd");
  CountingOps ops;
  Expected<WriteStats> st = detail::write_ptd_file_with(s, FunctionMaps{}, path, no_ext(), ops);
  REQUIRE_MESSAGE(st.ok(), st.message());
  // Metadata (11352 bytes), 40 zeros up to the base (11392) and the first
  // 512 KiB: one batch, over 512 KiB. The second 512 KiB: exactly 512 KiB.
  // Then 399 pieces of 1 and 127 bytes: 256 (16384 bytes), and the last 143
  // (9089 bytes) when the file ends.
  CHECK(st->metadata_size == 11352);
  CHECK(st->segment_base_offset == 11392);
  CHECK(st->file_size == 11392 + 1024 * 1024 + 1 + 199 * 128);
  CHECK(sizes_text(ops.pieces) == "3 1 256 143");
  CHECK(sizes_text(ops.bytes) == "535680 524288 16384 9089");
  CHECK(read_file(path) == serialize(s, no_ext()));
  ::unlink(path.c_str());
}

TEST_CASE("round trip through NamedDataMap: bytes, layouts, alignment, segments, function maps") {
  const auto big = pattern(200000, 21), w = pattern(4096, 22);
  NamedDataStore s = small_store();
  add(s, "big", ByteSpan(big.data(), big.size()), 4096, Layout::contiguous(ScalarType::Float, {50000}));
  add(s, "w.page", ByteSpan(w.data(), w.size()), 64);
  add(s, "w.page.alias", ByteSpan(w.data(), w.size()), 4096);
  const FunctionMaps maps = small_maps();

  for (bool ext : {true, false}) {
    for (std::uint64_t sa : {128ull, 1ull, 3ull}) {
      CAPTURE(ext);
      CAPTURE(sa);
      WriteOptions o;
      o.wdedup_extensions = ext;
      o.segment_alignment = sa;
      const std::string path = tmp_path("roundtrip.ptd");
      Expected<WriteStats> st = write_ptd_file(s, ext ? maps : FunctionMaps{}, path, o);
      REQUIRE_MESSAGE(st.ok(), st.message());
      Result<MmapSource> src = MmapSource::open(path.c_str());
      REQUIRE(src.ok());
      Result<NamedDataMap> opened = NamedDataMap::open(*src);
      REQUIRE_MESSAGE(opened.ok(), opened.failure().what);
      const NamedDataMap& m = *opened;
      CHECK(m.has_extension() == ext);
      const std::size_t num_keys = REQUIRE_VALUE(m.get_num_keys());
      REQUIRE(num_keys == s.key_count());
      REQUIRE(m.segment_count() == s.buffer_count());
      for (std::size_t i = 0; i < s.key_count(); ++i) {
        const StoreKey& k = s.keys()[i];
        CAPTURE(k.key);
        const KeyView key = REQUIRE_VALUE(m.get_key(i));
        CHECK(key == k.key);
        Result<DataBuffer> d = m.get_data(k.key);
        REQUIRE(d.ok());
        const ByteSpan want = s.buffers()[k.buffer_index].bytes;
        REQUIRE(d->size() == want.size());
        CHECK((want.size() == 0 || std::memcmp(d->data(), want.data(), want.size()) == 0));
        // mmap is page-aligned, so the pointer honours the request's
        // power-of-two part (up to the page size); the file offset honours
        // all of it (a pointer can be a multiple of 3 only by chance).
        const std::uint64_t pow2 = k.alignment & (~k.alignment + 1);
        CHECK(reinterpret_cast<std::uintptr_t>(d->data()) % (pow2 < 4096 ? pow2 : 4096) == 0);
        Result<KeyInfo> info = m.find(k.key);
        REQUIRE(info.ok());
        CHECK(info->segment_index == k.buffer_index);
        CHECK(info->offset % k.alignment == 0);
        if (ext) CHECK(info->alignment == k.alignment);
        Result<TensorLayout> l = m.get_tensor_layout(k.key);
        CHECK(l.ok() == k.layout.has_value());
        if (l.ok()) {
          REQUIRE(k.layout.has_value());
          CHECK(l->scalar_type == k.layout->scalar_type);
          CHECK(std::vector<std::int32_t>(l->sizes.begin(), l->sizes.end()) == k.layout->sizes);
          CHECK(std::vector<std::uint8_t>(l->dim_order.begin(), l->dim_order.end()) == k.layout->dim_order);
        }
      }
      for (std::uint32_t i = 0; i < m.segment_count(); ++i) {
        Result<SegmentInfo> seg = m.segment(i);
        REQUIRE(seg.ok());
        CHECK(seg->offset % sa == 0);
        CHECK(seg->has_content_hash == ext);
        if (ext) {
          const ByteSpan b = s.buffers()[i].bytes;
          CHECK(seg->content_hash == XXH3_64bits(b.data(), b.size()));
          CHECK(seg->offset % seg->alignment == 0);
        }
      }
      if (ext) {
        REQUIRE(m.function_count() == maps.functions.size());
        for (const FunctionMap& fm : maps.functions) {
          Result<FunctionView> fv = m.find_function(fm.method, fm.partition_index);
          REQUIRE(fv.ok());
          CHECK(fv->blob_key() == fm.blob_key);
          CHECK(fv->function_name() == fm.function_name);
          REQUIRE(fv->tensor_count() == fm.tensors.size());
          for (const FunctionTensor& t : fm.tensors) {
            Result<std::string_view> key = fv->key_of(t.tensor_name);
            REQUIRE(key.ok());
            CHECK(*key == t.key);
          }
        }
      }
      ::unlink(path.c_str());
    }
  }
}

TEST_CASE("a 4 GiB alignment is planned without holding 4 GiB of padding in memory") {
  NamedDataStore s;
  add(s, "huge.align", ByteSpan(kA, 5), static_cast<std::int64_t>(kMaxAlignment));
  add(s, "next", ByteSpan(kC, 6), 1);
  Expected<detail::PtdPlan> p = detail::plan_ptd(s, FunctionMaps{}, WriteOptions{});
  REQUIRE(p.ok());
  CHECK(p->segment_base_offset == kMaxAlignment);
  CHECK(p->segment_offsets[0] == kMaxAlignment);
  CHECK(p->segment_offsets[1] == kMaxAlignment + 128);
  CHECK(p->file_size == kMaxAlignment + 128 + 6);
  CHECK(p->metadata.size() < 4096);  // the zeros up to the base are not in memory
  CHECK(p->metadata.size() == p->extension_offset + p->extension_size);
}

TEST_CASE("format::align_up: a result of exactly UINT64_MAX is no overflow") {
  // 2^64 - 1 is a multiple of 3: UINT64_MAX - 1 aligns up to it.
  std::uint64_t out = 0;
  CHECK(format::align_up(UINT64_MAX - 1, 3, &out));
  CHECK(out == UINT64_MAX);
  CHECK_FALSE(format::align_up(UINT64_MAX - 1, 4, &out));
}

TEST_CASE("FlatbufferBuilder: started at 0, 1 or 100 bytes it grows, and builds the flatbuffer the writer wrote") {
  // The writer starts its builder at an upper bound of the flatbuffer's
  // size (flat_tensor_size_bound), so the builder never grows there. Its
  // growth (the buffer doubled, the bytes so far moved to its end) runs
  // only if that bound falls short, and must then change no byte. A
  // capacity of 0 is taken as 1: doubling 0 would never end.
  const NamedDataStore s = small_store();
  const std::vector<std::uint8_t> f = serialize(s, no_ext());
  const Header h = header(f);
  REQUIRE(h.fb_size == 464);
  // The flatbuffer as the builder left it: ExecuTorch's header insertion
  // undone (bytes 0..8 with the root offset 48 less, then 56..48 + size).
  std::vector<std::uint8_t> built(f.begin(), f.begin() + 8);
  built.insert(built.end(), f.begin() + 56, f.begin() + static_cast<std::ptrdiff_t>(48 + h.fb_size));
  format::store_u32(built.data(), u32(f, 0) - 48);
  // Segment 0 sits at the base, its offset omitted (one base segment); the
  // others' relative offsets as the golden test above has them.
  const std::vector<std::uint64_t> rel = {0, 128, 256, 384};
  for (const std::size_t capacity : {std::size_t{0}, std::size_t{1}, std::size_t{100}}) {
    CAPTURE(capacity);
    detail::FlatbufferBuilder fb(capacity);
    detail::FlatTensorRefs refs;
    detail::build_flat_tensor(s, rel, 1, fb, refs);
    CHECK_FALSE(fb.overflowed());
    CHECK(fb.min_alignment() == 8);  // the segments' 8-byte sizes and offsets
    REQUIRE(fb.size() == 464);
    CHECK(hex(std::vector<std::uint8_t>(fb.data(), fb.data() + fb.size()), 0, 464) == hex(built, 0, 464));
  }
}

TEST_CASE("FlatbufferBuilder: a vector of 8-byte scalars is 8-aligned from the end even when empty, as flatbuffers' StartVector aligns it") {
  // The writer's vectors hold 1- and 4-byte elements (dim_order, sizes,
  // offsets), which the count's 4-alignment aligns too. The builder's rule
  // is flatbuffers' own (FlatBufferBuilder::StartVector: PreAlign<uoffset_t>
  // (len * elemsize), then PreAlign(len * elemsize, elemsize)): the
  // elements' alignment is padded for before the count even when there are
  // no elements, and counts in the finished buffer's alignment.
  const std::uint64_t two[2] = {0x0102030405060708u, 0x1112131415161718u};
  {
    detail::FlatbufferBuilder fb;
    fb.push_scalar(std::uint32_t{0x11223344});
    CHECK(fb.create_scalar_vector(two, 0) == 12);
    CHECK(fb.min_alignment() == 8);
    REQUIRE(fb.size() == 12);
    // count 0, 4 bytes of padding, the scalar pushed first
    CHECK(hex(std::vector<std::uint8_t>(fb.data(), fb.data() + fb.size()), 0, 12) == "000000000000000044332211");
  }
  {
    detail::FlatbufferBuilder fb;
    fb.push_scalar(std::uint32_t{0x11223344});
    CHECK(fb.create_scalar_vector(two, 2) == 28);
    CHECK(fb.min_alignment() == 8);
    REQUIRE(fb.size() == 28);
    // count 2, the elements in order, 4 bytes of padding, the scalar
    CHECK(hex(std::vector<std::uint8_t>(fb.data(), fb.data() + fb.size()), 0, 28) ==
          "02000000" "0807060504030201" "1817161514131211" "00000000" "44332211");
  }
}

TEST_CASE("FlatbufferBuilder: started at 1 byte, each growth moves every byte so far, the first pushed too") {
  // The case above grows a builder over small_store's flatbuffer only,
  // whose first byte pushed (the one a growth moves last, at the buffer's
  // end) is the top byte of segment 0's 8-byte size: 0, which a growth
  // that left it behind in the fresh zeroed buffer kept. Here every byte
  // pushed is non-zero: 1 -> 4 bytes (nothing to move), 4 -> 8, 8 -> 16.
  detail::FlatbufferBuilder fb(1);
  CHECK(fb.push_scalar(std::uint32_t{0x11223344}) == 4);
  CHECK(fb.push_scalar(std::uint32_t{0x55667788}) == 8);
  CHECK(fb.push_scalar(std::uint64_t{0x99AABBCCDDEEFF01u}) == 16);
  CHECK(fb.min_alignment() == 8);
  REQUIRE(fb.size() == 16);
  CHECK(hex(std::vector<std::uint8_t>(fb.data(), fb.data() + fb.size()), 0, 16) ==
        "01ffeeddccbbaa99" "88776655" "44332211");
}
