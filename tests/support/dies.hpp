// tests/support/dies.hpp — runs a piece of a test in a child process, for
// the tests of what stops the program (error.cpp, expected.cpp): whether
// the child was killed by a signal (the trap) rather than returning, and,
// if asked, what it wrote to stderr.
#ifndef WDEDUP_TESTS_SUPPORT_DIES_HPP
#define WDEDUP_TESTS_SUPPORT_DIES_HPP

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <string>

namespace wdedup_test {

/// Runs fn in a child; true if a signal killed it. With `err`, the child's
/// stderr is appended there (read before the child is waited for, so a full
/// pipe cannot stall it).
template <class Fn>
bool dies(Fn fn, std::string* err = nullptr) {
  int fds[2] = {-1, -1};
  if (err != nullptr && ::pipe(fds) != 0) return false;
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The test runner's own crash handlers would report the trap as a
    // failed test case: the child dies of it quietly instead.
    for (const int sig : {SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGABRT}) ::signal(sig, SIG_DFL);
    if (err != nullptr) {
      ::close(fds[0]);
      ::dup2(fds[1], 2);
    }
    fn();
    ::_exit(0);
  }
  if (err != nullptr) {
    ::close(fds[1]);
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) err->append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return false;
  return WIFSIGNALED(status);
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_DIES_HPP
