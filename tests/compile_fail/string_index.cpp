// Must not compile: function_name takes the method as a name, not an index
// (g++ once let this through the check: a constant 0 is a null pointer).
#include <wdedup/wdedup.hpp>

struct StringIndex {
  static constexpr const char* name = "BROKEN";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "b"; }
  static std::string function_name(const wdedup::Program&, std::string_view method, std::uint32_t) {
    return std::string(method);
  }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<StringIndex>>(p);
  return r.ok() ? 0 : 1;
}
