// Must not compile: validate returns a type that converts to
// wdedup::Expected<void> only explicitly, which deduplicate() cannot assign
// to its verdict (a detector that converted explicitly let it through to a
// hard error there): the one static_assert about `validate`.
#include <wdedup/wdedup.hpp>

struct ExplicitValidate {
  struct Verdict {
    explicit operator wdedup::Expected<void>() const { return {}; }
  };
  static constexpr const char* name = "MINE";
  static Verdict validate(const wdedup::Program&) { return {}; }
  static std::string blob_key(const wdedup::Program&, std::size_t, std::uint32_t) { return "all"; }
  static std::string function_name(const wdedup::Program&, std::size_t, std::uint32_t) { return "f"; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<ExplicitValidate>>(p);
  return r.ok() ? 0 : 1;
}
