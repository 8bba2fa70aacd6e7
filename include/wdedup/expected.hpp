// wdedup/expected.hpp — errors as values for the build-time half: the same
// Error codes as the runtime, plus a message that names the key, method,
// partition and sizes involved. Works with -fno-exceptions.
#ifndef WDEDUP_EXPECTED_HPP
#define WDEDUP_EXPECTED_HPP

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "wdedup/runtime/error.hpp"

namespace wdedup {

/// A failed build-time operation: a typed code and a full sentence.
struct BuildError {
  Error code = Error::Ok;
  std::string message;
};

/// Either a T or a BuildError. Build-time code returns this; it never throws.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(BuildError e) : error_(std::move(e)) {}
  Expected(Error code, std::string message) : error_(BuildError{code, std::move(message)}) {}

  bool ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  Error error() const noexcept { return ok() ? Error::Ok : error_.code; }
  /// The message of a failure; empty on success.
  const std::string& message() const noexcept { return error_.message; }
  const BuildError& build_error() const noexcept { return error_; }

  T& value() & noexcept { return *value_; }
  const T& value() const& noexcept { return *value_; }
  T&& value() && noexcept { return std::move(*value_); }
  T& operator*() & noexcept { return *value_; }
  const T& operator*() const& noexcept { return *value_; }
  T* operator->() noexcept { return &*value_; }
  const T* operator->() const noexcept { return &*value_; }

 private:
  std::optional<T> value_;
  BuildError error_;
};

/// Expected<void>: success, or a BuildError.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(BuildError e) : error_(std::move(e)) {}
  Expected(Error code, std::string message) : error_(BuildError{code, std::move(message)}) {}

  bool ok() const noexcept { return error_.code == Error::Ok; }
  explicit operator bool() const noexcept { return ok(); }
  Error error() const noexcept { return error_.code; }
  const std::string& message() const noexcept { return error_.message; }
  const BuildError& build_error() const noexcept { return error_; }

 private:
  BuildError error_;
};

namespace detail {
/// Concatenates pieces into a message; numbers are printed in decimal.
/// (Why not <sstream>: it would add ~0.3 s to every including TU.)
inline void append_piece(std::string& s, const std::string& v) { s += v; }
inline void append_piece(std::string& s, const char* v) { s += v; }
inline void append_piece(std::string& s, std::string_view v) { s.append(v.data(), v.size()); }
inline void append_piece(std::string& s, char v) { s += v; }
template <class N, class = std::enable_if_t<std::is_integral<N>::value>>
void append_piece(std::string& s, N v) {
  s += std::to_string(v);
}
template <class... P>
std::string cat(const P&... pieces) {
  std::string s;
  (append_piece(s, pieces), ...);
  return s;
}
/// Quotes a name for a message: 'name'.
inline std::string quote_name(std::string_view v) {
  std::string s = "'";
  s.append(v.data(), v.size());
  return s + "'";
}
}  // namespace detail

}  // namespace wdedup

#endif  // WDEDUP_EXPECTED_HPP
