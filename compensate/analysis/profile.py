"""Where each location spends its time: in and outside MPI, and per region
(inclusive and exclusive, from the Enter/Leave nesting)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compensate.analysis.calls import (
    Calls,
    _mpi_flags,
    calls_of,
    is_mpi,
    location_label,
    region_name,
    trace_origin,
)
from compensate.model import BUFFER_FLUSH, Trace


@dataclass
class LocationProfile:
    """Times of one location in seconds; ``start``/``end`` relative to the trace origin.

    ``mpi`` counts outermost MPI calls only (an MPI call inside another is not
    counted twice); ``flush`` is the tracer's buffer-flush time, ``flush_in_mpi``
    the part of it that fell inside MPI calls.
    """

    location: int
    label: str
    start: float
    end: float
    mpi: float
    flush: float = 0.0
    flush_in_mpi: float = 0.0
    #: the OTF2 location type (:class:`compensate.model.Location`); only CPU threads
    #: (and locations of unknown type) count in execution-time totals
    type: str = "CPU_THREAD"

    @property
    def counted(self) -> bool:
        """Whether the location's time is execution time of the program (a CPU
        thread): metric locations hold samples and accelerator streams device
        activity, whose spans are not time the program executed."""
        return self.type in ("CPU_THREAD", "UNKNOWN")

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def outside_mpi(self) -> float:
        return self.duration - self.mpi

    def to_dict(self) -> dict:
        return {"location": self.location, "label": self.label, "start": self.start,
                "end": self.end, "duration": self.duration, "mpi": self.mpi,
                "outside_mpi": self.outside_mpi, "flush": self.flush,
                "flush_in_mpi": self.flush_in_mpi, "type": self.type,
                "counted": self.counted}


@dataclass
class RegionStat:
    """Visits and time of a region on one location (``location`` -1: all locations).

    ``inclusive`` counts a recursive region once (only calls not nested in a call
    of the same region); ``exclusive`` is the time not spent in nested calls.
    """

    name: str
    location: int
    visits: int
    inclusive: float
    exclusive: float

    @property
    def mpi(self) -> bool:
        return is_mpi(self.name)

    def to_dict(self) -> dict:
        return {"name": self.name, "location": self.location, "visits": self.visits,
                "inclusive": self.inclusive, "exclusive": self.exclusive, "mpi": self.mpi}


@dataclass
class Profile:
    """What :func:`profile` returns. ``span`` is the total execution time: from the
    earliest to the latest record of the CPU threads (of every location if the
    trace has none). Totals (``duration``, ``mpi``, ``outside_mpi``) sum the CPU
    threads only; metric and accelerator-stream locations are listed, not counted."""

    source: str
    timer_resolution: int
    span: float
    locations: dict[int, LocationProfile]
    regions: list[RegionStat]

    @property
    def counted(self) -> list[LocationProfile]:
        """The locations whose time is execution time (CPU threads)."""
        return [p for p in self.locations.values() if p.counted]

    @property
    def duration(self) -> float:
        """Sum of the CPU threads' execution times (process-seconds)."""
        return sum(p.duration for p in self.counted)

    @property
    def mpi(self) -> float:
        return sum(p.mpi for p in self.counted)

    @property
    def outside_mpi(self) -> float:
        return sum(p.outside_mpi for p in self.counted)

    def region_totals(self) -> list[RegionStat]:
        """Region statistics summed over locations, largest exclusive time first."""
        acc: dict[str, RegionStat] = {}
        for r in self.regions:
            t = acc.setdefault(r.name, RegionStat(r.name, -1, 0, 0.0, 0.0))
            t.visits += r.visits
            t.inclusive += r.inclusive
            t.exclusive += r.exclusive
        return sorted(acc.values(), key=lambda r: (-r.exclusive, r.name))

    def to_dict(self) -> dict:
        return {"source": self.source, "timer_resolution": self.timer_resolution,
                "span": self.span, "duration": self.duration, "mpi": self.mpi,
                "outside_mpi": self.outside_mpi,
                "locations": [p.to_dict() for p in self.locations.values()],
                "regions": [r.to_dict() for r in self.region_totals()]}


def profile(trace: Trace, calls: dict[int, Calls] | None = None) -> Profile:
    """Execution, MPI and per-region times of every location of ``trace``."""
    defs = trace.definitions
    res = float(defs.timer_resolution)
    calls = calls if calls is not None else calls_of(trace)
    origin = trace_origin(trace)
    locs: dict[int, LocationProfile] = {}
    regions: list[RegionStat] = []
    kinds = {loc: defs.locations[loc].type if loc in defs.locations else "CPU_THREAD"
             for loc in trace.events}
    cpu = [loc for loc, k in kinds.items() if k in ("CPU_THREAD", "UNKNOWN")
           and len(trace.events[loc])]
    span_locs = set(cpu) if cpu else set(trace.events)  # the span: of the CPU threads
    span_lo = min((int(trace.events[x].time[0]) for x in span_locs
                   if len(trace.events[x])), default=origin)
    latest = span_lo
    for loc in sorted(trace.events):
        ev = trace.events[loc]
        c = calls[loc]
        if not len(ev):
            locs[loc] = LocationProfile(loc, location_label(defs, loc), 0.0, 0.0, 0.0,
                                        type=kinds[loc])
            continue
        first, last = int(ev.time[0]), int(ev.time[-1])
        if loc in span_locs:
            latest = max(latest, last)
        dur = c.duration
        mpi = _mpi_flags(defs, c)
        outer_mpi = mpi & ~c.ancestor_flags(mpi)
        in_mpi_call = mpi | c.ancestor_flags(mpi)
        # buffer flushes: pure tracer time, stop time in the size column
        fl = np.flatnonzero(ev.kind == BUFFER_FLUSH)
        fl_dur = np.maximum(ev.size[fl] - ev.time[fl], 0) if fl.size else np.zeros(0)
        fl_call = c.enclosing(fl)
        fl_mpi = (fl_call >= 0) & in_mpi_call[np.maximum(fl_call, 0)] if fl.size else \
            np.zeros(0, dtype=bool)
        locs[loc] = LocationProfile(
            loc, location_label(defs, loc), (first - origin) / res, (last - origin) / res,
            float(dur[outer_mpi].sum()) / res, float(fl_dur.sum()) / res,
            float(fl_dur[fl_mpi].sum()) / res, type=kinds[loc])
        if len(c):
            children = np.zeros(len(c), dtype=np.int64)
            nested = c.parent >= 0
            # a child's time inside its parent (a call whose Leave came out of order
            # may end after its parent: only the overlap is not the parent's own)
            inside = np.minimum(c.t1[nested], c.t1[c.parent[nested]]) - c.t0[nested]
            np.add.at(children, c.parent[nested], np.maximum(inside, 0))
            excl = dur - children
            incl = np.where(c.same_region_ancestor(), 0, dur)
            ids, inv = np.unique(c.region, return_inverse=True)
            visits = np.bincount(inv)
            incl_s = np.bincount(inv, weights=incl)
            excl_s = np.bincount(inv, weights=excl)
            for k, rid in enumerate(ids):
                regions.append(RegionStat(region_name(defs, rid), loc, int(visits[k]),
                                          float(incl_s[k]) / res, float(excl_s[k]) / res))
    return Profile(trace.source, defs.timer_resolution, (latest - span_lo) / res, locs,
                   regions)


# ---------------------------------------------------------------------------------
# wait states
