// Must not compile: a name that is nullptr. It converts to a
// std::string_view in C++17, so it passed the check and deduplicate() then
// read it as a C string (a crash); now: the one static_assert about `name`.
#include <wdedup/wdedup.hpp>

struct NullptrName {
  static constexpr auto name = nullptr;
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NullptrName>>(p);
  return r.ok() ? 0 : 1;
}
