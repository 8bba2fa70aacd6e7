// tests/fuzz/replay_main.cpp — the fuzz target without libFuzzer: runs every
// file named on the command line (or found in a named directory) through
// LLVMFuzzerTestOneInput once. Every configuration builds the target this
// way, so the seeds (and any crash a fuzzing run saves) are regression tests
// with gcc and without exceptions too; the asan-ubsan configuration also
// builds it with -fsanitize=fuzzer and fuzzes for a fixed number of runs.
#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
// False (with the reason on stderr) for a file that cannot be read: a
// replay that skipped it would report it as passed.
bool run_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "replay: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[65536];
  for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) bytes.insert(bytes.end(), chunk, chunk + n);
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  if (read_error) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  int files = 0;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    struct stat st {};
    if (::stat(arg.c_str(), &st) != 0) {
      std::fprintf(stderr, "replay: no such file or directory: %s\n", arg.c_str());
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (!run_file(arg)) return 1;
      ++files;
      continue;
    }
    DIR* d = ::opendir(arg.c_str());
    if (d == nullptr) {
      std::fprintf(stderr, "replay: cannot open directory %s: %s\n", arg.c_str(), std::strerror(errno));
      return 1;
    }
    int in_dir = 0;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".ptd") != 0) continue;
      if (!run_file(arg + "/" + name)) {
        ::closedir(d);
        return 1;
      }
      ++in_dir;
    }
    ::closedir(d);
    // A directory with nothing to replay is a failure, not a pass: a
    // corpus emptied or misnamed would otherwise look like one whose
    // inputs all held.
    if (in_dir == 0) {
      std::fprintf(stderr, "replay: no .ptd file in %s\n", arg.c_str());
      return 1;
    }
    files += in_dir;
  }
  if (files == 0) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argc > 0 ? argv[0] : "replay");
    return 2;
  }
  std::printf("replay: %d file%s, every invariant held\n", files, files == 1 ? "" : "s");
  return 0;
}
