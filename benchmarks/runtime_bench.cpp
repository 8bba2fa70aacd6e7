// benchmarks/runtime_bench.cpp — the runtime reader (NamedDataMap over an
// mmap'd .ptd written by write_ptd_file):
//   - lookup latency (get_tensor_layout, present keys in random order, and
//     missing keys) at several store sizes, against the reference reader's
//     algorithm (strcmp over the keys in file order) and against
//     std::unordered_map<std::string, ...> over the same keys;
//   - open time of a 65,536-key store, and heap allocations during open and
//     during 1M lookups (counted by alloc_counter.cpp);
//   - get_data of a 1 KiB and a 1 GiB tensor; load_data_into against memcpy
//     of the same bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unistd.h>

#include <wdedup/bench.hpp>
#include <wdedup/named_data_store.hpp>
#include <wdedup/ptd_writer.hpp>
#include <wdedup/runtime.hpp>

#include "cli.hpp"  // (tools/) counted, shared with the demo
#include "harness.hpp"

namespace wbench {
namespace {

namespace bench = wdedup::bench;
using wdedup_cli::counted;

/// Keys shaped like a real model's: "layers.<n>.<part>" with long shared prefixes.
std::string key_name(std::uint64_t i) {
  static const char* const parts[8] = {"attention.wq.weight",    "attention.wk.weight",    "attention.wv.weight",
                                       "attention.wo.weight",    "feed_forward.w1.weight", "feed_forward.w2.weight",
                                       "feed_forward.w3.weight", "attention_norm.weight"};
  return "layers." + std::to_string(i / 8) + "." + parts[i % 8];
}

/// The store a lookup benchmark reads: `keys` keys, each a distinct 16-byte
/// float[4] tensor with a layout.
struct KeyStore {
  std::vector<std::string> names;
  std::vector<std::uint32_t> data;  ///< 4 words per key
  std::string path;
};

/// The store, or nullopt after report_failure (the run goes on to write
/// its JSON).
std::optional<KeyStore> write_key_store(const Config& c, std::uint64_t keys) {
  KeyStore s;
  s.data.resize(static_cast<std::size_t>(keys) * 4);  // (fits a size_t: check_sizes)
  wdedup::NamedDataStore store;
  for (std::size_t i = 0; i < keys; ++i) {
    s.names.push_back(key_name(i));
    for (std::size_t k = 0; k < 4; ++k) s.data[i * 4 + k] = static_cast<std::uint32_t>(i * 4 + k);
    auto r = store.add_named_data(
        s.names.back(), wdedup::ByteSpan(reinterpret_cast<const std::uint8_t*>(&s.data[i * 4]), 16), 16,
        wdedup::Layout::contiguous(wdedup::ScalarType::Float, {4}));
    if (!r) {
      report_failure("building the " + std::to_string(keys) + "-key store: " + r.message());
      return std::nullopt;
    }
  }
  s.path = temp_path(c, std::to_string(keys) + "-keys.ptd");
  wdedup::WriteOptions o;
  o.fsync = false;  // read back at once; durability is not what is measured
  auto w = wdedup::write_ptd_file(store, s.path, o);
  if (!w) {
    report_failure("writing " + s.path + ": " + w.message());
    return std::nullopt;
  }
  return s;
}

/// An open store; the source lives on the heap so the map's pointer to it
/// stays valid.
struct Opened {
  std::unique_ptr<wdedup::MmapSource> source;
  std::optional<wdedup::NamedDataMap> map;
};

/// The open store, or nullopt after report_failure.
std::optional<Opened> open_store(const std::string& path) {
  auto src = wdedup::MmapSource::open(path.c_str());
  if (!src) {
    report_failure("mapping " + path + ": " + wdedup::describe_failure(src.failure()));
    return std::nullopt;
  }
  Opened o;
  o.source = std::make_unique<wdedup::MmapSource>(std::move(*src));
  auto m = wdedup::NamedDataMap::open(*o.source);
  if (!m) {
    report_failure("opening " + path + ": " + wdedup::error_name(m.error()) + " (" + m.failure().what + " at " +
                   std::to_string(m.failure().at) + ")");
    return std::nullopt;
  }
  o.map.emplace(*m);
  return o;
}

/// Deterministic shuffle (Fisher-Yates with an LCG), the same every run.
template <class T>
void shuffle(std::vector<T>& v, std::uint64_t seed) {
  for (std::size_t i = v.size(); i > 1; --i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(v[i - 1], v[static_cast<std::size_t>((seed >> 33) % i)]);
  }
}

/// Runs each contender once per repetition, in the order given on even
/// repetitions and reversed on odd ones; each returns seconds per operation
/// for one pass. Returns samples per contender, in the order given. With
/// wdedup's contender in the middle of three (or either of two), each
/// baseline runs right before or right after it in every repetition, and
/// neither side always goes first. Each pass is a step for a Ctrl-C
/// (stop_point): a measurement of many or long passes (a large --reps or
/// --lookups) stops at the next pass, not at its end.
std::vector<std::vector<double>> interleave(unsigned reps, const std::vector<std::function<double()>>& fns) {
  std::vector<std::vector<double>> s(fns.size());
  for (auto& f : fns) {  // warm-up pass, not recorded
    stop_point();
    f();
  }
  for (unsigned r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < fns.size(); ++k) {
      const std::size_t i = r % 2 == 0 ? k : fns.size() - 1 - k;
      stop_point();
      s[i].push_back(fns[i]());
    }
  return s;
}

double paired_ratio(const std::vector<double>& base, const std::vector<double>& subject) {
  std::vector<double> r;
  for (std::size_t i = 0; i < base.size() && i < subject.size(); ++i)
    r.push_back(subject[i] > 0 ? base[i] / subject[i] : 0);
  return bench::median(r);
}

/// The order every timed pass visits its queries in: pseudo-random
/// (xorshift64, the same sequence for every pass and contender), so no
/// cycle repeats within a pass. Passes used to cycle through the queries
/// in one shuffled order, 4096 of them up to 4096 keys, and a branch
/// predictor learns such a cycle: at 16 keys libstdc++'s unordered_map,
/// which scans its nodes there, took 11.4 ns a lookup over the cycle and
/// 26.0 ns in an order that does not repeat, the strcmp scan 31.6 against
/// 38.4 ns, wdedup's map 13.8 and 13.6 ns; at 256 keys unordered_map 29.1
/// against 32.8 ns (Zen 5 EPYC VM, 2026-12-01, a review's driver).
class QueryOrder {
 public:
  explicit QueryOrder(std::size_t n) : n_(n) {}
  /// The next query's index, below n (n < 2^32: --keys says so).
  std::size_t next() noexcept {
    x_ ^= x_ << 13;
    x_ ^= x_ >> 7;
    x_ ^= x_ << 17;
    return static_cast<std::size_t>(((x_ >> 32) * n_) >> 32);
  }

 private:
  std::uint64_t x_ = 0x9E3779B97F4A7C15ull;
  std::uint64_t n_;
};

/// Seconds per lookup over `n` lookups of the queries `q` in QueryOrder,
/// timed as a latency, not a throughput: each query's index depends on the
/// previous answer (`chain`, always 0: an answer is an address in user
/// space or an error code, both below 2^63), so a lookup cannot start
/// before the one before it has finished, and the CPU cannot overlap their
/// cache misses. That holds for present keys only: a missing key's answer
/// is a constant along a branch the CPU predicts, so the next index is
/// known before the lookup ends, and misses overlap: the missing-key rows
/// are throughputs, for every contender alike. `find` maps a query to its
/// answer; the answers' sum goes to `*sum`, for the caller to check once
/// the clock has stopped.
/// The query two lookups ahead is prefetched, and its bytes one ahead: in
/// a random order the query itself would otherwise be a cache miss on the
/// chain, which a caller, whose key is at hand, does not wait for.
template <class Find>
double chained_latency(const std::vector<std::string>& q, std::size_t n, std::uint64_t* sum, Find find) {
  std::uint64_t acc = 0;
  QueryOrder order(q.size());
  std::size_t j = order.next(), j1 = order.next(), j2 = order.next(), chain = 0;
  const double t0 = bench::now_seconds();
  for (std::size_t i = 0; i < n; ++i) {
    __builtin_prefetch(&q[j2]);
    __builtin_prefetch(q[j1].data());
    const std::uint64_t v = find(q[j + chain]);
    chain = static_cast<std::size_t>(v >> 63);
    acc += v;
    j = j1;
    j1 = j2;
    j2 = order.next();
  }
  const double t = bench::now_seconds() - t0;
  consume(acc);
  *sum = acc;
  return t / static_cast<double>(n);
}

/// The sum chained_latency must report for `n` lookups when query j's
/// right answer is expect[j].
std::uint64_t expected_sum(const std::vector<std::uint64_t>& expect, std::size_t n) {
  std::uint64_t s = 0;
  QueryOrder order(expect.size());
  for (std::size_t i = 0; i < n; ++i) s += expect[order.next()];
  return s;
}

/// A lookup's answer for a key found: where its layout's sizes lie in the
/// mapping (each key's own, so another key's layout is another answer),
/// plus sizes[0], so the layout is read as a caller would read it.
std::uint64_t answer(const wdedup::TensorLayout& l) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(l.sizes.data())) +
         static_cast<std::uint64_t>(l.sizes[0]);
}
/// Every contender's answer for a key not found.
constexpr std::uint64_t kNotFound = static_cast<std::uint64_t>(wdedup::Error::NotFound);

/// Removes a file when the scope ends, however it ends.
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() { ::unlink(path.c_str()); }
};

/// A row of two timed contenders, in `unit` (seconds times `scale`): the
/// value, its baseline and every sample are in that one unit.
Row lookup_row(const Config& c, const std::string& name, const std::vector<double>& ours,
               const std::string& base_name, const std::vector<double>& base, double scale = 1e9,
               const char* unit = "ns") {
  Row r;
  r.group = "runtime";
  r.name = name;
  r.value = bench::median(ours) * scale;
  r.unit = unit;
  r.baseline = base_name;
  r.baseline_value = bench::median(base) * scale;
  r.baseline_unit = unit;
  r.ratio = paired_ratio(base, ours);
  r.ratio_meaning = base_name + " time per lookup / wdedup time per lookup";
  r.reps = c.reps;
  for (double v : ours) r.samples.push_back(v * scale);
  for (double v : base) r.baseline_samples.push_back(v * scale);
  return r;
}

void run_lookups(const Config& c, std::uint64_t keys, Results& out) {
  // A wrong answer in this store's timed loops voids its rows (lookups,
  // missing keys, open, allocations).
  const FailureScope scope(out);
  // "1 key", "16 keys": the rows' names and the progress lines.
  const std::string k_keys = counted(keys, "key");
  progress(c, "runtime: lookups, %s: writing the store", k_keys.c_str());
  std::optional<KeyStore> written = write_key_store(c, keys);
  if (!written) return;
  const KeyStore& ks = *written;
  const RemoveOnExit remove{ks.path};
  std::optional<Opened> st = open_store(ks.path);
  if (!st) return;
  const wdedup::NamedDataMap& map = *st->map;
  const std::string k = std::to_string(keys);
  const std::string in_store = " in the " + k + "-key store";

  // The store holds what was written, checked once, untimed, before any
  // lookup is timed: every key, under its name its own 16 bytes (so a
  // lookup that resolves a name to another key's entry shows) and the
  // layout written. Wrong answers are not worth timing.
  if (*map.get_num_keys() != keys) {
    report_failure("get_num_keys()" + in_store + " is " + std::to_string(*map.get_num_keys()));
    return;
  }
  for (std::size_t w = 0; w < ks.names.size(); ++w) {
    const std::string& name = ks.names[w];
    const wdedup::Result<wdedup::DataBuffer> d = map.get_data(name);
    if (!d || d->size() != 16 || std::memcmp(d->data(), &ks.data[w * 4], 16) != 0) {
      std::string what = !d ? std::string(wdedup::error_name(d.error()))
                            : std::to_string(d->size()) + " bytes, not the 16 written";
      if (d && d->size() == 16) {  // other bytes: another key's (key i holds the words 4i to 4i + 3)?
        std::uint32_t first = 0;
        std::memcpy(&first, d->data(), 4);
        const std::size_t o = first / 4;
        what = first % 4 == 0 && o < ks.names.size() && std::memcmp(d->data(), &ks.data[o * 4], 16) == 0
                   ? "the 16 bytes of '" + ks.names[o] + "', not its own"
                   : "other bytes than the 16 written";
      }
      report_failure("get_data('" + name + "')" + in_store + ": " + what);
      return;
    }
    const wdedup::Result<wdedup::TensorLayout> l = map.get_tensor_layout(name);
    if (!l || l->scalar_type != wdedup::ScalarType::Float || l->sizes.size() != 1 || l->sizes[0] != 4 ||
        l->dim_order.size() != 1 || l->dim_order[0] != 0) {
      report_failure("get_tensor_layout('" + name + "')" + in_store + ": " +
                     (l ? std::string("not the Float {4} layout written") : wdedup::error_name(l.error())));
      return;
    }
  }

  // The reference reader's view: the keys as C strings, in file order.
  std::vector<const char*> file_keys;
  for (std::size_t i = 0; i < keys; ++i) file_keys.push_back(map.get_key(i)->data());
  // unordered_map over the same keys, each mapped to its layout, decoded
  // ahead and held in the map's node (as a caller's own map would hold it:
  // no second load to reach it). Built from get_key, not from lookups, it
  // also says which key a query names: by_index[i] is the right answer for
  // key i.
  std::vector<wdedup::TensorLayout> layouts;
  std::vector<std::uint64_t> by_index;
  std::unordered_map<std::string, wdedup::TensorLayout> umap;
  std::unordered_map<std::string_view, std::size_t> index_of;  // (untimed uses)
  for (std::size_t i = 0; i < file_keys.size(); ++i) {
    layouts.push_back(*map.key_layout(i));
    by_index.push_back(answer(layouts.back()));
    umap.emplace(file_keys[i], layouts.back());
    index_of.emplace(file_keys[i], i);
  }

  // Queries: every key in random order (several shuffled rounds of a small
  // store), at most max(keys, 4096) of them (lookup_queries), visited in
  // QueryOrder for c.lookups lookups a pass: a caller's keys are at hand,
  // and 1M distinct strings would make every lookup wait for its query's
  // cache miss rather than for the lookup. Prebuilt std::strings, so no
  // contender pays for building its key type. (What this function holds
  // is counted before the run: kLookupBytesPerKey in harness.hpp.)
  const std::uint64_t nqueries = lookup_queries(c, keys);
  const auto lookups = static_cast<std::size_t>(c.lookups);  // (fits: check_sizes)
  std::vector<std::string> present, missing;
  while (present.size() < nqueries) {
    std::vector<std::string> round = ks.names;
    shuffle(round, 0x1234 + present.size());
    for (std::string& s : round) {
      if (present.size() == nqueries) break;
      present.push_back(std::move(s));
    }
  }
  for (std::uint64_t i = 0; i < nqueries; ++i) missing.push_back(key_name(keys + i));  // same shape, never stored
  shuffle(missing, 0x5678);
  std::vector<std::uint64_t> present_answers, missing_answers(missing.size(), kNotFound);
  for (const std::string& q : present) present_answers.push_back(answer(umap.at(q)));
  // The scan costs keys/2 strcmps per hit: fewer queries keep a pass short
  // (at least 16, unless --lookups asks for fewer queries than that).
  const std::size_t scan_n = static_cast<std::size_t>(std::clamp<std::uint64_t>(
      c.scan_strcmps / std::max<std::uint64_t>(1, keys / 2), std::min<std::uint64_t>(16, c.lookups), c.lookups));

  auto ours = [&](const std::string& s) {
    wdedup::Result<wdedup::TensorLayout> r = map.get_tensor_layout(s);
    return r ? answer(*r) : static_cast<std::uint64_t>(r.error());
  };
  auto with_umap = [&](const std::string& s) {
    auto it = umap.find(s);
    return it != umap.end() ? answer(it->second) : kNotFound;
  };
  auto scan = [&](const std::string& s) {
    const char* key = s.c_str();
    std::size_t j = 0;
    while (j < file_keys.size() && std::strcmp(key, file_keys[j]) != 0) ++j;
    return j < file_keys.size() ? answer(layouts[j]) : kNotFound;
  };

  // What an answer is, for a message.
  auto describe = [&](std::uint64_t v) {
    if (v == kNotFound) return std::string("NotFound");
    for (std::size_t i = 0; i < by_index.size(); ++i)
      if (by_index[i] == v) return "the layout of '" + std::string(file_keys[i]) + "'";
    if (v < 256) return std::string("error ") + wdedup::error_name(static_cast<wdedup::Error>(v));
    return "an answer that is no key's layout (" + std::to_string(v) + ")";
  };
  // A timed pass of `who` over queries `q` (right answers `expect`), checked
  // once its clock has stopped: the sum of its answers against the sum of
  // the right ones. On a mismatch the queries are asked again, untimed, to
  // name the first one answered wrong; one message per store is enough.
  bool reported = false;
  auto checked = [&](const char* who, const std::vector<std::string>& q, const std::vector<std::uint64_t>& expect,
                     std::size_t n, auto find) {
    return [&, who, n, find, &q = q, &expect = expect, want = expected_sum(expect, n)] {
      std::uint64_t sum = 0;
      const double t = chained_latency(q, n, &sum, find);
      if (sum != want && !reported) {
        reported = true;
        std::string what = "the answers of a timed pass of " + std::to_string(n) + " lookups sum to " +
                           std::to_string(sum) + ", not " + std::to_string(want);
        for (std::size_t j = 0; j < q.size() && j < n; ++j)
          if (const std::uint64_t v = find(q[j]); v != expect[j]) {
            what = "'" + q[j] + "' gave " + describe(v) + ", expected " + describe(expect[j]);
            break;
          }
        report_failure(std::string(who) + in_store + ": " + what);
      }
      return t;
    };
  };

  progress(c, "runtime: lookups, %s: present keys", k_keys.c_str());
  auto s = interleave(c.reps, {checked("unordered_map", present, present_answers, lookups, with_umap),
                               checked("get_tensor_layout", present, present_answers, lookups, ours),
                               checked("strcmp scan", present, present_answers, scan_n, scan)});
  {
    Row r = lookup_row(c, "get_tensor_layout, " + k_keys, s[1], "unordered_map", s[0]);
    r.target = Target::ratio_at_least(1.0, ">= 1x");
    r.note = "target: at most unordered_map's time per lookup";
    r.extra = {{"keys", double(keys)}, {"lookups_per_pass", double(c.lookups)}, {"distinct_queries", double(present.size())}};
    out.rows.push_back(std::move(r));
  }
  {
    Row r = lookup_row(c, "get_tensor_layout, " + k_keys, s[1], "strcmp scan", s[2]);
    // (Each target set here is counted before the run by planned_targets,
    // targets.hpp: a row that never comes is a target not measured.)
    if (keys == kScanTargetKeys) r.target = Target::ratio_at_least(50.0, ">= 50x");
    r.extra = {{"keys", double(keys)}, {"scan_lookups_per_pass", double(scan_n)}};
    out.rows.push_back(std::move(r));
  }
  progress(c, "runtime: lookups, %s: missing keys", k_keys.c_str());
  const std::size_t scan_miss = std::min<std::size_t>(std::max<std::size_t>(16, scan_n / 2), lookups);  // a miss scans every key
  auto m = interleave(c.reps, {checked("unordered_map", missing, missing_answers, lookups, with_umap),
                               checked("get_tensor_layout", missing, missing_answers, lookups, ours),
                               checked("strcmp scan", missing, missing_answers, scan_miss, scan)});
  for (const auto& [who, samples] : {std::pair<const char*, const std::vector<double>*>{"unordered_map", &m[0]},
                                      {"strcmp scan", &m[2]}}) {
    Row r = lookup_row(c, "missing key, " + k_keys, m[1], who, *samples);
    r.note = "a throughput, not a latency: a miss's answer is predicted, so misses overlap (every contender alike)";
    out.rows.push_back(std::move(r));
  }

  // ---- open time and allocations, on the largest store ------------------------
  if (keys != *std::max_element(c.key_counts.begin(), c.key_counts.end())) return;
  progress(c, "runtime: open, %s", k_keys.c_str());
  std::string open_failure;
  auto open_once = [&] {
    const double t0 = bench::now_seconds();
    auto src = wdedup::MmapSource::open(ks.path.c_str());
    auto mm = src ? wdedup::NamedDataMap::open(*src) : wdedup::Result<wdedup::NamedDataMap>(src.error(), "", 0);
    const double t = bench::now_seconds() - t0;
    if (!mm || *mm->get_num_keys() != keys)
      open_failure = "reopening " + ks.path + ": " + (mm ? counted(*mm->get_num_keys(), "key") + ", not " + k
                                                         : std::string(wdedup::error_name(mm.error())));
    consume(mm ? *mm->get_num_keys() : 0);
    return t;
  };
  auto umap_build = [&] {
    const double t0 = bench::now_seconds();
    std::unordered_map<std::string, std::uint32_t> u;
    u.reserve(file_keys.size());
    for (std::size_t i = 0; i < file_keys.size(); ++i) u.emplace(file_keys[i], static_cast<std::uint32_t>(i));
    const double t = bench::now_seconds() - t0;
    consume(u.size());
    return t;
  };
  // The figure is microseconds, more at the mercy of a shared host than a
  // pass of lookups: at least 11 repetitions whatever --reps says (the
  // row's reps field is the count used).
  const unsigned open_reps = std::max(c.reps, 11u);
  Config oc = c;
  oc.reps = open_reps;
  auto o = interleave(open_reps, {open_once, umap_build});
  if (!open_failure.empty()) {
    report_failure(open_failure);
    return;
  }
  {
    Row r = lookup_row(oc, "open (mmap + validate), " + k_keys, o[0], "build unordered_map", o[1], 1e6, "us");
    r.ratio_meaning = "time to build an unordered_map over the keys / MmapSource::open + NamedDataMap::open time";
    r.note = "open maps the file anew each time: page faults on the metadata are included";
    if (open_reps != c.reps) r.note += "; " + std::to_string(open_reps) + " repetitions (at least 11, whatever --reps)";
    out.rows.push_back(std::move(r));
  }

  // Allocations: one open, then 1M lookups of present keys. First the
  // counter itself: if its replacements were not the ones called (another
  // allocator linked in), "0" would be a figure nobody counted.
  // Each way to allocate once: plain, array, nothrow and aligned operator
  // new, malloc, calloc, realloc of nothing, aligned_alloc and posix_memalign
  // (a mutation test left posix_memalign, and so aligned new, uncounted, and
  // a check of new and malloc alone passed).
  if (const long long b0 = allocation_count(); b0 >= 0) {
    void* volatile p[9] = {};
    p[0] = ::operator new(24);
    p[1] = ::operator new[](24);
    p[2] = ::operator new(24, std::nothrow);
    p[3] = ::operator new(24, std::align_val_t{64});
    p[4] = std::malloc(24);
    p[5] = std::calloc(3, 8);
    p[6] = std::realloc(nullptr, 24);
    p[7] = std::aligned_alloc(64, 64);
    void* q = nullptr;
    p[8] = ::posix_memalign(&q, 64, 24) == 0 ? q : nullptr;
    const long long n = allocation_count() - b0;
    ::operator delete(p[0]);
    ::operator delete[](p[1]);
    ::operator delete(p[2]);
    ::operator delete(p[3], std::align_val_t{64});
    for (int i = 4; i < 9; ++i) std::free(p[i]);
    if (n != 9)
      report_failure("the allocation counter counted " + std::to_string(n) +
                     " allocations for one each of operator new (plain, array, nothrow, aligned), malloc, calloc, "
                     "realloc, aligned_alloc and posix_memalign, not 9: no allocation figures");
  }
  const long long a0 = allocation_count();
  auto src = wdedup::MmapSource::open(ks.path.c_str());
  if (!src) {
    report_failure("reopening " + ks.path + ": " + wdedup::describe_failure(src.failure()));
    return;
  }
  auto mm = wdedup::NamedDataMap::open(*src);
  const long long a1 = allocation_count();
  if (!mm) {
    report_failure("reopening " + ks.path + ": " + wdedup::error_name(mm.error()));
    return;
  }
  std::uint64_t acc = 0;
  const std::size_t million = 1000000;
  QueryOrder order(present.size());
  for (std::size_t i = 0; i < million; ++i) {
    auto lr = mm->get_tensor_layout(present[order.next()]);
    acc += lr ? answer(*lr) : static_cast<std::uint64_t>(lr.error());
  }
  const long long a2 = allocation_count();
  consume(acc);
  // The right answers in this mapping (its addresses are not the first one's).
  std::vector<std::uint64_t> reopened_answers;
  for (const std::string& q : present) reopened_answers.push_back(answer(*mm->key_layout(index_of.at(q))));
  if (const std::uint64_t want = expected_sum(reopened_answers, million); acc != want)
    report_failure("1M get_tensor_layout on a reopened " + k + "-key store: the answers sum to " +
                   std::to_string(acc) + ", not " + std::to_string(want));
  for (int which = 0; which < 2; ++which) {
    Row ar;
    ar.group = "alloc";
    ar.name = which == 0 ? "heap allocations: open, " + k_keys : "heap allocations: 1M get_tensor_layout";
    ar.reps = 1;
    ar.unit = "allocs";
    if (a0 < 0) {
      ar.value = -1;
      ar.note = "not counted in this build (sanitizer or non-glibc)";
    } else {
      ar.value = static_cast<double>(which == 0 ? a1 - a0 : a2 - a1);
      ar.target = Target::value_at_most(0, "0");  // (planned_targets counts it where allocations are counted)
    }
    out.rows.push_back(std::move(ar));
  }
}

/// The big tensor's byte `i`: zero but for one byte a page, so writing it
/// faults every page in, and a copy that drops or shifts a page shows.
std::uint8_t big_byte(std::uint64_t i) { return i % 4096 == 0 ? static_cast<std::uint8_t>(i >> 12) : 0; }

/// Where `p` (n bytes) first differs from the big tensor, or n. A page at
/// a time (memcmp against zeros): a byte loop over 1 GiB takes a second.
std::uint64_t big_mismatch(const std::uint8_t* p, std::uint64_t n) {
  static const std::uint8_t zeros[4096] = {};
  for (std::uint64_t at = 0; at < n; at += 4096) {
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(4096, n - at));
    if (p[at] != big_byte(at) || std::memcmp(p + at + 1, zeros, len - 1) != 0)
      for (std::size_t i = 0; i < len; ++i)
        if (p[at + i] != big_byte(at + i)) return at + i;
  }
  return n;
}

/// The big tensor's filling and warming stop for a Ctrl-C after each chunk
/// of this many bytes (about 0.25 s of page faults on a 2-core VM).
constexpr std::size_t kStopChunk = std::size_t{64} << 20;

void run_data(const Config& c, Results& out) {
  const FailureScope scope(out);  // (a load that failed voids the rows)
  progress(c, "runtime: get_data / load_data_into: writing a %llu-byte tensor",
           static_cast<unsigned long long>(c.big_tensor));
  const auto big_size = static_cast<std::size_t>(c.big_tensor);  // (fits: check_sizes)
  // (Held twice at once: this array and the file, then the mapping and
  // dst below; kBigTensorCopies in harness.hpp, counted before the run.)
  // Filling, writing, checking and warming 1 GiB each take seconds here
  // (4, 3, 0.6 and 4 s on a 2-core VM, where a fresh page costs ~15 us to
  // fault in): a Ctrl-C acts between them, and within the filling and the
  // warming between chunks of kStopChunk bytes, not only at the step after.
  std::unique_ptr<std::uint8_t[]> big(new std::uint8_t[big_size]);
  for (std::size_t at = 0; at < big_size; at += kStopChunk) {
    const std::size_t end = std::min(big_size, at + kStopChunk);
    std::memset(big.get() + at, 0, end - at);
    for (std::size_t i = at; i < end; i += 4096) big[i] = big_byte(i);  // (kStopChunk: a multiple of 4096)
    stop_point();
  }
  std::uint8_t small[1024];
  for (std::size_t i = 0; i < sizeof small; ++i) small[i] = static_cast<std::uint8_t>(i * 7);
  wdedup::NamedDataStore store;
  if (auto a = store.add_named_data("small", wdedup::ByteSpan(small, sizeof small), 64); !a) {
    report_failure("building the get_data store: " + a.message());
    return;
  }
  if (auto a = store.add_named_data("big", wdedup::ByteSpan(big.get(), big_size), 64); !a) {
    report_failure("building the get_data store: " + a.message());
    return;
  }
  const std::string path = temp_path(c, "data.ptd");
  const RemoveOnExit remove{path};
  wdedup::WriteOptions wo;
  wo.fsync = false;
  if (auto w = wdedup::write_ptd_file(store, path, wo); !w) {
    report_failure("writing " + path + ": " + w.message());
    return;
  }
  big.reset();
  stop_point();
  std::optional<Opened> st = open_store(path);
  if (!st) return;
  const wdedup::NamedDataMap& map = *st->map;

  // Both tensors come back whole, checked once, untimed: the timed calls
  // below then only have to return the same view.
  const auto big_view = map.get_data("big");
  const auto small_view = map.get_data("small");
  if (!big_view || big_view->size() != c.big_tensor) {
    report_failure("get_data(\"big\") in " + path + ": " +
                   (big_view ? std::to_string(big_view->size()) + " bytes, not " + std::to_string(c.big_tensor)
                             : std::string(wdedup::error_name(big_view.error()))));
    return;
  }
  const auto* big_ptr = static_cast<const std::uint8_t*>(big_view->data());
  const std::size_t big_n = big_view->size();
  if (const std::uint64_t at = big_mismatch(big_ptr, big_n); at != big_n) {
    report_failure("get_data(\"big\") in " + path + ": byte " + std::to_string(at) + " is not the one written");
    return;
  }
  if (!small_view || small_view->size() != sizeof small ||
      std::memcmp(small_view->data(), small, sizeof small) != 0) {
    report_failure("get_data(\"small\") in " + path + ": not the 1024 bytes written");
    return;
  }
  stop_point();
  std::unique_ptr<std::uint8_t[]> dst(new std::uint8_t[big_n]);
  // Warm: fault in the mapping and the destination once, for both contenders.
  for (std::size_t at = 0; at < big_n; at += kStopChunk) {
    std::memcpy(dst.get() + at, big_ptr + at, std::min(kStopChunk, big_n - at));
    stop_point();
  }

  const std::string big_name = c.big_tensor == (1ull << 30) ? "1 GiB" : std::to_string(c.big_tensor) + " B";
  const std::size_t calls = c.quick ? 100000 : 1000000;
  // Each call must give the view checked above: the sum of pointers and
  // sizes says so, compared once the clock has stopped (a failed call adds
  // nothing, so it shows too).
  std::string get_data_failure;
  auto get_data = [&](const char* key, const wdedup::DataBuffer& right) {
    std::uint64_t acc = 0;
    const double t0 = bench::now_seconds();
    for (std::size_t i = 0; i < calls; ++i) {
      wdedup::Result<wdedup::DataBuffer> d = map.get_data(key);
      if (d) acc += reinterpret_cast<std::uintptr_t>(d->data()) + d->size();
    }
    const double t = bench::now_seconds() - t0;
    consume(acc);
    if (acc != std::uint64_t{calls} * (reinterpret_cast<std::uintptr_t>(right.data()) + right.size()))
      get_data_failure = std::string("get_data(\"") + key + "\") in " + path +
                         ": a timed call failed or gave another view than the first call";
    return t / static_cast<double>(calls);
  };
  progress(c, "runtime: get_data");
  auto g = interleave(c.reps, {[&] { return get_data("big", *big_view); },
                               [&] { return get_data("small", *small_view); }});
  if (!get_data_failure.empty()) {
    report_failure(get_data_failure);
    return;
  }
  {
    Row r = lookup_row(c, "get_data (mmap), " + big_name + " tensor", g[0], "get_data 1 KiB", g[1]);
    r.ratio_meaning = "get_data time for 1 KiB / for the big tensor (0.5 to 2: within 2x of each other)";
    r.target = Target{false, 0.5, 2.0, "within 2x"};
    r.note = "zero-copy view: the call's cost, the bytes are not touched";
    out.rows.push_back(std::move(r));
  }

  progress(c, "runtime: load_data_into vs memcpy");
  std::string load_failure;
  auto load = [&] {
    const double t0 = bench::now_seconds();
    wdedup::Status s = map.load_data_into("big", dst.get(), big_n);
    const double t = bench::now_seconds() - t0;
    if (!s) load_failure = std::string("load_data_into(\"big\") in ") + path + ": " + wdedup::error_name(s.error());
    consume(s ? dst[big_n / 2] : 0);
    return t;
  };
  auto copy = [&] {
    const double t0 = bench::now_seconds();
    std::memcpy(dst.get(), big_ptr, big_n);
    const double t = bench::now_seconds() - t0;
    consume(dst[big_n / 3]);
    return t;
  };
  auto l = interleave(c.reps, {load, copy});
  // The bytes, once the timing is done: memcpy wrote the same destination
  // between the timed loads, so the check loads once more into a buffer
  // that holds none of them.
  if (load_failure.empty()) {
    std::memset(dst.get(), 0xA5, big_n);
    if (wdedup::Status s = map.load_data_into("big", dst.get(), big_n); !s)
      load_failure = std::string("load_data_into(\"big\") in ") + path + ": " + wdedup::error_name(s.error());
    else if (std::memcmp(dst.get(), big_ptr, big_n) != 0)
      load_failure = std::string("load_data_into(\"big\") in ") + path + ": byte " +
                     std::to_string(big_mismatch(dst.get(), big_n)) + " is not the one written";
  }
  if (!load_failure.empty()) {
    report_failure(load_failure);
    return;
  }
  {
    Row r;
    r.group = "runtime";
    r.name = "load_data_into (mmap), " + big_name + " tensor";
    r.value = bench::gb_per_s(big_n, bench::median(l[0]));
    r.unit = "GB/s";
    r.baseline = "memcpy";
    r.baseline_value = bench::gb_per_s(big_n, bench::median(l[1]));
    r.baseline_unit = "GB/s";
    r.ratio = paired_ratio(l[1], l[0]);
    r.ratio_meaning = "memcpy time / load_data_into time, same bytes, same destination";
    r.target = Target::ratio_at_least(0.8, ">= 0.8x");
    r.reps = c.reps;
    r.samples = l[0];
    r.baseline_samples = l[1];
    out.rows.push_back(std::move(r));
  }
}

}  // namespace

void run_runtime(const Config& c, Results& out) {
  for (std::uint64_t keys : c.key_counts) run_lookups(c, keys, out);
  run_data(c, out);
}

}  // namespace wbench
