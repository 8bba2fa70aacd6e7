// Tests for wdedup/workload/llama.hpp and the demo that runs on it: the
// numbers are checked against figures computed here from the model's shape,
// independently of the library's own accounting.
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

#include "../tools/read_back.hpp"
#include "support/require_value.hpp"
#include "wdedup/ptd_writer.hpp"
#include "wdedup/wdedup.hpp"

using namespace wdedup;

namespace {

// What dedup must find, from the shapes alone.
struct Expected_ {
  std::uint64_t bytes_in, bytes_stored, shared, keys, buffers, alias_groups;
};

Expected_ expected_for(const LlamaConfig& c) {
  const std::uint64_t es = element_size(c.dtype);
  const std::uint64_t E = std::uint64_t{c.vocab_size} * c.dim * es;  // embedding == tied output
  const std::uint64_t kv = std::uint64_t{c.dim} / c.n_heads * c.n_kv_heads;
  const std::uint64_t W = (2ull * c.dim + 2ull * c.dim * c.dim + 2ull * kv * c.dim + 3ull * c.hidden_dim * c.dim) * es;
  const std::uint64_t R = std::uint64_t{c.max_seq_len} * (c.dim / c.n_heads / 2) * 4;  // cos or sin, float
  const std::uint64_t N = std::uint64_t{c.dim} * es;
  const std::uint64_t L = c.n_layers;
  const std::uint64_t mask_p = std::uint64_t{c.prefill_len} * c.max_seq_len * 4, mask_d = std::uint64_t{c.max_seq_len} * 4;
  const std::uint64_t method_weights = 2 * E + L * (W + 2 * R) + N;  // output.weight included
  Expected_ e{};
  e.bytes_in = 2 * method_weights + mask_p + mask_d;
  e.bytes_stored = E + L * W + 2 * R + N + mask_p + mask_d;
  // Shared: decode's whole copy of the weights, plus what prefill repeats
  // internally (the tied output, and the rotary tables of layers 1..L-1).
  e.shared = method_weights + E + 2 * R * (L - 1);
  e.keys = 11 * L + 5;
  e.buffers = 9 * L + 6;
  e.alias_groups = 9 * L + 4;
  return e;
}

/// Checks two programs hold the same methods, partitions and tensors: names,
/// alignments, layouts, sizes and bytes, in order. Returns the tensors seen.
/// Tiny with 6 layers over 3 prefill and 2 decode partitions.
LlamaConfig six_layers_3_2() {
  LlamaConfig c = LlamaConfig::tiny();
  c.n_layers = 6;
  c.prefill_partitions = 3;
  c.decode_partitions = 2;
  return c;
}

std::size_t check_same_program(const Program& pa, const Program& pb) {
  REQUIRE(pa.methods.size() == pb.methods.size());
  std::size_t tensors = 0;
  for (std::size_t m = 0; m < pa.methods.size(); ++m) {
    CHECK(pa.methods[m].name == pb.methods[m].name);
    REQUIRE(pa.methods[m].partitions.size() == pb.methods[m].partitions.size());
    for (std::size_t p = 0; p < pa.methods[m].partitions.size(); ++p) {
      const std::vector<Tensor>& xa = pa.methods[m].partitions[p].tensors;
      const std::vector<Tensor>& xb = pb.methods[m].partitions[p].tensors;
      REQUIRE(xa.size() == xb.size());
      for (std::size_t i = 0; i < xa.size(); ++i, ++tensors) {
        CAPTURE(xa[i].name);
        CHECK(xa[i].name == xb[i].name);
        CHECK(xa[i].alignment == xb[i].alignment);
        CHECK(xa[i].layout == xb[i].layout);
        REQUIRE(xa[i].bytes.size() == xb[i].bytes.size());
        CHECK(std::equal(xa[i].bytes.begin(), xa[i].bytes.end(), xb[i].bytes.begin()));
      }
    }
  }
  return tensors;
}

/// The layers `tensors` hold, in order of first appearance: "0 1".
std::string layers_in(const std::vector<Tensor>& tensors) {
  std::string seen;
  int last = -1;
  for (const Tensor& t : tensors)
    if (t.name.rfind("layers.", 0) == 0) {
      const int layer = std::stoi(t.name.substr(7));
      if (layer != last) seen += (seen.empty() ? "" : " ") + std::to_string(layer);
      last = layer;
    }
  return seen;
}

/// The tensor named `name` among `tensors`, REQUIRE-d to be there.
const Tensor& tensor_named(const std::vector<Tensor>& tensors, const std::string& name) {
  const auto t = std::find_if(tensors.begin(), tensors.end(), [&](const Tensor& x) { return x.name == name; });
  REQUIRE(t != tensors.end());
  return *t;
}

}  // namespace

TEST_CASE("the default workload: bytes saved equal the shared weights") {
  const LlamaConfig c = LlamaConfig::tiny();
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  const Expected_ e = expected_for(c);
  CHECK(e.bytes_in - e.bytes_stored == e.shared);  // the two ways of counting agree
  auto r = deduplicate<Strategy<Positional>>(w->program());
  REQUIRE(r.ok());
  CHECK(r->report.bytes_in == e.bytes_in);
  CHECK(r->report.bytes_stored == e.bytes_stored);
  CHECK(r->report.bytes_saved == e.shared);
  CHECK(r->report.keys == e.keys);
  CHECK(r->report.buffers == e.buffers);
  CHECK(r->report.alias_groups == e.alias_groups);
  // The tied embedding is the largest alias group: 2 names x 2 methods.
  REQUIRE(!r->report.largest_alias_groups.empty());
  CHECK(r->report.largest_alias_groups[0].first_key == "tok_embeddings.weight");
  CHECK(r->report.largest_alias_groups[0].tensors == 4);
  CHECK(r->report.largest_alias_groups[0].keys == 2);
  // The masks: same name, different bytes, method-qualified keys.
  const FunctionMap& prefill0 = REQUIRE_FOUND(r->functions.find("prefill", 0));
  const FunctionMap& decode0 = REQUIRE_FOUND(r->functions.find("decode", 0));
  const std::string& prefill_mask_key = REQUIRE_FOUND(prefill0.key_of("attention_mask"));
  const std::string& decode_mask_key = REQUIRE_FOUND(decode0.key_of("attention_mask"));
  CHECK(prefill_mask_key == "prefill/attention_mask");
  CHECK(decode_mask_key == "decode/attention_mask");
  const StoreKey& decode_mask = REQUIRE_FOUND(r->store.find("decode/attention_mask"));
  const StoreKey& prefill_mask = REQUIRE_FOUND(r->store.find("prefill/attention_mask"));
  REQUIRE(decode_mask.layout.has_value());
  REQUIRE(prefill_mask.layout.has_value());
  CHECK(decode_mask.layout->sizes == std::vector<std::int32_t>{1, 128});
  CHECK(prefill_mask.layout->sizes == std::vector<std::int32_t>{32, 128});
  // Rotary tables: one buffer for all layers' cos, another for sin.
  const StoreKey& cos0 = REQUIRE_FOUND(r->store.find("layers.0.attention.rope.freqs_cos"));
  const StoreKey& cos3 = REQUIRE_FOUND(r->store.find("layers.3.attention.rope.freqs_cos"));
  const StoreKey& sin0 = REQUIRE_FOUND(r->store.find("layers.0.attention.rope.freqs_sin"));
  CHECK(cos0.buffer_index == cos3.buffer_index);
  CHECK(cos0.buffer_index != sin0.buffer_index);
  // Same-memory tied output is seen by the cheap pointer check.
  CHECK(r->report.identity.skipped_same_pointer == 2);
}

TEST_CASE("partitions: layers are split evenly; OneBlob on prefill 3 / decode 2") {
  const LlamaConfig c = six_layers_3_2();
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  const Method& prefill = REQUIRE_FOUND(w->program().find_method("prefill"));
  REQUIRE(prefill.partitions.size() == 3);
  // Partition 0: mask, embedding, layers 0-1 (11 tensors each) = 24.
  CHECK(prefill.partitions[0].tensors.size() == 2 + 22);
  CHECK(prefill.partitions[1].tensors.size() == 22);
  CHECK(prefill.partitions[2].tensors.size() == 22 + 2);  // + norm + output
  auto pos = deduplicate<Strategy<Positional>>(w->program());
  CHECK(pos.error() == Error::PartitionCountMismatch);
  auto one = deduplicate<Strategy<OneBlob>>(w->program());
  REQUIRE(one.ok());
  CHECK(one->report.bytes_saved == expected_for(c).shared);
  CHECK(one->functions.functions.size() == 5);
  CHECK(one->functions.functions[4].function_name == "decode__1");
}

TEST_CASE("the config's alignment and seed reach every tensor; partition p of n holds the layers l with l * n / L == p") {
  LlamaConfig c = six_layers_3_2();
  c.alignment = 128;
  c.seed = 7;
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  // Which layers each partition holds, in order: prefill 0-1, 2-3, 4-5;
  // decode 0-2, 3-5. The mask asks for 4 (floats), every weight for 128.
  const std::vector<std::vector<std::string>> layers = {{"0 1", "2 3", "4 5"}, {"0 1 2", "3 4 5"}};
  REQUIRE(w->program().methods.size() == 2);
  for (std::size_t m = 0; m < 2; ++m) {
    const Method& method = w->program().methods[m];
    REQUIRE(method.partitions.size() == layers[m].size());
    for (std::size_t p = 0; p < method.partitions.size(); ++p) {
      CAPTURE(method.name);
      CAPTURE(p);
      for (const Tensor& t : method.partitions[p].tensors) {
        CAPTURE(t.name);
        CHECK(t.alignment == (t.name == "attention_mask" ? 4 : 128));
      }
      CHECK(layers_in(method.partitions[p].tensors) == layers[m][p]);
    }
  }
  // Seed 7: splitmix64's first word of the embedding's stream (seed 7 *
  // 1315423911) and of the cos table's (7 ^ 0xC05), read little-endian;
  // the default seed, 0x5eed, gives others.
  const auto first_word = [&](const LlamaWorkload& x, const char* name) {
    const Tensor& t = tensor_named(x.program().methods[0].partitions[0].tensors, name);
    REQUIRE(t.bytes.size() >= 8);
    std::uint64_t v = 0;
    for (std::size_t k = 0; k < 8; ++k) v |= std::uint64_t{t.bytes[k]} << (8 * k);
    return v;
  };
  CHECK(first_word(*w, "tok_embeddings.weight") == 0x820ee3b9de526f20u);
  CHECK(first_word(*w, "layers.0.attention.rope.freqs_cos") == 0xd997388d904eb8efu);
  c.seed = LlamaConfig{}.seed;
  auto d = LlamaWorkload::generate(c);
  REQUIRE(d.ok());
  CHECK(first_word(*d, "tok_embeddings.weight") == 0x00fa72c1f101f2d2u);
  CHECK(first_word(*d, "layers.0.attention.rope.freqs_cos") == 0x4bc677b49f9c26fbu);
}

TEST_CASE("an uneven split: layer l of L goes to partition l * n / L, so 4 layers over 3 partitions are 0 1 / 2 / 3") {
  // l * n / L rounded down: the first partitions take the extra layers,
  // and the last (which also holds norm.weight and output.weight) never has
  // more layers than another.
  LlamaConfig c = LlamaConfig::tiny();
  REQUIRE(c.n_layers == 4);
  c.prefill_partitions = 3;
  c.decode_partitions = 2;
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  const Method& prefill = REQUIRE_FOUND(w->program().find_method("prefill"));
  REQUIRE(prefill.partitions.size() == 3);
  CHECK(layers_in(prefill.partitions[0].tensors) == "0 1");
  CHECK(layers_in(prefill.partitions[1].tensors) == "2");
  CHECK(layers_in(prefill.partitions[2].tensors) == "3");
  // The mask and the embedding, 11 tensors a layer, norm and output.
  CHECK(prefill.partitions[0].tensors.size() == 2 + 22);
  CHECK(prefill.partitions[1].tensors.size() == 11);
  CHECK(prefill.partitions[2].tensors.size() == 11 + 2);
  const Method& decode = REQUIRE_FOUND(w->program().find_method("decode"));
  REQUIRE(decode.partitions.size() == 2);
  CHECK(layers_in(decode.partitions[0].tensors) == "0 1");
  CHECK(layers_in(decode.partitions[1].tensors) == "2 3");
}

TEST_CASE("tensor shapes are Llama's: linear weights [out, in], tables and norms as exported") {
  // nn.Linear keeps its weight as [out_features, in_features]: w1 and w3
  // map dim to hidden_dim, w2 maps back; wk and wv produce the kv heads.
  const LlamaConfig c = LlamaConfig::tiny();
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  const auto dim = static_cast<std::int32_t>(c.dim), hidden = static_cast<std::int32_t>(c.hidden_dim);
  const auto kv = static_cast<std::int32_t>(c.dim / c.n_heads * c.n_kv_heads);
  const auto rope = static_cast<std::int32_t>(c.dim / c.n_heads / 2);
  const std::pair<const char*, std::vector<std::int32_t>> want[] = {
      {"tok_embeddings.weight", {static_cast<std::int32_t>(c.vocab_size), dim}},
      {"layers.0.attention_norm.weight", {dim}},
      {"layers.0.attention.wq.weight", {dim, dim}},
      {"layers.0.attention.wk.weight", {kv, dim}},
      {"layers.0.attention.wv.weight", {kv, dim}},
      {"layers.0.attention.wo.weight", {dim, dim}},
      {"layers.0.attention.rope.freqs_cos", {static_cast<std::int32_t>(c.max_seq_len), rope}},
      {"layers.0.ffn_norm.weight", {dim}},
      {"layers.0.feed_forward.w1.weight", {hidden, dim}},
      {"layers.0.feed_forward.w2.weight", {dim, hidden}},
      {"layers.0.feed_forward.w3.weight", {hidden, dim}},
      {"norm.weight", {dim}},
  };
  REQUIRE(dim != hidden);  // else w2 and w1 could be swapped unseen
  REQUIRE(kv != dim);
  const std::vector<Tensor>& tensors = w->program().methods[0].partitions[0].tensors;
  for (const auto& entry : want) {
    const std::string name = entry.first;
    CAPTURE(name);
    const Tensor& t = tensor_named(tensors, name);
    REQUIRE(t.layout.has_value());
    CHECK(t.layout->sizes == entry.second);
    const std::uint64_t nbytes = REQUIRE_VALUE(t.layout->nbytes());
    CHECK(t.bytes.size() == nbytes);
  }
}

TEST_CASE("generation is deterministic and configs are validated") {
  auto a = LlamaWorkload::generate(LlamaConfig::tiny());
  auto b = LlamaWorkload::generate(LlamaConfig::tiny());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // Every method, partition and tensor the same (in different memory: two
  // generations).
  const std::size_t tensors = check_same_program(a->program(), b->program());
  // Each method: 11 names a layer and 4 more (expected_for's keys but one:
  // the attention mask is one name with two keys).
  CHECK(tensors == 2 * (11 * std::size_t{LlamaConfig::tiny().n_layers} + 4));
  LlamaConfig bad = LlamaConfig::tiny();
  bad.n_heads = 7;
  CHECK(LlamaWorkload::generate(bad).error() == Error::InvalidArgument);
  CHECK(LlamaWorkload::generate(bad).message() == "invalid Llama config: dim 256 is not divisible by n_heads 7");
  CHECK(LlamaConfig::tiny().problem().empty());
  CHECK(LlamaConfig::small().problem().empty());
  CHECK(LlamaConfig::llama_1b().problem().empty());
  // Each rule is named with the fields and values that break it.
  const std::pair<void (*)(LlamaConfig&), const char*> rules[] = {
      {[](LlamaConfig& c) { c.dim = 0; }, "dim is 0; it must be positive"},
      {[](LlamaConfig& c) { c.decode_partitions = 0; }, "decode_partitions is 0; it must be positive"},
      {[](LlamaConfig& c) { c.vocab_size = 0x80000000u; },
       "vocab_size 2147483648 is more than 2147483647 (a dimension is an int32)"},
      {[](LlamaConfig& c) { c.n_kv_heads = 3; }, "n_heads 8 is not divisible by n_kv_heads 3"},
      {[](LlamaConfig& c) { c.n_heads = 256; }, "head_dim (dim 256 / n_heads 256 = 1) is odd; rotary tables need it even"},
      {[](LlamaConfig& c) { c.prefill_len = 129; }, "prefill_len 129 is more than max_seq_len 128"},
      {[](LlamaConfig& c) { c.prefill_partitions = 5; },
       "prefill_partitions 5 is more than n_layers 4 (a partition holds at least one layer)"},
      {[](LlamaConfig& c) { c.decode_partitions = 9; },
       "decode_partitions 9 is more than n_layers 4 (a partition holds at least one layer)"},
      {[](LlamaConfig& c) { c.dtype = static_cast<ScalarType>(30); }, "dtype 30 is not a ScalarType"},
      // A tensor past 2^64 bytes: every field within int32, the dtype wide
      // (generate() dereferenced the layout's empty byte count).
      {[](LlamaConfig& c) {
         c.dtype = ScalarType::ComplexDouble;
         c.vocab_size = 0x7fffffffu;
         c.dim = 1u << 30;
       },
       "tok_embeddings.weight (vocab_size 2147483647 x dim 1073741824 of COMPLEXDOUBLE, 16 bytes each) holds more "
       "than 2^64 - 1 bytes"},
      {[](LlamaConfig& c) {
         c.dtype = ScalarType::Double;
         c.hidden_dim = 0x7fffffffu;
         c.dim = 0x7ffffff0u;
       },
       "feed_forward.w1.weight (hidden_dim 2147483647 x dim 2147483632 of DOUBLE, 8 bytes each) holds more than "
       "2^64 - 1 bytes"},
      // wq alone past it: dim x dim, the vocabulary and hidden_dim small.
      {[](LlamaConfig& c) {
         c.dtype = ScalarType::ComplexDouble;
         c.dim = 1u << 30;
       },
       "attention.wq.weight (dim 1073741824 x dim 1073741824 of COMPLEXDOUBLE, 16 bytes each) holds more than "
       "2^64 - 1 bytes"},
  };
  for (const auto& rule : rules) {
    const auto broken = rule.first;
    const std::string why = rule.second;  // (clang cannot capture a structured binding)
    CAPTURE(why);
    LlamaConfig c = LlamaConfig::tiny();
    broken(c);
    CHECK(c.problem() == why);
    CHECK(LlamaWorkload::generate(c).message() == std::string("invalid Llama config: ") + why);
  }
  CHECK(LlamaConfig::preset("2b").error() == Error::InvalidArgument);
  CHECK(LlamaConfig::preset("2b").message() == "unknown model preset '2b'; expected tiny, small or 1b");
  const LlamaConfig one_b = REQUIRE_VALUE(LlamaConfig::preset("1b"));
  CHECK(one_b.dim == 2048);
}

TEST_CASE("problem(): each of the ten count fields is named at 0 and at 2^31, before any other rule") {
  const std::pair<std::uint32_t LlamaConfig::*, const char*> fields[] = {
      {&LlamaConfig::dim, "dim"},
      {&LlamaConfig::n_layers, "n_layers"},
      {&LlamaConfig::n_heads, "n_heads"},
      {&LlamaConfig::n_kv_heads, "n_kv_heads"},
      {&LlamaConfig::hidden_dim, "hidden_dim"},
      {&LlamaConfig::vocab_size, "vocab_size"},
      {&LlamaConfig::max_seq_len, "max_seq_len"},
      {&LlamaConfig::prefill_len, "prefill_len"},
      {&LlamaConfig::prefill_partitions, "prefill_partitions"},
      {&LlamaConfig::decode_partitions, "decode_partitions"},
  };
  for (const auto& field : fields) {
    const std::string name = field.second;
    CAPTURE(name);
    LlamaConfig c = LlamaConfig::tiny();
    c.*field.first = 0;
    CHECK(c.problem() == name + " is 0; it must be positive");
    c.*field.first = 0x80000000u;
    CHECK(c.problem() == name + " 2147483648 is more than 2147483647 (a dimension is an int32)");
  }
}

TEST_CASE("preset() gives each preset by its name; dimension_problem() compares digits of any length with 2^31 - 1") {
  const LlamaConfig tiny = REQUIRE_VALUE(LlamaConfig::preset("tiny"));
  CHECK(tiny.dim == 256);
  CHECK(tiny.vocab_size == 4096);
  const LlamaConfig small = REQUIRE_VALUE(LlamaConfig::preset("small"));
  CHECK(small.dim == 1024);
  CHECK(small.n_layers == 8);
  CHECK(small.vocab_size == 32000);
  CHECK(small.memory_bytes() == LlamaConfig::small().memory_bytes());
  // 2147483647 is the largest int32, a dimension; 2147483648 is not. As
  // digits (a command line's), leading zeros do not count: 002147483647 is
  // that int32, and a value is named as it was given.
  using D = std::string_view;
  CHECK(LlamaConfig::dimension_problem("--layers", D("2147483647")).empty());
  CHECK(LlamaConfig::dimension_problem("--layers", D("002147483647")).empty());
  CHECK(LlamaConfig::dimension_problem("--layers", D("0")).empty());
  CHECK(LlamaConfig::dimension_problem("--layers", D("2147483648")) ==
        "--layers 2147483648 is more than 2147483647 (a dimension is an int32)");
  CHECK(LlamaConfig::dimension_problem("--layers", D("002147483648")) ==
        "--layers 002147483648 is more than 2147483647 (a dimension is an int32)");
  CHECK(LlamaConfig::dimension_problem("dim", std::uint64_t{2147483647}).empty());
  CHECK(LlamaConfig::dimension_problem("dim", std::uint64_t{2147483648}) ==
        "dim 2147483648 is more than 2147483647 (a dimension is an int32)");
}

TEST_CASE("attention_mask: causal, 0.0 up to each query's own position and -1e9 past it, in both methods") {
  // prefill_len 3 over max_seq_len 8: query i sits at position 5 + i and
  // sees positions 0..5+i; decode's one query sits at 7 and sees all 8.
  LlamaConfig c = LlamaConfig::tiny();
  c.max_seq_len = 8;
  c.prefill_len = 3;
  auto w = LlamaWorkload::generate(c);
  REQUIRE(w.ok());
  auto mask_of = [&](const char* method) {
    const Tensor& t =
        tensor_named(REQUIRE_FOUND(w->program().find_method(method)).partitions[0].tensors, "attention_mask");
    REQUIRE(t.layout.has_value());
    CHECK(t.layout->scalar_type == ScalarType::Float);
    std::vector<float> f(t.bytes.size() / sizeof(float));
    std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
    return f;
  };
  const float x = -1e9f;
  CHECK(mask_of("prefill") == std::vector<float>{0, 0, 0, 0, 0, 0, x, x,  //
                                                 0, 0, 0, 0, 0, 0, 0, x,  //
                                                 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(mask_of("decode") == std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("LlamaConfig::memory_bytes() is what generate() allocates, without allocating it") {
  std::vector<LlamaConfig> configs(5, LlamaConfig::tiny());
  configs[1].n_layers = 3;
  configs[1].prefill_partitions = 3;
  configs[1].decode_partitions = 2;
  configs[2].dtype = ScalarType::Float;
  configs[2].vocab_size = 1001;
  configs[2].hidden_dim = 77;
  configs[3].n_kv_heads = 8;
  configs[3].max_seq_len = 96;
  configs[3].prefill_len = 96;
  configs[4].dtype = ScalarType::Bool;
  configs[4].n_layers = 1;
  for (const LlamaConfig& c : configs) {
    auto w = LlamaWorkload::generate(c);
    REQUIRE(w.ok());
    CHECK(c.memory_bytes() == w->memory_bytes());
  }
  // The 1b preset: ~2 x 2.5 GB of weights, computed rather than allocated.
  const std::uint64_t b1 = LlamaConfig::llama_1b().memory_bytes();
  CHECK(b1 > 2 * 2470000000ull);
  CHECK(b1 < 2 * 2520000000ull);
  // Past 2^64 it saturates rather than wraps (a --layers no machine holds).
  LlamaConfig huge = LlamaConfig::llama_1b();
  huge.n_layers = 0x7fffffffu;
  huge.hidden_dim = 0x7fffffffu;
  CHECK(huge.problem().empty());
  CHECK(huge.memory_bytes() == ~std::uint64_t{0});
  // generate() refuses it before allocating anything.
  auto none = LlamaWorkload::generate(huge);
  CHECK(none.error() == Error::OutOfMemory);
  CHECK(none.message() == "the Llama workload's tensors hold more than 2^64 - 1 bytes in all");
}

TEST_CASE("generate() with on_progress: pieces of 64 MiB at most, done == memory_bytes() last, the same bytes") {
  // One tensor of 64 MiB + 525,062 bytes whose length is not a multiple of
  // 8 (Byte weights, vocab 262,147 x dim 258): written in two pieces, the
  // second ending in fill_random's last-bytes rule.
  LlamaConfig c = LlamaConfig::tiny();
  c.dim = 258;
  c.n_heads = 1;
  c.n_kv_heads = 1;
  c.vocab_size = 262147;
  c.dtype = ScalarType::Byte;
  c.n_layers = 1;
  c.hidden_dim = 16;
  c.max_seq_len = 8;
  c.prefill_len = 4;
  REQUIRE(c.problem().empty());
  const std::uint64_t total = c.memory_bytes();
  CHECK(total == 135843352u);
  std::vector<std::uint64_t> done;
  std::uint64_t totals_seen = 0;
  auto w = LlamaWorkload::generate(c, [&](std::uint64_t d, std::uint64_t t) {
    done.push_back(d);
    totals_seen |= t ^ total;  // (0 while every call is given the same total)
  });
  REQUIRE(w.ok());
  CHECK(totals_seen == 0);
  // Per method 13 tensors (the embedding, a layer's 11, norm.weight), the
  // embedding in two pieces, and each method's mask: 2 x 14 + 2 calls.
  REQUIRE(done.size() == 30);
  CHECK(done[0] == LlamaWorkload::kProgressStep);
  CHECK(done[1] == 67633926u);
  CHECK(done.back() == total);
  CHECK(w->memory_bytes() == total);
  for (std::size_t i = 1; i < done.size(); ++i) {
    CAPTURE(i);
    CHECK(done[i] > done[i - 1]);
    CHECK(done[i] - done[i - 1] <= LlamaWorkload::kProgressStep);
  }
  // Every name and byte of both methods, hashed: the digest the generator
  // gave before it wrote tensors in pieces (one fill_random call a tensor).
  XXH64_state_t* h = XXH64_createState();
  REQUIRE(h != nullptr);
  XXH64_reset(h, 0);
  for (const Method& m : w->program().methods)
    for (const Partition& p : m.partitions)
      for (const Tensor& t : p.tensors) {
        XXH64_update(h, t.name.data(), t.name.size());
        XXH64_update(h, t.bytes.data(), t.bytes.size());
      }
  CHECK(XXH64_digest(h) == 0xc40573051a70c1a7ull);
  XXH64_freeState(h);
  // generate(c) writes the same bytes.
  auto plain = LlamaWorkload::generate(c);
  REQUIRE(plain.ok());
  const Tensor& a = w->program().methods[0].partitions[0].tensors[1];
  const Tensor& b = plain->program().methods[0].partitions[0].tensors[1];
  REQUIRE(a.name == "tok_embeddings.weight");
  REQUIRE(b.bytes.size() == a.bytes.size());
  CHECK(std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
#if defined(__cpp_exceptions)
  // A caller that stops it (the harness, on a Ctrl-C) throws from
  // on_progress: the exception leaves generate() at that call.
  struct Stop {};
  std::size_t calls = 0;
  bool stopped = false;
  try {
    (void)LlamaWorkload::generate(c, [&](std::uint64_t, std::uint64_t) {
      if (++calls == 3) throw Stop{};
    });
  } catch (const Stop&) {
    stopped = true;
  }
  CHECK(stopped);
  CHECK(calls == 3);
#endif
  // A config generate() refuses is never reported on.
  c.dim = 0;
  std::size_t refused_calls = 0;
  auto refused = LlamaWorkload::generate(c, [&](std::uint64_t, std::uint64_t) { ++refused_calls; });
  CHECK(refused.error() == Error::InvalidArgument);
  CHECK(refused_calls == 0);
}

TEST_CASE("repartition(): the program generate() gives for those counts, over the same memory; refused counts change nothing") {
  LlamaConfig c = LlamaConfig::tiny();
  c.n_layers = 6;
  auto w = LlamaWorkload::generate(c);  // 1 + 1
  REQUIRE(w.ok());
  const std::uint8_t* const embedding = w->program().methods[1].partitions[0].tensors[1].bytes.data();
  REQUIRE(w->program().methods[1].partitions[0].tensors[1].name == "tok_embeddings.weight");
  const std::uint64_t memory = w->memory_bytes();

  REQUIRE(w->repartition(3, 2).ok());
  c.prefill_partitions = 3;
  c.decode_partitions = 2;
  auto fresh = LlamaWorkload::generate(c);
  REQUIRE(fresh.ok());
  CHECK(w->config().prefill_partitions == 3);
  CHECK(w->config().decode_partitions == 2);
  CHECK(w->memory_bytes() == memory);  // nothing allocated
  // Every method, partition and tensor as generate() lays them out for 3 +
  // 2; the bytes where they were.
  const Program& pa = w->program();
  const Program& pb = fresh->program();
  REQUIRE(pa.methods.size() == 2);
  REQUIRE(pa.methods[0].partitions.size() == 3);
  REQUIRE(pa.methods[1].partitions.size() == 2);
  CHECK(check_same_program(pa, pb) == 2 * (11 * std::size_t{6} + 4));
  CHECK(pa.methods[1].partitions[0].tensors[1].name == "tok_embeddings.weight");
  CHECK(pa.methods[1].partitions[0].tensors[1].bytes.data() == embedding);
  // Both OneBlob and Positional plans of the laid-out program deduplicate
  // as the fresh one's do.
  auto a = deduplicate<Strategy<OneBlob>>(pa);
  auto b = deduplicate<Strategy<OneBlob>>(pb);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->report.bytes_saved == b->report.bytes_saved);
  CHECK(a->functions.functions.size() == 5);

  // Refused: the message names the field, and the workload stays 3 + 2.
  auto over = w->repartition(7, 1);
  CHECK(over.error() == Error::InvalidArgument);
  CHECK(over.message() == "invalid Llama config: prefill_partitions 7 is more than n_layers 6 (a partition holds at least one layer)");
  auto zero = w->repartition(1, 0);
  CHECK(zero.error() == Error::InvalidArgument);
  CHECK(zero.message() == "invalid Llama config: decode_partitions is 0; it must be positive");
  CHECK(w->config().prefill_partitions == 3);
  CHECK(w->config().decode_partitions == 2);
  CHECK(w->program().methods[0].partitions.size() == 3);
  CHECK(w->program().methods[1].partitions.size() == 2);
  // And back to 1 + 1.
  REQUIRE(w->repartition(1, 1).ok());
  CHECK(w->program().methods[0].partitions.size() == 1);
  CHECK(w->program().methods[1].partitions.size() == 1);
  CHECK(w->program().methods[1].partitions[0].tensors.size() == 11 * std::size_t{6} + 4);
}

TEST_CASE("the demo's read-back finds a tensor the file does not give back, and a function it lacks") {
  // The demo only ever sees files that read back; here the same check is
  // shown failing, on a written store with one byte of one tensor flipped.
  auto w = LlamaWorkload::generate(LlamaConfig::tiny());
  REQUIRE(w.ok());
  const Program& program = w->program();
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/read_back.ptd";
  REQUIRE(write_ptd_file(r->store, r->functions, path).ok());
  const wdedup_demo::ReadBack good = wdedup_demo::read_back(path, program, *r);
  CHECK(good.problem == "");
  CHECK(good.keys == expected_for(LlamaConfig::tiny()).keys);
  CHECK(good.functions == 2);
  CHECK(good.tensors == 96);

  // The first tensor of the first function: where its bytes sit in the file.
  const FunctionMap& f0 = r->functions.functions[0];
  const Tensor& t0 = REQUIRE_FOUND(program.find_method(f0.method)).partitions[f0.partition_index].tensors[0];
  REQUIRE(t0.bytes.size() > 0);
  std::uint64_t offset = 0;
  {
    auto src = MmapSource::open(path.c_str());
    REQUIRE(src.ok());
    auto map = NamedDataMap::open(*src);
    REQUIRE(map.ok());
    const FunctionView f0_view = REQUIRE_VALUE(map->find_function(f0.method, f0.partition_index));
    auto key = f0_view.key_of(t0.name);
    REQUIRE(key.ok());
    offset = REQUIRE_VALUE(map->find(*key)).offset + t0.bytes.size() - 1;  // its last byte
  }
  std::FILE* file = std::fopen(path.c_str(), "r+b");
  REQUIRE(file != nullptr);
  REQUIRE(std::fseek(file, static_cast<long>(offset), SEEK_SET) == 0);
  const int was = std::fgetc(file);
  REQUIRE(was != EOF);
  REQUIRE(std::fseek(file, static_cast<long>(offset), SEEK_SET) == 0);
  std::fputc(was ^ 0x01, file);
  std::fclose(file);
  const wdedup_demo::ReadBack bad = wdedup_demo::read_back(path, program, *r);
  CHECK(bad.problem == "'" + f0.method + "'#0 tensor '" + t0.name + "' does not read back");
  CHECK(bad.tensors == 0);

  // A function the file does not have (another name than the one written):
  // found before any of its tensors is read.
  DedupResult renamed = *r;
  renamed.functions.functions[0].function_name += "_other";
  CHECK(wdedup_demo::read_back(path, program, renamed).problem ==
        "function '" + f0.method + "'#0 missing or different in the file");
  CHECK(wdedup_demo::read_back(path + ".absent", program, *r).problem ==
        "cannot map " + path + ".absent: open failed: No such file or directory (IoError)");

  // The walk is over the program's methods and partitions, not over the
  // result's functions: a function dropped from the result before writing
  // (so from the file too) is missing, named by method and partition.
  REQUIRE(r->functions.functions.size() == 2);
  REQUIRE(r->functions.functions[1].method == "decode");
  DedupResult dropped = *r;
  dropped.functions.functions.erase(dropped.functions.functions.begin() + 1);
  REQUIRE(write_ptd_file(dropped.store, dropped.functions, path).ok());
  CHECK(wdedup_demo::read_back(path, program, dropped).problem == "function 'decode'#0 missing or different in the file");

  // An intact file again: what the program or the result says otherwise.
  REQUIRE(write_ptd_file(r->store, r->functions, path).ok());
  CHECK(wdedup_demo::read_back(path, program, *r).problem == "");
  // The result lacks a function the file has.
  CHECK(wdedup_demo::read_back(path, program, dropped).problem ==
        "function 'decode'#0 is in the file but not in the deduplication result");
  // The program gives a tensor another layout than the one written.
  {
    Program other = program;
    Tensor& t = other.methods[1].partitions[0].tensors[1];
    REQUIRE(t.layout.has_value());
    REQUIRE(!t.layout->sizes.empty());
    t.layout->sizes[0] += 1;
    CHECK(wdedup_demo::read_back(path, other, *r).problem ==
          "'decode'#0 tensor '" + t.name + "' does not read back its layout");
    // ... or none, where the file has one.
    t.layout.reset();
    CHECK(wdedup_demo::read_back(path, other, *r).problem ==
          "'decode'#0 tensor '" + t.name + "' reads back a layout it was not given");
  }
  // ... or asks for an alignment the file does not give it.
  {
    Program other = program;
    Tensor& t = other.methods[0].partitions[0].tensors[0];
    t.alignment = std::int64_t{1} << 40;
    CHECK(wdedup_demo::read_back(path, other, *r).problem ==
          "'prefill'#0 tensor '" + t.name + "' is not at an offset of its alignment 1099511627776");
  }
  // ... or a name the file does not hold, named as the library names it
  // (quoted and escaped: an imported program's names may hold any bytes).
  {
    Program other = program;
    other.methods[0].partitions[0].tensors[0].name = "it's\x1b[2J";
    CHECK(wdedup_demo::read_back(path, other, *r).problem == "'prefill'#0 tensor 'it\\'s\\x1b[2J' does not read back");
  }
  // ... or one byte fewer than the file gives it (what it has, the file's
  // first bytes of the tensor, is not all the file holds).
  {
    Program other = program;
    Tensor& t = other.methods[0].partitions[0].tensors[0];
    REQUIRE(t.bytes.size() > 1);
    t.bytes = ByteSpan(t.bytes.data(), t.bytes.size() - 1);
    CHECK(wdedup_demo::read_back(path, other, *r).problem == "'prefill'#0 tensor '" + t.name + "' does not read back");
  }
  // ... or an alignment its offset misses by one byte: offset % (offset - 1) is 1.
  {
    Program other = program;
    Tensor& t = other.methods[0].partitions[0].tensors[0];
    std::uint64_t at = 0;
    {
      auto src = MmapSource::open(path.c_str());
      REQUIRE(src.ok());
      auto map = NamedDataMap::open(*src);
      REQUIRE(map.ok());
      const FunctionView prefill0 = REQUIRE_VALUE(map->find_function("prefill", 0));
      auto key = prefill0.key_of(t.name);
      REQUIRE(key.ok());
      at = REQUIRE_VALUE(map->find(*key)).offset;
    }
    REQUIRE(at > 2);
    t.alignment = static_cast<std::int64_t>(at - 1);
    CHECK(wdedup_demo::read_back(path, other, *r).problem ==
          "'prefill'#0 tensor '" + t.name + "' is not at an offset of its alignment " + std::to_string(at - 1));
  }
  // A function whose blob key is not the file's, under the name the file has.
  {
    DedupResult other_blob = *r;
    other_blob.functions.functions[0].blob_key += "_other";
    CHECK(wdedup_demo::read_back(path, program, other_blob).problem ==
          "function '" + f0.method + "'#0 missing or different in the file");
  }
  // ... or one tensor fewer than the file's function has.
  {
    Program other = program;
    other.methods[0].partitions[0].tensors.pop_back();
    CHECK(wdedup_demo::read_back(path, other, *r).problem ==
          "function 'prefill'#0 has 48 tensors in the file, 47 in the program");
  }
  // A function of a method the program does not have: in the result (it
  // was dereferenced as a null method), then in the file as well.
  DedupResult extra = *r;
  extra.functions.functions.push_back(r->functions.functions[0]);
  extra.functions.functions.back().method = "no_such_method";
  extra.functions.functions.back().function_name = "no_such_method__0";  // (one blob: names are unique)
  CHECK(wdedup_demo::read_back(path, program, extra).problem ==
        "the deduplication result has 3 functions, the program 2 partitions");
  REQUIRE(write_ptd_file(extra.store, extra.functions, path).ok());
  CHECK(wdedup_demo::read_back(path, program, extra).problem == "the file has 3 functions, the program 2 partitions");
  // ... and in the file only, the result being the program's.
  CHECK(wdedup_demo::read_back(path, program, *r).problem == "the file has 3 functions, the program 2 partitions");

  // Tensors given no layout (as some ExecuTorch files' keys have none) read
  // back with none: the runtime's NotFound is what they were given.
  Program bare = program;
  for (Method& m : bare.methods)
    for (Partition& part : m.partitions)
      for (Tensor& t : part.tensors) t.layout.reset();
  auto rb = deduplicate<Strategy<OneBlob>>(bare);
  REQUIRE(rb.ok());
  REQUIRE(write_ptd_file(rb->store, rb->functions, path).ok());
  const wdedup_demo::ReadBack none = wdedup_demo::read_back(path, bare, *rb);
  CHECK(none.problem == "");
  CHECK(none.tensors == 96);
  // Against the program with its layouts, each is missing.
  CHECK(wdedup_demo::read_back(path, program, *rb).problem ==
        "'prefill'#0 tensor '" + program.methods[0].partitions[0].tensors[0].name + "' does not read back its layout");
}

#ifdef WDEDUP_DEMO_PATH
TEST_CASE("the demo runs on its default workload and prints the right numbers") {
  const std::string dir = WDEDUP_TEST_TMPDIR;
  const std::string json = dir + "/demo_report.json", out = dir + "/demo.ptd";
  const std::string cmd = "'" + std::string(WDEDUP_DEMO_PATH) + "' --quiet --threads 2 --json '" + json + "' --out '" +
                          out + "' > '" + dir + "/demo_stdout.txt' 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream f(json);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const Expected_ e = expected_for(LlamaConfig::tiny());
  // One report per strategy (Positional, OneBlob, Disabled): same store.
  for (const char* s : {"POSITIONAL", "ONE_BLOB", "DISABLED"})
    CHECK(text.find(std::string("\"strategy\":\"") + s + "\"") != std::string::npos);
  const std::string saved = "\"bytes_in\":" + std::to_string(e.bytes_in) + ",\"bytes_stored\":" +
                            std::to_string(e.bytes_stored) + ",\"bytes_saved\":" + std::to_string(e.shared) + ",";
  std::size_t count = 0;
  for (std::size_t p = text.find(saved); p != std::string::npos; p = text.find(saved, p + 1)) ++count;
  CHECK(count == 3);
  std::ifstream log(dir + "/demo_stdout.txt");
  std::stringstream ls;
  ls << log.rdbuf();
  // Each strategy's store read back through the runtime half, every tensor
  // of the program checked: the counts are the workload's, not the demo's.
  auto w = LlamaWorkload::generate(LlamaConfig::tiny());
  REQUIRE(w.ok());
  std::size_t tensors = 0, functions = 0;
  for (const Method& m : w->program().methods) {
    functions += m.partitions.size();  // one function a partition, in every strategy
    for (const Partition& p : m.partitions) tensors += p.tensors.size();
  }
  CHECK(functions == 2);
  CHECK(tensors == 96);
  for (const char* tag : {"positional", "oneblob", "disabled"}) {
    const std::string line = "  read back " + dir + "/demo." + tag + ".ptd with the runtime reader: " +
                             std::to_string(e.keys) + " keys, " + std::to_string(functions) + " functions, " +
                             std::to_string(tensors) + " tensors verified\n";
    CAPTURE(line);
    CHECK(ls.str().find(line) != std::string::npos);
  }
}
#endif
