// Must not compile: function_name takes the partition index by non-const
// reference, through which it could change deduplicate()'s loop counter.
#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

struct MutableIndex {
  static constexpr const char* name = "BROKEN";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "b"; }
  static std::string function_name(const wdedup::Program& p, std::size_t m, std::uint32_t& partition) {
    ++partition;
    return p.methods[m].name;
  }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<MutableIndex>>(p);
  return r.ok() ? 0 : 1;
}
