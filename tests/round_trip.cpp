// Round trip through both halves: every strategy's result on the Llama
// workload is written as a .ptd, mapped, and read back with NamedDataMap;
// every key's bytes, layout and alignment and every function map must come
// back exactly as deduplicate() produced them.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

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
  REQUIRE(*map->get_num_keys() == r.store.key_count());
  CHECK(map->segment_count() == r.store.buffer_count());

  for (std::size_t i = 0; i < r.store.key_count(); ++i) {
    const StoreKey& k = r.store.keys()[i];
    CAPTURE(k.key);
    CHECK(sv(*map->get_key(i)) == k.key);
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
    for (const FunctionTensor& t : f.tensors) CHECK(sv(*fv->key_of(t.tensor_name)) == t.key);
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
    CHECK(sv(*fn->key_of("output.weight")) == "output.weight");
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
  CHECK(r->store.buffers()[r->store.find("odd")->buffer_index].alignment == 12288);
  check_round_trip(*r, std::string(WDEDUP_TEST_TMPDIR) + "/round_trip_unequal.ptd");
}
