// Tests for the runtime half's stack use: every call a delegate makes (open
// by each route, lookups, loads, function maps, build_index,
// verify_segments), on the files that take its deepest paths and on files it
// refuses, writes at most kStackBudget bytes of stack, the figure the README
// gives embedded users (a task's stack is sized once, by hand).
//
// Each call runs on a thread of its own whose stack was painted
// (support/stack_paint.hpp: what that measures). Not built under a
// sanitizer, whose instrumented frames are its own (tests/meson.build).
// Built with -fno-exceptions -fno-rtti.
// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run (tests/doctest_main.cpp).
#include <doctest/doctest.h>

#include "support/wdedup_file.hpp"  // first: see the note there

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "support/stack_paint.hpp"
#include "wdedup/runtime.hpp"
#include "wdedup/runtime/verify.hpp"

using namespace wdedup;
using namespace wdedup_test;

namespace {

/// What the README promises: each runtime call writes at most this much
/// stack (the deepest, the opens, measured 5.5 KiB with GCC 12 -O2 and
/// 7.3 KiB with clang 14 -O0 on x86-64; README "Stack").
constexpr std::size_t kStackBudget = 8 * 1024;

/// Checks `f` against the budget, naming the call and the file.
template <class F>
void check_budget(const char* call, const std::string& file, F f) {
  // Once first, on this thread: a dynamically linked program's first call of
  // a libc function runs the loader's lazy binding on the caller's stack
  // (2.8 KiB on this project's AVX-512 VM: it saves the vector registers),
  // once per process. The README gives that apart; here it is out.
  f();
  const std::size_t used = stack_used(f);
  INFO(std::string(call), " on ", file, ": ", used, " bytes of stack");
  CHECK(used <= kStackBudget);
}

/// Every read a delegate makes of an open map: each key by name (layout,
/// info, a zero-copy view or a copy, a load into a buffer), each by index,
/// a missing key, and every function by each of its three names with each of
/// its tensors. The Results whose values it reads are REQUIRE-d ok first,
/// by require_readable.
void read_everything(const NamedDataMap& map, std::uint8_t* dst, std::size_t dst_size) {
  const std::size_t keys = map.get_num_keys().value();
  for (std::size_t i = 0; i < keys; ++i) {
    Result<KeyView> k = map.get_key(i);
    keep(k);
    keep(map.find(*k));
    keep(map.get_tensor_layout(*k));
    keep(map.get_data(*k));
    keep(map.load_data_into(*k, dst, dst_size));
    keep(map.key_info(i));
    keep(map.key_data(i));
    keep(map.key_layout(i));
  }
  keep(map.get_tensor_layout("no such key"));
  for (std::uint32_t s = 0; s < map.segment_count(); ++s) keep(map.segment(s));
  for (std::size_t i = 0; i < map.function_count(); ++i) {
    Result<FunctionView> f = map.function(i);
    keep(f);
    keep(map.find_function(f->method(), f->partition_index()));
    keep(map.find_function(f->function_name()));
    Result<FunctionView> g = map.find_function(f->blob_key(), f->function_name());
    keep(g);
    for (std::size_t t = 0; t < g->tensor_count(); ++t) {
      Result<FunctionTensorView> tv = g->tensor(t);
      keep(tv);
      keep(g->find_tensor(tv->tensor_name));
      keep(g->key_of(tv->tensor_name));
    }
  }
}

/// What read_everything takes the value of (the key count, each key, each
/// function by index and by blob key and name, each of those tensors),
/// REQUIRE-d ok on the test's thread before it is measured: there a failed
/// one trapped (SIGILL, no doctest report), and an assertion inside the
/// measured call would be measured with it. (The map is const and read the
/// same way: what passes here passes there.)
void require_readable(const NamedDataMap& map) {
  const std::size_t keys = REQUIRE_VALUE(map.get_num_keys());
  for (std::size_t i = 0; i < keys; ++i) {
    CAPTURE(i);
    (void)REQUIRE_VALUE(map.get_key(i));
  }
  for (std::size_t i = 0; i < map.function_count(); ++i) {
    const FunctionView f = REQUIRE_VALUE(map.function(i));
    const FunctionView g = REQUIRE_VALUE(map.find_function(f.blob_key(), f.function_name()));
    for (std::size_t t = 0; t < g.tensor_count(); ++t) {
      CAPTURE(t);
      (void)REQUIRE_VALUE(g.tensor(t));
    }
  }
}

/// The files: the small wdedup file (aliases, layouts, odd alignments,
/// three functions), a larger one (a WDX1 index of 300 keys and three
/// functions: the repeat check, the slots) and every ExecuTorch fixture.
/// Written once per process.
const std::vector<std::string>& files_under_test() {
  static const std::vector<std::string> paths = [] {
    std::vector<std::vector<std::uint8_t>> data;  // (the tensors' bytes, while they are written)
    // 300 segments out of order, as ExecuTorch's in-place rewriter leaves
    // them: open() puts them in order on the stack.
    std::vector<std::uint8_t> reordered = segments_file_bytes(300);
    reorder_segments_like_executorch(reordered, 300, {299, 7, 150});
    std::vector<std::string> out = {wdedup_file_path(),
                                    write_temp("stack_use_many_keys.ptd", many_keys_wdedup_bytes(300, &data)),
                                    write_temp("stack_use_out_of_order.ptd", reordered)};
    for (const std::string& p : fixture_paths()) out.push_back(p);
    return out;
  }();
  return paths;
}

}  // namespace

TEST_CASE("the measure: a frame of a known size is counted, whole, beyond the idle thread's") {
  // 6,000 bytes written through a volatile pointer (the writes cannot be
  // dropped), in a frame of its own.
  auto touch = [] {
    volatile unsigned char buffer[6000];
    for (std::size_t i = 0; i < sizeof buffer; ++i) buffer[i] = static_cast<unsigned char>(i);
  };
  const std::size_t used = stack_used(touch);
  // (The idle thread's own call, whose bytes the buffer's frame reuses, is
  // taken off: up to 64 bytes under; the frame's bookkeeping: a few over.)
  CHECK(used >= 6000 - 64);
  CHECK(used < 6000 + 512);
  auto nothing = [] {};
  CHECK(stack_used(nothing) < 256);
}

TEST_CASE("opening, by each route, stays within the stack budget") {
  for (const std::string& path : files_under_test()) {
    Result<MmapSource> src = MmapSource::open(path.c_str());
    REQUIRE(src.ok());
    check_budget("NamedDataMap::open(MmapSource)", path, [&] { keep(NamedDataMap::open(*src)); });
    const std::vector<std::uint8_t> bytes = read_file(path);
    BufferSource buf(bytes.data(), bytes.size());
    check_budget("NamedDataMap::open(BufferSource)", path, [&] { keep(NamedDataMap::open(buf)); });
    check_budget("MappedFile::open(path)", path, [&] { keep(MappedFile::open(path.c_str())); });
    const AlignedBytes meta = metadata_for(path);
    const Span<std::uint8_t> lent = meta.span();
    check_budget("PreadFile::open(path, memory)", path, [&] { keep(PreadFile::open(path.c_str(), lent)); });
    check_budget("PreadFile::metadata_size(path)", path, [&] { keep(PreadFile::metadata_size(path.c_str())); });
    Result<FileSource> fsrc = FileSource::open(path.c_str());
    REQUIRE(fsrc.ok());
    check_budget("NamedDataMap::open(FileSource, memory)", path, [&] { keep(NamedDataMap::open(*fsrc, lent)); });
  }
}

TEST_CASE("a refused file stays within the stack budget too") {
  // The small file cut inside its header, and cut by one byte (its last
  // segment then runs past the end): refused early and late in open().
  const std::vector<std::uint8_t>& bytes = wdedup_file_bytes();
  const std::vector<std::uint8_t> head(bytes.begin(), bytes.begin() + 30);
  const std::vector<std::uint8_t> short_by_one(bytes.begin(), bytes.end() - 1);
  const struct {
    const std::vector<std::uint8_t>* bytes;
    const char* what;
  } cases[] = {{&head, "file is smaller than the FT01 identifier and FH01 header"},
               {&short_by_one, "file ends inside the segment data (at = the segment data's end)"}};
  for (const auto& c : cases) {
    BufferSource src(c.bytes->data(), c.bytes->size());
    Result<NamedDataMap> refused = NamedDataMap::open(src);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error() == Error::Truncated);
    CHECK(std::string(refused.failure().what) == c.what);
    check_budget("NamedDataMap::open (refused)", std::to_string(c.bytes->size()) + " bytes of the small wdedup file",
                 [&] { keep(NamedDataMap::open(src)); });
  }
}

TEST_CASE("every read of an open map, build_index and verify_segments stay within the stack budget") {
  std::vector<std::uint8_t> dst(1 << 20);
  for (const std::string& path : files_under_test()) {
    Result<MappedFile> mapped = MappedFile::open(path.c_str());
    REQUIRE(mapped.ok());
    const NamedDataMap& map = mapped->map();
    require_readable(map);
    check_budget("every read (MmapSource)", path, [&] { read_everything(map, dst.data(), dst.size()); });
    const AlignedBytes meta = metadata_for(path);
    Result<PreadFile> pread = PreadFile::open(path.c_str(), meta.span());
    REQUIRE(pread.ok());
    const NamedDataMap& pmap = pread->map();
    require_readable(pmap);
    check_budget("every read (FileSource)", path, [&] { read_everything(pmap, dst.data(), dst.size()); });
    check_budget("verify_segments(map) (MmapSource)", path, [&] { keep(verify_segments(map)); });
    check_budget("verify_segments(map) (FileSource)", path, [&] { keep(verify_segments(pmap)); });
    std::uint8_t scratch[64];
    check_budget("verify_segments(map, 64 bytes)", path,
                 [&] { keep(verify_segments(pmap, Span<std::uint8_t>(scratch, sizeof scratch))); });
    if (!map.has_index()) {
      // An ExecuTorch file: the index a caller builds for O(1) lookups.
      Result<MmapSource> src = MmapSource::open(path.c_str());
      REQUIRE(src.ok());
      Result<NamedDataMap> plain = NamedDataMap::open(*src);
      REQUIRE(plain.ok());
      const std::uint64_t index_size = NamedDataMap::index_memory_size(REQUIRE_VALUE(plain->get_num_keys()));
      const AlignedBytes slots(static_cast<std::size_t>(index_size), 8);
      check_budget("build_index", path, [&] { keep(plain->build_index(slots.span())); });
      REQUIRE(plain->has_index());
      require_readable(*plain);
      check_budget("every read (built index)", path, [&] { read_everything(*plain, dst.data(), dst.size()); });
    }
  }
}

TEST_CASE("verify_segments with scratch memory keeps no 4 KiB buffer of its own: it fits a small task stack") {
  // README ("A WDX1 block that no longer matches, and verify_segments()"):
  // the overload without scratch reads a FileSource through a 4 KiB buffer
  // on the stack (about 5 KiB in all); the one given scratch memory reads
  // through that, in a frame of about 1 KiB (XXH3's state and a few words),
  // which is why a small task stack passes its own. The 8 KiB budget above
  // holds both, so it would not tell them apart. Checked on the wdedup
  // files, whose content hashes are read through the FileSource; a plain
  // file stores none and returns at once.
  std::size_t checked = 0;
  for (const std::string& path : files_under_test()) {
    const AlignedBytes meta = metadata_for(path);
    Result<PreadFile> pread = PreadFile::open(path.c_str(), meta.span());
    REQUIRE(pread.ok());
    const NamedDataMap& pmap = pread->map();
    if (!pmap.has_extension()) continue;
    ++checked;
    std::uint8_t scratch[64];
    auto with_scratch = [&] { keep(verify_segments(pmap, Span<std::uint8_t>(scratch, sizeof scratch))); };
    auto without = [&] { keep(verify_segments(pmap)); };
    // Once first, on this thread (the loader's lazy binding: check_budget),
    // and the hashes hold: every segment is read.
    CHECK(verify_segments(pmap, Span<std::uint8_t>(scratch, sizeof scratch)).ok());
    CHECK(verify_segments(pmap).ok());
    const std::size_t small = stack_used(with_scratch), big = stack_used(without);
    INFO(path, ": ", small, " bytes with 64 bytes of scratch, ", big, " without");
    CHECK(small < wdedup::detail::kVerifyChunk);
    CHECK(big >= wdedup::detail::kVerifyChunk);
  }
  CHECK(checked >= 2);
}
