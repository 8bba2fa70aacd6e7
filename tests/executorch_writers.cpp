// tests/executorch_writers.cpp — wdedup's reader over files laid out as
// ExecuTorch's other writers lay them out, made here without ExecuTorch's
// code: flatbuffers' own FlatBufferBuilder over flatc's generated code for
// tests/data/flat_tensor.fbs (or flatc itself, from JSON, where that writer
// used it), and the bytes around the flatbuffer placed as those writers
// place them. Its C++ save_ptd
// (extension/flat_tensor/serialize/serialize.cpp) at every power-of-two
// tensor_alignment from 1 to 4096, with builders that also write default
// values and that repeat vtables; its Python serializer as it was at
// 00de01d (tensor and segment alignment 16, the flatbuffer padded, flatc
// making the flatbuffer from JSON); and a file of a later schema
// (tests/data/flat_tensor_future.fbs: fields added to every table). Each
// must read, through every source, as the tensors it was made from.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "flat_tensor_future_generated.h"
#include "flat_tensor_generated.h"
#include "support/pattern.hpp"
#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "wdedup/runtime.hpp"

namespace fts = wdedup_test::flat_tensor;
namespace ftf = wdedup_test::flat_tensor_future;
using wdedup_test::pattern;  // tests/support/pattern.hpp

namespace {

std::uint32_t le32(const std::uint8_t* p) { return wdedup::format::load_u32(p); }
std::uint64_t le64(const std::uint8_t* p) { return wdedup::format::load_u64(p); }

/// save_ptd's aligned_size: `n` rounded up to a multiple of `alignment`.
std::uint64_t aligned_size(std::uint64_t n, std::uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

/// One tensor of the map save_ptd is given (a std::map: in name order).
struct EtTensor {
  std::string name;
  std::int8_t scalar_type;  ///< ExecuTorch's ScalarType value
  std::vector<std::int32_t> sizes;
  std::vector<std::uint8_t> dim_order;
  std::vector<std::uint8_t> bytes;
  bool has_layout = true;  ///< false: raw bytes, no TensorLayout (the Python serializer's keys may be)
};

/// Eight tensors in name order: five scalar types, an empty one, a
/// channels-last one and a rank-0 one; sizes that no alignment divides.
std::vector<EtTensor> tensors() {
  return {
      {"a.f32.2x3", fts::ScalarType_FLOAT, {2, 3}, {0, 1}, pattern(24, 1)},
      {"b.f32.empty", fts::ScalarType_FLOAT, {0}, {0}, {}},
      {"c.f16.5", fts::ScalarType_HALF, {5}, {0}, pattern(10, 2)},
      {"d.i64.3", fts::ScalarType_LONG, {3}, {0}, pattern(24, 3)},
      {"e.u8.3x1", fts::ScalarType_BYTE, {3, 1}, {0, 1}, pattern(3, 4)},
      {"f.f32.channels_last", fts::ScalarType_FLOAT, {1, 2, 2, 3}, {0, 2, 3, 1}, pattern(48, 5)},
      {"g.i32.scalar", fts::ScalarType_INT, {}, {}, pattern(4, 6)},
      {"h.bool.7", fts::ScalarType_BOOL, {7}, {0}, pattern(7, 7)},
  };
}

/// Where save_ptd puts each tensor's data, from the base: one after
/// another, each but the last padded to a multiple of `tensor_alignment`
/// ("Do not pad the last tensor"). *data_size: segment_data_size.
std::vector<std::uint64_t> save_ptd_offsets(const std::vector<EtTensor>& ts, std::uint64_t tensor_alignment,
                                            std::uint64_t* data_size) {
  std::vector<std::uint64_t> offsets;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    offsets.push_back(total);
    total += i + 1 == ts.size() ? ts[i].bytes.size() : aligned_size(ts[i].bytes.size(), tensor_alignment);
  }
  *data_size = total;
  return offsets;
}

/// A file laid out as save_ptd lays it out around a finished flatbuffer
/// `fb`: its root offset moved by the padded header and its identifier; the
/// FH01 header (length 40, flatbuffer_offset = 40 rounded up to
/// tensor_alignment, flatbuffer_size = the flatbuffer's, segment_base_offset
/// = that header plus the flatbuffer rounded up to tensor_alignment,
/// segment_data_size), zeros up to the padded header, the flatbuffer's
/// bytes past its first 8, zeros up to the padded flatbuffer, then each
/// tensor's bytes at its offset (zeros between).
std::vector<std::uint8_t> save_ptd_layout(const std::uint8_t* fb, std::size_t fb_size, const std::vector<EtTensor>& ts,
                                          std::uint64_t tensor_alignment) {
  std::uint64_t data_size = 0;
  const std::vector<std::uint64_t> offsets = save_ptd_offsets(ts, tensor_alignment, &data_size);
  const std::uint64_t header = aligned_size(40, tensor_alignment);
  const std::uint64_t base = header + aligned_size(fb_size, tensor_alignment);
  std::vector<std::uint8_t> file(static_cast<std::size_t>(base + data_size), 0);
  wdedup::format::store_u32(file.data(), le32(fb) + static_cast<std::uint32_t>(header));
  std::memcpy(file.data() + 4, fb + 4, 4);
  std::memcpy(file.data() + 8, "FH01", 4);
  wdedup::format::store_u32(file.data() + 12, 40);
  wdedup::format::store_u64(file.data() + 16, header);
  wdedup::format::store_u64(file.data() + 24, fb_size);
  wdedup::format::store_u64(file.data() + 32, base);
  wdedup::format::store_u64(file.data() + 40, data_size);
  std::memcpy(file.data() + header + 8, fb + 8, fb_size - 8);
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (!ts[i].bytes.empty())
      std::memcpy(file.data() + base + offsets[i], ts[i].bytes.data(), ts[i].bytes.size());
  return file;
}

/// How the FlatBufferBuilder is set up: as save_ptd's, writing fields equal
/// to their defaults too, or with each table a vtable of its own.
enum class Builder { Default, ForceDefaults, NoVtableDedup };
const char* builder_name(Builder b) {
  return b == Builder::Default ? "default" : b == Builder::ForceDefaults ? "ForceDefaults(true)" : "DedupVtables(false)";
}

/// save_ptd's flatbuffer, call by call: per tensor in map order its key,
/// its layout (sizes, then dim_order: save_ptd passes both as arguments of
/// one call, whose order C++ leaves open), its NamedData (segment_index =
/// its position) and its DataSegment; then the segments vector, the
/// named_data vector, the FlatTensor (version 0) and Finish with "FT01".
flatbuffers::DetachedBuffer save_ptd_flatbuffer(const std::vector<EtTensor>& ts, std::uint64_t tensor_alignment,
                                                Builder how) {
  std::uint64_t data_size = 0;
  const std::vector<std::uint64_t> offsets = save_ptd_offsets(ts, tensor_alignment, &data_size);
  flatbuffers::FlatBufferBuilder b;
  b.ForceDefaults(how == Builder::ForceDefaults);
  b.DedupVtables(how != Builder::NoVtableDedup);
  std::vector<flatbuffers::Offset<fts::NamedData>> named;
  std::vector<flatbuffers::Offset<fts::DataSegment>> segments;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto key = b.CreateString(ts[i].name);
    const auto sizes = b.CreateVector(ts[i].sizes);
    const auto dim_order = b.CreateVector(ts[i].dim_order);
    const auto layout = fts::CreateTensorLayout(b, static_cast<fts::ScalarType>(ts[i].scalar_type), sizes, dim_order);
    named.push_back(fts::CreateNamedData(b, key, static_cast<std::uint32_t>(i), layout));
    segments.push_back(fts::CreateDataSegment(b, offsets[i], ts[i].bytes.size()));
  }
  const auto segment_vector = b.CreateVector(segments);
  const auto named_vector = b.CreateVector(named);
  b.Finish(fts::CreateFlatTensor(b, 0, segment_vector, named_vector), fts::FlatTensorIdentifier());
  return b.Release();
}

std::vector<std::uint8_t> save_ptd(const std::vector<EtTensor>& ts, std::uint64_t tensor_alignment, Builder how) {
  const flatbuffers::DetachedBuffer fb = save_ptd_flatbuffer(ts, tensor_alignment, how);
  return save_ptd_layout(fb.data(), fb.size(), ts, tensor_alignment);
}

/// The tensors as a writer of a later schema (flat_tensor_future.fbs)
/// writes them, in save_ptd's order, with every field it adds filled:
/// strides and a quantization in each layout, a checksum and a compression
/// in each segment, aliases and a provenance in each key, and a producer,
/// metadata and a default provenance in the root.
flatbuffers::DetachedBuffer future_flatbuffer(const std::vector<EtTensor>& ts, std::uint64_t tensor_alignment) {
  std::uint64_t data_size = 0;
  const std::vector<std::uint64_t> offsets = save_ptd_offsets(ts, tensor_alignment, &data_size);
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<ftf::NamedData>> named;
  std::vector<flatbuffers::Offset<ftf::DataSegment>> segments;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto key = b.CreateString(ts[i].name);
    const auto sizes = b.CreateVector(ts[i].sizes);
    const auto dim_order = b.CreateVector(ts[i].dim_order);
    std::vector<std::int64_t> strides(ts[i].sizes.size(), 1);
    for (std::size_t d = strides.size(); d-- > 1;) strides[d - 1] = strides[d] * ts[i].sizes[d];
    const auto stride_vector = b.CreateVector(strides);
    const auto scales = b.CreateVector(std::vector<float>{0.5f, 0.25f});
    const auto zero_points = b.CreateVector(std::vector<std::int64_t>{-3, 7});
    const auto quantization = ftf::CreateQuantization(b, scales, zero_points, static_cast<std::int32_t>(i));
    const auto layout = ftf::CreateTensorLayout(b, static_cast<ftf::ScalarType>(ts[i].scalar_type), sizes, dim_order,
                                                stride_vector, quantization);
    const auto aliases = b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
        b.CreateString(ts[i].name + ".alias"), b.CreateString("model." + ts[i].name)});
    const auto provenance = ftf::CreateProvenance(b, b.CreateString("checkpoint-" + std::to_string(i)), 1000 + i);
    named.push_back(ftf::CreateNamedData(b, key, static_cast<std::uint32_t>(i), layout, aliases, provenance));
    segments.push_back(ftf::CreateDataSegment(b, offsets[i], ts[i].bytes.size(), 0xC0FFEE00u + i,
                                              i % 2 == 0 ? ftf::Compression_ZSTD : ftf::Compression_NONE));
  }
  const auto segment_vector = b.CreateVector(segments);
  const auto named_vector = b.CreateVector(named);
  const auto producer = b.CreateString("a later ExecuTorch");
  const auto metadata = b.CreateVector(std::vector<flatbuffers::Offset<ftf::KeyValue>>{
      ftf::CreateKeyValue(b, b.CreateString("license"), b.CreateVector(pattern(9, 8))),
      ftf::CreateKeyValue(b, b.CreateString("origin"), b.CreateVector(pattern(3, 9)))});
  const auto default_provenance = ftf::CreateProvenance(b, b.CreateString("export"), 42);
  b.Finish(ftf::CreateFlatTensor(b, 0, segment_vector, named_vector, producer, metadata, default_provenance),
           ftf::FlatTensorIdentifier());
  return b.Release();
}

/// The vtable of the flatbuffer table at `table`, and whether it lists
/// field `id` (a field equal to its default is left out unless the builder
/// forces defaults).
const std::uint8_t* vtable_of(const void* table) {
  const auto* p = static_cast<const std::uint8_t*>(table);
  return p - static_cast<std::int32_t>(le32(p));
}
bool lists_field(const void* table, int id) {
  const std::uint8_t* vt = vtable_of(table);
  const auto slot = static_cast<std::size_t>(4 + 2 * id);
  return slot + 2 <= wdedup::format::load_u16(vt) && wdedup::format::load_u16(vt + slot) != 0;
}

/// Whether flatbuffers' Verifier takes the file's flatbuffer, bytes [0,
/// flatbuffer_offset + flatbuffer_size) copied to malloc'd memory: what
/// ExecuTorch's initialize_and_save (extension/backend_data) checks before
/// it reads a .ptd.
bool verifier_accepts(const std::vector<std::uint8_t>& file) {
  const std::uint64_t fb_end = le64(file.data() + 16) + le64(file.data() + 24);
  REQUIRE(fb_end <= file.size());
  const std::vector<std::uint8_t> metadata(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(fb_end));
  flatbuffers::Verifier verifier(metadata.data(), metadata.size());
  return fts::VerifyFlatTensorBuffer(verifier);
}

/// Opens `file` through every source (mmap, pread with lent metadata,
/// memory in place, memory at an odd address with lent metadata) and
/// checks that it reads as `ts`: the header as written, every tensor in
/// order under its name, in segment segment_of[i] (i if not given), its
/// bytes at base + offsets[that segment] (by get_data, load_data_into and
/// find), its layout or none; and nothing else.
void check_reads_as(const std::string& name, const std::vector<std::uint8_t>& file, const std::vector<EtTensor>& ts,
                    const std::vector<std::uint64_t>& offsets, std::vector<std::size_t> segment_of = {}) {
  if (segment_of.empty())
    for (std::size_t i = 0; i < ts.size(); ++i) segment_of.push_back(i);
  REQUIRE(segment_of.size() == ts.size());
  const std::string path = wdedup_test::write_temp("executorch_writers_" + name + ".ptd", file);
  const std::uint64_t base = le64(file.data() + 32);
  for (const wdedup_test::Via via : wdedup_test::kAllVias) {
    const std::string source = wdedup_test::via_name(via);
    CAPTURE(source);
    const std::unique_ptr<wdedup_test::Opened> o = wdedup_test::open_via(via, path);
    REQUIRE(o->result.has_value());
    REQUIRE_MESSAGE(o->ok(), std::string(o->result->failure().what), " at ", o->result->failure().at);
    const wdedup::NamedDataMap& map = o->map();
    CHECK(map.header().flatbuffer_offset == le64(file.data() + 16));
    CHECK(map.header().flatbuffer_size == le64(file.data() + 24));
    CHECK(map.header().segment_base_offset == base);
    CHECK(map.header().segment_data_size == le64(file.data() + 40));
    CHECK_FALSE(map.has_extension());
    const std::size_t num_keys = REQUIRE_VALUE(map.get_num_keys());
    REQUIRE(num_keys == ts.size());
    REQUIRE(map.segment_count() == offsets.size());
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const EtTensor& t = ts[i];
      CAPTURE(t.name);
      const wdedup::KeyView key = REQUIRE_VALUE(map.get_key(i));
      CHECK(wdedup_test::key_text(key) == t.name);
      const wdedup::Result<wdedup::KeyInfo> info = map.find(wdedup::KeyView(t.name.data(), t.name.size()));
      REQUIRE(info.ok());
      CHECK(info->key_index == i);
      CHECK(info->segment_index == segment_of[i]);
      CHECK(info->offset == base + offsets[segment_of[i]]);
      CHECK(info->size == t.bytes.size());
      CHECK(info->has_layout == t.has_layout);
      const wdedup::Result<wdedup::DataBuffer> data = map.get_data(t.name.c_str());
      REQUIRE(data.ok());
      const auto* p = static_cast<const std::uint8_t*>(data->data());
      CHECK(std::vector<std::uint8_t>(p, p + data->size()) == t.bytes);
      std::vector<std::uint8_t> copy(t.bytes.size() + 1, 0x5A);
      REQUIRE(map.load_data_into(t.name.c_str(), copy.data(), copy.size()).ok());
      CHECK(std::vector<std::uint8_t>(copy.begin(), copy.end() - 1) == t.bytes);
      CHECK(copy.back() == 0x5A);
      const wdedup::Result<wdedup::TensorLayout> l = map.get_tensor_layout(t.name.c_str());
      if (!t.has_layout) {
        CHECK(l.error() == wdedup::Error::NotFound);
        continue;
      }
      REQUIRE(l.ok());
      CHECK(static_cast<int>(l->scalar_type) == t.scalar_type);
      CHECK(std::vector<std::int32_t>(l->sizes.begin(), l->sizes.end()) == t.sizes);
      CHECK(std::vector<std::uint8_t>(l->dim_order.begin(), l->dim_order.end()) == t.dim_order);
      CHECK(l->nbytes() == t.bytes.size());
    }
  }
}

#if defined(WDEDUP_FLATC) && defined(WDEDUP_FLAT_TENSOR_FBS)
/// Runs `command` and returns its exit status (-1 if it did not exit).
int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// A file as ExecuTorch's Python serializer wrote it at 00de01d
/// (extension/flat_tensor/serialize/serialize.py, FlatTensorConfig's
/// defaults: tensor_alignment 16, segment_alignment 16), given the
/// payload's keys in order (`keys`, each with the bytes it names): key i
/// names buffer buffer_of[i], asks for alignment_of[i], and its scalar type
/// goes into the JSON as scalar_name_of[i] (the dataclass encoder writes the
/// enum's name). Each buffer becomes a segment where a key first names it,
/// aligned (from the base) to lcm(16, that key's alignment) after the one
/// before, zeros between; the FlatTensor goes to flatc --binary as JSON;
/// the 40-byte header, padded to 48, goes in after the flatbuffer's first
/// 8 bytes (the root offset moved by 48); the flatbuffer is padded with
/// zeros to a multiple of 16; segment_base_offset is where that ends
/// (rounded up to 16: no change); and the segment data follows the padded
/// flatbuffer at once, not padded out to segment_base_offset (with these
/// defaults it ends there anyway), its last segment unpadded. (Later
/// versions pad the file out to segment_base_offset, round the base up to a
/// segment_alignment of 128, as the fixtures show, and no longer pad the
/// flatbuffer.) *segment_of: each key's segment; *offsets: each segment's
/// offset from the base.
std::vector<std::uint8_t> old_python_serialize(const std::vector<EtTensor>& keys,
                                               const std::vector<std::size_t>& buffer_of,
                                               const std::vector<std::int64_t>& alignment_of,
                                               const std::vector<const char*>& scalar_name_of,
                                               const std::string& dir, std::vector<std::size_t>* segment_of,
                                               std::vector<std::uint64_t>* offsets) {
  std::vector<std::size_t> segment_of_buffer(keys.size(), SIZE_MAX);
  std::vector<std::uint8_t> data;
  std::string segments_json, named_json;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const EtTensor& k = keys[i];
    std::size_t& seg = segment_of_buffer[buffer_of[i]];
    if (seg == SIZE_MAX) {
      seg = offsets->size();
      const std::uint64_t prev_end = offsets->empty() ? 0 : data.size();
      const auto a = static_cast<std::uint64_t>(std::lcm(std::int64_t{16}, alignment_of[i]));
      offsets->push_back(aligned_size(prev_end, a));
      data.resize(static_cast<std::size_t>(offsets->back()), 0);
      data.insert(data.end(), k.bytes.begin(), k.bytes.end());
      segments_json += std::string(seg ? ", " : "") + "{\"offset\": " + std::to_string(offsets->back()) +
                       ", \"size\": " + std::to_string(k.bytes.size()) + "}";
    }
    segment_of->push_back(seg);
    named_json += std::string(i ? ", " : "") + "{\"key\": \"" + k.name + "\", \"segment_index\": " +
                  std::to_string(seg) + ", \"tensor_layout\": ";
    if (!k.has_layout) {
      named_json += "null}";
      continue;
    }
    named_json += std::string("{\"scalar_type\": \"") + scalar_name_of[i] + "\", \"sizes\": [";
    for (std::size_t d = 0; d < k.sizes.size(); ++d) named_json += (d ? ", " : "") + std::to_string(k.sizes[d]);
    named_json += "], \"dim_order\": [";
    for (std::size_t d = 0; d < k.dim_order.size(); ++d)
      named_json += (d ? ", " : "") + std::to_string(k.dim_order[d]);
    named_json += "]}}";
  }
  const std::string json =
      "{\"version\": 0, \"segments\": [" + segments_json + "], \"named_data\": [" + named_json + "]}";
  REQUIRE(wdedup_test::write_file(dir + "/old_python.json",
                                  std::vector<std::uint8_t>(json.begin(), json.end())));
  const std::string cmd = std::string("'") + WDEDUP_FLATC + "' --binary -o '" + dir + "' '" + WDEDUP_FLAT_TENSOR_FBS +
                          "' '" + dir + "/old_python.json'";
  REQUIRE_MESSAGE(run(cmd) == 0, cmd);
  const std::vector<std::uint8_t> fb = wdedup_test::read_file(dir + "/old_python.bin");
  REQUIRE(fb.size() >= 8);

  const std::uint64_t padded_fb = aligned_size(fb.size(), 16), header = aligned_size(40, 16);
  const std::uint64_t base = aligned_size(padded_fb + header, 16);
  std::vector<std::uint8_t> file(static_cast<std::size_t>(header + padded_fb), 0);
  wdedup::format::store_u32(file.data(), le32(fb.data()) + static_cast<std::uint32_t>(header));
  std::memcpy(file.data() + 4, fb.data() + 4, 4);
  std::memcpy(file.data() + 8, "FH01", 4);
  wdedup::format::store_u32(file.data() + 12, 40);
  wdedup::format::store_u64(file.data() + 16, header);
  wdedup::format::store_u64(file.data() + 24, fb.size());
  wdedup::format::store_u64(file.data() + 32, base);
  wdedup::format::store_u64(file.data() + 40, data.size());
  std::memcpy(file.data() + 8 + header, fb.data() + 8, fb.size() - 8);
  file.insert(file.end(), data.begin(), data.end());
  return file;
}
#endif

}  // namespace

TEST_CASE("files as ExecuTorch's C++ save_ptd writes them, at every power-of-two tensor_alignment and from three builders, read as the tensors saved") {
  const std::vector<EtTensor> ts = tensors();
  struct Expected {
    std::uint64_t tensor_alignment;
    std::uint64_t flatbuffer_offset;  ///< 40 rounded up to the alignment
    std::vector<std::uint64_t> offsets;
    std::uint64_t data_size;
  };
  // Worked out by hand: sizes 24, 0, 10, 24, 3, 48, 4, 7, each but the last
  // rounded up to the alignment.
  const Expected expected[] = {
      {1, 40, {0, 24, 24, 34, 58, 61, 109, 113}, 120},
      {4, 40, {0, 24, 24, 36, 60, 64, 112, 116}, 123},
      {8, 40, {0, 24, 24, 40, 64, 72, 120, 128}, 135},
      {16, 48, {0, 32, 32, 48, 80, 96, 144, 160}, 167},
      {32, 64, {0, 32, 32, 64, 96, 128, 192, 224}, 231},
      {64, 64, {0, 64, 64, 128, 192, 256, 320, 384}, 391},
      {4096, 4096, {0, 4096, 4096, 8192, 12288, 16384, 20480, 24576}, 24583},
  };
  for (const Expected& e : expected) {
    const std::uint64_t alignment = e.tensor_alignment;
    CAPTURE(alignment);
    std::uint64_t data_size = 0;
    REQUIRE(save_ptd_offsets(ts, alignment, &data_size) == e.offsets);
    REQUIRE(data_size == e.data_size);
    for (const Builder how : {Builder::Default, Builder::ForceDefaults, Builder::NoVtableDedup}) {
      const std::string builder = builder_name(how);
      CAPTURE(builder);
      const std::vector<std::uint8_t> file = save_ptd(ts, alignment, how);
      const std::uint64_t fb_size = le64(file.data() + 24);
      // The header save_ptd writes.
      CHECK(le32(file.data() + 12) == 40);
      CHECK(le64(file.data() + 16) == e.flatbuffer_offset);
      CHECK(le64(file.data() + 32) == e.flatbuffer_offset + aligned_size(fb_size, alignment));
      CHECK(le64(file.data() + 40) == e.data_size);
      CHECK(file.size() == le64(file.data() + 32) + e.data_size);  // the last tensor not padded
      CHECK(verifier_accepts(file));
      // What each builder does differently: the version, tensor 0's
      // segment_index and segment 0's offset, all 0, written out, or left
      // to their defaults; the segments' tables sharing one vtable, or each
      // with its own.
      const fts::FlatTensor* root = fts::GetFlatTensor(file.data());
      const bool defaults = how == Builder::ForceDefaults;
      CHECK(lists_field(root, 0) == defaults);
      CHECK(lists_field(root->named_data()->Get(0), 1) == defaults);
      CHECK(lists_field(root->segments()->Get(0), 0) == defaults);
      CHECK(lists_field(root->segments()->Get(2), 0));
      CHECK((vtable_of(root->segments()->Get(2)) == vtable_of(root->segments()->Get(3))) ==
            (how != Builder::NoVtableDedup));
      check_reads_as("save_ptd_" + std::to_string(alignment) + "_" + std::to_string(static_cast<int>(how)), file, ts,
                     e.offsets);
    }
  }
}

TEST_CASE("a file of a later schema, fields added to every table (vectors and tables among them), reads as the same tensors without them") {
  // save_ptd's layout at tensor_alignment 16, around the plain flatbuffer
  // and around the later schema's, built from the same tensors.
  const std::vector<EtTensor> ts = tensors();
  const flatbuffers::DetachedBuffer plain_fb = save_ptd_flatbuffer(ts, 16, Builder::Default);
  const flatbuffers::DetachedBuffer future_fb = future_flatbuffer(ts, 16);
  const std::vector<std::uint8_t> plain = save_ptd_layout(plain_fb.data(), plain_fb.size(), ts, 16);
  const std::vector<std::uint8_t> future = save_ptd_layout(future_fb.data(), future_fb.size(), ts, 16);
  const std::vector<std::uint64_t> offsets = {0, 32, 32, 48, 80, 96, 144, 160};

  // The new fields are in the file, as the later schema's code reads them.
  REQUIRE(future_fb.size() > plain_fb.size());
  CHECK(le64(future.data() + 32) > le64(plain.data() + 32));
  {
    flatbuffers::Verifier v(future_fb.data(), future_fb.size());
    REQUIRE(ftf::VerifyFlatTensorBuffer(v));
    const ftf::FlatTensor* root = ftf::GetFlatTensor(future_fb.data());
    CHECK(root->producer()->str() == "a later ExecuTorch");
    REQUIRE(root->metadata()->size() == 2);
    CHECK(root->metadata()->Get(1)->key()->str() == "origin");
    CHECK(root->metadata()->Get(1)->value()->size() == 3);
    CHECK(root->default_provenance()->step() == 42);
    const ftf::NamedData* nd = root->named_data()->Get(5);
    CHECK(nd->aliases()->Get(1)->str() == "model.f.f32.channels_last");
    CHECK(nd->provenance()->source()->str() == "checkpoint-5");
    CHECK(nd->provenance()->step() == 1005);
    CHECK(std::vector<std::int64_t>(nd->tensor_layout()->strides()->begin(), nd->tensor_layout()->strides()->end()) ==
          std::vector<std::int64_t>{12, 6, 3, 1});
    CHECK(nd->tensor_layout()->quantization()->axis() == 5);
    CHECK(nd->tensor_layout()->quantization()->zero_points()->Get(0) == -3);
    CHECK(root->segments()->Get(4)->checksum() == 0xC0FFEE04u);
    CHECK(root->segments()->Get(4)->compression() == ftf::Compression_ZSTD);
  }
  // A reader of the older schema verifies it, as flatbuffers allows.
  CHECK(verifier_accepts(future));

  check_reads_as("future", future, ts, offsets);
  check_reads_as("plain", plain, ts, offsets);
  // And the two maps agree on everything they tell, but where the base
  // lies: keys, key and segment records, layouts.
  const std::unique_ptr<wdedup_test::Opened> a = wdedup_test::open_bytes(future), b = wdedup_test::open_bytes(plain);
  REQUIRE(a->ok());
  REQUIRE(b->ok());
  const std::uint64_t base_a = a->map().header().segment_base_offset, base_b = b->map().header().segment_base_offset;
  CHECK(a->map().header().flatbuffer_offset == b->map().header().flatbuffer_offset);
  CHECK(a->map().header().segment_data_size == b->map().header().segment_data_size);
  CHECK(a->map().function_count() == 0);
  REQUIRE(a->map().segment_count() == b->map().segment_count());
  for (std::uint32_t i = 0; i < a->map().segment_count(); ++i) {
    CAPTURE(i);
    const wdedup::SegmentInfo sa = REQUIRE_VALUE(a->map().segment(i)), sb = REQUIRE_VALUE(b->map().segment(i));
    CHECK(sa.offset - base_a == sb.offset - base_b);
    CHECK(sa.size == sb.size);
    CHECK(sa.alignment == sb.alignment);
    CHECK(sa.has_content_hash == sb.has_content_hash);
  }
  const std::size_t keys_a = REQUIRE_VALUE(a->map().get_num_keys()), keys_b = REQUIRE_VALUE(b->map().get_num_keys());
  REQUIRE(keys_a == keys_b);
  for (std::size_t i = 0; i < keys_a; ++i) {
    CAPTURE(i);
    const wdedup::KeyInfo ka = REQUIRE_VALUE(a->map().key_info(i)), kb = REQUIRE_VALUE(b->map().key_info(i));
    CHECK(wdedup_test::key_text(ka.key) == wdedup_test::key_text(kb.key));
    CHECK(ka.segment_index == kb.segment_index);
    CHECK(ka.offset - base_a == kb.offset - base_b);
    CHECK(ka.size == kb.size);
    CHECK(ka.alignment == kb.alignment);
    CHECK(ka.has_layout == kb.has_layout);
    const wdedup::TensorLayout la = REQUIRE_VALUE(a->map().key_layout(i)), lb = REQUIRE_VALUE(b->map().key_layout(i));
    CHECK(la.scalar_type == lb.scalar_type);
    CHECK(std::vector<std::int32_t>(la.sizes.begin(), la.sizes.end()) ==
          std::vector<std::int32_t>(lb.sizes.begin(), lb.sizes.end()));
    CHECK(std::vector<std::uint8_t>(la.dim_order.begin(), la.dim_order.end()) ==
          std::vector<std::uint8_t>(lb.dim_order.begin(), lb.dim_order.end()));
  }
}

namespace {
/// The file offset a uoffset at `pos` points to, and the position of field
/// `id`'s slot in the vtable of the table at `table` (read by hand: these
/// files' tables are misaligned, which flatbuffers' accessors must not read).
std::uint64_t target(const std::vector<std::uint8_t>& file, std::uint64_t pos) { return pos + le32(file.data() + pos); }
std::uint64_t vtable_slot(const std::vector<std::uint8_t>& file, std::uint64_t table, int id) {
  const auto soffset = static_cast<std::int32_t>(le32(file.data() + table));
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(table) - soffset) + 4 + 2 * static_cast<std::uint64_t>(id);
}
}  // namespace

TEST_CASE("save_ptd with a tensor_alignment that is not a power of two: refused where its padded header misaligns the flatbuffer (3, 6, 7, 9, 11), read where it does not (5, 10, 12)") {
  // save_ptd pads the 40-byte header to a multiple of tensor_alignment and
  // moves every flatbuffer object by that much: by 42 bytes for 3, 6 and
  // 7, 45 for 9, so the root table (the builder's at 8) lies at 50 or 53,
  // not a multiple of 4; by 44 for 11, so the tables are 4-aligned but the
  // segments' 8-byte fields are not. flatbuffers' Verifier refuses each
  // (as ExecuTorch's initialize_and_save, which runs it, would), and so
  // does wdedup's open(), naming the first object out of line. ExecuTorch
  // asks for powers of two: FlatTensorDataMap's kMinimumAlignment "Must be
  // a power of 2", _insert_flatbuffer_header's header length "a power of
  // 2", serialize_pte_binary's tensor alignment too.
  const std::vector<EtTensor> ts = tensors();
  struct Refused {
    std::uint64_t tensor_alignment;
    std::uint64_t flatbuffer_offset;
    const char* what;
  };
  const Refused refused[] = {{3, 42, "table is not 4-byte aligned"},
                             {6, 42, "table is not 4-byte aligned"},
                             {7, 42, "table is not 4-byte aligned"},
                             {9, 45, "table is not 4-byte aligned"},
                             {11, 44, "field is not aligned to its size"}};
  for (const Refused& r : refused) {
    const std::uint64_t alignment = r.tensor_alignment;
    CAPTURE(alignment);
    const std::vector<std::uint8_t> file = save_ptd(ts, alignment, Builder::Default);
    REQUIRE(le64(file.data() + 16) == r.flatbuffer_offset);
    const std::uint64_t root = le32(file.data());
    CHECK(root == r.flatbuffer_offset + 8);
    CHECK_FALSE(verifier_accepts(file));
    // Where open() stops: the root table itself, or (at 11) the slot of
    // segment 0's size field (its offset, 0, is left out) in that table's
    // vtable, the first 8-byte field read.
    std::uint64_t at = root;
    if (alignment == 11) {
      const std::uint64_t segments = target(file, root + wdedup::format::load_u16(file.data() + vtable_slot(file, root, 1)));
      const std::uint64_t segment0 = target(file, segments + 4);
      at = vtable_slot(file, segment0, 1);
    }
    const std::string path = wdedup_test::write_temp("executorch_writers_refused.ptd", file);
    for (const wdedup_test::Via via : wdedup_test::kAllVias) {
      const std::string source = wdedup_test::via_name(via);
      CAPTURE(source);
      const std::unique_ptr<wdedup_test::Opened> o = wdedup_test::open_via(via, path);
      REQUIRE(o->result.has_value());
      REQUIRE_FALSE(o->ok());
      CHECK(o->error() == wdedup::Error::MalformedFlatbuffer);
      CHECK(std::string(o->result->failure().what) == std::string(r.what));
      CHECK(o->result->failure().at == at);
    }
  }
  // 5 and 10 pad the header to 40, 12 to 48: the objects stay in line, and
  // the file reads (its data at multiples of the alignment from a base that
  // is one too).
  for (const std::uint64_t alignment : {5u, 10u, 12u}) {
    CAPTURE(alignment);
    const std::vector<std::uint8_t> file = save_ptd(ts, alignment, Builder::Default);
    CHECK(le64(file.data() + 16) == (alignment == 12 ? 48u : 40u));
    CHECK(verifier_accepts(file));
    std::uint64_t data_size = 0;
    check_reads_as("save_ptd_" + std::to_string(alignment), file, ts, save_ptd_offsets(ts, alignment, &data_size));
  }
}

#if defined(WDEDUP_FLATC) && defined(WDEDUP_FLAT_TENSOR_FBS)
TEST_CASE("a file as ExecuTorch's Python serializer wrote it at 00de01d (tensor and segment alignment 16, the flatbuffer padded to 16) reads as its payload") {
  // None of the fixtures is such a file: they come from cff6f4dd's
  // serializer (segment_alignment 128, the flatbuffer not padded, the file
  // padded out to a base that is a multiple of 128).
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/executorch_writers_old_python";
  ::mkdir(dir.c_str(), 0755);
  // The payload in its named_data order: two keys on one buffer (the first
  // key's alignment is the segment's), a key without a layout asking 64, a
  // byte tensor asking 1.
  const std::vector<std::uint8_t> f = pattern(4, 1);
  const std::vector<EtTensor> keys = {
      {"fqn1", fts::ScalarType_FLOAT, {1, 1, 1}, {0, 1, 2}, f},
      {"fqn2", fts::ScalarType_FLOAT, {1, 1, 1}, {0, 1, 2}, f},
      {"fqn3", fts::ScalarType_INT, {2, 2, 2}, {0, 1, 2}, pattern(32, 2)},
      {"key0", 0, {}, {}, pattern(17, 3), false},
      {"u8", fts::ScalarType_BYTE, {3}, {0}, pattern(3, 4)},
  };
  std::vector<std::size_t> segment_of;
  std::vector<std::uint64_t> offsets;
  const std::vector<std::uint8_t> file = old_python_serialize(
      keys, {0, 0, 1, 2, 3}, {16, 16, 16, 64, 1}, {"FLOAT", "FLOAT", "INT", "", "BYTE"}, dir, &segment_of, &offsets);
  // Segments at 0 (4 bytes), 16 (32), 64 (17: lcm(16, 64)) and 96 (3).
  CHECK(segment_of == std::vector<std::size_t>{0, 0, 1, 2, 3});
  CHECK(offsets == std::vector<std::uint64_t>{0, 16, 64, 96});
  const std::uint64_t fb_size = le64(file.data() + 24), base = le64(file.data() + 32);
  CHECK(le64(file.data() + 16) == 48);
  REQUIRE_MESSAGE(fb_size % 16 != 0, "flatc's flatbuffer (", fb_size, " bytes) needs no padding: the test would not pad it");
  CHECK(base == 48 + (fb_size + 15) / 16 * 16);  // past the padding
  CHECK(base % 128 != 0);                       // (not a multiple of 128, as the fixtures' bases are)
  CHECK(le64(file.data() + 40) == 99);
  CHECK(file.size() == base + 99);  // nothing after the last segment
  CHECK(std::count(file.begin() + static_cast<std::ptrdiff_t>(48 + fb_size),
                   file.begin() + static_cast<std::ptrdiff_t>(base), 0) == static_cast<std::ptrdiff_t>(base - 48 - fb_size));
  CHECK(verifier_accepts(file));
  check_reads_as("old_python", file, keys, offsets, segment_of);
}
#endif
