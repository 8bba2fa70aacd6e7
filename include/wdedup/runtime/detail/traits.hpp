// wdedup/runtime/detail/traits.hpp — the handful of type traits the runtime
// half needs (Result, KeyView), without <type_traits>: that header costs a
// TU about 0.02 s to parse, a sixth of the whole runtime umbrella. Runtime
// half; internal (namespace detail::traits). Three are compiler built-ins
// that GCC, Clang and MSVC all provide.
#ifndef WDEDUP_RUNTIME_DETAIL_TRAITS_HPP
#define WDEDUP_RUNTIME_DETAIL_TRAITS_HPP

namespace wdedup {
namespace detail {
namespace traits {

template <bool B, class T = void>
struct enable_if {};
template <class T>
struct enable_if<true, T> {
  using type = T;
};
template <bool B, class T = void>
using enable_if_t = typename enable_if<B, T>::type;

template <bool B, class T, class F>
struct conditional {
  using type = T;
};
template <class T, class F>
struct conditional<false, T, F> {
  using type = F;
};
template <bool B, class T, class F>
using conditional_t = typename conditional<B, T, F>::type;

/// A type nothing converts to: the parameter of a copy constructor or copy
/// assignment that a class template must not have (see copy_source_t).
class NoCopySource {
  // Only a private copy constructor, never defined: no value of it can be
  // made, and none is default-constructed from `{}` (so `r = {}` on a
  // move-only Result says "no viable operator=", not this class's name).
  NoCopySource(const NoCopySource&);
};

/// The parameter type of a wrapper's copy constructor and copy assignment:
/// `const Self&` when T can be copied, else `const NoCopySource&`. They are
/// then not a copy constructor or assignment at all, and the ones the
/// compiler would declare are deleted (the wrapper declares its moves), so
/// std::is_copy_constructible of Result<DataBuffer> or of
/// Expected<std::unique_ptr<X>> says false, as it does for optional<T>.
/// (A user-written copy constructor is declared whether or not its body
/// compiles: the traits would say true and a copy fail deep in the header;
/// std::vector would pick that copy over a move that may throw.)
template <class Self, class T>
using copy_source_t = typename conditional<__is_constructible(T, const T&), Self, NoCopySource>::type;

template <class A, class B>
struct is_same {
  static constexpr bool value = false;
};
template <class A>
struct is_same<A, A> {
  static constexpr bool value = true;
};

template <class T>
struct is_reference {
  static constexpr bool value = false;
};
template <class T>
struct is_reference<T&> {
  static constexpr bool value = true;
};
template <class T>
struct is_reference<T&&> {
  static constexpr bool value = true;
};

/// std::declval: only ever named in unevaluated operands.
template <class T>
T&& declval() noexcept;

/// std::is_convertible for the object and pointer types the runtime asks
/// about: whether `To t = from;` (copy-initialisation) compiles.
template <class From, class To>
struct is_convertible {
 private:
  static void accept(To) noexcept;
  template <class F, class = decltype(accept(declval<F>()))>
  static char test(int);
  template <class>
  static long test(...);

 public:
  static constexpr bool value = sizeof(test<From>(0)) == 1;
};

template <class T>
struct is_class {
  static constexpr bool value = __is_class(T);
};
template <class T>
struct is_trivially_copyable {
  static constexpr bool value = __is_trivially_copyable(T);
};
template <class T, class... Args>
struct is_constructible {
  static constexpr bool value = __is_constructible(T, Args...);
};

/// std::is_arithmetic for a by-value (cv-free) type: bool, the character
/// and integer types, the floating-point types.
template <class T>
struct is_arithmetic {
  static constexpr bool value = false;
};
#define WDEDUP_DETAIL_ARITHMETIC(T) \
  template <>                       \
  struct is_arithmetic<T> {         \
    static constexpr bool value = true; \
  };
WDEDUP_DETAIL_ARITHMETIC(bool)
WDEDUP_DETAIL_ARITHMETIC(char)
WDEDUP_DETAIL_ARITHMETIC(signed char)
WDEDUP_DETAIL_ARITHMETIC(unsigned char)
WDEDUP_DETAIL_ARITHMETIC(wchar_t)
WDEDUP_DETAIL_ARITHMETIC(char16_t)
WDEDUP_DETAIL_ARITHMETIC(char32_t)
#if defined(__cpp_char8_t)
WDEDUP_DETAIL_ARITHMETIC(char8_t)
#endif
WDEDUP_DETAIL_ARITHMETIC(short)
WDEDUP_DETAIL_ARITHMETIC(unsigned short)
WDEDUP_DETAIL_ARITHMETIC(int)
WDEDUP_DETAIL_ARITHMETIC(unsigned)
WDEDUP_DETAIL_ARITHMETIC(long)
WDEDUP_DETAIL_ARITHMETIC(unsigned long)
WDEDUP_DETAIL_ARITHMETIC(long long)
WDEDUP_DETAIL_ARITHMETIC(unsigned long long)
WDEDUP_DETAIL_ARITHMETIC(float)
WDEDUP_DETAIL_ARITHMETIC(double)
WDEDUP_DETAIL_ARITHMETIC(long double)
#undef WDEDUP_DETAIL_ARITHMETIC

}  // namespace traits
}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_DETAIL_TRAITS_HPP
