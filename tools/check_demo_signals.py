#!/usr/bin/env python3
"""CI check: wdedup-demo stopped by a signal while it writes a store (or a
--per-method file, or the --json report) removes its temporary file, leaves
the destination as it was, and ends as the signal ends a process (killed by
it). A signal the demo was started ignoring stays ignored: the run completes
and replaces the destination.

Each run is stopped (SIGSTOP) as soon as the file's temporary has bytes
reserved, which is mid-write, then sent the signal and continued: the signal
arrives while the temporary file exists, whatever the machine's speed. The
report, too small to be caught so, gets its signal from a library preloaded
into the demo, at the rename of its temporary file (the third argument:
tests/support/stop_at_rename.cpp)."""
import os
import shutil
import signal
import subprocess
import sys
import time

exe, outdir = sys.argv[1], sys.argv[2]
# tests/support/stop_at_rename.cpp's library, which stops the --json write
# (below); not given under a sanitizer (tests/meson.build).
stop_at_rename = sys.argv[3] if len(sys.argv) > 3 else None
work = os.path.join(outdir, "demo-signals")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
problems = []
OLD = b"the previous store\n"
DEST = "model.ptd"
# tiny with 40 layers: a store of about 60 MB, written and read back in
# tens of milliseconds, long enough to be caught with its temporary file.
ARGS = ["--quiet", "--threads", "1", "--strategy", "oneblob", "--layers", "40", "--out", DEST]


def temporaries():
    """The writer's temporary files (.<name>.tmp-XXXXXX) in the work directory
    and the directories in it: {path under it: size}."""
    found = {}
    for root, dirs, files in os.walk(work):
        for name in files:
            if name.startswith(".") and ".tmp-" in name:
                path = os.path.join(root, name)
                try:
                    found[os.path.relpath(path, work)] = os.stat(path, follow_symlinks=False).st_size
                except FileNotFoundError:
                    pass
    return found


def destination():
    with open(os.path.join(work, DEST), "rb") as f:
        return f.read()


def start(ignore=None, args=ARGS, files=(DEST,), env=None):
    """The demo run with `args` over `files` (paths under the work directory)
    holding OLD; `ignore`: a signal it starts ignoring; `env`: its environment
    (None: this one's)."""
    shutil.rmtree(work)
    os.makedirs(work)
    for name in files:
        os.makedirs(os.path.dirname(os.path.join(work, name)), exist_ok=True)
        with open(os.path.join(work, name), "wb") as f:
            f.write(OLD)

    def before():
        # The stop signals at their default actions, but `ignore`, whatever
        # this check was started with (under nohup SIGHUP comes ignored, and
        # the demo keeps a signal it is handed ignored as its caller's choice).
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN if sig == ignore else signal.SIG_DFL)

    return subprocess.Popen([exe] + args, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=before, env=env)


def wait_stopped(pid):
    """Waits until `pid` is stopped (kill(SIGSTOP) returns before it is), or
    has ended (Z: it finished before the stop)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            # The state follows the command's name, which is in parentheses.
            if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t", "Z"):
                return
        time.sleep(0.001)
    sys.exit(f"wdedup-demo (pid {pid}) did not stop within 30 s of SIGSTOP")


def stop_mid_write(p):
    """Stops `p` once the store's temporary file has bytes (the checks before
    the work make and remove an empty one). The name, or None if the run
    ended first."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        big = [n for n, size in temporaries().items() if size > 0]
        if big:
            os.kill(p.pid, signal.SIGSTOP)
            wait_stopped(p.pid)
            if os.path.exists(os.path.join(work, big[0])):
                return big[0]
            # Renamed between the look and the stop: the write was over.
            os.kill(p.pid, signal.SIGCONT)
            return None
        if p.poll() is not None:
            return None
    os.kill(p.pid, signal.SIGKILL)
    return None


def caught(ignore=None, tries=5, args=ARGS, files=(DEST,)):
    """A run stopped mid-write: (process, temporary file's name)."""
    for _ in range(tries):
        p = start(ignore, args, files)
        name = stop_mid_write(p)
        if name is not None:
            return p, name
        p.communicate(timeout=120)
    sys.exit(f"wdedup-demo was never caught mid-write in {tries} runs: its store is written too fast "
             f"for this check; raise --layers in {args}")


for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    p, name = caught()
    os.kill(p.pid, sig)
    os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    what = f"{signal.Signals(sig).name} while {name} was written"
    if p.returncode != -sig:
        problems.append(f"{what}: exit {p.returncode}, expected killed by the signal ({-sig}); "
                        f"stderr {err.decode()!r}")
    left = temporaries()
    if left:
        problems.append(f"{what}: left {sorted(left)}")
    if destination() != OLD:
        problems.append(f"{what}: the destination was changed")
    if sorted(os.listdir(work)) != [DEST]:
        problems.append(f"{what}: the directory holds {sorted(os.listdir(work))}")

# The --per-method files are written as the stores are: stopped while it
# writes one (prefill.ptd or decode.ptd, each about as large as the store),
# the demo removes that one's temporary and leaves the old file.
PM_ARGS = ["--quiet", "--threads", "1", "--strategy", "oneblob", "--layers", "40", "--out", "", "--per-method", "pm"]
PM_FILES = ("pm/decode.ptd", "pm/prefill.ptd")
p, name = caught(args=PM_ARGS, files=PM_FILES)
writing = os.path.join(os.path.dirname(name), os.path.basename(name)[1:].rsplit(".tmp-", 1)[0])
os.kill(p.pid, signal.SIGTERM)
os.kill(p.pid, signal.SIGCONT)
out, err = p.communicate(timeout=120)
what = f"SIGTERM while --per-method's {name} was written"
with open(os.path.join(work, writing), "rb") as f:
    kept = f.read() == OLD
if p.returncode != -signal.SIGTERM or temporaries() or not kept or \
        sorted(os.listdir(os.path.join(work, "pm"))) != ["decode.ptd", "prefill.ptd"]:
    problems.append(f"{what}: exit {p.returncode}, left {sorted(temporaries())}, {writing} "
                    f"{'kept' if kept else 'changed'}, pm holds {sorted(os.listdir(os.path.join(work, 'pm')))}; "
                    f"stderr {err.decode()!r}")

# The --json report is written as the stores are, but it is a few KB, written
# too fast to be stopped from here. The library preloaded raises the signal in
# the demo's rename of the report's temporary file over report.json: the
# temporary whole, the old report still in place. The demo removes the
# temporary, leaves the old report and ends by the signal; a signal it was
# started ignoring changes nothing, and the new report replaces the old.
REPORT = "report.json"
JSON_ARGS = ["--quiet", "--threads", "1", "--strategy", "oneblob", "--out", "", "--json", REPORT]


def stopped_at_rename(sig, ignore=None):
    """The run of JSON_ARGS over an old report, `sig` raised at the report's
    rename: (exit status, stderr, the report's bytes, the work directory's names)."""
    preload = stop_at_rename + (":" + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else "")
    env = dict(os.environ, LD_PRELOAD=preload, WDEDUP_TEST_STOP_AT_RENAME=REPORT, WDEDUP_TEST_STOP_SIGNAL=str(int(sig)))
    p = start(ignore, JSON_ARGS, (REPORT,), env)
    _, err = p.communicate(timeout=120)
    with open(os.path.join(work, REPORT), "rb") as f:
        report = f.read()
    return p.returncode, err.decode(), report, sorted(os.listdir(work))


if stop_at_rename:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        code, err, report, names = stopped_at_rename(sig)
        if code != -sig or err or report != OLD or names != [REPORT]:
            problems.append(f"{signal.Signals(sig).name} at the rename of --json {REPORT}: exit {code}, expected killed "
                            f"by the signal ({-sig}); stderr {err!r}; {REPORT} {'kept' if report == OLD else 'changed'}; "
                            f"the directory holds {names}")
    code, err, report, names = stopped_at_rename(signal.SIGHUP, ignore=signal.SIGHUP)
    if code != 0 or err or not report.startswith(b'[{"strategy":"ONE_BLOB",') or names != [REPORT]:
        problems.append(f"SIGHUP ignored from the start, raised at the rename of --json {REPORT}: exit {code}, "
                        f"stderr {err!r}, {REPORT} {report[:40]!r}, the directory holds {names}")
else:
    print("the --json write stopped at its rename: skipped (no stop_at_rename library: a sanitizer build)")

# A hangup the demo was started ignoring (nohup) does not stop it: the run
# completes, the store replaces the destination, byte for byte the store
# of a run left alone (the workload and the writer are deterministic), and
# no temporary file is left.
p = start()
out, err = p.communicate(timeout=120)
if p.returncode != 0:
    sys.exit(f"the reference run failed: exit {p.returncode}, stderr {err.decode()!r}")
reference = destination()
p, name = caught(ignore=signal.SIGHUP)
os.kill(p.pid, signal.SIGHUP)
os.kill(p.pid, signal.SIGCONT)
out, err = p.communicate(timeout=120)
if p.returncode != 0:
    problems.append(f"SIGHUP ignored from the start: exit {p.returncode}, stderr {err.decode()!r}")
elif destination() != reference or sorted(os.listdir(work)) != [DEST]:
    problems.append(f"SIGHUP ignored from the start: the store was not written in place: "
                    f"{sorted(os.listdir(work))}, {len(destination())} bytes against {len(reference)}")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print("demo_signals: SIGTERM, SIGINT and SIGHUP mid-write remove the temporary file and leave the destination "
      "(a store's, a --per-method file's" + (", --json's" if stop_at_rename else "") + "); an ignored SIGHUP stays "
      "ignored")
