// Must not compile: blob_key is declared as asked but returns a number (a
// std::string would take it as one character): the one static_assert about
// `blob_key`, which says the result is what is wrong (an exporter author's
// trial read "must declare blob_key" for a blob_key that was declared).
#include <wdedup/wdedup.hpp>

struct NumberedBlobs {
  static constexpr const char* name = "NUMBERED_BLOBS";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static int blob_key(const wdedup::Program&, std::size_t m, std::uint32_t) { return 65 + static_cast<int>(m); }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "forward"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NumberedBlobs>>(p);
  return r.ok() ? 0 : 1;
}
