"""The streamed run of processes whose clocks disagree (compensate.pipeline.run
clock_pass, aligned_chunks): the offsets one pass over the segments finds are the
ones the whole trace gives in memory, the moved records still reach the cutter in
time order, and the streamed output is the in-memory one, record for record."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.formats.text import read_text, write_text
from compensate.matching import match
from compensate.matching.clocks import align_clocks, first_offsets, inversions
from compensate.model import Trace, TraceError
from compensate.pipeline import RunOptions, aligned_chunks, clock_pass, in_memory, streamed
from compensate.pipeline.context import ClocksDisagree
from compensate.pipeline.cuts import NotStreamable, SegmentError
from compensate.platform import Platform
from compensate.simulate import simulate
from tests.inprocess import run_compensate
from tests.matching.test_clocks import HEAD
from tests.pipelines import trace_chunks


def _skewed(shifts: dict[int, int], program: str = "stencil", seed: int = 0) -> Trace:
    """A simulated program whose processes stamp their records ``shifts[p]``
    ticks late (negative: early), as a tracer with a clock per process does."""
    trace = simulate(program, ranks=4, iterations=30, overhead=2e-7, seed=seed).measured
    base = -min([0, *shifts.values()])
    return trace.with_times({loc: ev.time + base + shifts.get(trace.definitions.process_of(loc), 0)
                             for loc, ev in trace.events.items()})


def _whole(trace: Trace):
    m = match(trace)
    return align_clocks(trace, m.table, m.instances)


@pytest.mark.parametrize("segment_records", [60, 400, 1 << 18])
def test_one_pass_over_the_segments_finds_the_offsets_of_the_whole_trace(segment_records):
    trace = _skewed({1: -300_000, 3: -70_000})
    _, expected = _whole(trace)
    assert expected.inverted > 0 and set(expected.offsets) == {1, 3}
    found = clock_pass(trace.definitions, trace_chunks(trace, 50),
                       RunOptions("lower", segment_records=segment_records))
    assert found == expected


def test_clocks_apart_by_more_than_a_round_trip_are_still_cut_finely():
    """Process 1 is 300 us early, many iterations' worth: on the times as read a
    message is always in flight somewhere, and only the first chunks' guess lets
    the cutter find its cuts."""
    trace = _skewed({1: -300_000})
    guess = first_offsets(trace.definitions, {loc: ev.slice(0, 200)
                                              for loc, ev in trace.events.items()})
    assert abs(guess[1] - _whole(trace)[1].offsets[1]) < 20_000
    sizes: list[int] = []
    clock_pass(trace.definitions, trace_chunks(trace, 50),
               RunOptions("lower", segment_records=200), segments=sizes)
    assert len(sizes) > 5 and max(sizes) < 4 * 200


#: a ping-pong whose two messages are each stamped as received 299 ticks before
#: they were sent: d1 - d0 >= 300 and d0 - d1 >= 300, which no constant meets (the
#: middle of the contradiction: 0)
DRIFTING = HEAD + """600 1 Enter region=2
900 0 Enter region=1
1000 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
1050 0 Leave region=1
1060 0 Enter region=2
701 1 MpiRecv sender=0 comm=0 tag=7 bytes=8
750 1 Leave region=2
1900 1 Enter region=1
2000 1 MpiSend receiver=0 comm=0 tag=7 bytes=8
2050 1 Leave region=1
1701 0 MpiRecv sender=1 comm=0 tag=7 bytes=8
1750 0 Leave region=2
"""


def test_where_no_constant_shift_orders_more_the_pass_says_so_with_no_offset(tmp_path):
    """Clocks that drift: the in-memory run moves nothing (and times the receives
    left before their sends); the pass counts them."""
    path = tmp_path / "drift.trace"
    path.write_text(DRIFTING)
    trace = read_text(str(path))
    assert _whole(trace) is None
    found = clock_pass(trace.definitions, trace_chunks(trace, 4),
                       RunOptions("lower", segment_records=8))
    assert (found.inverted, found.offsets) == (2, {})


def test_a_ring_whose_third_pair_the_tree_leaves_out_is_ordered_by_the_pass_too():
    """A ring whose process 2 is 1655 ticks late leaves receives 1 tick before their
    sends on a pair the spanning tree does not link: offsets that order every
    message exist, and the pass finds the in-memory run's."""
    trace = _skewed({2: 1655}, "ring")
    aligned, expected = _whole(trace)
    m = match(aligned)
    assert expected.inverted > 0 and inversions(aligned, m.table, m.instances) == (0, 0)
    found = clock_pass(trace.definitions, trace_chunks(trace, 50),
                       RunOptions("lower", segment_records=60))
    assert found == expected


def test_a_trace_whose_clocks_agree_needs_no_pass():
    trace = _skewed({})
    assert _whole(trace) is None
    found = clock_pass(trace.definitions, trace_chunks(trace, 50),
                       RunOptions("lower", segment_records=60))
    assert (found.inverted, found.offsets) == (0, {})


def test_moved_records_reach_the_cutter_in_time_order_and_all_of_them():
    trace = _skewed({1: -300_000, 2: 40_000})
    _, alignment = _whole(trace)
    out = list(aligned_chunks(trace.definitions, trace_chunks(trace, 37), alignment))
    last = -1
    for chunk in out:  # every record of a chunk after every record of the ones before
        assert min(int(ev.time[0]) for ev in chunk.values()) >= last
        last = max(int(ev.time[-1]) for ev in chunk.values())
    for loc, ev in trace.events.items():
        shift = alignment.offsets.get(trace.definitions.process_of(loc), 0)
        got = np.concatenate([c[loc].time for c in out if loc in c])
        assert np.array_equal(got, ev.time + shift)


def _streamed_times(trace: Trace, bound: str, segment_records: int):
    opts = RunOptions(bound, segment_records=segment_records)
    alignment = clock_pass(trace.definitions, trace_chunks(trace, 40), opts)
    written: dict[int, list] = {}
    run = streamed(trace.definitions, trace_chunks(trace, 40), Platform(2e-7), opts,
                   lambda loc, ev: written.setdefault(loc, []).append(ev.time.copy()),
                   alignment=alignment)
    return run, {loc: np.concatenate(parts) for loc, parts in written.items()}


@settings(max_examples=10, deadline=None)
@given(st.dictionaries(st.sampled_from([1, 2, 3]), st.integers(-400_000, 400_000),
                       min_size=1),
       st.sampled_from(["lower", "upper"]), st.sampled_from([80, 300]),
       st.sampled_from(["stencil", "ring", "nonblocking"]))
def test_streamed_with_its_clocks_aligned_is_the_in_memory_run(shifts, bound, records,
                                                                 program):
    trace = _skewed(shifts, program)
    whole = in_memory(trace, Platform(2e-7), RunOptions(bound))
    run, times = _streamed_times(trace, bound, records)
    assert run.clock_alignment == whole.clock_alignment
    assert run.measured_span == whole.measured_span  # the input's times, not the moved
    assert run.approximated_span == whole.approximated_span
    assert run.verification.ok
    for loc, ev in whole.trace.events.items():
        assert np.array_equal(times[loc], ev.time), loc


def test_the_command_streams_such_a_trace_and_writes_the_in_memory_output(tmp_path):
    path = tmp_path / "skewed.trace"
    write_text(_skewed({1: -300_000, 3: -70_000}), str(path))
    outputs = {}
    for name, mode in (("streamed", ["--segment-records", "300"]), ("whole", ["--in-memory"])):
        out, summary = tmp_path / f"{name}.trace", tmp_path / f"{name}.json"
        run = run_compensate(path, out, "--overhead", "200ns", "--summary", summary, *mode)
        assert run.returncode == 0, run.stderr
        outputs[name] = (out.read_text(), json.loads(summary.read_text()))
    (streamed_text, s), (whole_text, w) = outputs["streamed"], outputs["whole"]
    assert streamed_text == whole_text
    assert s["segments"]["count"] > 1  # streamed, not read whole after all
    assert s["clock_alignment"] == w["clock_alignment"]
    assert s["clock_alignment"]["receives_before_send"] > 0


def test_clocks_apart_are_refused_from_the_first_chunks_before_anything_is_cut():
    """Without an alignment the streamed run stops at once, having read only the
    first chunks (the command then runs the clock pass)."""
    trace = _skewed({1: -300_000})
    read = []

    def chunks():
        for chunk in trace_chunks(trace, 50):
            read.append(sum(len(ev) for ev in chunk.values()))
            yield chunk

    with pytest.raises(ClocksDisagree):
        streamed(trace.definitions, chunks(), Platform(2e-7),
                 RunOptions("lower", segment_records=200), lambda loc, ev: None)
    assert sum(read) == 200 and sum(read) < trace.record_count


def test_a_segment_that_outgrows_the_memory_is_refused_in_one_line(tmp_path, monkeypatch):
    """EZTrace's halo (tests/data/eztrace/halo): its nonblocking receives are never
    completed in the trace, so no cut follows the first send until the cutter
    reads ahead (before it holds twice a segment's records). With room for 50
    records the run stops with exit 3 and one line once it holds more, instead of
    growing until the kernel kills it; with room enough it runs."""
    import compensate.pipeline.run as run_module
    from tests.conftest import ROOT

    anchor = ROOT / "tests" / "data" / "eztrace" / "halo" / "eztrace_log.otf2"
    monkeypatch.setattr(run_module, "available_memory", lambda: 50 * 300)
    out = tmp_path / "o" / "traces.otf2"
    run = run_compensate(anchor, out, "--overhead", "100ns", "--segment-records", "40")
    assert run.returncode == 3, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "no safe cut in" in lines[0] and "nothing written" in lines[0]
    assert not out.parent.exists()
    monkeypatch.setattr(run_module, "available_memory", lambda: 1 << 40)
    assert run_compensate(anchor, out, "--overhead", "100ns", "--segment-records", "40"
                          ).returncode == 0


def _stream_as_the_command(trace: Trace, segment: int) -> tuple:
    """The streamed run of ``trace`` as the command runs it: the look-ahead over a
    fresh read, and where the clocks disagree the clock pass first; the run and
    every location's output times."""
    from compensate.pipeline.unclosed import scan

    defs = trace.definitions
    opts = RunOptions("lower", segment_records=segment)

    def ahead():
        return scan(defs, trace_chunks(trace, 7))

    written: dict[int, list] = {}

    def stream(alignment):
        written.clear()
        return streamed(defs, trace_chunks(trace, 7), Platform(5e-8), opts,
                        lambda loc, ev: written.setdefault(loc, []).append(ev.time.copy()),
                        alignment=alignment, lookahead=ahead)
    try:
        run = stream(None)
    except ClocksDisagree:
        run = stream(clock_pass(defs, trace_chunks(trace, 7), opts, lookahead=ahead))
    return run, {loc: np.concatenate(parts) for loc, parts in written.items()}


@pytest.mark.parametrize("segment", [16, 64])
def test_clocks_that_disagree_where_a_channel_lost_receives_stream_as_in_memory(segment):
    """clockring/ (tests/data/eztrace): its channels hold fewer receives than sends,
    whose pairing reads the times (compensate.matching.nomessage), and its clocks
    disagree. The clock pass's gap rule takes its first guess off (the whole
    trace's first matching pairs on the times as read), so it finds the in-memory
    offsets; the segments take the look-ahead moved to the aligned times, so the
    streamed output is the in-memory one (the ranks:
    tests/parallel/test_command.py)."""
    import compensate as c

    trace = c.read(Path(__file__).parents[1] / "data" / "eztrace" / "clockring" /
                   "eztrace_log.otf2")
    whole = in_memory(trace, Platform(5e-8), RunOptions("lower"))
    run, times = _stream_as_the_command(trace, segment)
    assert run.segments >= 3 and whole.clock_alignment.inverted > 0
    assert run.clock_alignment == whole.clock_alignment
    assert run.stats.p2p_cases == whole.stats.p2p_cases
    for loc, ev in whole.trace.events.items():
        assert np.array_equal(times[loc], ev.time), loc


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(2, 4), st.integers(8, 30), st.integers(4, 40))
def test_random_gap_traces_whose_clocks_disagree_stream_as_in_memory(data, n_locs, steps,
                                                                     segment):
    """Property: random traces with gaps among their channels' recorded receives,
    each process's clock moved by its own offset (receives then stamped before
    their sends), any segment size: the streamed run as the command runs it gives
    the in-memory output, clock alignment included."""
    from dataclasses import replace

    from tests.randomtrace import random_trace

    def draw(lo: int, hi: int) -> int:
        return data.draw(st.integers(lo, hi))

    trace = random_trace(draw, n_locs, steps, lost=True, gaps=True)
    trace = Trace(trace.definitions, {loc: replace(ev, time=ev.time + draw(0, 8000))
                                      for loc, ev in trace.events.items()}, trace.source)
    try:
        whole = in_memory(trace, Platform(5e-8), RunOptions("lower"))
    except TraceError:  # (moved so, a channel pairs sends and receives of other lengths)
        with pytest.raises((TraceError, SegmentError, NotStreamable)):
            _stream_as_the_command(trace, segment)  # (the command: read whole, refused)
        return
    run, times = _stream_as_the_command(trace, segment)
    assert run.clock_alignment == whole.clock_alignment
    for loc, ev in whole.trace.events.items():
        if len(ev):
            assert np.array_equal(times[loc], ev.time), loc


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(2, 4), st.integers(8, 30), st.integers(4, 40))
def test_a_stream_that_fails_verification_counts_what_memory_counts(data, n_locs, steps,
                                                                    segment):
    """Property: a copy (``--bound none``) of a random trace whose processes'
    clocks disagree holds receives and collective exits stamped before what they
    wait for, in any segment. The stream writes nothing from the first failing
    segment on, and verifies every segment: each family's count is the in-memory
    run's, and so are the examples where they are all kept (in one process's
    check order: each check's before the next's)."""
    from dataclasses import replace

    from compensate.verify.result import COUNTERS, EXAMPLES
    from tests.randomtrace import random_trace

    def draw(lo: int, hi: int) -> int:
        return data.draw(st.integers(lo, hi))

    trace = random_trace(draw, n_locs, steps)
    trace = Trace(trace.definitions, {loc: replace(ev, time=ev.time + draw(0, 8000))
                                      for loc, ev in trace.events.items()}, trace.source)
    opts = RunOptions("none", segment_records=segment)
    try:
        whole = in_memory(trace, Platform(5e-8), opts).verification
    except TraceError:  # (moved so, a channel pairs sends and receives of other lengths)
        return
    written: list[int] = []
    run = streamed(trace.definitions, trace_chunks(trace, 7), Platform(5e-8), opts,
                   lambda loc, ev: written.append(loc))
    got = run.verification
    assert [getattr(got, c) for c in COUNTERS] == [getattr(whole, c) for c in COUNTERS]
    if whole.violations <= EXAMPLES:
        assert sorted(got.examples) == sorted(whole.examples)
        checks = [k[0] for k in got.keys]
        assert checks == sorted(checks)
    assert run.records == trace.record_count
    if not whole.ok:
        assert run.segments > 0 and len(written) < run.segments * len(trace.events)
