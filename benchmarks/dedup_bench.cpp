// benchmarks/dedup_bench.cpp — deduplicate() throughput on six workloads,
// each against two baselines measured in the same run on the same bytes:
//   - the physical limit: one read pass over every input byte (summing
//     64-bit words), same thread count, same memory, warmed the same way;
//   - the reference approach, ExecuTorch's NamedDataStore: SHA-256 of each
//     whole buffer (OpenSSL), merge on digest.
// Beside them, informational: ExecuTorch's NamedDataStore as it is today
// (two_level.hpp: a fingerprint first, SHA-256 only where one repeats),
// the identity engine alone, a two-stream read,
// and, where every duplicate is a small tensor, deduplicate()'s comparisons
// alone (PairComparisons: what the machine leaves an exact method).
// All of them run once per repetition, in a fixed order (kContenderOrder
// says why), and each ratio is the median of the per-repetition ratios.
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <openssl/evp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <wdedup/bench.hpp>
#include <wdedup/detail/equal_run.hpp>
#include <wdedup/wdedup.hpp>

#include "cli.hpp"  // (tools/) counted, shared with the demo
#include "harness.hpp"
#include "two_level.hpp"

namespace wbench {
namespace {

namespace bench = wdedup::bench;
using wdedup::ByteSpan;

using wdedup_cli::counted;

// ---- the references: ExecuTorch's NamedDataStore, before and since #18351 ------

using Digest = std::array<unsigned char, 32>;

/// digests[k] = `md` (SHA-256) of buffer_of(k) for k < n, on `threads`
/// threads as read_pass and deduplicate() start theirs (a thread that
/// cannot start leaves its buffers to the others, which claim them).
template <class BufferOf>
void hash_each(const EVP_MD* md, std::size_t n, BufferOf&& buffer_of, Digest* digests, unsigned threads) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    for (;;) {
      const std::size_t k = next.fetch_add(1, std::memory_order_relaxed);
      if (k >= n) break;
      const ByteSpan b = buffer_of(k);
      unsigned len = 0;
      EVP_DigestInit_ex(ctx, md, nullptr);
      EVP_DigestUpdate(ctx, b.data(), b.size());
      EVP_DigestFinal_ex(ctx, digests[k].data(), &len);
    }
    EVP_MD_CTX_free(ctx);
  };
  wdedup::bench::detail::run_shares(threads, [&](std::size_t) { work(); });
}

/// SHA-256 of every buffer, then buffers merged on equal digests (no byte
/// comparison), as ExecuTorch's NamedDataStore.add_named_data did until
/// pytorch/executorch#18351 (as of commit e02ef8e8): the targets are
/// against it. Buffers
/// are hashed on `threads` threads (ExecuTorch uses one; giving the
/// reference the same threads as wdedup keeps the comparison like for like).
class Sha256Reference {
 public:
  Sha256Reference() {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    // Fetched once: the implicit fetch behind EVP_sha256() costs more than
    // hashing a 4 KiB tensor.
    fetched_ = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    md_ = fetched_;
#endif
    if (md_ == nullptr) md_ = EVP_sha256();
  }
  ~Sha256Reference() {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    EVP_MD_free(fetched_);
#endif
  }
  Sha256Reference(const Sha256Reference&) = delete;
  Sha256Reference& operator=(const Sha256Reference&) = delete;

  /// The fetched SHA-256, for the two-level reference (fetched once).
  const EVP_MD* md() const { return md_; }

  /// Number of distinct buffers.
  std::size_t run(const std::vector<ByteSpan>& buffers, unsigned threads) {
    digests_.resize(buffers.size());
    hash_each(md_, buffers.size(), [&](std::size_t i) { return buffers[i]; }, digests_.data(), threads);
    std::unordered_map<Digest, std::uint32_t, DigestHash> by_digest;
    by_digest.reserve(buffers.size());
    for (std::size_t i = 0; i < buffers.size(); ++i)
      by_digest.try_emplace(digests_[i], static_cast<std::uint32_t>(by_digest.size()));
    return by_digest.size();
  }

 private:
  struct DigestHash {
    std::size_t operator()(const Digest& d) const noexcept {
      std::size_t h;
      std::memcpy(&h, d.data(), sizeof h);
      return h;
    }
  };
  const EVP_MD* md_ = nullptr;
  EVP_MD* fetched_ = nullptr;
  std::vector<Digest> digests_;
};

/// ExecuTorch's NamedDataStore since pytorch/executorch#18351
/// (two_level.hpp says what it does): a fingerprint per buffer, SHA-256 of
/// the buffers whose fingerprint another has (a stored candidate but a
/// fingerprint's first twice, as ExecuTorch's store hashes it), merged on
/// digest (no byte comparison). Those buffers are hashed on `threads`
/// threads, once per pass (two where some are hashed again), as the
/// SHA-256 reference hashes (ExecuTorch hashes on one, in its Python loop);
/// the fingerprints are taken on one, as are the SHA-256 reference's merges.
class TwoLevelReference {
 public:
  explicit TwoLevelReference(const EVP_MD* md) : md_(md) {}

  TwoLevelCount run(const std::vector<ByteSpan>& buffers, unsigned threads) {
    return two_level_count(buffers, digests_, [&](const std::vector<std::uint32_t>& which, std::vector<Digest>& out) {
      hash_each(md_, which.size(), [&](std::size_t k) { return buffers[which[k]]; }, out.data(), threads);
    });
  }

 private:
  const EVP_MD* md_;
  std::vector<Digest> digests_;
};

// ---- workloads ----------------------------------------------------------------

enum class Policy { Positional, OneBlob };

struct Workload {
  std::string name;
  std::string description;
  Policy policy = Policy::Positional;
  double read_target = 0.8;
  /// The targets apply to the built-in workloads; a user's own
  /// files get the same figures and ratios, with no pass or fail.
  bool has_targets = true;
  std::optional<wdedup::LlamaWorkload> llama;
  wdedup::Program own;
  std::unique_ptr<std::uint8_t[]> arena;
  std::uint64_t expected_distinct = 0;  ///< 0: not known in advance
  /// Figures measured on the workload's own bytes, added to the extra
  /// fields of each of its rows but the scaling ones (the adversarial
  /// tensors' shared head and tail: where they differ is what the workload
  /// is for, and no other output shows it).
  std::vector<std::pair<std::string, double>> shape;
  /// The mapped files a "ptd" workload's tensors point into.
  wdedup::PtdFiles files;

  const wdedup::Program& program() const { return llama ? llama->program() : own; }
};

// ---- where the input sits: small or huge pages -------------------------------------
//
// On the Xeon VM of 2026-11-27 the small tensors' one-thread read pass took
// 21 ms with its 410 MB on 2 MiB pages and 32 ms on 4 KiB pages, while
// deduplicate() took 46 and 48 ms: the pages the input happens to get move
// the ratio from 0.47x to 0.66x. A default run keeps what new[] gets (the
// system's policy, and the memory left by earlier workloads, decide);
// --input-pages asks for one kind, and every timed run says what it got.

/// --input-pages: madvise over the whole pages of [p, p + n), a new[]
/// whose bytes are not written yet, so that the next touch picks the page
/// size. The pages are dropped after the advice (MADV_DONTNEED: they come
/// back as zeros): the allocator may have touched them already, as glibc
/// does under MALLOC_PERTURB_ (which meson test sets), and a page already
/// there keeps its size. The bytes stay where new[] put them, at the same
/// place in a page as by default, so only the page size differs. A kernel
/// without transparent huge pages has nothing to advise (madvise would fail
/// with EINVAL): "small" is then what it gets anyway, and "huge" was
/// refused at start-up.
void advise_pages(const Config& c, std::uint8_t* p, std::uint64_t n) {
  if (c.input_pages == "default" || thp_policy() == "unknown") return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t lo = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t hi = (reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(n)) & ~(page - 1);
  if (hi <= lo) return;
  const int advice = c.input_pages == "huge" ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
  for (const auto& [what, how] : {std::pair<const char*, int>{"madvise", advice}, {"MADV_DONTNEED", MADV_DONTNEED}})
    if (::madvise(reinterpret_cast<void*>(lo), hi - lo, how) != 0) {
      report_failure("--input-pages " + c.input_pages + ": " + what + " of " + std::to_string(hi - lo) +
                     " bytes: " + std::strerror(errno));
      return;
    }
}

/// The share of the bytes of `spans` that sit on huge pages, from
/// /proc/self/smaps: each mapping's huge-page bytes are counted in
/// proportion to its overlap with the spans. Exact for a mapping the input
/// fills alone (a madvised range is a mapping of its own); an estimate
/// where the kernel merged the input's mapping with a neighbour of the same
/// flags (a default new[] may be). -1 where smaps cannot be read.
double huge_page_share(const std::vector<ByteSpan>& spans) {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return -1;
  // The input's address ranges, sorted and merged: tensors side by side in
  // one buffer (100,000 of them for the small tensors) become one range,
  // and bytes two tensors share count once.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const ByteSpan& s : spans) {
    const auto a = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(s.data()));
    ranges.push_back({a, a + s.size()});
  }
  std::sort(ranges.begin(), ranges.end());
  std::size_t kept = 0;
  for (const auto& r : ranges) {
    if (kept != 0 && r.first <= ranges[kept - 1].second)
      ranges[kept - 1].second = std::max(ranges[kept - 1].second, r.second);
    else
      ranges[kept++] = r;
  }
  ranges.resize(kept);
  std::uint64_t total = 0;
  for (const auto& r : ranges) total += r.second - r.first;
  double huge = 0;
  std::uint64_t lo = 0, hi = 0, overlap = 0;  // the current mapping
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long a = 0, b = 0, kb = 0;
    char field[64];
    // A mapping's header starts with "start-end " in hex; its fields are
    // "Name:   N kB" (a field's first letter may be a hex digit, as in
    // "AnonHugePages", but no field name is followed by '-').
    if (std::sscanf(line, "%llx-%llx ", &a, &b) == 2) {
      lo = a;
      hi = b;
      overlap = 0;
      for (const auto& r : ranges)
        if (r.second > lo && r.first < hi)
          overlap += std::min<std::uint64_t>(r.second, hi) - std::max<std::uint64_t>(r.first, lo);
    } else if (overlap != 0 && std::sscanf(line, "%63[A-Za-z]: %llu kB", field, &kb) == 2 &&
               (std::strcmp(field, "AnonHugePages") == 0 || std::strcmp(field, "FilePmdMapped") == 0 ||
                std::strcmp(field, "ShmemPmdMapped") == 0)) {
      huge += static_cast<double>(kb) * 1024.0 * static_cast<double>(overlap) / static_cast<double>(hi - lo);
    }
  }
  std::fclose(f);
  return total == 0 ? 0 : huge / static_cast<double>(total);
}

void fill_random(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(p + i, &z, std::min<std::size_t>(8, n - i));
  }
}

/// The built-in Llama workloads: prefill and decode partition counts.
struct LlamaSpec {
  const char* id;
  const char* name;
  std::uint32_t prefill, decode;
  Policy policy;
};
constexpr LlamaSpec kLlamaSpecs[] = {{"llama-1+1", "llama 1+1", 1, 1, Policy::Positional},
                                     {"llama-3+3", "llama 3+3", 3, 3, Policy::Positional},
                                     {"llama-3+2", "llama 3+2", 3, 2, Policy::OneBlob}};

/// --model's preset with the shape flags given over it (0: the preset's).
std::optional<wdedup::LlamaConfig> llama_config(const Config& c) {
  auto preset = wdedup::LlamaConfig::preset(c.model);
  if (!preset) return std::nullopt;
  wdedup::LlamaConfig cfg = *preset;
  if (c.layers) cfg.n_layers = c.layers;
  if (c.dim) cfg.dim = c.dim;
  if (c.hidden_dim) cfg.hidden_dim = c.hidden_dim;
  if (c.vocab_size) cfg.vocab_size = c.vocab_size;
  if (c.n_heads) cfg.n_heads = c.n_heads;
  if (c.n_kv_heads) cfg.n_kv_heads = c.n_kv_heads;
  if (c.max_seq_len) {
    cfg.max_seq_len = c.max_seq_len;
    cfg.prefill_len = std::min(cfg.prefill_len, c.max_seq_len);
  }
  return cfg;
}

/// Names `w`, a Llama workload laid out with spec's partition counts, as
/// the run reports it.
void name_llama(const Config& c, const LlamaSpec& spec, Workload& w) {
  const wdedup::LlamaConfig& cfg = w.llama->config();
  w.name = spec.name;
  w.policy = spec.policy;
  // Every shape setting, as the run used it (preset or flag): the note is
  // what a JSON read later says the workload was.
  char d[256];
  std::snprintf(d, sizeof d,
                "Llama '%s' (dim %u, %u layers, hidden dim %u, %u heads, %u kv heads, vocab %u, max seq len %u) "
                "fp16, prefill %u + decode %u partitions",
                c.model.c_str(), cfg.dim, cfg.n_layers, cfg.hidden_dim, cfg.n_heads, cfg.n_kv_heads, cfg.vocab_size,
                cfg.max_seq_len, cfg.prefill_partitions, cfg.decode_partitions);
  w.description = d;
}

/// The Llama workload for `spec`: generated with its partition counts, or,
/// where `w` already holds one, the same tensors laid out again with them
/// (LlamaWorkload::repartition). Its three specs differ only in how the
/// layers are split, and generating is most of a 1b run's setup.
bool make_llama(const Config& c, const LlamaSpec& spec, std::optional<Workload>& w) {
  if (w) {
    if (wdedup::Expected<void> r = w->llama->repartition(spec.prefill, spec.decode); !r) {
      report_failure(std::string(spec.name) + ": " + r.message());
      return false;
    }
    name_llama(c, spec, *w);
    return true;
  }
  progress(c, "dedup %s: generating the workload", spec.name);
  // check_llama passed at start-up: the config exists and fits the spec.
  wdedup::LlamaConfig cfg = *llama_config(c);
  cfg.prefill_partitions = spec.prefill;
  cfg.decode_partitions = spec.decode;
  // Generating is nearly all first touches of fresh pages (28 s for the 1b
  // preset on a 2-core VM): each piece of it is a step for a Ctrl-C, and
  // the progress line counts tenths (the line above said it started).
  unsigned shown = 0;
  auto g = wdedup::LlamaWorkload::generate(cfg, [&](std::uint64_t done, std::uint64_t total) {
    const auto tenths = static_cast<unsigned>(static_cast<double>(done) * 10 / static_cast<double>(total));
    if (tenths != shown) {
      shown = tenths;
      progress(c, "dedup %s: generating the workload, %u%%", spec.name, tenths * 10);
    }
    stop_point();
  });
  if (!g) {
    report_failure(std::string(spec.name) + ": " + g.message());
    return false;
  }
  w.emplace();
  w->llama.emplace(std::move(g).value());
  name_llama(c, spec, *w);
  return true;
}

/// N tensors of `size` bytes over two methods (N: --small-tensors); method
/// b holds a shuffled copy (separate memory) of method a's tensors, each
/// under its original's name. `namesakes_differ`: each copy's last byte is
/// changed, so that no tensor has a duplicate while every one of b's has a
/// namesake of its size.
Workload make_two_methods(const Config& c, bool namesakes_differ) {
  Workload w;
  // (n * size fits a size_t: check_sizes.)
  const auto n = static_cast<std::size_t>(c.small_tensors), size = static_cast<std::size_t>(c.small_tensor_size);
  const std::size_t half = (n + 1) / 2;
  w.arena.reset(new std::uint8_t[n * size]);
  std::uint8_t* base = w.arena.get();
  advise_pages(c, base, n * size);
  fill_random(base, half * size, 0xA11CE);
  // A fixed pseudo-random permutation (Fisher-Yates, splitmix-driven).
  std::vector<std::uint32_t> perm(half);
  for (std::uint32_t i = 0; i < half; ++i) perm[i] = i;
  std::uint64_t x = 42;
  for (std::size_t i = half; i > 1; --i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(perm[i - 1], perm[static_cast<std::size_t>((x >> 33) % i)]);
  }
  wdedup::Method& a = w.own.add_method("a");
  wdedup::Partition& pa = a.add_partition();
  for (std::size_t i = 0; i < half; ++i) pa.add("w." + std::to_string(i), ByteSpan(base + i * size, size));
  wdedup::Method& b = w.own.add_method("b");
  wdedup::Partition& pb = b.add_partition();
  for (std::size_t j = 0; half + j < n; ++j) {
    std::uint8_t* dst = base + (half + j) * size;
    std::memcpy(dst, base + std::size_t{perm[j]} * size, size);
    if (namesakes_differ) dst[size - 1] = static_cast<std::uint8_t>(dst[size - 1] ^ 1u);
    pb.add("w." + std::to_string(perm[j]), ByteSpan(dst, size));
  }
  w.expected_distinct = namesakes_differ ? n : half;
  char d[200];
  std::snprintf(d, sizeof d,
                namesakes_differ ? "%llu tensors of %llu B over two methods, the second's under the first's names, "
                                   "each unlike its namesake in its last byte: no duplicates"
                                 : "%llu tensors of %llu B, 50%% duplicates",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(size));
  w.description = d;
  return w;
}

Workload make_small_tensors(const Config& c) {
  Workload w = make_two_methods(c, false);
  w.name = "small tensors";
  return w;
}

/// Methods that share their names but not their bytes (a fine-tuned copy
/// of a model's weights, say): every tensor of the second method has a
/// namesake of its size in the first, and differs from it in the last byte,
/// the worst case for deduplicate()'s name hints: each hint is read to its
/// end before it fails, and every tensor is then left to the hashes. No
/// target of the applies. It is also the one built-in workload in
/// which a hint trusted without its comparison gives a wrong answer: a
/// library that did so passed every other (mutation sweep h66, F10b), and
/// the untimed check of the whole result (dedup_checked) fails it here.
Workload make_same_names(const Config& c) {
  Workload w = make_two_methods(c, true);
  w.name = "same names";
  w.has_targets = false;
  // Measured on the bytes, as the adversarial tensors' head and tail: how
  // many of the second method's tensors have a namesake of their size with
  // other bytes, and how many bytes at the start every such pair shares.
  const wdedup::Program& p = w.own;
  std::unordered_map<std::string, ByteSpan> first;
  for (const wdedup::Tensor& t : p.methods[0].partitions[0].tensors) first.emplace(t.name, t.bytes);
  std::uint64_t differing = 0;
  std::size_t head = SIZE_MAX;
  for (const wdedup::Tensor& t : p.methods[1].partitions[0].tensors) {
    const auto it = first.find(t.name);
    if (it == first.end() || it->second.size() != t.bytes.size()) continue;
    const std::size_t h = first_difference(it->second.data(), t.bytes.data(), t.bytes.size());
    if (h == t.bytes.size()) continue;
    ++differing;
    head = std::min(head, h);
  }
  w.shape = {{"namesakes_differing", double(differing)},
             {"namesake_shared_head_bytes", differing == 0 ? 0.0 : double(head)}};
  return w;
}

/// The policy a --ptd workload runs under: Positional needs equal partition
/// counts (a wdedup store's methods may differ: 3 + 2 under OneBlob);
/// OneBlob takes any.
Policy ptd_policy(const wdedup::Program& p) {
  return wdedup::Positional::validate(p) ? Policy::Positional : Policy::OneBlob;
}

/// The user's .ptd files (c.ptd_files), mapped and imported (PtdFiles: one
/// method each, named after the file, or a wdedup store's own methods and
/// partitions), every tensor over the mapping: what deduplicating their
/// exported weights costs.
Workload make_ptd(const Config& c) {
  Workload w;
  w.name = "ptd files";
  w.has_targets = false;
  for (const std::string& path : c.ptd_files)
    if (wdedup::Expected<void> added = w.files.add(w.own, path); !added) {
      // (Checked before the run: the file changed since.)
      fail_group("--ptd " + added.message());
    }
  std::uint64_t tensors = 0, bytes = 0;
  for (const wdedup::Method& m : w.own.methods)
    for (const wdedup::Partition& p : m.partitions)
      for (const wdedup::Tensor& t : p.tensors) {
        ++tensors;
        bytes += t.bytes.size();
      }
  w.policy = ptd_policy(w.own);
  char d[160];
  std::snprintf(d, sizeof d, "%s, %s", counted(c.ptd_files.size(), ".ptd file").c_str(),
                counted(w.own.methods.size(), "method").c_str());
  // The methods by name (the files are in the JSON's command), the first
  // eight: a row's note says which workload it was.
  std::string names;
  for (std::size_t m = 0; m < w.own.methods.size() && m < 8; ++m)
    names += (m ? ", " : " (") + w.own.methods[m].name;
  if (!names.empty()) names += w.own.methods.size() > 8 ? ", ...)" : ")";
  char sizes[80];
  std::snprintf(sizes, sizeof sizes, ": %llu tensors, %llu bytes", static_cast<unsigned long long>(tensors),
                static_cast<unsigned long long>(bytes));
  w.description = d + names + sizes;
  return w;
}

/// Distinct tensors of one size that share their first and last KiB — and
/// everything else but the 8 bytes just before the last KiB, so a sampler
/// of heads and tails sees one tensor, and an exact method must read
/// (almost) every byte before it can tell any two apart.
Workload make_adversarial(const Config& c) {
  Workload w;
  // (n * size fits a size_t: check_sizes.)
  const auto n = static_cast<std::size_t>(c.adversarial_count), size = static_cast<std::size_t>(c.adversarial_size);
  w.name = "adversarial";
  char d[160];
  std::snprintf(d, sizeof d, "%llu distinct tensors of %llu B, equal but for 8 B before the shared last KiB",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(size));
  w.description = d;
  w.read_target = 0.5;
  w.arena.reset(new std::uint8_t[n * size]);
  std::uint8_t* base = w.arena.get();
  advise_pages(c, base, n * size);
  fill_random(base, size, 0xBAD);
  for (std::size_t i = 1; i < n; ++i) std::memcpy(base + i * size, base, size);
  wdedup::Partition& p = w.own.add_method("m").add_partition();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t tag = ~std::uint64_t{i};
    std::memcpy(base + i * size + size - 1024 - 8, &tag, 8);
    p.add("t." + std::to_string(i), ByteSpan(base + i * size, size));
  }
  w.expected_distinct = n;
  // The bytes every tensor shares with the first, from each end: measured,
  // not declared (a tag moved into the last KiB, or to just past the
  // first, passed bench_quick and bench_args: mutation sweep h66, B3, B4).
  // (memcmp first at the tail: after the second tensor, each ends equal
  // over what is left, and a byte loop over 2048 x 256 KiB would take a
  // second.)
  std::size_t head = size, tail = size;
  for (std::size_t i = 1; i < n; ++i) {
    const std::uint8_t* t = base + i * size;
    head = first_difference(t, base, head);
    if (std::memcmp(t + size - tail, base + size - tail, tail) != 0) {
      std::size_t e = 0;
      while (t[size - 1 - e] == base[size - 1 - e]) ++e;
      tail = e;
    }
  }
  w.shape = {{"shared_head_bytes", double(head)}, {"shared_tail_bytes", double(tail)}};
  return w;
}

// ---- the comparisons alone ----------------------------------------------------------

/// deduplicate()'s byte comparisons with nothing else to do: every tensor
/// equal to an earlier one compared with it, the pairs given (the identity
/// engine's answer), in program order, through the kernel deduplicate()
/// confirms small pairs with (detail::equal_pairs: four pairs at a time,
/// the next four prefetched), cut into `threads` shares of
/// equal bytes. Only for workloads whose duplicates are all small tensors
/// (up to identity::kRunMaxBytes), which deduplicate() compares that way:
/// bigger ones it compares block by block against a leader kept in cache,
/// faster than pairs (Llama 1+1, default size, Zen 4 EPYC VM 2026-11-29,
/// pairs cut into chunks of 16 KiB to 1 MiB: 0.84-1.03x of the read pass
/// as pairs, 0.95-1.05x in deduplicate(), same runs). Where every tensor
/// has a duplicate (the small tensors) this reads every input byte once,
/// as the read pass does, but the originals in the order of the pairs, at
/// random places; its time against the read pass is what the machine
/// leaves an exact deduplication before it finds a pair, checks a name or
/// builds an output.
class PairComparisons {
 public:
  /// Pairs from the engine's answer over `all` (rep[i]: the first input
  /// equal to input i). Each range is compared once, as the read pass reads
  /// it once: a tensor whose (pointer, size) an earlier one had (an alias)
  /// adds no pair, nor does an empty one. No pairs at all if any duplicate
  /// is bigger than identity::kRunMaxBytes.
  PairComparisons(const std::vector<ByteSpan>& all, const std::vector<std::uint32_t>& rep) {
    std::set<std::pair<const std::uint8_t*, std::size_t>> seen;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const ByteSpan a = all[i], b = all[rep[i]];
      if (!seen.insert({a.data(), a.size()}).second || a.data() == b.data() || a.empty()) continue;
      if (a.size() > wdedup::detail::identity::kRunMaxBytes) {
        x_.clear();
        y_.clear();
        n_.clear();
        bytes_ = 0;
        return;
      }
      // The earlier tensor first, as the engine and EarlyPairs give pairs
      // (x: the hint or representative, y: the input).
      x_.push_back(b.data());
      y_.push_back(a.data());
      n_.push_back(a.size());
      bytes_ += 2 * a.size();
    }
    eq_.reset(new bool[x_.size()]);
  }

  /// Bytes read: both sides of every pair.
  std::uint64_t bytes() const { return bytes_; }
  bool empty() const { return x_.empty(); }

  /// Compares every pair on `threads` threads (the calling one included,
  /// each started per call as the read pass starts its own); the number of
  /// pairs found unequal (0: the answer holds).
  std::size_t run(unsigned threads) {
    const std::size_t count = x_.size();
    // (threads + 1 in size_t: as unsigned it could wrap to an empty vector,
    // which GCC's -Wnull-dereference sees cut[0] write into.)
    std::vector<std::size_t> cut(std::size_t{threads} + 1, count);
    cut[0] = 0;
    // Shares of about equal bytes (pairs need not be of one size).
    std::uint64_t at = 0;
    unsigned t = 1;
    for (std::size_t k = 0; k < count && t < threads; ++k) {
      at += 2 * n_[k];
      if (at * threads >= bytes_ * t) cut[t++] = k + 1;
    }
    auto share = [&](std::size_t s) {
      // Runs of pairs of one length go to the kernel together.
      for (std::size_t k = cut[s], end = cut[s + 1]; k < end;) {
        std::size_t run = k + 1;
        while (run < end && n_[run] == n_[k]) ++run;
        wdedup::detail::equal_pairs(x_.data() + k, y_.data() + k, run - k, n_[k], eq_.get() + k);
        k = run;
      }
    };
    wdedup::bench::detail::run_shares(threads, share);
    return static_cast<std::size_t>(std::count(eq_.get(), eq_.get() + count, false));
  }

 private:
  std::vector<const std::uint8_t*> x_, y_;
  std::vector<std::size_t> n_;
  std::unique_ptr<bool[]> eq_;
  std::uint64_t bytes_ = 0;
};

// ---- whole answers, checked untimed --------------------------------------------------
//
// The timed calls' answers are checked by their counts (run_workload); an
// answer that keeps its count can still be wrong (a tensor given another
// content's bytes, a duplicate another group's representative), so the
// untimed ones are checked whole as well.

// (Our own, not wdedup::detail::same_bytes, by which the store merges: a
// check must not share the code it checks.)
bool same_bytes(ByteSpan a, ByteSpan b) {
  return a.size() == b.size() && (a.data() == b.data() || a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

/// Why `rep`, the identity engine's answer over `all`, is wrong, or "": each
/// input's representative is itself or an earlier input that represents
/// itself, with the same bytes (one comparison a duplicate, untimed).
std::string rep_problem(const std::vector<ByteSpan>& all, const std::vector<std::uint32_t>& rep) {
  if (rep.size() != all.size())
    return "an answer of " + std::to_string(rep.size()) + " representatives for " + std::to_string(all.size()) +
           " inputs";
  for (std::size_t i = 0; i < rep.size(); ++i) {
    const std::size_t r = rep[i];
    if (r > i || rep[r] != r)
      return "input " + std::to_string(i) + " has representative " + std::to_string(r) +
             ", not itself or an earlier input that represents itself";
    if (!same_bytes(all[i], all[r]))
      return "input " + std::to_string(i) + " has representative " + std::to_string(r) + ", whose bytes differ";
  }
  return "";
}

/// Why `r`, deduplicate()'s result for `p`, does not give every tensor its
/// own bytes back, or "": each partition has its function, with each of its
/// tensors in order under its own name, whose key is in the store with
/// bytes equal to the tensor's; and the store holds r.report.buffers buffers.
std::string result_problem(const wdedup::Program& p, const wdedup::DedupResult& r) {
  if (r.store.buffer_count() != r.report.buffers)
    return "a store of " + counted(r.store.buffer_count(), "buffer") + ", a report of " +
           std::to_string(r.report.buffers);
  for (const wdedup::Method& m : p.methods)
    for (std::size_t pi = 0; pi < m.partitions.size(); ++pi) {
      const std::vector<wdedup::Tensor>& tensors = m.partitions[pi].tensors;
      const std::string where = "method '" + m.name + "' partition " + std::to_string(pi);
      const wdedup::FunctionMap* f = r.functions.find(m.name, static_cast<std::uint32_t>(pi));
      if (f == nullptr || f->tensors.size() != tensors.size())
        return where + ": " + (f ? counted(f->tensors.size(), "tensor") : std::string("no function")) +
               " in the result, " + std::to_string(tensors.size()) + " in the program";
      for (std::size_t k = 0; k < tensors.size(); ++k) {
        const wdedup::FunctionTensor& ft = f->tensors[k];
        if (ft.tensor_name != tensors[k].name)
          return where + ": tensor " + std::to_string(k) + " is '" + ft.tensor_name + "' in the result, '" +
                 tensors[k].name + "' in the program";
        if (r.store.find(ft.key) == nullptr)
          return where + " tensor '" + ft.tensor_name + "': its key '" + ft.key + "' is not in the store";
        if (!same_bytes(r.store.bytes_of(ft.key), tensors[k].bytes))
          return where + " tensor '" + ft.tensor_name + "': its key '" + ft.key + "' holds other bytes";
      }
    }
  return "";
}

// ---- measuring -------------------------------------------------------------------

/// deduplicate() under strategy `Policy_` on `threads` threads.
template <class Policy_>
wdedup::Expected<wdedup::DedupResult> dedup_as(const wdedup::Program& p, unsigned threads) {
  wdedup::DedupOptions o;
  o.threads = threads;
  return wdedup::deduplicate<wdedup::Strategy<Policy_>>(p, o);
}

template <class Policy_>
std::string refusal(const wdedup::Program& p) {
  const wdedup::Expected<wdedup::DedupResult> r = dedup_as<Policy_>(p, 0);
  return r ? std::string() : r.message();
}

/// deduplicate() once under the workload's policy; a refusal ends the
/// group (fail_group).
wdedup::Expected<wdedup::DedupResult> dedup_call(const Workload& w, unsigned threads) {
  wdedup::Expected<wdedup::DedupResult> r = w.policy == Policy::OneBlob
                                                ? dedup_as<wdedup::OneBlob>(w.program(), threads)
                                                : dedup_as<wdedup::Positional>(w.program(), threads);
  if (!r) fail_group("deduplicate failed: " + r.message());
  return r;
}

/// The call the dedup rows time: its stored bytes, and through the
/// pointers given, its identity seconds and its count of buffers.
std::uint64_t dedup_policy(const Workload& w, unsigned threads, double* identity_seconds, std::uint64_t* buffers) {
  const wdedup::Expected<wdedup::DedupResult> r = dedup_call(w, threads);
  if (identity_seconds) *identity_seconds = r->report.seconds_identity;
  if (buffers) *buffers = r->report.buffers;
  return r->report.bytes_stored;
}

/// deduplicate() once, untimed, its result checked whole (result_problem;
/// a failure names `who`): its count of buffers, which the timed calls'
/// are checked against.
std::uint64_t dedup_checked(const Workload& w, unsigned threads, const std::string& who) {
  const wdedup::Expected<wdedup::DedupResult> r = dedup_call(w, threads);
  if (const std::string why = result_problem(w.program(), *r); !why.empty())
    report_failure(who + ": deduplicate()'s result: " + why);
  return r->report.buffers;
}

/// The order the contenders run in, every repetition: each target's
/// baseline runs right before or right after deduplicate() (read pass
/// before, SHA-256 after), and the engine alone right before the read pass
/// it is compared with; the comparisons alone run first but for the
/// two-level reference, which has no target. Whatever follows SHA-256's
/// 150-450 ms on a shared VM runs slowed (after a 250 ms busy loop a 10 ms
/// read pass took 12-14 ms in a calm hour and 40-210 ms in a noisy one), so
/// it goes last and an untimed read pass follows it: no timed contender
/// ever runs right after it. The two-level reference hashes nearly as much
/// where nearly every fingerprint repeats (every built-in workload): an
/// untimed read pass follows it too, and it follows the one after SHA-256,
/// as every other contender follows one.
enum Contender : unsigned { kTwoLevel = 6, kPairs = 5, kRead2 = 4, kIdentity = 3, kRead = 0, kDedup = 1, kSha = 2 };
constexpr unsigned kContenders = 7;
constexpr std::array<unsigned, kContenders> kContenderOrder = {kTwoLevel, kPairs, kRead2, kIdentity,
                                                               kRead,     kDedup, kSha};

double ratio_median(const std::vector<double>& base, const std::vector<double>& subject) {
  std::vector<double> r;
  for (std::size_t i = 0; i < base.size() && i < subject.size(); ++i)
    r.push_back(subject[i] > 0 ? base[i] / subject[i] : 0);
  return bench::median(r);
}

void run_workload(const Config& c, const Workload& w, Results& out) {
  const std::vector<ByteSpan> spans = bench::input_spans(w.program());
  const std::uint64_t bytes = bench::total_bytes(spans);
  // Every tensor, as deduplicate hands them to the identity engine.
  std::vector<ByteSpan> all;
  std::uint64_t bytes_in = 0, tensors = 0;
  for (const auto& m : w.program().methods)
    for (const auto& part : m.partitions)
      for (const auto& t : part.tensors) {
        all.push_back(t.bytes);
        bytes_in += t.bytes.size();
        ++tensors;
      }
  if (c.once) {
    // For profilers: the read pass and deduplicate() once each, nothing
    // else, so a profile holds only what the ratios compare.
    for (unsigned threads : c.threads) {
      consume(bench::read_pass(spans, bench::dedup_threads(w.program(), threads)));
      std::uint64_t buffers = 0;
      consume(dedup_policy(w, threads, nullptr, &buffers));
      progress_done(c);  // the line below goes to stdout, often the same terminal
      std::printf(
          "%s, %s: one read pass and one deduplicate() over %llu tensors, %llu bytes: %llu distinct\n",
          w.name.c_str(), counted(threads, "thread").c_str(), static_cast<unsigned long long>(tensors),
          static_cast<unsigned long long>(bytes),
          static_cast<unsigned long long>(buffers));
      if (w.expected_distinct != 0 && buffers != w.expected_distinct)
        report_failure(w.name + ", " + counted(threads, "thread") + ": deduplicate found " +
                       counted(buffers, "distinct buffer") + ", expected " + std::to_string(w.expected_distinct));
    }
    return;
  }
  Sha256Reference reference;
  TwoLevelReference two_level(reference.md());
  // The references --references asks for (both by default): one left out
  // is neither run nor checked, and has no row.
  const bool sha = c.wants_reference("sha256"), fp_sha = c.wants_reference("fp-sha256");
  double read_base = 0, dedup_base = 0;
  double huge_share = -1;  // measured on the first thread count, once every page has been touched
  // The first row the first thread count pushes (failed with all of them).
  const std::size_t base_row = out.rows.size();
  for (unsigned threads : c.threads) {
    // A wrong or inconsistent answer at this thread count voids its rows.
    const FailureScope scope(out);
    progress(c, "dedup %s, %s: warming", w.name.c_str(), counted(threads, "thread").c_str());
    // The threads deduplicate() starts of those given (one per 4 MiB of
    // work): every other contender runs on as many. Given more than the
    // work is worth, a read pass that started them all ran slower, and
    // deduplicate() "beat" it (a user trial: 41.4x at 1024 threads on the
    // tiny model, 0.71x at one).
    const unsigned run = bench::dedup_threads(w.program(), threads);
    // Warm the same way for every contender: one full pass over the bytes
    // (faults the pages in, fills the TLB), one run of each.
    consume(bench::read_pass(spans, run));
    if (threads == c.threads.front()) huge_share = huge_page_share(spans);
    const std::string measurement = w.name + ", " + counted(threads, "thread");
    const std::uint64_t buffers = dedup_checked(w, threads, measurement);
    const std::size_t ref_distinct = sha ? reference.run(spans, run) : 0;
    // (After the SHA-256 reference's: check_args.py's wrong_first_digest
    // makes the process's first digest wrong, and that one's count with it.)
    const TwoLevelCount fp = fp_sha ? two_level.run(spans, run) : TwoLevelCount{};
    wdedup::detail::IdentityOptions io;
    io.threads = run;
    // The engine's answer as a count of groups (an input that is its own
    // representative starts one), checked against deduplicate()'s buffers.
    auto groups_of = [](const std::vector<std::uint32_t>& rep) {
      std::uint64_t g = 0;
      for (std::size_t i = 0; i < rep.size(); ++i) g += rep[i] == i;
      return g;
    };
    const std::vector<std::uint32_t> id_rep = wdedup::detail::find_identical(all, wdedup::Xxh3Hash{}, io, nullptr);
    const std::uint64_t id_groups = groups_of(id_rep);
    if (const std::string why = rep_problem(all, id_rep); !why.empty())
      report_failure(measurement + ": the identity engine's answer: " + why);
    PairComparisons pairs(all, id_rep);
    // Timed and shown only where the pairs read exactly the read pass's
    // bytes (every content held by two tensors, as in the small tensors):
    // elsewhere (a --ptd input) its ratio would set different byte counts
    // against each other.
    const bool pairs_row = !pairs.empty() && pairs.bytes() == bytes;
    if (!pairs.empty() && pairs.run(run) != 0)
      report_failure(w.name + ", " + counted(threads, "thread") + ": the identity engine's answer has pairs whose "
                     "bytes differ");
    // Every timed call's answer, checked after its clock stops: a wrong or
    // racy answer in any repetition is a failure, not a figure.
    std::string wrong;
    auto check_answer = [&](const char* who, unsigned rep, std::uint64_t got, std::uint64_t want) {
      if (got != want && wrong.empty())
        wrong = std::string(who) + " found " + counted(got, "distinct buffer") + " in repetition " +
                std::to_string(rep + 1) + ", " + std::to_string(want) + " in the untimed call";
    };

    // What a call costs in memory: the resident memory it adds at its
    // peak, its result included (built before it is freed). One untimed
    // call, started as a one-shot export's is: no table memory kept from
    // the calls before, the input read since the unmap (see below).
    wdedup::release_table_cache();
    consume(bench::read_pass(spans, run));
    std::uint64_t mem_buffers = 0;
    const bench::ResidentPeak mem =
        bench::resident_peak([&] { consume(dedup_policy(w, threads, nullptr, &mem_buffers)); });
    if (mem_buffers != buffers)
      report_failure(w.name + ", " + counted(threads, "thread") + ": deduplicate() found " +
                     counted(mem_buffers, "distinct buffer") + " in the call whose memory was measured, " +
                     std::to_string(buffers) + " in the first");

    std::vector<double> t_read, t_dedup, t_ref, t_id, t_read2, t_pairs, t_fp, id_share;
    // Threads each contender's timed call started, the most of any
    // repetition (-1: not counted): the rows say what their baselines ran on.
    long long started[kContenders], at_once[kContenders];
    for (long long& n : started) n = threads_started() < 0 ? -1 : 0;
    for (long long& n : at_once) n = threads_at_once() < 0 ? -1 : 0;
    wdedup::detail::IdentityStats last_stats;
    consume(bench::read_pass(spans, run, 2));
    for (unsigned rep = 0; rep < c.reps; ++rep) {
      progress(c, "dedup %s, %s: repetition %u/%u", w.name.c_str(), counted(threads, "thread").c_str(), rep + 1,
               c.reps);
      double ts[kContenders] = {};
      for (const unsigned which : kContenderOrder) {
        // What a contender answers, kept for after its clock stops (the
        // engine's answer is freed after it too).
        std::uint64_t answer = 0;
        double id_s = 0;
        wdedup::detail::IdentityStats st;
        std::vector<std::uint32_t> rep_of;
        // Each call starts as a one-shot export's does: with no table memory
        // kept from the call before (untimed; see Memory kept between calls
        // in the README). Kept, the small tensors ran 5% faster.
        //
        // Releasing unmaps that memory, and the input is then read through
        // twice more, untimed, so that the call starts as the read pass it
        // is compared with does: with the input read since the last unmap.
        // On this project's Zen 5 EPYC VM (2026-11-30), after an unmap of
        // 34 MB of touched memory (any: a block of a driver's own did it
        // too) the small tensors' comparisons inside deduplicate(), which
        // read the input's pages in a random order, took 150-990 ms (medians
        // of 9 calls) in 11 of 13 processes; 20-26 ms in 10 of 11 with two
        // read passes between (60 ms in one), 19-20 ms with that block kept
        // instead of unmapped. Spinning 40-100 ms instead of reading did not
        // help. A one-shot export does not unmap memory right before its
        // call: the harness did. (A program whose tables pass the cache's
        // limit, 64 MiB, unmaps what the cache cannot keep as its result is
        // freed, inside its own timed call: none of the built-in workloads
        // at their default sizes does.)
        if ((which == kDedup || which == kIdentity) && wdedup::table_cache_bytes() != 0) {
          wdedup::release_table_cache();
          consume(bench::read_pass(spans, run));
          consume(bench::read_pass(spans, run));
        }
        const long long th0 = threads_started();
        reset_threads_at_once();
        const double t0 = bench::now_seconds();
        if (which == kRead) {
          consume(bench::read_pass(spans, run));
        } else if (which == kDedup) {
          consume(dedup_policy(w, threads, &id_s, &answer));
        } else if (which == kSha) {
          if (!sha) continue;
          answer = reference.run(spans, run);
        } else if (which == kTwoLevel) {
          if (!fp_sha) continue;
          answer = two_level.run(spans, run).distinct;
        } else if (which == kIdentity) {
          rep_of = wdedup::detail::find_identical(all, wdedup::Xxh3Hash{}, io, &st);
        } else if (which == kPairs) {
          if (!pairs_row) continue;
          answer = pairs.run(run);
        } else {
          consume(bench::read_pass(spans, run, 2));
        }
        ts[which] = bench::now_seconds() - t0;
        if (started[which] >= 0) started[which] = std::max(started[which], threads_started() - th0);
        if (at_once[which] >= 0) at_once[which] = std::max(at_once[which], threads_at_once());
        if (which == kDedup) {
          id_share.push_back(ts[kDedup] > 0 ? id_s / ts[kDedup] : 0);
          check_answer("deduplicate()", rep, answer, buffers);
        } else if (which == kSha) {
          check_answer("the SHA-256 reference", rep, answer, ref_distinct);
        } else if (which == kTwoLevel) {
          check_answer("the fingerprint + SHA-256 reference", rep, answer, fp.distinct);
          consume(bench::read_pass(spans, run));  // untimed: its successor (kContenderOrder)
        } else if (which == kIdentity) {
          last_stats = st;
          check_answer("the identity engine", rep, groups_of(rep_of), id_groups);
          // Representative by representative: a count kept by a wrong answer
          // passes the check above.
          if (rep_of != id_rep && wrong.empty()) {
            std::size_t i = 0;
            while (i < rep_of.size() && i < id_rep.size() && rep_of[i] == id_rep[i]) ++i;
            wrong = "the identity engine gave " +
                    (i < rep_of.size() && i < id_rep.size()
                         ? "input " + std::to_string(i) + " representative " + std::to_string(rep_of[i]) +
                               " in repetition " + std::to_string(rep + 1) + ", " + std::to_string(id_rep[i]) +
                               " in the untimed call"
                         : counted(rep_of.size(), "representative") + " in repetition " + std::to_string(rep + 1) +
                               ", " + std::to_string(id_rep.size()) + " in the untimed call");
          }
        } else if (which == kPairs && answer != 0 && wrong.empty()) {
          wrong = "the comparisons alone found " + counted(answer, "unequal pair") + " in repetition " +
                  std::to_string(rep + 1);
        }
      }
      consume(bench::read_pass(spans, run));  // untimed: SHA-256's successor
      t_read.push_back(ts[kRead]);
      t_dedup.push_back(ts[kDedup]);
      t_ref.push_back(ts[kSha]);
      t_id.push_back(ts[kIdentity]);
      t_read2.push_back(ts[kRead2]);
      t_pairs.push_back(ts[kPairs]);
      t_fp.push_back(ts[kTwoLevel]);
    }
    const double m_read = bench::median(t_read), m_dedup = bench::median(t_dedup), m_ref = bench::median(t_ref),
                 m_id = bench::median(t_id), m_read2 = bench::median(t_read2), m_fp = bench::median(t_fp);
    // The references hash input_spans, which leaves empty tensors out;
    // deduplicate() holds their one (empty) content as a buffer of its own
    // (ExecuTorch's layouts.ptd has such a tensor: 11 against 10).
    const bool has_empty = std::any_of(all.begin(), all.end(), [](const ByteSpan& b) { return b.empty(); });
    const std::uint64_t empty_buffer = has_empty ? 1u : 0u;
    const bool as_expected = w.expected_distinct == 0 || buffers == w.expected_distinct;
    const bool consistent = (!sha || ref_distinct + empty_buffer == buffers) && as_expected;
    const bool consistent_fp = (!fp_sha || fp.distinct + empty_buffer == buffers) && as_expected;
    if (!consistent || !consistent_fp || id_groups != buffers) {
      const std::string and_empty = has_empty ? " (and one empty content)" : "";
      report_failure(w.name + ", " + counted(threads, "thread") + ": deduplicate found " +
                     counted(buffers, "distinct buffer") + ", the identity engine " + std::to_string(id_groups) +
                     (sha ? ", SHA-256 " + std::to_string(ref_distinct) + and_empty : std::string()) +
                     (fp_sha ? ", fingerprint + SHA-256 " + std::to_string(fp.distinct) + and_empty : std::string()) +
                     (w.expected_distinct != 0 ? ", expected " + std::to_string(w.expected_distinct) : std::string()));
    }
    if (!wrong.empty()) report_failure(w.name + ", " + counted(threads, "thread") + ": " + wrong);

    const std::string label = w.name + (w.policy == Policy::OneBlob ? " ONE_BLOB" : " POSITIONAL");
    auto row = [&](const std::string& what, double subject_s, const std::vector<double>& subj,
                   const std::string& base_name, double base_s, const std::vector<double>& base) {
      Row r;
      r.group = "dedup";
      r.name = label + ": " + what;
      r.threads = threads;
      r.value = bench::gb_per_s(bytes, subject_s);
      r.unit = "GB/s";
      r.baseline = base_name;
      r.baseline_value = bench::gb_per_s(bytes, base_s);
      r.baseline_unit = "GB/s";
      r.ratio = ratio_median(base, subj);
      r.ratio_meaning = base_name + " time / " + what + " time (median of per-repetition ratios)";
      r.reps = c.reps;
      r.samples = subj;
      r.baseline_samples = base;
      r.extra = {{"bytes_examined", double(bytes)},
                 {"bytes_in_with_aliases", double(bytes_in)},
                 {"tensors", double(tensors)},
                 {"distinct_buffers", double(buffers)}};
      // (Each reference's check where it ran.)
      if (sha) r.extra.push_back({"consistent_with_sha256", consistent ? 1.0 : 0.0});
      if (fp_sha) r.extra.push_back({"consistent_with_fp_sha256", consistent_fp ? 1.0 : 0.0});
      r.extra.push_back({"input_on_huge_pages", huge_share});
      const long long by = base_name == "read pass"       ? started[kRead]
                           : base_name == "SHA-256 ref"   ? started[kSha]
                           : base_name == kTwoLevelRef    ? started[kTwoLevel]
                           : base_name == "2-stream read" ? started[kRead2]
                                                          : -1;
      if (by >= 0) r.extra.push_back({"threads_started_by_baseline", double(by)});
      if (at_once[kDedup] >= 0) r.extra.push_back({"threads_at_once_in_deduplicate", double(at_once[kDedup])});
      r.extra.push_back({"threads_run", double(run)});
      // (-1: not measured, off Linux)
      if (what == "deduplicate") r.extra.push_back({"resident_added_bytes", mem.known ? double(mem.added()) : -1.0});
      r.extra.insert(r.extra.end(), w.shape.begin(), w.shape.end());
      r.note = w.description;
      return r;
    };
    {
      // (Both targets, at each thread count, are counted before the run by
      // planned_targets, targets.hpp: a row that never comes is a target
      // not measured.)
      Row r = row("deduplicate", m_dedup, t_dedup, "read pass", m_read, t_read);
      if (w.has_targets)
        r.target = Target::ratio_at_least(w.read_target, w.read_target == 0.5 ? ">= 0.5x" : ">= 0.8x");
      r.extra.push_back({"checks_and_identity_share_of_dedup_time", bench::median(id_share)});
      out.rows.push_back(std::move(r));
    }
    if (sha) {
      Row r = row("deduplicate", m_dedup, t_dedup, "SHA-256 ref", m_ref, t_ref);
      if (w.has_targets) r.target = Target::ratio_at_least(8.0, ">= 8x");
      out.rows.push_back(std::move(r));
    }
    if (fp_sha) {
      // ExecuTorch's store as it is today: no target (the are
      // against the reference above). What it hashed says how much of its
      // time is SHA-256: every buffer of a fingerprint another one shares,
      // and a stored candidate but a fingerprint's first a second time.
      Row r = row("deduplicate", m_dedup, t_dedup, kTwoLevelRef, m_fp, t_fp);
      r.extra.push_back({"buffers_hashed_by_baseline", double(fp.hashed)});
      r.extra.push_back({"buffers_hashed_again_by_baseline", double(fp.hashed_again)});
      r.extra.push_back({"bytes_hashed_by_baseline", double(fp.bytes_hashed)});
      r.note += "; against ExecuTorch's NamedDataStore since pytorch/executorch#18351: SHA-256 only of buffers "
                "whose length and first 32 bytes another buffer has, merged on digest";
      out.rows.push_back(std::move(r));
    }
    // Both engine rows carry its counters.
    auto engine_row = [&](const std::string& base_name, double base_s, const std::vector<double>& base) {
      Row r = row("identity engine", m_id, t_id, base_name, base_s, base);
      r.extra.push_back({"bytes_hashed", double(last_stats.bytes_hashed)});
      r.extra.push_back({"bytes_compared", double(last_stats.bytes_compared)});
      r.extra.push_back({"byte_comparisons", double(last_stats.byte_comparisons)});
      r.extra.push_back({"hashed_inputs", double(last_stats.hashed)});
      return r;
    };
    // A row that says what it is notes that after the workload's settings,
    // which every row's note starts with.
    auto note = [&](const char* what) { return w.description + "; " + what; };
    out.rows.push_back(engine_row("read pass", m_read, t_read));
    if (sha) {
      // The reference's own job (which buffers are identical), without the
      // keys, tables and report deduplicate() builds besides: informational.
      Row r = engine_row("SHA-256 ref", m_ref, t_ref);
      r.note = note("the same job as the reference: which buffers are identical (exactly, here)");
      out.rows.push_back(std::move(r));
    }
    {
      Row r = row("deduplicate", m_dedup, t_dedup, "2-stream read", m_read2, t_read2);
      r.note = note("stricter baseline: each thread reads its share as two streams at once, as memcmp does");
      out.rows.push_back(std::move(r));
    }
    if (pairs_row) {
      // GB/s of the bytes the pairs read (all of the input: see pairs_row).
      Row r = row("comparisons alone", bench::median(t_pairs), t_pairs, "read pass", m_read, t_read);
      r.value = bench::gb_per_s(pairs.bytes(), bench::median(t_pairs));
      r.extra.push_back({"pair_bytes", double(pairs.bytes())});
      r.note = note("deduplicate()'s comparisons with nothing else to do: every tensor equal to an earlier one "
                    "compared with it, the pairs given, through the same kernel");
      out.rows.push_back(std::move(r));
    }
    if (sha) {
      Row r = row("read pass", m_read, t_read, "SHA-256 ref", m_ref, t_ref);
      r.note = note("the ceiling of the >= 8x target for a deduplication exactly as fast as the read pass");
      out.rows.push_back(std::move(r));
    }
    if (threads == c.threads.front()) {
      read_base = m_read;
      dedup_base = m_dedup;
    } else if (dedup_base > 0 && m_dedup > 0) {
      out.rows.push_back(scaling_row(label, c.threads.front(), threads, dedup_base, read_base,
                                     out.rows[base_row].failed, m_dedup, m_read, c.reps));
      // A speed-up over threads that did not run is none: said on the row
      // itself (a JSON reader sees no line under the table), as the
      // deduplicate rows' threads_run says it.
      Row& s = out.rows.back();
      s.extra.push_back({"threads_run", double(run)});
      s.note = w.description;
      if (run < threads)
        s.note += "; deduplicate() ran on " + std::to_string(run) + " of the " + std::to_string(threads) +
                  " threads given (one per 4 MiB of work), and so did the read pass";
    }
  }
}

}  // namespace

std::string thp_policy() {
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == nullptr) return "unknown";
  char line[128] = "";
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  std::string out = read ? line : "unknown";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

bool runs_llama(const Config& c) {
  if (!c.runs_dedup()) return false;
  for (const LlamaSpec& s : kLlamaSpecs)
    if (c.wants_workload(s.id)) return true;
  return false;
}

/// `text` with each of LlamaConfig's field names that a flag sets written
/// as that flag, as whole words ("hidden_dim" is not "dim").
std::string as_flags(const std::string& text) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"dim", "--dim"},           {"n_layers", "--layers"}, {"hidden_dim", "--hidden-dim"},
      {"vocab_size", "--vocab-size"}, {"n_heads", "--heads"}, {"n_kv_heads", "--kv-heads"},
      {"max_seq_len", "--max-seq-len"}};
  const auto word_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (!word_char(text[i])) {
      out += text[i++];
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && word_char(text[end])) ++end;
    const std::string word = text.substr(i, end - i);
    const char* flag = nullptr;
    for (const auto& [field, f] : kFlags)
      if (word == field) flag = f;
    out += flag ? flag : word;
    i = end;
  }
  return out;
}

std::string check_llama(const Config& c) {
  const std::optional<wdedup::LlamaConfig> cfg = llama_config(c);
  if (!cfg) return "unknown --model '" + c.model + "' (tiny, small or 1b)";
  // A value the user gave is named as given; one from the preset says so.
  auto flag = [&](const char* name, std::uint32_t value, std::uint32_t given) {
    return std::string(name) + " " + std::to_string(value) + (given ? "" : " (from --model " + c.model + ")");
  };
  if (cfg->dim % cfg->n_heads != 0)
    return flag("--dim", cfg->dim, c.dim) + " is not divisible by " + flag("--heads", cfg->n_heads, c.n_heads);
  if (cfg->n_heads % cfg->n_kv_heads != 0)
    return flag("--heads", cfg->n_heads, c.n_heads) + " is not divisible by " +
           flag("--kv-heads", cfg->n_kv_heads, c.n_kv_heads);
  if (cfg->head_dim() % 2 != 0)
    return flag("--dim", cfg->dim, c.dim) + " / " + flag("--heads", cfg->n_heads, c.n_heads) +
           " gives a head dimension of " + std::to_string(cfg->head_dim()) +
           ": it must be even (rotary embeddings turn pairs of elements)";
  // Partitions hold whole layers. Only workloads that run need theirs (a
  // --layers 2 run of llama-1+1 alone is fine); fewer layers than
  // partitions would shrink a workload that still bears its name and targets.
  if (!c.runs_dedup()) return "";
  std::string short_of;  // the workloads that need more layers
  std::uint32_t need = 0, count = 0;
  for (const LlamaSpec& s : kLlamaSpecs)
    if (c.wants_workload(s.id) && cfg->n_layers < std::max(s.prefill, s.decode)) {
      short_of += (short_of.empty() ? "" : " and ") + std::string(s.id);
      need = std::max({need, s.prefill, s.decode});
      ++count;
    }
  if (count != 0)
    return (count == 1 ? "workload " + short_of + " needs" : "workloads " + short_of + " need") + " at least " +
           std::to_string(need) + " layers (a partition holds whole layers), got " +
           flag("--layers", cfg->n_layers, c.layers) + "; leave " + (count == 1 ? "it" : "them") +
           " out with --workloads";
  // Every other rule, as the generator states it, so that nothing it would
  // refuse starts the run; its field names given as the flags that set
  // them (vocab_size as --vocab-size), the rest (prefill_len) as they are.
  for (const LlamaSpec& s : kLlamaSpecs) {
    if (!c.wants_workload(s.id)) continue;
    wdedup::LlamaConfig with_partitions = *cfg;
    with_partitions.prefill_partitions = s.prefill;
    with_partitions.decode_partitions = s.decode;
    if (const std::string why = with_partitions.problem(); !why.empty())
      return "Llama settings for " + std::string(s.id) + ": " + as_flags(why);
    // Refused before the run, not met as an out-of-memory kill part-way.
    const std::uint64_t bytes = with_partitions.memory_bytes();
    if (const std::string past = past_memory_limit(bytes); !past.empty())
      return "Llama settings for " + std::string(s.id) + ": the tensors need " + wdedup::detail::human_bytes(bytes) +
             " of memory" + past;
  }
  return "";
}

std::string ptd_dedup_problem(const wdedup::Program& p) {
  return ptd_policy(p) == Policy::OneBlob ? refusal<wdedup::OneBlob>(p) : refusal<wdedup::Positional>(p);
}

void run_dedup(const Config& c, Results& out) {
  {
    std::optional<Workload> llama;  // generated once, for the first spec run
    for (const LlamaSpec& s : kLlamaSpecs)
      if (c.wants_workload(s.id) && make_llama(c, s, llama)) run_workload(c, *llama, out);
  }
  if (c.wants_workload("small-tensors")) {
    progress(c, "dedup small tensors: generating the workload");
    Workload w = make_small_tensors(c);
    run_workload(c, w, out);
  }
  if (c.wants_workload("adversarial")) {
    progress(c, "dedup adversarial: generating the workload");
    Workload w = make_adversarial(c);
    run_workload(c, w, out);
  }
  if (c.wants_workload("same-names")) {
    progress(c, "dedup same names: generating the workload");
    Workload w = make_same_names(c);
    run_workload(c, w, out);
  }
  if (!c.ptd_files.empty() && c.wants_workload("ptd")) {
    progress(c, "dedup ptd files: mapping and importing");
    Workload w = make_ptd(c);
    run_workload(c, w, out);
  }
}

}  // namespace wbench
