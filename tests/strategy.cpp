// Tests for wdedup/strategy.hpp: each built-in policy, and a user policy,
// on equal and unequal partitions, one method, an empty method, a name with
// different bytes in two methods, and a tied embedding.
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "wdedup/wdedup.hpp"
#include "../examples/pair_policy.hpp"
#include "support/no_access.hpp"
#include "support/require_value.hpp"

using namespace wdedup;

namespace {

std::vector<std::uint8_t> fill(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed * 31 + i * 7 + 1);
  return v;
}
ByteSpan span(const std::vector<std::uint8_t>& v) { return ByteSpan(v.data(), v.size()); }

// prefill: p0 {emb A64, w0 B32, mask M1 16}, p1 {w1 C32, out = emb's memory}
// decode:  p0 {emb A'64, w0 B'32, mask M2 8}, p1 {w1 C'32, out = emb's memory}
struct TwoMethods {
  std::vector<std::uint8_t> A = fill(64, 1), B = fill(32, 2), C = fill(32, 3), M1 = fill(16, 4);
  std::vector<std::uint8_t> A2 = A, B2 = B, C2 = C, M2 = fill(8, 5);
  Program program;
  TwoMethods() {
    Method& p = program.add_method("prefill");
    p.add_partition().add("emb", span(A), 16).add("w0", span(B), 16).add("mask", span(M1), 4);
    p.add_partition().add("w1", span(C), 16).add("out", span(A), 16);
    Method& d = program.add_method("decode");
    d.add_partition().add("emb", span(A2), 16).add("w0", span(B2), 16).add("mask", span(M2), 4);
    d.add_partition().add("w1", span(C2), 16).add("out", span(A2), 16);
  }
};

std::vector<std::string> key_names(const NamedDataStore& s) {
  std::vector<std::string> v;
  for (const StoreKey& k : s.keys()) v.push_back(k.key);
  return v;
}
std::vector<std::uint32_t> key_buffers(const NamedDataStore& s) {
  std::vector<std::uint32_t> v;
  for (const StoreKey& k : s.keys()) v.push_back(k.buffer_index);
  return v;
}
std::vector<std::string> function_ids(const FunctionMaps& f) {
  std::vector<std::string> v;
  for (const FunctionMap& m : f.functions)
    v.push_back(m.method + "#" + std::to_string(m.partition_index) + " " + m.blob_key + ":" + m.function_name);
  return v;
}
std::vector<std::string> table(const FunctionMap& f) {
  std::vector<std::string> v;
  for (const FunctionTensor& t : f.tensors) v.push_back(t.tensor_name + "=" + t.key);
  return v;
}

// The store is the same whatever the strategy: identical bytes held once.
void check_two_method_store(const DedupResult& r) {
  CHECK(key_names(r.store) == std::vector<std::string>{"emb", "w0", "prefill/mask", "w1", "out", "decode/mask"});
  CHECK(key_buffers(r.store) == std::vector<std::uint32_t>{0, 1, 2, 3, 0, 4});
  REQUIRE(r.store.buffer_count() == 5);
  CHECK(r.store.bytes_stored() == 64 + 32 + 16 + 32 + 8);
  CHECK(r.report.bytes_in == 208 + 200);
  CHECK(r.report.bytes_stored == 152);
  CHECK(r.report.bytes_saved == 256);
  REQUIRE(r.report.per_method.size() == 2);
  const MethodReport& p = r.report.per_method[0];
  CHECK(p.method == "prefill");
  CHECK(p.bytes_in == 208);
  CHECK(p.bytes_distinct == 144);
  CHECK(p.bytes_shared_with_other_methods == 128);
  CHECK(p.bytes_attributed == 144);
  CHECK(p.bytes_saved == 64);
  const MethodReport& d = r.report.per_method[1];
  CHECK(d.bytes_in == 200);
  CHECK(d.bytes_distinct == 136);
  CHECK(d.bytes_shared_with_other_methods == 128);
  CHECK(d.bytes_attributed == 8);
  CHECK(d.bytes_saved == 192);
  CHECK(r.report.alias_groups == 3);
  REQUIRE(r.report.largest_alias_groups.size() == 3);
  CHECK(r.report.largest_alias_groups[0].first_key == "emb");
  CHECK(r.report.largest_alias_groups[0].tensors == 4);
  CHECK(r.report.largest_alias_groups[0].keys == 2);
  CHECK(r.report.largest_alias_groups[0].bytes_saved == 192);
  CHECK(r.report.largest_alias_groups[1].first_key == "w0");
  CHECK(r.report.largest_alias_groups[2].first_key == "w1");
  // Both "out"s are their method's "emb" again (same pointer). decode's
  // emb, w0 and w1 equal prefill's tensors of those names (their hints);
  // its mask differs in size from prefill's, so it is not compared. That
  // leaves the only 64-, 16- and 8-byte tensors unique by size.
  CHECK(r.report.identity.skipped_same_pointer == 2);
  CHECK(r.report.identity.matched_hint == 3);
  CHECK(r.report.identity.skipped_unique_size == 3);
  CHECK(r.report.identity.compared_directly == 2);  // prefill's w0 and w1: a pair of 32 bytes
  CHECK(r.report.identity.hashed == 0);
  CHECK(r.report.identity.byte_comparisons == 3 + 1);
}

}  // namespace

TEST_CASE("Positional on equal partitions: one blob per partition index, functions named after methods") {
  TwoMethods m;
  auto r = deduplicate<Strategy<Positional>>(m.program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  check_two_method_store(*r);
  CHECK(r->report.strategy == "POSITIONAL");
  CHECK(function_ids(r->functions) ==
        std::vector<std::string>{"prefill#0 combined_partition_0:prefill", "prefill#1 combined_partition_1:prefill",
                                 "decode#0 combined_partition_0:decode", "decode#1 combined_partition_1:decode"});
  const FunctionMap& decode0 = REQUIRE_FOUND(r->functions.find("decode", 0));
  const FunctionMap& prefill1 = REQUIRE_FOUND(r->functions.find("prefill", 1));
  CHECK(table(decode0) == std::vector<std::string>{"emb=emb", "w0=w0", "mask=decode/mask"});
  CHECK(table(prefill1) == std::vector<std::string>{"w1=w1", "out=out"});
  // A method's name is its function's in every partition blob: the blob key
  // tells them apart.
  CHECK(r->functions.find_by_name("combined_partition_1", "prefill") == r->functions.find("prefill", 1));
  CHECK(r->functions.find_by_name("combined_partition_0", "decode") == r->functions.find("decode", 0));
  const FunctionMap& decode_in_1 = REQUIRE_FOUND(r->functions.find_by_name("combined_partition_1", "decode"));
  CHECK(decode_in_1.partition_index == 1);
  CHECK(r->functions.find_by_name("combined_partition_2", "decode") == nullptr);
  CHECK(r->functions.find_by_name("prefill") == r->functions.find("prefill", 0));
  REQUIRE(r->report.per_blob.size() == 2);
  const BlobReport& b0 = r->report.per_blob[0];
  CHECK(b0.blob_key == "combined_partition_0");
  CHECK(b0.functions == 2);
  CHECK(b0.tensors == 6);
  CHECK(b0.bytes_in == 216);
  CHECK(b0.bytes_distinct == 120);
  CHECK(b0.bytes_shared_inside == 96);
  CHECK(b0.bytes_shared_across == 64);
  const BlobReport& b1 = r->report.per_blob[1];
  CHECK(b1.blob_key == "combined_partition_1");
  CHECK(b1.bytes_in == 192);
  CHECK(b1.bytes_distinct == 96);
  CHECK(b1.bytes_shared_inside == 96);
  CHECK(b1.bytes_shared_across == 64);
  CHECK(r->report.bytes_shared_across_blobs == 64);  // the embedding, in both partition blobs
}

TEST_CASE("FunctionMaps and FunctionMap::key_of answer nullptr for a method, partition, name or tensor they do not hold") {
  TwoMethods m;
  auto r = deduplicate<Strategy<Positional>>(m.program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  const FunctionMaps& f = r->functions;
  REQUIRE(f.functions.size() == 4);  // prefill#0, prefill#1, decode#0, decode#1
  // decode has partitions 0 and 1; no method is named "encode".
  CHECK(f.find("decode", 2) == nullptr);
  CHECK(f.find("encode", 0) == nullptr);
  // Positional names a function after its method: no "decode__1", and no
  // blob "combined_all".
  CHECK(f.find_by_name("decode__1") == nullptr);
  CHECK(f.find_by_name("combined_partition_1", "decode__1") == nullptr);
  CHECK(f.find_by_name("combined_all", "decode") == nullptr);
  CHECK(f.of_method("encode").empty());
  // decode's partition 1 holds w1 and out: not its partition 0's tensors,
  // and a key ("decode/mask") is no tensor name.
  const FunctionMap& decode1 = REQUIRE_FOUND(f.find("decode", 1));
  CHECK(table(decode1) == std::vector<std::string>{"w1=w1", "out=out"});
  CHECK(decode1.key_of("emb") == nullptr);
  CHECK(decode1.key_of("mask") == nullptr);
  CHECK(decode1.key_of("") == nullptr);
  const FunctionMap& decode0 = REQUIRE_FOUND(f.find("decode", 0));
  CHECK(decode0.key_of("decode/mask") == nullptr);
  const std::string& mask_key = REQUIRE_FOUND(decode0.key_of("mask"));
  CHECK(mask_key == "decode/mask");
  // A function map made field by field is partition 0 of its method
  // unless told otherwise.
  FunctionMaps hand;
  hand.functions.emplace_back();
  hand.functions[0].method = "forward";
  CHECK(hand.functions[0].partition_index == 0);
  CHECK(hand.find("forward", 0) == &hand.functions[0]);
  CHECK(hand.find("forward", 1) == nullptr);
}

TEST_CASE("OneBlob on equal partitions: one blob, functions <method>__<idx>, nothing shared across blobs") {
  TwoMethods m;
  auto r = deduplicate<Strategy<OneBlob>>(m.program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  check_two_method_store(*r);
  CHECK(function_ids(r->functions) ==
        std::vector<std::string>{"prefill#0 combined_all:prefill__0", "prefill#1 combined_all:prefill__1",
                                 "decode#0 combined_all:decode__0", "decode#1 combined_all:decode__1"});
  REQUIRE(r->report.per_blob.size() == 1);
  CHECK(r->report.per_blob[0].bytes_in == 408);
  CHECK(r->report.per_blob[0].bytes_distinct == 152);
  CHECK(r->report.per_blob[0].bytes_shared_inside == 256);
  CHECK(r->report.per_blob[0].bytes_shared_across == 0);
  CHECK(r->report.bytes_shared_across_blobs == 0);
  const FunctionMap& decode1 = REQUIRE_FOUND(r->functions.find_by_name("decode__1"));
  CHECK(decode1.partition_index == 1);
}

TEST_CASE("Disabled: one blob per method and partition; everything shared is shipped again") {
  TwoMethods m;
  auto r = deduplicate<Strategy<Disabled>>(m.program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  check_two_method_store(*r);
  CHECK(r->report.strategy == "DISABLED");
  CHECK(function_ids(r->functions) ==
        std::vector<std::string>{"prefill#0 prefill_partition_0:prefill", "prefill#1 prefill_partition_1:prefill",
                                 "decode#0 decode_partition_0:decode", "decode#1 decode_partition_1:decode"});
  REQUIRE(r->report.per_blob.size() == 4);
  CHECK(r->report.per_blob[0].bytes_in == 112);
  CHECK(r->report.per_blob[0].bytes_shared_inside == 0);
  CHECK(r->report.per_blob[0].bytes_shared_across == 96);  // emb and w0 live in other blobs too
  CHECK(r->report.bytes_shared_across_blobs == 64 * 3 + 32 + 32);
}

TEST_CASE("unequal partitions: Positional names both methods and counts; OneBlob and Disabled accept them") {
  TwoMethods m;
  // prefill gets a third partition: prefill 3, decode 2.
  std::vector<std::uint8_t> extra = fill(40, 9);
  m.program.methods[0].add_partition().add("w2", span(extra), 16);
  auto pos = deduplicate<Strategy<Positional>>(m.program);
  CHECK(pos.error() == Error::PartitionCountMismatch);
  CHECK(pos.message() ==
        "policy POSITIONAL refused the program: every method must have the same number of partitions: method "
        "'decode' has 2, but the first method 'prefill' has 3; Strategy<OneBlob> (or Strategy<Disabled>) accepts "
        "unequal partition counts");

  auto one = deduplicate<Strategy<OneBlob>>(m.program);
  REQUIRE_MESSAGE(one.ok(), one.message());
  CHECK(function_ids(one->functions) ==
        std::vector<std::string>{"prefill#0 combined_all:prefill__0", "prefill#1 combined_all:prefill__1",
                                 "prefill#2 combined_all:prefill__2", "decode#0 combined_all:decode__0",
                                 "decode#1 combined_all:decode__1"});
  CHECK(one->report.bytes_stored == 152 + 40);
  // Per-method metadata keeps every partition of a method.
  const auto parts = one->functions.of_method("prefill");
  REQUIRE(parts.size() == 3);
  CHECK(parts[0]->function_name == "prefill__0");
  CHECK(parts[1]->function_name == "prefill__1");
  CHECK(parts[2]->function_name == "prefill__2");
  CHECK(table(*parts[2]) == std::vector<std::string>{"w2=w2"});

  auto dis = deduplicate<Strategy<Disabled>>(m.program);
  REQUIRE(dis.ok());
  CHECK(dis->report.blobs == 5);
}

TEST_CASE("one method: nothing is combined, each partition is a blob of its own under every strategy (as ExecuTorch)") {
  std::vector<std::uint8_t> a = fill(100, 1), b = fill(100, 1), c = fill(50, 2);
  Program program;
  Method& m = program.add_method("forward");
  m.add_partition().add("a", span(a)).add("c", span(c));
  m.add_partition().add("b", span(b));  // same bytes as a, other name
  auto pos = deduplicate<Strategy<Positional>>(program);
  REQUIRE(pos.ok());
  CHECK(key_names(pos->store) == std::vector<std::string>{"a", "c", "b"});
  CHECK(key_buffers(pos->store) == std::vector<std::uint32_t>{0, 1, 0});
  // coreml_preprocess.py: `if len(method_names) <= 1: return
  // super().preprocess_multimethod(...)`: each partition compiled alone.
  const std::vector<std::string> own{"forward#0 forward_partition_0:forward", "forward#1 forward_partition_1:forward"};
  CHECK(function_ids(pos->functions) == own);
  CHECK(pos->report.per_method[0].bytes_shared_with_other_methods == 0);
  CHECK(pos->report.bytes_saved == 100);
  CHECK(pos->report.bytes_shared_across_blobs == 100);
  auto one = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(one.ok());
  CHECK(function_ids(one->functions) == own);
  CHECK(one->report.blobs == 2);
  CHECK(one->report.bytes_shared_across_blobs == 100);  // a, in both partitions' blobs
  auto dis = deduplicate<Strategy<Disabled>>(program);
  REQUIRE(dis.ok());
  CHECK(function_ids(dis->functions) == own);
}

TEST_CASE("a method with no partitions takes no part: ExecuTorch never hands it to the backend") {
  std::vector<std::uint8_t> a = fill(64, 1), b = fill(32, 2);
  // prefill 2, decode 2, init 0 (it runs on the CPU): Positional combines
  // prefill and decode, init's 0 is no mismatch.
  Program program;
  program.add_method("init");
  Method& p = program.add_method("prefill");
  p.add_partition().add("a", span(a));
  p.add_partition().add("b", span(b));
  Method& d = program.add_method("decode");
  d.add_partition().add("a", span(a));
  d.add_partition().add("b", span(b));
  auto pos = deduplicate<Strategy<Positional>>(program);
  REQUIRE_MESSAGE(pos.ok(), pos.message());
  CHECK(function_ids(pos->functions) ==
        std::vector<std::string>{"prefill#0 combined_partition_0:prefill", "prefill#1 combined_partition_1:prefill",
                                 "decode#0 combined_partition_0:decode", "decode#1 combined_partition_1:decode"});
  auto one = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(one.ok());
  CHECK(function_ids(one->functions) ==
        std::vector<std::string>{"prefill#0 combined_all:prefill__0", "prefill#1 combined_all:prefill__1",
                                 "decode#0 combined_all:decode__0", "decode#1 combined_all:decode__1"});

  // Only one method with partitions: nothing to combine, under either.
  Program single;
  single.add_method("helper");
  Method& f = single.add_method("forward");
  f.add_partition().add("a", span(a));
  f.add_partition().add("b", span(b));
  const std::vector<std::string> own{"forward#0 forward_partition_0:forward", "forward#1 forward_partition_1:forward"};
  auto pos1 = deduplicate<Strategy<Positional>>(single);
  REQUIRE_MESSAGE(pos1.ok(), pos1.message());
  CHECK(function_ids(pos1->functions) == own);
  auto one1 = deduplicate<Strategy<OneBlob>>(single);
  REQUIRE(one1.ok());
  CHECK(function_ids(one1->functions) == own);

  // A real mismatch among the methods with partitions is still refused,
  // naming the first method that has some (init, first, has none).
  program.methods[1].add_partition().add("c", span(b));
  auto bad = deduplicate<Strategy<Positional>>(program);
  CHECK(bad.error() == Error::PartitionCountMismatch);
  CHECK(bad.message() ==
        "policy POSITIONAL refused the program: every method must have the same number of partitions: method "
        "'decode' has 2, but the first method with partitions 'prefill' has 3; Strategy<OneBlob> (or "
        "Strategy<Disabled>) accepts unequal partition counts");
}

TEST_CASE("a method with zero tensors gets functions with empty tables") {
  std::vector<std::uint8_t> a = fill(10, 1);
  Program program;
  program.add_method("init").add_partition();
  program.add_method("run").add_partition().add("w", span(a));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  REQUIRE(r->functions.functions.size() == 2);
  CHECK(r->functions.functions[0].function_name == "init__0");
  CHECK(r->functions.functions[0].tensors.empty());
  CHECK(r->report.per_method[0].tensors == 0);
  CHECK(r->report.per_method[0].bytes_in == 0);
  auto pos = deduplicate<Strategy<Positional>>(program);
  REQUIRE(pos.ok());
  CHECK(function_ids(pos->functions) ==
        std::vector<std::string>{"init#0 combined_partition_0:init", "run#0 combined_partition_0:run"});
  auto dis = deduplicate<Strategy<Disabled>>(program);
  REQUIRE(dis.ok());
  CHECK(dis->report.blobs == 2);
  // An empty program is fine too.
  auto none = deduplicate<Strategy<Positional>>(Program{});
  REQUIRE(none.ok());
  CHECK(none->store.key_count() == 0);
  CHECK(none->functions.functions.empty());
}

TEST_CASE("same name with different bytes in two methods: method-qualified keys, one per content") {
  std::vector<std::uint8_t> s1 = fill(4, 1), s2 = fill(4, 2), w = fill(64, 3), w2 = w;
  Program program;
  program.add_method("prefill").add_partition().add("kv_scale", span(s1)).add("w", span(w));
  program.add_method("decode").add_partition().add("kv_scale", span(s2)).add("w", span(w2));
  for (int strategy = 0; strategy < 3; ++strategy) {
    Expected<DedupResult> r = strategy == 0   ? deduplicate<Strategy<Positional>>(program)
                              : strategy == 1 ? deduplicate<Strategy<OneBlob>>(program)
                                              : deduplicate<Strategy<Disabled>>(program);
    REQUIRE(r.ok());
    CHECK(key_names(r->store) == std::vector<std::string>{"prefill/kv_scale", "w", "decode/kv_scale"});
    CHECK(key_buffers(r->store) == std::vector<std::uint32_t>{0, 1, 2});
    const FunctionMap& decode0 = REQUIRE_FOUND(r->functions.find("decode", 0));
    const FunctionMap& prefill0 = REQUIRE_FOUND(r->functions.find("prefill", 0));
    const std::string& decode_key = REQUIRE_FOUND(decode0.key_of("kv_scale"));
    const std::string& prefill_key = REQUIRE_FOUND(prefill0.key_of("kv_scale"));
    CHECK(decode_key == "decode/kv_scale");
    CHECK(prefill_key == "prefill/kv_scale");
    CHECK(r->store.bytes_of("decode/kv_scale").data() == s2.data());
  }
}

TEST_CASE("a name inconsistent inside one method is qualified by partition too") {
  std::vector<std::uint8_t> x0 = fill(8, 1), x1 = fill(8, 2);
  Program program;
  Method& m = program.add_method("prefill");
  m.add_partition().add("x", span(x0));
  m.add_partition().add("x", span(x1));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(key_names(r->store) == std::vector<std::string>{"prefill/0/x", "prefill/1/x"});
}

TEST_CASE("a name consistent inside a method but not across methods is qualified by method only") {
  std::vector<std::uint8_t> x = fill(8, 1), y = fill(8, 2), y2 = y;
  Program program;
  program.add_method("prefill").add_partition().add("w", span(x));
  Method& d = program.add_method("decode");
  d.add_partition().add("w", span(y));
  d.add_partition().add("w", span(y2));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(key_names(r->store) == std::vector<std::string>{"prefill/w", "decode/w"});
  const FunctionMap& decode1 = REQUIRE_FOUND(r->functions.find("decode", 1));
  const std::string& w_key = REQUIRE_FOUND(decode1.key_of("w"));
  CHECK(w_key == "decode/w");
}

TEST_CASE("a generated key that a real tensor name already took gets a suffix") {
  std::vector<std::uint8_t> m1 = fill(16, 1), m2 = fill(16, 2), literal = fill(12, 3);
  Program program;
  program.add_method("prefill").add_partition().add("mask", span(m1)).add("decode/mask", span(literal));
  program.add_method("decode").add_partition().add("mask", span(m2));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(key_names(r->store) == std::vector<std::string>{"prefill/mask", "decode/mask", "decode/mask~1"});
  const FunctionMap& decode0 = REQUIRE_FOUND(r->functions.find("decode", 0));
  const std::string& mask_key = REQUIRE_FOUND(decode0.key_of("mask"));
  CHECK(mask_key == "decode/mask~1");
  CHECK(r->store.bytes_of("decode/mask~1").data() == m2.data());
  CHECK(r->store.bytes_of("decode/mask").data() == literal.data());
}

TEST_CASE("a name inconsistent inside one method and consistent inside the next is qualified by partition in the first only") {
  // x differs between prefill's partitions, and is one content in both of
  // decode's: prefill's keys name the partition, decode's one key does not.
  std::vector<std::uint8_t> x0 = fill(8, 1), x1 = fill(8, 2), y = fill(8, 3), y2 = y;
  Program program;
  Method& p = program.add_method("prefill");
  p.add_partition().add("x", span(x0));
  p.add_partition().add("x", span(x1));
  Method& d = program.add_method("decode");
  d.add_partition().add("x", span(y));
  d.add_partition().add("x", span(y2));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(key_names(r->store) == std::vector<std::string>{"prefill/0/x", "prefill/1/x", "decode/x"});
  CHECK(key_buffers(r->store) == std::vector<std::uint32_t>{0, 1, 2});
  const FunctionMap& decode1 = REQUIRE_FOUND(r->functions.find("decode", 1));
  const std::string& x_key = REQUIRE_FOUND(decode1.key_of("x"));
  CHECK(x_key == "decode/x");
}

TEST_CASE("a generated key that another generated key took for other bytes gets a suffix") {
  // x differs between prefill's partitions: "prefill/0/x" and
  // "prefill/1/x". The name "0/x" is one content z in prefill and another
  // in decode: prefill's key for it would be "prefill/0/x" too, which x's
  // first content holds, so it is "prefill/0/x~1" (in both partitions).
  std::vector<std::uint8_t> x0 = fill(8, 1), x1 = fill(8, 2), z = fill(12, 3), z2 = z, w = fill(12, 4);
  Program program;
  Method& p = program.add_method("prefill");
  p.add_partition().add("x", span(x0)).add("0/x", span(z));
  p.add_partition().add("x", span(x1)).add("0/x", span(z2));
  program.add_method("decode").add_partition().add("0/x", span(w));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(key_names(r->store) ==
        std::vector<std::string>{"prefill/0/x", "prefill/0/x~1", "prefill/1/x", "decode/0/x"});
  CHECK(key_buffers(r->store) == std::vector<std::uint32_t>{0, 1, 2, 3});
  for (std::uint32_t part = 0; part < 2; ++part) {
    CAPTURE(part);
    const FunctionMap& f = REQUIRE_FOUND(r->functions.find("prefill", part));
    const std::string& z_key = REQUIRE_FOUND(f.key_of("0/x"));
    CHECK(z_key == "prefill/0/x~1");
  }
  CHECK(r->store.bytes_of("prefill/0/x~1").data() == z.data());
  CHECK(r->store.bytes_of("prefill/0/x").data() == x0.data());
}

TEST_CASE("the store made with generated keys finds each key, and a later add is held to them") {
  // Its key index is the one the keys were made with: the generated keys
  // and the consistent names "c" and "decode/mask" in it, the names that
  // are not keys ("mask") not.
  std::vector<std::uint8_t> m1 = fill(16, 1), m2 = fill(16, 2), c = fill(24, 3), c2 = c, literal = fill(12, 4);
  Program program;
  program.add_method("prefill").add_partition().add("mask", span(m1)).add("c", span(c)).add("decode/mask",
                                                                                              span(literal));
  program.add_method("decode").add_partition().add("mask", span(m2)).add("c", span(c2));
  for (unsigned threads : {1u, 2u}) {
    CAPTURE(threads);
    DedupOptions o;
    o.threads = threads;
    auto r = deduplicate<Strategy<Positional>>(program, o);
    REQUIRE(r.ok());
    NamedDataStore store = std::move(r->store);
    const std::vector<std::string> keys{"prefill/mask", "c", "decode/mask", "decode/mask~1"};
    REQUIRE(key_names(store) == keys);
    CHECK(key_buffers(store) == std::vector<std::uint32_t>{0, 1, 2, 3});
    for (std::size_t i = 0; i < keys.size(); ++i) {
      CAPTURE(keys[i]);
      CHECK(store.find(keys[i]) == &store.keys()[i]);
    }
    CHECK(store.find("mask") == nullptr);
    CHECK(store.find("prefill/c") == nullptr);
    CHECK(store.find("decode/mask~2") == nullptr);
    // Added again with its own bytes: nothing changes.
    REQUIRE(store.add_named_data("decode/mask~1", span(m2)).ok());
    REQUIRE(store.add_named_data("c", span(c)).ok());
    CHECK(key_names(store) == keys);
    // With other bytes: refused, naming the key, and the store unchanged.
    const Expected<void> conflict = store.add_named_data("decode/mask~1", span(m1));
    CHECK(conflict.error() == Error::KeyConflict);
    CHECK(std::string(conflict.message()) ==
          "key 'decode/mask~1' already holds 16 bytes that differ from the 16 bytes added now (first difference "
          "at byte 0)");
    CHECK(key_names(store) == keys);
    CHECK(store.buffer_count() == 4);
    // A new key: appended after them, its bytes those of prefill's mask.
    REQUIRE(store.add_named_data("decode/mask~2", span(m1)).ok());
    CHECK(store.find("decode/mask~2") == &store.keys()[4]);
    CHECK(store.keys()[4].buffer_index == 0);
    CHECK(store.buffer_count() == 4);
  }
}

TEST_CASE("a generated key that a real tensor name took for the same bytes and layout is shared") {
  // The literal "decode/mask" holds decode's own mask (a copy elsewhere in
  // memory): one content, one key, no "~1"; with another layout it is
  // another content, and decode's mask gets the suffix.
  std::vector<std::uint8_t> m1 = fill(16, 1), m2 = fill(16, 2), m2_copy = m2;
  for (bool same_layout : {true, false}) {
    CAPTURE(same_layout);
    Program program;
    const std::optional<Layout> flat = Layout::contiguous(ScalarType::Byte, {16});
    const std::optional<Layout> square = Layout::contiguous(ScalarType::Byte, {4, 4});
    Partition& prefill = program.add_method("prefill").add_partition();
    prefill.add("mask", span(m1), 1, flat);
    prefill.add("decode/mask", span(m2_copy), 1, same_layout ? flat : square);
    program.add_method("decode").add_partition().add("mask", span(m2), 1, flat);
    auto r = deduplicate<Strategy<OneBlob>>(program);
    REQUIRE_MESSAGE(r.ok(), r.message());
    const FunctionMap& p = REQUIRE_FOUND(r->functions.find("prefill", 0));
    const FunctionMap& d = REQUIRE_FOUND(r->functions.find("decode", 0));
    const std::string& literal_key = REQUIRE_FOUND(p.key_of("decode/mask"));
    CHECK(literal_key == "decode/mask");
    CHECK(r->store.buffers().size() == 2);
    if (same_layout) {
      CHECK(key_names(r->store) == std::vector<std::string>{"prefill/mask", "decode/mask"});
      const std::string& mask_key = REQUIRE_FOUND(d.key_of("mask"));
      CHECK(mask_key == "decode/mask");
    } else {
      CHECK(key_names(r->store) == std::vector<std::string>{"prefill/mask", "decode/mask", "decode/mask~1"});
      const std::string& mask_key = REQUIRE_FOUND(d.key_of("mask"));
      CHECK(mask_key == "decode/mask~1");
      CHECK(r->store.bytes_of("decode/mask~1").size() == 16);
    }
  }
}

TEST_CASE("a generated key equal to a tensor name that is itself not consistent takes no suffix (that name is no key)") {
  std::vector<std::uint8_t> a = fill(16, 1), b = fill(12, 2), c = fill(16, 3), d = fill(12, 4);
  Program program;
  program.add_method("decode").add_partition().add("mask", span(a)).add("decode/mask", span(b));
  program.add_method("prefill").add_partition().add("mask", span(c)).add("decode/mask", span(d));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(key_names(r->store) ==
        std::vector<std::string>{"decode/mask", "decode/decode/mask", "prefill/mask", "prefill/decode/mask"});
  const FunctionMap& decode0 = REQUIRE_FOUND(r->functions.find("decode", 0));
  const std::string& mask_key = REQUIRE_FOUND(decode0.key_of("mask"));
  CHECK(mask_key == "decode/mask");
}

TEST_CASE("a tied embedding is one buffer under two keys with their own layouts") {
  std::vector<std::uint8_t> emb = fill(48, 7), emb_copy = emb;
  Program program;
  Partition& p = program.add_method("forward").add_partition();
  p.add("tok_embeddings.weight", span(emb), 16, Layout::contiguous(ScalarType::Half, {4, 6}));
  p.add("output.weight", span(emb_copy), 64, Layout::contiguous(ScalarType::Half, {4, 6}));
  auto r = deduplicate<Strategy<OneBlob>>(program);
  REQUIRE(r.ok());
  CHECK(key_names(r->store) == std::vector<std::string>{"tok_embeddings.weight", "output.weight"});
  CHECK(key_buffers(r->store) == std::vector<std::uint32_t>{0, 0});
  CHECK(r->store.keys()[0].alignment == 16);
  CHECK(r->store.keys()[1].alignment == 64);
  CHECK(r->store.buffers()[0].alignment == 64);
  CHECK(r->report.bytes_saved == 48);
  CHECK(r->report.alias_groups == 1);
  CHECK(r->report.largest_alias_groups[0].keys == 2);
}

TEST_CASE("a user policy (examples/pair_policy.hpp) groups methods in pairs") {
  std::vector<std::uint8_t> w = fill(256, 1);
  std::vector<std::vector<std::uint8_t>> copies(3, w);
  Program program;
  const char* names[] = {"prefill", "decode", "verify"};
  for (std::size_t i = 0; i < 3; ++i) program.add_method(names[i]).add_partition().add("w", span(copies[i]));
  program.methods[0].add_partition().add("w_extra", span(copies[0]));
  auto r = deduplicate<Strategy<PairedMethods>>(program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(r->report.strategy == "PAIRED_METHODS");
  CHECK(function_ids(r->functions) ==
        std::vector<std::string>{"prefill#0 pair_0:prefill__0", "prefill#1 pair_0:prefill__1",
                                 "decode#0 pair_0:decode__0", "verify#0 pair_1:verify__0"});
  CHECK(r->report.blobs == 2);
  CHECK(r->report.bytes_stored == 256);
  CHECK(r->report.bytes_shared_across_blobs == 256);
}

namespace {
// A policy that gives two partitions the same function name in one blob.
struct CollidingNames {
  static constexpr const char* name = "COLLIDING";
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const Program&, std::size_t, std::uint32_t) { return "f"; }
};
}  // namespace

namespace {
// A policy whose names no lookup could find: empty, or with a NUL byte.
// It counts its calls: the first name refused ends them.
int unusable_blob_key_calls = 0, unusable_function_name_calls = 0;
template <int Which>
struct UnusableNames {
  static constexpr const char* name = "UNUSABLE";
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, std::size_t m, std::uint32_t) {
    ++unusable_blob_key_calls;
    return Which == 0 && m == 1 ? "" : Which == 1 ? std::string("bl\0b", 4) : "blob";
  }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t) {
    ++unusable_function_name_calls;
    return Which == 2 ? std::string("f\0", 2) : Which == 3 ? std::string() : p.methods[m].name;
  }
};
// Runs deduplicate() with UnusableNames<Which>, its call counts from 0.
template <int Which>
auto run_unusable(const Program& program) {
  unusable_blob_key_calls = unusable_function_name_calls = 0;
  return deduplicate<Strategy<UnusableNames<Which>>>(program);
}
}  // namespace

TEST_CASE("a policy's empty blob key or function name, or one with a NUL byte, is InvalidName") {
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  program.add_method("a").add_partition().add("w", span(w));
  program.add_method("b").add_partition().add("w", span(w));
  // The calls each refusal leaves made: a refused blob key is not
  // followed by its function name (it was, before the name was checked).
  auto r0 = run_unusable<0>(program);
  CHECK(r0.error() == Error::InvalidName);
  CHECK(r0.message() == "policy UNUSABLE: method 'b' partition 0: blob key is empty");
  CHECK(unusable_blob_key_calls == 2);
  CHECK(unusable_function_name_calls == 1);
  auto r1 = run_unusable<1>(program);
  CHECK(r1.error() == Error::InvalidName);
  CHECK(r1.message() == "policy UNUSABLE: method 'a' partition 0: blob key 'bl\\x00b' contains a NUL byte at "
                        "offset 2");
  CHECK(unusable_blob_key_calls == 1);
  CHECK(unusable_function_name_calls == 0);
  auto r2 = run_unusable<2>(program);
  CHECK(r2.error() == Error::InvalidName);
  CHECK(r2.message() == "policy UNUSABLE: method 'a' partition 0: function name 'f\\x00' contains a NUL byte "
                        "at offset 1");
  CHECK(unusable_blob_key_calls == 1);
  CHECK(unusable_function_name_calls == 1);
  auto r3 = run_unusable<3>(program);
  CHECK(r3.error() == Error::InvalidName);
  CHECK(r3.message() == "policy UNUSABLE: method 'a' partition 0: function name is empty");
  CHECK(unusable_blob_key_calls == 1);
  CHECK(unusable_function_name_calls == 1);
}

namespace {
template <const char* const* Name>
struct NamedBy {
  static constexpr const char* name = *Name;
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t) { return p.methods[m].name; }
};
constexpr const char* kNullName = nullptr;
constexpr const char* kEmptyName = "";
struct NulInName {
  static constexpr std::string_view name{"AB\0CD", 5};
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t) { return p.methods[m].name; }
};
}  // namespace

TEST_CASE("a policy whose name is null, empty or holds a NUL is InvalidArgument, not a crash or a blank in the report") {
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  program.add_method("a").add_partition().add("w", span(w));
  auto r = deduplicate<Strategy<NamedBy<&kNullName>>>(program);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "the strategy policy's name is null; it names the policy in reports and messages");
  r = deduplicate<Strategy<NamedBy<&kEmptyName>>>(program);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "the strategy policy's name is empty; it names the policy in reports and messages");
  // A NUL byte in it (a std::string_view name may hold one): messages would print it raw.
  r = deduplicate<Strategy<NulInName>>(program);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() ==
        "the strategy policy's name holds a NUL byte at offset 2; it names the policy in reports and messages");
}

namespace {
// A policy that takes programs of one method only, in its own words.
struct OneMethodOnly {
  static constexpr const char* name = "ONE_METHOD";
  static Expected<void> validate(const Program& p) {
    if (p.methods.size() == 1) return {};
    return Expected<void>(Error::InvalidArgument, "I take one method, not " + std::to_string(p.methods.size()));
  }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t) { return p.methods[m].name; }
};
}  // namespace

TEST_CASE("a policy's refusal keeps its error code and words, after the policy's name") {
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  program.add_method("a").add_partition().add("w", span(w));
  REQUIRE(deduplicate<Strategy<OneMethodOnly>>(program).ok());
  program.add_method("b").add_partition().add("w", span(w));
  auto r = deduplicate<Strategy<OneMethodOnly>>(program);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "policy ONE_METHOD refused the program: I take one method, not 2");
}

namespace {
// A policy that refuses every program and counts what it is asked.
int refusing_validate_calls = 0, refusing_blob_key_calls = 0, refusing_function_name_calls = 0;
struct RefusesAll {
  static constexpr const char* name = "REFUSES_ALL";
  static Expected<void> validate(const Program&) {
    ++refusing_validate_calls;
    return Expected<void>(Error::PartitionCountMismatch, "never");
  }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) {
    ++refusing_blob_key_calls;
    return "all";
  }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t) {
    ++refusing_function_name_calls;
    return p.methods[m].name;
  }
};
}  // namespace

TEST_CASE("a policy that refuses the program is asked once, and never for a blob key or function name") {
  // README: validate is called once, then, only if it accepts the program,
  // blob_key and function_name (a policy may rely on what it validated).
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  program.add_method("a").add_partition().add("w", span(w));
  program.add_method("b").add_partition().add("w", span(w));
  auto r = deduplicate<Strategy<RefusesAll>>(program);
  CHECK(r.error() == Error::PartitionCountMismatch);
  CHECK(r.message() == "policy REFUSES_ALL refused the program: never");
  CHECK(refusing_validate_calls == 1);
  CHECK(refusing_blob_key_calls == 0);
  CHECK(refusing_function_name_calls == 0);
}

namespace {
// A policy that writes down each call, and whether it ran on the thread
// that called deduplicate() ("!" if not).
std::string recorded_calls;
std::thread::id recording_caller;
struct RecordsCalls {
  static constexpr const char* name = "RECORDS_CALLS";
  static void note(std::string call) {
    recorded_calls += call + (std::this_thread::get_id() == recording_caller ? " " : "! ");
  }
  static Expected<void> validate(const Program&) {
    note("validate");
    return {};
  }
  static std::string blob_key(const Program& p, std::size_t m, std::uint32_t i) {
    note("blob " + p.methods[m].name + std::to_string(i));
    return "all";
  }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t i) {
    note("function " + p.methods[m].name + std::to_string(i));
    return p.methods[m].name + "__" + std::to_string(i);
  }
};
}  // namespace

TEST_CASE("a policy is asked once per (method, partition), in program order, on the calling thread") {
  // README: a policy need not be thread-safe, nor keep more than one
  // name at a time (blob key, then function name, partition by partition).
  // A method without partitions is asked nothing.
  TwoMethods m;
  m.program.add_method("cpu");
  m.program.add_method("tail").add_partition().add("t", span(m.M2));
  for (unsigned threads : {1u, 2u, 8u}) {
    CAPTURE(threads);
    DedupOptions o;
    o.threads = threads;
    recorded_calls.clear();
    recording_caller = std::this_thread::get_id();
    auto r = deduplicate<Strategy<RecordsCalls>>(m.program, o);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(recorded_calls ==
          "validate blob prefill0 function prefill0 blob prefill1 function prefill1 blob decode0 function decode0 "
          "blob decode1 function decode1 blob tail0 function tail0 ");
  }
}

TEST_CASE("a policy that reuses a function name inside a blob is an error naming both") {
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  program.add_method("a").add_partition().add("w", span(w));
  program.add_method("b").add_partition().add("w", span(w));
  auto r = deduplicate<Strategy<CollidingNames>>(program);
  CHECK(r.error() == Error::InvalidName);
  CHECK(r.message() == "policy COLLIDING gave function name 'f' in blob 'all' to two partitions: method 'a' "
                       "partition 0 and method 'b' partition 0");
}

namespace {
// One blob, and function names that collide only at the last partition, with
// the first: a/0 "f", a/1 "g", b/0 "h", b/1 "f" again.
struct LateCollision {
  static constexpr const char* name = "LATE";
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const Program&, std::size_t m, std::uint32_t p) {
    static const char* const names[2][2] = {{"f", "g"}, {"h", "f"}};
    return names[m][p];
  }
};
}  // namespace

TEST_CASE("a reused function name names the partition that had it first, not the one before") {
  // The earlier holder is a/0: neither the partition just before (b/0) nor
  // one with the same partition index as b/1.
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  for (const char* m : {"a", "b"}) {
    Method& method = program.add_method(m);
    method.add_partition().add("w", span(w));
    method.add_partition().add("v", span(w));
  }
  auto r = deduplicate<Strategy<LateCollision>>(program);
  CHECK(r.error() == Error::InvalidName);
  CHECK(r.message() == "policy LATE gave function name 'f' in blob 'all' to two partitions: method 'a' "
                       "partition 0 and method 'b' partition 1");
}

namespace {
// A policy whose names are no store keys: a blob key that is a path going
// up and not UTF-8, a function name not UTF-8 either.
struct ByteNames {
  static constexpr const char* name = "BYTE_NAMES";
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) { return "../b\xff"; }
  static std::string function_name(const Program& p, std::size_t m, std::uint32_t) {
    return p.methods[m].name + "\xfe\xc0";
  }
};
}  // namespace

TEST_CASE("a policy's blob key and function name are kept as given: '/', '..' and bytes that are not UTF-8") {
  // README: only a null, empty or NUL-holding name (or a repeat) is
  // refused; blob keys and function names are not store keys, so need not
  // be UTF-8, and a reader finds them byte for byte.
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  program.add_method("a").add_partition().add("w", span(w));
  program.add_method("b").add_partition().add("w", span(w));
  auto r = deduplicate<Strategy<ByteNames>>(program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(function_ids(r->functions) == std::vector<std::string>{"a#0 ../b\xff:a\xfe\xc0", "b#0 ../b\xff:b\xfe\xc0"});
  auto file = serialize_ptd(r->store, r->functions);
  REQUIRE_MESSAGE(file.ok(), file.message());
  BufferSource source(file->data(), file->size());
  auto map = NamedDataMap::open(source);
  REQUIRE(map.ok());
  auto fn = map->find_function("../b\xff", "b\xfe\xc0");
  REQUIRE(fn.ok());
  CHECK(std::string_view(fn->method()) == "b");
  CHECK(fn->partition_index() == 0);
}

namespace {
// Policies returning a null const char* for a blob key or a function name.
template <bool NullBlob>
struct NullPointers {
  static constexpr const char* name = "NULLS";
  static Expected<void> validate(const Program&) { return {}; }
  static const char* blob_key(const Program&, std::size_t, std::uint32_t p) {
    return NullBlob && p == 1 ? nullptr : "all";
  }
  static const char* function_name(const Program&, std::size_t m, std::uint32_t p) {
    static const char* const names[] = {"f0", "f1"};
    return !NullBlob && m == 1 ? nullptr : names[p];
  }
};
// The same as std::nullptr_t, which converts to a std::string_view in C++17
// (so the policy checks accept it): found by a review helper as a crash.
template <bool NullBlob>
struct NullptrTypes {
  using Blob = std::conditional_t<NullBlob, std::nullptr_t, const char*>;
  using Function = std::conditional_t<NullBlob, const char*, std::nullptr_t>;
  static constexpr const char* name = "NULLPTR_T";
  static Expected<void> validate(const Program&) { return {}; }
  static Blob blob_key(const Program&, std::size_t, std::uint32_t) {
    if constexpr (NullBlob) return nullptr;
    else return "all";
  }
  static Function function_name(const Program&, std::size_t, std::uint32_t) {
    if constexpr (NullBlob) return "f";
    else return nullptr;
  }
};
}  // namespace

TEST_CASE("a policy's null blob key or function name is InvalidName naming the partition, not a crash") {
  std::vector<std::uint8_t> w = fill(8, 1);
  Program program;
  Method& a = program.add_method("a");
  a.add_partition().add("w", span(w));
  a.add_partition().add("v", span(w));
  program.add_method("b").add_partition().add("w", span(w));
  auto blob = deduplicate<Strategy<NullPointers<true>>>(program);
  CHECK(blob.error() == Error::InvalidName);
  CHECK(blob.message() == "policy NULLS: method 'a' partition 1: blob key is a null pointer");
  auto function = deduplicate<Strategy<NullPointers<false>>>(program);
  CHECK(function.error() == Error::InvalidName);
  CHECK(function.message() == "policy NULLS: method 'b' partition 0: function name is a null pointer");
  auto blob_t = deduplicate<Strategy<NullptrTypes<true>>>(program);
  CHECK(blob_t.error() == Error::InvalidName);
  CHECK(blob_t.message() == "policy NULLPTR_T: method 'a' partition 0: blob key is a null pointer");
  auto function_t = deduplicate<Strategy<NullptrTypes<false>>>(program);
  CHECK(function_t.error() == Error::InvalidName);
  CHECK(function_t.message() == "policy NULLPTR_T: method 'a' partition 0: function name is a null pointer");
}

TEST_CASE("a program the policy refuses: its name errors come first, and no byte is read") {
  // Tensors on pages that fault on any access: had deduplicate() compared
  // anything (the name check queues each tensor with the first of its
  // name), this test would crash.
  const std::size_t page = 4096;
  const wdedup_test::NoAccess mem(2 * page);
  const ByteSpan w0(mem.p, 4096), w1(mem.p + page, 4096);
  Program program;
  program.add_method("prefill").add_partition().add("w", w0);
  Method& decode = program.add_method("decode");
  decode.add_partition().add("w", w1);
  decode.add_partition().add("x", w1);
  auto mismatch = deduplicate<Strategy<Positional>>(program);
  CHECK(mismatch.error() == Error::PartitionCountMismatch);
  CHECK(mismatch.message() ==
        "policy POSITIONAL refused the program: every method must have the same number of partitions: method 'decode' "
        "has 2, but the first method 'prefill' has 1; Strategy<OneBlob> (or Strategy<Disabled>) accepts unequal "
        "partition counts");
  // A name used twice in one partition is reported before the mismatch.
  decode.partitions[1].add("x", w0);
  auto named = deduplicate<Strategy<Positional>>(program);
  CHECK(named.error() == Error::InvalidName);
  CHECK(named.message() == "method 'decode' partition 1: tensor name 'x' is used twice (tensors #0 and #1)");
}

TEST_CASE("a policy's function-name error comes after the keys' errors, with any thread count") {
  // Function maps are made before the checks (a thread fills their tables
  // while names are checked), but their errors are reported where they
  // always were: after name, alignment and key errors.
  std::vector<std::uint8_t> a = fill(8, 3);
  const std::int64_t max = std::int64_t{1} << 32;
  for (unsigned threads : {1u, 2u, 8u}) {
    CAPTURE(threads);
    DedupOptions o;
    o.threads = threads;
    Program program;
    program.add_method("a").add_partition().add("x", span(a), max);
    program.add_method("b").add_partition().add("x", span(a), 3);
    auto keys_first = deduplicate<Strategy<CollidingNames>>(program, o);
    CHECK(keys_first.error() == Error::InvalidAlignment);
    CHECK(keys_first.message() ==
          "method 'b' partition 0 tensor 'x': lcm of alignments 4294967296 and 3 for key 'x' exceeds 4294967296");
    program.methods[1].partitions[0].tensors[0].alignment = 2;
    auto policy_next = deduplicate<Strategy<CollidingNames>>(program, o);
    CHECK(policy_next.error() == Error::InvalidName);
    CHECK(policy_next.message() ==
          "policy COLLIDING gave function name 'f' in blob 'all' to two partitions: method 'a' partition 0 and "
          "method 'b' partition 0");
  }
}

namespace {
/// A C-style policy: both names formatted into one buffer of its own, each
/// valid until its next call (what the README asks of a const char*).
struct OneBuffer {
  static constexpr const char* name = "ONE_BUFFER";
  static char buf[64];
  static Expected<void> validate(const Program&) { return {}; }
  static const char* blob_key(const Program& p, std::size_t m, std::uint32_t i) {
    std::snprintf(buf, sizeof buf, "blob_%s_%u", p.methods[m].name.c_str(), static_cast<unsigned>(i));
    return buf;
  }
  static const char* function_name(const Program& p, std::size_t m, std::uint32_t i) {
    std::snprintf(buf, sizeof buf, "fn_%s_%u", p.methods[m].name.c_str(), static_cast<unsigned>(i));
    return buf;
  }
};
char OneBuffer::buf[64];
}  // namespace

TEST_CASE("a policy that formats both names into one buffer: each name is copied before the next call") {
  TwoMethods m;
  auto r = deduplicate<Strategy<OneBuffer>>(m.program);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(function_ids(r->functions) ==
        std::vector<std::string>{"prefill#0 blob_prefill_0:fn_prefill_0", "prefill#1 blob_prefill_1:fn_prefill_1",
                                 "decode#0 blob_decode_0:fn_decode_0", "decode#1 blob_decode_1:fn_decode_1"});
}

namespace {
/// A policy taking the method index as M and the partition index as P, in
/// both blob_key and function_name.
template <class M, class P>
struct IndexesAs {
  static constexpr const char* name = "INDEXES_AS";
  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program&, M, P) { return "all"; }
  static std::string function_name(const Program&, M, P) { return "f"; }
};
}  // namespace

TEST_CASE("the policy check takes each index of blob_key and function_name as deduplicate() passes it: a const lvalue") {
  // README: take them by value or by const reference; a non-const or an
  // rvalue reference is refused by the static_assert, not deep inside
  // deduplicate(). (tests/compile_fail has two of these end to end:
  // rvalue_index, blob_key's method; mutable_index, function_name's
  // partition.)
  using detail::policy_blob_key_ok;
  using detail::policy_function_name_ok;
  CHECK(policy_blob_key_ok<IndexesAs<std::size_t, std::uint32_t>>::value);
  CHECK(policy_function_name_ok<IndexesAs<std::size_t, std::uint32_t>>::value);
  CHECK(policy_blob_key_ok<IndexesAs<const std::size_t&, const std::uint32_t&>>::value);
  CHECK(policy_function_name_ok<IndexesAs<const std::size_t&, const std::uint32_t&>>::value);
  // The method index by non-const or rvalue reference.
  CHECK(!policy_blob_key_ok<IndexesAs<std::size_t&, std::uint32_t>>::value);
  CHECK(!policy_function_name_ok<IndexesAs<std::size_t&, std::uint32_t>>::value);
  CHECK(!policy_blob_key_ok<IndexesAs<std::size_t&&, std::uint32_t>>::value);
  CHECK(!policy_function_name_ok<IndexesAs<std::size_t&&, std::uint32_t>>::value);
  // The partition index by non-const or rvalue reference.
  CHECK(!policy_blob_key_ok<IndexesAs<std::size_t, std::uint32_t&>>::value);
  CHECK(!policy_function_name_ok<IndexesAs<std::size_t, std::uint32_t&>>::value);
  CHECK(!policy_blob_key_ok<IndexesAs<std::size_t, std::uint32_t&&>>::value);
  CHECK(!policy_function_name_ok<IndexesAs<std::size_t, std::uint32_t&&>>::value);
  CHECK(detail::is_strategy_policy<IndexesAs<const std::size_t&, std::uint32_t>>);
  CHECK(!detail::is_strategy_policy<IndexesAs<std::size_t, std::uint32_t&>>);
}
