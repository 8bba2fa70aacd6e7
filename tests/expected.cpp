// Tests for wdedup/expected.hpp: Expected<T> holds a T or a BuildError, and
// its copies, moves and assignments construct, assign and destroy the T
// exactly as std::optional<T> would (it keeps the T in a union of its own;
// a counting type below sees every construction and destruction).
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/dies.hpp"
#include "wdedup/expected.hpp"

using namespace wdedup;
using wdedup_test::dies;

namespace {

// Counts live objects and how each came to be or changed.
struct Counts {
  int live = 0, copies = 0, moves = 0, copy_assigns = 0, move_assigns = 0;
};
Counts counts;

struct Tracked {
  std::string text;
  explicit Tracked(std::string t) : text(std::move(t)) { ++counts.live; }
  Tracked(const Tracked& o) : text(o.text) {
    ++counts.live;
    ++counts.copies;
  }
  Tracked(Tracked&& o) noexcept : text(std::move(o.text)) {
    ++counts.live;
    ++counts.moves;
  }
  Tracked& operator=(const Tracked& o) {
    text = o.text;
    ++counts.copy_assigns;
    return *this;
  }
  Tracked& operator=(Tracked&& o) noexcept {
    text = std::move(o.text);
    ++counts.move_assigns;
    return *this;
  }
  ~Tracked() { --counts.live; }
};

Expected<Tracked> good(const char* t) { return Tracked(t); }
Expected<Tracked> bad(const char* m) { return Expected<Tracked>(Error::InvalidArgument, m); }

}  // namespace

TEST_CASE("Expected: a value or an error, and which one it holds") {
  counts = {};
  {
    Expected<Tracked> v = good("weights");
    CHECK(v.ok());
    CHECK(static_cast<bool>(v));
    CHECK(v.error() == Error::Ok);
    CHECK(v.message().empty());
    CHECK(v->text == "weights");
    CHECK((*v).text == "weights");
    CHECK(counts.live == 1);

    Expected<Tracked> e = bad("key 'w' is empty");
    CHECK_FALSE(e.ok());
    CHECK(e.error() == Error::InvalidArgument);
    CHECK(e.message() == "key 'w' is empty");
    CHECK(e.build_error().code == Error::InvalidArgument);
    CHECK(counts.live == 1);  // an error constructs no T

    Tracked out = std::move(v).value();
    CHECK(out.text == "weights");
    CHECK(counts.live == 2);
  }
  CHECK(counts.live == 0);
}

TEST_CASE("Expected: copies and moves construct the T once, or not at all for an error") {
  counts = {};
  {
    Expected<Tracked> v = good("a");
    const Counts before = counts;
    Expected<Tracked> c(v);
    CHECK(counts.copies == before.copies + 1);
    CHECK(c->text == "a");
    CHECK(v->text == "a");
    Expected<Tracked> m(std::move(v));
    CHECK(counts.moves == before.moves + 1);
    CHECK(m->text == "a");
    CHECK(counts.live == 3);  // v still holds its (moved-from) T

    Expected<Tracked> e = bad("no such method 'decode'");
    Expected<Tracked> ec(e);
    Expected<Tracked> em(std::move(e));
    CHECK(counts.live == 3);
    CHECK(ec.error() == Error::InvalidArgument);
    CHECK(ec.message() == "no such method 'decode'");
    CHECK(em.message() == "no such method 'decode'");
  }
  CHECK(counts.live == 0);
  // As optional: a move that cannot throw exactly when T's cannot.
  struct ThrowingMove {
    ThrowingMove(ThrowingMove&&) noexcept(false);
  };
  CHECK(std::is_nothrow_move_constructible<Expected<Tracked>>::value);
  CHECK_FALSE(std::is_nothrow_move_constructible<Expected<ThrowingMove>>::value);
}

TEST_CASE("Expected: assignment between every pair of states") {
  counts = {};
  {
    // value <- value: T's own assignment.
    Expected<Tracked> a = good("a"), b = good("b");
    Counts before = counts;
    a = b;
    CHECK(counts.copy_assigns == before.copy_assigns + 1);
    CHECK(counts.live == before.live);
    CHECK(a->text == "b");
    a = good("c");
    CHECK(counts.move_assigns == before.move_assigns + 1);
    CHECK(a->text == "c");

    // value <- error: the T destroyed, the error taken.
    before = counts;
    Expected<Tracked> e = bad("partition 2 of 'prefill' has no function");
    a = e;
    CHECK(counts.live == before.live - 1);
    CHECK_FALSE(a.ok());
    CHECK(a.error() == Error::InvalidArgument);
    CHECK(a.message() == "partition 2 of 'prefill' has no function");

    // error <- value: a T constructed, the error cleared.
    before = counts;
    a = b;
    CHECK(counts.live == before.live + 1);
    CHECK(counts.copies == before.copies + 1);
    REQUIRE(a.ok());
    CHECK(a.error() == Error::Ok);
    CHECK(a.message().empty());
    CHECK(a->text == "b");

    // error <- error (moved): no T anywhere.
    Expected<Tracked> f = bad("first");
    before = counts;
    f = bad("second");
    CHECK(counts.live == before.live);
    CHECK(f.message() == "second");

    // Self-assignment keeps the value, and assigns nothing: T's own
    // assignment is never asked to take itself.
    Expected<Tracked>& self = b;
    before = counts;
    b = self;
    CHECK(b->text == "b");
    b = std::move(self);
    CHECK(b->text == "b");
    CHECK(counts.copy_assigns == before.copy_assigns);
    CHECK(counts.move_assigns == before.move_assigns);
    CHECK(counts.live == before.live);
  }
  CHECK(counts.live == 0);
}

namespace {
// Move-only, and its move may throw: std::vector grows a vector of these by
// moving only if nothing says they copy (std::move_if_noexcept).
struct MoveMayThrow {
  explicit MoveMayThrow(int v) : value(v) {}
  MoveMayThrow(MoveMayThrow&& o) noexcept(false) : value(o.value) { o.value = -1; }
  MoveMayThrow& operator=(MoveMayThrow&&) = default;
  MoveMayThrow(const MoveMayThrow&) = delete;
  int value;
};
}  // namespace

static_assert(!std::is_copy_constructible<Expected<std::unique_ptr<int>>>::value &&
                  !std::is_copy_assignable<Expected<std::unique_ptr<int>>>::value,
              "an Expected of a move-only T is move-only, as std::optional's is");
static_assert(std::is_nothrow_move_constructible<Expected<std::unique_ptr<int>>>::value, "moves");
static_assert(!std::is_copy_constructible<Expected<MoveMayThrow>>::value, "move-only");
static_assert(std::is_copy_constructible<Expected<std::string>>::value &&
                  std::is_copy_assignable<Expected<std::string>>::value,
              "an Expected of a copyable T copies");

namespace {
// Copies, but cannot be assigned (a const member), like a struct holding a
// reference: its Expected copies, and is not copy-assignable, as optional.
struct ConstMember {
  const int value;
};
}  // namespace
static_assert(std::is_copy_constructible<Expected<ConstMember>>::value &&
                  !std::is_copy_assignable<Expected<ConstMember>>::value,
              "copy-assigning two held values would assign the T");
// Nor move-assignable (the traits said it was, and the assignment then
// failed to compile inside the header), as optional's; still movable.
static_assert(std::is_move_constructible<Expected<ConstMember>>::value &&
                  !std::is_move_assignable<Expected<ConstMember>>::value,
              "move-assigning two held values would assign the T");
static_assert(std::is_move_assignable<Expected<std::unique_ptr<int>>>::value &&
                  std::is_nothrow_move_assignable<Expected<std::unique_ptr<int>>>::value,
              "a move-only T's Expected move-assigns");

TEST_CASE("Expected: copyable exactly when its T is, so a vector of move-only ones grows by moving") {
  // With copies declared for every T, this did not compile: the vector
  // chose the copy over the move that may throw.
  std::vector<Expected<MoveMayThrow>> v;
  for (int i = 0; i < 40; ++i) {
    if (i % 4 == 3)
      v.emplace_back(Error::NotFound, "tensor " + std::to_string(i));
    else
      v.emplace_back(MoveMayThrow(i));
  }
  REQUIRE(v.size() == 40);
  for (int i = 0; i < 40; ++i) {
    if (i % 4 == 3) {
      CHECK(v[static_cast<std::size_t>(i)].error() == Error::NotFound);
      CHECK(v[static_cast<std::size_t>(i)].message() == "tensor " + std::to_string(i));
    } else {
      REQUIRE(v[static_cast<std::size_t>(i)].ok());
      CHECK(v[static_cast<std::size_t>(i)]->value == i);
    }
  }
}

TEST_CASE("Expected: a T without a default constructor or a copy") {
  // (optional<T> needs neither; nor does this.)
  Expected<std::unique_ptr<int>> p = std::make_unique<int>(7);
  REQUIRE(p.ok());
  CHECK(**p == 7);
  Expected<std::unique_ptr<int>> q = std::move(p);
  REQUIRE(q.ok());
  CHECK(**q == 7);
  CHECK(p->get() == nullptr);
}


TEST_CASE("Expected: the value of a failed Expected names its error and stops the program") {
  // Without the check, value() of an error read the union's uninitialized
  // storage: a vector's size came out as garbage.
  const std::string said =
      "wdedup: the value of a failed Expected was used (check ok() first); it held InvalidArgument: "
      "alignment must be positive\n";
  for (int how = 0; how < 4; ++how) {
    std::string err;
    CHECK(dies(
        [how] {
          Expected<std::vector<int>> r(Error::InvalidArgument, "alignment must be positive");
          volatile std::size_t n = how == 0   ? r->size()
                                   : how == 1 ? (*r).size()
                                   : how == 2 ? r.value().size()
                                              : std::move(r).value().size();
          (void)n;
        },
        &err));
    CHECK(err == said);
  }
  // And through a const Expected, whose accessors check on their own.
  for (int how = 0; how < 3; ++how) {
    std::string err;
    CHECK(dies(
        [how] {
          const Expected<std::vector<int>> r(Error::InvalidArgument, "alignment must be positive");
          volatile std::size_t n = how == 0 ? r->size() : how == 1 ? (*r).size() : r.value().size();
          (void)n;
        },
        &err));
    CHECK(err == said);
  }
  // A program that buffers its stderr still gets the line: it is flushed
  // before the trap, which would drop a buffer.
  {
    std::string err;
    CHECK(dies(
        [] {
          static char buffer[1024];
          std::setvbuf(stderr, buffer, _IOFBF, sizeof buffer);
          Expected<std::vector<int>> r(Error::InvalidArgument, "alignment must be positive");
          volatile std::size_t n = r->size();
          (void)n;
        },
        &err));
    CHECK(err == said);
  }
  std::string err;
  CHECK_FALSE(dies(
      [] {
        const Expected<std::vector<int>> r = std::vector<int>(3);
        volatile std::size_t n = r->size();
        (void)n;
      },
      &err));
  CHECK(err.empty());
}

TEST_CASE("Expected: made from Error::Ok where a failure is meant, it fails with InvalidArgument and says so") {
  // A policy's validate that refuses with Error::Ok was read as success,
  // and an Expected<T> without a value had error() == Ok.
  const Expected<int> t(Error::Ok, "no value");
  CHECK_FALSE(t.ok());
  CHECK(t.error() == Error::InvalidArgument);
  CHECK(t.message() == "an Expected<T> was made from Error::Ok, without a value: no value");
  const Expected<int> bare = BuildError{};
  CHECK(bare.error() == Error::InvalidArgument);
  CHECK(bare.message() == "an Expected<T> was made from Error::Ok, without a value");
  const Expected<void> refused(Error::Ok, "I refuse");
  CHECK_FALSE(refused.ok());
  CHECK(refused.error() == Error::InvalidArgument);
  CHECK(refused.message() == "an Expected<void> was made from Error::Ok with a message: I refuse");
  const Expected<void> fine(Error::Ok, "");
  CHECK(fine.ok());
  CHECK(fine.message().empty());
  const Expected<void> failed(Error::KeyConflict, "kept as it is");
  CHECK(failed.error() == Error::KeyConflict);
  CHECK(failed.message() == "kept as it is");
}

TEST_CASE("Expected<void>: a failure with an empty message is still a failure, with its code") {
  // Only Error::Ok without a message is success: ok() reads the code, not
  // whether there is a message.
  const Expected<void> io(Error::IoError, "");
  CHECK_FALSE(io.ok());
  CHECK_FALSE(static_cast<bool>(io));
  CHECK(io.error() == Error::IoError);
  CHECK(io.message().empty());
  const Expected<void> missing = BuildError{Error::NotFound, std::string()};
  CHECK_FALSE(missing.ok());
  CHECK(missing.error() == Error::NotFound);
  CHECK(missing.build_error().message.empty());
}

TEST_CASE("detail::cat: text, characters and integers in decimal; a count with its noun, singular for 1") {
  using detail::cat;
  using detail::counted;
  CHECK(cat("key ", std::string("w"), ' ', std::string_view("at"), ' ', 0, ' ', -7, ' ', UINT64_MAX, ' ',
            INT64_MIN) == "key w at 0 -7 18446744073709551615 -9223372036854775808");
  // A character is itself, whichever: a quote, a slash, a hash.
  CHECK(cat('\'', "w", '/', 7, '#', 'z') == "'w/7#z");
  // A 1-byte tensor (a bool scalar) is "1 byte", not "1 bytes".
  CHECK(cat(counted(0, "byte")) == "0 bytes");
  CHECK(cat(counted(1, "byte")) == "1 byte");
  CHECK(cat(counted(2, "byte")) == "2 bytes");
  CHECK(cat(counted(UINT64_MAX, "key")) == "18446744073709551615 keys");
  CHECK(cat(counted(1, "entry", "entries"), ", ", counted(3, "entry", "entries"), ", ",
            counted(0, "entry", "entries")) == "1 entry, 3 entries, 0 entries");
  CHECK(cat("[", counted(1, "byte"), "|", 5, "]") == "[1 byte|5]");
}

TEST_CASE("detail::errno_text_pick: strerror_r's text, whichever strerror_r the C library declares") {
  // XSI's returns 0 having filled the buffer, else an error (-1 with errno
  // set before glibc 2.13, the error itself after), for which the errno's
  // number stands in; GNU's returns the text, in the buffer or not.
  // The text is the buffer's, or GNU's own string; the buffer is written
  // only for XSI's error.
  char buf[32] = "No such file or directory";
  CHECK(detail::errno_text_pick(0, buf, sizeof buf, ENOENT) == std::string("No such file or directory"));
  CHECK(detail::errno_text_pick(ERANGE, buf, sizeof buf, 4000) == std::string("errno 4000"));
  // (A buffer of its own: in `buf` the line above left "errno 4000".)
  char stale[32] = "No such file or directory";
  CHECK(std::string(detail::errno_text_pick(-1, stale, sizeof stale, 4001)) == "errno 4001");
  char untouched[4] = "abc";
  CHECK(detail::errno_text_pick("Permission denied", untouched, sizeof untouched, EACCES) ==
        std::string("Permission denied"));
  CHECK(std::string(untouched) == "abc");
}

TEST_CASE("detail::errno_text_into: the text without an allocation, in the buffer given or the C library's") {
  char buf[256];
  CHECK(std::string(detail::errno_text_into(ENOENT, buf)) == "No such file or directory");
  CHECK(std::string(detail::errno_text_into(123456789, buf)) == std::string(std::strerror(123456789)));
}

TEST_CASE("detail::errno_text: strerror's text whole, one the C library builds in the buffer included") {
  CHECK(detail::errno_text(ENOENT) == "No such file or directory");
  // An errno no table names: glibc writes "Unknown error 123456789" into
  // the buffer it is given, 23 bytes, rather than returning a text of its own.
  CHECK(detail::errno_text(123456789) == std::string(std::strerror(123456789)));
}

TEST_CASE("detail::check_addressable: any size std::size_t holds is success; one past it OutOfMemory, said") {
  CHECK(detail::check_addressable("the file", 0).ok());
  CHECK(detail::check_addressable("the file", SIZE_MAX).ok());  // UINT64_MAX where std::size_t is 64 bits
#if SIZE_MAX < UINT64_MAX
  const Expected<void> big = detail::check_addressable("the file", std::uint64_t{SIZE_MAX} + 1);
  CHECK(big.error() == Error::OutOfMemory);
  CHECK(big.message() ==
        "the file (4294967296 bytes) does not fit in memory on this platform (std::size_t holds at most 4294967295)");
#endif
}
