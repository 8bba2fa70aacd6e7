// wdedup/runtime/span.hpp — a minimal non-owning view (C++17 has no
// std::span). Runtime half: header-light, no heap.
#ifndef WDEDUP_RUNTIME_SPAN_HPP
#define WDEDUP_RUNTIME_SPAN_HPP

#include <cstddef>
#include <cstdint>

namespace wdedup {
namespace detail {
// Which untyped pointers a span of T takes (<type_traits>' enable_if,
// without including it: the runtime half includes as little as it can).
// The name is what a compiler prints when a typed pointer is refused
// ("no type named 'type' in ...<const unsigned char, float>"), so it says
// the rule.
template <class T, class V>
struct bytes_come_only_from_byte_or_void_pointers {};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, const void> {
  using type = int;
};
template <>
struct bytes_come_only_from_byte_or_void_pointers<const std::uint8_t, void> {
  using type = int;
};
}  // namespace detail

/// A pointer and a count. Mirrors ExecuTorch's runtime Span.
template <class T>
class Span {
 public:
  constexpr Span() noexcept = default;
  constexpr Span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// Read-only bytes (ByteSpan) also from a void* or const void*: what
  /// mmap, ExecuTorch's FreeableBuffer::data() and most C APIs hand out.
  /// Only untyped pointers: a float* with its element count must not pass
  /// as bytes. (Not constexpr: C++17 cannot cast from void* there.)
  template <class V, typename detail::bytes_come_only_from_byte_or_void_pointers<T, V>::type = 0>
  Span(V* data, std::size_t size) noexcept : data_(static_cast<T*>(data)), size_(size) {}
  template <std::size_t N>
  constexpr Span(T (&array)[N]) noexcept : data_(array), size_(N) {}
  /// Any contiguous container with data() and size() (std::vector,
  /// std::array, std::string) converts implicitly, as std::span does.
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
