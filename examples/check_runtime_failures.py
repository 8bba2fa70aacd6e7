#!/usr/bin/env python3
"""The custom runtime's failures say why: a path that cannot be mapped names
the errno's reason, a file that is not a store names the check that failed
and its offset. Exit 1 for both."""
import os
import subprocess
import sys

exe, outdir = sys.argv[1], sys.argv[2]
not_ptd = os.path.join(outdir, "runtime-not-a-store.ptd")
with open(not_ptd, "wb") as f:
    f.write(b"\0" * 64)
missing = os.path.join(outdir, "runtime-no-such-file.ptd")
cases = [
    (missing, f"cannot map {missing}: open failed: No such file or directory (IoError)"),
    (outdir, f"cannot map {outdir}: not a regular file (IoError at 0)"),
    (not_ptd, f"cannot open {not_ptd}: flatbuffer identifier is not FT01 (MalformedHeader at 4)"),
]
problems = []
for path, want in cases:
    r = subprocess.run([exe, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    got = r.stdout.strip()
    if r.returncode != 1 or got != want:
        problems.append(f"{path}: exit {r.returncode}, stdout {got!r}, expected {want!r}")
if problems:
    sys.exit("\n".join(problems))
print("example_custom_runtime: failures name their reason")
