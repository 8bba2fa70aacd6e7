// tests/executorch_compat.cpp — proof that ExecuTorch's reader accepts the
// files wdedup writes, without ExecuTorch's code: our own FlatTensor schema
// (tests/data/flat_tensor.fbs) compiled by flatc at build time, the
// flatbuffers Verifier with identifier "FT01", and a re-implementation of
// what ExecuTorch's FlatTensorDataMap does (header checks, named_data and
// segments non-null, linear strcmp key scan, data at base + offset).
// The same checks run over ExecuTorch's own fixtures first, to prove the
// harness; then our writer must reproduce those fixtures byte for byte, its
// flatbuffer must equal flatc's for the JSON ExecuTorch would produce, and
// flatc's decode of our files, run as ExecuTorch's Python reader runs it,
// must give back the keys, segments and layouts stored.
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "flat_tensor_generated.h"
#include "support/json.hpp"
#include "support/nav.hpp"
#include "support/pattern.hpp"
#include "support/require_value.hpp"
#include "wdedup/import.hpp"
#include "wdedup/ptd_writer.hpp"
#include "wdedup/runtime.hpp"
#include "wdedup/runtime/verify.hpp"

namespace fts = wdedup_test::flat_tensor;
using wdedup::ByteSpan;
using wdedup::Layout;
using wdedup::NamedDataStore;
using wdedup::ScalarType;
using wdedup::WriteOptions;
using wdedup_test::pattern;  // tests/support/pattern.hpp

namespace {

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::vector<std::uint8_t> out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE_MESSAGE(f != nullptr, "cannot open ", path);
  std::uint8_t buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

std::string fixture(const std::string& name) { return std::string(WDEDUP_FIXTURES_DIR) + "/" + name; }

std::uint32_t le32(const std::uint8_t* p) { return wdedup::format::load_u32(p); }
std::uint64_t le64(const std::uint8_t* p) { return wdedup::format::load_u64(p); }

/// What ExecuTorch's FlatTensorDataMap::load keeps: the parsed header and
/// the flatbuffer region [0, flatbuffer_offset + flatbuffer_size), loaded
/// into max_align_t-aligned memory (ExecuTorch checks that alignment).
struct EtMap {
  std::uint64_t flatbuffer_offset = 0, flatbuffer_size = 0, segment_base_offset = 0, segment_data_size = 0;
  std::vector<std::max_align_t> storage;
  const fts::FlatTensor* root = nullptr;
  const std::vector<std::uint8_t>* file = nullptr;
};

/// The newest schema version ExecuTorch's newer readers load
/// (FlatTensorDataMap::kMaxSupportedSchemaVersion; its Python reader takes
/// exactly this one).
constexpr std::uint32_t kEtMaxSupportedSchemaVersion = 0;

/// ExecuTorch's load, check by check; returns "" or the check that failed.
/// The checks of the reader at 00de01d, and those its newer readers add
/// (marked "newer"): a file within the loader's size, a root offset inside
/// the flatbuffer, a version they know. Every file checked here must pass
/// both, so a file ExecuTorch's newer reader refuses fails these tests.
std::string et_load(const std::vector<std::uint8_t>& file, EtMap& m) {
  m.file = &file;
  // FlatTensorHeader::Parse on the first kNumHeadBytes (64) bytes.
  if (file.size() < 64) return "file shorter than the 64 head bytes";
  if (std::memcmp(file.data() + 8, "FH01", 4) != 0) return "no FH01 header at offset 8";
  if (le32(file.data() + 12) < 40) return "header length < 40";
  m.flatbuffer_offset = le64(file.data() + 16);
  m.flatbuffer_size = le64(file.data() + 24);
  m.segment_base_offset = le64(file.data() + 32);
  m.segment_data_size = le64(file.data() + 40);
  // Newer: segment_base_offset + segment_data_size within the loader's
  // size (a file cut short by 8 bytes is InvalidExternalData there).
  if (m.segment_base_offset > file.size() || m.segment_data_size > file.size() - m.segment_base_offset)
    return "segment_base_offset + segment_data_size beyond the end of the file";
  const std::uint64_t fb_end = m.flatbuffer_offset + m.flatbuffer_size;
  if (fb_end > file.size()) return "flatbuffer region beyond the end of the file";
  const auto fb_bytes = static_cast<std::size_t>(fb_end);  // (within the file, above)
  m.storage.assign((fb_bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t), std::max_align_t{});
  auto* buf = reinterpret_cast<std::uint8_t*>(m.storage.data());
  std::memcpy(buf, file.data(), fb_bytes);
  if (!fts::FlatTensorBufferHasIdentifier(buf)) return "identifier is not FT01";
  // Newer: the root table's offset past the header's first 8 bytes and
  // room for its vtable offset inside the flatbuffer region.
  const std::uint32_t root_offset = le32(buf);
  if (root_offset < 8 || fb_bytes < 4 || root_offset > fb_bytes - 4) return "root table offset outside the flatbuffer";
  // Stricter than ExecuTorch (which trusts the buffer): the full verifier.
  flatbuffers::Verifier verifier(buf, fb_bytes);
  if (!fts::VerifyFlatTensorBuffer(verifier)) return "flatbuffers::Verifier rejects the flatbuffer";
  m.root = fts::GetFlatTensor(buf);
  // Newer: a version the reader knows.
  if (m.root->version() > kEtMaxSupportedSchemaVersion) return "version newer than kMaxSupportedSchemaVersion";
  if (m.root->named_data() == nullptr) return "named_data is null";
  if (m.root->segments() == nullptr) return "segments is null";
  return "";
}

/// ExecuTorch's get_named_data + get_data: linear strcmp scan, segment
/// index and offset checks, bytes at segment_base_offset + offset.
struct EtData {
  std::string error;
  const fts::NamedData* named = nullptr;
  std::uint64_t offset = 0;  ///< absolute
  ByteSpan bytes;
};
EtData et_get_data(const EtMap& m, const char* key) {
  EtData d;
  auto fail = [&d](const char* why) {
    d.error = why;
    return d;
  };
  const auto* named = m.root->named_data();
  for (flatbuffers::uoffset_t i = 0; i < named->size(); ++i) {
    if (std::strcmp(named->Get(i)->key()->c_str(), key) != 0) continue;
    d.named = named->Get(i);
    const std::uint32_t si = d.named->segment_index();
    if (si >= m.root->segments()->size()) return fail("segment index out of bounds");
    const fts::DataSegment* seg = m.root->segments()->Get(si);
    if (!(seg->offset() < m.segment_base_offset + m.segment_data_size))
      return fail("segment offset beyond segment_base_offset + segment_data_size");
    // Newer: the segment's end within the segment data. (Their check
    // compares it with segment_base_offset + segment_data_size; this one,
    // against segment_data_size alone, is stricter.)
    if (seg->size() > m.segment_data_size || seg->offset() > m.segment_data_size - seg->size())
      return fail("segment end beyond segment_data_size");
    d.offset = m.segment_base_offset + seg->offset();
    // The DataLoader's own bounds check.
    if (d.offset > m.file->size() || seg->size() > m.file->size() - d.offset)
      return fail("segment beyond the end of the file");
    d.bytes = ByteSpan(m.file->data() + d.offset, static_cast<std::size_t>(seg->size()));  // (within the file)
    return d;
  }
  d.error = "key not found";
  return d;
}

std::optional<wdedup_test::Json> manifest(const std::string& name) {
  const std::vector<std::uint8_t> text = read_all(fixture(name + ".json"));
  return wdedup_test::parse_json(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
}

const char* const kFixtures[] = {"empty", "simple", "aliases", "layouts", "alignment", "many_keys", "large_segment"};

/// Rebuilds the store ExecuTorch serialized into a fixture: keys in file
/// order, bytes viewed in the fixture, layouts from the flatbuffer and the
/// alignments the generator asked for (from the manifest: not in the file).
NamedDataStore store_from_fixture(const std::vector<std::uint8_t>& file, const EtMap& m,
                                  const wdedup_test::Json& man) {
  NamedDataStore store;
  const auto* named = m.root->named_data();
  REQUIRE(named->size() == man["keys"].size());
  for (flatbuffers::uoffset_t i = 0; i < named->size(); ++i) {
    const fts::NamedData* nd = named->Get(i);
    const fts::DataSegment* seg = m.root->segments()->Get(nd->segment_index());
    const ByteSpan bytes(file.data() + m.segment_base_offset + seg->offset(), static_cast<std::size_t>(seg->size()));
    std::optional<Layout> layout;
    if (const fts::TensorLayout* tl = nd->tensor_layout()) {
      Layout l;
      l.scalar_type = static_cast<ScalarType>(tl->scalar_type());
      l.sizes.assign(tl->sizes()->begin(), tl->sizes()->end());
      l.dim_order.assign(tl->dim_order()->begin(), tl->dim_order()->end());
      layout = l;
    }
    const std::int64_t align = man["keys"][i]["requested_alignment"].as_int();
    wdedup::Expected<void> r = store.add_named_data(nd->key()->str(), bytes, align, layout);
    REQUIRE_MESSAGE(r.ok(), r.message());
  }
  return store;
}

std::vector<std::uint8_t> serialize(const NamedDataStore& store, const WriteOptions& o = {},
                                    const wdedup::FunctionMaps& maps = {}) {
  wdedup::Expected<std::vector<std::uint8_t>> r = wdedup::serialize_ptd(store, maps, o);
  REQUIRE_MESSAGE(r.ok(), r.message());
  return std::move(r).value();
}

/// Checks one of our files the ExecuTorch way against the store it came from.
void check_like_executorch(const std::vector<std::uint8_t>& file, const NamedDataStore& store) {
  EtMap m;
  const std::string err = et_load(file, m);
  REQUIRE_MESSAGE(err.empty(), err);
  CHECK(m.flatbuffer_offset == 48);
  CHECK(m.root->version() == 0);
  REQUIRE(m.root->named_data()->size() == store.key_count());
  REQUIRE(m.root->segments()->size() == store.buffer_count());
  CHECK(m.segment_base_offset + m.segment_data_size == file.size());
  for (std::size_t i = 0; i < store.key_count(); ++i) {
    const wdedup::StoreKey& k = store.keys()[i];
    CAPTURE(k.key);
    // get_key(i) returns keys in store order.
    CHECK(m.root->named_data()->Get(static_cast<flatbuffers::uoffset_t>(i))->key()->str() == k.key);
    const EtData d = et_get_data(m, k.key.c_str());
    REQUIRE_MESSAGE(d.error.empty(), d.error);
    CHECK(d.named->segment_index() == k.buffer_index);
    const ByteSpan want = store.buffers()[k.buffer_index].bytes;
    REQUIRE(d.bytes.size() == want.size());
    CHECK((want.size() == 0 || std::memcmp(d.bytes.data(), want.data(), want.size()) == 0));
    // The alignment the key asked for holds in the file, absolutely.
    CHECK(d.offset % k.alignment == 0);
    const fts::TensorLayout* tl = d.named->tensor_layout();
    REQUIRE((tl != nullptr) == k.layout.has_value());
    if (tl) {
      CHECK(static_cast<int>(tl->scalar_type()) == static_cast<int>(k.layout->scalar_type));
      // ExecuTorch reads sizes() and dim_order() without a null check.
      REQUIRE(tl->sizes() != nullptr);
      REQUIRE(tl->dim_order() != nullptr);
      CHECK(std::vector<std::int32_t>(tl->sizes()->begin(), tl->sizes()->end()) == k.layout->sizes);
      CHECK(std::vector<std::uint8_t>(tl->dim_order()->begin(), tl->dim_order()->end()) == k.layout->dim_order);
    }
  }
}

ByteSpan span(const std::vector<std::uint8_t>& v) { return ByteSpan(v.data(), v.size()); }

void add(NamedDataStore& s, const std::string& key, const std::vector<std::uint8_t>& bytes, std::int64_t align = 1,
         std::optional<Layout> layout = std::nullopt) {
  wdedup::Expected<void> r = s.add_named_data(key, span(bytes), align, std::move(layout));
  REQUIRE_MESSAGE(r.ok(), r.message());
}

std::vector<std::uint8_t> raw_flatbuffer(const std::vector<std::uint8_t>& file) {
  // Undo ExecuTorch's header insertion: bytes 0..8, then 56..48+size; the
  // root offset moves back by 48.
  const std::uint64_t size = le64(file.data() + 24);
  std::vector<std::uint8_t> fb(file.begin(), file.begin() + 8);
  fb.insert(fb.end(), file.begin() + 56, file.begin() + static_cast<std::ptrdiff_t>(48 + size));
  wdedup::format::store_u32(fb.data(), le32(fb.data()) - 48);
  return fb;
}

/// What ExecuTorch's serializer (serialize.py's _insert_flatbuffer_header)
/// makes of a flatbuffer: its first 8 bytes (the root offset moved by 48,
/// the identifier), the 40-byte header padded to 48, the rest of the
/// flatbuffer, then zeros up to the base (the flatbuffer's end aligned to
/// `segment_alignment`) and `data_size` bytes of segment data, zeros too.
/// raw_flatbuffer undoes it.
std::vector<std::uint8_t> insert_flatbuffer_header(const std::vector<std::uint8_t>& fb, std::uint64_t segment_alignment,
                                                   std::uint64_t data_size) {
  const std::uint64_t base = (48 + fb.size() + segment_alignment - 1) / segment_alignment * segment_alignment;
  std::vector<std::uint8_t> file(static_cast<std::size_t>(base + data_size), 0);
  wdedup::format::store_u32(file.data(), le32(fb.data()) + 48);
  std::memcpy(file.data() + 4, fb.data() + 4, 4);
  std::memcpy(file.data() + 8, "FH01", 4);
  wdedup::format::store_u32(file.data() + 12, 40);
  wdedup::format::store_u64(file.data() + 16, 48);
  wdedup::format::store_u64(file.data() + 24, fb.size());
  wdedup::format::store_u64(file.data() + 32, base);
  wdedup::format::store_u64(file.data() + 40, data_size);
  std::memcpy(file.data() + 56, fb.data() + 8, fb.size() - 8);
  return file;
}

/// What ExecuTorch's FlatTensorDataMap::replace_data writes for one key
/// given new bytes (the facts of its extension/flat_tensor/
/// flat_tensor_data_map.cpp; our code, through flatc's mutable API as it
/// uses flatbuffers'): the file up to segment_base_offset as it was, a
/// WDX1 block included; then every segment in order, at the next offset
/// aligned (absolutely) to the lowest set bit of its old absolute offset,
/// with its offset and size mutated in place; segment_data_size set to
/// where the last one ends.
std::vector<std::uint8_t> replace_data_like_executorch(const std::vector<std::uint8_t>& file, const std::string& key,
                                                       const std::vector<std::uint8_t>& bytes) {
  const std::uint64_t base = le64(file.data() + 32);
  std::vector<std::uint8_t> out(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(base));
  fts::FlatTensor* root = flatbuffers::GetMutableRoot<fts::FlatTensor>(out.data());
  auto* segments = root->mutable_segments();
  const auto* named = root->named_data();
  std::size_t replaced = segments->size();
  for (flatbuffers::uoffset_t i = 0; i < named->size(); ++i)
    if (named->Get(i)->key()->str() == key) {
      replaced = named->Get(i)->segment_index();
      break;
    }
  REQUIRE(replaced < segments->size());
  std::vector<std::uint8_t> data;
  std::uint64_t next = 0;
  for (flatbuffers::uoffset_t i = 0; i < segments->size(); ++i) {
    fts::DataSegment* seg = segments->GetMutableObject(i);
    const std::uint64_t old_abs = base + seg->offset();
    const std::uint64_t align = old_abs == 0 ? 1 : old_abs & (~old_abs + 1);
    const std::uint64_t offset = ((base + next + align - 1) & ~(align - 1)) - base;
    data.resize(static_cast<std::size_t>(offset), 0);
    if (i == replaced)
      data.insert(data.end(), bytes.begin(), bytes.end());
    else
      data.insert(data.end(), file.begin() + static_cast<std::ptrdiff_t>(old_abs),
                  file.begin() + static_cast<std::ptrdiff_t>(old_abs + seg->size()));
    const std::uint64_t size = i == replaced ? bytes.size() : seg->size();
    // (ExecuTorch fails here for a field the file leaves out, which then
    // cannot change from its default: an offset of 0 stays 0.)
    REQUIRE(seg->mutate_offset(offset));
    REQUIRE(seg->mutate_size(size));
    next = offset + size;
  }
  wdedup::format::store_u64(out.data() + 40, next);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace

TEST_CASE("ExecuTorch's fixtures pass the verifier and the ExecuTorch-style reader (harness check)") {
  for (const char* name : kFixtures) {
    CAPTURE(name);
    const std::vector<std::uint8_t> file = read_all(fixture(std::string(name) + ".ptd"));
    const std::optional<wdedup_test::Json> man = manifest(name);
    REQUIRE(man.has_value());
    EtMap m;
    const std::string err = et_load(file, m);
    REQUIRE_MESSAGE(err.empty(), err);
    CHECK(m.flatbuffer_size == (*man)["header"]["flatbuffer_size"].as_uint());
    CHECK(m.segment_base_offset == (*man)["header"]["segment_base_offset"].as_uint());
    CHECK(m.segment_data_size == (*man)["header"]["segment_data_size"].as_uint());
    const wdedup_test::Json& keys = (*man)["keys"];
    REQUIRE(m.root->named_data()->size() == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::string key = keys[i]["key"].as_string();
      const EtData d = et_get_data(m, key.c_str());
      REQUIRE_MESSAGE(d.error.empty(), key, ": ", d.error);
      CHECK(d.offset == keys[i]["offset"].as_uint());
      CHECK(d.bytes.size() == keys[i]["size"].as_uint());
    }
    // A corrupted identifier or header is rejected (the harness can fail).
    std::vector<std::uint8_t> bad = file;
    bad[5] = 'X';
    EtMap m2;
    CHECK(et_load(bad, m2) == "identifier is not FT01");
    bad = file;
    bad[12] = 39;
    CHECK(et_load(bad, m2) == "header length < 40");
    // And so are the newer readers' refusals: a file cut short by 8 bytes
    // (their own test), a root offset outside the flatbuffer, and a
    // segment ending past segment_data_size.
    bad.assign(file.begin(), file.end() - 8);
    CHECK(et_load(bad, m2) == "segment_base_offset + segment_data_size beyond the end of the file");
    const auto past_end = static_cast<std::uint32_t>(m.flatbuffer_offset + m.flatbuffer_size - 3);
    for (const std::uint32_t root : {std::uint32_t{4}, past_end}) {
      CAPTURE(root);
      bad = file;
      wdedup::format::store_u32(bad.data(), root);
      CHECK(et_load(bad, m2) == "root table offset outside the flatbuffer");
    }
    // The key whose segment ends last, with segment_data_size one byte short of that end.
    std::uint64_t last_end = 0;
    std::string last_key;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::uint64_t end = keys[i]["offset"].as_uint() + keys[i]["size"].as_uint() - m.segment_base_offset;
      if (keys[i]["size"].as_uint() != 0 && end > last_end) {
        last_end = end;
        last_key = keys[i]["key"].as_string();
      }
    }
    if (last_end == 0) continue;  // no bytes (the empty fixture)
    bad = file;
    wdedup::format::store_u64(bad.data() + 40, last_end - 1);
    REQUIRE(et_load(bad, m2).empty());
    CHECK(et_get_data(m2, last_key.c_str()).error == "segment end beyond segment_data_size");
  }
}

namespace {
/// The smallest file ExecuTorch's load() takes, no keys, stamped with
/// `version`: flatbuffers' own builder, laid out as ExecuTorch's serializer
/// lays it out.
std::vector<std::uint8_t> empty_file_with_version(std::uint32_t version) {
  flatbuffers::FlatBufferBuilder b;
  const auto segments = b.CreateVector(std::vector<flatbuffers::Offset<fts::DataSegment>>{});
  const auto named = b.CreateVector(std::vector<flatbuffers::Offset<fts::NamedData>>{});
  fts::FinishFlatTensorBuffer(b, fts::CreateFlatTensor(b, version, segments, named));
  return insert_flatbuffer_header(std::vector<std::uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()),
                                  16, 0);
}
}  // namespace

TEST_CASE("the ExecuTorch-style reader takes version 0 only, as ExecuTorch's newer readers do (harness check)") {
  EtMap m;
  const std::vector<std::uint8_t> v0 = empty_file_with_version(0);
  REQUIRE(et_load(v0, m) == "");
  CHECK(m.root->version() == 0);
  CHECK(m.root->named_data()->size() == 0);
  CHECK(et_load(empty_file_with_version(1), m) == "version newer than kMaxSupportedSchemaVersion");
  // wdedup's reader takes the same file, with no keys, and refuses version
  // 1 naming the root table's offset.
  const wdedup::BufferSource src0(v0.data(), v0.size());
  const wdedup::Result<wdedup::NamedDataMap> ours = wdedup::NamedDataMap::open(src0);
  REQUIRE(ours.ok());
  const std::size_t num_keys = REQUIRE_VALUE(ours->get_num_keys());
  CHECK(num_keys == 0);
  const std::vector<std::uint8_t> v1 = empty_file_with_version(1);
  const wdedup::BufferSource src1(v1.data(), v1.size());
  const wdedup::Result<wdedup::NamedDataMap> refused = wdedup::NamedDataMap::open(src1);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == wdedup::Error::UnsupportedVersion);
  CHECK(std::string(refused.failure().what) == "FlatTensor version is not 0");
  CHECK(refused.failure().at == le32(v1.data()));
}

TEST_CASE("without WDX1 our writer reproduces ExecuTorch's fixtures byte for byte") {
  for (const char* name : kFixtures) {
    if (std::string(name) == "alignment") continue;  // differs on purpose: next test
    CAPTURE(name);
    const std::vector<std::uint8_t> file = read_all(fixture(std::string(name) + ".ptd"));
    EtMap m;
    REQUIRE(et_load(file, m).empty());
    const NamedDataStore store = store_from_fixture(file, m, REQUIRE_VALUE(manifest(name)));
    WriteOptions o;
    o.wdedup_extensions = false;
    o.segment_alignment = 128;
    const std::vector<std::uint8_t> ours = serialize(store, o);
    REQUIRE(ours.size() == file.size());
    CHECK(ours == file);
    // With WDX1 the ExecuTorch reader still gets every key right.
    check_like_executorch(serialize(store), store);
  }
}

TEST_CASE("alignment fixture: where ExecuTorch aligns relative to the base, we align absolutely") {
  const std::vector<std::uint8_t> file = read_all(fixture("alignment.ptd"));
  EtMap m;
  REQUIRE(et_load(file, m).empty());
  const NamedDataStore store = store_from_fixture(file, m, REQUIRE_VALUE(manifest("alignment")));
  // The alias asking 4096 raised its buffer's alignment (ExecuTorch's store loses it).
  REQUIRE(store.buffer_count() == 4);
  CHECK(store.buffers()[1].alignment == 4096);
  WriteOptions o;
  o.wdedup_extensions = false;
  const std::vector<std::uint8_t> ours = serialize(store, o);
  EtMap mine;
  REQUIRE(et_load(ours, mine).empty());
  CHECK(mine.segment_base_offset == 512);  // same flatbuffer size as ExecuTorch's
  // ExecuTorch: 512, 640, 896 (not a multiple of 3), 4608 (not of 4096).
  CHECK(et_get_data(mine, "align1").offset == 512);
  CHECK(et_get_data(mine, "align64").offset == 4096);                        // lcm(128, 64, 4096)
  CHECK(et_get_data(mine, "align64.alias_requesting_4096").offset == 4096);
  CHECK(et_get_data(mine, "align3").offset == 4224);                         // 11 * 384 = lcm(128, 3) multiple
  CHECK(et_get_data(mine, "align4096").offset == 8192);
  CHECK(et_get_data(mine, "align4096.alias_requesting_1").offset == 8192);
  CHECK(ours.size() == 8192 + 100);
  check_like_executorch(ours, store);
}

TEST_CASE("a wdedup file whose data ExecuTorch's replace_data replaced: refused unless moved segments are allowed") {
  // replace_data copies the WDX1 block as it was and lays the segments out
  // again, so a key that grows moves the segments after it: the block's
  // data ranges no longer match. Opened with allow_moved_segments, the
  // map reads where the flatbuffer says, as ExecuTorch does, and keeps the
  // block's index and function maps.
  NamedDataStore store;
  const auto q = pattern(64, 1), k = pattern(48, 2), norm = pattern(10, 3), grown = pattern(300, 9);
  add(store, "w.q", q, 64);
  add(store, "w.v", q, 4096);  // w.q's bytes: one segment
  add(store, "w.k", k, 16);
  add(store, "norm", norm, 1);
  wdedup::FunctionMaps maps;
  maps.functions.push_back(
      {"prefill", 0, "combined_all", "prefill__0", {{"wq", "w.q"}, {"wk", "w.k"}, {"norm", "norm"}}});
  maps.functions.push_back({"decode", 0, "combined_all", "decode__0", {{"wv", "w.v"}, {"wk", "w.k"}}});
  const std::vector<std::uint8_t> file = serialize(store, {}, maps);
  std::vector<std::uint8_t> replaced = replace_data_like_executorch(file, "w.k", grown);
  REQUIRE(replaced.size() > file.size());

  // ExecuTorch reads it: w.k's new bytes, and the others' where they went.
  EtMap before, m;
  REQUIRE(et_load(file, before).empty());
  REQUIRE(et_load(replaced, m).empty());
  const std::pair<const char*, const std::vector<std::uint8_t>*> want[] = {
      {"w.q", &q}, {"w.v", &q}, {"w.k", &grown}, {"norm", &norm}};
  const auto bytes_of = [](const EtData& d) { return std::vector<std::uint8_t>(d.bytes.begin(), d.bytes.end()); };
  for (const auto& kb : want) {
    const char* key = kb.first;
    CAPTURE(key);
    const EtData d = et_get_data(m, key);
    REQUIRE(d.error.empty());
    CHECK(bytes_of(d) == *kb.second);
  }
  CHECK(et_get_data(m, "norm").offset > et_get_data(before, "norm").offset);  // norm moved

  wdedup::BufferSource src(replaced.data(), replaced.size());
  // By default: refused, at w.k's (key #2's) recorded size.
  // open()'s refusal of a file, MalformedIndex with this message and `at`.
  const auto refused = [](const wdedup::Result<wdedup::NamedDataMap>& map, const char* what, std::uint64_t at) {
    REQUIRE_FALSE(map.ok());
    CHECK(map.error() == wdedup::Error::MalformedIndex);
    CHECK(std::string(map.failure().what) == what);
    CHECK(map.failure().at == at);
  };
  const char* const resized =
      "key entry's data size differs from its segment: the segments were resized since the WDX1 block was "
      "written (as ExecuTorch's replace_data resizes them), or either side is damaged; "
      "OpenOptions::allow_moved_segments reads them where the flatbuffer says";
  refused(wdedup::NamedDataMap::open(src), resized,
          wdedup_test::Nav{replaced}.entry(2) + wdedup::format::key_entry::kDataSize);

  wdedup::OpenOptions allow;
  allow.allow_moved_segments = true;
  const auto check_map = [&](const wdedup::NamedDataMap& map) {
    CHECK(map.has_extension());
    CHECK(map.segments_moved());
    for (std::uint32_t i = 0; i < 4; ++i) {
      const wdedup::KeyInfo info = REQUIRE_VALUE(map.key_info(i));
      const char* key = want[i].first;
      CAPTURE(key);
      REQUIRE(info.key == key);
      const EtData d = et_get_data(m, key);
      CHECK(info.offset == d.offset);
      CHECK(info.size == d.bytes.size());
      wdedup::Result<wdedup::DataBuffer> got = map.get_data(key);
      REQUIRE(got.ok());
      const auto* p = static_cast<const std::uint8_t*>(got->data());
      CHECK(std::vector<std::uint8_t>(p, p + got->size()) == *want[i].second);
    }
    const wdedup::KeyInfo k1 = REQUIRE_VALUE(map.key_info(1));
    CHECK(k1.alignment == 4096);  // the block's records are kept
    // The function maps still name w.k, now its new bytes.
    wdedup::Result<wdedup::FunctionView> decode = map.find_function("decode", 0);
    REQUIRE(decode.ok());
    wdedup::Result<wdedup::FunctionTensorView> wk = decode->find_tensor("wk");
    REQUIRE(wk.ok());
    CHECK(wk->key == "w.k");
    const std::size_t wk_size = REQUIRE_VALUE(map.get_data(wk->key)).size();
    CHECK(wk_size == 300);
    // Content hashes as recorded: the replaced segment is the one that
    // fails; norm's moved but kept its bytes.
    CHECK(wdedup::verify_segment(map, 0).ok());
    const wdedup::Status s1 = wdedup::verify_segment(map, 1);
    CHECK(s1.error() == wdedup::Error::MalformedSegment);
    CHECK(s1.failure().at == et_get_data(m, "w.k").offset);
    CHECK(wdedup::verify_segment(map, 2).ok());
  };
  {
    wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src, allow);
    REQUIRE_MESSAGE(map.ok(), std::string(map.ok() ? "" : map.failure().what));
    check_map(*map);
  }
  {  // the lending overload too
    const wdedup::Result<std::uint64_t> need = wdedup::NamedDataMap::metadata_size(src);
    REQUIRE(need.ok());
    std::vector<std::uint64_t> memory(static_cast<std::size_t>((*need + 7) / 8));
    wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(
        src, wdedup::Span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(memory.data()), static_cast<std::size_t>(*need)),
        allow);
    REQUIRE(map.ok());
    check_map(*map);
  }
  // The last segment given fewer bytes: nothing moves, only its size
  // differs from the block's (key #3's entry).
  {
    const auto shorter = pattern(7, 4);
    std::vector<std::uint8_t> last = replace_data_like_executorch(file, "norm", shorter);
    wdedup::BufferSource s(last.data(), last.size());
    refused(wdedup::NamedDataMap::open(s), resized,
            wdedup_test::Nav{last}.entry(3) + wdedup::format::key_entry::kDataSize);
    wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(s, allow);
    REQUIRE(map.ok());
    CHECK(map->segments_moved());
    const wdedup::KeyInfo k3 = REQUIRE_VALUE(map->key_info(3));
    CHECK(k3.offset == et_get_data(before, "norm").offset);
    CHECK(k3.size == 7);
    wdedup::Result<wdedup::DataBuffer> got = map->get_data("norm");
    REQUIRE(got.ok());
    const auto* p = static_cast<const std::uint8_t*>(got->data());
    CHECK(std::vector<std::uint8_t>(p, p + got->size()) == shorter);
  }
  // Segments that lie otherwise than a rewrite lays them out are not taken
  // for a move: here segment_data_size ends 16 bytes past the last one.
  {
    std::vector<std::uint8_t> padded = replaced;
    padded.resize(padded.size() + 16, 0);
    wdedup::format::store_u64(padded.data() + 40, le64(padded.data() + 40) + 16);
    wdedup::BufferSource s(padded.data(), padded.size());
    refused(wdedup::NamedDataMap::open(s, allow),
            "segments moved since the WDX1 block was written, but not as a rewrite lays them out (in index order, "
            "each after the one before, segment_data_size ending at the last; at = the segment index, or 40: "
            "segment_data_size)",
            40);
  }
  // A file nothing moved in opens either way, and says so.
  {
    wdedup::BufferSource untouched(file.data(), file.size());
    wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(untouched, allow);
    REQUIRE(map.ok());
    CHECK_FALSE(map->segments_moved());
  }
  // Bytes replaced by as many: nothing moves, the file opens by default,
  // and only the content hash tells.
  {
    const auto same_size = pattern(48, 5);
    std::vector<std::uint8_t> in_place = replace_data_like_executorch(file, "w.k", same_size);
    CHECK(in_place.size() == file.size());
    wdedup::BufferSource s(in_place.data(), in_place.size());
    wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(s);
    REQUIRE(map.ok());
    CHECK_FALSE(map->segments_moved());
    CHECK(wdedup::verify_segment(*map, 1).error() == wdedup::Error::MalformedSegment);
    CHECK(wdedup::verify_segment(*map, 2).ok());
  }
  // Importing it (PtdFiles opens the file itself): the open option, then
  // the content hashes, each refused by name until allowed.
  {
    const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/replaced_like_executorch.ptd";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(replaced.data(), 1, replaced.size(), f) == replaced.size());
    REQUIRE(std::fclose(f) == 0);
    wdedup::Program program;
    wdedup::PtdFiles files;
    wdedup::ImportOptions options;
    wdedup::Expected<void> e = files.add(program, path, {}, options);
    CHECK(e.error() == wdedup::Error::MalformedIndex);
    options.open.allow_moved_segments = true;
    e = files.add(program, path, {}, options);
    CHECK(e.error() == wdedup::Error::MalformedSegment);
    CHECK(e.message() == path + ": add_ptd_program: segment #1 (300 bytes at offset " +
                             std::to_string(et_get_data(m, "w.k").offset) +
                             ") does not have the content hash the file records: its bytes (or that hash) changed "
                             "since it was written (ImportOptions::verify_content_hashes = false takes them as they "
                             "are)");
    CHECK(program.methods.empty());
    options.verify_content_hashes = false;
    REQUIRE(files.add(program, path, {}, options).ok());
    REQUIRE(program.methods.size() == 2);
    CHECK(program.methods[1].name == "decode");
    const wdedup::Tensor& wk = program.methods[1].partitions.at(0).tensors.at(1);
    CHECK(wk.name == "wk");
    CHECK(std::vector<std::uint8_t>(wk.bytes.data(), wk.bytes.data() + wk.bytes.size()) == grown);
    // PtdFiles opens the file again as it was opened to be added (moved
    // segments allowed) to compare its keys with a merged store's: its
    // function maps name the tensors, which become the keys.
    wdedup::Expected<wdedup::DedupResult> r = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob>>(program);
    REQUIRE_MESSAGE(r.ok(), r.message());
    const wdedup::Expected<void> kept = files.check_keys_kept(r->store);
    CHECK(kept.error() == wdedup::Error::NotFound);
    CHECK(kept.message() == path + ": check_keys_kept: 3 of the file's 4 keys are not in the merged store: 'w.q' (now "
                                   "'wq'), 'w.v' (now 'wq'), 'w.k' (now 'wk') (deduplicate() names each key after its "
                                   "tensor, and '<method>/<name>' where methods give one name different bytes or "
                                   "layouts: a program that asks for them by name, as an ExecuTorch program does, "
                                   "does not find them)");
    std::remove(path.c_str());
  }
}

TEST_CASE("our files pass the verifier and the ExecuTorch-style reader") {
  const auto a = pattern(37, 1), b = pattern(100, 2), c = pattern(256, 3), z = std::vector<std::uint8_t>{};
  const auto f6 = pattern(24, 4), h4 = pattern(8, 5), l1 = pattern(8, 6), cl = pattern(48, 7), odd = pattern(10, 8);
  const auto big = pattern(5000, 9);

  std::vector<std::pair<std::string, NamedDataStore>> stores;
  stores.emplace_back("empty", NamedDataStore{});
  {
    NamedDataStore s;
    add(s, "prefill/w", a, 16);
    add(s, "decode/w", a, 16);
    add(s, "prefill/only", b, 16);
    add(s, "decode/only", c, 1);
    stores.emplace_back("aliases", std::move(s));
  }
  {
    NamedDataStore s;
    add(s, "f32.2x3", f6, 4, Layout::contiguous(ScalarType::Float, {2, 3}));
    add(s, "f16.4", h4, 2, Layout::contiguous(ScalarType::Half, {4}));
    add(s, "i64.scalar", l1, 8, Layout::contiguous(ScalarType::Long, {}));
    add(s, "u8.zero", z, 1, Layout::contiguous(ScalarType::Byte, {2, 0}));
    add(s, "f32.channels_last", cl, 16, Layout::channels_last(ScalarType::Float, {1, 2, 3, 2}));
    add(s, "bool.10", odd, 1, Layout::contiguous(ScalarType::Bool, {10}));
    add(s, "raw", b);
    stores.emplace_back("layouts", std::move(s));
  }
  {
    NamedDataStore s;
    add(s, "first", a, 16);
    add(s, "first.alias_4096", a, 4096);
    add(s, "three", odd, 3);
    add(s, "four", b, 4);
    add(s, "empty", z, 4096);
    add(s, "big", big, 4096);
    stores.emplace_back("alignment", std::move(s));
  }
  std::vector<std::vector<std::uint8_t>> many;  // the many_keys store views these
  for (std::uint32_t i = 0; i < 300; ++i) many.push_back(pattern(1 + (i * 7) % 97, 100 + i % 150));
  {
    NamedDataStore s;
    for (std::size_t i = 0; i < 300; ++i)
      add(s, "model.layers." + std::to_string(i) + ".weight", many[i], 1 << (i % 6));
    stores.emplace_back("many_keys", std::move(s));
  }

  for (const auto& entry : stores) {
    const std::string& name = entry.first;  // not a structured binding: doctest's CAPTURE is a lambda
    const NamedDataStore& store = entry.second;
    for (bool ext : {false, true}) {
      for (std::uint64_t sa : {128ull, 1ull, 48ull, 4096ull}) {
        CAPTURE(name);
        CAPTURE(ext);
        CAPTURE(sa);
        WriteOptions o;
        o.wdedup_extensions = ext;
        o.segment_alignment = sa;
        const std::vector<std::uint8_t> file = serialize(store, o);
        check_like_executorch(file, store);
        EtMap m;
        REQUIRE(et_load(file, m).empty());
        CHECK(m.segment_base_offset % sa == 0);
        for (const wdedup::StoreKey& k : store.keys())
          CHECK(et_get_data(m, k.key.c_str()).offset % sa == 0);
      }
    }
  }
}

namespace {

/// ExecuTorch's ScalarType numbering (c10's, in
/// runtime/core/portable_type/scalar_type.h) with the bytes per element
/// ExecuTorch's elementSize() gives, written out here rather than taken
/// from wdedup. `in_schema`: the value is in the FlatTensor schema's enum
/// (tests/data/flat_tensor.fbs, as in the fixtures' ExecuTorch; 23-29 are
/// in newer ExecuTorch schemas than the fixtures'). The others (complex,
/// Bits1x8..Bits8) are in no schema, but ExecuTorch's runtime sizes them and
/// its C++ writer stores them, so wdedup reads and writes every one.
struct EtScalarType {
  int value;
  const char* name;
  std::size_t size;
  bool in_schema;
};
constexpr EtScalarType kEtScalarTypes[] = {
    {0, "BYTE", 1, true},           {1, "CHAR", 1, true},           {2, "SHORT", 2, true},
    {3, "INT", 4, true},            {4, "LONG", 8, true},           {5, "HALF", 2, true},
    {6, "FLOAT", 4, true},          {7, "DOUBLE", 8, true},         {8, "COMPLEXHALF", 4, false},
    {9, "COMPLEXFLOAT", 8, false},  {10, "COMPLEXDOUBLE", 16, false}, {11, "BOOL", 1, true},
    {12, "QINT8", 1, true},         {13, "QUINT8", 1, true},        {14, "QINT32", 4, true},
    {15, "BFLOAT16", 2, true},      {16, "QUINT4X2", 1, true},      {17, "QUINT2X4", 1, true},
    {18, "BITS1X8", 1, false},      {19, "BITS2X4", 1, false},      {20, "BITS4X2", 1, false},
    {21, "BITS8", 1, false},        {22, "BITS16", 2, true},        {23, "FLOAT8E5M2", 1, true},
    {24, "FLOAT8E4M3FN", 1, true},  {25, "FLOAT8E5M2FNUZ", 1, true}, {26, "FLOAT8E4M3FNUZ", 1, true},
    {27, "UINT16", 2, true},        {28, "UINT32", 4, true},        {29, "UINT64", 8, true},
};

}  // namespace

TEST_CASE("element sizes of every ExecuTorch ScalarType, written out; unknown values have size 0") {
  int in_schema = 0;
  for (const EtScalarType& e : kEtScalarTypes) {
    const std::string name = e.name;
    CAPTURE(name);
    const auto t = static_cast<ScalarType>(e.value);
    CHECK(wdedup::element_size(t) == e.size);
    CHECK(std::string(wdedup::scalar_type_name(t)) == name);
    // flatc's enum (what the Verifier and ExecuTorch's generated code know)
    // holds the schema's values, under wdedup's names.
    CHECK(std::string(fts::EnumNameScalarType(static_cast<fts::ScalarType>(e.value))) == (e.in_schema ? name : ""));
    in_schema += e.in_schema;
  }
  CHECK(in_schema == 23);
  CHECK(std::size(fts::EnumValuesScalarType()) == 23);
  for (const int v : {-128, -1, 30, 127}) {
    CAPTURE(v);
    CHECK(wdedup::element_size(static_cast<ScalarType>(v)) == 0);
    CHECK(std::string(wdedup::scalar_type_name(static_cast<ScalarType>(v))).empty());
  }
}

TEST_CASE("a tensor of every ExecuTorch ScalarType, complex and bits too: 15 elements of its size, stored and read the ExecuTorch way") {
  // Each key is a [3, 5] tensor whose byte count is 15 x the written-out
  // element size; the store must accept exactly that many bytes and refuse
  // one byte fewer, and the file must pass the ExecuTorch-style reader.
  std::vector<std::vector<std::uint8_t>> owned;
  owned.reserve(std::size(kEtScalarTypes));
  NamedDataStore store;
  for (const EtScalarType& e : kEtScalarTypes) {
    const std::string name = e.name;
    CAPTURE(name);
    const Layout layout = Layout::contiguous(static_cast<ScalarType>(e.value), {3, 5});
    CHECK(layout.nbytes() == std::optional<std::uint64_t>(15 * e.size));
    owned.push_back(pattern(15 * e.size, static_cast<std::uint32_t>(e.value) + 1));
    NamedDataStore probe;
    const std::vector<std::uint8_t> short_by_one(owned.back().begin(), owned.back().end() - 1);
    wdedup::Expected<void> refused = probe.add_named_data("t", span(short_by_one), 1, layout);
    CHECK(refused.error() == wdedup::Error::LayoutMismatch);
    INFO(refused.message());
    CHECK(refused.message().find("describes " + std::to_string(15 * e.size) + " bytes but the data has " +
                                 std::to_string(15 * e.size - 1) + " bytes") != std::string::npos);
    add(store, "t." + name, owned.back(), static_cast<std::int64_t>(e.size), layout);
  }
  REQUIRE(store.key_count() == 30);
  for (bool ext : {false, true}) {
    CAPTURE(ext);
    WriteOptions o;
    o.wdedup_extensions = ext;
    const std::vector<std::uint8_t> file = serialize(store, o);
    check_like_executorch(file, store);
    // And our reader: every key, with its type, its byte count and bytes.
    wdedup::BufferSource src(file.data(), file.size());
    wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
    REQUIRE(map.ok());
    std::size_t i = 0;
    for (const EtScalarType& e : kEtScalarTypes) {
      const std::string key = std::string("t.") + e.name;
      CAPTURE(key);
      wdedup::Result<wdedup::TensorLayout> l = map->get_tensor_layout(key);
      REQUIRE(l.ok());
      CHECK(static_cast<int>(l->scalar_type) == e.value);
      CHECK(l->nbytes() == 15 * e.size);
      std::vector<std::uint8_t> got(15 * e.size);
      REQUIRE(map->load_data_into(key, got.data(), got.size()).ok());
      CHECK(got == owned[i++]);
    }
  }
}

#if defined(WDEDUP_FLATC) && defined(WDEDUP_FLAT_TENSOR_FBS)
namespace {

const char* scalar_name(ScalarType t) { return wdedup::scalar_type_name(t); }

/// The JSON ExecuTorch's serializer hands flatc for this file: its
/// dataclasses in declaration order (version, segments, named_data; key,
/// segment_index, tensor_layout; scalar_type, sizes, dim_order).
std::string executorch_json(const NamedDataStore& store, const EtMap& m) {
  std::string j = "{\"version\": 0, \"segments\": [";
  for (flatbuffers::uoffset_t i = 0; i < m.root->segments()->size(); ++i) {
    const fts::DataSegment* s = m.root->segments()->Get(i);
    j += (i ? ", " : "") + std::string("{\"offset\": ") + std::to_string(s->offset()) +
         ", \"size\": " + std::to_string(s->size()) + "}";
  }
  j += "], \"named_data\": [";
  for (std::size_t i = 0; i < store.key_count(); ++i) {
    const wdedup::StoreKey& k = store.keys()[i];
    j += (i ? ", " : "") + std::string("{\"key\": \"") + k.key + "\", \"segment_index\": " +
         std::to_string(k.buffer_index) + ", \"tensor_layout\": ";
    if (!k.layout) {
      j += "null}";
      continue;
    }
    j += "{\"scalar_type\": \"" + std::string(scalar_name(k.layout->scalar_type)) + "\", \"sizes\": [";
    for (std::size_t d = 0; d < k.layout->sizes.size(); ++d)
      j += (d ? ", " : "") + std::to_string(k.layout->sizes[d]);
    j += "], \"dim_order\": [";
    for (std::size_t d = 0; d < k.layout->dim_order.size(); ++d)
      j += (d ? ", " : "") + std::to_string(k.layout->dim_order[d]);
    j += "]}}";
  }
  return j + "]}";
}

}  // namespace

TEST_CASE("our flatbuffer is byte-identical to flatc's for the JSON ExecuTorch would write (random stores)") {
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/executorch_compat_flatc";
  ::mkdir(dir.c_str(), 0755);
  // Bytes per element written out (ExecuTorch's sizes), so that a tensor's
  // byte count never comes from the code under test.
  const std::pair<ScalarType, std::size_t> types[] = {
      {ScalarType::Byte, 1}, {ScalarType::Char, 1},  {ScalarType::Short, 2},    {ScalarType::Int, 4},
      {ScalarType::Long, 8}, {ScalarType::Half, 2},  {ScalarType::Float, 4},    {ScalarType::Double, 8},
      {ScalarType::Bool, 1}, {ScalarType::QInt8, 1}, {ScalarType::BFloat16, 2}, {ScalarType::Bits16, 2}};
  const std::int64_t aligns[] = {1, 2, 3, 4, 16, 64, 128, 256, 4096};
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const auto pick = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    NamedDataStore store;
    std::vector<std::vector<std::uint8_t>> owned;
    owned.reserve(64);
    const std::size_t key_count = seed == 1 ? 0 : pick(40) + 1;
    for (std::size_t i = 0; i < key_count; ++i) {
      std::string key = "k" + std::to_string(i);
      const std::size_t extra = pick(40);
      for (std::size_t c = 0; c < extra; ++c) key += "abcdefghijklmnopqrstuvwxyz0123456789._/"[pick(39)];
      std::optional<Layout> layout;
      std::vector<std::uint8_t> bytes;
      if (!owned.empty() && pick(4) == 0) {
        bytes = owned[pick(owned.size())];  // an alias of earlier bytes
        if (pick(2)) layout = Layout::contiguous(ScalarType::Byte, {static_cast<std::int32_t>(bytes.size())});
      } else if (pick(3) == 0) {
        bytes = pattern(pick(300), seed * 1000 + static_cast<std::uint32_t>(i));
      } else {
        const std::pair<ScalarType, std::size_t>& type = types[pick(std::size(types))];
        std::vector<std::int32_t> sizes(pick(5));
        for (auto& s : sizes) s = static_cast<std::int32_t>(pick(4));
        if (pick(2) && sizes.size() == 4) layout = Layout::channels_last(type.first, sizes);
        else layout = Layout::contiguous(type.first, sizes);
        std::size_t nbytes = type.second;  // add() then checks the store agrees
        for (const std::int32_t s : sizes) nbytes *= static_cast<std::size_t>(s);
        bytes = pattern(nbytes, seed * 1000 + static_cast<std::uint32_t>(i));
      }
      owned.push_back(std::move(bytes));
      add(store, key, owned.back(), aligns[pick(std::size(aligns))], layout);
    }
    WriteOptions o;
    o.wdedup_extensions = pick(2) == 0;
    const std::vector<std::uint8_t> ours = serialize(store, o);
    EtMap m;
    REQUIRE(et_load(ours, m).empty());
    check_like_executorch(ours, store);

    const std::string json_path = dir + "/seed" + std::to_string(seed) + ".json";
    std::FILE* f = std::fopen(json_path.c_str(), "wb");
    REQUIRE(f != nullptr);
    const std::string json = executorch_json(store, m);
    std::fwrite(json.data(), 1, json.size(), f);
    std::fclose(f);
    const std::string cmd = std::string("'") + WDEDUP_FLATC + "' --binary -o '" + dir + "' '" +
                            WDEDUP_FLAT_TENSOR_FBS + "' '" + json_path + "'";
    REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
    const std::vector<std::uint8_t> theirs = read_all(dir + "/seed" + std::to_string(seed) + ".bin");
    const std::vector<std::uint8_t> mine = raw_flatbuffer(ours);
    CHECK(mine == theirs);
    if (mine != theirs) {  // left for `xxd` next to flatc's output
      std::FILE* o2 = std::fopen((dir + "/seed" + std::to_string(seed) + ".ours.bin").c_str(), "wb");
      if (o2) {
        std::fwrite(mine.data(), 1, mine.size(), o2);
        std::fclose(o2);
      }
    }
  }
}

TEST_CASE("the writer's largest flatbuffer is flatbuffers' own limit, FLATBUFFERS_MAX_BUFFER_SIZE (2^31 - 1)") {
  // A store whose flatbuffer could be larger is refused before it is
  // built (plan_ptd): flatbuffers' own builder and Verifier take only
  // buffers below it (their offsets are signed 32-bit), and a finished
  // buffer is a multiple of 4 bytes, so ours stays below it too. (2 GiB of
  // key names: the limit itself is not reached in a test.)
  CHECK(wdedup::detail::FlatbufferBuilder::kMaxSize == FLATBUFFERS_MAX_BUFFER_SIZE);
  CHECK(wdedup::detail::FlatbufferBuilder::kMaxSize == 0x7FFFFFFFu);
}

TEST_CASE("ExecuTorch's own serializer test payload (a layout whose dim_order is shorter than its sizes) opens; that key's layout is MalformedLayout") {
  // extension/flat_tensor/test/test_serialize.py's TEST_DATA_PAYLOAD, laid
  // out as extension/flat_tensor/serialize/serialize.py lays it out
  // (FlatTensorConfig() segment_alignment 128; the flatbuffer after the
  // 40-byte header padded to 48; each segment at lcm(128, its alignment)
  // from the base). "fqn3" has sizes [2, 2, 2] and dim_order [0, 1]: the
  // serializer writes it as given, and FlatTensorDataMap::load never reads
  // a layout, so ExecuTorch loads the file and answers get_data for every
  // key (and get_tensor_layout for fqn1 and fqn2).
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/executorch_compat_payload";
  ::mkdir(dir.c_str(), 0755);
  const std::string json =
      "{\"version\": 0, \"segments\": [{\"offset\": 0, \"size\": 4}, {\"offset\": 128, \"size\": 32}, "
      "{\"offset\": 256, \"size\": 17}], \"named_data\": ["
      "{\"key\": \"fqn1\", \"segment_index\": 0, \"tensor_layout\": {\"scalar_type\": \"FLOAT\", \"sizes\": [1, 1, 1], \"dim_order\": [0, 1, 2]}}, "
      "{\"key\": \"fqn2\", \"segment_index\": 0, \"tensor_layout\": {\"scalar_type\": \"FLOAT\", \"sizes\": [1, 1, 1], \"dim_order\": [0, 1, 2]}}, "
      "{\"key\": \"fqn3\", \"segment_index\": 1, \"tensor_layout\": {\"scalar_type\": \"INT\", \"sizes\": [2, 2, 2], \"dim_order\": [0, 1]}}, "
      "{\"key\": \"key0\", \"segment_index\": 2, \"tensor_layout\": null}]}";
  const std::string json_path = dir + "/payload.json";
  std::FILE* f = std::fopen(json_path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fwrite(json.data(), 1, json.size(), f);
  std::fclose(f);
  const std::string cmd = std::string("'") + WDEDUP_FLATC + "' --binary -o '" + dir + "' '" + WDEDUP_FLAT_TENSOR_FBS +
                          "' '" + json_path + "'";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  const std::vector<std::uint8_t> fb = read_all(dir + "/payload.bin");
  std::vector<std::uint8_t> file = insert_flatbuffer_header(fb, 128, 256 + 17);
  const std::uint64_t base = le64(file.data() + 32);
  std::memset(file.data() + base, 0x11, 4);
  std::memset(file.data() + base + 128, 0x22, 32);
  std::memset(file.data() + base + 256, 0x33, 17);

  // ExecuTorch's reader (the harness above) loads it and finds every key.
  EtMap m;
  REQUIRE(et_load(file, m).empty());
  for (const char* key : {"fqn1", "fqn2", "fqn3", "key0"}) CHECK(et_get_data(m, key).error.empty());

  wdedup::BufferSource src(file.data(), file.size());
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src);
  REQUIRE_MESSAGE(map.ok(), std::string(map.ok() ? "" : map.failure().what));
  const std::size_t num_keys = REQUIRE_VALUE(map->get_num_keys());
  CHECK(num_keys == 4);
  const std::pair<const char*, std::pair<std::uint8_t, std::size_t>> bytes[] = {
      {"fqn1", {0x11, 4}}, {"fqn2", {0x11, 4}}, {"fqn3", {0x22, 32}}, {"key0", {0x33, 17}}};
  for (const auto& kb : bytes) {
    const char* key = kb.first;
    CAPTURE(key);
    wdedup::Result<wdedup::DataBuffer> d = map->get_data(key);
    REQUIRE(d.ok());
    REQUIRE(d->size() == kb.second.second);
    const auto* p = static_cast<const std::uint8_t*>(d->data());
    CHECK(std::count(p, p + d->size(), kb.second.first) == static_cast<std::ptrdiff_t>(d->size()));
  }
  wdedup::Result<wdedup::TensorLayout> l1 = map->get_tensor_layout("fqn1");
  REQUIRE(l1.ok());
  CHECK(l1->nbytes() == 4);
  CHECK(map->get_tensor_layout("key0").error() == wdedup::Error::NotFound);
  // fqn3's layout breaks a rule: said so, by that key alone.
  wdedup::Result<wdedup::TensorLayout> l3 = map->get_tensor_layout("fqn3");
  CHECK(l3.error() == wdedup::Error::MalformedLayout);
  CHECK(std::string(l3.failure().what) == "layout's dim_order does not have one entry per dimension of its sizes");
  std::uint8_t buf[64] = {};
  CHECK(map->load_data_into("fqn3", buf, sizeof buf).error() == wdedup::Error::MalformedLayout);
  CHECK(buf[0] == 0);  // nothing copied
  REQUIRE(map->load_data_into("fqn1", buf, sizeof buf).ok());
  CHECK(buf[0] == 0x11);
}

namespace {

/// Runs `command` and returns its exit status (-1 if it did not exit).
int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// What ExecuTorch's Python reader (FlatTensorSerializer.deserialize, which
/// load_ptd calls; extension/flat_tensor/serialize/serialize.py) makes of a
/// file's flatbuffer: it parses the FH01 header from byte 8 and checks its
/// magic and length (FlatTensorHeader.from_bytes, is_valid), writes bytes
/// [0, flatbuffer_offset + flatbuffer_size) to a file as they are, the
/// header left in place (the root offset already points past it), and
/// decodes them with exir/_serialize/_flatbuffer.py's _flatc_decompile:
/// `flatc --raw-binary --json --defaults-json --strict-json -o DIR SCHEMA --
/// FILE`. Returns flatc's JSON, parsed.
wdedup_test::Json python_deserialize(const std::vector<std::uint8_t>& file, const std::string& dir,
                                     const std::string& name) {
  REQUIRE(file.size() >= 48);
  REQUIRE(std::memcmp(file.data() + 8, "FH01", 4) == 0);
  REQUIRE(le32(file.data() + 12) >= 40);
  const std::uint64_t fb_end = le64(file.data() + 16) + le64(file.data() + 24);
  REQUIRE(fb_end <= file.size());
  const std::string bin = dir + "/" + name + ".bin";
  std::FILE* f = std::fopen(bin.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(file.data(), 1, static_cast<std::size_t>(fb_end), f) == fb_end);
  REQUIRE(std::fclose(f) == 0);
  const std::string cmd = std::string("'") + WDEDUP_FLATC + "' --raw-binary --json --defaults-json --strict-json -o '" +
                          dir + "' '" + WDEDUP_FLAT_TENSOR_FBS + "' -- '" + bin + "'";
  REQUIRE_MESSAGE(run(cmd) == 0, cmd);
  const std::vector<std::uint8_t> text = read_all(dir + "/" + name + ".json");
  const std::optional<wdedup_test::Json> json =
      wdedup_test::parse_json(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
  REQUIRE_MESSAGE(json.has_value(), "flatc wrote no JSON document for ", name);
  return *json;
}

std::vector<std::string> member_names(const wdedup_test::Json& j) {
  REQUIRE(j.kind == wdedup_test::Json::Kind::Object);
  return j.member_names;
}

std::vector<std::int64_t> ints(const wdedup_test::Json& j) {
  REQUIRE(j.kind == wdedup_test::Json::Kind::Array);
  std::vector<std::int64_t> out;
  for (const wdedup_test::Json& e : j.items) {
    REQUIRE(e.kind == wdedup_test::Json::Kind::Number);
    out.push_back(e.as_int());
  }
  return out;
}

/// One key of a store for the decode below, with what flatc must print for
/// it: its scalar type's name in ExecuTorch's schema (written out here, not
/// taken from wdedup), "" for a key without a layout.
struct DecodedKey {
  std::string key;
  const std::vector<std::uint8_t>* bytes;
  std::int64_t alignment;
  std::optional<Layout> layout;
  const char* scalar_type;
};

/// Checks flatc's decode of `file` (python_deserialize) against the store
/// it came from: exactly the members ExecuTorch's dataclasses have, version
/// 0, one segment per buffer whose bytes at segment_base_offset + offset
/// (as deserialize slices them) are the buffer's, at a file offset each key's
/// alignment divides, and each key in store order with its segment index
/// and layout, or no tensor_layout member at all. Returns the segments'
/// offsets.
std::vector<std::uint64_t> check_python_decode(const wdedup_test::Json& j, const std::vector<std::uint8_t>& file,
                                               const NamedDataStore& store, const std::vector<DecodedKey>& keys) {
  using Kind = wdedup_test::Json::Kind;
  CHECK(member_names(j) == std::vector<std::string>{"version", "segments", "named_data"});
  CHECK(j["version"].kind == Kind::Number);
  CHECK(j["version"].text == "0");
  const std::uint64_t base = le64(file.data() + 32);
  const wdedup_test::Json& segments = j["segments"];
  REQUIRE(segments.kind == Kind::Array);
  REQUIRE(segments.size() == store.buffer_count());
  std::vector<std::uint64_t> offsets;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    CAPTURE(i);
    CHECK(member_names(segments[i]) == std::vector<std::string>{"offset", "size"});
    const std::uint64_t offset = segments[i]["offset"].as_uint(), size = segments[i]["size"].as_uint();
    const ByteSpan want = store.buffers()[i].bytes;
    REQUIRE(size == want.size());
    REQUIRE(base + offset + size <= file.size());
    CHECK(std::equal(want.begin(), want.end(), file.begin() + static_cast<std::ptrdiff_t>(base + offset)));
    offsets.push_back(offset);
  }
  const wdedup_test::Json& named = j["named_data"];
  REQUIRE(named.kind == Kind::Array);
  REQUIRE(named.size() == keys.size());
  REQUIRE(store.key_count() == keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const DecodedKey& k = keys[i];
    CAPTURE(k.key);
    const wdedup_test::Json& nd = named[i];
    CHECK(nd["key"].kind == Kind::String);
    CHECK(nd["key"].as_string() == k.key);
    const std::uint64_t si64 = nd["segment_index"].as_uint();
    CHECK(si64 == store.keys()[i].buffer_index);
    REQUIRE(si64 < offsets.size());
    const auto si = static_cast<std::size_t>(si64);  // (below the count just checked: fits)
    REQUIRE(segments[si]["size"].as_uint() == k.bytes->size());
    CHECK(std::equal(k.bytes->begin(), k.bytes->end(), file.begin() + static_cast<std::ptrdiff_t>(base + offsets[si])));
    CHECK((base + offsets[si]) % static_cast<std::uint64_t>(k.alignment) == 0);
    if (!k.layout) {
      CHECK(member_names(nd) == std::vector<std::string>{"key", "segment_index"});
      continue;
    }
    CHECK(member_names(nd) == std::vector<std::string>{"key", "segment_index", "tensor_layout"});
    const wdedup_test::Json& tl = nd["tensor_layout"];
    CHECK(member_names(tl) == std::vector<std::string>{"scalar_type", "sizes", "dim_order"});
    CHECK(tl["scalar_type"].kind == Kind::String);
    CHECK(tl["scalar_type"].as_string() == std::string(k.scalar_type));
    CHECK(ints(tl["sizes"]) == std::vector<std::int64_t>(k.layout->sizes.begin(), k.layout->sizes.end()));
    CHECK(ints(tl["dim_order"]) == std::vector<std::int64_t>(k.layout->dim_order.begin(), k.layout->dim_order.end()));
  }
  return offsets;
}

}  // namespace

TEST_CASE("ExecuTorch's Python reader decodes our files with flatc: the keys, segments and layouts stored") {
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/executorch_compat_python_decode";
  ::mkdir(dir.c_str(), 0755);
  const auto f6 = pattern(24, 1), h4 = pattern(8, 2), l1 = pattern(8, 3), cl = pattern(48, 4), b10 = pattern(10, 5),
             bf3 = pattern(6, 6), raw = pattern(100, 7), page = pattern(37, 8), none = std::vector<std::uint8_t>{};
  std::vector<std::pair<std::string, std::vector<DecodedKey>>> stores;
  // Several scalar types; keys without a layout; a segment two keys share
  // (the 24 bytes as float [2, 3] and as int [6], the 100 raw bytes twice);
  // an empty segment shared by a [2, 0] tensor and a raw key; a
  // page-aligned key.
  stores.emplace_back("mixed", std::vector<DecodedKey>{
      {"f32.2x3", &f6, 4, Layout::contiguous(ScalarType::Float, {2, 3}), "FLOAT"},
      {"f32.2x3.as_i32", &f6, 16, Layout::contiguous(ScalarType::Int, {6}), "INT"},
      {"f16.4", &h4, 2, Layout::contiguous(ScalarType::Half, {4}), "HALF"},
      {"i64.scalar", &l1, 8, Layout::contiguous(ScalarType::Long, {}), "LONG"},
      {"u8.2x0", &none, 1, Layout::contiguous(ScalarType::Byte, {2, 0}), "BYTE"},
      {"raw.empty", &none, 1, std::nullopt, ""},
      {"f32.channels_last", &cl, 16, Layout::channels_last(ScalarType::Float, {1, 2, 3, 2}), "FLOAT"},
      {"bool.10", &b10, 1, Layout::contiguous(ScalarType::Bool, {10}), "BOOL"},
      {"bf16.3", &bf3, 2, Layout::contiguous(ScalarType::BFloat16, {3}), "BFLOAT16"},
      {"raw", &raw, 1, std::nullopt, ""},
      {"raw.alias", &raw, 1, std::nullopt, ""},
      {"page", &page, 4096, std::nullopt, ""},
  });
  // Two methods' weights, the shared ones under both names.
  stores.emplace_back("methods", std::vector<DecodedKey>{
      {"prefill/wq", &cl, 16, Layout::contiguous(ScalarType::Float, {12}), "FLOAT"},
      {"decode/wq", &cl, 16, Layout::contiguous(ScalarType::Float, {12}), "FLOAT"},
      {"prefill/norm", &b10, 1, Layout::contiguous(ScalarType::Char, {10}), "CHAR"},
      {"decode/norm", &b10, 1, std::nullopt, ""},
      {"decode/only", &bf3, 2, Layout::contiguous(ScalarType::Short, {3}), "SHORT"},
  });
  // 64 keys over more scalar types, every fifth without a layout, every
  // seventh the bytes of the key before it.
  struct Type {
    ScalarType type;
    std::size_t size;
    const char* name;
  };
  const Type types[] = {{ScalarType::Float, 4, "FLOAT"}, {ScalarType::Half, 2, "HALF"}, {ScalarType::Char, 1, "CHAR"},
                        {ScalarType::Short, 2, "SHORT"}, {ScalarType::Double, 8, "DOUBLE"},
                        {ScalarType::QInt8, 1, "QINT8"}, {ScalarType::QUInt8, 1, "QUINT8"},
                        {ScalarType::QInt32, 4, "QINT32"}, {ScalarType::Bits16, 2, "BITS16"},
                        {ScalarType::Byte, 1, "BYTE"}, {ScalarType::Long, 8, "LONG"}};
  const std::int64_t aligns[] = {1, 2, 4, 8, 16, 64, 128};
  std::vector<std::vector<std::uint8_t>> owned;
  owned.reserve(64);
  std::vector<DecodedKey> many;
  for (std::uint32_t i = 0; i < 64; ++i) {
    const Type& t = types[i % std::size(types)];
    const std::vector<std::int32_t> sizes = {static_cast<std::int32_t>(1 + i % 3), static_cast<std::int32_t>(1 + i % 5)};
    if (i % 7 == 6)
      owned.push_back(owned.back());
    else
      owned.push_back(pattern(t.size * static_cast<std::size_t>(sizes[0] * sizes[1]), 100 + i));
    const bool bare = i % 5 == 4 || i % 7 == 6;  // (an alias of another type's bytes has no layout)
    many.push_back({"model.layers." + std::to_string(i) + ".w", &owned.back(), aligns[i % std::size(aligns)],
                    bare ? std::nullopt : std::optional<Layout>(Layout::contiguous(t.type, sizes)), bare ? "" : t.name});
  }
  stores.emplace_back("many", std::move(many));
  stores.emplace_back("empty", std::vector<DecodedKey>{});

  for (const auto& entry : stores) {
    const std::string& name = entry.first;  // not a structured binding: doctest's CAPTURE is a lambda
    const std::vector<DecodedKey>& keys = entry.second;
    NamedDataStore store;
    for (const DecodedKey& k : keys) add(store, k.key, *k.bytes, k.alignment, k.layout);
    for (const bool ext : {false, true}) {
      CAPTURE(name);
      CAPTURE(ext);
      WriteOptions o;
      o.wdedup_extensions = ext;
      const std::vector<std::uint8_t> file = serialize(store, o);
      const wdedup_test::Json j = python_deserialize(file, dir, name + (ext ? "_wdx1" : ""));
      const std::vector<std::uint64_t> offsets = check_python_decode(j, file, store, keys);
      // The segments as flatbuffers' own (verified) reading of the file has them.
      EtMap m;
      REQUIRE(et_load(file, m).empty());
      REQUIRE(m.root->segments()->size() == offsets.size());
      for (flatbuffers::uoffset_t i = 0; i < m.root->segments()->size(); ++i)
        CHECK(m.root->segments()->Get(i)->offset() == offsets[i]);
      if (name == "mixed") {
        // The base: the flatbuffer's end rounded up to 128, and past the
        // WDX1 block where there is one. Each segment at the next multiple
        // of 128 (of its keys' alignments' lcm with it) after the one
        // before, the empty one where the next begins; the page-aligned one
        // at the first multiple of 4096 in the file.
        const std::uint64_t base = le64(file.data() + 32);
        CHECK(base == (ext ? 2048u : 1152u));
        if (!ext) CHECK(base == (48 + le64(file.data() + 24) + 127) / 128 * 128);
        CHECK(offsets == std::vector<std::uint64_t>{0, 128, 256, 384, 384, 512, 640, 768, 4096 - base});
      }
    }
  }
}
#endif

/// A store of "a" (64 bytes) and `key` (`bytes`, asking `alignment`) as
/// wdedup writes it, and the file ExecuTorch's replace_data makes of it
/// when "a" grows to `grown`; each as ExecuTorch's reader reads it.
struct GrownFirstKey {
  std::vector<std::uint8_t> file, replaced;
  EtMap before, after;
};
GrownFirstKey grow_first_key(const std::string& key, const std::vector<std::uint8_t>& bytes, std::int64_t alignment,
                             const std::vector<std::uint8_t>& grown) {
  // The store holds views: "a"'s bytes must outlive the serialize below.
  const std::vector<std::uint8_t> a = pattern(64, 1);
  NamedDataStore store;
  add(store, "a", a, 1);
  add(store, key, bytes, alignment);
  GrownFirstKey g;
  g.file = serialize(store);
  REQUIRE(et_load(g.file, g.before).empty());
  REQUIRE(g.before.segment_base_offset == 512);
  g.replaced = replace_data_like_executorch(g.file, "a", grown);
  REQUIRE(et_load(g.replaced, g.after).empty());
  return g;
}

TEST_CASE("replace_data on a wdedup file whose last segment is empty: opens with allow_moved_segments") {
  // ExecuTorch's replace_data places every segment in turn, zero-size ones
  // too, and sets segment_data_size to where the last one ends: after a
  // trailing empty segment, that segment's offset, past the last byte of
  // data. A store whose last buffer is empty gives such a file when an
  // earlier key's bytes change size.
  const auto grown = pattern(300, 9);
  GrownFirstKey g = grow_first_key("e", {}, 1, grown);
  CHECK(et_get_data(g.before, "e").offset == 640);  // 64 bytes at 512, then the next 128-aligned offset
  CHECK(g.before.segment_data_size == 128);

  std::vector<std::uint8_t>& replaced = g.replaced;
  const EtMap& m = g.after;
  CHECK(et_get_data(m, "a").offset == 512);
  CHECK(et_get_data(m, "a").bytes.size() == 300);
  CHECK(et_get_data(m, "e").offset == 896);  // 812 up to the 128 its old offset 640 was aligned to
  CHECK(m.segment_data_size == 384);           // the empty segment's offset, 84 bytes past the data
  CHECK(replaced.size() == 896);

  wdedup::BufferSource src(replaced.data(), replaced.size());
  wdedup::Result<wdedup::NamedDataMap> strict = wdedup::NamedDataMap::open(src);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.error() == wdedup::Error::MalformedIndex);
  CHECK(strict.failure().at == wdedup_test::Nav{replaced}.entry(0) + wdedup::format::key_entry::kDataSize);

  wdedup::OpenOptions allow;
  allow.allow_moved_segments = true;
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src, allow);
  REQUIRE_MESSAGE(map.ok(), std::string(map.ok() ? "" : map.failure().what), " at ",
                  map.ok() ? 0 : map.failure().at);
  CHECK(map->segments_moved());
  CHECK(map->key_info(0)->offset == 512);
  CHECK(map->key_info(0)->size == 300);
  CHECK(map->key_info(1)->offset == 896);
  CHECK(map->key_info(1)->size == 0);
  wdedup::Result<wdedup::DataBuffer> got = map->get_data("a");
  REQUIRE(got.ok());
  const auto* p = static_cast<const std::uint8_t*>(got->data());
  CHECK(std::vector<std::uint8_t>(p, p + got->size()) == grown);
  CHECK(map->get_data("e")->size() == 0);

  // A segment_data_size past the empty segment is still not a rewrite's
  // layout (here 16 bytes past it, the file grown to match).
  std::vector<std::uint8_t> longer = replaced;
  longer.resize(longer.size() + 16, 0);
  wdedup::format::store_u64(longer.data() + 40, 400);
  wdedup::BufferSource s(longer.data(), longer.size());
  wdedup::Result<wdedup::NamedDataMap> r = wdedup::NamedDataMap::open(s, allow);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == wdedup::Error::MalformedIndex);
  CHECK(r.failure().at == 40);
}

TEST_CASE("replace_data on a wdedup file with a key asking 12: its segment moves to a multiple of 4 only, and opens") {
  // The key's segment lies at a multiple of lcm(128, 12) = 384 (768), and
  // records 12. replace_data aligns it again to the lowest set bit of that
  // offset (256), so when the key before it grows it moves to 1024: a
  // multiple of 4 (12's power-of-two part, all a view is aligned to), not
  // of 12. ExecuTorch reads it there; so does open() with
  // allow_moved_segments.
  const auto t = pattern(10, 2);
  GrownFirstKey g = grow_first_key("t", t, 12, pattern(300, 9));
  CHECK(et_get_data(g.before, "t").offset == 768);

  const std::vector<std::uint8_t>& file = g.file;
  std::vector<std::uint8_t>& replaced = g.replaced;
  const EtMap& m = g.after;
  CHECK(et_get_data(m, "t").offset == 1024);
  CHECK(m.segment_data_size == 522);

  wdedup::OpenOptions allow;
  allow.allow_moved_segments = true;
  wdedup::BufferSource src(replaced.data(), replaced.size());
  // Without the option the segments' alignments are checked before the key
  // entries: segment 1 at 1024 misses its 12 first, so the refusal names
  // that, not key 0's new size (README, "A WDX1 block that no longer
  // matches").
  wdedup::Result<wdedup::NamedDataMap> strict = wdedup::NamedDataMap::open(src);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.error() == wdedup::Error::MalformedIndex);
  CHECK(std::string(strict.failure().what) == "segment alignment is 0, too large, or not met by its offset");
  CHECK(strict.failure().at == wdedup_test::Nav{replaced}.seg_info(1) + wdedup::format::segment_info::kAlignment);
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(src, allow);
  REQUIRE_MESSAGE(map.ok(), std::string(map.ok() ? "" : map.failure().what), " at ",
                  map.ok() ? 0 : map.failure().at);
  CHECK(map->segments_moved());
  CHECK(map->key_info(1)->offset == 1024);
  CHECK(map->key_info(1)->alignment == 12);  // as recorded
  CHECK(map->segment(1)->alignment == 12);
  wdedup::Result<wdedup::DataBuffer> got = map->get_data("t");
  REQUIRE(got.ok());
  const auto* p = static_cast<const std::uint8_t*>(got->data());
  CHECK(std::vector<std::uint8_t>(p, p + got->size()) == t);
  CHECK(reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(replaced.data()) == 1024);

  // Moved to where not even the power-of-two part holds (1026): refused,
  // at the segment's recorded alignment.
  std::vector<std::uint8_t> off2 = replaced;
  off2.resize(off2.size() + 2, 0);
  wdedup_test::Nav nav{off2};
  wdedup::format::store_u64(off2.data() + nav.segment_offset(1), 514);
  wdedup::format::store_u64(off2.data() + 40, 524);
  wdedup::BufferSource s2(off2.data(), off2.size());
  wdedup::Result<wdedup::NamedDataMap> r = wdedup::NamedDataMap::open(s2, allow);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == wdedup::Error::MalformedIndex);
  CHECK(std::string(r.failure().what) == "segment alignment is 0, too large, or not met by its offset");
  CHECK(r.failure().at == nav.seg_info(1) + wdedup::format::segment_info::kAlignment);

  // A file nothing moved in keeps the exact check, with the option too:
  // the segment put at 1024 with the block's range recorded to match is not
  // a move, and 1024 is no multiple of 12.
  std::vector<std::uint8_t> at1024 = file;
  at1024.resize(1034, 0);
  std::copy(t.begin(), t.end(), at1024.begin() + 1024);
  wdedup_test::Nav n{at1024};
  wdedup::format::store_u64(at1024.data() + n.segment_offset(1), 512);
  wdedup::format::store_u64(at1024.data() + 40, 522);
  wdedup::format::store_u64(at1024.data() + n.entry(1) + wdedup::format::key_entry::kDataOffset, 1024);
  wdedup::BufferSource s3(at1024.data(), at1024.size());
  for (const bool option : {false, true}) {
    CAPTURE(option);
    wdedup::OpenOptions o;
    o.allow_moved_segments = option;
    wdedup::Result<wdedup::NamedDataMap> u = wdedup::NamedDataMap::open(s3, o);
    REQUIRE_FALSE(u.ok());
    CHECK(u.error() == wdedup::Error::MalformedIndex);
    CHECK(std::string(u.failure().what) == "segment alignment is 0, too large, or not met by its offset");
    CHECK(u.failure().at == n.seg_info(1) + wdedup::format::segment_info::kAlignment);
  }
}
