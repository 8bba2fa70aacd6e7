// tests/support/json.hpp — a small JSON reader for the fixture manifests.
// Test-only (uses the standard library freely); accepts RFC 8259 documents,
// keeps object members in file order, and keeps every number's text so
// 64-bit integers survive exactly. Reports errors by returning nullopt.
#ifndef WDEDUP_TESTS_SUPPORT_JSON_HPP
#define WDEDUP_TESTS_SUPPORT_JSON_HPP

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wdedup_test {

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;  ///< string value, or a number's literal text
  std::vector<Json> items;
  // Object members in file order, as two parallel vectors (a vector of
  // pair<string, Json> would need Json complete here).
  std::vector<std::string> member_names;
  std::vector<Json> member_values;

  bool is_null() const { return kind == Kind::Null; }
  /// Member `key` of an object, or nullptr.
  const Json* find(std::string_view key) const {
    for (std::size_t i = 0; i < member_names.size(); ++i)
      if (member_names[i] == key) return &member_values[i];
    return nullptr;
  }
  /// Member `key`; a missing member reads as null.
  const Json& operator[](std::string_view key) const {
    static const Json null_value;
    const Json* j = find(key);
    return j ? *j : null_value;
  }
  const Json& operator[](std::size_t i) const { return items.at(i); }
  std::size_t size() const { return kind == Kind::Array ? items.size() : member_names.size(); }
  /// An integral number as int64 (the literal must be an integer).
  std::int64_t as_int() const { return std::strtoll(text.c_str(), nullptr, 10); }
  std::uint64_t as_uint() const { return std::strtoull(text.c_str(), nullptr, 10); }
  const std::string& as_string() const { return text; }
};

namespace detail {

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  std::optional<Json> parse_document() {
    Json j;
    if (!value(j, 0)) return std::nullopt;
    ws();
    if (i_ != s_.size()) return std::nullopt;
    return j;
  }

 private:
  /// Steps past the closing bracket just seen: the value is complete.
  bool close() {
    ++i_;
    return true;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  static void utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool hex4(std::uint32_t& v) {
    if (s_.size() - i_ < 4) return false;
    v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<std::uint32_t>(c - 'A' + 10);
      else return false;
    }
    return true;
  }
  bool string(std::string& out) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // surrogate pair
            std::uint32_t lo = 0;
            if (!lit("\\u") || !hex4(lo) || lo < 0xDC00 || lo >= 0xE000) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          utf8(out, cp);
          break;
        }
        default: return false;
      }
    }
    return false;
  }
  bool number(std::string& out) {
    const std::size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    const std::size_t digits = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    if (i_ == digits) return false;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      const std::size_t f = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == f) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      const std::size_t f = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == f) return false;
    }
    out.assign(s_.substr(start, i_ - start));
    return true;
  }
  bool value(Json& j, int depth) {
    if (depth > 64) return false;
    ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      j.kind = Json::Kind::Object;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') return close();
      for (;;) {
        ws();
        std::string key;
        if (!string(key)) return false;
        ws();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        Json v;
        if (!value(v, depth + 1)) return false;
        j.member_names.push_back(std::move(key));
        j.member_values.push_back(std::move(v));
        ws();
        if (i_ >= s_.size()) return false;
        if (s_[i_] == ',') { ++i_; continue; }
        if (s_[i_] == '}') return close();
        return false;
      }
    }
    if (c == '[') {
      j.kind = Json::Kind::Array;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') return close();
      for (;;) {
        Json v;
        if (!value(v, depth + 1)) return false;
        j.items.push_back(std::move(v));
        ws();
        if (i_ >= s_.size()) return false;
        if (s_[i_] == ',') { ++i_; continue; }
        if (s_[i_] == ']') return close();
        return false;
      }
    }
    if (c == '"') {
      j.kind = Json::Kind::String;
      return string(j.text);
    }
    if (lit("true")) { j.kind = Json::Kind::Bool; j.boolean = true; return true; }
    if (lit("false")) { j.kind = Json::Kind::Bool; return true; }
    if (lit("null")) { j.kind = Json::Kind::Null; return true; }
    j.kind = Json::Kind::Number;
    return number(j.text);
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace detail

/// Parses a whole JSON document; nullopt if it is not valid JSON.
inline std::optional<Json> parse_json(std::string_view text) {
  return detail::JsonParser(text).parse_document();
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_JSON_HPP
