"""R10 against ground truth (compensate/simulate/rma.py and the RMA programs of
compensate/simulate/programs.py): the simulated fence halo exchange and PSCW
neighbour exchange recover the truth with the fitted bound, every RMA program keeps
its synchronisation rules, and the simulator's records are what matching expects."""

import pytest

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import fit_network
from compensate.matching import match
from compensate.simulate import simulate
from compensate.simulate.validation import accuracy

RUNS = {"rma_fence": dict(iterations=12), "rma_pscw": dict(iterations=16),
        "rma_lock_counter": dict(iterations=12)}


@pytest.fixture(scope="module")
def results():
    out = {}
    for name, kw in RUNS.items():
        sim = simulate(name, ranks=4, overhead=1e-6, quantize=True, **kw)
        m = match(sim.measured)
        fit = fit_network(sim.measured, m, sim.platform)
        acc = {}
        for bound in ("lower", "upper", "fitted"):
            opts = EngineOptions(bound, network_time=fit) if bound == "fitted" and fit else \
                EngineOptions("lower" if bound == "fitted" else bound)
            r = compensate(sim.measured, sim.platform, opts, m)
            acc[bound] = accuracy(sim.truth, sim.measured, r.trace)
        out[name] = (sim, m, fit, acc)
    return out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_no_violations(results, name):
    _, _, _, acc = results[name]
    assert all(a.violations == 0 for a in acc.values())


@pytest.mark.parametrize("name", ["rma_fence", "rma_pscw"])
def test_fitted_removes_99_percent(results, name):
    """The large halos' transfers (and PSCW's notifications) show the network; the fit
    times the small halos hidden behind the synchronisation."""
    _, _, fit, acc = results[name]
    assert fit is not None
    assert acc["fitted"].removed_total >= 0.99
    assert acc["lower"].removed_total < acc["fitted"].removed_total


@pytest.mark.xfail(strict=True, reason="the fetch-and-op round trips inside MPI_Win_unlock "
                   "overlap the tracer's overhead: without the platform's network model "
                   "and rma entry no bound sees them (docs/accuracy.md, issue 19)")
def test_lock_counter_removes_99_percent(results):
    _, _, _, acc = results["rma_lock_counter"]
    assert max(a.removed_total for a in acc.values()) >= 0.99


def test_lock_counter_better_bound_removes_most(results):
    _, _, _, acc = results["rma_lock_counter"]
    assert max(a.removed_total for a in acc.values()) >= 0.75


def test_programs_contain_their_kinds(results):
    counts = {name: results[name][1].counts()["rma"] for name in RUNS}
    assert counts["rma_fence"]["fence"] == 13 and counts["rma_fence"]["transfer"] > 0
    assert counts["rma_pscw"]["post"] > 0 and counts["rma_pscw"]["complete"] > 0
    assert counts["rma_lock_counter"]["lock"] > 0
    assert counts["rma_lock_counter"]["completion"] > 0
    assert all(c["unmatched"] == 0 for c in counts.values())
