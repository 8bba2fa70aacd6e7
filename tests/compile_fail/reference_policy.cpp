// Must not compile: the policy is given as a reference. One static_assert
// says so, rather than that OneBlob (which has one) lacks `name`.
#include <wdedup/wdedup.hpp>

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob&>>(p);
  return r.ok() ? 0 : 1;
}
