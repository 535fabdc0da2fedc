"""Candidate cuts (compensate.pipeline.candidates): the safe times of a busy function,
which of them a search tries, and the fill time a segment's worth of records ends at,
exact in one process and from the ranks' samples."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.pipeline import candidates
from compensate.pipeline.candidates import (
    common,
    fill_times,
    fills_of,
    free_ends,
    offer,
    safe_intervals,
    sample_of,
    tries,
)


def test_fill_times_by_hand():
    """Times 1 2 3 5 9 (two locations): a cut at 3 takes 1 and 2, one at 9 four
    (twice two); two records or more than all need no fill time."""
    times = [np.array([1, 5, 9]), np.array([2, 3])]
    assert fill_times(times, 2) == [3, 9]
    assert fill_times(times, 1) == [2, 3, 9]
    assert fill_times(times, 5) == []
    assert fill_times([], 1) == []


def test_tries_by_hand():
    """The four latest up to each fill time in turn, then the four latest of all,
    each not tried yet; without a fill time, the four latest."""
    cand = np.array([10, 20, 30, 40, 50, 60])
    assert tries(cand, []) == [60, 50, 40, 30]
    assert tries(cand, [35]) == [30, 20, 10, 60, 50, 40]
    assert tries(cand, [15, 35]) == [10, 30, 20, 60, 50, 40]
    assert tries(cand, [60]) == [60, 50, 40, 30, 20, 10]
    assert tries(cand, [5, 7]) == [60, 50, 40, 30]
    assert tries(cand[:0], [5]) == []


def test_free_ends_and_safe_intervals_by_hand():
    """Steps +1 at 2, -1 at 4, +1 at 4, -1 at 7, +1 at 9: 0 before 2, on (4, 4]
    not (the +1 at 4 counts), on (7, 9]."""
    bt = np.array([2, 4, 4, 7, 9])
    level = np.cumsum([1, -1, 1, -1, 1])
    assert free_ends(bt, level).tolist() == [9]
    lo, hi = safe_intervals(bt, level)
    assert lo[1:].tolist() == [7] and hi.tolist() == [2, 9]
    assert lo[0] == np.iinfo(np.int64).min


def test_common_intervals_by_hand():
    """Two ranks: (0, 10] and (20, 30] on one, (5, 25] on the other: the trace is
    safe on (5, 10] and (20, 25], latest first; clipped to ``top``."""
    a = offer(np.array([0, 20]), np.array([10, 30]), 0, 100)
    b = offer(np.array([5]), np.array([25]), 0, 100)
    assert common([a, b], 100) == ([25, 10], 0)
    assert common([a, b], 8) == ([8], 0)


def test_offers_in_batches_reach_down_in_turn(monkeypatch):
    """One interval a batch: the offer says how far down it reaches, and the
    intersection is complete down to there only."""
    monkeypatch.setattr(candidates, "BATCH", 1)
    lo, hi = np.array([0, 20, 40]), np.array([10, 30, 50])
    got = offer(lo, hi, 0, 100)
    assert got[0].tolist() == [40] and got[1].tolist() == [50] and got[2] == 40
    whole = offer(np.array([0]), np.array([100]), 0, 100)
    assert common([got, whole], 100) == ([50], 40)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10**6), max_size=300), min_size=1, max_size=4),
       st.integers(1, 40), st.integers(1, 600))
def test_the_sampled_fill_times_are_within_a_sample_step_a_location(parts, step, records):
    """Distinct times spread over locations (two ranks): the records before each
    fill time the samples give are within ``step`` a location of ``records``,
    twice it, ... (exact with step 1, as :func:`fill_times`)."""
    seen: set[int] = set()
    locs = []
    for part in parts:  # (distinct times: ties would make "before" ambiguous)
        locs.append(np.sort(np.array([t for t in part if not (t in seen or seen.add(t))],
                                    dtype=np.int64)))
    every = np.concatenate(locs)
    half = len(locs) // 2
    fills = fills_of([sample_of(locs[:half], step), sample_of(locs[half:], step)], step,
                     records)
    wanted = records
    for fill in fills:
        before = int((every < fill).sum())
        assert wanted - step < before < wanted + len(locs) * step
        wanted *= 2
    assert every.size < wanted + len(locs) * step  # (no fill time left out)
    if step == 1:
        assert fills == fill_times(locs, records)


def test_after_a_cut_the_next_search_by_hand():
    """At once while a segment's worth is still held after a cut that took records;
    a segment's worth later otherwise, also after a cut that took none."""
    assert candidates.after_cut(250, True, 100) == 250
    assert candidates.after_cut(100, True, 100) == 100
    assert candidates.after_cut(99, True, 100) == 199
    assert candidates.after_cut(250, False, 100) == 350


def test_at_the_end_a_search_once_more_by_hand():
    """More than a segment's worth pending, unless just those found no cut."""
    assert candidates.searches_at_end(101, 100, None)
    assert candidates.searches_at_end(101, 100, 90)
    assert not candidates.searches_at_end(100, 100, None)
    assert not candidates.searches_at_end(101, 100, 101)
