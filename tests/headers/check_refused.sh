#!/bin/sh
# A header that must refuse to compile in a configuration, saying why:
#   check_refused.sh [--first] <header> <expected text> <compiler and flags...>
# With --first the reason must be the first error, and others may follow
# (a #error does not stop the compiler: a standard before C++17 then trips
# on what came after it).
first=
if [ "$1" = --first ]; then first=1; shift; fi
h=$1 text=$2
shift 2
out=$(printf '#include <%s>\nint main() { return 0; }\n' "$h" | "$@" -x c++ -fsyntax-only - 2>&1)
if [ $? -eq 0 ]; then echo "header $h compiled, but should have been refused"; exit 1; fi
if ! printf '%s\n' "$out" | grep -qF -- "$text"; then echo "header $h refused without: $text"; echo "$out"; exit 1; fi
if [ -n "$first" ]; then
  if ! printf '%s\n' "$out" | grep -m1 'error:' | grep -qF -- "$text"; then
    echo "header $h refused, but not first with: $text"; echo "$out"; exit 1
  fi
  exit 0
fi
# That one reason alone, not beside others (an included header's own).
n=$(printf '%s\n' "$out" | grep -c 'error:')
if [ "$n" -ne 1 ]; then echo "header $h refused with $n errors, not 1:"; echo "$out"; exit 1; fi
exit 0
