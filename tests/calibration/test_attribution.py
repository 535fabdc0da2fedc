"""The tracer's platform file attributed as its trace (calibration/tracer/attribution.py):
hand-computed bounds (clock offsets applied, BufferFlush left out) and per-kind
values (median over locations, capped by the bound, calibrated where absent)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from calibration.tracer import buffer as tb
from calibration.tracer.attribution import stamps_first, trace_bounds
from calibration.tracer.clock import Offset


def _thread(*records: tuple[int, int]) -> SimpleNamespace:
    """(time ns, kind) records as a buffer's flat (time, code) pairs."""
    return SimpleNamespace(data=[x for t, k in records for x in (t, k)])


def test_trace_bounds_hand_computed() -> None:
    # rank 0: Enter 0, MpiRecv 1000, Leave 1060, Enter 5000, MpiRecv 6000, Leave 6100
    r0 = SimpleNamespace(offsets=[], threads=[_thread(
        (0, tb.ENTER), (1000, tb.MPI_RECV), (1060, tb.LEAVE), (5000, tb.ENTER),
        (6000, tb.MPI_RECV), (6100, tb.LEAVE))])
    # rank 1: its clock drifts by +100 ns per 10 000 ns (offset 0 at 0, 100 at 10 000):
    # MpiRecv 0 -> Leave 80 becomes 0 -> 81 on rank 0's clock; a BufferFlush is
    # followed by 5 ns (its interval is not in these pairs) and is left out
    r1 = SimpleNamespace(offsets=[Offset(0, 0, 0.0, 0), Offset(10000, 100, 0.0, 100)],
                         threads=[_thread((0, tb.MPI_RECV), (80, tb.LEAVE),
                                          (2000, tb.BUFFER_FLUSH), (2005, tb.ENTER),
                                          (9000, tb.LEAVE))])
    bounds = trace_bounds([r0, r1])
    assert bounds == {"Enter": pytest.approx(1000e-9), "MpiRecv": pytest.approx(60e-9),
                      "Leave": pytest.approx(1939e-9)}  # 80 -> 2000 is 81 -> 2020


def test_stamps_first_median_over_locations_capped_by_the_bound() -> None:
    record_path = {"MpiRecv": 400e-9, "MpiSend": 300e-9, "ThreadCreate": 220e-9}
    tables = [{"by_kind": {"MpiRecv": 55e-9, "MpiSend": 1500e-9, "Enter": 170e-9}},
              {"by_kind": {"MpiRecv": 70e-9, "MpiSend": 1700e-9, "Enter": 170e-9}},
              {"by_kind": {"Enter": 170e-9}}]  # a thread without MPI
    bounds = {"MpiRecv": 60e-9, "MpiSend": 8000e-9, "Enter": 130e-9}
    by_kind, note = stamps_first(record_path, tables, bounds)
    assert by_kind["MpiRecv"] == pytest.approx(60e-9)   # median 62.5 ns, capped at 60
    assert by_kind["MpiSend"] == pytest.approx(1600e-9)  # median of the two locations
    assert by_kind["Enter"] == pytest.approx(130e-9)     # an MPI Enter's gap caps it
    assert by_kind["ThreadCreate"] == 220e-9             # not in the trace: calibrated
    assert note["MpiRecv"] == {"record_path": 400e-9,
                               "median_of_locations": pytest.approx(62.5e-9), "locations": 2,
                               "bound": 60e-9, "used": by_kind["MpiRecv"]}
    # never above the bound, in whole nanoseconds
    for kind, v in by_kind.items():
        assert v <= bounds.get(kind, 1.0)
        assert v * 1e9 == pytest.approx(round(v * 1e9))
