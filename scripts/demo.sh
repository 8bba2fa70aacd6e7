#!/usr/bin/env bash
# The main job, on a fresh Debian machine: install what is missing, build in
# release mode, then deduplicate the built-in Llama-shaped workload (prefill +
# decode) under every strategy, write each store as an ExecuTorch .ptd, read
# it back with the runtime reader, and print the reports.
# Extra arguments go to wdedup-demo (e.g. --model 1b, --prefill-partitions 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/lib.sh
build=build/release
release_build "$build" tools/wdedup-demo -Dtests=false -Dexamples=false -Dbenchmarks=false
mkdir -p build/demo
exec "$build/tools/wdedup-demo" --out build/demo/llama.ptd "$@"
