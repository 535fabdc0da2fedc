"""The agreed cut: the streamed distributed run's segments, found by the ranks
together, each reading only its own locations (issue #21, docs/parallel.md "The
agreed cut").

A segment is, on every rank, the records of its own locations measured before
one time ``T`` that is safe for the whole trace: nothing crosses it (the
one-process cutter's invariant, :class:`compensate.pipeline.cuts.Cutter`). The
cutter's busy function splits into a part local to a location, hence to its rank
(calls open around a send, open collective calls, requests, thread forks, RMA
windows, partitioned operations, synchronize regions, a matched probe before its
receive: ownership never splits a process), and a part that couples ranks
(messages in flight, collectives completed by each member). Each rank runs the
cutter over its own locations with the local part only (:class:`_LocalCutter`)
and the ranks agree on ``T`` (:func:`agreed_cuts`):

1. every rank reads its own locations until it holds its share of a segment
   (``segment_records`` times its share of the trace's records) or its input
   ends; its horizon is the latest time it read (every own record before it is
   read: the readers give time order);
2. ``T`` starts at the smallest horizon (the latest record time when every input
   has ended) and goes down to the latest time at or before it where every
   rank's local level is 0: each rank offers its latest such time at or before
   ``T`` and ``T`` becomes their minimum, until no rank lowers it;
3. the exact check, summed over ranks: per channel (sender, receiver,
   communicator, tag) the sends before ``T`` less the cancelled Isends equal the
   receives before ``T``, and every member of a communicator completed the same
   number of collectives (:meth:`~compensate.pipeline.cuts.Cutter.balance`,
   :func:`~compensate.pipeline.cuts.collectives_aligned`); if it fails, the next
   lower time, up to four times as the one-process cutter tries its four latest
   candidates, then every rank reads further (half as much again).

Each step is a small collective (an ``allgather`` of a few numbers, or of the
channels a rank's pending records leave unbalanced). No rank reads more than its
own locations, and the one-process run's serial pass over the whole trace is gone.

The cuts differ from the one-process run's (which looks for a cut after each chunk
of the whole trace), so the summary's ``segments`` is this run's; the output is
the same, record for record, because the streamed output does not depend on where
the segments are cut (tests/engine/test_stream.py: every program, any chunking,
equal to the in-memory run). An input not in time order raises
:class:`~compensate.pipeline.cuts.NotStreamable` on the rank that sees it, and
every rank falls back with it (the ``step`` given).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from compensate.matching.p2p import key_ids
from compensate.model import Definitions, Events
from compensate.parallel.transport import Transport
from compensate.pipeline.cuts import SEGMENT_RECORDS, CountingCutter, free_ends

#: how many exact checks one attempt makes (the one-process cutter tries its four
#: latest candidates)
ATTEMPTS = 4
#: how many times one check's ``T`` may be lowered (one ``allgather`` each) before
#: the attempt gives up and the ranks read on: ranks whose free intervals
#: alternate would otherwise walk down them one collective at a time
LOWERINGS = 64


class _LocalCutter(CountingCutter):
    """The counting cutter over one rank's own locations, whose busy function
    leaves the messages in flight to the exact check summed over ranks."""

    MESSAGES = False

    def __init__(self, defs: Definitions, segment_records: int) -> None:
        super().__init__(defs, segment_records)
        #: the agreed cut's search state: (steps' times, their deltas, cut,
        #: completed collectives before it)
        self.agreed: tuple | None = None


def _safe_times(bt: np.ndarray, bd: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps' times sorted, their deltas in that order, the level after each, the
    latest safe time of each interval the level is 0 on: the first step's time,
    and each step time whose steps before it sum to 0)."""
    order = np.argsort(bt, kind="stable")
    bt, bd = bt[order], bd[order]
    level = np.cumsum(bd)
    if not bt.size:
        return bt, bd, level, bt
    return bt, bd, level, np.unique(np.r_[bt[0], free_ends(bt, level)])


def _latest_safe(bt: np.ndarray, level: np.ndarray, ends: np.ndarray, t: int) -> int | None:
    """The latest time at or before ``t`` at which the local level is 0 (the
    steps before it sum to 0), or None."""
    j = int(np.searchsorted(bt, t, side="left"))  # the steps before t
    if j == 0 or level[j - 1] == 0:
        return t
    k = int(np.searchsorted(ends, t, side="right"))
    return int(ends[k - 1]) if k else None


def _unbalanced(channels: np.ndarray, signs: np.ndarray) -> dict[tuple, int]:
    """This rank's channels whose sends and receives before the cut do not cancel
    out, with their sums."""
    if not channels.shape[1]:
        return {}
    ids = key_ids(list(channels))
    sums = np.bincount(ids, weights=signs).astype(np.int64)
    first = np.unique(ids, return_index=True)[1]
    out = {}
    for i in np.flatnonzero(sums).tolist():
        out[tuple(channels[:, first[i]].tolist())] = int(sums[i])
    return out


def _widen(ranges: dict, key: Any, lo: int, hi: int) -> None:
    a, b = ranges.get(key, (lo, hi))
    ranges[key] = (min(a, lo), max(b, hi))


def _collective_ranges(defs: Definitions, done: dict, mine: list[int]) -> dict[Any, tuple]:
    """The two conditions of :func:`compensate.pipeline.cuts.collectives_aligned`
    over this rank's locations, as ranges the ranks can merge: per communicator
    with members, the (fewest, most) collectives completed by the locations that
    completed any on it (key ``("done", comm)``) and by its members here (key
    ``("members", comm)``; a member without an entry completed none). A
    communicator without members is keyed by (communicator, location): one
    location, always aligned."""
    out: dict[Any, tuple] = {}
    for (key, _), c in done.items():
        if isinstance(key, int):
            _widen(out, ("done", key), c, c)
    own = set(mine)
    for comm, d in defs.comms.items():
        for m in d.members or ():
            if m in own:
                c = done.get((comm, m), 0)
                _widen(out, ("members", comm), c, c)
    return out


def chunk_records(segment_records: int, share: float, largest: int) -> int:
    """How many records a rank reads at a time for the cut: a quarter of its share
    of a segment, at most ``largest`` (the cut is looked for once a rank holds its
    share, and its search goes up to the latest time every rank has read: reads
    much larger than the share would make the segments larger than asked for, as
    the one-process command reads N/4 records for ``--segment-records N``)."""
    return max(1, min(largest, math.ceil(segment_records * share) // 4))


def share_of(mine: list[int], counts: dict[int, int | None]) -> float:
    """This rank's part of the trace's records (``counts``: every location's, as
    :func:`compensate.formats.location_record_counts` gives them; where one is not
    known, as for a text trace or an OTF2 archive whose definitions give every
    location 0 records, its part of the locations)."""
    if not counts:
        return 0.0
    total = sum(c or 0 for c in counts.values())
    if not total or any(c is None for c in counts.values()):  # (a writer that left
        return len(mine) / len(counts)  # OTF2's numberOfEvents 0: not known either)
    return sum(counts[loc] or 0 for loc in mine) / total


def agreed_cuts(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                transport: Transport, mine: list[int], share: float,
                segment_records: int = SEGMENT_RECORDS,
                step: Callable[..., Any] = lambda f, *a: f(*a),
                ) -> list[tuple[int | None, int]]:
    """The segments of the streamed distributed run, ``(cut, records)`` each as
    :func:`compensate.parallel.segments.cut_times` gives them (the segment holds
    the records measured before ``cut``, None: every record left; ``records`` in
    all ranks), agreed by the ranks from their own locations' ``own_chunks``
    (module docstring). ``share``: this rank's part of the trace's records (it
    reads ``segment_records * share`` records per segment). ``step(f, *args)``
    runs each local phase (:func:`compensate.parallel.segments.fallback_step`: a
    NotStreamable on any rank raises on every rank). Collective."""
    t = transport
    cutter = _LocalCutter(defs, segment_records)
    chunks = iter(own_chunks)
    quota = max(1, math.ceil(segment_records * share))
    state = {"ended": False, "horizon": None, "next": quota}
    out: list[tuple[int | None, int]] = []

    def read() -> tuple:
        while not state["ended"] and cutter.count < state["next"]:
            chunk = next(chunks, None)
            if chunk is None:
                state["ended"] = True
                break
            for loc, ev in chunk.items():
                if cutter.feed(loc, ev):
                    last = int(ev.time[-1])
                    h = state["horizon"]
                    state["horizon"] = last if h is None else max(h, last)
        if not cutter.count:
            return state["ended"], state["horizon"], 0, None
        return state["ended"], state["horizon"], cutter.count, \
            cutter.bounds(cutter.merge())[0]

    while True:
        every = t.allgather(step(read))
        if all(e for e, *_ in every):
            break  # the rest is the last segment
        firsts = [f for *_, f in every if f is not None]
        if not firsts:
            continue  # (nothing pending anywhere: read on)
        first = min(firsts)
        horizon = min(h for e, h, *_ in every if not e and h is not None)
        cut = _agree(t, cutter, defs, mine, first, horizon, step)
        if cut is None:
            state["next"] = int(cutter.count * 1.5) + 1
            continue
        records = sum(t.allgather(step(split, cutter, cut)))
        if records:
            out.append((cut, records))
        state["next"] = cutter.count + quota
    rest = sum(t.allgather(cutter.count))
    if rest:
        out.append((None, rest))
    return out


def _agree(t: Transport, cutter: _LocalCutter, defs: Definitions, mine: list[int],
           first: int, horizon: int, step: Callable[..., Any]) -> int | None:
    """The latest time at or before ``horizon``, after ``first``, that is safe on
    every rank and passes the exact check; None if none of :data:`ATTEMPTS` does."""
    merged = step(cutter.merge)
    bt, bd, level, ends = _safe_times(*cutter.busy())
    cut = horizon
    for _ in range(ATTEMPTS):
        for _ in range(LOWERINGS):  # down to a time every rank's local level is 0 at
            offers = t.allgather(_latest_safe(bt, level, ends, cut))
            if any(o is None for o in offers):
                return None
            if min(offers) == cut:
                break
            cut = min(offers)
        else:
            return None
        if cut <= first:
            return None

        def check(at: int = cut) -> tuple[dict, dict, dict]:
            channels, signs, done = cutter.balance(merged, at)
            return _unbalanced(channels, signs), _collective_ranges(defs, done, mine), done

        channels, ranges, done = step(check)
        balance: dict[tuple, int] = {}
        merged_ranges: dict[Any, tuple] = {}
        for part_channels, part_ranges in t.allgather((channels, ranges)):
            for key, v in part_channels.items():
                balance[key] = balance.get(key, 0) + v
            for key, (lo, hi) in part_ranges.items():
                _widen(merged_ranges, key, lo, hi)
        if not any(balance.values()) and all(lo == hi for lo, hi in merged_ranges.values()):
            cutter.agreed = (bt, bd, cut, done)
            return cut
        # the next lower time a rank's level changes at: fewer records before it
        k = int(np.searchsorted(ends, cut, side="left"))
        lower = t.allgather(int(ends[k - 1]) if k else None)
        if all(x is None for x in lower):
            return None
        cut = max(x for x in lower if x is not None)
    return None


def split(cutter: _LocalCutter, cut: int) -> int:
    """Cut this rank's pending records at the agreed ``cut``; how many went into
    the segment."""
    bt, bd, at, done = cutter.agreed
    if at != cut:
        raise RuntimeError(f"rank cut at {at}, not at the agreed {cut}")
    merged = {loc: parts[0] for loc, parts in cutter.pending.items() if parts}
    seg = cutter.split(merged, cut, bt, bd, done)
    cutter.agreed = None
    return sum(len(x) for x in seg.values())
