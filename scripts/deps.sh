#!/usr/bin/env bash
# Installs, from Debian's packages, what one job of wdedup needs:
#   deps.sh demo    build the library and the demo
#   deps.sh bench   ... and the benchmark harness
#   deps.sh test    ... and the whole test suite
# plus any packages named after the job (scripts/profile.sh asks for
# valgrind). As root it runs apt-get; otherwise it says what is missing.
# The demo asks only for what it builds with: a machine that cannot install
# the test tools can still run the main job.
set -euo pipefail

job=${1:?usage: deps.sh demo|bench|test [package ...]}
shift
packages=(
  g++ meson ninja-build pkg-config
  libboost-dev                # Boost.Hana (policy checks)
  libxxhash-dev               # XXH3, header-only (XXH_INLINE_ALL)
)
case "$job" in
  demo) ;;
  bench) packages+=(libssl-dev) ;;  # SHA-256: the reference baseline
  test)
    packages+=(
      clang libclang-rt-dev     # the second compiler; its sanitizer runtimes
      libc++-dev libc++abi-dev  # clang's libc++, Android's standard library (tests/headers, examples)
      doctest-dev
      libssl-dev                # SHA-256 for the fixture manifests, and the benchmark smoke run
      flatbuffers-compiler libflatbuffers-dev  # verify our .ptd files with flatbuffers' own verifier
      cmake                     # the installed CMake package, taken by a CMake project
      locales                   # de_DE's sources: the build compiles a comma-decimal locale (tests/meson.build)
    )
    # The runtime headers are also compiled for a 32-bit target (-m32).
    [ "$(dpkg --print-architecture)" = amd64 ] && packages+=(g++-multilib)
    ;;
  *) echo "deps.sh: unknown job '$job' (demo, bench or test)" >&2; exit 2 ;;
esac
packages+=("$@")  # what the caller needs besides

missing=()
for p in "${packages[@]}"; do
  # (Any selection state: a held package is installed too.)
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q " ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  echo "wdedup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Waits for the dpkg lock (a fresh machine's apt-daily may hold it) rather
  # than failing at once.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "wdedup: missing Debian packages: ${missing[*]}" >&2
  echo "wdedup: install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
