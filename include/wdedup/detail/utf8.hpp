// wdedup/detail/utf8.hpp — UTF-8 well-formedness (RFC 3629): what printing
// names (escape.hpp, the report's JSON) and the keys' check share.
// Build-time half.
//
// Why keys are checked: a key is a flatbuffer string, which the format
// defines as UTF-8. ExecuTorch's C++ reader compares key bytes and would
// read any, but its Python reader (FlatTensorSerializer.deserialize,
// load_ptd) decodes the flatbuffer with `flatc --json`, which stops at a
// string that is not UTF-8: a file holding one could not be inspected or
// rewritten there.
#ifndef WDEDUP_DETAIL_UTF8_HPP
#define WDEDUP_DETAIL_UTF8_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace wdedup {
namespace detail {

/// Bytes of the well-formed UTF-8 sequence at p[0..n) (RFC 3629), or 0.
inline std::size_t utf8_sequence(const unsigned char* p, std::size_t n) noexcept {
  const unsigned char c = p[0];
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;
    hi = c == 0xED ? 0x9F : 0xBF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;
    hi = c == 0xF4 ? 0x8F : 0xBF;
  }
  if (len == 0 || n < len || p[1] < lo || p[1] > hi) return 0;
  for (std::size_t i = 2; i < len; ++i)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return len;
}

/// The offset of the first byte of `s` that does not start a well-formed
/// UTF-8 sequence (no overlong forms, surrogates, or code points past
/// U+10FFFF), or npos if all of `s` is UTF-8. ASCII, what most names are,
/// goes 8 bytes at a time (deduplicate() checks every distinct name).
inline std::size_t first_non_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080u) == 0) {
        i += 8;
        continue;
      }
    }
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const std::size_t len = utf8_sequence(p + i, n - i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

/// Whether all of `s` is UTF-8 (as first_non_utf8) with no NUL byte: what a
/// key must be, in one pass where memchr and first_non_utf8 made two
/// (deduplicate() checks every distinct tensor name; the messages for a
/// name that fails come from check_entry, which tells the two apart). An
/// 8-byte word is all of 0x01..0x7F exactly when neither it nor it less
/// 0x01 in each byte has a high bit set: a 0x00 byte borrows to 0xFF, and
/// bytes below 0x80 that are not 0 borrow nothing. (Its loop is
/// first_non_utf8's with the NUL test added; one template for both,
/// returning an offset, took 250-280 us over the 50,000 names where this
/// takes 165-210, not being inlined.)
inline bool is_key_text(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (((w | (w - 0x0101010101010101u)) & 0x8080808080808080u) == 0) {
        i += 8;
        continue;
      }
    }
    if (p[i] == 0) return false;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const std::size_t len = utf8_sequence(p + i, n - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_UTF8_HPP
