#!/usr/bin/env bash
# Installs what wdedup needs to build, test and benchmark, from Debian's
# packages, plus any packages named as arguments (scripts/profile.sh asks for
# valgrind). As root it runs apt-get; otherwise it says what is missing.
set -euo pipefail

packages=(
  g++ clang libclang-rt-dev   # both compilers the suite is built with; clang's sanitizer runtimes
  meson ninja-build pkg-config
  libboost-dev                # Boost.Hana (policy checks)
  libxxhash-dev               # XXH3, header-only (XXH_INLINE_ALL)
  doctest-dev                 # tests
  libssl-dev                  # SHA-256 for the fixture manifests (tests) and the reference baseline (benchmarks)
  flatbuffers-compiler libflatbuffers-dev  # tests only: verify our .ptd files with flatbuffers' own verifier
  "$@"                        # what the caller needs besides
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  echo "wdedup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "wdedup: missing Debian packages: ${missing[*]}" >&2
  echo "wdedup: install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
