# scripts/lib.sh — sourced by the other scripts (not run on its own).

# quiet LOG COMMAND...: runs COMMAND with its output in LOG, so a good build
# stays quiet; on failure, prints the errors and exits 1. meson and ninja
# print their errors on stdout, so sending stdout to /dev/null would hide
# why a build failed.
quiet() {
  local log=$1
  shift
  mkdir -p "$(dirname "$log")"
  if ! "$@" >"$log" 2>&1; then
    if grep -qE '^FAILED|error:|ERROR:' "$log"; then
      grep -E -A12 '^FAILED|error:|ERROR:' "$log" | head -60 >&2 || true
    else
      tail -40 "$log" >&2
    fi
    echo "=== failed: $* (full output: $log) ===" >&2
    exit 1
  fi
}

# release_build DIR TARGET [MESON OPTION...]: configures DIR (release) once,
# then builds TARGET in it, quietly.
release_build() {
  local dir=$1 target=$2
  shift 2
  # Afresh where set up with other options or cut short (see scripts/test.sh).
  local setup="--buildtype=release $*"
  if [ ! -f "$dir/build.ninja" ] || [ "$(cat "$dir/.wdedup-setup" 2>/dev/null)" != "$setup" ]; then
    rm -rf "$dir"
    quiet "$dir.setup.log" meson setup "$dir" --buildtype=release "$@"
    echo "$setup" > "$dir/.wdedup-setup"
  fi
  quiet "$dir/build.log" ninja -C "$dir" "$target"
}
