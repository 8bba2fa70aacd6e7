// Must not compile: validate() returns a bool, which says nothing about
// why a program is refused; the one static_assert asks for Expected<void>.
#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

struct BoolValidate {
  static constexpr const char* name = "BOOL_VALIDATE";
  static bool validate(const wdedup::Program&) { return true; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<BoolValidate>>(p);
  return r.ok() ? 0 : 1;
}
