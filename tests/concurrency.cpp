// All const queries on one open map are safe from many threads at once: the
// map holds no mutable state, and FileSource reads with pread. Several
// std::threads look up, load and copy every key of shared maps (mmap and
// pread, a wdedup file with its stored index and a plain file with a lent
// index) and compare with answers computed single-threaded beforehand.
// CI runs this under ThreadSanitizer (-Db_sanitize=thread).
// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run (tests/doctest_main.cpp).
#include "support/wdedup_file.hpp"  // first: see the note there

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "wdedup/runtime.hpp"

using namespace wdedup;
using namespace wdedup_test;

namespace {

constexpr int kThreads = 8;

/// What one key should look like, computed before any thread starts.
struct Want {
  std::string key;
  KeyInfo info;
  std::vector<std::uint8_t> bytes;
  bool has_layout = false;
  std::uint64_t nbytes = 0;
};

std::vector<Want> expectations(const NamedDataMap& map, const std::vector<std::uint8_t>& file) {
  std::vector<Want> out;
  const std::size_t num_keys = REQUIRE_VALUE(map.get_num_keys());
  for (std::size_t i = 0; i < num_keys; ++i) {
    Want e;
    e.key = std::string(REQUIRE_VALUE(map.get_key(i)));
    e.info = REQUIRE_VALUE(map.find(e.key));
    e.bytes.assign(file.begin() + static_cast<std::ptrdiff_t>(e.info.offset),
                   file.begin() + static_cast<std::ptrdiff_t>(e.info.offset + e.info.size));
    Result<TensorLayout> l = map.get_tensor_layout(e.key);
    e.has_layout = l.ok();
    if (l.ok()) e.nbytes = l->nbytes();
    out.push_back(std::move(e));
  }
  return out;
}

/// Each thread walks the keys from its own starting point, so threads hit
/// the same keys at different moments; returns the number of mismatches.
std::uint64_t hammer(const NamedDataMap& map, const std::vector<Want>& want, int thread, int rounds) {
  std::uint64_t bad = 0;
  std::vector<std::uint8_t> buf;
  const std::size_t n = want.size();
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t j = 0; j < n; ++j) {
      const Want& e = want[(j * 7 + static_cast<std::size_t>(thread) * 131 + static_cast<std::size_t>(r)) % n];
      Result<KeyInfo> k = map.find(e.key);
      if (!k || k->offset != e.info.offset || k->size != e.info.size || k->key_index != e.info.key_index) ++bad;
      Result<TensorLayout> l = map.get_tensor_layout(e.key);
      if (l.ok() != e.has_layout || (l.ok() && l->nbytes() != e.nbytes)) ++bad;
      Result<DataBuffer> d = map.get_data(e.key);
      if (!d || d->size() != e.bytes.size() ||
          (d->size() && std::memcmp(d->data(), e.bytes.data(), d->size()) != 0))
        ++bad;
      buf.assign(e.bytes.size() + 1, 0xEE);
      if (!map.load_data_into(e.key, buf.data(), buf.size()) ||
          (!e.bytes.empty() && std::memcmp(buf.data(), e.bytes.data(), e.bytes.size()) != 0) ||
          buf.back() != 0xEE)
        ++bad;
      if (map.find(e.key + "#").ok()) ++bad;
    }
    for (std::size_t f = 0; f < map.function_count(); ++f) {
      Result<FunctionView> fv = map.function(f);
      if (!fv) { ++bad; continue; }
      for (std::size_t t = 0; t < fv->tensor_count(); ++t) {
        Result<FunctionTensorView> row = fv->tensor(t);
        Result<std::string_view> k = fv->key_of(row->tensor_name);
        if (!k || *k != row->key || !map.find(*k)) ++bad;
      }
      if (!map.find_function(fv->method(), fv->partition_index())) ++bad;
    }
  }
  return bad;
}

void run_threads(const NamedDataMap& map, const std::vector<Want>& want, int rounds) {
  std::atomic<std::uint64_t> bad{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Start together, to maximise overlap.
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      bad.fetch_add(hammer(map, want, t, rounds));
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(bad.load() == 0);
}

}  // namespace

TEST_CASE("many threads query one wdedup map (stored index): mmap, pread, caller memory") {
  std::vector<std::vector<std::uint8_t>> data;
  const std::vector<std::uint8_t> file = many_keys_wdedup_bytes(600, &data);
  const std::string path = write_temp("runtime_concurrency_wdedup.ptd", file);
  for (Via via : kAllVias) {
    CAPTURE(via_name(via));
    std::unique_ptr<Opened> o = open_via(via, path);
    REQUIRE(o->ok());
    REQUIRE(o->map().has_extension());
    const std::vector<Want> want = expectations(o->map(), file);
    run_threads(o->map(), want, 3);
  }
}

TEST_CASE("many threads query one plain map after build_index, and one that scans") {
  const std::string path = fixture("many_keys.ptd");
  const std::vector<std::uint8_t> file = read_file(path);
  std::unique_ptr<Opened> indexed = open_via(Via::Mmap, path);
  REQUIRE(indexed->ok());
  // build_index is the one mutating call: made before the map is shared.
  const std::size_t indexed_keys = REQUIRE_VALUE(indexed->map().get_num_keys());
  AlignedBytes index(static_cast<std::size_t>(NamedDataMap::index_memory_size(indexed_keys)), 8);
  REQUIRE(indexed->map().build_index(index.span()).ok());
  const std::vector<Want> want = expectations(indexed->map(), file);
  run_threads(indexed->map(), want, 2);

  // Scanning (no index) over a smaller plain file, through pread: 100
  // keys, past the 32 a map looks up through its tag table instead.
  std::vector<std::vector<std::uint8_t>> data;
  NamedDataStore store;
  for (std::size_t i = 0; i < 100; ++i) {
    data.push_back(pattern(1 + (i * 37) % 200, static_cast<std::uint8_t>(i)));
    REQUIRE(store.add_named_data("scan." + std::to_string(i), ByteSpan(data.back().data(), data.back().size()),
                                 i % 2 ? 16 : 1).ok());
  }
  WriteOptions plain;
  plain.wdedup_extensions = false;
  const std::vector<std::uint8_t> plain_file = write_or_die(store, FunctionMaps{}, plain);
  const std::string plain_path = write_temp("runtime_concurrency_scan.ptd", plain_file);
  std::unique_ptr<Opened> scanning = open_via(Via::File, plain_path);
  REQUIRE(scanning->ok());
  REQUIRE_FALSE(scanning->map().has_index());
  const std::size_t scanning_keys = REQUIRE_VALUE(scanning->map().get_num_keys());
  REQUIRE(scanning_keys == 100);
  run_threads(scanning->map(), expectations(scanning->map(), plain_file), 20);
}
