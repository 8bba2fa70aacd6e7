// wdedup/runtime/key_view.hpp — KeyView, the read-only character view the
// runtime half takes and returns for keys and names. Runtime half.
//
// Why not std::string_view: <string_view> alone costs a TU about 0.1 s to
// parse, more than the rest of the runtime reader together. KeyView is a
// pointer and a size that interoperates with the standard strings without
// including them: text (std::string, std::string_view, a C string: a type
// with char traits or an npos) converts to it implicitly, and any other type
// with char-pointer data() and size() explicitly (a std::vector<char>'s size
// may count a NUL and what follows); it converts to std::string_view
// implicitly and to std::string explicitly, and it compares with all of them.
// ExecuTorch's portable string_view (no char traits, but an npos) converts
// implicitly too. Callers written against std::string_view keep compiling.
#ifndef WDEDUP_RUNTIME_KEY_VIEW_HPP
#define WDEDUP_RUNTIME_KEY_VIEW_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstring>

#include "wdedup/runtime/detail/traits.hpp"

namespace wdedup {

class KeyView;

namespace detail {

/// A type with `data()` convertible to `const char*` and `size()` to
/// std::size_t (std::string, std::string_view, std::vector<char>, ...),
/// other than KeyView itself.
template <class S, class = void>
struct is_char_range {
  static constexpr bool value = false;
};
template <class S>
struct is_char_range<
    S, traits::enable_if_t<!traits::is_same<S, KeyView>::value &&
                           traits::is_convertible<decltype(traits::declval<const S&>().data()), const char*>::value &&
                           traits::is_convertible<decltype(traits::declval<const S&>().size()), std::size_t>::value>> {
  static constexpr bool value = true;
};

/// A type that holds text, not just characters: char traits (std::string,
/// std::string_view; not std::array<char, N> or std::vector<char>, whose
/// size counts the NUL and the bytes after it).
template <class S, class = void>
struct has_char_traits {
  static constexpr bool value = false;
};
template <class S>
struct has_char_traits<S, traits::enable_if_t<traits::is_same<typename S::traits_type::char_type, char>::value>> {
  static constexpr bool value = true;
};

/// A char string view with a static `npos` but no char traits:
/// ExecuTorch's portable `executorch::aten::string_view` (its own
/// basic_string_view, what a delegate's NamedDataMap is handed keys as at
/// 6530a7f; newer runtimes hand a std::string_view).
/// std::vector<char> and std::array<char, N> have no npos.
template <class S, class = void>
struct is_npos_text {
  static constexpr bool value = false;
};
template <class S>
struct is_npos_text<S, traits::enable_if_t<traits::is_same<typename S::value_type, char>::value &&
                                           traits::is_convertible<decltype(S::npos), std::size_t>::value>> {
  static constexpr bool value = true;
};

/// Text, not just characters: what converts to KeyView implicitly.
template <class S>
struct holds_text {
  static constexpr bool value = has_char_traits<S>::value || is_npos_text<S>::value;
};

/// A standard-like string type KeyView converts to: char traits and a
/// (pointer, size) constructor (std::string, std::string_view, std::pmr::string).
template <class S, class = void>
struct is_char_string {
  static constexpr bool value = false;
};
template <class S>
struct is_char_string<S, traits::enable_if_t<has_char_traits<S>::value &&
                                             traits::is_constructible<S, const char*, std::size_t>::value>> {
  static constexpr bool value = true;
};

}  // namespace detail

/// A pointer and a size: characters owned by someone else (for keys and
/// names the reader hands out, the file's metadata). Comparisons are
/// bytewise, like std::string_view's.
class KeyView {
 public:
  constexpr KeyView() noexcept = default;
  constexpr KeyView(const char* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// A NUL-terminated string; a null one is the empty key (a delegate
  /// handing on a name it never got finds nothing, where strlen crashed).
  KeyView(const char* c_string) noexcept
      : data_(c_string), size_(c_string != nullptr ? std::strlen(c_string) : 0) {}
  /// std::string, std::string_view, any string type with char traits, or
  /// ExecuTorch's portable string_view (detail::is_npos_text).
  template <class S,
            detail::traits::enable_if_t<detail::is_char_range<S>::value && detail::holds_text<S>::value, int> = 0>
  constexpr KeyView(const S& s) noexcept(noexcept(s.data()) && noexcept(s.size()))
      : data_(s.data()), size_(s.size()) {}
  /// Any other type with char data() and size(), explicitly: a
  /// std::array<char, 16> holding "w" is 16 characters, not the key "w"
  /// (implicit, get_data(name) found nothing where get_data(name.data())
  /// found the key; std::string_view takes no std::array either).
  template <class S,
            detail::traits::enable_if_t<detail::is_char_range<S>::value && !detail::holds_text<S>::value, long> = 0>
  constexpr explicit KeyView(const S& s) noexcept(noexcept(s.data()) && noexcept(s.size()))
      : data_(s.data()), size_(s.size()) {}

  /// To std::string_view (implicit, as it views too).
  template <class S, detail::traits::enable_if_t<detail::is_char_string<S>::value && detail::traits::is_trivially_copyable<S>::value,
                                      int> = 0>
  constexpr operator S() const noexcept {
    return S(data_, size_);
  }
  /// To std::string (explicit, as it copies: std::string(key)).
  template <class S, detail::traits::enable_if_t<detail::is_char_string<S>::value && !detail::traits::is_trivially_copyable<S>::value,
                                      long> = 0>
  explicit operator S() const {
    return S(data_, size_);
  }

  constexpr const char* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr std::size_t length() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const char* begin() const noexcept { return data_; }
  constexpr const char* end() const noexcept { return data_ + size_; }
  constexpr char operator[](std::size_t i) const noexcept { return data_[i]; }
  /// Characters [pos, pos + count), clamped to the view (never fails).
  constexpr KeyView substr(std::size_t pos, std::size_t count = static_cast<std::size_t>(-1)) const noexcept {
    if (pos > size_) pos = size_;
    if (count > size_ - pos) count = size_ - pos;
    return KeyView(data_ + pos, count);
  }

  /// <0, 0, >0 as std::string_view::compare (bytewise, then by length).
  int compare(KeyView o) const noexcept {
    const std::size_t n = size_ < o.size_ ? size_ : o.size_;
    const int c = n == 0 ? 0 : std::memcmp(data_, o.data_, n);
    if (c != 0) return c;
    return size_ < o.size_ ? -1 : (size_ > o.size_ ? 1 : 0);
  }

  // Comparisons: KeyView with KeyView (and C strings), and with string
  // types on either side. The mixed templates are exact matches, so they
  // win over std::string_view's own operators (which would need a
  // conversion) instead of being ambiguous with them.
  friend bool operator==(KeyView a, KeyView b) noexcept { return a.equals(b); }
  friend bool operator!=(KeyView a, KeyView b) noexcept { return !a.equals(b); }
  friend bool operator<(KeyView a, KeyView b) noexcept { return a.compare(b) < 0; }
  friend bool operator<=(KeyView a, KeyView b) noexcept { return a.compare(b) <= 0; }
  friend bool operator>(KeyView a, KeyView b) noexcept { return a.compare(b) > 0; }
  friend bool operator>=(KeyView a, KeyView b) noexcept { return a.compare(b) >= 0; }

  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator==(KeyView a, const S& b) noexcept { return a.equals(KeyView(b)); }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator==(const S& a, KeyView b) noexcept { return b.equals(KeyView(a)); }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator!=(KeyView a, const S& b) noexcept { return !a.equals(KeyView(b)); }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator!=(const S& a, KeyView b) noexcept { return !b.equals(KeyView(a)); }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator<(KeyView a, const S& b) noexcept { return a.compare(KeyView(b)) < 0; }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator<(const S& a, KeyView b) noexcept { return KeyView(a).compare(b) < 0; }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator<=(KeyView a, const S& b) noexcept { return a.compare(KeyView(b)) <= 0; }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator<=(const S& a, KeyView b) noexcept { return KeyView(a).compare(b) <= 0; }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator>(KeyView a, const S& b) noexcept { return a.compare(KeyView(b)) > 0; }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator>(const S& a, KeyView b) noexcept { return KeyView(a).compare(b) > 0; }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator>=(KeyView a, const S& b) noexcept { return a.compare(KeyView(b)) >= 0; }
  template <class S, detail::traits::enable_if_t<detail::is_char_range<S>::value, int> = 0>
  friend bool operator>=(const S& a, KeyView b) noexcept { return KeyView(a).compare(b) >= 0; }

  /// Writes the characters to any stream with write(const char*, n)
  /// (std::ostream), without this header including <iosfwd>.
  template <class Stream>
  friend auto operator<<(Stream& os, KeyView k) -> decltype(os.write(static_cast<const char*>(nullptr), 1), os) {
    os.write(k.data_, static_cast<std::ptrdiff_t>(k.size_));
    return os;
  }

 private:
  bool equals(KeyView o) const noexcept {
    return size_ == o.size_ && (size_ == 0 || std::memcmp(data_, o.data_, size_) == 0);
  }

  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_KEY_VIEW_HPP
