// tests/fuzz/import_fuzz.cpp — libFuzzer target for the build-time half
// over whatever the reader accepts: import, deduplicate, write, read back.
// Any bytes in; for every file NamedDataMap opens (with
// OpenOptions::allow_moved_segments where it must):
//   - the import that fits the store (add_ptd_program for one with function
//     maps, add_ptd_method for a plain one) either refuses it with one of
//     its documented codes and a message, leaving the program as it was, or
//     gives one tensor per key (per row), each a view of exactly its key's
//     bytes in the file; the other import refuses it with InvalidArgument
//     (MalformedKey where the keys' strings overlap: both check that first);
//     it takes the bytes as they are, and by default (ImportOptions::
//     verify_content_hashes) a segment of a wdedup file whose bytes no
//     longer have their recorded hash is refused (MalformedSegment),
//     unless another check refused the file (that check comes last);
//   - an imported program deduplicates (under OneBlob, Disabled or, when its
//     methods have equal partition counts, Positional: the input's size
//     picks, so each input always runs the same way) and serializes, unless
//     identical bytes ask for alignments whose lcm exceeds 2^32 (a file can
//     record any alignment; InvalidAlignment, naming the lcm); read back,
//     every partition is a function, and every tensor is found through its
//     table with its exact bytes and layout, at an offset its alignment
//     divides;
//   - a wdedup file always imports again, giving the same methods and
//     partitions with the same tensors (name, bytes, layout; an alignment
//     a multiple of the first), and deduplicating the import of the import
//     gives the same file byte for byte (the first round trip sorts a plain
//     store's tensors by name and gives each tensor its key's alignment;
//     after it, nothing moves).
// A broken property aborts with a message naming it.
#include "support/instances.hpp"  // first: see there
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "wdedup/wdedup.hpp"

namespace {

using namespace wdedup;

[[noreturn]] void fail(const char* what, std::uint64_t a, std::uint64_t b) {
  std::fprintf(stderr, "import_fuzz: property broken: %s (%llu, %llu)\n", what, static_cast<unsigned long long>(a),
               static_cast<unsigned long long>(b));
  std::abort();
}
#define FUZZ_CHECK(cond, a, b) \
  do {                         \
    if (!(cond)) fail(#cond, (a), (b)); \
  } while (0)

[[noreturn]] void fail_with(const char* step, const std::string& message) {
  std::fprintf(stderr, "import_fuzz: %s failed: %s\n", step, message.c_str());
  std::abort();
}

/// 8-byte-aligned memory holding a copy of `bytes`, as mmap would give.
struct Aligned {
  std::vector<std::uint64_t> words;
  std::size_t size;
  explicit Aligned(const std::uint8_t* data, std::size_t n) : words(n / 8 + 1), size(n) {
    if (n != 0) std::memcpy(words.data(), data, n);
  }
  const std::uint8_t* data() const { return reinterpret_cast<const std::uint8_t*>(words.data()); }
};

bool documented_import_error(Error e, bool with_functions) {
  switch (e) {
    case Error::InvalidName:           // an empty key, a NUL byte, not UTF-8, a method met twice
    case Error::MalformedKey:          // a key twice
    case Error::LayoutMismatch:        // a layout smaller than its segment
    case Error::MalformedLayout:       // a layout that breaks its rules (the file opens, as in ExecuTorch)
    case Error::MalformedFunctionMap:  // partitions given twice or with gaps
      return true;
    case Error::InvalidArgument:       // add_ptd_program: a key no function names
      return with_functions;
    default:
      return false;  // the reader's other codes cannot occur for a store it opened
  }
}

/// The tensors an import added to `program` (methods from `first_method`
/// on): one per key of a plain store, in file order, named by it; one per
/// row of a store with function maps, in the order of the rows' keys (then
/// table order), named by the row.
/// Each is a view of exactly its key's bytes, with a valid alignment.
void check_import(const Program& program, std::size_t first_method, const NamedDataMap& map) {
  auto check = [&](const Tensor& t, KeyView name, std::size_t key_index) {
    FUZZ_CHECK(t.name == std::string(name.data(), name.size()), key_index, t.name.size());
    Result<DataBuffer> data = map.key_data(key_index);
    FUZZ_CHECK(data.ok() && t.bytes.data() == data->bytes().data() && t.bytes.size() == data->size(), key_index,
               t.bytes.size());
    FUZZ_CHECK(t.alignment >= 1 && static_cast<std::uint64_t>(t.alignment) <= kMaxAlignment,
               static_cast<std::uint64_t>(t.alignment), key_index);
  };
  if (map.function_count() == 0) {
    FUZZ_CHECK(program.methods.size() == first_method + 1 && program.methods.back().partitions.size() == 1,
               program.methods.size(), first_method);
    const std::vector<Tensor>& tensors = program.methods.back().partitions[0].tensors;
    FUZZ_CHECK(tensors.size() == *map.get_num_keys(), tensors.size(), *map.get_num_keys());
    for (std::size_t i = 0; i < tensors.size(); ++i) check(tensors[i], *map.get_key(i), i);
    return;
  }
  std::size_t partitions = 0;
  for (std::size_t mi = first_method; mi < program.methods.size(); ++mi)
    partitions += program.methods[mi].partitions.size();
  FUZZ_CHECK(partitions == map.function_count(), partitions, map.function_count());
  for (std::size_t fi = 0; fi < map.function_count(); ++fi) {
    const FunctionView f = *map.function(fi);
    const Method* m = program.find_method(std::string_view(f.method().data(), f.method().size()));
    FUZZ_CHECK(m != nullptr && f.partition_index() < m->partitions.size(), fi, f.partition_index());
    const std::vector<Tensor>& tensors = m->partitions[f.partition_index()].tensors;
    FUZZ_CHECK(tensors.size() == f.tensor_count(), tensors.size(), f.tensor_count());
    std::vector<std::pair<std::uint32_t, std::size_t>> rows;  // (key index, row)
    for (std::size_t r = 0; r < tensors.size(); ++r) rows.emplace_back(f.tensor(r)->key_index, r);
    std::sort(rows.begin(), rows.end());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const FunctionTensorView row = *f.tensor(rows[i].second);
      check(tensors[i], row.tensor_name, row.key_index);
    }
  }
}

/// `again` (an import of what deduplicating `program` wrote) holds the same
/// methods and partitions, each with the same tensors by name: the same
/// bytes and layout, and an alignment that is a multiple of the first's.
void check_same_program(const Program& program, const Program& again) {
  FUZZ_CHECK(again.methods.size() == program.methods.size(), again.methods.size(), program.methods.size());
  for (std::size_t mi = 0; mi < program.methods.size(); ++mi) {
    const Method& a = program.methods[mi];
    const Method& b = again.methods[mi];
    FUZZ_CHECK(a.name == b.name && a.partitions.size() == b.partitions.size(), mi, b.partitions.size());
    for (std::size_t p = 0; p < a.partitions.size(); ++p) {
      auto by_name = [](const std::vector<Tensor>& ts) {
        std::vector<const Tensor*> v;
        for (const Tensor& t : ts) v.push_back(&t);
        std::sort(v.begin(), v.end(), [](const Tensor* x, const Tensor* y) { return x->name < y->name; });
        return v;
      };
      const std::vector<const Tensor*> x = by_name(a.partitions[p].tensors), y = by_name(b.partitions[p].tensors);
      FUZZ_CHECK(x.size() == y.size(), x.size(), y.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        FUZZ_CHECK(x[i]->name == y[i]->name && x[i]->bytes.size() == y[i]->bytes.size(), i, y[i]->bytes.size());
        FUZZ_CHECK(x[i]->bytes.size() == 0 || std::memcmp(x[i]->bytes.data(), y[i]->bytes.data(), x[i]->bytes.size()) == 0,
                   i, x[i]->bytes.size());
        FUZZ_CHECK(x[i]->layout == y[i]->layout, i, 0);
        FUZZ_CHECK(y[i]->alignment % x[i]->alignment == 0, static_cast<std::uint64_t>(y[i]->alignment),
                   static_cast<std::uint64_t>(x[i]->alignment));
      }
    }
  }
}

enum class Policy { OneBlob, Disabled, Positional };

/// The policy an input runs under: picked by its size, so every run of an
/// input is the same; Positional only where it applies (equal partition
/// counts), OneBlob otherwise.
Policy policy_for(std::size_t input_size, const Program& program) {
  const auto pick = static_cast<Policy>(input_size % 3);
  return pick == Policy::Positional && !wdedup::Positional::validate(program) ? Policy::OneBlob : pick;
}

/// Deduplicates `program` under `policy` and serializes it. Both must work,
/// except that deduplicate() may refuse alignments whose lcm is too large
/// when `lcm_may_overflow` (then returns false).
bool dedup_and_write(const Program& program, Policy policy, bool lcm_may_overflow, DedupResult* result,
                     std::vector<std::uint8_t>* bytes) {
  DedupOptions one_thread;  // results do not depend on it; starting threads would only slow fuzzing
  one_thread.threads = 1;
  Expected<DedupResult> r =
      policy == Policy::OneBlob    ? deduplicate<Strategy<OneBlob>>(program, one_thread)
      : policy == Policy::Disabled ? deduplicate<Strategy<Disabled>>(program, one_thread)
                                   : deduplicate<Strategy<Positional>>(program, one_thread);
  if (!r) {
    if (lcm_may_overflow && r.error() == Error::InvalidAlignment &&
        r.message().find("lcm of alignments") != std::string::npos)
      return false;
    fail_with("deduplicate() of an imported program", r.message());
  }
  Expected<std::vector<std::uint8_t>> written = serialize_ptd(r->store, r->functions);
  if (!written) fail_with("serialize_ptd", written.message());
  *result = std::move(r).value();
  *bytes = std::move(written).value();
  return true;
}

/// Reading `file` back, every partition of `program` is a function, and
/// every tensor is where its table says, with its bytes, its layout and
/// its alignment.
void check_read_back(const Program& program, const NamedDataMap& file) {
  std::size_t partitions = 0;
  for (const Method& m : program.methods) partitions += m.partitions.size();
  FUZZ_CHECK(file.function_count() == partitions, file.function_count(), partitions);
  for (const Method& m : program.methods)
    for (std::uint32_t p = 0; p < m.partitions.size(); ++p) {
      Result<FunctionView> f = file.find_function(KeyView(m.name.data(), m.name.size()), p);
      FUZZ_CHECK(f.ok(), p, m.partitions.size());
      FUZZ_CHECK(f->tensor_count() == m.partitions[p].tensors.size(), f->tensor_count(),
                 m.partitions[p].tensors.size());
      for (const Tensor& t : m.partitions[p].tensors) {
        Result<KeyView> key = f->key_of(KeyView(t.name.data(), t.name.size()));
        FUZZ_CHECK(key.ok(), t.name.size(), 0);
        Result<DataBuffer> data = file.get_data(*key);
        FUZZ_CHECK(data.ok() && data->size() == t.bytes.size(), data.ok() ? data->size() : 0, t.bytes.size());
        FUZZ_CHECK(t.bytes.size() == 0 || std::memcmp(data->data(), t.bytes.data(), t.bytes.size()) == 0,
                   t.bytes.size(), 0);
        Result<KeyInfo> info = file.find(*key);
        FUZZ_CHECK(info.ok() && info->offset % static_cast<std::uint64_t>(t.alignment) == 0,
                   info.ok() ? info->offset : 0, static_cast<std::uint64_t>(t.alignment));
        FUZZ_CHECK(info->alignment % static_cast<std::uint64_t>(t.alignment) == 0, info->alignment,
                   static_cast<std::uint64_t>(t.alignment));
        Result<TensorLayout> layout = file.get_tensor_layout(*key);
        FUZZ_CHECK(layout.ok() == t.layout.has_value(), layout.ok(), t.layout.has_value());
        if (t.layout)
          FUZZ_CHECK(Layout::copy_of(*layout) == *t.layout, layout->sizes.size(), t.layout->sizes.size());
      }
    }
}

/// Imports a file deduplicate() wrote (it must import) into a new program.
Program reimport(const NamedDataMap& file) {
  Program program;
  if (Expected<void> ok = add_ptd_program(program, file); !ok) fail_with("importing a wdedup-written file", ok.message());
  return program;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Aligned input(data, size);
  const BufferSource src(input.data(), size);
  Result<NamedDataMap> map = NamedDataMap::open(src);
  if (!map) {
    // A file whose segments moved since its WDX1 block was written opens
    // with the option (any other refusal stands: named_data_map_fuzz), and
    // imports by the flatbuffer's ranges.
    OpenOptions allow;
    allow.allow_moved_segments = true;
    map = NamedDataMap::open(src, allow);
    if (!map) return 0;
    FUZZ_CHECK(map->segments_moved(), 0, 0);
  }

  // A program that already holds a method: a refused import must leave it
  // exactly as it was.
  static const std::uint8_t kSentinel[4] = {1, 2, 3, 4};
  Program program;
  program.add_method("wdedup fuzz sentinel").add_partition().add("s", ByteSpan(kSentinel, 4));
  const bool with_functions = map->function_count() != 0;
  // The bytes as they are: a mutated segment of a wdedup file no longer has
  // its recorded hash, and the import's later checks are explored anyway.
  ImportOptions as_they_are;
  as_they_are.verify_content_hashes = false;
  Expected<void> added = with_functions ? add_ptd_program(program, *map, as_they_are)
                                        : add_ptd_method(program, *map, "m", as_they_are);
  {
    // By default a segment whose recorded content hash no longer matches
    // is refused (MalformedSegment), unless another check refused the
    // file; without such a segment, the same outcome.
    bool mismatch = false;
    for (std::uint32_t i = 0; map->has_extension() && i < map->segment_count() && !mismatch; ++i) {
      const Result<SegmentInfo> seg = map->segment(i);
      FUZZ_CHECK(seg.ok(), i, map->segment_count());
      if (!seg->has_content_hash) continue;
      const Result<std::uint64_t> h = segment_content_hash(*map, i);
      FUZZ_CHECK(h.ok(), i, static_cast<std::uint64_t>(h.ok() ? Error::Ok : h.error()));
      mismatch = *h != seg->content_hash;
    }
    Program checked;
    const Expected<void> verified =
        with_functions ? add_ptd_program(checked, *map) : add_ptd_method(checked, *map, "m");
    if (mismatch)  // (the check comes last: an earlier refusal is the same)
      FUZZ_CHECK(!verified && checked.methods.empty() &&
                     verified.error() == (added ? Error::MalformedSegment : added.error()),
                 static_cast<std::uint64_t>(verified.error()), checked.methods.size());
    else
      FUZZ_CHECK(verified.ok() == added.ok() && (verified.ok() || verified.error() == added.error()),
                 static_cast<std::uint64_t>(verified.error()), static_cast<std::uint64_t>(added.error()));
  }
  {
    Program other;
    Expected<void> refused = with_functions ? add_ptd_method(other, *map, "m") : add_ptd_program(other, *map);
    // (Keys whose strings overlap are refused first, by either import.)
    const Error other_error = map->keys_overlap() ? Error::MalformedKey : Error::InvalidArgument;
    FUZZ_CHECK(!refused && refused.error() == other_error && other.methods.empty(),
               static_cast<std::uint64_t>(refused.error()), other.methods.size());
  }
  if (!added) {
    FUZZ_CHECK(documented_import_error(added.error(), with_functions) && !added.message().empty(),
               static_cast<std::uint64_t>(added.error()), added.message().size());
    FUZZ_CHECK(program.methods.size() == 1 && program.methods[0].name == "wdedup fuzz sentinel" &&
                   program.methods[0].partitions.size() == 1 &&
                   program.methods[0].partitions[0].tensors.size() == 1 &&
                   program.methods[0].partitions[0].tensors[0].bytes.data() == kSentinel,
               program.methods.size(), 1);
    return 0;
  }
  check_import(program, 1, *map);

  // Round trips: file -> program -> file, and the second one changes nothing.
  DedupResult first, second, third;
  std::vector<std::uint8_t> bytes1, bytes2, bytes3;
  const Policy policy = policy_for(size, program);
  if (!dedup_and_write(program, policy, true, &first, &bytes1)) return 0;
  const BufferSource src1(bytes1.data(), bytes1.size());
  Result<NamedDataMap> file1 = NamedDataMap::open(src1);
  FUZZ_CHECK(file1.ok(), static_cast<std::uint64_t>(file1.error()), bytes1.size());
  check_read_back(program, *file1);

  const Program program2 = reimport(*file1);
  check_import(program2, 0, *file1);
  check_same_program(program, program2);
  dedup_and_write(program2, policy, false, &second, &bytes2);
  const BufferSource src2(bytes2.data(), bytes2.size());
  Result<NamedDataMap> file2 = NamedDataMap::open(src2);
  FUZZ_CHECK(file2.ok(), static_cast<std::uint64_t>(file2.error()), bytes2.size());
  check_read_back(program2, *file2);
  FUZZ_CHECK(second.store.key_count() == first.store.key_count() &&
                 second.store.buffer_count() == first.store.buffer_count() &&
                 second.store.bytes_stored() == first.store.bytes_stored(),
             second.store.buffer_count(), first.store.buffer_count());

  const Program program3 = reimport(*file2);
  dedup_and_write(program3, policy, false, &third, &bytes3);
  FUZZ_CHECK(bytes3 == bytes2, bytes3.size(), bytes2.size());
  return 0;
}
