"""The tracer buffer's reserved memory (calibration/tracer/buffer.py,
``Buffer.reserve``): the page faults of a growing buffer happen inside recorded
BufferFlush intervals, never between them, and compensate removes the intervals."""

from __future__ import annotations

import resource
import subprocess
import sys
from array import array
from pathlib import Path

import numpy as np
import pytest

import compensate as c
from calibration.tracer import buffer as tb
from calibration.tracer import insitu
from calibration.tracer.archive import RankData, write_archive
from compensate.platform import Platform

_THREAD = getattr(resource, "RUSAGE_THREAD", None)
ROOT = Path(__file__).resolve().parent.parent.parent


def _flushes(buf: tb.Buffer) -> list[tuple[int, int]]:
    """(start, stop) of the buffer's BufferFlush records."""
    return [(r[0], r[2]) for r in buf.rows() if r[1] == tb.BUFFER_FLUSH]


@pytest.mark.parametrize("set_len", ["ctypes", "del"])
def test_prefault_keeps_contents_and_allocation(set_len: str, monkeypatch) -> None:
    """Both ways of cutting the array back (its length field, or 15 items at a
    time) keep the contents and the allocation."""
    assert tb._SET_LEN is not None  # CPython here
    if set_len == "del":
        monkeypatch.setattr(tb, "_SET_LEN", None)
    a = array("q", range(37))
    assert tb.prefault(a, 1000)
    assert a.tolist() == list(range(37))
    assert tb.capacity(a) >= 37 + 1000


_FAULTS = """
import resource, sys
from calibration.tracer import buffer as tb
counts = []
for reserve in (False, True):
    rec = tb.Recorder(reserve=reserve)
    buf, add = rec.main, rec.main.add
    faults = 0
    for _ in range(60):  # 60 x 4,000 items = 1.9 MB: beyond the first reserve
        f0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for i in range(4000):
            add(i)
        faults += resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - f0
        buf.leave_at(0, 0)  # a wrapper's last record before its hand-back
        buf.back(0)
    counts.append(faults)
print(*counts)
"""


@pytest.mark.skipif(_THREAD is None, reason="needs getrusage(RUSAGE_THREAD) (Linux)")
def test_appends_into_reserved_memory_do_not_fault() -> None:
    """The records between two hand-backs land in touched memory: no page fault
    while appending (each fault is ~3 µs no per-record overhead can remove). The
    same appends to a buffer that does not reserve fault about once per 4 KiB, so
    the check could fail. In a fresh interpreter: one that has freed large blocks
    may hand out memory it touched before, and the control would not fault."""
    proc = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    plain, reserving = map(int, proc.stdout.split())
    assert plain > 60 * 4000 * 8 // 4096 // 2
    assert reserving <= 2


def test_back_records_the_reservation_as_a_buffer_flush() -> None:
    """A reserving buffer tops its memory up once half of it is used, at the
    hand-back that ends a wrapped call (after its Leave; not at the one before the
    MPI call, where the flush would lie inside the communication), and records
    that as a BufferFlush (start, stop) after the hand-back stamp; a buffer that
    does not reserve (the calibration's) never writes one."""
    rec = tb.Recorder(reserve=True)
    buf = rec.main
    assert _flushes(buf) == []  # the start's reservation is not a record
    half = tb.RESERVE_ITEMS // 2  # items; a record is two
    for i in range(half // 2 - 5):
        buf.enter_at(i, 0)
    buf.leave_at(0, 0)
    buf.back(0)
    assert _flushes(buf) == []  # not yet half used
    for i in range(10):
        buf.enter_at(i, 0)
    buf.add_record(10, tb.MPI_SEND, (1, 0, 0, 8))
    buf.back(0)  # the hand-back before the MPI call: never a flush there
    assert _flushes(buf) == []
    buf.leave_at(20, 0)
    buf.back(0)  # the call's last hand-back, after its Leave
    (start, stop), = _flushes(buf)
    assert buf.backs[-1] <= start <= stop
    plain = tb.Buffer()
    for i in range(2 * tb.RESERVE_ITEMS):
        plain.enter_at(i, 0)
    plain.back(0)
    assert _flushes(plain) == []
    # a thread's buffer reserves at its first hand-back after a Leave
    thread = rec.thread_begins(1)
    thread.back(0)
    assert _flushes(thread) == []
    thread.leave_at(1, 0)
    thread.back(0)
    assert len(_flushes(thread)) == 1


def test_flush_interval_is_removed_and_not_an_insitu_sample(tmp_path: Path) -> None:
    """Hand-computed: an MPI_Send wrapper (Enter at 1000, MpiSend at 1040, handed
    back at 1500), then a reservation from 1600 to 9600 (a BufferFlush), then the
    program's function f at 10000-10300. The flush gets no in-situ sample and no
    overhead; compensate removes its 8000 ns (R6), so f moves 8000 ns plus the
    wrapper records' overheads earlier."""
    rec = tb.Recorder()
    f = rec.region_id(("f", "prog.f", "prog.py", 1, "user", "FUNCTION"))
    send = rec.region_id(("MPI_Send", "MPI_Send", "", 0, "mpi", "POINT2POINT"))
    rec.comm_id((0,))
    buf = rec.main
    buf.add_record(100, tb.PROGRAM_BEGIN, ("prog.py", []))
    buf.enter_at(1000, send)
    buf.add_record(1040, tb.MPI_SEND, (0, 0, 0, 8))
    buf.backs.extend((1000, 1500))
    buf.leave_at(1550, send)
    buf.add_record(1600, tb.BUFFER_FLUSH, (9600,))
    buf.enter_at(10000, f)
    buf.leave_at(10300, f)
    buf.add_record(11000, tb.PROGRAM_END, (0,))
    times = np.asarray(buf.data[0::2])
    assert insitu.samples(times, np.asarray(buf.backs), 10.0).tolist() == \
        [-1, 40, 470, -1, -1, -1, -1, -1]
    table = insitu.location_table(buf.data, buf.backs, [r[0] for r in rec.regions], {},
                                  back_ns=10.0)
    assert "BufferFlush" not in table["by_kind"]
    path = tmp_path / "run" / "traces.otf2"
    write_archive(str(path), [RankData.of(0, "node", rec, [], (0, 0))])
    trace = c.read(path)
    ev = trace.events[0]
    flush = ev.kind == c.model.KIND_CODE["BufferFlush"]
    assert ev.time[flush].tolist() == [1600] and ev.size[flush].tolist() == [9600]
    plat = Platform(0.0, {})  # no overhead: only the flush goes
    out = c.compensate(trace, platform=plat).trace.events[0]
    assert out.time.tolist() == [100, 1000, 1040, 1550, 1600, 2000, 2300, 3000]
    assert out.size[flush].tolist() == [1600]  # stop time = start (R6)
