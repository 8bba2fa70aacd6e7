#!/bin/sh
# check_compiles.sh <what> <compiler and flags...>: the compiler's run
# succeeds (its flags make warnings errors), else says what failed.
what=$1
shift
"$@" || { echo "$what does not compile clean"; exit 1; }
