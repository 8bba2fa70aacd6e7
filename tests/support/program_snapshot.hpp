// tests/support/program_snapshot.hpp — everything a Program holds, as one
// string, for the tests that a failure (a refusal, running out of memory)
// leaves a program as it was (tests/import.cpp, tests/out_of_memory.cpp).
#ifndef WDEDUP_TESTS_SUPPORT_PROGRAM_SNAPSHOT_HPP
#define WDEDUP_TESTS_SUPPORT_PROGRAM_SNAPSHOT_HPP

#include <cstdint>
#include <string>

#include "wdedup/program.hpp"

namespace wdedup_test {

/// Each method, partition and tensor: the tensor's name, its bytes' address
/// and size, its alignment and its whole layout (every size and dim_order
/// entry, where detail::describe_layout shows the first 16 sizes).
inline std::string snapshot(const wdedup::Program& p) {
  std::string s;
  for (const wdedup::Method& m : p.methods) {
    s += "method " + m.name + "\n";
    for (const wdedup::Partition& part : m.partitions) {
      s += " partition\n";
      for (const wdedup::Tensor& t : part.tensors) {
        s += "  " + t.name + " @" + std::to_string(reinterpret_cast<std::uintptr_t>(t.bytes.data())) + " " +
             std::to_string(t.bytes.size()) + " align " + std::to_string(t.alignment);
        if (t.layout) {
          s += " type " + std::to_string(static_cast<int>(t.layout->scalar_type)) + " sizes";
          for (const std::int32_t d : t.layout->sizes) s += " " + std::to_string(d);
          s += " dim_order";
          for (const std::uint8_t d : t.layout->dim_order) s += " " + std::to_string(unsigned{d});
        } else {
          s += " no layout";
        }
        s += "\n";
      }
    }
  }
  return s;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_PROGRAM_SNAPSHOT_HPP
