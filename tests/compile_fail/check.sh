#!/bin/sh
# Compiles one file with -fsyntax-only and checks the outcome:
#   check.sh <expect: fail|error|pass> <file> <expected text or ''> <compiler and flags...>
# A "fail" case passes only if compilation fails with exactly one error,
# a static_assert, and that diagnostic contains the expected text: the
# checks in strategy.hpp stop deduplicate() from being compiled for a broken
# policy, so nothing else is reported (a check that let it through added
# "no member named ..." or "no type named 'policy'" beside the assert).
# An "error" case (a refusal by overload resolution, where a static_assert
# would make the type traits lie) passes if compilation fails with the
# expected text in its diagnostics.
expect=$1 file=$2 text=$3
shift 3
out=$("$@" -fsyntax-only "$file" 2>&1)
rc=$?
if [ "$expect" = pass ]; then
  [ $rc -eq 0 ] && exit 0
  echo "expected $file to compile, but:"; echo "$out"; exit 1
fi
if [ $rc -eq 0 ]; then echo "expected $file NOT to compile, but it did"; exit 1; fi
if [ "$expect" != error ]; then
  n=$(printf '%s\n' "$out" | grep -c 'static assertion failed\|static_assert failed')
  if [ "$n" -ne 1 ]; then echo "expected exactly one static_assert, got $n:"; echo "$out"; exit 1; fi
  e=$(printf '%s\n' "$out" | grep -c ': error: \|: fatal error: ')
  if [ "$e" -ne 1 ]; then echo "expected the static_assert as the only error, got $e errors:"; echo "$out"; exit 1; fi
fi
if ! printf '%s\n' "$out" | grep -qF -- "$text"; then echo "missing expected text: $text"; echo "$out"; exit 1; fi
exit 0
