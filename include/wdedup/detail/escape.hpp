// wdedup/detail/escape.hpp — names made safe to print: the one escaping that
// error messages (quote_name), the report's table and the demo's output
// share. Build-time half. (For terminals that decode UTF-8: one in an 8-bit
// mode reads the byte 0x9B inside a valid character, U+201B's E2 80 9B, as
// a CSI.)
//
// Why one: names come from files someone else wrote (a .ptd's keys, a
// method's name), and messages and tables go to terminals, where an escape
// sequence or a right-to-left override in a name would rewrite what the
// user reads. Two escapers had drifted apart: the messages' let C1
// controls, bidirectional marks and invalid UTF-8 through.
#ifndef WDEDUP_DETAIL_ESCAPE_HPP
#define WDEDUP_DETAIL_ESCAPE_HPP

#include <cstddef>
#include <string>
#include <string_view>

#include "wdedup/detail/utf8.hpp"

namespace wdedup {
namespace detail {

/// Appends `v` to `out` for a terminal. Valid UTF-8 is copied but for the
/// characters that control a terminal or reorder text: C0 controls, DEL, C1
/// controls (U+0080..U+009F), the bidirectional marks, embeddings,
/// overrides and isolates (Unicode's Bidi_Control, U+061C included), and
/// the line and paragraph separators U+2028/9.
/// Those are written as \xNN per byte, as is every byte that is not part of
/// valid UTF-8; newline and tab as \n and \t; a backslash as \\ (so "\x1b"
/// can only be the escape byte). A NUL is \x00, so a message printed with
/// c_str() is never cut short. With `quote` set (quote_name), an apostrophe
/// is written \' too, so a quoted name ends only at its closing quote (the
/// key it's is 'it\'s', not 'it's').
inline void append_escaped(std::string& out, std::string_view v, bool quote = false) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size();) {
    const unsigned char c = p[i];
    std::size_t len = c < 0x80 ? 1 : utf8_sequence(p + i, v.size() - i);
    // (U+0080..U+009F are C2 80..C2 9F. Unicode's Bidi_Control set is
    // U+061C, the Arabic letter mark, D8 9C; U+200E/F and U+202A..E, the
    // marks and the embeddings and overrides, E2 80 8E/8F and AA..AE; and
    // the isolates U+2066..9, E2 81 A6..A9. U+2028/9 are E2 80 A8/A9.)
    const bool reorders =
        (len == 2 && c == 0xD8 && p[i + 1] == 0x9C) ||
        (len == 3 && c == 0xE2 &&
         ((p[i + 1] == 0x80 && (p[i + 2] == 0x8E || p[i + 2] == 0x8F || (p[i + 2] >= 0xA8 && p[i + 2] <= 0xAE))) ||
          (p[i + 1] == 0x81 && p[i + 2] >= 0xA6 && p[i + 2] <= 0xA9)));
    const bool escape = len == 0 || c < 0x20 || c == 0x7F || (c == 0xC2 && p[i + 1] < 0xA0) || reorders;
    if (len == 0) len = 1;
    if (c == '\\') {
      out += "\\\\";
    } else if (quote && c == '\'') {
      out += "\\'";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (escape) {
      for (std::size_t k = 0; k < len; ++k) {
        out += "\\x";
        out += kHex[p[i + k] >> 4];
        out += kHex[p[i + k] & 15];
      }
    } else {
      out.append(v.data() + i, len);
    }
    i += len;
  }
}

/// Quotes a name for a message: 'name', escaped as append_escaped says,
/// an apostrophe in it as \'.
inline std::string quote_name(std::string_view v) {
  std::string s;
  s.reserve(v.size() + 2);
  s += '\'';
  append_escaped(s, v, true);
  s += '\'';
  return s;
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_ESCAPE_HPP
