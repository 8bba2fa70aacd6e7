// Must compile: a policy whose name is a std::string_view and whose names
// are a std::string_view and a const char*, and one with the two the other
// way round: deduplicate() can use each, as a blob key and as a function
// name.
#include <wdedup/wdedup.hpp>

struct Views {
  static constexpr std::string_view name = "VIEWS";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string_view blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
  static const char* function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};
struct ViewsSwapped {
  static constexpr std::string_view name = "VIEWS_SWAPPED";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static const char* blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
  static std::string_view function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<Views>>(p);
  auto swapped = wdedup::deduplicate<wdedup::Strategy<ViewsSwapped>>(p);
  return r.ok() && swapped.ok() ? 0 : 1;
}
