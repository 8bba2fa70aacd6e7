// Must not compile: the policy has a name and validate() but neither
// blob_key nor function_name. Only the static_assert about `blob_key`
// fires; the one about `function_name` holds while blob_key is missing.
#include <wdedup/wdedup.hpp>

struct NameAndValidate {
  static constexpr const char* name = "NAME_AND_VALIDATE";
  static wdedup::Expected<void> validate(const wdedup::Program&) { return {}; }
};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<NameAndValidate>>(p);
  return r.ok() ? 0 : 1;
}
