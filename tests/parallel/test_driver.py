"""The distributed pipeline (compensate/parallel/driver.py) on thread ranks: every
record's time, the statistics and the verification equal the one-process run's,
on every simulated program and bound and with more ranks than processes (idle
ranks); the bundled real archives: tests/parallel/test_ghosts.py."""

from __future__ import annotations

import numpy as np
import pytest

from compensate.engine import BOUNDS
from compensate.platform import Platform
from compensate.simulate import simulate
from compensate.simulate.hybrid import HYBRID_PROGRAMS
from compensate.simulate.programs import PROGRAMS
from tests.pipelines import run_pipeline

from ..conftest import TRACES

BUNDLED = sorted(p / "traces.otf2" for p in TRACES.iterdir()
                 if (p / "traces.otf2").exists()) if TRACES.exists() else []


def assert_same(one, par) -> None:
    """Two pipeline results (result, matching, fit outcome, verification): the same
    times record for record, the same statistics and the same verification."""
    r1, r2 = one[0], par[0]
    assert list(r1.trace.events) == list(r2.trace.events)
    for loc, ev in r1.trace.events.items():
        np.testing.assert_array_equal(ev.time, r2.trace.events[loc].time, err_msg=f"loc {loc}")
        np.testing.assert_array_equal(ev.size, r2.trace.events[loc].size)
    assert r1.stats.to_dict() == r2.stats.to_dict()
    assert one[3].to_dict() == par[3].to_dict()
    assert one[1].counts() == par[1].counts()  # (summed over trimmed views)
    assert one[1].nesting_summary() == par[1].nesting_summary()
    assert (one[2] is None) == (par[2] is None)
    if one[2] is not None:
        assert one[2].fit == par[2].fit


def parallel(trace, platform, bound, size):
    from tests.pipelines import run_in_threads
    return run_in_threads(trace, platform, bound, size)


@pytest.fixture(scope="module", params=sorted(PROGRAMS) + sorted(HYBRID_PROGRAMS))
def program(request):
    sim = simulate(request.param, ranks=3, seed=5, iterations=1)
    return sim.measured, sim.platform


def test_simulated_programs_every_bound(program):
    trace, platform = program
    for bound in BOUNDS:
        one = run_pipeline(trace, platform, bound, "uniform", None)
        for size in (2, 3):
            assert_same(one, parallel(trace, platform, bound, size))


def test_more_ranks_than_processes_and_per_process_exits():
    sim = simulate("collectives", ranks=2, seed=1, iterations=2)
    one = run_pipeline(sim.measured, sim.platform, "upper", "per-process", None)
    from tests.pipelines import run_in_threads
    assert_same(one, run_in_threads(sim.measured, sim.platform, "upper", 5,
                                    collective_exit="per-process"))


def test_flushes_and_overcompensation_are_reduced_exactly():
    """Statistics each rank counts for its own locations (BufferFlush seconds, a
    float sum; overcompensated records by kind and the largest shortfall) are the
    one-process numbers."""
    sim = simulate("stencil", ranks=4, seed=2, iterations=2, flush_every=7)
    plat = Platform(3e-6, {"Leave": 2e-5}, sim.platform.copy_bytes,
                    sim.platform.copy_seconds)
    one = run_pipeline(sim.measured, plat, "lower", "uniform", None)
    s = one[0].stats
    assert s.buffer_flushes > 0 and s.flush_seconds_removed > 0 and s.overcompensated > 0
    assert_same(one, parallel(sim.measured, plat, "lower", 3))


def test_a_failing_rank_stops_every_rank(monkeypatch):
    """A rank that fails inside the replay tells the others in their round: every
    rank raises (the failing one its own error, the others RankFailed with its
    line), nobody waits forever."""
    from compensate.parallel import driver
    from compensate.pipeline import RunOptions
    from compensate.pipeline import segment as segment_step
    from tests.threadranks import run_threads

    sim = simulate("ring", ranks=3, seed=1, iterations=2)
    real = segment_step.approximate
    seen = {}

    def approximate(trace, platform, opts, matching, progress=None, **kw):
        if kw["exchange"].transport.rank == 1:
            raise RuntimeError("boom on rank 1")
        return real(trace, platform, opts, matching, progress, **kw)

    monkeypatch.setattr(segment_step, "approximate", approximate)

    def body(t):
        try:
            driver.run_rank(sim.measured, sim.platform, RunOptions("lower"), t)
        except Exception as exc:  # noqa: BLE001 - what each rank saw
            seen[t.rank] = exc
        return None

    run_threads(3, body)
    assert isinstance(seen[1], RuntimeError)
    for r in (0, 2):
        assert isinstance(seen[r], driver.RankFailed)
        assert seen[r].rank == 1 and seen[r].status == 1
        assert "boom on rank 1" in seen[r].line


def test_flushes_inside_calls_same_as_one_process():
    """R6 extended reads other locations' flushes inside calls (R3's latest joining,
    an implied message's sender): a location with a BufferFlush is never trimmed,
    so every rank sees them (4 ranks, 8 iterations: two Allreduces with a flush)."""
    sim = simulate("flush_in_calls", ranks=4, seed=5, iterations=8)
    for bound in ("lower", "upper"):
        one = run_pipeline(sim.measured, sim.platform, bound, "uniform", None)
        assert_same(one, parallel(sim.measured, sim.platform, bound, 3))


def test_no_engine_graph_outlives_the_replay():
    """The command pauses the cyclic collector (compensate.gcpause); the engine's
    graph and its rules' closures refer to each other, so a rank collects them
    after the replay instead of holding them through verification and writing."""
    import gc

    from compensate.engine.graph import Graph
    from tests.pipelines import run_in_threads

    sim = simulate("stencil", ranks=4, seed=1, iterations=2)
    gc.unfreeze()  # tests/conftest.py freezes survivors between modules: see them all
    was = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        run_in_threads(sim.measured, sim.platform, "lower", 2)
        assert not [o for o in gc.get_objects() if isinstance(o, Graph)]
    finally:
        if was:
            gc.enable()
