// Must not compile: the policy has no function_name. The expected diagnostic
// is the one static_assert that says what to add.
#include <wdedup/wdedup.hpp>

struct NoFunctionName {
  static constexpr const char* name = "BROKEN";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "b"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NoFunctionName>>(p);
  return r.ok() ? 0 : 1;
}
