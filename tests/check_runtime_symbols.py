#!/usr/bin/env python3
"""Reads the symbols the runtime half's object needs from outside
(tests/runtime_symbols.cpp, built -fno-exceptions -fno-rtti) and fails on
any that only a C++ runtime library defines.

Usage: check_runtime_symbols.py <nm> <static library or object>...

Allowed: C symbols (the C library: open, mmap, pread, memcmp, malloc for
the copies get_data makes, a sanitizer's hooks), and the two a class with
virtual functions makes a compiler name: operator delete (a deleting
destructor) and __cxa_pure_virtual (an abstract class's vtable). Refused:
every other mangled name (operator new, std:: functions out of line,
typeinfo) and the ABI's C-named symbols for exceptions, RTTI, guarded
statics and statics' destructors (__cxa_*, __gxx_*, _Unwind_*,
__dynamic_cast).
"""
import subprocess
import sys

# operator delete(void*) and operator delete(void*, size_t) for 64- and
# 32-bit size_t (m: unsigned long, j: unsigned int).
ALLOWED = {"_ZdlPv", "_ZdlPvm", "_ZdlPvj", "__cxa_pure_virtual"}
CXX_RUNTIME_PREFIXES = ("_Z", "__cxa_", "__gxx_", "_Unwind_", "__dynamic_cast")


def undefined(nm, path):
    out = subprocess.run([nm, "--undefined-only", "--format=posix", path], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        line = line.strip()
        # "name U" lines; an archive also lists "lib.a[member.o]:" headers.
        if not line or line.endswith(":"):
            continue
        names.add(line.split()[0].split("@")[0])
    return names


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    nm, paths = sys.argv[1], sys.argv[2:]
    names = set()
    for p in paths:
        names |= undefined(nm, p)
    # The object must need something (memcmp, mmap...): an empty list
    # means nm read nothing, and the check would pass on anything.
    if "mmap" not in names and "mmap64" not in names:
        print(f"no mmap among the undefined symbols of {paths}: nm read the wrong file? {sorted(names)}")
        return 1
    bad = sorted(n for n in names if n.startswith(CXX_RUNTIME_PREFIXES) and n not in ALLOWED)
    if bad:
        demangled = subprocess.run(["c++filt"], input="\n".join(bad), capture_output=True, text=True).stdout.splitlines()
        print("the runtime half needs symbols of a C++ runtime library (an embedded build may have none):")
        for raw, nice in zip(bad, demangled if len(demangled) == len(bad) else bad):
            print(f"  {raw}  ({nice})" if nice != raw else f"  {raw}")
        return 1
    cxx = sorted(n for n in names if n in ALLOWED)
    print(f"{len(names)} undefined symbols, none of a C++ runtime library but {', '.join(cxx) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
