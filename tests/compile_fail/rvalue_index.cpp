// Must not compile: blob_key takes the method index as an rvalue reference,
// which deduplicate() cannot bind to the index it passes (a const lvalue).
// The check once called the members with rvalues, so this passed it and
// failed inside deduplicate.hpp, with no static_assert.
#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

struct RvalueIndex {
  static constexpr const char* name = "BROKEN";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t&&, std::uint32_t) { return "b"; }
  static std::string function_name(const wdedup::Program& p, std::size_t m, std::uint32_t) { return p.methods[m].name; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<RvalueIndex>>(p);
  return r.ok() ? 0 : 1;
}
