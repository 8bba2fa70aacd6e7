#!/usr/bin/env bash
# The benchmark harness in one command, on a fresh Debian machine: installs
# what is missing, configures a release build in build/bench, builds
# wdedup-bench and runs every benchmark. Prints a table; writes every figure
# (medians, same-run baselines, ratios, targets) to build/bench/results.json.
# Extra arguments go to wdedup-bench, e.g.:
#   bash scripts/bench.sh --quick            # small sizes, few repetitions (CI)
#   bash scripts/bench.sh --model 1b         # the Llama workload at Llama-3.2-1B size (~5 GB RAM)
#   bash scripts/bench.sh --threads 1,2 --reps 9 --only dedup
#   bash scripts/bench.sh --help
# Paths in the arguments are taken from the directory this is run in. The
# benchmarks' temporary stores go to build/bench, also with a --json
# elsewhere (--tmpdir DIR puts them in DIR).
set -euo pipefail
here=$PWD
# The clone: two levels above this file, wherever it is called from or
# through (a link, a CDPATH that would make cd print, a name with a dash).
root=$(dirname -- "$(dirname -- "$(realpath -- "$0")")")
cd "$root"
bash scripts/deps.sh bench
source scripts/lib.sh
build=build/bench
# The first build takes a minute or so in silence (its output goes to a
# log): say so, --help included, whose text the harness itself prints.
[ -x "$build/benchmarks/wdedup-bench" ] ||
  echo "scripts/bench.sh: building wdedup-bench (release) in $root/$build first; output in $build/build.log" >&2
release_build "$build" benchmarks/wdedup-bench -Dtests=false -Dexamples=false -Dbenchmarks=true
cd "$here"
exec "$root/$build/benchmarks/wdedup-bench" --json "$root/$build/results.json" --tmpdir "$root/$build" "$@"
