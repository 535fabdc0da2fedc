"""A platform's overhead at the trace's own speed (compensate/speed.py): the pair
medians by hand and streamed, the factor and its limits, the scaled platform, a
run slowed by a known factor, and the command's and the API's use of it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compensate as c
from compensate.cli.compensate import main
from compensate.platform import Platform, PlatformError
from compensate.speed import (
    LIMITS,
    MIN_COUNT,
    PairGaps,
    at_trace_speed,
    scaled,
    speed_factor,
    trace_pairs,
)


def _enter_leave(tmp_path: Path, gaps: list[int]) -> Path:
    """One location: Enter/Leave pairs whose Enter -> Leave gaps are ``gaps`` (ns),
    1000 ns from a Leave to the next Enter."""
    lines, t = [], 0
    for g in gaps:
        lines += [f"{t} 0 Enter region=0", f"{t + g} 0 Leave region=0"]
        t += g + 1000
    path = tmp_path / "el.trace"
    path.write_text("compensate-trace 1\ntimer_resolution 1000000000\nlocation 0 group=0\n"
                    'region 0 "f"\nevents\n' + "\n".join(lines) + "\n")
    return path


def test_pair_medians_by_hand_and_in_pieces(tmp_path: Path) -> None:
    trace = c.read(_enter_leave(tmp_path, [40, 70, 50, 1000, 60]))
    whole = trace_pairs(trace.definitions, [trace.events], ["Enter>Leave", "Leave>Enter"])
    assert whole["Enter>Leave"] == (pytest.approx(60e-9), 5)
    assert whole["Leave>Enter"] == (pytest.approx(1000e-9), 4)
    ev = trace.events[0]
    for cut in range(1, len(ev)):  # every split, the gap across it counted once
        gaps = PairGaps(trace.definitions, ["Enter>Leave"])
        gaps.add(0, ev.slice(0, cut))
        gaps.add(0, ev.slice(cut, len(ev)))
        assert gaps.medians() == {"Enter>Leave": (pytest.approx(60e-9), 5)}
    even = c.read(_enter_leave(tmp_path, [40, 70, 50, 60]))
    assert trace_pairs(even.definitions, [even.events], ["Enter>Leave"]) == \
        {"Enter>Leave": (pytest.approx(55e-9), 4)}


def test_factor_median_of_frequent_pairs_and_limits() -> None:
    ref = {"Enter>MpiSend": 50e-9, "MpiRecv>Leave": 40e-9, "Enter>MpiIsend": 60e-9}
    found = {"Enter>MpiSend": (60e-9, 500), "MpiRecv>Leave": (48e-9, MIN_COUNT),
             "Enter>MpiIsend": (600e-9, MIN_COUNT - 1)}  # too rare to count
    factor, info = speed_factor(ref, found)
    assert factor == pytest.approx(1.2)
    assert info["used"] == ["Enter>MpiSend", "MpiRecv>Leave"]
    assert info["pairs"]["Enter>MpiIsend"]["count"] == MIN_COUNT - 1
    factor, info = speed_factor(ref, {"Enter>MpiIsend": (60e-9, 5)})
    assert factor is None and "none of the platform's reference pairs" in info["why"]
    for far in (LIMITS[0] * 0.9, LIMITS[1] * 1.1):
        factor, info = speed_factor(ref, {"Enter>MpiSend": (50e-9 * far, 500)})
        assert factor is None and "another tracer" in info["why"]
        assert info["measured"] == pytest.approx(far)


def test_scaled_platform_scales_per_record_costs_only() -> None:
    p = Platform(1e-7, {"Enter": 5e-8, "MpiRecv": 4e-8}, np.array([64.0]), np.array([2e-8]),
                 network=(1e-6, 1e-10), before_stamp={"MpiRecv": 1e-8},
                 speed_reference={"MpiRecv>Leave": 4e-8},
                 overhead_by_region={"pthread_mutex_lock": {"Enter": 2e-7, "Leave": 1e-7}},
                 before_stamp_by_region={"pthread_mutex_lock": {"Leave": 4e-8}})
    q = scaled(p, 1.5)
    assert q.event_overhead == pytest.approx(1.5e-7)
    assert q.overhead_by_kind == pytest.approx({"Enter": 7.5e-8, "MpiRecv": 6e-8})
    assert q.before_stamp == pytest.approx({"MpiRecv": 1.5e-8})
    assert q.overhead_by_region["pthread_mutex_lock"] == pytest.approx(
        {"Enter": 3e-7, "Leave": 1.5e-7})
    assert q.before_stamp_by_region["pthread_mutex_lock"] == pytest.approx({"Leave": 6e-8})
    assert p.overhead_by_region["pthread_mutex_lock"]["Enter"] == 2e-7  # (p unchanged)
    assert q.copy_time(64) == p.copy_time(64) and q.network == p.network
    assert q.speed_reference == p.speed_reference
    assert Platform.from_dict(q.to_dict()).speed_reference == p.speed_reference


def test_platform_file_refuses_a_bad_reference(tmp_path: Path) -> None:
    for ref, what in (({"Enter-Leave": 1e-8}, "joined by '>'"),
                      ({"Enter>Leav": 1e-8}, "joined by '>'"),
                      ({"Enter>Leave": 0}, "must be > 0")):
        with pytest.raises(PlatformError, match=what):
            Platform.from_dict({"event_overhead": 1e-8, "copy_time": [],
                                "speed_reference": ref})


def _gaps(n: int = 300, seed: int = 0) -> list[int]:
    """``n`` Enter -> Leave gaps (ns) around 50 ns, a tenth of them cold (a few us)."""
    rng = np.random.default_rng(seed)
    g = rng.normal(50, 4, n).clip(30, None)
    cold = rng.random(n) < 0.1
    g[cold] = rng.uniform(500, 5000, cold.sum())
    return [int(x) for x in np.rint(g)]


@settings(max_examples=25, deadline=None)
@given(s=st.floats(0.6, 1.8), seed=st.integers(0, 2**16))
def test_a_run_slowed_by_s_gives_factor_s(tmp_path_factory, s: float, seed: int) -> None:
    """The same run with every gap ``s`` times as long has factor ``s`` against the
    first run's medians (to the 1 ns rounding of ~50 ns gaps)."""
    tmp = tmp_path_factory.mktemp("slow")
    gaps = _gaps(seed=seed)
    base = c.read(_enter_leave(tmp, gaps))
    ref = {p: g for p, (g, _) in trace_pairs(base.definitions, [base.events],
                                              ["Enter>Leave"]).items()}
    slow = c.read(_enter_leave(tmp, [int(round(g * s)) for g in gaps]))
    factor, info = speed_factor(ref, trace_pairs(slow.definitions, [slow.events], ref))
    assert factor == pytest.approx(s, rel=0.03), info


def _platform(tmp_path: Path, reference_ns: float) -> Path:
    path = tmp_path / f"p{reference_ns}.json"
    path.write_text(json.dumps({"event_overhead": 4e-9, "copy_time": [],
                                "event_overhead_by_kind": {"Enter": 1.5e-8, "Leave": 1e-8},
                                "overhead_before_stamp": {"Leave": 2e-9},
                                "speed_reference": {"Enter>Leave": reference_ns * 1e-9}}))
    return path


def test_command_scales_on_every_path_and_api_agrees(tmp_path: Path) -> None:
    """A platform whose reference is 40 ns on a trace whose median is 50 ns: the
    command scales its costs by 1.25 in memory and streamed alike, the output
    equals the one with those costs written in the file, and the API agrees."""
    src = _enter_leave(tmp_path, _gaps())
    trace = c.read(src)
    median = trace_pairs(trace.definitions, [trace.events], ["Enter>Leave"])["Enter>Leave"][0]
    pf = _platform(tmp_path, median * 1e9 / 1.25)
    out = {}
    for name, extra in (("mem", ["--in-memory"]), ("stream", ["--segment-records", "64"])):
        s = tmp_path / f"{name}.json"
        assert main([str(src), str(tmp_path / f"{name}.trace"), "--platform", str(pf),
                     "--summary", str(s), "--quiet", *extra]) == 0
        out[name] = json.loads(s.read_text())
    speed = out["mem"]["overhead"]["speed"]
    assert speed["factor"] == pytest.approx(1.25)
    assert out["stream"]["overhead"]["speed"] == speed
    assert (tmp_path / "mem.trace").read_text() == (tmp_path / "stream.trace").read_text()
    p = Platform.load(pf)
    hand = c.compensate(trace, platform=scaled(Platform(
        p.event_overhead, p.overhead_by_kind, before_stamp=p.before_stamp), 1.25))
    api = c.compensate(trace, platform=pf)
    assert api.summary["overhead"]["speed"]["factor"] == pytest.approx(1.25)
    assert np.array_equal(api.trace.events[0].time, hand.trace.events[0].time)
    assert out["mem"]["approximated_span_s"] == pytest.approx(hand.summary["approximated_span_s"])
    plain = c.compensate(trace, platform=pf, speed="platform")
    assert "speed" not in plain.summary["overhead"]
    assert plain.summary["approximated_span_s"] > api.summary["approximated_span_s"]
    s = tmp_path / "plain.json"
    assert main([str(src), str(tmp_path / "plain.trace"), "--platform", str(pf), "--speed",
                 "platform", "--summary", str(s), "--quiet"]) == 0
    assert json.loads(s.read_text())["approximated_span_s"] == pytest.approx(
        plain.summary["approximated_span_s"])


def test_command_says_why_it_does_not_scale(tmp_path: Path, capsys) -> None:
    src = _enter_leave(tmp_path, _gaps())
    pf = _platform(tmp_path, 10.0)  # the trace's pairs 5x the reference: not this tracer
    s = tmp_path / "s.json"
    assert main([str(src), str(tmp_path / "o.trace"), "--platform", str(pf),
                 "--summary", str(s)]) == 0
    err = capsys.readouterr().err
    assert "not scaled to the trace's speed" in err and "another tracer" in err
    speed = json.loads(s.read_text())["overhead"]["speed"]
    assert speed["factor"] == 1.0 and speed["measured"] == pytest.approx(5.0, rel=0.05)
    with pytest.raises(ValueError, match="speed must be one of"):
        c.compensate(c.read(src), platform=pf, speed="fast")


def test_at_trace_speed_leaves_a_platform_without_pairs_alone() -> None:
    p = Platform(1e-7, speed_reference={"Enter>MpiSend": 5e-8})
    same, info = at_trace_speed(p, {})
    assert same is p and info["factor"] == 1.0 and "why" in info
