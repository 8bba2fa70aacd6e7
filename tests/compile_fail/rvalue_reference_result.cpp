// Must not compile: a Result of an rvalue reference. Result<T> holds a
// value, so a reference type, & or && alike, is refused by the
// static_assert that says to hold a pointer instead (an && let through
// gave only "forming pointer to reference type 'int&&'", from inside the
// class).
#include <wdedup/runtime.hpp>

int main() {
  wdedup::Result<int&&> r(wdedup::Error::NotFound);
  return r.ok() ? 1 : 0;
}
