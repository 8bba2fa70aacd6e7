// tests/fuzz/deduplicate_seeds.cpp — writes the hand-made seeds of the
// deduplicate() fuzz target into a directory, one per hard case of the
// identity engine, each built with the encoder of deduplicate_input.hpp (so
// they follow its format as it changes). The kept corpus
// (corpus/deduplicate/) holds what fuzzing found from them.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "deduplicate_input.hpp"

namespace {

using namespace dedup_fuzz;

// Indexes into the menus of deduplicate_input.hpp.
enum SizeAt : std::uint8_t {
  kEmpty = 0, kOne = 1, kSeven = 4, k64 = 7, k65 = 8, k2048 = 14, k2049 = 15, k4096 = 17, k65535 = 22, k65536 = 23,
  k65537 = 24, k262145 = 30, k300000 = 31
};
enum PosAt : std::uint8_t { kFirst = 0, kLast = 1, kMiddle = 2, kAt64 = 4, kAt2048 = 7, kAt65535 = 11, kAt65536 = 12 };
enum CountAt : std::uint8_t { k3 = 1, k63 = 8, k65Copies = 10, k66 = 11, k200 = 14, k300 = 15 };
// Attributes: layout choice (% 8) and alignment (>> 3).
constexpr std::uint8_t kPlain = 0, kBytes = 4, kOtherLayout = 5, kAlign2Pow31 = 22 << 3, kAlign3Pow30 = 23 << 3,
                       kAlign16 = 18 << 3, kMismatch = 7;
// Names: index into the tensor name pool; kDupName and kNoName are refused.
constexpr std::uint8_t kW = 0, kB = 1, kX = 2, kY = 3, kDecodeW = 5, kDupName = 31;

std::vector<std::pair<std::string, Encoder>> seeds() {
  std::vector<std::pair<std::string, Encoder>> out;
  auto add = [&](const char* name, Encoder e) { out.emplace_back(name, std::move(e)); };
  // Two methods of the same names and bytes: every tensor settled by its hint.
  add("hints_equal", Encoder(Encoder::config(kOneBlob, 2, false))
                         .method().fresh(kW, kPlain, k4096, 1).fresh(kB, kBytes, kOne, 2).fresh(kX, kPlain, kEmpty, 0)
                         .method().copy(kW, kPlain, 2).copy(kB, kBytes, 2).copy(kX, kPlain, 2));
  // The same names with bytes that differ at the first or the last byte, or
  // past the prefix fingerprint: no hint may be trusted.
  add("hints_differ", Encoder(Encoder::config(kPositional, 3, true))
                          .method().fresh(kW, kPlain, k4096, 2).fresh(kB, kPlain, k65, 1).fresh(kY, kPlain, k65536, 3)
                          .method().copy(kW, kPlain, 2, {kLast, 1}).copy(kB, kPlain, 2, {kFirst, 1})
                          .copy(kY, kPlain, 2, {kAt65535, 7}));
  // Big tensors equal in their first and last KiB (the adversarial shape),
  // differing at the first block boundary, in the middle, at the last byte.
  add("adversarial", Encoder(Encoder::config(kOneBlob, 3, true))
                         .method().fresh(kW, kPlain, k262145, 3).copy(kB, kPlain, 0, {kAt65536, 1})
                         .copy(kX, kPlain, 1, {kMiddle, 1}).copy(kY, kPlain, 2, {kLast, 1}).copy(kDecodeW, kPlain, 3));
  // A size class of exactly two past one block: the pair path, then the body.
  add("pair_past_block", Encoder(Encoder::config(kDisabled, 2, false))
                             .method().fresh(kW, kPlain, k65537, 2).copy(kB, kPlain, 0, {kAt65536, 9})
                             .method().fresh(kW, kPlain, k65535, 1).copy(kB, kPlain, 0));
  // 300 small copies (every third differs at its end) in two methods under
  // the same names: runs of 64 pairs, and the name check ends while the
  // other threads still compare (the guess that all are equal, its undo).
  add("many_small_pairs", Encoder(Encoder::config(kOneBlob, 3, true))
                              .method().fresh(kW, kPlain, k64, 2).repeat(k300, kEveryThird, kLast)
                              .method().fresh(kW, kPlain, k64, 2).repeat(k300, kAllEqual));
  add("guess_undone", Encoder(Encoder::config(kPositional, 2, true))
                          .method().fresh(kW, kPlain, k2048, 2).repeat(k200, kAllEqual)
                          .method().fresh(kW, kPlain, k2048, 2).repeat(k200, kAllEqual)
                          .fresh(kX, kPlain, k2048, 2).repeat(k3, kAllDiffer, kAt2048));
  // 66 tensors of 64 KiB + 1 of one size: a group of more than 64 members of
  // a whole block is split into chunks for its first block, then merged.
  add("head_chunks", Encoder(Encoder::config(kOneBlob, 2, false))
                         .method().fresh(kW, kPlain, k65537, 2).repeat(k66, kAlternate, kAt64));
  add("sixty_three_differ", Encoder(Encoder::config(kDisabled, 3, false))
                                .method().fresh(kW, kPlain, k2048, 1).repeat(k63, kAllDiffer, kLast));
  // Aliases (same pointer and size) and views into other tensors' memory.
  add("aliases_views", Encoder(Encoder::config(kOneBlob, 2, true))
                           .method().fresh(kW, kPlain, k300000, 2).alias(kB, kPlain, 0).view(kX, kPlain, 1, 0, k4096)
                           .method().view(kW, kPlain, 2, 0, k4096).alias(kY, kPlain, 1).view(kB, kPlain, 3, 1, k4096)
                           .repeat(k3, kAliases));
  // Sizes one apart, each the other's prefix (views of 64 and 2048 bytes at
  // the start of 65 and 2049): one class per size, or they merge.
  add("sizes_one_apart", Encoder(Encoder::config(kDisabled, 2, true))
                             .method().fresh(kW, kPlain, k65, 1).view(kB, kPlain, 0, 0, k64)
                             .fresh(kX, kPlain, k2049, 2).view(kY, kPlain, 0, 0, k2048).copy(kDecodeW, kPlain, 1));
  // One content under two layouts, and a tensor literally named "decode/w"
  // beside a "w" whose bytes differ between methods: keys get "~1".
  add("layouts_generated_keys", Encoder(Encoder::config(kOneBlob, 2, false))
                                    .method().fresh(kW, kBytes, k4096, 1).fresh(kDecodeW, kPlain, k4096, 0)
                                    .method(1).copy(kW, kOtherLayout, 1).copy(kB, kPlain, 1)
                                    .method(2).partition().copy(kW, kPlain, 1, {kFirst, 3}).partition()
                                    .copy(kW, kBytes, 3));
  // Equal bytes that ask for 2^31 and 3 * 2^30: their lcm is refused.
  add("lcm_overflow", Encoder(Encoder::config(kOneBlob, 2, false))
                          .method().fresh(kW, kAlign2Pow31, kSeven, 1).copy(kB, kAlign16, 0).copy(kX, kAlign3Pow30, 1));
  // The checks' refusals: a name twice in a partition, a layout of other
  // bytes, unequal partition counts under Positional, an empty method name.
  add("refused_name_twice", Encoder(Encoder::config(kOneBlob, 2, false)).method().fresh(kW, kPlain, k64, 1)
                                .fresh(kDupName, kPlain, k64, 1));
  add("refused_layout", Encoder(Encoder::config(kDisabled, 2, false)).method().fresh(kW, kMismatch, k64, 1));
  add("refused_partitions", Encoder(Encoder::config(kPositional, 2, false))
                                .method().partition().fresh(kW, kPlain, k64, 1).partition().copy(kW, kPlain, 0)
                                .method().copy(kW, kPlain, 0));
  add("refused_method_name", Encoder(Encoder::config(kOneBlob, 2, false)).method(15).fresh(kW, kPlain, kOne, 1));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
    return 2;
  }
  for (const auto& [name, e] : seeds()) {
    const std::string path = std::string(argv[1]) + "/" + name + ".ptd";  // (the replay reads *.ptd)
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok = f != nullptr && std::fwrite(e.bytes.data(), 1, e.bytes.size(), f) == e.bytes.size();
    if (f == nullptr || std::fclose(f) != 0 || !ok) {
      std::fprintf(stderr, "deduplicate_seeds: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
