// Must not compile: the policy is only declared (its header not included).
// One static_assert says so, rather than that `name` is missing.
#include <wdedup/wdedup.hpp>

struct DeclaredOnly;

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<DeclaredOnly>>(p);
  return r.ok() ? 0 : 1;
}
