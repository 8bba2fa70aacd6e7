// examples/pair_policy.hpp — a user-written strategy policy: one blob per
// pair of methods (methods 0-1 share "pair_0", 2-3 share "pair_1", ...), so a
// model with short- and long-context prefill/decode variants compiles two
// blobs, each holding one prefill/decode pair. Functions are named
// "<method>__<partition>" as under OneBlob, so any partition counts work.
// Methods pair by their place in the program, counting those with no
// partitions (which ExecuTorch hands no backend, and the built-in
// strategies skip): with [prefill, cpu_only, decode], prefill and decode
// land in different blobs. Put the pairs next to each other.
#ifndef WDEDUP_EXAMPLES_PAIR_POLICY_HPP
#define WDEDUP_EXAMPLES_PAIR_POLICY_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

struct PairedMethods {
  static constexpr const char* name = "PAIRED_METHODS";

  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t method, std::uint32_t) {
    return "pair_" + std::to_string(method / 2);
  }
  static std::string function_name(const wdedup::Program& program, std::size_t method,
                                   std::uint32_t partition) {
    return program.methods[method].name + "__" + std::to_string(partition);
  }
};

#endif  // WDEDUP_EXAMPLES_PAIR_POLICY_HPP
