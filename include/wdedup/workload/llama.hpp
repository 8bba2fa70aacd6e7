// wdedup/workload/llama.hpp — the built-in default workload: a deterministic,
// generated Llama-shaped model with `prefill` and `decode` methods, as an
// exporter lowers them (each method's weights serialized separately, so the
// same bytes sit in two places). Used by the demo, the tests and the
// benchmarks. Build-time half.
//
// Per method: tok_embeddings.weight and output.weight (tied: the same bytes,
// and within one method the same memory), per layer the attention and
// feed-forward weights and norms, per layer rotary tables that are
// byte-identical across layers, norm.weight, and one method-only tensor,
// `attention_mask`, whose shape depends on the sequence length (prefill:
// [prefill_len, max_seq_len]; decode: [1, max_seq_len]) — same name,
// different bytes. Layers are split evenly over each method's partitions.
//
// Compile time: the generating functions are templates on an unused `int`
// parameter (call them as plain functions), so a TU that includes this
// header compiles them only if it calls them.
#ifndef WDEDUP_WORKLOAD_LLAMA_HPP
#define WDEDUP_WORKLOAD_LLAMA_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wdedup/expected.hpp"
#include "wdedup/program.hpp"

namespace wdedup {

struct LlamaConfig {
  std::uint32_t dim = 256;
  std::uint32_t n_layers = 4;
  std::uint32_t n_heads = 8;
  std::uint32_t n_kv_heads = 2;
  std::uint32_t hidden_dim = 768;
  std::uint32_t vocab_size = 4096;
  std::uint32_t max_seq_len = 128;
  std::uint32_t prefill_len = 32;
  std::uint32_t prefill_partitions = 1;
  std::uint32_t decode_partitions = 1;
  ScalarType dtype = ScalarType::Half;  ///< weights; masks are Float
  std::uint64_t seed = 0x5eed;
  std::int64_t alignment = 64;          ///< asked for every weight

  /// About 2 x 10 MB of tensors (bytes in, per method): the default, runs in
  /// well under a second.
  static LlamaConfig tiny() { return LlamaConfig{}; }
  /// About 2 x 313 MB of tensors (625,285,120 bytes).
  static LlamaConfig small() {
    LlamaConfig c;
    c.dim = 1024;
    c.n_layers = 8;
    c.n_heads = 16;
    c.n_kv_heads = 4;
    c.hidden_dim = 2816;
    c.vocab_size = 32000;
    c.max_seq_len = 512;
    c.prefill_len = 128;
    return c;
  }
  /// Llama-3.2-1B shapes, fp16: about 2 x 3.0 GB of tensors (the tied
  /// output.weight is the embedding again), 4.96 GB in memory (each method
  /// its own copy; 2.48 GB once deduplicated).
  static LlamaConfig llama_1b() {
    LlamaConfig c;
    c.dim = 2048;
    c.n_layers = 16;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.hidden_dim = 8192;
    c.vocab_size = 128256;
    c.max_seq_len = 2048;
    c.prefill_len = 512;
    return c;
  }
  /// Looks a preset up by name: "tiny", "small", "1b".
  template <int = 0>
  static Expected<LlamaConfig> preset(std::string_view name) {
    if (name == "tiny") return tiny();
    if (name == "small") return small();
    if (name == "1b") return llama_1b();
    return Expected<LlamaConfig>(Error::InvalidArgument,
                                 detail::cat("unknown model preset ", detail::quote_name(name),
                                             "; expected tiny, small or 1b"));
  }

  std::uint32_t head_dim() const { return dim / n_heads; }
  std::uint32_t kv_dim() const { return head_dim() * n_kv_heads; }

  /// Bytes of memory LlamaWorkload::generate(*this) allocates for tensors
  /// (what its memory_bytes() then says), computed without allocating, so
  /// that a tool can refuse a model this machine cannot hold before it runs
  /// out of memory building it. Saturates at UINT64_MAX. Only meaningful
  /// for a configuration problem() accepts.
  std::uint64_t memory_bytes() const noexcept {
    constexpr std::uint64_t kMax = ~std::uint64_t{0};
    const auto mul = [](std::uint64_t a, std::uint64_t b) { return a != 0 && b > kMax / a ? kMax : a * b; };
    const auto add = [](std::uint64_t a, std::uint64_t b) { return b > kMax - a ? kMax : a + b; };
    const std::uint64_t el = element_size(dtype), d = dim, kv = kv_dim(), h = hidden_dim;
    // A layer: two norms, wq and wo, wk and wv, w1..w3, and two float rotary tables.
    std::uint64_t layer = mul(el, add(add(mul(2, d), mul(2, mul(d, d))), add(mul(2, mul(kv, d)), mul(3, mul(h, d)))));
    layer = add(layer, mul(2, mul(4, mul(max_seq_len, head_dim() / 2))));
    const std::uint64_t one_copy = add(mul(el, add(mul(vocab_size, d), d)), mul(n_layers, layer));
    // Both methods' copies, and each one's float causal mask.
    return add(mul(2, one_copy), mul(4, mul(add(prefill_len, 1), max_seq_len)));
  }

  /// Why `value`, given as `name` (a field, or a command line's flag for
  /// it), cannot be a tensor dimension, or "": a layout holds dimensions as
  /// int32. One statement of the bound for problem() and command lines,
  /// which name their flags instead of the fields.
  template <int = 0>
  static std::string dimension_problem(std::string_view name, std::uint64_t value) {
    if (value <= 0x7fffffffu) return {};  // (problem() asks for every field: no text for the valid ones)
    return dimension_problem(name, std::string_view(std::to_string(value)));
  }
  /// The same for a value given as its decimal digits, of any length (a
  /// command line's, which may not fit any integer type): named as given.
  template <int = 0>
  static std::string dimension_problem(std::string_view name, std::string_view digits) {
    std::string_view d = digits;  // compared without leading zeros: by length, then digit by digit
    while (d.size() > 1 && d.front() == '0') d.remove_prefix(1);
    constexpr std::string_view kMax = "2147483647";
    if (d.size() < kMax.size() || (d.size() == kMax.size() && d <= kMax)) return {};
    return detail::cat(name, " ", digits, " is more than ", kMax, " (a dimension is an int32)");
  }

  /// The first rule this configuration breaks, naming the fields and their
  /// values ("prefill_partitions 99 is more than n_layers 2"), or "" if it
  /// makes a model. Command lines name their flags after these fields.
  template <int = 0>
  std::string problem() const {
    using detail::cat;
    const std::pair<const char*, std::uint32_t> positive[] = {
        {"dim", dim},           {"n_layers", n_layers},       {"n_heads", n_heads},
        {"n_kv_heads", n_kv_heads}, {"hidden_dim", hidden_dim}, {"vocab_size", vocab_size},
        {"max_seq_len", max_seq_len}, {"prefill_len", prefill_len}, {"prefill_partitions", prefill_partitions},
        {"decode_partitions", decode_partitions}};
    for (const auto& [name, value] : positive) {
      if (value == 0) return cat(name, " is 0; it must be positive");
      // Every one may become a tensor dimension.
      if (std::string why = dimension_problem(name, value); !why.empty()) return why;
    }
    if (dim % n_heads != 0) return cat("dim ", dim, " is not divisible by n_heads ", n_heads);
    if (n_heads % n_kv_heads != 0) return cat("n_heads ", n_heads, " is not divisible by n_kv_heads ", n_kv_heads);
    if (head_dim() % 2 != 0)
      return cat("head_dim (dim ", dim, " / n_heads ", n_heads, " = ", head_dim(), ") is odd; rotary tables need it even");
    if (prefill_len > max_seq_len) return cat("prefill_len ", prefill_len, " is more than max_seq_len ", max_seq_len);
    if (prefill_partitions > n_layers)
      return cat("prefill_partitions ", prefill_partitions, " is more than n_layers ", n_layers,
                 " (a partition holds at least one layer)");
    if (decode_partitions > n_layers)
      return cat("decode_partitions ", decode_partitions, " is more than n_layers ", n_layers,
                 " (a partition holds at least one layer)");
    const std::uint64_t el = element_size(dtype);
    if (el == 0) return cat("dtype ", static_cast<int>(dtype), " is not a ScalarType");
    // Each tensor's byte count must fit in 64 bits, as a Layout's does:
    // int32 dimensions pass with an 8- or 16-byte dtype. The widest of each
    // shape (wk, wv, w2 and the norms are no wider; the rotary tables and
    // the mask are floats of two int32s, under 2^64 bytes).
    const struct {
      const char* tensor;
      const char* rows_field;
      std::uint32_t rows;
    } widest[] = {{"tok_embeddings.weight", "vocab_size", vocab_size},
                  {"feed_forward.w1.weight", "hidden_dim", hidden_dim},
                  {"attention.wq.weight", "dim", dim}};
    for (const auto& t : widest)
      if (std::uint64_t{t.rows} * dim > ~std::uint64_t{0} / el)
        return cat(t.tensor, " (", t.rows_field, " ", t.rows, " x dim ", dim, " of ", scalar_type_name(dtype), ", ",
                   el, " bytes each) holds more than 2^64 - 1 bytes");
    return {};
  }
};

/// A generated Program plus the memory its tensors point into.
class LlamaWorkload {
 public:
  /// InvalidArgument for a config problem() refuses; OutOfMemory where
  /// memory_bytes() is more than std::size_t holds (32-bit targets) or
  /// saturates (past 2^64 - 1 bytes).
  template <int = 0>
  static Expected<LlamaWorkload> generate(const LlamaConfig& c) {
    return generate(c, [](std::uint64_t, std::uint64_t) {});
  }

  /// generate(c), calling on_progress(done, total) as it goes: the bytes
  /// written so far and c.memory_bytes(), after every kProgressStep bytes
  /// at most and last with done == total. Generating is nearly all first
  /// touches of fresh pages (the 1B preset, 4.96 GB, took 28 s on a 2-core
  /// VM): a tool can show how far it is, and stop there. The benchmark
  /// harness throws from on_progress on a Ctrl-C; generate() then frees
  /// what it had allocated, and the exception leaves it. Not called for a
  /// config generate() refuses.
  template <class OnProgress>
  static Expected<LlamaWorkload> generate(const LlamaConfig& c, OnProgress&& on_progress) {
    if (std::string why = c.problem(); !why.empty())
      return Expected<LlamaWorkload>(Error::InvalidArgument, detail::cat("invalid Llama config: ", why));
    // Where std::size_t is 32 bits, a model past 4 GiB cannot be held: said
    // here rather than truncated into a smaller allocation below. Past
    // 2^64 - 1 bytes in all (memory_bytes() saturates), no machine holds it.
    const std::uint64_t total = c.memory_bytes();
    if (total == ~std::uint64_t{0})
      return Expected<LlamaWorkload>(Error::OutOfMemory,
                                     "the Llama workload's tensors hold more than 2^64 - 1 bytes in all");
    if (Expected<void> fits = detail::check_addressable("the Llama workload", total); !fits)
      return Expected<LlamaWorkload>(fits.build_error());
    LlamaWorkload w;
    Progress<OnProgress> progress{on_progress, 0, total};
    w.build(c, progress);
    return w;
  }

  /// The most bytes generate() writes between two calls of its on_progress:
  /// about 0.3 s of page faults on a 2-core VM at 15 us a page. A multiple
  /// of 8, as fill_random's pieces must be.
  static constexpr std::uint64_t kProgressStep = std::uint64_t{64} << 20;

  const Program& program() const noexcept { return program_; }
  Program& program() noexcept { return program_; }
  const LlamaConfig& config() const noexcept { return config_; }

  /// Lays the same tensors out again over other partition counts, as
  /// generate() with those counts would: the same program, over the same
  /// memory, generating nothing (the benchmark harness runs its 1+1, 3+3
  /// and 3+2 workloads on one generation). InvalidArgument, naming the
  /// field, for counts problem() refuses (0, or more than n_layers); the
  /// workload is then unchanged. References into program() do not survive
  /// it, and changes made to program() are replaced.
  template <int = 0>
  Expected<void> repartition(std::uint32_t prefill_partitions, std::uint32_t decode_partitions) {
    LlamaConfig c = config_;
    c.prefill_partitions = prefill_partitions;
    c.decode_partitions = decode_partitions;
    if (std::string why = c.problem(); !why.empty())
      return Expected<void>(Error::InvalidArgument, detail::cat("invalid Llama config: ", why));
    program_ = lay_out(c);
    config_ = c;
    return {};
  }
  /// Bytes of memory the workload holds (both methods' copies).
  std::uint64_t memory_bytes() const noexcept { return memory_bytes_; }

 private:
  struct Spec {
    std::string name;
    Layout layout;
    std::uint32_t layer;  ///< UINT32_MAX: not a layer tensor
    enum Kind { kWeight, kRope, kMask } kind;
  };

  /// One allocation, uninitialised (every byte is written once): what
  /// std::unique_ptr<std::uint8_t[]> would do, without <memory>.
  class Block {
   public:
    explicit Block(std::size_t n) : p_(new std::uint8_t[n ? n : 1]) {}
    Block(Block&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    Block& operator=(Block&& o) noexcept {
      std::uint8_t* const mine = p_;
      p_ = o.p_;
      o.p_ = mine;
      return *this;
    }
    ~Block() { delete[] p_; }
    std::uint8_t* get() const noexcept { return p_; }

   private:
    std::uint8_t* p_;
  };

  template <int = 0>
  ByteSpan allocate(std::uint64_t n) {
    const auto size = static_cast<std::size_t>(n);  // (generate checked that the total fits)
    blocks_.emplace_back(size);
    memory_bytes_ += n;
    return ByteSpan(blocks_.back().get(), size);
  }

  template <class OnProgress>
  struct Progress {
    OnProgress& on_progress;
    std::uint64_t done;
    std::uint64_t total;

    /// Runs work(begin, end) over [0, n) in pieces of kProgressStep bytes
    /// at most, telling on_progress after each.
    template <class Work>
    void in_steps(std::uint64_t n, Work&& work) {
      for (std::uint64_t at = 0; at < n;) {
        const std::uint64_t end = n - at > kProgressStep ? at + kProgressStep : n;
        work(at, end);
        done += end - at;
        at = end;
        on_progress(done, total);
      }
    }
  };

  /// splitmix64: fast, deterministic, good enough that no two weights are
  /// equal. Writes bytes [begin, end) of the n-byte stream of `seed` (begin
  /// a multiple of 8): a tensor is written in pieces, the same bytes as in
  /// one.
  static void fill_random(std::uint8_t* p, std::uint64_t begin, std::uint64_t end, std::uint64_t n,
                          std::uint64_t seed) {
    std::uint64_t x = seed + (begin / 8) * 0x9E3779B97F4A7C15ull;  // (mod 2^64: the state after begin / 8 words)
    std::uint64_t i = begin;
    const std::uint64_t words_end = end < n - n % 8 ? end : n - n % 8;
    for (; i < words_end; i += 8) {
      x += 0x9E3779B97F4A7C15ull;
      std::uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      std::memcpy(p + i, &z, 8);
    }
    for (; i < end; ++i) p[i] = static_cast<std::uint8_t>(seed >> (8 * (i % 8)));  // (the last n % 8 bytes)
  }

  template <int = 0>
  static std::vector<Spec> specs(const LlamaConfig& c) {
    const auto i32 = [](std::uint32_t v) { return static_cast<std::int32_t>(v); };
    std::vector<Spec> s;
    s.push_back({"tok_embeddings.weight", Layout::contiguous(c.dtype, {i32(c.vocab_size), i32(c.dim)}),
                 UINT32_MAX, Spec::kWeight});
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      auto w = [&](const char* n, std::uint32_t rows, std::uint32_t cols) {
        s.push_back({p + n, Layout::contiguous(c.dtype, {i32(rows), i32(cols)}), l, Spec::kWeight});
      };
      s.push_back({p + "attention_norm.weight", Layout::contiguous(c.dtype, {i32(c.dim)}), l, Spec::kWeight});
      w("attention.wq.weight", c.dim, c.dim);
      w("attention.wk.weight", c.kv_dim(), c.dim);
      w("attention.wv.weight", c.kv_dim(), c.dim);
      w("attention.wo.weight", c.dim, c.dim);
      s.push_back({p + "attention.rope.freqs_cos",
                   Layout::contiguous(ScalarType::Float, {i32(c.max_seq_len), i32(c.head_dim() / 2)}), l,
                   Spec::kRope});
      s.push_back({p + "attention.rope.freqs_sin",
                   Layout::contiguous(ScalarType::Float, {i32(c.max_seq_len), i32(c.head_dim() / 2)}), l,
                   Spec::kRope});
      s.push_back({p + "ffn_norm.weight", Layout::contiguous(c.dtype, {i32(c.dim)}), l, Spec::kWeight});
      w("feed_forward.w1.weight", c.hidden_dim, c.dim);
      w("feed_forward.w2.weight", c.dim, c.hidden_dim);
      w("feed_forward.w3.weight", c.hidden_dim, c.dim);
    }
    s.push_back({"norm.weight", Layout::contiguous(c.dtype, {i32(c.dim)}), UINT32_MAX, Spec::kWeight});
    return s;
  }

  template <class OnProgress>
  void build(const LlamaConfig& c, Progress<OnProgress>& progress) {
    config_ = c;
    const std::vector<Spec> all = specs(c);
    // Prefill's copy: random weights; rotary tables are one pattern per
    // name (cos / sin), identical in every layer.
    std::vector<ByteSpan> prefill_bytes;
    std::vector<ByteSpan> rope_pattern(2);
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::uint64_t n = *all[i].layout.nbytes();
      ByteSpan b = allocate(n);
      auto* p = const_cast<std::uint8_t*>(b.data());
      if (all[i].kind == Spec::kRope) {
        const std::size_t which = all[i].name.find("freqs_sin") != std::string::npos ? 1 : 0;
        if (rope_pattern[which].data() == nullptr) {
          progress.in_steps(n, [&](std::uint64_t at, std::uint64_t end) {
            fill_random(p, at, end, n, c.seed ^ (0xC05 + which));
          });
          rope_pattern[which] = b;
        } else {
          copy_in_steps(p, rope_pattern[which].data(), n, progress);
        }
      } else {
        progress.in_steps(n, [&](std::uint64_t at, std::uint64_t end) {
          fill_random(p, at, end, n, c.seed * 1315423911u + i);
        });
      }
      prefill_bytes.push_back(b);
    }
    // Decode's copy: the same bytes in separate memory, as two separately
    // serialized graphs would hold them.
    std::vector<ByteSpan> decode_bytes;
    for (const ByteSpan& b : prefill_bytes) {
      ByteSpan d = allocate(b.size());
      copy_in_steps(const_cast<std::uint8_t*>(d.data()), b.data(), b.size(), progress);
      decode_bytes.push_back(d);
    }
    masks_[0] = causal_mask(c, c.prefill_len, progress);
    masks_[1] = causal_mask(c, 1, progress);
    specs_ = all;
    bytes_[0] = std::move(prefill_bytes);
    bytes_[1] = std::move(decode_bytes);
    program_ = lay_out(c);
  }

  /// The float causal mask for `seq` query rows over max_seq_len positions:
  /// 0.0 up to each query's own position, -1e9 past it.
  template <class OnProgress>
  ByteSpan causal_mask(const LlamaConfig& c, std::uint32_t seq, Progress<OnProgress>& progress) {
    const auto rows = static_cast<std::int32_t>(seq), cols = static_cast<std::int32_t>(c.max_seq_len);
    ByteSpan mask = allocate(*mask_layout(c, seq).nbytes());
    auto* f = reinterpret_cast<float*>(const_cast<std::uint8_t*>(mask.data()));
    const std::int32_t offset = cols - rows;  // query i sits at position offset + i
    // The index in std::size_t: rows * cols may pass 2^31 - 1 (each is an
    // int32 dimension), where an int product overflows.
    for (std::int32_t i = 0; i < rows; ++i)
      for (std::int32_t j = 0; j < cols; ++j)
        f[static_cast<std::size_t>(i) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(j)] =
            j <= offset + i ? 0.0f : -1e9f;
    progress.done += mask.size();  // (one piece: 4 MiB at the 1B preset)
    progress.on_progress(progress.done, progress.total);
    return mask;
  }

  template <int = 0>
  static Layout mask_layout(const LlamaConfig& c, std::uint32_t seq) {
    return Layout::contiguous(ScalarType::Float,
                              {static_cast<std::int32_t>(seq), static_cast<std::int32_t>(c.max_seq_len)});
  }

  /// Both methods over the tensors built, with c's partition counts.
  template <int = 0>
  Program lay_out(const LlamaConfig& c) const {
    Program program;
    add_method(program, c, "prefill", c.prefill_partitions, bytes_[0], masks_[0], c.prefill_len);
    add_method(program, c, "decode", c.decode_partitions, bytes_[1], masks_[1], 1);
    return program;
  }

  template <class OnProgress>
  static void copy_in_steps(std::uint8_t* to, const std::uint8_t* from, std::uint64_t n,
                            Progress<OnProgress>& progress) {
    progress.in_steps(n, [&](std::uint64_t at, std::uint64_t end) {
      std::memcpy(to + at, from + at, static_cast<std::size_t>(end - at));
    });
  }

  template <int = 0>
  void add_method(Program& program, const LlamaConfig& c, const char* name, std::uint32_t partitions,
                  const std::vector<ByteSpan>& bytes, ByteSpan mask, std::uint32_t seq) const {
    const std::vector<Spec>& all = specs_;
    Method& m = program.add_method(name);
    for (std::uint32_t p = 0; p < partitions; ++p) m.add_partition();
    auto partition_of_layer = [&](std::uint32_t layer) {
      return static_cast<std::uint32_t>(static_cast<std::uint64_t>(layer) * partitions / c.n_layers);
    };
    m.partitions[0].add("attention_mask", mask, 4, mask_layout(c, seq));
    for (std::size_t i = 0; i < all.size(); ++i) {
      const Spec& s = all[i];
      const std::uint32_t p = s.layer == UINT32_MAX ? (s.name == "norm.weight" ? partitions - 1 : 0)
                                                    : partition_of_layer(s.layer);
      m.partitions[p].add(s.name, bytes[i], c.alignment, s.layout);
    }
    // Tied output projection: the embedding's bytes under a second name.
    m.partitions[partitions - 1].add("output.weight", bytes[0], c.alignment, all[0].layout);
  }

  LlamaConfig config_;
  std::vector<Block> blocks_;
  std::uint64_t memory_bytes_ = 0;
  std::vector<Spec> specs_;           ///< every tensor but the masks, in build order
  std::vector<ByteSpan> bytes_[2];    ///< prefill's and decode's copies of them
  ByteSpan masks_[2];                 ///< prefill's and decode's causal masks
  Program program_;
};

}  // namespace wdedup

#endif  // WDEDUP_WORKLOAD_LLAMA_HPP
