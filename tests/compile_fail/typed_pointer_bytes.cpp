// Must not compile: a float* and its element count taken as bytes. The
// refusal is overload resolution's (std::is_constructible says false), and
// the diagnostic names the rule through the trait that refuses it.
#include <wdedup/runtime.hpp>

int main() {
  static const float weights[4] = {1, 2, 3, 4};
  const wdedup::ByteSpan bytes(weights, 4);
  return static_cast<int>(bytes.size());
}
