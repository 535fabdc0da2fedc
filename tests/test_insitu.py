"""The in-situ overhead tables a trace carries (compensate/insitu.py): parsed,
round-tripped through both formats, and applied per location, kind and region."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import compensate as c
from compensate import insitu
from compensate.model import TraceError
from compensate.platform import Platform

TABLE0 = {"format": 1, "by_kind": {"Enter": 100e-9, "Leave": 200e-9},
          "by_region": {"g": {"Enter": 300e-9}}, "measured": {"note": "kept, not used"}}


def _text_trace(tmp_path: Path, table: dict | None = TABLE0) -> Path:
    """Two locations, f then g on each, times in ns; location 0 carries ``table``."""
    field = f" insitu={json.dumps(json.dumps(table))}" if table is not None else ""
    path = tmp_path / "t.trace"
    path.write_text(
        "compensate-trace 1\ntimer_resolution 1000000000\n"
        f"location 0 group=0{field}\nlocation 1 group=1\n"
        'region 0 "f"\nregion 1 "g"\nevents\n'
        + "".join(f"{t} {loc} {k} region={r}\n" for loc in (0, 1) for t, k, r in
                  ((0, "Enter", 0), (1000, "Leave", 0), (2000, "Enter", 1),
                   (3000, "Leave", 1))))
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
