# What wdedup::wdedup (the build-time half) needs, looked for the same way
# by the installed package (wdedupConfig.cmake, beside this file) and by a
# source tree taken with add_subdirectory (CMakeLists.txt). The runtime half
# needs none of it, so neither looks unless the build-time half is wanted.
#
# Sets _wdedup_missing: what was not found, as a list of what to install
# (empty when all was found); WDEDUP_XXHASH_INCLUDE_DIR: where xxhash.h is;
# and the targets Threads::Threads and Boost::headers, where found.
#
# include() gives this file a policy scope of its own: the CMP0167 set
# below reaches neither the caller nor the file that includes it.
set(_wdedup_missing "")
if(NOT TARGET Threads::Threads)
  find_package(Threads QUIET)
endif()
if(NOT TARGET Threads::Threads)
  list(APPEND _wdedup_missing "threads")
endif()
# Boost.Hana is header-only: Boost's headers are all it takes.
# Boost's own BoostConfig.cmake (Boost >= 1.70) first, then, for an
# older Boost, CMake's FindBoost. CMake 3.30 deprecates FindBoost
# (CMP0167: under NEW, find_package(Boost) never uses it, and unset it
# warns): it is asked for by name, under this file's policies only.
if(NOT TARGET Boost::headers)
  find_package(Boost 1.66 CONFIG QUIET)
endif()
if(NOT TARGET Boost::headers)
  if(POLICY CMP0167)
    cmake_policy(SET CMP0167 OLD)
  endif()
  find_package(Boost 1.66 MODULE QUIET)
endif()
if(NOT TARGET Boost::headers)
  list(APPEND _wdedup_missing "Boost >= 1.66 headers (Debian: libboost-dev)")
endif()
# xxHash is used header-only (XXH_INLINE_ALL): no library to link.
find_path(WDEDUP_XXHASH_INCLUDE_DIR xxhash.h)
if(NOT WDEDUP_XXHASH_INCLUDE_DIR)
  list(APPEND _wdedup_missing "xxhash.h (Debian: libxxhash-dev)")
endif()
