"""Candidate cuts: when the cutter (:class:`compensate.pipeline.cuts.Cutter`, and the
ranks' :class:`compensate.parallel.cutting.CutAgreement` alike) searches and reads
ahead (:func:`next_search`, :func:`after_cut`, :func:`searches_at_end`,
:func:`reads_ahead`), the times its busy function is 0 at, and which of them a
search makes the exact check on.

One process takes the latest end of each interval the busy function is 0 on
(:func:`free_ends`) and tries the :data:`ATTEMPTS` latest no later than the fill
time, before which a segment's worth of the pending records lie
(:func:`fill_times`), then up to twice that and so on (:func:`tries`). A
distributed run's ranks each hold a part of the busy function
(:mod:`compensate.parallel.cutting`): each gives its safe intervals
(:func:`safe_intervals`), offers the latest of them a batch at a time
(:func:`offer`), and the intersection of the offers (:func:`common`) holds the
times safe for the whole trace; the fill times come from a sample of every
location's times (:func:`sample_of`, :func:`fills_of`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

#: Segments' worth of records the cutter holds at most without a safe cut before
#: it reads ahead for what never closes (:mod:`compensate.pipeline.unclosed`)
LOOKAHEAD_AFTER = 2
#: how many of the latest candidates one search makes the exact check on (up to the
#: fill time, then up to the next: :func:`tries`)
ATTEMPTS = 4
#: how many samples of a rank's pending times a segment's records give
#: (:func:`sample_of`): the fill time is exact to a 256th of a segment per location
SAMPLES = 256
#: how many of its latest safe intervals a rank offers at a time: their
#: intersection is exact down to the earliest interval a rank offered, and the
#: next offer goes on below it
BATCH = 256
_NEVER = np.iinfo(np.int64).max
_ALWAYS = np.iinfo(np.int64).min


def next_search(count: int) -> int:
    """The records pending at the next search after one found no cut in ``count``:
    half as many again."""
    return int(count * 1.5) + 1


def reads_ahead(count: int, target: int) -> bool:
    """Whether a search that found no cut in ``count`` pending records reads ahead:
    the next would hold more than :data:`LOOKAHEAD_AFTER` segments' records."""
    return next_search(count) > LOOKAHEAD_AFTER * target


def after_cut(kept: int, took: bool, target: int) -> int:
    """The records pending at the next search after a cut that kept ``kept`` and
    took some records (``took``): at once while a segment's worth is still held,
    else a segment's worth later (after a cut that took none, METRIC samples held
    back for a later reference, no search again on just those)."""
    return kept if took and kept >= target else kept + target


def searches_at_end(count: int, target: int, failed: int | None) -> bool:
    """Whether the ``count`` records still pending at the input's end are searched
    once more: more than a segment's worth, and not just those the last search
    found no cut in (``failed``)."""
    return target < count != failed


def fill_times(times: Iterable[np.ndarray], records: int) -> list[int]:
    """The latest cuts segments of at most ``records``, twice as many, four times...
    of the records measured at ``times`` may end at (while there are more): the
    ``records + 1``-th earliest time, and so on."""
    parts = list(times)
    t = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    ks = _doublings(records, t.size)
    return [int(v) for v in np.partition(t, ks)[ks]] if ks else []


def _doublings(records: int, size: int) -> list[int]:
    ks = []
    while records < size:
        ks.append(records)
        records *= 2
    return ks


def tries(cand: np.ndarray, fills: list[int]) -> list[int]:
    """Which of the safe cuts ``cand`` (ascending) the exact check tries, in
    order: the :data:`ATTEMPTS` latest up to the first fill time (:func:`fill_times`:
    a segment of the size asked for), then those not tried yet up to the next
    (twice the size), and so on, then up to the latest: the smallest segment that
    passes near the size asked for rather than the largest."""
    order: list[int] = []
    for limit in [*fills, None]:
        pick = cand if limit is None else cand[cand <= limit]
        order += [c for c in pick[::-1][:ATTEMPTS + len(order)].tolist()
                  if c not in order][:ATTEMPTS]
    return order


def free_ends(bt: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Of the busy function's steps (times ``bt`` sorted, ``level`` after each), the
    latest safe cut of each interval it is 0 on that a step ends: a step's time
    where the steps before it sum to 0 (the records before it close everything
    they opened)."""
    if not bt.size:
        return bt
    free = np.flatnonzero(level[:-1] == 0)
    return bt[free + 1][bt[free + 1] > bt[free]]


def safe_intervals(bt: np.ndarray, level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of a busy function (steps' times ``bt`` sorted, ``level`` after each), the
    times ``T`` at which the steps before ``T`` sum to 0, as disjoint intervals
    ``lo < T <= hi`` in time order (``lo``, ``hi`` arrays; unbounded ends as the
    int64 extremes)."""
    if not bt.size:
        return np.array([_ALWAYS]), np.array([_NEVER])
    last = np.flatnonzero(np.r_[bt[1:] != bt[:-1], True])  # each time's last step
    u, lev = bt[last], level[last]
    zero = np.flatnonzero(lev == 0)
    after = np.r_[u[1:], _NEVER]
    return np.r_[_ALWAYS, u[zero]], np.r_[u[0], after[zero]]


def offer(lo: np.ndarray, hi: np.ndarray, first: int, top: int
          ) -> tuple[np.ndarray, np.ndarray, int]:
    """A rank's latest :data:`BATCH` safe intervals within ``first < T <= top``
    (clipped to it), and how far down they reach (``first`` if they are all)."""
    lo, hi = np.maximum(lo, first), np.minimum(hi, top)
    keep = lo < hi
    lo, hi = lo[keep][-BATCH:], hi[keep][-BATCH:]
    floor = int(lo[0]) if int(keep.sum()) > BATCH else first
    return lo, hi, floor


def common(offers: list[tuple[np.ndarray, np.ndarray, int]], top: int
           ) -> tuple[list[int], int]:
    """The latest time of each interval safe on every rank (``offers``: every
    rank's :func:`offer`), latest first, and the time down to which that list is
    complete."""
    floor = max(f for *_, f in offers)
    los = np.concatenate([np.maximum(lo, floor) for lo, _, _ in offers])
    his = np.concatenate([np.minimum(hi, top) for _, hi, _ in offers])
    keep = los < his
    pts = np.r_[los[keep], his[keep]]
    deltas = np.r_[np.ones(int(keep.sum()), np.int64), -np.ones(int(keep.sum()), np.int64)]
    if not pts.size:
        return [], floor
    order = np.argsort(pts, kind="stable")
    pts, cover = pts[order], np.cumsum(deltas[order])
    last = np.flatnonzero(np.r_[pts[1:] != pts[:-1], True])
    u, cover = pts[last], cover[last]  # covered by ``cover`` ranks on (u[i], u[i+1]]
    full = np.flatnonzero(cover[:-1] == len(offers))
    if not full.size:
        return [], floor
    ends = u[full + 1]
    # runs of touching intervals are one: its latest time only
    run_end = np.r_[u[full[1:]] != ends[:-1], True]
    return ends[run_end][::-1].tolist(), floor


def sample_of(times: list[np.ndarray], step: int) -> np.ndarray:
    """Every ``step``-th of a rank's pending records' times, location by location
    (``times``: each location's, in time order; no sort: a look for a cut reads
    a few hundred values a segment, not every record)."""
    parts = [t[step - 1::step] for t in times]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def fills_of(samples: list[np.ndarray], step: int, records: int) -> list[int]:
    """The fill times of the ranks' pending records (``samples``: every rank's
    :func:`sample_of`): :func:`fill_times`, each to ``step`` records a location."""
    every = np.sort(np.concatenate(samples)) if samples else np.zeros(0, np.int64)
    return [int(every[k // step]) for k in _doublings(records, every.size * step)
            if k // step < every.size]
