"""Streaming within a rank (compensate/parallel/segments.py) on thread ranks: the
one-process streamed run's output, record for record, with its statistics,
matching counts and verification, on simulated programs cut into many segments
and a real archive; each rank's own segments are the one-process segments; and
the invariant the broadcast cuts give: every segment's view on every rank holds
whole channels (no receive without its send, no send left unmatched) and whole
collective instances (every member of the communicator)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from compensate.engine import EngineOptions
from compensate.matching import match
from compensate.model import Events, Trace
from compensate.parallel import segments
from compensate.parallel.ownership import owners
from compensate.platform import Platform
from compensate.simulate import simulate
from tests import pipelines
from tests import pipelines as stream

from ..conftest import REAL_ARCHIVES

SEGMENT, CHUNK = 40, 17


def one_process(trace, platform, opts):
    got: dict[int, list[Events]] = {}
    res = stream.compensate_stream(
        trace.definitions, stream.trace_chunks(trace, CHUNK), platform, opts,
        lambda loc, ev: got.setdefault(loc, []).append(ev), segment_records=SEGMENT)
    return res, {loc: Events.concat(parts) for loc, parts in got.items()}


def assert_same(ref, par) -> None:
    (r1, ev1), (r2, ev2) = ref, par
    assert set(ev1) == set(ev2)
    for loc, ev in ev1.items():
        np.testing.assert_array_equal(ev.time, ev2[loc].time, err_msg=f"location {loc}")
        np.testing.assert_array_equal(ev.size, ev2[loc].size, err_msg=f"location {loc}")
    a, b = r1.stats.to_dict(), r2.stats.to_dict()
    # (flush seconds exact: summed as ticks)
    assert a == b
    assert r1.counts == r2.counts
    assert r1.verification.to_dict() == r2.verification.to_dict()
    assert (r1.segments, r1.largest_segment, r1.records) == \
        (r2.segments, r2.largest_segment, r2.records)
    assert (r1.measured_span, r1.approximated_span) == (r2.measured_span, r2.approximated_span)


@pytest.fixture(scope="module", params=["stencil", "nonblocking", "rma_fence", "hybrid_halo"])
def program(request):
    sim = simulate(request.param, ranks=4 if request.param != "hybrid_halo" else 3,
                   seed=1, iterations=3)
    return sim.measured, sim.platform


@pytest.mark.parametrize("bound", ["lower", "none"])
def test_streamed_ranks_give_the_one_process_streamed_run(program, bound):
    trace, platform = program
    opts = EngineOptions(bound)
    ref = one_process(trace, platform, opts)
    for size in (2, 3):
        assert_same(ref, pipelines.stream_in_threads(trace, platform, opts, size, SEGMENT, CHUNK))
    assert ref[0].segments >= 3  # the case is really cut


def test_a_real_archive_streamed_on_ranks():
    from compensate.formats import read_trace
    trace = read_trace(REAL_ARCHIVES[0])
    opts = EngineOptions("upper")
    ref = one_process(trace, Platform(2e-7), opts)
    assert_same(ref, pipelines.stream_in_threads(trace, Platform(2e-7), opts, 2, SEGMENT, CHUNK))


def test_own_segments_are_the_one_process_segments(program):
    trace, _ = program
    defs = trace.definitions
    cuts = stream.cut_times(defs, stream.trace_chunks(trace, CHUNK), SEGMENT)
    whole = list(stream.segments(defs, stream.trace_chunks(trace, CHUNK), SEGMENT))
    assert [n for _, n in cuts] == [sum(len(ev) for ev in s.values()) for s in whole]
    owner = owners(defs, list(trace.events), 3)
    for r in range(3):
        mine = Trace(defs, {loc: ev for loc, ev in trace.events.items() if owner[loc] == r})
        for seg, ref in zip(stream.own_segments(defs, stream.trace_chunks(mine, 13), cuts),
                            whole, strict=True):
            assert set(seg) == {loc for loc in ref if owner[loc] == r}
            for loc, ev in seg.items():
                np.testing.assert_array_equal(ev.time, ref[loc].time)


def test_every_segment_view_holds_whole_channels_and_collectives(monkeypatch):
    sim = simulate("stencil", ranks=4, seed=2, iterations=3)
    trace = sim.measured
    defs = trace.definitions
    views = []
    real = segments.complete_trimmed

    def spy(d, own, transport, owner, source="", open_calls=False, one_call=False,
            nests=None):
        view, index = real(d, own, transport, owner, source, open_calls, one_call, nests)
        views.append((transport.rank, view, set(own), index))
        return view, index

    monkeypatch.setattr(segments, "complete_trimmed", spy)
    res, _ = pipelines.stream_in_threads(trace, sim.platform, EngineOptions("lower"), 2,
                                        SEGMENT, CHUNK)
    assert res.segments >= 3 and len(views) == 2 * res.segments
    assert sum(len(index) for *_, index in views) >= res.segments  # ghosts were trimmed
    for _, view, own, _index in views:
        m = match(view)  # raises on a receive without its send
        assert m.unmatched_sends == 0
        for inst in m.instances:
            assert len(inst.locs) == len(defs.comms[inst.comm].members)
        # every message with an end on this rank is in the view
        sends = sum(int(np.count_nonzero(view.events[loc].kind == stream.SEND)) for loc in own)
        assert sends == int(np.count_nonzero(np.isin(
            np.asarray(m.table.loc_ids)[m.table.send_li], list(own)))) if len(m.table) else True


def test_a_ranks_segment_graphs_are_freed_without_the_cyclic_collector():
    """The command pauses the cyclic collector: a rank's engine graph (whose rules
    read ghosts, checked by its ``ref``) must hold no reference cycle, or every
    segment's graph would stay until the exit."""
    from compensate.engine.graph import Graph

    sim = simulate("stencil", ranks=4, seed=2, iterations=3)
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        res, _ = pipelines.stream_in_threads(sim.measured, sim.platform,
                                            EngineOptions("lower"), 2, SEGMENT, CHUNK)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        graphs = [o for o in gc.garbage if isinstance(o, Graph)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert res.segments >= 3 and graphs == []


def test_cut_pass_in_smaller_reads_finds_the_same_cuts(program):
    """Rank 0's cut pass reads chunks four times smaller and looks for cuts after
    every fourth: the one-process run's cuts."""
    trace, _ = program
    defs = trace.definitions
    assert stream.cut_times(defs, stream.trace_chunks(trace, 4 * CHUNK), SEGMENT) == \
        stream.cut_times(defs, stream.trace_chunks(trace, CHUNK), SEGMENT, group=4)


def test_the_first_nesting_problem_of_a_later_segment_names_its_record():
    """A Leave without Enter on another rank's location, several segments in: the
    summary's first nesting problem is the one-process run's (its index counts the
    earlier segments' records, which only its owner knows)."""
    from compensate.simulate import default_platform
    from compensate.simulate.programs import Program, compute, enter, leave, recv, send
    from compensate.simulate.simulator import run_program

    ops = []
    for r in range(4):
        mine = []
        for i in range(20):
            mine += [leave("stray")] if (r, i) == (3, 12) else []
            mine += [enter("outer"), compute(2e-6), send((r + 1) % 4, 256, i),
                     recv((r - 1) % 4, i), leave("outer")]
        ops.append(mine)
    plat = default_platform(1e-6)
    trace = run_program(Program("late-stray", ops), plat, quantize=True).measured
    ref = one_process(trace, plat, EngineOptions("lower"))
    assert ref[0].segments >= 3 and ref[0].nesting_first["location"] == 3
    assert ref[0].nesting_first["index"] > SEGMENT // 4  # not in the first segment
    par = pipelines.stream_in_threads(trace, plat, EngineOptions("lower"), 2, SEGMENT, CHUNK)
    assert par[0].nesting_first == ref[0].nesting_first
    assert_same(ref, par)


def one_process_fitted(trace, platform):
    """The one-process streamed ``--bound fitted`` run as the command runs it: the fit
    pass, then the second pass with the fit, cut where the fit pass cut."""
    defs, cuts = trace.definitions, []
    outcome = stream.fit_pass(defs, stream.trace_chunks(trace, CHUNK), platform,
                              trace.source, None, SEGMENT, cuts=cuts)
    opts = pipelines.fitted_options(outcome)
    got: dict[int, list[Events]] = {}
    res = stream.compensate_stream(
        defs, stream.trace_chunks(trace, CHUNK), platform, opts,
        lambda loc, ev: got.setdefault(loc, []).append(ev), segment_records=SEGMENT,
        cuts=cuts)
    return (res, {loc: Events.concat(parts) for loc, parts in got.items()}), outcome


def assert_fitted_same(trace, platform, sizes=(2, 3)):
    ref, outcome = one_process_fitted(trace, platform)
    assert ref[0].segments >= 3  # the case is really cut
    # the one-process fit pass cuts where the cut pass does (the distributed run's
    # segments, in which the ranks observe the transfers); in quarter reads looking
    # for a cut after every fourth (as the command reads), the same
    defs = trace.definitions

    def fit_segments(chunk, group=1):
        cut: list = []
        again = stream.fit_pass(defs, stream.trace_chunks(trace, chunk), platform,
                                trace.source, None, SEGMENT, segments=cut, group=group)
        assert again == outcome
        return cut
    assert fit_segments(CHUNK) == stream.cut_times(defs, stream.trace_chunks(trace, CHUNK),
                                                     SEGMENT)
    assert fit_segments(CHUNK, group=4) == fit_segments(4 * CHUNK)
    for size in sizes:  # the fit reduced across the ranks is the one-process fit
        fit: list = []
        assert_same(ref, pipelines.stream_in_threads(trace, platform, EngineOptions("lower"),
                                                    size, SEGMENT, CHUNK, fit=fit))
        assert fit == [outcome]
    return ref, outcome


def sync_ring():
    """Four ranks in a ring, eager and synchronous sends of three sizes in turn
    inside a traced call, uneven work: simple locations (trimmed ghosts), a linear
    fit, receives modelled by it (m.2) and synchronous sends."""
    from compensate.simulate import default_platform
    from compensate.simulate.programs import Program, compute, enter, leave, recv, send, ssend
    from compensate.simulate.simulator import run_program

    ops = []
    for r in range(4):
        mine = []
        for i in range(8):
            s = (ssend if i % 2 else send)((r + 1) % 4, (256, 8192, 131072)[i % 3], i)
            mine += [enter("step"), compute((1 + (r * 7 + i * 3) % 5) * 2e-5)]
            mine += [s, recv((r - 1) % 4, i)] if r % 2 == 0 else [recv((r - 1) % 4, i), s]
            mine += [leave("step")]
        ops.append(mine)
    plat = default_platform(1e-6)
    return run_program(Program("sync-ring", ops), plat, quantize=True).measured, plat


@pytest.mark.parametrize("name", ["stencil", "sync_ring"])
def test_fitted_streamed_ranks_give_the_one_process_fitted_run(name, monkeypatch):
    """``--bound fitted`` on ranks: the fit reduced across the ranks is the
    one-process fit; the segments run with it equal the one-process streamed
    fitted run. On
    the ring (trimmed ghosts) the fitted rules read the observed transfer of a
    message sent from another rank; the short stencil observes 7 transfers, too
    few: the lower bound with fitted links, as in one process."""
    if name == "stencil":
        sim = simulate(name, ranks=4, seed=1, iterations=3)
        trace, platform = sim.measured, sim.platform
    else:
        trace, platform = sync_ring()
    trimmed = []
    real = segments.complete_trimmed

    def spy(*args, **kw):
        view, index = real(*args, **kw)
        trimmed.append(len(index))
        return view, index

    monkeypatch.setattr(segments, "complete_trimmed", spy)
    ref, outcome = assert_fitted_same(trace, platform)
    assert sum(trimmed) > 0  # the ghosts were trimmed
    cases = ref[0].stats.p2p_cases
    if name == "sync_ring":
        assert outcome.fit is not None and outcome.fit.model == "linear"
        assert cases["m2_fitted"] > 0 and cases["synchronous"] > 0
    else:
        assert outcome.fit is None and cases["m2_lower"] > 0


def test_fitted_real_archive_streamed_on_ranks():
    from compensate.formats import read_trace
    _, outcome = assert_fitted_same(read_trace(REAL_ARCHIVES[0]), Platform(2e-7), sizes=(2,))
    assert outcome.fit is not None


def test_cold_curves_on_ranks_give_the_one_process_run(program):
    """A cold-call curve on every location (Platform.cold_charge, issue #22):
    P ranks give the one-process streamed run, which the curve changes."""
    import dataclasses  # noqa: PLC0415

    trace, platform = program
    res = float(trace.definitions.timer_resolution)
    curve = ([0.0, 400 / res, 3000 / res], {r: [0.0, 150 / res, 500 / res]
                                            for r in trace.definitions.regions})
    # half the simulated overhead: R1 leaves the gaps before the Enters positive
    warm_platform = dataclasses.replace(platform, event_overhead=platform.event_overhead / 2)
    cold = dataclasses.replace(warm_platform, cold={loc: curve for loc in trace.events})
    opts = EngineOptions("lower")
    ref = one_process(trace, cold, opts)
    for size in (2, 3):
        assert_same(ref, pipelines.stream_in_threads(trace, cold, opts, size, SEGMENT, CHUNK))
    warm = one_process(trace, warm_platform, opts)
    assert any((ev.time != warm[1][loc].time).any() for loc, ev in ref[1].items())


def test_a_flush_in_a_segments_context_is_counted_once():
    """A BufferFlush that is the last record of a location in one segment is in
    front of the next as its context: its seconds count once, as in one process
    (the ranks used to add them again: 0.25 ms against 0.2 on this program)."""
    sim = simulate("imbalanced", ranks=4, seed=1)
    trace, platform = sim.measured, sim.platform
    opts = EngineOptions("lower")
    got: dict[int, list[Events]] = {}
    res = stream.compensate_stream(
        trace.definitions, stream.trace_chunks(trace, 16), platform, opts,
        lambda loc, ev: got.setdefault(loc, []).append(ev), segment_records=150)
    ref = res, {loc: Events.concat(parts) for loc, parts in got.items()}
    assert res.stats.buffer_flushes == 4 and res.segments >= 3
    par = pipelines.stream_in_threads(trace, platform, opts, 2, 150, 16)
    assert par[0].stats.flush_seconds_removed == res.stats.flush_seconds_removed
    assert_same(ref, par)


def test_a_synchronize_after_a_cut_keeps_its_device_link_on_ranks():
    """The carried device activity (tests/engine/test_stream.py) on ranks: the
    one-process streamed run's output and counts at P = 2."""
    sim = simulate("gpu", ranks=2, seed=0, overhead=5e-6)
    opts = EngineOptions("lower")
    ref = one_process(sim.measured, sim.platform, opts)
    assert ref[0].counts["devices"]["synchronize"] > 0 and ref[0].segments >= 3
    assert_same(ref, pipelines.stream_in_threads(sim.measured, sim.platform, opts, 2,
                                                SEGMENT, CHUNK))
