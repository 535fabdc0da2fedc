"""The harder simulated world (compensate/simulate/world.py, issue #41): a network
that is not the fit's own model, clocks offset between ranks; the fitted bound
still removes >= 97 % of the dilation there and never less than the lower bound."""

import numpy as np
import pytest

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import Observations, outcome_of, try_fit
from compensate.matching import match
from compensate.simulate import Network, simulate
from compensate.simulate.validation import accuracy, evaluate
from compensate.simulate.world import WORLDS, shift_clocks, simulate_in


def test_the_rendezvous_switch_and_the_contended_link():
    net = Network(switch=4096, rendezvous=2e-6, bandwidth2=2.5e9)
    assert net.time(4096) == pytest.approx(1e-6 + 4096 / 5e9)
    assert net.time(4097) == pytest.approx(3e-6 + 4097 / 2.5e9)
    a, b = (Network(contention=0.5, contended=3.0, seed=2) for _ in range(2))
    times = [a.time(0) for _ in range(200)]
    assert times == [b.time(0) for _ in range(200)]  # the same draws in call order
    assert set(np.round(np.array(times) * 1e6, 9)) == {1.0, 3.0}


def test_clock_offsets_shift_every_record_of_a_rank():
    sim = simulate("stencil", ranks=4, overhead=1e-6, quantize=True)
    shifted = shift_clocks(sim.measured, (0.0, 1e-6, -2e-6))
    for loc, ev in sim.measured.events.items():
        d = [0, 1000, -2000][sim.measured.definitions.locations[loc].group % 3]
        assert (shifted.events[loc].time - ev.time == d).all()


def test_a_protocol_switch_gives_two_lines():
    sizes = np.repeat([64, 1024, 4096, 8192, 65536, 262144], 12)
    seconds = np.array([Network(switch=4096, rendezvous=3e-6).time(int(s)) for s in sizes])
    fit = outcome_of(Observations(sizes, seconds)).fit
    assert fit.model == "piecewise" and fit.threshold == 4096
    assert fit.latency == pytest.approx(1e-6, rel=1e-3)
    assert fit.latency2 == pytest.approx(4e-6, rel=1e-3)
    assert fit(262144) == pytest.approx(4e-6 + 262144 / 5e9, rel=1e-6)


@pytest.mark.parametrize("world, program", [("jitter", "stencil"), ("protocol", "mixed"),
                                            ("contended", "mixed"), ("skewed", "stencil")])
def test_fitted_removes_97_percent_in_a_harder_world(world, program):
    assert world in WORLDS
    sim = simulate_in(world, program, ranks=8, overhead=1e-6, seed=0, quantize=True)
    lower = evaluate(sim.truth, sim.measured, sim.platform)["lower"]
    m = match(sim.measured)
    out = try_fit(sim.measured, m, sim.platform)
    assert out.fit is not None and out.rejected is None
    r = compensate(sim.measured, sim.platform,
                   EngineOptions("fitted", network_time=out.fit, link_latency=out.links), m)
    got = accuracy(sim.truth, sim.measured, r.trace)
    assert got.violations == 0
    assert got.removed_total >= 0.97
    assert got.removed_total >= lower.removed_total - 1e-3
