"""Clock offsets between ranks, for the OTF2 ClockOffset definitions.

Every rank time-stamps with its node's ``time.monotonic_ns``. Ranks on other nodes
than rank 0 run other clocks, so at the start and at the end of the run each rank
measures the offset of rank 0's clock to its own by ping-pong (Cristian's method):
the rank sends at ``t1``, rank 0 answers with its time ``t0``, the answer arrives at
``t2``; then ``offset = t0 - (t1 + t2) / 2`` with an error of at most half the round
trip. Of ``samples`` exchanges the one with the shortest round trip is kept.

A reader maps a local time ``t`` to rank 0's time as ``t + offset(t)``, interpolating
linearly between the start and the end measurement (the OTF2 reader does this
itself when an archive has ClockOffset definitions, see docs/realrun.md).

Ranks on rank 0's node share its clock (CLOCK_MONOTONIC is per machine): their
offset is exactly 0, and :func:`clock_offsets` reports 0 for them unless
``trust_host=False`` — a ping-pong estimate there would only add its own error.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import monotonic_ns
from typing import Any

import numpy as np

_TAG = 7011


@dataclass(frozen=True)
class Offset:
    """One measurement: at local time ``time`` rank 0's clock read ``time + offset``
    (nanoseconds); ``error`` = half the round trip; ``measured`` = the ping-pong
    estimate even where ``offset`` was set to 0 (same node)."""

    time: int
    offset: int
    error: float
    measured: int


def ping_pong(comm: Any, samples: int = 32) -> Offset:
    """Measure this rank's offset to rank 0 of ``comm`` (collective over ``comm``;
    rank 0 serves the others one after the other and gets offset 0)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    buf = np.zeros(1, dtype=np.int64)
    if rank == 0:
        for peer in range(1, size):
            for _ in range(samples):
                comm.Recv(buf, source=peer, tag=_TAG)
                buf[0] = monotonic_ns()
                comm.Send(buf, dest=peer, tag=_TAG)
        t = monotonic_ns()
        return Offset(t, 0, 0.0, 0)
    best: tuple[int, int, int] | None = None
    for _ in range(samples):
        t1 = monotonic_ns()
        comm.Send(buf, dest=0, tag=_TAG)
        comm.Recv(buf, source=0, tag=_TAG)
        t2 = monotonic_ns()
        if best is None or t2 - t1 < best[0]:
            best = (t2 - t1, (t1 + t2) // 2, int(buf[0]) - (t1 + t2) // 2)
    assert best is not None
    rtt, mid, offset = best
    return Offset(mid, offset, rtt / 2, offset)


def clock_offsets(comm: Any, samples: int = 32, trust_host: bool = True) -> Offset:
    """This rank's offset to rank 0 (collective); 0 for ranks on rank 0's host
    when ``trust_host``."""
    from mpi4py import MPI

    host = MPI.Get_processor_name()
    same = comm.bcast(host, root=0) == host
    measured = ping_pong(comm, samples)
    if same and trust_host:
        return Offset(measured.time, 0, measured.error, measured.offset)
    return measured


def corrected(t: Any, offsets: list[Offset]) -> Any:
    """``t`` (a time or an int64 array of times) on rank 0's clock: linear
    interpolation (and extrapolation) between the offset measurements, as the OTF2
    reader does (rounded half to even, Python's ``round`` and numpy's alike)."""
    if not offsets:
        return t
    if len(offsets) == 1 or offsets[-1].time == offsets[0].time:
        return t + offsets[0].offset
    a, b = offsets[0], offsets[-1]
    slope = (b.offset - a.offset) / (b.time - a.time)
    shift = a.offset + slope * (t - a.time)
    if isinstance(t, np.ndarray):
        return t + np.round(shift).astype(np.int64)
    return t + round(shift)
