"""Property: any small simulated program, any bound, any number of ranks (idle
ones included): the distributed run's output is the one-process output."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import BOUNDS
from compensate.simulate import simulate
from compensate.simulate.hybrid import HYBRID_PROGRAMS
from compensate.simulate.programs import PROGRAMS
from tests.pipelines import run_in_threads, run_pipeline

from .test_driver import assert_same

NAMES = sorted(PROGRAMS) + sorted(HYBRID_PROGRAMS)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NAMES), st.integers(2, 4), st.integers(0, 10**6),
       st.sampled_from(BOUNDS), st.integers(1, 5))
def test_any_program_any_ranks_same_output(name, ranks, seed, bound, size):
    sim = simulate(name, ranks=ranks, seed=seed, iterations=1)
    one = run_pipeline(sim.measured, sim.platform, bound, "uniform", None)
    assert_same(one, run_in_threads(sim.measured, sim.platform, bound, size))
