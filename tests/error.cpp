// Tests for wdedup/runtime/error.hpp: Status and Result keep "ok() exactly
// when error() is Ok", a Status cannot be made from a bool (see also
// tests/compile_fail/status_from_bool.cpp), and the value of a failed
// Result is never handed out, after the handler the program set has seen
// its failure. Built with -fno-exceptions -fno-rtti.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/dies.hpp"
#include "wdedup/runtime.hpp"

using namespace wdedup;
using wdedup_test::dies;

namespace {

/// A handler as a delegate would set one: writes the failure to stderr,
/// then returns (the trap follows).
void report_failed_result(const Failure& f) noexcept {
  char line[256];
  const int n = std::snprintf(line, sizeof line, "%s|%s|%llu", error_name(f.code), f.what,
                              static_cast<unsigned long long>(f.at));
  if (n > 0) (void)!::write(2, line, static_cast<std::size_t>(n) < sizeof line ? static_cast<std::size_t>(n) : sizeof line - 1);
}

// What a DataSource of one's own returns, in the spellings a user may use.
Status succeed_default() { return {}; }
Status succeed_executorch() { return Error::Ok; }  // ExecuTorch's spelling
Status succeed_named() { return ok_status(); }
Status fail_io() { return Status(Error::IoError, "pread failed", 4096); }


}  // namespace

TEST_CASE("error_name: each code's enumerator name, and its value (the codes are stable)") {
  // What messages and the demo print, and what a delegate logs: the name as
  // written in the enum; the values are the documented ones.
  struct Code {
    wdedup::Error code;
    const char* name;
    std::uint32_t value;
  };
  const Code codes[] = {
      {wdedup::Error::Ok, "Ok", 0x00},
      {wdedup::Error::InvalidArgument, "InvalidArgument", 0x10},
      {wdedup::Error::InvalidAlignment, "InvalidAlignment", 0x11},
      {wdedup::Error::KeyConflict, "KeyConflict", 0x12},
      {wdedup::Error::LayoutMismatch, "LayoutMismatch", 0x13},
      {wdedup::Error::PartitionCountMismatch, "PartitionCountMismatch", 0x14},
      {wdedup::Error::BufferTooSmall, "BufferTooSmall", 0x15},
      {wdedup::Error::InvalidName, "InvalidName", 0x16},
      {wdedup::Error::NotFound, "NotFound", 0x20},
      {wdedup::Error::Truncated, "Truncated", 0x30},
      {wdedup::Error::MalformedHeader, "MalformedHeader", 0x31},
      {wdedup::Error::MalformedFlatbuffer, "MalformedFlatbuffer", 0x32},
      {wdedup::Error::MalformedSegment, "MalformedSegment", 0x33},
      {wdedup::Error::MalformedKey, "MalformedKey", 0x34},
      {wdedup::Error::MalformedLayout, "MalformedLayout", 0x35},
      {wdedup::Error::MalformedIndex, "MalformedIndex", 0x36},
      {wdedup::Error::MalformedFunctionMap, "MalformedFunctionMap", 0x37},
      {wdedup::Error::UnsupportedVersion, "UnsupportedVersion", 0x38},
      {wdedup::Error::Misaligned, "Misaligned", 0x39},
      {wdedup::Error::IoError, "IoError", 0x40},
      {wdedup::Error::OutOfMemory, "OutOfMemory", 0x41},
      {wdedup::Error::NotDurable, "NotDurable", 0x42},
  };
  for (const Code& c : codes) {
    CAPTURE(c.name);
    CHECK(std::strcmp(wdedup::error_name(c.code), c.name) == 0);
    CHECK(static_cast<std::uint32_t>(c.code) == c.value);
    // A Status of it is ok() exactly when it is Ok.
    CHECK(Status(c.code).ok() == (c.code == wdedup::Error::Ok));
  }
  CHECK(std::strcmp(wdedup::error_name(static_cast<wdedup::Error>(0x17)), "Unknown") == 0);
}

TEST_CASE("Status: success three ways, a failure with what and where") {
  const Status ways[] = {succeed_default(), succeed_executorch(), succeed_named()};
  for (const Status& s : ways) {
    CHECK(s.ok());
    CHECK(static_cast<bool>(s));
    CHECK(s.error() == Error::Ok);
  }
  const Status f = fail_io();
  CHECK_FALSE(f.ok());
  CHECK(f.error() == Error::IoError);
  CHECK(std::strcmp(f.failure().what, "pread failed") == 0);
  CHECK(f.failure().at == 4096);
  const Status from_failure = Failure{Error::Truncated, "short", 7};
  CHECK(from_failure.error() == Error::Truncated);
  CHECK(from_failure.failure().at == 7);
  static_assert(ok_status().ok(), "constexpr");
  static_assert(!Status(Error::NotFound).ok(), "constexpr");
}

// Every number, not only a bool, picks Status's constructor whose
// static_assert says what to write instead (`return 0;` and `return 1.0;`
// in a DataSource::read): that constructor is declared for the arithmetic
// types only (detail::traits::is_arithmetic), so is_constructible says true
// for each of them. Without it, `return 0;` still fails, but with "no
// viable conversion", which does not say what success is.
template <class... T>
constexpr bool status_refuses_each_by_assert() {
  return (std::is_constructible<Status, T>::value && ...);
}
static_assert(status_refuses_each_by_assert<bool, char, signed char, unsigned char, wchar_t, char16_t, char32_t, short,
                                            unsigned short, int, unsigned, long, unsigned long, long long,
                                            unsigned long long, float, double, long double>(),
              "every arithmetic type reaches the constructor that says what a success is");
#if defined(__cpp_char8_t)
static_assert(std::is_constructible<Status, char8_t>::value, "char8_t too (C++20)");
#endif
namespace {
enum Unscoped { kUnscoped };
}  // namespace
static_assert(!std::is_constructible<Status, const char*>::value && !std::is_constructible<Status, Unscoped>::value &&
                  !std::is_constructible<Status, int*>::value,
              "nothing but a number: a pointer or an unscoped enum makes no Status at all");

TEST_CASE("failure_errno: the errno of a failed system call, 0 for any other failure") {
  // A real one: the runtime's own sources keep errno where their text says.
  Result<MmapSource> missing = MmapSource::open("/nonexistent/wdedup-error-test.ptd");
  REQUIRE_FALSE(missing.ok());
  CHECK(std::strcmp(missing.failure().what, "open failed (at = errno)") == 0);
  CHECK(failure_errno(missing.failure()) == ENOENT);
  CHECK(std::strlen(missing.failure().what) - (sizeof kErrnoSuffix - 1) == std::strlen("open failed"));
  // The suffix only counts at the end of a longer text, and `at` only as an
  // errno it could be (1 to INT_MAX).
  static_assert(failure_errno(Failure{Error::IoError, "read failed (at = errno)", 5}) == 5, "constexpr");
  static_assert(failure_errno(Failure{Error::IoError, "read failed (at = errno)", 0x7fffffff}) == 0x7fffffff, "max");
  static_assert(failure_errno(Failure{Error::IoError, "read failed (at = errno)", 0x80000000u}) == 0, "no errno");
  static_assert(failure_errno(Failure{Error::IoError, "read failed (at = errno)", 0}) == 0, "no errno");
  static_assert(failure_errno(Failure{Error::IoError, " (at = errno)", 2}) == 0, "the suffix alone");
  static_assert(failure_errno(Failure{Error::IoError, "x (at = errno) y", 2}) == 0, "not at the end");
  static_assert(failure_errno(Failure{Error::IoError, "read failed (at = errnO)", 2}) == 0, "its last letter");
  static_assert(failure_errno(Failure{Error::IoError, "read failed (at = errno]", 2}) == 0, "its last byte");
  static_assert(failure_errno(Failure{Error::IoError, "read failed_(at = errno)", 2}) == 0, "its first byte, a space");
  static_assert(failure_errno(Failure{Error::NotFound, "no such key", 0}) == 0, "an offset");
  static_assert(failure_errno(Failure{Error::IoError, nullptr, 2}) == 0, "no text");
}

TEST_CASE("Result: made from Error::Ok it is a failure whose error() says so, not Ok") {
  const Result<int> r = Error::Ok;
  CHECK_FALSE(r.ok());
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(std::strcmp(r.failure().what, "a Result<T> was made from Error::Ok, without a value") == 0);
  const Result<int> f = Failure{Error::Ok, "x", 3};
  CHECK(f.error() == Error::InvalidArgument);
  CHECK(std::strcmp(f.failure().what, "a Result<T> was made from Error::Ok, without a value") == 0);
  CHECK(f.failure().at == 0);
  const Result<int> v = 5;
  CHECK(v.ok());
  CHECK(v.error() == Error::Ok);
  CHECK(*v == 5);
  const Result<int> nf(Error::NotFound, "no such key", 2);
  CHECK(nf.error() == Error::NotFound);
  CHECK(nf.failure().at == 2);
}

TEST_CASE("Result: the value of a failed Result stops the program instead of being read") {
  // (A DataBuffer taken from a failed get_data freed a garbage pointer when
  // destroyed; that crashed either way, so these cases read plain values,
  // which without the trap would be read and returned.)
  CHECK(dies([] {
    const Result<int> r(Error::NotFound);
    volatile int x = *r;
    (void)x;
  }));
  CHECK(dies([] {
    Result<KeyView> r(Error::NotFound);
    volatile std::size_t n = r->size();
    (void)n;
  }));
  CHECK_FALSE(dies([] {
    const Result<int> r = 1;
    volatile int x = *r;
    (void)x;
  }));
}

TEST_CASE("Result: the handler set sees the failure first; the trap follows when it returns") {
  // None by default; setting one gives back the one before.
  // (Compared as bools: doctest cannot print a function pointer.)
  const bool none = set_failed_result_handler(nullptr) == nullptr;
  CHECK(none);
  const bool none_before_ours = set_failed_result_handler(&report_failed_result) == nullptr;
  CHECK(none_before_ours);
  const bool ours = set_failed_result_handler(nullptr) == &report_failed_result;
  CHECK(ours);
  // A lambda without captures converts, as the README sets one.
  const bool none_before_lambda = set_failed_result_handler([](const Failure&) noexcept {}) == nullptr;
  CHECK(none_before_lambda);
  const bool lambda = set_failed_result_handler(nullptr) != nullptr;
  CHECK(lambda);
  // What the child's handler wrote to stderr, and whether the child died of the trap.
  auto run = [](auto fn, std::string* said) {
    said->clear();
    return dies(
        [&] {
          set_failed_result_handler(&report_failed_result);
          fn();
        },
        said);
  };
  std::string said;
  CHECK(run(
      [] {
        const Result<int> r(Error::NotFound, "no key 'w'", 7);
        volatile int x = *r;
        (void)x;
      },
      &said));
  CHECK(said == "NotFound|no key 'w'|7");
  CHECK(run(
      [] {
        Result<DataBuffer> r(Error::Truncated, "file ends inside the segment data", 40);
        volatile std::size_t n = r->size();
        (void)n;
      },
      &said));
  CHECK(said == "Truncated|file ends inside the segment data|40");
  CHECK(run(
      [] {
        Result<KeyView> r(Error::IoError, "pread failed", 4096);
        KeyView k = std::move(r).value();
        volatile std::size_t n = k.size();
        (void)n;
      },
      &said));
  CHECK(said == "IoError|pread failed|4096");
  // A Result that holds a value never calls it.
  CHECK_FALSE(run(
      [] {
        const Result<int> r = 1;
        volatile int x = *r;
        (void)x;
      },
      &said));
  CHECK(said.empty());
}

// Traits that say "copyable" for a Result<DataBuffer> would make generic
// code (std::vector growing, a std::function holding it) pick a copy that
// then fails to compile deep in error.hpp.
static_assert(!std::is_copy_constructible<Result<DataBuffer>>::value, "DataBuffer is move-only, so is its Result");
static_assert(!std::is_copy_assignable<Result<DataBuffer>>::value, "DataBuffer is move-only, so is its Result");
static_assert(std::is_nothrow_move_constructible<Result<DataBuffer>>::value, "moves");
static_assert(std::is_nothrow_move_assignable<Result<DataBuffer>>::value, "moves");
static_assert(std::is_copy_constructible<Result<int>>::value && std::is_copy_assignable<Result<int>>::value,
              "a Result of a copyable T copies");
static_assert(std::is_copy_constructible<Result<KeyView>>::value && std::is_copy_assignable<Result<KeyView>>::value,
              "a Result of a copyable T copies");
// A Result converts to a Result of a class its value converts to (a
// Result<KeyView> is a Result<std::string_view>: tests/key_view.cpp,
// "KeyView: Result<KeyView> converts to Result<std::string_view>"), never to
// a Result of another number: a Result<std::uint64_t> of 2^32 returned as a
// Result<std::uint32_t> would read 0, which only -Wconversion tells, and
// inside error.hpp.
static_assert(!std::is_constructible<Result<std::uint32_t>, Result<std::uint64_t>>::value &&
                  !std::is_constructible<Result<std::uint64_t>, Result<int>>::value,
              "no Result of a number from a Result of another");
namespace {
/// Neither copied nor moved: a Result of it holds the one value it was made with.
struct Pinned {
  Pinned() = default;
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};
struct PinnedChild : Pinned {};
}  // namespace
// Nor to a Result of a base class its value cannot be copied into: the
// converting constructor copies the value, and is declared only where
// copy-initialising a T from a const U& compiles (std::is_convertible's
// sense), so the traits do not say "constructible" of a conversion that
// fails inside error.hpp.
static_assert(!std::is_constructible<Result<Pinned>, const Result<PinnedChild>&>::value,
              "no Result of a base that cannot be copied from a Result of a class derived from it");

TEST_CASE("Result: copyable exactly when its T is; a Result<DataBuffer> moves its ownership") {
  // Copies of a copyable T, both states.
  Result<int> a = 5;
  Result<int> b = a;
  CHECK(*b == 5);
  const Result<int> missing(Error::NotFound, "no such key", 9);
  a = missing;
  CHECK(a.error() == Error::NotFound);
  CHECK(std::strcmp(a.failure().what, "no such key") == 0);
  CHECK(a.failure().at == 9);
  const Result<int> copied(missing);  // constructed from it, not assigned
  CHECK(copied.error() == Error::NotFound);
  CHECK(std::strcmp(copied.failure().what, "no such key") == 0);
  CHECK(copied.failure().at == 9);
  b = a;
  CHECK(b.error() == Error::NotFound);
  // Assigned to itself (through a reference, as generic code may: a swap,
  // a sort), a Result keeps its value, and a failure its failure.
  Result<int> c = 7;
  Result<int>& same_c = c;
  c = same_c;
  REQUIRE(c.ok());
  CHECK(*c == 7);
  Result<int>& same_a = a;
  a = same_a;
  CHECK(a.error() == Error::NotFound);
  CHECK(a.failure().at == 9);
  c = std::move(same_c);  // moved onto itself, likewise
  REQUIRE(c.ok());
  CHECK(*c == 7);

  // A vector of move-only Results grows by moving: the one allocation each
  // buffer owns is handed along, never copied or freed twice (ASan).
  std::vector<Result<DataBuffer>> v;
  for (int i = 0; i < 40; ++i) {
    auto* p = static_cast<std::uint8_t*>(std::malloc(4));
    REQUIRE(p != nullptr);
    std::memcpy(p, &i, sizeof i);
    if (i % 3 == 2)
      v.emplace_back(Error::NotFound, "key", static_cast<std::uint64_t>(i));
    else
      v.emplace_back(DataBuffer::adopt(p, p, 4));
    if (i % 3 == 2) std::free(p);
  }
  REQUIRE(v.size() == 40);
  for (int i = 0; i < 40; ++i) {
    if (i % 3 == 2) {
      CHECK(v[static_cast<std::size_t>(i)].error() == Error::NotFound);
      CHECK(v[static_cast<std::size_t>(i)].failure().at == static_cast<std::uint64_t>(i));
      continue;
    }
    REQUIRE(v[static_cast<std::size_t>(i)].ok());
    CHECK(v[static_cast<std::size_t>(i)]->owns_memory());
    int got = -1;
    std::memcpy(&got, v[static_cast<std::size_t>(i)]->data(), sizeof got);
    CHECK(got == i);
  }
  Result<DataBuffer> moved = std::move(v[0]);
  CHECK(moved->owns_memory());
  CHECK(moved->size() == 4);
}
