// tests/support/stop_at_rename.cpp — an LD_PRELOAD library for
// tools/check_demo_signals.py: glibc's rename(), through which the writer
// renames its temporary file over the destination (FileOps::rename), first
// raises the signal WDEDUP_TEST_STOP_SIGNAL names (a number) when the
// destination ends with WDEDUP_TEST_STOP_AT_RENAME. The signal so arrives
// while that file's temporary exists, whole, and the destination is not yet
// replaced, however fast the write: the demo's --json report (a few KB) is
// written too fast for the check to stop the demo (SIGSTOP) in the middle
// as it does the stores. A test's tool, not the product's: the demo has no
// hook for it, and runs as users run it.
#include <fcntl.h>   // AT_FDCWD
#include <signal.h>  // raise
#include <stdio.h>   // rename, renameat: the declarations this one must match
#include <stdlib.h>  // getenv, strtol
#include <string.h>  // strlen, strcmp

extern "C" int rename(const char* from, const char* to) noexcept {
  const char* suffix = getenv("WDEDUP_TEST_STOP_AT_RENAME");
  const char* sig = getenv("WDEDUP_TEST_STOP_SIGNAL");
  if (suffix != nullptr && sig != nullptr && to != nullptr) {
    const size_t n = strlen(to), k = strlen(suffix);
    // raise(), not kill(getpid()): to this thread, so that its handler runs
    // before raise returns, never beside the rename on another thread.
    if (n >= k && strcmp(to + (n - k), suffix) == 0) raise(static_cast<int>(strtol(sig, nullptr, 10)));
  }
  // (glibc's renameat is its own system call, not this function again.)
  return renameat(AT_FDCWD, from, AT_FDCWD, to);
}
