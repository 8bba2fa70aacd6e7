#!/usr/bin/env python3
"""CI check of the harness's command line (wdedup-bench, and the example
benchmark_own_program): a mistake is refused before anything runs, with exit
code 2 and one line naming the flag and its value, and the settings a run
records are the ones it used. Nothing is timed; every run here is tiny."""
import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios

from bench_table import table_problems

exe, outdir, example = sys.argv[1], sys.argv[2], sys.argv[3]
# interrupt_json_write's shared module (Linux), for a Ctrl-C inside the JSON's write.
interrupt_json_write = sys.argv[4] if len(sys.argv) > 4 else None
# wrong_first_digest's shared module (Linux), for a measurement whose answers disagree.
wrong_first_digest = sys.argv[5] if len(sys.argv) > 5 else None
# fail_mmap's shared module (Linux), for stores that cannot be mapped.
fail_mmap = sys.argv[6] if len(sys.argv) > 6 else None
json_path = os.path.join(outdir, "bench-args.json")
problems = []


def run(cmd, timeout=60, env=None):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)


def json_doc(path, ran=True):
    """The JSON a run wrote at `path`; {} where it did not run through
    (`ran` false) or wrote none."""
    if not ran or not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


# ---- refused: exit 2, and exactly this on stderr ------------------------------
# Sizes as the harness words them (detail::human_bytes).
def human_bytes(n):
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    v, u = float(n), 0
    while v >= 1024 and u + 1 < len(units):
        v /= 1024
        u += 1
    return f"{int(n)} B" if u == 0 else f"{v:.2f} {units[u]}"


def parse_human_bytes(text):
    number, unit = text.split()
    return float(number) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].index(unit)


def cgroup_limit(v1):
    """The least room this process's cgroup and its ancestors leave, in cgroup
    v1's memory hierarchy (memory.limit_in_bytes less memory.usage_in_bytes,
    memory.stat's total_inactive_file not counted as used) or v2's (memory.max
    less memory.current, inactive_file not counted), its directory found
    through /proc/self/mountinfo as bench::memory_limit finds it; None where
    no level sets a limit."""
    try:
        with open("/proc/self/cgroup", errors="surrogateescape") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        with open("/proc/self/mountinfo", errors="surrogateescape") as f:
            mounts = [line.rstrip("\n").split(" ") for line in f]
    except OSError:
        return None
    path = next((p for hid, controllers, p in (ln for ln in lines if len(ln) == 3)
                 if ("memory" in controllers.split(",") if v1 else hid == "0" and controllers == "")), None)
    if path is None:
        return None

    def unescape(field):  # (mountinfo writes a space as "\\040")
        return re.sub(r"\\([0-3][0-7][0-7])", lambda m: chr(int(m.group(1), 8)), field)

    def number(file):
        try:
            with open(file) as f:
                text = f.read().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() and len(text) < 20 else None

    def stat_field(file, name):
        try:
            with open(file) as f:
                for line in f:
                    key, _, value = line.rstrip("\n").partition(" ")
                    if key == name:
                        return int(value) if value.isdigit() and len(value) < 20 else 0
        except OSError:
            pass
        return 0

    names = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file") if v1 else \
        ("memory.max", "memory.current", "inactive_file")
    for fields in mounts:
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 4:
            continue
        fstype, options = fields[dash + 1], fields[dash + 3].split(",")
        if fstype != ("cgroup" if v1 else "cgroup2") or (v1 and "memory" not in options):
            continue
        root, point = unescape(fields[3]).rstrip("/"), unescape(fields[4])
        if path != root and not path.startswith(root + "/"):
            continue
        parts = [p for p in path[len(root):].split("/") if p]
        if ".." in parts:  # (outside the namespace's root: the mount does not show it)
            continue
        rooms = []
        for k in range(len(parts), -1, -1):
            here = os.path.join(point, *parts[:k])
            if v1 and k < len(parts) and number(os.path.join(here, "memory.use_hierarchy")) == 0:
                continue  # (an ancestor not charged for its children)
            limit = number(os.path.join(here, names[0]))
            if limit is None or limit >= 2 ** 62:  # (v1's "no limit" is 2^63 less a page)
                continue
            used = max(0, (number(os.path.join(here, names[1])) or 0) -
                       stat_field(os.path.join(here, "memory.stat"), names[2]))
            rooms.append(max(0, limit - used))
        return min(rooms) if rooms else None
    return None


def memory_limit():
    """What this process can be given, as the harness finds it (bench::memory_limit):
    the smaller of MemAvailable and the least room the memory limits of its cgroup
    and the cgroup's ancestors leave (v2's memory.max, v1's memory.limit_in_bytes,
    less what the cgroup uses), else physical memory. (bytes, how a refusal names
    it)."""
    best = (os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "this machine's physical memory")
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:") and int(line.split()[1]) * 1024 <= best[0]:
                    best = (int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo")
    except OSError:
        pass
    for v1, source in ((False, "its cgroup's memory.max, less what the cgroup uses"),
                       (True, "its cgroup's memory.limit_in_bytes, less what the cgroup uses")):
        limit = cgroup_limit(v1)
        if limit is not None and limit < best[0]:
            best = (limit, source)
    return best


LIMIT_BYTES, LIMIT_SOURCE = memory_limit()
# A 32-bit harness (ELF class 1: armv7, i386) refuses a size past its
# address space before it compares one with what it can have.
with open(exe, "rb") as f:
    IS_32_BIT = f.read(5)[4:5] == b"\x01"
# The end of a refusal of a size past that (a pattern: MemAvailable moves
# from one moment to the next; its figure is checked by limit_near).
PAST_MEMORY = re.escape("more than a 32-bit program addresses") if IS_32_BIT else \
    r"more than the (?P<limit>[0-9.]+ [KMGT]iB) this process can have \(" + re.escape(LIMIT_SOURCE) + r"\)"


def limit_near(stated, before):
    """None if `stated` bytes is what the program could have found: within a
    quarter of the limit as this check finds it just before the program ran
    (`before`) and just after, or between the two (other processes, the
    suite's other tests among them, move MemAvailable by gigabytes while the
    program runs); else what is wrong."""
    after = memory_limit()[0]
    low, high = min(before, after), max(before, after)
    if low * 3 / 4 <= stated <= high * 5 / 4:
        return None
    return (f"its limit {human_bytes(stated)} is not near {human_bytes(before)} (before it ran) or "
            f"{human_bytes(after)} (after) ({LIMIT_SOURCE})")


def past_memory_problem(text, before):
    """What is wrong with a refusal's stated limit, or None (`before`: the
    limit as memory_limit() found it just before the refusing run)."""
    m = re.search(PAST_MEMORY + "$", text)
    if m is None:
        return f"it does not end {PAST_MEMORY!r}"
    return None if IS_32_BIT else limit_near(parse_human_bytes(m.group("limit")), before)


not_a_dir = os.path.join(outdir, "bench-args-not-a-dir")
with open(not_a_dir, "w"):
    pass
missing_dir = os.path.join(outdir, "bench-args-missing", "deeper")
new_dir = os.path.join(outdir, "bench-args-new") + "/"
dangling = os.path.join(outdir, "bench-args-dangling.json")
if os.path.lexists(dangling):
    os.remove(dangling)
os.symlink("nowhere.json", dangling)
# A link another user planted in a sticky, world-writable directory (as
# /tmp could hold): the writer does not follow it, and the reason given is
# the writer's, not "Permission denied" (root only: it takes lchown).
planted = None
if os.geteuid() == 0:
    sticky = os.path.join(outdir, "bench-args-sticky")
    shutil.rmtree(sticky, ignore_errors=True)
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    planted = os.path.join(sticky, "r.json")
    os.symlink("nowhere.json", planted)
    os.lchown(planted, 12345, 12345)
# kDedupBytesPerTensor (harness.hpp): what the pre-run check counts for each
# tensor of the dedup workloads beyond its bytes.
DEDUP_BYTES_PER_TENSOR = 1536
refusals = [
    (["--threads", "1,5000"], "--threads 5000 is more than wdedup::DedupOptions::kMaxThreads (1024)"),
    (["--threads", "1025"], "--threads 1025 is more than wdedup::DedupOptions::kMaxThreads (1024)"),
    (["--threads", " -1"], "--threads needs positive integers separated by commas, got ' -1'"),
    (["--keys", " -1"], "--keys needs positive integers separated by commas, got ' -1'"),
    (["--keys", "+16"], "--keys needs positive integers separated by commas, got '+16'"),
    (["--reps", " 3"], "--reps needs a positive integer, got ' 3'"),
    # A negative number is refused as a number, not called an option.
    (["--reps", "-1"], "--reps needs a positive integer, got '-1'"),
    (["--threads", "-2"], "--threads needs positive integers separated by commas, got '-2'"),
    (["--reps", "-x"], "--reps needs a value, got the option '-x' (a path starting with '-' is written ./-x)"),
    # A '-' alone is no negative number: an option, as for a path flag.
    (["--reps", "-"], "--reps needs a value, got the option '-' (a path starting with '-' is written ./-)"),
    (["--json", ""], "--json needs a file, got ''"),
    (["--keys", "16,256,16"], "--keys 16,256,16 gives 16 twice"),
    (["--threads", "2,1,2"], "--threads 2,1,2 gives 2 twice"),
    (["--only", "dedup,dedup"], "--only dedup,dedup gives dedup twice"),
    (["--only", "write", "--ptd", "nope.ptd"], "--ptd gives files, but --only does not run dedup"),
    (["--once", "--only", "runtime"], "--once runs only dedup, but --only does not run dedup"),
    (["--only", "alloc"], "unknown group 'alloc' (dedup, runtime, write, build; the alloc rows are runtime's)"),
    (["--workloads", "adversarial,llama-1+1,adversarial"],
     "--workloads adversarial,llama-1+1,adversarial gives adversarial twice"),
    (["--workloads", "llama"],
     "unknown workload 'llama' (llama-1+1, llama-3+3, llama-3+2, small-tensors, adversarial, same-names, ptd)"),
    (["--references", "sha1"], "unknown reference 'sha1' (sha256, fp-sha256)"),
    (["--references", "fp-sha256,sha256,fp-sha256"], "--references fp-sha256,sha256,fp-sha256 gives fp-sha256 twice"),
    (["--references", ""], "--references needs at least one item, got ''"),
    (["--keys", "4294967296"], "--keys 4294967296 is more than a .ptd file holds (4294967295)"),
    (["--only", "runtime", "--model", "bogus"], "unknown --model 'bogus' (tiny, small or 1b)"),
    (["--only", "runtime", "--dim", "7", "--heads", "32"], "--dim 7 is not divisible by --heads 32"),
    (["--heads", "3"], "--dim 256 (from --model tiny) is not divisible by --heads 3"),
    (["--kv-heads", "3"], "--heads 8 (from --model tiny) is not divisible by --kv-heads 3"),
    (["--model", "small", "--kv-heads", "5"], "--heads 16 (from --model small) is not divisible by --kv-heads 5"),
    # --full is --model 1b (no other test runs it: 4.96 GB), after --quick's tiny too.
    (["--full", "--kv-heads", "5"], "--heads 32 (from --model 1b) is not divisible by --kv-heads 5"),
    (["--dim", "48", "--heads", "16", "--kv-heads", "4"],
     "--dim 48 / --heads 16 gives a head dimension of 3: it must be even (rotary embeddings turn pairs of elements)"),
    (["--layers", "2"], "workloads llama-3+3 and llama-3+2 need at least 3 layers (a partition holds whole layers), "
                        "got --layers 2; leave them out with --workloads"),
    (["--once", "--layers", "2", "--workloads", "llama-3+2"],
     "workload llama-3+2 needs at least 3 layers (a partition holds whole layers), got --layers 2; "
     "leave it out with --workloads"),
    (["--only", "dedup", "--workloads", "llama-1+1", "--vocab-size", "2147483648"],
     "Llama settings for llama-1+1: --vocab-size 2147483648 is more than 2147483647 (a dimension is an int32)"),
    # The generator's field names as the flags that set them, whole words
    # (hidden_dim is --hidden-dim, not hidden_--dim).
    (["--only", "dedup", "--workloads", "llama-1+1", "--max-seq-len", "4294967295"],
     "Llama settings for llama-1+1: --max-seq-len 4294967295 is more than 2147483647 (a dimension is an int32)"),
    (["--only", "dedup", "--workloads", "llama-1+1", "--hidden-dim", "2147483648"],
     "Llama settings for llama-1+1: --hidden-dim 2147483648 is more than 2147483647 (a dimension is an int32)"),
    (["--tmpdir", ""], "--tmpdir needs a directory, got ''"),
    (["--input-pages", "giant"], "--input-pages needs default, huge or small, got 'giant'"),
    (["--tmpdir", missing_dir], f"cannot create files in --tmpdir {missing_dir}: No such file or directory"),
    (["--tmpdir", not_a_dir], f"cannot create files in --tmpdir {not_a_dir}: Not a directory"),
    # Why --json cannot be written, in the writer's words (not "Invalid
    # argument", "Is a directory" or "No such file or directory").
    (["--json", "/dev/null"], "cannot write --json /dev/null: it exists and is not a regular file but a character "
                              "device (a directory, device, FIFO or socket is never replaced)"),
    (["--json", new_dir], f"cannot write --json {new_dir}: the name ends in '/', which names a directory, not a file"),
    (["--json", dangling], f"cannot write --json {dangling}: a symbolic link to nowhere.json, which does not exist"),
    *([(["--json", planted], f"cannot write --json {planted}: it is a symbolic link owned by another user (uid 12345) "
                              "in a sticky, world-writable directory: not followed, as the kernel's protected_symlinks "
                              "would not follow it")] if planted else []),
    (["--json", "-5"], "--json needs a value, got the option '-5' (a path starting with '-' is written ./-5)"),
    # A number too large for its flag, named against the flag's own limit.
    (["--reps", "99999999999"], "--reps 99999999999 is more than 4294967295"),
    (["--layers", "4294967296"], "--layers 4294967296 is more than 2147483647 (a dimension is an int32)"),
    (["--max-seq-len", "99999999999999999999"],
     "--max-seq-len 99999999999999999999 is more than 2147483647 (a dimension is an int32)"),
    (["--lookups", "99999999999999999999"], "--lookups 99999999999999999999 is more than 18446744073709551615"),
    (["--threads", "1,99999999999999999999"],
     "--threads 99999999999999999999 is more than wdedup::DedupOptions::kMaxThreads (1024)"),
    (["--keys", "99999999999999999999,99999999999999999998"],
     "--keys 99999999999999999999 is more than a .ptd file holds (4294967295)"),
    (["--adversarial", "1,99999999999999999999"], "--adversarial asks for more than 2^64 bytes of memory"),
    # An option is never a value (this wrote the results to a file named --quick).
    (["--json", "--quick"], "--json needs a value, got the option '--quick' (a path starting with '-' is written "
                            "./--quick)"),
    (["--json", "-h"], "--json needs a value, got the option '-h' (a path starting with '-' is written ./-h)"),
    # A stray comma is refused by every list flag alike.
    (["--only", "dedup,"], "--only dedup, has an empty item (a stray comma)"),
    (["--workloads", "llama-1+1,,adversarial"], "--workloads llama-1+1,,adversarial has an empty item (a stray comma)"),
    (["--ptd", "a.ptd,"], "--ptd a.ptd, has an empty item (a stray comma)"),
    (["--threads", "1,2,"], "--threads needs positive integers separated by commas, got '1,2,'"),
    (["--adversarial", "10,100"], "--adversarial 10,100: BYTES must be at least 4096 (two shared KiB and more)"),
    # Two numbers, no more: a third was taken as nothing.
    (["--adversarial", "256,65536,1"], "--adversarial needs COUNT,BYTES"),
    # Workload 'ptd' and --ptd come together: either alone is refused, not
    # run as a workload of no files or files no workload times.
    (["--workloads", "ptd"], "workload 'ptd' needs --ptd FILE[,FILE...]"),
    (["--workloads", "adversarial", "--ptd", "nope.ptd"], "--ptd gives files, but --workloads does not name 'ptd'"),
    # Sizes whose product wraps (this allocated 4 KiB and wrote past it) or
    # that no machine holds: refused before anything runs.
    (["--only", "dedup", "--workloads", "small-tensors", "--small-tensors", "4503599627370498"],
     "--small-tensors asks for more than 2^64 bytes of memory"),
    # Half are copies of the other half: an odd count dropped the
    # "comparisons alone" row without a word.
    (["--only", "dedup", "--workloads", "small-tensors", "--small-tensors", "10001"],
     "--small-tensors 10001: N must be even (half the tensors are copies of the other half)"),
    (["--only", "dedup", "--workloads", "adversarial", "--adversarial", "4503599627370497,4096"],
     "--adversarial asks for more than 2^64 bytes of memory"),
    # The big tensor is held twice at once: its array and its file, then the
    # file mapped and a copy.
    (["--only", "runtime", "--big-tensor", "100000000000000"],
     re.compile(re.escape("--big-tensor asks for 181.90 TiB of memory (the tensor twice: its array and its file, "
                          "then the file mapped and a copy of it), ") + PAST_MEMORY)),
    (["--only", "write", "--write-bytes", "100000000000000"],
     re.compile(re.escape("--write-bytes asks for 90.95 TiB of memory, ") + PAST_MEMORY)),
    # A dedup workload's tensors with what each costs besides its bytes
    # (kDedupBytesPerTensor in harness.hpp), which counting the bytes alone
    # left out: 20,000,000,000 * (4,096 + 1,536) bytes. (Below: runs that
    # hold less than that estimate.)
] + [(["--only", "dedup", "--workloads", workload, flag, value],
      re.compile(re.escape(f"{flag} asks for {human_bytes(20_000_000_000 * (4096 + DEDUP_BYTES_PER_TENSOR))} of "
                           f"memory (the tensors' bytes and {DEDUP_BYTES_PER_TENSOR} more a tensor: its record and "
                           "name, and what deduplicate() and the baselines hold for it), ") + PAST_MEMORY))
     for workload, flag, value in (("small-tensors", "--small-tensors", "20000000000"),
                                   # (same-names takes --small-tensors' count: its own
                                   # estimate, which a run without the small tensors
                                   # was missing, passed bench_quick and bench_args)
                                   ("same-names", "--small-tensors", "20000000000"),
                                   ("adversarial", "--adversarial", "20000000000,4096"))] + [
    # A tensor size whose 1,536 more wraps past 2^64.
    (["--only", "dedup", "--workloads", "adversarial", "--adversarial", "1,18446744073709551000"],
     "--adversarial asks for more than 2^64 bytes of memory"),
    # The build group's compiler and headers, checked before the other groups run.
    (["--only", "runtime,build", "--cxx", "/nonexistent/g++"],
     "--cxx /nonexistent/g++: `/nonexistent/g++ -std=c++17 -fsyntax-only -x c++ /dev/null` failed: cannot start "
     "it: No such file or directory"),
    (["--only", "build", "--include-dir", "/nonexistent"],
     "--include-dir /nonexistent: no readable /nonexistent/wdedup/runtime.hpp (No such file or directory)"),
]
# A lookup store's memory (kLookupBytesPerKey and kLookupBytesPerQuery in
# benchmarks/harness.hpp, from peak resident sizes): 1152 bytes a key and 192
# a query (as many as the keys, at most --lookups: 32,768 under --quick).
# The most keys a file holds ask for 4.50 TiB, refused where the process can
# have less (or addresses less); with as many queries, 5.25 TiB. (Sizes the
# 16 bytes a key once counted refused too, at 64 GiB: a regression is
# refused with another message rather than run.)
def lookup_store(keys, lookups=32768):
    return keys * 1152 + min(lookups, max(keys, 4096)) * 192


for keys, lookups in ((4294967295, None), (4294967295, 4294967295)):
    if IS_32_BIT or LIMIT_BYTES < lookup_store(keys, lookups or 32768):
        refusals.append((["--only", "runtime", "--keys", f"16,{keys}"] +
                         (["--lookups", str(lookups)] if lookups else []),
                         re.compile(re.escape(f"--keys asks for {human_bytes(lookup_store(keys, lookups or 32768))} "
                                              f"of memory (the {keys}-key store, at 1152 bytes a key and 192 a query: "
                                              "names, maps, the store and its file), ") + PAST_MEMORY)))
for args, want in refusals:
    # --quick first: a mistake accepted by a regression runs the small CI
    # run (seconds), not the full one (explicit flags win over --quick).
    # Before anything runs: nothing on stdout (not even the run's header
    # line), no JSON written.
    if os.path.exists(json_path):
        os.remove(json_path)
    before = memory_limit()[0]
    r = run([exe, "--quick", "--no-progress", "--json", json_path] + args)
    # (A refusal of a size past this process's memory: a pattern, its limit
    # near what this check finds around the run.)
    if isinstance(want, re.Pattern):
        said = r.stderr.strip()
        want = re.compile(re.escape("wdedup-bench: ") + want.pattern)
        wrong = None if want.fullmatch(said) else f"not {want.pattern!r}"
        wrong = wrong or past_memory_problem(said, before)
    else:
        want = "wdedup-bench: " + want
        wrong = None if r.stderr.strip() == want else f"not {want!r}"
    if r.returncode != 2 or wrong or r.stdout or os.path.exists(json_path):
        problems.append(f"{args}: exit {r.returncode}, stderr {r.stderr.strip()!r} ({wrong}), stdout "
                        f"{r.stdout[:80]!r}, JSON written: {os.path.exists(json_path)}; expected 2, nothing run or "
                        "written")

# A Llama size no machine holds: refused from its size before anything runs.
before = memory_limit()[0]
r = run([exe, "--quick", "--no-progress", "--json", json_path, "--only", "dedup", "--workloads", "llama-1+1",
         "--layers", "2000000000"])
pattern = r"wdedup-bench: Llama settings for llama-1\+1: the tensors need [0-9.]+ TiB of memory, " + PAST_MEMORY
wrong = past_memory_problem(r.stderr.strip(), before)
if r.returncode != 2 or not re.fullmatch(pattern, r.stderr.strip()) or wrong:
    problems.append(f"--layers 2000000000: exit {r.returncode}, stderr {r.stderr.strip()!r} ({wrong})")

# The header says which Llama model the "llama" rows are of (their names do
# not), with the shape flags that changed it, and only when one ran.
for args, want in ((["--only", "dedup", "--workloads", "llama-1+1", "--threads", "1", "--reps", "1"],
                    ", Llama workloads: --model tiny, --quick"),
                   (["--only", "dedup", "--workloads", "llama-1+1", "--layers", "2", "--dim", "256", "--threads", "1",
                     "--reps", "1"], ", Llama workloads: --model tiny --layers 2 --dim 256, --quick"),
                   (["--only", "dedup", "--workloads", "llama-1+1", "--hidden-dim", "1024", "--vocab-size", "512",
                     "--heads", "4", "--kv-heads", "1", "--max-seq-len", "64", "--threads", "1", "--reps", "1"],
                    ", Llama workloads: --model tiny --hidden-dim 1024 --vocab-size 512 --heads 4 --kv-heads 1 "
                    "--max-seq-len 64, --quick"),
                   (["--only", "runtime", "--keys", "16", "--reps", "1", "--lookups", "1000", "--big-tensor", "65536",
                     "--tmpdir", outdir], None)):
    r = run([exe, "--quick", "--no-progress", "--json", json_path] + args)
    header = r.stdout.split("\n")[1] if r.stdout.count("\n") > 1 else ""
    if r.returncode != 0 or (want is not None and want not in header) or (want is None and "Llama" in header):
        problems.append(f"{args}: exit {r.returncode}, header line {header!r}; expected 0 and "
                        + (f"{want!r} in it" if want else "no Llama model named"))

# What a call takes, under the table: a figure of one call is no median
# (--reps 1 said "(medians of 1 calls, ...)"); with two thread counts, one
# call each; from two calls on, medians (bench_quick sees only --quick's 3:
# "one call" for 2 passed every suite).
for threads, reps, said in (("1", "1", "one call"), ("1,2", "1", "one call each"),
                            ("1", "2", "medians of 2 calls")):
    r = run([exe, "--quick", "--no-progress", "--json", json_path, "--only", "dedup", "--workloads", "llama-1+1",
             "--threads", threads, "--reps", reps])
    figures = ", ".join(rf"[0-9.e+]+ m?s at {t} thr" for t in threads.split(","))
    want = re.compile(re.escape("llama 1+1 POSITIONAL: a deduplicate() call takes ") + figures +
                      re.escape(f" ({said}, over 16.4 MB)."))
    lines = [l for l in r.stdout.splitlines() if "a deduplicate() call takes" in l]
    if r.returncode != 0 or len(lines) != 1 or not want.fullmatch(lines[0]):
        problems.append(f"--reps {reps} --threads {threads}: exit {r.returncode}, call-time lines {lines!r}; "
                        f"expected one matching {want.pattern!r}")

# ---- out of memory part-way: the group that ran out fails, the rest stand -----
# (The harness's operator new aborted, which lost every row and the JSON.)
# Under a 1.5 GiB address-space limit the runtime group fits and the write
# group's 2 GB store does not.
import resource


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


oom_json = os.path.join(outdir, "bench-args-oom.json")
if os.path.exists(oom_json):
    os.remove(oom_json)
if LIMIT_BYTES < 2_200_000_000:
    # (Below that the 2 GB store is refused before the run, exit 2.)
    print("bench_args: the out-of-memory case needs 2.2 GB of memory free here; skipped")
    r = None
else:
    r = subprocess.run([exe, "--quick", "--no-progress", "--only", "runtime,write", "--keys", "16", "--write-bytes",
                        "2000000000", "--json", oom_json, "--tmpdir", outdir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=limit_memory)
want = ("wdedup-bench: FAILURE: out of memory (smaller --model, --keys, --big-tensor, --write-bytes, "
        "--small-tensors or --adversarial sizes fit)")
if r is None:
    pass
elif r.returncode != 1 or r.stderr.strip() != want or not os.path.exists(oom_json):
    problems.append(f"out of memory in the write group: exit {r.returncode}, stderr {r.stderr.strip()!r}, JSON "
                    f"written: {os.path.exists(oom_json)}; expected 1, {want!r}, the JSON")
else:
    with open(oom_json) as f:
        oom = json.load(f)
    groups = sorted({x["group"] for x in oom["results"]})
    if groups != ["alloc", "runtime"]:
        problems.append(f"out of memory in the write group: the JSON holds the groups {groups}, expected the "
                        "runtime group's rows (alloc, runtime)")
    # The group that stopped is said, not only missing: in the JSON and under the table.
    said = want[len("wdedup-bench: FAILURE: "):]
    if oom.get("failures") != [said]:
        problems.append(f"out of memory in the write group: JSON failures {oom.get('failures')!r}, expected [{said!r}]")
    if "\nFAILED: " + said + "\n" not in r.stdout:
        problems.append(f"out of memory in the write group: no 'FAILED: {said}' line under the table: {r.stdout!r}")

# ---- the dedup workloads' memory estimate is above what a run holds -------------
# What the pre-run check counts for --small-tensors and --adversarial
# (DEDUP_BYTES_PER_TENSOR a tensor beyond its bytes) against
# the run's peak resident size less a run of 2 tensors', at counts where
# the most was measured (just past a vector's doubling). An estimate under
# it lets a run past the check end in an out-of-memory kill. The peak is
# the JSON's resident_peak_bytes, the harness's own VmHWM kept across the
# resets of bench::resident_peak: getrusage's (and /usr/bin/time's) peak
# is only the high-water mark since the last reset, and a child's starts
# at what its parent held when it was started (a Python process's 13 MiB,
# more than a run of 2 tensors holds). Without meson test's MALLOC_PERTURB_,
# as a user runs it: that fills what malloc gives out, and so touches
# capacity never used.
def dedup_peak(workload, flag, value):
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
    if os.path.exists(json_path):
        os.remove(json_path)
    try:
        r = run([exe, "--quick", "--no-progress", "--reps", "1", "--threads", "1,2", "--only", "dedup", "--workloads",
                 workload, flag, value, "--json", json_path, "--tmpdir", outdir], timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return f"{flag} {value}: no end in 120 s", None
    try:
        with open(json_path) as f:
            peak = json.load(f).get("resident_peak_bytes")
    except (OSError, ValueError) as e:
        return f"{flag} {value}: exit {r.returncode}, no JSON ({e}), stderr {r.stderr[-300:]!r}", None
    if r.returncode != 0:
        return f"{flag} {value}: exit {r.returncode}, stderr {r.stderr[-300:]!r}", None
    return None, peak


if LIMIT_BYTES < 1_000_000_000:
    print("bench_args: the memory-estimate case needs 1 GB of memory free here; skipped")
else:
    failed, base = dedup_peak("small-tensors", "--small-tensors", "2")
    if failed:
        problems.append(failed)
    elif base is None:
        print("bench_args: the harness knows no peak resident size here (no /proc/self/status); "
              "the memory-estimate case is skipped")
    else:
        for workload, flag, count, size in (("small-tensors", "--small-tensors", 65538, 4096),
                                            ("same-names", "--small-tensors", 65538, 4096),
                                            ("adversarial", "--adversarial", 32769, 4096)):
            value = str(count) if flag == "--small-tensors" else f"{count},{size}"
            failed, peak = dedup_peak(workload, flag, value)
            if failed or peak is None:
                problems.append(failed or f"{flag} {value}: no resident_peak_bytes, where the run of 2 tensors had one")
                continue
            estimate = count * (size + DEDUP_BYTES_PER_TENSOR)
            held = peak - base
            # (At least the tensors' bytes, less what a run of 2 tensors held
            # and freed before them, which the allocator gives out again.)
            if not count * size - (8 << 20) <= held <= estimate:
                problems.append(f"{flag} {value}: a peak of {peak} bytes, {held} over a run of 2 tensors' {base} "
                                f"({held / count - size:.0f} a tensor beyond its {size}); expected at most the "
                                f"estimate, {estimate} bytes ({DEDUP_BYTES_PER_TENSOR} a tensor beyond), and at "
                                "least the tensors' bytes less 8 MiB")

# ---- interrupted: the run's files are removed ----------------------------------
# A Ctrl-C (SIGINT) during the write group left its store behind, as
# write_ptd_file's hidden temporary (2 GB at --model 1b). The run's files go
# and the signal ends the process; another process's file stays. Sent as
# SIGTERM: a first SIGINT now stops the run at its next step (below), which
# removes the files outside the handler; SIGTERM is the handler's, at once.
import signal
import time


def stop_signals_at_defaults(ignored=None):
    """A child's preexec_fn: the stop signals at their default actions, but
    `ignored`, whatever this check was started with (under nohup SIGHUP comes
    ignored, in a background job SIGINT, and a child keeps a signal it is
    handed ignored as its caller's choice)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN if sig == ignored else signal.SIG_DFL)


sig_dir = os.path.join(outdir, "bench-args-interrupted")
shutil.rmtree(sig_dir, ignore_errors=True)
os.mkdir(sig_dir)
decoy = os.path.join(sig_dir, "wdedup-bench-1-store.ptd")  # pid 1's name, not this run's
with open(decoy, "w"):
    pass


# The store of the runs a signal stops or must not stop while they write:
# 200 MB. The signal is sent within milliseconds of what it waits for (the
# store's file, a progress line), and what it must land in lasts a second or
# more from there: the rest of the write group for the runs below (6 writes
# of the store: 2.4 s of a 2.4 s run on the idle EPYC Zen 5 VM), its warm-up
# write for a Ctrl-C before anything finished (1.1 s), a repetition's 5
# writes for the second Ctrl-C of two (1.3 s). With 500 MB those took 8.4,
# 3.8 and 3.2 s, 30 s of bench_args's 74 s, for nothing more checked.
WRITE_BYTES = "200000000"


def start_write_run(ignored=None):
    """A 200 MB write group run writing its files and JSON in sig_dir."""
    return subprocess.Popen([exe, "--no-progress", "--only", "write", "--write-bytes", WRITE_BYTES, "--reps", "1",
                             "--tmpdir", sig_dir, "--json", os.path.join(sig_dir, "r.json")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: stop_signals_at_defaults(ignored))


def wait_for_store(p):
    """This run's store (write_ptd_file's temporary of it) once it is being
    written: by then the handler is in place (parse_args's probe file,
    made before it, is not waited for)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        own = [n for n in os.listdir(sig_dir) if n.lstrip(".").startswith(f"wdedup-bench-{p.pid}-") and "store.ptd" in n]
        if own:
            return own
        time.sleep(0.01)
    return []


# A hangup (the terminal closed) removes them as SIGTERM does (README; only
# an ignored SIGHUP was sent here, and a harness that left SIGHUP at its
# default, dying with its 2 GB store left behind, passed every suite).
for sig in (signal.SIGTERM, signal.SIGHUP):
    p = start_write_run()
    own = wait_for_store(p)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    left = sorted(os.listdir(sig_dir))
    if not own or p.returncode != -sig or left != ["wdedup-bench-1-store.ptd"]:
        problems.append(f"{sig.name} while writing: its files seen {own}, exit {p.returncode}, stderr {err!r}, left "
                        f"{left}; expected a file of its own, death by {sig.name}, only the other process's file left")
    for name in set(left) - {"wdedup-bench-1-store.ptd"}:  # (the next run starts without them)
        os.remove(os.path.join(sig_dir, name))
# A signal the caller ignores stays ignored: a hangup under nohup, a SIGINT
# in a background job (`cmd &` in a shell without job control; no stop at
# the next step either). The run goes on to its end, which removes its files
# as always and writes its JSON, "interrupted": false.
def read_interrupted(left):
    """The JSON's "interrupted" where the run wrote one into sig_dir, else None."""
    if "r.json" not in left:
        return None
    with open(os.path.join(sig_dir, "r.json")) as f:
        return json.load(f).get("interrupted")


for sig, how in ((signal.SIGHUP, "a hangup ignored as under nohup"),
                 (signal.SIGINT, "a SIGINT ignored as in a background job")):
    p = start_write_run(ignored=sig)
    own = wait_for_store(p)
    p.send_signal(sig)
    # Still running once the signal was sent: it reached the run (a run
    # that had ended would pass without it).
    reached = p.poll() is None
    _, err = p.communicate(timeout=120)
    left = sorted(os.listdir(sig_dir))
    interrupted = read_interrupted(left)
    if not own or not reached or p.returncode != 0 or left != ["r.json", "wdedup-bench-1-store.ptd"] or \
            interrupted is not False or "stopping at the next step" in err:
        problems.append(f"{how}: its store seen {own}, running when signalled {reached}, exit {p.returncode}, stderr "
                        f"{err!r}, left {left}, interrupted {interrupted}; expected the run to go on and finish (0) "
                        "with its JSON")

# A Ctrl-C keeps what was measured: the first SIGINT, sent to the run's
# process group as a terminal does (its compiler children get it too), stops
# the run at its next step; the rows finished before it are printed and
# written with "interrupted": true, the measurement it stopped is left out
# (not a failure: here a compile killed under it), its files are removed,
# and it ends by SIGINT. A second SIGINT ends it at once, nothing written.
def ctrl_c_run(args, first_at, again=False, reader_gone=False):
    """Runs wdedup-bench with args in its own process group; sends SIGINT to
    the group when a progress line starts with first_at, and again once the
    run says it is stopping if `again`. With `reader_gone`, stdout's reader
    goes before the Ctrl-C, as one the same Ctrl-C ends would (stdout is then
    ""). Returns (exit, stdout, stderr lines)."""
    p = subprocess.Popen([exe, "--progress", "--tmpdir", sig_dir, "--json", os.path.join(sig_dir, "r.json")] + args,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=stop_signals_at_defaults)
    if reader_gone:
        while p.stdout.readline().strip():  # the lines before the run, flushed as it starts
            pass
        p.stdout.close()
    said = []
    for line in p.stderr:
        said.append(line.rstrip("\n"))
        if line.startswith(first_at) and not any(l.startswith(first_at) for l in said[:-1]):
            os.killpg(p.pid, signal.SIGINT)
            if not again:
                break
        if again and "stopping at the next step" in line:
            os.killpg(p.pid, signal.SIGINT)
            break
    if reader_gone:
        rest = p.stderr.read()
        p.wait(timeout=120)
        return p.returncode, "", said + rest.splitlines()
    out, rest = p.communicate(timeout=120)
    return p.returncode, out, said + rest.splitlines()


os.remove(decoy)
# --quick's groups and workloads at smaller sizes: the runs below check what
# a stop keeps and removes, which the sizes do not change (--quick's own
# were 5 s a run before the build group, 1.2 s so).
SMALL_RUNTIME = ["--keys", "16", "--lookups", "1000", "--big-tensor", "65536"]
SMALL = SMALL_RUNTIME + ["--small-tensors", "2000", "--adversarial", "64,4096", "--write-bytes", "1048576"]
rc, out, said = ctrl_c_run(["--quick"] + SMALL, "build cost: ")
left = sorted(os.listdir(sig_dir))
stopping = ("wdedup-bench: stopping at the next step, keeping the measurements finished so far (Ctrl-C again to "
            "stop at once)")
if rc != -signal.SIGINT or left != ["r.json"] or stopping not in said:
    problems.append(f"Ctrl-C in the build group: exit {rc}, left {left}, stderr {said[-4:]}; expected death by "
                    f"SIGINT, the JSON alone left, and the line {stopping!r}")
else:
    with open(os.path.join(sig_dir, "r.json")) as f:
        doc = json.load(f)
    groups = sorted({r["group"] for r in doc["results"]})
    dedup_rows = [r for r in doc["results"] if r["group"] == "dedup"]
    # Every dedup workload at both thread counts, as a --quick run has them.
    workloads = sorted({(r["name"].split(":")[0], r["threads"]) for r in dedup_rows})
    if doc.get("interrupted") is not True or groups != ["alloc", "dedup", "runtime", "write"] or \
            doc["failures"] != [] or len(workloads) != 12 or any(r.get("failed") for r in doc["results"]):
        problems.append(f"Ctrl-C in the build group: interrupted {doc.get('interrupted')}, groups {groups}, "
                        f"failures {doc['failures']}, dedup workloads {workloads}")
    tail = out.splitlines()[-2:]
    if tail != ["INTERRUPTED (Ctrl-C): the rows above are the measurements finished before it; the one it stopped, "
                "and the rest, did not run.", "wrote " + os.path.join(sig_dir, "r.json")] or \
            "targets met" not in out or "FAILED" in out:
        problems.append(f"Ctrl-C in the build group: the table's end {tail!r}")
    # The build group's two targets were never measured: counted, and said
    # so (the count was of the rows alone: "30 of 30 targets met").
    measured = sum("target" in r for r in doc["results"])
    said = (f"{doc.get('targets_met')} of {measured + 2} targets met (--quick: small sizes, the yes/NO mean "
            "nothing), 2 not measured (interrupted).")
    if (doc.get("targets"), doc.get("targets_not_measured")) != (measured + 2, 2) or said not in out.splitlines():
        problems.append(f"Ctrl-C in the build group: targets {doc.get('targets')}, targets_not_measured "
                        f"{doc.get('targets_not_measured')}, expected {measured + 2} and 2, and the line {said!r}")
    os.remove(os.path.join(sig_dir, "r.json"))
# Its output read by a pipe the same Ctrl-C ends (`wdedup-bench ... | tee log`:
# tee is in the terminal's foreground job too): the table then goes nowhere,
# but the JSON is still written, the files removed, and the run ends by
# SIGINT, not by a SIGPIPE at the table's first write (which left its files
# and, with a table over a pipe's buffer, no JSON).
rc, out, said = ctrl_c_run(["--quick"] + SMALL, "build cost: ", reader_gone=True)
left = sorted(os.listdir(sig_dir))
interrupted = read_interrupted(left)
if rc != -signal.SIGINT or left != ["r.json"] or interrupted is not True:
    problems.append(f"Ctrl-C with stdout's reader gone: exit {rc}, left {left}, interrupted {interrupted}; "
                    "expected death by SIGINT, the JSON alone left, \"interrupted\": true")
if "r.json" in left:
    os.remove(os.path.join(sig_dir, "r.json"))
# stdout's reader gone with no Ctrl-C (`| head`, a `less` quit during the
# run): the table's write fails, but the JSON is written (a SIGPIPE there
# ended the run after every measurement, before its JSON), and the run says
# so and exits 1.
p = subprocess.Popen([exe, "--quick", "--only", "runtime"] + SMALL_RUNTIME + ["--tmpdir", sig_dir, "--json",
                      os.path.join(sig_dir, "r.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     preexec_fn=stop_signals_at_defaults)
while p.stdout.readline().strip():  # the lines before the run, flushed as it starts
    pass
p.stdout.close()
err = p.stderr.read()
p.wait(timeout=120)
left = sorted(os.listdir(sig_dir))
interrupted = read_interrupted(left)
lost = f"wdedup-bench: writing to standard output failed: the table is lost; every figure is in " \
       f"{os.path.join(sig_dir, 'r.json')}\n"
if p.returncode != 1 or left != ["r.json"] or interrupted is not False or err != lost:
    problems.append(f"stdout's reader gone: exit {p.returncode}, left {left}, interrupted {interrupted}, stderr "
                    f"{err!r}; expected exit 1, the JSON alone left, \"interrupted\": false, stderr {lost!r}")
if "r.json" in left:
    os.remove(os.path.join(sig_dir, "r.json"))
# Twice: at once, nothing written, its files removed (the second lands while
# the first repetition's writes of the store run). The runtime group's rows
# before it (small sizes: what a first Ctrl-C would keep and write) are what
# "nothing written" tells apart from a stop at the next step.
rc, out, said = ctrl_c_run(["--quick", "--only", "runtime,write"] + SMALL_RUNTIME +
                           ["--write-bytes", WRITE_BYTES, "--reps", "3"], "write: repetition 1/", again=True)
left = sorted(os.listdir(sig_dir))
if rc != -signal.SIGINT or left != [] or "INTERRUPTED" in out or "wrote" in out:
    problems.append(f"Ctrl-C twice: exit {rc}, left {left}, stdout's end {out[-200:]!r}; expected death by SIGINT "
                    "at once, nothing written or left")
# In a lookup measurement of many repetitions: it stops at the next pass, not
# after all 100,000 repetitions (several minutes, past the wait below).
p = subprocess.Popen([exe, "--progress", "--only", "runtime", "--keys", "16", "--lookups", "100000", "--reps",
                      "100000", "--tmpdir", sig_dir, "--json", os.path.join(sig_dir, "r.json")],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                     preexec_fn=stop_signals_at_defaults)
for line in p.stderr:
    if line.startswith("runtime: lookups, 16 keys: present keys"):
        time.sleep(1)  # past the warm-up passes (milliseconds), into the repetitions
        os.killpg(p.pid, signal.SIGINT)
        break
try:
    out, _ = p.communicate(timeout=60)
    # Nothing measured: no table header over no rows, no "0 of 0 targets met".
    if p.returncode != -signal.SIGINT or "INTERRUPTED (Ctrl-C) before any measurement finished.\n" not in out or \
            "\ngroup " in out or "targets met" in out:
        problems.append(f"Ctrl-C in the lookups: exit {p.returncode}, stdout's end {out[-300:]!r}")
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    p.communicate()
    problems.append("Ctrl-C in the lookups of 100,000 repetitions: still running 60 s later")
for name in os.listdir(sig_dir):
    os.remove(os.path.join(sig_dir, name))
# Once, with nothing finished yet: the last run's results stay as they were.
with open(os.path.join(sig_dir, "r.json"), "w") as f:
    f.write("the last run's")
rc, out, said = ctrl_c_run(["--only", "write", "--write-bytes", WRITE_BYTES, "--reps", "1"], "write: preparing")
with open(os.path.join(sig_dir, "r.json")) as f:
    kept = f.read()
if rc != -signal.SIGINT or sorted(os.listdir(sig_dir)) != ["r.json"] or kept != "the last run's" or \
        "nothing was measured: " + os.path.join(sig_dir, "r.json") + " left as it was" not in out or \
        "INTERRUPTED (Ctrl-C) before any measurement finished.\n" not in out or "the rows above" in out or \
        "\ngroup " in out or "targets met" in out:
    problems.append(f"Ctrl-C before anything finished: exit {rc}, left {sorted(os.listdir(sig_dir))}, the JSON "
                    f"{kept[:40]!r}, stdout's end {out[-200:]!r}")
# Twice while the JSON is being written (interrupt_json_write.cpp raises both
# at the first writev to its hidden temporary, .r.json.tmp-XXXXXX, beside the
# JSON and not in --tmpdir): the run ends by SIGINT, the temporary is gone,
# and the last run's JSON stays as it was (it was left there, 2026-12-02).
if interrupt_json_write:
    p = subprocess.run([exe, "--quick", "--only", "runtime"] + SMALL_RUNTIME + ["--tmpdir", sig_dir, "--json",
                        os.path.join(sig_dir, "r.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120, preexec_fn=stop_signals_at_defaults,
                       env=dict(os.environ, LD_PRELOAD=interrupt_json_write, WBENCH_INTERRUPT_WRITES_TO=".r.json.tmp-"))
    with open(os.path.join(sig_dir, "r.json")) as f:
        kept = f.read()
    if p.returncode != -signal.SIGINT or sorted(os.listdir(sig_dir)) != ["r.json"] or kept != "the last run's" or \
            "wrote" in p.stdout or "stopping at the next step" not in p.stderr:
        problems.append(f"Ctrl-C twice during the JSON's write: exit {p.returncode}, left "
                        f"{sorted(os.listdir(sig_dir))}, the JSON {kept[:40]!r}, stdout's end {p.stdout[-200:]!r}, "
                        f"stderr {p.stderr[-300:]!r}; expected death by SIGINT, the last run's JSON alone left")
shutil.rmtree(sig_dir, ignore_errors=True)

# ---- settings of what did not run ----------------------------------------------
# Dedup flags on a run without the dedup group are recorded as not used (the
# facts said "dedup_threads": "1,2" and "input_pages": "small", as if set).
# Its JSON file's name has a space and an apostrophe: the recorded command
# gives the shell back the same words (it joined them with spaces, unquoted).
import shlex

spaced_json = os.path.join(outdir, "bench args it's.json")
args = ["--quick", "--only", "runtime", "--keys", "16", "--threads", "1,2", "--input-pages", "small", "--no-progress",
        "--json", spaced_json, "--tmpdir", outdir]
r = run([exe] + args)
if r.returncode != 0:
    problems.append(f"--only runtime with dedup flags: exit {r.returncode}, stderr {r.stderr.strip()!r}")
else:
    with open(spaced_json) as f:
        spaced = json.load(f)
    os.remove(spaced_json)
    facts = spaced["facts"]
    got = (facts.get("dedup_threads"), facts.get("input_pages"), facts.get("llama_model"))
    if got != ("none ran", "none ran", "none ran"):
        problems.append(f"--only runtime: facts dedup_threads, input_pages, llama_model {got}, expected 'none ran'")
    if shlex.split(spaced["command"]) != ["wdedup-bench"] + args:
        problems.append(f"the JSON's command {spaced['command']!r} does not split back into its words")
    if f"--json '{outdir}/bench args it'\\''s.json'" not in spaced["command"]:
        problems.append(f"the JSON's command {spaced['command']!r}: the --json path not single-quoted")
    # Words of the plain characters alone, a comma's list included, stay bare.
    if " --keys 16 --threads 1,2 --input-pages small --no-progress --json '" not in spaced["command"]:
        problems.append(f"the JSON's command {spaced['command']!r}: a word of plain characters quoted")

# ---- a flag given twice: the last wins ------------------------------------------
# (But --ptd, which adds its files: bench_quick.) Each first value here would
# run something else or more: the runtime group, the adversarial workload,
# four tensors, five repetitions, a second thread count, small pages, and
# the results in another file. Nothing checked it: a --threads that added to
# the list before it (1,2 then 1: rows at 1 twice) passed every suite.
twice_first = os.path.join(outdir, "bench-args-twice-first.json")
for name in (twice_first, json_path):
    if os.path.exists(name):
        os.remove(name)
r = run([exe, "--quick", "--no-progress", "--only", "runtime", "--only", "dedup", "--workloads", "adversarial",
         "--workloads", "small-tensors", "--small-tensors", "4", "--small-tensors", "2", "--reps", "5", "--reps", "1",
         "--threads", "1,2", "--threads", "1", "--input-pages", "small", "--input-pages", "default", "--json",
         twice_first, "--json", json_path, "--tmpdir", outdir])
doc = json_doc(json_path, r.returncode == 0)
rows = doc.get("results", [])
got = (doc.get("reps"), doc.get("facts", {}).get("dedup_threads"), doc.get("facts", {}).get("input_pages"),
       sorted({(x["group"], x["name"].split(":")[0], x["threads"], x["reps"], x["note"].split(";")[0])
               for x in rows}), os.path.exists(twice_first))
want = (1, "1", "default", [("dedup", "small tensors POSITIONAL", 1, 1, "2 tensors of 4096 B, 50% duplicates")], False)
if r.returncode != 0 or got != want:
    problems.append(f"flags given twice: exit {r.returncode}, stderr {r.stderr.strip()!r}; reps, dedup_threads, "
                    f"input_pages, rows (group, workload, threads, reps, note) and the first --json written: {got}; "
                    f"expected {want}")

# ---- where the stores go ------------------------------------------------------
# Without --tmpdir the runtime, write and build groups write their files in
# the JSON's directory (--help), and the facts say where (a default of "."
# passed every suite: each run here gives --tmpdir).
tmpdir_json = os.path.join(outdir, "bench-args-tmpdir", "r.json")
os.makedirs(os.path.dirname(tmpdir_json), exist_ok=True)
r = run([exe, "--quick", "--no-progress", "--only", "write", "--write-bytes", "1000", "--reps", "1", "--json",
         tmpdir_json])
fact = None
if r.returncode == 0:
    with open(tmpdir_json) as f:
        fact = json.load(f)["facts"].get("tmpdir")
    os.remove(tmpdir_json)
if r.returncode != 0 or fact != os.path.dirname(tmpdir_json) or os.listdir(os.path.dirname(tmpdir_json)):
    problems.append(f"no --tmpdir: exit {r.returncode}, stderr {r.stderr.strip()!r}, facts.tmpdir {fact!r}, left "
                    f"{os.listdir(os.path.dirname(tmpdir_json))}; expected 0, {os.path.dirname(tmpdir_json)!r}, "
                    "nothing left")
shutil.rmtree(os.path.dirname(tmpdir_json), ignore_errors=True)

# ---- checks of a group that does not run ----------------------------------------
# A setting of a group that does not run has no effect: --cxx and
# --include-dir are checked only where the build group runs, and a size
# only where its group does, so a run without them is not refused for a
# compiler it would never start or memory it would never ask for (checking
# them always passed every suite, whose compiler and headers are there and
# whose sizes fit; each size here is refused above where its group runs).
not_run = ["--cxx", "/nonexistent/g++", "--include-dir", "/nonexistent", "--small-tensors", "20000000000",
           "--adversarial", "20000000000,4096", "--layers", "2000000000", "--big-tensor", "100000000000000",
           "--keys", "16,4294967295", "--references", "sha256"]
r = run([exe, "--quick", "--no-progress", "--only", "write", "--write-bytes", "1000", "--reps", "1", "--json",
         json_path, "--tmpdir", outdir] + not_run)
references = None
if r.returncode == 0:
    with open(json_path) as f:
        references = json.load(f)["facts"].get("references")
if r.returncode != 0 or references != "none ran":
    problems.append(f"--only write {' '.join(not_run)}: exit {r.returncode}, stderr {r.stderr.strip()!r}, "
                    f"facts.references {references!r}; expected 0 (the groups they set do not run) and 'none ran'")

# ---- fewer cores usable than the machine has ------------------------------------
# Under `taskset -c N` the default --threads is 1 alone: the first line and the
# facts say why the two-thread rows are missing (they said "2 cores").
usable_now = sorted(os.sched_getaffinity(0))
if len(usable_now) >= 2:
    one_cpu_json = os.path.join(outdir, "bench-args-one-cpu.json")
    r = subprocess.run([exe, "--quick", "--only", "dedup", "--workloads", "adversarial", "--no-progress", "--json",
                        one_cpu_json, "--tmpdir", outdir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120, preexec_fn=lambda: os.sched_setaffinity(0, {usable_now[0]}))
    out_lines = r.stdout.splitlines()
    first = out_lines[1] if len(out_lines) > 1 else ""
    expected = f", {os.cpu_count()} cores, 1 of them usable here (the CPU affinity)"
    if r.returncode != 0 or expected not in first:
        problems.append(f"one usable core: exit {r.returncode}, first line {first!r}, expected {expected!r}")
    else:
        with open(one_cpu_json) as f:
            facts = json.load(f)["facts"]
        os.remove(one_cpu_json)
        got = (facts.get("cores"), facts.get("cores_usable"), facts.get("dedup_threads"))
        if got != (str(os.cpu_count()), "1", "1"):
            problems.append(f"one usable core: facts cores, cores_usable, dedup_threads {got}")

# ---- accepted ------------------------------------------------------------------
# A Llama row's note records every shape setting the run used, flags and
# preset alike (it named only dim, layers and vocab).
r = run([exe, "--quick", "--only", "dedup", "--workloads", "llama-1+1", "--threads", "1,2", "--reps", "1",
         "--hidden-dim", "1024", "--heads", "4", "--kv-heads", "1", "--max-seq-len", "64", "--no-progress", "--json",
         json_path, "--tmpdir", outdir])
want = ("Llama 'tiny' (dim 256, 4 layers, hidden dim 1024, 4 heads, 1 kv heads, vocab 4096, max seq len 64) fp16, "
        "prefill 1 + decode 1 partitions")
if r.returncode != 0:
    problems.append(f"--hidden-dim 1024 --heads 4 --kv-heads 1 --max-seq-len 64: exit {r.returncode}: {r.stderr}")
else:
    # Its second line: the date, the cores (the usable ones named only where
    # the CPU affinity leaves fewer), and each shape flag given.
    cores = f"{os.cpu_count()} cores"
    if len(usable_now) < os.cpu_count():
        cores += f", {len(usable_now)} of them usable here (the CPU affinity)"
    second = r.stdout.splitlines()[1:2]
    if not (second and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, " + re.escape(
            f"{cores}, Llama workloads: --model tiny --hidden-dim 1024 --heads 4 --kv-heads 1 --max-seq-len 64, "
            "--quick (small sizes: figures are not meaningful)"), second[0])):
        problems.append(f"--hidden-dim 1024 --heads 4 --kv-heads 1 --max-seq-len 64: second line {second!r}")
    with open(json_path) as f:
        rows = [x for x in json.load(f)["results"] if x["group"] == "dedup"]
    notes = {x.get("note") for x in rows if x["name"].endswith(": deduplicate") and x["baseline"] == "read pass"}
    if notes != {want}:
        problems.append(f"Llama rows' notes {sorted(map(str, notes))}, expected {want!r}")
    # Every row of the workload, those that say what they are included.
    shapeless = sorted(x["name"] + " vs " + x["baseline"] for x in rows if not str(x.get("note", "")).startswith(want))
    if len(rows) < 15 or shapeless:  # seven rows a thread count, and the scaling row
        problems.append(f"{len(rows)} dedup rows; without the shape in their note: {shapeless}")
    # Both identity-engine rows carry the engine's counters.
    counted = [x["baseline"] for x in rows if x["name"].endswith(": identity engine")
               and {"bytes_hashed", "bytes_compared", "byte_comparisons", "hashed_inputs"} <= set(x.get("extra", {}))]
    if sorted(counted) != ["SHA-256 ref", "SHA-256 ref", "read pass", "read pass"]:  # at 1 and 2 threads
        problems.append(f"identity-engine rows with the engine's counters: {counted}")

# Two layers are enough for llama-1+1 alone; --once runs it without timing.
# Under a terminal (progress shown), each result line starts a clean line:
# the progress line before it was closed, not run into.
def progress_under_terminal(columns, cut):
    """What is wrong with the --once run's output under a terminal `columns`
    wide, whose progress lines show as `cut`, or None."""
    try:
        pid, fd = pty.fork()
    except OSError as e:  # a chroot or container without /dev/pts
        return f"--progress under a terminal: no pseudo-terminal to run it in ({e}; is /dev/pts mounted?)"
    if pid == 0:
        try:
            # Progress lines are cut to a column less than the terminal's.
            fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
            os.execv(exe, [exe, "--quick", "--once", "--progress", "--layers", "2", "--workloads", "llama-1+1",
                           "--threads", "1", "--json", json_path, "--tmpdir", outdir])
        finally:
            os._exit(127)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    tty_out = b"".join(chunks).decode(errors="replace")
    # (A terminal ends lines with "\r\n".)
    lines = [l.rstrip("\r") for l in tty_out.split("\n") if "one read pass and one deduplicate()" in l]
    if code != 0 or len(lines) != 1:
        return f"--once --layers 2 --workloads llama-1+1: exit {code}, output {tty_out!r}"
    # What a terminal shows on that line: the text after its last carriage
    # return, less the erase-line sequence.
    shown = lines[0].split("\r")[-1].replace("\033[K", "")
    if not shown.startswith("llama 1+1, 1 thread: one read pass"):
        return f"--once under a terminal: the result line shows {shown!r}"
    # Each progress line as the terminal shows it, cut short of its last
    # column ("dedup llama 1+1: generating the workload", 40 characters, then
    # its tenths: "..., 10%" and on, 45 characters; on a 40-column terminal
    # the first is one column too wide, and cut too).
    shown_progress = [seg.replace("\033[K", "") for line in tty_out.split("\n") for seg in line.split("\r")
                      if seg.startswith("\033[Kdedup ")]
    if len(shown_progress) < 2 or shown_progress != [cut] * len(shown_progress):
        return f"--progress on a {columns}-column terminal: progress lines {shown_progress!r}, expected {cut!r}"
    return None


for columns, cut in ((30, "dedup llama 1+1: generatin..."), (40, "dedup llama 1+1: generating the work...")):
    problem = progress_under_terminal(columns, cut)
    if problem:
        problems.append(problem)

# --once times nothing and writes no JSON: the last full run's file, which
# bench.sh names for --once too, stays as it was.
with open(json_path, "w") as f:
    f.write("the last run's figures\n")
# (Sizes of the groups --once does not run are not held against memory:
# no machine has 181.90 TiB, or the 4,294,967,295-key store.)
r = run([exe, "--quick", "--once", "--layers", "2", "--workloads", "llama-1+1", "--threads", "1", "--no-progress",
         "--json", json_path, "--tmpdir", outdir, "--big-tensor", "100000000000000", "--write-bytes",
         "100000000000000", "--keys", "4294967295"])
with open(json_path) as f:
    kept = f.read()
if r.returncode != 0 or kept != "the last run's figures\n" or \
        f"no JSON written: {json_path} left as it was\n" not in r.stdout:
    problems.append(f"--once: exit {r.returncode}, the JSON now {kept!r}, output {r.stdout!r}")

# The open time and allocations are measured on the largest store, wherever
# --keys lists it; a row's reps is the count it used (open: at least 11).
allocs_counted = True  # (unless the run below says otherwise)
r = run([exe, "--only", "runtime", "--keys", "256,16", "--reps", "2", "--lookups", "1000", "--big-tensor", "65536",
         "--no-progress", "--json", json_path, "--tmpdir", outdir])
if r.returncode != 0:
    problems.append(f"--only runtime --keys 256,16: exit {r.returncode}: {r.stderr}")
else:
    with open(json_path) as f:
        rows = {(x["name"], x.get("baseline")): x for x in json.load(f)["results"]}
    want = {("open (mmap + validate), 256 keys", "build unordered_map"): 11,
            ("heap allocations: open, 256 keys", None): 1,
            ("get_tensor_layout, 16 keys", "unordered_map"): 2,
            ("get_data (mmap), 65536 B tensor", "get_data 1 KiB"): 2}
    for key, reps in want.items():
        if key not in rows or rows[key]["reps"] != reps:
            problems.append(f"--keys 256,16: row {key} {'reps ' + str(rows[key]['reps']) if key in rows else 'missing'}"
                            f", expected reps {reps}")
    if any(name.startswith("open") and "16 keys" in name for name, _ in rows):
        problems.append("--keys 256,16: an open-time row for the 16-key store")
    # Every target it sets measured: each store's lookups (no scan target
    # without 4096 keys), the allocation counts where counted, get_data and
    # load_data_into.
    with open(json_path) as f:
        doc = json.load(f)
    allocs_counted = "target" in rows.get(("heap allocations: open, 256 keys", None), {})
    # A run without --quick says so (bench_quick: one with it says true).
    if doc.get("quick") is not False:
        problems.append(f"--keys 256,16 without --quick: 'quick': {doc.get('quick')!r}, expected false")
    want = 2 + (2 if allocs_counted else 0) + 2
    if (doc.get("targets"), doc.get("targets_not_measured")) != (want, 0):
        problems.append(f"--keys 256,16: targets {doc.get('targets')}, targets_not_measured "
                        f"{doc.get('targets_not_measured')}; expected {want} and 0")

# One key is "1 key" in each row's name, as any other count is "N keys" (it
# was "1 keys").
r = run([exe, "--quick", "--only", "runtime", "--keys", "1", "--reps", "1", "--lookups", "1000", "--big-tensor",
         "65536", "--no-progress", "--json", json_path, "--tmpdir", outdir])
if r.returncode != 0:
    problems.append(f"--keys 1: exit {r.returncode}: {r.stderr}")
else:
    with open(json_path) as f:
        names = sorted({x["name"] for x in json.load(f)["results"] if "key" in x["name"]})
    want = ["get_tensor_layout, 1 key", "heap allocations: open, 1 key", "missing key, 1 key",
            "open (mmap + validate), 1 key"]
    if names != want:
        problems.append(f"--keys 1: rows {names}, expected {want}")

# ---- groups that failed: their targets counted as not measured ------------------
# Files past RLIMIT_FSIZE (SIGXFSZ ignored: a write past it fails with EFBIG,
# and the writer refuses such a file before it starts) fail the 65,536-key
# store, the big tensor's store and the write group; the 16-key store's
# lookups are measured. Its targets: 1 of 7 measured (the lookups of each
# store, the two allocation counts of the largest, get_data, load_data_into,
# the write), 6 not, which the line and the JSON say (they said "1 of 1").
def file_limit(n):
    """A child's preexec_fn: files of at most `n` bytes, a write past that
    failing with EFBIG (SIGXFSZ ignored)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return limit


fsize_json = os.path.join(outdir, "bench-args-fsize.json")
for only, want_rows, planned in (("runtime,write", True, 5 + (2 if allocs_counted else 0)), ("write", False, 1)):
    if os.path.exists(fsize_json):
        os.remove(fsize_json)
    r = subprocess.run([exe, "--quick", "--no-progress", "--only", only, "--keys", "16,65536", "--reps", "1",
                        "--json", fsize_json, "--tmpdir", outdir], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120, preexec_fn=file_limit(1 << 20))
    doc = json_doc(fsize_json)
    measured = sum("target" in x for x in doc.get("results", []))
    lines = r.stdout.splitlines()
    if want_rows:  # the table, and under it the line
        said = (f"{doc.get('targets_met')} of {planned} targets met (--quick: small sizes, the yes/NO mean nothing), "
                f"{planned - 1} not measured (failed).")
        table = "group " in r.stdout
    else:  # nothing measured: no table, one line saying so
        said = (f"nothing was measured: 0 of {planned} target{'' if planned == 1 else 's'} met, {planned} not measured "
                "(failed).")
        table = "group " not in r.stdout
    if r.returncode != 1 or measured != (1 if want_rows else 0) or \
            (doc.get("targets"), doc.get("targets_not_measured")) != (planned, planned - measured) or \
            said not in lines or not table:
        problems.append(f"--only {only} with files past RLIMIT_FSIZE: exit {r.returncode}, {measured} measured, "
                        f"targets {doc.get('targets')}, targets_not_measured {doc.get('targets_not_measured')}; "
                        f"expected 1, {planned} targets, {planned - 1 if want_rows else planned} not measured and "
                        f"the line {said!r}: {r.stdout[-600:]!r}")

# The JSON alone past RLIMIT_FSIZE (2 KiB: the 100-byte store fits, the
# JSON of its rows does not): measured, then refused at the end, whole or
# not at all: exit 1, the writer's reason, no JSON and no temporary of it.
tiny_json = os.path.join(outdir, "bench-args-tiny.json")
if os.path.exists(tiny_json):
    os.remove(tiny_json)
r = subprocess.run([exe, "--quick", "--no-progress", "--only", "write", "--write-bytes", "100", "--reps", "1", "--json",
                    tiny_json, "--tmpdir", outdir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                   timeout=120, preexec_fn=file_limit(2048))
left = [n for n in os.listdir(outdir) if "bench-args-tiny.json" in n]
if r.returncode != 1 or left or "\nwrote " in r.stdout or not re.fullmatch(
        re.escape(f"wdedup-bench: cannot write '{tiny_json}': the file would be ") + r"\d+" +
        re.escape(" bytes, more than this process's file size limit (2048 bytes: RLIMIT_FSIZE, ulimit -f)"),
        r.stderr.strip()):
    problems.append(f"the JSON past RLIMIT_FSIZE: exit {r.returncode}, stderr {r.stderr.strip()!r}, left {left}; "
                    "expected 1, the writer's reason, nothing written")

# ---- stores that cannot be mapped: named, and the rest of the group stands ------
# tests/support/fail_mmap.cpp makes mmap(2) of the 256-key store and of the
# get_data store fail (ENOMEM): each is named with the reason, once, on
# stderr, under the table and in the JSON; the 16-key store's rows stand, and every target
# after the failures (the 256-key lookups, the allocation counts of the
# largest store, get_data, load_data_into) is counted as not measured.
# The stores are removed all the same. (No test produced a failure in
# these two parts of the group before: the files past RLIMIT_FSIZE above
# fail their writes.)
if fail_mmap:
    mmap_dir = os.path.join(outdir, "bench-args-mmap")  # (its own: other tests' stores come and go in outdir)
    shutil.rmtree(mmap_dir, ignore_errors=True)
    os.makedirs(mmap_dir)
    mmap_json = os.path.join(mmap_dir, "r.json")
    r = run([exe, "--quick", "--no-progress", "--only", "runtime", "--keys", "16,256", "--reps", "1", "--lookups",
             "1000", "--big-tensor", "65536", "--json", mmap_json, "--tmpdir", mmap_dir],
            env=dict(os.environ, LD_PRELOAD=fail_mmap, WDEDUP_TEST_FAIL_MMAP_OF="-256-keys.ptd,-data.ptd"))
    doc = json_doc(mmap_json)
    store = re.escape(mmap_dir) + r"/wdedup-bench-\d+-\d+-"
    reason = re.escape(": mmap failed: Cannot allocate memory (IoError)")
    want_failures = [re.compile(f"mapping {store}256-keys\\.ptd{reason}"),
                     re.compile(f"mapping {store}data\\.ptd{reason}")]
    failures = doc.get("failures", [])
    named = len(failures) == 2 and all(w.fullmatch(f) for w, f in zip(want_failures, failures))
    rows = sorted(f"{x['name']} vs {x.get('baseline')}" for x in doc.get("results", []))
    want_rows = sorted(f"{what}, 16 keys vs {base}" for what in ("get_tensor_layout", "missing key")
                       for base in ("unordered_map", "strcmp scan"))
    planned = 4 + (2 if allocs_counted else 0)
    lines = r.stdout.splitlines()
    left = sorted(os.listdir(mmap_dir))
    if r.returncode != 1 or not named or rows != want_rows or \
            r.stderr.splitlines() != ["wdedup-bench: FAILURE: " + f for f in failures] or \
            (doc.get("targets"), doc.get("targets_not_measured")) != (planned, planned - 1) or \
            lines[-3:] != ["FAILED: " + f for f in failures] + ["wrote " + mmap_json] or left != ["r.json"]:
        problems.append(f"stores that cannot be mapped: exit {r.returncode}, stderr {r.stderr!r}, failures "
                        f"{failures!r}, rows {rows}, targets {doc.get('targets')}/{doc.get('targets_not_measured')} "
                        f"(expected {planned}/{planned - 1}), stdout's end {lines[-4:]!r}, left {left}")
    shutil.rmtree(mmap_dir, ignore_errors=True)

# ---- a wrong answer: its measurement's rows FAILED, no other's -----------------
# wrong_first_digest.cpp flips a byte of the process's first SHA-256 digest:
# at 1 thread the reference's untimed call counts 2 contents where
# deduplicate() and the identity engine find 1, and its timed call 1 where
# that call said 2. Those two failures void the 1-thread rows (their targets
# counted as not met), and the scaling row made from their medians; the
# 2-thread rows stand. The fingerprint + SHA-256 reference, whose first call
# comes after, counts 1 throughout: its rows fail with their measurement,
# and every one says it agreed. Nothing else in a run produces a FAILED row: the
# table's cell and the JSON's "failed" were never seen by a test.
if wrong_first_digest:
    def wrong_digest_run(*references):
        """The small tensors, two of them, at 1 and 2 threads, under the shim."""
        if os.path.exists(json_path):
            os.remove(json_path)
        return run([exe, "--quick", "--no-progress", "--reps", "1", "--threads", "1,2", "--only", "dedup",
                    "--workloads", "small-tensors", "--small-tensors", "2", *references, "--json", json_path,
                    "--tmpdir", outdir], timeout=120,
                   env=dict(os.environ, LD_PRELOAD=wrong_first_digest, WBENCH_WRONG_FIRST_DIGEST="1"))

    def failed_rows(rows):
        """(name after the workload's label, threads, baseline): failed."""
        return {(x["name"].split(": ", 1)[1], x["threads"], x.get("baseline")): x.get("failed", False) for x in rows}

    def failed_at_one_thread(kinds):
        """Rows of these (what, baseline) kinds at 1 and 2 threads, and the
        scaling row: failed at 1 thread and the scaling row, not at 2."""
        want = {(what, threads, base): threads == 1 for threads in (1, 2) for what, base in kinds}
        want[("scaling vs 1 thr", 2, "read pass")] = True
        return want

    r = wrong_digest_run()
    failures = ["small tensors, 1 thread: deduplicate found 1 distinct buffer, the identity engine 1, SHA-256 2, "
                "fingerprint + SHA-256 1, expected 1",
                "small tensors, 1 thread: the SHA-256 reference found 1 distinct buffer in repetition 1, 2 in the "
                "untimed call"]
    doc = json_doc(json_path)
    rows = doc.get("results", [])
    got = failed_rows(rows)
    want = failed_at_one_thread((("deduplicate", "read pass"), ("deduplicate", "SHA-256 ref"),
                                 ("deduplicate", "fp+SHA-256 ref"),
                                 ("identity engine", "read pass"), ("identity engine", "SHA-256 ref"),
                                 ("deduplicate", "2-stream read"), ("comparisons alone", "read pass"),
                                 ("read pass", "SHA-256 ref")))
    # The 2-thread answers agreed with SHA-256's, the 1-thread ones did not.
    consistent = sorted({(x["threads"], x["extra"].get("consistent_with_sha256"),
                          x["extra"].get("consistent_with_fp_sha256")) for x in rows
                         if x["name"].endswith(": deduplicate") and x.get("baseline") == "read pass"})
    met_2 = sum(bool(x.get("met")) for x in rows if x["threads"] == 2 and "target" in x)
    said = f"{met_2} of 4 targets met (--quick: small sizes, the yes/NO mean nothing)."
    lines = r.stdout.splitlines()
    if r.returncode != 1 or r.stderr.splitlines() != ["wdedup-bench: FAILURE: " + f for f in failures] or \
            doc.get("failures") != failures or got != want or consistent != [(1, 0, 1), (2, 1, 1)] or \
            any(x.get("met") for x in rows if x["threads"] == 1) or \
            (doc.get("targets"), doc.get("targets_met"), doc.get("targets_not_measured")) != (4, met_2, 0) or \
            said not in lines or lines[-3:] != ["FAILED: " + f for f in failures] + ["wrote " + json_path]:
        problems.append(f"a wrong SHA-256 digest at 1 thread: exit {r.returncode}, stderr {r.stderr!r}, failures "
                        f"{doc.get('failures')!r}, failed rows {got!r} (expected {want!r}), consistent_with_sha256 "
                        f"and _fp_sha256 {consistent}, targets {doc.get('targets')}/{doc.get('targets_met')}/"
                        f"{doc.get('targets_not_measured')}; stdout's end {lines[-8:]!r}")
    problems += ["a wrong SHA-256 digest at 1 thread: " + p for p in table_problems(r.stdout, rows)]
    if sum(line.endswith(" FAILED") for line in lines) != 9:
        problems.append(f"a wrong SHA-256 digest at 1 thread: {sum(line.endswith(' FAILED') for line in lines)} "
                        f"table lines end in FAILED, expected the 8 rows at 1 thread and the scaling row")
    # The fingerprint + SHA-256 reference alone: the first digest is then its
    # untimed call's at 1 thread, of the two tensors that share a fingerprint
    # (both hashed): it counts 2 contents, and its timed call 1. Its timed
    # answers were never checked by a test (dropping that check passed
    # bench_quick and bench_args: mutation sweep h66, B11).
    r = wrong_digest_run("--references", "fp-sha256")
    failures = ["small tensors, 1 thread: deduplicate found 1 distinct buffer, the identity engine 1, "
                "fingerprint + SHA-256 2, expected 1",
                "small tensors, 1 thread: the fingerprint + SHA-256 reference found 1 distinct buffer in repetition 1, "
                "2 in the untimed call"]
    doc = json_doc(json_path)
    got = failed_rows(doc.get("results", []))
    want = failed_at_one_thread((("deduplicate", "read pass"), ("deduplicate", "fp+SHA-256 ref"),
                                 ("identity engine", "read pass"), ("deduplicate", "2-stream read"),
                                 ("comparisons alone", "read pass")))
    if r.returncode != 1 or r.stderr.splitlines() != ["wdedup-bench: FAILURE: " + f for f in failures] or \
            doc.get("failures") != failures or got != want:
        problems.append(f"a wrong fingerprint + SHA-256 digest at 1 thread: exit {r.returncode}, stderr {r.stderr!r}, "
                        f"failed rows {got!r}; expected 1, {failures!r}, {want!r}")

# --input-pages: the small tensors' memory is advised off or onto huge pages
# before it is first touched. Off ("small"), none of it is on one; on
# ("huge"), most of it, wherever the kernel has them to give (not under
# "[never]"; the madvised range's unaligned ends may be small pages). Every
# dedup row and the printed line say so, and the run records the setting.
def thp_setting(name):
    try:
        with open(f"/sys/kernel/mm/transparent_hugepage/{name}") as f:
            return f.read().strip()
    except OSError:
        return None


def input_pages_run(pages):
    r = run([exe, "--only", "dedup", "--workloads", "small-tensors", "--small-tensors", "4000", "--threads", "1",
             "--reps", "1", "--input-pages", pages, "--no-progress", "--json", json_path, "--tmpdir", outdir])
    if r.returncode != 0:
        problems.append(f"--input-pages {pages}: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}")
        return None, None
    with open(json_path) as f:
        doc = json.load(f)
    shares = [x["extra"].get("input_on_huge_pages") for x in doc["results"] if x["group"] == "dedup"]
    if not shares or len(set(shares)) != 1 or doc["facts"].get("input_pages") != pages or \
            doc["facts"].get("transparent_hugepage") != (thp_setting("enabled") or "unknown"):
        problems.append(f"--input-pages {pages}: shares {shares}, facts {doc['facts']}")
        return None, None
    return shares[0], r.stdout.splitlines()


share, lines = input_pages_run("small")
line = ("dedup input on huge pages: small tensors POSITIONAL 0% "
        "(--input-pages small: the small-tensor, adversarial and same-names workloads).")
if lines is not None and (share != 0 or line not in lines):
    problems.append(f"--input-pages small: share {share}, output {lines}")
# With neither workload whose pages it sets (a Llama workload alone), the
# line under the table says "none ran", as the JSON's facts do (it said
# "--input-pages small: the small-tensor and adversarial workloads").
r = run([exe, "--quick", "--only", "dedup", "--workloads", "llama-1+1", "--threads", "1", "--reps", "1",
         "--input-pages", "small", "--no-progress", "--json", json_path, "--tmpdir", outdir])
line = ("dedup input on huge pages: llama 1+1 POSITIONAL 0% (--input-pages: none ran of the small-tensor, "
        "adversarial and same-names workloads, whose pages it sets).")
said = [l for l in r.stdout.splitlines() if l.startswith("dedup input on huge pages: ")]
fact = None
if r.returncode == 0:
    with open(json_path) as f:
        fact = json.load(f)["facts"].get("input_pages")
# (The Llama input's share is the kernel's doing: any percentage.)
if r.returncode != 0 or fact != "none ran" or len(said) != 1 or \
        re.sub(r"POSITIONAL \d+%", "POSITIONAL 0%", said[0]) != line:
    problems.append(f"--input-pages small with llama-1+1 alone: exit {r.returncode}, input_pages {fact!r}, lines "
                    f"{said}; expected 'none ran' and {line!r}")
enabled, defrag = thp_setting("enabled"), thp_setting("defrag")
if enabled is not None and "[never]" not in enabled and defrag is not None and "[never]" not in defrag:
    share, lines = input_pages_run("huge")
    if lines is not None and not share > 0.5:
        problems.append(f"--input-pages huge: {share} of the input on huge pages (THP {enabled!r}, defrag {defrag!r})")

# Build rows: --compile-reps timed compilations a side, whatever --reps
# says, the warm-up untimed without --quick (bench_quick sees only
# --quick's, whose warm-up is one of them: a full run that timed one fewer
# passed every suite). One timed compilation a side and --reps 2: a count
# taken from --reps (2), one fewer (0) or the warm-up timed too (2) is as
# far off as with two and --reps 1 (where it was 1, 1 and 3), and the run
# compiles the six TUs 16 times, not 26 (14.8 s of bench_args's 74 s).
r = run([exe, "--only", "build", "--reps", "2", "--compile-reps", "1", "--no-progress", "--json", json_path,
         "--tmpdir", outdir], timeout=120)
build_reps = []
if r.returncode == 0:
    with open(json_path) as f:
        build_reps = sorted((x["name"], x["reps"], len(x.get("samples", [])), len(x.get("baseline_samples", [])))
                            for x in json.load(f)["results"])
want = [(f"#include {h} over empty TU", 1, 1, 1) for h in ("<wdedup/bench.hpp>", "<wdedup/ptd_writer.hpp>",
                                                            "<wdedup/runtime.hpp>", "<wdedup/wdedup.hpp>",
                                                            "every public header")]
if r.returncode != 0 or build_reps != want:
    problems.append(f"--only build --reps 2 --compile-reps 1: exit {r.returncode}, rows (name, reps, samples, baseline "
                    f"samples) {build_reps}; expected {want}")

# Writes: at most 5 repetitions whatever --reps says, and the rows say so.
r = run([exe, "--only", "write", "--reps", "6", "--write-bytes", "1048576", "--no-progress", "--json", json_path,
         "--tmpdir", outdir])
if r.returncode != 0:
    problems.append(f"--only write --reps 6: exit {r.returncode}: {r.stderr}")
else:
    with open(json_path) as f:
        rows = json.load(f)["results"]
    # Each note says so first (mutation sweep h65, B24: the count left out
    # of the notes where it was capped passed bench_quick and bench_args).
    capped = "5 repetitions (at most 5, whatever --reps); "
    if len(rows) != 4 or any(x["reps"] != 5 or len(x["samples"]) != 5 or not x.get("note", "").startswith(capped)
                             for x in rows):
        problems.append(f"--only write --reps 6: expected 4 rows of 5 repetitions, each note starting {capped!r}, got "
                        f"{[(x['baseline'], x['reps'], len(x['samples']), x.get('note', '')[:44]) for x in rows]}")
    # Named by the tensor bytes its GB/s counts (1,048,576), not the file's size.
    # (The last row times the writer with durability off, beside write() without fsync.)
    if any(x["name"] != ("write_ptd_file (no fsync), 1.05 MB store" if i == 3 else
                         "write_ptd_file (fsync), 1.05 MB store") or x["extra"]["data_bytes"] != 1048576
           for i, x in enumerate(rows)):
        problems.append(f"--write-bytes 1048576: row names {[x['name'] for x in rows]}")

# ---- --reps is what each group repeats, and progress stays off a pipe ----------
# Every row holds --reps samples a side and says so (a mutation test found
# groups that took 3 whatever --reps said, with 'reps' still 2): but the
# open row (at least 11) and the allocation counts (one run, no samples).
# Without --progress or --no-progress, stderr (a pipe here) gets no
# progress line: no carriage return, no escape sequence.
r = run([exe, "--quick", "--reps", "2", "--only", "dedup,runtime,write", "--workloads", "small-tensors", "--threads",
         "1", "--keys", "16", "--lookups", "1000", "--big-tensor", "65536", "--write-bytes", "1048576", "--json",
         json_path, "--tmpdir", outdir])
if r.returncode != 0:
    problems.append(f"--reps 2: exit {r.returncode}: {r.stderr}")
else:
    if "\r" in r.stderr or "\033[" in r.stderr or r.stderr:
        problems.append(f"--reps 2 with stderr a pipe: progress written there: {r.stderr!r}")
    with open(json_path) as f:
        rows = json.load(f)["results"]
    for x in rows:
        want = 11 if x["name"].startswith("open ") else 1 if x["group"] == "alloc" else 2
        n = 0 if x["group"] == "alloc" else want
        got = (x["reps"], len(x.get("samples") or []), len(x.get("baseline_samples") or []))
        if got != (want, n, n):
            problems.append(f"--reps 2: row {x['name']!r} vs {x.get('baseline')!r}: reps and samples {got}, "
                            f"expected {(want, n, n)}")
    if {x["group"] for x in rows} != {"dedup", "runtime", "write", "alloc"}:
        problems.append(f"--reps 2: groups {sorted({x['group'] for x in rows})}")

# ---- the example's command line -------------------------------------------------
usage = ("usage: example_benchmark_own_program [--mb N] [--threads N] [--reps N]\n"
         "  --mb N        MiB (2^20 bytes) of stand-in weights, 1..1000000 (default 32)\n"
         "  --threads N   threads of deduplicate() and the read pass, 1..1024 (default: every core)\n"
         "  --reps N      paired repetitions, 1..1000000 (default 9)\n")
for args, want in [(["--mbb", "4"], "unknown option '--mbb'"),
                   (["4"], "unknown option '4'"),
                   (["--mb", "1", "--reps"], "--reps needs a value"),
                   (["--threads", "1025"], "--threads needs an integer in 1..1024, got '1025'"),
                   (["--mb", " 1"], "--mb needs an integer in 1..1000000, got ' 1'"),
                   (["--reps", "0"], "--reps needs an integer in 1..1000000, got '0'")]:
    r = run([example] + args)
    want = "example_benchmark_own_program: " + want + "\n" + usage
    if r.returncode != 2 or r.stderr != want or r.stdout != "":
        problems.append(f"example {args}: exit {r.returncode}, stderr {r.stderr!r}; expected 2, {want!r}")
# More memory than this process can have: refused before allocating (it
# ended in std::bad_alloc, exit 134), naming the limit as the harness does.
before = memory_limit()[0]
r = run([example, "--mb", "1000000"])
m = re.fullmatch(r"example_benchmark_own_program: --mb 1000000 is more than the ([0-9]+) MiB this process can have "
                 r"\((.*)\)\n", r.stderr)
wrong = "not that pattern" if not m else \
    f"not {LIMIT_SOURCE!r}" if m.group(2) != LIMIT_SOURCE else limit_near(int(m.group(1)) << 20, before)
if r.returncode != 2 or wrong:
    problems.append(f"example --mb 1000000: exit {r.returncode}, stderr {r.stderr!r} ({wrong})")
r = run([example, "--help"])
if r.returncode != 0 or r.stdout != usage:
    problems.append(f"example --help: exit {r.returncode}, stdout {r.stdout!r}")
# --help whose text is lost (stdout on a full device): exit 1, said.
if os.path.exists("/dev/full"):
    for prog, name in ((exe, "wdedup-bench"), (example, "example_benchmark_own_program")):
        with open("/dev/full", "w") as full:
            r = subprocess.run([prog, "--help"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        if r.returncode != 1 or r.stderr != f"{name}: writing to standard output failed: No space left on device\n":
            problems.append(f"{name} --help, stdout on /dev/full: exit {r.returncode}, stderr {r.stderr!r}")
r = run([example, "--mb", "2", "--reps", "1", "--threads", "1"])
if r.returncode != 0 or "ratio:" not in r.stdout:
    problems.append(f"example --mb 2 --reps 1 --threads 1: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")

# --progress asked for with stderr a pipe (a log file): one line each, no
# carriage return or escape sequence running them together.
r = run([exe, "--quick", "--progress", "--reps", "2", "--only", "dedup", "--workloads", "llama-1+1", "--threads", "1",
         "--json", json_path, "--tmpdir", outdir])
lines = r.stderr.splitlines()
if r.returncode != 0 or "\r" in r.stderr or "\033[" in r.stderr or \
        "dedup llama 1+1, 1 thread: repetition 2/2" not in lines or \
        not all(l.startswith(("dedup ", "runtime ", "write ", "build ")) for l in lines):
    problems.append(f"--progress with stderr a pipe: exit {r.returncode}, stderr {r.stderr!r}")
# The generation says it started, then its tenths, rising, up to 100%.
generating = [l for l in lines if l.startswith("dedup llama 1+1: generating the workload")]
tenths = [int(m.group(1)) for l in generating[1:] for m in [re.fullmatch(r".*, (\d+)0%", l)] if m]
if generating[:1] != ["dedup llama 1+1: generating the workload"] or len(tenths) != len(generating) - 1 or \
        not tenths or tenths[-1] != 10 or tenths != sorted(set(tenths)) or tenths[0] < 1:
    problems.append(f"--progress with stderr a pipe: the generation's lines {generating!r}; expected its start, "
                    "then tenths rising to 100%")

# A write row is named in a unit that fits its tensor bytes: kB for 1000
# (a user trial's --write-bytes 1000 read "1.38e-06 GB store"), MB for
# 999,999, 1.00 MB at three digits (it read "1e+03 kB store": mutation
# sweep h65, B22).
for size, figure in (("1000", "1 kB"), ("999999", "1 MB")):
    r = run([exe, "--quick", "--only", "write", "--write-bytes", size, "--reps", "1", "--no-progress", "--json",
             json_path, "--tmpdir", outdir])
    if r.returncode != 0:
        problems.append(f"--only write --write-bytes {size}: exit {r.returncode}: {r.stderr}")
        continue
    with open(json_path) as f:
        names = sorted({x["name"] for x in json.load(f)["results"]})
    want = [f"write_ptd_file (fsync), {figure} store", f"write_ptd_file (no fsync), {figure} store"]
    if names != want:
        problems.append(f"--write-bytes {size}: row names {names}, expected {want}")

# Threads no more than the cores: no note that they share them; and where
# deduplicate() ran on all it was given (2 on the tiny model, which has work
# for more), no line says it ran on fewer.
cores = len(os.sched_getaffinity(0))
given = ",".join(str(t) for t in sorted({2, cores}))
r = run([exe, "--quick", "--only", "dedup", "--workloads", "llama-1+1", "--threads", given, "--reps", "1",
         "--no-progress", "--tmpdir", outdir], timeout=120)
if r.returncode != 0 or ("note: --threads" in r.stdout) != (cores < 2) or \
        any(l.startswith("llama 1+1 POSITIONAL, 2 thr: deduplicate() ran on") for l in r.stdout.splitlines()):
    problems.append(f"--threads {given} with {cores} cores: exit {r.returncode}, stdout {r.stdout!r}")

# One more thread than the cores: the note, from the first count past them
# (the run above gives 2, bench_quick's 64; a note from cores + 2 on passed).
if cores < 1024:
    r = run([exe, "--quick", "--only", "dedup", "--workloads", "adversarial", "--threads", str(cores + 1), "--reps",
             "1", "--no-progress", "--tmpdir", outdir, "--json", json_path], timeout=120)
    note = f"note: --threads {cores + 1} is more than the {cores} cores this process may run on: threads share cores"
    if r.returncode != 0 or note not in r.stdout.splitlines():
        problems.append(f"--threads {cores + 1} with {cores} cores: exit {r.returncode}, no line {note!r}: "
                        f"{r.stdout!r}")
# kMaxThreads (1024) itself is a thread count (the refusals start past it:
# refusing 1024 passed them); deduplicate() runs on what the work is worth.
r = run([exe, "--quick", "--only", "dedup", "--workloads", "adversarial", "--threads", "1024", "--reps", "1",
         "--no-progress", "--tmpdir", outdir, "--json", json_path], timeout=120)
doc = json_doc(json_path, r.returncode == 0)
threads_given = sorted({x["threads"] for x in doc.get("results", [])})
if r.returncode != 0 or doc["facts"].get("dedup_threads") != "1024" or threads_given != [1024]:
    problems.append(f"--threads 1024: exit {r.returncode}, {r.stderr!r}, dedup_threads "
                    f"{doc.get('facts', {}).get('dedup_threads')!r}, rows at {threads_given}; expected a run at 1024")

# --adversarial's COUNT and BYTES may be equal (each list flag but this one
# refuses a value given twice): 4096 distinct tensors of 4096 bytes.
r = run([exe, "--quick", "--only", "dedup", "--workloads", "adversarial", "--adversarial", "4096,4096", "--threads",
         "1", "--reps", "1", "--no-progress", "--json", json_path, "--tmpdir", outdir])
doc = json_doc(json_path, r.returncode == 0)
got = sorted({(x["extra"].get("tensors"), x["extra"].get("distinct_buffers"), x["extra"].get("bytes_examined"))
              for x in doc.get("results", []) if x["name"] == "adversarial POSITIONAL: deduplicate"})
if r.returncode != 0 or got != [(4096, 4096, 16777216)]:
    problems.append(f"--adversarial 4096,4096: exit {r.returncode}, stderr {r.stderr.strip()!r}, deduplicate rows' "
                    f"(tensors, distinct, bytes examined) {got}; expected [(4096, 4096, 16777216)]")

# ---- --references: the references a run times ----------------------------------
# Each alone: only its rows, its own consistency check, the targets it sets
# (the read pass's and, with sha256, the 8x one at each thread count), and
# the facts say which ran. Both is the default (bench_quick's rows).
# (facts.references names them in one order, whatever order they were given in.)
for refs, facts, baselines, targets, consistency in (
        ("fp-sha256", "fp-sha256", ["2-stream read", "fp+SHA-256 ref", "read pass"], 2,
         ["consistent_with_fp_sha256"]),
        ("sha256", "sha256", ["2-stream read", "SHA-256 ref", "read pass"], 4, ["consistent_with_sha256"]),
        ("fp-sha256,sha256", "sha256,fp-sha256", ["2-stream read", "SHA-256 ref", "fp+SHA-256 ref", "read pass"], 4,
         ["consistent_with_fp_sha256", "consistent_with_sha256"])):
    r = run([exe, "--quick", "--only", "dedup", "--workloads", "adversarial", "--adversarial", "16,4096", "--threads",
             "1,2", "--reps", "1", "--references", refs, "--no-progress", "--json", json_path, "--tmpdir", outdir])
    doc = json_doc(json_path, r.returncode == 0)
    rows = doc.get("results", [])
    got = (doc.get("facts", {}).get("references"), sorted({x["baseline"] for x in rows if x["name"].endswith(
        ": deduplicate")}), doc.get("targets"), sorted({k for x in rows for k in x["extra"] if k.startswith(
        "consistent_with")}), doc.get("failures"))
    want = (facts, baselines, targets, consistency, [])
    if r.returncode != 0 or got != want:
        problems.append(f"--references {refs}: exit {r.returncode}, stderr {r.stderr.strip()!r}; facts.references, "
                        f"deduplicate()'s baselines, targets, consistency fields, failures {got}; expected {want}")

os.remove(not_a_dir)
if problems:
    sys.exit("wdedup-bench command line:\n  " + "\n  ".join(problems))
print(f"bench_args: {len(refusals)} refusals, the accepted runs and the example's command line as expected")

