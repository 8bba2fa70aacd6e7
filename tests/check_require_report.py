#!/usr/bin/env python3
"""A failed REQUIRE_VALUE's report, from tests/require_report.cpp built with
exceptions (doctest's console reporter) and without (doctest_main.cpp's
listener, which ends the run): exit code 1, the file and line, the
expression and the error as REQUIRE_VALUE words them, what CAPTURE logged,
and nothing the test case would have run after it."""
import subprocess
import sys

LINE = "require_report.cpp:19:"
WANT = ["missing: key 'w' is not in the map (NotFound at 42)", "tensor := 7"]
problems = []
for exe in sys.argv[1:]:
    r = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    out = r.stdout + r.stderr
    missing = [w for w in [LINE] + WANT if w not in out]
    if r.returncode != 1 or missing or "after the failed REQUIRE_VALUE" in out:
        problems.append(f"{exe}: exit {r.returncode} (expected 1), missing {missing}, output:\n{out}")
if problems:
    sys.exit("\n".join(problems))
print(f"a failed REQUIRE_VALUE's report holds its line, expression, error and context in {len(sys.argv) - 1} builds")
