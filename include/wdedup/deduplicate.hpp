// wdedup/deduplicate.hpp — the build-time entry point: a Program in, one
// named-data store (identical bytes held once), the per-partition function
// maps and a report out. Build-time half.
//
// Store key naming scheme (documented in the README):
//   - a tensor name whose every occurrence, in every method and partition,
//     has the same bytes and layout is its own key: "layers.0.wq.weight";
//   - otherwise, if it is consistent within a method: "<method>/<name>";
//   - otherwise: "<method>/<partition>/<name>";
//   - a generated key that another key already took (a tensor literally
//     named "decode/mask") gets "~1", "~2", ... appended, in program order.
// Keys therefore never collide across blobs or methods, and a function's
// tensor table (tensor name -> key) is enough to find all of its tensors.
#ifndef WDEDUP_DEDUPLICATE_HPP
#define WDEDUP_DEDUPLICATE_HPP

#include <algorithm>
#include <chrono>
#include <deque>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "wdedup/detail/identity.hpp"
#include "wdedup/detail/name_index.hpp"
#include "wdedup/expected.hpp"
#include "wdedup/function_map.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/program.hpp"
#include "wdedup/report.hpp"
#include "wdedup/strategy.hpp"

namespace wdedup {

struct DedupOptions {
  /// Hashing/comparing threads; 0 = every core. Results are identical for
  /// any value.
  unsigned threads = 0;
};

/// Everything deduplicate() produces.
struct DedupResult {
  NamedDataStore store;
  FunctionMaps functions;
  Report report;
};

namespace detail {

/// Where a flattened tensor came from.
struct TensorSite {
  std::uint32_t method;
  std::uint32_t partition;
  std::uint32_t index;  ///< within the partition
};

inline std::string site_prefix(const Program& p, const TensorSite& s) {
  return cat("method ", quote_name(p.methods[s.method].name), " partition ", s.partition, " tensor ",
             quote_name(p.methods[s.method].partitions[s.partition].tensors[s.index].name), ": ");
}

/// Names, alignments and layouts are checked before any byte is read.
/// Fills `sites` (program order) and `name_of` (a dense id per distinct
/// tensor name, from `names`). The common path builds no strings: a message
/// is only made for the input that fails.
inline Expected<void> validate_program(const Program& program, std::vector<TensorSite>* sites, NameIndex* names,
                                       std::vector<std::uint32_t>* name_of) {
  NameIndex method_names(program.methods.size());
  std::vector<std::uint32_t> stamp;  // name id -> serial of the partition that last used it
  std::uint32_t serial = 0;
  for (std::uint32_t m = 0; m < program.methods.size(); ++m) {
    const Method& method = program.methods[m];
    if (method.name.empty())
      return Expected<void>(Error::InvalidName, cat("method #", m, " has an empty name"));
    bool fresh = false;
    method_names.find_or_add(method.name, &fresh);
    if (!fresh)
      return Expected<void>(Error::InvalidName, cat("method name ", quote_name(method.name), " is used twice"));
    for (std::uint32_t p = 0; p < method.partitions.size(); ++p, ++serial) {
      const Partition& part = method.partitions[p];
      auto where = [&] { return cat("method ", quote_name(method.name), " partition ", p, ": "); };
      for (std::uint32_t t = 0; t < part.tensors.size(); ++t) {
        const Tensor& tensor = part.tensors[t];
        if (tensor.name.empty())
          return Expected<void>(Error::InvalidName, cat(where(), "tensor #", t, " has an empty name"));
        const std::uint32_t id = names->find_or_add(tensor.name);
        if (id >= stamp.size()) stamp.resize(id + 1, UINT32_MAX);
        if (stamp[id] == serial)
          return Expected<void>(Error::InvalidName,
                                cat(where(), "tensor name ", quote_name(tensor.name), " is used twice"));
        stamp[id] = serial;
        const bool fine = tensor.alignment > 0 && static_cast<std::uint64_t>(tensor.alignment) <= kMaxAlignment &&
                          (!tensor.layout || tensor.layout->nbytes() == std::optional<std::uint64_t>(tensor.bytes.size()));
        if (!fine) return check_entry(where(), tensor.name, tensor.bytes, tensor.alignment, tensor.layout);
        sites->push_back(TensorSite{m, p, t});
        name_of->push_back(id);
      }
    }
  }
  return {};
}

/// Identity of a store key: one content and one layout.
struct KeyIdentity {
  std::uint32_t content;
  const std::optional<Layout>* layout;
  bool operator==(const KeyIdentity& o) const { return content == o.content && *layout == *o.layout; }
};

template <class Policy, class Hash>
Expected<DedupResult> deduplicate_impl(const Program& program, const DedupOptions& options, const Hash& hash) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();

  std::vector<TensorSite> sites;
  NameIndex names;
  std::vector<std::uint32_t> name_of;  // site -> name id
  if (Expected<void> v = validate_program(program, &sites, &names, &name_of); !v) return v.build_error();
  if (Expected<void> v = Policy::validate(program); !v) return v.build_error();

  auto tensor_of = [&](const TensorSite& s) -> const Tensor& {
    return program.methods[s.method].partitions[s.partition].tensors[s.index];
  };

  // ---- 1. which bytes are identical (parallel, exact) ----------------------
  std::vector<ByteSpan> inputs;
  inputs.reserve(sites.size());
  for (const TensorSite& s : sites) inputs.push_back(tensor_of(s).bytes);
  IdentityOptions iopts;
  iopts.threads = options.threads;
  IdentityStats istats;
  const auto t_id = clock::now();
  const std::vector<std::uint32_t> rep = find_identical(inputs, hash, iopts, &istats);
  const double identity_seconds = std::chrono::duration<double>(clock::now() - t_id).count();

  // Content ids in order of first occurrence.
  std::vector<std::uint32_t> content(sites.size());
  std::vector<std::uint32_t> content_first;  // content id -> first site
  for (std::uint32_t i = 0; i < sites.size(); ++i) {
    if (rep[i] == i) {
      content[i] = static_cast<std::uint32_t>(content_first.size());
      content_first.push_back(i);
    } else {
      content[i] = content[rep[i]];
    }
  }

  // ---- 2. keys ---------------------------------------------------------------
  // Is each name consistent (one content, one layout) everywhere, and within
  // each method? Flat arrays indexed by name id; sites are in method order.
  const std::size_t nsites = sites.size(), nnames = names.size();
  auto same_identity = [&](std::uint32_t a, std::uint32_t b) {
    return content[a] == content[b] && tensor_of(sites[a]).layout == tensor_of(sites[b]).layout;
  };
  std::vector<std::uint32_t> global_first(nnames, UINT32_MAX);
  std::vector<char> global_consistent(nnames, 1);
  std::vector<char> method_consistent_at(nsites, 1);  // site -> its name is consistent within its method
  {
    std::vector<std::uint32_t> method_first(nnames, UINT32_MAX), method_stamp(nnames, UINT32_MAX);
    std::vector<char> consistent(nnames, 1);
    std::size_t begin = 0;
    while (begin < nsites) {
      const std::uint32_t m = sites[begin].method;
      std::size_t end = begin;
      for (; end < nsites && sites[end].method == m; ++end) {
        const std::uint32_t n = name_of[end], i = static_cast<std::uint32_t>(end);
        if (global_first[n] == UINT32_MAX) global_first[n] = i;
        else if (global_consistent[n] && !same_identity(global_first[n], i)) global_consistent[n] = 0;
        if (method_stamp[n] != m) {
          method_stamp[n] = m;
          method_first[n] = i;
          consistent[n] = 1;
        } else if (consistent[n] && !same_identity(method_first[n], i)) {
          consistent[n] = 0;
        }
      }
      for (std::size_t i = begin; i < end; ++i) method_consistent_at[i] = consistent[name_of[i]];
      begin = end;
    }
  }
  // Key ids in order of first use. A consistent name is its own key; other
  // names get a generated key, which never takes a consistent name (those are
  // reserved up front through `names`) nor another generated key with other
  // contents: it gets "~1", "~2", ... instead.
  struct KeySlot {
    std::string_view key;
    std::uint32_t first_site;
    std::uint64_t alignment;
  };
  std::vector<KeySlot> slots;
  NameIndex key_index(nsites);
  std::deque<std::string> generated;  // storage for generated key strings (stable addresses)
  std::vector<std::uint32_t> key_of_site(nsites);
  auto key_taken_by_other = [&](std::string_view key, std::uint32_t site) {
    const std::uint32_t n = names.find(key);
    if (n != NameIndex::kNone && global_consistent[n] && !same_identity(global_first[n], site)) return true;
    const std::uint32_t k = key_index.find(key);
    return k != NameIndex::kNone && !same_identity(slots[k].first_site, site);
  };
  for (std::uint32_t i = 0; i < nsites; ++i) {
    const TensorSite& s = sites[i];
    const Tensor& t = tensor_of(s);
    std::string_view key = t.name;
    if (!global_consistent[name_of[i]]) {
      const std::string& mname = program.methods[s.method].name;
      std::string candidate = method_consistent_at[i] ? cat(mname, "/", t.name) : cat(mname, "/", s.partition, "/", t.name);
      std::string k = candidate;
      for (unsigned n = 1; key_taken_by_other(k, i); ++n) k = cat(candidate, "~", n);
      const std::uint32_t existing = key_index.find(k);
      if (existing != NameIndex::kNone) {
        key = slots[existing].key;
      } else {
        generated.push_back(std::move(k));
        key = generated.back();
      }
    }
    bool fresh = false;
    const std::uint32_t id = key_index.find_or_add(key, &fresh);
    const auto align = static_cast<std::uint64_t>(t.alignment);
    key_of_site[i] = id;
    if (fresh) {
      slots.push_back(KeySlot{key, i, align});
      continue;
    }
    KeySlot& slot = slots[id];
    const std::optional<std::uint64_t> l = lcm_alignment(slot.alignment, align);
    if (!l)
      return BuildError{Error::InvalidAlignment,
                        cat(site_prefix(program, s), "lcm of alignments ", slot.alignment, " and ", align,
                            " for key ", quote_name(key), " exceeds ", kMaxAlignment)};
    slot.alignment = *l;
  }

  // ---- 3. the store ------------------------------------------------------------
  // Keys in order of first use, each with the lcm of its occurrences'
  // alignments; buffers in order of first use (content ids already are), each
  // with the lcm of its keys' alignments.
  std::vector<std::uint64_t> buffer_align(content_first.size(), 1);
  for (const KeySlot& slot : slots) {
    const std::uint32_t c = content[slot.first_site];
    const std::optional<std::uint64_t> l = lcm_alignment(buffer_align[c], slot.alignment);
    if (!l)
      return BuildError{Error::InvalidAlignment,
                        cat("key ", quote_name(slot.key), ": lcm of alignments ", buffer_align[c], " and ",
                            slot.alignment,
                            " of the keys sharing its bytes exceeds ", kMaxAlignment)};
    buffer_align[c] = *l;
  }
  DedupResult out;
  StoreAccess::reserve(out.store, content_first.size(), slots.size());
  for (std::uint32_t c = 0; c < content_first.size(); ++c)
    StoreAccess::add_buffer(out.store, inputs[content_first[c]], buffer_align[c]);
  for (const KeySlot& slot : slots)
    StoreAccess::add_key(out.store, std::string(slot.key), content[slot.first_site], slot.alignment,
                         tensor_of(sites[slot.first_site]).layout);

  // ---- 4. blobs and function maps --------------------------------------------------
  std::vector<std::string> blob_order;
  std::unordered_map<std::string, std::uint32_t> blob_index;
  std::unordered_set<std::string> function_ids;  // blob + '\0' + function name
  std::vector<std::uint32_t> function_blob;
  for (std::uint32_t m = 0; m < program.methods.size(); ++m) {
    const Method& method = program.methods[m];
    for (std::uint32_t p = 0; p < method.partitions.size(); ++p) {
      FunctionMap f;
      f.method = method.name;
      f.partition_index = p;
      f.blob_key = Policy::blob_key(program, m, p);
      f.function_name = Policy::function_name(program, m, p);
      if (f.blob_key.empty() || f.function_name.empty())
        return BuildError{Error::InvalidName, cat("policy ", Policy::name, " gave method ", quote_name(method.name),
                                                  " partition ", p, " an empty blob key or function name")};
      if (!function_ids.insert(f.blob_key + '\0' + f.function_name).second)
        return BuildError{Error::InvalidName,
                          cat("policy ", Policy::name, " gave function name ", quote_name(f.function_name),
                              " in blob ", quote_name(f.blob_key), " to two partitions (again for method ",
                              quote_name(method.name), " partition ", p, ")")};
      auto [bit, fresh] = blob_index.try_emplace(f.blob_key, static_cast<std::uint32_t>(blob_order.size()));
      if (fresh) blob_order.push_back(f.blob_key);
      function_blob.push_back(bit->second);
      out.functions.functions.push_back(std::move(f));
    }
  }
  {
    std::size_t site = 0;  // sites are in program order, like functions
    for (FunctionMap& f : out.functions.functions) {
      const std::size_t n = program.find_method(f.method)->partitions[f.partition_index].tensors.size();
      for (std::size_t k = 0; k < n; ++k, ++site)
        f.tensors.push_back(FunctionTensor{tensor_of(sites[site]).name, std::string(slots[key_of_site[site]].key)});
    }
  }

  // ---- 5. report -------------------------------------------------------------------
  Report& r = out.report;
  r.strategy = Policy::name;
  r.threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  r.methods = program.methods.size();
  r.functions = out.functions.functions.size();
  r.blobs = blob_order.size();
  r.tensors = sites.size();
  r.keys = out.store.key_count();
  r.buffers = out.store.buffer_count();
  r.bytes_stored = out.store.bytes_stored();
  const std::size_t ncontent = content_first.size();
  auto size_of = [&](std::uint32_t c) -> std::uint64_t { return inputs[content_first[c]].size(); };
  // Per content: how many tensors, methods, blobs use it.
  std::vector<std::uint32_t> uses(ncontent, 0), method_uses(ncontent, 0), blob_uses(ncontent, 0);
  std::vector<std::uint32_t> last_method(ncontent, UINT32_MAX), last_blob_mark(ncontent, UINT32_MAX);
  std::vector<std::uint32_t> site_function(sites.size());
  {
    std::size_t site = 0;
    for (std::uint32_t fi = 0; fi < out.functions.functions.size(); ++fi)
      for (std::size_t k = 0; k < out.functions.functions[fi].tensors.size(); ++k) site_function[site++] = fi;
  }
  std::vector<std::vector<std::uint32_t>> blob_contents(blob_order.size());
  for (std::uint32_t i = 0; i < sites.size(); ++i) {
    const std::uint32_t c = content[i];
    ++uses[c];
    r.bytes_in += inputs[i].size();
    if (last_method[c] != sites[i].method) {
      // Sites are in method order, so a method's uses are contiguous.
      last_method[c] = sites[i].method;
      ++method_uses[c];
    }
    const std::uint32_t b = function_blob[site_function[i]];
    blob_contents[b].push_back(c);
  }
  for (auto& v : blob_contents) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    for (std::uint32_t c : v) ++blob_uses[c];
  }
  r.bytes_saved = r.bytes_in - r.bytes_stored;
  for (std::uint32_t c = 0; c < ncontent; ++c) {
    if (blob_uses[c] > 1) r.bytes_shared_across_blobs += size_of(c) * (blob_uses[c] - 1);
  }
  // Alias groups.
  std::vector<std::uint32_t> keys_per_buffer(out.store.buffer_count(), 0);
  for (const StoreKey& k : out.store.keys()) ++keys_per_buffer[k.buffer_index];  // buffer == content id
  // Count every group, but name only the largest five.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> groups;  // (bytes saved, content)
  for (std::uint32_t c = 0; c < ncontent; ++c)
    if (uses[c] >= 2) groups.emplace_back(size_of(c) * (uses[c] - 1), c);
  r.alias_groups = groups.size();
  const std::size_t top = std::min<std::size_t>(5, groups.size());
  // Largest saving first; ties in order of first use.
  std::partial_sort(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(top), groups.end(),
                    [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (std::size_t k = 0; k < top; ++k) {
    const std::uint32_t c = groups[k].second;
    AliasGroup g;
    g.first_key = std::string(slots[key_of_site[content_first[c]]].key);
    g.tensors = uses[c];
    g.keys = keys_per_buffer[c];
    g.size = size_of(c);
    g.bytes_saved = groups[k].first;
    r.largest_alias_groups.push_back(std::move(g));
  }
  // Per method.
  std::vector<char> seen(ncontent, 0);
  for (std::uint32_t m = 0; m < program.methods.size(); ++m) {
    MethodReport mr;
    mr.method = program.methods[m].name;
    mr.partitions = static_cast<std::uint32_t>(program.methods[m].partitions.size());
    std::vector<char> local(ncontent, 0);
    for (std::uint32_t i = 0; i < sites.size(); ++i) {
      if (sites[i].method != m) continue;
      const std::uint32_t c = content[i];
      ++mr.tensors;
      mr.bytes_in += inputs[i].size();
      if (!local[c]) {
        local[c] = 1;
        mr.bytes_distinct += size_of(c);
        if (method_uses[c] > 1) mr.bytes_shared_with_other_methods += size_of(c);
      }
      if (!seen[c]) {
        seen[c] = 1;
        mr.bytes_attributed += size_of(c);
      }
    }
    mr.bytes_saved = mr.bytes_in - mr.bytes_attributed;
    r.per_method.push_back(std::move(mr));
  }
  // Per blob.
  for (std::uint32_t b = 0; b < blob_order.size(); ++b) {
    BlobReport br;
    br.blob_key = blob_order[b];
    for (std::uint32_t fi = 0; fi < out.functions.functions.size(); ++fi)
      if (function_blob[fi] == b) ++br.functions;
    for (std::uint32_t i = 0; i < sites.size(); ++i) {
      if (function_blob[site_function[i]] != b) continue;
      ++br.tensors;
      br.bytes_in += inputs[i].size();
    }
    for (std::uint32_t c : blob_contents[b]) {
      br.bytes_distinct += size_of(c);
      if (blob_uses[c] > 1) br.bytes_shared_across += size_of(c);
    }
    br.bytes_shared_inside = br.bytes_in - br.bytes_distinct;
    r.per_blob.push_back(std::move(br));
  }
  r.identity = istats;
  r.seconds_identity = identity_seconds;
  r.seconds_total = std::chrono::duration<double>(clock::now() - t0).count();
  return out;
}

}  // namespace detail

/// Deduplicates every tensor of `program` and groups partitions into blobs
/// by the strategy S = Strategy<Policy>. Hash nominates candidates only:
/// every merge is confirmed byte-for-byte. Nothing is produced on error.
template <class S, class Hash = Xxh3Hash>
Expected<DedupResult> deduplicate(const Program& program, const DedupOptions& options = {},
                                  const Hash& hash = Hash{}) {
  static_assert(detail::strategy_traits<S>::is_strategy,
                "deduplicate<S>(program): S must be wdedup::Strategy<Policy>, e.g. "
                "deduplicate<wdedup::Strategy<wdedup::OneBlob>>(program)");
  if constexpr (detail::strategy_check<S>::value) {
    return detail::deduplicate_impl<typename S::policy>(program, options, hash);
  } else {
    return BuildError{Error::InvalidArgument, "not a valid strategy"};
  }
}

}  // namespace wdedup

#endif  // WDEDUP_DEDUPLICATE_HPP
