"""Program code that runs inside the tracer: a finalizer run by the cyclic
garbage collector, a signal handler. Both are traced functions of the program
that can record while a tracer path holds a stamped record not yet appended
(docs/realrun.md, "Code that runs inside the tracer"). Checked on the archive as
the OTF2 reader returns it: every record is there, each location's times are
non-decreasing and its Enter/Leave nest, and compensate verifies the trace."""

from __future__ import annotations

import subprocess
import sys
from array import array
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.tracer import buffer as tb
from calibration.tracer import reentry
from tests.calibration.test_tracer_threads import check_threads, read_archive
from tests.inprocess import run_compensate

ROOT = Path(__file__).resolve().parent.parent.parent


# ---------------------------------------------------------------------------------
# the repairs (calibration/tracer/reentry.py)

def _pairs(records: list[tuple[int, int]]) -> array:
    return array("q", [x for rec in records for x in rec])


E_F, L_F = tb.ENTER | 7 << tb.KIND_BITS, tb.LEAVE | 7 << tb.KIND_BITS  # __del__
E_W, L_W = tb.ENTER | 1 << tb.KIND_BITS, tb.LEAVE | 1 << tb.KIND_BITS  # a wrapper


T0 = 10**12  # a buffer's creation time: every timestamp is later, every code smaller


def test_realign_hand_computed() -> None:
    """The decorator appended the time of f's Enter (T0+100); a signal handler h
    then recorded its Enter and Leave (T0+150, T0+160) before f's code: the pairs
    come back whole, h's first (restore_order puts them in time order after)."""
    data = array("q", [T0 + 50, L_W, T0 + 100, T0 + 150, E_F, T0 + 160, L_F, E_W,
                       T0 + 200, L_W])
    got, lost = reentry.realign(data, T0)
    assert list(got) == [T0 + 50, L_W, T0 + 150, E_F, T0 + 160, L_F, T0 + 100, E_W,
                         T0 + 200, L_W] and lost == 0
    aligned = array("q", [T0 + 1, E_W, T0 + 2, L_W, T0 + 3])  # a copy mid-append
    assert reentry.realign(aligned, T0) == (aligned, 0)
    synthetic = array("q", [100, E_W, 140, L_W])  # times not from the clock
    assert reentry.realign(synthetic, T0) == (synthetic, 0)


@st.composite
def _interrupted(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, int]]]:
    """A buffer's values as appended when traced signal handlers run between a
    record's two halves, possibly inside each other, and the records written."""
    values: list[int] = []
    records: list[tuple[int, int]] = []
    clock = [T0]

    def record(depth: int) -> None:
        clock[0] += draw(st.integers(1, 50))
        pair = (clock[0], draw(st.sampled_from([E_W, L_W, E_F, L_F, tb.MPI_SEND])))
        records.append(pair)
        values.append(pair[0])
        for _ in range(draw(st.integers(0, 2)) if depth < 2 else 0):
            record(depth + 1)  # a handler's record between the halves
        values.append(pair[1])

    for _ in range(draw(st.integers(1, 20))):
        record(0)
    return values, records


@settings(max_examples=200, deadline=None)
@given(_interrupted())
def test_realign_and_restore_order_give_back_every_record(case) -> None:
    values, records = case
    pairs, lost = reentry.realign(array("q", values), T0)
    got, _, _, _ = reentry.restore_order(pairs, array("q"))
    assert lost == 0
    assert list(zip(got[0::2], got[1::2], strict=True)) == sorted(records)


def test_restore_order_hand_computed() -> None:
    """A wrapper stamped its Enter at 100 and its MpiSend at 120; before it
    appended them, a finalizer ran and recorded its Enter/Leave (150, 180). Its
    first bracket (100 -> 200) holds the finalizer and is dropped; the second
    (300 -> 350, the Leave's) is kept."""
    data = _pairs([(150, E_F), (180, L_F), (100, E_W), (120, tb.MPI_SEND), (300, L_W),
                   (500, E_F)])
    backs = array("q", [100, 200, 300, 350])
    got, kept, late, dropped = reentry.restore_order(data, backs)
    assert list(got) == [100, E_W, 120, tb.MPI_SEND, 150, E_F, 180, L_F, 300, L_W,
                         500, E_F]
    assert list(kept) == [300, 350] and (late, dropped) == (2, 1)


def test_restore_order_drops_overlapping_brackets_and_keeps_ordered_buffers() -> None:
    data = _pairs([(100, E_W), (200, E_W), (250, L_W), (400, L_W)])
    backs = array("q", [100, 400, 200, 250, 500, 600])
    same = reentry.restore_order(data, backs)
    assert same[0] is data and same[1] is backs and same[2:] == (0, 0)
    late = _pairs([(100, E_W), (200, E_W), (250, L_W), (90, L_F), (400, L_W)])
    _, kept, n, dropped = reentry.restore_order(late, backs)
    assert list(kept) == [500, 600] and (n, dropped) == (1, 2)


@st.composite
def _reentered(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """A buffer as the tracer appends it, and the records in time order: each
    record's time is stamped, then (sometimes) a re-entered finalizer records a
    nested block of Enter/Leave pairs with later times, then the stamped record is
    appended."""
    appended, truth, t = [], [], 0
    for _ in range(draw(st.integers(1, 30))):
        t += draw(st.integers(1, 50))
        stamped = (t, draw(st.sampled_from([E_W, L_W, tb.MPI_SEND])))
        truth.append(stamped)
        for _ in range(draw(st.integers(0, 2))):
            depth = draw(st.integers(1, 3))
            block = []
            for d in range(depth):  # Python code runs after the stamp: later
                t += draw(st.integers(1 if d == 0 else 0, 20))
                block.append((t, tb.ENTER | (10 + d) << tb.KIND_BITS))
            for d in reversed(range(depth)):
                t += draw(st.integers(0, 20))
                block.append((t, tb.LEAVE | (10 + d) << tb.KIND_BITS))
            appended += block
            truth += block
        appended.append(stamped)
    return appended, truth


@settings(max_examples=200, deadline=None)
@given(_reentered())
def test_restore_order_gives_back_the_time_order(case) -> None:
    """Whatever re-entered the tracer between a stamp and its append, the
    records come out in time order, every finalizer block whole and nested, and
    no bracket that spans a finalizer's records survives."""
    appended, truth = case
    got, kept, _, _ = reentry.restore_order(_pairs(appended), array("q"))
    pairs = list(zip(got[0::2], got[1::2], strict=True))
    assert [p[0] for p in pairs] == sorted(p[0] for p in truth)
    assert sorted(pairs) == sorted(truth)
    stack = []
    for _, code in pairs:
        if code & tb.KIND_MASK == tb.ENTER and code >> tb.KIND_BITS >= 10:
            stack.append(code >> tb.KIND_BITS)
        elif code & tb.KIND_MASK == tb.LEAVE and code >> tb.KIND_BITS >= 10:
            assert stack.pop() == code >> tb.KIND_BITS
    assert not stack
    # one bracket per stamped record, to the next stamp: none holds a finalizer
    stamps = [p[0] for p in appended if p[1] in (E_W, L_W, tb.MPI_SEND)]
    backs = array("q", [x for a in stamps for x in (a, a + 1)])
    _, kept, _, _ = reentry.restore_order(_pairs(appended), backs)
    fin = [p[0] for p in truth if p[1] >> tb.KIND_BITS >= 10]
    for first, back in zip(kept[0::2], kept[1::2], strict=True):
        assert not any(first <= x <= back for x in fin if x != first)


# ---------------------------------------------------------------------------------
# real programs



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
