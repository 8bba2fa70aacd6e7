// tests/require_report.cpp — fails on purpose, and is no test of its own:
// check_require_report.py runs it built with exceptions and without (the
// listener in doctest_main.cpp, which ends a run built without them at its
// first failed REQUIRE) and holds what a failed REQUIRE_VALUE reports in
// each: its line, its expression, the error, what CAPTURE logged for it,
// and that the test stopped there. Built without exceptions, a failure used
// to read "REQUIRE( required_value_.ok() ) is NOT correct" and no more.
// The same for a failed REQUIRE_FOUND (a lookup that found nothing), run
// as a test case of its own (--test-case=): without exceptions the first
// failed REQUIRE ends the run. And for a failed REQUIRE_VALUE of an empty
// std::optional (a tensor without a layout).
#include <doctest/doctest.h>

#include <cstdio>
#include <optional>

#include "support/require_value.hpp"
#include "wdedup/program.hpp"
#include "wdedup/runtime/error.hpp"

TEST_CASE("a failed REQUIRE_VALUE says what failed") {
  const int tensor = 7;
  CAPTURE(tensor);
  const wdedup::Result<int> missing(wdedup::Error::NotFound, "key 'w' is not in the map", 42);
  const int value = REQUIRE_VALUE(missing);  // line 25: check_require_report.py names it
  std::printf("after the failed REQUIRE_VALUE: %d\n", value);
}

TEST_CASE("a failed REQUIRE_FOUND says what was not found") {
  const int tensor = 8;
  CAPTURE(tensor);
  wdedup::Program program;
  program.add_method("prefill");
  const wdedup::Method& method = REQUIRE_FOUND(program.find_method("decode"));  // line 34: check_require_report.py names it
  std::printf("after the failed REQUIRE_FOUND: %s\n", method.name.c_str());
}

TEST_CASE("a failed REQUIRE_VALUE of an empty optional says what was empty") {
  const int tensor = 9;
  CAPTURE(tensor);
  wdedup::Tensor t;
  t.name = "w";
  const wdedup::Layout layout = REQUIRE_VALUE(t.layout);  // line 43: check_require_report.py names it
  std::printf("after the failed REQUIRE_VALUE of an optional: %zu\n", layout.sizes.size());
}
