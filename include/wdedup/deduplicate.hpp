// wdedup/deduplicate.hpp — the build-time entry point: a Program in, one
// named-data store (identical bytes held once), the per-partition function
// maps and a report out. Build-time half.
//
// Store key naming scheme (documented in the README):
//   - a tensor name whose every occurrence, in every method and partition,
//     has the same bytes and layout is its own key: "layers.0.wq.weight";
//   - otherwise, if it is consistent within a method: "<method>/<name>";
//   - otherwise: "<method>/<partition>/<name>";
//   - a generated key that another key for other bytes or another layout
//     already took (a tensor literally named "decode/mask") gets "~1", "~2",
//     ... appended, in program order; one for the same bytes and layout is
//     shared, as it names the same data.
// A key therefore never names two different contents, and a function's
// tensor table (tensor name -> key) is enough to find all of its tensors.
#ifndef WDEDUP_DEDUPLICATE_HPP
#define WDEDUP_DEDUPLICATE_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <sched.h>

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "wdedup/detail/atomic.hpp"
#include "wdedup/detail/early_pairs.hpp"
#include "wdedup/detail/identity.hpp"
#include "wdedup/detail/min_max.hpp"
#include "wdedup/detail/name_index.hpp"
#include "wdedup/detail/thread_budget.hpp"
#include "wdedup/detail/threads.hpp"
#include "wdedup/expected.hpp"
#include "wdedup/function_map.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/program.hpp"
#include "wdedup/report.hpp"
#include "wdedup/strategy.hpp"
#include "wdedup/table.hpp"

namespace wdedup {

struct DedupOptions {
  /// Hashing/comparing threads; 0 = every core the calling thread may run
  /// on (its affinity mask), at most kMaxThreads. Results are identical for
  /// any value up to kMaxThreads; more is refused (InvalidArgument). The
  /// most it runs on: a program is given one thread (the calling one
  /// included) per detail::kWorkPerStartedThread of work, its bytes plus
  /// 1.5 KiB a tensor (4 MiB, unless WDEDUP_WORK_PER_STARTED_THREAD says
  /// otherwise; detail::threads_worth_starting), since a thread costs about
  /// 20 us to start and join: on 1024 threads, 20 tensors of 1 KiB took
  /// 22 ms rather than 5.5 us.
  unsigned threads = 0;
  /// Thread counts past this are refused rather than started: a count
  /// read from a command line or a config file could otherwise ask for
  /// billions of threads, and their per-thread scratch.
  static constexpr unsigned kMaxThreads = detail::kMaxWorkerThreads;
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
  const Tensor* tensor;
};

/// "<a>/<b>" made at its size in one step: a tensor's generated key, made
/// for every tensor whose name holds other bytes elsewhere. cat() appends
/// piece by piece: about 200 instructions a key against about 55 this way.
template <int = 0>
std::string slash_join(std::string_view a, std::string_view b) {
  std::string s(a.size() + 1 + b.size(), '/');
  std::char_traits<char>::copy(&s[0], a.data(), a.size());
  std::char_traits<char>::copy(&s[a.size() + 1], b.data(), b.size());
  return s;
}

template <int = 0>
std::string site_prefix(const Program& p, const TensorSite& s) {
  return cat("method ", quote_name(p.methods[s.method].name), " partition ", s.partition, " tensor ",
             quote_name(s.tensor->name), ": ");
}

/// The program flattened into sites (program order), one array per field
/// a later pass reads, so those passes stream small arrays instead of
/// touching every Tensor again (120 bytes each, a cache miss per tensor on
/// big programs).
struct Flat {
  Table<TensorSite> sites;
  Table<std::uint32_t> name_of;  ///< site -> name id
  Table<ByteSpan> inputs;        ///< site -> its bytes, for the identity engine
  Table<char> has_layout;        ///< site -> its tensor has a layout
  /// site -> the first site of its name, or UINT32_MAX at that first site:
  /// the identity engine's hints. Methods repeat their weights under the
  /// same names, so that is nearly always a duplicate, which the engine then
  /// settles with one comparison (a hint is only a candidate: the result is
  /// the same without it).
  Table<std::uint32_t> hint;
  /// The alignment every tensor asks for, or 0 if they differ.
  std::uint64_t alignment = 0;
  /// The largest tensor's size.
  std::uint64_t max_size = 0;
};

/// Checks names, alignments and layouts. Fills `flat` and `names` (a dense
/// id per distinct tensor name). The common path builds no strings: a
/// message is only made for the input that fails, and it names the first
/// error in program order. If `early` is given, each tensor that passes
/// and has a hint is offered to it with that hint (detail/early_pairs.hpp).
/// No check depends on bytes, so a program fails the same way either way.
template <class Early>
Expected<void> validate_program(const Program& program, Flat* flat, NameIndex* names, Early* early) {
  NameIndex method_names(program.methods.size());
  const std::size_t total = tensor_count(program);
  // Sized up front and written by index: push_back's bookkeeping (a size
  // and a capacity to load, check and store per array and tensor) cost
  // 0.6-0.9 ms of the 6-7 ms this check takes on 100,000 tensors. After an
  // error the rest is left unwritten; the caller drops `flat` then.
  flat->sites.resize(total);
  flat->inputs.resize(total);
  flat->has_layout.resize(total);
  flat->name_of.resize(total);
  flat->hint.resize(total);
  TensorSite* const site_of = flat->sites.data();
  ByteSpan* const input_of = flat->inputs.data();
  char* const has_layout = flat->has_layout.data();
  std::uint32_t* const name_of = flat->name_of.data();
  std::uint32_t* const hint_of = flat->hint.data();
  Table<std::uint32_t> stamp(total);       // name id -> serial of the partition that last used it
  Table<std::uint32_t> first_site(total);  // name id -> the first site with that name
  std::uint32_t site = 0;                  // sites so far
  std::uint32_t serial = 0;
  std::int64_t first_alignment = -1;  // -1: none seen yet
  bool uniform = true;
  std::uint64_t max_size = 0;
  for (std::uint32_t m = 0; m < program.methods.size(); ++m) {
    const Method& method = program.methods[m];
    if (method.name.empty())
      return Expected<void>(Error::InvalidName, cat("method #", m, " has an empty name"));
    // Method names go into generated keys and function names, which
    // ExecuTorch compares only up to a NUL (tensor names are checked below).
    if (const std::size_t nul = method.name.find('\0'); nul != std::string::npos)
      return Expected<void>(Error::InvalidName, cat("method name ", quote_name(method.name),
                                                    " contains a NUL byte at offset ", nul));
    // Keys are made of it too ("<method>/<name>"), and a key must be UTF-8.
    if (std::string problem = utf8_problem(method.name, true); !problem.empty())
      return Expected<void>(Error::InvalidName, cat("method name ", problem));
    // The name index keeps a name's size in 32 bits (a longer name would
    // be indexed, and named in keys, by its first size mod 2^32 bytes), and
    // a .ptd file cannot hold a longer string anyway.
    if (method.name.size() > UINT32_MAX)
      return Expected<void>(Error::InvalidName, cat("method #", m, "'s name is ", method.name.size(),
                                                    " bytes long; at most ", UINT32_MAX));
    bool new_method = false;
    method_names.find_or_add(method.name, &new_method);
    if (!new_method) {  // (the error path: the first one is looked for only here)
      std::size_t first = 0;
      while (program.methods[first].name != method.name) ++first;
      return Expected<void>(Error::InvalidName, cat("method name ", quote_name(method.name), " is used twice (methods #",
                                                    first, " and #", m, ")"));
    }
    for (std::uint32_t p = 0; p < method.partitions.size(); ++p, ++serial) {
      const Partition& part = method.partitions[p];
      auto where = [&] { return cat("method ", quote_name(method.name), " partition ", p, ": "); };
      const auto count = static_cast<std::uint32_t>(part.tensors.size());
      // (An overlong name is refused below before its hash is taken: it is
      // hashed as empty, not read whole, 4 GiB and more, for nothing.)
      auto name_at = [&](std::size_t j) -> std::string_view {
        const std::string& name = part.tensors[j].name;
        return name.size() > UINT32_MAX ? std::string_view() : std::string_view(name);
      };
      HashAhead<decltype(name_at)> ahead(count, name_at, names->index());
      for (std::uint32_t t = 0; t < count; ++t) {
        const Tensor& tensor = part.tensors[t];
        if (tensor.name.empty())
          return Expected<void>(Error::InvalidName, cat(where(), "tensor #", t, " has an empty name"));
        if (tensor.name.size() > UINT32_MAX)  // (see the method name's check)
          return Expected<void>(Error::InvalidName, cat(where(), "tensor #", t, "'s name is ", tensor.name.size(),
                                                        " bytes long; at most ", UINT32_MAX));
        bool fresh = false;
        const std::uint32_t id = names->find_or_add(tensor.name, ahead.take(t), &fresh);
        std::uint32_t hint = UINT32_MAX;
        if (fresh) {  // ids are dense, in order
          stamp[id] = UINT32_MAX;
          first_site[id] = site;
        } else {
          hint = first_site[id];
        }
        hint_of[site] = hint;
        if (stamp[id] == serial) {  // (the error path, as the method's)
          std::uint32_t first = 0;
          while (part.tensors[first].name != tensor.name) ++first;
          return Expected<void>(Error::InvalidName, cat(where(), "tensor name ", quote_name(tensor.name),
                                                        " is used twice (tensors #", first, " and #", t, ")"));
        }
        stamp[id] = serial;
        name_of[site] = id;
        // (A name with a NUL byte, or not UTF-8, is no key: check_entry
        // says so.) Only a name's first occurrence is scanned: one found in
        // the index has the bytes of one that passed this check, as any
        // that failed ended the check there. Scanning every name took
        // 100,000 calls of memchr and 2.3M instructions on 100,000 small
        // tensors (callgrind); half of them now, in one pass each.
        const bool fine = (!fresh || is_key_text(tensor.name)) &&
                          tensor.alignment > 0 && static_cast<std::uint64_t>(tensor.alignment) <= kMaxAlignment &&
                          (tensor.bytes.data() != nullptr || tensor.bytes.empty()) &&
                          (!tensor.layout || tensor.layout->nbytes() == std::optional<std::uint64_t>(tensor.bytes.size()));
        if (!fine) return check_entry(where(), tensor.name, tensor.bytes, tensor.alignment, tensor.layout, "tensor");
        if (tensor.alignment != first_alignment) {
          if (first_alignment >= 0) uniform = false;
          first_alignment = tensor.alignment;
        }
        site_of[site] = TensorSite{m, p, &tensor};
        input_of[site] = tensor.bytes;
        max_size = detail::max_of<std::uint64_t>(max_size, tensor.bytes.size());
        has_layout[site] = tensor.layout.has_value();
        if (early != nullptr && hint != UINT32_MAX) early->offer(hint, site, input_of[hint], tensor.bytes);
        ++site;
      }
    }
  }
  flat->alignment = uniform && first_alignment > 0 ? static_cast<std::uint64_t>(first_alignment) : 0;
  flat->max_size = max_size;
  return {};
}

/// Whether a policy's name is a null pointer (which every message and the
/// report would read as a C string). std::nullptr_t too: it converts to a
/// std::string_view in C++17, so the policy checks let it through, and a
/// std::string assigned it would read address 0.
template <class N>
constexpr bool is_null_name(const N& name) noexcept {
  if constexpr (std::is_pointer<N>::value) return name == nullptr;
  else return std::is_same<N, std::nullptr_t>::value;
}

/// `name` into `out`: a std::nullptr_t (refused first, by is_null_name) is
/// not assigned, which would not compile cleanly (a null strlen).
template <class N>
void assign_name(std::string& out, N&& name) {
  if constexpr (!std::is_same<std::decay_t<N>, std::nullptr_t>::value) out = std::forward<N>(name);
}

/// A policy's name as a view ("" for a null pointer, which is refused first).
template <class N>
std::string_view name_view(const N& name) noexcept {
  if (is_null_name(name)) return {};
  return std::string_view(name);
}

/// What the strategy policy decides for a program, asked before any byte is
/// read: whether it takes the program, and each (method, partition)'s blob
/// key and function name. It is the only part of deduplicate() made per
/// policy: the rest (deduplicate_with) is compiled once per hash. Compiled
/// per policy, each policy a translation unit used cost it the whole
/// pipeline again (a test file with twelve policies took 45 s with gcc -O2).
struct PolicyPlan {
  std::string_view name;
  Expected<void> valid;           ///< Policy::validate's verdict
  Expected<void> functions_made;  ///< reported after the keys' errors
  FunctionMaps functions;         ///< without their tensor tables
  std::vector<std::string> blob_order;
  std::vector<std::uint32_t> function_blob;  ///< function -> index in blob_order
};

/// The blobs and function maps `Policy` gives `program`, into `plan`.
template <class Policy>
Expected<void> plan_functions(const Program& program, PolicyPlan& plan) {
  IdIndex blob_index;  // blob key -> index in plan.blob_order
  auto blob_of = [&](std::uint32_t b) -> std::string_view { return plan.blob_order[b]; };
  std::vector<std::string> function_ids;  // blob + '\0' + function name
  IdIndex function_index;
  auto function_id_of = [&](std::uint32_t f) -> std::string_view { return function_ids[f]; };
  // The method index is the std::size_t the policy check (strategy.hpp)
  // and the README give it, and both indexes go to the policy as const
  // lvalues, as the check passes them, so a policy it accepts is one these
  // calls compile with (overloads on the index types and references
  // included) and none can change the loop's counters.
  for (std::size_t mi = 0; mi < program.methods.size(); ++mi) {
    const std::size_t m = mi;
    const Method& method = program.methods[m];
    for (std::uint32_t pi = 0; pi < method.partitions.size(); ++pi) {
      const std::uint32_t p = pi;
      FunctionMap f;
      f.method = method.name;
      f.partition_index = p;
      // (A policy may return a const char*: a null one would crash the
      // string it is assigned to. Each name is copied before the next call:
      // a policy may format both into one buffer of its own.)
      // Each name is checked before the next call, so the first refused
      // ends the calls (README: a policy is not asked for a function name
      // once its blob key was refused). Looked up by name (a backend's
      // strcmp among them): see unusable_name.
      auto refuse = [&](const char* what, const std::string& why) {
        return Expected<void>(Error::InvalidName, cat("policy ", plan.name, ": method ", quote_name(method.name),
                                                      " partition ", p, ": ", what, why));
      };
      auto blob_key = Policy::blob_key(program, m, p);
      if (is_null_name(blob_key)) return refuse("blob key", " is a null pointer");
      assign_name(f.blob_key, std::move(blob_key));
      if (std::string why = unusable_name(f.blob_key); !why.empty()) return refuse("blob key", why);
      auto function_name = Policy::function_name(program, m, p);
      if (is_null_name(function_name)) return refuse("function name", " is a null pointer");
      assign_name(f.function_name, std::move(function_name));
      if (std::string why = unusable_name(f.function_name); !why.empty()) return refuse("function name", why);
      std::string fid = f.blob_key + '\0' + f.function_name;
      const std::uint64_t fh = function_index.hash(fid);
      if (const std::uint32_t first = function_index.find(fid, fh, function_id_of); first != IdIndex::kNone) {
        const FunctionMap& had = plan.functions.functions[first];  // ids are in function order
        return Expected<void>(Error::InvalidName,
                              cat("policy ", plan.name, " gave function name ", quote_name(f.function_name),
                                  " in blob ", quote_name(f.blob_key), " to two partitions: method ",
                                  quote_name(had.method), " partition ", had.partition_index, " and method ",
                                  quote_name(method.name), " partition ", p));
      }
      function_ids.push_back(std::move(fid));
      function_index.insert(function_ids.back(), fh, static_cast<std::uint32_t>(function_ids.size() - 1),
                            function_id_of);
      const std::uint64_t bh = blob_index.hash(f.blob_key);
      std::uint32_t b = blob_index.find(f.blob_key, bh, blob_of);
      if (b == IdIndex::kNone) {
        b = static_cast<std::uint32_t>(plan.blob_order.size());
        plan.blob_order.push_back(f.blob_key);
        blob_index.insert(plan.blob_order.back(), bh, b, blob_of);
      }
      plan.function_blob.push_back(b);
      plan.functions.functions.push_back(std::move(f));
    }
  }
  return {};
}

template <class Hash>
Expected<DedupResult> deduplicate_with(const Program& program, const DedupOptions& options, const Hash& hash,
                                       PolicyPlan& plan, double t0, double t_id);

template <class Policy, class Hash>
Expected<DedupResult> deduplicate_impl(const Program& program, const DedupOptions& options, const Hash& hash) {
  const double t0 = monotonic_seconds();
  if (name_view(Policy::name).empty())  // (a null name's view is empty too)
    return BuildError{Error::InvalidArgument, cat("the strategy policy's name is ",
                                                  is_null_name(Policy::name) ? "null" : "empty",
                                                  "; it names the policy in reports and messages")};
  // Messages name the policy as it is (a byte it holds would be printed raw).
  if (const std::size_t nul = name_view(Policy::name).find('\0'); nul != std::string_view::npos)
    return BuildError{Error::InvalidArgument, cat("the strategy policy's name holds a NUL byte at offset ", nul,
                                                  "; it names the policy in reports and messages")};

  if (options.threads > DedupOptions::kMaxThreads)
    return BuildError{Error::InvalidArgument, cat("DedupOptions::threads is ", options.threads, "; at most ",
                                                  DedupOptions::kMaxThreads, " (0: every core)")};
  PolicyPlan plan;
  plan.name = name_view(Policy::name);
  const double t_id = monotonic_seconds();
  plan.valid = Policy::validate(program);
  // Made before the checks so that, with two or more threads, a thread can
  // fill their tensor tables while the name check runs (see build_tables);
  // their errors are reported where they were before, after the keys'.
  if (plan.valid) plan.functions_made = plan_functions<Policy>(program, plan);
  return deduplicate_with(program, options, hash, plan, t0, t_id);
}

/// Everything after the policy's say: the checks, the identity, the keys,
/// the store, the tables and the report.
template <class Hash>
Expected<DedupResult> deduplicate_with(const Program& program, const DedupOptions& options, const Hash& hash,
                                       PolicyPlan& plan, double t0, double t_id) {
  const std::size_t total = tensor_count(program);
  Flat flat;
  NameIndex names(total);
  // `threads` as asked (or every core), which the report gives; `started`,
  // at most that, as many as the program's work is worth starting: on a
  // many-core host a small program spent more on starting threads than on
  // its work (20 tensors of 1 KiB: 5.5 us on 1 thread, 22 ms on 1024).
  const unsigned threads = options.threads != 0 ? options.threads : hardware_threads();
  const unsigned started = threads_worth_starting(program, total, threads);
  // ---- 0. checks, and the first comparisons ------------------------------------
  // The name check finds each tensor's hint (the first tensor of its name)
  // and queues the small ones with it; with two or more threads the others
  // compare the queued pairs while the check goes on, and with one the
  // check compares them when it ends (detail/early_pairs.hpp). The engine
  // then takes their verdicts. 100,000 small tensors of 4 KiB, medians of
  // 15 calls: 41.3 ms against 43.8-44.0 ms with the engine comparing them,
  // 1 thread; 24.3-24.4 ms against 26.6-27.1 ms, 2 threads (with the
  // tables below, 23.8-24.2 ms).
  // A program the policy refuses is refused whatever its bytes: its names
  // are checked first (their errors come first), and no byte is read.
  if (!plan.valid) {
    if (Expected<void> n = validate_program<EarlyPairs<Hash>>(program, &flat, &names, nullptr); !n)
      return n.build_error();
    // Named: a caller may try several policies, and a policy of its own
    // may not say which it is.
    return BuildError{plan.valid.error(), cat("policy ", plan.name, " refused the program: ", plan.valid.message())};
  }
  // ---- 0b. blobs and function maps (plan_functions) -----------------------------
  DedupResult out;
  out.functions = std::move(plan.functions);
  const std::vector<std::string>& blob_order = plan.blob_order;
  const std::vector<std::uint32_t>& function_blob = plan.function_blob;
  const Expected<void>& functions_made = plan.functions_made;
  // Each function's tensor table with every key its tensor's own name: what
  // it is for a name consistent everywhere (most programs); the keys stage
  // patches the others. It reads only the program, so a comparing thread
  // builds it while the name check runs: until the check reaches tensors
  // with hints that thread has nothing to compare (100,000 small tensors,
  // 2 threads: the first method's 50,000 names). The checking thread may
  // need them first (0c, below): whichever claims them builds them.
  // 0: not claimed, 1: being built, 2: built.
  detail::Atomic<int> tables{0};
  // A row made by copy construction, straight into the table: emplace_back
  // initialises the row from this conversion's result, which GCC and Clang
  // build in place (no row or string is moved). Filling a default row with
  // assign() instead called libstdc++'s out-of-line _M_replace for each of
  // the 200,000 strings (100,000 small tensors, callgrind: the tables took
  // 18.3M instructions that way, 13.3M as a pushed temporary, about 8.4M this way).
  struct RowOf {
    const std::string* name;
    operator FunctionTensor() const { return FunctionTensor{*name, *name}; }
  };
  auto fill_tables = [&] {
    std::size_t fi = 0;  // functions are in program order
    for (const Method& method : program.methods)
      for (const Partition& part : method.partitions) {
        Table<FunctionTensor>& table = out.functions.functions[fi++].tensors;
        table.clear();
        table.reserve(part.tensors.size());
        for (const Tensor& tensor : part.tensors) table.emplace_back(RowOf{&tensor.name});
      }
  };
  // Out of memory while filling them, the claim is handed back (0), so a
  // thread waiting in ensure_tables claims them itself instead of waiting
  // forever for a thread that has stopped.
  auto build_tables = [&] {
    call_or_undo(fill_tables, [&] { tables.store(0, detail::Order::release); });
    tables.store(2, detail::Order::release);
  };
  // Acquire on success: a claim may take tables handed back (0, release)
  // by a thread that ran out of memory while filling them, and clears
  // what that thread wrote; a relaxed claim did not synchronise with it.
  auto claim_tables = [&] {
    int expected = 0;
    return tables.compare_exchange_strong(expected, 1, detail::Order::acquire, detail::Order::relaxed);
  };
  // The tables, built: by this thread if no other has claimed them, else
  // once the thread that did has finished them.
  auto ensure_tables = [&] {
    for (;;) {
      if (claim_tables()) return build_tables();
      if (tables.load(detail::Order::acquire) == 2) return;
      sched_yield();
    }
  };
  // Set by finish(): what a run it is discarded after must undo.
  bool tables_patched = false, index_released = false;
  double identity_seconds = 0;
  IdentityStats istats;
  // The engine's seed, this call's own (IdentityOptions::seed): the pairs'
  // fingerprints, made during the name check, are made under it too.
  const std::uint64_t identity_seed = unpredictable_u64() | 1;
  // ---- 1-5. everything else, given the pairs' verdicts ------------------------
  // `workers`: threads for it (1: the calling thread alone).
  auto finish = [&](const EarlyVerdicts& verdicts, unsigned workers) -> Expected<void> {
    IdentityOptions iopts;
    iopts.threads = workers;
    iopts.seed = identity_seed;
    // ---- 1. which bytes are identical (parallel, exact) ----------------------
    std::vector<std::uint32_t> content = find_identical(flat.inputs, flat.hint, hash, iopts, &istats, verdicts);
    identity_seconds = monotonic_seconds() - t_id;
    const Table<TensorSite>& sites = flat.sites;
    const Table<std::uint32_t>& name_of = flat.name_of;
    const Table<ByteSpan>& inputs = flat.inputs;
    const Table<char>& has_layout = flat.has_layout;

    // Content ids in order of first occurrence, written over the
    // representatives (an input's representative comes first, so it is
    // already a content id when read): no second per-site array.
    Table<std::uint32_t> content_first;  // content id -> first site
    {
      std::size_t ncontent = 0;
      for (std::uint32_t i = 0; i < content.size(); ++i) ncontent += content[i] == i;
      content_first.reserve(ncontent);
      for (std::uint32_t i = 0; i < content.size(); ++i) {
        if (content[i] == i) {
          content[i] = static_cast<std::uint32_t>(content_first.size());
          content_first.push_back(i);
        } else {
          content[i] = content[content[i]];
        }
      }
    }

    // ---- 2. keys ---------------------------------------------------------------
    // Is each name consistent (one content, one layout) everywhere, and within
    // each method? Flat arrays indexed by name id; sites are in method order.
    const std::size_t nsites = sites.size(), nnames = names.size();
    // Two sites without layouts are settled without touching their Tensors:
    // on big programs an earlier site's Tensor is a cache miss.
    auto same_identity = [&](std::uint32_t a, std::uint32_t b) {
      if (content[a] != content[b] || has_layout[a] != has_layout[b]) return false;
      return !has_layout[a] || sites[a].tensor->layout == sites[b].tensor->layout;
    };
    Table<std::uint32_t> global_first;
    Table<char> global_consistent;
    Table<char> method_consistent_at;  // site -> its name is consistent within its method
    bool all_consistent = true;
    global_first.assign(nnames, UINT32_MAX);
    global_consistent.assign(nnames, 1);
    method_consistent_at.assign(nsites, 1);
    {
      Table<std::uint32_t> method_first, method_stamp;
      Table<char> consistent;
      method_first.assign(nnames, UINT32_MAX);
      method_stamp.assign(nnames, UINT32_MAX);
      consistent.assign(nnames, 1);
      std::size_t begin = 0;
      while (begin < nsites) {
        const std::uint32_t m = sites[begin].method;
        std::size_t end = begin;
        for (; end < nsites && sites[end].method == m; ++end) {
          const std::uint32_t n = name_of[end], i = static_cast<std::uint32_t>(end);
          if (global_first[n] == UINT32_MAX) {
            global_first[n] = i;
          } else if (global_consistent[n] && !same_identity(global_first[n], i)) {
            global_consistent[n] = 0;
            all_consistent = false;
          }
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
    // Key ids in order of first use. A consistent name is its own key, found
    // by name id (no string is built or hashed again). Other names get a
    // generated key, which never takes a consistent name with other contents
    // nor another generated key with other contents: it gets "~1", "~2", ...
    struct KeySlot {
      std::uint32_t text;  ///< name id, or index in `generated`
      bool is_generated;
      std::uint32_t first_site;
      std::uint64_t alignment;
    };
    Table<KeySlot> slots;
    slots.reserve(nnames);  // as many as names, unless some are not consistent
    // A slot asks for the alignment all tensors share, if they do (then no
    // site's alignment needs reading again), else for 1 until its sites' lcm.
    const std::uint64_t slot_alignment = flat.alignment != 0 ? flat.alignment : 1;
    std::vector<std::string> generated;
    auto key_text = [&](const KeySlot& k) -> std::string_view {
      return k.is_generated ? std::string_view(generated[k.text]) : names.name(k.text);
    };
    auto key_text_of = [&](std::size_t key) { return key_text(slots[key]); };
    // Where some names are not consistent: key text -> key id of every key
    // made so far, generated or a name. Once every key is made it is the
    // store's key index, and becomes it (with every name consistent, the
    // name index does), so a generated key is hashed and inserted once, not
    // again for the store (100,000 generated keys: 19M fewer instructions
    // a call, callgrind, of 140M after the engine). It hashes as the name
    // index does, so a candidate key is hashed once for both lookups.
    IdIndex key_index = IdIndex::sharing_hash_with(names.index());
    const bool index_keys = !all_consistent;
    if (index_keys) {
      // Room for every key there can be, made once (grown from empty it was
      // rehashed 14 times on the way to 100,000 keys, each time reading
      // every key's text again): each consistent name, and a generated key
      // at each site whose name is not.
      std::size_t inconsistent = 0, consistent_names = 0;
      for (std::size_t i = 0; i < nsites; ++i) inconsistent += !global_consistent[name_of[i]];
      for (std::size_t n = 0; n < nnames; ++n) consistent_names += global_consistent[n] != 0;
      key_index.reserve(consistent_names + inconsistent, key_text_of);
      generated.reserve(inconsistent);
    }
    Table<std::uint32_t> key_of_name, key_of_site;
    key_of_name.assign(nnames, IdIndex::kNone);
    key_of_site.assign(nsites, 0);
    // Each buffer (content) is placed at the lcm of every alignment asked of
    // its bytes, which is the lcm over its keys' alignments. Folded in site by
    // site with the keys', so an overflow is reported at the first tensor, in
    // program order, that causes it.
    Table<std::uint64_t> buffer_align;
    buffer_align.assign(content_first.size(), slot_alignment);
    // Slots are filled field by field in place: GCC built a pushed KeySlot
    // on the stack in pieces and copied it in 16-byte halves, which cannot be
    // forwarded from the smaller stores (a stall per key; 100,000 tensors:
    // this loop took 0.60 ms that way, 0.44-0.45 ms this way).
    auto add_slot = [&](std::uint32_t text, bool is_generated, std::uint32_t site) {
      KeySlot& k = slots.emplace_back();
      k.text = text;
      k.is_generated = is_generated;
      k.first_site = site;
      k.alignment = slot_alignment;
    };
    auto key_of_consistent = [&](std::uint32_t n, std::uint32_t site) {
      if (key_of_name[n] == IdIndex::kNone) {
        const auto id = static_cast<std::uint32_t>(slots.size());
        key_of_name[n] = id;
        add_slot(n, false, site);
        if (index_keys) {
          const std::string_view name = names.name(n);
          key_index.insert(name, key_index.hash(name), id, key_text_of);
        }
      }
      return key_of_name[n];
    };
    // The key a generated candidate (hash `h`, in both indexes) resolves to,
    // or kNone if it is free. `*taken` is set when it belongs to other
    // contents. A consistent name is its own key even before its slot is
    // made, so the names come first; what key_index then finds is a
    // generated key.
    auto owner_of = [&](std::string_view key, std::uint64_t h, std::uint32_t site, bool* taken) {
      const std::uint32_t n = names.find(key, h);
      if (n != NameIndex::kNone && global_consistent[n]) {
        *taken = !same_identity(global_first[n], site);
        return *taken ? IdIndex::kNone : key_of_consistent(n, site);
      }
      const std::uint32_t k = key_index.find(key, h, key_text_of);
      *taken = k != IdIndex::kNone && !same_identity(slots[k].first_site, site);
      return *taken ? IdIndex::kNone : k;
    };
    for (std::uint32_t i = 0; i < nsites; ++i) {
      const TensorSite& s = sites[i];
      std::uint32_t id;
      if (global_consistent[name_of[i]]) {
        id = key_of_consistent(name_of[i], i);
      } else {
        const std::string& mname = program.methods[s.method].name;
        const std::string& tname = s.tensor->name;
        std::string k = method_consistent_at[i] ? slash_join(mname, tname) : cat(mname, "/", s.partition, "/", tname);
        std::uint64_t h = key_index.hash(k);
        bool taken = false;
        id = owner_of(k, h, i, &taken);
        if (taken) {
          const std::string candidate = std::move(k);
          for (unsigned n = 1; taken; ++n) {
            k = cat(candidate, "~", n);
            h = key_index.hash(k);
            id = owner_of(k, h, i, &taken);
          }
        }
        if (id == IdIndex::kNone) {
          id = static_cast<std::uint32_t>(slots.size());
          generated.push_back(std::move(k));
          add_slot(static_cast<std::uint32_t>(generated.size() - 1), true, i);
          key_index.insert(generated.back(), h, id, key_text_of);
        }
      }
      key_of_site[i] = id;
      if (flat.alignment != 0) continue;  // one alignment for all: every lcm is that
      KeySlot& slot = slots[id];
      const auto align = static_cast<std::uint64_t>(s.tensor->alignment);
      const std::optional<std::uint64_t> l = lcm_alignment(slot.alignment, align);
      if (!l)
        return BuildError{Error::InvalidAlignment,
                          cat(site_prefix(program, s), "lcm of alignments ", slot.alignment, " and ", align,
                              " for key ", quote_name(key_text(slot)), " exceeds ", kMaxAlignment)};
      slot.alignment = *l;
      std::uint64_t& buffer = buffer_align[content[i]];
      const std::optional<std::uint64_t> b = lcm_alignment(buffer, align);
      if (!b)
        return BuildError{Error::InvalidAlignment,
                          cat(site_prefix(program, s), "lcm of alignments ", buffer, " and ", align, " exceeds ",
                              kMaxAlignment, ": key ", quote_name(key_text(slot)),
                              " shares its bytes with keys whose alignments' lcm is ", buffer)};
      buffer = *b;
    }

    // ---- 3. function tables ------------------------------------------------------
    if (!functions_made) return functions_made.build_error();
    ensure_tables();
    // Keys of names not consistent everywhere: the generated ones.
    if (!all_consistent) {
      tables_patched = true;
      std::size_t site = 0;  // sites are in program order, like functions
      for (FunctionMap& f : out.functions.functions)
        for (FunctionTensor& t : f.tensors) {
          if (!global_consistent[name_of[site]]) {
            const std::string_view key = key_text_of(key_of_site[site]);
            t.key.assign(key.data(), key.size());
          }
          ++site;
        }
    }
    // ---- 4. the store -----------------------------------------------------------------
    // Keys in order of first use, each with the lcm of its occurrences'
    // alignments; buffers in order of first use (content ids already are), each
    // with the lcm of its keys' alignments (buffer_align, above).
    // The store's key index is not built again: with every name consistent
    // (most programs), key k is name k, keys being made in the order names
    // were first seen, so the name index already is it: the same strings
    // under the same hash with the same ids (100k tensors: 2-2.5 ms less).
    // It is handed over, and finds nothing after that. Otherwise key_index
    // is, made with the keys.
#ifndef NDEBUG
    for (std::size_t k = 0; !index_keys && k < slots.size(); ++k)
      assert(!slots[k].is_generated && slots[k].text == k);
    assert(index_keys || slots.size() == nnames);
#endif
    // The store and the report: two tasks that share nothing they write, so
    // with two or more threads they run side by side (100,000 small tensors:
    // about 1.7 and 1 ms).
    auto build_store = [&] {
      StoreAccess::reserve(out.store, content_first.size(), slots.size());
      for (std::uint32_t c = 0; c < content_first.size(); ++c)
        StoreAccess::add_buffer(out.store, inputs[content_first[c]], buffer_align[c]);
      auto layout_of = [&](const KeySlot& slot) {
        return has_layout[slot.first_site] ? sites[slot.first_site].tensor->layout : std::nullopt;
      };
      for (const KeySlot& slot : slots)
        StoreAccess::add_key_unindexed(out.store, key_text(slot), content[slot.first_site], slot.alignment,
                                       layout_of(slot));
      if (index_keys) {
        StoreAccess::set_key_index(out.store, std::move(key_index));
      } else {
        StoreAccess::set_key_index(out.store, names.release_index());
        index_released = true;
      }
    };
    // ---- 5. the report (beside the store) ----------------------------------------------
    // Two passes over the sites (by method, then by blob) and one over the
    // contents, with one 16-byte tally per content: on 100,000 tensors the
    // nine per-content arrays, the growing lists and the sort this replaces
    // cost more in fresh pages than in work.
    Report& r = out.report;
    auto build_report = [&] {
      r.strategy = std::string(plan.name);
      r.threads = threads;
      r.methods = program.methods.size();
      r.functions = out.functions.functions.size();
      r.blobs = blob_order.size();
      r.tensors = sites.size();
      // What the store will hold (built beside this): a buffer per content, a
      // key per slot.
      const std::size_t ncontent = content_first.size();
      // Identical bytes have one size: a site's own size is its content's.
      auto size_of = [&](std::uint32_t c) -> std::uint64_t { return inputs[content_first[c]].size(); };
      r.keys = slots.size();
      r.buffers = ncontent;
      for (std::uint32_t c = 0; c < ncontent; ++c) r.bytes_stored += size_of(c);
      struct Tally {
        std::uint32_t uses;
        std::uint32_t last_method;  // the last method that used it
        std::uint32_t last_blob;    // the last blob that used it
        std::uint32_t shared;       // bit 0: several methods use it; bit 1: several blobs
      };
      Table<Tally> tally;
      tally.assign(ncontent, Tally{0, UINT32_MAX, UINT32_MAX, 0});
      // Per method (its sites are one range). A content met again in a later
      // method counts as shared for that method, and, the first time, for the
      // method it was last seen in (then its only one).
      r.per_method.resize(program.methods.size());
      {
        std::size_t i = 0;
        for (std::uint32_t m = 0; m < program.methods.size(); ++m) {
          MethodReport& mr = r.per_method[m];
          mr.method = program.methods[m].name;
          mr.partitions = static_cast<std::uint32_t>(program.methods[m].partitions.size());
          for (; i < sites.size() && sites[i].method == m; ++i) {
            Tally& t = tally[content[i]];
            const std::uint64_t size = inputs[i].size();
            ++t.uses;
            ++mr.tensors;
            mr.bytes_in += size;
            if (t.last_method == m) continue;
            mr.bytes_distinct += size;
            if (t.last_method == UINT32_MAX) {
              mr.bytes_attributed += size;
            } else {
              if (!(t.shared & 1)) {
                t.shared |= 1;
                r.per_method[t.last_method].bytes_shared_with_other_methods += size;
              }
              mr.bytes_shared_with_other_methods += size;
            }
            t.last_method = m;
          }
          r.bytes_in += mr.bytes_in;
        }
        for (MethodReport& mr : r.per_method) mr.bytes_saved = mr.bytes_in - mr.bytes_attributed;
      }
      r.bytes_saved = r.bytes_in - r.bytes_stored;
      // Per blob (its functions' sites, functions in program order), the same way.
      const std::size_t nfunctions = out.functions.functions.size();
      std::vector<std::size_t> function_begin(nfunctions + 1, 0);
      for (std::size_t fi = 0; fi < nfunctions; ++fi)
        function_begin[fi + 1] = function_begin[fi] + out.functions.functions[fi].tensors.size();
      // Each blob's functions, in program order, listed once (a counting
      // sort): walking every function for every blob took blobs x functions
      // steps, 7 s for 80,000 one-partition blobs.
      const std::size_t nblobs = blob_order.size();
      std::vector<std::uint32_t> blob_begin(nblobs + 1, 0), by_blob(nfunctions);
      for (std::uint32_t fi = 0; fi < nfunctions; ++fi) ++blob_begin[function_blob[fi] + 1];
      for (std::size_t b = 0; b < nblobs; ++b) blob_begin[b + 1] += blob_begin[b];
      {
        std::vector<std::uint32_t> next(blob_begin.begin(), blob_begin.end() - 1);
        for (std::uint32_t fi = 0; fi < nfunctions; ++fi) by_blob[next[function_blob[fi]]++] = fi;
      }
      r.per_blob.resize(nblobs);
      for (std::uint32_t b = 0; b < nblobs; ++b) {
        BlobReport& br = r.per_blob[b];
        br.blob_key = blob_order[b];
        br.functions = blob_begin[b + 1] - blob_begin[b];
        for (std::uint32_t bi = blob_begin[b]; bi < blob_begin[b + 1]; ++bi) {
          const std::uint32_t fi = by_blob[bi];
          for (std::size_t i = function_begin[fi]; i < function_begin[fi + 1]; ++i) {
            Tally& t = tally[content[i]];
            const std::uint64_t size = inputs[i].size();
            ++br.tensors;
            br.bytes_in += size;
            if (t.last_blob == b) continue;
            br.bytes_distinct += size;
            if (t.last_blob != UINT32_MAX) {
              r.bytes_shared_across_blobs += size;
              if (!(t.shared & 2)) {
                t.shared |= 2;
                r.per_blob[t.last_blob].bytes_shared_across += size;
              }
              br.bytes_shared_across += size;
            }
            t.last_blob = b;
          }
        }
        br.bytes_shared_inside = br.bytes_in - br.bytes_distinct;
      }
      // Alias groups: count every one, keep the largest five (largest saving
      // first, ties in order of first use) in a small sorted array.
      constexpr std::size_t kTop = 5;
      std::pair<std::uint64_t, std::uint32_t> top[kTop];  // (bytes saved, content)
      std::size_t ntop = 0;
      for (std::uint32_t c = 0; c < ncontent; ++c) {
        const std::uint32_t uses = tally[c].uses;
        // (Empty tensors share one empty buffer, which saves nothing.)
        if (uses < 2 || size_of(c) == 0) continue;
        ++r.alias_groups;
        const std::uint64_t saved = size_of(c) * (uses - 1);
        if (ntop == kTop && saved <= top[kTop - 1].first) continue;  // later c loses ties
        std::size_t k = ntop < kTop ? ntop++ : kTop - 1;
        for (; k > 0 && top[k - 1].first < saved; --k) top[k] = top[k - 1];
        top[k] = {saved, c};
      }
      std::uint32_t top_keys[kTop] = {};
      if (ntop > 0)
        for (const KeySlot& slot : slots) {
          const std::uint32_t c = content[slot.first_site];
          for (std::size_t k = 0; k < ntop; ++k) top_keys[k] += top[k].second == c;
        }
      for (std::size_t k = 0; k < ntop; ++k) {
        const std::uint32_t c = top[k].second;
        AliasGroup g;
        g.first_key = std::string(key_text_of(key_of_site[content_first[c]]));
        g.tensors = tally[c].uses;
        g.keys = top_keys[k];
        g.size = size_of(c);
        g.bytes_saved = top[k].first;
        r.largest_alias_groups.push_back(std::move(g));
      }
    };
    if (workers < 2) {
      build_store();
      build_report();
    } else {
      // Each thread takes a task from the counter, so one thread that could
      // not start only costs speed.
      detail::Atomic<int> next{0};
      run_workers(2, [&](std::size_t) {
        for (int t; (t = next.fetch_add(1, detail::Order::relaxed)) < 2;) t == 0 ? build_store() : build_report();
      });
    }
    assert(r.keys == out.store.key_count() && r.buffers == out.store.buffer_count() &&
           r.bytes_stored == out.store.bytes_stored());
    r.identity = istats;
    r.seconds_identity = identity_seconds;
    return {};
  };

  // ---- 0c. the name check, the comparisons, and the rest beside them -----------
  // The check runs on one thread; the others compare the pairs it queues.
  // When it ends, it compares too, until what is left for the others takes
  // about as long as everything after the comparisons (finish), which it
  // then runs on its own as if every queued pair were equal, and helps
  // again with whatever is left. If a pair then turns out not to be equal,
  // that run is undone and finish runs again with the verdicts, as it
  // would have without it (same result, and no byte is trusted unread; a
  // pair found different only after the guess costs finish twice).
  // Only for programs of small tensors: for them finish is mostly per-tensor
  // bookkeeping (fingerprints, groups, keys, the store), while a big
  // tensor's bytes take all threads. 100,000 tensors of 4 KiB, 2 threads,
  // medians of 15 calls: 20.6-20.9 ms against 22.4-23.4 ms with finish
  // after the last comparison.
  EarlyPairs<Hash> early(total, hash, started >= 2, identity_seed);
  Expected<void> checked, assumed;
  bool speculated = false;
  auto check = [&] {
    // Out of memory in the check, the queue is closed all the same: the
    // comparing threads wait for that, and are joined before the exception
    // leaves (run_workers).
    call_or_undo([&] { checked = validate_program(program, &flat, &names, &early); }, [&] { early.close(); });
    early.close();
    if (started < 2 || !checked || flat.max_size > identity::kRunMaxBytes) return early.drain();
    // finish() costs about kFinishBytesPerTensor of one thread's comparing
    // per tensor; the others compare that much each meanwhile.
    const std::uint64_t pair_bytes = early.queued() == 0 ? 1 : 2 * early.queued_bytes() / early.queued();
    // In 64 bits, then clamped: a size_t of 32 bits would keep only the low
    // bits of a count past 2^32 (many tiny tensors, many threads).
    const std::uint64_t leave = std::uint64_t{total} * kFinishBytesPerTensor * (started - 1) / pair_bytes;
    early.drain_leaving(static_cast<std::size_t>(detail::min_of<std::uint64_t>(leave, SIZE_MAX)));
    // Nothing to overlap, or a guess already known wrong (a program whose
    // names often hold other bytes would pay for finish twice every time):
    // finish after the comparisons, with every thread.
    if (early.unclaimed() == 0 || !early.all_equal()) return early.drain();
    // The tables first, as without the guess: their blocks then come from
    // the table cache before finish's scratch in every call, whichever
    // thread builds them (taken in a varying order, the cache kept 12 or
    // 16 MiB after the same calls).
    if (functions_made) ensure_tables();
    assumed = finish(early.assumed(), 1);
    speculated = true;
    early.drain();
  };
  if (started < 2)
    check();
  else
    run_workers(started, [&](std::size_t w) {
      if (w == 0) return check();
      if (w == 1 && functions_made && claim_tables()) build_tables();
      early.drain();
    });
  if (!checked) return checked.build_error();
  Expected<void> finished;
  if (speculated && early.all_equal()) {
    finished = std::move(assumed);
    // The identity was known once the last pair was compared.
    out.report.seconds_identity = detail::max_of(out.report.seconds_identity, monotonic_seconds() - t_id);
  } else {
    if (speculated) {  // undo it
      if (index_released) names.restore_index(StoreAccess::take_key_index(out.store));
      out.store = NamedDataStore();
      out.report = Report();
      if (tables_patched) build_tables();
    }
    finished = finish(early.verdicts(), started);
  }
  if (!finished) return finished.build_error();
  out.report.seconds_total = monotonic_seconds() - t0;
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
