#!/usr/bin/env python3
"""CI check of wdedup-demo's command line: a mistake is refused before any
work and before any file is written, with exit code 2 and one line naming
the flag and its value; outputs never replace each other nor an input; the
JSON report is replaced whole or not at all. Every run is the tiny model."""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys

exe, outdir = sys.argv[1], sys.argv[2]
# tests/support/fail_mmap.cpp's library (Linux, no sanitizer), for a store that does not read back.
fail_mmap = sys.argv[3] if len(sys.argv) > 3 else None
work = os.path.join(outdir, "demo-args")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
problems = []


def run(args, **kw):
    return subprocess.run([exe, "--quiet", "--threads", "1"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120, cwd=work, **kw)


def listing():
    found = set()
    for root, dirs, files in os.walk(work):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(root, name), work))
    return found


def contents(name):
    with open(os.path.join(work, name), "rb") as f:
        return f.read()


def expect(args, code, stderr, note=""):
    r = run(args)
    if r.returncode != code or r.stderr.strip() != stderr:
        problems.append(f"{args}{note}: exit {r.returncode}, stderr {r.stderr.strip()!r}; "
                        f"expected {code}, {stderr!r}")
    return r


# A report and a store from a good run: what the refusals below must leave alone.
r = run(["--strategy", "oneblob", "--out", "good.ptd", "--json", "good.json"])
if r.returncode != 0:
    sys.exit(f"the reference run failed: {r.stderr}")
good_json = contents("good.json")
good_ptd = contents("good.ptd")
if [x["strategy"] for x in json.loads(good_json)] != ["ONE_BLOB"]:
    problems.append(f"the reference report: {good_json[:200]!r}")
os.makedirs(os.path.join(work, "adir"))
os.makedirs(os.path.join(work, "pm2"))
with open(os.path.join(work, "afile"), "w"):
    pass
# A --per-method directory whose decode file is a link to nothing: refused
# before the work, not after prefill.ptd is written.
os.makedirs(os.path.join(work, "pm3"))
os.symlink("nowhere", os.path.join(work, "pm3", "decode.ptd"))
# An input named as --strategy all --out g.ptd names its DISABLED store.
shutil.copy(os.path.join(work, "good.ptd"), os.path.join(work, "g.disabled.ptd"))
before = listing()

# ---- refused before any work: exit 2, exactly this, nothing written ----------
refusals = [
    (["--layers", "-18446744073709551615"], "--layers needs a positive integer, got '-18446744073709551615'"),
    (["--layers", " 3"], "--layers needs a positive integer, got ' 3'"),
    (["--threads", "+2"], "--threads needs a non-negative integer, got '+2'"),
    (["--layers", "0"], "--layers needs a positive integer, got '0'"),
    (["--layers", "2x"], "--layers needs a positive integer, got '2x'"),
    (["--layers", ""], "--layers needs a positive integer, got ''"),
    # A name none of the flag's values has: the flag named with it.
    (["--model", "huge"], "--model: unknown model preset 'huge'; expected tiny, small or 1b"),
    (["--strategy", "fast"], "--strategy: unknown strategy 'fast' (positional, oneblob, disabled or all)"),
    # Too large for 32 bits: named against the flag's own limit.
    (["--layers", "99999999999"], "--layers 99999999999 is more than 2147483647 (a dimension is an int32)"),
    (["--decode-partitions", "123456789012345678901234567890"],
     "--decode-partitions 123456789012345678901234567890 is more than 2147483647 (a dimension is an int32)"),
    (["--threads", "4294967296"], "--threads 4294967296 is more than 1024"),
    (["--threads", "99999999999"], "--threads 99999999999 is more than 1024"),
    (["--threads", "1025"], "--threads 1025 is more than 1024"),
    (["--out", "adir"], "--out adir is a directory; give the store's file name"),
    (["--out", "adir", "--strategy", "oneblob"], "--out adir is a directory; give the store's file name"),
    (["--out", "new/"], "--out new/ ends in '/', which names a directory; give the store's file name"),
    (["--out", "new/", "--strategy", "oneblob"],
     "--out new/ ends in '/', which names a directory; give the store's file name"),
    (["--json", "new/"], "cannot write --json new/: the name ends in '/', which names a directory, not a file"),
    (["--per-method", "no/such/dir"], "cannot write --per-method no/such/dir: its directory no/such does not exist"),
    (["--per-method", "afile"], "cannot write --per-method afile: Not a directory"),
    (["--per-method", "pm3"], "cannot write --per-method pm3/decode.ptd: a symbolic link to nowhere, which does not exist"),
    (["--json", "adir"], "cannot write --json adir: Is a directory"),
    (["--strategy", "positional", "--prefill-partitions", "2", "--per-method", "pm"],
     "--strategy positional: every method must have the same number of partitions: method 'decode' has 1, but "
     "the first method 'prefill' has 2; --strategy oneblob (or disabled) accepts unequal partition "
     "counts"),
    (["--strategy", "oneblob", "--out", "same.ptd", "--json", "same.ptd"],
     "--out same.ptd and --json same.ptd name the same file: one output would replace the other"),
    (["--strategy", "oneblob", "--out", "good.ptd", "--json", "./adir/../good.ptd"],
     "--out good.ptd and --json ./adir/../good.ptd name the same file: one output would replace the other"),
    # Not written yet, under two spellings: its directory resolved.
    (["--strategy", "oneblob", "--out", "adir/new.ptd", "--json", "./adir/new.ptd"],
     "--out adir/new.ptd and --json ./adir/new.ptd name the same file: one output would replace the other"),
    (["--strategy", "oneblob", "--out", "pm2/decode.ptd", "--per-method", "pm2"],
     "--out pm2/decode.ptd and --per-method pm2/decode.ptd name the same file: one output would replace the other"),
    (["--ptd", "good.ptd", "--out", "", "--json", "good.ptd"],
     "--json good.ptd and --ptd good.ptd name the same file: the output would replace the input"),
    # (--strategy all: ONE_BLOB and DISABLED run whatever the inputs hold,
    # so their stores' names are checked before the inputs are read.)
    (["--ptd", "g.disabled.ptd", "--out", "g.ptd"],
     "--out g.disabled.ptd and --ptd g.disabled.ptd name the same file: the output would replace the input"),
    # The built-in workload's flags, wherever they are given.
    (["--ptd", "good.ptd", "--decode-partitions", "2"],
     "--ptd replaces the built-in workload: --model, --layers and --*-partitions do not apply"),
    (["--ptd", "good.ptd", "--model", "tiny", "--out", ""],
     "--ptd replaces the built-in workload: --model, --layers and --*-partitions do not apply"),
]
# Something there that is not a regular file (a device, a FIFO): never an
# output, in the writer's words; under --strategy all, --out /dev/null
# would otherwise become /dev/null.oneblob.ptd, a file in /dev.
os.mkfifo(os.path.join(work, "fifo"))
before.add("fifo")
not_regular = " (a directory, device, FIFO or socket is never replaced)"
for out in (["--out", "/dev/null"], ["--out", "/dev/null", "--strategy", "oneblob"]):
    refusals.append((out, "cannot write --out /dev/null: it exists and is not a regular file but a character device" +
                     not_regular + "; --out '' writes no store"))
refusals += [
    (["--out", "fifo"], "cannot write --out fifo: it exists and is not a regular file but a FIFO" + not_regular +
     "; --out '' writes no store"),
    (["--json", "/dev/null"], "cannot write --json /dev/null: it exists and is not a regular file but a character "
                              "device" + not_regular),
    (["--json", "fifo"], "cannot write --json fifo: it exists and is not a regular file but a FIFO" + not_regular),
]
os.symlink("good.ptd", os.path.join(work, "link.ptd"))
os.symlink("nothing_there.json", os.path.join(work, "dangling.json"))
os.link(os.path.join(work, "good.ptd"), os.path.join(work, "hard.ptd"))
before |= {"dangling.json", "hard.ptd"}
refusals += [
    (["--json", "dangling.json"],
     "cannot write --json dangling.json: a symbolic link to nothing_there.json, which does not exist"),
    (["--strategy", "oneblob", "--out", "dangling.json"],
     "cannot write --out dangling.json: a symbolic link to nothing_there.json, which does not exist"),
    (["--per-method", "dangling.json"],
     "cannot write --per-method dangling.json: a symbolic link to nothing_there.json, which does not exist"),
    # An option is never a value: this would write the report to ./--quiet.
    (["--json", "--quiet"], "--json needs a value, got the option '--quiet' (a path starting with '-' is written "
                            "./--quiet)"),
    (["--out", "-x.ptd"], "--out needs a value, got the option '-x.ptd' (a path starting with '-' is written "
                          "./-x.ptd)"),
    # A method's name, not an output: '' is no name, not the flag left out.
    (["--ptd", "good.ptd", "--unmapped-keys", ""], "--unmapped-keys needs a method name, got ''"),
    # The generator's refusals, in the flags' terms.
    (["--prefill-partitions", "100"],
     "--prefill-partitions 100 is more than the 4 layers of --model tiny (a partition holds at least one layer)"),
    (["--layers", "3", "--decode-partitions", "5"],
     "--decode-partitions 5 is more than --layers 3 (a partition holds at least one layer)"),
    (["--prefill-partitions", "3000000000"], "--prefill-partitions 3000000000 is more than 2147483647 (a dimension "
                                              "is an int32)"),
    (["--strategy", "oneblob", "--per-method", "newdir", "--out", "newdir"],
     "--out newdir and --per-method newdir name the same file: one output would replace the other"),
    (["--per-method", "nd2/", "--json", "nd2"],
     "--json nd2 and --per-method nd2 name the same file: one output would replace the other"),
]
# Refused before the workload is generated or the --ptd inputs are mapped:
# the output says nothing of it.
for args in (["--strategy", "positional", "--prefill-partitions", "2"],
             ["--strategy", "oneblob", "--out", "s2.ptd", "--json", "s2.ptd"],
             ["--ptd", "good.ptd", "--strategy", "disabled", "--out", "link.ptd"],
             ["--ptd", "good.ptd", "--strategy", "oneblob", "--out", "", "--json", "good.ptd"],
             ["--ptd", "g.disabled.ptd", "--out", "g.ptd"]):
    r = run(args)
    if r.returncode != 2 or "workload:" in r.stdout:
        problems.append(f"{args}: exit {r.returncode}, stdout {r.stdout[:120]!r}: not refused before generating")
refusals.append((["--ptd", "good.ptd", "--strategy", "disabled", "--out", "link.ptd"],
                 "--out link.ptd and --ptd good.ptd name the same file: the output would replace the input"))
before.add("link.ptd")
for args, want in refusals:
    expect(args, 2, "wdedup-demo: " + want)
    if listing() != before:
        problems.append(f"{args}: left {sorted(listing() - before)} behind")
        shutil.rmtree(os.path.join(work, "pm"), ignore_errors=True)
    # Names kept are not enough: the good run's files keep their bytes
    # (several refusals name good.ptd, through a link, a hard link or a path).
    if contents("good.json") != good_json or contents("good.ptd") != good_ptd:
        problems.append(f"{args}: good.json or good.ptd changed")

# --threads N is the deduplication's, as its report says; 0 is every core
# this process may run on (its affinity mask, as DedupOptions::threads = 0).
# Two counts besides the reference run's 1: a demo that dropped the flag
# reports the same count for all three.
every_core = min(len(os.sched_getaffinity(0)), 1024)
for threads, want in (("0", every_core), ("3", 3), ("1024", 1024)):
    r = run(["--threads", threads, "--strategy", "oneblob", "--out", "", "--json", "threads.json"])
    said = [x["threads"] for x in json.loads(contents("threads.json"))] if r.returncode == 0 else []
    if r.returncode != 0 or said != [want]:
        problems.append(f"--threads {threads}: exit {r.returncode}, stderr {r.stderr.strip()!r}, report threads "
                        f"{said}; expected [{want}]")
    if os.path.exists(os.path.join(work, "threads.json")):
        os.remove(os.path.join(work, "threads.json"))
if [x["threads"] for x in json.loads(good_json)] != [1]:
    problems.append(f"--threads 1: the reference report: {good_json[:200]!r}")

# A workload no machine holds: refused from its size, before allocating.
r = run(["--layers", "2000000000"])
pattern = (r"wdedup-demo: the workload's tensors need [0-9.]+ TiB of memory, more than the [0-9.]+ (MiB|GiB|TiB) this "
           r"process can have \((MemAvailable in /proc/meminfo|its cgroup's memory\.(max|limit_in_bytes), less what the cgroup uses|"
           r"this machine's physical memory); "
           r"a smaller --model or --layers fits\)")
if r.returncode != 2 or not re.fullmatch(pattern, r.stderr.strip()) or listing() != before:
    problems.append(f"--layers 2000000000: exit {r.returncode}, stderr {r.stderr.strip()!r}")

# Accepted at the bounds the refusals above stop past: as many partitions
# as layers, one layer (said "1 layer"), the largest --unrecorded-alignment,
# a new --per-method DIR of one character written with its '/'.
bounds = [
    (["--layers", "2", "--prefill-partitions", "2", "--decode-partitions", "2", "--strategy", "positional",
      "--out", ""],
     "workload: Llama-shaped 'tiny' \u2014 dim 256, 2 layers, vocab 4096, prefill 2 partitions, decode 2 partitions,"),
    (["--layers", "1", "--strategy", "oneblob", "--out", ""],
     "workload: Llama-shaped 'tiny' \u2014 dim 256, 1 layer, vocab 4096, prefill 1 partition, decode 1 partition,"),
    (["--ptd", "good.ptd", "--unrecorded-alignment", "4096", "--strategy", "oneblob", "--out", ""],
     "workload: 1 .ptd file:"),
    (["--strategy", "oneblob", "--per-method", "q/", "--out", ""], "workload: Llama-shaped 'tiny'"),
]
for args, head in bounds:
    r = run(args)
    if r.returncode != 0 or r.stderr != "" or not r.stdout.startswith(head):
        problems.append(f"{args}: exit {r.returncode}, stderr {r.stderr.strip()!r}, stdout {r.stdout[:160]!r}; "
                        f"expected exit 0, stdout starting {head!r}")
q_files = sorted(os.listdir(os.path.join(work, "q"))) if os.path.isdir(os.path.join(work, "q")) else None
if q_files != ["decode.ptd", "prefill.ptd"]:
    problems.append(f"--per-method q/: files {q_files}")

# A hard link of an input is another name: writing it renames over that name
# and leaves the input as it was.
r = run(["--ptd", "good.ptd", "--strategy", "disabled", "--out", "hard.ptd"])
input_kept = contents("good.ptd") == good_ptd
# The new name holds the new store: another file now (os.link made them one),
# with other bytes (DISABLED's blobs, not ONE_BLOB's).
replaced = not os.path.samefile(os.path.join(work, "good.ptd"), os.path.join(work, "hard.ptd")) and \
    contents("hard.ptd") != good_ptd
if r.returncode != 0 or not input_kept or not replaced:
    problems.append(f"--out hard.ptd (a hard link of the input): exit {r.returncode}, {r.stderr.strip()!r}, "
                    f"input {'kept' if input_kept else 'changed'}, hard.ptd {'replaced' if replaced else 'not replaced'}")

# ---- --strategy all writes FILE.<strategy>.ptd; an input is never an output --
r = run(["--out", "s.ptd"])
for tag in ("positional", "oneblob", "disabled"):
    if r.returncode != 0 or not os.path.exists(os.path.join(work, f"s.{tag}.ptd")):
        problems.append(f"--strategy all --out s.ptd: exit {r.returncode}, no s.{tag}.ptd: {r.stderr!r}")

# ---- the report: replaced whole, or left as it was --------------------------
# A run whose report cannot be written in full (file size limit): the old one stays.
shutil.copy(os.path.join(work, "good.json"), os.path.join(work, "r2.json"))
script = f"ulimit -f 1; exec {exe!r} --quiet --threads 1 --out '' --json r2.json"
r = subprocess.run(["bash", "-c", "trap '' XFSZ; " + script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   text=True, timeout=120, cwd=work)
kept = contents("r2.json")
if r.returncode != 1 or kept != good_json or \
        "more than this process's file size limit (1024 bytes: RLIMIT_FSIZE, ulimit -f)" not in r.stderr:
    problems.append(f"report over the size limit: exit {r.returncode}, stderr {r.stderr!r}, "
                    f"r2.json {'kept' if kept == good_json else 'changed'}")
if any(n.startswith(".r2.json.tmp") for n in os.listdir(work)):
    problems.append("report over the size limit: a temporary file was left behind")
# A run whose every store fails to be written (file size limit: the tiny
# model's stores are about 8 MB, the report a few KB): no store, so no
# report either; the old one stays.
shutil.copy(os.path.join(work, "good.json"), os.path.join(work, "r3.json"))
script = f"ulimit -f 2000; exec {exe!r} --quiet --threads 1 --out s3.ptd --json r3.json"
r = subprocess.run(["bash", "-c", "trap '' XFSZ; " + script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   text=True, timeout=120, cwd=work)
kept = contents("r3.json")
if r.returncode != 1 or kept != good_json or \
        "wdedup-demo: no report to write; --json r3.json left as it was" not in r.stderr or \
        any(n.startswith("s3.") or n.startswith(".s3.") for n in os.listdir(work)):
    problems.append(f"every store over the size limit: exit {r.returncode}, stderr {r.stderr!r}, "
                    f"r3.json {'kept' if kept == good_json else 'changed'}, files {sorted(os.listdir(work))}")
# ...and where there was no report, none is written, and it says so.
script = f"ulimit -f 2000; exec {exe!r} --quiet --threads 1 --out s4.ptd --json r4.json"
r = subprocess.run(["bash", "-c", "trap '' XFSZ; " + script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   text=True, timeout=120, cwd=work)
if r.returncode != 1 or "wdedup-demo: no report to write; --json r4.json not written" not in r.stderr or \
        any(n.startswith("r4.") or n.startswith(".r4.") or n.startswith("s4.") or n.startswith(".s4.")
            for n in os.listdir(work)):
    problems.append(f"every store over the size limit, no report before: exit {r.returncode}, stderr {r.stderr!r}, "
                    f"files {sorted(os.listdir(work))}")
# A store that does not read back (mmap of its temporary file fails, as
# where the process has run out of mappings) is not written: the old store
# and the old report stay, no temporary is left, and the message names the
# check, the file and the reason. (Nothing else makes a demo store fail its
# read-back: the library would have to write a wrong one.)
if fail_mmap:
    old_store = b"old store\n"  # (not what the run would write: good.ptd's bytes)
    with open(os.path.join(work, "rb.ptd"), "wb") as f:
        f.write(old_store)
    shutil.copy(os.path.join(work, "good.json"), os.path.join(work, "rb.json"))
    r = run(["--strategy", "oneblob", "--out", "rb.ptd", "--json", "rb.json"],
            env=dict(os.environ, LD_PRELOAD=fail_mmap, WDEDUP_TEST_FAIL_MMAP_OF=".rb.ptd.tmp-"))
    said = r.stderr.splitlines()
    want = [re.compile(re.escape("wdedup-demo: cannot write 'rb.ptd': the check before replacing it failed: read-back: "
                                 "cannot map ./.rb.ptd.tmp-") + r"[A-Za-z0-9]{6}" +
                       re.escape(": mmap failed: Cannot allocate memory (IoError)")),
            re.compile(re.escape("wdedup-demo: no report to write; --json rb.json left as it was"))]
    left = sorted(n for n in os.listdir(work) if n.startswith(".rb."))
    if r.returncode != 1 or len(said) != 2 or not all(w.fullmatch(line) for w, line in zip(want, said)) or \
            contents("rb.ptd") != old_store or contents("rb.json") != good_json or left:
        problems.append(f"a store that does not read back: exit {r.returncode}, stderr {r.stderr!r}, rb.ptd "
                        f"{'kept' if contents('rb.ptd') == old_store else 'changed'}, rb.json "
                        f"{'kept' if contents('rb.json') == good_json else 'changed'}, left {left}")

# A good run replaces it with every strategy's report.
r = run(["--out", "", "--json", "r2.json"])
with open(os.path.join(work, "r2.json")) as f:
    strategies = [x["strategy"] for x in json.load(f)]
if r.returncode != 0 or strategies != ["POSITIONAL", "ONE_BLOB", "DISABLED"]:
    problems.append(f"--json r2.json: exit {r.returncode}, strategies {strategies}")

# ---- --per-method files: refused by name before DIR is made ------------------
# Methods merged from one-method files; a method name of 250 bytes: the second
# file of that name is the method "<name>#2", whose file name (256 bytes, one
# past NAME_MAX) no file system takes. Refused before the work, not after DIR
# and prefill.ptd.
r = run(["--strategy", "oneblob", "--per-method", "pmsrc", "--out", ""])
if r.returncode != 0:
    sys.exit(f"the --per-method pmsrc run failed: {r.stderr}")
# ...and a run that could not write every --per-method file writes none: here
# the second (prefill, the larger) over the file size limit, checked before
# the first (decode) replaces its old file.
sizes = {m: os.path.getsize(os.path.join(work, "pmsrc", m + ".ptd")) for m in ("decode", "prefill")}
limit_kib = sizes["decode"] // 1024 + 1
if not sizes["decode"] <= limit_kib * 1024 < sizes["prefill"]:
    problems.append(f"--per-method over the size limit: the method files' sizes {sizes} leave no limit between them")
os.makedirs(os.path.join(work, "pmlim"))
for m in ("decode", "prefill"):
    with open(os.path.join(work, "pmlim", m + ".ptd"), "w") as f:
        f.write("old\n")
script = (f"ulimit -f {limit_kib}; exec {exe!r} --quiet --threads 1 --ptd pmsrc/decode.ptd,pmsrc/prefill.ptd "
          f"--per-method pmlim --out ''")
r = subprocess.run(["bash", "-c", "trap '' XFSZ; " + script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   text=True, timeout=120, cwd=work)
said = (f"wdedup-demo: --per-method: cannot write pmlim/prefill.ptd: the file would be {sizes['prefill']} bytes, "
        f"more than this process's file size limit ({limit_kib * 1024} bytes: RLIMIT_FSIZE, ulimit -f); "
        f"no file written")
if r.returncode != 1 or r.stderr.strip() != said or \
        [contents(f"pmlim/{m}.ptd") for m in ("decode", "prefill")] != [b"old\n", b"old\n"] or \
        sorted(os.listdir(os.path.join(work, "pmlim"))) != ["decode.ptd", "prefill.ptd"]:
    problems.append(f"--per-method, its second file over the size limit: exit {r.returncode}, "
                    f"stderr {r.stderr.strip()!r}, files {sorted(os.listdir(os.path.join(work, 'pmlim')))}")
# The same into a DIR yet to be made: refused alike, and DIR is not made.
r = subprocess.run(["bash", "-c", "trap '' XFSZ; " + script.replace("--per-method pmlim", "--per-method pmlim_new")],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, cwd=work)
if r.returncode != 1 or r.stderr.strip() != said.replace("pmlim/", "pmlim_new/") or \
        os.path.lexists(os.path.join(work, "pmlim_new")):
    problems.append(f"--per-method into a new DIR, its second file over the size limit: exit {r.returncode}, "
                    f"stderr {r.stderr.strip()!r}, DIR {'made' if os.path.lexists(os.path.join(work, 'pmlim_new')) else 'not made'}")
# A limit of exactly one byte less than the prefill file (not a whole KiB,
# as ulimit -f sets): refused alike.
def file_limit(n):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return limit
r = run(["--ptd", "pmsrc/decode.ptd,pmsrc/prefill.ptd", "--per-method", "pmlim", "--out", ""],
        preexec_fn=file_limit(sizes["prefill"] - 1))
said = (f"wdedup-demo: --per-method: cannot write pmlim/prefill.ptd: the file would be {sizes['prefill']} bytes, "
        f"more than this process's file size limit ({sizes['prefill'] - 1} bytes: RLIMIT_FSIZE, ulimit -f); "
        f"no file written")
if r.returncode != 1 or r.stderr.strip() != said or \
        [contents(f"pmlim/{m}.ptd") for m in ("decode", "prefill")] != [b"old\n", b"old\n"]:
    problems.append(f"--per-method, its second file one byte over the size limit: exit {r.returncode}, "
                    f"stderr {r.stderr.strip()!r}")
# The same where the two files do not fit in the free space together: on a
# 12 MiB tmpfs of a mount namespace of its own (root, and a kernel and
# container that allow one; else said and skipped). Twice: over two old
# files, whose space the message counts, then into the empty directory.
mnt = os.path.join(work, "pmfull")
os.makedirs(mnt)
# (What the checks read goes to the script's stdout through descriptor 3.)
demo_pm = f"{exe!r} --quiet --threads 1 --ptd pmsrc/decode.ptd,pmsrc/prefill.ptd --per-method {mnt}/o --out ''"
script = (f"exec 3>&1 >/dev/null; mount -t tmpfs -o size=12m tmpfs {mnt} || exit 99; mkdir {mnt}/o; "
          f"printf 'old\\n' > {mnt}/o/decode.ptd; printf 'old\\n' > {mnt}/o/prefill.ptd; "
          f"{demo_pm}; echo \"rc=$?\" >&3; cat {mnt}/o/decode.ptd {mnt}/o/prefill.ptd >&3; ls -A {mnt}/o >&3; "
          f"rm {mnt}/o/*; {demo_pm}; echo \"rc=$?\" >&3; ls -A {mnt}/o >&3")
if os.geteuid() == 0 and subprocess.run(["unshare", "-m", "true"], stderr=subprocess.DEVNULL).returncode == 0:
    r = subprocess.run(["unshare", "-m", "bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace", timeout=120, cwd=work)  # (a replaced file is binary)
    page = os.sysconf("SC_PAGE_SIZE")  # a tmpfs block
    need = sum((sizes[m] + page - 1) // page * page for m in ("decode", "prefill"))
    head = f"wdedup-demo: --per-method: cannot write {mnt}/o/prefill.ptd: it and the files before it need {need} bytes, and {mnt}/o has "
    said = r.stderr.splitlines()
    if r.stdout != "rc=1\nold\nold\ndecode.ptd\nprefill.ptd\nrc=1\n" or len(said) != 2 or \
            not all(line.startswith(head) for line in said) or \
            not said[0].endswith(f" free ({page} more once the files they replace are gone); no file written") or \
            not said[1].endswith(" free; no file written"):
        problems.append(f"--per-method, its two files past the free space: {r.stdout[:120]!r}, "
                        f"stderr {r.stderr.strip()!r}")
    # Room only once an old file is gone: a 20 MiB tmpfs holding an old
    # decode.ptd of 8 MiB leaves about 12 MiB free, room for either new file
    # (8.2 MB each) but not both. decode.ptd is written first, and the 8 MiB
    # its old file frees make room for prefill.ptd: written, both.
    roomy = os.path.join(work, "pmroom")
    os.makedirs(roomy)
    demo_room = demo_pm.replace(f"{mnt}/o", f"{roomy}/o")
    script = (f"exec 3>&1 >/dev/null; mount -t tmpfs -o size=20m tmpfs {roomy} || exit 99; mkdir {roomy}/o; "
              f"head -c 8388608 /dev/zero > {roomy}/o/decode.ptd; printf 'old\\n' > {roomy}/o/prefill.ptd; "
              f"{demo_room}; echo \"rc=$?\" >&3; "
              f"for m in decode prefill; do cmp -s {roomy}/o/$m.ptd pmsrc/$m.ptd && echo $m new >&3; done; "
              f"ls -A {roomy}/o >&3")
    r = subprocess.run(["unshare", "-m", "bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, errors="replace", timeout=120, cwd=work)
    # (stderr holds the merge's warning that its keys are renamed, which --out '' does not write.)
    if r.stdout != "rc=0\ndecode new\nprefill new\ndecode.ptd\nprefill.ptd\n" or "--per-method" in r.stderr:
        problems.append(f"--per-method, room once an old file is gone: {r.stdout[:120]!r}, stderr {r.stderr.strip()!r}")
else:
    print("--per-method past the free space: skipped (needs root and unshare -m)")
long_stem = "b" * 250
shutil.copy(os.path.join(work, "pmsrc", "decode.ptd"), os.path.join(work, long_stem + ".ptd"))
os.makedirs(os.path.join(work, "again"))
shutil.copy(os.path.join(work, "pmsrc", "decode.ptd"), os.path.join(work, "again", long_stem + ".ptd"))
expect(["--ptd", f"pmsrc/prefill.ptd,{long_stem}.ptd,again/{long_stem}.ptd", "--per-method", "newpm", "--out", ""], 2,
       f"wdedup-demo: cannot write --per-method newpm/{long_stem}#2.ptd: File name too long")
# A file "...ptd" is the method "..", which, as "." and a name holding '/',
# the demo does not take for a file's name in DIR: refused once the import
# names it, before DIR is made.
shutil.copy(os.path.join(work, "pmsrc", "decode.ptd"), os.path.join(work, "...ptd"))
expect(["--ptd", "...ptd", "--per-method", "pmdd", "--out", ""], 2,
       "wdedup-demo: --per-method: method '..' is not usable as a file name in pmdd")
if os.path.lexists(os.path.join(work, "pmdd")):
    problems.append("--per-method pmdd with a method '..': pmdd was created")
# One file given twice, under any two names, is refused: two methods of the
# same bytes, whose weights the report would count as saved.
os.link(os.path.join(work, long_stem + ".ptd"), os.path.join(work, "hard2.ptd"))
for names in ([f"{long_stem}.ptd", f"./{long_stem}.ptd"], [f"{long_stem}.ptd", "hard2.ptd"]):
    expect(["--ptd", ",".join(["pmsrc/prefill.ptd"] + names), "--out", ""], 2,
           f"wdedup-demo: --ptd names one file twice ({names[0]} and {names[1]}): give each file once")
expect(["--ptd", "pmsrc/prefill.ptd", "--ptd", f"{long_stem}.ptd", "--ptd", f"{long_stem}.ptd", "--out", ""], 2,
       f"wdedup-demo: --ptd names one file twice ({long_stem}.ptd and {long_stem}.ptd): give each file once")
# An empty item is refused, not dropped (a name may be lost).
for value in ("pmsrc/prefill.ptd,,pmsrc/decode.ptd", "pmsrc/prefill.ptd,", ",pmsrc/prefill.ptd"):
    expect(["--ptd", value, "--out", ""], 2, f"wdedup-demo: --ptd {value} has an empty item (a stray comma)")
expect(["--ptd", "", "--out", ""], 2, "wdedup-demo: --ptd needs at least one file")
# Files that cannot be looked at are not "one file twice": the import names
# the first one's error.
expect(["--ptd", "missing1.ptd,missing2.ptd", "--out", ""], 2,
       "wdedup-demo: missing1.ptd: open failed: No such file or directory (IoError)")
# An option that needs a value, given last, has none; an unknown option is
# refused with the usage, not ignored.
for flag in ("--out", "--json", "--ptd", "--threads"):
    expect([flag], 2, f"wdedup-demo: {flag} needs a value")
before_unknown = listing()
r = run(["--bogus", "--out", "unknown.ptd"])
if r.returncode != 2 or not r.stderr.startswith("wdedup-demo: unknown option '--bogus'\nusage: wdedup-demo "):
    problems.append(f"--bogus: exit {r.returncode}, stderr {r.stderr[:200]!r}")
if listing() != before_unknown:
    problems.append(f"--bogus: left {sorted(listing() - before_unknown)} behind")
# An argument that is no option (a .ptd file without --ptd) is said to be
# one, not an unknown option; nothing is written either.
r = run(["good.ptd", "--out", "unknown.ptd"])
if r.returncode != 2 or not r.stderr.startswith("wdedup-demo: unexpected argument 'good.ptd': the demo takes options "
                                                "only (.ptd files to merge are given with --ptd)\nusage: wdedup-demo "):
    problems.append(f"good.ptd as an argument: exit {r.returncode}, stderr {r.stderr[:200]!r}")
if listing() != before_unknown:
    problems.append(f"good.ptd as an argument: left {sorted(listing() - before_unknown)} behind")
if os.path.lexists(os.path.join(work, "newpm")):
    problems.append("--per-method newpm with a method file name too long: newpm was created")
# A path too long as a whole (each name short): the writer's temporary beside
# deep/npm/prefill.ptd (4,090 bytes) would be 4,102, past PATH_MAX.
# (Made and looked at a directory at a time: the absolute path is too long.)
path_max = os.pathconf(work, "PC_PATH_MAX")
components = ["d" * 250] * 16 + ["e" * (path_max - 6 - 16 * 251 - len("/npm/prefill.ptd"))]
deep = "/".join(components)
fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
for c in components:
    os.mkdir(c, dir_fd=fd)
    fd, parent = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
    os.close(parent)
expect(["--strategy", "oneblob", "--per-method", deep + "/npm", "--out", ""], 2,
       f"wdedup-demo: cannot write --per-method {deep}/npm/prefill.ptd: File name too long")
if os.listdir(fd):
    problems.append("--per-method DIR whose files' paths are too long: DIR was created")
os.close(fd)
shutil.rmtree(os.path.join(work, components[0]))
# An existing DIR holding a directory, or a link to nothing, named "probe" (or
# anything else no method writes) is usable: it is no method's file.
os.makedirs(os.path.join(work, "pmx", "probe"))
os.makedirs(os.path.join(work, "pmy"))
os.symlink("nowhere", os.path.join(work, "pmy", "probe"))
for d in ("pmx", "pmy"):
    r = run(["--strategy", "oneblob", "--per-method", d, "--out", ""])
    written = all(os.path.isfile(os.path.join(work, d, m + ".ptd")) for m in ("prefill", "decode"))
    if r.returncode != 0 or r.stderr != "" or not written:
        problems.append(f"--per-method {d} (holding 'probe'): exit {r.returncode}, stderr {r.stderr.strip()!r}, "
                        f"method files {'written' if written else 'missing'}")

# ---- --ptd values add up; '' is no output ------------------------------------
# Repeated --ptd flags are one list: the merge is the one of the commas.
r1 = run(["--ptd", "pmsrc/prefill.ptd,pmsrc/decode.ptd", "--strategy", "oneblob", "--out", "m1.ptd"])
r2 = run(["--ptd", "pmsrc/prefill.ptd", "--ptd", "pmsrc/decode.ptd", "--strategy", "oneblob", "--out", "m2.ptd"])
if r1.returncode != 0 or r2.returncode != 0 or contents("m1.ptd") != contents("m2.ptd") or \
        "workload: 2 .ptd files:" not in r2.stdout:
    problems.append(f"--ptd A --ptd B is not --ptd A,B: exit {r1.returncode}, {r2.returncode}, {r2.stderr!r}")
# --json '' and --per-method '' write nothing (as --out '').
empty = os.path.join(work, "empty")
os.makedirs(empty)
r = subprocess.run([exe, "--quiet", "--threads", "1", "--strategy", "oneblob", "--out", "", "--json", "",
                    "--per-method", ""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                   cwd=empty)
if r.returncode != 0 or os.listdir(empty):
    problems.append(f"--out '' --json '' --per-method '': exit {r.returncode}, {r.stderr!r}, wrote {os.listdir(empty)}")

# Without --out, the binary run on its own writes wdedup-demo.<strategy>.ptd
# in the current directory (one --strategy: wdedup-demo.ptd), as the manual
# and --help say; every run passes --out, so nothing else looks at the
# default. Each file 8,176,896 bytes, as the README says of the demo's three.
for strategy, names in (("all", ["wdedup-demo.disabled.ptd", "wdedup-demo.oneblob.ptd", "wdedup-demo.positional.ptd"]),
                        ("oneblob", ["wdedup-demo.ptd"])):
    here = os.path.join(work, "default-out-" + strategy)
    os.makedirs(here)
    r = subprocess.run([exe, "--quiet", "--threads", "1", "--strategy", strategy], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120, cwd=here)
    wrote = {n: os.path.getsize(os.path.join(here, n)) for n in sorted(os.listdir(here))}
    if r.returncode != 0 or wrote != {n: 8176896 for n in names}:
        problems.append(f"--strategy {strategy} without --out: exit {r.returncode}, {r.stderr!r}, wrote {wrote}; "
                        f"expected {names}, 8176896 bytes each")

# scripts/demo.sh passes its own --out before the user's arguments: of a flag
# given twice the last counts, so the user's --out is where the store goes.
here = os.path.join(work, "out-twice")
os.makedirs(here)
r = subprocess.run([exe, "--quiet", "--threads", "1", "--strategy", "oneblob", "--out", "script.ptd", "--out",
                    "mine.ptd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, cwd=here)
if r.returncode != 0 or sorted(os.listdir(here)) != ["mine.ptd"]:
    problems.append(f"--out script.ptd --out mine.ptd: exit {r.returncode}, {r.stderr!r}, wrote {sorted(os.listdir(here))}; "
                    f"expected ['mine.ptd']")

# ---- what a run prints: --quiet leaves out the report tables, and only them --
# Every other run here is --quiet and reads no stdout but "workload:"; the
# seconds are the one figure that varies.
printed = {}
for quiet in (["--quiet"], []):
    here = os.path.join(work, "printed" + "".join(quiet))
    os.makedirs(here)
    r = subprocess.run([exe] + quiet + ["--threads", "1", "--strategy", "oneblob", "--out", "q.ptd"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, cwd=here)
    printed[bool(quiet)] = re.sub(r", [0-9]+\.[0-9]{3} s\n", ", S s\n", r.stdout) if r.returncode == 0 else r.stderr
want = ("workload: Llama-shaped 'tiny' \u2014 dim 256, 4 layers, vocab 4096, prefill 1 partition, decode 1 partition, "
        "15.65 MiB in memory\n\n"
        "ONE_BLOB   in 20604416 B, stored 8164352 B, saved 12440064 B (60.4%), shared across blobs 0 B, S s\n"
        "  wrote q.ptd: 8176896 bytes\n"
        "  read back q.ptd with the runtime reader: 49 keys, 2 functions, 96 tensors verified\n")
if printed[True] != want:
    problems.append(f"--quiet printed {printed[True]!r}; expected {want!r}")
# Without it: the same lines, the report's table before the summary line and
# a blank line after the strategy's lines.
loud = printed[False]
head, summary = "wdedup report \u2014 strategy ONE_BLOB, 1 thread\n", "ONE_BLOB   in "
table = loud[loud.find(head):loud.find(summary)] if head in loud and summary in loud else ""
if not table or loud.replace(table, "", 1) != want + "\n" or \
        "\n  bytes stored         8164352  (7.79 MiB)\n" not in table or "\n  per blob " not in table:
    problems.append(f"without --quiet printed {loud!r}; expected the --quiet lines with the report table")
# Positional skipped (--strategy all, methods of unequal partition counts): said
# where its lines would be, first, not after the other strategies' reports
# (where it read as a note on the last); without --quiet a block of its own,
# a blank line after it as after each strategy's.
workload2 = ("workload: Llama-shaped 'tiny' \u2014 dim 256, 4 layers, vocab 4096, prefill 2 partitions, "
             "decode 1 partition, 15.65 MiB in memory\n\n")
skipped = "(Positional skipped: the methods have different partition counts)\n"
for quiet in (["--quiet"], []):
    r = subprocess.run([exe] + quiet + ["--threads", "1", "--prefill-partitions", "2", "--out", ""],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, cwd=work)
    out = re.sub(r", [0-9]+\.[0-9]{3} s\n", ", S s\n", r.stdout)
    if quiet:
        want = (workload2 + skipped +
                "ONE_BLOB   in 20604416 B, stored 8164352 B, saved 12440064 B (60.4%), shared across blobs 0 B, S s\n"
                "DISABLED   in 20604416 B, stored 8164352 B, saved 12440064 B (60.4%), shared across blobs 10260992 B, "
                "S s\n")
        good = out == want
    else:
        want = workload2 + skipped + "\nwdedup report \u2014 strategy ONE_BLOB, 1 thread\n"
        good = out.startswith(want) and out.count(skipped) == 1 and out.endswith("S s\n\n")
    if r.returncode != 0 or r.stderr or not good:
        problems.append(f"Positional skipped{' (--quiet)' if quiet else ''}: exit {r.returncode}, stderr {r.stderr!r}, "
                        f"printed {out!r}; expected {want!r}{'' if quiet else '...'}")

# ---- names from files are printed escaped -----------------------------------
# A .ptd file's name becomes its method's name, which reaches the terminal:
# an escape sequence in it is printed as \x1b, not sent.
shutil.copy(os.path.join(work, "pmsrc", "decode.ptd"), os.path.join(work, "ev\x1b[31mil.ptd"))
r = run(["--ptd", "ev\x1b[31mil.ptd", "--strategy", "oneblob", "--out", ""])
if r.returncode != 0 or "\x1b" in r.stdout or \
        "  ev\\x1b[31mil.ptd: method ev\\x1b[31mil, 1 partition, " not in r.stdout:
    problems.append(f"--ptd with an escape sequence in its name: exit {r.returncode}, stdout {r.stdout[:300]!r}")
# ...and so is the path where a message names it: a file that does not
# import, one given twice, a file whose keys the merge does not keep (each
# sent the escape sequence to the terminal: a review found it).
with open(os.path.join(work, "ev\x1b[31mil.bad.ptd"), "wb") as f:
    f.write(b"\0" * 64)
expect(["--ptd", "ev\x1b[31mil.bad.ptd", "--out", ""], 2,
       "wdedup-demo: ev\\x1b[31mil.bad.ptd (64 bytes, not a .ptd file): flatbuffer identifier is not FT01 "
       "(MalformedHeader at 4)")
expect(["--ptd", "ev\x1b[31mil.ptd,./ev\x1b[31mil.ptd", "--out", ""], 2,
       "wdedup-demo: --ptd names one file twice (ev\\x1b[31mil.ptd and ./ev\\x1b[31mil.ptd): give each file once")
r = run(["--ptd", "pmsrc/prefill.ptd,ev\x1b[31mil.ptd", "--strategy", "oneblob", "--out", ""])
if r.returncode != 0 or "\x1b" in r.stderr or \
        "; ev\\x1b[31mil.ptd: check_keys_kept: 1 of the file's " not in r.stderr:
    problems.append(f"--ptd merge warning for a file with an escape sequence in its name: exit {r.returncode}, "
                    f"stderr {r.stderr[:600]!r}")
# Its --per-method file is named after it, on the line that reports the
# write and in a refusal.
r = run(["--ptd", "ev\x1b[31mil.ptd", "--strategy", "oneblob", "--out", "", "--per-method", "pmev"])
if r.returncode != 0 or "\x1b" in r.stdout or "  method alone: wrote pmev/ev\\x1b[31mil.ptd: " not in r.stdout:
    problems.append(f"--per-method of a method with an escape sequence in its name: exit {r.returncode}, "
                    f"stdout {r.stdout[-300:]!r}")
os.symlink("nowhere", os.path.join(work, "pmev", "ev\x1b[31mil.ptd.link"))
os.remove(os.path.join(work, "pmev", "ev\x1b[31mil.ptd"))
os.rename(os.path.join(work, "pmev", "ev\x1b[31mil.ptd.link"), os.path.join(work, "pmev", "ev\x1b[31mil.ptd"))
r = run(["--ptd", "ev\x1b[31mil.ptd", "--strategy", "oneblob", "--out", "", "--per-method", "pmev"])
if r.returncode != 2 or "\x1b" in r.stderr or \
        "cannot write --per-method pmev/ev\\x1b[31mil.ptd: a symbolic link to nowhere" not in r.stderr:
    problems.append(f"--per-method refused for a method with an escape sequence in its name: exit {r.returncode}, "
                    f"stderr {r.stderr!r}")
os.remove(os.path.join(work, "pmev", "ev\x1b[31mil.ptd"))
r = run(["--ptd", "ev\x1b[31mil.ptd", "--strategy", "oneblob", "--out", "", "--per-method", "pmev",
         "--json", "pmev/ev\x1b[31mil.ptd"])
want = ("wdedup-demo: --json pmev/ev\\x1b[31mil.ptd and --per-method pmev/ev\\x1b[31mil.ptd name the same file: "
        "one output would replace the other\n")
if r.returncode != 2 or r.stderr != want:
    problems.append(f"--json and --per-method naming one file, a method name with an escape sequence: "
                    f"exit {r.returncode}, stderr {r.stderr!r}")

# ---- an output the rename could not replace: refused before the work --------
# An immutable file (chattr +i): a file can be made beside it, but the
# writer's rename over it fails. Found only then, the demo did all its work
# and lost its report (a review); now it is refused first, exit 2. Needs
# root and a file system that keeps the flag (x86-64 and arm64 ioctl numbers).
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IMMUTABLE_FL, FS_APPEND_FL = 0x80086601, 0x40086602, 0x10, 0x20


def set_inode_flag(path, flag, on):
    import fcntl
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        buf = bytearray(8)
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf)
        flags = int.from_bytes(buf[:4], sys.byteorder)
        flags = flags | flag if on else flags & ~flag
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags.to_bytes(4, sys.byteorder) + bytes(4))
    finally:
        os.close(fd)


immutable = {"imm.json": b"old report", "imm.ptd": b"old store", os.path.join("pmi", "decode.ptd"): b"old decode"}
os.makedirs(os.path.join(work, "pmi"))
made = []
try:
    for name, data in immutable.items():
        with open(os.path.join(work, name), "wb") as f:
            f.write(data)
        set_inode_flag(os.path.join(work, name), FS_IMMUTABLE_FL, True)
        made.append(name)
except OSError as e:
    print(f"immutable outputs not tried (not root, or no chattr flags here: {e})")
if len(made) == len(immutable):
    why = "it is immutable (chattr +i), so it cannot be replaced"
    for args, want in ((["--json", "imm.json"], f"cannot write --json imm.json: {why}"),
                       (["--strategy", "oneblob", "--out", "imm.ptd"], f"cannot write --out imm.ptd: {why}"),
                       (["--out", "", "--per-method", "pmi"], f"cannot write --per-method pmi/decode.ptd: {why}")):
        r = expect(args, 2, "wdedup-demo: " + want)
        if "workload:" in r.stdout:
            problems.append(f"{args}: not refused before generating: {r.stdout[:120]!r}")
    for name, data in immutable.items():
        if contents(name) != data:
            problems.append(f"{name} changed")
    if sorted(os.listdir(os.path.join(work, "pmi"))) != ["decode.ptd"]:
        problems.append(f"pmi holds {sorted(os.listdir(os.path.join(work, 'pmi')))}")
for name in made:
    set_inode_flag(os.path.join(work, name), FS_IMMUTABLE_FL, False)

# An append-only directory (chattr +a): a file can be made in it, none renamed
# into place. It is named as given, as the writer's own message names it,
# whether the output is there or not: an existing file's directory was named
# by its real path ('/.../demo-args/apd'), a new one's as given ('apd').
apd = os.path.join(work, "apd")
os.makedirs(apd)
kept = {"old.json": b"old report", "old.ptd": b"old store", "prefill.ptd": b"old prefill"}
for name, data in kept.items():
    with open(os.path.join(apd, name), "wb") as f:
        f.write(data)
try:
    set_inode_flag(apd, FS_APPEND_FL, True)
    append_only = True
except OSError as e:
    append_only = False
    print(f"an append-only directory not tried (not root, or no chattr flags here: {e})")
if append_only:
    why = "its directory 'apd' is append-only (chattr +a): no file written there can be renamed into place"
    try:
        for args, want in ((["--json", "apd/old.json"], f"cannot write --json apd/old.json: {why}"),
                           (["--json", "apd/new.json"], f"cannot write --json apd/new.json: {why}"),
                           (["--strategy", "oneblob", "--out", "apd/old.ptd"], f"cannot write --out apd/old.ptd: {why}"),
                           (["--strategy", "oneblob", "--out", "apd/new.ptd"], f"cannot write --out apd/new.ptd: {why}"),
                           (["--out", "", "--per-method", "apd"], f"cannot write --per-method apd/prefill.ptd: {why}")):
            expect(args, 2, "wdedup-demo: " + want)
        if sorted(os.listdir(apd)) != sorted(kept) or any(contents(os.path.join("apd", n)) != d for n, d in kept.items()):
            problems.append(f"an append-only directory: apd holds {sorted(os.listdir(apd))}, or a file changed")
    finally:
        set_inode_flag(apd, FS_APPEND_FL, False)

# ---- standard output lost: a failed run --------------------------------------
# The run's output, and --help's: both lost on a full device, exit 1.
if os.path.exists("/dev/full"):
    for args in (["--threads", "1", "--out", ""], ["--help"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([exe] + args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        if r.returncode != 1 or \
                r.stderr != "wdedup-demo: writing to standard output failed: No space left on device\n":
            problems.append(f"{args}, stdout on /dev/full: exit {r.returncode}, stderr {r.stderr!r}")
r = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
if r.returncode != 0 or not r.stdout.startswith("usage: wdedup-demo") or r.stderr:
    problems.append(f"--help: exit {r.returncode}, stderr {r.stderr!r}")
# The manual (tools/README.md, beside this file) names every flag --help
# lists, and no flag --help does not.
helped = set(re.findall(r"^  (?:-h, )?(--[a-z][a-z-]*)", r.stdout, re.M))
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md"), encoding="utf-8") as f:
    documented = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", f.read()))
if len(helped) < 16 or helped != documented:
    problems.append(f"tools/README.md and --help: flags only in --help {sorted(helped - documented)}, "
                    f"only in the README {sorted(documented - helped)}")

if contents("good.ptd") != good_ptd:
    problems.append("good.ptd changed")

for p in problems:
    print("FAIL:", p)
print(f"{len(refusals)} refusals checked; {len(problems)} {'problem' if len(problems) == 1 else 'problems'}")
sys.exit(1 if problems else 0)
