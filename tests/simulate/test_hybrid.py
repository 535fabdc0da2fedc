"""The hybrid programs (compensate/simulate/hybrid.py) against ground truth (issue 17):
identical records in both runs, every thread and device dependency matched, the
truth itself free of happened-before violations, and the compensated trace removing
at least 99 % of the dilation (the better of lower, upper and fitted) with none."""

from __future__ import annotations

import pytest

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import fit_network
from compensate.matching import match
from compensate.simulate import simulate
from compensate.simulate.hybrid import HYBRID_PROGRAMS, HYBRID_RANKS
from compensate.simulate.validation import accuracy
from compensate.verify import verify

from .test_simulator import assert_same_records

OVERHEADS = [2e-7, 1e-6, 5e-6]
SIZES = {"omp_loop": {"iterations": 12}, "hybrid_halo": {"iterations": 10},
         "pthreads": {"iterations": 12}, "gpu": {"iterations": 15},
         # threads begin and end in creation order: EZTrace's create/join statistic is
         # exact (out of order: tests/simulate/test_threads.py)
         "ez_pthreads": {"iterations": 12, "out_of_order": False},
         "gpu_tail": {"iterations": 20}}


@pytest.fixture(scope="module")
def runs() -> dict:
    return {(name, o): simulate(name, ranks=HYBRID_RANKS[name], overhead=o, quantize=True,
                                **SIZES[name])
            for name in HYBRID_PROGRAMS for o in OVERHEADS}


def best_removed(sim) -> tuple[float, int]:
    """The best removed fraction of lower, upper and fitted (as the command runs it:
    where there is no network to fit, the lower bound with R8/R9's fitted link
    latency), and their violations in total."""
    m = match(sim.measured)
    fit = fit_network(sim.measured, m, sim.platform)
    opts = [EngineOptions("lower"), EngineOptions("upper"),
            EngineOptions("fitted", network_time=fit) if fit
            else EngineOptions("lower", fit_links=True)]
    acc = [accuracy(sim.truth, sim.measured, compensate(sim.measured, sim.platform, o, m).trace)
           for o in opts]
    return max(a.removed_total for a in acc), sum(a.violations for a in acc)


@pytest.mark.parametrize("name", sorted(HYBRID_PROGRAMS))
def test_records_and_dependencies(runs, name):
    sim = runs[(name, 1e-6)]
    assert_same_records(sim.truth, sim.measured)
    assert sim.info["span_measured"] > sim.info["span_truth"]
    m = match(sim.truth)
    counts = {**m.threads.counts(), **{f"dev_{k}": v for k, v in m.devices.counts().items()}}
    assert counts["unmatched"] == 0 and counts["dev_unmatched"] == 0
    assert verify(sim.truth, m).ok and verify(sim.measured, match(sim.measured)).ok
    expect = {"omp_loop": ("fork", "join", "lock", "barrier"),
              "hybrid_halo": ("fork", "join", "lock", "barrier"),
              "pthreads": ("create", "end", "lock"), "gpu": ("dev_launch", "dev_synchronize"),
              "ez_pthreads": ("create", "end", "lock", "barrier"),
              "gpu_tail": ("dev_launch", "dev_synchronize")}
    assert all(counts[k] > 0 for k in expect[name]), counts


@pytest.mark.parametrize("overhead", OVERHEADS)
@pytest.mark.parametrize("name", sorted(HYBRID_PROGRAMS))
def test_dilation_removed(runs, name, overhead):
    removed, violations = best_removed(runs[(name, overhead)])
    assert violations == 0
    assert removed >= 0.99


@pytest.mark.parametrize("name", sorted(HYBRID_PROGRAMS))
def test_zero_overhead_is_truth(name):
    """Without overhead both runs are the same run: same lock order, same times."""
    sim = simulate(name, ranks=HYBRID_RANKS[name], overhead=0.0, iterations=4)
    for loc, ev in sim.truth.events.items():
        assert ev.time.tolist() == sim.measured.events[loc].time.tolist()
    assert_same_records(sim.truth, sim.measured)


@pytest.mark.parametrize("name", ["omp_loop", "pthreads"])
def test_implied_locks_were_free_in_the_truth(runs, name):
    """A lock link the other thread edges order (compensate/matching/lock_order.py,
    marked on the measured trace) was free when its next holder asked for it in the
    untraced run: the record before the acquisition is not before the release. With
    those links timed as an ordering only, the upper bound removes the dilation too."""
    sim = runs[(name, 1e-6)]
    m = match(sim.measured)
    implied = [s for s in m.threads.syncs if s.kind == "lock" and s.implied]
    assert implied
    t = sim.truth.events
    for s in implied:
        (loc, i), (r_loc, r) = s.recv, s.sends[0]
        assert t[loc].time[i - 1] >= t[r_loc].time[r]
    out = compensate(sim.measured, sim.platform, EngineOptions("upper"), m).trace
    acc = accuracy(sim.truth, sim.measured, out)
    assert acc.violations == 0 and acc.removed_total >= 0.99
