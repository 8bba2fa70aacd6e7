// benchmarks/steadiness.hpp — which rows of a run the machine set more than
// the code: a median far above its fastest repetition (either side), or a
// SHA-256 baseline far off the run's own pace. wdedup-bench prints them under
// its table (steadiness_text) and records them in its JSON; tests/bench.cpp
// checks them on rows of its own. Not installed.
#ifndef WDEDUP_BENCHMARKS_STEADINESS_HPP
#define WDEDUP_BENCHMARKS_STEADINESS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "wdedup/bench.hpp"

namespace wbench {

/// Samples a side needs before it is judged (bench.hpp says why).
constexpr std::size_t kJudgedSamples = wdedup::bench::kSteadyMinSamples;

/// Whether a row's steadiness is judged: not failed (its figures are no
/// result), and at least kJudgedSamples samples on one side.
inline bool judged(const Row& w) {
  return !w.failed && (w.samples.size() >= kJudgedSamples || w.baseline_samples.size() >= kJudgedSamples);
}

/// A side's median over its fastest, if it has kJudgedSamples samples (for
/// the text under the table).
inline std::optional<double> side_spread(const std::vector<double>& samples) {
  if (samples.size() < kJudgedSamples) return std::nullopt;
  return wdedup::bench::median_over_fastest(samples);
}

/// Whether a judged side of a row ran unsteadily: its median more than
/// bench::kUnsteady times its fastest repetition (bench.hpp says why).
inline bool unsteady(const Row& w) {
  return judged(w) && !(wdedup::bench::steady(w.samples) && wdedup::bench::steady(w.baseline_samples));
}

/// The workload a dedup row is of: its name up to the ':' ("small tensors
/// POSITIONAL: deduplicate" is of "small tensors POSITIONAL").
inline std::string workload_of(const Row& w) { return w.name.substr(0, w.name.find(':')); }

/// Whether a row's baseline is a SHA-256 speed the pace can use.
inline bool sha256_row(const Row& w) {
  return w.group == "dedup" && w.baseline == "SHA-256 ref" && !w.failed && w.baseline_value > 0;
}

/// SHA-256's speed at a thread count is mostly the machine's, whatever the
/// workload (a workload of small buffers pays a little per call): a row's
/// SHA-256 baseline GB/s over the median of the run's workloads' at that
/// thread count, or nothing where fewer than three workloads ran it
/// (nothing to hold it against). Far from 1 (beyond bench::kUnsteady either
/// way), the machine set that baseline, steady or not: on the Zen 5 EPYC VM
/// (2026-11-30, 11:55 UTC) SHA-256 ran at 0.63 GB/s in every repetition of
/// the small tensors and at 1.53-1.57 GB/s in the Llama workloads of the same
/// run, which made the small tensors' 8x target read 16.7x.
inline std::optional<double> sha256_pace(const Results& r, const Row& w) {
  if (!sha256_row(w)) return std::nullopt;
  std::vector<std::string> seen;
  std::vector<double> speeds;
  for (const Row& o : r.rows) {
    if (!sha256_row(o) || o.threads != w.threads) continue;
    const std::string workload = workload_of(o);
    if (std::find(seen.begin(), seen.end(), workload) != seen.end()) continue;
    seen.push_back(workload);
    speeds.push_back(o.baseline_value);
  }
  if (speeds.size() < 3) return std::nullopt;
  return w.baseline_value / wdedup::bench::median(speeds);
}
inline bool off_pace(const Results& r, const Row& w) {
  const std::optional<double> p = sha256_pace(r, w);
  return p && (*p > wdedup::bench::kUnsteady || *p * wdedup::bench::kUnsteady < 1);
}

/// The run's counts: rows judged and unsteady, and (workload, thread count)
/// pairs whose SHA-256 is off the run's pace (each such pair has a row per
/// contender against it, all with that one baseline: counted once).
struct Steadiness {
  std::size_t judged = 0, unsteady = 0;
  std::vector<std::pair<std::string, unsigned>> off_pace;  ///< (workload, threads), first row's order
};
inline Steadiness steadiness(const Results& r) {
  Steadiness s;
  for (const Row& w : r.rows) {
    if (off_pace(r, w)) {
      const std::pair<std::string, unsigned> key{workload_of(w), w.threads};
      if (std::find(s.off_pace.begin(), s.off_pace.end(), key) == s.off_pace.end()) s.off_pace.push_back(key);
    }
    if (!judged(w)) continue;
    ++s.judged;
    s.unsteady += unsteady(w) ? 1u : 0u;
  }
  return s;
}

/// What goes under the table: the workloads whose SHA-256 ran off the run's
/// pace, then the unsteady rows (or that none is), or that no row had the
/// repetitions to judge. Empty for a run without timed rows.
inline std::string steadiness_text(const Results& r) {
  const Steadiness st = steadiness(r);
  const double limit = wdedup::bench::kUnsteady;
  std::string out;
  char buf[512];
  if (!st.off_pace.empty()) {
    std::snprintf(buf, sizeof buf,
                  "SHA-256 off the run's pace: in %zu workload run%s SHA-256 ran more than %.1fx faster or slower\n"
                  "than the median of the run's workloads at that thread count; the machine set their SHA-256 "
                  "ratios:\n",
                  st.off_pace.size(), st.off_pace.size() == 1 ? "" : "s", limit);
    out += buf;
    for (const auto& [workload, threads] : st.off_pace)
      for (const Row& w : r.rows)
        if (off_pace(r, w) && workload_of(w) == workload && w.threads == threads) {
          std::snprintf(buf, sizeof buf, "  SHA-256 of %s, %u thr: %.3g GB/s, %.2fx the run's median\n",
                        workload.c_str(), threads, w.baseline_value, *sha256_pace(r, w));
          out += buf;
          break;
        }
  }
  // Timed rows, by the flag that sets their repetitions: the build rows
  // follow --compile-reps, every other --reps.
  bool timed_build = false, timed_other = false;
  for (const Row& w : r.rows)
    if (!w.samples.empty() || !w.baseline_samples.empty()) (w.group == "build" ? timed_build : timed_other) = true;
  if (!timed_build && !timed_other) return out;
  if (st.judged == 0) {
    const char* flags = !timed_build ? "--reps" : !timed_other ? "--compile-reps" : "--reps; build rows --compile-reps";
    std::snprintf(buf, sizeof buf, "steadiness not judged: no row has %zu repetitions (%s).\n", kJudgedSamples, flags);
    return out + buf;
  }
  if (st.unsteady == 0) {
    std::snprintf(buf, sizeof buf,
                  "steady: every judged row's median is within %.1fx of its fastest repetition, both sides.\n", limit);
    return out + buf;
  }
  std::snprintf(buf, sizeof buf,
                "unsteady: %zu of %zu judged rows have a median over %.1fx their fastest repetition (median / "
                "fastest\nbelow; rows that share a measurement are each listed): the machine set those more than "
                "the code.\nRun again, or with more --reps.\n",
                st.unsteady, st.judged, limit);
  out += buf;
  for (const Row& w : r.rows) {
    if (!unsteady(w)) continue;
    out += "  " + w.name;
    if (w.threads) {
      std::snprintf(buf, sizeof buf, ", %u thr", w.threads);
      out += buf;
    }
    out += ":";
    const std::optional<double> s = side_spread(w.samples), b = side_spread(w.baseline_samples);
    if (s) {
      std::snprintf(buf, sizeof buf, " %.2fx", *s);
      out += buf;
    }
    if (b) {
      std::snprintf(buf, sizeof buf, "%s baseline %s %.2fx", s ? "," : "", w.baseline.c_str(), *b);
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace wbench

#endif  // WDEDUP_BENCHMARKS_STEADINESS_HPP
