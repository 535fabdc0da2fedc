"""The tracer's platform file, per-kind ``O`` attributed as in its own trace.

The tracer's wrappers stamp first and work after (:mod:`calibration.tracer.insitu`):
a wrapper stamps its completion record (MpiRecv, MpiCollectiveEnd, MpiIrecv, ...)
and its Leave back to back, and everything it does lies after the last stamp
before a hand-over. The gap after a completion record is therefore one timer read
(50-60 ns here), and the wrapper's cost sits in the gap after the Leave, the
MpiSend, the Enter of an MPI call. The calibration's record-path cost
(:mod:`calibration.tracer.overhead`: a record method called back to back,
~180-400 ns per kind) describes what a record costs to store, not where that cost
lies in the trace: as the platform file's ``O(MpiRecv)`` it overcompensated every
MpiRecv → Leave gap of the tracer's own traces (issue #22: 55-59 of 276 records of
``examples/mpi/allcalls.py`` on 2 ranks).

:func:`stamps_first` rewrites the file's ``event_overhead_by_kind`` from the run's
in-situ tables, which attribute by the same rule: per kind the **median over
locations** of the tables' value (each a location's mean in-situ sample, or the
calibrated value where the kind was not bracketed), **capped by the in-trace
bound** over all locations (the smallest gap after a record of that kind anywhere,
``calibrate check``'s bound), so that the file alone overcompensates no gap of
its trace. Enter and Leave take the function decorator's value (the tables'
``by_kind``), capped by the bound of every Enter (Leave) of the trace, the MPI
wrappers' included: one per-kind value cannot hold the MPI wrappers' larger
per-region costs, which only the tables give (that is why the file also says
``prefer_insitu``). Kinds the trace does not contain keep the calibrated
record-path cost.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from calibration.tracer import buffer as tb
from calibration.tracer.clock import corrected


def trace_bounds(ranks: list[Any]) -> dict[str, float]:
    """Per record kind name: the smallest gap (seconds) after a record of that kind
    on any location of ``ranks`` (:class:`~calibration.tracer.archive.RankData`:
    threads with (time ns, code) pairs, clock offsets), on the written archive's
    clock, as :mod:`calibration.tracecheck` computes it from the archive. The
    tracer's BufferFlush records (memory reservations) are left out: ``check``
    takes their interval off the gap, which these pairs do not hold."""
    best: dict[str, float] = {}
    for d in ranks:
        for th in d.threads:
            pairs = np.asarray(th.data, dtype=np.int64).reshape(-1, 2)
            if len(pairs) < 2:
                continue
            times = corrected(pairs[:, 0], list(d.offsets))
            gaps = np.diff(times).astype(np.float64)
            kinds = pairs[:-1, 1] & tb.KIND_MASK
            for kind in np.unique(kinds).tolist():
                name = tb.KIND_NAMES[kind]
                if name == "BufferFlush":
                    continue
                g = float(gaps[kinds == kind].min()) * 1e-9
                best[name] = min(g, best.get(name, g))
    return best


def stamps_first(by_kind: dict[str, float], tables: list[dict[str, Any]],
                 bounds: dict[str, float]) -> tuple[dict[str, float], dict[str, Any]]:
    """The platform file's per-kind overhead for the trace the ``tables`` (its
    in-situ tables, one per location) and ``bounds`` (:func:`trace_bounds`) come
    from, and a note of where each value came from (the file's
    ``calibration.attribution``). ``by_kind``: the calibrated record-path values,
    kept for kinds that no table names."""
    values: dict[str, list[float]] = {}
    for table in tables:
        for kind, v in table.get("by_kind", {}).items():
            values.setdefault(kind, []).append(float(v))
    out = dict(by_kind)
    note: dict[str, Any] = {}
    for kind, vs in sorted(values.items()):
        med = statistics.median(vs)
        cap = bounds.get(kind, float("inf"))
        # whole nanoseconds, as the tables (a half-tick O can round a record onto
        # its predecessor); never above the bound
        ns = round(med * 1e9)
        if np.isfinite(cap):
            ns = min(ns, int(np.floor(cap * 1e9 + 1e-6)))
        value = ns / 1e9  # the nearest float to ns nanoseconds: not above the bound
        out[kind] = max(value, 0.0)
        note[kind] = {"record_path": by_kind.get(kind), "median_of_locations": med,
                      "locations": len(vs),
                      "bound": cap if np.isfinite(cap) else None, "used": out[kind]}
    return out, note
