#!/usr/bin/env python3
"""example_merge_ptd_files on files given to it (argv[1] the example, argv[2]
the ExecuTorch-written fixtures' directory, argv[3] a scratch directory):
one method alone merges and checks (OneBlob names a lone method's function
"<method>", not "<method>__0", so the check finds functions by method and
partition); OUT that names an input, itself or through a symbolic link, is
refused (exit 2) with the input untouched, as is one input given twice
under any two names; a failed merge leaves OUT as it was and says why on
stderr; one argument is a usage error."""
import hashlib
import os
import shutil
import subprocess
import sys

exe, fixtures, scratch = sys.argv[1], sys.argv[2], sys.argv[3]
work = os.path.join(scratch, "merge-args")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
simple, layouts = os.path.join(work, "simple.ptd"), os.path.join(work, "layouts.ptd")
shutil.copyfile(os.path.join(fixtures, "simple.ptd"), simple)
shutil.copyfile(os.path.join(fixtures, "layouts.ptd"), layouts)
problems = []


def run(args):
    return subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def expect(what, r, code, stdout=None, stderr=""):
    if r.returncode != code or (stdout is not None and r.stdout != stdout) or r.stderr != stderr:
        problems.append(f"{what}: exit {r.returncode} (expected {code}), stdout {r.stdout!r}, stderr {r.stderr!r}"
                        + (f", expected stdout {stdout!r}" if stdout is not None else "")
                        + (f", expected stderr {stderr!r}" if stderr else ""))


# One method alone: simple.ptd's 3 keys (37 + 100 + 256 bytes, all distinct).
out = os.path.join(work, "one.ptd")
r = run([out, simple])
size = os.path.getsize(out) if os.path.exists(out) else -1
expect("one input", r, 0, f"1 file, 896 bytes -> {out}, {size} bytes (393 tensor bytes stored once of 393)\n"
                          "3 tensors checked\nmerge: OK\n")
# Two: simple's 3 keys and layouts' 11, each file a method.
out2 = os.path.join(work, "two.ptd")
r = run([out2, simple, layouts])
if r.returncode != 0 or not r.stdout.endswith("\n14 tensors checked\nmerge: OK\n"):
    expect("two inputs", r, 0)
# The merged store given as an input again, with one more file: its method
# comes back with its partition, so 3 + 11 tensors again.
r = run([os.path.join(work, "again.ptd"), out, layouts])
if r.returncode != 0 or not r.stdout.endswith("\n14 tensors checked\nmerge: OK\n"):
    expect("a merged store as input", r, 0)

# OUT names an input: refused before anything is written, the input kept.
before = digest(layouts)
link = os.path.join(work, "link.ptd")
os.symlink("layouts.ptd", link)
for given in (layouts, link, os.path.join(work, ".", "layouts.ptd")):
    r = run([given, simple, layouts])
    expect(f"OUT {given}", r, 2, "", f"{exe}: OUT {given} names the input {layouts}: the merge would replace it\n")
if digest(layouts) != before:
    problems.append("layouts.ptd changed although the merge was refused")

# OUT forgotten: "simple.ptd layouts.ptd" would replace the export
# simple.ptd with layouts.ptd's merge alone. An existing OUT that is not a
# merged store is refused (exit 2), and left as it was.
export_out = os.path.join(work, "export-out.ptd")
shutil.copyfile(simple, export_out)
before = digest(export_out)
r = run([export_out, layouts])
expect("OUT an existing export", r, 2, "", f"{exe}: OUT {export_out} exists and is not a merged store (a .ptd without "
       "function maps, as one method's export is): the merge would replace it; give OUT first (OUT.ptd IN.ptd...), "
       "or remove it\n")
if digest(export_out) != before:
    problems.append("an existing export given as OUT was replaced")
text_out = os.path.join(work, "notes.txt")
with open(text_out, "w") as f:
    f.write("not a store\n")
r = run([text_out, layouts])
expect("OUT an existing text file", r, 2, "", f"{exe}: OUT {text_out} exists and is not a merged store (not a .ptd "
       "file): the merge would replace it; give OUT first (OUT.ptd IN.ptd...), or remove it\n")
# An empty OUT (made by mktemp, say) and a merged store are replaced.
empty_out = os.path.join(work, "empty-out.ptd")
open(empty_out, "wb").close()
r = run([empty_out, simple])
if r.returncode != 0 or not r.stdout.endswith("\n3 tensors checked\nmerge: OK\n"):
    expect("OUT an empty file", r, 0)

# A merge that fails (an input that is not a store) leaves OUT as it was.
not_store = os.path.join(work, "not-a-store.ptd")
with open(not_store, "wb") as f:
    f.write(b"\0" * 64)
before = digest(out2)
r = run([out2, simple, not_store])
want = f"{not_store} (64 bytes, not a .ptd file): flatbuffer identifier is not FT01 (MalformedHeader at 4)\n"
if r.returncode != 1 or r.stderr != want or r.stdout != "" or digest(out2) != before:
    problems.append(f"an input that is not a store: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r} "
                    f"(expected {want!r} on stderr), OUT {'unchanged' if digest(out2) == before else 'CHANGED'}")

# One input twice, under any two names: refused before anything is read or
# written (it would be two methods of the same bytes).
hard, soft = os.path.join(work, "hard.ptd"), os.path.join(work, "simple-link.ptd")
os.link(simple, hard)
os.symlink("simple.ptd", soft)
for second in (simple, soft, hard, os.path.join(work, ".", "simple.ptd")):
    r = run([os.path.join(work, "twice.ptd"), simple, second])
    expect(f"{simple} then {second}", r, 2, "", f"{exe}: {simple} and {second} name one file: give each input once\n")
    if os.path.exists(os.path.join(work, "twice.ptd")):
        problems.append(f"{simple} then {second}: twice.ptd written")

r = run([out])
if r.returncode != 2 or not r.stderr.startswith("usage: "):
    problems.append(f"one argument: exit {r.returncode}, stderr {r.stderr!r}")

# An option where OUT goes is not taken for OUT's name ("--help x.ptd"
# wrote a file named --help): --help prints the usage, another is refused.
usage = f"usage: {exe} [OUT.ptd IN.ptd...] (no arguments: a self-contained demo)\n"
os.chdir(work)
expect("--help simple.ptd", run(["--help", simple]), 0, usage)
expect("-h", run(["-h"]), 0, usage)
expect("--out merged.ptd simple.ptd", run(["--out", "merged.ptd", simple]), 2, "",
       f"{exe}: unknown option '--out' (a path that starts with '-' is given as ./--out)\n" + usage)
for name in ("--help", "-h", "--out"):
    if os.path.exists(os.path.join(work, name)):
        problems.append(f"a file named {name} was written")

if problems:
    sys.exit("\n".join(problems))
shutil.rmtree(work)
print("example_merge_ptd_files: one method, two, a merged store again; OUT naming an input, an existing OUT that is "
      "not a merged store and an input given twice "
      "refused, a failed merge leaves OUT")
