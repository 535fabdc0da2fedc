"""The fitted bound (docs/design.md R2f, issue #9): fit the network to the transfers the
trace observed and time the unobserved ones with it, clamped into [lower, upper].

Checked against the ground-truth simulator (docs/design.md §7): the fit recovers the
simulated network, ``fitted`` removes >= 99 % of the dilation on every program of
the accuracy benchmark and never loses more than 0.5 points to the better bound, it
stays inside the [lower, upper] envelope with a jittery network, it falls back to
the lower bound when the trace observed too few transfers, and the command line
reports the fit. Known shortfalls are strict expected failures, explained in
docs/accuracy.md ("Fitted transfer")."""

import dataclasses
import json

import numpy as np
import pytest

from compensate.cli import main as compensate_main
from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import (
    ENVELOPE_QUANTILE,
    MIN_OBSERVATIONS,
    Observations,
    fit_network,
    fit_observations,
    observe_transfers,
    outcome_of,
    try_fit,
)
from compensate.formats import write_trace
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import COLL_END, COLLECTIVE_OPS, RECV
from compensate.platform import Platform
from compensate.simulate import Network, default_platform, run_program, simulate
from compensate.simulate import programs as P
from compensate.simulate.validation import accuracy, evaluate, span

from ..conftest import CASES, simulated

TICK = 1e-9  # the simulator's timer resolution
OVERHEADS = [2e-7, 1e-6, 5e-6]  # as in benchmarks/accuracy.py


def sizes_ring(ranks=4, iterations=60, sizes=(64, 1024, 16384, 262144)):
    """A token ring whose token size cycles through ``sizes``: every receiver waits
    for its token, so every transfer is observed, at several sizes."""
    ops = [[] for _ in range(ranks)]
    for it in range(iterations):
        size = sizes[it % len(sizes)]
        for r in range(ranks):
            nxt, prev = (r + 1) % ranks, (r - 1) % ranks
            if r == 0:
                ops[r] += [P.call("work", 2e-6), P.send(nxt, size), P.recv(prev)]
            else:
                ops[r] += [P.recv(prev), P.call("work", 2e-6), P.send(nxt, size)]
    return P.Program("sizes-ring", ops, {})


def fitted(sim, fit=None):
    """Compensate the measured trace with the fitted bound; returns (Result, fit)."""
    m = match(sim.measured)
    fit = fit or fit_network(sim.measured, m, sim.platform)
    opts = EngineOptions("fitted", network_time=fit) if fit else EngineOptions("lower")
    return compensate(sim.measured, sim.platform, opts, m), fit


# -- the fit itself -----------------------------------------------------------------

@pytest.mark.parametrize("quantize", [True, False])
@pytest.mark.parametrize("network", [Network(), Network(latency=3e-6, bandwidth=2e9)],
                         ids=["1us-5GBps", "3us-2GBps"])
def test_fit_recovers_latency_and_bandwidth(network, quantize):
    """Several message sizes: latency and bandwidth within 1 % of the simulator's."""
    sim = run_program(sizes_ring(), default_platform(1e-6), network=network,
                      quantize=quantize)
    fit = fit_network(sim.measured, match(sim.measured), sim.platform)
    assert fit is not None and fit.model == "linear" and fit.distinct_sizes == 4
    assert fit.latency == pytest.approx(network.latency, rel=0.01)
    assert fit.bandwidth == pytest.approx(network.bandwidth, rel=0.01)
    assert fit.residual_spread <= 2 * TICK
    assert (fit.size_min, fit.size_max) == (64, 262144)


@pytest.mark.parametrize("program,size", [("stencil", 4096), ("ring", 1024)])
def test_one_message_size_gives_the_transfer_time_of_that_size(program, size):
    """stencil and ring send one size only: latency and bandwidth cannot be told
    apart, so the fit is the median transfer time (model "constant"), within 2 ns
    (two ticks: the simulator rounds each of the two copy times to whole ticks)."""
    sim = simulated(program, ranks=8, overhead=1e-6, quantize=True)
    fit = fit_network(sim.measured, match(sim.measured), sim.platform)
    assert fit is not None and fit.model == "constant" and fit.per_byte == 0
    assert fit.bandwidth == float("inf") and fit.to_dict()["bandwidth_Bps"] is None
    assert abs(fit(size) - sim.network.time(size)) <= 2 * TICK


def _envelope_is(obs, true):
    """Observations by the records' order (issue #41): each at least the true
    network time (up to the copy-time rounding: a late receiver only adds to it),
    and the fit's lower envelope exactly it."""
    assert np.all(obs.seconds >= true - 2 * TICK)
    low = obs.seconds <= np.quantile(obs.seconds, ENVELOPE_QUANTILE)
    assert np.all(np.abs(obs.seconds[low] - true[low] if np.ndim(true) else
                         obs.seconds[low] - true) <= 2 * TICK)


def test_observations_are_at_least_the_transfer_times():
    """Every observation of the quantized stencil is at least its true network
    time, and the lower envelope is exactly it, at 0.2, 1 and 5 us per record."""
    for overhead in OVERHEADS:
        sim = simulated("stencil", ranks=8, overhead=overhead, quantize=True)
        obs = observe_transfers(sim.measured, match(sim.measured), sim.platform)
        assert len(obs) >= 100 and obs.p2p == len(obs)
        _envelope_is(obs, sim.network.time(4096))


def test_one_to_n_collectives_are_observations():
    sim = simulated("collectives", ranks=8, overhead=1e-6, quantize=True)
    obs = observe_transfers(sim.measured, match(sim.measured), sim.platform)
    assert obs.p2p == 0 and obs.collective >= 100
    _envelope_is(obs, sim.network.time(4096))


def test_n_to_one_roots_are_observations():
    """A Gather's root that waited shows the last member's transfer (issue 16), one
    per instance, and only that one: the gather program has no point-to-point
    message, yet fits the simulator's network exactly."""
    sim = simulated("gather", ranks=8, overhead=1e-6, quantize=True)
    m = match(sim.measured)
    obs = observe_transfers(sim.measured, m, sim.platform)
    gathers = sum(inst.op == COLLECTIVE_OPS["GATHER"] for inst in m.instances)
    assert obs.p2p == 0 and gathers // 2 <= obs.collective <= len(m.instances)
    sizes = obs.sizes.tolist()
    true = np.array([sim.network.time(s) for s in sizes])
    _envelope_is(obs, true)


def test_nonblocking_rooted_collectives_are_observations():
    sim = simulated("nonblocking_rooted", ranks=8, overhead=1e-6, quantize=True)
    obs = observe_transfers(sim.measured, match(sim.measured), sim.platform)
    assert obs.p2p == 0 and obs.collective >= 50
    _envelope_is(obs, sim.network.time(4096))


def test_fallback_reason_tells_collectives_from_messages():
    """Too few observations and no point-to-point message: the reason must not call
    the collectives' transfers overlapped messages."""
    sim = simulate("gather", ranks=4, iterations=3, overhead=1e-6, quantize=True)
    outcome = try_fit(sim.measured, match(sim.measured), sim.platform)
    assert outcome.fit is None and 0 < outcome.observations < MIN_OBSERVATIONS
    assert "0 point-to-point messages" in outcome.reason
    assert f"{outcome.observations} collective transfers whose receiver waited" in \
        outcome.reason


def test_robust_against_outliers():
    """A fifth of the observations far off (e.g. receivers delayed by something the
    model does not know) barely moves the fit."""
    rng = np.random.default_rng(0)
    sizes = rng.choice([64, 4096, 65536, 1 << 20], size=200)
    seconds = 2e-6 + sizes / 4e9
    seconds[::5] += rng.uniform(1e-5, 1e-4, size=40)
    fit = fit_observations(Observations(sizes, seconds))
    assert fit.latency == pytest.approx(2e-6, rel=0.02)
    assert fit.bandwidth == pytest.approx(4e9, rel=0.02)


def test_parameters_are_never_negative():
    sizes = np.array([64, 128, 256, 512] * 5)
    fit = fit_observations(Observations(sizes, 1e-6 - sizes * 1e-9))  # falling with size
    assert fit.latency >= 0 and fit.per_byte == pytest.approx(0, abs=1e-15)
    fit = fit_observations(Observations(sizes, -1e-7 + sizes * 1e-9))  # negative intercept
    assert fit.latency == pytest.approx(0, abs=1e-15) and fit.per_byte > 0


def test_threshold():
    sizes = np.array([64, 4096] * MIN_OBSERVATIONS)
    seconds = 1e-6 + sizes / 5e9
    n = MIN_OBSERVATIONS
    assert fit_observations(Observations(sizes[: n - 1], seconds[: n - 1])) is None
    assert fit_observations(Observations(sizes[:n], seconds[:n])) is not None


# -- issue #9 "Done when": >= 99 % everywhere, never worse than the bounds ---------

#: Known shortfalls of the one-sided programs (issue #19), explained in
#: docs/accuracy.md "Issue 19": one observed transfer size at 5 us per record gives a
#: constant fit (rma_fence, rma_pscw; closed by a platform network model, below); the
#: lock counter's round trips hide behind the tracer's overhead in every run and no
#: other transfer shows the network (at 5 us closed by the platform's network model
#: and rma entry, below).
SHORTFALLS = {("rma_fence", 5e-6), ("rma_pscw", 5e-6), ("rma_lock_counter", 2e-7),
              ("rma_lock_counter", 1e-6), ("rma_lock_counter", 5e-6)}


@pytest.mark.parametrize("overhead", OVERHEADS, ids=lambda o: f"{o:g}")
@pytest.mark.parametrize("program", list(P.PROGRAMS))
def test_fitted_removes_99_percent(program, overhead, request):
    """The benchmark's configuration (benchmarks/accuracy.py: 8 ranks, tick grid):
    fitted removes >= 99 % of the dilation on total time, and no less than the
    better of lower/upper minus 0.5 percentage points."""
    if (program, overhead) in SHORTFALLS:
        request.applymarker(pytest.mark.xfail(
            strict=True, reason="below 99 %: docs/accuracy.md, issue 19"))
    ranks = 2 if program == "pingpong" else 8
    sim = simulated(program, ranks=ranks, overhead=overhead, quantize=True)
    ev = evaluate(sim.truth, sim.measured, sim.platform)
    best = max(ev["lower"].removed_total, ev["upper"].removed_total)
    r, _ = fitted(sim)
    acc = accuracy(sim.truth, sim.measured, r.trace)
    assert acc.violations == 0
    assert acc.removed_total >= 0.99
    assert acc.removed_total >= best - 0.005


@pytest.mark.parametrize("program", ["montecarlo", "stencil", "pipeline", "collectives",
                                     "imbalanced"])
def test_fitted_removes_99_percent_off_grid(program):
    """The same off the tick grid, 4 ranks (the configuration of test_accuracy.py)."""
    for overhead in OVERHEADS:
        sim = simulated(program, ranks=4, overhead=overhead)
        ev = evaluate(sim.truth, sim.measured, sim.platform)
        best = max(ev["lower"].removed_total, ev["upper"].removed_total)
        r, fit = fitted(sim)
        removed = accuracy(sim.truth, sim.measured, r.trace).removed_total
        assert fit is not None
        assert removed >= 0.99 and removed >= best - 0.005, (overhead, removed, best)


def test_fitted_uses_the_fit_for_unobserved_transfers():
    sim = simulated("stencil", ranks=8, overhead=1e-6, quantize=True)
    r, fit = fitted(sim)
    cases = r.stats.p2p_cases
    assert cases["m2_lower"] == cases["m2_upper"] == 0
    # every m.2 receive: timed by the fit, or, where the message arrived after the
    # receiver was ready (its transfer observed after all), by the measured interval
    assert cases["m2_fitted"] + cases["m2_message_late"] > 1000
    assert 0 < cases["m2_message_late"] < cases["m2_fitted"]
    assert 0 < cases["m2_fitted_clamped"] < cases["m2_fitted"]
    # the simulator's own network: never overridden by a bound (a receiver that came
    # after the modelled arrival agrees with the model)
    assert cases["m2_fitted_overridden"] == 0


def _m2_case(tmp_path, recv_at: int):
    """tests/cases/r2_m2_gap.trace (an m.2 message: the receive call began after the
    send call ended) with its MpiRecv moved to ``recv_at``; fitted with a network
    time of 0, so the fit alone would give the lower bound's 2·C(s)·s."""
    text = (CASES / "r2_m2_gap.trace").read_text().replace(
        "1800 1 MpiRecv", f"{recv_at} 1 MpiRecv")
    path = tmp_path / "m2.trace"
    path.write_text(text)
    trace = read_text(str(path))
    plat = Platform.from_dict({"event_overhead": 1e-7,
                               "copy_time": [{"bytes": 1000, "seconds": 5e-8}]})
    r = compensate(trace, plat, EngineOptions("fitted", network_time=lambda s: 0.0))
    return r.trace.events[1].time.tolist(), r.stats.p2p_cases


def test_m2_message_late_keeps_the_measured_transfer(tmp_path):
    """Receiver ready at 1600 + O = 1700; the message arrived at 1800 - C(s)s = 1750,
    later: the transfer was observed even though the calls did not overlap, so
    fitted keeps it, like the upper bound (1600, see the case file)."""
    times, cases = _m2_case(tmp_path, 1800)
    assert times == [1000, 1400, 1400, 1600, 1600]
    assert cases["m2_message_late"] == 1 and cases["m2_fitted"] == 0


def test_m2_receiver_late_uses_the_fit(tmp_path):
    """MpiRecv at 1750 = ready (1700) + C(s)s: the message may have arrived any time
    before; fitted uses the fit clamped into [lower, upper] = [1450, 1550]: 1450
    (Leave 150 later in the measurement, less O = 100: 1500)."""
    times, cases = _m2_case(tmp_path, 1750)
    assert times == [1000, 1400, 1400, 1450, 1500]
    assert cases["m2_message_late"] == 0 and cases["m2_fitted"] == 1


# -- a jittery network ----------------------------------------------------------------

def jittered(program, jitter, overhead=1e-6, seed=0, ranks=8):
    """(truth, measured, platform) with exponential per-message jitter of mean
    ``jitter``; both runs draw the same delay for the same message."""
    sim = simulated(program, ranks=ranks, seed=seed, overhead=overhead, quantize=True,
                   network=Network(jitter=jitter, seed=seed))
    return sim.truth, sim.measured, sim.platform


def _relative(trace):
    t0 = min(int(e.time[0]) for e in trace.events.values() if len(e))
    return {loc: e.time - t0 for loc, e in trace.events.items()}


def _outside_envelope(fit_trace, lower, upper, tol=1):
    """Receives and collective exits of ``fit_trace`` outside [lower, upper] (±tol)."""
    f, lo, up = _relative(fit_trace), _relative(lower), _relative(upper)
    outside = 0
    for loc, ev in fit_trace.events.items():
        dep = (ev.kind == RECV) | (ev.kind == COLL_END)
        a = np.minimum(lo[loc][dep], up[loc][dep]) - tol
        b = np.maximum(lo[loc][dep], up[loc][dep]) + tol
        outside += int(np.count_nonzero((f[loc][dep] < a) | (f[loc][dep] > b)))
    return outside


def _three(program, jitter):
    truth, measured, plat = jittered(program, jitter)
    m = match(measured)
    fit = fit_network(measured, m, plat)
    assert fit is not None
    out = {b: compensate(measured, plat, EngineOptions(b), m).trace for b in ("lower", "upper")}
    out["fitted"] = compensate(measured, plat, EngineOptions("fitted", network_time=fit),
                               m).trace
    return truth, out


def test_jitter_is_the_same_in_both_runs():
    """The premise of the jitter tests: in the ring every transfer is observed, so
    compensation is exact only if truth and measured run drew the same delays."""
    truth, out = _three("ring", 1e-6)
    for bound in ("lower", "upper", "fitted"):
        assert span(out[bound]) == pytest.approx(span(truth), abs=2 * TICK)


JITTERS = [2e-7, 1e-6, 5e-6]
JITTER_PROGRAMS = ["stencil", "imbalanced", "pipeline", "collectives"]


@pytest.mark.parametrize("jitter", JITTERS, ids=lambda j: f"{j * 1e6:g}us")
@pytest.mark.parametrize("program", JITTER_PROGRAMS)
def test_jitter_fitted_within_envelope(program, jitter):
    """Per dependent record (receive, collective exit) the fitted result lies between
    the lower- and the upper-bound result."""
    _, out = _three(program, jitter)
    assert _outside_envelope(out["fitted"], out["lower"], out["upper"]) == 0


@pytest.mark.parametrize("jitter", JITTERS, ids=lambda j: f"{j * 1e6:g}us")
@pytest.mark.parametrize("program", JITTER_PROGRAMS)
def test_jitter_fitted_total_error_no_worse_than_better_bound(program, jitter, request):
    if (program, jitter) == ("collectives", 1e-6):
        # the lower envelope (fit.ENVELOPE_QUANTILE) times a jittered transfer below
        # its mean: 141 ns on the span where the upper bound is 11 ns off
        # (docs/accuracy.md, "Fitted transfer")
        request.applymarker(pytest.mark.xfail(strict=True, reason="envelope under jitter"))
    truth, out = _three(program, jitter)
    err = {b: abs(span(t) - span(truth)) for b, t in out.items()}
    assert err["fitted"] <= min(err["lower"], err["upper"]) + TICK, err


# -- a platform network model (the platform file's "network" entry) ---------------

def test_platform_model_combines_with_the_trace_by_hand():
    net = (1e-6, 2e-10)  # 1 us + bytes / 5 GB/s
    two = Observations(np.array([64, 4096] * 5), 3e-6 + np.array([64, 4096] * 5) * 1e-10)
    one = Observations(np.full(10, 262144), np.full(10, 60e-6))
    few = Observations(np.array([64, 64]), np.array([5e-6, 5e-6]))
    # two sizes: the trace's own fit, the platform model unused
    got = outcome_of(two, net).fit
    assert got.model == "linear" and got.latency == pytest.approx(3e-6)
    assert got.per_byte == pytest.approx(1e-10)
    # one size: exact there (60 us at 256 KiB), the platform's slope elsewhere
    got = outcome_of(one, net).fit
    assert got.model == "platform slope" and got.per_byte == 2e-10
    assert got.latency == pytest.approx(60e-6 - 262144 * 2e-10)  # 7.5712 us
    assert got(262144) == pytest.approx(60e-6)
    # one size whose time the platform's slope alone exceeds: through the least
    # plausible latency (10 ns, fit.LATENCY_RANGE) and the observed point
    got = outcome_of(Observations(np.full(10, 262144), np.full(10, 26.2144e-6)), net).fit
    assert got.model == "platform slope" and got.latency == 10e-9
    assert got(262144) == pytest.approx(26.2144e-6) and got.per_byte == pytest.approx(1e-10,
                                                                                     rel=1e-3)
    # too few observations: the platform model instead of the lower bound
    got = outcome_of(few, net).fit
    assert (got.model, got.latency, got.per_byte, got.observations) == ("platform", 1e-6,
                                                                       2e-10, 2)
    # no platform model: as before
    assert outcome_of(one).fit.model == "constant" and outcome_of(few).fit is None


@pytest.mark.parametrize("program", ["rma_fence", "rma_pscw"])
def test_platform_network_closes_the_one_size_shortfall(program):
    """rma_fence and rma_pscw at 5 us (SHORTFALLS above: their traces observe one
    transfer size): with the simulator's network as the platform network model the
    fitted bound removes >= 99 % (docs/accuracy.md, issue 19)."""
    sim = simulated(program, ranks=8, overhead=5e-6, quantize=True)
    plat = dataclasses.replace(sim.platform, network=(sim.network.latency,
                                                      1.0 / sim.network.bandwidth))
    m = match(sim.measured)
    fit = fit_network(sim.measured, m, plat)
    assert fit.model == "platform slope"
    r = compensate(sim.measured, sim.platform, EngineOptions("fitted", network_time=fit), m)
    acc = accuracy(sim.truth, sim.measured, r.trace)
    assert acc.violations == 0 and acc.removed_total >= 0.99


@pytest.mark.parametrize("overhead", OVERHEADS, ids=lambda o: f"{o:g}")
def test_platform_rma_release_closes_the_lock_counter(overhead):
    """rma_lock_counter (SHORTFALLS above): with the simulator's network and its
    unlock's protocol (the release leaves once the fetched result is back: the
    platform's rma.release = after_completion) the fitted bound removes >= 99 % at
    every overhead (rank 0's fetches on its own window take no network, as on MPICH;
    docs/accuracy.md, issue 19); without the rma entry it does not."""
    sim = simulated("rma_lock_counter", ranks=8, overhead=overhead, quantize=True)
    plat = dataclasses.replace(sim.platform, network=(sim.network.latency,
                                                      1.0 / sim.network.bandwidth),
                               rma_release="after_completion")
    m = match(sim.measured)
    fit = fit_network(sim.measured, m, plat)
    r = compensate(sim.measured, plat, EngineOptions("fitted", network_time=fit), m)
    acc = accuracy(sim.truth, sim.measured, r.trace)
    assert acc.violations == 0 and acc.removed_total >= 0.99
    eager = compensate(sim.measured, dataclasses.replace(plat, rma_release=None),
                       EngineOptions("fitted", network_time=fit), m)
    assert accuracy(sim.truth, sim.measured, eager.trace).removed_total < 0.99


# -- fallback and command line --------------------------------------------------------

def late_receiver(messages=20):
    """Rank 1 starts receiving long after rank 0 sent everything: every message is
    case m.2, nothing is observed."""
    ops = [[P.send(1, 64 << (i % 4)) for i in range(messages)],
           [P.compute(1e-3)] + [P.recv(0) for _ in range(messages)]]
    return P.Program("late-receiver", ops, {})


def test_too_few_observations_give_no_fit():
    sim = run_program(late_receiver(), default_platform(1e-6), quantize=True)
    m = match(sim.measured)
    outcome = try_fit(sim.measured, m, sim.platform)
    assert outcome.fit is None and outcome.observations == 0
    assert f"fewer than {MIN_OBSERVATIONS}" in outcome.reason
    assert fit_network(sim.measured, m, sim.platform) is None


def _write_pair(tmp_path, sim):
    src = tmp_path / "measured.trace"
    write_trace(sim.measured, src)
    plat = tmp_path / "platform.json"
    plat.write_text(json.dumps(sim.platform.to_dict()))
    return src, plat


def test_cli_falls_back_to_lower_and_says_so(tmp_path, capsys):
    sim = run_program(late_receiver(), default_platform(1e-6), quantize=True)
    src, plat = _write_pair(tmp_path, sim)
    out, summary = tmp_path / "fitted.trace", tmp_path / "s.json"
    assert compensate_main([str(src), str(out), "--bound", "fitted", "--platform", str(plat),
                            "--summary", str(summary)]) == 0
    line = capsys.readouterr().out
    assert "fitted bound not possible" in line and "lower bound" in line
    s = json.loads(summary.read_text())
    assert s["bound"] == "fitted"
    fit = s["fit"]
    assert fit["fallback"] is True and fit["bound_used"] == "lower"
    assert f"fewer than {MIN_OBSERVATIONS}" in fit["fallback_reason"]
    assert fit["observations"] == 0 and fit["used"] == 0 and fit["latency_s"] is None
    assert s["p2p_cases"]["m2_lower"] == 20
    lower = tmp_path / "lower.trace"
    assert compensate_main([str(src), str(lower), "--platform", str(plat), "--quiet"]) == 0
    assert out.read_text() == lower.read_text()


def test_cli_uses_the_platform_network_model_and_says_so(tmp_path, capsys):
    """The same trace with a platform file that has a network entry: the fitted
    bound times the 20 unobserved messages with it (streamed, as the command runs)
    instead of falling back to the lower bound, and the summary names the model."""
    sim = run_program(late_receiver(), default_platform(1e-6), quantize=True)
    src, plat = _write_pair(tmp_path, sim)
    data = json.loads(plat.read_text())
    data["network"] = {"latency": 1e-6, "per_byte": 2e-10}
    plat.write_text(json.dumps(data))
    out, summary = tmp_path / "fitted.trace", tmp_path / "s.json"
    assert compensate_main([str(src), str(out), "--bound", "fitted", "--platform", str(plat),
                            "--summary", str(summary)]) == 0
    assert "from the platform network model; 0 observed transfers" in capsys.readouterr().out
    fit = json.loads(summary.read_text())["fit"]
    assert (fit["model"], fit["fallback"], fit["bound_used"]) == ("platform", False, "fitted")
    assert fit["latency_s"] == 1e-6 and fit["used"] == 20


def test_cli_writes_the_fit(tmp_path, capsys):
    sim = simulate("stencil", ranks=4, iterations=40, overhead=1e-6, quantize=True)
    src, plat = _write_pair(tmp_path, sim)
    out, summary = tmp_path / "fitted.trace", tmp_path / "s.json"
    assert compensate_main([str(src), str(out), "--bound", "fitted", "--platform", str(plat),
                            "--summary", str(summary)]) == 0
    line = capsys.readouterr().out
    assert "fitted bound (latency 1.82 us" in line and "verified" in line
    fit = json.loads(summary.read_text())["fit"]
    for key in ("latency_s", "bandwidth_Bps", "observations", "residual_spread_s", "used",
                "clamped", "fallback", "fallback_reason"):
        assert key in fit
    assert fit["fallback"] is False and fit["fallback_reason"] is None
    assert fit["latency_s"] == pytest.approx(sim.network.time(4096), abs=2 * TICK)
    assert fit["observations"] >= MIN_OBSERVATIONS and fit["used"] > 0
    assert 0 <= fit["clamped"] <= fit["used"]
    s = json.loads(summary.read_text())
    assert fit["used"] == s["p2p_cases"]["m2_fitted"]
    assert s["verification"]["violations"] == 0


def test_a_sendrecv_receiver_after_the_arrival_is_no_observation(tmp_path):
    """Location 0 entered its MPI_Sendrecv (2000) before location 1's call ended
    (3000) but after location 1's message can have arrived (1100 + O 100 + copy 50
    + network 300 = 1550), and its receive completed long after it was ready (5000
    against 2250: what MPI did inside the call, not the transfer). With a network
    model R2f takes only location 1's receive (ready 1250, arrived 2100 + 450 =
    2550 later: observed, 2900 - 2100 - 100 - 2 x 50 = 600 ns); without one it also
    takes location 0's 5000 - 1100 - 100 - 100 = 3700 ns, as the paper's test
    (the call's Leave) says."""
    # the hand case's exchange, location 0's receive moved to 5000, location 1's
    # to 2900 (their Leaves 100 ns after)
    text = (CASES / "r5_sendrecv_network.trace").read_text()
    for old, new in (("3300 0 MpiRecv", "5000 0 MpiRecv"), ("3400 0 Leave", "5100 0 Leave"),
                     ("3000 1 MpiRecv", "2900 1 MpiRecv"), ("3100 1 Leave", "3000 1 Leave")):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "t.trace"
    path.write_text(text)
    trace = read_text(str(path))
    m = match(trace)
    base = {"event_overhead": 1e-7, "copy_time": [{"bytes": 1000, "seconds": 5e-8}]}
    without = observe_transfers(trace, m, Platform.from_dict(base))
    with_model = observe_transfers(trace, m, Platform.from_dict(
        {**base, "network": {"latency": 3e-7, "per_byte": 0}}))
    assert sorted(np.round(without.seconds * 1e9).tolist()) == [600, 3700]
    assert np.round(with_model.seconds * 1e9).tolist() == [600]


@pytest.mark.parametrize(("bandwidth", "says"), [
    (5e9, "5 GB/s"), (1.68e19, "no per-byte cost resolved"), (None, "bandwidth n/a")])
def test_summary_phrase_says_when_the_slope_resolves_no_bandwidth(bandwidth, says):
    """A fitted slope clamped to (about) zero is no bandwidth: the summary says so
    instead of printing 1.68e+10 GB/s."""
    from compensate.engine.fit import summary_phrase  # noqa: PLC0415

    obj = {"fallback": False, "bandwidth_Bps": bandwidth, "model": "linear",
           "latency_s": 1e-5, "observations": 3, "used": 1, "clamped": 0}
    assert says in summary_phrase(obj)
