// Round trip through both halves: every strategy's result on the Llama
// workload is written as a .ptd, mapped, and read back with NamedDataMap;
// every key's bytes, layout and alignment and every function map must come
// back exactly as deduplicate() produced them. Then 450 random programs,
// checked against their own tensors (see "random programs" below).
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "support/require_value.hpp"
#include "wdedup/wdedup.hpp"

using namespace wdedup;

namespace {

std::string sv(std::string_view v) { return std::string(v); }

/// Largest power of two dividing `a`, capped at the page size: what an
/// mmap'd pointer can promise (the file offset promises the full value).
std::uint64_t pointer_alignment(std::uint64_t a) {
  std::uint64_t p = a & (~a + 1);
  return p > 4096 ? 4096 : p;
}

void check_round_trip(const DedupResult& r, const std::string& path) {
  auto written = write_ptd_file(r.store, r.functions, path);
  REQUIRE_MESSAGE(written.ok(), written.message());
  auto source = MmapSource::open(path.c_str());
  REQUIRE(source.ok());
  auto map = NamedDataMap::open(*source);
  REQUIRE(map.ok());
  CHECK(map->has_index());
  const std::size_t num_keys = REQUIRE_VALUE(map->get_num_keys());
  REQUIRE(num_keys == r.store.key_count());
  CHECK(map->segment_count() == r.store.buffer_count());

  for (std::size_t i = 0; i < r.store.key_count(); ++i) {
    const StoreKey& k = r.store.keys()[i];
    CAPTURE(k.key);
    const KeyView key = REQUIRE_VALUE(map->get_key(i));
    CHECK(sv(key) == k.key);
    const ByteSpan expected = r.store.buffers()[k.buffer_index].bytes;
    auto data = map->get_data(k.key);
    REQUIRE(data.ok());
    REQUIRE(data->size() == expected.size());
    CHECK(std::memcmp(data->data(), expected.data(), expected.size()) == 0);
    auto info = map->find(k.key);
    REQUIRE(info.ok());
    CHECK(info->segment_index == k.buffer_index);
    CHECK(info->alignment == k.alignment);
    const std::uint64_t seg_align = r.store.buffers()[k.buffer_index].alignment;
    CHECK(info->offset % seg_align == 0);  // absolute file alignment
    CHECK(reinterpret_cast<std::uintptr_t>(data->data()) % pointer_alignment(k.alignment) == 0);
    auto layout = map->get_tensor_layout(k.key);
    if (!k.layout) {
      CHECK(layout.error() == Error::NotFound);
      continue;
    }
    REQUIRE(layout.ok());
    CHECK(layout->scalar_type == k.layout->scalar_type);
    REQUIRE(layout->sizes.size() == k.layout->sizes.size());
    for (std::size_t d = 0; d < k.layout->sizes.size(); ++d) {
      CHECK(layout->sizes[d] == k.layout->sizes[d]);
      CHECK(layout->dim_order[d] == k.layout->dim_order[d]);
    }
  }

  REQUIRE(map->function_count() == r.functions.functions.size());
  for (const FunctionMap& f : r.functions.functions) {
    CAPTURE(f.function_name);
    auto fv = map->find_function(f.method, f.partition_index);
    REQUIRE(fv.ok());
    CHECK(sv(fv->method()) == f.method);
    CHECK(fv->partition_index() == f.partition_index);
    CHECK(sv(fv->blob_key()) == f.blob_key);
    CHECK(sv(fv->function_name()) == f.function_name);
    REQUIRE(fv->tensor_count() == f.tensors.size());
    for (const FunctionTensor& t : f.tensors) {
      CAPTURE(t.tensor_name);
      const KeyView key = REQUIRE_VALUE(fv->key_of(t.tensor_name));
      CHECK(sv(key) == t.key);
    }
    auto by_name = map->find_function(f.blob_key, f.function_name);
    REQUIRE(by_name.ok());
    CHECK(by_name->partition_index() == f.partition_index);
    CHECK(sv(by_name->method()) == f.method);
  }
}

}  // namespace

TEST_CASE("every strategy's result round-trips through a .ptd file") {
  LlamaConfig c = LlamaConfig::tiny();
  c.prefill_partitions = 2;
  c.decode_partitions = 2;
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  const std::string dir = WDEDUP_TEST_TMPDIR;
  SUBCASE("Positional") {
    auto r = deduplicate<Strategy<Positional>>(w->program());
    REQUIRE(r.ok());
    check_round_trip(*r, dir + "/round_trip_positional.ptd");
  }
  SUBCASE("OneBlob") {
    auto r = deduplicate<Strategy<OneBlob>>(w->program());
    REQUIRE(r.ok());
    check_round_trip(*r, dir + "/round_trip_oneblob.ptd");
    auto source = MmapSource::open((dir + "/round_trip_oneblob.ptd").c_str());
    REQUIRE(source.ok());
    auto map = NamedDataMap::open(*source);
    REQUIRE(map.ok());
    auto fn = map->find_function("decode__1");
    REQUIRE(fn.ok());
    CHECK(sv(fn->blob_key()) == "combined_all");
    const KeyView output_key = REQUIRE_VALUE(fn->key_of("output.weight"));
    CHECK(sv(output_key) == "output.weight");
  }
  SUBCASE("Disabled") {
    auto r = deduplicate<Strategy<Disabled>>(w->program());
    REQUIRE(r.ok());
    check_round_trip(*r, dir + "/round_trip_disabled.ptd");
  }
}

TEST_CASE("OneBlob with unequal partitions and odd alignments round-trips") {
  LlamaConfig c = LlamaConfig::tiny();
  c.n_layers = 6;
  c.prefill_partitions = 3;
  c.decode_partitions = 2;
  c.alignment = 4096;
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  // An alias asking for a non-power-of-two alignment: lcm(4096, 3).
  std::vector<std::uint8_t> odd(48, 7);
  Program& p = w->program();
  p.methods[1].partitions[1].add("odd", ByteSpan(odd.data(), odd.size()), 3);
  p.methods[1].partitions[1].add("odd_alias", ByteSpan(odd.data(), odd.size()), 4096);
  auto r = deduplicate<Strategy<OneBlob>>(p);
  REQUIRE(r.ok());
  const StoreKey& odd_key = REQUIRE_FOUND(r->store.find("odd"));
  CHECK(r->store.buffers()[odd_key.buffer_index].alignment == 12288);
  check_round_trip(*r, std::string(WDEDUP_TEST_TMPDIR) + "/round_trip_unequal.ptd");
}

// ---- random programs ---------------------------------------------------------
// What deduplicate() promises, checked against the input itself rather than
// against deduplicate()'s own output: for every tensor of every partition,
// the written file's function table leads to a key whose bytes, layout and
// alignment are the tensor's; that key is the one the README's naming rules
// give (expected_keys); and the store holds each distinct content exactly
// once. Programs mix what makes this hard: contents that differ in
// one byte (first, middle or last), equal contents in separate memory, one
// buffer under two names (a tied weight), empty tensors, one name with
// different bytes or layouts in different methods, tensor names that look
// like generated keys ("decode/w", "w~1"), alignments that are not powers
// of two. Half the programs run with a hash under which everything
// collides, so that only the byte comparison separates contents.

namespace {

struct CollideAll {
  std::uint64_t operator()(const void*, std::size_t, std::uint64_t) const noexcept { return 42; }
};

/// The keys the README's rules ("Store keys", under Semantics) give each
/// tensor, in program order, written from the rules and not from the
/// library: a name whose every occurrence has the same bytes and layout is
/// its own key; else <method>/<name> if consistent within its method; else
/// <method>/<partition>/<name>. A generated key already held by other bytes
/// or another layout (a consistent real name's, or an earlier generated
/// one's) takes ~1, ~2, ...; one held by the same bytes and layout is shared.
std::vector<std::string> expected_keys(const Program& program) {
  struct Site {
    const std::string* method;
    std::size_t partition;
    const Tensor* tensor;
  };
  std::vector<Site> sites;
  for (const Method& m : program.methods)
    for (std::size_t p = 0; p < m.partitions.size(); ++p)
      for (const Tensor& t : m.partitions[p].tensors) sites.push_back(Site{&m.name, p, &t});
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.bytes.size() == b.bytes.size() &&
           (a.bytes.empty() || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0) &&
           a.layout == b.layout;
  };
  // Per name (and per method and name): its first tensor, and whether every
  // occurrence is the same as that one.
  std::map<std::string, std::pair<const Tensor*, bool>> by_name;
  std::map<std::pair<std::string, std::string>, std::pair<const Tensor*, bool>> by_method_name;
  for (const Site& s : sites) {
    auto g = by_name.emplace(s.tensor->name, std::make_pair(s.tensor, true)).first;
    g->second.second = g->second.second && same(*g->second.first, *s.tensor);
    auto m = by_method_name.emplace(std::make_pair(*s.method, s.tensor->name), std::make_pair(s.tensor, true)).first;
    m->second.second = m->second.second && same(*m->second.first, *s.tensor);
  }
  std::map<std::string, const Tensor*> generated;  // generated key -> the tensor that took it first
  std::vector<std::string> keys;
  for (const Site& s : sites) {
    const std::string& name = s.tensor->name;
    if (by_name.at(name).second) {
      keys.push_back(name);
      continue;
    }
    const std::string base = by_method_name.at({*s.method, name}).second
                                 ? *s.method + "/" + name
                                 : *s.method + "/" + std::to_string(s.partition) + "/" + name;
    std::string key = base;
    for (int n = 1;; ++n) {
      const auto real = by_name.find(key);
      const Tensor* holder = nullptr;
      if (real != by_name.end() && real->second.second) {
        holder = real->second.first;
      } else if (const auto g = generated.find(key); g != generated.end()) {
        holder = g->second;
      } else {
        generated.emplace(key, s.tensor);
      }
      if (holder == nullptr || same(*holder, *s.tensor)) break;
      key = base + "~" + std::to_string(n);
    }
    keys.push_back(key);
  }
  return keys;
}

struct RandomProgram {
  std::vector<std::vector<std::uint8_t>> contents;  // separate memory each
  Program program;
  std::size_t distinct = 0;
  bool equal_partitions = true;
  std::vector<std::string> keys;  ///< each tensor's key in program order (expected_keys)

  explicit RandomProgram(std::uint32_t seed) {
    std::mt19937 rng(seed);
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    auto name_hash = [](const char* s) {  // FNV-1a: the same on every platform
      std::uint64_t h = 14695981039346656037ull;
      for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
      return h;
    };
    // 65,536 bytes is the most deduplicate() compares in pairs
    // (identity::kRunMaxBytes); one more is compared block by block.
    const std::size_t sizes[] = {0, 1, 7, 64, 100, 4096, 5000, 65536, 65537};
    for (int b = 0; b < 6; ++b) {
      std::vector<std::uint8_t> v(sizes[pick(9)]);
      for (auto& x : v) x = static_cast<std::uint8_t>(rng());
      contents.push_back(v);
      if (v.empty()) continue;
      for (const std::size_t at : {std::size_t{0}, v.size() / 2, v.size() - 1}) {  // one byte off
        std::vector<std::uint8_t> w = v;
        w[at] ^= 0x5A;
        contents.push_back(w);
      }
    }
    const std::size_t originals = contents.size();
    for (std::size_t c = 0; c < originals; c += 2) contents.push_back(contents[c]);  // equal bytes, other memory
    std::set<std::vector<std::uint8_t>> seen;

    const char* method_pool[] = {"prefill", "decode", "a", "verify"};
    const char* name_pool[] = {"w", "b", "x.y", "decode/w", "prefill/0/w", "w~1", "decode/w~1", "norm", "emb", "z"};
    const std::size_t n_methods = 1 + pick(4);
    const std::size_t first_partitions = 1 + pick(3);
    for (std::size_t m = 0; m < n_methods; ++m) {
      Method& method = program.add_method(method_pool[m]);
      const std::size_t n_parts = pick(3) == 0 ? 1 + pick(3) : first_partitions;
      equal_partitions = equal_partitions && n_parts == first_partitions;
      for (std::size_t p = 0; p < n_parts; ++p) {
        Partition& part = method.add_partition();
        std::vector<const char*> names(std::begin(name_pool), std::end(name_pool));
        std::shuffle(names.begin(), names.end(), rng);
        const std::size_t n_tensors = pick(8);
        for (std::size_t t = 0; t < n_tensors; ++t) {
          // Names repeat across partitions and methods, often with the
          // same content (a shared weight), sometimes not.
          const std::size_t c = pick(3) == 0 ? pick(contents.size())
                                             : static_cast<std::size_t>(name_hash(names[t]) % contents.size());
          const std::vector<std::uint8_t>& bytes = contents[c];
          const std::int64_t aligns[] = {1, 1, 16, 64, 3, 4096};
          std::optional<Layout> layout;
          switch (pick(4)) {
            case 0: layout = Layout::contiguous(ScalarType::Byte, {static_cast<std::int32_t>(bytes.size())}); break;
            case 1:
              if (bytes.size() % 4 == 0)
                layout = Layout::contiguous(ScalarType::Float, {static_cast<std::int32_t>(bytes.size() / 4)});
              break;
            default: break;
          }
          part.add(names[t], ByteSpan(bytes.data(), bytes.size()), aligns[pick(6)], layout);
          seen.insert(bytes);
        }
        if (n_tensors > 0 && pick(2) == 0) {  // a tied weight: an earlier tensor's buffer, new name
          const Tensor tied = part.tensors[pick(part.tensors.size())];
          part.add("tied", tied.bytes, tied.alignment, tied.layout);
        }
      }
    }
    distinct = seen.size();
    keys = expected_keys(program);
  }
};

template <class Policy, class Hash>
std::vector<std::uint8_t> check_random_program(const RandomProgram& rp, unsigned threads, const Hash& hash) {
  const Program& program = rp.program;
  DedupOptions options;
  options.threads = threads;
  auto r = deduplicate<Strategy<Policy>>(program, options, hash);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(r->store.buffer_count() == rp.distinct);
  // Every tensor's key as the README's rules give it, and the store's keys
  // in order of first use.
  std::vector<std::string> got, first_use;
  for (const FunctionMap& f : r->functions.functions)
    for (const FunctionTensor& t : f.tensors) got.push_back(t.key);
  CHECK(got == rp.keys);
  for (const std::string& k : rp.keys)
    if (std::find(first_use.begin(), first_use.end(), k) == first_use.end()) first_use.push_back(k);
  std::vector<std::string> store_keys;
  for (const StoreKey& k : r->store.keys()) store_keys.push_back(k.key);
  CHECK(store_keys == first_use);
  auto file = serialize_ptd(r->store, r->functions);
  REQUIRE_MESSAGE(file.ok(), file.message());
  BufferSource source(file->data(), file->size());
  auto map = NamedDataMap::open(source);
  REQUIRE(map.ok());
  CHECK(map->segment_count() == rp.distinct);
  for (std::size_t m = 0; m < program.methods.size(); ++m) {
    const Method& method = program.methods[m];
    for (std::uint32_t p = 0; p < method.partitions.size(); ++p) {
      CAPTURE(method.name);
      CAPTURE(p);
      auto fn = map->find_function(method.name, p);
      REQUIRE(fn.ok());
      CHECK(sv(fn->blob_key()) == Policy::blob_key(program, m, p));
      CHECK(sv(fn->function_name()) == Policy::function_name(program, m, p));
      const Partition& part = method.partitions[p];
      REQUIRE(fn->tensor_count() == part.tensors.size());
      for (const Tensor& t : part.tensors) {
        CAPTURE(t.name);
        auto key = fn->key_of(t.name);
        REQUIRE(key.ok());
        auto data = map->get_data(*key);
        REQUIRE(data.ok());
        REQUIRE(data->size() == t.bytes.size());
        CHECK((t.bytes.empty() || std::memcmp(data->data(), t.bytes.data(), t.bytes.size()) == 0));
        auto info = map->find(*key);
        REQUIRE(info.ok());
        CHECK(info->alignment % static_cast<std::uint64_t>(t.alignment) == 0);
        CHECK(info->offset % static_cast<std::uint64_t>(t.alignment) == 0);
        auto layout = map->get_tensor_layout(*key);
        REQUIRE(layout.ok() == t.layout.has_value());
        if (!t.layout) continue;
        CHECK(layout->scalar_type == t.layout->scalar_type);
        CHECK(std::vector<std::int32_t>(layout->sizes.begin(), layout->sizes.end()) == t.layout->sizes);
        CHECK(std::vector<std::uint8_t>(layout->dim_order.begin(), layout->dim_order.end()) == t.layout->dim_order);
      }
    }
  }
  return std::move(file).value();
}

template <class Policy>
void check_random_programs(std::uint32_t first_seed, std::uint32_t count) {
  for (std::uint32_t seed = first_seed; seed < first_seed + count; ++seed) {
    CAPTURE(seed);
    const RandomProgram rp(seed);
    if (std::is_same<Policy, Positional>::value && !rp.equal_partitions) continue;
    // One file, whatever the thread count or the hash: byte for byte.
    const std::vector<std::uint8_t> one = check_random_program<Policy>(rp, 1, Xxh3Hash{});
    CHECK(check_random_program<Policy>(rp, 2, Xxh3Hash{}) == one);
    if (seed % 2 == 0) CHECK(check_random_program<Policy>(rp, 2, CollideAll{}) == one);
  }
}

}  // namespace

TEST_CASE("random programs: every tensor reads back exactly, each distinct content is stored once") {
  SUBCASE("OneBlob") { check_random_programs<OneBlob>(1, 150); }
  SUBCASE("Positional") { check_random_programs<Positional>(1, 150); }
  SUBCASE("Disabled") { check_random_programs<Disabled>(1, 150); }
}
