// wdedup/runtime/detail/function_repeats.hpp — the check, without a heap,
// that no two functions of a .ptd file's function maps share a (method,
// partition) or a (blob key, function name). Shared by the reader (at open)
// and the writer (before it writes), so that the writer never writes a file
// the reader refuses. Runtime half: no heap, no exceptions.
#ifndef WDEDUP_RUNTIME_DETAIL_FUNCTION_REPEATS_HPP
#define WDEDUP_RUNTIME_DETAIL_FUNCTION_REPEATS_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wdedup/runtime/detail/key_hash.hpp"
#include "wdedup/runtime/key_view.hpp"

namespace wdedup {
namespace detail {

/// One function's names, as check_function_repeats reads them.
struct FunctionNames {
  KeyView method, blob, name;
  std::uint32_t partition;
};

/// What check_function_repeats found, and at which function (the second of
/// a repeat, or the one whose comparison ran out of budget).
struct RepeatCheck {
  enum Problem { kNone, kPlace, kName, kTooLong } problem = kNone;
  std::uint32_t at = 0;
};

/// Whether `count` functions (names_of(i): their names, views into one pool
/// of `strings_size` bytes) hold two for one (method, partition) or two with
/// one name in one blob: find_function would return the first of the two,
/// another function's tensor table, without an error. The reader runs it at
/// open; the writer runs it on what it is about to write, so no file it
/// writes fails to open.
///
/// With no heap to sort in, functions are taken in blocks of kBlock, whose
/// two fingerprints each sit on the stack (1 KiB); every later function is
/// fingerprinted once per block and compared with them, and bytes are
/// compared only where a fingerprint matches. A fingerprint hashes a name's
/// size and at most its first and last 64 bytes (all of a name up to 128
/// bytes), so it costs the same whatever the names: 2,896 functions are
/// ~4.2M pairs of 64-bit comparisons and ~200k fingerprints, a few ms. Bytes
/// compared where fingerprints match, beyond a real repeat's (found at
/// once), stay within the pool plus `bytes_per_name` a name: only names
/// over 128 bytes that agree at both ends, pair after pair, exceed that
/// (kTooLong: too long to check).
template <class NamesOf>
RepeatCheck check_function_repeats(std::uint32_t count, std::uint64_t strings_size, std::uint64_t bytes_per_name,
                                   const NamesOf& names_of) noexcept {
  constexpr std::uint32_t kBlock = 64;
  constexpr std::size_t kEnd = 64;
  std::uint64_t place_of[kBlock], name_of[kBlock];  // fingerprints of (method, partition), of (blob, name)
  const auto fingerprint = [](KeyView v, std::uint64_t seed) {
    const std::size_t n = v.size(), head = n < kEnd ? n : kEnd, tail = n - head < kEnd ? n - head : kEnd;
    const std::uint64_t h = key_hash(v.data(), head, seed ^ n);
    return tail != 0 ? key_hash(v.data() + n - tail, tail, h) : h;
  };
  const auto place_hash = [&](const FunctionNames& f) { return fingerprint(f.method, f.partition); };
  const auto name_hash = [&](const FunctionNames& f) { return fingerprint(f.name, fingerprint(f.blob, ~0ull)); };
  std::uint64_t budget = strings_size + bytes_per_name * 3 * std::uint64_t{count};
  bool out_of_budget = false;
  const auto same = [&](KeyView a, KeyView b) {
    if (a.size() != b.size()) return false;
    if (a.data() == b.data()) return true;  // one pool string (NUL-terminated: the same name)
    if (a.size() > budget) {
      out_of_budget = true;
      return false;
    }
    budget -= a.size();
    return std::memcmp(a.data(), b.data(), a.size()) == 0;
  };
  RepeatCheck found;
  for (std::uint32_t b0 = 0; b0 < count; b0 += kBlock) {
    const std::uint32_t nb = count - b0 < kBlock ? count - b0 : kBlock;
    for (std::uint32_t k = 0; k < nb; ++k) {
      const FunctionNames f = names_of(b0 + k);
      place_of[k] = place_hash(f);
      name_of[k] = name_hash(f);
    }
    for (std::uint32_t i = b0 + 1; i < count; ++i) {
      const FunctionNames fi = names_of(i);
      const bool in_block = i - b0 < nb;
      const std::uint64_t place = in_block ? place_of[i - b0] : place_hash(fi);
      const std::uint64_t name = in_block ? name_of[i - b0] : name_hash(fi);
      const std::uint32_t before = in_block ? i - b0 : nb;  // the block's functions before i
      found.at = i;
      for (std::uint32_t k = 0; k < before; ++k) {
        if (place_of[k] == place) {
          const FunctionNames fj = names_of(b0 + k);
          if (fi.partition == fj.partition && same(fi.method, fj.method)) {
            found.problem = RepeatCheck::kPlace;
            return found;
          }
        }
        if (name_of[k] == name) {
          const FunctionNames fj = names_of(b0 + k);
          if (same(fi.name, fj.name) && same(fi.blob, fj.blob)) {
            found.problem = RepeatCheck::kName;
            return found;
          }
        }
      }
      if (out_of_budget) {
        found.problem = RepeatCheck::kTooLong;
        return found;
      }
    }
  }
  return RepeatCheck{};
}

}  // namespace detail

}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_DETAIL_FUNCTION_REPEATS_HPP
