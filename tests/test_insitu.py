"""The in-situ overhead tables a trace carries (compensate/insitu.py): parsed,
round-tripped through both formats, and applied per location, kind and region."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compensate as c
from compensate import insitu
from compensate.model import TraceError
from compensate.platform import Platform

from .randomtrace import random_trace

TABLE0 = {"format": 1, "by_kind": {"Enter": 100e-9, "Leave": 200e-9},
          "by_region": {"g": {"Enter": 300e-9}}, "measured": {"note": "kept, not used"}}


F_G = ((0, "Enter", 0), (1000, "Leave", 0), (2000, "Enter", 1), (3000, "Leave", 1))


def _text_trace(tmp_path: Path, table: dict | None = TABLE0, records: tuple = F_G,
                name: str = "t.trace") -> Path:
    """Two locations with the same ``records`` (f then g: times in ns); location 0
    carries ``table``."""
    field = f" insitu={json.dumps(json.dumps(table))}" if table is not None else ""
    path = tmp_path / name
    path.write_text(
        "compensate-trace 1\ntimer_resolution 1000000000\n"
        f"location 0 group=0{field}\nlocation 1 group=1\n"
        'region 0 "f"\nregion 1 "g"\nevents\n'
        + "".join(f"{t} {loc} {k} region={r}\n" for loc in (0, 1) for t, k, r in records))
    return path


def test_parse_refuses_bad_tables_in_one_line() -> None:
    for text, what in (("{", "is not JSON"), ('{"format": 2}', '"format": 1'),
                       ('{"format": 1, "by_kind": {"Entr": 1e-7}}', "unknown record kind"),
                       ('{"format": 1, "by_kind": {"Enter": -1}}', "seconds >= 0"),
                       ('{"format": 1, "by_region": {"g": {"Exit": 1}}}', "by_region.g")):
        with pytest.raises(TraceError, match=what) as exc:
            insitu.parse(text, "run/traces.otf2", 3)
        assert "\n" not in str(exc.value) and "location 3" in str(exc.value)


def test_text_format_round_trip_and_bad_table(tmp_path: Path) -> None:
    trace = c.read(_text_trace(tmp_path))
    assert trace.definitions.insitu == {0: TABLE0}
    c.write(trace, tmp_path / "again.trace")
    assert c.read(tmp_path / "again.trace").definitions.insitu == {0: TABLE0}
    c.write(trace, tmp_path / "otf2" / "traces.otf2")  # a LocationProperty there
    assert c.read(tmp_path / "otf2" / "traces.otf2").definitions.insitu == {0: TABLE0}
    bad = _text_trace(tmp_path, {"format": 1, "by_kind": {"Enter": "fast"}})
    with pytest.raises(TraceError, match=r"t\.trace:3: location 0: .*by_kind\.Enter must"):
        c.read(bad)


def test_overheads_by_location_kind_and_region(tmp_path: Path) -> None:
    """Hand-computed R1: location 0 removes 100 ns after Enter f, 200 ns after
    Leave f, 300 ns after Enter g (its region's own) and 200 ns after Leave g;
    location 1 has no table and no platform: nothing removed."""
    trace = c.read(_text_trace(tmp_path))
    result = c.compensate(trace)  # no platform, no overhead: the trace's tables
    assert result.summary["overhead"]["source"] == "trace in-situ"
    assert result.trace.events[0].time.tolist() == [0, 900, 1700, 2400]
    assert result.trace.events[1].time.tolist() == [0, 1000, 2000, 3000]
    assert result.summary["overcompensated_records"] == 0


def test_platform_of_maps_region_names_and_keeps_copy_cost(tmp_path: Path) -> None:
    defs = c.read(_text_trace(tmp_path)).definitions
    base = Platform(5e-7, {}, np.array([64.0]), np.array([1e-8]), network=(1e-6, 1e-9),
                    rma_release="after_completion")
    plat = insitu.platform_of(defs, base)
    # the file's other platform properties stay (the rma entry used to be dropped)
    assert (plat.network, plat.rma_release) == ((1e-6, 1e-9), "after_completion")
    assert plat.by_location == {0: ({"Enter": 100e-9, "Leave": 200e-9}, {1: (300e-9, None)})}
    assert plat.copy_time(64) == pytest.approx(1e-8)
    kinds = np.array([0, 1, 0, 1])  # Enter, Leave, Enter, Leave
    regions = np.array([0, 0, 1, 1])
    assert plat.location_overheads(0, kinds, regions) * 1e9 == pytest.approx([100, 200, 300, 200])
    assert plat.location_overheads(1, kinds, regions) * 1e9 == pytest.approx([500] * 4)


def test_platform_of_keeps_the_files_region_overheads_where_there_is_no_table(
        tmp_path: Path) -> None:
    """A ``prefer_insitu`` file's per-region overhead is the file's overhead of
    the locations without a table (as its per-kind one), its parts before the
    stamp dropped with the kinds' (the tables measure the cost after it)."""
    defs = c.read(_text_trace(tmp_path)).definitions
    base = Platform(5e-7, overhead_by_region={"g": {"Leave": 7e-7}},
                    before_stamp_by_region={"g": {"Leave": 1e-7}})
    plat = insitu.platform_of(defs, base)
    assert plat.overhead_by_region == {"g": {"Leave": 7e-7}}
    assert plat.before_stamp_by_region == {}
    kinds, regions = np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1])
    # location 0: its table (Leave g: its kind's 200 ns); location 1: the file's
    assert plat.location_overheads(0, kinds, regions, names=defs.regions) * 1e9 == \
        pytest.approx([100, 200, 300, 200])
    assert plat.location_overheads(1, kinds, regions, names=defs.regions) * 1e9 == \
        pytest.approx([500, 500, 500, 700])


# -- cold-call curves (issue #22, cold22) ------------------------------------------------

COLD = {"w_s": [0.0, 1000e-9], "extra_s": {"function": [0.0, 250e-9]},
        "regions": {"g": "function"}}


def _cold_trace(tmp_path: Path, table: dict) -> Path:
    """Location 0 (with ``table``): f, then g twice; location 1 the same, no table."""
    return _text_trace(tmp_path, table, (*F_G, (6000, "Enter", 1), (7000, "Leave", 1)),
                       "cold.trace")


def test_cold_curve_hand_computed(tmp_path: Path) -> None:
    """Enter 100 ns, Leave 200 ns; g's Enters are cold calls with extra(w) = w/4
    up to w = 1 µs, 250 ns beyond. Gap Leave f -> Enter g: 1000 - 200 = 800 ns
    left by R1 = w + extra(w): w = 640, charge 160. Gap Leave g -> Enter g:
    2800 ns, beyond the curve's 1250: w = 2550, charge 250. Enter f (no curve)
    and location 1 (no table) are not charged."""
    table = {**TABLE0, "by_region": {}, "cold": COLD}
    trace = c.read(_cold_trace(tmp_path, table))
    assert trace.definitions.insitu[0]["cold"] == COLD
    result = c.compensate(trace, cold_calls=True)
    assert result.trace.events[0].time.tolist() == [0, 900, 1540, 2440, 4990, 5890]
    assert result.trace.events[1].time.tolist() == [0, 1000, 2000, 3000, 6000, 7000]
    assert result.summary["overcompensated_records"] == 0
    # without the curve, or without --cold-calls (the default): the tables alone
    plain = c.read(_cold_trace(tmp_path, {**TABLE0, "by_region": {}}))
    assert c.compensate(plain, cold_calls=True).trace.events[0].time.tolist() == \
        [0, 900, 1700, 2600, 5400, 6300]
    assert c.compensate(trace).trace.events[0].time.tolist() == \
        [0, 900, 1700, 2600, 5400, 6300]


def test_cold_curve_never_takes_more_than_the_gap(tmp_path: Path) -> None:
    """A curve far larger than the gaps: each gap before a cold Enter is charged
    what R1 left of it at most (the Enter meets its predecessor's time plus its
    overhead), never more: nothing overcompensated."""
    huge = {"w_s": [0.0, 1e-9], "extra_s": {"function": [0.0, 1e-3]},
            "regions": {"g": "function"}}
    table = {**TABLE0, "by_region": {}, "cold": huge}
    result = c.compensate(c.read(_cold_trace(tmp_path, table)), cold_calls=True)
    t = result.trace.events[0].time.tolist()
    assert t == [0, 900, 900, 1800, 1800, 2700]
    assert result.summary["overcompensated_records"] == 0


def test_cold_parse_errors_are_one_line_naming_the_location() -> None:
    base = {"format": 1, "by_kind": {}}
    for cold, what in (([1], "cold: must be an object"),
                       ({"w_s": [], "extra_s": {}}, "w_s must be a non-empty list"),
                       ({"w_s": [0, 0], "extra_s": {}}, "w_s must increase"),
                       ({"w_s": [0, -1e-6], "extra_s": {}}, "seconds >= 0"),
                       ({"w_s": [0, 1e-6], "extra_s": {"mpi": [0]}}, "as long as w_s"),
                       ({"w_s": [0, 1e-6], "extra_s": {"mpi": [2e-7, 1e-7]}},
                        "must not decrease"),
                       ({"w_s": [0, 1e-6], "extra_s": {"mpi": [0, 1e-7]},
                         "regions": {"MPI_Send": "lock"}}, "names no curve")):
        with pytest.raises(TraceError, match=what) as exc:
            insitu.parse(json.dumps({**base, "cold": cold}), "run/traces.otf2", 5)
        assert "\n" not in str(exc.value) and "location 5" in str(exc.value)


def test_platform_of_maps_cold_regions_and_can_leave_them_out(tmp_path: Path) -> None:
    table = {**TABLE0, "cold": COLD}
    defs = c.read(_cold_trace(tmp_path, table)).definitions
    plat = insitu.platform_of(defs, use_cold=True)
    assert plat.cold == {0: ([0.0, 1000e-9], {1: [0.0, 250e-9]})}
    assert insitu.describe(plat)["0"]["cold"] == {"w_s": [0.0, 1000e-9], "regions": [1]}
    assert set(insitu.describe(plat)) == {"0"}  # location 1 has no table
    assert insitu.platform_of(defs).cold == {}  # off by default


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 4), st.integers(1, 30), st.integers(0, 10**6),
       st.sampled_from(["lower", "upper"]))
def test_cold_charge_keeps_order_and_counts(n, steps, seed, bound):
    """On random valid traces with a cold curve on every location and region: no
    record moves before its predecessor, no more records are overcompensated
    than without the curve, verification holds; an all-zero curve changes
    nothing."""
    rnd = random.Random(seed)
    trace = random_trace(lambda lo, hi: rnd.randint(lo, hi), n, steps)
    res = float(trace.definitions.timer_resolution)
    base = Platform(300 / res)

    def cold(extra):
        return dataclasses.replace(base, cold={
            loc: ([0.0, 500 / res, 2500 / res], {r: extra for r in trace.definitions.regions})
            for loc in trace.events})

    ref = c.compensate(trace, bound=bound, platform=base)
    got = c.compensate(trace, bound=bound, platform=cold([0.0, 200 / res, 900 / res]))
    for loc, ev in got.trace.events.items():
        assert np.all(np.diff(ev.time) >= 0), loc
    assert got.summary["overcompensated_records"] <= ref.summary["overcompensated_records"]
    zero = c.compensate(trace, bound=bound, platform=cold([0.0, 0.0, 0.0]))
    for loc, ev in zero.trace.events.items():
        np.testing.assert_array_equal(ev.time, ref.trace.events[loc].time)


def test_cold_calls_flag_of_the_command(tmp_path: Path) -> None:
    """``compensate IN OUT --cold-calls`` charges the curves; without the flag
    the tables alone are used (the default), and the summary names the curves
    only where they were used."""
    from compensate.cli import main  # noqa: PLC0415

    path = _cold_trace(tmp_path, {**TABLE0, "by_region": {}, "cold": COLD})
    for flag, want in (([], [0, 900, 1700, 2600, 5400, 6300]),
                       (["--cold-calls"], [0, 900, 1540, 2440, 4990, 5890])):
        out, summary = tmp_path / f"out{len(flag)}.trace", tmp_path / f"s{len(flag)}.json"
        assert main([str(path), str(out), "--summary", str(summary), "--quiet", *flag]) == 0
        assert c.read(out).events[0].time.tolist() == want
        by_location = json.loads(summary.read_text())["overhead"]["by_location"]
        assert ("cold" in by_location["0"]) == bool(flag)


def test_a_table_nested_too_deeply_is_one_line_refusal():
    """JSON nested deeper than the interpreter's recursion limit was a RecursionError
    (exit 1, "please report it"); it is a refusal of the trace's property."""
    with pytest.raises(TraceError, match="nested too deeply"):
        insitu.parse("[" * 100_000 + "]" * 100_000, "t.otf2", 0)
