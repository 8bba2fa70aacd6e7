// benchmarks/interrupt_json_write.cpp — for check_args.py only: loaded into
// wdedup-bench with LD_PRELOAD, it makes a double Ctrl-C land in the middle
// of the JSON's write, where no test could time one from outside (the write
// takes microseconds). The first writev(2) to a file whose name starts with
// $WBENCH_INTERRUPT_WRITES_TO (the JSON's hidden temporary: ".r.json.tmp-")
// raises SIGINT twice before writing: the first asks the run to stop at its
// next step (it has none left), the second ends it at once. Linux only
// (/proc/self/fd names the file).
#include <signal.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstdlib>
#include <cstring>

#include "shim.hpp"

namespace {

using Writev = ssize_t (*)(int, const struct iovec*, int);

Writev real_writev() {
  static const Writev real = wdedup_shim::next_symbol<Writev>("writev");
  return real;
}

/// Whether `fd` is open on a file whose name starts with `prefix`.
bool names_file_starting(int fd, const char* prefix) {
  char path[4096];
  const char* name = wdedup_shim::file_name_of(fd, path);
  return name != nullptr && std::strncmp(name, prefix, std::strlen(prefix)) == 0;
}

}  // namespace

extern "C" ssize_t writev(int fd, const struct iovec* iov, int count) {
  static bool raised = false;
  const char* prefix = std::getenv("WBENCH_INTERRUPT_WRITES_TO");
  if (!raised && prefix != nullptr && *prefix != '\0' && names_file_starting(fd, prefix)) {
    raised = true;
    ::raise(SIGINT);
    ::raise(SIGINT);
  }
  Writev real = real_writev();
  return real != nullptr ? real(fd, iov, count) : -1;
}
