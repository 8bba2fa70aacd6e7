#!/usr/bin/env python3
"""The custom runtime's failures say why: a path that cannot be mapped names
the errno's reason, a file that is not a store names the check that failed
and its offset. Exit 1 for both. The same for its runtime part built alone
(third argument), which must also print what the whole example prints for a
store the example exports, for each method, and say what a file has where
it lacks the method asked for (fourth argument: ExecuTorch's fixtures, whose
files have no function maps)."""
import os
import subprocess
import sys

exe, outdir, alone, fixtures = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
fixture = os.path.join(fixtures, "simple.ptd")
not_ptd = os.path.join(outdir, "runtime-not-a-store.ptd")
with open(not_ptd, "wb") as f:
    f.write(b"\0" * 64)
missing = os.path.join(outdir, "runtime-no-such-file.ptd")
cases = [
    (missing, f"cannot map {missing}: open failed: No such file or directory (IoError)"),
    (outdir, f"cannot map {outdir}: not a regular file but a directory (IoError at 0)"),
    (not_ptd, f"cannot open {not_ptd}: flatbuffer identifier is not FT01 (MalformedHeader at 4)"),
]
problems = []


def run(args):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


for program in (exe, alone):
    for path, want in cases:
        r = run([program, path])
        got = r.stdout.strip()
        if r.returncode != 1 or got != want:
            problems.append(f"{os.path.basename(program)} {path}: exit {r.returncode}, stdout {got!r}, expected {want!r}")

store = os.path.join(outdir, "runtime-alone.ptd")
r = run([exe, "--export", store])
if r.returncode != 0 or not r.stdout.startswith(f"exported {store}: "):
    problems.append(f"--export {store}: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}")
else:
    for method, first in (("decode", "function decode__0: method decode partition 0, blob combined_all, 4 tensors"),
                          ("prefill", "function prefill__0: method prefill partition 0, blob combined_all, 4 tensors")):
        whole, part = run([exe, store, method]), run([alone, store, method])
        if whole.returncode != 0 or part.returncode != 0 or whole.stdout != part.stdout or \
                whole.stdout.splitlines()[:1] != [first]:
            problems.append(f"{method}: the example exits {whole.returncode} printing {whole.stdout!r}; "
                            f"its runtime part alone exits {part.returncode} printing {part.stdout!r}")
    # A method the store lacks, and a file with no function maps (one
    # ExecuTorch wrote): each says what the file has instead.
    for args, want in (([store, "prefil"], f"no function for method prefil partition 0 in {store}: its methods are "
                                           "prefill decode"),
                       ([fixture, "decode"], f"no function for method decode partition 0 in {fixture}: the file has "
                                             "no function maps (a store deduplicate() wrote has them; a .ptd "
                                             "ExecuTorch wrote does not)")):
        for program in (exe, alone):
            r = run([program] + args)
            if r.returncode != 1 or r.stdout.strip() != want:
                problems.append(f"{os.path.basename(program)} {args}: exit {r.returncode}, stdout {r.stdout.strip()!r}, "
                                f"expected {want!r}")
    os.remove(store)
r = run([alone])
if r.returncode != 2 or "usage:" not in r.stderr:
    problems.append(f"the runtime part alone, no argument: exit {r.returncode}, stderr {r.stderr!r}")
# An option where a path goes is not taken for a file's name ("cannot map
# --export: ..."): --help prints the usage, anything else starting with '-'
# is refused with it (exit 2), in both builds.
usage_whole = f"usage: {exe} [store.ptd [method]]\n       {exe} --export store.ptd\n"
usage_alone = f"usage: {alone} store.ptd [method]\n"
for args, code, out, err in (
        ([exe, "--help"], 0, usage_whole, ""),
        ([alone, "-h"], 0, usage_alone, ""),
        ([exe, "--export"], 2, "", f"{exe}: --export needs a path\n" + usage_whole),
        ([exe, "--expert", "x.ptd"], 2, "",
         f"{exe}: unknown option '--expert' (a path that starts with '-' is given as ./--expert)\n" + usage_whole),
        ([alone, "--export", "x.ptd"], 2, "",
         f"{alone}: unknown option '--export' (a path that starts with '-' is given as ./--export)\n" + usage_alone)):
    r = run(args)
    if (r.returncode, r.stdout, r.stderr) != (code, out, err):
        problems.append(f"{args}: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}; "
                        f"expected {code}, {out!r}, {err!r}")
    if os.path.exists("x.ptd"):
        problems.append(f"{args}: wrote x.ptd")
if problems:
    sys.exit("\n".join(problems))
print("example_custom_runtime: failures name their reason, in both builds; the runtime part alone reads the same")
