// Must not compile: function_name returns a number. A std::string takes an
// int as one character ('A' for 65), so the store would name its functions
// 'A', 'B', ...: the one static_assert about `function_name`.
#include <wdedup/wdedup.hpp>

struct NumberedFunctions {
  static constexpr const char* name = "NUMBERED";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
  static int function_name(const wdedup::Program&, std::size_t m, std::uint32_t p) {
    return 65 + static_cast<int>(m) * 8 + static_cast<int>(p);
  }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NumberedFunctions>>(p);
  return r.ok() ? 0 : 1;
}
