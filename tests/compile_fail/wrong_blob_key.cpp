// Must not compile: blob_key has the wrong parameters.
#include <wdedup/wdedup.hpp>

struct WrongBlobKey {
  static constexpr const char* name = "BROKEN";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(int) { return "b"; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<WrongBlobKey>>(p);
  return r.ok() ? 0 : 1;
}
