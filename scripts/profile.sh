#!/usr/bin/env bash
# Where deduplicate()'s time goes, counted rather than timed: runs one read
# pass and one deduplicate() of a dedup workload (default: the 100,000 small
# tensors, one thread) under valgrind's callgrind with its cache simulator,
# and prints instructions and simulated last-level-cache misses of the read
# pass, of deduplicate() and of its parts. Counts do not move with the
# host's load, unlike timings on a shared VM.
#   bash scripts/profile.sh                        # small-tensors, 1 thread
#   bash scripts/profile.sh adversarial            # another workload (see wdedup-bench --help)
#   LL=33554432,16,64 bash scripts/profile.sh      # another simulated last-level cache
#   bash scripts/profile.sh ptd --ptd a.ptd,b.ptd  # your own .ptd files (extra arguments go to wdedup-bench)
# The default last-level cache is 16 MiB: what this project's VM behaves
# like (its CPU reports more, shared with other guests). Full callgrind
# output: build/bench/callgrind.out (open with callgrind_annotate or kcachegrind).
# Paths in the extra arguments are taken from the directory this is run in.
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
here=$PWD
# The clone: two levels above this file, wherever it is called from or
# through (a link, a CDPATH that would make cd print, a name with a dash).
root=$(dirname -- "$(dirname -- "$(realpath -- "$0")")")
cd "$root"
# The workload is the first argument unless that is already a flag for
# wdedup-bench (profile.sh --quick profiles the small tensors, quick).
workload=small-tensors
case "${1:-}" in
  "" | -*) ;;
  *) workload=$1; shift ;;
esac
extra=("$@")
bash scripts/deps.sh bench valgrind
source scripts/lib.sh
build=build/bench
release_build "$build" benchmarks/wdedup-bench -Dtests=false -Dexamples=false -Dbenchmarks=true
build=$root/$build
cd "$here"
# The simulated L1 is this machine's, if valgrind accepts its geometry.
d1="$(getconf LEVEL1_DCACHE_SIZE 2>/dev/null || true),$(getconf LEVEL1_DCACHE_ASSOC 2>/dev/null || true),64"
case "$d1" in [0-9]*,[0-9]*,64) ;; *) d1=32768,8,64 ;; esac
out="$build/callgrind.out"
log="$build/callgrind.log"
run() {
  valgrind --tool=callgrind --cache-sim=yes --D1="$1" --LL="${LL:-16777216,16,64}" --callgrind-out-file="$out" \
    "$build/benchmarks/wdedup-bench" --once --workloads "$workload" --threads 1 --no-progress \
    --json "$build/profile.json" "${extra[@]}" >"$build/profile.txt" 2>"$log"
}
if ! run "$d1"; then
  # wdedup-bench's own refusal (a workload name, a --ptd file, a flag) is
  # said once; anything else may be valgrind refusing this L1's geometry.
  if grep -q '^wdedup-bench:' "$log"; then
    grep '^wdedup-bench:' "$log" >&2
    exit 2
  fi
  if ! run 32768,8,64; then
    grep '^wdedup-bench:' "$log" >&2 || tail -5 "$log" >&2
    exit 1
  fi
fi
grep -v '^$' "$build/profile.txt" | head -3
# The read pass runs first: an input the simulated last-level cache holds
# is still there for deduplicate(), whose misses then say little.
ll_bytes=${LL:-16777216,16,64}
ll_bytes=${ll_bytes%%,*}
# (|| true: without such a line, set -e would end the script here, silently.)
input_bytes=$(grep -o '[0-9]* bytes:' "$build/profile.txt" | head -1 | tr -dc 0-9 || true)
if [ -n "$input_bytes" ] && [ "$input_bytes" -le "$ll_bytes" ]; then
  echo "note: the input ($input_bytes bytes) fits the simulated last-level cache ($ll_bytes bytes): the read pass"
  echo "      leaves it there for deduplicate(), so the miss counts below say little (a bigger workload, or a"
  echo "      smaller LL=size,ways,64, does)"
fi
# Inclusive counts per function: Ir (instructions), DLmr / DLmw (simulated
# last-level read / write misses, 64-byte lines).
callgrind_annotate --inclusive=yes --threshold=100 "$out" | awk '
  function num(s) { gsub(/,/, "", s); return s + 0 }
  # Columns: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, each "count (pct)".
  /^ *[0-9,]+ \(/ {
    n = 0; line = $0
    while (match(line, /^ *[0-9,.]+( \([ 0-9.]+%\))?/)) {
      tok = substr(line, RSTART, RLENGTH); sub(/ \(.*/, "", tok); gsub(/ /, "", tok)
      v[++n] = num(tok); line = substr(line, RSTART + RLENGTH)
    }
    name = line
    if (!(ir_read) && name ~ /bench::detail::sum_words/) { ir_read = v[1]; mr_read = v[8]; mw_read = v[9] }
    if (!(ir_dd) && name ~ /deduplicate_impl</) { ir_dd = v[1]; mr_dd = v[8]; mw_dd = v[9] }
    if (!(ir_id) && name ~ /detail::find_identical</) { ir_id = v[1]; mr_id = v[8]; mw_id = v[9] }
    # The pairs queued during the name check, compared outside the engine.
    if (!(ir_ep) && name ~ /EarlyPairs<.*>::compare/) { ir_ep = v[1]; mr_ep = v[8]; mw_ep = v[9] }
    # Byte comparisons, wherever they run: the lockstep kernels (groups and
    # runs of small blocks) and libc memcmp (big ones; the few short name
    # comparisons count too). Each is a leaf: no count is taken twice.
    if ((name ~ /equal_run_impl::(group|run)_(avx2|sse2)/ || name ~ /__memcmp_/) && !(name in seen)) {
      seen[name] = 1; ir_cmp += v[1]; mr_cmp += v[8]; mw_cmp += v[9]
    }
  }
  END {
    if (!ir_dd) { print "profile.sh: deduplicate_impl not found in the profile" > "/dev/stderr"; exit 1 }
    printf "%-44s %14s %12s %12s\n", "", "instructions", "LL rd miss", "LL wr miss"
    if (ir_read) printf "%-44s %14d %12d %12d\n", "read pass (the physical-limit baseline)", ir_read, mr_read, mw_read
    else print "read pass: not in the profile (its summing loop was inlined: no AVX2?)"
    printf "%-44s %14d %12d %12d\n", "deduplicate()", ir_dd, mr_dd, mw_dd
    printf "%-44s %14d %12d %12d\n", "  pairs queued by the name check (EarlyPairs)", ir_ep, mr_ep, mw_ep
    printf "%-44s %14d %12d %12d\n", "  identity engine (find_identical)", ir_id, mr_id, mw_id
    printf "%-44s %14d %12d %12d\n", "  name check, keys, store, tables, report", ir_dd - ir_id - ir_ep, mr_dd - mr_id - mr_ep, mw_dd - mw_id - mw_ep
    printf "%-44s %14d %12d %12d\n", "  of all three: the byte comparisons", ir_cmp, mr_cmp, mw_cmp
    if (ir_read) {
      printf "deduplicate() / read pass: %.2fx the instructions, ", ir_dd / ir_read
      if (mr_read) printf "%.2fx the LL read misses\n", mr_dd / mr_read
      else print "LL read misses: the read pass had none"
    }
  }'
echo "full profile: $out"
