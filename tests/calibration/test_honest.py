"""Calibration that says what it calibrates: ``calibrate run --tracer`` measures the
named tracer and writes its name; a constant whose spread is too large for its value
(per-record cost, network latency, one-sided release verdict) is refused with one
line; the Score-P microbenchmark fails with one line without Score-P.

The refusals are tested with injected measurements (a timed test would depend on
how busy the machine is); one real quick run checks the default tracer's file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import calibration.targets as targets
from calibration import network, recordplatform, rma
from calibration.cli import main as calibrate_main
from calibration.modes import MODES
from calibration.spread import check_number, check_verdicts, disagreements
from compensate.platform import Platform

ROOT = Path(__file__).resolve().parent.parent.parent


def calibrate(*args: object) -> tuple[int, str, str]:
    """``calibrate ARGS`` in this interpreter: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = calibrate_main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def costs(median: float, iqr: float) -> dict:
    """record_path_costs-shaped statistics, every kind alike."""
    one = {"p10": median * 0.9, "median": median, "min": median * 0.8,
           "max": median * 3, "iqr": iqr}
    return {k: dict(one) for k in ("MpiSend", "MpiRecv", "function_call", "Enter", "Leave")}


def fake_record(median: float, iqr: float):
    def measure(n: int, repeats: int) -> dict:
        c = costs(median, iqr)
        return {"tracer": "record", "event_overhead": median / 2,
                "event_overhead_by_kind": {k: v["median"] for k, v in c.items()
                                           if k[0].isupper()},
                "overhead_source": "record_path",
                "calibration": {"by": "test", "records_per_sample": n, "repeats": repeats,
                                "statistic": "p10", "function_statistic": "median",
                                "function_path": "single", "seconds_per_record": c}}
    return measure


# ---------------------------------------------------------------------------
# the spread rule


def test_a_latency_of_391_us_among_a_few_us_is_refused_and_a_steady_one_is_not():
    found = check_number("network latency", 8.4e-6, 1.7e-6, 391e-6)
    assert found is not None
    line = found.message("calibration.network")
    assert "\n" not in line and line.startswith("calibration.network: error: network latency")
    assert "391 µs" in line and "quiet machine" in line and "limit 50 %" in line
    assert check_number("network latency", 2.0e-6, 1.9e-6, 2.3e-6) is None
    assert check_number("x", 2.0e-6, 1.55e-6, 2.45e-6) is None  # 45 % wide is written,
    assert check_number("x", 2.0e-6, 1.4e-6, 2.6e-6) is not None  # 60 % is not


def test_a_verdict_the_blocks_disagree_on_is_refused():
    found = check_verdicts("rma release protocol",
                           ["eager", "after_completion", "eager", "after_completion", "eager"])
    assert found is not None
    line = found.message("calibration.rma")
    assert "eager in 3" in line and "after_completion in 2" in line and "quiet" in line
    assert check_verdicts("rma release protocol", ["eager"] * 5) is None


def run_file(o: float, ci: tuple[float, float], copies: dict[int, float]) -> dict:
    """The parts of a platform file that :func:`disagreements` reads."""
    return {"writer_probe": {"event_overhead": {"seconds": o, "ci95": list(ci)}},
            "copy_time": [{"bytes": b, "seconds": t} for b, t in sorted(copies.items())]}


def test_two_runs_agree_within_their_widened_intervals_and_twice_the_copy_time():
    copies = {64: 40e-9, 4096: 90e-9, 1 << 20: 30e-6}
    a = run_file(4.5e-6, (4.4e-6, 4.6e-6), copies)
    # intervals disjoint, but within the +-10 % drift widening; copies 1.9x
    b = run_file(5.2e-6, (5.1e-6, 5.3e-6), {k: v * 1.9 for k, v in copies.items()})
    assert disagreements(a, b) == []


def test_two_runs_that_disagree_say_where():
    copies = {64: 40e-9, 4096: 90e-9, 1 << 20: 30e-6}
    a = run_file(4.5e-6, (4.4e-6, 4.6e-6), copies)
    b = run_file(6.0e-6, (5.9e-6, 6.1e-6), {**copies, 4096: 190e-9})
    found = disagreements(a, b)
    assert len(found) == 2
    assert found[0].startswith("event_overhead 4.5 µs") and "vs 6 µs" in found[0]
    assert found[1] == "copy of 4096 B: 90 ns vs 190 ns"
    few = run_file(4.5e-6, (4.4e-6, 4.6e-6), {64: 40e-9})
    assert disagreements(a, few) == ["only 1 copy sizes resolved in both (3 and 1)"]


# ---------------------------------------------------------------------------
# network latency and the one-sided protocol


def pingpong(q1: float, median: float, q3: float) -> list[dict]:
    return [{"bytes": 0, "seconds": median, "n": 101, "iqr": [q1, q3]},
            {"bytes": 1024, "seconds": median + 1e-6, "n": 101,
             "iqr": [q1 + 1e-6, q3 + 1e-6]}]


def unlock(ratios: list[float]) -> dict:
    """rma.measure's result whose blocks have these (fetch - empty) / round_trip."""
    blocks = [{"empty_s": 10e-6, "put_s": 10e-6, "fetch_s": 10e-6 + r * 3e-6,
               "round_trip_s": 3e-6} for r in ratios]
    mid = sorted(ratios)[len(ratios) // 2]
    return {"empty_s": 10e-6, "put_s": 10e-6, "fetch_s": 10e-6 + mid * 3e-6,
            "round_trip_s": 3e-6, "n": 51, "blocks": blocks}


def test_network_and_rma_say_whether_their_constant_is_steady():
    assert network.unsteady(pingpong(1.7e-6, 8.4e-6, 391e-6)) is not None
    assert network.unsteady(pingpong(2.0e-6, 2.1e-6, 2.3e-6)) is None
    assert rma.unsteady(unlock([0.8, 0.2, 0.8, 0.2, 0.8])) is not None
    assert rma.unsteady(unlock([0.8, 0.75, 0.9, 0.85, 0.8])) is None


def test_record_leaves_out_a_noisy_network_and_rma_entry_with_a_warning(capsys):
    platform = {"event_overhead": 1e-7, "copy_time": []}
    recordplatform.network_and_rma(platform, pingpong(1.7e-6, 8.4e-6, 391e-6),
                            unlock([0.8, 0.2, 0.8, 0.2, 0.8]), "MPICH", ["a", "b"])
    assert "network" not in platform and "rma" not in platform
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert err[0].startswith("calibration.record: warning: network latency not written")
    assert err[1].startswith("calibration.record: warning: rma release protocol not written")
    steady = {"event_overhead": 1e-7, "copy_time": []}
    recordplatform.network_and_rma(steady, pingpong(2.0e-6, 2.1e-6, 2.3e-6),
                            unlock([0.8, 0.75, 0.9, 0.85, 0.8]), "MPICH", ["a", "b"])
    assert steady["rma"]["release"] == "after_completion"
    assert steady["network"]["latency"] >= 0
    Platform.from_dict(steady)


def test_rma_blocks_are_runs_of_consecutive_epochs():
    samples = {"empty": list(range(10)), "put": list(range(10)), "fetch": list(range(10)),
               "round_trip": list(range(10))}
    blocks = rma._block_medians(samples, 5)
    assert [b["empty_s"] for b in blocks] == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert len(rma._block_medians({k: v[:3] for k, v in samples.items()}, 5)) == 3


# ---------------------------------------------------------------------------
# calibrate run --tracer


@pytest.fixture
def small_quick_mode(monkeypatch):
    """``--quick`` made smaller still: one measuring process (this one), a short
    timer calibration; with --max-size 4KiB the copy cost takes a moment once the
    buffer a fresh copy's sample rewrites first is 1 MiB instead of twice the
    last-level cache, with no cache-sized warm-up (what a copy costs is not under
    test here; each rewrite of the default buffer took more than the copy itself)."""
    quick = MODES["quick"]
    copy = dataclasses.replace(quick.copy, processes=1, evict_bytes=1 << 20, warmup=False)
    monkeypatch.setitem(MODES, "quick", dataclasses.replace(
        quick, copy=copy, timer_pairs=500, n_resamples=99))


def test_run_refuses_a_noisy_per_record_cost_and_writes_nothing(tmp_path, monkeypatch,
                                                                 small_quick_mode):
    monkeypatch.setattr(targets, "record_overhead", fake_record(1.0e-6, 2.4e-6))
    out = tmp_path / "p.json"
    code, _, err = calibrate("run", "--quick", "--quiet", "--max-size", "4KiB", "-o", out)
    assert code == 4, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("calibrate: error: per-record cost event_overhead (tracer record) "
                          "not written: its interquartile range 2.4 µs is 240 % of")
    assert "quiet machine" in err and f"{out} not written" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_max_spread_is_the_stated_fraction(tmp_path, monkeypatch, small_quick_mode):
    monkeypatch.setattr(targets, "record_overhead", fake_record(1.0e-6, 0.3e-6))
    code, _, err = calibrate("run", "--quick", "--quiet", "--max-spread", "0.2",
                             "--max-size", "4KiB", "-o", tmp_path / "p.json")
    assert code == 4 and "30 % of" in err and "limit 20 %" in err
    code, _, err = calibrate("run", "--quick", "--max-spread", "0", "-o", tmp_path / "p.json")
    assert code == 2


def test_default_run_measures_the_project_tracer_and_names_it(tmp_path, small_quick_mode):
    """The default tracer is the project's mpi4py tracer: its record path, not the
    otf2 Python writer (3.6 µs per record where the tracer costs a few hundred ns).
    --max-spread is lifted: how busy this machine is is not under test here."""
    out = tmp_path / "p.json"
    code, stdout, err = calibrate("run", "--quick", "--max-size", "4KiB", "--max-spread",
                                  "1e6", "-o", out)
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["tracer"] == "record" and Platform.load(out).tracer == "record"
    assert "writer_probe" not in data and data["overhead_source"] == "record_path"
    costs = data["calibration"]["seconds_per_record"]
    assert data["event_overhead"] == pytest.approx(costs["function_call"]["median"] / 2)
    assert {"MpiIsend", "ThreadAcquireLock", "Enter", "Leave"} <= set(
        data["event_overhead_by_kind"])
    assert isinstance(data["copy_time"], list) and "tracer: record" in stdout


def test_scorep_run_without_the_microbenchmarks_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "MICROBENCH_DIR", tmp_path)
    code, _, err = calibrate("run", "--tracer", "scorep", "-o", tmp_path / "p.json")
    assert code == 3 and err.count("\n") == 1
    assert "microbench-scorep not found" in err and "make -C" in err
    code, _, err = calibrate("run", "--tracer", "eztrace", "-o", tmp_path / "p.json")
    assert code == 2 and "--command and --baseline" in err
    code, _, err = calibrate("run", "--tracer", "record", "--command", "x {n}",
                             "-o", tmp_path / "p.json")
    assert code == 2 and "external tracers" in err
    assert not (tmp_path / "p.json").exists()


def test_external_overhead_with_a_wide_interval_is_refused():
    info = {"overhead_seconds": 300e-9, "ci95": [100e-9, 500e-9]}
    found = targets.unsteady(targets.external_overhead("scorep", info))
    assert found is not None and "95 % confidence interval" in found.why
    info = {"overhead_seconds": 300e-9, "ci95": [280e-9, 320e-9]}
    assert targets.unsteady(targets.external_overhead("scorep", info)) is None


def test_overhead_update_needs_the_tracer(tmp_path):
    target = tmp_path / "p.json"
    target.write_text(json.dumps({"event_overhead": 1e-6, "copy_time": []}))
    code, _, err = calibrate("overhead", "--command", "a {n}", "--baseline", "b {n}",
                             "--events-per-iteration", "2", "--update", target)
    assert code == 2 and "--update needs --tracer" in err


# ---------------------------------------------------------------------------
# make -C calibration without Score-P


def test_scorep_build_without_scorep_fails_with_one_line():
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    proc = subprocess.run(["make", "-s", "-C", str(ROOT / "calibration"), "microbench-scorep",
                           "SCOREP=no-such-scorep-here"], capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "no-such-scorep-here not found" in lines[0] and "Score-P" in lines[0]
    assert not (ROOT / "calibration" / "microbench-scorep").exists()
