// wdedup/detail/random.hpp — 64 bits another user or a crafted input cannot
// predict: temporary file names, and the seed of the build-time name
// indexes. Build-time half; POSIX.
#ifndef WDEDUP_DETAIL_RANDOM_HPP
#define WDEDUP_DETAIL_RANDOM_HPP

#include <cstdint>
#include <ctime>

#if defined(__linux__)
#include <sys/random.h>
#endif
#include <sys/types.h>
#include <unistd.h>

#include "wdedup/detail/atomic.hpp"

namespace wdedup {
namespace detail {

/// Random bits from the kernel; where it has none to give, the clock, the
/// process id and a counter, which still differ from call to call and
/// process to process. Not for cryptography.
inline std::uint64_t unpredictable_u64() noexcept {
  static detail::Atomic<std::uint64_t> counter{0};
  std::uint64_t random = 0;
#if defined(__linux__)
  if (::getrandom(&random, sizeof random, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof random)) random = 0;
#endif
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::uint64_t x = random ^ (static_cast<std::uint64_t>(ts.tv_sec) << 30) ^ static_cast<std::uint64_t>(ts.tv_nsec) ^
                    (static_cast<std::uint64_t>(::getpid()) << 42) ^
                    (counter.fetch_add(1, detail::Order::relaxed) * 0x9E3779B97F4A7C15ull);
  // splitmix64's finalizer: every input bit reaches every output bit.
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_RANDOM_HPP
