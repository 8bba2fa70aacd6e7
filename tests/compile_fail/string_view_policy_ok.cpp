// Must compile: a policy whose name is a std::string_view and whose names
// are a std::string_view and a const char*: deduplicate() can use each.
#include <wdedup/wdedup.hpp>

struct Views {
  static constexpr std::string_view name = "VIEWS";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string_view blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
  static const char* function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<Views>>(p);
  return r.ok() ? 0 : 1;
}
