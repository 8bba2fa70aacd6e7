// tests/support/wdedup_file.hpp — real wdedup files (WDX1 block, function
// maps) produced by the writer, for the runtime tests. Test-only: it pulls
// in the build-time half (ptd_writer.hpp), which the runtime never does.
//
// The "small" file covers every shape the reader distinguishes: aliases
// with different alignments (64 and 4096) and layouts, a non-power-of-two
// alignment (3), a zero-size tensor, keys without layout, and three
// functions in two blobs. Keys 0 and 1 have equal length (malformed.cpp
// turns one into the other).
#ifndef WDEDUP_TESTS_SUPPORT_WDEDUP_FILE_HPP
#define WDEDUP_TESTS_SUPPORT_WDEDUP_FILE_HPP

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

// The writer first: its unqualified quote_name(...) calls become ambiguous with
// std::quoted once <iomanip> (which <filesystem> includes) is visible.
#include "wdedup/ptd_writer.hpp"
#include "support/nav.hpp"
#include "support/ptd_files.hpp"

namespace wdedup_test {

/// Hash seed of the small file (not 0, so a reader that ignored it fails).
constexpr std::uint64_t kSmallFileSeed = 0x5EED5EEDull;

/// One key of the small file as a test expects it.
struct ExpectedKey {
  std::string key;
  std::vector<std::uint8_t> bytes;
  std::uint64_t alignment;
  bool has_layout;
};

inline std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7);
  return v;
}

/// The small store's keys, in the order they are added (= file order).
inline const std::vector<ExpectedKey>& small_file_keys() {
  static const std::vector<ExpectedKey> keys = {
      {"w.q", pattern(64, 1), 64, true},
      {"w.k", pattern(48, 2), 16, false},
      {"w.v", pattern(64, 1), 4096, true},  // alias of w.q
      {"norm", pattern(10, 3), 1, true},
      {"odd3", pattern(7, 4), 3, false},
      {"empty", {}, 8, true},
      {"raw", pattern(100, 5), 1, false},
  };
  return keys;
}

inline wdedup::FunctionMaps small_file_functions() {
  wdedup::FunctionMaps maps;
  maps.functions.push_back({"prefill", 0, "combined_all", "prefill__0", {{"wq", "w.q"}, {"wk", "w.k"}, {"norm", "norm"}}});
  maps.functions.push_back({"decode", 0, "combined_all", "decode__0", {{"wv", "w.v"}, {"wk", "w.k"}}});
  maps.functions.push_back(
      {"decode", 1, "combined_partition_1", "decode", {{"odd", "odd3"}, {"e", "empty"}, {"raw", "raw"}}});
  return maps;
}

inline std::vector<std::uint8_t> write_or_die(const wdedup::NamedDataStore& store, const wdedup::FunctionMaps& maps,
                                              const wdedup::WriteOptions& options) {
  wdedup::Expected<std::vector<std::uint8_t>> bytes = wdedup::serialize_ptd(store, maps, options);
  if (!bytes) {
    std::fprintf(stderr, "serialize_ptd failed: %s\n", bytes.message().c_str());
    std::abort();
  }
  return std::move(bytes).value();
}

/// The small file's store: small_file_keys(), with their layouts.
inline wdedup::NamedDataStore small_file_store() {
  using wdedup::Layout;
  using wdedup::ScalarType;
  wdedup::NamedDataStore store;
  const std::vector<ExpectedKey>& keys = small_file_keys();
  const Layout layouts[] = {
      Layout::contiguous(ScalarType::Float, {4, 4}), Layout{},
      Layout::channels_last(ScalarType::Float, {1, 4, 2, 2}), Layout::contiguous(ScalarType::Byte, {10}),
      Layout{}, Layout::contiguous(ScalarType::Float, {0, 3}), Layout{},
  };
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const ExpectedKey& k = keys[i];
    std::optional<Layout> l;
    if (k.has_layout) l = layouts[i];
    wdedup::Expected<void> r = store.add_named_data(
        k.key, wdedup::ByteSpan(k.bytes.data(), k.bytes.size()), static_cast<std::int64_t>(k.alignment), l);
    if (!r) {
      std::fprintf(stderr, "add_named_data(%s) failed: %s\n", k.key.c_str(), r.message().c_str());
      std::abort();
    }
  }
  return store;
}

/// The small wdedup file's bytes (written once per process).
inline const std::vector<std::uint8_t>& wdedup_file_bytes() {
  static const std::vector<std::uint8_t> bytes = [] {
    wdedup::WriteOptions options;
    options.hash_seed = kSmallFileSeed;
    return write_or_die(small_file_store(), small_file_functions(), options);
  }();
  return bytes;
}

/// The small wdedup file on disk (for MmapSource / FileSource).
inline const std::string& wdedup_file_path() {
  static const std::string path = write_temp("runtime_small_wdedup.ptd", wdedup_file_bytes());
  return path;
}

/// A larger wdedup file: `keys` keys over keys/2 distinct buffers of 1..300
/// bytes, alternate keys with layouts, alignments cycling 1/16/64/4096, and
/// one function per 100 keys. Deterministic.
inline std::vector<std::uint8_t> many_keys_wdedup_bytes(std::size_t key_count, std::vector<std::vector<std::uint8_t>>* data_out) {
  std::vector<std::vector<std::uint8_t>>& data = *data_out;
  data.clear();
  for (std::size_t b = 0; b < (key_count + 1) / 2; ++b) data.push_back(pattern(1 + (b * 37) % 300, static_cast<std::uint8_t>(b)));
  wdedup::NamedDataStore store;
  wdedup::FunctionMaps maps;
  const std::uint64_t aligns[] = {1, 16, 64, 4096};
  for (std::size_t i = 0; i < key_count; ++i) {
    const std::vector<std::uint8_t>& d = data[i / 2];
    std::optional<wdedup::Layout> l;
    if (i % 2 == 0) l = wdedup::Layout::contiguous(wdedup::ScalarType::Byte, {static_cast<std::int32_t>(d.size())});
    const std::string key = "layer." + std::to_string(i / 8) + ".tensor_" + std::to_string(i);
    if (!store.add_named_data(key, wdedup::ByteSpan(d.data(), d.size()), static_cast<std::int64_t>(aligns[i % 4]), l)) std::abort();
    if (i % 100 == 0) maps.functions.push_back({"m" + std::to_string(i / 100), 0, "blob", "f" + std::to_string(i / 100), {}});
    maps.functions.back().tensors.push_back({"t" + std::to_string(i), key});
  }
  return write_or_die(store, maps, wdedup::WriteOptions{});
}

/// A plain file (no WDX1 block) of `n` distinct 8-byte segments at offsets
/// 0, 8, 16, ... (segment i at 8 * i), one key each ("k<i>").
inline std::vector<std::uint8_t> segments_file_bytes(std::uint32_t n) {
  std::vector<std::uint64_t> words(n);
  wdedup::NamedDataStore store;
  for (std::uint32_t i = 0; i < n; ++i) {
    words[i] = 0x1000000000ull + i;  // distinct 8-byte buffers
    if (!store.add_named_data("k" + std::to_string(i),
                              wdedup::ByteSpan(reinterpret_cast<const std::uint8_t*>(&words[i]), 8)))
      std::abort();
  }
  wdedup::WriteOptions plain;
  plain.wdedup_extensions = false;
  plain.segment_alignment = 8;
  return write_or_die(store, wdedup::FunctionMaps{}, plain);
}

/// Gives segments 1..n-1 of `segments_file_bytes(n)` new offsets in the
/// order ExecuTorch's in-place rewriter (extension/backend_data's
/// initialize_and_save) writes them: the segments it replaced first, right
/// after segment 0, then the others in index order. (Segment 0's offset is
/// 0, the default, which the flatbuffer leaves out: it cannot be moved, and
/// that rewriter refuses to move it too.)
inline void reorder_segments_like_executorch(std::vector<std::uint8_t>& bytes, std::uint32_t n,
                                             const std::vector<std::uint32_t>& replaced) {
  Nav nav{bytes};
  std::vector<std::uint32_t> order(replaced);
  for (std::uint32_t i = 1; i < n; ++i)
    if (std::find(replaced.begin(), replaced.end(), i) == replaced.end()) order.push_back(i);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::uint64_t f = nav.segment_offset(order[k]);
    if (f == 0) std::abort();
    nav.set_u64(f, 8 * (k + 1));
  }
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_WDEDUP_FILE_HPP
