// tests/fuzz/replay_main.cpp — the fuzz target without libFuzzer: runs every
// file named on the command line (or found in a named directory) through
// LLVMFuzzerTestOneInput once. Every configuration builds the target this
// way, so the seeds (and any crash a fuzzing run saves) are regression tests
// with gcc and without exceptions too; the asan-ubsan configuration also
// builds it with -fsanitize=fuzzer and fuzzes for a fixed number of runs.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
bool run_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[65536];
  for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) bytes.insert(bytes.end(), chunk, chunk + n);
  std::fclose(f);
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
      files += run_file(arg);
      continue;
    }
    DIR* d = ::opendir(arg.c_str());
    if (d == nullptr) return 1;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".ptd") == 0 && run_file(arg + "/" + name)) ++files;
    }
    ::closedir(d);
  }
  std::printf("replay: %d files, every invariant held\n", files);
  return files > 0 ? 0 : 1;
}
