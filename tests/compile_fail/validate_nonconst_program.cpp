// Must not compile: validate() takes the program by non-const reference
// (deduplicate() has only a const one); the one static_assert says how.
#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

struct MutableValidate {
  static constexpr const char* name = "MUTABLE_VALIDATE";
  static wdedup::Expected<void> validate(wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<MutableValidate>>(p);
  return r.ok() ? 0 : 1;
}
