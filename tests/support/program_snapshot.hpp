// tests/support/program_snapshot.hpp — everything a Program holds, as one
// string, for the tests that a failure (a refusal, running out of memory)
// leaves a program as it was (tests/import.cpp, tests/out_of_memory.cpp).
#ifndef WDEDUP_TESTS_SUPPORT_PROGRAM_SNAPSHOT_HPP
#define WDEDUP_TESTS_SUPPORT_PROGRAM_SNAPSHOT_HPP

#include <cstdint>
#include <string>

#include "store_dump.hpp"
#include "wdedup/program.hpp"

namespace wdedup_test {

/// Each method, partition and tensor: the tensor's name, its bytes' address
/// and size, its alignment and its whole layout (layout_text).
inline std::string snapshot(const wdedup::Program& p) {
  std::string s;
  for (const wdedup::Method& m : p.methods) {
    s += "method " + m.name + "\n";
    for (const wdedup::Partition& part : m.partitions) {
      s += " partition\n";
      for (const wdedup::Tensor& t : part.tensors) {
        s += "  " + t.name + " @" + std::to_string(reinterpret_cast<std::uintptr_t>(t.bytes.data())) + " " +
             std::to_string(t.bytes.size()) + " align " + std::to_string(t.alignment) + " " + layout_text(t.layout) +
             "\n";
      }
    }
  }
  return s;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_PROGRAM_SNAPSHOT_HPP
