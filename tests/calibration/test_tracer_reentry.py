"""Program code that runs inside the tracer: a finalizer run by the cyclic
garbage collector, a signal handler. Both are traced functions of the program
that can record while a tracer path holds a stamped record not yet appended
(docs/realrun.md, "Code that runs inside the tracer"). Checked on the archive as
the OTF2 reader returns it: every record is there, each location's times are
non-decreasing and its Enter/Leave nest, and compensate verifies the trace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.calibration.test_tracer_threads import check_threads, read_archive
from tests.inprocess import run_compensate

ROOT = Path(__file__).resolve().parent.parent.parent


def _record(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess, Path]:
    script = tmp_path / "program.py"
    script.write_text(source)
    out = tmp_path / "run" / "traces.otf2"
    proc = subprocess.run(
        [sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "0", "--", str(script)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc, out


def _entered(out: Path) -> list[str]:
    """Regions entered, over all locations, after the OTF2 checks."""
    locs = read_archive(out)
    check_threads(locs)
    return [ev.region.name for loc in locs.values() for _, k, ev in loc["events"]
            if k == "Enter"]


FINALIZERS = """
import gc
import threading


class Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it, running __del__

    def __del__(self):
        pass


def step(lock):
    with lock:
        Node()


def run():
    gc.set_threshold(5)  # collect often: inside the lock wrapper too
    lock = threading.Lock()
    for _ in range(2000):
        step(lock)
    gc.collect()


run()
"""


def test_finalizers_run_inside_the_tracer_keep_the_trace(tmp_path: Path) -> None:
    """The cyclic collector runs a traced ``__del__`` at whatever allocation
    triggers it, also between a lock wrapper's timestamp and the append of its
    record: its records are appended first, with later times. The archive used
    to be refused by OTF2 (the whole trace lost); now every record is written in
    time order, the program's 2000 finalizers included, the run says so, and
    compensate verifies the trace."""
    proc, out = _record(tmp_path, FINALIZERS)
    assert "were put in time order" in proc.stderr
    regions = _entered(out)
    assert regions.count("Node.__del__") == 2000 and regions.count("Node.__init__") == 2000
    assert regions.count("threading.Lock.acquire") == 2000
    done = run_compensate(out, tmp_path / "out" / "traces.otf2", "--quiet", cwd=ROOT)
    assert done.returncode == 0, done.stderr


SIGNALS = """
import signal

calls = 0


def handler(signum, frame):
    global calls
    calls += 1


def leaf(i):
    return i


def run():
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
    for i in range(100000):
        leaf(i)
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    print("handled", calls)


run()
"""


def test_a_signal_handler_between_a_records_two_halves_keeps_the_trace(
        tmp_path: Path) -> None:
    """A traced SIGALRM handler every 0.2 ms while traced calls run: CPython runs
    it between any two calls, also between the decorator's append of a time and
    of its code, and its records shifted every later pair by one (the archive
    was refused: "IndexError: tuple index out of range"). Every call and every
    handler run is in the archive, in time order."""
    proc, out = _record(tmp_path, SIGNALS)
    handled = int(proc.stdout.split()[-1])
    assert handled > 10, proc.stdout
    assert "were put in time order" in proc.stderr
    regions = _entered(out)
    assert regions.count("leaf") == 100000 and regions.count("handler") == handled
    done = run_compensate(out, tmp_path / "out" / "traces.otf2", "--quiet", cwd=ROOT)
    assert done.returncode == 0, done.stderr
