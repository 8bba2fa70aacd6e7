// Reads every ExecuTorch-written fixture (WDEDUP_FIXTURES_DIR/*.ptd) through
// each kind of DataSource and checks it against its JSON manifest: header
// fields, segments, and for every key (in order) its segment, absolute
// offset, size, SHA-256 of its bytes and its layout.
// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run (tests/doctest_main.cpp).
// The no-POSIX build renames the POSIX calls only the runtime makes, so
// that a call would not link (tests/meson.build): a list that lost one
// would let its call through unnoticed.
#if defined(WDEDUP_NO_POSIX) && (!defined(posix_memalign) || !defined(pread) || !defined(pread64))
#error "ptd_fixtures_no_posix: posix_memalign, pread and pread64 must each be renamed (tests/meson.build)"
#endif
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/json.hpp"
#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "support/sha256.hpp"
#include "support/wdedup_file.hpp"
#include "wdedup/runtime.hpp"

using namespace wdedup;
using namespace wdedup_test;

namespace {

std::string manifest_path(const std::string& ptd) { return ptd.substr(0, ptd.size() - 4) + ".json"; }

void check_layout(const NamedDataMap& map, const std::string& key, const Json& expected) {
  Result<TensorLayout> l = map.get_tensor_layout(key);
  if (expected.is_null()) {
    // Fixed reader behaviour: a key stored without a layout is NotFound.
    REQUIRE_FALSE(l.ok());
    CHECK(l.error() == Error::NotFound);
    return;
  }
  REQUIRE(l.ok());
  CHECK(static_cast<int>(l->scalar_type) == expected["scalar_type_value"].as_int());
  CHECK(std::string(scalar_type_name(l->scalar_type)) == expected["scalar_type"].as_string());
  const Json& sizes = expected["sizes"];
  REQUIRE(l->sizes.size() == sizes.size());
  for (std::size_t d = 0; d < sizes.size(); ++d) CHECK(l->sizes[d] == sizes[d].as_int());
  const Json& dims = expected["dim_order"];
  if (dims.is_null()) {
    CHECK(l->dim_order.size() == 0);
  } else {
    REQUIRE(l->dim_order.size() == dims.size());
    for (std::size_t d = 0; d < dims.size(); ++d) CHECK(l->dim_order[d] == dims[d].as_int());
  }
}

void check_against_manifest(Opened& o, const Json& m) {
  const NamedDataMap& map = o.map();
  // Header and file-level facts.
  CHECK(map.file_size() == m["file_size"].as_uint());
  CHECK(map.version() == m["version"].as_uint());
  const Json& h = m["header"];
  CHECK(h["magic"].as_string() == "FH01");
  CHECK(m["flatbuffer_identifier"].as_string() == "FT01");
  CHECK(map.header().length == h["length"].as_uint());
  CHECK(map.header().flatbuffer_offset == h["flatbuffer_offset"].as_uint());
  CHECK(map.header().flatbuffer_size == h["flatbuffer_size"].as_uint());
  CHECK(map.header().segment_base_offset == h["segment_base_offset"].as_uint());
  CHECK(map.header().segment_data_size == h["segment_data_size"].as_uint());
  CHECK(map.is_memory_backed() == (o.via == Via::Mmap || o.via == Via::Buffer));

  // Segments, in file order; offsets in the manifest are base-relative.
  const Json& segs = m["segments"];
  REQUIRE(map.segment_count() == segs.size());
  for (std::uint32_t i = 0; i < segs.size(); ++i) {
    CAPTURE(i);
    Result<SegmentInfo> s = map.segment(i);
    REQUIRE(s.ok());
    CHECK(s->offset - map.header().segment_base_offset == segs[i]["offset"].as_uint());
    CHECK(s->size == segs[i]["size"].as_uint());
  }
  CHECK(map.segment(map.segment_count()).error() == Error::InvalidArgument);

  // Keys, in file order.
  const Json& keys = m["keys"];
  REQUIRE(map.get_num_keys().ok());
  REQUIRE(*map.get_num_keys() == keys.size());
  std::vector<std::uint8_t> buf;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const Json& k = keys[i];
    const std::string key = k["key"].as_string();
    CAPTURE(key);
    Result<std::string_view> name = map.get_key(i);
    REQUIRE(name.ok());
    CHECK(*name == key);
    CHECK(name->data()[name->size()] == '\0');  // usable as a C string, like ExecuTorch's get_key

    Result<KeyInfo> info = map.find(key);
    REQUIRE(info.ok());
    CHECK(info->key == key);
    CHECK(info->key_index == i);
    CHECK(info->segment_index == k["segment_index"].as_uint());
    CHECK(info->offset == k["offset"].as_uint());
    CHECK(info->size == k["size"].as_uint());
    CHECK(info->has_layout == !k["layout"].is_null());
    if (!map.has_extension()) CHECK(info->alignment == 1);  // plain ExecuTorch files do not record it

    Result<DataBuffer> data = map.get_data(key);
    REQUIRE(data.ok());
    CHECK(data->size() == k["size"].as_uint());
    CHECK(sha256_hex(data->data(), data->size()) == k["sha256"].as_string());
    if (map.is_memory_backed() || o.via == Via::BufferLent) {
      // Zero-copy: the view points into the source at the key's offset
      // (over lent metadata too: an ExecuTorch file asks no alignment,
      // which any address meets).
      CHECK_FALSE(data->owns_memory());
      CHECK(static_cast<const std::uint8_t*>(data->data()) == o.source->view(0, map.file_size()) + info->offset);
    } else {
      CHECK(data->owns_memory() == (data->size() != 0));
    }

    buf.assign(static_cast<std::size_t>(info->size) + 1, 0xA5);
    REQUIRE(map.load_data_into(key, buf.data(), static_cast<std::size_t>(info->size)).ok());
    CHECK(sha256_hex(buf.data(), static_cast<std::size_t>(info->size)) == k["sha256"].as_string());
    CHECK(buf.back() == 0xA5);  // nothing written past the data

    check_layout(map, key, k["layout"]);
  }
  CHECK(map.get_key(keys.size()).error() == Error::InvalidArgument);
  CHECK(map.find("no such key in any fixture").error() == Error::NotFound);
  CHECK(map.get_data("no such key in any fixture").error() == Error::NotFound);
}

}  // namespace

TEST_CASE("every fixture reads back exactly as its manifest says, through every source") {
  // fixture_paths() fails this test if it finds fewer than the shipped set;
  // more are picked up automatically.
  for (const std::string& path : fixture_paths()) {
    CAPTURE(path);
    const std::string text = read_text(manifest_path(path));
    REQUIRE_MESSAGE(!text.empty(), "missing manifest for ", path);
    const std::optional<Json> manifest = parse_json(text);
    REQUIRE(manifest.has_value());
    const std::vector<std::uint8_t> bytes = read_file(path);
    CHECK(bytes.size() == (*manifest)["file_size"].as_uint());
    CHECK(sha256_hex(bytes.data(), bytes.size()) == (*manifest)["file_sha256"].as_string());
    CHECK(std::string(reinterpret_cast<const char*>(bytes.data()) + 4, 4) == "FT01");
    CHECK(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, 4) == "FH01");

    for (Via via : kAllVias) {
      CAPTURE(via_name(via));
      std::unique_ptr<Opened> o = open_via(via, path);
      REQUIRE(o->result.has_value());
      REQUIRE_MESSAGE(o->ok(), error_name(o->error()), ": ", o->result->failure().what);
      // Plain files are read by scanning, then again through a lent-memory
      // index (O(1) lookups). A file of at most 32 keys (all but many_keys)
      // is looked up through its tag table either way, which an index is
      // never consulted over: for those both passes check the same path.
      // Scans are O(keys) per lookup, so a file with thousands of keys is
      // scanned through one source only.
      const bool scan = o->map().has_index() || via == Via::Mmap || (*manifest)["keys"].size() <= 1024;
      if (scan) check_against_manifest(*o, *manifest);
      if (!o->map().has_index()) {
        const std::size_t num_keys = REQUIRE_VALUE(o->map().get_num_keys());
        AlignedBytes index(static_cast<std::size_t>(NamedDataMap::index_memory_size(num_keys)), 8);
        REQUIRE(o->map().build_index(index.span()).ok());
        CHECK(o->map().has_index());
        check_against_manifest(*o, *manifest);
      }
    }
  }
}

TEST_CASE("the JSON reader keeps integers exact and members in order") {
  const std::optional<Json> j = parse_json(R"({"b": 18446744073709551615, "a": [1, -2, null], "s": "x\u00e9\n"})");
  REQUIRE(j.has_value());
  REQUIRE(j->size() == 3);
  CHECK(j->member_names[0] == "b");
  CHECK((*j)["b"].as_uint() == UINT64_MAX);
  CHECK((*j)["a"][1].as_int() == -2);
  CHECK((*j)["a"][2].is_null());
  CHECK((*j)["s"].as_string() == "x\xc3\xa9\n");
  CHECK_FALSE(parse_json("{\"a\": 1,}").has_value());
  CHECK_FALSE(parse_json("[1 2]").has_value());
}

TEST_CASE("a wdedup file in caller memory at an odd address: keys that ask more than alignment 1 are copied, aligned") {
  // A map with lent metadata lends a key's bytes in place where their
  // address meets its alignment, and copies them into aligned memory where
  // not: posix_memalign, or with WDEDUP_NO_POSIX (this file's second
  // build), aligned_alloc.
  for (Via via : kAllVias) {
    CAPTURE(via_name(via));
    std::unique_ptr<Opened> o = open_via(via, wdedup_file_path());
    REQUIRE(o->result.has_value());
    REQUIRE_MESSAGE(o->ok(), error_name(o->error()), ": ", o->result->failure().what);
    const NamedDataMap& m = o->map();
    for (const ExpectedKey& e : small_file_keys()) {
      CAPTURE(e.key);
      const KeyInfo k = REQUIRE_VALUE(m.find(e.key));
      Result<DataBuffer> d = m.get_data(e.key);
      REQUIRE(d.ok());
      REQUIRE(d->size() == e.bytes.size());
      if (!e.bytes.empty()) CHECK(std::memcmp(d->data(), e.bytes.data(), e.bytes.size()) == 0);
      const std::uint64_t p2 = k.alignment & (~k.alignment + 1);
      const auto at = reinterpret_cast<std::uintptr_t>(d->data());
      if (via == Via::BufferLent && p2 > 1 && !e.bytes.empty()) {
        CHECK(d->owns_memory());
        CHECK(at % std::min<std::uint64_t>(p2, NamedDataMap::kMaxCopyAlignment) == 0);
      } else if (via != Via::File && !e.bytes.empty()) {
        CHECK_FALSE(d->owns_memory());
        CHECK(static_cast<const std::uint8_t*>(d->data()) == o->source->view(0, m.file_size()) + k.offset);
      }
    }
  }
}
