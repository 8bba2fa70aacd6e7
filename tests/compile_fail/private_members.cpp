// Must not compile: a complete, correct policy written as a `class` without
// `public:`, so every member is private; the message says they must be public.
#include <cstddef>
#include <cstdint>
#include <string>

#include <wdedup/wdedup.hpp>

class PrivateMembers {
  static constexpr const char* name = "PRIVATE";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "b"; }
  static std::string function_name(const wdedup::Program& p, std::size_t m, std::uint32_t) { return p.methods[m].name; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<PrivateMembers>>(p);
  return r.ok() ? 0 : 1;
}
