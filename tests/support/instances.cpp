// The definitions tests/support/instances.hpp declares, for the tests
// built with -DWDEDUP_TEST_EXTERN_INSTANCES (tests/meson.build builds this
// file once for each set of flags those tests use).
#define WDEDUP_TEST_INSTANTIATE
#include "instances.hpp"
