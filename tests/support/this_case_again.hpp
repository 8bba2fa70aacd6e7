// tests/support/this_case_again.hpp — runs the current test case again in a
// fresh process, for what only a process's first moments show (the first
// source it numbers) or what a test must not do to its own process (limit
// its threads). Linux (/proc/self/exe). Not installed.
#ifndef WDEDUP_TESTS_SUPPORT_THIS_CASE_AGAIN_HPP
#define WDEDUP_TESTS_SUPPORT_THIS_CASE_AGAIN_HPP

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace wdedup_test {

/// Runs this test binary again with `env` set (the case's cue that it is the
/// child) and only the test cases `filter` names (a doctest -tc pattern),
/// and gives its wait status. The child's exit code is the case's answer;
/// 127 here is a binary that could not be run again.
inline int this_case_again(const char* env, const char* filter) {
  const std::string tc = std::string("-tc=") + filter;
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv(env, "1", 1);
    ::execl("/proc/self/exe", "/proc/self/exe", tc.c_str(), "--no-intro=true", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_THIS_CASE_AGAIN_HPP
