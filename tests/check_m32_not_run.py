#!/usr/bin/env python3
"""The 32-bit tests on a kernel that cannot start 32-bit programs.

Meson found at setup that a -m32 program links here but does not start (a
kernel without IA32 emulation), so tests/meson.build built large_file_m32
without registering it, and did not build the -m32 suite's tests (their
sources are compiled for 32 bits by m32_syntax). This checks that each
program given was built and that the kernel still refuses to start it
(ENOEXEC), and says which tests were not run: a doctest-style MESSAGE, which
scripts/test.sh lists among the checks this machine cannot run. If one
starts after all, the setup is stale: failing says so, rather than passing
tests that could have run.

usage: check_m32_not_run.py EXE... [--not-built NAME...]
"""
import errno
import os
import subprocess
import sys


def main(args):
    not_built = []
    if "--not-built" in args:
        at = args.index("--not-built")
        args, not_built = args[:at], args[at + 1:]
    exes = args
    if not exes:
        print("check_m32_not_run.py: no 32-bit test programs given", file=sys.stderr)
        return 1
    for exe in exes:
        if not os.path.isfile(exe):
            print(f"{exe}: not built", file=sys.stderr)
            return 1
        try:
            subprocess.run([exe, "--list-test-cases"], capture_output=True, timeout=60)
        except OSError as e:
            if e.errno != errno.ENOEXEC:
                print(f"{exe}: could not be started: {e.strerror} (errno {e.errno})", file=sys.stderr)
                return 1
            continue
        print(f"{exe}: this kernel starts 32-bit programs now; set the build up again "
              "(meson setup --wipe) to run the 32-bit tests", file=sys.stderr)
        return 1
    names = ", ".join(os.path.basename(e) for e in exes)
    line = (f"MESSAGE: 32-bit tests not run: this kernel cannot start 32-bit programs "
            f"(no IA32 emulation; exec gives ENOEXEC): built, {names}")
    if not_built:
        line += f"; not built (m32_syntax compiles their sources), {', '.join(not_built)}"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
