// tests/support/require_value.hpp — REQUIRE_VALUE(expr): the value of the
// Expected, Result or std::optional `expr`, REQUIRE-d ok (or non-empty)
// first. value(), * and -> of a failed Expected or Result trap (SIGILL),
// which ends the test program with no doctest report; this stops the
// test with one naming the line, the expression and the error. An
// expression (a lambda called where it stands), so that
// REQUIRE names the caller's line; the value is moved out of a temporary,
// as value() of one does, and copied from a named one, which keeps it.
// A std::optional too (a Tensor's or StoreKey's layout, Layout::nbytes(),
// a parsed JSON document): REQUIRE-d to hold a value, where * and -> of an
// empty one read garbage or crash (undefined behaviour, no report); a
// failed one reports the expression and "empty (std::nullopt)". Where a
// failed REQUIRE does not stop the test, value() of an empty optional
// throws std::bad_optional_access (aborts without exceptions).
// Keep it out of other assertions' arguments: there its
// REQUIRE's exception is caught and reported as the outer one throwing.
//
// REQUIRE_FOUND(expr): what the pointer `expr` points to, as a reference,
// REQUIRE-d non-null first, for the lookups that answer nullptr for a
// missing key (NamedDataStore::find, FunctionMaps::find and find_by_name,
// FunctionMap::key_of, Program::find_method, key_now_holding). A null one
// dereferenced ends the test program (SIGSEGV: doctest names the test
// case, not the line, and runs no other); this stops the test with a
// report naming the line and the expression. An expression too, kept
// out of other assertions' arguments as REQUIRE_VALUE is; a reference,
// so that it stands where `*p` stood:
//   const Method& m = REQUIRE_FOUND(program.find_method("decode"));
// Where a failed REQUIRE does not stop the test (DOCTEST_CONFIG_DISABLE,
// or no exceptions without doctest_main.cpp's listener) a null pointer
// aborts instead of being dereferenced.
#ifndef WDEDUP_TESTS_SUPPORT_REQUIRE_VALUE_HPP
#define WDEDUP_TESTS_SUPPORT_REQUIRE_VALUE_HPP

#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "wdedup/expected.hpp"
#include "wdedup/runtime/error.hpp"

namespace wdedup_test {
template <class T>
bool holds_value(const wdedup::Expected<T>& e) {
  return e.ok();
}
template <class T>
bool holds_value(const wdedup::Result<T>& r) {
  return r.ok();
}
template <class T>
bool holds_value(const std::optional<T>& o) {
  return o.has_value();
}
template <class T>
std::string failure_text(const wdedup::Expected<T>& e) {
  return e.message();
}
template <class T>
std::string failure_text(const wdedup::Result<T>& r) {
  return wdedup::describe_failure(r.failure());
}
template <class T>
std::string failure_text(const std::optional<T>&) {
  return "empty (std::nullopt)";
}
}  // namespace wdedup_test

#define REQUIRE_VALUE(...)                                                                   \
  [&]() {                                                                                    \
    auto&& required_value_ = (__VA_ARGS__);                                                  \
    REQUIRE_MESSAGE(::wdedup_test::holds_value(required_value_), #__VA_ARGS__ ": ",           \
                    ::wdedup_test::failure_text(required_value_));                           \
    return std::forward<decltype(required_value_)>(required_value_).value();                 \
  }()

#define REQUIRE_FOUND(...)                                                                   \
  [&]() -> auto& {                                                                           \
    auto* const required_found_ = (__VA_ARGS__);                                             \
    REQUIRE_MESSAGE(required_found_ != nullptr, #__VA_ARGS__ ": not found (nullptr)");       \
    if (required_found_ == nullptr) std::abort();                                            \
    return *required_found_;                                                                 \
  }()

#endif  // WDEDUP_TESTS_SUPPORT_REQUIRE_VALUE_HPP
