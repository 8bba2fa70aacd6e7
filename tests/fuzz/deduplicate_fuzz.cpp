// tests/fuzz/deduplicate_fuzz.cpp — libFuzzer target for deduplicate()
// itself, against a brute-force oracle. Each input decodes to a Program
// (deduplicate_input.hpp: sizes, contents, names and layouts chosen to reach
// the identity engine's hard cases) and one strategy; deduplicate() runs three
// times: one thread with XXH3 (checked against the oracle), 2 or 3 threads
// with XXH3, and 1-3 threads with AlwaysCollideHash (every pair the engine
// meets is then confirmed byte for byte). The oracle groups tensors by their
// bytes, compared as strings, and follows the README's rules literally:
//   - a program the checks refuse (an empty or repeated name, a NUL in a
//     name, an alignment out of range, a layout that does not describe the
//     bytes, unequal partition counts under Positional, an lcm of alignments
//     past 2^32) is refused by every run with the code and the message that
//     names the first fault in program order, and nothing else is produced;
//   - otherwise the store holds one buffer per distinct content (the empty
//     one included), in order of first use, each at its first tensor's
//     memory with the lcm of every alignment asked of its bytes: no false
//     merge, no missed merge, no bytes twice;
//   - every tensor's key (its name where the name is consistent everywhere,
//     else "<method>/<name>" or "<method>/<partition>/<name>", then "~1",
//     "~2", ... past keys taken by other contents or layouts) is in its
//     function's table and names exactly its bytes and layout, with the lcm
//     of its tensors' alignments; keys in order of first use;
//   - the functions are named and grouped into blobs as the strategy says;
//   - the report's counts (tensors, keys, buffers, bytes in, stored, saved,
//     shared across blobs, per method and per blob, alias groups and the
//     largest five, the identity pass's empty and same-pointer skips) are
//     the oracle's;
//   - the three runs give the same result (with the same hash, the identity
//     pass's counts too);
//   - written with serialize_ptd and read back with NamedDataMap, every
//     function finds every tensor's key, bytes and layout (where no tensor
//     asks for more than 4 KiB of alignment: the padding would be huge).
// A broken property aborts with a message naming it and both values;
// DEDUP_FUZZ_PRINT=1 prints the program an input decodes to.
#include "support/instances.hpp"  // first: see there
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deduplicate_input.hpp"
#include "support/dedup_dump.hpp"
#include "wdedup/wdedup.hpp"

namespace {

using namespace wdedup;
using dedup_fuzz::StrategyPick;
using wdedup_test::dump;

[[noreturn]] void fail(const std::string& what, const std::string& got, const std::string& want) {
  std::fprintf(stderr, "deduplicate_fuzz: %s\n  got:  %s\n  want: %s\n", what.c_str(), got.c_str(), want.c_str());
  std::abort();
}
void expect_eq(const std::string& what, const std::string& got, const std::string& want) {
  if (got != want) fail(what, got, want);
}
void expect_eq(const std::string& what, std::uint64_t got, std::uint64_t want) {
  if (got != want) fail(what, std::to_string(got), std::to_string(want));
}
void expect(const std::string& what, bool ok) {
  if (!ok) fail(what, "false", "true");
}
// The same for checks made per tensor, key or row, where `of` names it:
// no string is built unless the check fails (building them took as long
// as the checks).
std::string named(const char* what, std::string_view of) { return std::string(what) + " (" + std::string(of) + ")"; }
void expect_eq(const char* what, std::string_view of, std::string_view got, std::string_view want) {
  if (got != want) fail(named(what, of), std::string(got), std::string(want));
}
void expect_eq(const char* what, std::string_view of, std::uint64_t got, std::uint64_t want) {
  if (got != want) fail(named(what, of), std::to_string(got), std::to_string(want));
}
void expect(const char* what, std::string_view of, bool ok) {
  if (!ok) fail(named(what, of), "false", "true");
}
void expect_layout(const char* what, std::string_view of, const std::optional<Layout>& got,
                   const std::optional<Layout>& want) {
  if (got != want) fail(named(what, of), detail::describe_layout(got), detail::describe_layout(want));
}

std::string q(const std::string& name) { return "'" + name + "'"; }
/// "1 byte", "8 bytes": the library's messages count in words.
std::string bytes_text(std::uint64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

/// lcm(a, b), or nullopt past kMaxAlignment.
std::optional<std::uint64_t> lcm(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a, y = b;
  while (y != 0) x = std::exchange(y, x % y);
  // (Both at most kMaxAlignment, 2^32: a / x * b overflows 64 bits only
  // where it is past it anyway.)
  if (a / x > kMaxAlignment / b) return std::nullopt;
  return a / x * b;
}

struct Site {
  std::uint32_t method, partition, index;
  const Tensor* tensor;
};

/// A layout's byte size, or nullopt where it breaks a layout's rules (a
/// dim_order that is not a permutation of 0..rank-1, a negative size),
/// worked out here: Layout::nbytes() is the library's check, the one under
/// test (with it, a library that refused every channels-last layout as
/// inconsistent passed every input). The decoder makes Byte and Float
/// layouts of rank 1 to 4 with at most one size past 1, so the product
/// cannot overflow.
std::optional<std::uint64_t> layout_bytes(const Layout& l) {
  std::uint64_t n = 0;
  switch (l.scalar_type) {
    case ScalarType::Byte: n = 1; break;
    case ScalarType::Float: n = 4; break;
    default: fail("layout: a scalar type the decoder makes", detail::describe_layout(l), "Byte or Float");
  }
  std::vector<std::uint8_t> order = l.dim_order;
  std::sort(order.begin(), order.end());
  if (order.size() != l.sizes.size()) return std::nullopt;
  for (std::size_t i = 0; i < order.size(); ++i)
    if (static_cast<std::size_t>(order[i]) != i) return std::nullopt;
  for (const std::int32_t s : l.sizes) {
    if (s < 0) return std::nullopt;
    n *= static_cast<std::uint64_t>(s);
  }
  return n;
}

/// A refusal the oracle expects: its code, and its message (whole, or a
/// start and a part it must hold where the rest is the library's wording
/// of a layout or an escaped NUL).
struct Refusal {
  Error code;
  std::string message;
  std::string holds;  ///< empty: `message` is the whole message
};

/// The first fault deduplicate()'s checks find, in program order, before
/// any byte is read; then the policy's (Positional's partition counts).
std::optional<Refusal> check_refusal(const Program& program, StrategyPick strategy) {
  for (std::uint32_t m = 0; m < program.methods.size(); ++m) {
    const Method& method = program.methods[m];
    if (method.name.empty()) return Refusal{Error::InvalidName, "method #" + std::to_string(m) + " has an empty name", ""};
    for (std::uint32_t f = 0; f < m; ++f)
      if (program.methods[f].name == method.name)
        return Refusal{Error::InvalidName,
                       "method name " + q(method.name) + " is used twice (methods #" + std::to_string(f) + " and #" +
                           std::to_string(m) + ")",
                       ""};
    for (std::uint32_t p = 0; p < method.partitions.size(); ++p) {
      const std::string where = "method " + q(method.name) + " partition " + std::to_string(p) + ": ";
      const std::vector<Tensor>& ts = method.partitions[p].tensors;
      std::map<std::string_view, std::uint32_t> first;
      for (std::uint32_t t = 0; t < ts.size(); ++t) {
        const Tensor& x = ts[t];
        if (x.name.empty()) return Refusal{Error::InvalidName, where + "tensor #" + std::to_string(t) + " has an empty name", ""};
        if (const auto [f, fresh] = first.emplace(x.name, t); !fresh)
          return Refusal{Error::InvalidName,
                         where + "tensor name " + detail::quote_name(x.name) + " is used twice (tensors #" +
                             std::to_string(f->second) + " and #" + std::to_string(t) + ")",
                         ""};
        if (const std::size_t nul = x.name.find('\0'); nul != std::string::npos)
          return Refusal{Error::InvalidName, where + "tensor ", " contains a NUL byte at offset " + std::to_string(nul)};
        const std::string tensor = where + "tensor " + q(x.name) + ": ";
        if (x.alignment <= 0)
          return Refusal{Error::InvalidAlignment,
                         tensor + "alignment must be a positive integer, got " + std::to_string(x.alignment), ""};
        if (static_cast<std::uint64_t>(x.alignment) > kMaxAlignment)
          return Refusal{Error::InvalidAlignment,
                         tensor + "alignment " + std::to_string(x.alignment) + " exceeds the maximum of " +
                             std::to_string(kMaxAlignment),
                         ""};
        const std::optional<std::uint64_t> nbytes = x.layout ? layout_bytes(*x.layout) : std::nullopt;
        if (x.layout && !nbytes)
          return Refusal{Error::LayoutMismatch, tensor + "layout is inconsistent (", "): "};
        if (x.layout && *nbytes != x.bytes.size())
          return Refusal{Error::LayoutMismatch, tensor + "layout ",
                         " describes " + bytes_text(*nbytes) + " but the data has " + bytes_text(x.bytes.size())};
      }
    }
  }
  if (strategy != dedup_fuzz::kPositional) return std::nullopt;
  const Method* first = nullptr;
  for (const Method& m : program.methods) {
    if (m.partitions.empty()) continue;
    if (first == nullptr) first = &m;
    if (m.partitions.size() != first->partitions.size())
      return Refusal{Error::PartitionCountMismatch,
                     "policy POSITIONAL refused the program: every method must have the same number of partitions: "
                     "method " + q(m.name) + " has " + std::to_string(m.partitions.size()) + ", but the first method " +
                         (first == &program.methods.front() ? "" : "with partitions ") + q(first->name) + " has " +
                         std::to_string(first->partitions.size()) +
                         "; Strategy<OneBlob> (or Strategy<Disabled>) accepts unequal partition counts",
                     ""};
  }
  return std::nullopt;
}

/// What deduplicate() must produce for a program its checks accept, worked
/// out the slow, plain way.
struct Oracle {
  std::vector<Site> sites;                // program order
  std::vector<std::uint32_t> content;     // site -> content id (order of first use)
  std::vector<std::uint32_t> first_site;  // content -> its first site
  std::vector<std::uint32_t> key;         // site -> key id (order of first use)
  std::vector<std::string> keys;
  std::vector<std::uint32_t> key_site;       // key -> its first site
  std::vector<std::uint64_t> key_alignment;  // lcm over the key's sites
  std::vector<std::uint64_t> content_alignment;
  std::optional<Refusal> lcm_refusal;

  const Program& program;
  explicit Oracle(const Program& p) : program(p) {
    for (std::uint32_t m = 0; m < p.methods.size(); ++m)
      for (std::uint32_t pi = 0; pi < p.methods[m].partitions.size(); ++pi)
        for (std::uint32_t t = 0; t < p.methods[m].partitions[pi].tensors.size(); ++t)
          sites.push_back(Site{m, pi, t, &p.methods[m].partitions[pi].tensors[t]});
    // Keyed by the bytes themselves (a view: copies of up to 4.5 MiB per
    // input were a fifth of a run's time).
    std::map<std::string_view, std::uint32_t> by_bytes;
    for (std::uint32_t i = 0; i < sites.size(); ++i) {
      const ByteSpan b = sites[i].tensor->bytes;
      const auto [it, fresh] = by_bytes.emplace(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()),
                                                static_cast<std::uint32_t>(first_site.size()));
      if (fresh) first_site.push_back(i);
      content.push_back(it->second);
    }
    assign_keys();
    alignments();
  }

  /// Same bytes and the same layout (or none on both).
  bool same_identity(std::uint32_t a, std::uint32_t b) const {
    return content[a] == content[b] && sites[a].tensor->layout == sites[b].tensor->layout;
  }

  void assign_keys() {
    // A name is consistent where all its tensors are one identity: in the
    // whole program, or within one method.
    std::map<std::string, std::uint32_t> name_first;
    std::map<std::string, bool> consistent;
    std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> method_first;
    std::map<std::pair<std::uint32_t, std::string>, bool> method_consistent;
    for (std::uint32_t i = 0; i < sites.size(); ++i) {
      const std::string& n = sites[i].tensor->name;
      const auto [g, gfresh] = name_first.emplace(n, i);
      consistent[n] = (gfresh || consistent[n]) && same_identity(g->second, i);
      const auto [mf, mfresh] = method_first.emplace(std::make_pair(sites[i].method, n), i);
      bool& mc = method_consistent[{sites[i].method, n}];
      mc = (mfresh || mc) && same_identity(mf->second, i);
    }
    std::map<std::string, std::uint32_t> generated;  // key -> a site of its identity
    std::map<std::string, std::uint32_t> key_id;
    for (std::uint32_t i = 0; i < sites.size(); ++i) {
      const Site& s = sites[i];
      const std::string& n = s.tensor->name;
      std::string k = n;
      if (!consistent[n]) {
        const std::string& mn = program.methods[s.method].name;
        const std::string candidate =
            method_consistent[{s.method, n}] ? mn + "/" + n : mn + "/" + std::to_string(s.partition) + "/" + n;
        for (unsigned suffix = 0;; ++suffix) {
          k = suffix == 0 ? candidate : candidate + "~" + std::to_string(suffix);
          // Taken by a consistent name (its own key) or an earlier
          // generated key: shared if it names the same identity.
          if (const auto c = consistent.find(k); c != consistent.end() && c->second) {
            if (same_identity(name_first[k], i)) break;
            continue;
          }
          const auto [g, gfresh] = generated.emplace(k, i);
          if (gfresh || same_identity(g->second, i)) break;
        }
      }
      const auto [it, fresh] = key_id.emplace(k, static_cast<std::uint32_t>(keys.size()));
      if (fresh) {
        keys.push_back(k);
        key_site.push_back(i);
      }
      key.push_back(it->second);
    }
  }

  /// Each key's and each buffer's lcm; the first site, in program order,
  /// where either passes kMaxAlignment is refused.
  void alignments() {
    key_alignment.assign(keys.size(), 1);
    content_alignment.assign(first_site.size(), 1);
    for (std::uint32_t i = 0; i < sites.size(); ++i) {
      const Site& s = sites[i];
      const auto a = static_cast<std::uint64_t>(s.tensor->alignment);
      const std::string prefix = "method " + q(program.methods[s.method].name) + " partition " +
                                 std::to_string(s.partition) + " tensor " + q(s.tensor->name) + ": lcm of alignments ";
      std::uint64_t& k = key_alignment[key[i]];
      std::uint64_t& b = content_alignment[content[i]];
      const std::optional<std::uint64_t> kl = lcm(k, a), bl = lcm(b, a);
      if (!lcm_refusal && !kl)
        lcm_refusal = Refusal{Error::InvalidAlignment,
                              prefix + std::to_string(k) + " and " + std::to_string(a) + " for key " +
                                  q(keys[key[i]]) + " exceeds " + std::to_string(kMaxAlignment),
                              ""};
      if (!lcm_refusal && !bl)
        lcm_refusal = Refusal{Error::InvalidAlignment,
                              prefix + std::to_string(b) + " and " + std::to_string(a) + " exceeds " +
                                  std::to_string(kMaxAlignment) + ": key " + q(keys[key[i]]) +
                                  " shares its bytes with keys whose alignments' lcm is " + std::to_string(b),
                              ""};
      if (kl) k = *kl;
      if (bl) b = *bl;
    }
  }

  std::uint64_t size_of_content(std::uint32_t c) const { return sites[first_site[c]].tensor->bytes.size(); }
};

bool other_method_has_partitions(const Program& p, std::size_t m) {
  for (std::size_t i = 0; i < p.methods.size(); ++i)
    if (i != m && !p.methods[i].partitions.empty()) return true;
  return false;
}

/// (blob key, function name) of a partition under the strategy
/// (strategy.hpp): a method alone with partitions is never combined.
std::pair<std::string, std::string> function_of(const Program& p, StrategyPick s, std::size_t m, std::uint32_t pi) {
  const std::string& name = p.methods[m].name;
  const std::string own = name + "_partition_" + std::to_string(pi);
  if (s == dedup_fuzz::kDisabled || !other_method_has_partitions(p, m)) return {own, name};
  if (s == dedup_fuzz::kOneBlob) return {"combined_all", name + "__" + std::to_string(pi)};
  return {"combined_partition_" + std::to_string(pi), name};
}

const char* strategy_name(StrategyPick s) {
  return s == dedup_fuzz::kOneBlob ? "ONE_BLOB" : s == dedup_fuzz::kDisabled ? "DISABLED" : "POSITIONAL";
}

void check_store(const Oracle& o, const DedupResult& r) {
  const NamedDataStore& store = r.store;
  expect_eq("buffers: one per distinct content", store.buffer_count(), o.first_site.size());
  for (std::uint32_t c = 0; c < o.first_site.size(); ++c) {
    const StoreBuffer& b = store.buffers()[c];
    const ByteSpan want = o.sites[o.first_site[c]].tensor->bytes;
    const std::string at = "buffer " + std::to_string(c);
    expect_eq(at + ": its first tensor's memory", reinterpret_cast<std::uintptr_t>(b.bytes.data()),
              reinterpret_cast<std::uintptr_t>(want.data()));
    expect_eq(at + ": size", b.bytes.size(), want.size());
    expect_eq(at + ": the lcm of its tensors' alignments", b.alignment, o.content_alignment[c]);
  }
  expect_eq("keys: one per key of the oracle", store.key_count(), o.keys.size());
  for (std::uint32_t k = 0; k < o.keys.size(); ++k) {
    const StoreKey& sk = store.keys()[k];
    const Tensor& t = *o.sites[o.key_site[k]].tensor;
    expect_eq("key: text, in order of first use", o.keys[k], sk.key, o.keys[k]);
    expect_eq("key: buffer", sk.key, sk.buffer_index, o.content[o.key_site[k]]);
    expect_eq("key: alignment", sk.key, sk.alignment, o.key_alignment[k]);
    expect_layout("key: layout", sk.key, sk.layout, t.layout);
    expect("key: found by name", sk.key, store.find(o.keys[k]) == &sk);
  }
  // Every tensor, through its key, to exactly its bytes.
  for (std::uint32_t i = 0; i < o.sites.size(); ++i) {
    const Tensor& t = *o.sites[i].tensor;
    const ByteSpan held = store.bytes_of(o.keys[o.key[i]]);
    expect_eq("tensor: size its key holds", t.name, held.size(), t.bytes.size());
    expect("tensor: bytes its key holds", t.name,
           t.bytes.empty() || std::memcmp(held.data(), t.bytes.data(), t.bytes.size()) == 0);
  }
}

void check_functions(const Oracle& o, const DedupResult& r, StrategyPick s) {
  const Program& p = o.program;
  std::size_t fi = 0, i = 0;
  for (std::size_t m = 0; m < p.methods.size(); ++m)
    for (std::uint32_t pi = 0; pi < p.methods[m].partitions.size(); ++pi, ++fi) {
      expect("a function per partition", fi < r.functions.functions.size());
      const FunctionMap& f = r.functions.functions[fi];
      const auto [blob, name] = function_of(p, s, m, pi);
      const std::string at = "function " + std::to_string(fi);
      expect_eq(at + ": method", f.method, p.methods[m].name);
      expect_eq(at + ": partition", f.partition_index, pi);
      expect_eq(at + ": blob", f.blob_key, blob);
      expect_eq(at + ": name", f.function_name, name);
      const std::vector<Tensor>& ts = p.methods[m].partitions[pi].tensors;
      expect_eq(at + ": rows", f.tensors.size(), ts.size());
      for (std::size_t t = 0; t < ts.size(); ++t, ++i) {
        expect_eq("function row: tensor name", ts[t].name, f.tensors[t].tensor_name, ts[t].name);
        expect_eq("function row: key", ts[t].name, f.tensors[t].key, o.keys[o.key[i]]);
      }
    }
  expect_eq("functions", r.functions.functions.size(), fi);
}

/// Sites in groups (methods, blobs): each group's tensors, their bytes, the
/// distinct contents it uses, and those of them another group uses too;
/// and how many groups use each content.
struct Groups {
  struct Tally {
    std::uint64_t tensors = 0, bytes = 0, distinct = 0, shared = 0;
  };
  std::vector<Tally> tally;
  std::vector<std::uint64_t> users;  // content -> groups that use it

  Groups(const Oracle& o, const std::vector<std::uint32_t>& group_of_site, std::size_t groups) : tally(groups) {
    const std::size_t ncontent = o.first_site.size();
    std::vector<std::vector<char>> uses(groups, std::vector<char>(ncontent, 0));
    for (std::uint32_t i = 0; i < o.sites.size(); ++i) {
      Tally& t = tally[group_of_site[i]];
      ++t.tensors;
      t.bytes += o.sites[i].tensor->bytes.size();
      uses[group_of_site[i]][o.content[i]] = 1;
    }
    users.assign(ncontent, 0);
    for (const std::vector<char>& u : uses)
      for (std::size_t c = 0; c < ncontent; ++c) users[c] += u[c] != 0;
    for (std::size_t g = 0; g < groups; ++g)
      for (std::uint32_t c = 0; c < ncontent; ++c) {
        if (!uses[g][c]) continue;
        tally[g].distinct += o.size_of_content(c);
        if (users[c] > 1) tally[g].shared += o.size_of_content(c);
      }
  }
};

void check_report(const Oracle& o, const DedupResult& r, StrategyPick s, unsigned threads) {
  const Report& rep = r.report;
  const Program& p = o.program;
  const std::size_t ncontent = o.first_site.size();
  expect_eq("report: strategy", rep.strategy, strategy_name(s));
  expect_eq("report: threads", rep.threads, threads);
  expect_eq("report: methods", rep.methods, p.methods.size());
  expect_eq("report: functions", rep.functions, r.functions.functions.size());
  expect_eq("report: tensors", rep.tensors, o.sites.size());
  expect_eq("report: keys", rep.keys, o.keys.size());
  expect_eq("report: buffers", rep.buffers, ncontent);
  std::uint64_t in = 0, stored = 0, empty = 0, same_pointer = 0;
  std::vector<std::uint32_t> uses(ncontent, 0), key_count(ncontent, 0);
  std::set<std::pair<const std::uint8_t*, std::size_t>> seen;  // (memory, size) of earlier tensors
  for (std::uint32_t i = 0; i < o.sites.size(); ++i) {
    const ByteSpan b = o.sites[i].tensor->bytes;
    in += b.size();
    ++uses[o.content[i]];
    empty += b.empty();
    same_pointer += !b.empty() && !seen.emplace(b.data(), b.size()).second;
  }
  for (std::uint32_t c = 0; c < ncontent; ++c) stored += o.size_of_content(c);
  for (std::uint32_t k = 0; k < o.keys.size(); ++k) ++key_count[o.content[o.key_site[k]]];
  expect_eq("report: bytes in", rep.bytes_in, in);
  expect_eq("report: bytes stored", rep.bytes_stored, stored);
  expect_eq("report: bytes saved", rep.bytes_saved, in - stored);
  expect_eq("report: identity inputs", rep.identity.inputs, o.sites.size());
  expect_eq("report: identity bytes in", rep.identity.bytes_in, in);
  expect_eq("report: empty tensors skipped", rep.identity.skipped_empty, empty);
  expect_eq("report: same-pointer tensors skipped", rep.identity.skipped_same_pointer, same_pointer);

  // Per method: the contents it uses, and which others use too.
  std::vector<std::uint32_t> method_of_site;
  for (const Site& site : o.sites) method_of_site.push_back(site.method);
  const Groups by_method(o, method_of_site, p.methods.size());
  expect_eq("report: per-method rows", rep.per_method.size(), p.methods.size());
  for (std::uint32_t m = 0; m < p.methods.size(); ++m) {
    const MethodReport& mr = rep.per_method[m];
    const auto [tensors, bytes, distinct, shared] = by_method.tally[m];
    std::uint64_t attributed = 0;
    for (std::uint32_t c = 0; c < ncontent; ++c)
      if (o.sites[o.first_site[c]].method == m) attributed += o.size_of_content(c);
    const std::string at = "report: method " + q(p.methods[m].name) + ": ";
    expect_eq(at + "name", mr.method, p.methods[m].name);
    expect_eq(at + "partitions", mr.partitions, p.methods[m].partitions.size());
    expect_eq(at + "tensors", mr.tensors, tensors);
    expect_eq(at + "bytes in", mr.bytes_in, bytes);
    expect_eq(at + "bytes distinct", mr.bytes_distinct, distinct);
    expect_eq(at + "bytes shared with other methods", mr.bytes_shared_with_other_methods, shared);
    expect_eq(at + "bytes attributed", mr.bytes_attributed, attributed);
    expect_eq(at + "bytes saved", mr.bytes_saved, bytes - attributed);
  }

  // Per blob, blobs in order of their first function.
  std::vector<std::string> blobs;
  std::vector<std::uint32_t> blob_of_site;
  std::vector<std::uint32_t> functions_in;
  for (std::size_t m = 0; m < p.methods.size(); ++m)
    for (std::uint32_t pi = 0; pi < p.methods[m].partitions.size(); ++pi) {
      const std::string blob = function_of(p, s, m, pi).first;
      const auto b = static_cast<std::uint32_t>(std::find(blobs.begin(), blobs.end(), blob) - blobs.begin());
      if (b == blobs.size()) {
        blobs.push_back(blob);
        functions_in.push_back(0);
      }
      ++functions_in[b];
      blob_of_site.insert(blob_of_site.end(), p.methods[m].partitions[pi].tensors.size(), b);
    }
  expect_eq("report: blobs", rep.blobs, blobs.size());
  expect_eq("report: per-blob rows", rep.per_blob.size(), blobs.size());
  const Groups by_blob(o, blob_of_site, blobs.size());
  std::uint64_t across = 0;
  for (std::uint32_t c = 0; c < ncontent; ++c) across += (by_blob.users[c] - 1) * o.size_of_content(c);
  expect_eq("report: bytes shared across blobs", rep.bytes_shared_across_blobs, across);
  for (std::uint32_t b = 0; b < blobs.size(); ++b) {
    const BlobReport& br = rep.per_blob[b];
    const auto [tensors, bytes, distinct, shared] = by_blob.tally[b];
    const std::string at = "report: blob " + q(blobs[b]) + ": ";
    expect_eq(at + "key", br.blob_key, blobs[b]);
    expect_eq(at + "functions", br.functions, functions_in[b]);
    expect_eq(at + "tensors", br.tensors, tensors);
    expect_eq(at + "bytes in", br.bytes_in, bytes);
    expect_eq(at + "bytes distinct", br.bytes_distinct, distinct);
    expect_eq(at + "bytes shared inside", br.bytes_shared_inside, bytes - distinct);
    expect_eq(at + "bytes shared across", br.bytes_shared_across, shared);
  }

  // Alias groups: non-empty contents used twice or more; the five that
  // save most, ties by first use.
  std::vector<std::uint32_t> groups;
  for (std::uint32_t c = 0; c < ncontent; ++c)
    if (uses[c] >= 2 && o.size_of_content(c) != 0) groups.push_back(c);
  expect_eq("report: alias groups", rep.alias_groups, groups.size());
  auto saved = [&](std::uint32_t c) { return o.size_of_content(c) * (uses[c] - 1); };
  // Contents are numbered in order of first use, so ties go to the lower
  // number. (std::sort with that tie, not std::stable_sort: clang 19 rejects
  // libstdc++ 12's stable_sort under -Werror, for the deprecated
  // get_temporary_buffer it calls.)
  std::sort(groups.begin(), groups.end(), [&](std::uint32_t a, std::uint32_t b) {
    return saved(a) != saved(b) ? saved(a) > saved(b) : a < b;
  });
  groups.resize(std::min<std::size_t>(groups.size(), 5));
  expect_eq("report: largest alias groups", rep.largest_alias_groups.size(), groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const AliasGroup& ag = rep.largest_alias_groups[g];
    const std::uint32_t c = groups[g];
    const std::string at = "report: alias group " + std::to_string(g) + ": ";
    expect_eq(at + "first key", ag.first_key, o.keys[o.key[o.first_site[c]]]);
    expect_eq(at + "tensors", ag.tensors, uses[c]);
    expect_eq(at + "keys", ag.keys, key_count[c]);
    expect_eq(at + "size", ag.size, o.size_of_content(c));
    expect_eq(at + "bytes saved", ag.bytes_saved, saved(c));
  }
}

/// Written and read back by the runtime reader: every function finds every
/// tensor's key, with its bytes and layout.
void check_written(const Oracle& o, const DedupResult& r) {
  for (const Site& s : o.sites)
    if (s.tensor->alignment > 4096) return;  // (the padding: up to 4 GiB)
  Expected<std::vector<std::uint8_t>> written = serialize_ptd(r.store, r.functions);
  if (!written) fail("serialize_ptd", written.message(), "a file");
  const BufferSource src(written->data(), written->size());
  Result<NamedDataMap> file = NamedDataMap::open(src);
  expect("the written file opens", file.ok());
  expect_eq("keys in the file", *file->get_num_keys(), o.keys.size());
  for (std::uint32_t i = 0; i < o.sites.size(); ++i) {
    const Site& s = o.sites[i];
    const Tensor& t = *s.tensor;
    const std::string& mn = o.program.methods[s.method].name;
    Result<FunctionView> f = file->find_function(KeyView(mn.data(), mn.size()), s.partition);
    expect("file: the function of the tensor's partition", mn, f.ok());
    Result<KeyView> k = f->key_of(KeyView(t.name.data(), t.name.size()));
    expect("file: the tensor's key", t.name, k.ok());
    expect_eq("file: the tensor's key", t.name, std::string_view(k->data(), k->size()), o.keys[o.key[i]]);
    Result<DataBuffer> data = file->get_data(*k);
    expect("file: the tensor's bytes", t.name,
           data.ok() && data->size() == t.bytes.size() &&
               (t.bytes.empty() || std::memcmp(data->data(), t.bytes.data(), t.bytes.size()) == 0));
    Result<TensorLayout> layout = file->get_tensor_layout(*k);
    expect_layout("file: the tensor's layout", t.name, layout.ok() ? std::optional<Layout>(Layout::copy_of(*layout)) : std::nullopt,
                  t.layout);
  }
}

/// The decoded program, to read a failing input by (DEDUP_FUZZ_PRINT=1):
/// each tensor as name:size@memory/alignment, L where it has a layout.
void print(const dedup_fuzz::Decoded& in) {
  std::fprintf(stderr, "strategy %s, %u threads, colliding hash on %u\n", strategy_name(in.config.strategy),
               in.config.threads, in.config.collide_threads);
  for (const Method& m : in.program.methods) {
    std::fprintf(stderr, "method %s\n", q(m.name).c_str());
    for (const Partition& p : m.partitions) {
      std::fprintf(stderr, "  partition:");
      for (const Tensor& t : p.tensors)
        std::fprintf(stderr, " %s:%zu@%p/%lld%s", detail::quote_name(t.name).c_str(), t.bytes.size(),
                     static_cast<const void*>(t.bytes.data()), static_cast<long long>(t.alignment), t.layout ? "L" : "");
      std::fprintf(stderr, "\n");
    }
  }
}

template <class Hash>
Expected<DedupResult> run(const Program& program, StrategyPick s, unsigned threads, const Hash& hash) {
  DedupOptions options;
  options.threads = threads;
  switch (s) {
    case dedup_fuzz::kOneBlob: return deduplicate<Strategy<OneBlob>>(program, options, hash);
    case dedup_fuzz::kDisabled: return deduplicate<Strategy<Disabled>>(program, options, hash);
    default: return deduplicate<Strategy<Positional>>(program, options, hash);
  }
}

void check_refused(const char* run, const Expected<DedupResult>& r, const Refusal& want) {
  expect(std::string(run) + ": refused", !r.ok());
  expect_eq(std::string(run) + ": error code", static_cast<std::uint64_t>(r.error()), static_cast<std::uint64_t>(want.code));
  const std::string& m = r.message();
  if (want.holds.empty()) {
    expect_eq(std::string(run) + ": message", m, want.message);
  } else {
    expect_eq(std::string(run) + ": message start", m.substr(0, want.message.size()), want.message);
    expect(std::string(run) + ": message holds '" + want.holds + "': " + m, m.find(want.holds) != std::string::npos);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dedup_fuzz::Decoded in;
  dedup_fuzz::Decoder(data, size).decode(in);
  const Program& program = in.program;
  const StrategyPick s = in.config.strategy;
  if (std::getenv("DEDUP_FUZZ_PRINT") != nullptr) print(in);
  const Expected<DedupResult> one = run(program, s, 1, Xxh3Hash{});
  const Expected<DedupResult> many = run(program, s, in.config.threads, Xxh3Hash{});
  const Expected<DedupResult> colliding = run(program, s, in.config.collide_threads, AlwaysCollideHash{});

  std::optional<Refusal> refusal = check_refusal(program, s);
  std::optional<Oracle> oracle;
  if (!refusal) {
    oracle.emplace(program);
    refusal = oracle->lcm_refusal;
  }
  if (refusal) {
    check_refused("1 thread", one, *refusal);
    check_refused("several threads", many, *refusal);
    check_refused("colliding hash", colliding, *refusal);
    return 0;
  }
  for (const Expected<DedupResult>* r : {&one, &many, &colliding})
    if (!r->ok()) fail("deduplicate() refused a valid program", r->message(), "a result");
  check_store(*oracle, *one);
  check_functions(*oracle, *one, s);
  check_report(*oracle, *one, s, 1);
  expect_eq("threads in the report", many->report.threads, in.config.threads);
  expect_eq("1 thread against " + std::to_string(in.config.threads), dump(*many, true), dump(*one, true));
  expect_eq("XXH3 against the colliding hash", dump(*colliding, false), dump(*one, false));
  check_written(*oracle, *one);
  return 0;
}
