#!/usr/bin/env bash
# Runs a fuzz target (the reader's, the import's or deduplicate()'s) over
# the seed corpus: the files <make_seeds> writes (wdedup files, or the
# deduplicate() target's hand-made programs), ExecuTorch's own fixtures and
# the target's kept corpus (tests/fuzz/corpus/<target>/: the inputs a long
# libFuzzer run found new coverage with, minimized; see its README).
# Usage: run.sh <make_seeds> <target> <fixtures_dir> <corpus_dir> <work_dir> [libFuzzer flags...]
# A <fixtures_dir> of '-' gives no fixtures (a target that reads no files:
# the deduplicate() one decodes a program from its input).
# With no flags the target is the replay build (each seed once); with flags
# it is the libFuzzer build, which mutates the seeds for as many runs as the
# flags say and leaves any crashing input in <work_dir>.
set -euo pipefail
make_seeds=$(realpath "$1") target=$(realpath "$2") fixtures=$3 corpus=$4 work=$5
shift 5
rm -rf "$work"
mkdir -p "$work/seeds" "$work/corpus"
"$make_seeds" "$work/seeds"
fixture_dirs=()  # none for '-'
if [ "$fixtures" != - ]; then
  [ -d "$fixtures" ] || { echo "run.sh: fixtures not found at $fixtures (../shared beside the clone?)" >&2; exit 1; }
  fixture_dirs=("$fixtures")
fi
[ -d "$corpus" ] || { echo "run.sh: kept corpus not found at $corpus" >&2; exit 1; }
# WDEDUP_REPLAY_STRIDE=N (the replay only): every Nth kept input, in name
# order, with every seed and fixture (a sanitizer too slow for all of them).
stride=${WDEDUP_REPLAY_STRIDE:-1}
[[ $stride =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: WDEDUP_REPLAY_STRIDE must be a positive integer, not '$stride'" >&2; exit 1; }
if [ $# -eq 0 ]; then
  if [ "$stride" -gt 1 ]; then
    kept=("$corpus"/*.ptd)  # hex names: the same order in every locale
    for ((i = 0; i < ${#kept[@]}; i += stride)); do cp "${kept[i]}" "$work/corpus/"; done
    echo "run.sh: replaying one kept input in $stride: $(ls "$work/corpus" | wc -l) of ${#kept[@]}"
    corpus=$work/corpus
  fi
  exec "$target" "$work/seeds" "${fixture_dirs[@]}" "$corpus"
fi
cp "$corpus"/*.ptd "$work/seeds/"
# Fuzzing mutates small files: the 1 MB and 4 MB fixtures would only slow
# every run (the replay build reads them whole).
[ ${#fixture_dirs[@]} -eq 0 ] || find "${fixture_dirs[@]}" -maxdepth 1 -name '*.ptd' -size -16k -exec cp {} "$work/seeds/" \;
cd "$work"
exec setarch "$(uname -m)" -R "$target" "$@" -artifact_prefix="$work/" corpus seeds
