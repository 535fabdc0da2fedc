"""Each record's own overhead in an OTF2 trace (compensate/formats/otf2/overheads.py):
the COMPENSATE::OVERHEAD attribute read by both readers into the ``overhead``
column, and used by the engine in place of the location's in-situ table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import otf2
import otf2.events as E
import pytest
from otf2.enums import Type

import compensate as c
from compensate import nativebuild
from compensate.cli import main
from compensate.formats.otf2.overheads import ATTRIBUTE, attribute_column, event_overheads
from compensate.model import NONE

TABLE = {"format": 1, "by_kind": {"Enter": 100e-9, "Leave": 200e-9}}
#: location 0: Enter f, Leave f, Enter f, Leave f, 1000 ns apart; own costs 300, -, 50,
#: 400 ns. Location 1: the same records without any attribute and without a table.
OWN = [300, None, 50, 400]


def _archive(tmp_path: Path) -> Path:
    anchor = tmp_path / "a" / "traces.otf2"
    with otf2.writer.open(str(anchor.parent), archive_name="traces",
                          timer_resolution=10**9) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = []
        for r in range(2):
            grp = d.location_group(f"rank {r}", system_tree_parent=node)
            locs.append(d.location(f"thread {r}", group=grp))
        f = d.region("f")
        attr = d.attribute(ATTRIBUTE, "the tracer's cost after this record (ns)",
                           Type.UINT64)
        d.location_property(locs[0], "COMPENSATE::INSITU_OVERHEAD", Type.STRING,
                            json.dumps(TABLE))
        for r, loc in enumerate(locs):
            ew = w.event_writer_from_location(loc)
            for i, own in enumerate(OWN):
                cls = E.Enter if i % 2 == 0 else E.Leave
                attrs = {attr: own} if own is not None and r == 0 else None
                ew(cls(1000 * i, f, attributes=attrs))
    return anchor


def test_attribute_column_hand_computed() -> None:
    """Four records' kept attribute lists (reference, type, value triples): the
    attribute (ref 5) in the first slot, in the second, absent, and a list the
    reader could not read (count -1 as unsigned): 7, 9, NONE, NONE."""
    nattrs = np.array([1, 2, 1, 0xFFFFFFFF], dtype=np.uint32)
    attrs = np.zeros((4, 3 * 8), dtype=np.uint64)
    attrs[0, :3] = (5, 4, 7)
    attrs[1, :6] = (2, 4, 1, 5, 4, 9)
    attrs[2, :3] = (2, 4, 11)
    attrs[3, :3] = (5, 4, 13)
    assert attribute_column(nattrs, attrs, 5).tolist() == [7, 9, NONE, NONE]
    # a value beyond int32 is clipped, not wrapped
    attrs[0, 2] = 2**40
    assert attribute_column(nattrs, attrs, 5)[0] == 2**31 - 1


def test_event_overheads_of_event_objects() -> None:
    class Attr:
        def __init__(self, name: str) -> None:
            self.name = name

    class Ev:
        def __init__(self, attributes: dict | None) -> None:
            self.attributes = attributes

    own, other = Attr(ATTRIBUTE), Attr("answer")
    events = [Ev(None), Ev({other: 1, own: 250}), Ev({other: 2})]
    assert event_overheads(events).tolist() == [NONE, 250, NONE]
    assert event_overheads([Ev(None), Ev({other: 3})]) is None


@pytest.mark.parametrize("native", [True, False], ids=["C path", "otf2 package"])
def test_both_readers_fill_the_column(tmp_path: Path, native: bool, monkeypatch) -> None:
    monkeypatch.setenv(nativebuild.ENV_SWITCH, "1" if native else "0")
    trace = c.read(_archive(tmp_path))
    assert trace.events[0].overhead.tolist() == [NONE if o is None else o for o in OWN]
    assert trace.events[1].overhead.tolist() == [NONE] * 4


def test_a_records_own_overhead_replaces_its_tables(tmp_path: Path, capsys) -> None:
    """Hand-computed R1 on location 0: the Enter at 0 cost 300 ns (its own), the
    Leave at 1000 the table's 200, the Enter at 2000 its own 50: [0, 700, 1500,
    2450]; with the tables alone it would be [0, 900, 1700, 2600]. Location 1 has
    no table: nothing removed. Streamed (default, and in segments of 2 records),
    in memory and on the otf2 package path alike; ``--overhead 100ns`` (the
    command line over the trace's own) ignores the attribute."""
    anchor = _archive(tmp_path)
    want = [0, 700, 1500, 2450]
    result = c.compensate(c.read(anchor))
    assert result.trace.events[0].time.tolist() == want
    assert result.trace.events[1].time.tolist() == [0, 1000, 2000, 3000]
    assert "per_record" in result.summary["overhead"]
    for k, extra in enumerate([[], ["--segment-records", "2"], ["--in-memory"]]):
        out = tmp_path / f"o{k}" / "traces.otf2"
        assert main([str(anchor), str(out), "--quiet", *extra]) == 0
        assert c.read(out).events[0].time.tolist() == want
    out = tmp_path / "fixed" / "traces.otf2"
    assert main([str(anchor), str(out), "--quiet", "--overhead", "100ns"]) == 0
    assert c.read(out).events[0].time.tolist() == [0, 900, 1800, 2700]
    # the output keeps the attribute (the measured run's costs), as other tools see it
    again = c.read(tmp_path / "o0" / "traces.otf2")
    assert again.events[0].overhead.tolist() == [300, NONE, 50, 400]
    tables = c.read(anchor)
    for ev in tables.events.values():
        ev.overhead[:] = NONE
    assert c.compensate(tables).trace.events[0].time.tolist() == [0, 900, 1700, 2600]
    capsys.readouterr()


def test_the_tracer_writes_the_name_the_readers_look_for() -> None:
    from calibration.tracer import insitu  # noqa: PLC0415 - the tracer's side

    assert insitu.ATTRIBUTE == ATTRIBUTE
