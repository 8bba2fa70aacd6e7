// wdedup/report.hpp — what a deduplicate() call found and what it cost,
// printable as a table (for people) and as JSON (for scripts). Build-time half.
// The printers are templates on an unused `int` (call them as plain member
// functions): a TU that never prints a report does not compile them.
#ifndef WDEDUP_REPORT_HPP
#define WDEDUP_REPORT_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "wdedup/detail/escape.hpp"
#include "wdedup/detail/identity_stats.hpp"

namespace wdedup {

/// Per method. Stored bytes are attributed to the first method (in program
/// order) that uses them, so bytes_saved adds up to the overall figure.
struct MethodReport {
  std::string method;
  std::uint32_t partitions = 0;
  std::uint64_t tensors = 0;
  std::uint64_t bytes_in = 0;        ///< sum of this method's tensor sizes
  std::uint64_t bytes_distinct = 0;  ///< distinct contents this method uses
  std::uint64_t bytes_shared_with_other_methods = 0;  ///< distinct contents another method uses too
  std::uint64_t bytes_attributed = 0;  ///< stored bytes this method was first to use
  std::uint64_t bytes_saved = 0;       ///< bytes_in - bytes_attributed
};

/// Per blob: what a backend compiling this blob alone sees.
struct BlobReport {
  std::string blob_key;
  std::uint32_t functions = 0;
  std::uint64_t tensors = 0;
  std::uint64_t bytes_in = 0;              ///< sum of its functions' tensor sizes
  std::uint64_t bytes_distinct = 0;        ///< what the blob holds once deduplicated inside it
  std::uint64_t bytes_shared_inside = 0;   ///< bytes_in - bytes_distinct: shared by its functions
  /// Of bytes_distinct, the contents another blob also holds, each whole:
  /// a content in k blobs counts in each of their k rows, so the rows add
  /// up to more than Report::bytes_shared_across_blobs, which counts it
  /// k - 1 times.
  std::uint64_t bytes_shared_across = 0;
};

/// A set of tensors that share one stored buffer: equal bytes, in the same
/// memory (a tied weight) or not.
struct AliasGroup {
  std::string first_key;      ///< the first store key (program order) naming it
  std::uint32_t tensors = 0;  ///< tensor occurrences that use it
  std::uint32_t keys = 0;     ///< store keys that name it
  std::uint64_t size = 0;     ///< bytes of the buffer
  std::uint64_t bytes_saved = 0;  ///< size * (tensors - 1)
};

/// Counts from the identity pass: what was skipped by the cheap checks,
/// hashed and compared (see detail/identity_stats.hpp).
using IdentityReport = detail::IdentityStats;

struct Report {
  std::string strategy;
  /// DedupOptions::threads, or the cores counted for 0: the most threads the
  /// call could run on. A small program starts fewer (one per 4 MiB of work
  /// by default, DedupOptions::threads), which changes no figure but the
  /// timings.
  unsigned threads = 0;
  std::uint64_t methods = 0, functions = 0, blobs = 0, tensors = 0;
  std::uint64_t keys = 0, buffers = 0;
  /// Every tensor's size, each occurrence counted: a tied weight (one
  /// pointer under two tensors) counts twice, as a program serialized per
  /// method would hold it twice.
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_stored = 0;  ///< the distinct contents' sizes: the store's buffers
  std::uint64_t bytes_saved = 0;   ///< bytes_in - bytes_stored
  /// Distinct contents used by more than one blob, each counted
  /// (blobs using it - 1) times: what a backend that compiles one blob at a
  /// time (CoreML, QNN) still ships more than once.
  std::uint64_t bytes_shared_across_blobs = 0;
  std::uint64_t alias_groups = 0;  ///< non-empty buffers used by two or more tensors (AliasGroup)
  std::vector<AliasGroup> largest_alias_groups;  ///< up to 5, by bytes_saved
  std::vector<MethodReport> per_method;
  std::vector<BlobReport> per_blob;
  IdentityReport identity;
  double seconds_total = 0;     ///< wall time of deduplicate()
  /// Wall time of the name check and the identity pass together, up to the
  /// last comparison: the check queues small tensors with the first tensor
  /// of their name, and those pairs are compared while it runs (or right
  /// after it, one thread). With two or more threads, on programs of small
  /// tensors only, the rest of the work may run beside the last
  /// comparisons: this then overlaps it.
  double seconds_identity = 0;

  // Templates on an unused `int` (call them as plain functions): a TU
  // compiles the formatting only if it prints a report.
  template <int = 0>
  std::string to_table() const;
  /// One JSON object; valid UTF-8 whatever bytes the names hold (see
  /// detail::json_string).
  template <int = 0>
  std::string to_json() const;
};

namespace detail {

inline std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  // From 1023.995 of a unit (v is below 1024 here), two decimals round up
  // to "1024.00", whatever the locale's decimal point: that is 1.00 of the
  // next one (1048575 bytes read "1024.00 KiB" until a user trial).
  if (u > 0 && u < 4 && std::string_view(buf).substr(0, 4) == "1024") {
    v /= 1024.0;
    ++u;
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

/// printf into a std::string. A C variadic function rather than a
/// template, so that the format attribute lets -Wformat check every call's
/// arguments against its literal format.
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string format(const char* fmt, ...) {
  std::va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string s(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  std::vsnprintf(&s[0], s.size() + 1, fmt, again);
  va_end(again);
  return s;
}

/// For printf's %llu: std::uint64_t is unsigned long on LP64 hosts.
constexpr unsigned long long ull(std::uint64_t v) noexcept { return v; }

/// Seconds for JSON, with six decimals, whatever the process's locale:
/// printf's "%f" writes the locale's decimal point, and a host program that
/// set a comma-decimal locale would get "0,000229", which is no JSON.
/// Integers are printed the same in every locale. Not-a-number and
/// negative times (neither is measured) are 0.
inline std::string json_seconds(double v) {
  if (!(v > 0)) v = 0;
  if (v > 1e12) v = 1e12;  // (no time measured is that long; keeps the integer exact)
  const auto us = static_cast<unsigned long long>(v * 1e6 + 0.5);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llu.%06llu", us / 1000000ull, us % 1000000ull);
  return buf;
}

/// A JSON string. Names may hold any bytes but NUL, and JSON must be
/// UTF-8: valid UTF-8 is copied, and a byte that is not part of any is
/// written as the code point of the same value (0xFF as \u00ff), so the
/// document always parses; such a name reads back as Latin-1.
inline std::string json_string(std::string_view v) {
  std::string s = "\"";
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size();) {
    const unsigned char c = p[i];
    if (c >= 0x80) {
      if (const std::size_t len = utf8_sequence(p + i, v.size() - i); len != 0) {
        s.append(v.data() + i, len);
        i += len;
      } else {
        s += format("\\u%04x", static_cast<unsigned>(c));
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"': s += "\\\""; break;
      case '\\': s += "\\\\"; break;
      case '\n': s += "\\n"; break;
      case '\t': s += "\\t"; break;
      case '\r': s += "\\r"; break;
      default:
        if (c < 0x20) s += format("\\u%04x", static_cast<unsigned>(c));
        else s += static_cast<char>(c);
    }
    ++i;
  }
  return s + "\"";
}

/// A name for the table, which goes to a terminal: escaped as in messages
/// (detail/escape.hpp), without the quotes.
inline std::string table_name(std::string_view v) {
  std::string s;
  s.reserve(v.size());
  append_escaped(s, v);
  return s;
}

/// Blocks of code points that do not take one column on a terminal, as
/// wcwidth() gives them: 2 for the East Asian wide and fullwidth blocks
/// (Unicode's East_Asian_Width W and F: CJK, kana, Tangut, Hangul
/// syllables, fullwidth forms, the emoji blocks), 0 for the combining
/// blocks and the zero-width characters (U+200B-D, U+2060-4, U+FEFF, the
/// variation selectors, the tags). Sorted and disjoint. Blocks, not
/// Unicode's full tables: a script's own combining marks (Devanagari's
/// vowel signs, say) and the wide symbols scattered through the BMP count
/// as 1, so a name holding them moves its own row's figures. (glibc's
/// wcwidth is locale-bound, and the table must print the same in any
/// program: this agrees with it on all but 0.7% of the assigned code
/// points, where counting each as 1 disagreed on 42%.)
struct ColumnBlock {
  std::uint32_t first, last;
  std::uint8_t columns;
};
inline constexpr ColumnBlock kColumnBlocks[] = {
    {0x0300, 0x036F, 0},   {0x1100, 0x115F, 2},   {0x1160, 0x11FF, 0},   {0x1AB0, 0x1AFF, 0},
    {0x1DC0, 0x1DFF, 0},   {0x200B, 0x200D, 0},   {0x2060, 0x2064, 0},   {0x20D0, 0x20FF, 0},
    {0x2E80, 0x303E, 2},   {0x3041, 0x33FF, 2},   {0x3400, 0x4DFF, 2},   {0x4E00, 0x9FFF, 2},
    {0xA000, 0xA4CF, 2},   {0xA960, 0xA97F, 2},   {0xAC00, 0xD7A3, 2},   {0xF900, 0xFAFF, 2},
    {0xFE00, 0xFE0F, 0},   {0xFE10, 0xFE19, 2},   {0xFE20, 0xFE2F, 0},   {0xFE30, 0xFE6F, 2},
    {0xFEFF, 0xFEFF, 0},   {0xFF00, 0xFF60, 2},   {0xFFE0, 0xFFE6, 2},   {0x16FE0, 0x18D7F, 2},
    {0x1AFF0, 0x1B2FF, 2}, {0x1F200, 0x1F2FF, 2}, {0x1F300, 0x1F64F, 2}, {0x1F680, 0x1F6C5, 2},
    {0x1F90C, 0x1F9FF, 2}, {0x1FA70, 0x1FAFF, 2}, {0x20000, 0x2FFFD, 2}, {0x30000, 0x3FFFD, 2},
    {0xE0020, 0xE007F, 0}, {0xE0100, 0xE01EF, 0},
};

/// The columns code point `c` takes on a terminal (kColumnBlocks, else 1).
inline std::size_t code_point_columns(std::uint32_t c) noexcept {
  for (const ColumnBlock& b : kColumnBlocks)
    if (c <= b.last) return c >= b.first ? b.columns : 1;
  return 1;
}

/// The columns a table name takes on a terminal (an escaped name is valid
/// UTF-8, so each lead byte starts a whole code point).
inline std::size_t table_columns(std::string_view s) {
  std::size_t n = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++n;
      ++i;
      continue;
    }
    const std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    std::uint32_t cp = c & (0x7Fu >> len);
    for (std::size_t k = 1; k < len && i + k < s.size(); ++k) cp = cp << 6 | (p[i + k] & 0x3Fu);
    n += code_point_columns(cp);
    i += len;
  }
  return n;
}

/// The names of a table column, escaped, and the width that holds them:
/// at least `least` columns, at most 64 (a longer name pushes out its own
/// row rather than every row). (A template, as to_table() is: its vector
/// of strings is then instantiated only where a table is printed, not in
/// every TU that includes this header, about 1% of wdedup.hpp's compile.)
template <int = 0>
struct NameColumn {
  std::vector<std::string> names;
  std::size_t width;

  NameColumn(std::size_t least, std::size_t count) : width(least) { names.reserve(count); }
  void add(std::string_view name) {
    names.push_back(table_name(name));
    const std::size_t w = table_columns(names.back());
    if (w > width) width = w < 64 ? w : 64;
  }
  /// `text` followed by spaces to the column's width.
  std::string padded(std::string_view text) const {
    std::string s(text);
    const std::size_t w = table_columns(s);
    if (w < width) s.append(width - w, ' ');
    return s;
  }
};

inline double percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace detail

template <int>
std::string Report::to_table() const {
  using detail::format;
  using detail::human_bytes;
  using detail::ull;
  std::string s;
  s += format("wdedup report — strategy %s, %u thread%s\n", detail::table_name(strategy).c_str(), threads,
              threads == 1 ? "" : "s");
  s += format("  methods %llu, functions %llu, blobs %llu, tensors %llu, keys %llu, buffers %llu\n", ull(methods),
              ull(functions), ull(blobs), ull(tensors), ull(keys), ull(buffers));
  s += format("  bytes in      %14llu  (%s)\n", ull(bytes_in), human_bytes(bytes_in).c_str());
  s += format("  bytes stored  %14llu  (%s)\n", ull(bytes_stored), human_bytes(bytes_stored).c_str());
  s += format("  bytes saved   %14llu  (%s, %.1f%%)\n", ull(bytes_saved), human_bytes(bytes_saved).c_str(),
              detail::percent(bytes_saved, bytes_in));
  s += format("  shared across blobs %8llu  (%s: shipped again by a backend compiling one blob at a time)\n",
              ull(bytes_shared_across_blobs), human_bytes(bytes_shared_across_blobs).c_str());
  // Rows of a name and its figures. Each name column is as wide as its
  // longest name (up to 64), so that the figures stay in line under their
  // headings (`heading`, in the name column, then `figure_headings`; none
  // if null).
  auto section = [&s](const char* indent, std::size_t least, const char* heading, const char* figure_headings,
                      const auto& items, auto name_of, auto figures_of) {
    detail::NameColumn<> column(least, items.size());
    for (const auto& item : items) column.add(name_of(item));
    if (heading != nullptr) s += "\n" + (indent + column.padded(heading)) + figure_headings;
    for (std::size_t k = 0; k < items.size(); ++k) s += indent + column.padded(column.names[k]) + figures_of(items[k]);
  };
  section(
      "  ", 20, "per method", "  partitions  tensors        bytes in     distinct  shared w/ others       saved\n",
      per_method, [](const MethodReport& m) -> const std::string& { return m.method; },
      [](const MethodReport& m) {
        return format(" %11u %8llu %15llu %12llu %17llu %11llu\n", m.partitions, ull(m.tensors), ull(m.bytes_in),
                      ull(m.bytes_distinct), ull(m.bytes_shared_with_other_methods), ull(m.bytes_saved));
      });
  section(
      "  ", 30, "per blob", "  functions  tensors        bytes in     distinct  shared inside  shared across\n",
      per_blob, [](const BlobReport& b) -> const std::string& { return b.blob_key; },
      [](const BlobReport& b) {
        return format(" %10u %8llu %15llu %12llu %14llu %14llu\n", b.functions, ull(b.tensors), ull(b.bytes_in),
                      ull(b.bytes_distinct), ull(b.bytes_shared_inside), ull(b.bytes_shared_across));
      });
  s += alias_groups == 0 ? std::string("\n  alias groups 0\n")
                         : format("\n  alias groups %llu; largest:\n", ull(alias_groups));
  section(
      "    ", 44, nullptr, nullptr, largest_alias_groups,
      [](const AliasGroup& g) -> const std::string& { return g.first_key; },
      [](const AliasGroup& g) {
        return format(" %4u tensors %3u %-4s %12llu B each, saves %llu B\n", g.tensors, g.keys,
                      g.keys == 1 ? "key" : "keys", ull(g.size), ull(g.bytes_saved));
      });
  const IdentityReport& i = identity;
  s += format(
      "\n  identity: %llu tensor%s; skipped by cheap checks: %llu unique size, %llu same pointer, "
      "%llu empty; %llu equal to the first of their name; %llu compared directly; %llu hashed (%s)\n",
      ull(i.inputs), i.inputs == 1 ? "" : "s", ull(i.skipped_unique_size), ull(i.skipped_same_pointer),
      ull(i.skipped_empty), ull(i.matched_hint),
      ull(i.compared_directly), ull(i.hashed), human_bytes(i.bytes_hashed).c_str());
  s += format("  byte comparisons %llu (%s), hash collisions %llu\n", ull(i.byte_comparisons),
              human_bytes(i.bytes_compared).c_str(), ull(i.hash_collisions));
  s += format("  time: total %.3f s, checks and identity %.3f s (engine cpu: hashing %.3f s, comparing %.3f s)\n", seconds_total,
              seconds_identity, i.hash_seconds, i.compare_seconds);
  return s;
}

template <int>
std::string Report::to_json() const {
  using detail::format;
  using detail::json_string;
  auto u = [](std::uint64_t v) { return std::to_string(v); };
  std::string s = "{";
  s += "\"strategy\":" + json_string(strategy) + ",\"threads\":" + u(threads);
  s += ",\"methods\":" + u(methods) + ",\"functions\":" + u(functions) + ",\"blobs\":" + u(blobs);
  s += ",\"tensors\":" + u(tensors) + ",\"keys\":" + u(keys) + ",\"buffers\":" + u(buffers);
  s += ",\"bytes_in\":" + u(bytes_in) + ",\"bytes_stored\":" + u(bytes_stored) +
       ",\"bytes_saved\":" + u(bytes_saved);
  s += ",\"bytes_shared_across_blobs\":" + u(bytes_shared_across_blobs);
  s += ",\"alias_groups\":" + u(alias_groups) + ",\"largest_alias_groups\":[";
  for (std::size_t k = 0; k < largest_alias_groups.size(); ++k) {
    const AliasGroup& g = largest_alias_groups[k];
    s += (k ? "," : "") + std::string("{\"first_key\":") + json_string(g.first_key) +
         ",\"tensors\":" + u(g.tensors) + ",\"keys\":" + u(g.keys) + ",\"size\":" + u(g.size) +
         ",\"bytes_saved\":" + u(g.bytes_saved) + "}";
  }
  s += "],\"per_method\":[";
  for (std::size_t k = 0; k < per_method.size(); ++k) {
    const MethodReport& m = per_method[k];
    s += (k ? "," : "") + std::string("{\"method\":") + json_string(m.method) +
         ",\"partitions\":" + u(m.partitions) + ",\"tensors\":" + u(m.tensors) + ",\"bytes_in\":" +
         u(m.bytes_in) + ",\"bytes_distinct\":" + u(m.bytes_distinct) +
         ",\"bytes_shared_with_other_methods\":" + u(m.bytes_shared_with_other_methods) +
         ",\"bytes_attributed\":" + u(m.bytes_attributed) + ",\"bytes_saved\":" + u(m.bytes_saved) + "}";
  }
  s += "],\"per_blob\":[";
  for (std::size_t k = 0; k < per_blob.size(); ++k) {
    const BlobReport& b = per_blob[k];
    s += (k ? "," : "") + std::string("{\"blob_key\":") + json_string(b.blob_key) +
         ",\"functions\":" + u(b.functions) + ",\"tensors\":" + u(b.tensors) + ",\"bytes_in\":" +
         u(b.bytes_in) + ",\"bytes_distinct\":" + u(b.bytes_distinct) +
         ",\"bytes_shared_inside\":" + u(b.bytes_shared_inside) +
         ",\"bytes_shared_across\":" + u(b.bytes_shared_across) + "}";
  }
  const IdentityReport& i = identity;
  s += "],\"identity\":{\"tensors\":" + u(i.inputs) + ",\"bytes_in\":" + u(i.bytes_in) + ",\"skipped_empty\":" + u(i.skipped_empty) +
       ",\"skipped_unique_size\":" + u(i.skipped_unique_size) +
       ",\"skipped_same_pointer\":" + u(i.skipped_same_pointer) +
       ",\"matched_hint\":" + u(i.matched_hint) +
       ",\"compared_directly\":" + u(i.compared_directly) + ",\"hashed\":" + u(i.hashed) +
       ",\"bytes_hashed\":" + u(i.bytes_hashed) + ",\"byte_comparisons\":" + u(i.byte_comparisons) +
       ",\"bytes_compared\":" + u(i.bytes_compared) + ",\"hash_collisions\":" + u(i.hash_collisions) +
       ",\"hash_seconds\":" + detail::json_seconds(i.hash_seconds) +
       ",\"compare_seconds\":" + detail::json_seconds(i.compare_seconds) + "}";
  s += ",\"seconds_total\":" + detail::json_seconds(seconds_total) +
       ",\"seconds_identity\":" + detail::json_seconds(seconds_identity) + "}";
  return s;
}

}  // namespace wdedup

#endif  // WDEDUP_REPORT_HPP
