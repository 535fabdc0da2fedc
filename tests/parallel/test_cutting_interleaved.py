"""The agreed cut (compensate/parallel/cutting.py) on programs whose processes
interleave differently from the project's stencil (tests/parallel/interleaved.py):
the ranks' cuts are safe for the whole trace, their segments are within a small
factor of the one-process cutter's, and the streamed distributed run on them gives
the one-process output record for record."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from compensate.engine import EngineOptions
from compensate.parallel import cutting
from tests import pipelines
from tests.pipelines import run_pipeline

from .interleaved import PROGRAMS, simulate_interleaved
from .test_cutting import assert_safe, cuts_on_ranks

SEGMENT = 400


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def program(request):
    sim = simulate_interleaved(request.param, 6, 60, seed=2)
    return sim.measured, sim.platform


@pytest.mark.parametrize("size", [2, 3])
def test_agreed_segments_are_the_one_process_segments_within_a_small_factor(program, size):
    """As many segments as one process cuts, within a factor 1.5, and no segment
    more than twice the largest of one process's: a rank holds about its share of
    one process's segment (the trace has 6 processes: 3 or 2 on a rank)."""
    trace, _ = program
    one = pipelines.cut_times(trace.definitions, pipelines.trace_chunks(trace, SEGMENT // 4),
                              SEGMENT)
    every = cuts_on_ranks(trace, size, SEGMENT)
    assert all(c == every[0] for c in every)
    assert_safe(trace, every[0])
    assert len(one) >= 8  # (the case is really cut)
    assert len(every[0]) >= len(one) / 1.5
    assert max(r for _, r in every[0]) <= 2 * max(r for _, r in one)


def test_a_rank_holds_no_more_pending_records_than_a_segment(program, monkeypatch):
    """A rank reads past the others only while it holds less than its share of a
    segment since the last cut: where its records are sparse in time and the
    others' dense (``halves``), it does not pile up records beyond their horizons,
    which no cut near them takes (it held 2.9 times the one-process cutter's
    largest segment on ``halves`` when it read on whatever it held)."""
    trace, _ = program
    one = pipelines.cut_times(trace.definitions, pipelines.trace_chunks(trace, SEGMENT // 4),
                              SEGMENT)
    held: dict[str, int] = {}
    chunk = cutting._Reader.chunk

    def counted(reader):
        chunk(reader)
        name = threading.current_thread().name
        held[name] = max(held.get(name, 0), reader.cutter.count)

    monkeypatch.setattr(cutting._Reader, "chunk", counted)
    cuts_on_ranks(trace, 2, SEGMENT)
    assert len(held) == 2
    assert max(held.values()) <= 1.5 * max(r for _, r in one), held


def test_streamed_ranks_on_agreed_cuts_give_the_one_process_output(program):
    trace, platform = program
    one = run_pipeline(trace, platform, "lower", "uniform", None)
    res, events = pipelines.stream_in_threads(trace, platform, EngineOptions("lower"), 2,
                                             SEGMENT, 37, agreed=True)
    assert res.verification.ok and res.segments >= 8
    for loc, ev in one[0].trace.events.items():
        np.testing.assert_array_equal(events[loc].time, ev.time, err_msg=str(loc))
    assert one[0].stats.to_dict() == res.stats.to_dict()
    assert res.counts == one[1].counts()
