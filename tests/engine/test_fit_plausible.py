"""Plausibility of the fitted network model (issue #41): a fit outside physical
bounds, noisier than its latency, or overridden by [lower, upper] on most of its
uses is not used; the run falls back (platform network model, else lower) and
says why in the summary (``fit.rejected``) and in one warning line."""

import json

import numpy as np
import pytest

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import (
    FitOutcome,
    NetworkFit,
    Observations,
    clamp_check,
    implausible,
    outcome_of,
    size_classes,
    try_fit,
    warning_line,
)
from compensate.formats import read_trace, write_trace
from compensate.matching import match
from compensate.platform import Platform
from compensate.simulate import simulate

from ..fingerprint_gen import REAL
from ..inprocess import run_compensate

TICK = 1e-9


def _fit(latency, per_byte=0.0, spread=0.0, model="linear"):
    return NetworkFit(latency, per_byte, 100, spread, 8, 8192, 4, model)


def _obs(sizes, seconds):
    return Observations(np.asarray(sizes, np.int64), np.asarray(seconds, np.float64),
                        p2p=len(sizes))


def test_a_network_within_physical_bounds_is_plausible():
    assert implausible(_fit(1e-6, 1 / 5e9, 1e-8)) is None
    assert implausible(_fit(2e-6, model="constant")) is None  # one size: no bandwidth


@pytest.mark.parametrize("fit, words", [
    (_fit(9.3e-28, 1 / 5e9), "latency 9.3e-28 s outside"),
    (_fit(47.7e-3, 1 / 5.7e6), "latency 0.0477 s outside"),
    (_fit(1e-6, 1 / 5.7e6), "bandwidth 5.7e+06 B/s outside"),
    (NetworkFit(1e-6, 0.0, 100, 0.0, 8, 1 << 20, 4, "linear"), "bandwidth inf B/s outside"),
    (_fit(14.5e-6, 1 / 26.6e9, 8e-3), "residual spread 0.008 s larger than the fitted latency"),
])
def test_an_implausible_fit_says_why(fit, words):
    assert words in implausible(fit)


def test_the_platform_model_is_not_judged():
    assert implausible(_fit(1e-9, 0.0, 1.0, model="platform")) is None


def test_an_implausible_fit_falls_back_to_lower_and_says_so():
    # megabyte transfers that take no longer than 5 us: no network is that fast
    sizes = np.tile([1 << 20, 1 << 21, 1 << 22, 1 << 23], 5)
    obs = _obs(sizes, np.full(sizes.size, 5e-6))
    out = outcome_of(obs)
    assert out.fit is None
    assert out.rejected.startswith("fitted bandwidth ")
    assert "outside the physical range" in out.rejected
    assert out.rejected_fit is not None and out.rejected_fit.latency == pytest.approx(5e-6)
    assert out.reason == f"fitted model rejected: {out.rejected}"
    with_net = outcome_of(obs, (1e-6, 2e-10))
    assert with_net.rejected == out.rejected
    assert with_net.fit.model == "platform" and with_net.fit.latency == 1e-6


def test_no_bandwidth_is_judged_where_the_sizes_cannot_show_it():
    sizes = np.tile([8, 16, 32, 64], 5)  # 64 B at 1 TB/s: 64 ps, below any timer
    out = outcome_of(_obs(sizes, np.full(sizes.size, 2e-6)))
    assert out.rejected is None and out.fit.latency == pytest.approx(2e-6)


def test_size_classes_count_every_class():
    got = size_classes(np.array([0, 1, 63, 64, 4095, 4096, 300000]))
    assert got == {"0 B": 1, "1-63 B": 2, "64 B-4 KiB": 2, "4-256 KiB": 1, ">=256 KiB": 1}


def test_clamp_check_rejects_a_fit_overridden_on_most_uses():
    out = FitOutcome(_fit(1e-6, 2e-10), 40)
    assert clamp_check(out, {"m2_fitted": 100, "m2_fitted_overridden": 50}) is None
    assert clamp_check(out, {"m2_fitted": 9, "m2_fitted_overridden": 9}) is None  # too few uses
    again = clamp_check(out, {"m2_fitted": 100, "m2_fitted_overridden": 51})
    assert again.fit is None and "51 of its 100 uses" in again.rejected
    assert again.rejected_fit == out.fit
    net = clamp_check(out, {"m2_fitted": 100, "m2_fitted_overridden": 51}, (2e-6, 1e-10))
    assert net.fit.model == "platform" and net.fit.latency == 2e-6
    assert clamp_check(net, {"m2_fitted": 100, "m2_fitted_overridden": 100}) is None


def test_an_exact_model_is_not_overridden_where_the_receiver_was_late():
    """The simulator's own network: receivers that came after the modelled
    arrival are the model's agreement, not its override (``m2_fitted_clamped``
    counts them: on this program nearly every use, which would reject an exact
    fit)."""
    sim = simulate("pipeline", ranks=4, overhead=1e-6, seed=0, quantize=True)
    m = match(sim.measured)
    out = try_fit(sim.measured, m, sim.platform)
    assert out.fit is not None and out.rejected is None
    r = compensate(sim.measured, sim.platform, EngineOptions("fitted", network_time=out.fit), m)
    assert r.stats.p2p_cases["m2_fitted"] > 100
    assert r.stats.p2p_cases["m2_fitted_overridden"] == 0
    assert r.stats.p2p_cases["m2_fitted_clamped"] > r.stats.p2p_cases["m2_fitted"] / 2


@pytest.fixture(scope="module")
def pipeline_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("clamped")
    sim = simulate("pipeline", ranks=4, overhead=1e-6, seed=0, quantize=True)
    write_trace(sim.measured, str(d / "m.trace"))
    (d / "p.json").write_text(json.dumps(sim.platform.to_dict()))
    return d


@pytest.mark.parametrize("mode", [[], ["--in-memory"]])
def test_a_fit_clamped_on_most_uses_is_replaced_by_lower(pipeline_trace, absurd_fit, mode):
    """A fit that times every transfer at 1 s is overridden by the upper bound on
    every use: the run compensates again with the lower bound (streamed and in
    memory), writes what ``--bound lower`` writes, and says why."""
    d = pipeline_trace
    args = [d / "m.trace", "--platform", d / "p.json", "--force", *mode]
    r = run_compensate(args[0], d / "f.trace", *args[1:], "--bound", "fitted",
                       "--summary", d / "f.json")
    assert r.returncode == 0, r.stderr
    fit = json.loads((d / "f.json").read_text())["fit"]
    assert fit["rejected"].startswith("outside [lower, upper] on ")
    assert fit["bound_used"] == "lower" and fit["rejected_model"]["latency_s"] == 1.0
    lines = [x for x in r.stderr.splitlines() if "warning" in x]
    assert lines == [warning_line(fit)]
    assert "used the lower bound instead" in lines[0]
    low = run_compensate(args[0], d / "l.trace", *args[1:], "--bound", "lower")
    assert low.returncode == 0
    assert (d / "f.trace").read_text() == (d / "l.trace").read_text()


# -- the real Score-P archives bundled in tests/data: plausible, or rejected with why

ARCHIVES = {a.parent.name: a for a in REAL}
#: what each archive's fit is at 100 ns per record: ("plausible", model) or
#: ("rejected", words of the reason) or ("none", words of why there is no fit)
EXPECTED = {
    # eager below 256 KiB, a rendezvous's extra round trip above: two lines
    "ping-pong-otf2": ("plausible", "piecewise"),
    # the same program with PAPI counters: transfers of up to 2 MiB that scatter by
    # 13 us around a line with 11 us latency
    "ping-pong-otf2-papi": ("rejected", "residual spread"),
    "jacobi-mpi-openmp-cuda": ("plausible", "constant"),
    "jacobi-openmp-tasks-offload": ("none", "0 observed transfers"),
    "hip-two-gpu-metrics": ("none", "0 observed transfers"),
}


def test_every_bundled_archive_has_an_expectation():
    assert set(ARCHIVES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_archive_fit_is_plausible_or_rejected_with_its_reason(name):
    trace = read_trace(ARCHIVES[name])
    out = try_fit(trace, match(trace), Platform(1e-7))
    kind, words = EXPECTED[name]
    if kind == "plausible":
        assert out.rejected is None and out.fit.model == words
        assert implausible(out.fit) is None
    elif kind == "rejected":
        assert out.fit is None and words in out.rejected
        assert implausible(out.rejected_fit) == out.rejected
    else:
        assert out.fit is None and out.rejected is None and words in out.reason


# -- observations by the measured records' order, whatever the overhead given


@pytest.mark.parametrize("name", ["ping-pong-otf2", "jacobi-mpi-openmp-cuda"])
def test_real_archive_observes_the_same_transfers_at_any_overhead(name):
    trace = read_trace(ARCHIVES[name])
    m = match(trace)
    a, b = (try_fit(trace, m, Platform(o)) for o in (1e-7, 3e-6))
    assert a.observations == b.observations > 0
    assert a.size_classes == b.size_classes


def _short_waits(tmp_path, n=12):
    """``n`` messages like tests/cases/r2_m1_a1.trace: the receive entered (1200)
    before the send call ended (1300), the data in 800 ns after the Enter."""
    lines = ["compensate-trace 1", "timer_resolution 1000000000",
             'location 0 group=0 name="rank 0"', 'location 1 group=1 name="rank 1"',
             'region 1 "MPI_Send"', 'region 2 "MPI_Recv"',
             'comm 0 "MPI_COMM_WORLD" 0,1', "events"]
    for i in range(n):
        t = 10000 * i
        lines += [f"{t + 1000} 0 Enter region=1",
                  f"{t + 1100} 0 MpiSend receiver=1 comm=0 tag=7 bytes={1000 + 8 * i}",
                  f"{t + 1200} 1 Enter region=2", f"{t + 1300} 0 Leave region=1",
                  f"{t + 2000} 1 MpiRecv sender=0 comm=0 tag=7 bytes={1000 + 8 * i}",
                  f"{t + 2300} 1 Leave region=2"]
    path = tmp_path / "short_waits.trace"
    path.write_text("\n".join(lines) + "\n")
    return read_trace(path)


def test_short_waits_are_observed_whatever_the_overhead_given(tmp_path):
    """The receiver waited 800 ns in its MPI_Recv: an observed transfer by the
    records' order, at 100 ns and at 3 us per record alike (the old rule, "still
    waiting after the overhead given", dropped every one of them at 3 us)."""
    from compensate.engine.fit import observe_transfers

    trace = _short_waits(tmp_path)
    m = match(trace)
    low, high = (observe_transfers(trace, m, Platform(o)) for o in (1e-7, 3e-6))
    assert len(low) == len(high) == 12
    assert (low.sizes == high.sizes).all()
    # each one's network time: the larger overhead's shorter by what it removes
    assert np.allclose((low.seconds - high.seconds) * 1e9, 2900.0)


def test_simulated_trace_observes_the_same_transfers_at_any_overhead():
    from compensate.engine.fit import observe_transfers

    sim = simulate("stencil", ranks=8, overhead=1e-6, seed=0, quantize=True)
    m = match(sim.measured)
    low, high = (observe_transfers(sim.measured, m, Platform(o)) for o in (1e-7, 3e-6))
    assert len(low) == len(high) > 100
    assert (low.sizes == high.sizes).all()


def test_the_mpi4py_montecarlo_run_fits_a_plausible_latency():
    """examples/montecarlo/traces.otf2, the project's mpi4py tracer on the paper's
    Monte-Carlo pi (benchmarks/paper_fig1.py's program), with the platform file the
    tracer measured: 58 observed transfers of 8 B - 1.4 KiB, too small to show a
    per-byte cost; the envelope's latency (~72 us: python, shared cores) is within
    the physical range and its spread below it."""
    from pathlib import Path

    ex = Path(__file__).resolve().parents[2] / "examples" / "montecarlo"
    trace = read_trace(ex / "traces.otf2")
    out = try_fit(trace, match(trace), Platform.load(ex / "platform.json"))
    assert out.observations >= 50 and out.rejected is None
    assert 10e-6 < out.fit.latency < 1e-3 and out.fit.residual_spread < out.fit.latency
    assert out.size_classes["4-256 KiB"] == 0
