#!/usr/bin/env bash
# The main job, on a fresh Debian machine: install what is missing, build in
# release mode, then deduplicate the built-in Llama-shaped workload (prefill +
# decode) under every strategy, write each store as an ExecuTorch .ptd, read
# it back with the runtime reader, and print the reports.
# Extra arguments go to wdedup-demo (e.g. --model 1b, --prefill-partitions 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=build/release
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --buildtype=release -Dtests=false -Dexamples=false -Dbenchmarks=false >/dev/null
fi
ninja -C "$build" tools/wdedup-demo >/dev/null
mkdir -p build/demo
exec "$build/tools/wdedup-demo" --out build/demo/llama.ptd "$@"
