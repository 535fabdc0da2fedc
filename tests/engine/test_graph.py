"""compensate.engine.graph: R1 overcompensation is counted for real shortfalls only."""

from __future__ import annotations

import pytest

from compensate.engine import EngineOptions, compensate
from compensate.model import ENTER, LEAVE, Definitions, Location, RowBuilder, Trace
from compensate.platform import Platform


def _calls(spacing: int, n: int = 6) -> Trace:
    """One location, Enter/Leave of one region, every record ``spacing`` ns apart."""
    rows = RowBuilder()
    for i in range(n):
        rows.add(i * spacing, ENTER if i % 2 == 0 else LEAVE, region=1)
    defs = Definitions(timer_resolution=10**9, locations={0: Location(0)}, regions={1: "f"})
    return Trace(defs, {0: rows.build()})


@pytest.mark.parametrize("overhead", [1.0000000000000001e-07, 1e-7, 3e-7 / 3])
def test_a_gap_exactly_the_overhead_is_not_overcompensated(overhead):
    # the overhead in ticks is a float product (1.0000000000000001e-07 s is
    # 100.00000000000001 ticks); a 100-tick gap holds it exactly: nothing to report
    r = compensate(_calls(100), Platform(event_overhead=overhead), EngineOptions(bound="lower"))
    assert r.stats.overcompensated == 0
    assert r.trace.events[0].time.tolist() == [0] * 6


def test_a_real_shortfall_is_counted_by_kind():
    r = compensate(_calls(99), Platform(event_overhead=1e-7), EngineOptions(bound="lower"))
    assert r.stats.overcompensated == 5
    assert r.stats.overcompensated_by_kind == {"Enter": 2, "Leave": 3}
    assert r.stats.overcompensated_max_s == pytest.approx(1e-9)
