// wdedup/runtime/span.hpp — a minimal non-owning view (C++17 has no
// std::span). Runtime half: header-light, no heap.
#ifndef WDEDUP_RUNTIME_SPAN_HPP
#define WDEDUP_RUNTIME_SPAN_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>

namespace wdedup {
namespace detail {
// Which pointers other than T* a span of T takes (<type_traits>'
// enable_if, without including it: the runtime half includes as little as
// it can). A ByteSpan takes untyped pointers and pointers to the other
// one-byte types (char, signed char, std::byte: a file read into a
// std::vector<char>, an int8 tensor), whose count is a count of bytes too;
// never a wider type's (a float* with its element count must not pass as
// bytes). The name is what a compiler prints when a pointer is refused
// ("no type named 'type' in ...<const unsigned char, const float>"), so it
// says the rule.
template <class T, class V>
struct bytes_come_only_from_byte_or_void_pointers {};
struct byte_or_void_pointer {
  using type = int;
};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, const void> : byte_or_void_pointer {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, void> : byte_or_void_pointer {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, const char> : byte_or_void_pointer {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, char> : byte_or_void_pointer {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, const signed char> : byte_or_void_pointer {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, signed char> : byte_or_void_pointer {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, const std::byte> : byte_or_void_pointer {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, std::byte> : byte_or_void_pointer {};
}  // namespace detail

/// A pointer and a count. Mirrors ExecuTorch's runtime Span.
template <class T>
class Span {
 public:
  constexpr Span() noexcept = default;
  constexpr Span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// Read-only bytes (ByteSpan) also from a void* or const void* (what
  /// mmap, ExecuTorch's FreeableBuffer::data() and most C APIs hand out),
  /// or a char*, signed char* or std::byte*: `size` is bytes for each. No
  /// other typed pointer: a float* with its element count must not pass as
  /// bytes. (Not constexpr: C++17 cannot cast from void* there.)
  template <class V, typename detail::bytes_come_only_from_byte_or_void_pointers<T, V>::type = 0>
  Span(V* data, std::size_t size) noexcept
      : data_(static_cast<T*>(static_cast<const void*>(data))), size_(size) {}
  template <std::size_t N>
  constexpr Span(T (&array)[N]) noexcept : data_(array), size_(N) {}
  /// Any contiguous container whose data() gives a T* (convertible) and
  /// that has size() converts implicitly, as std::span does: a
  /// std::vector<std::uint8_t> or std::array<std::uint8_t, N> to a
  /// ByteSpan. A std::string or std::vector<char> does not (a name passed
  /// where bytes are asked for would compile); ByteSpan(s.data(), s.size())
  /// takes its bytes.
  template <class C, class = decltype(static_cast<T*>(static_cast<C*>(nullptr)->data())),
            class = decltype(static_cast<C*>(nullptr)->size())>
  constexpr Span(C& c) noexcept : data_(c.data()), size_(c.size()) {}

  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
  constexpr Span subspan(std::size_t offset, std::size_t count) const noexcept {
    return Span(data_ + offset, count);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Read-only bytes: what a tensor's data is to wdedup.
using ByteSpan = Span<const std::uint8_t>;

}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_SPAN_HPP
