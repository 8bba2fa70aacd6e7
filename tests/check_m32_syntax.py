#!/usr/bin/env python3
"""Compiles every source of the build once more for 32 bits (-m32
-fsyntax-only), with its own flags, warnings and -Werror, from the build's
compile_commands.json.

Usage: check_m32_syntax.py <build dir> <source root>

The -m32 suite runs the runtime's tests and the build-time half's main
paths in 32 bits; this keeps everything else (the other tests, the
benchmarks, the demo, the examples) building there too, as on armv7, where
size_t is 32 bits while the flags, files and counts are 64. A cross build
for armv7 found three sources that did not (narrowing warnings under
-Werror), and a count that wrapped in 32 bits.

The build's own -m32 commands are skipped, and with them the sources they
compile. OpenSSL's configuration header
lives in the 64-bit multiarch directory only (no 32-bit libssl-dev here):
it is searched last, after the 32-bit ones, for the benchmark that
includes <openssl/sha.h>; a syntax check needs nothing from it that
differs.
"""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys


def commands(build, root):
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    parsed = []
    for e in entries:
        args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
        parsed.append((e, args, os.path.normpath(os.path.join(e["directory"], e["file"]))))
    # A source the build itself compiles for 32 bits (the -m32 tests) is
    # checked there, whole and with -Werror: not once more here.
    seen = {src for _, args, src in parsed if "-m32" in args}
    for e, args, src in parsed:
        if src in seen:
            continue
        seen.add(src)
        out, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a in ("-o", "-MF", "-MQ"):
                skip = True
            elif a not in ("-MD", "-c"):
                out.append(a)
        yield os.path.relpath(src, root), e["directory"], out


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, root = sys.argv[1], os.path.realpath(sys.argv[2])
    jobs = list(commands(build, root))
    if not jobs:
        print(f"no commands in {build}/compile_commands.json")
        return 1
    multiarch = subprocess.run([jobs[0][2][0], "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    extra = ["-m32", "-fsyntax-only", "-fdiagnostics-color=never"]
    if multiarch:
        extra += ["-idirafter", "/usr/include/" + multiarch]

    def run(job):
        rel, cwd, args = job
        r = subprocess.run(args + extra, cwd=cwd, capture_output=True, text=True)
        return rel, r.returncode, r.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for rel, rc, err in pool.map(run, jobs):
            if rc != 0:
                failed += 1
                print(f"{rel}: does not build for 32 bits")
                print("\n".join("    " + l for l in err.splitlines() if "error" in l or "warning" in l))
    print(f"{len(jobs) - failed} of {len(jobs)} sources build for 32 bits (-m32, with their own flags)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
