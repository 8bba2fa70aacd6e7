#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine: installs what is missing,
# then configures, builds and runs every test in each configuration:
#   gcc-c++17           the reference build: every test, the demo, the examples,
#                       the must-not-compile and header checks, the benchmark smoke run,
#                       and the runtime tests and the build-time main paths for -m32
#   clang-c++20-noexcept  clang, C++20, everything built with -fno-exceptions -fno-rtti
#                       (with the header and must-not-compile checks, libc++ too; -O0)
#   asan-ubsan          AddressSanitizer + UndefinedBehaviorSanitizer, -O0 (malformed files above all;
#                       the examples too),
#                       the reader's libFuzzer target for a fixed 60k inputs and the import's
#                       (import, deduplicate, write, read back) for 20k, side by side, then
#                       deduplicate()'s against its oracle for 1,850 (tests/fuzz/meson.build),
#                       without libFuzzer's comparison tracing (fixed runs, not a search)
#   tsan                ThreadSanitizer (concurrent lookups, parallel hashing)
#   clang19-c++20       (named only) the newest clang Debian 12 ships, C++20 at -O2,
#                       every test: its new warnings, and tests that lean on what an
#                       older optimizer leaves in (it installs clang-19)
# (gcc-c++20-noexcept, clang-c++20 and clang-c++17 are available too; they
# are left out of the default run to keep CI within 20 minutes on 2 cores,
# which a slow host's run of all five went past: 22-24 min, 2026-12-02. C++17
# is covered by gcc, C++20 and -fno-exceptions -fno-rtti by clang; gcc's view
# of those two is kept in the reference build by two checks that cost seconds,
# not a build: the build-time half's entry points compiled by gcc with them
# (tests/meson.build, instances_cxx20_noexcept) and both umbrella headers
# (tests/headers).)
# Usage: scripts/test.sh [config ...]   (default: the four above not marked "named only")
set -euo pipefail
# A relative WDEDUP_FIXTURES_DIR is the caller's, as every path the README's
# scripts take: made absolute before the cd below (meson would take it from
# the repository's root).
if [ -n "${WDEDUP_FIXTURES_DIR:-}" ]; then
  WDEDUP_FIXTURES_DIR=$(realpath -m -- "$WDEDUP_FIXTURES_DIR")
fi
cd -- "$(dirname -- "$(dirname -- "$(realpath -- "$0")")")"

declare -A CXX_OF=(
  [gcc-c++17]=g++ [gcc-c++20-noexcept]=g++ [clang-c++17]=clang++ [clang-c++20]=clang++
  [clang-c++20-noexcept]=clang++ [clang19-c++20]=clang++-19
  [asan-ubsan]=clang++ [tsan]=clang++)
# Debian packages a configuration needs beyond scripts/deps.sh's test set.
declare -A PACKAGES_OF=([clang19-c++20]=clang-19)
# -Ddebug=false: no debug info where no sanitizer needs it (compiles much faster).
# The sanitizers get line tables only (-gline-tables-only): their reports
# still name file, line and function, and clang compiled round_trip.cpp
# under ASan+UBSan in 34 s instead of 50 s with full -g (EPYC VM, 2026-11-26).
# Every configuration builds with -Dwerror=true: the project's code is
# held to the strict warnings of meson.build, which users' builds turn on.
# Only the reference build is optimized as users build (-O2: the optimizer's
# view of the code, GCC's flow-dependent warnings; its tests' own files at
# -Og, tests/meson.build); the other builds check
# another standard library mode and another compiler, which need no -O2, and
# -O2 was half their time. EPYC VM, 2026-11-29, configure + build + test:
# gcc C++20 noexcept 217 s at -O2, 116 s at -Og (123 + 22 s at -O0);
# clang C++20 241 s at -O2, 200 s at -O1, 136 s at -O0. TSan builds at -O1
# (its instrumentation sees every access at any level; clang's manual asks
# for -O1 or higher for reasonable performance): at -O2 its build was 220 s
# of compile jobs on the Ice Lake VM, 2026-12-03, its two instance
# libraries ~40 s each.
# ASan+UBSan builds at -O0 (the sanitizers check as much there) and its
# fuzzers, with the reader's replay, at -O1, where their fixed counts were
# sized (tests/fuzz/meson.build): configure + build + test took 377 s with
# everything at -O1, 222 s so (EPYC Zen 5 VM, 2026-11-30: clang compiled
# tests/import.cpp in 37 s at -O1, 12 s at -O0). It also checks libstdc++'s
# preconditions (-D_GLIBCXX_ASSERTIONS: an index past a vector's size but
# within its capacity, front() of an empty one), which ASan cannot see; the
# suite passed them, and libstdc++'s full debug mode, from the start
# (2026-12-03: build and tests within the run-to-run spread).
declare -A OPTS_OF=(
  [gcc-c++17]="-Dcpp_std=c++17 -Ddebug=false"
  [gcc-c++20-noexcept]="-Dcpp_std=c++20 -Dcpp_eh=none -Dcpp_rtti=false -Ddebug=false -Doptimization=g -Dbenchmarks=false -Dm32_suite=false"
  [clang-c++17]="-Dcpp_std=c++17 -Ddebug=false -Doptimization=0 -Dbenchmarks=false -Dm32_suite=false"
  [clang-c++20]="-Dcpp_std=c++20 -Ddebug=false -Doptimization=0 -Dbenchmarks=false -Dm32_suite=false"
  [clang-c++20-noexcept]="-Dcpp_std=c++20 -Dcpp_eh=none -Dcpp_rtti=false -Ddebug=false -Doptimization=0 -Dbenchmarks=false -Dm32_suite=false"
  [clang19-c++20]="-Dcpp_std=c++20 -Ddebug=false -Dm32_suite=false"
  [asan-ubsan]="-Dcpp_std=c++17 -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug -Doptimization=0 -Ddebug=false -Dcpp_args=['-gline-tables-only','-D_GLIBCXX_ASSERTIONS'] -Dbenchmarks=false -Dfuzz=true -Dfuzz_trace_cmp=false"
  [tsan]="-Dcpp_std=c++17 -Db_sanitize=thread -Db_lundef=false -Doptimization=1 -Ddebug=false -Dcpp_args=-gline-tables-only -Dexamples=false -Dbenchmarks=false")
# The sanitizer builds build and run only the tests that exercise what they
# check; the compile-only suites (headers, must-not-compile) and the benchmark
# smoke run need one C++17 and one C++20 build, not six. ASan+UBSan runs no
# fuzz_deduplicate_replay: fuzz_deduplicate first runs the same seeds and kept
# inputs (all within its -max_len) through the same target and oracle under
# the same sanitizers, then mutates them (the replay and its build were ~85 s
# of CPU on a slow host, 2026-12-02). TSan replays an eighth of the kept
# inputs (tests/fuzz/meson.build). Longest first: meson runs named tests in
# the order named (meson.build's priorities order the unnamed runs), and
# fuzz_deduplicate, started last, ran its last 47 s alone on one core.
# executorch_compat is among them since clang 19's ASan caught its helper
# serializing a store whose view of a temporary vector had been freed
# (2026-12-03): clang 14's run had never built it; executorch_writers too,
# the reader over files laid out as ExecuTorch's other writers lay them out
# (headers padded to 40, 64 or 4096 bytes, unaligned bases). The examples too, as
# users copy them (their five compiles took 17 s on 2 cores, 26 s of CPU,
# their runs 4 s; Zen 5 VM, 2026-12-04); not the libc++ run of custom_runtime.
# stop_signals too, for the tools' own helpers (tools/cli.hpp): the one run
# with LeakSanitizer that calls them (real_path's free() of realpath()'s buffer;
# dropping it passed every other configuration). 7 s to build, 2 s to run.
# key_view too: KeyView's compare and equals skip memcmp for an empty side,
# whose pointer may be null (memcmp's arguments must not be, even for 0
# bytes); only UBSan sees that check dropped (mutation sweep h43, K3 and K6,
# 2026-12-07: "null pointer passed as argument 1, which is declared to never
# be null" at key_view.hpp:148 and :199). About 1 s to run.
# bench too: read_pass's cursor past the last span (a share that starts at
# the input's end) must not index it; the sum stays right either way, so
# only ASan sees that guard dropped (bench.hpp's second sweep, B22,
# 2026-12-07: "heap-buffer-overflow ... in Span<unsigned char const>::size()").
# About 2 s to run.
# atomic and atomic_std under tsan: detail/atomic.hpp's memory orders reach
# the operation only if nothing drops them, and only ThreadSanitizer sees one
# dropped (mutation sweep h62: an acquire load, a release store or a
# compare-exchange's success order made relaxed fails their last case there
# with a data race, and passes every build). Under a second to run each.
declare -A TESTS_OF=(
  [asan-ubsan]="fuzz_deduplicate fuzz_import fuzz_named_data_map out_of_memory import error malformed ptd_fixtures executorch_compat executorch_writers named_data_map ptd_writer crash_safety allocations identity equal_run early_pairs arena table name_index flat_index strategy deduplicate key_hash key_view round_trip fuzz_replay fuzz_import_replay example_custom_policy example_custom_runtime example_custom_runtime_failures example_merge_ptd_files example_merge_ptd_files_args example_benchmark_own_program stop_signals bench"
  [tsan]="fuzz_deduplicate_replay deduplicate identity concurrency early_pairs allocations table atomic atomic_std")
# The install test stages an install and builds a CMake and a pkg-config
# consumer (the runtime one with -fno-exceptions -fno-rtti whatever the
# configuration): once, in the reference build, is enough. The other builds
# compile every header in their own tests; each run of it took ~20 s.
declare -A SKIP_OF=(
  [gcc-c++20-noexcept]="--no-suite headers --no-suite compile_fail --no-suite install"
  [clang-c++17]="--no-suite headers --no-suite compile_fail --no-suite install"
  [clang-c++20]="--no-suite install"
  [clang-c++20-noexcept]="--no-suite install"
  [clang19-c++20]="--no-suite install")
order=(gcc-c++17 clang-c++20-noexcept asan-ubsan tsan)
[ $# -gt 0 ] && order=("$@")
# Every name checked before anything is installed or built: a misspelt one
# last (`gcc-c++17 tasn`) was found only after a whole gcc run.
for cfg in "${order[@]}"; do
  [ -n "${CXX_OF[$cfg]:-}" ] || { echo "unknown config '$cfg' (one of: ${!CXX_OF[*]})" >&2; exit 2; }
done
extra=()
for cfg in "${order[@]}"; do
  # shellcheck disable=SC2206
  extra+=(${PACKAGES_OF[$cfg]:-})
done
bash scripts/deps.sh test "${extra[@]}"

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1
total_pass=0 total_fail=0
source scripts/lib.sh
build() {
  local dir=$1
  shift
  quiet "$dir/build.log" ninja -C "$dir" "$@"
}
for cfg in "${order[@]}"; do
  dir=build/test-$cfg
  echo "=== $cfg ==="
  # Set up afresh where the directory was set up with other options than
  # this script's now (they change), or its setup was cut short (meson-private
  # without build.ninja, which meson setup refuses as already configured).
  # WDEDUP_FIXTURES_DIR: the ExecuTorch fixtures, where they are not
  # ../shared/fixtures/ptd beside the clone (meson.build says so at setup).
  fixtures=()
  [ -n "${WDEDUP_FIXTURES_DIR:-}" ] && fixtures=("-Dfixtures_dir=$WDEDUP_FIXTURES_DIR")
  setup="CXX=${CXX_OF[$cfg]} -Dwerror=true ${OPTS_OF[$cfg]} ${fixtures[*]}"
  if [ ! -f "$dir/build.ninja" ] || [ "$(cat "$dir/.wdedup-setup" 2>/dev/null)" != "$setup" ]; then
    rm -rf "$dir"
    # shellcheck disable=SC2086
    CXX=${CXX_OF[$cfg]} quiet "$dir.setup.log" meson setup "$dir" -Dwerror=true ${OPTS_OF[$cfg]} "${fixtures[@]}"
    echo "$setup" > "$dir/.wdedup-setup"
  fi
  # Counted from this run's log only: a stale one from an earlier run (or
  # none, if meson found no test to run) must not count as a pass.
  log="$dir/meson-logs/testlog.json"
  rm -f "$log"
  if [ -n "${TESTS_OF[$cfg]:-}" ]; then
    targets=()
    for t in ${TESTS_OF[$cfg]}; do
      case $t in
        fuzz_deduplicate*) targets+=("tests/fuzz/$t" tests/fuzz/fuzz_deduplicate_seeds) ;;  # seeds of its own
        fuzz_*) targets+=("tests/fuzz/$t" tests/fuzz/fuzz_make_seeds) ;;
        import) targets+=(tests/test_import tools/wdedup-demo) ;;  # it runs the demo too
        deduplicate) targets+=(tests/test_deduplicate tests/de_DE.UTF-8) ;;  # and the locale it is given
        executorch_*) targets+=("tests/data/test_$t") ;;  # beside flatc's header
        example_custom_runtime_failures) targets+=(examples/example_custom_runtime_alone tests/sized_store) ;;  # and the runtime-only build, and the stores of its arena cases
        example_*_args) ;;  # (the example itself is named too)
        example_*) targets+=("examples/$t") ;;
        *) targets+=("tests/test_$t") ;;
      esac
    done
    build "$dir" "${targets[@]}"
    # shellcheck disable=SC2086
    meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 ${TESTS_OF[$cfg]} || true
  else
    build "$dir"
    # shellcheck disable=SC2086
    meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 ${SKIP_OF[$cfg]:-} || true
  fi
  # Every result but OK (and an expected failure) is a failure: a SKIP (exit
  # 77) or an INTERRUPT (a test cancelled by one Ctrl-C, after which meson
  # goes on) would otherwise leave a green run that did not run everything.
  pass=$(grep -c '"result": "OK"' "$log" 2>/dev/null || true)
  results=$(grep -c '"result": "' "$log" 2>/dev/null || true)
  expected=$(grep -c '"result": "EXPECTEDFAIL"' "$log" 2>/dev/null || true)
  pass=${pass:-0} results=${results:-0} expected=${expected:-0}
  fail=$((results - pass - expected))
  # A configuration that ran nothing is a failure too.
  [ "$pass" -gt 0 ] || { echo "=== $cfg: no test passed ===" >&2; fail=$((fail + 1)); }
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail))
  echo "$cfg: $pass passed, $fail failed"
  # Checks this machine cannot run (not root, no ACLs, a sysctl) pass with a
  # doctest MESSAGE that meson does not print: listed here, so a run that
  # left one out says so.
  notrun=$(grep -o 'MESSAGE: [^\\"]*\(not tried\|not run\|not checked\|skipped\|not planted\|not built\|de_DE\.UTF-8 locale here\)[^\\"]*' \
    "$log" 2>/dev/null | sort -u || true)
  [ -z "$notrun" ] || { echo "  checks not run on this machine:"; echo "$notrun" | sed 's/^MESSAGE: /    /'; }
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] && [ "$total_pass" -gt 0 ]
