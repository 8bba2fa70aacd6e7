#!/bin/sh
# Each public header must compile on its own (no hidden include-order
# dependency): check_header.sh <header> <compiler and flags...>
h=$1
shift
printf '#include <%s>\n#include <%s>\nint main() { return 0; }\n' "$h" "$h" | "$@" -x c++ -fsyntax-only - || {
  echo "header $h does not compile on its own"; exit 1; }
