// Must not compile: blob_key returns a type whose conversion to
// std::string_view is not const. deduplicate() reads the key through a
// const reference, so the check does too: the one static_assert, not an
// error inside deduplicate.hpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <wdedup/wdedup.hpp>

struct Key {
  operator std::string_view() { return "all"; }  // not const
};

struct NonConstKey {
  static constexpr const char* name = "NONCONST_KEY";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static Key blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return {}; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NonConstKey>>(p);
  return r.ok() ? 0 : 1;
}
