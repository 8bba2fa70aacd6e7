// Tests for wdedup/import.hpp: .ptd stores read back as methods of a
// Program. Imported tensors must be the reader's bytes in place (no copy),
// with every key, alignment and layout as the file says; stores exported one
// method at a time must deduplicate into one store that gives each function
// its original bytes; and every refusal names what was wrong and leaves the
// program as it was.
#include "support/instances.hpp"  // first: see there
#include "wdedup/import.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <string>
#include <vector>

#include "support/fail_each_allocation.hpp"
#include "support/program_snapshot.hpp"
#include "support/json.hpp"
#include "support/nav.hpp"
#include "support/overlapping_keys.hpp"
#include "support/require_value.hpp"
#include "support/wdedup_file.hpp"
#include "wdedup/deduplicate.hpp"
#include "wdedup/workload/llama.hpp"
#include "wdedup/ptd_writer.hpp"

using namespace wdedup;
using namespace wdedup_test;

// Every byte this process asks operator new for: what bounds the memory an
// import of a hostile file takes (the import has no allocation hook).
// Armed (tests of running out of memory), it also fails one allocation.
namespace {
std::atomic<std::uint64_t> g_new_bytes{0};
#if defined(__cpp_exceptions)
long g_fail_countdown = -1;  // fail the allocation this many allocations from now; -1: never
#endif
}  // namespace
void* operator new(std::size_t n) {
  g_new_bytes.fetch_add(n, std::memory_order_relaxed);
#if defined(__cpp_exceptions)
  if (g_fail_countdown >= 0 && g_fail_countdown-- == 0) throw std::bad_alloc();
#endif
  if (void* p = std::malloc(n ? n : 1)) return p;
#if defined(__cpp_exceptions)
  throw std::bad_alloc();
#else
  std::abort();
#endif
}
// (GCC flags free() in a replaced operator delete as a mismatch once it
// inlines the pair; here the two are matched by construction.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
// noinline: GCC 11 inlined them into the library's code above this point,
// where the pragma does not reach, and stopped the build (-Werror).
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

const Json& manifest_of(const char* name) {
  static std::deque<std::pair<std::string, Json>> cache;  // a deque: references stay valid as it grows
  for (const auto& [n, j] : cache)
    if (n == name) return j;
  const std::string path = fixture(name);
  std::optional<Json> j = parse_json(read_text(path.substr(0, path.size() - 4) + ".json"));
  REQUIRE_MESSAGE(j.has_value(), fixtures_hint());
  cache.emplace_back(name, std::move(*j));
  return cache.back().second;
}

std::unique_ptr<Opened> open_fixture(const char* name, Via via = Via::Mmap) {
  std::unique_ptr<Opened> o = open_via(via, fixture(name));
  REQUIRE_MESSAGE(o->ok(), fixtures_hint());
  return o;
}

}  // namespace

namespace {
/// simple.ptd with one byte of key "simple.b"'s bytes (its byte 3) changed:
/// the same keys, one of them holding other bytes, as a decode export's
/// attention mask differs from prefill's.
std::vector<std::uint8_t> simple_with_other_b() {
  std::vector<std::uint8_t> bytes = read_fixture("simple.ptd");
  std::unique_ptr<Opened> o = open_bytes(bytes);
  REQUIRE(o->ok());
  const KeyInfo b = REQUIRE_VALUE(o->map().key_info(1));
  const KeyView b_key = REQUIRE_VALUE(o->map().get_key(1));
  REQUIRE(key_text(b_key) == "simple.b");
  bytes[static_cast<std::size_t>(b.offset) + 3] ^= 0x5A;
  return bytes;
}
/// The end of check_keys_kept's message, after the keys it names: `them`
/// is "it" for one key, "them" for several.
std::string not_kept_why(const char* them) {
  return std::string(" (deduplicate() names each key after its tensor, and '<method>/<name>' where methods give one "
                     "name different bytes or layouts: a program that asks for ") +
         them + " by name, as an ExecuTorch program does, does not find " + them + ")";
}
/// check_keys_kept's message for a file at `path` one of whose `keys` keys,
/// `key`, the merged store lacks, holding its bytes and layout as `now`.
std::string one_key_not_kept(const std::string& path, int keys, const std::string& key, const std::string& now) {
  return path + ": check_keys_kept: 1 of the file's " + std::to_string(keys) + " keys is not in the merged store: '" +
         key + "' (now '" + now + "')" + not_kept_why("it");
}
}  // namespace

TEST_CASE("import: every key of an ExecuTorch file becomes a tensor over the file's own bytes") {
  for (const char* name : {"simple.ptd", "layouts.ptd", "alignment.ptd", "aliases.ptd", "large_segment.ptd",
                           "empty.ptd", "many_keys.ptd"}) {
    CAPTURE(name);
    for (Via via : {Via::Mmap, Via::Buffer}) {
      CAPTURE(via_name(via));
      std::unique_ptr<Opened> o = open_fixture(name, via);
      const Json& m = manifest_of(name);
      Program program;
      program.add_method("existing");
      REQUIRE(add_ptd_method(program, o->map(), "prefill").ok());
      REQUIRE(program.methods.size() == 2);
      const Method& method = program.methods[1];
      CHECK(method.name == "prefill");
      REQUIRE(method.partitions.size() == 1);
      const std::vector<Tensor>& t = method.partitions[0].tensors;
      const Json& keys = m["keys"];
      REQUIRE(t.size() == keys.items.size());
      for (std::size_t i = 0; i < t.size(); ++i) {
        CAPTURE(i);
        const Json& k = keys[i];
        CHECK(t[i].name == k["key"].as_string());
        CHECK(t[i].bytes.size() == k["size"].as_uint());
        // In place: the tensor points at the key's offset in the source.
        CHECK(t[i].bytes.data() == o->source->view(0, o->source->size()) + k["offset"].as_uint());
        // ExecuTorch does not record the alignment asked for: inferred from
        // the segment's offset from the segment base or in the file,
        // whichever is the more aligned, up to 4096.
        auto p2 = [](std::uint64_t x) { return x == 0 ? 4096 : std::min<std::uint64_t>(4096, x & (~x + 1)); };
        const std::uint64_t abs = k["offset"].as_uint();
        const std::uint64_t rel = abs - m["header"]["segment_base_offset"].as_uint();
        CHECK(t[i].alignment == static_cast<std::int64_t>(std::max(p2(rel), p2(abs))));
        const Json& l = k["layout"];
        REQUIRE(t[i].layout.has_value() == !l.is_null());
        if (l.is_null()) continue;
        CHECK(static_cast<int>(t[i].layout->scalar_type) == l["scalar_type_value"].as_int());
        REQUIRE(t[i].layout->sizes.size() == l["sizes"].items.size());
        for (std::size_t d = 0; d < t[i].layout->sizes.size(); ++d)
          CHECK(t[i].layout->sizes[d] == l["sizes"][d].as_int());
        REQUIRE(t[i].layout->dim_order.size() == l["dim_order"].items.size());
        for (std::size_t d = 0; d < t[i].layout->dim_order.size(); ++d)
          CHECK(t[i].layout->dim_order[d] == l["dim_order"][d].as_int());
      }
    }
  }
}

TEST_CASE("import: the alignment of an ExecuTorch file's keys, inferred or what the caller says") {
  // alignment.ptd: segments at 0, 128, 384 and 4096 past the base (512); the
  // generator asked for 1, 64 (and 4096 through an alias ExecuTorch did not
  // honour), 3 and 4096.
  std::unique_ptr<Opened> a = open_fixture("alignment.ptd");
  Program inferred;
  REQUIRE(add_ptd_method(inferred, a->map(), "m").ok());
  const std::vector<Tensor>& at = inferred.methods[0].partitions[0].tensors;
  REQUIRE(at.size() == 6);
  const std::int64_t want[] = {4096, 128, 128, 4096, 128, 4096};
  for (std::size_t i = 0; i < 6; ++i) {
    CAPTURE(at[i].name);
    CHECK(at[i].alignment == want[i]);
  }
  CHECK(at[3].name == "align4096");

  std::unique_ptr<Opened> o = open_fixture("simple.ptd");
  Program program;
  ImportOptions options;
  options.unrecorded_alignment = 4096;
  REQUIRE(add_ptd_method(program, o->map(), "m", options).ok());
  const std::vector<Tensor>& t = program.methods[0].partitions[0].tensors;
  REQUIRE(t.size() == 3);
  for (const Tensor& x : t) CHECK(x.alignment == 4096);
  options.unrecorded_alignment = 3;  // any positive integer, as for add_named_data
  REQUIRE(add_ptd_method(program, o->map(), "n", options).ok());
  CHECK(program.methods[1].partitions[0].tensors[2].alignment == 3);
  options.unrecorded_alignment = std::int64_t{1} << 32;  // the largest
  REQUIRE(add_ptd_method(program, o->map(), "o", options).ok());
  REQUIRE(program.methods[2].partitions[0].tensors.size() == 3);
  for (const Tensor& x : program.methods[2].partitions[0].tensors) CHECK(x.alignment == (std::int64_t{1} << 32));
}

TEST_CASE("import: a wdedup file gives back its recorded alignments, layouts and aliases") {
  // The small store written without function maps: one method's export.
  WriteOptions plain;
  plain.hash_seed = kSmallFileSeed;
  std::unique_ptr<Opened> o = open_bytes(write_or_die(small_file_store(), FunctionMaps{}, plain));
  REQUIRE(o->ok());
  Program program;
  ImportOptions options;
  options.unrecorded_alignment = 128;  // not used: the file records each key's alignment
  REQUIRE(add_ptd_method(program, o->map(), "back", options).ok());
  const std::vector<ExpectedKey>& want = small_file_keys();
  const std::vector<Tensor>& t = program.methods[0].partitions[0].tensors;
  REQUIRE(t.size() == want.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    CAPTURE(want[i].key);
    CHECK(t[i].name == want[i].key);
    CHECK(t[i].alignment == static_cast<std::int64_t>(want[i].alignment));
    CHECK(t[i].layout.has_value() == want[i].has_layout);
    REQUIRE(t[i].bytes.size() == want[i].bytes.size());
    if (!want[i].bytes.empty()) CHECK(std::memcmp(t[i].bytes.data(), want[i].bytes.data(), want[i].bytes.size()) == 0);
  }
  // w.q and w.v name one segment: one memory range, read once by deduplicate.
  CHECK(t[0].bytes.data() == t[2].bytes.data());
  CHECK(*t[2].layout == Layout::channels_last(ScalarType::Float, {1, 4, 2, 2}));
  CHECK(*t[5].layout == Layout::contiguous(ScalarType::Float, {0, 3}));
}

TEST_CASE("import: over memory at any address (lent metadata), tensors point into it, not at copies") {
  // Such a map copies a key whose bytes the memory does not align as the
  // key asks; a tensor pointing at that copy would dangle once it is freed.
  WriteOptions plain;
  plain.hash_seed = kSmallFileSeed;
  std::unique_ptr<Opened> o = open_bytes_lent(write_or_die(small_file_store(), FunctionMaps{}, plain), 1);
  REQUIRE(o->ok());
  const AlignedBytes& at = o->bytes;
  Program program;
  REQUIRE(add_ptd_method(program, o->map(), "back").ok());
  const std::vector<ExpectedKey>& want = small_file_keys();
  const std::vector<Tensor>& t = program.methods[0].partitions[0].tensors;
  REQUIRE(t.size() == want.size());
  std::vector<std::string> copied;  // keys get_data copies here: the case this is about
  for (std::size_t i = 0; i < t.size(); ++i) {
    CAPTURE(want[i].key);
    REQUIRE(t[i].bytes.size() == want[i].bytes.size());
    if (want[i].bytes.empty()) continue;
    CHECK(t[i].bytes.data() >= at.data());
    CHECK(t[i].bytes.data() + t[i].bytes.size() <= at.data() + at.size());
    CHECK(std::memcmp(t[i].bytes.data(), want[i].bytes.data(), want[i].bytes.size()) == 0);
    if (REQUIRE_VALUE(o->map().key_data(i)).owns_memory()) copied.push_back(want[i].key);
  }
  // One byte past an aligned address: the keys asking more than byte
  // alignment (64, 16, 4096); not norm and raw (1), nor odd3 (3, whose
  // power-of-two part is 1: get_data's rule), and empty has no bytes.
  CHECK(copied == std::vector<std::string>{"w.q", "w.k", "w.v"});
}

TEST_CASE("import: stores exported one method at a time deduplicate into one store") {
  // Two copies of aliases.ptd in separate memory stand for a prefill and a
  // decode export: the same six keys over four distinct contents each.
  std::unique_ptr<Opened> a = open_fixture("aliases.ptd", Via::Mmap);
  std::unique_ptr<Opened> b = open_fixture("aliases.ptd", Via::Buffer);
  // And simple.ptd as a third method sharing nothing.
  std::unique_ptr<Opened> c = open_fixture("simple.ptd", Via::Buffer);
  Program program;
  REQUIRE(add_ptd_method(program, a->map(), "prefill").ok());
  REQUIRE(add_ptd_method(program, b->map(), "decode").ok());
  REQUIRE(add_ptd_method(program, c->map(), "other").ok());
  Expected<DedupResult> r = deduplicate<Strategy<Positional>>(program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  // 4 contents of aliases.ptd (512 + 256 + 96 + 80 bytes) and simple.ptd's 3
  // (37 + 100 + 256), each stored once.
  CHECK(r->store.buffer_count() == 7);
  CHECK(r->store.bytes_stored() == 512 + 256 + 96 + 80 + 37 + 100 + 256);
  CHECK(r->report.bytes_in == 2 * (512 + 256 + 96 + 512 + 256 + 80) + 37 + 100 + 256);
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(r->store, r->functions);
  REQUIRE_MESSAGE(file.ok(), file.message());
  std::unique_ptr<Opened> merged = open_bytes(*file);
  REQUIRE(merged->ok());
  // Every function gives each of its tensors the bytes of the original key.
  const Opened* originals[] = {a.get(), b.get(), c.get()};
  const char* methods[] = {"prefill", "decode", "other"};
  for (int mi = 0; mi < 3; ++mi) {
    CAPTURE(methods[mi]);
    Result<FunctionView> f = merged->map().find_function(methods[mi], 0);
    REQUIRE(f.ok());
    const NamedDataMap& orig = originals[mi]->map();
    const std::size_t orig_keys = REQUIRE_VALUE(orig.get_num_keys());
    REQUIRE(f->tensor_count() == orig_keys);
    for (std::size_t i = 0; i < orig_keys; ++i) {
      const KeyView name = REQUIRE_VALUE(orig.get_key(i));
      CAPTURE(std::string(name.data(), name.size()));
      Result<KeyView> key = f->key_of(name);
      REQUIRE(key.ok());
      Result<DataBuffer> got = merged->map().get_data(*key);
      Result<DataBuffer> want = orig.get_data(name);
      REQUIRE(got.ok());
      REQUIRE(want.ok());
      REQUIRE(got->size() == want->size());
      CHECK(std::memcmp(got->data(), want->data(), want->size()) == 0);
    }
  }
}

TEST_CASE("import: refusals are typed, name what was wrong and leave the program unchanged") {
  std::unique_ptr<Opened> o = open_fixture("simple.ptd");
  Program program;
  REQUIRE(add_ptd_method(program, o->map(), "prefill").ok());
  REQUIRE(program.methods.size() == 1);
  CHECK(program.methods[0].name == "prefill");
  CHECK(program.methods[0].partitions[0].tensors.size() == 3);
  const std::string before = snapshot(program);
  auto unchanged = [&] { CHECK(snapshot(program) == before); };

  Expected<void> e = add_ptd_method(program, o->map(), "");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_method: the method name is empty");
  unchanged();

  e = add_ptd_method(program, o->map(), std::string("de\0code", 7));
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_method: the method name 'de\\x00code' contains a NUL byte at offset 2");
  unchanged();

  e = add_ptd_method(program, o->map(), "prefill");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_method: method 'prefill' is already in the program");
  unchanged();

  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{-16}, (std::int64_t{1} << 32) + 1}) {
    ImportOptions options;
    options.unrecorded_alignment = bad;
    e = add_ptd_method(program, o->map(), "decode", options);
    CHECK(e.error() == Error::InvalidAlignment);
    CHECK(e.message() == "add_ptd_method: unrecorded_alignment " + std::to_string(bad) +
                             " is not 0 (infer) or in 1..4294967296");
    unchanged();
  }

  // Opened through pread: the bytes would be copies, which no tensor owns.
  // Refused before any key is read.
  std::unique_ptr<Opened> f = open_fixture("simple.ptd", Via::File);
  e = add_ptd_method(program, f->map(), "decode");
  CHECK(e.error() == Error::InvalidArgument);
  const std::string not_in_memory =
      ": the store is not in memory (its source copies what it reads, as a FileSource does); open it over an "
      "MmapSource or a BufferSource so that tensors can point into it";
  CHECK(e.message() == "add_ptd_method" + not_in_memory);
  unchanged();

  // A store deduplicate() wrote has methods and partitions: one method
  // would lose them.
  std::unique_ptr<Opened> w = open_via(Via::Mmap, wdedup_file_path());
  REQUIRE(w->ok());
  e = add_ptd_method(program, w->map(), "decode");
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() ==
        "add_ptd_method: the store has 3 function maps (methods and partitions); add_ptd_program restores them");
  unchanged();
  // And add_ptd_program wants them.
  e = add_ptd_program(program, o->map());
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() == "add_ptd_program: the store has no function maps; add_ptd_method imports it as one method");
  unchanged();
  std::unique_ptr<Opened> wf = open_via(Via::File, wdedup_file_path());
  REQUIRE(wf->ok());
  e = add_ptd_program(program, wf->map());
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() == "add_ptd_program" + not_in_memory);
  unchanged();
}

namespace {

/// simple.ptd with its key "simple.<last>" (8 characters; 'b' by default,
/// the second of "simple.a", "simple.b" and "simple.c") patched: `edit`
/// gets the position of the key's length, then its characters.
template <class Edit>
std::unique_ptr<Opened> simple_with_key(const Edit& edit, char last = 'b') {
  std::vector<std::uint8_t> bytes = read_fixture("simple.ptd");
  const std::uint8_t b_key[] = {8, 0, 0, 0, 's', 'i', 'm', 'p', 'l', 'e', '.', static_cast<std::uint8_t>(last), 0};
  const std::size_t at = only_place_of(bytes, b_key, sizeof b_key);
  edit(bytes.data() + at, bytes.data() + at + 4);
  std::unique_ptr<Opened> o = open_bytes(bytes);
  REQUIRE(o->ok());  // ExecuTorch's reader takes each of these files too
  return o;
}

}  // namespace

TEST_CASE("import: keys no tensor name can be (twice, empty, with a NUL, not UTF-8) are refused, naming key and index") {
  Program program;
  std::unique_ptr<Opened> twice = simple_with_key([](std::uint8_t*, std::uint8_t* c) { c[7] = 'a'; });
  Expected<void> e = add_ptd_method(program, twice->map(), "m");
  CHECK(e.error() == Error::MalformedKey);
  CHECK(e.message() == "add_ptd_method: key 'simple.a' appears twice, as keys #0 and #1");
  // Apart: the key named first is the first with that name, not the one
  // before the repeat.
  std::unique_ptr<Opened> apart = simple_with_key([](std::uint8_t*, std::uint8_t* c) { c[7] = 'a'; }, 'c');
  e = add_ptd_method(program, apart->map(), "m");
  CHECK(e.error() == Error::MalformedKey);
  CHECK(e.message() == "add_ptd_method: key 'simple.a' appears twice, as keys #0 and #2");
  std::unique_ptr<Opened> nul = simple_with_key([](std::uint8_t*, std::uint8_t* c) { c[6] = 0; });
  e = add_ptd_method(program, nul->map(), "m");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_method: key #1 'simple\\x00b' contains a NUL byte at offset 6");
  // A key ExecuTorch's C++ writer could write but deduplicate() could not
  // take as a tensor name, as no key can be one: not UTF-8.
  std::unique_ptr<Opened> stray = simple_with_key([](std::uint8_t*, std::uint8_t* c) { c[7] = 0xFF; });
  e = add_ptd_method(program, stray->map(), "m");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_method: key #1 'simple.\\xff' is not valid UTF-8 at offset 7; a key is a flatbuffer "
                       "string, which is UTF-8, and ExecuTorch's Python reader (flatc --json) cannot read a file "
                       "holding one that is not");
  // And a method name: keys are made of it ('<method>/<name>').
  e = add_ptd_method(program, twice->map(), "m\xff");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_method: the method name 'm\\xff' is not valid UTF-8 at offset 1 (keys are made of "
                       "method names: '<method>/<name>'); a key is a flatbuffer string, which is UTF-8, and "
                       "ExecuTorch's Python reader (flatc --json) cannot read a file holding one that is not");
  std::unique_ptr<Opened> empty = simple_with_key([](std::uint8_t* len, std::uint8_t* c) {
    len[0] = 0;
    c[0] = 0;
  });
  e = add_ptd_method(program, empty->map(), "m");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_method: key #1 is empty");
  CHECK(program.methods.empty());
}

TEST_CASE("import: keys whose strings overlap in the file are refused before any is read or copied") {
  // 64 keys of 4 to 256 bytes that are suffixes of one pool (8,640 bytes of
  // keys in a 1,081-byte flatbuffer): a plain file the reader opens.
  const std::vector<std::uint8_t> file = overlapping_keys_file(64, false);
  const BufferSource source(file.data(), file.size());
  const Result<NamedDataMap> map = NamedDataMap::open(source);
  REQUIRE(map.ok());
  REQUIRE(map->keys_overlap());
  Program program;
  const Expected<void> e = add_ptd_method(program, *map, "m");
  CHECK(e.error() == Error::MalformedKey);
  CHECK(e.message() == "add_ptd_method: the store's 64 key strings overlap in the file (they add up to more bytes "
                       "than its flatbuffer holds): copying each would take far more memory than the file; no "
                       "writer makes such keys");
  CHECK(program.methods.empty());
  // Every file a writer made has keys that do not overlap.
  for (const std::string& path : fixture_paths()) {
    CAPTURE(path);
    const std::vector<std::uint8_t> bytes = read_file(path);
    const BufferSource s(bytes.data(), bytes.size());
    const Result<NamedDataMap> m = NamedDataMap::open(s);
    REQUIRE(m.ok());
    CHECK(!m->keys_overlap());
  }
}

namespace {
/// layouts.ptd with key 5's layout, int32 [2, 2, 2] over 32 bytes, made
/// [2, 2, `last`]. Its sizes vector (length 3, then 2, 2, 2) occurs once in
/// the file.
std::unique_ptr<Opened> layouts_with_last_size(std::uint8_t last) {
  std::vector<std::uint8_t> bytes = read_fixture("layouts.ptd");
  const std::uint8_t sizes_2x2x2[] = {3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0};
  bytes[only_place_of(bytes, sizes_2x2x2, sizeof sizes_2x2x2) + 12] = last;
  std::unique_ptr<Opened> o = open_bytes(bytes);
  REQUIRE(o->ok());
  return o;
}
}  // namespace

TEST_CASE("import: a layout smaller than its segment is LayoutMismatch, naming key and sizes") {
  // layouts.ptd key 5 is int32 [2, 2, 2] over 32 bytes (keys 0-4 import
  // fine first); [2, 2, 1] describes 16 bytes, which ExecuTorch's reader
  // (and ours) accepts.
  std::unique_ptr<Opened> o = layouts_with_last_size(1);
  Program program;
  Expected<void> e = add_ptd_method(program, o->map(), "m");
  CHECK(e.error() == Error::LayoutMismatch);
  CHECK(e.message() == "add_ptd_method: key #5 'int32.2x2x2': its layout describes 16 bytes, its segment holds 32");
  CHECK(program.methods.empty());
  // [2, 2, 4] describes 64 bytes, more than the segment holds: a layout
  // that breaks its rules, which the file opens with (as ExecuTorch's
  // reader does) and the import refuses, not taken as no layout.
  o = layouts_with_last_size(4);
  e = add_ptd_method(program, o->map(), "m");
  CHECK(e.error() == Error::MalformedLayout);
  CHECK(e.message() == "add_ptd_method: key #5 'int32.2x2x2': layout describes more bytes than its segment holds "
                       "(MalformedLayout at 476)");
  CHECK(program.methods.empty());
}

TEST_CASE("import: a map whose source was replaced since it was opened is refused before a tensor points into it") {
  // The same bytes at another address, of the same size: the map's checks
  // of the store (in memory, its size) pass, its check_source() does not.
  const std::vector<std::uint8_t> bytes = read_fixture("simple.ptd"), copy = bytes;
  BufferSource source(bytes.data(), bytes.size());
  const Result<NamedDataMap> map = NamedDataMap::open(source);
  REQUIRE(map.ok());
  source = BufferSource(copy.data(), copy.size());
  Program program;
  const Expected<void> e = add_ptd_method(program, *map, "m");
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() == "add_ptd_method: key #0 'simple.a': the source is not the one opened (moved or replaced since "
                       "open) (InvalidArgument at " + std::to_string(bytes.size()) + ")");
  CHECK(program.methods.empty());
}

TEST_CASE("add_ptd_program: a store deduplicate() wrote comes back as its methods and partitions") {
  std::unique_ptr<Opened> o = open_via(Via::Mmap, wdedup_file_path());
  REQUIRE(o->ok());
  Program program;
  program.add_method("other");
  REQUIRE(add_ptd_program(program, o->map()).ok());
  // The small file's functions: prefill#0 {wq: w.q, wk: w.k, norm: norm},
  // decode#0 {wv: w.v, wk: w.k}, decode#1 {odd: odd3, e: empty, raw: raw};
  // each partition's tensors in the order of their keys (the order
  // deduplicate() first used them), not the table's (by name).
  REQUIRE(program.methods.size() == 3);
  const Method& prefill = program.methods[1];
  const Method& decode = program.methods[2];
  CHECK(prefill.name == "prefill");
  CHECK(decode.name == "decode");
  REQUIRE(prefill.partitions.size() == 1);
  REQUIRE(decode.partitions.size() == 2);
  struct Want {
    const char* name;
    std::size_t key;  // index into small_file_keys()
  };
  const std::vector<std::vector<Want>> want = {
      {{"wq", 0}, {"wk", 1}, {"norm", 3}}, {{"wk", 1}, {"wv", 2}}, {{"odd", 4}, {"e", 5}, {"raw", 6}}};
  const Partition* parts[] = {&prefill.partitions[0], &decode.partitions[0], &decode.partitions[1]};
  const std::vector<ExpectedKey>& keys = small_file_keys();
  for (std::size_t p = 0; p < 3; ++p) {
    CAPTURE(p);
    REQUIRE(parts[p]->tensors.size() == want[p].size());
    for (std::size_t i = 0; i < want[p].size(); ++i) {
      const Tensor& t = parts[p]->tensors[i];
      const ExpectedKey& k = keys[want[p][i].key];
      CAPTURE(t.name);
      CHECK(t.name == want[p][i].name);
      CHECK(t.alignment == static_cast<std::int64_t>(k.alignment));
      CHECK(t.layout.has_value() == k.has_layout);
      REQUIRE(t.bytes.size() == k.bytes.size());
      if (!k.bytes.empty()) CHECK(std::memcmp(t.bytes.data(), k.bytes.data(), k.bytes.size()) == 0);
    }
  }
  // Refusals change nothing: the methods are there now.
  const std::string before = snapshot(program);
  Expected<void> e = add_ptd_program(program, o->map());
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_program: method 'prefill' is already in the program (a store's methods keep their "
                      "names: where a file named after its path took that one, add the store first; two stores that "
                      "both hold it do not merge)");
  CHECK(program.methods.size() == 3);
  CHECK(snapshot(program) == before);
}

namespace {
/// `program` deduplicated under S, written, imported back from the file and
/// deduplicated again. The second result's tensors are views of the opened
/// file, which is kept with it.
struct Reimported {
  DedupResult first;
  std::unique_ptr<Opened> file;
  DedupResult second;
};
template <class S>
Reimported dedup_import_dedup(const Program& program) {
  Expected<DedupResult> r1 = deduplicate<S>(program);
  REQUIRE(r1.ok());
  Expected<std::vector<std::uint8_t>> file = serialize_ptd(r1->store, r1->functions);
  REQUIRE(file.ok());
  std::unique_ptr<Opened> o = open_bytes(*file);
  REQUIRE(o->ok());
  Program restored;
  REQUIRE(add_ptd_program(restored, o->map()).ok());
  REQUIRE(restored.methods.size() == program.methods.size());
  for (std::size_t m = 0; m < program.methods.size(); ++m)
    CHECK(restored.methods[m].partitions.size() == program.methods[m].partitions.size());
  Expected<DedupResult> r2 = deduplicate<S>(restored);
  REQUIRE_MESSAGE(r2.ok(), r2.message());
  return {std::move(r1).value(), std::move(o), std::move(r2).value()};
}
}  // namespace

TEST_CASE("add_ptd_program: deduplicating what it restores gives the same store and functions") {
  LlamaConfig c = LlamaConfig::tiny();
  c.prefill_partitions = 3;
  c.decode_partitions = 2;
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  REQUIRE(w->program().methods.size() == 2);
  CHECK(w->program().methods[0].partitions.size() == 3);
  CHECK(w->program().methods[1].partitions.size() == 2);
  const Reimported r = dedup_import_dedup<Strategy<OneBlob>>(w->program());
  const DedupResult* const r1 = &r.first;
  const DedupResult* const r2 = &r.second;
  CHECK(r2->store.key_count() == r1->store.key_count());
  CHECK(r2->store.buffer_count() == r1->store.buffer_count());
  CHECK(r2->store.bytes_stored() == r1->store.bytes_stored());
  REQUIRE(r2->functions.functions.size() == r1->functions.functions.size());
  std::size_t rows = 0;
  for (const FunctionMap& f1 : r1->functions.functions) {
    CAPTURE(f1.function_name);
    const FunctionMap* f2 = r2->functions.find(f1.method, f1.partition_index);
    REQUIRE(f2 != nullptr);
    CHECK(f2->function_name == f1.function_name);
    CHECK(f2->blob_key == f1.blob_key);
    REQUIRE(f2->tensors.size() == f1.tensors.size());
    for (const FunctionTensor& t1 : f1.tensors) {
      const auto t2 = std::find_if(f2->tensors.begin(), f2->tensors.end(),
                                   [&](const FunctionTensor& t) { return t.tensor_name == t1.tensor_name; });
      REQUIRE(t2 != f2->tensors.end());
      const ByteSpan b1 = r1->store.bytes_of(t1.key), b2 = r2->store.bytes_of(t2->key);
      REQUIRE(b1.size() == b2.size());
      CHECK(std::memcmp(b1.data(), b2.data(), b1.size()) == 0);
      ++rows;
    }
  }
  CHECK(rows == r1->report.tensors);
}

namespace {
/// A store of one 32-byte key, "w", written with function maps `maps`.
std::vector<std::uint8_t> one_key_file(const FunctionMaps& maps) {
  NamedDataStore store;
  const std::vector<std::uint8_t> bytes = pattern(32, 9);
  REQUIRE(store.add_named_data("w", ByteSpan(bytes.data(), bytes.size())).ok());
  return write_or_die(store, maps, WriteOptions{});
}
}  // namespace

TEST_CASE("import: a wdedup store whose bytes changed since it was written is refused, naming the segment") {
  // One byte of the one segment (32 bytes, "w") flipped: its content hash,
  // recorded in the WDX1 block, no longer matches. A merge would otherwise
  // write the bad bytes into a file whose fresh hash matches them.
  for (const bool with_functions : {false, true}) {
    CAPTURE(with_functions);
    FunctionMaps maps;
    if (with_functions) maps.functions.push_back({"decode", 0, "blob", "decode__0", {{"w", "w"}}});
    std::vector<std::uint8_t> bytes = one_key_file(maps);
    std::uint64_t offset = 0, size = 0;
    {
      std::unique_ptr<Opened> clean = open_bytes(bytes);
      REQUIRE(clean->ok());
      REQUIRE(clean->map().segment_count() == 1);
      const Result<SegmentInfo> seg = clean->map().segment(0);
      REQUIRE(seg.ok());
      REQUIRE(seg->has_content_hash);
      offset = seg->offset;
      size = seg->size;
      CHECK(size == 32);
    }
    bytes[static_cast<std::size_t>(offset) + 5] ^= 0x40;
    std::unique_ptr<Opened> o = open_bytes(bytes);
    REQUIRE(o->ok());  // open() reads no segment's bytes
    const char* who = with_functions ? "add_ptd_program" : "add_ptd_method";
    Program program;
    program.add_method("other").add_partition();
    const std::string before = snapshot(program);
    Expected<void> e = with_functions ? add_ptd_program(program, o->map()) : add_ptd_method(program, o->map(), "m");
    CHECK(e.error() == Error::MalformedSegment);
    CHECK(e.message() == std::string(who) + ": segment #0 (32 bytes at offset " + std::to_string(offset) +
                             ") does not have the content hash the file records: its bytes (or that hash) "
                             "changed since it was written (ImportOptions::verify_content_hashes = false takes "
                             "them as they are)");
    CHECK(snapshot(program) == before);
    // Through PtdFiles (the demo's and the merge example's way in), the
    // path first.
    const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/import_changed_bytes.ptd";
    REQUIRE(write_file(path, bytes));
    PtdFiles files;
    e = files.add(program, path);
    CHECK(e.error() == Error::MalformedSegment);
    CHECK(e.message() == path + ": " + who + ": segment #0 (32 bytes at offset " + std::to_string(offset) +
                             ") does not have the content hash the file records: its bytes (or that hash) changed "
                             "since it was written (ImportOptions::verify_content_hashes = false takes them as they "
                             "are)");
    CHECK(files.size() == 0);
    CHECK(snapshot(program) == before);
    // Asked to, the import takes the bytes as they are.
    ImportOptions as_they_are;
    as_they_are.verify_content_hashes = false;
    REQUIRE((with_functions ? add_ptd_program(program, o->map(), as_they_are)
                            : add_ptd_method(program, o->map(), "m", as_they_are))
                .ok());
    REQUIRE(program.methods.size() == 2);
    const Tensor& w = program.methods[1].partitions[0].tensors.at(0);
    REQUIRE(w.bytes.size() == 32);
    CHECK(w.bytes.data()[5] == (pattern(32, 9)[5] ^ 0x40));
  }
}

TEST_CASE("import: segments naming one range are each checked against their own recorded hash") {
  // open() allows segments that are disjoint or identical, and the hash
  // check hashes each distinct range once, then compares that hash with
  // every recorded one. No writer of ours makes two segments of one range,
  // so this file is made so by hand: keys a, b and c in their own segments
  // (a and b the same 64 bytes, so the same recorded hash; c other bytes),
  // then b's segment, or b's and c's, pointed at a's bytes, in the
  // flatbuffer and in the key's WDX1 entry alike.
  NamedDataStore store;
  const std::vector<std::uint8_t> same = pattern(64, 7), other = pattern(64, 8);
  const std::pair<const char*, const std::vector<std::uint8_t>*> keys[] = {{"a", &same}, {"b", &same}, {"c", &other}};
  for (const auto& [key, bytes] : keys) {
    const std::uint32_t buf =
        wdedup::detail::StoreAccess::add_buffer(store, ByteSpan(bytes->data(), bytes->size()), 64);
    wdedup::detail::StoreAccess::add_key(store, key, buf, 64, std::nullopt);
  }
  const std::vector<std::uint8_t> written = write_or_die(store, {}, WriteOptions{});
  std::uint64_t a_offset = 0;  // absolute: what messages and KeyInfo give
  {
    std::unique_ptr<Opened> o = open_bytes(written);
    REQUIRE(o->ok());
    REQUIRE(o->map().segment_count() == 3);
    SegmentInfo seg[3];
    for (std::uint32_t i = 0; i < 3; ++i) {
      const Result<KeyInfo> k = o->map().key_info(i);
      REQUIRE(k.ok());
      REQUIRE(k->key == keys[i].first);
      REQUIRE(k->segment_index == i);
      seg[i] = REQUIRE_VALUE(o->map().segment(i));
      REQUIRE(seg[i].has_content_hash);
    }
    CHECK(seg[0].content_hash == seg[1].content_hash);
    CHECK(seg[0].content_hash != seg[2].content_hash);
    a_offset = seg[0].offset;
  }
  // Points segment (and key) i > 0 at a's bytes. Segment offsets in the
  // flatbuffer count from the segment data (a's, 0, is a default the
  // writer leaves out), the WDX1 entry's from the file's start.
  const auto onto_a = [&](std::vector<std::uint8_t>& b, std::uint32_t i) {
    Nav n{b};
    const std::uint64_t field = n.segment_offset(i);
    const std::uint64_t entry = n.entry(i) + format::key_entry::kDataOffset;
    REQUIRE(field != 0);
    REQUIRE(n.u64(entry) > a_offset);
    n.set_u64(field, n.u64(field) - (n.u64(entry) - a_offset));
    n.set_u64(entry, a_offset);
  };
  const std::string mismatch = ") does not have the content hash the file records: its bytes (or that hash) changed "
                               "since it was written (ImportOptions::verify_content_hashes = false takes them as they "
                               "are)";

  // b on a's range: both recorded hashes are that range's, and the import
  // takes it, a and b over the same bytes.
  std::vector<std::uint8_t> shared = written;
  onto_a(shared, 1);
  {
    std::unique_ptr<Opened> o = open_bytes(shared);
    REQUIRE(o->ok());
    const SegmentInfo b_seg = REQUIRE_VALUE(o->map().segment(1));
    CHECK(b_seg.offset == a_offset);
    Program program;
    REQUIRE(add_ptd_method(program, o->map(), "m").ok());
    const std::vector<Tensor>& t = program.methods.at(0).partitions.at(0).tensors;
    REQUIRE(t.size() == 3);
    CHECK(t[0].bytes.data() == t[1].bytes.data());
    CHECK(std::memcmp(t[1].bytes.data(), same.data(), 64) == 0);
    CHECK(std::memcmp(t[2].bytes.data(), other.data(), 64) == 0);
  }
  // The import of `file` is refused, naming segment #`named` of a's range.
  const auto refused = [&](const std::vector<std::uint8_t>& file, std::uint32_t named) {
    std::unique_ptr<Opened> o = open_bytes(file);
    REQUIRE(o->ok());
    Program program;
    const Expected<void> e = add_ptd_method(program, o->map(), "m");
    CHECK(e.error() == Error::MalformedSegment);
    CHECK(e.message() == "add_ptd_method: segment #" + std::to_string(named) + " (64 bytes at offset " +
                             std::to_string(a_offset) + mismatch);
    CHECK(program.methods.empty());
    return o;
  };
  // A byte of that range flipped: the first segment of the range is named.
  std::vector<std::uint8_t> flipped = shared;
  flipped.at(static_cast<std::size_t>(a_offset) + 63) ^= 1;
  refused(flipped, 0);
  // c on that range too: the range's hash, computed once, is a's and b's
  // but not the one c's segment records, so c's segment is named; asked
  // to, the import takes c over a's bytes.
  std::vector<std::uint8_t> three = shared;
  onto_a(three, 2);
  std::unique_ptr<Opened> o = refused(three, 2);
  Program program;
  ImportOptions as_they_are;
  as_they_are.verify_content_hashes = false;
  REQUIRE(add_ptd_method(program, o->map(), "m", as_they_are).ok());
  CHECK(std::memcmp(program.methods.at(0).partitions.at(0).tensors.at(2).bytes.data(), same.data(), 64) == 0);
  // c's bytes changed as well as a's range: the range met first in the
  // file, a's, is the one named (#0), not c's past it.
  std::uint64_t c_offset = 0;
  {
    std::unique_ptr<Opened> c_own = open_bytes(shared);
    REQUIRE(c_own->ok());
    c_offset = REQUIRE_VALUE(c_own->map().segment(2)).offset;
  }
  REQUIRE(c_offset > a_offset);
  std::vector<std::uint8_t> both = flipped;
  both.at(static_cast<std::size_t>(c_offset)) ^= 1;
  refused(both, 0);
  // c alone on a's range, b still past it: in offset order c's segment is
  // the second one checked (a's, c's, b's); it is named by its index, #2.
  std::vector<std::uint8_t> c_on_a = written;
  onto_a(c_on_a, 2);
  refused(c_on_a, 2);
}

TEST_CASE("import: of two changed segments out of index order, the one first in the file is named") {
  // Two 64-byte keys in their own segments, "a" first in the file, then
  // "b"; the flatbuffer's two segment entries swapped, with their WDX1
  // records (content hash, alignment) and the keys' data offsets, so that
  // segment #0 (key "a", now over the bytes past) lies after segment #1.
  // The check goes through the file's ranges in offset order, and the
  // first that fails is the one named: segment #1, at the lower offset.
  NamedDataStore store;
  const std::vector<std::uint8_t> first = pattern(64, 7), second = pattern(64, 8);
  REQUIRE(store.add_named_data("a", ByteSpan(first.data(), first.size()), 64).ok());
  REQUIRE(store.add_named_data("b", ByteSpan(second.data(), second.size()), 64).ok());
  std::vector<std::uint8_t> swapped = write_or_die(store, {}, WriteOptions{});
  std::uint64_t low = 0, high = 0;  // the two ranges' absolute offsets
  {
    std::unique_ptr<Opened> o = open_bytes(swapped);
    REQUIRE(o->ok());
    REQUIRE(o->map().segment_count() == 2);
    low = REQUIRE_VALUE(o->map().segment(0)).offset;
    high = REQUIRE_VALUE(o->map().segment(1)).offset;
    CHECK(low == 512);
    CHECK(high == 640);
    REQUIRE(high > low);
  }
  Nav n{swapped};
  const std::uint64_t e0 = n.segments() + 4, e1 = e0 + 4;  // the vector's two uoffsets, each from its own position
  const std::uint64_t t0 = n.segment(0), t1 = n.segment(1);
  n.set_u32(e0, static_cast<std::uint32_t>(t1 - e0));
  n.set_u32(e1, static_cast<std::uint32_t>(t0 - e1));
  for (std::uint64_t at = 0; at < format::segment_info::kSize; at += 8) {
    const std::uint64_t s0 = n.u64(n.seg_info(0) + at), s1 = n.u64(n.seg_info(1) + at);
    n.set_u64(n.seg_info(0) + at, s1);
    n.set_u64(n.seg_info(1) + at, s0);
  }
  n.set_u64(n.entry(0) + format::key_entry::kDataOffset, high);
  n.set_u64(n.entry(1) + format::key_entry::kDataOffset, low);
  {
    std::unique_ptr<Opened> o = open_bytes(swapped);
    REQUIRE(o->ok());
    CHECK(REQUIRE_VALUE(o->map().segment(0)).offset == high);
    CHECK(REQUIRE_VALUE(o->map().segment(1)).offset == low);
    Program program;
    REQUIRE(add_ptd_method(program, o->map(), "m").ok());  // the records agree with the bytes
    const std::vector<Tensor>& t = program.methods.at(0).partitions.at(0).tensors;
    REQUIRE(t.size() == 2);
    CHECK(t[0].name == "a");
    CHECK(std::vector<std::uint8_t>(t[0].bytes.data(), t[0].bytes.data() + t[0].bytes.size()) == second);
    CHECK(t[1].name == "b");
    CHECK(std::vector<std::uint8_t>(t[1].bytes.data(), t[1].bytes.data() + t[1].bytes.size()) == first);
  }
  // A byte of each range flipped: segment #1, at the lower offset, named.
  swapped.at(static_cast<std::size_t>(low) + 1) ^= 1;
  swapped.at(static_cast<std::size_t>(high) + 1) ^= 1;
  std::unique_ptr<Opened> o = open_bytes(swapped);
  REQUIRE(o->ok());
  Program program;
  const Expected<void> e = add_ptd_method(program, o->map(), "m");
  CHECK(e.error() == Error::MalformedSegment);
  CHECK(e.message() == "add_ptd_method: segment #1 (64 bytes at offset " + std::to_string(low) +
                           ") does not have the content hash the file records: its bytes (or that hash) changed "
                           "since it was written (ImportOptions::verify_content_hashes = false takes them as they "
                           "are)");
  CHECK(program.methods.empty());
}

TEST_CASE("import: the content hashes are checked last: a file with a changed segment and a refused key names the key") {
  // The README ("What the import refuses"): the hash check "comes after
  // every other one" (it reads every segment, which no other refusal
  // needs). One key "w", Byte [32] over its 32 bytes; then one byte of
  // the segment flipped (its recorded hash no longer matches) and the
  // layout's size set to 16 (a layout smaller than its segment,
  // LayoutMismatch). Both faults are there: the key's is the one named.
  for (const bool with_functions : {false, true}) {
    CAPTURE(with_functions);
    NamedDataStore store;
    const std::vector<std::uint8_t> data = pattern(32, 9);
    REQUIRE(store.add_named_data("w", ByteSpan(data.data(), data.size()), 1,
                                 Layout::contiguous(ScalarType::Byte, {32}))
                .ok());
    FunctionMaps maps;
    if (with_functions) maps.functions.push_back({"decode", 0, "blob", "decode__0", {{"w", "w"}}});
    std::vector<std::uint8_t> bytes = write_or_die(store, maps, WriteOptions{});
    std::uint64_t offset = 0;
    {
      std::unique_ptr<Opened> clean = open_bytes(bytes);
      REQUIRE(clean->ok());
      REQUIRE(clean->map().segment_count() == 1);
      offset = REQUIRE_VALUE(clean->map().segment(0)).offset;
    }
    const std::uint8_t sizes_32[] = {1, 0, 0, 0, 32, 0, 0, 0};  // the sizes vector: length 1, then 32
    const std::size_t at = only_place_of(bytes, sizes_32, sizeof sizes_32, static_cast<std::size_t>(offset));
    bytes[at + 4] = 16;
    bytes[static_cast<std::size_t>(offset) + 5] ^= 0x40;
    std::unique_ptr<Opened> o = open_bytes(bytes);
    REQUIRE(o->ok());  // open() reads no segment, and takes a layout smaller than its segment
    const char* who = with_functions ? "add_ptd_program" : "add_ptd_method";
    Program program;
    Expected<void> e = with_functions ? add_ptd_program(program, o->map()) : add_ptd_method(program, o->map(), "m");
    CHECK(e.error() == Error::LayoutMismatch);
    CHECK(e.message() == std::string(who) + ": key #0 'w': its layout describes 16 bytes, its segment holds 32");
    CHECK(program.methods.empty());
    // Without the key's fault the same changed segment is refused, so the
    // hash check did run on this file: it only comes after.
    bytes[at + 4] = 32;
    std::unique_ptr<Opened> hash_only = open_bytes(bytes);
    REQUIRE(hash_only->ok());
    e = with_functions ? add_ptd_program(program, hash_only->map()) : add_ptd_method(program, hash_only->map(), "m");
    CHECK(e.error() == Error::MalformedSegment);
    CHECK(program.methods.empty());
  }
}

TEST_CASE("add_ptd_program: a method whose partitions are not 0..n-1 is MalformedFunctionMap") {
  FunctionMaps maps;
  maps.functions.push_back({"decode", 2, "blob", "decode__2", {{"w", "w"}}});
  maps.functions.push_back({"decode", 0, "blob", "decode__0", {{"w", "w"}}});
  maps.functions.push_back({"prefill", 0, "blob", "prefill", {{"w", "w"}}});
  std::unique_ptr<Opened> o = open_bytes(one_key_file(maps));
  REQUIRE(o->ok());
  // The writer took the gap and a reader finds what is there (a delegate's
  // share of a method's partitions); the import rebuilds whole methods.
  Result<FunctionView> f2 = o->map().find_function("decode", 2);
  REQUIRE(f2.ok());
  CHECK(std::string(f2->function_name().data(), f2->function_name().size()) == "decode__2");
  CHECK(o->map().find_function("decode", 1).error() == Error::NotFound);
  Program program;
  Expected<void> e = add_ptd_program(program, o->map());
  CHECK(e.error() == Error::MalformedFunctionMap);
  CHECK(e.message() == "add_ptd_program: method 'decode' has partition 2 but no function for partition 1");
  CHECK(program.methods.empty());
  // An index no gapless numbering reaches (more partitions than the store
  // has functions) is refused before it sizes anything: a corrupted index
  // of 2^31 once asked for that many partitions.
  FunctionMaps far;
  far.functions.push_back({"decode", 0x80000000u, "blob", "decode", {{"w", "w"}}});
  std::unique_ptr<Opened> f = open_bytes(one_key_file(far));
  REQUIRE(f->ok());
  e = add_ptd_program(program, f->map());
  CHECK(e.error() == Error::MalformedFunctionMap);
  CHECK(e.message() == "add_ptd_program: method 'decode' has partition 2147483648 but no function for partition 0");
  CHECK(program.methods.empty());
}

TEST_CASE("add_ptd_program: partition indices size nothing past the function count, across methods") {
  // The writer's most functions, each a method of its own claiming the
  // last partition index: sized by each method's highest index, this
  // 179 KB file asked for 2,896 x 2,896 partitions (200 MB) before the gap
  // was found.
  FunctionMaps maps;
  const std::uint32_t n = static_cast<std::uint32_t>(format::kMaxFunctions);
  for (std::uint32_t i = 0; i < n; ++i)
    maps.functions.push_back({"m" + std::to_string(i), n - 1, "blob", "m" + std::to_string(i), {{"w", "w"}}});
  std::unique_ptr<Opened> o = open_bytes(one_key_file(maps));
  REQUIRE(o->ok());
  Program program;
  const std::uint64_t before = g_new_bytes.load();
  Expected<void> e = add_ptd_program(program, o->map());
  const std::uint64_t asked = g_new_bytes.load() - before;
  CHECK(e.error() == Error::MalformedFunctionMap);
  CHECK(e.message() == "add_ptd_program: method 'm0' has partition 2895 but no function for partition 0");
  CHECK(program.methods.empty());
  CHECK(asked < (std::uint64_t{2} << 20));  // linear in the functions: ~0.3 MB here
  // The gap is found in the method that has it, wherever its functions are.
  FunctionMaps late;
  late.functions.push_back({"a", 0, "blob", "a__0", {{"w", "w"}}});
  late.functions.push_back({"b", 1, "blob", "b__1", {{"w", "w"}}});
  late.functions.push_back({"a", 1, "blob", "a__1", {{"w", "w"}}});
  late.functions.push_back({"b", 2, "blob", "b__2", {{"w", "w"}}});
  std::unique_ptr<Opened> l = open_bytes(one_key_file(late));
  REQUIRE(l->ok());
  e = add_ptd_program(program, l->map());
  CHECK(e.error() == Error::MalformedFunctionMap);
  CHECK(e.message() == "add_ptd_program: method 'b' has partition 2 but no function for partition 0");
  CHECK(program.methods.empty());
}

namespace {
// Writes `program` deduplicated under S, imports the file back, and
// deduplicates and writes that again: the two files.
template <class S>
std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> export_twice(const Program& program) {
  const Reimported r = dedup_import_dedup<S>(program);
  Expected<std::vector<std::uint8_t>> a = serialize_ptd(r.first.store, r.first.functions);
  REQUIRE(a.ok());
  Expected<std::vector<std::uint8_t>> b = serialize_ptd(r.second.store, r.second.functions);
  REQUIRE(b.ok());
  return {*a, *b};
}
}  // namespace

TEST_CASE("add_ptd_program: re-exporting keeps every generated key on its bytes (the same file)") {
  // Method m holds "x" in both partitions with different bytes, so its
  // keys are "m/0/x" and "m/1/x"; its partition 0 also holds a tensor
  // named "0/x", whose key "m/0/x" is taken and becomes "m/0/x~1". Method n
  // holds other bytes under "0/x". Which content gets "m/0/x" and which the
  // "~1" follows the order keys are first used in; the file's tables are
  // sorted by name ("0/x" before "x"), so an import in table order swapped
  // the two: a program referring to "m/0/x" then loaded other weights.
  const std::vector<std::uint8_t> a = pattern(64, 1), b = pattern(64, 2), c = pattern(64, 3), d = pattern(64, 4),
                                  e = pattern(64, 5);
  Program program;
  Method& m = program.add_method("m");
  m.add_partition().add("x", ByteSpan(a.data(), a.size())).add("0/x", ByteSpan(b.data(), b.size()));
  m.add_partition().add("x", ByteSpan(c.data(), c.size()));
  Method& n = program.add_method("n");
  n.add_partition().add("0/x", ByteSpan(d.data(), d.size()));
  n.add_partition().add("y", ByteSpan(e.data(), e.size()));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  REQUIRE(r->store.bytes_of("m/0/x").size() == 64);
  CHECK(std::memcmp(r->store.bytes_of("m/0/x").data(), a.data(), 64) == 0);
  REQUIRE(r->store.bytes_of("m/0/x~1").size() == 64);
  CHECK(std::memcmp(r->store.bytes_of("m/0/x~1").data(), b.data(), 64) == 0);

  const auto one = export_twice<Strategy<OneBlob>>(program);
  CHECK(one.first == one.second);
  const auto positional = export_twice<Strategy<Positional>>(program);
  CHECK(positional.first == positional.second);
  const auto disabled = export_twice<Strategy<Disabled>>(program);
  CHECK(disabled.first == disabled.second);
}

TEST_CASE("add_ptd_program: a key no function names is refused, or goes to the method the caller names") {
  // A store the writer accepts: three keys, a function that names one.
  NamedDataStore store;
  const std::vector<std::uint8_t> a = pattern(64, 1), b = pattern(32, 2), c = pattern(16, 3);
  REQUIRE(store.add_named_data("shared.a", ByteSpan(a.data(), a.size())).ok());
  REQUIRE(store.add_named_data("extra.b", ByteSpan(b.data(), b.size()), 8).ok());
  REQUIRE(store.add_named_data("extra.c", ByteSpan(c.data(), c.size())).ok());
  FunctionMaps maps;
  maps.functions.push_back({"m", 0, "blob", "m", {{"a", "shared.a"}}});
  std::unique_ptr<Opened> o = open_bytes(write_or_die(store, maps, WriteOptions{}));
  REQUIRE(o->ok());
  Program program;
  program.add_method("before");
  Expected<void> e = add_ptd_program(program, o->map());
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() ==
        "add_ptd_program: key #1 'extra.b' (and 1 more) is in no function's table, so no method or partition holds "
        "it; ImportOptions::unmapped_keys_method names a method to take such keys");
  CHECK(program.methods.size() == 1);

  ImportOptions options;
  options.unmapped_keys_method = "m";  // the store's own method
  e = add_ptd_program(program, o->map(), options);
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_program: unmapped_keys_method 'm' is already a method of the store");
  options.unmapped_keys_method = "before";  // the program's
  e = add_ptd_program(program, o->map(), options);
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_program: unmapped_keys_method 'before' is already a method of the program");
  CHECK(program.methods.size() == 1);
  // Checked as a method name: keys are made of it.
  options.unmapped_keys_method = "r\xff";
  e = add_ptd_program(program, o->map(), options);
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_program: unmapped_keys_method 'r\\xff' is not valid UTF-8 at offset 1 (keys are made "
                       "of method names: '<method>/<name>'); a key is a flatbuffer string, which is UTF-8, and "
                       "ExecuTorch's Python reader (flatc --json) cannot read a file holding one that is not");
  CHECK(program.methods.size() == 1);

  options.unmapped_keys_method = "rest";
  REQUIRE(add_ptd_program(program, o->map(), options).ok());
  REQUIRE(program.methods.size() == 3);
  const Method& m = program.methods[1];
  CHECK(m.name == "m");
  REQUIRE(m.partitions.size() == 1);
  REQUIRE(m.partitions[0].tensors.size() == 1);
  CHECK(m.partitions[0].tensors[0].name == "a");
  const Method& rest = program.methods[2];
  CHECK(rest.name == "rest");
  REQUIRE(rest.partitions.size() == 1);
  const std::vector<Tensor>& t = rest.partitions[0].tensors;
  REQUIRE(t.size() == 2);
  CHECK(t[0].name == "extra.b");
  CHECK(std::vector<std::uint8_t>(t[0].bytes.data(), t[0].bytes.data() + t[0].bytes.size()) == b);
  CHECK(t[0].alignment == 8);  // recorded in the file
  CHECK(t[1].name == "extra.c");
  CHECK(std::vector<std::uint8_t>(t[1].bytes.data(), t[1].bytes.data() + t[1].bytes.size()) == c);

  // One such key alone: no "(and 0 more)".
  maps.functions[0].tensors.push_back({"c", "extra.c"});
  std::unique_ptr<Opened> one = open_bytes(write_or_die(store, maps, WriteOptions{}));
  REQUIRE(one->ok());
  Program fresh;
  e = add_ptd_program(fresh, one->map());
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() ==
        "add_ptd_program: key #1 'extra.b' is in no function's table, so no method or partition holds it; "
        "ImportOptions::unmapped_keys_method names a method to take such keys");
  CHECK(fresh.methods.empty());
  // The first key in no table may be the file's first: a function naming
  // extra.b alone leaves shared.a (#0) and extra.c.
  FunctionMaps b_only;
  b_only.functions.push_back({"m", 0, "blob", "m", {{"b", "extra.b"}}});
  std::unique_ptr<Opened> first = open_bytes(write_or_die(store, b_only, WriteOptions{}));
  REQUIRE(first->ok());
  e = add_ptd_program(fresh, first->map());
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() ==
        "add_ptd_program: key #0 'shared.a' (and 1 more) is in no function's table, so no method or partition holds "
        "it; ImportOptions::unmapped_keys_method names a method to take such keys");
  CHECK(fresh.methods.empty());
}

TEST_CASE("add_ptd_program: a key no function names, taken into unmapped_keys_method, is checked as a tensor name") {
  // The writer refuses such a key; a damaged file can hold one. Here the
  // key "extra.b", which no function names, is patched in the flatbuffer
  // (its one occurrence) and the WDX1 slot table rebuilt for it under the
  // file's seed, so that the reader opens the file: a key is any bytes to
  // ExecuTorch. add_ptd_program refuses it, naming the key by its place,
  // before anything is added.
  NamedDataStore store;
  const std::vector<std::uint8_t> a = pattern(64, 1), b = pattern(32, 2);
  REQUIRE(store.add_named_data("shared.a", ByteSpan(a.data(), a.size())).ok());
  REQUIRE(store.add_named_data("extra.b", ByteSpan(b.data(), b.size())).ok());
  FunctionMaps maps;
  maps.functions.push_back({"m", 0, "blob", "m", {{"a", "shared.a"}}});
  const std::vector<std::uint8_t> good = write_or_die(store, maps, WriteOptions{});
  const auto patched = [&](const std::string& key) {
    const std::string from = "extra.b";
    REQUIRE(key.size() == from.size());
    std::vector<std::uint8_t> f = good;
    std::memcpy(f.data() + only_place_of(f, from.data(), from.size()), key.data(), key.size());
    std::uint8_t* x = f.data() + only_place_of(f, format::kExtMagic, 4);
    namespace eh = format::ext_header;
    namespace ke = format::key_entry;
    const std::uint8_t* entries = x + format::load_u32(x + eh::kEntriesOffset);
    const auto key_at = [&](std::uint32_t i) {
      const std::uint8_t* e = entries + ke::kSize * i;
      return KeyView(reinterpret_cast<const char*>(f.data() + format::load_u32(e + ke::kKeyOffset)),
                     format::load_u32(e + ke::kKeySize));
    };
    REQUIRE(key_at(1) == key);
    const wdedup::detail::SlotFill fill = wdedup::detail::fill_slots(
        format::load_u32(x + eh::kKeyCount), key_at, format::load_u64(x + eh::kHashSeed),
        x + format::load_u32(x + eh::kSlotsOffset), format::load_u32(x + eh::kSlotCount));
    REQUIRE(fill.result == wdedup::detail::SlotFill::kDone);
    return f;
  };
  ImportOptions options;
  options.unmapped_keys_method = "rest";
  using namespace std::string_literals;
  struct Case {
    std::string key;
    std::string message;
  };
  const Case cases[] = {
      {"extra\xff"
       "b",
       "add_ptd_program: key #1 'extra\\xffb' is not valid UTF-8 at offset 5; a key is a flatbuffer string, which is "
       "UTF-8, and ExecuTorch's Python reader (flatc --json) cannot read a file holding one that is not"},
      {"extra\0b"s, "add_ptd_program: key #1 'extra\\x00b' contains a NUL byte at offset 5"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.key);
    std::unique_ptr<Opened> o = open_bytes(patched(c.key));
    REQUIRE_MESSAGE(o->ok(), o->result->failure().what);
    REQUIRE(o->map().get_data(c.key).ok());
    Program program;
    program.add_method("before");
    Expected<void> e = add_ptd_program(program, o->map(), options);
    CHECK(e.error() == Error::InvalidName);
    CHECK(e.message() == c.message);
    REQUIRE(program.methods.size() == 1);
    CHECK(program.methods[0].name == "before");
  }
  // Unpatched, the key goes to "rest".
  std::unique_ptr<Opened> o = open_bytes(good);
  REQUIRE(o->ok());
  Program program;
  REQUIRE(add_ptd_program(program, o->map(), options).ok());
  REQUIRE(program.methods.size() == 2);
  CHECK(program.methods[1].name == "rest");
  REQUIRE(program.methods[1].partitions[0].tensors.size() == 1);
  CHECK(program.methods[1].partitions[0].tensors[0].name == "extra.b");
}

TEST_CASE("import: a file wdedup wrote without its records keeps its absolute alignment") {
  // wdedup aligns segments in the file, not from the segment base; without
  // the WDX1 block nothing records it, and the base may be less aligned.
  NamedDataStore store;
  const std::vector<std::uint8_t> a = pattern(8, 1), b = pattern(96, 2);
  REQUIRE(store.add_named_data("a", ByteSpan(a.data(), a.size())).ok());
  REQUIRE(store.add_named_data("b", ByteSpan(b.data(), b.size()), 4096).ok());
  WriteOptions plain;
  plain.wdedup_extensions = false;
  std::unique_ptr<Opened> o = open_bytes(write_or_die(store, FunctionMaps{}, plain));
  REQUIRE(o->ok());
  const KeyInfo kb = REQUIRE_VALUE(o->map().key_info(1));
  const std::uint64_t base = o->map().header().segment_base_offset;
  CHECK(kb.offset % 4096 == 0);
  CHECK((kb.offset - base) % 4096 != 0);  // from the base alone, 4096 would be lost
  Program program;
  REQUIRE(add_ptd_method(program, o->map(), "m").ok());
  CHECK(program.methods[0].partitions[0].tensors[1].alignment == 4096);
}

namespace {
/// add_ptd_program on `tensor_file`, method "deXcode"'s tensor "tXx" (row
/// `row` of its table) patched to "t\xffx", then on `method_file`, function
/// #`function`'s method "deXcode" patched to "de\xffcode": both open, and
/// both are InvalidName, naming the row or the function, no method added.
void check_names_refused(const std::vector<std::uint8_t>& tensor_file, int row,
                         const std::vector<std::uint8_t>& method_file, int function) {
  const std::string not_utf8 = "a key is a flatbuffer string, which is UTF-8, and ExecuTorch's Python reader (flatc "
                               "--json) cannot read a file holding one that is not";
  std::unique_ptr<Opened> t = open_bytes(tensor_file);
  REQUIRE(t->ok());
  Program program;
  Expected<void> e = add_ptd_program(program, t->map());
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_program: method 'deXcode' partition 0 tensor #" + std::to_string(row) +
                           " 't\\xffx' is not valid UTF-8 at offset 1; " + not_utf8);
  CHECK(program.methods.empty());
  std::unique_ptr<Opened> m = open_bytes(method_file);
  REQUIRE(m->ok());
  e = add_ptd_program(program, m->map());
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == "add_ptd_program: function #" + std::to_string(function) +
                           "'s method name 'de\\xffcode' is not valid UTF-8 at offset 2 (keys are made of method "
                           "names: '<method>/<name>'); " + not_utf8);
  CHECK(program.methods.empty());
}
}  // namespace

TEST_CASE("a method or tensor name deduplicate() could not take back: the file does not open, or, a tensor name not UTF-8, does not import") {
  // The writer refuses such names; a damaged file can hold them (the import
  // fuzz target found one, which add_ptd_program then refused as
  // InvalidName). The reader now refuses the file itself, as its function
  // maps could not be looked up by these names either.
  FunctionMaps maps;
  maps.functions.push_back({"prefill", 0, "blob", "prefill", {{"w", "w"}}});
  maps.functions.push_back({"deXcode", 0, "blob", "decode", {{"v", "w"}, {"tXx", "w"}}});
  const std::vector<std::uint8_t> good = one_key_file(maps);
  // The file with the one occurrence of `from` (in the WDX1 block's string
  // pool) made `to`.
  auto patched = [&](const std::string& from, const std::string& to) {
    REQUIRE(from.size() == to.size());
    std::vector<std::uint8_t> b = good;
    std::memcpy(b.data() + only_place_of(b, from.data(), from.size()), to.data(), to.size());
    return b;
  };
  using namespace std::string_literals;
  struct Case {
    std::vector<std::uint8_t> bytes;
    const char* message;
  };
  const Case cases[] = {
      {patched("tXx", "t\0x"s), "tensor name holds a NUL byte"},
      {patched("deXcode", "de\0code"s), "method name holds a NUL byte"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    std::unique_ptr<Opened> o = open_bytes(c.bytes);
    REQUIRE_FALSE(o->ok());
    CHECK(o->error() == Error::MalformedFunctionMap);
    CHECK(std::string(o->result->failure().what) == c.message);
  }
  // A tensor name that is not UTF-8 opens (function maps are wdedup's own,
  // and ExecuTorch's Python reader never decodes them), but
  // add_ptd_program refuses it, as deduplicate() would: it makes the keys
  // from tensor names. A method name the same way.
  check_names_refused(patched("tXx", "t\xffx"), 0, patched("deXcode", "de\xff" "code"), 1);
  // Unpatched, it imports.
  std::unique_ptr<Opened> o = open_bytes(good);
  REQUIRE(o->ok());
  Program program;
  CHECK(add_ptd_program(program, o->map()).ok());
}

TEST_CASE("add_ptd_program: a name refused is named by its function's index and its row in the function's table") {
  // Rows are imported in key order, functions' methods made in order of
  // first use; the names are the file's: the row's place in its table
  // (sorted by tensor name) and the function's index among functions.
  NamedDataStore store;
  const std::vector<std::uint8_t> w = pattern(32, 9), x = pattern(16, 3);
  REQUIRE(store.add_named_data("w", ByteSpan(w.data(), w.size())).ok());
  REQUIRE(store.add_named_data("x", ByteSpan(x.data(), x.size())).ok());
  FunctionMaps maps;
  maps.functions.push_back({"prefill", 0, "blob", "prefill__0", {{"w", "w"}, {"x", "x"}}});
  maps.functions.push_back({"prefill", 1, "blob", "prefill__1", {{"w", "w"}, {"x", "x"}}});
  // Row 0 ("a") names key #1, row 1 ("tXx") key #0.
  maps.functions.push_back({"deXcode", 0, "blob", "decode", {{"tXx", "w"}, {"a", "x"}}});
  const std::vector<std::uint8_t> good = write_or_die(store, maps, WriteOptions{});
  auto patched = [&](const char* from, const char* to) {
    std::vector<std::uint8_t> b = good;
    std::memcpy(b.data() + only_place_of(b, from, std::strlen(from)), to, std::strlen(to));
    return b;
  };
  {
    std::unique_ptr<Opened> o = open_bytes(good);
    REQUIRE(o->ok());
    const FunctionView f = REQUIRE_VALUE(o->map().function(2));
    CHECK(std::string(f.method().data(), f.method().size()) == "deXcode");
    const FunctionTensorView row = REQUIRE_VALUE(f.tensor(1));
    CHECK(std::string(row.tensor_name.data(), row.tensor_name.size()) == "tXx");
    CHECK(row.key_index == 0);
    Program program;
    REQUIRE(add_ptd_program(program, o->map()).ok());
    REQUIRE(program.methods.size() == 2);
    CHECK(program.methods[1].name == "deXcode");
    // In key order: row 1 (key #0) first.
    const std::vector<Tensor>& t = program.methods[1].partitions.at(0).tensors;
    REQUIRE(t.size() == 2);
    CHECK(t[0].name == "tXx");
    CHECK(t[1].name == "a");
  }
  // Key #0's row, met first, is row 1 of its table: "tensor #1"; the
  // method of function #2, the second method: "function #2".
  check_names_refused(patched("tXx", "t\xffx"), 1, patched("deXcode", "de\xff" "code"), 2);
}

TEST_CASE("import: recorded alignments whose lcm no store can take import, and deduplicate() names them") {
  // A wdedup file records any alignment a key asked for, and a file may keep
  // identical bytes in separate segments (here three empty ones): 2048,
  // 2047 and 2045 are each fine, but one buffer for all three would need
  // their lcm, over 2^32. Which bytes are identical is deduplicate()'s to
  // find, so it is the one that refuses, naming the tensor and the lcm.
  NamedDataStore store;
  const std::pair<const char*, std::uint64_t> keys[] = {{"a", 2048}, {"b", 2047}, {"c", 2045}};
  for (const auto& [key, alignment] : keys) {
    const std::uint32_t b = wdedup::detail::StoreAccess::add_buffer(store, ByteSpan(), alignment);
    wdedup::detail::StoreAccess::add_key(store, key, b, alignment, std::nullopt);
  }
  std::unique_ptr<Opened> o = open_bytes(write_or_die(store, {}, WriteOptions{}));
  REQUIRE(o->ok());
  Program program;
  REQUIRE(add_ptd_method(program, o->map(), "m").ok());
  REQUIRE(program.methods[0].partitions[0].tensors.size() == 3);
  CHECK(program.methods[0].partitions[0].tensors[1].alignment == 2047);
  Expected<DedupResult> d = deduplicate<Strategy<OneBlob>>(program);
  CHECK(d.error() == Error::InvalidAlignment);
  CHECK(d.message() == "method 'm' partition 0 tensor 'c': lcm of alignments 4192256 and 2045 exceeds 4294967296: "
                       "key 'c' shares its bytes with keys whose alignments' lcm is 4192256");
}

TEST_CASE("PtdFiles names a file's method after the file: the stem, else the first free stem#k") {
  Program program;
  CHECK(wdedup::detail::free_method_name(program, "adapter") == "adapter");
  program.add_method("adapter");
  CHECK(wdedup::detail::free_method_name(program, "adapter") == "adapter#2");
  // Names that only look like "adapter#k" take no number: another stem, a
  // leading zero, a sign, a trailing character, "#1", "#".
  for (const char* other : {"adapter#02", "adapter#+2", "adapter#2x", "adapter#1", "adapter#", "adapterx#2", "adapte"})
    program.add_method(other);
  CHECK(wdedup::detail::free_method_name(program, "adapter") == "adapter#2");
  program.add_method("adapter#2");
  program.add_method("adapter#4");
  CHECK(wdedup::detail::free_method_name(program, "adapter") == "adapter#3");
  program.add_method("adapter#3");
  CHECK(wdedup::detail::free_method_name(program, "adapter") == "adapter#5");
  // Numbers past what the methods could all take never decide.
  program.add_method("adapter#99999999999999999999999");
  CHECK(wdedup::detail::free_method_name(program, "adapter") == "adapter#5");
  // A stem not yet taken is itself, whatever "stem#k" exist.
  Program gaps;
  gaps.add_method("w#2");
  CHECK(wdedup::detail::free_method_name(gaps, "w") == "w");
  // The stem's first free name among methods `taken`.
  auto free_among = [](std::initializer_list<const char*> taken) {
    Program p;
    for (const char* name : taken) p.add_method(name);
    return wdedup::detail::free_method_name(p, "s");
  };
  // Names of another stem as long as this one, or that only continue it,
  // take nothing: "t" and "t#2" leave "s" free.
  CHECK(free_among({"t", "t#2"}) == "s");
  // Every decimal digit counts, 0 and 9 included, as in base ten: "s",
  // "s#2" to "s#10" taken (10 methods), "s#11" is the first free.
  CHECK(free_among({"s", "s#2", "s#3", "s#4", "s#5", "s#6", "s#7", "s#8", "s#9", "s#10"}) == "s#11");
  // A number past what the methods could take is not read on to its end:
  // 2^64 + 3, read whole, wraps to 3.
  CHECK(free_among({"s", "s#2", "s#18446744073709551619"}) == "s#3");
  // "stem#<n + 2>", the largest number n methods can take: "s" and "s#4".
  CHECK(free_among({"s", "s#4"}) == "s#2");
  // The same names as trying "stem", "stem#2", ... in turn, on every shape
  // of taken set over a few names.
  for (unsigned mask = 0; mask < 64; ++mask) {
    Program p;
    for (unsigned b = 0; b < 6; ++b)
      if (mask & (1u << b)) p.add_method(b == 0 ? std::string("s") : "s#" + std::to_string(b + 1));
    std::string expect = "s";
    for (unsigned k = 2; p.find_method(expect) != nullptr; ++k) expect = "s#" + std::to_string(k);
    CHECK(wdedup::detail::free_method_name(p, "s") == expect);
  }
}

TEST_CASE("PtdFiles: files mapped and imported, one method each, named after the file") {
  PtdFiles files;
  Program program;
  const std::string aliases = fixture("aliases.ptd"), simple = fixture("simple.ptd");
  REQUIRE(files.add(program, aliases).ok());
  REQUIRE(files.add(program, aliases).ok());  // the same file again: a second mapping, a second name
  REQUIRE(files.add(program, simple, "decode").ok());
  REQUIRE(files.add(program, simple).ok());
  CHECK(files.size() == 4);
  REQUIRE(program.methods.size() == 4);
  CHECK(program.methods[0].name == "aliases");
  CHECK(program.methods[1].name == "aliases#2");
  CHECK(program.methods[2].name == "decode");
  CHECK(program.methods[3].name == "simple");
  const Tensor& a0 = program.methods[0].partitions[0].tensors[0];
  const Tensor& a1 = program.methods[1].partitions[0].tensors[0];
  CHECK(a0.name == "prefill/layers.0.wq");
  CHECK(a0.bytes.size() == 512);
  CHECK(a0.bytes.data() != a1.bytes.data());  // separate mappings
  CHECK(std::memcmp(a0.bytes.data(), a1.bytes.data(), 512) == 0);
  CHECK(program.methods[3].partitions[0].tensors[2].name == "simple.c");

  // Failures change nothing: no method added, no file kept.
  const std::string before = snapshot(program);
  auto unchanged = [&] {
    CHECK(files.size() == 4);
    CHECK(program.methods.size() == 4);
    CHECK(snapshot(program) == before);
  };
  const std::string missing = std::string(WDEDUP_TEST_TMPDIR) + "/no-such-file.ptd";
  Expected<void> e = files.add(program, missing);
  CHECK(e.error() == Error::IoError);
  // A failed system call is named by its reason, not by its errno.
  CHECK(e.message() == missing + ": open failed: No such file or directory (IoError)");
  unchanged();
  // No path at all: said so (it read ": open failed: No such file...").
  e = files.add(program, "");
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() == "PtdFiles::add: the path is empty");
  unchanged();
  // A directory: which kind it is.
  e = files.add(program, WDEDUP_FIXTURES_DIR);
  CHECK(e.error() == Error::IoError);
  CHECK(e.message() == std::string(WDEDUP_FIXTURES_DIR) + ": not a regular file but a directory (IoError at 0)");
  unchanged();
  // A NUL would end the path open(2) sees: simple.ptd would be read instead.
  e = files.add(program, simple + std::string("\0.other", 7), "nul");
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() == "cannot read '" + simple + "\\x00.other': the path contains a NUL byte at offset " +
                           std::to_string(simple.size()));
  unchanged();
  const std::string json = fixture("simple.json");
  e = files.add(program, json);
  CHECK(e.error() == Error::MalformedHeader);
  CHECK(e.message() == json + " (" + std::to_string(read_file(json).size()) +
                           " bytes, not a .ptd file): flatbuffer identifier is not FT01 (MalformedHeader at 4)");
  unchanged();
  // A .ptd broken past its identifier (the FH01 magic) is a broken .ptd,
  // not a file of another kind: no "not a .ptd file".
  const std::string bad_magic = std::string(WDEDUP_TEST_TMPDIR) + "/import_bad_magic.ptd";
  std::vector<std::uint8_t> bad_bytes = read_file(simple);
  bad_bytes[8] ^= 0xFF;  // format::kHeaderOffset: "FH01"
  REQUIRE(write_file(bad_magic, bad_bytes));
  e = files.add(program, bad_magic);
  CHECK(e.error() == Error::MalformedHeader);
  CHECK(e.message() == bad_magic + " (" + std::to_string(bad_bytes.size()) +
                           " bytes): extended header magic is not FH01 (MalformedHeader at 8)");
  unchanged();
  // Cut short: the reader names where the flatbuffer would end (280), the
  // message the file's own size.
  const std::string cut = std::string(WDEDUP_TEST_TMPDIR) + "/import_cut.ptd";
  const std::vector<std::uint8_t> whole = read_file(simple);
  REQUIRE(write_file(cut, std::vector<std::uint8_t>(whole.begin(), whole.begin() + 100)));
  e = files.add(program, cut);
  CHECK(e.error() == Error::Truncated);
  CHECK(e.message() == cut + " (100 bytes): file ends inside the flatbuffer (at = the flatbuffer's end) (Truncated at 280)");
  unchanged();
  e = files.add(program, simple, "decode");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == simple + ": add_ptd_method: method 'decode' is already in the program");
  unchanged();
  // A store deduplicate() wrote comes back as its methods: decode is taken.
  e = files.add(program, wdedup_file_path());
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == wdedup_file_path() + ": add_ptd_program: method 'decode' is already in the program (a store's "
                                           "methods keep their names: where a file named after its path took that "
                                           "one, add the store first; two stores that both hold it do not merge)");
  unchanged();
  // ...and it cannot be squeezed into one method: the message says how
  // to have it through this call (add_ptd_method's own names
  // add_ptd_program, above).
  e = files.add(program, wdedup_file_path(), "merged");
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message() == wdedup_file_path() +
                           ": the file has 3 function maps (methods and partitions, as deduplicate() writes them); "
                           "PtdFiles::add restores them when given no method name, and does not merge them into "
                           "method 'merged'");
  unchanged();
  Program fresh;
  REQUIRE(files.add(fresh, wdedup_file_path()).ok());
  CHECK(files.size() == 5);
  REQUIRE(fresh.methods.size() == 2);
  CHECK(fresh.methods[0].name == "prefill");
  CHECK(fresh.methods[1].partitions.size() == 2);
}

TEST_CASE("PtdFiles: a path in a message is escaped as a name is, so a file's name cannot rewrite the terminal") {
  // A file's name is someone else's text as much as its keys are (a
  // downloaded export): the method named after it was escaped, the path in
  // the messages beside it was not, and wdedup-demo sent the escape
  // sequence of "ev\x1b[31mil.ptd" to the terminal when the file did not
  // import, or when a merge did not keep its keys (a review found it).
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/";
  const std::string shown = dir + "import_ev\\x1b[31mil";  // as messages give it
  PtdFiles files;
  Program program;
  const std::string not_ptd = write_temp("import_ev\x1b[31mil.txt.ptd", std::vector<std::uint8_t>(64, 0));
  Expected<void> e = files.add(program, not_ptd);
  CHECK(e.error() == Error::MalformedHeader);
  CHECK(e.message() == shown + ".txt.ptd (64 bytes, not a .ptd file): flatbuffer identifier is not FT01 "
                               "(MalformedHeader at 4)");
  const std::string missing = dir + "import_ev\x1b[31mil.missing.ptd";
  e = files.add(program, missing);
  CHECK(e.error() == Error::IoError);
  CHECK(e.message() == shown + ".missing.ptd: open failed: No such file or directory (IoError)");
  // Imported: the method is escaped where named (import_ev\x1b[31mil is
  // its name itself, kept as it is), and so is the path check_keys_kept
  // names.
  const std::string simple = fixture("simple.ptd");
  const std::string other = write_temp("import_ev\x1b[31mil.ptd", simple_with_other_b());
  REQUIRE(files.add(program, simple).ok());
  REQUIRE(files.add(program, other).ok());
  REQUIRE(program.methods.size() == 2);
  CHECK(program.methods[1].name == "import_ev\x1b[31mil");
  // Refused by the import (a method name taken): the path escaped there too.
  e = files.add(program, other, "simple");
  CHECK(e.error() == Error::InvalidName);
  CHECK(e.message() == shown + ".ptd: add_ptd_method: method 'simple' is already in the program");
  CHECK(files.size() == 2);
  CHECK(program.methods.size() == 2);
  Expected<DedupResult> r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  e = files.check_keys_kept(r->store);
  CHECK(e.error() == Error::NotFound);
  CHECK(e.message() == one_key_not_kept(simple, 3, "simple.b", "simple/simple.b") + "; " +
                           one_key_not_kept(shown + ".ptd", 3, "simple.b", "import_ev\\x1b[31mil/simple.b"));
  CHECK(e.message().find('\x1b') == std::string::npos);
}

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo gives a store's keys no function names to --unmapped-keys METHOD, or names the flag") {
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/demo_unmapped";
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) == 0);
  // Three keys, a function that names one (as in the add_ptd_program test).
  NamedDataStore store;
  const std::vector<std::uint8_t> a = pattern(64, 1), b = pattern(32, 2), c = pattern(16, 3);
  REQUIRE(store.add_named_data("shared.a", ByteSpan(a.data(), a.size())).ok());
  REQUIRE(store.add_named_data("extra.b", ByteSpan(b.data(), b.size())).ok());
  REQUIRE(store.add_named_data("extra.c", ByteSpan(c.data(), c.size())).ok());
  FunctionMaps maps;
  maps.functions.push_back({"m", 0, "blob", "m", {{"a", "shared.a"}}});
  const std::string path = dir + "/partial.ptd", log = dir + "/log.txt", printed_path = dir + "/out.txt";
  REQUIRE(write_ptd_file(store, maps, path).ok());
  const std::string demo = "'" + std::string(WDEDUP_DEMO_PATH) + "' --quiet --strategy oneblob --out '' ";
  auto run = [&](const std::string& args) {
    const int status = std::system((demo + args + " > '" + printed_path + "' 2> '" + log + "'").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  // Refused, naming the demo's flag rather than the library's option.
  CHECK(run("--ptd '" + path + "'") == 2);
  CHECK(read_text(log) == "wdedup-demo: " + path +
                              ": add_ptd_program: key #1 'extra.b' (and 1 more) is in no function's table, so no "
                              "method or partition holds it; --unmapped-keys METHOD names a method to take such keys\n");
  CHECK(run("--ptd '" + path + "' --unmapped-keys m") == 2);
  CHECK(read_text(log) == "wdedup-demo: " + path + ": add_ptd_program: --unmapped-keys 'm' is already a method of the store\n");
  CHECK(run("--unmapped-keys rest") == 2);
  CHECK(read_text(log) == "wdedup-demo: --unmapped-keys applies to --ptd files only\n");
  // An empty METHOD is refused as a bad value, not taken as the flag left
  // out (which met the keys' refusal above, or ran without --ptd).
  const std::string no_name = "wdedup-demo: --unmapped-keys needs a method name, got ''\n";
  CHECK(run("--ptd '" + path + "' --unmapped-keys ''") == 2);
  CHECK(read_text(log) == no_name);
  CHECK(read_text(printed_path).empty());
  CHECK(run("--unmapped-keys ''") == 2);
  CHECK(read_text(log) == no_name);
  CHECK(read_text(printed_path).empty());
  // Taken: the method 'rest' holds extra.b and extra.c (112 bytes in all).
  // (The function's row named shared.a's bytes 'a': deduplicate() names
  // their key 'a', which a program asking for shared.a does not find.)
  const std::string warning = "wdedup-demo: warning: the merged store does not keep every key of its files: ";
  const std::string refuses = " (--keep-keys refuses such a store)\n";
  CHECK(run("--ptd '" + path + "' --unmapped-keys rest") == 0);
  CHECK(read_text(log) == warning + one_key_not_kept(path, 3, "shared.a", "a") + refuses);
  const std::string printed = read_text(printed_path);
  CHECK(printed.find("  " + path + ": methods m, rest, 2 partitions, 3 tensors over 112 B\n") !=
        std::string::npos);
  CHECK(printed.find("ONE_BLOB   in 112 B, stored 112 B, saved 0 B") != std::string::npos);
  // Two such stores: each store's unmapped keys get their own method, the
  // second's rest#2 (one name for both refused the second store, saying
  // 'rest' was already a method). A store with none takes no name.
  NamedDataStore second;
  const std::vector<std::uint8_t> d = pattern(48, 4), e = pattern(8, 5);
  REQUIRE(second.add_named_data("shared.d", ByteSpan(d.data(), d.size())).ok());
  REQUIRE(second.add_named_data("extra.e", ByteSpan(e.data(), e.size())).ok());
  FunctionMaps second_maps;
  second_maps.functions.push_back({"n", 0, "blob", "n", {{"d", "shared.d"}}});
  const std::string path2 = dir + "/partial2.ptd", full = dir + "/full.ptd";
  REQUIRE(write_ptd_file(second, second_maps, path2).ok());
  FunctionMaps full_maps;
  full_maps.functions.push_back({"f", 0, "blob", "f", {{"e", "extra.e"}}});
  NamedDataStore whole;
  REQUIRE(whole.add_named_data("extra.e", ByteSpan(e.data(), e.size())).ok());
  REQUIRE(write_ptd_file(whole, full_maps, full).ok());
  CHECK(run("--ptd '" + full + "," + path + "," + path2 + "' --unmapped-keys rest") == 0);
  // (full.ptd's extra.e, named 'e' by its row, is kept: rest#2 holds the
  // same bytes under the name extra.e.)
  CHECK(read_text(log) == warning + one_key_not_kept(path, 3, "shared.a", "a") + "; " +
                              one_key_not_kept(path2, 2, "shared.d", "d") + refuses);
  const std::string both = read_text(printed_path);
  CHECK(both.find("  " + full + ": method f, 1 partition, 1 tensor over 8 B\n") != std::string::npos);
  CHECK(both.find("  " + path + ": methods m, rest, 2 partitions, 3 tensors over 112 B\n") != std::string::npos);
  CHECK(both.find("  " + path2 + ": methods n, rest#2, 2 partitions, 2 tensors over 56 B\n") !=
        std::string::npos);
  // extra.e (8 B) is in f and in rest#2: stored once.
  CHECK(both.find("ONE_BLOB   in 176 B, stored 168 B, saved 8 B") != std::string::npos);
  // A file of ExecuTorch's named rest.ptd, before: it is the method 'rest'
  // (named after the file), and the store's unmapped keys go to the next
  // free name, rest#2.
  const std::string plain_rest = dir + "/rest.ptd";
  REQUIRE(std::system(("cp '" + fixture("simple.ptd") + "' '" + plain_rest + "'").c_str()) == 0);
  CHECK(run("--ptd '" + plain_rest + "," + path + "' --unmapped-keys rest") == 0);
  const std::string after_plain = read_text(printed_path);
  CHECK(after_plain.find("  " + plain_rest + ": method rest, 1 partition, ") != std::string::npos);
  CHECK(after_plain.find("  " + path + ": methods m, rest#2, 2 partitions, 3 tensors over 112 B\n") !=
        std::string::npos);
  // A later store with a method of the name --unmapped-keys made: refused,
  // the message saying the flag made it and for which file.
  NamedDataStore third;
  REQUIRE(third.add_named_data("r.key", ByteSpan(d.data(), d.size())).ok());
  FunctionMaps third_maps;
  third_maps.functions.push_back({"rest", 0, "blob", "rest", {{"r", "r.key"}}});
  const std::string path3 = dir + "/has_rest.ptd";
  REQUIRE(write_ptd_file(third, third_maps, path3).ok());
  CHECK(run("--ptd '" + path + "," + path3 + "' --unmapped-keys rest") == 2);
  CHECK(read_text(log) == "wdedup-demo: " + path3 +
                              ": add_ptd_program: method 'rest' is already in the program (a store's methods keep "
                              "their names: where a file named after its path took that one, add the store first; "
                              "two stores that both hold it do not merge); --unmapped-keys made 'rest' for the keys "
                              "of " + path + " that no function names: give it another METHOD\n");
  // A file of one key read back, and one method alone: counted in the singular.
  const std::string one_out = dir + "/one.ptd", one_dir = dir + "/one_alone";
  CHECK(run("--ptd '" + full + "' --strategy oneblob --out '" + one_out + "' --per-method '" + one_dir + "'") == 0);
  const std::string one = read_text(printed_path);
  CHECK(one.find("  read back " + one_out + " with the runtime reader: 1 key, 1 function, 1 tensor verified\n") !=
        std::string::npos);
  const std::string alone = one_dir + "/f.ptd";
  struct stat st {};
  REQUIRE(::stat(alone.c_str(), &st) == 0);
  CHECK(one.find("  method alone: wrote " + alone + ": " + std::to_string(st.st_size) + " bytes\n"
                 "  every method alone: " + std::to_string(st.st_size) + " bytes in 1 file\n") != std::string::npos);
}
#endif

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo takes a store whose data was replaced since it was written only with --take-replaced-data") {
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/demo_replaced";
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) == 0);
  NamedDataStore store;
  const std::vector<std::uint8_t> a = pattern(64, 1), b = pattern(64, 2);
  REQUIRE(store.add_named_data("a", ByteSpan(a.data(), a.size())).ok());
  REQUIRE(store.add_named_data("b", ByteSpan(b.data(), b.size())).ok());
  const std::vector<std::uint8_t> file = write_or_die(store, {}, WriteOptions{});
  // b's segment moved 128 bytes on (as a rewrite that gave a more bytes
  // would leave it), the WDX1 block as written; b_at: b's bytes as written.
  std::vector<std::uint8_t> moved = file;
  const std::optional<std::uint64_t> b_at = move_segments(moved, 1, 128);
  REQUIRE(b_at.has_value());
  const Nav m{moved};
  // b's bytes replaced by as many others.
  std::vector<std::uint8_t> changed = file;
  changed.at(static_cast<std::size_t>(*b_at) + 5) ^= 1;
  const std::string moved_path = dir + "/moved.ptd", changed_path = dir + "/changed.ptd", log = dir + "/log.txt",
                    printed_path = dir + "/out.txt";
  REQUIRE(write_file(moved_path, moved));
  REQUIRE(write_file(changed_path, changed));
  const std::string demo = "'" + std::string(WDEDUP_DEMO_PATH) + "' --quiet --strategy oneblob --out '' ";
  auto run = [&](const std::string& args) {
    const int status = std::system((demo + args + " > '" + printed_path + "' 2> '" + log + "'").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  // Refused, each naming the demo's flag rather than the library's option.
  CHECK(run("--ptd '" + moved_path + "'") == 2);
  CHECK(read_text(log) ==
        "wdedup-demo: " + moved_path + " (" + std::to_string(moved.size()) +
            " bytes): key entry's data offset differs from its segment: the segments moved since the WDX1 block "
            "was written (as ExecuTorch's replace_data moves them), or either side is damaged; "
            "--take-replaced-data reads them where the flatbuffer says (MalformedIndex at " +
            std::to_string(m.entry(1) + format::key_entry::kDataOffset) + ")\n");
  CHECK(run("--ptd '" + changed_path + "'") == 2);
  CHECK(read_text(log) == "wdedup-demo: " + changed_path + ": add_ptd_method: segment #1 (64 bytes at offset " +
                              std::to_string(*b_at) +
                              ") does not have the content hash the file records: its bytes (or that hash) changed "
                              "since it was written (--take-replaced-data takes them as they are)\n");
  CHECK(run("--take-replaced-data") == 2);
  CHECK(read_text(log) == "wdedup-demo: --take-replaced-data applies to --ptd files only\n");
  // Taken: both files, b's bytes where they now are.
  CHECK(run("--ptd '" + moved_path + "," + changed_path + "' --take-replaced-data") == 0);
  // b's bytes differ between the two: each method's b is its own key.
  CHECK(read_text(log) == "wdedup-demo: warning: the merged store does not keep every key of its files: " +
                              one_key_not_kept(moved_path, 2, "b", "moved/b") + "; " +
                              one_key_not_kept(changed_path, 2, "b", "changed/b") +
                              " (--keep-keys refuses such a store)\n");
  const std::string printed = read_text(printed_path);
  CHECK(printed.find("  " + moved_path + ": method moved, 1 partition, 2 tensors over 128 B\n") !=
        std::string::npos);
  CHECK(printed.find("  " + changed_path + ": method changed, 1 partition, 2 tensors over 128 B\n") !=
        std::string::npos);
  // a is shared by the two; b differs (one byte): 192 B stored of 256.
  CHECK(printed.find("ONE_BLOB   in 256 B, stored 192 B, saved 64 B") != std::string::npos);
}

#endif

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo merges .ptd files exported one method at a time (--ptd)") {
  const std::string dir = WDEDUP_TEST_TMPDIR;
  const std::string aliases = fixture("aliases.ptd"), simple = fixture("simple.ptd");
  const std::string out = dir + "/import_demo.ptd", json = dir + "/import_demo.json", log = dir + "/import_demo.txt";
  std::remove(out.c_str());
  // A second file of the same name (a copy elsewhere: one file given twice
  // is refused) becomes the method "aliases#2".
  const std::string again = dir + "/import_demo_again", copy = again + "/aliases.ptd";
  REQUIRE(std::system(("mkdir -p '" + again + "' && cp '" + aliases + "' '" + copy + "'").c_str()) == 0);
  const std::string cmd = "'" + std::string(WDEDUP_DEMO_PATH) + "' --quiet --strategy positional --ptd '" + aliases +
                          "," + copy + "," + simple + "' --out '" + out + "' --json '" + json + "' > '" + log +
                          "' 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string printed = read_text(log);
  CHECK(printed.find("  " + copy + ": method aliases#2, 1 partition, 6 tensors over 944 B\n") !=
        std::string::npos);
  CHECK(printed.find("15 tensors verified") != std::string::npos);
  // 2 x 1712 + 393 bytes in; aliases.ptd's 944 distinct bytes and
  // simple.ptd's 393 stored once.
  CHECK(read_text(json).find("\"bytes_in\":3817,\"bytes_stored\":1337,\"bytes_saved\":2480,") != std::string::npos);
  // The merged file, read with the runtime reader: one key per distinct
  // (name, bytes), one function per file, each tensor its file's bytes.
  std::unique_ptr<Opened> merged = open_via(Via::Mmap, out);
  REQUIRE(merged->ok());
  const std::size_t merged_keys = REQUIRE_VALUE(merged->map().get_num_keys());
  CHECK(merged_keys == 9);
  CHECK(merged->map().segment_count() == 7);
  CHECK(merged->map().function_count() == 3);
  std::unique_ptr<Opened> original = open_fixture("simple.ptd");
  Result<FunctionView> f = merged->map().find_function("simple", 0);
  REQUIRE(f.ok());
  Result<KeyView> key = f->key_of("simple.b");
  REQUIRE(key.ok());
  Result<DataBuffer> got = merged->map().get_data(*key);
  Result<DataBuffer> want = original->map().get_data("simple.b");
  REQUIRE(got.ok());
  REQUIRE(want.ok());
  REQUIRE(got->size() == 100);
  CHECK(std::memcmp(got->data(), want->data(), 100) == 0);

  // An ExecuTorch file records no alignments: inferred from each key's
  // offset by default (up to 4096, padding offsets aligned by chance), or
  // one for all with --unrecorded-alignment.
  {
    const std::string many = fixture("many_keys.ptd"), out16 = dir + "/import_demo_16.ptd";
    const std::string base = "'" + std::string(WDEDUP_DEMO_PATH) + "' --quiet --strategy oneblob --ptd '" + many + "'";
    REQUIRE(std::system((base + " --out '" + out + "' > '" + log + "' 2>&1").c_str()) == 0);
    REQUIRE(std::system((base + " --unrecorded-alignment 16 --out '" + out16 + "' > '" + log + "' 2>&1").c_str()) ==
            0);
    std::unique_ptr<Opened> inferred = open_via(Via::Mmap, out), sixteen = open_via(Via::Mmap, out16);
    REQUIRE(inferred->ok());
    REQUIRE(sixteen->ok());
    const std::uint64_t keys = REQUIRE_VALUE(sixteen->map().get_num_keys());
    const std::uint64_t inferred_keys = REQUIRE_VALUE(inferred->map().get_num_keys());
    REQUIRE(keys == inferred_keys);
    std::uint64_t largest = 0;
    for (std::size_t i = 0; i < keys; ++i) {
      const KeyInfo at_16 = REQUIRE_VALUE(sixteen->map().key_info(i));
      CHECK(at_16.alignment == 16);
      largest = std::max(largest, REQUIRE_VALUE(inferred->map().key_info(i)).alignment);
    }
    CHECK(largest == 4096);  // the first segment, at the segment base
    // (many_keys.ptd is 1,012,598 bytes: most of its keys' offsets happen
    // to be multiples of more than 16.)
    CHECK(inferred->map().file_size() == 2500726);
    CHECK(sixteen->map().file_size() == 1518198);
    for (const char* flag : {"--unrecorded-alignment -1", "--unrecorded-alignment x", "--unrecorded-alignment 48",
                             "--unrecorded-alignment 8192", "--unrecorded-alignment 4294967295"}) {
      CAPTURE(flag);
      const int st = std::system((base + " " + flag + " --out '' > '" + log + "' 2>&1").c_str());
      CHECK(WIFEXITED(st));
      CHECK(WEXITSTATUS(st) == 2);
      CHECK(read_text(log) == "wdedup-demo: --unrecorded-alignment needs 0 (infer) or a power of two up to 4096, "
                              "got '" + std::string(flag + 23) + "'\n");
    }
    const int st = std::system(("'" + std::string(WDEDUP_DEMO_PATH) + "' --unrecorded-alignment 16 --out '' > '" +
                                log + "' 2>&1").c_str());
    CHECK(WEXITSTATUS(st) == 2);
    CHECK(read_text(log) == "wdedup-demo: --unrecorded-alignment applies to --ptd files only\n");
  }

  // --ptd replaces the generator: its options are refused, not ignored.
  const std::string bad =
      "'" + std::string(WDEDUP_DEMO_PATH) + "' --ptd '" + simple + "' --layers 2 --out '' > '" + log + "' 2>&1";
  const int status = std::system(bad.c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(read_text(log) ==
        "wdedup-demo: --ptd replaces the built-in workload: --model, --layers and --*-partitions do not apply\n");
}
#endif

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo's methods written apart (--per-method) merge back into the very file deduplicate writes") {
  // An export that serializes each method on its own, then the merge: the
  // same keys, functions and bytes as deduplicating the program directly,
  // down to the last byte of the file.
  const std::string dir = WDEDUP_TEST_TMPDIR;
  const std::string split = dir + "/import_split", direct = dir + "/import_direct.ptd",
                    merged = dir + "/import_merged.ptd", log = dir + "/import_split.txt";
  REQUIRE(std::system(("rm -rf '" + split + "'").c_str()) == 0);  // the demo makes the directory
  const std::string demo = WDEDUP_DEMO_PATH;
  REQUIRE(std::system(("'" + demo + "' --quiet --strategy positional --per-method '" + split + "' --out '" + direct +
                       "' > '" + log + "' 2>&1")
                          .c_str()) == 0);
  CHECK(read_text(log).find("  method alone: wrote " + split + "/prefill.ptd: ") != std::string::npos);
  REQUIRE(std::system(("'" + demo + "' --quiet --strategy positional --ptd '" + split + "/prefill.ptd," + split +
                       "/decode.ptd' --out '" + merged + "' > '" + log + "' 2>&1")
                          .c_str()) == 0);
  const std::vector<std::uint8_t> a = read_file(direct), b = read_file(merged);
  REQUIRE(!a.empty());
  CHECK(a.size() == b.size());
  CHECK(a == b);
  // Each method's own file holds that method's tensors under their names.
  std::unique_ptr<Opened> prefill = open_via(Via::Mmap, split + "/prefill.ptd");
  REQUIRE(prefill->ok());
  std::unique_ptr<Opened> d = open_via(Via::Mmap, direct);
  REQUIRE(d->ok());
  Result<FunctionView> f = d->map().find_function("prefill", 0);
  REQUIRE(f.ok());
  const std::size_t prefill_keys = REQUIRE_VALUE(prefill->map().get_num_keys());
  CHECK(prefill_keys == f->tensor_count());
  CHECK(prefill->map().function_count() == 0);
}
#endif

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo's --per-method: a method that cannot be one store is refused before any file is written") {
  // Method "beta" gives "w" different bytes in its two partitions: fine for
  // deduplicate() (two keys), but a store of beta alone keys tensors by
  // name. Found by a review helper: alpha.ptd was written, then the run
  // stopped with exit 1 and no merged store.
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/demo_per_method_conflict";
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) == 0);
  const std::vector<std::uint8_t> a(4096, 1), b(4096, 2), c(128, 3);
  Program p;
  p.add_method("alpha").add_partition().add("w", ByteSpan(c.data(), c.size()));
  Method& beta = p.add_method("beta");
  beta.add_partition().add("w", ByteSpan(a.data(), a.size()));
  beta.add_partition().add("w", ByteSpan(b.data(), b.size()));
  Expected<DedupResult> r = deduplicate<Strategy<OneBlob>>(p);
  REQUIRE(r.ok());
  REQUIRE(write_ptd_file(r->store, r->functions, dir + "/conflict.ptd").ok());
  const std::string demo = WDEDUP_DEMO_PATH, log = dir + "/log.txt";
  const int status = std::system(("'" + demo + "' --quiet --strategy oneblob --ptd '" + dir +
                                  "/conflict.ptd' --per-method '" + dir + "/pm' --out '" + dir +
                                  "/out.ptd' > /dev/null 2> '" + log + "'")
                                     .c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(read_text(log) == "wdedup-demo: --per-method " + dir + "/pm: method 'beta' cannot be one store: partition 1: "
                              "key 'w' already holds 4096 bytes that differ from the 4096 bytes added now "
                              "(first difference at byte 0)\n");
  CHECK(::access((dir + "/pm").c_str(), F_OK) != 0);  // not even the directory
  CHECK(::access((dir + "/out.ptd").c_str(), F_OK) != 0);
}
#endif

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo refuses file names that would leave their directory, and keeps the directory in --out") {
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/demo_paths";
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "/in' '" + dir + "/d.ptd'").c_str()) == 0);
  const std::string demo = WDEDUP_DEMO_PATH, log = dir + "/log.txt";
  // A store whose method is "../escaped" (a method name comes from the
  // file): --per-method DIR must not write DIR/../escaped.ptd.
  FunctionMaps maps;
  maps.functions.push_back({"../escaped", 0, "blob", "f", {{"w", "w"}}});
  const std::vector<std::uint8_t> evil = one_key_file(maps);
  const std::string evil_path = dir + "/in/evil.ptd";
  REQUIRE(write_file(evil_path, evil));
  int status = std::system(("'" + demo + "' --ptd '" + evil_path + "' --per-method '" + dir +
                            "/in/pm' --strategy oneblob --out '' > '" + log + "' 2>&1")
                               .c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);  // a mistake in the request, refused before any work
  CHECK(read_text(log).find("wdedup-demo: --per-method: method '../escaped' is not usable as a file name in " + dir +
                            "/in/pm\n") != std::string::npos);
  CHECK(::access((dir + "/in/escaped.ptd").c_str(), F_OK) != 0);
  CHECK(::access((dir + "/in/pm").c_str(), F_OK) != 0);  // refused before DIR is made
  // --out d.ptd/store with every strategy: each file goes into d.ptd/.
  status = std::system(("'" + demo + "' --quiet --out '" + dir + "/d.ptd/store' > '" + log + "' 2>&1").c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (const char* tag : {"positional", "oneblob", "disabled"})
    CHECK(::access((dir + "/d.ptd/store." + tag + ".ptd").c_str(), F_OK) == 0);
  CHECK(::access((dir + "/d.oneblob.ptd").c_str(), F_OK) != 0);
  // An unwritable --json is refused before any work.
  status = std::system(("'" + demo + "' --quiet --out '" + dir + "/never.ptd' --json '" + dir + "/missing/r.json' > '" +
                        log + "' 2>&1")
                           .c_str());
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(read_text(log) == "wdedup-demo: cannot write --json " + dir + "/missing/r.json: its directory " + dir +
                              "/missing does not exist\n");
  CHECK(::access((dir + "/never.oneblob.ptd").c_str(), F_OK) != 0);
  // So is one that names a directory.
  status = std::system(
      ("'" + demo + "' --quiet --out '" + dir + "/never.ptd' --json '" + dir + "/d.ptd' > '" + log + "' 2>&1").c_str());
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(read_text(log) == "wdedup-demo: cannot write --json " + dir + "/d.ptd: Is a directory\n");
  CHECK(::access((dir + "/never.oneblob.ptd").c_str(), F_OK) != 0);
  // And an --out that cannot be written, for any strategy's file.
  status = std::system(("'" + demo + "' --quiet --out '" + dir + "/missing/m.ptd' > '" + log + "' 2>&1").c_str());
  CHECK(WEXITSTATUS(status) == 2);
  // (Checked once the workload is known, before any deduplication.)
  auto refused_only = [&](const std::string& message) {
    const std::string text = read_text(log);
    CHECK(text.find(message) != std::string::npos);
    CHECK(text.find("wrote") == std::string::npos);
    CHECK(text.find(" in ") == text.find(" in memory"));  // no report line
  };
  refused_only("wdedup-demo: cannot write --out " + dir + "/missing/m.positional.ptd: its directory " + dir +
               "/missing does not exist\n");
  REQUIRE(::mkdir((dir + "/d.ptd/other.oneblob.ptd").c_str(), 0755) == 0);
  status = std::system(("'" + demo + "' --quiet --out '" + dir + "/d.ptd/other' > '" + log + "' 2>&1").c_str());
  CHECK(WEXITSTATUS(status) == 2);
  refused_only("wdedup-demo: cannot write --out " + dir + "/d.ptd/other.oneblob.ptd: Is a directory\n");
  CHECK(::access((dir + "/d.ptd/other.positional.ptd").c_str(), F_OK) != 0);
  // A directory part that is a file.
  REQUIRE(write_file(dir + "/plain", {1}));
  status = std::system(
      ("'" + demo + "' --quiet --strategy oneblob --out '" + dir + "/plain/x.ptd' > '" + log + "' 2>&1").c_str());
  CHECK(WEXITSTATUS(status) == 2);
  refused_only("wdedup-demo: cannot write --out " + dir + "/plain/x.ptd: Not a directory\n");
  // Positional's file is not checked where Positional does not run
  // (methods of different partition counts).
  REQUIRE(::mkdir((dir + "/d.ptd/uneven.positional.ptd").c_str(), 0755) == 0);
  status = std::system(("'" + demo + "' --quiet --prefill-partitions 3 --decode-partitions 2 --out '" + dir +
                        "/d.ptd/uneven' > '" + log + "' 2>&1")
                           .c_str());
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_text(log).find("(Positional skipped: the methods have different partition counts)") != std::string::npos);
  CHECK(::access((dir + "/d.ptd/uneven.oneblob.ptd").c_str(), F_OK) == 0);
}
#endif

TEST_CASE("import: every one-byte corruption of a store's metadata imports exactly or fails cleanly") {
  // For each byte before the segment data, four corruptions (three bit
  // flips, and zeroed: a NUL in a name); each file the reader opens is
  // imported (as a method, or as its program if it has function maps).
  // Success: one tensor per key (or per row), each viewing exactly its
  // key's bytes, and a program deduplicate() takes. Failure: a code an
  // import gives, and the program as it was.
  struct Source {
    std::string name;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Source> sources;
  for (const char* f : {"simple.ptd", "layouts.ptd", "alignment.ptd", "aliases.ptd"})
    sources.push_back({f, read_fixture(f)});
  sources.push_back({"small wdedup file", wdedup_file_bytes()});
  std::size_t opened = 0, imported = 0, refused = 0;
  for (const Source& src : sources) {
    CAPTURE(src.name);
    const std::uint64_t meta = format::load_u64(src.bytes.data() + format::kHeaderSegmentBasePos);
    REQUIRE(meta <= src.bytes.size());
    for (std::size_t p = 0; p < meta; ++p)
      for (int corruption = 0; corruption < 4; ++corruption) {
        std::vector<std::uint8_t> bytes = src.bytes;
        constexpr std::uint8_t kFlip[3] = {0x01, 0x80, 0xFF};
        if (corruption < 3) bytes[p] ^= kFlip[corruption];
        else if (bytes[p] != 0) bytes[p] = 0;
        else continue;
        std::unique_ptr<Opened> o = open_bytes(bytes);
        if (!o->ok()) continue;
        ++opened;
        const NamedDataMap& map = o->map();
        Program program;
        program.add_method("before");
        const bool as_program = map.function_count() != 0;
        Expected<void> e = as_program ? add_ptd_program(program, map) : add_ptd_method(program, map, "m");
        if (!e) {
          ++refused;
          CAPTURE(p);
          CAPTURE(e.message());
          const Error c = e.error();
          // InvalidArgument: a row retargeted, leaving a key no row names.
          // MalformedLayout: a layout that breaks its rules (the file opens,
          // as ExecuTorch loads it; the key's layout is refused).
          // MalformedSegment: a recorded content hash that no longer
          // matches its segment (only in wdedup's WDX1 block).
          CHECK((c == Error::InvalidName || c == Error::MalformedKey || c == Error::LayoutMismatch ||
                 c == Error::MalformedLayout || (c == Error::MalformedSegment && map.has_extension()) ||
                 c == Error::MalformedFunctionMap || (as_program && c == Error::InvalidArgument)));
          CHECK(snapshot(program) == "method before\n");
          continue;
        }
        ++imported;
        std::size_t tensors = 0;
        for (std::size_t m = 1; m < program.methods.size(); ++m)
          for (const Partition& part : program.methods[m].partitions)
            for (const Tensor& t : part.tensors) {
              ++tensors;
              // Each tensor views the bytes of a key of the same size.
              const std::uint8_t* lo = o->bytes.data();
              CHECK(t.bytes.size() <= bytes.size());
              if (t.bytes.size() != 0) {
                CHECK(t.bytes.data() >= lo);
                CHECK(t.bytes.data() + t.bytes.size() <= lo + bytes.size());
              }
              CHECK(t.alignment >= 1);
            }
        if (!as_program) {
          REQUIRE(program.methods.size() == 2);
          const std::vector<Tensor>& t = program.methods[1].partitions[0].tensors;
          const std::size_t map_keys = REQUIRE_VALUE(map.get_num_keys());
          REQUIRE(t.size() == map_keys);
          for (std::size_t i = 0; i < t.size(); ++i) {
            const KeyView k = REQUIRE_VALUE(map.get_key(i));
            CHECK(t[i].name == std::string(k.data(), k.size()));
            const DataBuffer d = REQUIRE_VALUE(map.key_data(i));
            CHECK(t[i].bytes.data() == d.data());
            CHECK(t[i].bytes.size() == d.size());
          }
        } else {
          std::size_t rows = 0;
          for (std::size_t f = 0; f < map.function_count(); ++f) rows += REQUIRE_VALUE(map.function(f)).tensor_count();
          CHECK(tensors == rows);
        }
        // What an import accepts, deduplicate() takes (a name it would
        // refuse is refused at the import, which can say where it came from).
        DedupOptions one_thread;
        one_thread.threads = 1;
        Expected<DedupResult> d = deduplicate<Strategy<OneBlob>>(program, one_thread);
        CAPTURE(p);
        CHECK_MESSAGE(d.ok(), d.message());
      }
  }
  MESSAGE("opened ", opened, " corruptions: ", imported, " imported, ", refused, " refused");
  CHECK(imported > 0);
  CHECK(refused > 0);
}

namespace {
/// An empty directory of this name under the tests' temporary directory.
std::string empty_test_dir(const char* name) {
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/" + name;
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) == 0);
  return dir;
}
/// The program PtdFiles::add makes of one file, which must import.
Program import_alone(PtdFiles& files, const std::string& path) {
  Program program;
  const Expected<void> e = files.add(program, path);
  REQUIRE_MESSAGE(e.ok(), e.message());
  return program;
}
}  // namespace

TEST_CASE("PtdFiles: a file named '.ptd' is imported as method '.ptd' (no empty stem)") {
  const std::string dir = empty_test_dir("import_dot_ptd");
  REQUIRE(write_file(dir + "/.ptd", read_file(fixture("simple.ptd"))));
  PtdFiles files;
  const Program program = import_alone(files, dir + "/.ptd");
  REQUIRE(program.methods.size() == 1);
  CHECK(program.methods[0].name == ".ptd");
  CHECK(program.methods[0].partitions[0].tensors.size() == 3);
}

TEST_CASE("PtdFiles: only a final \".ptd\" comes off a file's name: 'weights.bin' is method 'weights.bin'") {
  const std::string dir = empty_test_dir("import_other_suffix");
  for (const std::string name : {"weights.bin", "w.ptd.bak"}) {
    CAPTURE(name);
    REQUIRE(write_file(dir + "/" + name, read_file(fixture("simple.ptd"))));
    PtdFiles files;
    const Program program = import_alone(files, dir + "/" + name);
    REQUIRE(program.methods.size() == 1);
    CHECK(program.methods[0].name == name);
    CHECK(program.methods[0].partitions[0].tensors.size() == 3);
  }
}

TEST_CASE("PtdFiles: the store of a program with no partitions reads as a one-method export with no keys") {
  // No partition, no function: nothing in the file says deduplicate()
  // wrote it (README, "Stores that deduplicate() wrote").
  const std::string dir = empty_test_dir("import_no_partitions");
  Program empty;
  empty.add_method("prefill");
  Expected<DedupResult> d = deduplicate<Strategy<OneBlob>>(empty);
  REQUIRE_MESSAGE(d.ok(), d.message());
  CHECK(d->functions.functions.empty());
  CHECK(d->store.key_count() == 0);
  REQUIRE(write_ptd_file(d->store, d->functions, dir + "/model.ptd").ok());
  PtdFiles files;
  const Program program = import_alone(files, dir + "/model.ptd");
  REQUIRE(program.methods.size() == 1);
  CHECK(program.methods[0].name == "model");
  REQUIRE(program.methods[0].partitions.size() == 1);
  CHECK(program.methods[0].partitions[0].tensors.empty());
}

TEST_CASE("check_keys_kept: a merged store holds each file's keys as the file did, or says which it does not") {
  std::unique_ptr<Opened> a = open_fixture("simple.ptd", Via::Mmap);
  std::unique_ptr<Opened> same = open_fixture("simple.ptd", Via::Buffer);
  std::unique_ptr<Opened> other = open_bytes(simple_with_other_b());
  REQUIRE(other->ok());

  // The two files as prefill and decode, deduplicated (the result's
  // store points into the files' memory, not into the program).
  auto merge = [](const Opened& prefill, const Opened& decode) {
    Program program;
    REQUIRE(add_ptd_method(program, prefill.map(), "prefill").ok());
    REQUIRE(add_ptd_method(program, decode.map(), "decode").ok());
    Expected<DedupResult> r = deduplicate<Strategy<OneBlob>>(program);
    REQUIRE_MESSAGE(r.ok(), r.message());
    return r;
  };
  // Two exports whose keys agree: every key kept, under its name.
  {
    const Expected<DedupResult> r = merge(*a, *same);
    CHECK(r->store.key_count() == 3);
    CHECK(check_keys_kept(a->map(), r->store).ok());
    CHECK(check_keys_kept(same->map(), r->store).ok());
  }
  // simple.b differs between them: each method's is its own key, and
  // neither file's "simple.b" is a key of the merged store.
  const Expected<DedupResult> r = merge(*a, *other);
  CHECK(r->store.key_count() == 4);
  CHECK(r->store.find("simple.b") == nullptr);
  CHECK(r->store.bytes_of("prefill/simple.b").size() == 100);
  CHECK(r->store.bytes_of("decode/simple.b").size() == 100);
  // Each message names the key that holds the file's simple.b now: the one
  // with its bytes, whichever the method named first.
  for (const char* method : {"", "prefill", "decode", "other"}) {
    CAPTURE(method);
    for (const auto& [o, now] : {std::pair(a.get(), "prefill/simple.b"), std::pair(other.get(), "decode/simple.b")}) {
      const Expected<void> e = check_keys_kept(o->map(), r->store, method);
      CHECK(e.error() == Error::NotFound);
      CHECK(e.message() == one_key_not_kept("", 3, "simple.b", now).substr(2));  // (no path: the file's map itself)
    }
  }

  // A store that holds the key over other bytes, or with another layout.
  auto store_of = [](const NamedDataMap& m, std::size_t changed, ByteSpan changed_bytes,
                     std::optional<Layout> changed_layout) {
    NamedDataStore s;
    const std::size_t key_count = REQUIRE_VALUE(m.get_num_keys());
    for (std::size_t i = 0; i < key_count; ++i) {
      const KeyInfo info = REQUIRE_VALUE(m.key_info(i));
      const std::uint8_t* const held = m.source().view(info.offset, info.size);
      REQUIRE(held != nullptr);
      const ByteSpan bytes(held, static_cast<std::size_t>(info.size));
      std::optional<Layout> layout;
      if (Result<TensorLayout> l = m.key_layout(i); l.ok()) layout.emplace(Layout::copy_of(*l));
      const std::string key = key_text(REQUIRE_VALUE(m.get_key(i)));
      const Expected<void> added = i == changed ? s.add_named_data(key, changed_bytes, 1, changed_layout)
                                                : s.add_named_data(key, bytes, 1, layout);
      REQUIRE_MESSAGE(added.ok(), added.message());
    }
    return s;
  };
  const KeyInfo b_other = REQUIRE_VALUE(other->map().key_info(1));
  const std::uint8_t* const other_b_at = other->map().source().view(b_other.offset, b_other.size);
  REQUIRE(other_b_at != nullptr);
  const ByteSpan other_b(other_b_at, 100);
  Expected<void> e = check_keys_kept(a->map(), store_of(a->map(), 1, other_b, std::nullopt));
  CHECK(e.error() == Error::KeyConflict);
  CHECK(e.message() == "check_keys_kept: key 'simple.b': the merged store holds 100 bytes that differ from the file's "
                       "100 (first difference at byte 3)");
  e = check_keys_kept(a->map(), store_of(a->map(), 1, ByteSpan(other_b.data(), 99), std::nullopt));
  CHECK(e.error() == Error::KeyConflict);
  CHECK(e.message() == "check_keys_kept: key 'simple.b': the merged store holds 99 bytes that differ from the file's "
                       "100");
  // The same bytes elsewhere in memory are the same key.
  const std::uint8_t* const a_b_at = a->map().source().view(512, 100);
  REQUIRE(a_b_at != nullptr);
  const std::vector<std::uint8_t> a_b(a_b_at, a_b_at + 100);
  CHECK(check_keys_kept(a->map(), store_of(a->map(), 1, ByteSpan(a_b.data(), a_b.size()), std::nullopt)).ok());
  // Those bytes under a name that only ends like the key's are not where it
  // went (deduplicate() gives '<method>/<key>'): named with no "now".
  {
    NamedDataStore s;
    REQUIRE(s.add_named_data("notsimple.b", ByteSpan(a_b.data(), a_b.size())).ok());
    REQUIRE(s.add_named_data("m/simple.bb", ByteSpan(a_b.data(), a_b.size())).ok());
    e = check_keys_kept(a->map(), s);
    CHECK(e.error() == Error::NotFound);
    CHECK(e.message() == "check_keys_kept: 3 of the file's 3 keys are not in the merged store: 'simple.a', "
                         "'simple.b', 'simple.c'" +
                             not_kept_why("them"));
  }
  // The file's own bytes (its memory, not a copy) under another name are
  // where the key went only whole and with the key's layout (none): not a
  // prefix of them, nor them with a layout.
  {
    NamedDataStore s;
    REQUIRE(s.add_named_data("prefix", ByteSpan(a_b_at, 99)).ok());
    REQUIRE(s.add_named_data("typed", ByteSpan(a_b_at, 100), 1, Layout::contiguous(ScalarType::Byte, {100})).ok());
    e = check_keys_kept(a->map(), s);
    CHECK(e.error() == Error::NotFound);
    CHECK(e.message() == "check_keys_kept: 3 of the file's 3 keys are not in the merged store: 'simple.a', "
                         "'simple.b', 'simple.c'" + not_kept_why("them"));
    REQUIRE(s.add_named_data("own", ByteSpan(a_b_at, 100)).ok());
    e = check_keys_kept(a->map(), s);
    CHECK(e.error() == Error::NotFound);
    CHECK(e.message() == "check_keys_kept: 3 of the file's 3 keys are not in the merged store: 'simple.a', "
                         "'simple.b' (now 'own'), 'simple.c'" + not_kept_why("them"));
  }

  std::unique_ptr<Opened> layouts = open_fixture("layouts.ptd", Via::Mmap);
  const NamedDataMap& lm = layouts->map();
  const Layout l0_layout = Layout::copy_of(REQUIRE_VALUE(lm.key_layout(0)));
  const KeyInfo l0 = REQUIRE_VALUE(lm.key_info(0));
  const KeyView l0_key = REQUIRE_VALUE(lm.get_key(0));
  const std::uint8_t* const l0_at = lm.source().view(l0.offset, l0.size);
  REQUIRE(l0_at != nullptr);
  const ByteSpan l0_bytes(l0_at, static_cast<std::size_t>(l0.size));
  CHECK(check_keys_kept(lm, store_of(lm, 0, l0_bytes, l0_layout)).ok());
  e = check_keys_kept(lm, store_of(lm, 0, l0_bytes, std::nullopt));
  CHECK(e.error() == Error::LayoutMismatch);
  CHECK(e.message() == "check_keys_kept: key " + wdedup::detail::quote_name(key_text(l0_key)) +
                           ": the merged store has no layout, the file " + wdedup::detail::describe_layout(l0_layout));
  // Another layout of as many bytes (float32 [3, 2] for [2, 3]).
  const Layout l0_other = Layout::contiguous(ScalarType::Float, {3, 2});
  REQUIRE(key_text(l0_key) == "float32.2x3");
  REQUIRE(l0_other != l0_layout);
  e = check_keys_kept(lm, store_of(lm, 0, l0_bytes, l0_other));
  CHECK(e.error() == Error::LayoutMismatch);
  CHECK(e.message() == "check_keys_kept: key 'float32.2x3': the merged store has " +
                           wdedup::detail::describe_layout(l0_other) + ", the file " +
                           wdedup::detail::describe_layout(l0_layout));
  // A key whose layout breaks its rules (key 5's [2, 2, 2] made [2, 2, 4]:
  // 64 bytes over 32) held under its name: the reader's code and rule. Not
  // held: no key is said to hold it now (its layout is not known).
  {
    std::unique_ptr<Opened> bad = layouts_with_last_size(4);
    const NamedDataMap& bm = bad->map();
    const KeyInfo k5 = REQUIRE_VALUE(bm.key_info(5));
    const std::uint8_t* const k5_at = bm.source().view(k5.offset, k5.size);
    REQUIRE(k5_at != nullptr);
    const ByteSpan k5_bytes(k5_at, static_cast<std::size_t>(k5.size));
    e = check_keys_kept(bm, store_of(bm, 5, k5_bytes, std::nullopt));
    CHECK(e.error() == Error::MalformedLayout);
    CHECK(e.message() == "check_keys_kept: key 'int32.2x2x2': layout describes more bytes than its segment holds "
                         "(MalformedLayout at 476)");
    NamedDataStore s;
    REQUIRE(s.add_named_data("m/int32.2x2x2", k5_bytes).ok());
    e = check_keys_kept(bm, s);
    CHECK(e.error() == Error::NotFound);
    CHECK(e.message() == "check_keys_kept: 11 of the file's 11 keys are not in the merged store: 'float32.2x3', "
                         "'float16.4', 'bfloat16.2x2', 'int8.5', 'uint8.3x1', 'int32.2x2x2', 'int64.scalar', 'bool.6' "
                         "and 3 more" +
                             not_kept_why("them"));
  }

  // Keys missing and a key held with other bytes: both said, the first in
  // file order first, with its code; keys after the first held otherwise
  // are not compared, missing ones still counted.
  {
    const std::vector<std::uint8_t> ka = pattern(16, 1), kb = pattern(16, 2), kc = pattern(16, 3),
                                     other_b2 = pattern(16, 4), a_copy = ka;
    NamedDataStore file;
    REQUIRE(file.add_named_data("a", ByteSpan(ka.data(), ka.size())).ok());
    REQUIRE(file.add_named_data("b", ByteSpan(kb.data(), kb.size())).ok());
    REQUIRE(file.add_named_data("c", ByteSpan(kc.data(), kc.size())).ok());
    std::unique_ptr<Opened> f = open_bytes(write_or_die(file, FunctionMaps{}, WriteOptions{}));
    REQUIRE(f->ok());
    const KeyView first_key = REQUIRE_VALUE(f->map().get_key(0));
    REQUIRE(key_text(first_key) == "a");
    const std::string b_differs = "key 'b': the merged store holds 16 bytes that differ from the file's 16" +
                                  wdedup::detail::first_difference(ByteSpan(other_b2.data(), 16), ByteSpan(kb.data(), 16));
    NamedDataStore merged;  // b over other bytes; a's bytes (a copy) under another name; no c
    REQUIRE(merged.add_named_data("b", ByteSpan(other_b2.data(), other_b2.size())).ok());
    REQUIRE(merged.add_named_data("zz", ByteSpan(a_copy.data(), a_copy.size())).ok());
    e = check_keys_kept(f->map(), merged);
    CHECK(e.error() == Error::NotFound);
    CHECK(e.message() == "check_keys_kept: 2 of the file's 3 keys are not in the merged store: 'a', 'c'" +
                             not_kept_why("them") + "; and " + b_differs);
    NamedDataStore merged2;  // a over other bytes, b kept with other bytes too (not compared), no c
    REQUIRE(merged2.add_named_data("a", ByteSpan(kc.data(), kc.size())).ok());
    REQUIRE(merged2.add_named_data("b", ByteSpan(other_b2.data(), other_b2.size())).ok());
    e = check_keys_kept(f->map(), merged2);
    CHECK(e.error() == Error::KeyConflict);
    CHECK(e.message() == "check_keys_kept: key 'a': the merged store holds 16 bytes that differ from the file's 16" +
                             wdedup::detail::first_difference(ByteSpan(kc.data(), 16), ByteSpan(ka.data(), 16)) +
                             "; and 1 of the file's 3 keys is not in the merged store: 'c'" + not_kept_why("it"));
    // A file of one key, and its 2-byte key held with 1: counted in the singular.
    NamedDataStore one;
    REQUIRE(one.add_named_data("a", ByteSpan(ka.data(), 2)).ok());
    std::unique_ptr<Opened> f1 = open_bytes(write_or_die(one, FunctionMaps{}, WriteOptions{}));
    REQUIRE(f1->ok());
    e = check_keys_kept(f1->map(), NamedDataStore{});
    CHECK(e.error() == Error::NotFound);
    CHECK(e.message() == "check_keys_kept: 1 of the file's 1 key is not in the merged store: 'a'" +
                             not_kept_why("it"));
    NamedDataStore held_one;
    REQUIRE(held_one.add_named_data("a", ByteSpan(kb.data(), 1)).ok());
    e = check_keys_kept(f1->map(), held_one);
    CHECK(e.error() == Error::KeyConflict);
    CHECK(e.message() == "check_keys_kept: key 'a': the merged store holds 1 byte that differs from the file's 2");
  }
  // Eight keys missing, the most that are all named: no " and 0 more".
  {
    NamedDataStore eight;
    const std::vector<std::uint8_t> byte = pattern(1, 1);
    for (char c = 'a'; c < 'i'; ++c) REQUIRE(eight.add_named_data(std::string(1, c), ByteSpan(byte.data(), 1)).ok());
    std::unique_ptr<Opened> f8 = open_bytes(write_or_die(eight, FunctionMaps{}, WriteOptions{}));
    REQUIRE(f8->ok());
    e = check_keys_kept(f8->map(), NamedDataStore());
    CHECK(e.error() == Error::NotFound);
    CHECK(e.message() == "check_keys_kept: 8 of the file's 8 keys are not in the merged store: 'a', 'b', 'c', 'd', "
                         "'e', 'f', 'g', 'h'" +
                             not_kept_why("them"));
  }
  // Every key missing is counted; the first 8 are named, in file order.
  std::unique_ptr<Opened> many = open_fixture("many_keys.ptd", Via::Mmap);
  const std::size_t n = REQUIRE_VALUE(many->map().get_num_keys());
  REQUIRE(n > 8);
  std::string first8;
  for (std::size_t i = 0; i < 8; ++i)
    first8 += (i ? ", " : "") + wdedup::detail::quote_name(key_text(REQUIRE_VALUE(many->map().get_key(i))));
  e = check_keys_kept(many->map(), NamedDataStore());
  CHECK(e.error() == Error::NotFound);
  CHECK(e.message() == "check_keys_kept: " + std::to_string(n) + " of the file's " + std::to_string(n) +
                           " keys are not in the merged store: " + first8 + " and " + std::to_string(n - 8) +
                           " more" + not_kept_why("them"));

  // A store whose bytes are not in memory cannot be compared.
  std::unique_ptr<Opened> file = open_via(Via::File, fixture("simple.ptd"));
  REQUIRE(file->ok());
  e = check_keys_kept(file->map(), r->store);
  CHECK(e.error() == Error::InvalidArgument);
  CHECK(e.message().rfind("check_keys_kept: the store is not in memory", 0) == 0);
}

namespace {
/// Three exports in an empty directory: prefill.ptd and same.ptd are
/// simple.ptd, decode.ptd simple_with_other_b().
struct Exports {
  std::string dir, prefill, same, decode;
};
Exports three_exports(const char* name) {
  const std::string dir = empty_test_dir(name);
  const Exports x{dir, dir + "/prefill.ptd", dir + "/same.ptd", dir + "/decode.ptd"};
  REQUIRE(write_file(x.prefill, read_fixture("simple.ptd")));
  REQUIRE(write_file(x.same, read_fixture("simple.ptd")));
  REQUIRE(write_file(x.decode, simple_with_other_b()));
  return x;
}
}  // namespace

TEST_CASE("PtdFiles::check_keys_kept: every file checked, each failing one named with its problem") {
  const Exports x = three_exports("import_keys_kept");
  const std::string &prefill = x.prefill, &same = x.same, &decode = x.decode;
  {
    PtdFiles files;
    Program program;
    REQUIRE(files.add(program, prefill).ok());
    REQUIRE(files.add(program, same).ok());
    Expected<DedupResult> r = deduplicate<Strategy<Positional>>(program);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(files.check_keys_kept(r->store).ok());
  }
  PtdFiles files;
  Program program;
  REQUIRE(files.add(program, prefill).ok());
  REQUIRE(files.add(program, same).ok());
  REQUIRE(files.add(program, decode).ok());
  Expected<DedupResult> r = deduplicate<Strategy<Positional>>(program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  // prefill's and same's simple.b agree with each other, not with decode's:
  // all three lose the name.
  CHECK(r->store.bytes_of("prefill/simple.b").size() == 100);
  CHECK(r->store.bytes_of("decode/simple.b").size() == 100);
  const Expected<void> e = files.check_keys_kept(r->store);
  CHECK(e.error() == Error::NotFound);
  // same.ptd's is 'same/simple.b', its own method's, though
  // 'prefill/simple.b' holds the same bytes and comes first.
  CHECK(e.message() == one_key_not_kept(prefill, 3, "simple.b", "prefill/simple.b") + "; " +
                           one_key_not_kept(same, 3, "simple.b", "same/simple.b") + "; " +
                           one_key_not_kept(decode, 3, "simple.b", "decode/simple.b"));
  // The code is the first failing file's, whatever a later one's is: a
  // store of simple.ptd's simple.a and simple.b (copies) lacks prefill's
  // simple.c (NotFound); decode's simple.b, met before its simple.c, holds
  // other bytes there (KeyConflict).
  std::unique_ptr<Opened> simple = open_fixture("simple.ptd");
  std::vector<std::uint8_t> copies[2];
  NamedDataStore ab;
  for (std::size_t i = 0; i < 2; ++i) {
    const KeyInfo k = REQUIRE_VALUE(simple->map().key_info(i));
    const std::uint8_t* const at = simple->map().source().view(k.offset, k.size);
    REQUIRE(at != nullptr);
    copies[i].assign(at, at + k.size);
    REQUIRE(ab.add_named_data(key_text(REQUIRE_VALUE(simple->map().get_key(i))),
                              ByteSpan(copies[i].data(), copies[i].size()))
                .ok());
  }
  PtdFiles two;
  Program both;
  REQUIRE(two.add(both, prefill).ok());
  REQUIRE(two.add(both, decode).ok());
  const std::string c_not_kept = "1 of the file's 3 keys is not in the merged store: 'simple.c'" +
                                 not_kept_why("it");
  const Expected<void> first = two.check_keys_kept(ab);
  CHECK(first.error() == Error::NotFound);
  CHECK(first.message() == prefill + ": check_keys_kept: " + c_not_kept + "; " + decode +
                               ": check_keys_kept: key 'simple.b': the merged store holds 100 bytes that differ from "
                               "the file's 100 (first difference at byte 3); and " + c_not_kept);
}

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo warns of a merge that does not keep its files' keys, and --keep-keys refuses it") {
  const Exports x = three_exports("import_demo_keep_keys");
  const std::string &dir = x.dir, &prefill = x.prefill, &same = x.same, &decode = x.decode;
  const std::string out = dir + "/merged.ptd", err = dir + "/err.txt";
  auto demo = [&](const std::string& inputs, const std::string& flags) {
    const int st = std::system(("'" + std::string(WDEDUP_DEMO_PATH) + "' --quiet --strategy oneblob --ptd '" + inputs +
                                "' --out '" + out + "'" + flags + " > /dev/null 2> '" + err + "'")
                                   .c_str());
    REQUIRE(WIFEXITED(st));
    return WEXITSTATUS(st);
  };
  const std::string why = one_key_not_kept(prefill, 3, "simple.b", "prefill/simple.b") + "; " +
                          one_key_not_kept(decode, 3, "simple.b", "decode/simple.b");
  // Keys that agree: nothing said, with or without the flag.
  CHECK(demo(prefill + "," + same, "") == 0);
  CHECK(read_text(err).empty());
  CHECK(demo(prefill + "," + same, " --keep-keys") == 0);
  CHECK(read_text(err).empty());
  const std::vector<std::uint8_t> kept_file = read_file(out);
  // simple.b differs: written, with a warning naming the key and the files.
  CHECK(demo(prefill + "," + decode, "") == 0);
  CHECK(read_text(err) == "wdedup-demo: warning: the merged store does not keep every key of its files: " + why +
                              " (--keep-keys refuses such a store)\n");
  const std::vector<std::uint8_t> renamed_file = read_file(out);
  CHECK(renamed_file != kept_file);
  std::unique_ptr<Opened> m = open_via(Via::Mmap, out);
  REQUIRE(m->ok());
  CHECK(!m->map().get_data("simple.b").ok());
  CHECK(m->map().get_data("decode/simple.b").ok());
  // --keep-keys: refused, exit 1, the file there left as it was.
  REQUIRE(write_file(out, kept_file));
  CHECK(demo(prefill + "," + decode, " --keep-keys") == 1);
  CHECK(read_text(err) ==
        "wdedup-demo: --keep-keys: the merged store does not keep every key of its files, and is not written: " + why +
            "\n");
  CHECK(read_file(out) == kept_file);
  // Under every strategy: the keys are checked once, for the first store,
  // and each strategy's store is refused on that answer, not only the first.
  // (The later flag counts: --strategy all, each store to merged.<tag>.ptd.)
  CHECK(demo(prefill + "," + decode, " --keep-keys --strategy all") == 1);
  CHECK(read_text(err) ==
        "wdedup-demo: --keep-keys: the merged store does not keep every key of its files, and is not written: " + why +
            "\n");
  for (const char* tag : {"positional", "oneblob", "disabled"}) {
    const std::string store = dir + "/merged." + tag + ".ptd";
    CAPTURE(store);
    CHECK(::access(store.c_str(), F_OK) != 0);
  }
  // With --per-method, whose files wait for the answer: none written where
  // the merge is refused, both where it is not.
  const std::string pm = dir + "/pm";
  CHECK(demo(prefill + "," + decode, " --keep-keys --per-method '" + pm + "'") == 1);
  CHECK(read_text(err) ==
        "wdedup-demo: --keep-keys: the merged store does not keep every key of its files, and is not written: " + why +
            "\nwdedup-demo: --keep-keys: --per-method " + pm + " not written either\n");
  struct stat st_pm {};
  CHECK(::stat(pm.c_str(), &st_pm) == -1);
  CHECK(read_file(out) == kept_file);
  CHECK(demo(prefill + "," + same, " --keep-keys --per-method '" + pm + "'") == 0);
  std::unique_ptr<Opened> simple = open_fixture("simple.ptd", Via::Mmap);
  CHECK(read_text(err).empty());
  for (const char* method : {"prefill", "same"}) {
    CAPTURE(method);
    std::unique_ptr<Opened> written = open_via(Via::Mmap, pm + "/" + method + ".ptd");
    REQUIRE(written->ok());
    const NamedDataMap &w = written->map(), &f = simple->map();
    const std::size_t written_keys = REQUIRE_VALUE(w.get_num_keys());
    REQUIRE(written_keys == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      const std::string key = key_text(REQUIRE_VALUE(f.get_key(i)));
      CAPTURE(key);
      const KeyInfo fi = REQUIRE_VALUE(f.key_info(i)), wi = REQUIRE_VALUE(w.find(KeyView(key.data(), key.size())));
      REQUIRE(wi.size == fi.size);
      const std::uint8_t* const written_at = w.source().view(wi.offset, wi.size);
      const std::uint8_t* const fixture_at = f.source().view(fi.offset, fi.size);
      REQUIRE(written_at != nullptr);
      REQUIRE(fixture_at != nullptr);
      CHECK(std::memcmp(written_at, fixture_at, static_cast<std::size_t>(fi.size)) == 0);
    }
  }
  // Only for --ptd.
  const int st = std::system(("'" + std::string(WDEDUP_DEMO_PATH) + "' --keep-keys --out '' > /dev/null 2> '" + err +
                              "'").c_str());
  CHECK(WEXITSTATUS(st) == 2);
  CHECK(read_text(err) == "wdedup-demo: --keep-keys applies to --ptd files only\n");
}
#endif

#if defined(__cpp_exceptions)
TEST_CASE("PtdFiles: out of memory at any allocation of an add: std::bad_alloc, and neither the program nor the files change") {
  // README: a failed import leaves the program unchanged, and PtdFiles::add
  // changes neither the program nor itself on any error. Each allocation of
  // an add fails in turn: a plain file (add_ptd_method) and a store
  // deduplicate() wrote (add_ptd_program), into a program that holds a
  // method already.
  const std::string simple = fixture("simple.ptd");
  for (const std::string& path : {simple, wdedup_file_path()}) {
    CAPTURE(path);
    PtdFiles files;
    Program program;
    std::string before;
    bool added = false;
    const long injected = wdedup_test::fail_each_allocation(
        g_fail_countdown,
        [&] {
          program = Program();  // (first: its tensors view the files' memory)
          files = PtdFiles();
          REQUIRE(files.add(program, simple, "first").ok());
          before = snapshot(program);
        },
        [&] { added = files.add(program, path).ok(); },
        [&] {
          CHECK(files.size() == 1);
          CHECK(snapshot(program) == before);
          // ...and the same add then succeeds.
          REQUIRE(files.add(program, path).ok());
          CHECK(files.size() == 2);
        },
        [&] {
          REQUIRE(added);
          CHECK(files.size() == 2);
          CHECK(program.methods.size() > 1);
        });
    CHECK(injected >= 10);
  }
}
#endif  // __cpp_exceptions
