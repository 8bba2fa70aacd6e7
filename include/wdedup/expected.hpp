// wdedup/expected.hpp — errors as values for the build-time half: the same
// Error codes as the runtime, plus a message that names the key, method,
// partition and sizes involved. Works with -fno-exceptions.
#ifndef WDEDUP_EXPECTED_HPP
#define WDEDUP_EXPECTED_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "wdedup/detail/escape.hpp"
#include "wdedup/runtime/error.hpp"

namespace wdedup {

/// A failed build-time operation: a typed code and a full sentence.
struct BuildError {
  Error code = Error::Ok;
  std::string message;
};

namespace detail {
/// What using the value of a failed Expected does: names the error it held
/// on stderr, then stops the program as the value of a failed runtime
/// Result does. Reading on would hand out uninitialized storage (a garbage
/// key count, then a destructor freeing a garbage pointer).
[[noreturn]] inline void value_of_failed_expected(const BuildError& e) noexcept {
  std::fprintf(stderr, "wdedup: the value of a failed Expected was used (check ok() first); it held %s: %s\n",
               error_name(e.code), e.message.c_str());
  std::fflush(stderr);
  trap();
}
/// A BuildError made from Error::Ok where a failure is meant (a policy's
/// validate returning Expected<void>(Error::Ok, "refused"), an Expected<T>
/// with no value): as a runtime Result made from Error::Ok, a failure with
/// InvalidArgument that says so, never a failure whose error() is Ok or a
/// refusal read as success.
inline BuildError build_failure_of(BuildError e, const char* made) {
  if (e.code != Error::Ok) return e;
  e.code = Error::InvalidArgument;
  e.message = e.message.empty() ? std::string(made) : std::string(made) + ": " + e.message;
  return e;
}
}  // namespace detail

/// Either a T or a BuildError. Build-time code returns this; it never throws.
/// value(), * and -> of a failed Expected print its error and stop the
/// program (a trap, in every build): check ok() first.
///
/// The T lives in a union of its own rather than a std::optional<T>: the
/// library instantiates Expected for a dozen types, and libstdc++'s
/// optional<T>, with its constraints on every converting constructor and
/// assignment, cost 4-11 ms of compile time each (clang -ftime-trace of
/// <wdedup/wdedup.hpp>). Copies and moves compile where T's do (a class
/// template's members are instantiated only when used), and the copies are
/// declared only where T's are (detail::traits::copy_source_t): the traits
/// of an Expected of a move-only T say it is move-only, as optional's do, so
/// std::vector moves it when it grows rather than failing on a copy.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : has_value_(true) { ::new (static_cast<void*>(&value_)) T(std::move(value)); }
  Expected(BuildError e) : error_(detail::build_failure_of(std::move(e), kMadeFromOk)) {}
  Expected(Error code, std::string message)
      : error_(detail::build_failure_of(BuildError{code, std::move(message)}, kMadeFromOk)) {}
  Expected(const detail::traits::copy_source_t<Expected, T>& o) : error_(o.error_), has_value_(o.has_value_) {
    if (has_value_) ::new (static_cast<void*>(&value_)) T(o.value_);
  }
  Expected(Expected&& o) noexcept(std::is_nothrow_move_constructible<T>::value)
      : error_(std::move(o.error_)), has_value_(o.has_value_) {
    if (has_value_) ::new (static_cast<void*>(&value_)) T(std::move(o.value_));
  }
  /// (Assigning one held value to another uses T's own assignment, as
  /// optional's does, so this needs T copy-assignable too.)
  Expected& operator=(const std::conditional_t<std::is_copy_constructible<T>::value && std::is_copy_assignable<T>::value,
                                               Expected, detail::traits::NoCopySource>& o) {
    if (this != &o) assign(o);
    return *this;
  }
  /// (The same for a move: declared only where T can be moved into and
  /// move-assigned, so an Expected of a T with a const member says it
  /// cannot be assigned, as optional's does, rather than failing inside.)
  Expected& operator=(std::conditional_t<std::is_move_constructible<T>::value && std::is_move_assignable<T>::value,
                                         Expected, detail::traits::NoCopySource>&& o) noexcept(
      std::is_nothrow_move_constructible<T>::value && std::is_nothrow_move_assignable<T>::value) {
    if (this != &o) assign(std::move(o));
    return *this;
  }
  ~Expected() {
    if (has_value_) value_.~T();
  }

  bool ok() const noexcept { return has_value_; }
  explicit operator bool() const noexcept { return ok(); }
  Error error() const noexcept { return ok() ? Error::Ok : error_.code; }
  /// The message of a failure; empty on success.
  const std::string& message() const noexcept { return error_.message; }
  /// (From a temporary, the error is moved out, as value() moves the T: a
  /// failure passed on as another Expected's then makes no copy of its
  /// message, which could fail for want of memory where a write must not.)
  const BuildError& build_error() const& noexcept { return error_; }
  BuildError&& build_error() && noexcept { return std::move(error_); }

  T& value() & noexcept { return *checked(); }
  const T& value() const& noexcept { return *checked(); }
  T&& value() && noexcept { return std::move(*checked()); }
  T& operator*() & noexcept { return *checked(); }
  const T& operator*() const& noexcept { return *checked(); }
  T* operator->() noexcept { return checked(); }
  const T* operator->() const noexcept { return checked(); }

 private:
  T* checked() noexcept {
    if (!has_value_) detail::value_of_failed_expected(error_);
    return &value_;
  }
  const T* checked() const noexcept {
    if (!has_value_) detail::value_of_failed_expected(error_);
    return &value_;
  }

  /// As std::optional's assignments: T's own assignment when both hold a
  /// value, else a construction or a destruction.
  template <class E>
  void assign(E&& o) {
    error_ = std::forward<E>(o).error_;
    if (has_value_ && o.has_value_) {
      value_ = std::forward<E>(o).value_;
    } else if (o.has_value_) {
      ::new (static_cast<void*>(&value_)) T(std::forward<E>(o).value_);
      has_value_ = true;
    } else if (has_value_) {
      value_.~T();
      has_value_ = false;
    }
  }

  static constexpr const char* kMadeFromOk = "an Expected<T> was made from Error::Ok, without a value";

  union {
    T value_;
  };
  BuildError error_;
  bool has_value_ = false;
};

/// Expected<void>: success, or a BuildError.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  /// Error::Ok with a message is no success: a failure (InvalidArgument)
  /// that keeps the message. Error::Ok without one is success.
  Expected(BuildError e)
      : error_(e.message.empty() ? std::move(e) : detail::build_failure_of(std::move(e), kMadeFromOk)) {}
  Expected(Error code, std::string message) : Expected(BuildError{code, std::move(message)}) {}

  bool ok() const noexcept { return error_.code == Error::Ok; }
  explicit operator bool() const noexcept { return ok(); }
  Error error() const noexcept { return error_.code; }
  const std::string& message() const noexcept { return error_.message; }
  const BuildError& build_error() const& noexcept { return error_; }
  BuildError&& build_error() && noexcept { return std::move(error_); }  // (as Expected<T>'s)

 private:
  static constexpr const char* kMadeFromOk = "an Expected<void> was made from Error::Ok with a message";

  BuildError error_;
};

namespace detail {

/// A count and its noun for a message: "1 byte", "4 bytes" (cat() appends
/// it). The plural is the noun plus "s" unless given: counted(n, "entry",
/// "entries").
struct Counted {
  std::uint64_t n;
  const char* one;
  const char* many;
};
inline Counted counted(std::uint64_t n, const char* one, const char* many = nullptr) noexcept {
  return Counted{n, one, many};
}

/// One piece of a message, held as text, a character or a number until it
/// is appended. (Why not <sstream>: it would add ~0.3 s to every including
/// TU. Why a Piece rather than one append overload per type inside a
/// variadic template: each call site's cat<...> then only builds an array of
/// Pieces, so the many argument-type combinations instantiate almost nothing.)
class Piece {
 public:
  Piece(const std::string& s) noexcept : text_(s.data()), size_(s.size()) {}
  Piece(std::string_view s) noexcept : text_(s.data()), size_(s.size()) {}
  Piece(const char* s) noexcept : text_(s), size_(std::char_traits<char>::length(s)) {}
  Piece(char c) noexcept : kind_(Kind::Char), char_(c) {}
  /// Any integer, printed in decimal (as std::to_string prints it).
  template <class N, std::enable_if_t<std::is_integral<N>::value, int> = 0>
  Piece(N v) noexcept
      : kind_(std::is_signed<N>::value ? Kind::Signed : Kind::Unsigned),
        number_(static_cast<std::uint64_t>(v)) {}
  Piece(const Counted& c) noexcept : kind_(Kind::Counted), text_(c.one), many_(c.many), number_(c.n) {}

  void append_to(std::string& s) const {
    switch (kind_) {
      case Kind::Text: s.append(text_, size_); return;
      case Kind::Char: s += char_; return;
      case Kind::Counted:
        append_number(s);
        s += ' ';
        if (number_ != 1 && many_ != nullptr) {
          s += many_;
        } else {
          s += text_;
          if (number_ != 1) s += 's';
        }
        return;
      case Kind::Signed:
      case Kind::Unsigned: break;
    }
    append_number(s);
  }

 private:
  void append_number(std::string& s) const {
    // Sign-extended above for signed types, so the two's-complement
    // negation gives the magnitude, INT64_MIN included.
    const bool negative = kind_ == Kind::Signed && static_cast<std::int64_t>(number_) < 0;
    std::uint64_t v = negative ? ~number_ + 1 : number_;
    char buf[21];
    char* p = buf + sizeof buf;
    do {
      *--p = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    if (negative) *--p = '-';
    s.append(p, static_cast<std::size_t>(buf + sizeof buf - p));
  }

  enum class Kind : unsigned char { Text, Char, Signed, Unsigned, Counted };
  Kind kind_ = Kind::Text;
  char char_ = 0;
  const char* text_ = nullptr;
  const char* many_ = nullptr;
  std::size_t size_ = 0;
  std::uint64_t number_ = 0;
};

inline std::string cat_pieces(const Piece* pieces, std::size_t count) {
  std::string s;
  for (std::size_t i = 0; i < count; ++i) pieces[i].append_to(s);
  return s;
}

/// Concatenates pieces (strings, string views, C strings, characters and
/// integers, the latter in decimal) into a message.
template <class... P>
std::string cat(const P&... pieces) {
  const Piece list[] = {Piece(pieces)..., Piece(std::string_view())};
  return cat_pieces(list, sizeof...(P));
}
/// OutOfMemory naming `what` if its `bytes` are more than std::size_t holds
/// (only where it is 32 bits), else success: said before a size is cast
/// to std::size_t for an allocation, instead of truncating it.
template <int = 0>
Expected<void> check_addressable(const char* what, std::uint64_t bytes) {
  if (bytes <= SIZE_MAX) return {};
  return Expected<void>(Error::OutOfMemory, cat(what, " (", bytes, " bytes) does not fit in memory on this platform",
                                                " (std::size_t holds at most ", SIZE_MAX, ")"));
}
/// Why `name` can name nothing that is looked up by name, or "" if it can:
/// " is empty", or " 'a\x00b' contains a NUL byte at offset 1" (a C-string
/// lookup, as ExecuTorch's strcmp, stops at the NUL). Appended to what the
/// name is, e.g. "key #3" + unusable_name(k).
inline std::string unusable_name(std::string_view name) {
  if (name.empty()) return " is empty";
  const std::size_t nul = name.find('\0');
  return nul == std::string_view::npos ? std::string() : cat(" ", quote_name(name), " contains a NUL byte at offset ", nul);
}
/// Why a key must be UTF-8, for the messages of every entry point (see
/// detail/utf8.hpp).
inline constexpr std::string_view kKeyUtf8Why =
    "; a key is a flatbuffer string, which is UTF-8, and ExecuTorch's Python reader (flatc --json) cannot read "
    "a file holding one that is not";
/// Before it, for a method name, which deduplicate() makes keys of where
/// methods give one tensor name other bytes or layouts.
inline constexpr std::string_view kMethodInKeys = " (keys are made of method names: '<method>/<name>')";
/// "'w\xff' is not valid UTF-8 at offset 1; ..." for a key, or a name keys
/// are made of (a method's, `method`), that is not UTF-8, or "": the one
/// message every entry point puts after what the name is ("key ",
/// "method name ").
inline std::string utf8_problem(std::string_view name, bool method = false) {
  const std::size_t bad = first_non_utf8(name);
  return bad == std::string_view::npos
             ? std::string()
             : cat(quote_name(name), " is not valid UTF-8 at offset ", bad, method ? kMethodInKeys : "", kKeyUtf8Why);
}
/// unusable_name's reasons, and for a name that is to become (part of) a
/// key, a tensor's or a method's (`method`), utf8_problem's.
inline std::string unusable_key(std::string_view name, bool method = false) {
  if (std::string why = unusable_name(name); !why.empty()) return why;
  std::string problem = utf8_problem(name, method);
  return problem.empty() ? problem : " " + problem;
}
/// A path with a NUL byte, refused before any system call sees it (they
/// would take the path up to the NUL: another file, reported as this one):
/// InvalidArgument, "cannot <verb> '<path>': the path contains a NUL byte
/// at offset N". Success for any other path.
inline Expected<void> refuse_nul_in_path(const char* verb, const std::string& path) {
  const std::size_t nul = path.find('\0');
  if (nul == std::string::npos) return {};
  return Expected<void>(Error::InvalidArgument,
                        cat("cannot ", verb, " ", quote_name(path), ": the path contains a NUL byte at offset ", nul));
}
/// strerror, thread-safe (strerror itself is not), whichever strerror_r
/// the C library declares, into `buf` (or a string of the C library's):
/// no allocation, for a message that must be made where running out of
/// memory would lose what happened (AtomicFile::commit, after its rename).
inline const char* errno_text_pick(int rc, char* buf, std::size_t size, int e) {
  if (rc != 0) std::snprintf(buf, size, "errno %d", e);
  return buf;
}
inline const char* errno_text_pick(const char* msg, char*, std::size_t, int) { return msg; }
inline const char* errno_text_into(int e, char (&buf)[256]) {
  buf[0] = '\0';
  return errno_text_pick(::strerror_r(e, buf, sizeof buf), buf, sizeof buf, e);
}
inline std::string errno_text(int e) {
  char buf[256];
  return errno_text_into(e, buf);
}

}  // namespace detail

/// A runtime Failure as text, for a message or a log line. The runtime keeps
/// no text it would have to format (its `what` is a fixed string); a
/// failed system call says so in `what` ("open failed (at = errno)") and
/// keeps errno in `at`, which a message names by its reason:
/// "open failed: No such file or directory (IoError)". Any other failure
/// reads "what (Code at N)", N being the offset or value `what` is about.
template <int = 0>
std::string describe_failure(const Failure& f) {
  // (A Failure made by hand may hold a null `what`: Result(Error, nullptr).)
  const std::string_view what = f.what != nullptr ? f.what : "";
  if (const int e = failure_errno(f); e != 0)
    return detail::cat(what.substr(0, what.size() - (sizeof kErrnoSuffix - 1)), ": ", detail::errno_text(e), " (",
                       error_name(f.code), ")");
  return detail::cat(what, " (", error_name(f.code), " at ", f.at, ")");
}

}  // namespace wdedup

#endif  // WDEDUP_EXPECTED_HPP
