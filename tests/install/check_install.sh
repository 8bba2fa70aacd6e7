#!/usr/bin/env bash
# What `meson install` puts in a prefix works for the builds that take it:
# a CMake project (find_package(wdedup): ExecuTorch and its delegates build
# with CMake) and a pkg-config one, each building the runtime half as a
# delegate does (-fno-exceptions -fno-rtti, strict warnings) and the
# build-time half, then writing a store with one and reading it with the
# other (and the source tree taken with add_subdirectory, the same way, and
# as a Meson subproject).
# The install is staged with DESTDIR: the CMake package must find
# its headers from where it is, and the pkg-config files theirs from where
# they are once the prefix is moved (both relocatable). Also: every file
# has a meson install tag (devel or runtime), and a project that declares
# cmake_minimum_required(VERSION 3.0) takes the CMake package too.
#   check_install.sh <meson build dir> <C++ compiler command...>
# (The compiler command is Meson's: "ccache g++" where Meson found ccache,
# "g++ -m64" for CXX="g++ -m64". CMake takes a launcher, the compiler and
# its flags apart.)
set -euo pipefail
build=$1
shift
cxx=("$@")
launcher=()
while [ ${#cxx[@]} -gt 1 ]; do
  case $(basename -- "${cxx[0]}") in
    ccache | sccache | distcc | icecc) launcher+=("${cxx[0]}"); cxx=("${cxx[@]:1}") ;;
    *) break ;;
  esac
done
cmake_compiler=${cxx[0]}
cmake_flags="${cxx[*]:1}"
cmake_launcher=$(IFS=';'; echo "${launcher[*]}")
# CXX for Meson, which splits it as a shell would (shlex): each word quoted,
# so a compiler or launcher path with a space stays one word (joined with
# spaces, '/opt/my tools/g++' became '/opt/my' and 'tools/g++').
meson_cxx=
for word in "${launcher[@]}" "${cxx[@]}"; do
  meson_cxx+="'${word//\'/\'\\\'\'}' "
done
here=$(dirname -- "$(realpath -- "$0")")
src=$(realpath -- "$here/../..")  # the source tree
for tool in cmake ninja pkg-config; do
  command -v "$tool" >/dev/null || { echo "check_install: $tool not found (scripts/deps.sh test installs it)"; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/wdedup-install.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
dest=$work/dest
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet
cfg=$(find "$dest" -name wdedupConfig.cmake)
pcdir=$(dirname -- "$(find "$dest" -name wdedup-runtime.pc)")
prefix=$(dirname -- "$(find "$dest" -type d -path '*/include/wdedup')")
prefix=$(dirname -- "$prefix")
[ -n "$cfg" ] && [ -f "$(dirname -- "$cfg")/wdedupConfigVersion.cmake" ] || { echo "no CMake package installed"; exit 1; }

expected='prefill/mask -> prefill/mask: 256 bytes, align 1, sum 4352
prefill/w -> w: 4096 bytes, align 64, sum 522240
decode/mask -> decode/mask: 64 bytes, align 1, sum 2176
decode/w -> w: 4096 bytes, align 64, sum 522240
keys 3'
failed=0
check() {  # check <what> <expected> <actual>
  if [ "$2" == "$3" ]; then
    echo "ok: $1"
  else
    echo "FAILED: $1"
    echo "  expected: $2"
    echo "  actual:   $3"
    failed=1
  fi
}
# A step that must work, its output kept out of the way: on failure the
# log is printed and the test stops.
logged() {  # logged <log> <command...>
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { cat "$log"; exit 1; }
}
# Headers only, so nothing installed depends on the target: under share/,
# where CMake and pkg-config look whatever libdir is (lib64, lib/<multiarch>).
check "the CMake package is in share/cmake/wdedup" "$prefix/share/cmake/wdedup/wdedupConfig.cmake" "$cfg"
check "the .pc files are in share/pkgconfig" "$prefix/share/pkgconfig" "$pcdir"

# ---- meson install --tags ---------------------------------------------------
# Every file has its tag: devel (the headers, the .pc files and the CMake
# package, which had none and were left out of --tags devel) or runtime
# (the demo); the two together are the whole install.
files() {  # files <staged prefix>: what is installed there, one path a line
  (cd -- "$1" && find . \( -type f -o -type l \) | LC_ALL=C sort)
}
under=${prefix#"$dest"}
meson install -C "$build" --destdir "$work/devel" --no-rebuild --quiet --tags devel
meson install -C "$build" --destdir "$work/runtime" --no-rebuild --quiet --tags runtime
check "meson install --tags devel: the CMake package and the .pc files (and the headers)" \
  "./share/cmake/wdedup/wdedupConfig.cmake
./share/cmake/wdedup/wdedupConfigVersion.cmake
./share/cmake/wdedup/wdedupDependencies.cmake
./share/pkgconfig/wdedup-runtime.pc
./share/pkgconfig/wdedup.pc" "$(files "$work/devel$under" | grep -v '^\./include/wdedup/')"
check "meson install --tags devel: every header" "$(files "$prefix" | grep '^\./include/wdedup/')" \
  "$(files "$work/devel$under" | grep '^\./include/wdedup/')"
check "meson install --tags runtime: the demo" "./bin/wdedup-demo" "$(files "$work/runtime$under")"
check "meson install: devel and runtime are all of it" "$(files "$prefix")" \
  "$( (files "$work/devel$under"; files "$work/runtime$under") | LC_ALL=C sort)"
# Without Boost (BOOST_ROOT at an empty directory hides the system's from
# Meson) and with the tests, examples and benchmarks off, the source tree
# still installs the devel files, all of them, and leaves the demo out.
mkdir -p -- "$work/no-boost"
logged "$work/no-boost.log" env -u BOOST_INCLUDEDIR -u BOOST_LIBRARYDIR BOOST_ROOT="$work/no-boost" CXX="$meson_cxx" \
  meson setup "$work/no-boost-build" "$src" -Dtests=false -Dexamples=false -Dbenchmarks=false --prefix "$under"
meson install -C "$work/no-boost-build" --destdir "$work/no-boost-dest" --quiet >/dev/null
check "meson setup without Boost (tests, examples and benchmarks off): the devel files, no demo" \
  "$(files "$work/devel$under")" "$(files "$work/no-boost-dest$under")"
check "meson setup without Boost: it says why there is no demo" "Message: wdedup-demo is not built: it needs Boost >= 1.66 headers (libboost-dev), not found. The headers, the .pc files and the CMake package are installed without it." \
  "$(grep '^Message: wdedup-demo' "$work/no-boost.log")"
rm -rf -- "$work/devel" "$work/runtime" "$work/no-boost" "$work/no-boost-build" "$work/no-boost-dest"

# ---- CMake ----------------------------------------------------------------
# -G Ninja: meson's ninja is there wherever this test runs, while CMake's
# default generator needs make, which a fresh Debian machine may not have
# (a debootstrap'd bookworm with scripts/deps.sh's packages did not, and
# this test failed there: "unable to find a build program corresponding to
# Unix Makefiles").
cmake_in() {  # cmake_in <project> <dir> <args...>: configure a consumer project
  local project=$1 dir=$2
  shift 2
  cmake -G Ninja -S "$here/$project" -B "$dir" -DCMAKE_CXX_COMPILER="$cmake_compiler" -DCMAKE_CXX_FLAGS="$cmake_flags" \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$cmake_launcher" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "$@"
}
logged "$work/cmake.log" cmake_in consumer "$work/cmake"
logged "$work/cmake-build.log" cmake --build "$work/cmake"
"$work/cmake/write_store" "$work/cmake.ptd" >/dev/null
check "CMake: wdedup::wdedup writes, wdedup::runtime (-fno-exceptions -fno-rtti) reads" \
  "$expected" "$("$work/cmake/read_store" "$work/cmake.ptd")"
# (A CMake warning or error points at the file it comes from.)
check "CMake: no warning from the package" "" "$(grep -A4 'wdedupConfig' "$work/cmake.log" || true)"

# The source tree itself, with add_subdirectory (twice: a second copy adds
# nothing), as a project that vendors wdedup takes it: the same targets,
# the same file. Without Boost it gives wdedup::runtime alone and says why,
# or, asked to (WDEDUP_REQUIRE_BUILD_HALF), stops.
logged "$work/subdir.log" cmake_in consumer "$work/subdir" -DWDEDUP_SOURCE_DIR="$src"
logged "$work/subdir-build.log" cmake --build "$work/subdir"
"$work/subdir/write_store" "$work/subdir.ptd" >/dev/null
check "CMake add_subdirectory: wdedup::wdedup writes, wdedup::runtime (-fno-exceptions -fno-rtti) reads" \
  "$expected" "$("$work/subdir/read_store" "$work/subdir.ptd")"
check "CMake add_subdirectory: the same file as the installed package's" "same" \
  "$(cmp -s "$work/cmake.ptd" "$work/subdir.ptd" && echo same)"
check "CMake add_subdirectory: no warning from wdedup's CMakeLists.txt" "" \
  "$(grep -A4 "$src/CMakeLists.txt\|wdedupDependencies" "$work/subdir.log" || true)"
rm -rf -- "$work/subdir"
subdir_probe() {  # subdir_probe [cmake -D...]: the probe lines and wdedup's own
  cmake_in consumer "$work/probe" -DWDEDUP_SOURCE_DIR="$src" -DPROBE_SUBDIR=ON "$@" 2>&1 |
    sed -n 's/^-- probe: //p; s/^-- wdedup: /status: /p'
  rm -rf -- "$work/probe"
}
check "CMake add_subdirectory: both targets, meson.build's version" "runtime=TRUE wdedup=TRUE version=0.1.0" \
  "$(subdir_probe)"
check "CMake add_subdirectory after find_package(wdedup COMPONENTS runtime): both targets" \
  "runtime=TRUE wdedup=TRUE version=0.1.0" "$(subdir_probe -DPROBE_FIND_FIRST=ON)"
check "CMake add_subdirectory without Boost: the runtime half, and why not the rest" \
  "status: wdedup::wdedup needs Boost >= 1.66 headers (Debian: libboost-dev), not found; wdedup::runtime needs nothing
runtime=TRUE wdedup=FALSE version=0.1.0" "$(subdir_probe -DCMAKE_DISABLE_FIND_PACKAGE_Boost=TRUE)"
# A project that installs its targets exports wdedup_runtime with them:
# as <namespace>runtime, its include path under the install prefix, not
# in the source tree (which CMake refuses to export).
logged "$work/export.log" cmake_in consumer "$work/export" -DWDEDUP_SOURCE_DIR="$src" -DEXPORT_STATIC=ON
logged "$work/export-build.log" cmake --build "$work/export" --target consumer_lib
logged "$work/export-install.log" cmake --install "$work/export" --prefix "$work/export-prefix"
# wdedup_wdedup exports as <namespace>wdedup: Boost and threads by their
# targets, and no include path of its own (the build machine's xxhash.h
# directory is not the consumer's): the one include path is runtime's.
check "CMake add_subdirectory: wdedup_runtime and wdedup_wdedup export as <namespace>runtime and <namespace>wdedup, the headers under the prefix" \
  'add_library(consumer::runtime INTERFACE IMPORTED)
  INTERFACE_INCLUDE_DIRECTORIES "${_IMPORT_PREFIX}/include"
add_library(consumer::wdedup INTERFACE IMPORTED)
  INTERFACE_LINK_LIBRARIES "consumer::runtime;Boost::headers;Threads::Threads"' \
  "$(grep -h -e '^add_library(consumer::runtime' -e '^add_library(consumer::wdedup' -e 'INTERFACE_INCLUDE_DIRECTORIES' \
      -e 'INTERFACE_LINK_LIBRARIES "consumer::runtime' "$work/export-prefix"/lib/cmake/consumer/*.cmake)"
rm -rf -- "$work/export" "$work/export-prefix"
# (CMake folds a long message over lines: the output is read as one line.)
if required=$(cmake_in consumer "$work/probe" -DWDEDUP_SOURCE_DIR="$src" -DCMAKE_DISABLE_FIND_PACKAGE_Boost=TRUE \
    -DWDEDUP_REQUIRE_BUILD_HALF=ON 2>&1); then
  required="configured"
fi
rm -rf -- "$work/probe"
check "CMake add_subdirectory without Boost, the build-time half required: an error" \
  "CMake Error at $src/CMakeLists.txt:N (message): wdedup: wdedup::wdedup needs Boost >= 1.66 headers (Debian: libboost-dev), not found; wdedup::runtime needs nothing" \
  "$(tr -s ' \n' ' ' <<<"$required" | grep -o "CMake Error at .*CMakeLists\.txt:[0-9]* (message): wdedup: [^;]*; wdedup::runtime needs nothing" |
     sed 's/CMakeLists\.txt:[0-9]* /CMakeLists.txt:N /')"

# A project that declares an old CMake (cmake_minimum_required(VERSION
# 3.0)): the package runs under its caller's policies, where IN_LIST
# (CMP0057) was a hard error; the policies it sets must not leak out.
# CMake 4 refuses such a project outright (compatibility with CMake < 3.5
# is removed there), so this step runs only under CMake 3.
cmake_major=$(cmake --version | sed -n 's/^cmake version \([0-9]*\).*/\1/p')
if [ "${cmake_major:-0}" -ge 4 ]; then
  echo "not run: CMake $cmake_major refuses cmake_minimum_required(VERSION 3.0) (the old-CMake consumer)"
else
  logged "$work/cmake30.log" cmake_in consumer_cmake3.0 "$work/cmake30"
  logged "$work/cmake30-build.log" cmake --build "$work/cmake30"
  check "CMake 3.0 project: no warning from the package" "" "$(grep -A4 'wdedupConfig' "$work/cmake30.log" || true)"
  check "CMake 3.0 project: its policies are its own after find_package (COMPONENTS runtime, then all)" \
    "-- consumer: CMP0057 after COMPONENTS runtime '', after everything ''" "$(grep '^-- consumer: ' "$work/cmake30.log")"
  "$work/cmake30/write_store" "$work/cmake30.ptd" >/dev/null
  check "CMake 3.0 project: wdedup::wdedup writes, wdedup::runtime reads" \
    "$expected" "$("$work/cmake30/read_store" "$work/cmake30.ptd")"
  rm -rf -- "$work/cmake30"
fi

probe() {  # probe <find_package arguments> [cmake -D...]: the probe lines
  local args=$1
  shift
  cmake_in consumer "$work/probe" -DPROBE_ARGS="$args" "$@" 2>&1 | sed -n 's/^-- probe: //p'
  rm -rf -- "$work/probe"
}
check "CMake: version 0.1 exact" "found=1 runtime=TRUE wdedup=TRUE gpu=
why=" "$(probe '0.1.0;EXACT;CONFIG')"
check "CMake: version 0.2 refused" "found=0 runtime= wdedup= gpu=
why=" "$(probe '0.2;CONFIG' | sed 's/why=.*/why=/')"
check "CMake: an unknown component is refused by name" "found=0 runtime=TRUE wdedup=FALSE gpu=FALSE
why=unknown component 'gpu' (wdedup has: runtime, wdedup)" "$(probe 'CONFIG;COMPONENTS;gpu')"
check "CMake: an unknown optional component is only not found" "found=1 runtime=TRUE wdedup=FALSE gpu=FALSE
why=" "$(probe 'CONFIG;COMPONENTS;runtime;OPTIONAL_COMPONENTS;gpu')"
check "CMake: version 0 (another minor) refused" "found=0 runtime= wdedup= gpu=
why=" "$(probe '0;CONFIG' | sed 's/why=.*/why=/')"
check "CMake: a version range around 0.1.0" "found=1 runtime=TRUE wdedup=TRUE gpu=
why=" "$(probe '0.0...1.0;CONFIG')"
check "CMake: a version range that ends before 0.1.0 (excluded)" "found=0 runtime= wdedup= gpu=
why=" "$(probe '0.0...<0.1.0;CONFIG' | sed 's/why=.*/why=/')"
# Without Boost: the runtime half still comes, the rest says what it needs.
check "CMake: runtime without Boost" "found=1 runtime=TRUE wdedup=FALSE gpu=
why=" "$(probe 'CONFIG;COMPONENTS;runtime' -DCMAKE_DISABLE_FIND_PACKAGE_Boost=TRUE)"
check "CMake: everything without Boost names what is missing" "found=0 runtime=TRUE wdedup=FALSE gpu=
why=wdedup::wdedup needs Boost >= 1.66 headers (Debian: libboost-dev), not found; find_package(wdedup COMPONENTS runtime) takes the runtime half alone" \
  "$(probe 'CONFIG' -DCMAKE_DISABLE_FIND_PACKAGE_Boost=TRUE)"

# Boost: its own BoostConfig.cmake (config mode) first; where there is
# none (Boost < 1.70), CMake's FindBoost. The one found is hidden for the
# second (also where /lib is /usr/lib: CMake finds it there too).
boost_dir=$(probe 'CONFIG' -DPROBE_BOOST=ON | sed -n 's/^boost_dir=\(.*\) boost_found=.*/\1/p')
check "CMake: Boost from its BoostConfig.cmake" "yes" "$([ -f "$boost_dir/BoostConfig.cmake" ] && echo yes)"
boost_real=$(realpath -m -- "$boost_dir")
check "CMake: Boost from FindBoost where there is no BoostConfig.cmake" "found=1 runtime=TRUE wdedup=TRUE gpu=
why=
boost_dir=Boost_DIR-NOTFOUND boost_found=TRUE" \
  "$(probe 'CONFIG' -DPROBE_BOOST=ON "-DCMAKE_IGNORE_PATH=$boost_dir;$boost_real;${boost_real#/usr};/usr${boost_real#/usr}")"

# ---- Meson subproject -------------------------------------------------------
# The README's two ways (Building into your project), the source tree at
# subprojects/wdedup as a symbolic link: both dependencies with
# `fallback : 'wdedup'`; and the runtime half alone, as a delegate asks
# for it, without fallback, found through the README's [wrap-file]
# (without it Meson finds no 'wdedup-runtime', which the second run
# checks). Strict warnings, -Werror, the reader -fno-exceptions -fno-rtti.
meson_consumer() {  # meson_consumer <dir> <meson.build text>
  mkdir -p -- "$1/subprojects"
  ln -s -- "$src" "$1/subprojects/wdedup"
  cp -- "$here/consumer/read_store.cpp" "$here/consumer/write_store.cpp" "$1/"
  printf '%s\n' "$2" >"$1/meson.build"
}
# Which dependencies a consumer's setup log took from the subproject
# (meson.override_dependency: "Dependency wdedup-runtime found: YES 0.1.0
# (overridden)"), one a line, sorted. dependency() looks for an installed
# copy first (pkg-config, CMake) with or without fallback or a wrap, so a
# wdedup installed where they search (a PKG_CONFIG_PATH the README's
# install section gives, /usr/local) would be built against instead, and
# the checks below would pass on it without the subproject.
from_subproject() {  # from_subproject <setup log>
  sed -n 's/^Dependency \(wdedup[a-z-]*\) found: YES .* (overridden)$/\1/p' "$1" | LC_ALL=C sort -u
}
meson_project="project('consumer', 'cpp', default_options : ['cpp_std=c++17', 'warning_level=3', 'werror=true'])"
meson_consumer "$work/msub" "$meson_project
runtime = dependency('wdedup-runtime', fallback : 'wdedup')
wdedup = dependency('wdedup', fallback : 'wdedup')
executable('write_store', 'write_store.cpp', dependencies : wdedup)
executable('read_store', 'read_store.cpp', dependencies : runtime, cpp_args : ['-fno-exceptions', '-fno-rtti'])"
logged "$work/msub.log" env CXX="$meson_cxx" meson setup "$work/msub/build" "$work/msub"
check "Meson subproject (fallback): both dependencies from the subproject, not an installed wdedup" \
  "wdedup
wdedup-runtime" "$(from_subproject "$work/msub.log")"
logged "$work/msub-build.log" ninja -C "$work/msub/build"
"$work/msub/build/write_store" "$work/msub.ptd" >/dev/null
check "Meson subproject (fallback): wdedup writes, wdedup-runtime (-fno-exceptions -fno-rtti) reads" \
  "$expected" "$("$work/msub/build/read_store" "$work/msub.ptd")"
check "Meson subproject: the same file as the installed CMake package's" "same" \
  "$(cmp -s "$work/cmake.ptd" "$work/msub.ptd" && echo same)"
check "Meson subproject: it installs nothing" "yes" \
  "$(meson install -C "$work/msub/build" --destdir "$work/msub-dest" --no-rebuild 2>&1 | grep -q 'Nothing to install' &&
     [ ! -e "$work/msub-dest" ] && echo yes)"
meson_runtime="$meson_project
runtime = dependency('wdedup-runtime')
executable('read_store', 'read_store.cpp', dependencies : runtime, cpp_args : ['-fno-exceptions', '-fno-rtti'])"
meson_consumer "$work/mwrap" "$meson_runtime"
printf '[wrap-file]\ndirectory = wdedup\n\n[provide]\ndependency_names = wdedup, wdedup-runtime\n' \
  >"$work/mwrap/subprojects/wdedup.wrap"
logged "$work/mwrap.log" env CXX="$meson_cxx" meson setup "$work/mwrap/build" "$work/mwrap"
check "Meson subproject (the README's wrap, no fallback): wdedup-runtime from the subproject" \
  "wdedup-runtime" "$(from_subproject "$work/mwrap.log")"
logged "$work/mwrap-build.log" ninja -C "$work/mwrap/build"
check "Meson subproject (the README's wrap, no fallback): wdedup-runtime reads" \
  "$expected" "$("$work/mwrap/build/read_store" "$work/msub.ptd")"
meson_consumer "$work/mnowrap" "$meson_runtime"
check "Meson subproject without the wrap or fallback: no wdedup-runtime (why the README gives the wrap)" \
  "Dependency \"wdedup-runtime\" not found" \
  "$(CXX="$meson_cxx" meson setup "$work/mnowrap/build" "$work/mnowrap" 2>&1 |
     grep -o 'Dependency "wdedup-runtime" not found' | head -1)"
# xxHash from the superproject: a 'libxxhash' dependency it declares (as
# WrapDB's xxhash wrap does), whose include directory holds an xxhash.h
# that marks itself and takes the system's with #include_next. The build-
# time half must compile with that one: it looked only on the compiler's
# own search path (has_header), and took the system's.
meson_consumer "$work/mxx" "project('consumer', 'cpp', default_options : ['cpp_std=c++17', 'warning_level=2', 'werror=true'])
meson.override_dependency('libxxhash', declare_dependency(include_directories : include_directories('xxhash')))
wdedup = dependency('wdedup', fallback : 'wdedup')
executable('marker', 'marker.cpp', dependencies : wdedup)"
mkdir -p -- "$work/mxx/xxhash"
printf '#define CONSUMER_XXHASH_H 1\n#include_next <xxhash.h>\n' >"$work/mxx/xxhash/xxhash.h"
printf '#include <wdedup/wdedup.hpp>\n#ifndef CONSUMER_XXHASH_H\n#error "xxhash.h is not the superproject'"'"'s"\n#endif\nint main() { return 0; }\n' \
  >"$work/mxx/marker.cpp"
logged "$work/mxx.log" env CXX="$meson_cxx" meson setup "$work/mxx/build" "$work/mxx"
check "Meson subproject (xxHash from the superproject): wdedup from the subproject" \
  "wdedup" "$(from_subproject "$work/mxx.log")"
check "Meson subproject: xxhash.h from the superproject's libxxhash dependency" "built" \
  "$(ninja -C "$work/mxx/build" >"$work/mxx-build.log" 2>&1 && echo built || cat "$work/mxx-build.log")"
rm -rf -- "$work/msub" "$work/mwrap" "$work/mnowrap" "$work/msub-dest" "$work/mxx"

# ---- pkg-config -------------------------------------------------------------
# Relocatable too (pkgconfig.relocatable, a default option): the staged
# prefix is moved elsewhere first, and no sysroot is given.
moved=$work/moved
mv -- "$prefix" "$moved"
pcdir=$moved/${pcdir#"$prefix"/}
export PKG_CONFIG_PATH=$pcdir
unset PKG_CONFIG_SYSROOT_DIR
inc=$(pkg-config --cflags-only-I wdedup-runtime | sed 's/^-I//; s/ *$//')
check "pkg-config: relocatable (the prefix moved after install)" "$moved/include" "$(realpath -m -- "$inc")"
# shellcheck disable=SC2046
"${launcher[@]}" "${cxx[@]}" -std=c++17 -fno-exceptions -fno-rtti -Wall -Wextra -Wconversion -Wsign-conversion -Wshadow -Werror \
  $(pkg-config --cflags wdedup-runtime) "$here/consumer/read_store.cpp" -o "$work/pc_read"
# shellcheck disable=SC2046
"${launcher[@]}" "${cxx[@]}" -std=c++17 $(pkg-config --cflags wdedup) "$here/consumer/write_store.cpp" -o "$work/pc_write" \
  $(pkg-config --libs wdedup)
# The build-time half links nothing of xxHash's (it is inlined): no -lxxhash.
check "pkg-config: wdedup's --libs" "-pthread" "$(pkg-config --libs wdedup | sed 's/ *$//')"
"$work/pc_write" "$work/pc.ptd" >/dev/null
check "pkg-config: wdedup writes, wdedup-runtime reads" "$expected" "$("$work/pc_read" "$work/pc.ptd")"
check "pkg-config: the two ways wrote the same file" "same" "$(cmp -s "$work/cmake.ptd" "$work/pc.ptd" && echo same)"
# Found through libxxhash.pc, xxHash is wdedup.pc's private requirement.
check "pkg-config: wdedup.pc requires libxxhash, whose .pc the build found" "Requires.private: libxxhash" \
  "$(grep '^Requires' "$pcdir/wdedup.pc")"
# Found on the compiler's own search path, with no libxxhash.pc (meson.build
# then looks for the header itself), xxHash is not required: pkg-config
# would refuse wdedup on that machine ("Package 'libxxhash', required by
# 'wdedup', not found"). PKG_CONFIG_LIBDIR at an empty directory hides the
# system's .pc files, from the setup and from the consumer alike.
mkdir -p -- "$work/no-pc"
logged "$work/no-xxhash-pc.log" env PKG_CONFIG_LIBDIR="$work/no-pc" PKG_CONFIG_PATH= CXX="$meson_cxx" \
  meson setup "$work/no-xxhash-pc-build" "$src" -Dtests=false -Dexamples=false -Dbenchmarks=false -Ddemo=disabled \
  --prefix "$under"
meson install -C "$work/no-xxhash-pc-build" --destdir "$work/no-xxhash-pc-dest" --quiet >/dev/null
nopc=$work/no-xxhash-pc-dest$under/share/pkgconfig
check "pkg-config, xxhash.h without libxxhash.pc: wdedup's --cflags and --libs" "-I$nopc/../../include -pthread" \
  "$(PKG_CONFIG_LIBDIR="$work/no-pc" PKG_CONFIG_PATH="$nopc" pkg-config --cflags --libs wdedup 2>&1 | sed 's/ *$//')"
# shellcheck disable=SC2046
"${launcher[@]}" "${cxx[@]}" -std=c++17 $(PKG_CONFIG_LIBDIR="$work/no-pc" PKG_CONFIG_PATH="$nopc" pkg-config --cflags wdedup) \
  "$here/consumer/write_store.cpp" -o "$work/nopc_write" \
  $(PKG_CONFIG_LIBDIR="$work/no-pc" PKG_CONFIG_PATH="$nopc" pkg-config --libs wdedup)
"$work/nopc_write" "$work/nopc.ptd" >/dev/null
check "pkg-config, xxhash.h without libxxhash.pc: the same file written" "same" \
  "$(cmp -s "$work/pc.ptd" "$work/nopc.ptd" && echo same)"
exit $failed
