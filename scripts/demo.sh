#!/usr/bin/env bash
# The main job, on a fresh Debian machine: install what is missing, build in
# release mode, then deduplicate the built-in Llama-shaped workload (prefill +
# decode) under every strategy, write each store as an ExecuTorch .ptd, read
# it back with the runtime reader, and print the reports.
# Extra arguments go to wdedup-demo (e.g. --model 1b, --prefill-partitions 3).
# Paths in them are taken from the directory this is run in; the build and
# the default output (build/demo/llama.<strategy>.ptd) are in the clone.
set -euo pipefail
here=$PWD
# The clone: two levels above this file, wherever it is called from or
# through (a link, a CDPATH that would make cd print, a name with a dash).
root=$(dirname -- "$(dirname -- "$(realpath -- "$0")")")
cd "$root"
bash scripts/deps.sh demo
source scripts/lib.sh
build=build/release
release_build "$build" tools/wdedup-demo -Dtests=false -Dexamples=false -Dbenchmarks=false
mkdir -p build/demo
cd "$here"
exec "$root/$build/tools/wdedup-demo" --out "$root/build/demo/llama.ptd" "$@"
