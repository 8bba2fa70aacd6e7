// Must not compile: blob_key returns a type that converts to std::string
// and to std::string_view only explicitly, which deduplicate() cannot
// assign to a blob key (a detector using static_cast let it through to a
// hard error there): the one static_assert about `blob_key`. (With the
// conversion to std::string alone, a detector converting explicitly to
// std::string_view refused it too: that is two conversions.)
#include <wdedup/wdedup.hpp>

struct ExplicitBlobKey {
  struct Key {
    explicit operator std::string() const { return "blob"; }
    explicit operator std::string_view() const { return "blob"; }
  };
  static constexpr const char* name = "MINE";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static Key blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return {}; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<ExplicitBlobKey>>(p);
  return r.ok() ? 0 : 1;
}
