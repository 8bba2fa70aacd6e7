#!/usr/bin/env bash
# The replay build's own failures: a directory with no .ptd file to replay,
# a path that is not there, an input it cannot read, and no argument at all
# each fail with what was wrong, where a replay of nothing used to print
# "0 files, every invariant held" (and a file it could not open was skipped
# as if it had passed).
#   check_replay_args.sh <replay executable> <work dir>
set -uo pipefail
replay=$1 work=$2
rm -rf -- "$work"
mkdir -p -- "$work/empty" "$work/one" "$work/unreadable/d.ptd"
printf 'x' >"$work/one/a.ptd"
printf 'not a .ptd name' >"$work/empty/notes.txt"
failed=0
check() {  # check <what> <exit code> <stdout> <stderr> <args...>
  local what=$1 code=$2 out=$3 err=$4
  shift 4
  local got_out got_err got_code
  got_out=$("$replay" "$@" 2>"$work/stderr")
  got_code=$?
  got_err=$(cat "$work/stderr")
  if [ "$got_code" == "$code" ] && [ "$got_out" == "$out" ] && [ "$got_err" == "$err" ]; then
    echo "ok: $what"
  else
    echo "FAILED: $what"
    echo "  expected: exit $code, stdout '$out', stderr '$err'"
    echo "  actual:   exit $got_code, stdout '$got_out', stderr '$got_err'"
    failed=1
  fi
}
check "one file in a directory" 0 "replay: 1 file, every invariant held" "" "$work/one"
check "a directory and a file" 0 "replay: 2 files, every invariant held" "" "$work/one" "$work/one/a.ptd"
check "a directory with no .ptd file" 1 "" "replay: no .ptd file in $work/empty" "$work/one" "$work/empty"
check "a path that is not there" 1 "" "replay: no such file or directory: $work/none" "$work/none"
check "an input that cannot be read (a directory named .ptd)" 1 "" "replay: cannot read $work/unreadable/d.ptd" \
  "$work/unreadable"
check "no argument" 2 "" "usage: $replay FILE_OR_DIRECTORY..."
rm -rf -- "$work"
exit $failed
