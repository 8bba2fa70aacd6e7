#!/usr/bin/env bash
# Runs a fuzz target (the reader's or the import's) over the seed corpus:
# the wdedup files make_seeds writes and ExecuTorch's own fixtures.
# Usage: run.sh <make_seeds> <target> <fixtures_dir> <work_dir> [libFuzzer flags...]
# With no flags the target is the replay build (each seed once); with flags
# it is the libFuzzer build, which mutates the seeds for as many runs as the
# flags say and leaves any crashing input in <work_dir>.
set -euo pipefail
make_seeds=$(realpath "$1") target=$(realpath "$2") fixtures=$3 work=$4
shift 4
rm -rf "$work"
mkdir -p "$work/seeds" "$work/corpus"
"$make_seeds" "$work/seeds"
[ -d "$fixtures" ] || { echo "run.sh: fixtures not found at $fixtures (../shared beside the clone?)" >&2; exit 1; }
if [ $# -eq 0 ]; then
  exec "$target" "$work/seeds" "$fixtures"
fi
# Fuzzing mutates small files: the 1 MB and 4 MB fixtures would only slow
# every run (the replay build reads them whole).
find "$fixtures" -maxdepth 1 -name '*.ptd' -size -16k -exec cp {} "$work/seeds/" \;
cd "$work"
exec setarch "$(uname -m)" -R "$target" "$@" -artifact_prefix="$work/" corpus seeds
