// wdedup/detail/min_max.hpp — min, max and clamp for the build-time half.
//
// Why ours: <algorithm> is where the standard declares these, and the
// build-time headers included it for little else (one sort, two finds). In
// C++17 libstdc++'s <algorithm> also declares every parallel algorithm; it
// was 4% of what gcc executes for <wdedup/wdedup.hpp> (103M of 2,587M
// instructions, counted by callgrind), the margin of issue 4's compile
// target. Same results as std::min / std::max / std::clamp: the first
// argument when the two are equal.
#ifndef WDEDUP_DETAIL_MIN_MAX_HPP
#define WDEDUP_DETAIL_MIN_MAX_HPP

namespace wdedup::detail {

template <class T>
constexpr const T& min_of(const T& a, const T& b) noexcept {
  return b < a ? b : a;
}
template <class T>
constexpr const T& max_of(const T& a, const T& b) noexcept {
  return a < b ? b : a;
}
/// `v` within [lo, hi] (lo <= hi).
template <class T>
constexpr const T& clamp_to(const T& v, const T& lo, const T& hi) noexcept {
  return v < lo ? lo : (hi < v ? hi : v);
}

}  // namespace wdedup::detail

#endif  // WDEDUP_DETAIL_MIN_MAX_HPP
