"""The agreed cut (compensate/parallel/cutting.py): the ranks agree on each
segment's cut from their own locations. Every cut is safe for the whole trace
(checked by the one-process cutter's own busy function and exact check, not by
the code under test), every rank gets the same cuts, and the streamed
distributed run on them gives the one-process output record for record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions
from compensate.formats import read_trace
from compensate.model import Trace
from compensate.parallel import cutting
from compensate.parallel.cutting import agreed_cuts, chunk_records, share_of
from compensate.parallel.ownership import owners
from compensate.parallel.segments import RankStream, StreamFallback
from compensate.pipeline.unclosed import scan
from compensate.platform import Platform
from compensate.simulate import simulate
from compensate.simulate.hybrid import HYBRID_PROGRAMS
from compensate.simulate.programs import PROGRAMS
from tests import pipelines
from tests import pipelines as stream
from tests.pipelines import run_pipeline
from tests.threadranks import run_threads

from ..conftest import REAL_ARCHIVES, TRACES, read_bundled
from ..randomtrace import fractional_platforms, random_trace

NAMES = sorted(PROGRAMS) + sorted(HYBRID_PROGRAMS)


def cuts_on_ranks(trace: Trace, size: int, segment: int, chunk: int | None = None,
                  lookahead: bool = False) -> list:
    """Every thread rank's agreed cuts (reading its own locations ``chunk``
    records at a time; default: as the command does, a quarter of its share;
    ``lookahead``: reading its own locations ahead where no cut is found)."""
    defs = trace.definitions
    owner = owners(defs, list(trace.events), size)
    counts = {loc: len(ev) for loc, ev in trace.events.items()}

    def body(t):
        mine = [loc for loc in trace.events if owner[loc] == t.rank]
        own = Trace(defs, {loc: trace.events[loc] for loc in mine}, trace.source)
        share = share_of(mine, counts)
        n = chunk or chunk_records(segment, share, 1 << 12)
        return agreed_cuts(defs, stream.trace_chunks(own, n), t, mine, share, segment,
                           RankStream.step_of(t),
                           (lambda: stream.trace_chunks(own, n)) if lookahead else None)

    return run_threads(size, body)


def assert_safe(trace: Trace, cuts: list, lookahead: bool = False) -> None:
    """Every cut is safe for the whole trace by the one-process cutter's rules:
    nothing open across it (its busy function, messages included, sums to 0 before
    it) and its exact check passes; the records add up. ``lookahead``: with what
    the whole trace never closes (the one-process scan) closed where it opens."""
    whole = stream.Cutter(trace.definitions, 1 << 62)
    if lookahead:
        whole.read_ahead(scan(trace.definitions, stream.trace_chunks(trace, 1 << 20)))
    for loc, ev in trace.events.items():
        whole.feed(loc, ev)
    merged = whole.merge()
    bt, bd = whole.busy()
    before = 0
    for cut, records in cuts:
        if cut is None:
            continue
        assert int(bd[bt < cut].sum()) == 0, f"something open across the cut at {cut}"
        assert whole.aligned(merged, cut) is not None, f"cut at {cut} not aligned"
        n = sum(int(np.searchsorted(ev.time, cut, "left")) for ev in trace.events.values())
        assert n - before == records or trace.definitions.metric_references()
        before = n
    assert sum(r for _, r in cuts) == trace.record_count


#: two processes, a message 30 -> 55 and one 80 -> 95 (the hand-computed case)
HAND = Path(__file__).parent / "data" / "hand_cut.trace"
EZTRACE = Path(__file__).parents[1] / "data" / "eztrace"


def test_hand_computed_cuts():
    """Two processes on two ranks, a message 30 -> 55 and one 80 -> 95, segments
    of 4 records, read one record at a time. Rank 0 holds 12 of the 22 records
    (it holds at most 3 records beyond what it kept from a cut, and reads past
    rank 1 while it holds fewer than 3 since the cut), rank 1 10 (2 and 2).
    Rank 0's part of the busy function: its send calls, 30-40 and 80-90; rank
    1's: the two messages, 30-55 and 80-95 (the sends' +1 shipped by rank 0 once
    both ranks have read past them). By hand:

    * 10: each rank reads 0, then 10 and 15: rank 1 holds its 2; 4 held, the
      smallest horizon is 10, nothing open before it: 2 records;
    * 30: rank 0 catches up (20) while rank 1 reads on (25); rank 0 catches up
      (30), then rank 1 (55, its 2 more); horizons 30 and 55, nothing open before
      30 (the send at 30 is not before it): 4 records;
    * 60: rank 0 catches up (40, 50, 60: its 3 more) while rank 1 reads on (65);
      the message 30 -> 55 and the send call 30-40 closed before 60: 4 records;
    * 80: as for 30 (70 and 75; 80; 95): 4 records;
    * 105: rank 0 catches up (90, 100) while rank 1 reads on (105); rank 0 catches
      up (110, its 3 more); horizons 110 and 105, both messages received: 4
      records;
    * 115: rank 0 reads on and its input ends while rank 1 catches up (106, 115):
      3 records; the rest: 1 record."""
    trace = read_trace(HAND)
    every = cuts_on_ranks(trace, 2, 4, chunk=1)
    assert every[0] == every[1]
    assert every[0] == [(10, 2), (30, 4), (60, 4), (80, 4), (105, 4), (115, 3), (None, 1)]
    assert_safe(trace, every[0])
    # a third rank owns nothing (share 0, its input ends at once): the same cuts
    assert cuts_on_ranks(trace, 3, 4, chunk=1) == [every[0]] * 3


@pytest.mark.parametrize("name", NAMES)
def test_every_program_cut_safely_and_compensated_as_in_one_process(name):
    """Every simulated program, segments of 40 records: at P = 2 and 3 the cuts
    are safe for the whole trace and the same on every rank; the streamed
    distributed run on them (P = 2 or 3) gives the one-process (in-memory) output,
    statistics, matching counts and a passed verification."""
    sim = simulate(name, ranks=4 if name not in HYBRID_PROGRAMS else 3, seed=1, iterations=3)
    trace, platform = sim.measured, sim.platform
    one = run_pipeline(trace, platform, "lower", "uniform", None)
    for size in (2, 3):
        every = cuts_on_ranks(trace, size, 40)
        assert all(c == every[0] for c in every)
        assert_safe(trace, every[0])
    # the run on them at P = 2 for half of the programs, P = 3 for the other half
    # (suite time; the cuts above are checked at both)
    for size in [2 + NAMES.index(name) % 2]:
        res, events = pipelines.stream_in_threads(trace, platform, EngineOptions("lower"),
                                                 size, 40, 16, agreed=True)
        assert res.verification.ok
        for loc, ev in one[0].trace.events.items():
            if len(ev):
                np.testing.assert_array_equal(events[loc].time, ev.time, err_msg=str(loc))
        a, b = one[0].stats.to_dict(), res.stats.to_dict()
        # (flush seconds exact: summed as ticks)
        assert a == b
        assert res.counts == one[1].counts()
    if name in ("stencil", "ring", "montecarlo", "hybrid_halo"):
        assert len(every[0]) >= 3  # really cut


def test_a_real_archive_cut_on_ranks():
    trace = read_trace(REAL_ARCHIVES[0])
    for size in (2, 3):
        every = cuts_on_ranks(trace, size, 40)
        assert all(c == every[0] for c in every) and len(every[0]) >= 3
        assert_safe(trace, every[0])


def test_a_rank_alone_past_its_share_reads_on():
    """hip-two-gpu-metrics on 2 ranks (rank 1 owns nothing): rank 0 is the only rank
    reading, at the latest horizon and past its share since the last cut, and a cut
    at its horizon takes nothing (METRIC samples held back for a later reference).
    It must read on: none is behind it. (When only ranks behind the latest horizon
    read, the ranks agreed the same empty cut for ever.)"""
    trace = read_bundled(TRACES / "hip-two-gpu-metrics" / "traces.otf2")
    every = cuts_on_ranks(trace, 2, 1024)
    assert all(c == every[0] for c in every) and len(every[0]) >= 5
    assert_safe(trace, every[0])


def test_a_cut_that_took_nothing_is_not_agreed_again():
    """hip-two-gpu-metrics on 2 ranks at 1000-record segments: a cut that takes
    only METRIC samples held back for a later reference (or nothing) leaves the
    pending records as they were, and the ranks agreed that same cut again and
    again until the input ended (at 16-record segments 4,543 times): 74 cuts, the
    last segment 72,097 records. Every agreed cut now lies after the one before,
    and no segment is larger than one process's largest (51,760)."""
    trace = read_bundled(TRACES / "hip-two-gpu-metrics" / "traces.otf2")
    every = cuts_on_ranks(trace, 2, 1000)
    assert all(c == every[0] for c in every)
    cuts = [c for c, _ in every[0] if c is not None]
    assert all(a < b for a, b in zip(cuts, cuts[1:], strict=False))
    alone = pipelines.cut_times(trace.definitions, stream.trace_chunks(trace, 500), 1000)
    assert max(n for _, n in every[0]) <= max(n for _, n in alone)
    assert_safe(trace, every[0])


def test_the_reading_rule_by_hand():
    """``_readers`` on the ranks' states (ended, horizon, pending, may read: 0 no, 1
    catch up, 2 also read on, first pending time)."""
    # one behind catches up to the latest horizon, the one at it reads on (may 2)
    assert cutting._readers([(False, 50, 3, 1, 0), (False, 80, 3, 2, 0)]) == ([0, 1], 80)
    # ... but not past its share (may 1)
    assert cutting._readers([(False, 50, 3, 1, 0), (False, 80, 3, 1, 0)]) == ([0], 80)
    # a rank that waits (may 0): only those behind it read, up to it
    assert cutting._readers([(False, 50, 3, 2, 0), (False, 80, 3, 0, 0),
                             (False, 90, 3, 2, 0)]) == ([0], 80)
    assert cutting._readers([(False, 90, 3, 2, 0), (False, 80, 3, 0, 0)]) == ([], 80)
    # every rank that may read is at the latest horizon past its share: it reads on
    assert cutting._readers([(False, 80, 9, 1, 0), (True, None, 0, 0, None)]) == ([0], 80)


def test_input_out_of_time_order_falls_back_on_every_rank():
    """A record before a cut already made (rank 1's reader yields one more record
    at time 5 after everything else): the rank that reads it cannot stream, and
    every rank falls back together."""
    trace = read_trace(HAND)
    defs = trace.definitions

    def body(t):
        ev = trace.events[t.rank]
        own = Trace(defs, {t.rank: ev}, trace.source)

        def chunks():
            yield from stream.trace_chunks(own, 1)
            if t.rank == 1:
                yield {1: ev.slice(0, 1).with_time(np.array([5], dtype=np.int64))}

        try:
            agreed_cuts(defs, chunks(), t, [t.rank], 0.5, 4, RankStream.step_of(t))
        except StreamFallback as exc:
            return str(exc)
        return None

    got = run_threads(2, body)
    assert "not in time order" in got[1] and got[0] is not None


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(2, 5), st.integers(8, 40), st.booleans(),
       st.integers(2, 4), st.integers(4, 60))
def test_random_traces_any_ranks_any_segment(data, n_locs, steps, extended, size, segment):
    """Property: random valid traces, any number of ranks and segment size: the
    agreed cuts are safe for the whole trace, and the distributed streamed output
    is the one-process output, with overheads that are fractions of a tick too."""
    trace = random_trace(lambda lo, hi: data.draw(st.integers(lo, hi)), n_locs, steps,
                         extended)
    every = cuts_on_ranks(trace, size, segment)
    assert all(c == every[0] for c in every)
    assert_safe(trace, every[0])
    platform = data.draw(fractional_platforms())
    one = run_pipeline(trace, platform, "lower", "uniform", None)
    res, events = pipelines.stream_in_threads(trace, platform, EngineOptions("lower"), size,
                                             segment, 7, agreed=True)
    for loc, ev in one[0].trace.events.items():
        if len(ev):
            np.testing.assert_array_equal(events[loc].time, ev.time)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(2, 5), st.integers(8, 40), st.integers(2, 3),
       st.integers(4, 40), st.booleans(), st.booleans())
def test_random_traces_with_lost_messages_read_ahead_on_ranks(data, n_locs, steps, size,
                                                              segment, gaps, fitted):
    """Property: random traces with what EZTrace writes for an MPI_Irecv completed in
    MPI_Wait (a send no receive takes, a request never completed; with ``gaps``
    also among a channel's recorded receives), any ranks and segment size: the
    ranks read ahead where they find no cut; the cuts are safe for the whole trace
    once what it never closes is closed, and the distributed streamed output
    (``fitted``: under ``--bound fitted``, the fit pass's look-ahead serving the
    segments') is the one-process output."""
    trace = random_trace(lambda lo, hi: data.draw(st.integers(lo, hi)), n_locs, steps,
                         lost=True, gaps=gaps)
    every = cuts_on_ranks(trace, size, segment, lookahead=True)
    assert all(c == every[0] for c in every)
    assert_safe(trace, every[0], lookahead=True)
    platform = Platform(5e-8)
    one = run_pipeline(trace, platform, "fitted" if fitted else "lower", "uniform", None)
    _, events = pipelines.stream_in_threads(trace, platform, EngineOptions("lower"), size,
                                           segment, 7, agreed=True, lookahead=True,
                                           fit=[] if fitted else None)
    for loc, ev in one[0].trace.events.items():
        if len(ev):
            np.testing.assert_array_equal(events[loc].time, ev.time)


def test_ranks_read_ahead_past_sends_never_received():
    """EZTrace's halo: its 20 Isends are never received (no MpiIrecv for an
    MPI_Irecv completed in MPI_Waitall). Without reading ahead the ranks agreed no
    cut after the first one (2 segments, the largest 271 of 274 records at 16);
    reading ahead they cut as often as one process does, and safely."""
    trace = read_trace(str(EZTRACE / "halo" / "eztrace_log.otf2"))
    before = cuts_on_ranks(trace, 2, 16)[0]
    assert len(before) == 2
    every = cuts_on_ranks(trace, 2, 16, lookahead=True)
    assert all(c == every[0] for c in every)
    assert len(every[0]) >= 10 and max(n for _, n in every[0]) < 100
    assert_safe(trace, every[0], lookahead=True)


def test_ranks_read_ahead_past_a_channels_gap():
    """EZTrace's gaps archive (receives the tracer did not record among a channel's
    recorded ones, 3 ranks): the sender's rank finds each gap and the receiver's
    rank its last balance point, so the ranks cut after the gaps as one process
    does, whether they read ahead before the gap (at 16 records: 25 and 24
    segments at P = 3 and 2, the largest 52 and 64 records; one process 24, the
    largest 64) or with the gap among the records they hold (at 64: 9 segments,
    the largest 63, as one process; what they held when they read ahead is cut
    in segments of the size asked for, not in one); without reading ahead 3 or
    4, the largest 365 of 468 records."""
    trace = read_trace(str(EZTRACE / "gaps" / "eztrace_log.otf2"))
    for segment, least, most in ((16, 15, 80), (64, 8, 100)):
        for size in (2, 3):
            assert max(n for _, n in cuts_on_ranks(trace, size, segment)[0]) == 365
            every = cuts_on_ranks(trace, size, segment, lookahead=True)
            assert all(c == every[0] for c in every)
            assert len(every[0]) >= least and max(n for _, n in every[0]) < most
            assert_safe(trace, every[0], lookahead=True)


def test_a_ranks_share_of_the_records():
    """By the definitions' record counts; by locations where they are not known
    (a text trace) or all 0 (a writer that left OTF2's numberOfEvents 0)."""
    assert share_of([1], {0: 30, 1: 10}) == 0.25
    assert share_of([0], {0: 30, 1: None}) == 0.5
    assert share_of([0, 1], {0: 0, 1: 0, 2: 0}) == pytest.approx(2 / 3)
    assert share_of([], {0: 5}) == 0.0
    assert chunk_records(1000, 0.25, 1 << 14) == 250  # its share of a segment
    assert chunk_records(1 << 18, 0.5, 1 << 14) == 1 << 14  # at most the largest


@pytest.mark.parametrize("name", ["stencil", "mixed", "hybrid_halo"])
def test_the_offered_intervals_in_batches_of_one_give_the_same_cuts(name, monkeypatch):
    """The ranks offer their latest safe intervals a batch at a time
    (candidates.BATCH); the intersection is exact down to the earliest interval a
    rank offered, so one interval at a time (many more offers) gives the same
    cuts as the default batch."""
    import compensate.pipeline.candidates as candidates

    sim = simulate(name, ranks=4 if name not in HYBRID_PROGRAMS else 3, seed=1, iterations=3)
    full = cuts_on_ranks(sim.measured, 2, 40)[0]
    monkeypatch.setattr(candidates, "BATCH", 1)
    every = cuts_on_ranks(sim.measured, 2, 40)
    assert all(c == every[0] for c in every)
    assert every[0] == full and len(full) >= 3


@pytest.mark.parametrize("name", ["ring", "mixed", "hybrid_halo"])
def test_ranks_reading_chunks_of_many_segments_cut_as_finely_as_one_process(name):
    """Each rank reading 400 records at a time, 4 segments' worth (as after a long
    search the look-ahead ends): the ranks look no later than the fill time from
    their samples first, then twice that, ..., and look again at once while a
    segment's worth is pending, so their largest segment is within a tenth of one
    process's reading a quarter segment at a time."""
    sim = simulate(name, ranks=4 if name not in HYBRID_PROGRAMS else 3, seed=3, iterations=6)
    trace = sim.measured
    one = max(n for _, n in pipelines.cut_times(trace.definitions,
                                                stream.trace_chunks(trace, 25), 100))
    for size in (2, 3):
        every = cuts_on_ranks(trace, size, 100, chunk=400)
        assert all(c == every[0] for c in every)
        assert max(n for _, n in every[0]) <= 1.1 * one, (every[0], one)
        assert_safe(trace, every[0])
