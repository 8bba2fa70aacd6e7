// tests/support/sanitizers.hpp — which sanitizer a test is built under, for
// the tests that count or measure the heap: a sanitizer replaces malloc
// (its own hooks, quarantine and shadow memory), so counts and resident
// sizes of the heap are its, not the code's.
#ifndef WDEDUP_TESTS_SUPPORT_SANITIZERS_HPP
#define WDEDUP_TESTS_SUPPORT_SANITIZERS_HPP

// WDEDUP_TEST_SANITIZER_MALLOC: malloc is a sanitizer's (gcc says so with
// __SANITIZE_*__, clang with __has_feature).
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define WDEDUP_TEST_SANITIZER_MALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WDEDUP_TEST_SANITIZER_MALLOC 1
#endif

// WDEDUP_TEST_TSAN: ThreadSanitizer's in particular.
#if defined(__SANITIZE_THREAD__)
#define WDEDUP_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WDEDUP_TEST_TSAN 1
#endif
#endif

#endif  // WDEDUP_TESTS_SUPPORT_SANITIZERS_HPP
