"""The MPI calls of a trace (Enter/Leave pairs, names, which are MPI), and the
vocabulary every analysis shares: wait-state keys, behaviour categories, labels."""

from __future__ import annotations

import numpy as np

from compensate.matching import check_structure
from compensate.model import COLLECTIVE_OPS, Definitions, Trace

MPI_PREFIX = "MPI_"

#: Wait-state keys in report order.
WAIT_STATES: tuple[str, ...] = ("late_sender", "late_receiver", "wait_nxn", "wait_barrier",
                                "late_broadcast", "early_reduce", "wait_create", "wait_free",
                                "partitioned_late_sender", "partitioned_late_receiver",
                                "rma_late_post", "rma_early_transfer", "rma_early_wait",
                                "rma_late_complete", "rma_wait_fence", "rma_early_fence",
                                "rma_lock_competition")
#: Behaviour categories of :func:`breakdown`; per location they add up to its time.
CATEGORIES: tuple[str, ...] = ("execution", "flush", *WAIT_STATES, "other_mpi")
LABELS: dict[str, str] = {
    "execution": "execution (outside MPI)",
    "flush": "trace buffer flush",
    "late_sender": "Late Sender",
    "late_receiver": "Late Receiver",
    "wait_nxn": "Wait at N x N",
    "wait_barrier": "Wait at Barrier",
    "late_broadcast": "Late Broadcast",
    "early_reduce": "Early Reduce",
    "wait_create": "Wait at Create",
    "wait_free": "Wait at Free",
    "partitioned_late_sender": "P-Late Sender",  # MPI-4 partitioned (analysis.partitioned)
    "partitioned_late_receiver": "P-Late Receiver",
    "rma_late_post": "Late Post",  # MPI one-sided (analysis.rma)
    "rma_early_transfer": "Early Transfer",
    "rma_early_wait": "Early Wait",
    "rma_late_complete": "Late Complete",
    "rma_wait_fence": "Wait at Fence",
    "rma_early_fence": "Early Fence",
    "rma_lock_competition": "Lock Competition",
    "other_mpi": "other MPI",
}

#: Send calls that always wait for the receiver (synchronous mode).
SYNC_SEND_REGIONS = frozenset({"MPI_Ssend"})
#: Send calls whose protocol (eager or rendezvous) is inferred from the timing.
STANDARD_SEND_REGIONS = frozenset({"MPI_Send"})

_BARRIER = COLLECTIVE_OPS["BARRIER"]


def region_name(defs: Definitions, region: int) -> str:
    """The name of region id ``region`` (``region <id>`` if it is not defined)."""
    return defs.regions.get(int(region), f"region {int(region)}")


def is_mpi(name: str) -> bool:
    """True for MPI regions (the name starts with ``MPI_``)."""
    return name.startswith(MPI_PREFIX)


def location_label(defs: Definitions, loc: int) -> str:
    """A short human label for a location: ``"MPI Rank 0 / Master thread"``, ``"rank 1"``,
    ``"location 2"`` if it has no names."""
    d = defs.locations.get(loc)
    parts = [p for p in (d.group_name, d.name) if p] if d is not None else []
    if len(parts) == 2 and parts[1].lower() in parts[0].lower():
        parts = parts[:1]
    return " / ".join(parts) or f"location {loc}"


def trace_origin(trace: Trace) -> int:
    """The earliest timestamp of the trace in ticks (0 for an empty trace)."""
    firsts = [int(ev.time[0]) for ev in trace.events.values() if len(ev)]
    return min(firsts) if firsts else 0


# ---------------------------------------------------------------------------------
# call structure

class Calls:
    """The region instances ("calls") of one location, vectorised.

    ``enter``/``leave`` are record indices (``leave`` is -1 for a call still open at
    the end of the trace, which then ends at the location's last record), ``t0``/
    ``t1`` their times in ticks, ``depth`` the nesting depth (1 = outermost),
    ``parent`` the position of the enclosing call (-1 if none); all arrays are in
    order of ``enter``. Built from :func:`compensate.matching.check_structure`, so a
    badly nested location raises :class:`TraceError`.
    """

    def __init__(self, trace: Trace, loc: int) -> None:
        ev = trace.events[loc]
        self.events = ev
        before, enters, leaves = check_structure(trace, loc, ev)
        self.before = before
        self.last = int(ev.time[-1]) if len(ev) else 0
        empty = np.zeros(0, dtype=np.int64)
        en_parts, lv_parts, dep_parts = [empty], [empty], [empty]
        for d, en in enters.items():
            lv = leaves.get(d, empty)
            close = np.full(len(en), -1, dtype=np.int64)
            close[:len(lv)] = lv
            en_parts.append(en.astype(np.int64))
            lv_parts.append(close)
            dep_parts.append(np.full(len(en), d, dtype=np.int64))
        enter = np.concatenate(en_parts)
        order = np.argsort(enter, kind="stable")
        self.enter = enter[order]
        self.leave = np.concatenate(lv_parts)[order]
        self.depth = np.concatenate(dep_parts)[order]
        self.region = ev.region[self.enter].astype(np.int64)
        self.t0 = ev.time[self.enter].astype(np.int64)
        self.t1 = np.where(self.leave >= 0, ev.time[np.maximum(self.leave, 0)],
                           self.last).astype(np.int64)
        # per depth: positions (into the arrays above) of the calls at that depth
        self._at_depth = {int(d): np.flatnonzero(self.depth == d)
                          for d in np.unique(self.depth)}
        self.parent = np.full(len(self.enter), -1, dtype=np.int64)
        for d, pos in self._at_depth.items():
            up = self._at_depth.get(d - 1)
            if up is None or d <= 1:
                continue
            p = np.searchsorted(self.enter[up], self.enter[pos]) - 1
            self.parent[pos] = np.where(p >= 0, up[np.maximum(p, 0)], -1)

    def __len__(self) -> int:
        return len(self.enter)

    @property
    def duration(self) -> np.ndarray:
        """Inclusive duration of every call in ticks."""
        return self.t1 - self.t0

    def enclosing(self, idx: np.ndarray) -> np.ndarray:
        """Position of the innermost call open at each record in ``idx`` (-1 if none).

        Meant for records that are not Enter/Leave (sends, receives, collective
        begin/end, flushes): the call opened at their depth most recently before them.
        """
        idx = np.asarray(idx, dtype=np.int64)
        out = np.full(len(idx), -1, dtype=np.int64)
        if not len(idx):
            return out
        d = self.before[idx]
        for depth in np.unique(d):
            if depth <= 0:
                continue
            pos = self._at_depth.get(int(depth))
            if pos is None:
                continue
            sel = np.flatnonzero(d == depth)
            p = np.searchsorted(self.enter[pos], idx[sel]) - 1
            out[sel] = np.where(p >= 0, pos[np.maximum(p, 0)], -1)
        return out

    def ancestor_flags(self, flag: np.ndarray) -> np.ndarray:
        """For each call: does a *proper* ancestor have ``flag`` set? (one pass per level)"""
        found = np.zeros(len(self.enter), dtype=bool)
        anc = self.parent.copy()
        while np.any(anc >= 0):
            has = anc >= 0
            found[has] |= flag[anc[has]]
            anc = np.where(has, self.parent[np.maximum(anc, 0)], -1)
        return found

    def same_region_ancestor(self) -> np.ndarray:
        """For each call: is it nested (at any depth) in a call of the same region?"""
        found = np.zeros(len(self.enter), dtype=bool)
        anc = self.parent.copy()
        while np.any(anc >= 0):
            has = anc >= 0
            found[has] |= self.region[anc[has]] == self.region[has]
            anc = np.where(has, self.parent[np.maximum(anc, 0)], -1)
        return found


def calls_of(trace: Trace) -> dict[int, Calls]:
    """:class:`Calls` of every location."""
    return {loc: Calls(trace, loc) for loc in trace.events}


def _region_lookup(defs: Definitions, region: np.ndarray, fn) -> np.ndarray:
    """``fn(region name)`` for every entry of ``region`` (one call per distinct id)."""
    ids, inv = np.unique(region, return_inverse=True)
    values = np.array([fn(region_name(defs, r)) if r >= 0 else fn("") for r in ids])
    return values[inv] if len(ids) else np.zeros(0, dtype=values.dtype)


def _mpi_flags(defs: Definitions, calls: Calls) -> np.ndarray:
    return _region_lookup(defs, calls.region, is_mpi).astype(bool)


# ---------------------------------------------------------------------------------
# profile
