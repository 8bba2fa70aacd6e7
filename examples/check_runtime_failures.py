#!/usr/bin/env python3
"""The custom runtime's failures say why: a path that cannot be mapped names
the errno's reason, a file that is not a store names the check that failed
and its offset. Exit 1 for both. The same for its runtime part built alone
(third argument), which must also print what the whole example prints for a
store the example exports, for each method, and say what a file has where
it lacks the method asked for (fourth argument: ExecuTorch's fixtures, whose
files have no function maps). With a fifth (the tests' sized_store, which
writes a store of tensors of given sizes and alignments), both builds fill
the example's 16 MiB arena to the byte, say it is full one byte later, and
refuse an alignment past the 4096 its storage is aligned to, on every run."""
import os
import subprocess
import sys

exe, outdir, alone, fixtures = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sized_store = sys.argv[5] if len(sys.argv) > 5 else None
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

# The arena (16 MiB, starting 64 bytes past a 4096 boundary). Stores of one
# function, decode (one method: its own blob), of tensors w0, w1, ... of the
# sizes and alignments given; what each build prints, and its exit code.
def loaded(i, size, alignment):
    return f"  {'w' + str(i):<28} <- key {'w' + str(i):<28} {size:>8} bytes, align {alignment}"


def refused(i, alignment):
    return (f"w{i}: alignment {alignment} is past the 4096 this runtime places tensors at "
            "(where its arena was loaded would decide whether it fits)")


mib16 = 16 << 20
full = "arena full: {} bytes at alignment {} do not fit after {} of " + str(mib16) + " bytes"
arena_cases = [
    # Filled to the byte, and at the page's alignment.
    ([(mib16, 64)], 0, [loaded(0, mib16, 64)]),
    ([(1, 4096)], 0, [loaded(0, 1, 4096)]),
    # The address is rounded, not the offset: at 4096, 16 MiB starts 4032
    # bytes in and does not fit an empty arena.
    ([(mib16, 4096)], 1, [full.format(mib16, 4096, 0)]),
    # One byte more than the arena holds, after two tensors filled it.
    ([(mib16 - 100, 64), (100, 1), (1, 1)], 1,
     [loaded(0, mib16 - 100, 64), loaded(1, 100, 1), full.format(1, 1, mib16)]),
    # Past the storage's alignment: refused even where this run's address
    # would have had room (a 16 MiB arena holds a multiple of 32 MiB on
    # about half the runs; it did, before, and loaded the key).
    ([(1, 8192)], 1, [refused(0, 8192)]),
    ([(1, 2 * mib16)], 1, [refused(0, 2 * mib16)]),
]
for tensors, code, lines in arena_cases if sized_store else []:
    store = os.path.join(outdir, "runtime-arena.ptd")
    spec = [f"{size}:{alignment}" for size, alignment in tensors]
    made = run([sized_store, store] + spec)
    if made.returncode != 0:
        problems.append(f"sized_store {spec}: exit {made.returncode}, stderr {made.stderr!r}")
        continue
    want = [f"function decode: method decode partition 0, blob decode_partition_0, {len(tensors)} tensors"] + lines
    for program in (exe, alone):
        # Three runs each: where the arena lies changes from run to run.
        for _ in range(3):
            r = run([program, store])
            if r.returncode != code or r.stdout.splitlines() != want:
                problems.append(f"{os.path.basename(program)} on {spec}: exit {r.returncode}, stdout {r.stdout!r}, "
                                f"expected {code}, {want!r}")
    os.remove(store)
if problems:
    sys.exit("\n".join(problems))
print("example_custom_runtime: failures name their reason, in both builds; the runtime part alone reads the same")
