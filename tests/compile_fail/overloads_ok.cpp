// Must compile: a policy whose validate is overloaded and whose names are
// static member function templates: deduplicate() calls them directly, so
// they are usable.
#include <wdedup/wdedup.hpp>

struct Overloads {
  static constexpr const char* name = "OVERLOADS";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static wdedup::Expected<void> validate(int) { return {}; }
  template <class Program>
  static std::string blob_key(const Program&, std::size_t, std::uint32_t) {
    return "blob";
  }
  template <class Program>
  static std::string function_name(const Program& program, std::size_t method, std::uint32_t) {
    return program.methods[method].name;
  }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<Overloads>>(p);
  return r.ok() ? 0 : 1;
}
