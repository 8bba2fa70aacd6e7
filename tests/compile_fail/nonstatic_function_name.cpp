// Must not compile: `function_name` declared without `static` (clang 14
// crashed on it): the one static_assert about `function_name`.
#include <wdedup/wdedup.hpp>

struct NonStaticFunctionName {
  static constexpr const char* name = "MINE";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
  std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NonStaticFunctionName>>(p);
  return r.ok() ? 0 : 1;
}
