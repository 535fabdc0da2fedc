"""compensate.engine.native (issue #18): the engine's C loop gives the same anchor
values, bit for bit, and the same case counts as the Python loop it replaces (R2
by compensate.engine.receive.receive_time, of which loop.c's fast_value is the C
twin), under every bound, on simulated programs and a real archive, whether it
schedules the one-process run or evaluates runs of receives for the Python loop
(the distributed run's configuration); it is built on first use and, when it
cannot be, the Python loop runs and says so once on stderr."""

from __future__ import annotations

import numpy as np
import pytest

from compensate.engine import EngineOptions, native
from compensate.engine import run as engine_run
from compensate.engine.fit import fit_network
from compensate.engine.run import approximate
from compensate.matching import match
from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OPS,
    ENTER,
    LEAVE,
    RECV,
    SEND,
    Comm,
    Definitions,
    Location,
    Trace,
    TraceError,
)
from compensate.platform import Platform
from compensate.simulate import Network, simulate
from tests.rowbuilder import RowBuilder

from ..conftest import REAL_ARCHIVES, read_bundled
from ..test_performance_paths import _cycle_trace

# programs whose records take every path of the loop: inline receives (m.1, m.2,
# clamped under fitted), generic anchors (collectives, wait/test, probes, partitioned,
# sendrecv), locations parking on sends and on generic anchors' needs; montecarlo
# (seed 9) has m.1 receives decided by the receiver under the fitted bound
# (m1_a2)
PROGRAMS = ["mixed", "stencil", "collectives", "nonblocking", "sendrecv_ring", "mprobe",
            "partitioned", "flush_in_calls", "ring", "montecarlo"]


@pytest.fixture(scope="module")
def cases():
    """(name, trace, platform, matching, fitted network time) of small jittery runs
    and one real archive."""
    out = []
    for i, name in enumerate(PROGRAMS):
        sim = simulate(name, ranks=4, iterations=6, overhead=1e-6, quantize=True,
                       network=Network(jitter=2e-6, seed=i))
        m = match(sim.measured)
        out.append((name, sim.measured, sim.platform, m,
                    fit_network(sim.measured, m, sim.platform)))
    if REAL_ARCHIVES[0].exists():
        trace = read_bundled(REAL_ARCHIVES[0])
        m = match(trace)
        platform = Platform(event_overhead=2e-7)
        out.append(("ping-pong-otf2", trace, platform, m, fit_network(trace, m, platform)))
    return out


def _options(bound: str, network) -> EngineOptions:
    return EngineOptions(bound, network_time=network if bound == "fitted" else None)


def _python_loop(monkeypatch, *args):
    """approximate() with the engine's Python loop (no C loop)."""
    with monkeypatch.context() as mp:
        mp.setattr(engine_run, "fast_loop", lambda *a: None)
        return approximate(*args)


def _python_loop_with_c_runs(monkeypatch, *args):
    """approximate() with Python's scheduling and runs of inline receives handed to
    the C loop (cmp_run_fast)."""
    def scheduled(self, fast, A, cur, a_end, runnable, wanted):
        self._python_loop(A, cur, {}, fast, runnable)

    with monkeypatch.context() as mp:
        mp.setattr(engine_run._Engine, "_scheduled", scheduled)
        return approximate(*args)


def _bits(times: dict[int, np.ndarray]) -> dict[int, list[int]]:
    return {loc: np.asarray(t, dtype=np.float64).view(np.int64).tolist()
            for loc, t in times.items()}


@pytest.mark.parametrize("bound", ["lower", "upper", "fitted"])
def test_the_c_loop_computes_what_the_python_loop_computes(cases, monkeypatch, bound):
    if not native.available():
        pytest.skip("no C compiler: the C loop cannot be built here")
    used = []
    real_fast_loop = engine_run.fast_loop
    monkeypatch.setattr(engine_run, "fast_loop", lambda *a: used.append(1) or real_fast_loop(*a))
    seen = dict.fromkeys(["m1_a1", "m1_a2", f"m2_{bound}"]
                         + (["m2_fitted_clamped"] if bound == "fitted" else []), 0)
    runs = 0
    for name, trace, platform, m, network in cases:
        if bound == "fitted" and network is None:  # too few transfers to fit
            continue
        runs += 1
        args = (trace, platform, _options(bound, network), m)
        c_times, t0, c_stats = approximate(*args)
        py_times, py_t0, py_stats = _python_loop(monkeypatch, *args)
        assert t0 == py_t0
        assert _bits(c_times) == _bits(py_times), name
        assert c_stats.to_dict() == py_stats.to_dict(), name
        mixed_times, _, mixed_stats = _python_loop_with_c_runs(monkeypatch, *args)
        assert _bits(mixed_times) == _bits(py_times), name
        assert mixed_stats.to_dict() == py_stats.to_dict(), name
        for key in seen:
            seen[key] += c_stats.p2p_cases[key]
    assert len(used) == 2 * runs and runs >= 5  # the C loop ran in both configurations
    # every time (each fitted where it fits)
    assert all(seen.values()), seen  # every branch of the inline receive was taken


def _barrier_cycle() -> Trace:
    """Location 0 passes a barrier, then sends; location 1 receives that message
    before it enters the barrier: the barrier's end on 0 can never be computed."""
    rows = [RowBuilder(), RowBuilder()]
    rows[0].add(10, ENTER, region=0)
    rows[0].add(20, COLL_BEGIN)
    rows[0].add(30, COLL_END, comm=0, size=0, size_recv=0, op=COLLECTIVE_OPS["BARRIER"])
    rows[0].add(40, LEAVE, region=0)
    rows[0].add(50, ENTER, region=1)
    rows[0].add(60, SEND, peer=1, comm=0, tag=0, size=8)
    rows[0].add(70, LEAVE, region=1)
    rows[1].add(10, ENTER, region=2)
    rows[1].add(20, RECV, peer=0, comm=0, tag=0, size=8)
    rows[1].add(30, LEAVE, region=2)
    rows[1].add(40, ENTER, region=0)
    rows[1].add(50, COLL_BEGIN)
    rows[1].add(60, COLL_END, comm=0, size=0, size_recv=0, op=COLLECTIVE_OPS["BARRIER"])
    rows[1].add(70, LEAVE, region=0)
    defs = Definitions(timer_resolution=10**9,
                       locations={i: Location(i, f"rank {i}", i) for i in (0, 1)},
                       regions={0: "MPI_Barrier", 1: "MPI_Send", 2: "MPI_Recv"},
                       comms={0: Comm(0, "MPI_COMM_WORLD", (0, 1))})
    return Trace(defs, {i: b.build() for i, b in enumerate(rows)}, "<cycle>")


@pytest.mark.parametrize("trace", [_cycle_trace, _barrier_cycle])
def test_a_cycle_is_named_the_same_by_both_loops(monkeypatch, trace):
    """Locations left parked (on a send, or on a value a collective needs): the
    same one-line error, naming the first of them."""
    args = (trace(), Platform(0.0), EngineOptions(), match(trace()))
    with pytest.raises(TraceError) as c_err:
        approximate(*args)
    with pytest.raises(TraceError) as py_err:
        _python_loop(monkeypatch, *args)
    assert str(c_err.value) == str(py_err.value)
    assert "form a cycle" in str(c_err.value)


@pytest.mark.parametrize("cc", ["false", "/nonexistent/cc"])
def test_without_a_compiler_the_python_loop_runs_and_says_so_once(
        cases, monkeypatch, tmp_path, capfd, cc):
    _, trace, platform, m, _ = cases[0]
    expected = _bits(_python_loop(monkeypatch, trace, platform, EngineOptions(), m)[0])
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("COMPENSATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", cc)
    for _ in range(2):
        assert _bits(approximate(trace, platform, EngineOptions(), m)[0]) == expected
    err = capfd.readouterr().err
    assert err.count("the engine's C loop is not available") == 1, err
    assert err.count("\n") == 1, err
    assert not native.available() and not list((tmp_path / "cache").glob("*.so"))


def test_the_switch_turns_the_c_loop_off_silently(monkeypatch, capfd):
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    assert native.fast_loop(None, None, False) is None and not native.available()
    assert capfd.readouterr().err == ""
