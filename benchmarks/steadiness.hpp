// benchmarks/steadiness.hpp — which rows of a run the machine set more than
// the code: a median far above its fastest repetition (either side), or a
// SHA-256 baseline far off the run's own pace. wdedup-bench prints them under
// its table and records them in its JSON; tests/bench.cpp checks them on
// rows of its own. Not installed.
#ifndef WDEDUP_BENCHMARKS_STEADINESS_HPP
#define WDEDUP_BENCHMARKS_STEADINESS_HPP

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "wdedup/bench.hpp"

namespace wbench {

/// Whether either side of a row ran unsteadily: its median more than
/// bench::kUnsteady times its fastest repetition (bench.hpp says why).
inline bool unsteady(const Row& w) {
  return wdedup::bench::median_over_fastest(w.samples) > wdedup::bench::kUnsteady ||
         wdedup::bench::median_over_fastest(w.baseline_samples) > wdedup::bench::kUnsteady;
}

/// SHA-256's speed at a thread count is the machine's, whatever the
/// workload: a row's SHA-256 baseline GB/s over the median of the run's
/// workloads' at that thread count, or nothing where fewer than three
/// workloads ran it (nothing to hold it against). Far from 1 (beyond
/// bench::kUnsteady either way), the machine set that baseline, steady or
/// not: on the Zen 5 EPYC VM (2026-11-30, 11:55 UTC) SHA-256 ran at 0.63
/// GB/s in every repetition of the small tensors and 1.53-1.57 GB/s in the
/// Llama workloads' of the same run, which made the small tensors' 8x
/// target read 16.7x.
inline std::optional<double> sha256_pace(const Results& r, const Row& w) {
  if (w.group != "dedup" || w.baseline != "SHA-256 ref" || w.failed) return std::nullopt;
  std::vector<std::string> seen;
  std::vector<double> speeds;
  for (const Row& o : r.rows) {
    if (o.group != "dedup" || o.baseline != "SHA-256 ref" || o.failed || o.threads != w.threads) continue;
    const std::string workload = o.name.substr(0, o.name.find(':'));
    if (std::find(seen.begin(), seen.end(), workload) != seen.end()) continue;
    seen.push_back(workload);
    speeds.push_back(o.baseline_value);
  }
  const double mid = wdedup::bench::median(speeds);
  if (speeds.size() < 3 || mid <= 0) return std::nullopt;
  return w.baseline_value / mid;
}
inline bool off_pace(const Results& r, const Row& w) {
  const std::optional<double> p = sha256_pace(r, w);
  return p && (*p > wdedup::bench::kUnsteady || *p * wdedup::bench::kUnsteady < 1);
}

/// Rows with samples on either side (timed), and how many of them are unsteady.
struct Steadiness {
  std::size_t timed = 0, unsteady = 0;
  std::size_t off_pace = 0;  ///< rows whose SHA-256 baseline is off the run's pace (sha256_pace)
};
inline Steadiness steadiness(const Results& r) {
  Steadiness s;
  for (const Row& w : r.rows) {
    s.off_pace += off_pace(r, w) ? 1u : 0u;
    if (w.samples.empty() && w.baseline_samples.empty()) continue;
    ++s.timed;
    s.unsteady += unsteady(w) ? 1u : 0u;
  }
  return s;
}

}  // namespace wbench

#endif  // WDEDUP_BENCHMARKS_STEADINESS_HPP
