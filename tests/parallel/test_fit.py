"""The network fit reduced across ranks (compensate/parallel/fit.py): each rank's
observations of the transfers whose receive it owns, on its trimmed view, are the
one-process observations split by receiver, and the reduced fit is the one-process
fit bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine.fit import (
    MIN_OBSERVATIONS,
    Observations,
    observe_transfers,
    outcome_of,
    try_fit,
)
from compensate.matching import match
from compensate.parallel.driver import RankFailed, agreed
from compensate.parallel.fit import reduced_outcome
from compensate.parallel.ghosts import complete_trimmed
from compensate.parallel.ownership import owners
from compensate.platform import Platform
from compensate.simulate import simulate
from compensate.simulate.hybrid import HYBRID_PROGRAMS
from compensate.simulate.programs import PROGRAMS
from tests.threadranks import run_threads

from ..randomtrace import random_trace

NAMES = sorted(PROGRAMS) + sorted(HYBRID_PROGRAMS)


def pairs(obs: Observations) -> list[tuple[int, float]]:
    """The observations as a sorted list of (bytes, seconds): their multiset."""
    return sorted(zip(obs.sizes.tolist(), obs.seconds.tolist(), strict=True))


def counts(obs: Observations) -> tuple[int, int, int]:
    return obs.p2p, obs.collective, obs.rma


def test_hand_computed_reduction_fits_what_no_rank_could_alone():
    """Two ranks with 6 observations each, fewer than MIN_OBSERVATIONS (10) apiece:
    neither could fit alone, the reduced fit is the fit of all 12. Every transfer
    takes 1 us + 1 ns per byte, so the line through them is exact: latency 1e-6 s,
    per_byte 1e-9 s (hand-computed), on every rank."""
    sizes = np.array([0, 1000, 2000, 3000, 4000, 5000, 500, 1500, 2500, 3500, 4500, 5500])
    seconds = 1e-6 + sizes * 1e-9
    share = [Observations(sizes[:6], seconds[:6], p2p=6),
             Observations(sizes[6:], seconds[6:], collective=6)]
    assert all(outcome_of(s).fit is None for s in share)
    assert 6 < MIN_OBSERVATIONS <= 12
    got = run_threads(2, lambda t: reduced_outcome(t, share[t.rank], Platform(0.0)))
    assert got[0] == got[1]
    fit = got[0].fit
    assert got[0].observations == 12
    assert fit.model == "linear" and fit.observations == 12
    assert fit.latency == pytest.approx(1e-6, rel=1e-6)
    assert fit.per_byte == pytest.approx(1e-9, rel=1e-6)
    whole = Observations.concat(share)
    assert (whole.p2p, whole.collective) == (6, 6)
    assert got[0] == outcome_of(whole)


def test_a_failing_fit_raises_on_every_rank(monkeypatch):
    """Rank 0's fit fails: every rank hears of it (the others as RankFailed), none
    waits for an outcome that never comes."""
    import compensate.parallel.fit as pfit

    def broken(*args, **kw):
        raise RuntimeError("no fit today")

    monkeypatch.setattr(pfit, "outcome_of", broken)
    empty = Observations.concat([])

    def body(t):
        try:
            reduced_outcome(t, empty, Platform(0.0),
                            lambda f, *a: agreed(t, f, *a))
        except RankFailed:
            return "told"
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert run_threads(2, body) == ["no fit today", "told"]


def rank_views(trace, platform, size):
    """Each thread rank's (own observations on its trimmed view, reduced outcome)."""
    def body(t):
        owner = owners(trace.definitions, list(trace.events), t.size)
        own = {loc: ev for loc, ev in trace.events.items() if owner[loc] == t.rank}
        view, _ = complete_trimmed(trace.definitions, own, t, owner, trace.source)
        obs = observe_transfers(view, match(view), platform, set(own))
        return obs, reduced_outcome(t, obs, platform)

    return run_threads(size, body)


@pytest.mark.parametrize("name", NAMES)
def test_ranks_observe_the_one_process_transfers_split_by_receiver(name):
    """Every simulated program at P = 2 and 3: the ranks' observations on their
    trimmed views, together, are the one-process observations (the same transfers,
    the same seconds, each once), and every rank's reduced outcome is the
    one-process outcome."""
    sim = simulate(name, ranks=3, seed=2, iterations=2)
    trace = sim.measured
    whole = observe_transfers(trace, match(trace), sim.platform)
    one = try_fit(trace, match(trace), sim.platform)
    for size in (2, 3):
        got = rank_views(trace, sim.platform, size)
        joined = Observations.concat([obs for obs, _ in got])
        assert pairs(joined) == pairs(whole), (name, size)
        assert counts(joined) == counts(whole)
        assert all(outcome == one for _, outcome in got)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(2, 5), st.integers(5, 40), st.booleans())
def test_any_split_by_receiver_partitions_the_observations(data, n_locs, steps, extended):
    """Property: a random valid trace, any assignment of locations to parts: the
    observations of each part's receivers are disjoint and together the whole
    trace's, and their fit is the whole trace's fit."""
    trace = random_trace(lambda lo, hi: data.draw(st.integers(lo, hi)), n_locs, steps,
                         extended)
    platform = Platform(5e-8)
    matching = match(trace)
    whole = observe_transfers(trace, matching, platform)
    part_of = {loc: data.draw(st.integers(0, 2)) for loc in trace.events}
    shares = [observe_transfers(trace, matching, platform,
                                {loc for loc, p in part_of.items() if p == k})
              for k in range(3)]
    joined = Observations.concat(shares)
    assert pairs(joined) == pairs(whole)
    assert counts(joined) == counts(whole)
    assert outcome_of(joined) == outcome_of(whole)
    assert observe_transfers(trace, matching, platform, set()).sizes.size == 0
