#!/usr/bin/env python3
"""A failed REQUIRE_VALUE's (of an Expected or Result, and of an empty
std::optional) and REQUIRE_FOUND's reports, from
tests/require_report.cpp built with exceptions (doctest's console reporter)
and without (doctest_main.cpp's listener, which ends the run): exit code 1,
the file and line, the expression (and REQUIRE_VALUE's error) as the macro
words them, what CAPTURE logged, and nothing the test case would have run
after it. Each test case is run alone: without exceptions the first failed
REQUIRE ends the run."""
import subprocess
import sys

CASES = [
    ("a failed REQUIRE_VALUE says what failed", "require_report.cpp:25:",
     ["missing: key 'w' is not in the map (NotFound at 42)", "tensor := 7"], "after the failed REQUIRE_VALUE"),
    ("a failed REQUIRE_FOUND says what was not found", "require_report.cpp:34:",
     ['program.find_method("decode"): not found (nullptr)', "tensor := 8"], "after the failed REQUIRE_FOUND"),
    ("a failed REQUIRE_VALUE of an empty optional says what was empty", "require_report.cpp:43:",
     ["t.layout: empty (std::nullopt)", "tensor := 9"], "after the failed REQUIRE_VALUE of an optional"),
]
problems = []
for exe in sys.argv[1:]:
    for name, line, want, after in CASES:
        r = subprocess.run([exe, "--test-case=" + name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60)
        out = r.stdout + r.stderr
        missing = [w for w in [line] + want if w not in out]
        if r.returncode != 1 or missing or after in out:
            problems.append(f"{exe} ({name}): exit {r.returncode} (expected 1), missing {missing}, output:\n{out}")
if problems:
    sys.exit("\n".join(problems))
print(f"failed REQUIRE_VALUE's and REQUIRE_FOUND's reports hold their line, expression and context in "
      f"{len(sys.argv) - 1} builds")
