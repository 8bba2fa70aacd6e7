// wdedup/wdedup.hpp — the umbrella header: the build-time half (program
// model, named-data store, strategies, deduplicate, report, .ptd writer,
// the built-in Llama workload) and the runtime half. A runtime that only
// reads stores should include <wdedup/runtime.hpp> instead: it is light.
#ifndef WDEDUP_WDEDUP_HPP
#define WDEDUP_WDEDUP_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include "wdedup/deduplicate.hpp"
#include "wdedup/expected.hpp"
#include "wdedup/function_map.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/import.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/program.hpp"
#include "wdedup/ptd_writer.hpp"
#include "wdedup/report.hpp"
#include "wdedup/runtime.hpp"
#include "wdedup/strategy.hpp"
#include "wdedup/write_options.hpp"
#include "wdedup/workload/llama.hpp"

#endif  // WDEDUP_WDEDUP_HPP
