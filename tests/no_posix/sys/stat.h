// A stand-in for <sys/stat.h> where there is none (the headers suite,
// tests/headers/meson.build): with WDEDUP_NO_POSIX defined the runtime
// half must not include it.
#error "<sys/stat.h> included: the runtime half with WDEDUP_NO_POSIX must not include POSIX headers"
