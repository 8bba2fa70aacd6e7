// wdedup/runtime/detail/xxhash.hpp — xxhash.h, header-only (XXH_INLINE_ALL),
// the one place wdedup includes it (hash.hpp, verify.hpp, the writer).
//
// Why XXH_NO_INLINE_HINTS under GCC 12 and later: xxHash 0.8.1 (Debian 12's
// libxxhash-dev) marks its XXH3 kernels always_inline and reaches them
// through function pointers; GCC 12 at -Og does not inline through those and
// stops with "inlining failed in call to 'always_inline'" as soon as a
// translation unit uses the streaming API (XXH3_64bits_digest), as the
// writer and verify_segment do (xxHash issues #800, #943; fixed for one path
// in 0.8.2). No macro tells -Og from -O2 (GCC bug 107931), so the hints are
// dropped for every GCC build. At -O2 GCC still inlines the kernels (it keeps
// the per-block loop out of line, one call per KiB). The dedup benchmark's
// hash-bound workload (adversarial; EPYC VM, 2026-11-27, six alternating
// runs of each build) ran at a median 16.15 GB/s with the hints and 16.05
// without on one thread, 30.75 and 31.2 GB/s on two. Define
// XXH_NO_INLINE_HINTS=0 to keep the hints.
#ifndef WDEDUP_RUNTIME_DETAIL_XXHASH_HPP
#define WDEDUP_RUNTIME_DETAIL_XXHASH_HPP

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && !defined(XXH_NO_INLINE_HINTS)
#define XXH_NO_INLINE_HINTS 1
#endif
#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>
// XXH3's output is final from xxHash 0.8.0 (its release notes: before it
// "the generated values could still change between versions"), and the
// files' content hashes are XXH3: built against 0.7.x, wdedup would write
// hashes that a reader built against 0.8 refuses (MalformedSegment), and
// the reverse. README's Requirements names 0.8.0; this holds every build to
// it (0.7.x compiles XXH3 under XXH_INLINE_ALL, so nothing else would stop).
#if !defined(XXH_VERSION_NUMBER) || XXH_VERSION_NUMBER < 800
#error "wdedup needs xxHash 0.8.0 or later: XXH3's output, which the files' content hashes are, is final from there"
#endif

#endif  // WDEDUP_RUNTIME_DETAIL_XXHASH_HPP
