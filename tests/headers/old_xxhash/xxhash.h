/* A stand-in for xxHash 0.7.3's xxhash.h (Ubuntu 20.04's libxxhash-dev),
 * its version macros only: XXH3's output was final only from 0.8.0, so
 * wdedup's headers must refuse it before anything is hashed with it
 * (tests/headers/meson.build). */
#ifndef XXHASH_H_STANDIN_0_7_3
#define XXHASH_H_STANDIN_0_7_3
#define XXH_VERSION_MAJOR 0
#define XXH_VERSION_MINOR 7
#define XXH_VERSION_RELEASE 3
#define XXH_VERSION_NUMBER (XXH_VERSION_MAJOR * 100 * 100 + XXH_VERSION_MINOR * 100 + XXH_VERSION_RELEASE)
#endif
