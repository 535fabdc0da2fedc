"""In-trace bound: the overhead a trace itself allows, per record kind.

Under the measurement model (docs/design.md §2) a record is time-stamped and then
the tracer spends ``O(kind)`` writing it before the program goes on, so the next
record on the same location cannot be stamped earlier than ``O(kind)`` later:
every gap after a record of kind ``k`` is at least ``O(k)``. The smallest such
gap is therefore an upper bound on ``O(k)`` -- and exactly the largest overhead
``compensate`` can subtract there without clamping (R1 overcompensation). For a
BufferFlush the flush interval itself (``stop_time - time``) is taken off first,
as the engine does.

Where the platform states costs per region (``event_overhead_by_region``), the
Enter and Leave records of each such region are a group of their own
(``Enter@pthread_mutex_lock``), bounded and compared with that region's cost.

Timestamps are integer ticks, so the true overhead may exceed the bound by less
than one tick; records that share a timestamp with their successor (Score-P
stamps a Metric with the time of the event it belongs to) give a bound of 0.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from compensate.model import BUFFER_FLUSH, KIND_NAMES, LEAVE, Trace
from compensate.platform import Platform
from compensate.regioncosts import RECORDS, bind


@dataclass(frozen=True)
class KindGaps:
    """Gaps (seconds) after every record of one kind, with where each one is."""

    kind: str
    gaps: np.ndarray          # seconds, one per record of this kind that has a successor
    locations: np.ndarray     # location id of each gap
    indices: np.ndarray       # record index (the earlier record) of each gap

    @property
    def bound(self) -> float:
        """Upper bound on O(kind): the smallest gap, seconds."""
        return float(self.gaps.min())

    def where(self) -> tuple[int, int]:
        """(location, record index) of the smallest gap."""
        i = int(np.argmin(self.gaps))
        return int(self.locations[i]), int(self.indices[i])

    def below(self, overhead: float) -> int:
        """How many gaps an overhead of ``overhead`` seconds would overcompensate."""
        return int(np.count_nonzero(self.gaps < overhead * (1 - 1e-12)))


@dataclass(frozen=True)
class Verdict:
    """One kind's bound against the platform's overhead for it."""

    gaps: KindGaps
    overhead: float           # the platform's O(kind), seconds
    overcompensated: int      # gaps shorter than that overhead

    @property
    def ok(self) -> bool:
        return self.overcompensated == 0


def kind_gaps(trace: Trace, regions: Collection[str] = ()) -> dict[str, KindGaps]:
    """Per record kind (of the earlier record), every gap to the next record; the
    Enter and Leave of a region named in ``regions`` under ``KIND@NAME``."""
    res = float(trace.definitions.timer_resolution)
    bound = bind(dict.fromkeys(regions, {}), {}, trace.definitions.regions) if regions else None
    parts: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for loc, ev in trace.events.items():
        if len(ev) < 2:
            continue
        gaps = np.diff(ev.time).astype(np.float64)
        kinds = ev.kind[:-1].astype(np.int64)
        flush = kinds == BUFFER_FLUSH
        rows = None if bound is None else bound.rows(kinds, ev.region[:-1])
        if rows is not None:  # a named region's Enter/Leave: a code beyond the kinds'
            hit = rows >= 0
            kinds[hit] = len(KIND_NAMES) + 2 * bound.entry[rows[hit]] + (kinds[hit] == LEAVE)
        if np.any(flush):
            gaps[flush] -= (ev.size[:-1][flush] - ev.time[:-1][flush]).astype(np.float64)
        idx = np.arange(len(gaps))
        for code in np.unique(kinds):
            sel = kinds == code
            parts.setdefault(int(code), []).append(
                (gaps[sel] / res, np.full(int(sel.sum()), loc), idx[sel]))
    out = {}
    for code, chunks in sorted(parts.items()):
        extra = code - len(KIND_NAMES)  # (a region's: entry and record, as coded above)
        name = KIND_NAMES[code] if extra < 0 else f"{RECORDS[extra % 2]}@{bound.names[extra // 2]}"
        out[name] = KindGaps(name, np.concatenate([c[0] for c in chunks]),
                             np.concatenate([c[1] for c in chunks]),
                             np.concatenate([c[2] for c in chunks]))
    return out


def check(trace: Trace, platform: Platform) -> list[Verdict]:
    """Compare every kind's bound with the platform's overhead for that kind (for a
    region's Enter and Leave where the platform states it, that region's)."""
    verdicts = []
    for name, g in kind_gaps(trace, platform.overhead_by_region).items():
        kind, _, region = name.partition("@")
        o = platform.overhead_by_region.get(region, {}).get(kind) if region else None
        if o is None:
            o = platform.overhead_by_kind.get(kind, platform.event_overhead)
        verdicts.append(Verdict(g, float(o), g.below(float(o))))
    return verdicts

