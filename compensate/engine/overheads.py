"""Which tracer overhead each record is charged (docs/design.md §2 and R1), once.

R1 removes, from the gaps around each record, the time the tracer spent writing it.
How much that is depends on the record and its location:

* by default the platform's overhead of the record's kind (of its region's name,
  for an Enter/Leave of a region the platform file names in
  ``event_overhead_by_region``); where the platform has
  an in-situ table for the location (the trace's own measurements), that table's,
  and each record's own measured cost (the OTF2 attribute ``COMPENSATE::OVERHEAD``)
  where it has one (:meth:`compensate.platform.Platform.location_overheads`);
* on an accelerator stream the platform's ``device_overhead`` instead (device
  activity is not dilated by host tracing, R9; default 0);
* on a METRIC location nothing (its samples are not a program timeline: they are
  mapped through their process's times afterwards, :mod:`compensate.engine.metrics`);
* a BufferFlush also its whole duration (the program stood still, R6).

Where the time lies: a tracer may do part of a record's work before it reads the
clock for it (the platform's ``overhead_before_stamp``, :func:`before_stamp`:
``pre(r)``, at most the record's overhead) and the rest, ``post(r) = O(r) -
pre(r)``, after. The gap before ``r`` then holds ``pre(r)`` and the gap after it
``post(r)`` (:func:`r1_gaps`). Dependencies read the same split through one
shift: the engine takes each record's *event time* to be its measured time less
``pre(r)`` (:func:`event_times`), so that a rule's observed interval
``event(r) - event(s) - O(s)`` is ``r_m - s_m - post(s) - pre(r)`` (the sender's
work after its stamp and the waiting record's before its own both lie inside the
measured interval) and a sender's "done writing" ``event(s) + O(s)`` is ``s_m +
post(s)``, in every rule of :mod:`compensate.engine.kinds` alike. Without
``overhead_before_stamp`` every ``pre`` is 0: the event times are the measured
times and a record's whole overhead lies after its stamp.

:func:`record_overheads` is that rule for the engine's graph (R1's gaps), the
network fit (when a record's writing ended) and the stream's context (the overhead
a segment's last timestamp group leaves to the next gap); :func:`written_overheads`
is the first point alone, the cost of writing each record as measured or stated,
which the rules of dependent records read for the sender's side of a transfer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compensate.engine.span import on_grid
from compensate.model import BUFFER_FLUSH, Definitions, Events, Trace
from compensate.platform import Platform


def written_overheads(platform: Platform, defs: Definitions, loc: int, events: Events,
                      start: int = 0) -> np.ndarray:
    """Ticks each record of location ``loc`` from record ``start`` on cost the tracer
    to write, by the platform (its kind, or the location's in-situ table and the
    record's own measured cost)."""
    return on_grid(platform.location_overheads(loc, events.kind[start:],
                                               events.region[start:], events.overhead[start:],
                                               defs.regions) * float(defs.timer_resolution))


def file_ticks(platform: Platform, trace: Trace) -> Callable[[int, int], float]:
    """Ticks record ``i`` of location ``loc`` cost the tracer as the platform file
    states it, by kind and region name (:meth:`Platform.file_overheads
    <compensate.platform.Platform.file_overheads>`), each location's computed when
    first asked for (the RMA transfers the network fit observes)."""
    defs, ticks = trace.definitions, {}
    res = float(defs.timer_resolution)

    def of(loc: int, i: int) -> float:
        o = ticks.get(loc)
        if o is None:
            ev = trace.events[loc]
            o = ticks[loc] = on_grid(platform.file_overheads(ev.kind, ev.region, defs.regions)
                                     * res)
        return float(o[i])
    return of


def record_overheads(platform: Platform, defs: Definitions, loc: int, events: Events,
                     start: int = 0, *, flushes: bool = True,
                     written: np.ndarray | None = None) -> np.ndarray:
    """Ticks of overhead R1 charges each record of location ``loc`` from record
    ``start`` on (module docstring). ``flushes``: include each BufferFlush's
    duration (a caller that takes a flush's stop time instead leaves it out).
    ``written``: these records' :func:`written_overheads`, if already at hand (not
    modified)."""
    o = written_overheads(platform, defs, loc, events, start) if written is None \
        else written.copy()
    info = defs.locations.get(loc)
    if info is not None and info.is_metric:
        o[:] = 0.0
    if info is not None and info.is_device:
        o[:] = on_grid(platform.device_overhead * float(defs.timer_resolution))
    if flushes:
        kind = events.kind[start:]
        flush = np.flatnonzero(kind == BUFFER_FLUSH)
        if flush.size:
            o[flush] += (events.size[start:][flush] - events.time[start:][flush]) \
                .astype(np.float64)
    return o


def before_stamp(platform: Platform, defs: Definitions, loc: int, events: Events,
                 start: int = 0, written: np.ndarray | None = None) -> np.ndarray:
    """Ticks of each record's overhead (location ``loc``, from record ``start`` on)
    that the tracer spent before the record's stamp (module docstring): the
    platform's ``overhead_before_stamp`` of its kind (of its region, for an
    Enter/Leave of a region named in ``overhead_before_stamp_by_region``), never
    more than the record's
    :func:`written_overheads` (``written``, if at hand); 0 on accelerator streams and
    METRIC locations (no host overhead there)."""
    n = len(events.kind) - start
    if not (platform.before_stamp or platform.before_stamp_by_region) or n <= 0:
        return np.zeros(max(n, 0))
    info = defs.locations.get(loc)
    if info is not None and (info.is_metric or info.is_device):
        return np.zeros(n)
    o = written_overheads(platform, defs, loc, events, start) if written is None else written
    pre = on_grid(platform.record_before_stamp(events.kind[start:], events.region[start:],
                                               defs.regions) * float(defs.timer_resolution))
    return np.minimum(pre, o)


def event_times(measured: np.ndarray, pre: np.ndarray) -> np.ndarray:
    """The times the rules of dependent records read (module docstring): each
    record's measured time (float ticks) less its overhead before the stamp."""
    return measured - pre if pre.any() else measured


def r1_gaps(tm: np.ndarray, o: np.ndarray, pre: np.ndarray | None = None) -> np.ndarray:
    """R1 increments between consecutive records of one location (``tm``: measured
    times; ``o``: each record's :func:`record_overheads`; ``pre``: its
    :func:`before_stamp`, None: all 0): the measured gap minus the overhead written
    after the stamps before it and before the stamps after it.

    Records that share one timestamp (Score-P stamps a Metric with its Enter's
    time) were written back to back after one clock read, so their writing costs
    after the stamp all lie in the next *positive* gap, and their costs before it in
    the gap before the shared stamp (:func:`group_before`): a zero gap charges
    nothing. Charging each record's overhead to its own zero gap instead would
    clamp it (counted as overcompensation) and lose that overhead entirely.
    """
    d = np.diff(tm)
    new_group = np.concatenate(([True], d != 0))
    starts = np.flatnonzero(new_group)
    start_of = starts[np.cumsum(new_group) - 1]  # first record of each record's group
    split = pre is not None and bool(pre.any())
    csum = np.concatenate(([0.0], np.cumsum(o - pre if split else o)))
    through = csum[1:] - csum[start_of]  # overhead after the stamp, group up to each record
    charge = through[:-1] + group_before(tm, pre)[1:] if split else through[:-1]
    return d - np.where(d == 0, 0.0, charge)


def group_before(tm: np.ndarray, pre: np.ndarray) -> np.ndarray:
    """Per record of one location: if it opens a timestamp group (its measured time
    ``tm`` differs from the record before's, or it is the first), the part before
    the stamp (``pre``) of all the group's records, which lies in the gap before
    it; else 0."""
    out = np.zeros(len(tm))
    if not len(tm) or not pre.any():
        return out
    starts = np.flatnonzero(np.concatenate(([True], np.diff(tm) != 0)))
    out[starts] = np.add.reduceat(pre, starts)
    return out


def group_carry(o: np.ndarray, pre: np.ndarray) -> float:
    """The overhead a location's trailing timestamp group (its records' ``o`` and
    ``pre`` from :func:`record_overheads` and :func:`before_stamp`) leaves to the
    next gap, R1: what it wrote after its stamp (:func:`r1_gaps`)."""
    return float((o - pre).sum()) if pre.any() else float(o.sum())
