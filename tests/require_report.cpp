// tests/require_report.cpp — fails on purpose, and is no test of its own:
// check_require_report.py runs it built with exceptions and without (the
// listener in doctest_main.cpp, which ends a run built without them at its
// first failed REQUIRE) and holds what a failed REQUIRE_VALUE reports in
// each: its line, its expression, the error, what CAPTURE logged for it,
// and that the test stopped there. Built without exceptions, a failure used
// to read "REQUIRE( required_value_.ok() ) is NOT correct" and no more.
#include <doctest/doctest.h>

#include <cstdio>

#include "support/require_value.hpp"
#include "wdedup/runtime/error.hpp"

TEST_CASE("a failed REQUIRE_VALUE says what failed") {
  const int tensor = 7;
  CAPTURE(tensor);
  const wdedup::Result<int> missing(wdedup::Error::NotFound, "key 'w' is not in the map", 42);
  const int value = REQUIRE_VALUE(missing);  // line 19: check_require_report.py names it
  std::printf("after the failed REQUIRE_VALUE: %d\n", value);
}
