// benchmarks/timed_run.hpp — runs a command and times it: wall-clock time and
// the child's CPU time, user + system, from wait4 (what the build-cost rows
// report). In a header of its own so that tests/bench.cpp can check the CPU
// time against the kernel's own count of the child's (a mutation test dropped
// the system time, and no test noticed).
#ifndef WBENCH_TIMED_RUN_HPP
#define WBENCH_TIMED_RUN_HPP

#include <cerrno>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wdedup/bench.hpp>

extern char** environ;

namespace wbench {

struct RunTime {
  double wall = -1, cpu = -1;  ///< seconds; -1 if the command failed
  int spawn_error = 0;         ///< posix_spawnp's error, if it could not start
};

/// Runs argv, output to `log`, and times it.
inline RunTime timed_run(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const double t0 = wdedup::bench::now_seconds();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    RunTime t;
    t.spawn_error = rc;
    return t;
  }
  int status = 0;
  struct rusage ru;
  while (::wait4(pid, &status, 0, &ru) < 0)
    if (errno != EINTR) return {};
  RunTime t;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return t;
  t.wall = wdedup::bench::now_seconds() - t0;
  t.cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  return t;
}

}  // namespace wbench

#endif  // WBENCH_TIMED_RUN_HPP
