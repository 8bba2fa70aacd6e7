// tests/support/overlapping_keys.hpp — a .ptd file whose key strings
// overlap, made by hand (no writer makes one), for the tests of what the
// reader and the import do with it (tests/malformed.cpp, tests/import.cpp).
#ifndef WDEDUP_TESTS_SUPPORT_OVERLAPPING_KEYS_HPP
#define WDEDUP_TESTS_SUPPORT_OVERLAPPING_KEYS_HPP

#include <cstdint>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "wdedup/runtime.hpp"

namespace wdedup_test {

/// A file of `n` keys whose strings overlap (made by hand: no writer makes
/// one). Key i's string starts 4 bytes after key i - 1's and all end at one
/// NUL, so the keys are distinct suffixes of one pool of about 4n bytes
/// (key i is 4 (n - i) bytes long) and add up to about 2n^2 bytes. One
/// empty segment, which every key names; with `wdx1`, a WDX1 block whose
/// entries and slots are right for those keys.
inline std::vector<std::uint8_t> overlapping_keys_file(std::uint32_t n, bool wdx1) {
  std::vector<std::uint8_t> b(48, 0);
  const auto at = [&](std::uint64_t p) { return &b[static_cast<std::size_t>(p)]; };
  namespace f = wdedup::format;
  const auto put16 = [&](std::uint64_t p, std::uint64_t v) { f::store_u16(at(p), static_cast<std::uint16_t>(v)); };
  const auto put32 = [&](std::uint64_t p, std::uint64_t v) { f::store_u32(at(p), static_cast<std::uint32_t>(v)); };
  const auto put64 = [&](std::uint64_t p, std::uint64_t v) { f::store_u64(at(p), v); };
  const auto take = [&](std::uint64_t bytes) {
    const std::uint64_t pos = b.size();
    b.resize(static_cast<std::size_t>(pos + bytes), 0);
    return pos;
  };
  namespace ftf = wdedup::format::flat_tensor_field;
  namespace ndf = wdedup::format::named_data_field;
  // vtables: FlatTensor (segments, named_data), DataSegment (no field: an
  // empty segment at 0), NamedData (key).
  const std::uint64_t vroot = take(12), vseg = take(4), vnamed = take(8);
  put16(vroot, 10);
  put16(vroot + 2, 12);
  put16(vroot + 4 + 2 * ftf::kSegments, 4);
  put16(vroot + 4 + 2 * ftf::kNamedData, 8);
  put16(vseg, 4);
  put16(vseg + 2, 4);
  put16(vnamed, 6);
  put16(vnamed + 2, 8);
  put16(vnamed + 4 + 2 * ndf::kKey, 4);
  const std::uint64_t root = take(12), segs = take(8), seg = take(4), named = take(4 + 4 * std::uint64_t{n}),
                      tables = take(8 * std::uint64_t{n}), pool = take(4 * std::uint64_t{n} + 5);
  put32(root, root - vroot);
  put32(root + 4, segs - (root + 4));
  put32(root + 8, named - (root + 8));
  put32(segs, 1);
  put32(segs + 4, seg - (segs + 4));
  put32(seg, seg - vseg);
  put32(named, n);
  const std::uint64_t end = pool + 4 * std::uint64_t{n} + 4;  // the NUL
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t t = tables + 8 * i, str = pool + 4 * i;
    put32(named + 4 + 4 * i, t - (named + 4 + 4 * i));
    put32(t, t - vnamed);
    put32(t + 4, str - (t + 4));
    put32(str, end - (str + 4));
  }
  std::memset(at(pool + 4 * std::uint64_t{n}), 'k', 4);
  const std::uint64_t fb_end = b.size();
  std::uint64_t base = fb_end;
  if (wdx1) {
    namespace eh = wdedup::format::ext_header;
    namespace ke = wdedup::format::key_entry;
    b.resize(static_cast<std::size_t>((fb_end + 15) / 16 * 16), 0);
    const std::uint64_t x = b.size();
    std::uint64_t slots = 1;
    while (slots < 2 * std::uint64_t{n}) slots *= 2;
    const std::uint64_t entries = eh::kSize, slot_at = entries + ke::kSize * n,
                        seginfo = slot_at + 8 * slots, block = seginfo + wdedup::format::segment_info::kSize;
    take(block);
    std::memcpy(at(x), wdedup::format::kExtMagic, 4);
    put32(x + eh::kVersion, wdedup::format::kExtVersion);
    put64(x + eh::kBlockSize, block);
    put32(x + eh::kKeyCount, n);
    put32(x + eh::kSlotCount, slots);
    put32(x + eh::kSegmentCount, 1);
    put32(x + eh::kEntriesOffset, entries);
    put32(x + eh::kSlotsOffset, slot_at);
    put32(x + eh::kSegmentInfoOffset, seginfo);
    base = b.size();
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t e = x + entries + ke::kSize * i, str = pool + 4 * i;
      put64(e + ke::kDataOffset, base);
      put64(e + ke::kAlignment, 1);
      put32(e + ke::kKeyOffset, str + 4);
      put32(e + ke::kKeySize, end - (str + 4));
    }
    put64(x + seginfo + wdedup::format::segment_info::kAlignment, 1);
    const auto key_at = [&](std::uint32_t i) {
      const std::uint64_t str = pool + 4 * std::uint64_t{i};
      return wdedup::KeyView(reinterpret_cast<const char*>(at(str + 4)), wdedup::format::load_u32(at(str)));
    };
    const bool filled =
        wdedup::detail::fill_slots(n, key_at, 0, at(x + slot_at), slots).result == wdedup::detail::SlotFill::kDone;
    REQUIRE(filled);
    static_cast<void>(filled);  // (make_seeds builds with doctest disabled)
  }
  put32(0, root);
  std::memcpy(at(wdedup::format::kFileIdentifierOffset), wdedup::format::kFileIdentifier, 4);
  std::memcpy(at(8), wdedup::format::kHeaderMagic, 4);
  put32(wdedup::format::kHeaderLengthPos, wdedup::format::kHeaderLength);
  put64(wdedup::format::kHeaderFlatbufferOffsetPos, 48);
  put64(wdedup::format::kHeaderFlatbufferSizePos, fb_end - 48);
  put64(wdedup::format::kHeaderSegmentBasePos, base);
  return b;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_OVERLAPPING_KEYS_HPP
