// Must not compile: `name` declared without `static` (a data member of an
// object no one constructs). g++ used to fail deep inside deduplicate(),
// and clang 14 crashed; now: the one static_assert about `name`.
#include <wdedup/wdedup.hpp>

struct NonStaticName {
  const char* name = "MINE";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NonStaticName>>(p);
  return r.ok() ? 0 : 1;
}
