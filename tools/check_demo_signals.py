#!/usr/bin/env python3
"""CI check: wdedup-demo stopped by a signal while it writes a store removes
the store's temporary file, leaves the destination as it was, and ends as the
signal ends a process (killed by it). A signal the demo was started ignoring
stays ignored: the run completes and replaces the destination.

Each run is stopped (SIGSTOP) as soon as the store's temporary file has bytes
reserved, which is mid-write, then sent the signal and continued: the signal
arrives while the temporary file exists, whatever the machine's speed."""
import os
import shutil
import signal
import subprocess
import sys
import time

exe, outdir = sys.argv[1], sys.argv[2]
work = os.path.join(outdir, "demo-signals")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
problems = []
OLD = b"the previous store\n"
DEST = "model.ptd"
TEMP_PREFIX = "." + DEST + ".tmp-"
# tiny with 40 layers: a store of about 60 MB, written and read back in
# tens of milliseconds, long enough to be caught with its temporary file.
ARGS = ["--quiet", "--threads", "1", "--strategy", "oneblob", "--layers", "40", "--out", DEST]


def temporaries():
    """The store's temporary files in the work directory: {name: size}."""
    found = {}
    for e in os.scandir(work):
        if e.name.startswith(TEMP_PREFIX):
            try:
                found[e.name] = e.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                pass
    return found


def destination():
    with open(os.path.join(work, DEST), "rb") as f:
        return f.read()


def start(ignore=None):
    """The demo over the previous store; `ignore`: a signal it starts ignoring."""
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    with open(os.path.join(work, DEST), "wb") as f:
        f.write(OLD)

    def before():
        # The stop signals at their default actions, but `ignore`, whatever
        # this check was started with (under nohup SIGHUP comes ignored, and
        # the demo keeps a signal it is handed ignored as its caller's choice).
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN if sig == ignore else signal.SIG_DFL)

    return subprocess.Popen([exe] + ARGS, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=before)


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


def caught(ignore=None, tries=5):
    """A run stopped mid-write: (process, temporary file's name)."""
    for _ in range(tries):
        p = start(ignore)
        name = stop_mid_write(p)
        if name is not None:
            return p, name
        p.communicate(timeout=120)
    sys.exit(f"wdedup-demo was never caught mid-write in {tries} runs: its store is written too fast "
             f"for this check; raise --layers in {ARGS}")


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
print("demo_signals: SIGTERM, SIGINT and SIGHUP mid-write remove the temporary file and leave the destination; "
      "an ignored SIGHUP stays ignored")
