// tests/fuzz/make_seeds.cpp — writes the wdedup-written part of the fuzz
// seed corpus into a directory (ExecuTorch's own files come from the shared
// fixtures): the small file of the runtime tests with and without its WDX1
// block, and a 40-key file with function maps. Starting from valid files is
// what lets the fuzzer reach past the header checks.
#include <cstdio>
#include <string>
#include <vector>

#include "support/wdedup_file.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  wdedup::WriteOptions plain;
  plain.wdedup_extensions = false;
  std::vector<std::vector<std::uint8_t>> scratch;
  using wdedup_test::write_file;
  const bool ok =
      write_file(dir + "/small_wdedup.ptd", wdedup_test::wdedup_file_bytes()) &&
      write_file(dir + "/small_plain.ptd", wdedup_test::write_or_die(wdedup_test::small_file_store(), {}, plain)) &&
      write_file(dir + "/many_keys_wdedup.ptd", wdedup_test::many_keys_wdedup_bytes(40, &scratch));
  if (!ok) {
    std::fprintf(stderr, "make_seeds: cannot write into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
