// Every public header, then a check that none of them brought in
// <algorithm> or <atomic>: in C++17 libstdc++'s <algorithm> also declares
// every parallel algorithm, about 100M of the ~2,500M instructions gcc runs
// for the TU with every header, the margin of issue 4's compile-time target
// on a slow host.
// detail/min_max.hpp and qsort do its work in our headers (82d600a); a
// std::sort in import.hpp brought it back once (52a379b) unnoticed.
// Compiled by tests/headers/meson.build through check_header.sh.
#ifndef WDEDUP_TESTS_HEADERS_NO_ALGORITHM_HPP
#define WDEDUP_TESTS_HEADERS_NO_ALGORITHM_HPP

#include <wdedup/bench.hpp>
#include <wdedup/runtime/verify.hpp>
#include <wdedup/wdedup.hpp>

// libstdc++ only: libc++ 14's own headers include <algorithm> themselves.
#if defined(_GLIBCXX_ALGORITHM)
#error "a wdedup header includes <algorithm> (use detail/min_max.hpp, std::qsort)"
#endif
// Nor <atomic>, about 90M more (detail/atomic.hpp says why): bench.hpp's
// std::atomic brought it back once (bb230ed), and the TU with every header
// went from 2,488M to 2,584M instructions unnoticed.
#if defined(_GLIBCXX_ATOMIC) && !defined(WDEDUP_DETAIL_ATOMIC_STD)
#error "a wdedup header includes <atomic> (use detail/atomic.hpp)"
#endif

#endif  // WDEDUP_TESTS_HEADERS_NO_ALGORITHM_HPP
