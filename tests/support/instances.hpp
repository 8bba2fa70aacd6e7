// tests/support/instances.hpp — the build-time half's entry points,
// compiled once per set of flags rather than once per test.
//
// Each test that deduplicates, writes or imports would otherwise generate
// deduplicate()'s engine, the writer and the import again: tests/import.cpp
// took 31.6 s at -O2 on a slow host, 15.1 s with this (and doctest's
// super-fast asserts), and some 15 test and replay programs a configuration
// do the same. A test that includes this header first and is built with
// -DWDEDUP_TEST_EXTERN_INSTANCES takes them from instances.cpp, built with
// the test's own flags (tests/meson.build pairs them: a macro the headers
// read, such as WDEDUP_WORK_PER_STARTED_THREAD, must be the same in both,
// or the program holds two different definitions of one function). Built
// without the macro (the 32-bit suite, the libFuzzer targets, which
// instrument the library's code for coverage, a test compiled by hand) the
// header only includes the three headers, and the test instantiates what it
// calls itself.
//
// What is covered: deduplicate() under the three built-in strategies with
// the default hash, the engine every other policy shares
// (detail::deduplicate_with, so a test's own policy compiles only its
// small part), the engine with AlwaysCollideHash, every writer entry point
// and the import. Nothing here changes what the code does: the same
// definitions, compiled in another translation unit of the same program.
#ifndef WDEDUP_TESTS_SUPPORT_INSTANCES_HPP
#define WDEDUP_TESTS_SUPPORT_INSTANCES_HPP

#include <cstdint>
#include <string>
#include <vector>

// The writer first (see wdedup_file.hpp: its unqualified quote_name(...)
// calls become ambiguous with std::quoted once <iomanip> is visible).
#include "wdedup/ptd_writer.hpp"
#include "wdedup/deduplicate.hpp"
#include "wdedup/import.hpp"

#if defined(WDEDUP_TEST_INSTANTIATE)  // instances.cpp
#define WDEDUP_TEST_INSTANCE template
#elif defined(WDEDUP_TEST_EXTERN_INSTANCES)
#define WDEDUP_TEST_INSTANCE extern template
#endif

#ifdef WDEDUP_TEST_INSTANCE
namespace wdedup {
namespace detail {
WDEDUP_TEST_INSTANCE Expected<DedupResult> deduplicate_with<Xxh3Hash>(const Program&, const DedupOptions&,
                                                                       const Xxh3Hash&, PolicyPlan&, double, double);
WDEDUP_TEST_INSTANCE Expected<DedupResult> deduplicate_with<AlwaysCollideHash>(const Program&, const DedupOptions&,
                                                                                const AlwaysCollideHash&, PolicyPlan&,
                                                                                double, double);
WDEDUP_TEST_INSTANCE Expected<WriteStats> write_ptd_file_with<0>(const NamedDataStore&, const FunctionMaps&,
                                                                 const std::string&, const WriteOptions&, FileOps&);
}  // namespace detail

WDEDUP_TEST_INSTANCE Expected<DedupResult> deduplicate<Strategy<OneBlob>, Xxh3Hash>(const Program&, const DedupOptions&,
                                                                                     const Xxh3Hash&);
WDEDUP_TEST_INSTANCE Expected<DedupResult> deduplicate<Strategy<Positional>, Xxh3Hash>(const Program&,
                                                                                        const DedupOptions&,
                                                                                        const Xxh3Hash&);
WDEDUP_TEST_INSTANCE Expected<DedupResult> deduplicate<Strategy<Disabled>, Xxh3Hash>(const Program&, const DedupOptions&,
                                                                                      const Xxh3Hash&);

WDEDUP_TEST_INSTANCE Expected<WriteStats> write_ptd<0>(const NamedDataStore&, const FunctionMaps&, ByteSink&,
                                                       const WriteOptions&);
WDEDUP_TEST_INSTANCE Expected<WriteStats> write_ptd<0>(const NamedDataStore&, ByteSink&, const WriteOptions&);
WDEDUP_TEST_INSTANCE Expected<WriteStats> write_ptd_file<0>(const NamedDataStore&, const FunctionMaps&,
                                                            const std::string&, const WriteOptions&);
WDEDUP_TEST_INSTANCE Expected<WriteStats> write_ptd_file<0>(const NamedDataStore&, const std::string&,
                                                            const WriteOptions&);
WDEDUP_TEST_INSTANCE Expected<std::vector<std::uint8_t>> serialize_ptd<0>(const NamedDataStore&, const FunctionMaps&,
                                                                          const WriteOptions&);
WDEDUP_TEST_INSTANCE Expected<std::vector<std::uint8_t>> serialize_ptd<0>(const NamedDataStore&,
                                                                          const WriteOptions&);

WDEDUP_TEST_INSTANCE Expected<void> add_ptd_method<0>(Program&, const NamedDataMap&, std::string,
                                                      const ImportOptions&);
WDEDUP_TEST_INSTANCE Expected<void> add_ptd_program<0>(Program&, const NamedDataMap&, const ImportOptions&);
}  // namespace wdedup
#undef WDEDUP_TEST_INSTANCE
#endif

#endif  // WDEDUP_TESTS_SUPPORT_INSTANCES_HPP
