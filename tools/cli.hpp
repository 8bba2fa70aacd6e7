// tools/cli.hpp — command-line pieces the demo (tools/wdedup_demo.cpp) and
// the benchmark harness (benchmarks/main.cpp) share: splitting a list flag,
// telling when two paths name one file, checking that standard output got
// what was printed, counting in words, and removing one's files when a
// signal stops the run.
// Each tool words its own refusals; these only answer.
#ifndef WDEDUP_TOOLS_CLI_HPP
#define WDEDUP_TOOLS_CLI_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "wdedup/expected.hpp"  // detail::cat, detail::counted

namespace wdedup_cli {

/// "1 key", "2 keys": a count in words for a tool's output, as the
/// library's messages give theirs (detail::counted).
inline std::string counted(std::uint64_t n, const char* noun) {
  return wdedup::detail::cat(wdedup::detail::counted(n, noun));
}

/// Everything written to stdout reached it: a full disk or a closed pipe
/// there lost it, which is a failed run, not exit 0. Says so on stderr,
/// after `program`'s name, if not.
inline bool stdout_flushed(const char* program) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "%s: writing to standard output failed: %s\n", program, std::strerror(errno));
    return false;
  }
  return true;
}

/// The items of a comma-separated list, or false if one is empty ("a,,b",
/// "dedup,"): a stray comma is refused alike by every list flag, rather than
/// taken by some and dropped by others.
inline bool split_items(const std::string& s, std::vector<std::string>* out) {
  out->clear();
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    if (comma == at) return false;
    out->push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return true;
}

/// The first two of `paths` that name one file under any two names (a
/// symbolic link, a hard link, "./": one device and inode), as {earlier,
/// later}; {0, 0} if none. A path that cannot be looked at names no file
/// here (the caller's open of it names its error).
inline std::pair<std::size_t, std::size_t> same_file_twice(const std::vector<std::string>& paths) {
  std::vector<std::pair<dev_t, ino_t>> ids(paths.size(), {0, 0});
  for (std::size_t k = 0; k < paths.size(); ++k) {
    struct stat st {};
    if (::stat(paths[k].c_str(), &st) != 0) continue;
    ids[k] = {st.st_dev, st.st_ino};
    for (std::size_t j = 0; j < k; ++j)
      if (ids[j] == ids[k]) return {j, k};
  }
  return {0, 0};
}

/// The real path of `path` (symbolic links, "." and ".." resolved), or ""
/// if it does not exist.
inline std::string real_path(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return {};
  std::string out = real;
  std::free(real);
  return out;
}

// ---- a run stopped by a signal removes its files -----------------------------
// The signals that stop a run from outside: Ctrl-C, a kill, a closed
// terminal. A tool's handler removes what the run was writing, then ends
// the process as the signal would have (exit status 128 + sig in a shell).

/// Those signals.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

/// One of the stop signals, `sig`, as handle_stop_signals (below) handles
/// each: left ignored if it was, the three held back while `handler` runs;
/// with `flags` (SA_RESTART for a handler that returns).
inline void handle_stop_signal(int sig, void (*handler)(int), int flags = 0) {
  struct sigaction old;
  if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  for (int s : kStopSignals) sigaddset(&sa.sa_mask, s);
  ::sigaction(sig, &sa, nullptr);
}

/// Handles SIGINT, SIGTERM and SIGHUP with `handler`, except a signal the
/// process was started ignoring, which stays ignored: under nohup a hangup
/// must not end the run, nor a Ctrl-C one started in the background. While
/// the handler runs, all three are held back on its thread: one arriving
/// then (a SIGHUP during a SIGTERM's unlink of a 2.5 GB file) would run a
/// second handler on top of the first, which would wait for the first to
/// end the process, forever (a review's finding, 2026-12-01). Held back, it
/// is dropped with the process.
inline void handle_stop_signals(void (*handler)(int)) {
  for (int sig : kStopSignals) handle_stop_signal(sig, handler);
}

/// In a handler, first: returns in the first handler to run only. Any
/// other, for a second signal on another thread (a double Ctrl-C while
/// worker threads run, SIGTERM beside SIGINT), waits here for the first to
/// end the process: two cleaning at once would share their state. (On the
/// first one's own thread none can run: see handle_stop_signals.)
inline void first_handler_only() noexcept {
  static std::atomic<bool> stopping{false};
  static_assert(std::atomic<bool>::is_always_lock_free, "a handler's flag must be lock-free");
  if (stopping.exchange(true))
    for (;;) ::pause();
}

/// In a handler, last: ends the process by `sig`. The default action again,
/// the signal raised (held back by the handler's mask), then let through on
/// this thread alone: the kernel delivers it at once, before any other stop
/// signal held back meanwhile, whose handler would wait forever
/// (first_handler_only).
inline void die_by(int sig) noexcept {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
}

/// The one temporary file a tool is writing, as the library reports it
/// (WriteOptions::on_temporary, detail::TemporaryWatch), for a handler to
/// remove. For a tool that writes one file at a time, on one thread.
class TemporaryFile {
 public:
  /// The on_temporary callback. A path that does not fit is not kept (none
  /// does: the kernel refuses a path of PATH_MAX bytes or more).
  static void note(const char* path, bool exists, void*) noexcept {
    live_.store(false, std::memory_order_release);
    if (!exists) return;
    const std::size_t n = std::strlen(path);
    if (n >= sizeof path_) return;
    std::memcpy(path_, path, n + 1);
    live_.store(true, std::memory_order_release);
  }
  /// In a handler: removes the file being written, if one is. (Between the
  /// writer's rename and its word that the file is gone, the name is no
  /// longer there: unlink fails, and the new destination stays.)
  static void remove() noexcept {
    if (live_.load(std::memory_order_acquire)) ::unlink(path_);
  }

 private:
  static inline char path_[PATH_MAX] = {};
  static inline std::atomic<bool> live_{false};
};

}  // namespace wdedup_cli

#endif  // WDEDUP_TOOLS_CLI_HPP
