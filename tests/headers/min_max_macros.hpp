// Every public header after function-like min and max macros, as
// <windows.h> defines them and some embedded SDKs do: a call written
// std::numeric_limits<T>::max() is then a macro invocation with too few
// arguments (atomic_file.hpp had one). libstdc++'s headers #undef min and
// max, hiding such a call where a standard header comes after the macros,
// so every standard and system header the public headers include comes
// first here, and the macros after them. Compiled by
// tests/headers/meson.build through check_header.sh, with each standard
// library at hand.
#ifndef WDEDUP_TESTS_HEADERS_MIN_MAX_MACROS_HPP
#define WDEDUP_TESTS_HEADERS_MIN_MAX_MACROS_HPP

#include <atomic>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))

#include <wdedup/bench.hpp>
#include <wdedup/runtime.hpp>
#include <wdedup/runtime/verify.hpp>
#include <wdedup/wdedup.hpp>

#endif  // WDEDUP_TESTS_HEADERS_MIN_MAX_MACROS_HPP
