// Must not compile: the policy has no name (and nothing else either); only
// the first missing member is reported.
#include <wdedup/wdedup.hpp>

struct Empty {};

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<Empty>>(p);
  return r.ok() ? 0 : 1;
}
