// Must not compile: a DataSource whose read reports failure as `false`.
// Were Status made from a bool, this would be a success: every load from
// this source would return Ok with bytes never read.
#include <wdedup/runtime.hpp>

struct Flaky final : wdedup::DataSource {
  std::uint64_t size() const noexcept override { return 0; }
  const std::uint8_t* view(std::uint64_t, std::uint64_t) const noexcept override { return nullptr; }
  wdedup::Status read(std::uint64_t, void*, std::uint64_t) const noexcept override { return false; }
};

int main() {
  Flaky f;
  return f.size() == 0 ? 0 : 1;
}
