// Must compile: blob_key is overloaded on its index types. The policy
// check calls it with (std::size_t method, std::uint32_t partition), as
// the README declares it; deduplicate() must call it the same way, or the
// check passes and the call is ambiguous (two errors, no static_assert).
#include <cstddef>
#include <cstdint>  // SIZE_MAX, UINT32_MAX
#include <string>

#include <wdedup/wdedup.hpp>

struct IndexOverloads {
  static constexpr const char* name = "INDEX_OVERLOADS";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "blob"; }
#if SIZE_MAX > UINT32_MAX  // (where std::size_t is std::uint32_t the two would be one)
  static std::string blob_key(const wdedup::Program&, std::uint32_t, std::size_t) { return "other"; }
#endif
  static std::string function_name(const wdedup::Program& program, std::size_t method, std::uint32_t) {
    return program.methods[method].name;
  }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<IndexOverloads>>(p);
  return r.ok() ? 0 : 1;
}
