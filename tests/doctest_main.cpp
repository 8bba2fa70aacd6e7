// The doctest runner shared by every test executable.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#ifdef DOCTEST_CONFIG_NO_EXCEPTIONS
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace {

// Without exceptions doctest cannot unwind out of a failed REQUIRE: it
// carries on like CHECK, into the code the REQUIRE guarded (a failed Result
// dereferenced, a missing fixture read). This listener ends the run at the
// first failed REQUIRE instead, saying where and what, with exit code 1:
// its file and line, its expression and values, and what INFO, CAPTURE and
// REQUIRE_MESSAGE logged for it (REQUIRE_VALUE's expression and error: a
// failure read "REQUIRE( required_value_.ok() )" and nothing else), as the
// console reporter says them.
struct StopOnFailedRequire : doctest::IReporter {
  explicit StopOnFailedRequire(const doctest::ContextOptions&) {}
  void log_assert(const doctest::AssertData& a) override {
    if (!a.m_failed || (a.m_at & doctest::assertType::is_require) == 0) return;
    std::cout.flush();
    std::fprintf(stderr, "%s:%d: ERROR: REQUIRE( %s ) is NOT correct (values: %s) in test case \"%s\"\n",
                 a.m_file, a.m_line, a.m_expr, a.m_decomp.c_str(), a.m_test_case->m_name);
    const doctest::IContextScope* const* contexts = doctest::IReporter::get_active_contexts();
    for (int i = 0, n = doctest::IReporter::get_num_active_contexts(); i < n; ++i) {
      std::ostringstream logged;
      contexts[i]->stringify(&logged);
      std::fprintf(stderr, "  logged: %s\n", logged.str().c_str());
    }
    std::fprintf(stderr, "built without exceptions: a failed REQUIRE ends the run here\n");
    std::fflush(stderr);
    std::_Exit(1);
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("stop_on_failed_require", 1, StopOnFailedRequire);
#endif
