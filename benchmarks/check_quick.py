#!/usr/bin/env python3
"""CI check of the benchmark harness: runs `wdedup-bench --quick` and checks
that it completes and writes valid JSON with every group's rows. No timing
is asserted: CI machines are shared and small sizes mean nothing."""
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

from bench_table import table_problems


def counted(n, noun):
    """'1 thread', '2 threads': a count in words, as the harness prints them."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


exe, outdir, fixtures, demo = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
# The fuzz corpus's seed writer (built with the tests; absent with -Dtests=false).
make_seeds = sys.argv[5] if len(sys.argv) > 5 else None
path = os.path.join(outdir, "bench-quick.json")
if os.path.exists(path):
    os.remove(path)
run = subprocess.run([exe, "--quick", "--no-progress", "--json", path, "--tmpdir", outdir],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
print(run.stdout)
if run.returncode != 0:
    sys.exit(f"wdedup-bench --quick exited with {run.returncode}")
# The built-in workloads' engine reads their bytes: no line says otherwise.
if " reads about " in run.stdout:
    sys.exit("wdedup-bench --quick says a built-in workload's bytes are mostly not read")
with open(path) as f:
    doc = json.load(f)

problems = []
rows = doc.get("results")
if not isinstance(rows, list) or not rows:
    problems.append("no results")
    rows = []
groups = {r.get("group") for r in rows}
for g in ("dedup", "runtime", "write", "build", "alloc"):
    if g not in groups:
        problems.append(f"no '{g}' rows")
for r in rows:
    for key, kind in (("group", str), ("name", str), ("value", (int, float)), ("unit", str), ("reps", int)):
        if not isinstance(r.get(key), kind):
            problems.append(f"row {r.get('name')!r}: '{key}' missing or not {kind}")
    if isinstance(r.get("value"), float) and not math.isfinite(r["value"]):
        problems.append(f"row {r.get('name')!r}: value is not finite")
    if r.get("baseline") and not isinstance(r.get("ratio"), (int, float)):
        problems.append(f"row {r.get('name')!r}: a baseline without a ratio")
    if "target" in r and not isinstance(r.get("met"), bool):
        problems.append(f"row {r.get('name')!r}: a target without 'met'")
for key in ("command", "date", "targets", "targets_met"):
    if key not in doc:
        problems.append(f"no '{key}'")
if doc.get("interrupted") is not False:  # a run that ran to its end (check_args: one stopped)
    problems.append(f"'interrupted': {doc.get('interrupted')!r} in a run nothing stopped")
# (check_args: a run without --quick says false.)
if doc.get("quick") is not True:
    problems.append(f"'quick': {doc.get('quick')!r} in a --quick run")
# Every row's name fits the table's column of 44: the build row of every
# public header was named by its three headers, 106 characters, and pushed
# the rest of its line out of line. The note names them instead.
for r in rows:
    if len(r.get("name", "")) > 44:
        problems.append(f"row {r['name']!r}: {len(r['name'])} characters, past the table's 44")
# The table against the JSON, row by row (bench_table.py, shared with
# check_args.py's run with FAILED rows).
problems += table_problems(run.stdout, rows)
build_notes = {r["name"]: r.get("note", "") for r in rows if r.get("group") == "build"}
every = "#include every public header over empty TU"
if sorted(build_notes) != ["#include <wdedup/runtime.hpp> over empty TU", every] or \
        not build_notes[every].endswith("; the TU includes <wdedup/wdedup.hpp>, <wdedup/bench.hpp> and "
                                        "<wdedup/runtime/verify.hpp>"):
    problems.append(f"build rows {build_notes!r}")
# --help gives --quick's sizes, each the one this run used: the workloads'
# notes, the lookups a pass, the big tensor's row and the written bytes (it
# gave --quick's --reps, --model and --compile-reps alone).
help_text = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, text=True).stdout
help_flags = {}
for line in help_text.splitlines():
    if line.startswith("  --"):
        flag = line.split()[0]
        help_flags[flag] = line
    elif line.startswith("      ") and help_flags:
        help_flags[flag] += " " + line.strip()


def first(pred):
    return next((r for r in rows if pred(r)), {})


used = {
    # (also the same-names workload's count)
    "--small-tensors": ("10000", first(lambda r: r["name"].startswith("small tensors")).get("note", "")
                        .startswith("10000 tensors of 4096 B, ") and
                        first(lambda r: r["name"].startswith("same names")).get("note", "")
                        .startswith("10000 tensors of 4096 B over two methods")),
    "--adversarial": ("256,65536", first(lambda r: r["name"].startswith("adversarial")).get("note", "")
                      .startswith("256 distinct tensors of 65536 B")),
    "--lookups": ("32768", first(lambda r: "lookups_per_pass" in r.get("extra", {}))
                  .get("extra", {}).get("lookups_per_pass") == 32768),
    "--big-tensor": ("16 MiB", bool(first(lambda r: r["name"] == "get_data (mmap), 16777216 B tensor"))),
    "--write-bytes": ("32 MiB", first(lambda r: r["group"] == "write").get("extra", {}).get("data_bytes") == 32 << 20),
    # (A --quick of 4 repetitions passed every suite: the rows' reps were
    # only held to their samples.)
    "--reps": ("3", doc.get("reps") == 3 and all(r["reps"] == 3 for r in rows if r["group"] in ("dedup", "runtime")
                                                 and not r["name"].startswith("open ") and "samples" in r)),
}
for flag, (quick_value, ran) in used.items():
    if f"--quick {quick_value})" not in help_flags.get(flag, ""):
        problems.append(f"--help on {flag}: {help_flags.get(flag)!r}, without '--quick {quick_value})'")
    if not ran:
        problems.append(f"the --quick run did not use {flag} {quick_value}, as --help says it does")
# --quick's --compile-reps is 2, the warm-up compilation one of them (as
# --help says): two samples a side on each build row. A third compilation
# (the warm-up not counted) passed every suite: the rows' reps were held
# only to their own samples.
build_reps = [(r["reps"], len(r.get("samples", [])), len(r.get("baseline_samples", []))) for r in rows
              if r.get("group") == "build"]
if not build_reps or any(x != (2, 2, 2) for x in build_reps):
    problems.append(f"build rows' reps, samples and baseline samples {build_reps}: expected 2 each (--quick's "
                    "--compile-reps 2, the warm-up one of them)")
# The comparisons alone: only where every duplicate is a small tensor (the
# small tensors; the Llama workloads' duplicates are big, the adversarial
# and same-names ones have none), one row per thread count, reading both sides of each of
# --quick's 5,000 pairs of 4 KiB: every examined byte once.
alone = [r for r in rows if r.get("name", "").endswith(": comparisons alone")]
if sorted((r["name"], r["threads"]) for r in alone) != [("small tensors POSITIONAL: comparisons alone", t)
                                                         for t in map(int, doc["facts"]["dedup_threads"].split(","))]:
    problems.append(f"comparisons-alone rows: {[(r['name'], r['threads']) for r in alone]}")
for r in alone:
    if (r["baseline"], r["extra"].get("pair_bytes"), r["extra"].get("bytes_examined")) != \
            ("read pass", 2 * 5000 * 4096, 10000 * 4096):
        problems.append(f"comparisons-alone row {r['threads']} thr: {r['baseline']!r}, {r['extra']}")
# The lookups of present keys: each pass visits the store's keys in shuffled
# rounds, max(keys, 4096) queries in all, at most --lookups (--quick's
# 32,768), so a small store's pass does not cycle through 16 queries a
# branch predictor learns (README, Lookups). Its rows against unordered_map
# say so exactly (a pass of only the keys, 16 queries at 16 keys, passed
# every suite).
lookup_extras = sorted((r["extra"].get("keys"), r["extra"].get("lookups_per_pass"), r["extra"].get("distinct_queries"))
                       for r in rows if r.get("group") == "runtime" and r["name"].startswith("get_tensor_layout, ")
                       and r.get("baseline") == "unordered_map")
want_extras = [(k, 32768, min(32768, max(k, 4096))) for k in (16, 256, 4096, 65536)]
if lookup_extras != want_extras:
    problems.append(f"lookup rows' keys, lookups_per_pass, distinct_queries {lookup_extras}, expected {want_extras}")
# The rest of the runtime group's rows, exactly: each scan row says how many
# lookups its passes made (--quick's budget of 1,000,000 strcmp calls over
# keys / 2 a hit, between 16 and --lookups: 32,768, 7,812, 488 and 30 at
# 16 to 65,536 keys), the open row its 11 repetitions (whatever --reps),
# the allocation counts their names and unit. (Mutation sweep h65: the
# scan's count halved (B2), its keys doubled (B3), the open row's note
# without its repetitions (B8), the unit "alloc" (B10) and the second count
# named "1M lookups" (B12) passed bench_quick and bench_args.)
scan_extras = sorted((r["name"], r["extra"].get("keys"), r["extra"].get("scan_lookups_per_pass"))
                     for r in rows if r.get("group") == "runtime" and r.get("baseline") == "strcmp scan"
                     and r["name"].startswith("get_tensor_layout, "))
want_scan = sorted((f"get_tensor_layout, {k} keys", k, min(32768, max(16, 1000000 // (k // 2))))
                   for k in (16, 256, 4096, 65536))
if scan_extras != want_scan:
    problems.append(f"scan rows' (name, keys, scan_lookups_per_pass) {scan_extras}, expected {want_scan}")
open_rows = [(r["name"], r.get("baseline"), r["unit"], r["reps"], r.get("note")) for r in rows
             if r.get("group") == "runtime" and r["name"].startswith("open ")]
want_open = [("open (mmap + validate), 65536 keys", "build unordered_map", "us", 11,
              "open maps the file anew each time: page faults on the metadata are included; 11 repetitions "
              "(at least 11, whatever --reps)")]
if open_rows != want_open:
    problems.append(f"open rows {open_rows}, expected {want_open}")
alloc_rows = [(r["name"], r["unit"], r["reps"], "samples" in r) for r in rows if r.get("group") == "alloc"]
want_alloc = [("heap allocations: open, 65536 keys", "allocs", 1, False),
              ("heap allocations: 1M get_tensor_layout", "allocs", 1, False)]
if alloc_rows != want_alloc:
    problems.append(f"allocation rows (name, unit, reps, has samples) {alloc_rows}, expected {want_alloc}")
# The write rows: each says the store's tensor bytes (--quick's 32 MiB, one
# key) and the size of the file write_ptd_file made of them, 384 bytes more.
# (Mutation sweep h65, B20: file_size given as the tensor bytes passed
# bench_quick and bench_args.)
write_extras = [r.get("extra") for r in rows if r.get("group") == "write"]
if write_extras != [{"file_size": 33554816, "data_bytes": 33554432}] * 4:
    problems.append(f"write rows' extra fields {write_extras}, expected file_size 33554816 and data_bytes 33554432 "
                    "on each of 4")
# The dedup workloads, in the order of their rows (the label before ':').
dedup_labels = list(dict.fromkeys(r["name"].split(":")[0] for r in rows if r.get("group") == "dedup"))
# ExecuTorch's NamedDataStore since pytorch/executorch#18351 (the
# fingerprint + SHA-256 reference): one row a workload and thread count,
# deduplicate() against it, with no target; every dedup row says the
# reference agreed. It hashes every buffer whose length and first 32 bytes
# another has: in the tiny Llama model, each method's copy of every weight
# (2 x (1 + 11 x 4 layers + 1) = 92 buffers; the tied output weight is the
# embedding's memory) and neither causal mask (prefill's 32 x 128 floats,
# decode's 1 x 128: 16,896 bytes, of other sizes); the small tensors, each
# one's copy; the same names, each one (the second method's share their
# namesake's length and first bytes, and differ only in the last: each
# hashed once, 10,000 of 4 KiB); the adversarial tensors, whose first KiB is
# one, all. Each
# adversarial tensor but the first and the last is hashed a second time
# (stored as a candidate, its digest on arrival not kept): 256 distinct
# buffers of one fingerprint, 2 x 256 - 2 hashes. The copies merge with
# their fingerprint's first buffer, hashed once.
fp_rows = [r for r in rows if r.get("group") == "dedup" and r.get("baseline") == "fp+SHA-256 ref"]
want_fp = sorted((label + ": deduplicate", t) for label in dedup_labels
                 for t in map(int, doc["facts"]["dedup_threads"].split(",")))
if sorted((r["name"], r["threads"]) for r in fp_rows) != want_fp:
    problems.append(f"fp+SHA-256 ref rows {sorted((r['name'], r['threads']) for r in fp_rows)}, expected {want_fp}")
for r in fp_rows:
    e = r["extra"]
    if r["name"].startswith("llama "):
        want = (92, 0, e["bytes_examined"] - 4 * (32 + 1) * 128)
    elif r["name"].startswith("small tensors") or r["name"].startswith("same names"):
        want = (10000, 0, 10000 * 4096)
    else:
        want = (256, 254, (256 + 254) * 65536)
    got = (e.get("buffers_hashed_by_baseline"), e.get("buffers_hashed_again_by_baseline"),
           e.get("bytes_hashed_by_baseline"))
    if got != want or "target" in r or \
            not r.get("note", "").endswith("; against ExecuTorch's NamedDataStore since pytorch/executorch#18351: "
                                           "SHA-256 only of buffers whose length and first 32 bytes another buffer "
                                           "has, merged on digest"):
        problems.append(f"row {r['name']!r} ({r['threads']} thr) vs fp+SHA-256 ref: hashed {got}, expected {want}; "
                        f"target {r.get('target')!r}; note {r.get('note')!r}")
inconsistent = [(r["name"], r["threads"], r.get("baseline")) for r in rows if r.get("group") == "dedup" and
                not r["name"].endswith(": scaling vs 1 thr") and
                (r["extra"].get("consistent_with_sha256"), r["extra"].get("consistent_with_fp_sha256")) != (1, 1)]
if inconsistent:
    problems.append(f"dedup rows not consistent with both references: {inconsistent}")
# Each dedup row's units: GB/s on both sides, the scaling rows' "x" on both.
# The figures below are checked only under a unit they know: "MB/s" for
# every GB/s figure, or for every baseline's, passed bench_quick and
# bench_args (mutation sweep h66, B23 and B24).
dedup_units = sorted({(r["name"].endswith(": scaling vs 1 thr"), r.get("unit"), r.get("baseline_unit"))
                      for r in rows if r.get("group") == "dedup"})
if dedup_units != [(False, "GB/s", "GB/s"), (True, "x", "x")]:
    problems.append(f"dedup rows' (scaling row, unit, baseline unit) {dedup_units}, expected "
                    "(False, 'GB/s', 'GB/s') and (True, 'x', 'x')")


def check_shape(workload, fields, want):
    """Fields measured on a workload's bytes (Workload::shape): `want` on
    every row of the workload (its label starts with `workload`) but the
    scaling ones, and on no other row."""
    got = sorted({(r["name"].split(":")[0], *(r["extra"].get(f) for f in fields))
                  for r in rows if r.get("group") == "dedup" and not r["name"].endswith(": scaling vs 1 thr")})
    expected = sorted((label, *want) if label.startswith(workload) else (label,) + (None,) * len(fields)
                      for label in {g[0] for g in got})
    if not any(g[0].startswith(workload) for g in got) or got != expected:
        problems.append(f"dedup rows' (workload, {', '.join(fields)}) {got}, expected {expected}")


# The adversarial tensors (--quick: 256 of 64 KiB) share, with the first,
# everything but the 8-byte tag ~i just before the last KiB: their first
# 64,504 bytes (65,536 - 1,024 - 8) and their last 1,031 (the KiB, and the
# tag's 7 high bytes, 0xFF for every i below 256). Measured on the bytes
# and given on every adversarial row but the scaling ones, nowhere else: a
# tag moved into the last KiB, or to just past the first, passed
# bench_quick and bench_args (mutation sweep h66, B3 and B4).
check_shape("adversarial", ("shared_head_bytes", "shared_tail_bytes"), (64504, 1031))
# The same names (--quick: 10,000 tensors of 4 KiB over two methods): each
# of the second method's 5,000 has a namesake of its size in the first with
# other bytes, and shares its first 4,095 bytes with it. Measured on the
# bytes, on every same-names row but the scaling ones, nowhere else: the
# workload is the one whose hints all fail, and that says they do.
check_shape("same names", ("namesakes_differing", "namesake_shared_head_bytes"), (5000, 4095))
# Each scaling row's note: its workload's, and, where deduplicate() ran on
# fewer threads than given, a line saying so; none where it ran on all (a
# note of "ran on 2 of the 2 threads given" passed bench_quick and
# bench_args: mutation sweep h66, B27; bench_many_threads checks the line).
for r in rows:
    if r.get("group") != "dedup" or not r["name"].endswith(": scaling vs 1 thr"):
        continue
    ran_on = r["extra"].get("threads_run")
    want = first(lambda x: x.get("group") == "dedup" and x.get("baseline") == "read pass" and
                 x["name"] == r["name"].rsplit(":", 1)[0] + ": deduplicate").get("note", "")
    if ran_on < r["threads"]:
        want += (f"; deduplicate() ran on {ran_on:.0f} of the {r['threads']} threads given (one per 4 MiB of work), "
                 "and so did the read pass")
    if r.get("note") != want:
        problems.append(f"row {r['name']!r} ({r['threads']} thr, threads_run {ran_on}): note {r.get('note')!r}, "
                        f"expected {want!r}")
# What a call takes: one line a workload, each thread count's median of its
# deduplicate() row against the read pass (samples: seconds a call), in ms
# under a second, at printf's %.3g: compared within half its last digit (the
# JSON keeps the samples to 6 digits, which can tip a rounding).
def call_line(label):
    for line in run.stdout.splitlines():
        m = re.fullmatch(re.escape(label) + r": a deduplicate\(\) call takes (.+) \(medians of (\d+) calls, "
                         r"over ([\d.e+]+) (GB|MB)\)\.", line)
        if m:
            return m
    return None


for label in dedup_labels:
    timed = [r for r in rows if r.get("group") == "dedup" and r["name"] == label + ": deduplicate"
             and r.get("baseline") == "read pass" and r.get("samples") and not r.get("failed")]
    m = call_line(label)
    if not timed:
        if m:
            problems.append(f"a call-time line for {label!r}, which has no deduplicate row")
        continue
    if not m:
        problems.append(f"no line saying what a deduplicate() call of {label!r} takes")
        continue
    figures = [re.fullmatch(r"([\d.e+]+) (ms|s) at (\d+) thr", f) for f in m.group(1).split(", ")]
    if None in figures or [int(f.group(3)) for f in figures] != [r["threads"] for r in timed]:
        problems.append(f"{label!r}: call times {m.group(1)!r} for threads {[r['threads'] for r in timed]}")
        continue
    for f, r in zip(figures, timed):
        sec = statistics.median(r["samples"])
        got = float(f.group(1)) * (1e-3 if f.group(2) == "ms" else 1)
        if (f.group(2) == "s") != (sec >= 1) or abs(got - sec) > 5e-3 * sec:
            problems.append(f"{label!r} at {r['threads']} thr: {f.group(0)!r}, its samples' median {sec} s")
    size = timed[0]["extra"]["bytes_examined"]
    got = float(m.group(3)) * (1e9 if m.group(4) == "GB" else 1e6)
    # (The calls of its last row, as main.cpp counts them: every row's, in a run.)
    if int(m.group(2)) != len(timed[-1]["samples"]) or (m.group(4) == "GB") != (size >= 1e9) or \
            abs(got - size) > 5e-3 * size:
        problems.append(f"{label!r}: {m.group(0)!r} for {len(timed[-1]['samples'])} calls over {size} bytes")
# What a call takes in memory: one line a workload, each thread count's
# resident_added_bytes (bench::resident_peak over one untimed call), on
# every deduplicate row, in MB at %.3g, and the largest as a share of the
# bytes examined. This runs on Linux, where it is measured: each figure is
# a count of pages (4 KiB on this project's machines), and a program of
# 5,000 pairs of 4 KiB holds at least a row and a key a tensor.
for label in dedup_labels:
    dedup_rows = [r for r in rows if r.get("group") == "dedup" and r["name"] == label + ": deduplicate"]
    for r in dedup_rows:
        added = r["extra"].get("resident_added_bytes")
        if added is None or added < 0 or added % 4096 != 0:
            problems.append(f"{label!r} {r['baseline']!r} {r['threads']} thr: resident_added_bytes {added}")
    # Only deduplicate()'s rows: the other contenders' calls were not measured.
    others = [r["name"] for r in rows if r.get("group") == "dedup" and r["name"].split(":")[0] == label and
              r["name"] != label + ": deduplicate" and "resident_added_bytes" in r.get("extra", {})]
    if others:
        problems.append(f"{label!r}: resident_added_bytes on rows not of deduplicate(): {sorted(set(others))}")
    timed = [r for r in dedup_rows if r.get("baseline") == "read pass" and not r.get("failed")]
    lines = [re.fullmatch(re.escape(label) + r": a deduplicate\(\) call adds (.+) of resident memory at its peak, "
                          r"its result included \(one untimed call each; at most ([\d.e+]+)% of the ([\d.e+]+) "
                          r"(GB|MB) it examines\)\.", line) for line in run.stdout.splitlines()]
    lines = [m for m in lines if m]
    if len(lines) != (1 if timed else 0):
        problems.append(f"{len(lines)} lines saying what a deduplicate() call of {label!r} holds")
        continue
    if not timed:
        continue
    m = lines[0]
    figures = [re.fullmatch(r"([\d.e+]+) MB at (\d+) thr", f) for f in m.group(1).split(", ")]
    if None in figures or [int(f.group(2)) for f in figures] != [r["threads"] for r in timed]:
        problems.append(f"{label!r}: memory {m.group(1)!r} for threads {[r['threads'] for r in timed]}")
        continue
    for f, r in zip(figures, timed):
        want = r["extra"]["resident_added_bytes"]
        if abs(float(f.group(1)) * 1e6 - want) > 5e-3 * want:
            problems.append(f"{label!r} at {r['threads']} thr: {f.group(0)!r}, resident_added_bytes {want}")
    size = timed[0]["extra"]["bytes_examined"]
    share = 100 * max(r["extra"]["resident_added_bytes"] for r in timed) / size
    if abs(float(m.group(2)) - share) > 5e-3 * share:
        problems.append(f"{label!r}: {m.group(2)}% of its input, {share}% from the JSON")
    if label.startswith("small tensors") and \
            min(r["extra"]["resident_added_bytes"] for r in timed) < 10000 * (16 + 16):
        problems.append(f"{label!r}: {m.group(1)!r}, less than 32 bytes a tensor")
# Steadiness (benchmarks/steadiness.hpp): each row's median over its fastest
# repetition, each side (bench::median_over_fastest); judged on a row that
# did not fail and has 3 or more samples on a side, steady if every such
# side is at most 1.5 (bench::kUnsteady); the run's count; and the lines
# under the table that list the unsteady rows (or say none is).
def median_over_fastest(samples):
    return statistics.median(samples) / min(samples) if min(samples) > 0 else 0


# Each side's samples, and the JSON field of its median over fastest.
SIDES = {"samples": "median_over_fastest", "baseline_samples": "baseline_median_over_fastest"}


def judged_sides(r):
    return [side for side in SIDES if len(r.get(side) or []) >= 3]


def workload_of(r):
    return r["name"].split(":", 1)[0]


out_lines = run.stdout.splitlines()
judged, unsteady = [], []
for r in rows:
    for side, key in SIDES.items():
        if not r.get(side):
            if key in r:
                problems.append(f"row {r['name']!r}: {key} without {side}")
            continue
        # The samples are printed to 6 significant digits: the figure made
        # from them agrees to about that.
        want = median_over_fastest(r[side])
        if not isinstance(r.get(key), (int, float)) or abs(r[key] - want) > 1e-4 * max(want, 1):
            problems.append(f"row {r['name']!r}: {key} {r.get(key)!r}, its {side} give {want}")
    if r.get("failed") or not judged_sides(r):
        if "steady" in r:
            problems.append(f"row {r['name']!r}: not judged (failed, or under 3 samples a side), yet 'steady'")
        continue
    judged.append(r)
    spreads = [median_over_fastest(r[side]) for side in judged_sides(r)]
    # Within a rounding step of the limit, C++'s unrounded figure decides.
    if any(abs(x - 1.5) < 1e-4 for x in spreads):
        steady = r.get("steady")
    else:
        steady = all(x <= 1.5 for x in spreads)
    if r.get("steady") is not steady:
        problems.append(f"row {r['name']!r}: steady {r.get('steady')!r}, its samples' medians over fastest {spreads}")
    if not r.get("steady"):
        unsteady.append(r)
if doc.get("unsteady_rows") != len(unsteady):
    problems.append(f"unsteady_rows {doc.get('unsteady_rows')!r}, {len(unsteady)} rows say they are unsteady")
if not judged:
    if not any(l.startswith("steadiness not judged: ") for l in out_lines):
        problems.append("no judged row, and no line saying so under the table")
elif not unsteady:
    want_line = "steady: every judged row's median is within 1.5x of its fastest repetition, both sides."
    if want_line not in out_lines:
        problems.append(f"no unsteady row, and no line {want_line!r} under the table")
else:
    head = f"unsteady: {len(unsteady)} of {len(judged)} judged rows have a median over 1.5x their fastest repetition"
    if not any(l.startswith(head) for l in out_lines):
        problems.append(f"{len(unsteady)} unsteady rows, and no line starting {head!r} under the table")
    # After the row's name: each judged side's figure, " 2.50x", ", baseline <name> 1.00x".
    pattern = re.compile(r"(?: (\d+\.\d\d)x)?(?:,? baseline .* (\d+\.\d\d)x)?")
    for r in unsteady:
        thr = f", {r['threads']} thr" if r["threads"] else ""
        prefix = f"  {r['name']}{thr}:"
        # Each judged side's figure to two decimals (from the JSON's six
        # digits: to within a rounding step).
        want = [r.get(SIDES[side]) for side in judged_sides(r)]
        found = False
        for l in out_lines:
            m = pattern.fullmatch(l[len(prefix):]) if l.startswith(prefix) else None
            got = [float(v) for v in m.groups() if v is not None] if m else None
            if got is not None and len(got) == len(want) and \
                    all(abs(g - w) <= 0.006 + 1e-5 * w for g, w in zip(got, want)):
                found = True
        if not found:
            problems.append(f"unsteady row {r['name']!r} ({r['threads']} thr) not listed as {prefix!r} with {want}")
# SHA-256's pace: a dedup row's SHA-256 GB/s over the median of the run's
# workloads' at its thread count (three or more; failed rows and speeds of
# 0 left out), and the workload runs more than 1.5x off it, counted once
# each and listed.
sha_rows = [r for r in rows if r["group"] == "dedup" and r.get("baseline") == "SHA-256 ref" and not r.get("failed")
            and r.get("baseline_value", 0) > 0]
off_pace = []
for r in sha_rows:
    speeds = {}
    for o in sha_rows:
        if o["threads"] == r["threads"]:
            speeds.setdefault(workload_of(o), o["baseline_value"])
    if len(speeds) < 3:
        if "sha256_vs_run_median" in r:
            problems.append(f"row {r['name']!r} ({r['threads']} thr): a pace with {len(speeds)} workloads")
        continue
    want = r["baseline_value"] / statistics.median(speeds.values())
    got = r.get("sha256_vs_run_median")
    if not isinstance(got, (int, float)) or abs(got - want) > 1e-4 * max(want, 1):
        problems.append(f"row {r['name']!r} ({r['threads']} thr): sha256_vs_run_median {got!r}, expected {want}")
    elif (got > 1.5 or got * 1.5 < 1) and (workload_of(r), r["threads"]) not in off_pace:
        off_pace.append((workload_of(r), r["threads"]))
if any("sha256_vs_run_median" in r for r in rows if r not in sha_rows):
    problems.append("a row without a SHA-256 baseline has a SHA-256 pace")
if doc.get("sha256_off_pace_runs") != len(off_pace):
    problems.append(f"sha256_off_pace_runs {doc.get('sha256_off_pace_runs')!r}, expected {len(off_pace)}")
for workload, threads in off_pace:
    line = f"  SHA-256 of {workload}, {threads} thr: "
    if sum(l.startswith(line) for l in out_lines) != 1:
        problems.append(f"SHA-256 off pace in {workload!r} ({threads} thr), not listed once as {line!r}")
off_pace_says = f"SHA-256 off the run's pace: in {counted(len(off_pace), 'workload run')} "
if off_pace and not any(l.startswith(off_pace_says) for l in out_lines):
    problems.append(f"{len(off_pace)} workload runs off SHA-256's pace, and no line saying so under the table")
# Every figure follows from its own samples (a mutation test of the harness
# found figures the checks above let through: ratios inverted or paired
# across repetitions, GB/s over the wrong byte count, a build row that did
# not subtract its empty TU, a scaling row from the wrong medians, a target
# judged at another bound than it prints). The JSON keeps 6 significant
# digits, so each figure agrees to about that.
def near(got, want, rel=2e-4):
    return isinstance(got, (int, float)) and abs(got - want) <= rel * max(abs(want), 1e-12)


def med(xs):
    return statistics.median(xs)


for r in rows:
    s, b = r.get("samples") or [], r.get("baseline_samples") or []
    name = f"{r['name']!r} ({r.get('threads')} thr, vs {r.get('baseline')!r})"
    if s and b:
        if len(s) != len(b):
            problems.append(f"row {name}: {len(s)} samples against {len(b)} of its baseline")
            continue
        # Each repetition's baseline over its own subject, the median of those
        # (a subject time of 0 gives 0, as bench::compare has it).
        want = med([y / x if x > 0 else 0 for x, y in zip(s, b)])
        if not near(r.get("ratio"), want):
            problems.append(f"row {name}: ratio {r.get('ratio')!r}, its samples give {want}")
        unit = r["unit"]
        if unit == "GB/s":
            size = (r.get("extra") or {}).get("bytes_examined") or (r.get("extra") or {}).get("data_bytes")
            if size is None:
                m = re.search(r"(\d+) B tensor", r["name"])
                size = int(m.group(1)) if m else None
            if size is None:
                problems.append(f"row {name}: GB/s without the bytes it is over")
            else:
                def gbps(t):  # (0 s gives 0, as bench::gb_per_s has it)
                    return size / t / 1e9 if t > 0 else 0
                if not (near(r["value"], gbps(med(s))) and near(r.get("baseline_value"), gbps(med(b)))):
                    problems.append(f"row {name}: {r['value']} and {r.get('baseline_value')} GB/s, "
                                    f"{size} B over its samples give {gbps(med(s))} and {gbps(med(b))}")
        elif unit in ("ns", "us"):
            if not (near(r["value"], med(s)) and near(r.get("baseline_value"), med(b))):
                problems.append(f"row {name}: {r['value']} and {r.get('baseline_value')} {unit}, "
                                f"its samples' medians {med(s)} and {med(b)}")
        elif unit == "s":  # build rows: this TU's CPU time over the empty TU compiled beside it
            if not (near(r["value"], med(s) - med(b), 1e-3) and near(r.get("baseline_value"), med(b))):
                problems.append(f"row {name}: {r['value']} s over {r.get('baseline_value')} s, "
                                f"its samples give {med(s) - med(b)} over {med(b)}")
    # Its target: the bounds it prints, on the figure it names, and 'met' from them.
    t = r.get("target")
    if t:
        text = t.get("text", "")
        want = None
        if m := re.fullmatch(r">= ([\d.]+)x", text):
            want = {"on": "ratio", "min": float(m.group(1))}
        elif m := re.fullmatch(r"<= ([\d.]+) s", text):
            want = {"on": "value", "max": float(m.group(1))}
        elif text == "0":
            want = {"on": "value", "max": 0.0}
        elif text == "within 2x":
            want = {"on": "ratio", "min": 0.5, "max": 2.0}
        got = {k: (float(v) if k != "on" else v) for k, v in t.items() if k in ("on", "min", "max")}
        if want is None or got != want:
            problems.append(f"row {name}: target {t!r}, its text says {want!r}")
        else:
            x = r["ratio"] if want["on"] == "ratio" else r["value"]
            met = (x >= want.get("min", -math.inf)) and (x <= want.get("max", math.inf))
            # (Within a rounding step of a bound, C++'s unrounded figure decides.)
            edge = any(near(x, want[k], 1e-5) for k in ("min", "max") if k in want)
            if not edge and r.get("met") is not met:
                problems.append(f"row {name}: met {r.get('met')!r}, its {want['on']} {x} against {text!r}")
        # The targets: 0.8x the read pass, 0.5x on the adversarial workload.
        if r["group"] == "dedup" and r.get("baseline") == "read pass" and want:
            bound = 0.5 if r["name"].startswith("adversarial") else 0.8
            if want.get("min") != bound:
                problems.append(f"row {name}: read-pass target {text!r}, not >= {bound}x")
if doc.get("targets") != sum("target" in r for r in rows) or \
        doc.get("targets_met") != sum(r.get("met") is True for r in rows) or doc.get("targets_not_measured") != 0:
    problems.append(f"targets {doc.get('targets')!r}, targets_met {doc.get('targets_met')!r}, targets_not_measured "
                    f"{doc.get('targets_not_measured')!r}: the rows say {sum('target' in r for r in rows)} and "
                    f"{sum(r.get('met') is True for r in rows)}, every one measured")
# Every target a --quick run of every group sets (planned_targets in
# benchmarks/targets.hpp, which counts those a failed group or a Ctrl-C left
# unmeasured): each built-in workload's two at each thread count, the four
# stores' lookups and the scan's at 4096 keys, the two allocation counts
# where the build counts them, get_data, load_data_into, the write and two
# build rows; and the line under the table says so.
threads_run = len(doc["facts"]["dedup_threads"].split(","))
allocs_counted = any("target" in r for r in rows if r["group"] == "alloc")
want_targets = 5 * threads_run * 2 + 5 + (2 if allocs_counted else 0) + 2 + 1 + 2
if doc.get("targets") != want_targets:
    problems.append(f"targets {doc.get('targets')!r}, expected {want_targets} ({threads_run} thread counts, "
                    f"allocations counted: {allocs_counted})")
want_line = f"{doc.get('targets_met')} of {want_targets} targets met (--quick: small sizes, the yes/NO mean nothing)."
if want_line not in out_lines:
    problems.append(f"no line {want_line!r} under the table")
# Rows that share a measurement share its samples; rows against different
# baselines do not (one baseline's samples under another's name).
by_subject = {}
for r in rows:
    if r.get("baseline_samples"):
        by_subject.setdefault((r["group"], r["name"], r.get("threads")), []).append(r)
for (_, subject, threads), same in by_subject.items():
    for i, a in enumerate(same):
        if a.get("samples") != same[0].get("samples"):
            problems.append(f"{subject!r} ({threads} thr): its rows against {same[0]['baseline']!r} and "
                            f"{a['baseline']!r} hold other samples of it")
        for o in same[i + 1:]:
            if a["baseline_samples"] == o["baseline_samples"]:
                problems.append(f"{subject!r} ({threads} thr): baselines {a['baseline']!r} and {o['baseline']!r} "
                                f"hold the same samples")

def check_threads_started(rows, problems):
    """Each dedup baseline ran on the threads deduplicate() ran on: at most
    the row's, one per 4 MiB of work (threads_run), each baseline call
    starting threads_run - 1 beside the calling thread, and deduplicate()
    never running more at once (it starts threads stage by stage). A mutation test gave the
    baselines one thread, and every ratio still looked fine; a user trial
    found baselines started on every thread given (1024) where deduplicate()
    started few, and 41x "the read pass"."""
    for r in rows:
        if r["group"] != "dedup" or r["name"].endswith(": scaling vs 1 thr"):
            continue
        extra = r.get("extra") or {}
        run = extra.get("threads_run")
        if not isinstance(run, (int, float)) or not 1 <= run <= r["threads"]:
            problems.append(f"row {r['name']!r} ({r['threads']} thr): threads_run {run!r}, not 1..{r['threads']}")
            continue
        got = extra.get("threads_started_by_baseline")
        # (The fingerprint + SHA-256 reference starts its threads only to
        # hash: none where no fingerprint repeats, twice where it hashes
        # some buffers again.)
        passes = 1
        if r.get("baseline") == "fp+SHA-256 ref":
            passes = (extra.get("buffers_hashed_by_baseline", 0) > 0) + \
                (extra.get("buffers_hashed_again_by_baseline", 0) > 0)
        want = (run - 1) * passes
        if r.get("baseline") in ("read pass", "SHA-256 ref", "fp+SHA-256 ref", "2-stream read") and \
                got is not None and got != want:
            problems.append(f"row {r['name']!r} ({r['threads']} thr): its {r['baseline']!r} started {got} threads, "
                            f"not {int(want)} (threads_run {int(run)})")
        # deduplicate() starts threads stage by stage; how many overlap
        # depends on how long each runs, but never more than threads_run - 1,
        # and at least one where threads_run is above 1.
        at_once = extra.get("threads_at_once_in_deduplicate")
        if at_once is not None and not (min(1, run - 1) <= at_once <= run - 1):
            problems.append(f"row {r['name']!r} ({r['threads']} thr): deduplicate() ran {at_once} threads at once "
                            f"besides the calling one, not 1..{int(run) - 1} (threads_run {int(run)})")


check_threads_started(rows, problems)
# (Counted where allocations are: glibc, no sanitizer.)
if any(r["group"] == "alloc" and r["value"] >= 0 for r in rows) and not any(
        "threads_started_by_baseline" in (r.get("extra") or {}) for r in rows if r["group"] == "dedup"):
    problems.append("threads are counted here, yet no dedup row says what its baseline started")
find = {(r["name"], r.get("threads"), r.get("baseline")): r for r in rows}
for r in rows:
    if r["group"] == "dedup" and r["name"].endswith(": deduplicate") and r.get("baseline") == "read pass":
        read = find.get((r["name"].rsplit(":", 1)[0] + ": read pass", r["threads"], "SHA-256 ref"))
        if read is None or read.get("samples") != r.get("baseline_samples"):
            problems.append(f"{r['name']!r} ({r['threads']} thr): its read pass is not the read-pass row's")
    if r["name"].endswith(": scaling vs 1 thr"):
        # deduplicate's speed-up and the read pass's, both over the first thread count.
        workload = r["name"].rsplit(":", 1)[0]
        first = min(t for (n, t, _) in find if n == workload + ": deduplicate")
        d0, d1 = find.get((workload + ": deduplicate", first, "read pass")), \
            find.get((workload + ": deduplicate", r["threads"], "read pass"))
        if d0 is None or d1 is None:
            problems.append(f"{r['name']!r}: no deduplicate rows to scale from")
            continue
        dedup_up = med(d0["samples"]) / med(d1["samples"])
        read_up = med(d0["baseline_samples"]) / med(d1["baseline_samples"])
        if not (near(r["value"], dedup_up, 1e-3) and near(r.get("baseline_value"), read_up, 1e-3)):
            problems.append(f"{r['name']!r} ({r['threads']} thr): {r['value']} over {r.get('baseline_value')}, "
                            f"the deduplicate rows give {dedup_up} over {read_up}")
if problems:
    sys.exit("invalid benchmark JSON:\n  " + "\n  ".join(problems))
print(f"bench_quick: {len(rows)} rows, valid JSON at {path}; {len(unsteady)} of {len(judged)} judged rows unsteady, "
      f"{len(off_pace)} workload runs off SHA-256's pace")

# --once (what scripts/profile.sh runs under callgrind): one read pass and one
# deduplicate() per workload and thread count, each checked for the expected
# distinct count, and nothing timed, so no JSON written.
once_path = os.path.join(outdir, "bench-once.json")
if os.path.exists(once_path):  # (an earlier harness wrote one)
    os.remove(once_path)
once = subprocess.run([exe, "--quick", "--once", "--threads", "1,2", "--no-progress",
                       "--json", once_path, "--tmpdir", outdir],
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
print(once.stdout)
if once.returncode != 0:
    sys.exit(f"wdedup-bench --once exited with {once.returncode}")
lines = [l for l in once.stdout.splitlines() if "one read pass and one deduplicate()" in l]
expected = [f"{w}, {counted(t, 'thread')}:"
            for w in ("llama 1+1", "llama 3+3", "llama 3+2", "small tensors", "adversarial", "same names")
            for t in (1, 2)]
missing = [e for e in expected if not any(l.startswith(e) for l in lines)]
if missing or len(lines) != len(expected):
    sys.exit(f"wdedup-bench --once: expected one line per workload and thread count, missing {missing}")
if os.path.exists(once_path) or f"no JSON written: {once_path} left as it was" not in once.stdout:
    sys.exit(f"wdedup-bench --once: wrote {once_path}, or did not say it wrote none")
print(f"bench_once: {len(lines)} workload runs")

# --ptd: a user's own .ptd files as a workload, one method each. aliases.ptd
# and a copy of it (prefill and decode exported apart; the same file twice is
# refused, below) and simple.ptd: 6 + 6 + 3 tensors over 4 + 3 distinct
# contents, no targets.
ptd_path = os.path.join(outdir, "bench-ptd.json")
files = [os.path.join(fixtures, f) for f in ("aliases.ptd", "simple.ptd")]
missing = [f for f in files if not os.path.exists(f)]
if missing:
    sys.exit(f"bench_ptd: fixtures not found ({missing[0]}): ../shared must sit beside the repository")
aliases_copy = os.path.join(outdir, "bench-ptd-aliases-copy.ptd")
shutil.copyfile(files[0], aliases_copy)
files.append(aliases_copy)
ptd = subprocess.run([exe, "--quick", "--only", "dedup", "--threads", "1,2", "--no-progress", "--ptd", ",".join(files),
                      "--json", ptd_path, "--tmpdir", outdir],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
print(ptd.stdout)
if ptd.returncode != 0:
    sys.exit(f"wdedup-bench --ptd exited with {ptd.returncode}")
with open(ptd_path) as f:
    ptd_json = json.load(f)
rows = ptd_json["results"]
dedup_rows = [r for r in rows if r["name"] == "ptd files POSITIONAL: deduplicate" and r["baseline"] == "read pass"]
problems = []
# The compiler by name and version (gcc's __VERSION__ is the number alone).
if not re.fullmatch(r"(gcc \d+\.\d+\.\d+.*|.*[A-Za-z]{3}.*\d.*)", str(ptd_json["facts"].get("compiler"))):
    problems.append(f"facts.compiler {ptd_json['facts'].get('compiler')!r} does not name the compiler")
if ptd_json["facts"].get("llama_model") != "none ran":
    problems.append(f"facts.llama_model of a --ptd run: {ptd_json['facts'].get('llama_model')!r}, expected 'none ran'")
if sorted(r["threads"] for r in dedup_rows) != [1, 2]:
    problems.append(f"expected one deduplicate-vs-read-pass row per thread count, got {len(dedup_rows)}")
for r in dedup_rows:
    extra = r.get("extra", {})
    if extra.get("tensors") != 15 or extra.get("distinct_buffers") != 7 or extra.get("consistent_with_sha256") != 1 \
            or extra.get("consistent_with_fp_sha256") != 1:
        problems.append(f"{counted(r['threads'], 'thread')}: tensors {extra.get('tensors')}, "
                        f"distinct {extra.get('distinct_buffers')}, consistent {extra.get('consistent_with_sha256')} "
                        f"and {extra.get('consistent_with_fp_sha256')}; expected 15, 7, 1 and 1")
# The fingerprint + SHA-256 reference hashes aliases.ptd's 4 ranges and its
# copy's (944 bytes each), each fingerprint held twice, and none of
# simple.ptd's 3, whose fingerprints no other buffer has.
fp_hashed = sorted((r["threads"], r["extra"].get("buffers_hashed_by_baseline"),
                    r["extra"].get("buffers_hashed_again_by_baseline"),
                    r["extra"].get("bytes_hashed_by_baseline")) for r in rows if r.get("baseline") == "fp+SHA-256 ref")
if fp_hashed != [(1, 8, 0, 1888), (2, 8, 0, 1888)]:
    problems.append(f"fp+SHA-256 ref rows' (threads, buffers hashed, hashed again, bytes hashed) {fp_hashed}, "
                    "expected (1, 8, 0, 1888) and (2, 8, 0, 1888)")
# What the engine read of these files: aliases.ptd's 4 ranges against its
# copy's (944 bytes a side) and 192 bytes hashed, of 2281: 91% of them (both
# sides of each comparison), so no line under the table says it read little.
engine_read = sorted((r["threads"], r["extra"].get("bytes_examined"), r["extra"].get("bytes_hashed"),
                      r["extra"].get("bytes_compared")) for r in rows
                     if r["name"] == "ptd files POSITIONAL: identity engine" and r["baseline"] == "read pass")
if engine_read != [(1, 2281, 192, 944), (2, 2281, 192, 944)] or " reads about " in ptd.stdout:
    problems.append(f"identity-engine rows' (threads, bytes examined, hashed, compared) {engine_read}, expected "
                    "(1, 2281, 192, 944) and (2, ...); a line says it reads little: "
                    f"{' reads about ' in ptd.stdout}")
# many_keys.ptd alone: 183,243 of its 424,278 bytes hashed, none compared
# (43%, under half): the line says so, with the share.
mk = subprocess.run([exe, "--quick", "--only", "dedup", "--threads", "1", "--reps", "1", "--no-progress", "--ptd",
                     os.path.join(fixtures, "many_keys.ptd"), "--json", ptd_path, "--tmpdir", outdir],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
want = ("ptd files POSITIONAL: deduplicate() reads about 43% of the 424278 bytes its rows are timed on: a tensor "
        "whose size no other has is settled unread (an input already deduplicated, or one method alone), so its "
        "GB/s and ratios are no speed of comparing.")
said = [l for l in mk.stdout.splitlines() if " reads about " in l]
if mk.returncode != 0 or said != [want]:
    problems.append(f"--ptd many_keys.ptd: exit {mk.returncode}, lines {said!r}, expected [{want!r}]")
if any("target" in r for r in rows):
    problems.append("a user's workload got a target")
# Each row's note says which files' methods it timed.
want_note = "3 .ptd files, 3 methods (aliases, simple, bench-ptd-aliases-copy): 15 tensors, "
if not rows or any(not str(r.get("note", "")).startswith(want_note) for r in rows):
    problems.append(f"--ptd rows' notes {sorted({str(r.get('note')) for r in rows})}, expected {want_note!r}...")
# No comparisons-alone row: these pairs' bytes (both sides of each) are not
# the read pass's (simple.ptd's tensors have no duplicate, so the pairs read
# fewer).
if any(r["name"].endswith(": comparisons alone") for r in rows):
    problems.append("a comparisons-alone row on --ptd files, whose pairs read other bytes than the read pass")
if any(not r["name"].startswith("ptd files") for r in rows):
    problems.append("--ptd ran other workloads too")
# Mistakes refused at once, with exit 2 and one line naming them: an empty
# list must not mean "everything" (a full run), nor an unwritable --json be
# found only after the run.
for args, want in [(["--only", ""], "wdedup-bench: --only needs at least one item, got ''"),
                   (["--workloads", ","], "wdedup-bench: --workloads , has an empty item (a stray comma)"),
                   (["--quick", "--json", os.path.join(outdir, "missing", "r.json")],
                    "wdedup-bench: cannot write --json " + os.path.join(outdir, "missing", "r.json") +
                    ": its directory " + os.path.join(outdir, "missing") + " does not exist"),
                   (["--quick", "--json", outdir], "wdedup-bench: cannot write --json " + outdir + ": Is a directory")]:
    refused = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if refused.returncode != 2 or refused.stderr.strip() != want:
        problems.append(f"{args}: exit {refused.returncode}, stderr {refused.stderr.strip()!r}, expected 2, {want!r}")
bad = subprocess.run([exe, "--only", "dedup", "--ptd", os.path.join(fixtures, "simple.json"), "--json", ptd_path],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
json_fixture = os.path.join(fixtures, 'simple.json')
want = (f"wdedup-bench: --ptd {json_fixture} ({os.path.getsize(json_fixture)} bytes, not a .ptd file): "
        "flatbuffer identifier is not FT01 (MalformedHeader at 4)")
if bad.returncode != 2 or bad.stderr.strip() != want or bad.stdout:
    problems.append(f"a file that is not a .ptd: exit {bad.returncode}, stderr {bad.stderr.strip()!r}, stdout "
                    f"{bad.stdout[:80]!r}, expected 2, {want!r} and nothing run")
# Checked before anything runs, even when other workloads come first; one
# file twice (here through a link) is refused: the two mappings share pages.
link = os.path.join(outdir, "bench-ptd-link.ptd")
if os.path.lexists(link):
    os.remove(link)
os.symlink(files[0], link)
for args, want in [(["--workloads", "llama-1+1,ptd", "--ptd", json_fixture],
                    f"wdedup-bench: --ptd {json_fixture} ({os.path.getsize(json_fixture)} bytes, not a .ptd file): "
                    "flatbuffer identifier is not FT01 (MalformedHeader at 4)"),
                   (["--ptd", f"{files[0]},{link}"],
                    f"wdedup-bench: --ptd names one file twice ({files[0]} and {link}): their mappings share "
                    "pages, so the figures would count bytes never read; copy the file to time identical methods"),
                   (["--ptd", f"{files[0]},"], f"wdedup-bench: --ptd {files[0]}, has an empty item (a stray comma)"),
                   # No tensor bytes (ExecuTorch's empty.ptd): nothing to time.
                   (["--ptd", os.path.join(fixtures, "empty.ptd")],
                    "wdedup-bench: --ptd files hold no tensor bytes (0 keys in all): nothing to time"),
                   # Every --ptd adds its files (the second replaced the first).
                   (["--ptd", files[0], "--ptd", link],
                    f"wdedup-bench: --ptd names one file twice ({files[0]} and {link}): their mappings share "
                    "pages, so the figures would count bytes never read; copy the file to time identical methods")]:
    r = subprocess.run([exe, "--quick", "--only", "dedup", "--no-progress", "--json", ptd_path] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode != 2 or r.stderr.strip() != want or r.stdout:
        problems.append(f"{args}: exit {r.returncode}, stderr {r.stderr.strip()!r}, stdout {r.stdout[:80]!r}; "
                        f"expected 2, {want!r} and nothing run")
# A file with an empty tensor (ExecuTorch's layouts.ptd): deduplicate() holds
# the empty content as a buffer, the SHA-256 references (over input_spans,
# which leave empty tensors out) do not see it: no false failure.
layouts = os.path.join(fixtures, "layouts.ptd")
layouts_copy = os.path.join(outdir, "bench-ptd-layouts-copy.ptd")
shutil.copyfile(layouts, layouts_copy)
r = subprocess.run([exe, "--quick", "--only", "dedup", "--threads", "1", "--reps", "2", "--no-progress", "--ptd",
                    f"{layouts},{layouts_copy}", "--json", ptd_path, "--tmpdir", outdir],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
if r.returncode != 0:
    problems.append(f"--ptd layouts.ptd (an empty tensor): exit {r.returncode}, stderr {r.stderr.strip()!r}")
else:
    with open(ptd_path) as f:
        lrows = [x for x in json.load(f)["results"] if x["name"].endswith(": deduplicate")]
    if not lrows or any((x["extra"].get("consistent_with_sha256"), x["extra"].get("consistent_with_fp_sha256")) !=
                        (1, 1) for x in lrows):
        problems.append(f"--ptd layouts.ptd: rows {[(x['name'], x.get('extra')) for x in lrows]}")
# A file the import takes but deduplicate() refuses (identical empty segments
# asking for alignments 2048, 2047 and 2045, whose lcm no store holds) is
# refused before anything runs, even after another workload in the list:
# exit 2, deduplicate()'s message, and no row printed.
if make_seeds:
    seeds = os.path.join(outdir, "bench-seeds")
    os.makedirs(seeds, exist_ok=True)
    subprocess.run([make_seeds, seeds], check=True)
    lcm = os.path.join(seeds, "alignment_lcm_overflow.ptd")
    r = subprocess.run([exe, "--quick", "--only", "dedup", "--no-progress", "--workloads", "llama-1+1,ptd", "--ptd",
                        lcm, "--json", ptd_path, "--tmpdir", outdir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    want = ("wdedup-bench: --ptd files: deduplicate() refuses them: method 'alignment_lcm_overflow' partition 0 "
            "tensor 'c': lcm of alignments 4192256 and 2045 exceeds 4294967296: key 'c' shares its bytes with keys "
            "whose alignments' lcm is 4192256")
    if r.returncode != 2 or r.stderr.strip() != want or r.stdout:
        problems.append(f"--ptd a file deduplicate() refuses: exit {r.returncode}, stderr {r.stderr.strip()!r}, "
                        f"stdout {r.stdout[:80]!r}; expected 2, {want!r} and nothing run")
    # Except under --once (scripts/profile.sh): a profile holds the
    # workload's one deduplicate(), and that call reports the refusal as the
    # run's failure (exit 1; nothing timed, no JSON written).
    r = subprocess.run([exe, "--quick", "--once", "--no-progress", "--ptd", lcm, "--json", ptd_path, "--tmpdir",
                        outdir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    want = ("wdedup-bench: FAILURE: deduplicate failed: method 'alignment_lcm_overflow' partition 0 tensor 'c': lcm of "
            "alignments 4192256 and 2045 exceeds 4294967296: key 'c' shares its bytes with keys whose alignments' lcm "
            "is 4192256")
    tail = r.stdout.splitlines()[-2:]
    if r.returncode != 1 or r.stderr.strip() != want or tail != ["--once: nothing timed",
                                                                 f"no JSON written: {ptd_path} left as it was"]:
        problems.append(f"--once --ptd a file deduplicate() refuses: exit {r.returncode}, stderr "
                        f"{r.stderr.strip()!r}, last lines {tail!r}; expected 1, {want!r}, the call run and reported")
# The JSON never goes over an input, itself or through a symbolic link: it
# would replace the user's weights. A hard link's other name is another
# name: the results replace that name, and the input keeps its bytes.
victim = os.path.join(outdir, "bench-ptd-victim.ptd")
shutil.copyfile(files[0], victim)
before = open(victim, "rb").read()
victim_link = os.path.join(outdir, "bench-ptd-victim-link.json")
victim_hard = os.path.join(outdir, "bench-ptd-victim-hard.json")
for name in (victim_link, victim_hard):
    if os.path.lexists(name):
        os.remove(name)
os.symlink(victim, victim_link)
os.link(victim, victim_hard)
for json_arg in (victim, victim_link):
    r = subprocess.run([exe, "--quick", "--only", "dedup", "--no-progress", "--ptd", f"{victim},{files[1]}",
                        "--json", json_arg], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    want = f"wdedup-bench: --json {json_arg} names the --ptd input {victim}: the results would replace it"
    if r.returncode != 2 or r.stderr.strip() != want or open(victim, "rb").read() != before:
        problems.append(f"--json {json_arg}, a --ptd input: exit {r.returncode}, stderr {r.stderr.strip()!r}; "
                        f"expected 2, {want!r} and the input untouched")
r = subprocess.run([exe, "--quick", "--only", "dedup", "--threads", "1", "--reps", "2", "--no-progress", "--ptd",
                    f"{victim},{files[1]}", "--json", victim_hard, "--tmpdir", outdir],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
with open(victim_hard) as f:
    hard_is_json = f.read(1) == "{"
if r.returncode != 0 or open(victim, "rb").read() != before or not hard_is_json:
    problems.append(f"--json a hard link to a --ptd input: exit {r.returncode}, stderr {r.stderr.strip()[-200:]!r}, "
                    f"input {'kept' if open(victim, 'rb').read() == before else 'CHANGED'}, JSON there: {hard_is_json}")
os.remove(victim_link)
os.remove(victim_hard)
# A store wdedup wrote comes back as its methods and partitions: prefill 3 +
# decode 2 cannot go through Positional, so the workload runs OneBlob.
merged = os.path.join(outdir, "bench-ptd-oneblob.ptd")
made = subprocess.run([demo, "--quiet", "--strategy", "oneblob", "--prefill-partitions", "3",
                       "--decode-partitions", "2", "--out", merged],
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
verified = [l for l in made.stdout.splitlines() if "tensors verified" in l]
if made.returncode != 0 or len(verified) != 1:
    problems.append(f"the demo could not write {merged}: {made.stdout}")
else:
    want_tensors = int(verified[0].split(" tensors verified")[0].split()[-1])
    ob = subprocess.run([exe, "--quick", "--only", "dedup", "--threads", "1", "--no-progress", "--ptd", merged,
                         "--json", ptd_path, "--tmpdir", outdir],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(ob.stdout)
    if ob.returncode != 0:
        problems.append(f"--ptd on a 3 + 2 wdedup store exited with {ob.returncode}")
    else:
        with open(ptd_path) as f:
            ob_rows = [r for r in json.load(f)["results"]
                       if r["name"] == "ptd files ONE_BLOB: deduplicate" and r["baseline"] == "read pass"]
        if len(ob_rows) != 1 or ob_rows[0]["extra"].get("tensors") != want_tensors or \
                ob_rows[0]["extra"].get("consistent_with_sha256") != 1 or \
                ob_rows[0]["extra"].get("consistent_with_fp_sha256") != 1:
            problems.append(f"--ptd on a 3 + 2 wdedup store: expected one ONE_BLOB row with {want_tensors} "
                            f"tensors, got {[(r['name'], r.get('extra')) for r in ob_rows]}")
        # A store wdedup wrote holds each content once: its methods' shared
        # tensors are the same memory, so deduplicate() reads almost none of
        # it, and the table says its figures are no speed of comparing.
        elif not any(l.startswith("ptd files ONE_BLOB: deduplicate() reads about 0% of the "
                                  f"{int(ob_rows[0]['extra']['bytes_examined'])} bytes its rows are timed on: ")
                     for l in ob.stdout.splitlines()):
            problems.append("--ptd on a wdedup store: no line says deduplicate() reads almost none of it")
if problems:
    sys.exit("wdedup-bench --ptd:\n  " + "\n  ".join(problems))
print(f"bench_ptd: {len(rows)} rows over the fixtures, and a 3 + 2 OneBlob store")

# Given more threads than the work is worth (64 on the quick tiny model, of
# a few MiB), deduplicate() runs on one per 4 MiB of work, and so must its
# baselines: started on all 64, a read pass of a few MiB ran slower, and
# deduplicate() "beat the physical limit" 41x in a user trial (1024 threads).
many_path = os.path.join(outdir, "bench-many-threads.json")
mt = subprocess.run([exe, "--quick", "--only", "dedup", "--workloads", "llama-1+1", "--threads", "1,64", "--reps",
                     "2", "--no-progress", "--json", many_path, "--tmpdir", outdir],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
print(mt.stdout)
problems = []
if mt.returncode != 0:
    problems.append(f"--threads 1,64 exited with {mt.returncode}")
else:
    with open(many_path) as f:
        mt_rows = json.load(f)["results"]
    dedup_rows = [r for r in mt_rows if r["group"] == "dedup" and r["threads"] == 64
                  and not r["name"].endswith(": scaling vs 1 thr")]
    work_per_thread, per_tensor = 4 << 20, 1536  # detail::kWorkPerStartedThread, kFinishBytesPerTensor
    for r in dedup_rows:
        e = r["extra"]
        want = min(64, max(1, (int(e["bytes_in_with_aliases"]) + int(e["tensors"]) * per_tensor) // work_per_thread))
        if not 1 < want < 64 or e.get("threads_run") != want:
            problems.append(f"{r['name']!r} vs {r['baseline']!r} at 64 thr: threads_run {e.get('threads_run')}, "
                            f"expected {want} (one per 4 MiB of work, between 2 and 63 here)")
    if len(dedup_rows) != 7:
        problems.append(f"expected 7 dedup rows at 64 threads, got {len(dedup_rows)}")
    # The scaling row says so too: its speed-up is over the threads that ran.
    scaling = [r for r in mt_rows if r["name"].endswith(": scaling vs 1 thr")]
    if dedup_rows:
        run = dedup_rows[0]["extra"]["threads_run"]
        tail = f"; deduplicate() ran on {run:.0f} of the 64 threads given (one per 4 MiB of work), and so did the " \
               "read pass"
        if len(scaling) != 1 or scaling[0]["extra"].get("threads_run") != run or \
                not scaling[0].get("note", "").endswith(tail):
            problems.append(f"the scaling row {[(r['extra'], r.get('note')) for r in scaling]}: expected threads_run "
                            f"{run} and a note ending {tail!r}")
    check_threads_started(mt_rows, problems)
    counted = any("threads_started_by_baseline" in r["extra"] for r in dedup_rows)
    if dedup_rows:
        want_line = (f"llama 1+1 POSITIONAL, 64 thr: deduplicate() ran on {dedup_rows[0]['extra']['threads_run']} "
                     f"(one thread per 4 MiB of work), and so did its baselines.")
        if want_line not in mt.stdout.splitlines():
            problems.append(f"no line {want_line!r}")
    cores = len(os.sched_getaffinity(0))
    note = f"note: --threads 64 is more than the {cores} cores this process may run on: threads share cores"
    if (note in mt.stdout.splitlines()) != (cores < 64):
        problems.append(f"the note {note!r} is {'missing' if cores < 64 else 'there'} with {cores} cores")
    print(f"bench_many_threads: threads run {[r['extra'].get('threads_run') for r in dedup_rows][:1]}, "
          f"counted: {counted}")
if problems:
    sys.exit("wdedup-bench --threads 1,64:\n  " + "\n  ".join(problems))
