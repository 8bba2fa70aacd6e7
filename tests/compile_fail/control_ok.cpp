// Must compile: the control case, so a broken include path cannot make the
// must-not-compile tests pass for the wrong reason.
#include <wdedup/wdedup.hpp>

int main() {
  wdedup::Program p;
  auto r = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob>>(p);
  return r.ok() ? 0 : 1;
}
