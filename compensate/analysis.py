"""Profiles, wait states and before/after comparison of one trace or two.

Compensation is only useful if one can see what changed: which waiting was real
and which was caused by the tracer, and how overhead on one process shows up as
waiting on another (the paper's Figures 1 and 2). This module answers that for
any :class:`~compensate.model.Trace` the readers load:

* :func:`profile`: per location and in total, the execution time, the time in MPI
  (regions whose name starts with ``MPI_``) and outside, and the time per region
  (inclusive and exclusive, from the Enter/Leave nesting);
* :func:`wait_states`: the KOJAK/Scalasca wait-state patterns Late Sender, Late
  Receiver, Wait at N×N, Wait at Barrier, Late Broadcast and Early Reduce;
* :func:`breakdown`: each location's time split into behaviours (execution, buffer
  flushes, each wait state, other MPI) that add up exactly to its execution time;
* :func:`compare`: the difference between two traces of the same run (measured and
  approximated) broken down by behaviour and by location, as percentages of the
  total difference.

All times are seconds. Definitions (and the rule that detects Late Receiver) are in
docs/analysis.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .matching import N_TO_N, N_TO_ONE, ONE_TO_N, Matching, check_structure, match
from .model import BUFFER_FLUSH, COLLECTIVE_OPS, Definitions, Trace, TraceError

MPI_PREFIX = "MPI_"

#: Wait-state keys in report order.
WAIT_STATES: tuple[str, ...] = ("late_sender", "late_receiver", "wait_nxn", "wait_barrier",
                                "late_broadcast", "early_reduce")
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
                "flush_in_mpi": self.flush_in_mpi}


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
    earliest to the latest record of the whole trace."""

    source: str
    timer_resolution: int
    span: float
    locations: dict[int, LocationProfile]
    regions: list[RegionStat]

    @property
    def duration(self) -> float:
        """Sum of the locations' execution times (process-seconds)."""
        return sum(p.duration for p in self.locations.values())

    @property
    def mpi(self) -> float:
        return sum(p.mpi for p in self.locations.values())

    @property
    def outside_mpi(self) -> float:
        return sum(p.outside_mpi for p in self.locations.values())

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
    latest = origin
    for loc in sorted(trace.events):
        ev = trace.events[loc]
        c = calls[loc]
        if not len(ev):
            locs[loc] = LocationProfile(loc, location_label(defs, loc), 0.0, 0.0, 0.0)
            continue
        first, last = int(ev.time[0]), int(ev.time[-1])
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
            float(fl_dur[fl_mpi].sum()) / res)
        if len(c):
            children = np.zeros(len(c), dtype=np.int64)
            nested = c.parent >= 0
            np.add.at(children, c.parent[nested], dur[nested])
            excl = dur - children
            incl = np.where(c.same_region_ancestor(), 0, dur)
            ids, inv = np.unique(c.region, return_inverse=True)
            visits = np.bincount(inv)
            incl_s = np.bincount(inv, weights=incl)
            excl_s = np.bincount(inv, weights=excl)
            for k, rid in enumerate(ids):
                regions.append(RegionStat(region_name(defs, rid), loc, int(visits[k]),
                                          float(incl_s[k]) / res, float(excl_s[k]) / res))
    return Profile(trace.source, defs.timer_resolution, (latest - origin) / res, locs, regions)


# ---------------------------------------------------------------------------------
# wait states

@dataclass
class WaitStates:
    """Waiting time per wait state and location (seconds).

    ``instances[state]`` lists every positive wait as ``(location, start, seconds)``
    with ``start`` relative to the trace origin (where the waiting begins: the
    receive's enter for Late Sender, the send's enter for Late Receiver, the
    member's enter for the collective patterns).
    """

    by_location: dict[str, dict[int, float]]
    instances: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)

    def total(self, state: str) -> float:
        return sum(self.by_location[state].values())

    def count(self, state: str) -> int:
        return len(self.instances.get(state, ()))

    def at(self, loc: int) -> float:
        """All waiting time on location ``loc``."""
        return sum(self.by_location[s].get(loc, 0.0) for s in WAIT_STATES)

    def to_dict(self) -> dict:
        return {s: {"total": self.total(s), "count": self.count(s),
                    "by_location": {str(k): v for k, v in self.by_location[s].items()}}
                for s in WAIT_STATES}


def _call_times(calls: Calls, idx: np.ndarray, time: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(enter time, end time, call position) of the call around each record; a record
    outside any call stands for itself (enter = end = its own time)."""
    pos = calls.enclosing(idx)
    inside = pos >= 0
    p = np.maximum(pos, 0)
    own = time[idx] if len(idx) else np.zeros(0, dtype=np.int64)
    t0 = np.where(inside, calls.t0[p] if len(calls) else own, own)
    t1 = np.where(inside, calls.t1[p] if len(calls) else own, own)
    return t0, t1, pos


def wait_states(trace: Trace, matching: Matching | None = None, *,
                eager_limit: int | None = None,
                calls: dict[int, Calls] | None = None) -> WaitStates:
    """Detect the wait states of ``trace`` (definitions in docs/analysis.md).

    ``eager_limit``: MPI_Send messages larger than this many bytes are synchronous
    (rendezvous), smaller ones never wait for the receiver. Without it, whether an
    MPI_Send waited is inferred from its timing (see :func:`_late_receiver`).
    """
    defs = trace.definitions
    res = float(defs.timer_resolution)
    matching = matching if matching is not None else match(trace, eager_limit=eager_limit)
    calls = calls if calls is not None else calls_of(trace)
    origin = trace_origin(trace)
    locs = sorted(trace.events)
    by_loc = {s: dict.fromkeys(locs, 0.0) for s in WAIT_STATES}
    inst: dict[str, list[tuple[int, float, float]]] = {s: [] for s in WAIT_STATES}

    def add(state: str, loc: np.ndarray, start: np.ndarray, wait: np.ndarray) -> None:
        keep = wait > 0
        for lc, st, w in zip(loc[keep].tolist(), start[keep].tolist(), wait[keep].tolist(),
                             strict=True):
            by_loc[state][lc] = by_loc[state].get(lc, 0.0) + w / res
            inst[state].append((lc, (st - origin) / res, w / res))

    # --- point to point: per message, the send call and the receive call (for a
    # nonblocking receive, the completion call that holds the MpiIrecv record)
    msgs = [x for x in matching.messages if x.send_loc != x.recv_loc]  # self: no waiting
    if msgs:
        n = len(msgs)
        s_loc = np.fromiter((x.send_loc for x in msgs), np.int64, n)
        s_idx = np.fromiter((x.send_idx for x in msgs), np.int64, n)
        r_loc = np.fromiter((x.recv_loc for x in msgs), np.int64, n)
        r_idx = np.fromiter((x.recv_idx for x in msgs), np.int64, n)
        size = np.fromiter((x.size for x in msgs), np.int64, n)
        known_sync = np.fromiter((x.synchronous for x in msgs), bool, n)
        # where a nonblocking receive was posted (its MpiIrecvRequest), if recorded
        post = np.fromiter((x.recv_post_idx if x.nonblocking_recv and x.recv_post_idx >= 0
                            and x.recv_post_idx != x.recv_idx else -1 for x in msgs), np.int64, n)
        s_e, s_x, r_e, r_x, r_post = (np.zeros(n, np.int64) for _ in range(5))
        s_region = np.full(n, -1, dtype=np.int64)
        r_call = np.full(n, -1, dtype=np.int64)
        for loc in np.unique(np.concatenate([s_loc, r_loc])):
            c = calls[int(loc)]
            t = c.events.time
            sel = np.flatnonzero(s_loc == loc)
            s_e[sel], s_x[sel], pos = _call_times(c, s_idx[sel], t)
            s_region[sel] = np.where(pos >= 0, c.region[np.maximum(pos, 0)] if len(c) else -1,
                                     -1)
            sel = np.flatnonzero(r_loc == loc)
            r_e[sel], r_x[sel], r_call[sel] = _call_times(c, r_idx[sel], t)
            r_post[sel] = r_e[sel]
            sel = sel[post[sel] >= 0]
            r_post[sel], _, _ = _call_times(c, post[sel], t)
        # Late Sender: the receiver entered before the sender; bounded by the receive
        # call, and counted once per call (the latest sender) when a call such as
        # MPI_Waitall completes several receives
        wait = np.clip(s_e - r_e, 0, r_x - r_e)
        key = np.where(r_call >= 0, r_call, -1 - np.arange(n))  # unique if not in a call
        order = np.lexsort((-wait, key, r_loc))
        first = np.ones(n, dtype=bool)
        first[1:] = (r_loc[order][1:] != r_loc[order][:-1]) | (key[order][1:] != key[order][:-1])
        keep = order[first]
        add("late_sender", r_loc[keep], r_e[keep], wait[keep])
        wait = _late_receiver(defs, s_e, s_x, r_post, s_region, size, known_sync, eager_limit)
        add("late_receiver", s_loc, s_e, wait)

    # --- collectives: member enter/end = the enclosing call (else the begin/end record)
    for ins in matching.instances:
        n = len(ins.locs)
        if n < 2 or ins.cls not in (N_TO_N, ONE_TO_N, N_TO_ONE) or ins.nonblocking:
            continue
        enter = np.zeros(n, np.int64)
        end = np.zeros(n, np.int64)
        for k, (loc, b, e) in enumerate(zip(ins.locs, ins.begin_idx, ins.end_idx, strict=True)):
            c = calls[loc]
            t = c.events.time
            t0, _, _ = _call_times(c, np.array([b]), t)
            _, t1, _ = _call_times(c, np.array([e]), t)
            enter[k], end[k] = t0[0], t1[0]
        locs_a = np.asarray(ins.locs, dtype=np.int64)
        span = end - enter
        if ins.cls == N_TO_N:
            state = "wait_barrier" if ins.op == _BARRIER else "wait_nxn"
            add(state, locs_a, enter, np.clip(enter.max() - enter, 0, span))
            continue
        r = ins.locs.index(ins.root)
        others = np.arange(n) != r
        if ins.cls == ONE_TO_N:
            add("late_broadcast", locs_a[others], enter[others],
                np.clip(enter[r] - enter[others], 0, span[others]))
        else:
            w = np.clip(enter[others].max() - enter[r], 0, span[r])
            add("early_reduce", locs_a[r:r + 1], enter[r:r + 1], np.array([w]))
    return WaitStates(by_loc, inst)


def _late_receiver(defs: Definitions, s_e: np.ndarray, s_x: np.ndarray, r_post: np.ndarray,
                   s_region: np.ndarray, size: np.ndarray, known_sync: np.ndarray,
                   eager_limit: int | None) -> np.ndarray:
    """Ticks each send call waited for its receive to be posted (0 where it did not).

    ``r_post`` is where the receive was posted: the Enter of a blocking receive
    call, the Enter of the MPI_Irecv call of a nonblocking one. A send waits only if
    the receive was posted while the send call ran (``s_e < r_post < s_x``) and the
    send was synchronous: matched as synchronous (MPI_Ssend, or MPI_Send above the
    eager limit given to :func:`compensate.matching.match`); an MPI_Ssend; an
    MPI_Send above ``eager_limit``; or, without an eager limit, an MPI_Send whose call
    went on after the receive was posted at most as long as it had run before it
    (``r_post - s_e >= s_x - r_post``). An eager send lasts its local buffer copy
    whatever the receiver does, so this rule can misread at most half of such a copy
    as waiting; a rendezvous send that waited less than its transfer took is missed.
    """
    sync = known_sync | _region_lookup(defs, s_region, SYNC_SEND_REGIONS.__contains__
                                       ).astype(bool)
    standard = _region_lookup(defs, s_region, STANDARD_SEND_REGIONS.__contains__).astype(bool)
    if eager_limit is not None:
        sync |= standard & (size > eager_limit)
    else:
        sync |= standard & (r_post - s_e >= s_x - r_post)
    overlapped = (s_e < r_post) & (r_post < s_x)
    return np.where(sync & overlapped, r_post - s_e, 0)


# ---------------------------------------------------------------------------------
# behaviour breakdown and comparison

@dataclass
class Breakdown:
    """Each location's execution time split into :data:`CATEGORIES` (seconds).

    ``execution`` = time outside MPI minus buffer flushes there; ``flush`` = all
    buffer-flush time; one entry per wait state; ``other_mpi`` = MPI time minus the
    waits and the flushes inside MPI. Per location the categories add up to
    ``profile.locations[loc].duration`` (``other_mpi`` may be negative if a flush
    falls inside a wait).
    """

    profile: Profile
    waits: WaitStates
    by_location: dict[str, dict[int, float]]

    def total(self, category: str) -> float:
        return sum(self.by_location[category].values())

    def to_dict(self) -> dict:
        return {c: {"total": self.total(c),
                    "by_location": {str(k): v for k, v in self.by_location[c].items()}}
                for c in CATEGORIES}


def breakdown(trace: Trace, matching: Matching | None = None, *,
              eager_limit: int | None = None) -> Breakdown:
    """Profile, wait states and the behaviour split of ``trace`` in one pass."""
    calls = calls_of(trace)
    prof = profile(trace, calls)
    waits = wait_states(trace, matching, eager_limit=eager_limit, calls=calls)
    out: dict[str, dict[int, float]] = {c: {} for c in CATEGORIES}
    for loc, p in prof.locations.items():
        out["execution"][loc] = p.outside_mpi - (p.flush - p.flush_in_mpi)
        out["flush"][loc] = p.flush
        for s in WAIT_STATES:
            out[s][loc] = waits.by_location[s].get(loc, 0.0)
        out["other_mpi"][loc] = p.mpi - p.flush_in_mpi - waits.at(loc)
    return Breakdown(prof, waits, out)


@dataclass
class Comparison:
    """Two breakdowns of the same run (e.g. measured and approximated) and their
    difference ``measured - approximated`` by category and location."""

    measured: Breakdown
    approximated: Breakdown

    @property
    def locations(self) -> list[int]:
        return sorted(self.measured.profile.locations)

    def diff(self, category: str, loc: int | None = None) -> float:
        """Seconds ``category`` lost from measured to approximated (on ``loc`` or all)."""
        m, a = self.measured.by_location[category], self.approximated.by_location[category]
        if loc is not None:
            return m.get(loc, 0.0) - a.get(loc, 0.0)
        return sum(m.values()) - sum(a.values())

    @property
    def total_diff(self) -> float:
        """The whole difference: sum over locations of their execution-time change."""
        return sum(self.diff(c) for c in CATEGORIES)

    @property
    def span_diff(self) -> float:
        return self.measured.profile.span - self.approximated.profile.span

    def location_diff(self, loc: int) -> float:
        return sum(self.diff(c, loc) for c in CATEGORIES)

    def percent(self, category: str) -> float:
        """Share of the total difference due to ``category`` (may be negative or
        above 100 when some behaviour grew; NaN when there is no difference)."""
        return _pct(self.diff(category), self.total_diff)

    def location_percent(self, loc: int) -> float:
        return _pct(self.location_diff(loc), self.total_diff)

    def share(self, category: str, loc: int) -> float:
        """Share of ``category``'s difference that lies on ``loc`` (percent)."""
        return _pct(self.diff(category, loc), self.diff(category))

    def top_location(self, category: str) -> tuple[int, float] | None:
        """The location carrying most of ``category``'s difference and its share."""
        d = self.diff(category)
        if d == 0 or not self.locations:
            return None
        loc = max(self.locations, key=lambda x: self.diff(category, x) * np.sign(d))
        return loc, self.share(category, loc)

    def to_dict(self) -> dict:
        return {
            "span": {"measured": self.measured.profile.span,
                     "approximated": self.approximated.profile.span,
                     "difference": self.span_diff},
            "total_difference": self.total_diff,
            "categories": {
                c: {"measured": self.measured.total(c),
                    "approximated": self.approximated.total(c),
                    "difference": self.diff(c), "percent": _json_num(self.percent(c)),
                    "by_location": {str(loc): {"difference": self.diff(c, loc),
                                               "share": _json_num(self.share(c, loc))}
                                    for loc in self.locations}}
                for c in CATEGORIES},
            "locations": {str(loc): {"difference": self.location_diff(loc),
                                     "percent": _json_num(self.location_percent(loc))}
                          for loc in self.locations},
        }


def compare(measured: Trace, approximated: Trace, *, eager_limit: int | None = None
            ) -> Comparison:
    """Break the difference between two traces of the same run down by behaviour and
    location (the paper's Figure 2). Both must have the same locations."""
    if set(measured.events) != set(approximated.events):
        raise TraceError(
            f"cannot compare traces with different locations "
            f"({sorted(measured.events)} vs {sorted(approximated.events)} in "
            f"{approximated.source or '<trace>'})", source=measured.source)
    return Comparison(breakdown(measured, eager_limit=eager_limit),
                      breakdown(approximated, eager_limit=eager_limit))


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else float("nan")


def _json_num(x: float) -> float | None:
    return None if x != x else x  # NaN -> null


__all__ = [
    "CATEGORIES",
    "LABELS",
    "WAIT_STATES",
    "Breakdown",
    "Calls",
    "Comparison",
    "LocationProfile",
    "Profile",
    "RegionStat",
    "WaitStates",
    "breakdown",
    "calls_of",
    "compare",
    "is_mpi",
    "location_label",
    "profile",
    "region_name",
    "trace_origin",
    "wait_states",
]
