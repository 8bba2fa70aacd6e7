// Must not compile: the policy has a name, blob keys and function names but
// no validate(); the one static_assert says what to declare.
#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

struct NoValidate {
  static constexpr const char* name = "NO_VALIDATE";
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NoValidate>>(p);
  return r.ok() ? 0 : 1;
}
