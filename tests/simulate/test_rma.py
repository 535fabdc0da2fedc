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


def _unlock_and_fetch_durations(target: int) -> tuple[float, float]:
    """Rank 1 fetches on ``target``'s window under an exclusive lock, no overhead,
    1 us latency: the truth's MPI_Fetch_and_op and MPI_Win_unlock durations."""
    from compensate.model import ENTER, LEAVE
    from compensate.simulate import programs as P
    from compensate.simulate.simulator import Network, default_platform, run_program

    ops = [[P.win_create()], [P.win_create(), P.win_lock(target, True, 0),
                              P.rma_fetch_add(target), P.win_unlock(target)]]
    for r in range(2):
        ops[r] += [P.win_fence(), P.win_free()]
    sim = run_program(P.Program("self_fetch", ops, {}), default_platform(0.0),
                      network=Network(latency=1e-6), quantize=True)
    tr = sim.truth
    names = tr.definitions.regions
    ev = tr.events[tr.definitions.comms[0].members[1]]
    spans, opened = {}, {}
    for i in range(len(ev)):
        name = names.get(int(ev.region[i]))
        if int(ev.kind[i]) == ENTER:
            opened[name] = ev.time[i]
        elif int(ev.kind[i]) == LEAVE and name in ("MPI_Fetch_and_op", "MPI_Win_unlock"):
            spans[name] = (ev.time[i] - opened[name]) / tr.definitions.timer_resolution
    return spans["MPI_Fetch_and_op"], spans["MPI_Win_unlock"]


def test_operations_on_own_window_take_no_network():
    """Hand case of the simulator's self path (MPICH's, measured: the fetch is a local
    atomic, the lock's release and its acknowledgement are still messages to itself;
    docs/accuracy.md, issue 19). Ticks of 1 ns: copy(8) = 1 ns, net(0) = 1 us,
    net(8) = 1 us + 8 B / 5 GB/s = 1.002 us. Rank 1's unlock after a fetch on its own
    window: the result's copy out (1 ns), the release to itself and its
    acknowledgement (2 us). On rank 0's window the fetch's remaining round trip comes
    first: net(8) + copy + copy + net(8) + copy = 2.007 us, then the release's 2 us."""
    call, own = _unlock_and_fetch_durations(1)
    _, other = _unlock_and_fetch_durations(0)
    assert call == pytest.approx(1e-9, abs=1e-13)
    assert own == pytest.approx(2.001e-6, abs=1e-13)
    assert other == pytest.approx(4.007e-6, abs=1e-13)
