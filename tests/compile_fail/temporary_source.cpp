// Must not compile: a map over a temporary source, which is destroyed (its
// mapping unmapped) at the end of the statement, leaving the map dangling.
#include <wdedup/runtime.hpp>

int main() {
  auto map = wdedup::NamedDataMap::open(*wdedup::MmapSource::open("model.ptd"));
  return map.ok() ? 0 : 1;
}
