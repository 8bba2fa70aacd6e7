// Must compile: the indexes taken by const reference and by value, and a
// template taking them by forwarding reference; deduplicate() passes them
// as const lvalues, as the policy check does.
#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

struct ConstRefIndex {
  static constexpr const char* name = "CONST_REF_INDEX";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, const std::size_t&, const std::uint32_t& partition) {
    return "b" + std::to_string(partition);
  }
  template <class M, class P>
  static std::string function_name(const wdedup::Program& p, M&& m, P&&) {
    return p.methods[m].name;
  }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<ConstRefIndex>>(p);
  return r.ok() ? 0 : 1;
}
