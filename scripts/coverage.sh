#!/usr/bin/env bash
# Which lines of the headers the test suite runs: builds the gcc C++17 suite
# with gcov's counters (debug, -O0) in build/coverage, runs it, and prints
# each header's executed lines and the statements no test reached.
#   bash scripts/coverage.sh             # every header
#   bash scripts/coverage.sh identity    # headers whose path holds "identity"
# Lines are gcov's, summed over every test binary and template instance.
# A statement over several lines counts on one of them, so a line that
# continues a statement counted on the next is not listed. Code no test
# instantiates has no lines at all: it is not in the figures. (gcovr 5.2,
# Debian 12's, stops on templates whose instances gcov reports at
# different lines, hence this.)
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
filter=${1:-}
root=$(dirname -- "$(dirname -- "$(realpath -- "$0")")")
cd "$root"
bash scripts/deps.sh test
source scripts/lib.sh
build=build/coverage
fixtures=()
[ -n "${WDEDUP_FIXTURES_DIR:-}" ] && fixtures=("-Dfixtures_dir=$WDEDUP_FIXTURES_DIR")
if [ ! -f "$build/build.ninja" ]; then
  rm -rf "$build"
  quiet "$build.setup.log" meson setup "$build" -Db_coverage=true -Dbuildtype=debug -Dbenchmarks=false \
    -Dm32_suite=false "${fixtures[@]}"
fi
quiet "$build/build.log" ninja -C "$build"
find "$build" -name '*.gcda' -delete  # counts of this run only
# A failing test still leaves its counts; the figures say what ran.
meson test -C "$build" --no-rebuild --num-processes "$(nproc)" -t 4 >"$build/test.log" 2>&1 ||
  echo "coverage: some tests failed (see $build/test.log); the figures count what ran" >&2
python3 - "$root" "$build" "$filter" <<'EOF'
import json, os, subprocess, sys
root, build, wanted = sys.argv[1], os.path.join(sys.argv[1], sys.argv[2]), sys.argv[3]
include = os.path.join(root, "include") + os.sep
counts = {}  # header -> {line: executions}
for d, _, files in os.walk(build):
    for f in files:
        if not f.endswith(".gcda"):
            continue
        out = subprocess.run(["gcov", "--json-format", "--stdout", os.path.join(d, f)], cwd=build,
                             capture_output=True, text=True).stdout
        for doc in filter(None, (l.strip() for l in out.splitlines())):
            for src in json.loads(doc)["files"]:
                path = os.path.normpath(os.path.join(build, src["file"]))
                if path.startswith(include) and wanted in path:
                    lines = counts.setdefault(path, {})
                    for l in src["lines"]:
                        lines[l["line_number"]] = lines.get(l["line_number"], 0) + l["count"]
run = total = 0
for path in sorted(counts, key=lambda p: sum(v == 0 for v in counts[p].values()), reverse=True):
    lines = counts[path]
    text = open(path).read().splitlines()
    missed = [n for n in sorted(lines) if lines[n] == 0 and
              (text[n - 1].rstrip().endswith((";", "{", "}")) or lines.get(n + 1, 0) == 0)]
    done = sum(v > 0 for v in lines.values())
    run, total = run + done, total + len(lines)
    print(f"{os.path.relpath(path, root)}: {done} of {len(lines)} lines run")
    for n in missed:
        print(f"  {n}: {text[n - 1].strip()[:120]}")
print(f"all: {run} of {total} lines run ({100 * run / max(total, 1):.1f}%)")
EOF
