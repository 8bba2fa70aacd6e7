// benchmarks/targets.hpp — how many targets a run of wdedup-bench sets, met
// and not measured: the line under its table ("4 of 10 targets met, 6 not
// measured (failed)") and the JSON's targets, targets_met and
// targets_not_measured. A group that failed or a Ctrl-C leaves rows out, and
// their targets with them: counted from the rows alone, a run whose write
// failed said "4 of 4 targets met". tests/bench.cpp checks them. Not
// installed.
#ifndef WDEDUP_BENCHMARKS_TARGETS_HPP
#define WDEDUP_BENCHMARKS_TARGETS_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "harness.hpp"
#include "wdedup/expected.hpp"  // detail::cat, detail::counted

namespace wbench {

/// The targets a run of `c` sets when every measurement it asks for
/// finishes: those of the groups --only runs and of the dedup workloads
/// --workloads names, none of what they leave out. One count per row that
/// carries a target:
/// - dedup (run_workload): each built-in workload at each thread count,
///   deduplicate() against the read pass, and against SHA-256 unless
///   --references leaves it out (a --ptd workload has none);
/// - runtime (run_lookups, run_data): each --keys store's lookups against
///   unordered_map, and at kScanTargetKeys against the strcmp scan too; the
///   largest store's two allocation counts where the build counts
///   allocations (`allocations_counted`: allocation_count() is not -1); the
///   get_data and load_data_into rows;
/// - write: write_ptd_file against fallocate+write()+fsync;
/// - build: the runtime header and every public header (--quick too).
/// --once times nothing: none.
inline std::size_t planned_targets(const Config& c, bool allocations_counted) {
  if (c.once) return 0;
  std::size_t n = 0;
  if (c.wants("dedup"))
    for (const char* w : {"llama-1+1", "llama-3+3", "llama-3+2", "small-tensors", "adversarial"})
      if (c.wants_workload(w)) n += (c.wants_reference("sha256") ? 2 : 1) * c.threads.size();
  if (c.wants("runtime")) {
    for (const std::uint64_t keys : c.key_counts) n += keys == kScanTargetKeys ? 2 : 1;
    if (allocations_counted && !c.key_counts.empty()) n += 2;
    n += 2;
  }
  if (c.wants("write")) n += 1;
  if (c.wants("build")) n += 2;
  return n;
}

/// A run's targets: `targets` every one it set (planned_targets), `met`
/// those its rows met, `not_measured` those no row came for.
struct TargetCount {
  std::size_t targets = 0, met = 0, not_measured = 0;
};

inline TargetCount count_targets(const Results& r, std::size_t planned) {
  TargetCount t;
  std::size_t measured = 0;
  for (const Row& w : r.rows)
    if (const std::optional<bool> met = w.met()) {
      ++measured;
      t.met += *met ? 1u : 0u;
    }
  t.not_measured = planned > measured ? planned - measured : 0;
  t.targets = measured + t.not_measured;
  return t;
}

/// "4 of 10 targets met, 6 not measured (failed)": `note` after "met", and
/// why targets went unmeasured, from what ended their groups (a failure, a
/// Ctrl-C, both).
inline std::string targets_line(const TargetCount& t, const std::string& note, bool interrupted, bool failed) {
  using wdedup::detail::cat;
  using wdedup::detail::counted;
  std::string line = cat(t.met, " of ", counted(t.targets, "target"), " met", note);
  if (t.not_measured != 0)
    line += cat(", ", t.not_measured, " not measured (",
                interrupted && failed ? "failed or interrupted"
                : interrupted         ? "interrupted"
                : failed              ? "failed"
                                      : "not run",
                ")");
  return line;
}

}  // namespace wbench

#endif  // WDEDUP_BENCHMARKS_TARGETS_HPP
