// Must not compile: the policy is passed without Strategy<...>.
#include <wdedup/wdedup.hpp>

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::OneBlob>(p);
  return r.ok() ? 0 : 1;
}
