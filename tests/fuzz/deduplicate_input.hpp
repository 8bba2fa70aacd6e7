// tests/fuzz/deduplicate_input.hpp — the input format of the deduplicate()
// fuzz target (deduplicate_fuzz.cpp): bytes -> a Program whose tensors are
// made to reach the identity engine's hard cases, and the encoder the seed
// writer (deduplicate_seeds.cpp) uses, so the two cannot drift apart.
//
// Structure-aware on purpose: a tensor is not raw bytes but a size from a
// menu that crosses the engine's thresholds (the 64-byte prefix fingerprint,
// the 2 KiB exit stride and sweep step, the 64 KiB block and small-tensor
// limit), contents from four base patterns plus edits at chosen places
// (first and last byte, a block boundary, the middle), or a copy, an alias
// or a view of an earlier tensor; names from a small pool (so names repeat
// across methods with equal and with other bytes, and some are literally
// the keys deduplicate() generates); and a repeat op that makes tens to
// hundreds of copies at once (runs of 64 pairs, the head chunks of groups
// of more than 64 members, the guess that every queued pair is equal).
// Ten bytes give a program of two methods whose tensors are hinted at each
// other; a random byte string still decodes to some program.
//
// Layout: byte 0 is the configuration (Config); then ops until the input
// ends, each an op byte (% 8: 0 method, 1 partition, 2-6 tensor, 7 repeat)
// and its operands. An operand past the end reads as 0.
#ifndef WDEDUP_TESTS_FUZZ_DEDUPLICATE_INPUT_HPP
#define WDEDUP_TESTS_FUZZ_DEDUPLICATE_INPUT_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "wdedup/program.hpp"

namespace dedup_fuzz {

using wdedup::ByteSpan;
using wdedup::Layout;
using wdedup::ScalarType;

enum OpCode : std::uint8_t { kMethodOp = 0, kPartitionOp = 1, kTensorOp = 2, kRepeatOp = 7 };
enum Source : std::uint8_t { kNew = 0, kCopy = 1, kAlias = 2, kView = 3 };
enum RepeatMode : std::uint8_t { kAllEqual = 0, kEveryThird = 1, kAllDiffer = 2, kAlternate = 3, kAliases = 4 };
enum StrategyPick : std::uint8_t { kOneBlob = 0, kDisabled = 1, kPositional = 2 };

/// Sizes (operand % 32). 0 is allowed (one shared empty buffer); the rest
/// sit on either side of the engine's thresholds: kPrefixBytes (64), the
/// equal-run exit stride and sweep step (2 KiB), its first prefetch (4 KiB),
/// the sweep block (16 KiB), the block and small-tensor limit (64 KiB), and
/// a few blocks (a body of ranges after the first block).
constexpr std::size_t kSizes[32] = {0,     1,     2,     3,     7,     8,      63,     64,
                                    65,    127,   128,   129,   1000,  2047,   2048,   2049,
                                    4095,  4096,  4097,  16383, 16384, 16385,  65535,  65536,
                                    65537, 131071, 131072, 131073, 196615, 262144, 262145, 300000};
/// Repeat counts (operand % 16): around kRun (64, the pairs compared in one
/// run), past kHeadChunkBlocks (64: a group of more members of 64 KiB or more
/// is split into chunks), and enough small pairs that the name check ends
/// while others are still being compared (the guess and its undo).
constexpr std::size_t kCounts[16] = {2, 3, 4, 5, 8, 9, 16, 17, 63, 64, 65, 66, 100, 129, 200, 300};
/// Alignments (attribute >> 3): mostly 1; 2^31 and 3 * 2^30 on equal bytes
/// overflow the lcm (InvalidAlignment); 26 and 27 are refused alone (0 and
/// 2^32 + 1), but only with layout choice 3, so a refusal stays rare.
constexpr std::int64_t kAlignments[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 4, 16, 64, 3, 4096, std::int64_t{1} << 31, std::int64_t{3} << 30,
                                          5, std::int64_t{1} << 32, 0, (std::int64_t{1} << 32) + 1, 8, 8, 8, 8};
/// Method names, taken in turn (a name already used is skipped), so that
/// only the refusals' operands repeat one. "a__0" is what OneBlob names
/// method "a"'s partition 0.
constexpr const char* kMethodNames[6] = {"decode", "prefill", "verify", "m", "a", "a__0"};
/// Tensor names: a partition takes the named one, or the next it has not
/// used. "decode/w", "decode/0/w", "w~1", "decode/w~1", "prefill/w" and
/// "m/0/b" are keys deduplicate() generates for "w" and "b" when their bytes
/// differ between methods or partitions: a tensor with that name must not
/// lose its key to them, nor they theirs to it.
constexpr const char* kTensorNames[12] = {"w",   "b", "x", "y", "layers.0.wq.weight", "decode/w", "decode/0/w",
                                          "w~1", "decode/w~1", "prefill/w", "m/0/b", "z"};
/// Budget: a run stays in milliseconds under ASan (the bytes are compared
/// by three deduplicate() calls and the oracle). 4.5 MiB is room for 65
/// tensors of 64 KiB + 1 (a group split into head chunks), no more.
constexpr std::size_t kMaxTensors = 600;
constexpr std::size_t kMaxBytes = std::size_t{9} << 19;

/// What byte 0 says: the strategy, the second run's thread count, and the
/// thread count of the run with the always-colliding hash.
struct Config {
  StrategyPick strategy = kOneBlob;
  unsigned threads = 2;
  unsigned collide_threads = 1;
};

inline Config config_of(std::uint8_t c) {
  Config k;
  k.strategy = static_cast<StrategyPick>(c % 3);
  k.threads = 2 + (c / 3) % 2;
  k.collide_threads = (c / 6) % 2 != 0 ? k.threads : 1;
  return k;
}

/// An offset of an n-byte tensor (operand % 16), clamped into it: the
/// first and last byte, the middle, and each side of the thresholds.
inline std::size_t position(std::uint8_t b, std::size_t n) {
  const std::int64_t s = static_cast<std::int64_t>(n);
  const std::int64_t at[16] = {0, s - 1, s / 2, 63, 64, 65, 2047, 2048, 4095, 4096, 16384, 65535, 65536, 65537,
                               s - 65536, s - 2048};
  const std::int64_t p = at[b % 16];
  return p < 0 ? 0 : p >= s ? n - 1 : static_cast<std::size_t>(p);
}

/// Base pattern (p % 4) of n bytes under seed s: a constant, a ramp, noise,
/// and noise with a 2 KiB period (every sweep step alike).
inline void fill(std::vector<std::uint8_t>& v, std::size_t n, std::uint8_t p, std::uint8_t s) {
  v.resize(n);
  std::uint32_t x = 0x9e3779b9u ^ (std::uint32_t{s} * 0x01000193u + 1);
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return static_cast<std::uint8_t>(x >> 24);
  };
  for (std::size_t i = 0; i < n; ++i) {
    switch (p % 4) {
      case 0: v[i] = s; break;
      case 1: v[i] = static_cast<std::uint8_t>(i * (2u * s + 1) + (i >> 8)); break;
      case 2: v[i] = next(); break;
      default: v[i] = i < 2048 ? next() : v[i - 2048]; break;
    }
  }
}

/// The decoded input: the program, and the memory its tensors point at
/// (a deque: growing it moves no buffer).
struct Decoded {
  Config config;
  wdedup::Program program;
  std::deque<std::vector<std::uint8_t>> memory;
};

/// Reads ops from an input; see the top of this file.
class Decoder {
 public:
  Decoder(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}

  void decode(Decoded& out) {
    out_ = &out;
    out.config = config_of(next());
    while (p_ != end_ && tensors_.size() < kMaxTensors) {
      const std::uint8_t op = next() % 8;
      if (op == kMethodOp) add_method(next());
      else if (op == kPartitionOp) add_partition();
      else if (op == kRepeatOp) repeat();
      else tensor();
    }
  }

 private:
  struct Made {
    ByteSpan bytes;
    std::int64_t alignment;
    std::optional<Layout> layout;
  };

  std::uint8_t next() { return p_ == end_ ? 0 : *p_++; }

  void add_method(std::uint8_t b) {
    wdedup::Program& prog = out_->program;
    std::string name;
    if (b % 16 == 15) {
      name = "";  // refused: InvalidName
    } else if (b % 16 == 14 && !prog.methods.empty()) {
      name = prog.methods.front().name;  // refused: used twice
    } else {
      for (std::size_t k = 0; k < 6 && name.empty(); ++k) {
        const char* c = kMethodNames[(b / 16 + prog.methods.size() + k) % 6];
        if (prog.find_method(c) == nullptr) name = c;
      }
      if (name.empty()) name = "m" + std::to_string(prog.methods.size());
    }
    prog.add_method(std::move(name));
    part_ = nullptr;
  }

  void add_partition() {
    if (out_->program.methods.empty()) add_method(0);
    part_ = &out_->program.methods.back().add_partition();
    repeats_ = 0;
    names_.clear();
  }

  wdedup::Partition& partition() {
    if (part_ == nullptr) add_partition();
    return *part_;
  }

  bool used(const std::string& name) {
    partition();
    return names_.count(name) != 0;
  }

  std::string pick_name(std::uint8_t b) {
    wdedup::Partition& part = partition();
    if (b % 32 == 31 && !part.tensors.empty()) return part.tensors.front().name;  // refused: used twice
    if (b % 32 == 30) return "";                                                // refused: empty
    if (b % 32 == 29) return std::string("w\0x", 3);                            // refused: a NUL
    for (std::size_t k = 0; k < 12; ++k) {
      std::string name = kTensorNames[(b + k) % 12];
      if (!used(name)) return name;
    }
    for (std::size_t k = 0;; ++k)
      if (std::string name = "t" + std::to_string(k); !used(name)) return name;
  }

  std::vector<std::uint8_t>& new_memory() { return out_->memory.emplace_back(); }

  void edit(std::vector<std::uint8_t>& v, std::uint8_t pos, std::uint8_t value) {
    if (v.empty()) return;
    v[position(pos, v.size())] ^= value == 0 ? 0x5a : value;
  }

  /// The layout (attribute % 8) of n bytes; choice 7 is a refused one
  /// (attribute 7: a size that does not match, 15: an inconsistent
  /// dim_order), or contiguous for the other attributes.
  static std::optional<Layout> layout_of(std::uint8_t attr, std::size_t n) {
    const auto s = static_cast<std::int32_t>(n);
    switch (attr % 8) {
      case 4: return Layout::contiguous(ScalarType::Byte, {s});
      case 5:
        if (n % 4 == 0 && n != 0) return Layout::contiguous(ScalarType::Float, {s / 4});
        return Layout::contiguous(ScalarType::Byte, {1, s});
      case 6: return Layout::channels_last(ScalarType::Byte, {1, s, 1, 1});
      case 7:
        if (attr == 7) return Layout::contiguous(ScalarType::Byte, {s + 1});
        if (attr == 15) return Layout{ScalarType::Byte, {s}, {1}};
        return Layout::contiguous(ScalarType::Byte, {s});
      default: return std::nullopt;
    }
  }

  static std::int64_t alignment_of(std::uint8_t attr) {
    const std::int64_t a = kAlignments[attr >> 3];
    return (a == 0 || a > (std::int64_t{1} << 32)) && attr % 8 != 3 ? 1 : a;
  }

  void add(std::string name, ByteSpan bytes, std::int64_t alignment, std::optional<Layout> layout) {
    names_.insert(name);
    partition().add(std::move(name), bytes, alignment, layout);
    tensors_.push_back(Made{bytes, alignment, std::move(layout)});
  }

  std::size_t earlier(std::uint8_t b) const { return tensors_.size() - 1 - b % tensors_.size(); }

  void tensor() {
    std::string name = pick_name(next());
    const std::uint8_t attr = next(), src = next();
    Source kind = static_cast<Source>(src % 4);
    if (tensors_.empty()) kind = kNew;
    ByteSpan bytes;
    if (kind == kAlias) {
      bytes = tensors_[earlier(next())].bytes;
    } else if (kind == kView) {
      const ByteSpan of = tensors_[earlier(next())].bytes;
      const std::uint8_t o = next();
      const std::size_t n = of.size();
      const std::size_t offsets[8] = {0, 1, 64, 4096, 65536, n / 2, n == 0 ? 0 : n - 1, 0};
      const std::size_t off = std::min(offsets[o % 8], n);
      bytes = ByteSpan(of.data() + off, std::min(kSizes[next() % 32], n - off));
    } else {
      std::vector<std::uint8_t>* v;
      if (kind == kCopy) {
        const ByteSpan of = tensors_[earlier(next())].bytes;
        if (bytes_ + of.size() > kMaxBytes) return;
        v = &new_memory();
        v->assign(of.begin(), of.end());
      } else {
        const std::size_t n = kSizes[next() % 32];
        const std::uint8_t pattern = next();
        if (bytes_ + n > kMaxBytes) return;
        v = &new_memory();
        fill(*v, n, pattern, static_cast<std::uint8_t>(pattern >> 2));
      }
      bytes_ += v->size();
      for (int e = (src >> 2) % 4; e > 0; --e) {
        const std::uint8_t pos = next();
        edit(*v, pos, next());
      }
      bytes = ByteSpan(v->data(), v->size());
    }
    add(std::move(name), bytes, alignment_of(attr), layout_of(attr, bytes.size()));
  }

  /// Copies of the last tensor, named "r<k>" (k counts on through the
  /// partition, so a method that repeats as another did names its copies
  /// alike: hinted pairs), with its alignment and layout.
  void repeat() {
    const std::size_t count = kCounts[next() % 16];
    const auto mode = static_cast<RepeatMode>(next() % 5);
    const std::uint8_t pos = next();
    if (tensors_.empty()) return;
    const Made last = tensors_.back();
    for (std::size_t i = 0; i < count && tensors_.size() < kMaxTensors; ++i) {
      std::string name = "r" + std::to_string(repeats_++);
      if (used(name)) continue;
      ByteSpan bytes = last.bytes;
      if (mode != kAliases) {
        if (bytes_ + bytes.size() > kMaxBytes) return;
        std::vector<std::uint8_t>& v = new_memory();
        v.assign(bytes.begin(), bytes.end());
        bytes_ += v.size();
        const bool differs = mode == kAllDiffer || (mode == kEveryThird && i % 3 == 2) || (mode == kAlternate && i % 2 == 1);
        if (differs) edit(v, pos, mode == kAllDiffer ? static_cast<std::uint8_t>(i % 255 + 1) : 0);
        bytes = ByteSpan(v.data(), v.size());
      }
      add(std::move(name), bytes, last.alignment, last.layout);
    }
  }

  const std::uint8_t* p_;
  const std::uint8_t* end_;
  Decoded* out_ = nullptr;
  wdedup::Partition* part_ = nullptr;
  std::set<std::string> names_;  // the partition's
  std::vector<Made> tensors_;
  std::size_t bytes_ = 0;
  std::size_t repeats_ = 0;
};

/// Builds inputs op by op (deduplicate_seeds.cpp): each call appends what
/// the decoder reads for that op.
struct Encoder {
  std::vector<std::uint8_t> bytes;

  explicit Encoder(std::uint8_t config) : bytes{config} {}
  /// The config byte for a strategy, thread count (2 or 3) and whether the
  /// colliding hash runs on that many threads too.
  static std::uint8_t config(StrategyPick s, unsigned threads, bool collide_threaded) {
    return static_cast<std::uint8_t>(s + 3 * (threads - 2) + 6 * (collide_threaded ? 1 : 0));
  }
  Encoder& method(std::uint8_t name = 0) { return put({kMethodOp, name}); }
  Encoder& partition() { return put({kPartitionOp}); }
  /// A new tensor: size index, pattern, and up to 3 (position, xor) edits.
  Encoder& fresh(std::uint8_t name, std::uint8_t attr, std::uint8_t size, std::uint8_t pattern,
                 std::vector<std::uint8_t> edits = {}) {
    put({kTensorOp, name, attr, static_cast<std::uint8_t>(kNew | (edits.size() / 2) << 2), size, pattern});
    return put(edits);
  }
  /// A copy of the tensor `back` places before this one (0: the last).
  Encoder& copy(std::uint8_t name, std::uint8_t attr, std::uint8_t back, std::vector<std::uint8_t> edits = {}) {
    put({kTensorOp, name, attr, static_cast<std::uint8_t>(kCopy | (edits.size() / 2) << 2), back});
    return put(edits);
  }
  Encoder& alias(std::uint8_t name, std::uint8_t attr, std::uint8_t back) {
    return put({kTensorOp, name, attr, kAlias, back});
  }
  Encoder& view(std::uint8_t name, std::uint8_t attr, std::uint8_t back, std::uint8_t offset, std::uint8_t size) {
    return put({kTensorOp, name, attr, kView, back, offset, size});
  }
  Encoder& repeat(std::uint8_t count, RepeatMode mode, std::uint8_t pos = 1) {
    return put({kRepeatOp, count, mode, pos});
  }

 private:
  Encoder& put(const std::vector<std::uint8_t>& b) {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return *this;
  }
};

}  // namespace dedup_fuzz

#endif  // WDEDUP_TESTS_FUZZ_DEDUPLICATE_INPUT_HPP
