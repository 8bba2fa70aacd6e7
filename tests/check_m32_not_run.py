#!/usr/bin/env python3
"""The 32-bit tests on a kernel that cannot start 32-bit programs.

Meson found at setup that a -m32 program links here but does not start (a
kernel without IA32 emulation), so tests/meson.build built the 32-bit tests
without registering them. This checks that each one was built and that the
kernel still refuses to start it (ENOEXEC), and says which were not run: a
doctest-style MESSAGE, which scripts/test.sh lists among the checks this
machine cannot run. If one starts after all, the setup is stale: failing
says so, rather than passing tests that could have run.

usage: check_m32_not_run.py EXE...
"""
import errno
import os
import subprocess
import sys


def main(exes):
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
    print(f"MESSAGE: 32-bit tests built, not run: this kernel cannot start 32-bit programs "
          f"(no IA32 emulation; exec gives ENOEXEC): {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
