"""The tracer's direct event writer (:mod:`calibration.tracer.evtwrite`) writes the
archive the ``otf2`` event objects write, byte for byte.

Each test writes the same ranks twice with :func:`write_archive`: once as it is
(the common kinds straight through the C library) and once with every record
handed to the object path (``write_rows(..., direct=False)``), and compares all
files of the two archives (the anchor file with its random trace id masked).
No MPI is needed.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from array import array
from pathlib import Path
from typing import Any

import _otf2
import numpy as np
import pytest

from calibration.tracer import buffer as tb
from calibration.tracer import evtwrite, insitu
from calibration.tracer.archive import RankData, ThreadData, write_archive

COMM = ((0, 1), 0)
WIN = (COMM, 0)
REGIONS = [("work", "prog.work", "prog.py", 3, "user", "FUNCTION"),
           ("MPI_Send", "MPI_Send", "", 0, "mpi", "POINT2POINT"),
           ("lock", "threading.Lock.acquire", "", 0, "pthread", "FUNCTION")]


class _Rows:
    """A thread's buffer columns, filled record by record at increasing times."""

    def __init__(self, t0: int) -> None:
        self.t = t0
        self.data, self.extra, self.ints = array("q"), [], array("q")

    def add(self, kind: int, *fields: Any, dt: int = 100) -> None:
        self.t += dt
        if kind in (tb.ENTER, tb.LEAVE) or kind in tb.SEQUENCE_KINDS:
            code = kind | fields[0] << tb.KIND_BITS
        elif kind in tb.LOCK_KINDS:
            code = kind | len(self.ints) << tb.KIND_BITS
            self.ints.extend(fields)
        else:
            code = kind | len(self.extra) << tb.KIND_BITS
            self.extra.append(tuple(fields))
        self.data.extend((self.t, code))

    def thread(self, name: str, sequence: int | None) -> ThreadData:
        return ThreadData(name, sequence, self.data, self.extra, self.ints)


def _master(rank: int, seed: int, n_random: int) -> _Rows:
    """Every kind the tracer writes, the direct ones and the others interleaved,
    then ``n_random`` random common records."""
    peer = 1 - rank
    r = _Rows(10**9 + 1000 * rank)
    r.add(tb.PROGRAM_BEGIN, "prog.py", ["--x", "1"])
    r.add(tb.ENTER, 0)
    r.add(tb.ENTER, 1)
    r.add(tb.MPI_SEND, peer, 0, 7, 1 << 40)
    r.add(tb.LEAVE, 1)
    r.add(tb.MPI_RECV, peer, 0, 0xFFFFFFFF, 0)
    r.add(tb.MPI_ISEND, peer, 0, 3, 800, 1)
    r.add(tb.MPI_IRECV_REQUEST, 2)
    r.add(tb.MPI_REQUEST_TEST, 2)
    r.add(tb.MPI_IRECV, peer, 0, 3, 800, 2)
    r.add(tb.MPI_ISEND_COMPLETE, 1)
    r.add(tb.COLL_BEGIN)
    r.add(tb.COLL_END, 2, 0, -1, 16, 32)  # no root
    r.add(tb.COLL_BEGIN)
    r.add(tb.COLL_END, 1, 0, 0, 8, 0)  # root 0
    r.add(tb.THREAD_CREATE, 1)
    r.add(tb.THREAD_ACQUIRE_LOCK, 1, 1)
    r.add(tb.THREAD_RELEASE_LOCK, 1, 1)
    r.add(tb.BUFFER_FLUSH, r.t + 50)
    r.add(tb.NBC_REQUEST, 3)
    r.add(tb.NBC_COMPLETE, 2, 0, -1, 8, 8, 3)
    r.add(tb.REQUEST_CANCELLED, 4)
    r.add(tb.PROBE, peer, 0, 5, 11)
    r.add(tb.MRECV, 11, 64)
    r.add(tb.PROBE, peer, 0, 5, 12)
    r.add(tb.IMRECV_REQUEST, 12, 5)
    r.add(tb.IMRECV, 5, 64)
    r.add(tb.P_SEND_INIT, peer, 0, 9, 4096, 4, 6)
    r.add(tb.P_SEND_REQUEST, 6)
    r.add(tb.P_READY, 6, 0)
    r.add(tb.P_SEND_COMPLETE, 6)
    r.add(tb.RMA_WIN_CREATE, 0)
    r.add(tb.RMA_COLL_BEGIN)
    r.add(tb.RMA_COLL_END, 2, 1, 0)
    r.add(tb.RMA_REQUEST_LOCK, 0, peer, 0)
    r.add(tb.RMA_PUT, 0, peer, 128, 1)
    r.add(tb.RMA_OP_COMPLETE, 0, 1)
    r.add(tb.RMA_RELEASE_LOCK, 0, peer)
    r.add(tb.RMA_GROUP_SYNC, 1, 0, (0, 1))
    r.add(tb.RMA_WIN_DESTROY, 0)
    r.add(tb.THREAD_WAIT, 1)
    r.add(tb.LEAVE, 0)
    rng = np.random.default_rng(seed)
    depth = 0
    for _ in range(n_random):
        choice = int(rng.integers(0, 10))
        dt = int(rng.integers(0, 3)) * 50  # equal timestamps too
        if choice < 4 or depth == 0:
            r.add(tb.ENTER, int(rng.integers(0, 2)), dt=dt)
            depth += 1
        elif choice < 8:
            r.add(tb.LEAVE, 0, dt=dt)
            depth -= 1
        elif choice == 8:
            r.add(tb.MPI_SEND, peer, 0, int(rng.integers(0, 100)), int(rng.integers(0, 10**6)),
                  dt=dt)
        else:
            r.add(tb.RMA_WIN_CREATE if rng.random() < 0.5 else tb.PROGRAM_END, 0, dt=dt)
    r.add(tb.PROGRAM_END, 0)
    return r


def _worker(rank: int) -> _Rows:
    r = _Rows(10**9 + 1000 * rank + 150)
    r.add(tb.THREAD_BEGIN, 1)
    r.add(tb.ENTER, 2)
    r.add(tb.THREAD_ACQUIRE_LOCK, 2, 1)
    r.add(tb.LEAVE, 2)
    r.add(tb.THREAD_RELEASE_LOCK, 2, 1)
    r.add(tb.THREAD_END, 1)
    return r


def _ranks(n_random: int = 300) -> list[RankData]:
    out = []
    for rank in (0, 1):
        threads = [_master(rank, rank, n_random).thread("Master thread", 0),
                   _worker(rank).thread("Pthread thread 1", 1)]
        out.append(RankData(rank, "node", threads, list(REGIONS), [COMM],
                            realtime=(10**9, 1_700_000_000 * 10**9), wins=[WIN]))
    return out


def _costs(data: Any, *args: Any, **kwargs: Any) -> np.ndarray:
    """Attribute values: absent (-1) on every third record, 0, small, and huge."""
    n = len(data) // 2
    i = np.arange(n, dtype=np.int64)
    cost = np.where(i % 3 == 1, -1, i * 37 + 5)
    cost[i % 11 == 0] = 0
    cost[i % 17 == 5] = 2**63 - 1
    return cost


_REAL_WRITE_ROWS = evtwrite.write_rows


def _force(monkeypatch: pytest.MonkeyPatch, direct: bool) -> None:
    """Make :func:`write_archive` write with (or without) the direct path."""
    monkeypatch.setattr(evtwrite, "write_rows",
                        lambda *a, **k: _REAL_WRITE_ROWS(*a, **{**k, "direct": direct}))


def _write_both(tmp: Path, monkeypatch: pytest.MonkeyPatch, ranks: list[RankData],
                costs: bool = True) -> tuple[Path, Path, list[int]]:
    """The archive written with the direct path (``new``) and with the object
    path only (``old``); returns both anchors and the direct counts per location."""
    if costs:
        monkeypatch.setattr(insitu, "record_overheads", _costs)
    counts: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> int:
        n = _REAL_WRITE_ROWS(*args, **kwargs)
        counts.append(n)
        return n

    monkeypatch.setattr(evtwrite, "write_rows", counting)
    new = tmp / "new" / "traces.otf2"
    n_new = write_archive(str(new), ranks, program="prog.py --x 1")
    _force(monkeypatch, False)
    old = tmp / "old" / "traces.otf2"
    n_old = write_archive(str(old), ranks, program="prog.py --x 1")
    assert n_new == n_old == sum(len(th.data) // 2 for d in ranks for th in d.threads)
    return new, old, counts


def _files(anchor: Path) -> dict[str, bytes]:
    """All files of the archive, the anchor's trace id zeroed."""
    root = anchor.parent
    out = {p.relative_to(root).as_posix(): p.read_bytes()
           for p in sorted(root.rglob("*")) if p.is_file()}
    reader = _otf2.Reader_Open(str(anchor))
    try:
        trace_id = struct.pack("<Q", _otf2.Reader_GetTraceId(reader))
    finally:
        _otf2.Reader_Close(reader)
    assert out[anchor.name].count(trace_id) == 1
    out[anchor.name] = out[anchor.name].replace(trace_id, bytes(8))
    return out


def test_direct_path_writes_the_same_files(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kind, attributes present and absent, fallback kinds interleaved, two
    ranks of two threads: the same files, byte for byte."""
    new, old, counts = _write_both(tmp_path, monkeypatch, _ranks())
    a, b = _files(new), _files(old)
    assert sorted(a) == sorted(b)
    assert len([f for f in a if f.endswith(".evt")]) == 4  # four locations
    for name in a:
        assert a[name] == b[name], name
    assert len(counts) == 4 and all(counts), counts  # the direct path wrote records
    printed = [_otf2_print(p) for p in (new, old)]
    if printed[0] is not None:
        assert printed[0] == printed[1]
        assert "ADDITIONAL ATTRIBUTES" in printed[0] and "MPI_COLLECTIVE_END" in printed[0]


def test_direct_path_with_the_tracers_own_costs(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Without patched costs (in-situ brackets on some records, -1 elsewhere)."""
    ranks = _ranks(50)
    for d in ranks:
        th = d.threads[0]
        times = th.data[0::2]
        th.backs = array("q", [times[1], times[2] + 30, times[5], times[6] + 40])
    new, old, _ = _write_both(tmp_path, monkeypatch, ranks, costs=False)
    assert _files(new) == _files(old)


def test_empty_and_fallback_only_locations(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ranks = _ranks(0)
    only = _Rows(10**9 + 5)
    only.add(tb.THREAD_BEGIN, 1)
    only.add(tb.THREAD_END, 1)
    ranks[0].threads[1] = only.thread("Pthread thread 1", 1)
    ranks[1].threads[1] = _Rows(0).thread("Pthread thread 1", 1)
    new, old, counts = _write_both(tmp_path, monkeypatch, ranks)
    assert _files(new) == _files(old)
    assert counts[1] == counts[3] == 0


def _otf2_print(anchor: Path) -> str | None:
    if shutil.which("otf2-print") is None:
        return None
    proc = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True,
                          timeout=60, check=True)
    return proc.stdout


@pytest.mark.parametrize("with_attribute", [True, False])
def test_otf2_error_raises_what_the_bindings_raise(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   with_attribute: bool) -> None:
    """OTF2 refuses a timestamp below the location's last one: the direct path
    raises the bindings' ``_otf2.Error`` with the same code, deletes its attribute
    list, and leaves no archive."""
    monkeypatch.setattr(insitu, "record_overheads",
                        lambda data, *a, **k: np.full(len(data) // 2,
                                                      7 if with_attribute else -1))
    r = _Rows(10**9)
    r.add(tb.ENTER, 0)
    r.add(tb.PROGRAM_BEGIN, "p", [])
    r.add(tb.LEAVE, 0, dt=-50)  # goes back in time
    ranks = [RankData(0, "node", [r.thread("Master thread", 0)], list(REGIONS), [])]
    evtwrite._function("OTF2_AttributeList_Delete")
    real_delete = evtwrite._functions["OTF2_AttributeList_Delete"]
    deleted: list[int] = []

    def delete(al: int) -> int:
        deleted.append(al)
        return real_delete(al)

    monkeypatch.setitem(evtwrite._functions, "OTF2_AttributeList_Delete", delete)
    errors = []
    for name, direct in (("new", True), ("old", False)):
        _force(monkeypatch, direct)
        path = tmp_path / name / "traces.otf2"
        with pytest.raises(_otf2.Error) as err:
            write_archive(str(path), ranks)
        errors.append(err.value)
        assert not any(path.parent.iterdir())
    assert [e.code for e in errors] == [_otf2.ErrorCode(78)] * 2  # INVALID_ARGUMENT
    assert str(errors[0]) == str(errors[1])
    assert len(deleted) == 1 and deleted[0]


def test_error_code_is_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Any nonzero code from the C call raises (here: a stub returning one)."""
    evtwrite._function("OTF2_EvtWriter_Leave")
    monkeypatch.setitem(evtwrite._functions, "OTF2_EvtWriter_Leave", lambda *a: 17)
    r = _Rows(10**9)
    r.add(tb.ENTER, 0)
    r.add(tb.LEAVE, 0)
    ranks = [RankData(0, "node", [r.thread("Master thread", 0)], list(REGIONS), [])]
    with pytest.raises(_otf2.Error) as err:
        write_archive(str(tmp_path / "x" / "traces.otf2"), ranks)
    assert err.value.code == _otf2.ErrorCode(17)
