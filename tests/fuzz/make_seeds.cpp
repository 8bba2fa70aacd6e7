// tests/fuzz/make_seeds.cpp — writes the wdedup-written part of the fuzz
// seed corpus into a directory (ExecuTorch's own files come from the shared
// fixtures): the small file of the runtime tests with and without its WDX1
// block, a 40-key file with function maps, and a file whose identical (empty)
// segments record alignments 2048, 2047 and 2045, whose lcm no store can take
// (the import fuzz target's one allowed deduplicate() refusal), and a plain
// file whose keys' strings overlap (which build_index refuses before it
// hashes them: a libFuzzer run reached one from many_keys_wdedup.ptd, and
// the harness expected MalformedKey), and a plain file of 130 segments
// laid out as ExecuTorch's in-place rewriter lays them out (out of offset
// order, so open() checks them for overlap 64 at a time: three passes).
// Starting from valid files is what lets the fuzzer reach past the header
// checks.
#include <cstdio>
#include <string>
#include <vector>

#include "support/overlapping_keys.hpp"
#include "support/wdedup_file.hpp"

namespace {
/// Only the bulk path (deduplicate's) can give identical bytes separate
/// buffers; add_named_data would fold them into one and refuse the lcm.
std::vector<std::uint8_t> alignment_lcm_overflow_bytes() {
  wdedup::NamedDataStore store;
  const std::pair<const char*, std::uint64_t> keys[] = {{"a", 2048}, {"b", 2047}, {"c", 2045}};
  for (const auto& [key, alignment] : keys) {
    const std::uint32_t b = wdedup::detail::StoreAccess::add_buffer(store, wdedup::ByteSpan(), alignment);
    wdedup::detail::StoreAccess::add_key(store, key, b, alignment, std::nullopt);
  }
  return wdedup_test::write_or_die(store, {}, wdedup::WriteOptions{});
}
/// 130 segments, three of them (70, 129, 100) moved first, as ExecuTorch's
/// rewriter moves the ones it replaced.
std::vector<std::uint8_t> rewritten_segments_bytes() {
  constexpr std::uint32_t n = 130;
  std::vector<std::uint8_t> bytes = wdedup_test::segments_file_bytes(n);
  wdedup_test::reorder_segments_like_executorch(bytes, n, {70, 129, 100});
  return bytes;
}
}  // namespace

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
      write_file(dir + "/many_keys_wdedup.ptd", wdedup_test::many_keys_wdedup_bytes(40, &scratch)) &&
      write_file(dir + "/alignment_lcm_overflow.ptd", alignment_lcm_overflow_bytes()) &&
      write_file(dir + "/overlapping_keys_plain.ptd", wdedup_test::overlapping_keys_file(16, false)) &&
      write_file(dir + "/rewritten_segments_plain.ptd", rewritten_segments_bytes());
  if (!ok) {
    std::fprintf(stderr, "make_seeds: cannot write into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
