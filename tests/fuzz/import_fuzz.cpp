// tests/fuzz/import_fuzz.cpp — libFuzzer target for the build-time half
// over whatever the reader accepts: import, deduplicate, write, read back.
// Any bytes in; for every file NamedDataMap opens:
//   - the import that fits the store (add_ptd_program for one with function
//     maps, add_ptd_method for a plain one) either refuses it with one of
//     its documented codes and a message, leaving the program as it was, or
//     gives tensors that are views of exactly the keys' bytes in the file;
//     the other import refuses it with InvalidArgument;
//   - an imported program always deduplicates (OneBlob) and serializes;
//     read back, every tensor of every partition is found through its
//     function's table with its exact bytes and layout, at an offset its
//     alignment divides;
//   - a wdedup file always imports again, and deduplicating the import of
//     the import gives the same file byte for byte (the first round trip
//     reorders each partition's tensors by name; after it, nothing moves).
// A broken property aborts with a message naming it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
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

bool documented_import_error(Error e) {
  switch (e) {
    case Error::InvalidName:           // an empty key, a NUL byte, a method met twice
    case Error::MalformedKey:          // a key twice
    case Error::LayoutMismatch:        // a layout smaller than its segment
    case Error::MalformedFunctionMap:  // partitions given twice or with gaps
      return true;
    default:
      return false;  // the reader's codes cannot occur for a store it opened
  }
}

/// Every tensor of `program`'s method `mi` onwards, imported from `map`,
/// is a view into the map's memory at exactly one key's bytes.
void check_views(const Program& program, std::size_t first_method, const NamedDataMap& map) {
  const std::uint8_t* file = map.source().view(0, map.file_size());
  for (std::size_t mi = first_method; mi < program.methods.size(); ++mi)
    for (const Partition& part : program.methods[mi].partitions)
      for (const Tensor& t : part.tensors) {
        FUZZ_CHECK(t.bytes.size() == 0 || (t.bytes.data() >= file && t.bytes.data() + t.bytes.size() <=
                                                                          file + map.file_size()),
                   t.bytes.size(), map.file_size());
        FUZZ_CHECK(t.alignment >= 1 && static_cast<std::uint64_t>(t.alignment) <= kMaxAlignment,
                   static_cast<std::uint64_t>(t.alignment), 0);
      }
}

/// Deduplicates `program` under OneBlob and serializes it; both must work.
std::vector<std::uint8_t> dedup_and_write(const Program& program, DedupResult* result) {
  DedupOptions one_thread;  // results do not depend on it; starting threads would only slow fuzzing
  one_thread.threads = 1;
  Expected<DedupResult> r = deduplicate<Strategy<OneBlob>>(program, one_thread);
  if (!r) fail_with("deduplicate() of an imported program", r.message());
  Expected<std::vector<std::uint8_t>> bytes = serialize_ptd(r->store, r->functions);
  if (!bytes) fail_with("serialize_ptd", bytes.message());
  *result = std::move(r).value();
  return std::move(bytes).value();
}

/// Reading `file` back, every tensor of `program` is where its function's
/// table says, with its bytes, its layout and its alignment.
void check_read_back(const Program& program, const NamedDataMap& file) {
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
        if (t.layout) {
          const TensorLayout want = t.layout->view();
          FUZZ_CHECK(layout->scalar_type == want.scalar_type && layout->sizes.size() == want.sizes.size() &&
                         layout->dim_order.size() == want.dim_order.size(),
                     layout->sizes.size(), want.sizes.size());
          for (std::size_t d = 0; d < want.sizes.size(); ++d)
            FUZZ_CHECK(layout->sizes[d] == want.sizes[d] && layout->dim_order[d] == want.dim_order[d], d, 0);
        }
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
  if (!map) return 0;

  // A program that already holds a method: a refused import must leave it
  // exactly as it was.
  static const std::uint8_t kSentinel[4] = {1, 2, 3, 4};
  Program program;
  program.add_method("wdedup fuzz sentinel").add_partition().add("s", ByteSpan(kSentinel, 4));
  const bool with_functions = map->function_count() != 0;
  Expected<void> added = with_functions ? add_ptd_program(program, *map) : add_ptd_method(program, *map, "m");
  {
    Program other;
    Expected<void> refused = with_functions ? add_ptd_method(other, *map, "m") : add_ptd_program(other, *map);
    FUZZ_CHECK(!refused && refused.error() == Error::InvalidArgument && other.methods.empty(),
               static_cast<std::uint64_t>(refused.error()), other.methods.size());
  }
  if (!added) {
    FUZZ_CHECK(documented_import_error(added.error()) && !added.message().empty(),
               static_cast<std::uint64_t>(added.error()), added.message().size());
    FUZZ_CHECK(program.methods.size() == 1 && program.methods[0].partitions.size() == 1 &&
                   program.methods[0].partitions[0].tensors.size() == 1,
               program.methods.size(), 1);
    return 0;
  }
  check_views(program, 1, *map);
  if (!with_functions) {
    // One tensor per key, in file order, named by it, over its bytes.
    const std::vector<Tensor>& tensors = program.methods[1].partitions[0].tensors;
    FUZZ_CHECK(tensors.size() == *map->get_num_keys(), tensors.size(), *map->get_num_keys());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const KeyView key = *map->get_key(i);
      FUZZ_CHECK(tensors[i].name == std::string(key.data(), key.size()), i, 0);
      FUZZ_CHECK(tensors[i].bytes.data() == map->key_data(i)->bytes().data() &&
                     tensors[i].bytes.size() == map->key_data(i)->size(),
                 i, tensors[i].bytes.size());
    }
  }

  // Round trips: file -> program -> file, and the second one changes nothing.
  DedupResult first;
  const std::vector<std::uint8_t> bytes1 = dedup_and_write(program, &first);
  const BufferSource src1(bytes1.data(), bytes1.size());
  Result<NamedDataMap> file1 = NamedDataMap::open(src1);
  FUZZ_CHECK(file1.ok(), static_cast<std::uint64_t>(file1.error()), bytes1.size());
  check_read_back(program, *file1);

  DedupResult second, third;
  const Program program2 = reimport(*file1);
  const std::vector<std::uint8_t> bytes2 = dedup_and_write(program2, &second);
  const BufferSource src2(bytes2.data(), bytes2.size());
  Result<NamedDataMap> file2 = NamedDataMap::open(src2);
  FUZZ_CHECK(file2.ok(), static_cast<std::uint64_t>(file2.error()), bytes2.size());
  check_read_back(program2, *file2);
  FUZZ_CHECK(second.store.key_count() == first.store.key_count() &&
                 second.store.buffer_count() == first.store.buffer_count() &&
                 second.store.bytes_stored() == first.store.bytes_stored(),
             second.store.buffer_count(), first.store.buffer_count());

  const Program program3 = reimport(*file2);
  const std::vector<std::uint8_t> bytes3 = dedup_and_write(program3, &third);
  FUZZ_CHECK(bytes3 == bytes2, bytes3.size(), bytes2.size());
  return 0;
}
