"""Craft small OTF2 archives whose global definitions are written exactly as
given (in that order, duplicates and dangling references included), as other
tracers write them: the ``otf2`` package's writer would renumber and reorder
them. The records are written with the package's event writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _otf2
import otf2
import otf2.events as oev
from otf2.definition_writer import DefinitionWriter
from otf2.enums import LocationGroupType, LocationType, Paradigm, RegionFlag, RegionRole

UNDEF = 0xFFFFFFFF


class Ref:
    """A definition reference as an ``otf2`` event object holds it."""

    def __init__(self, ref: int) -> None:
        self._ref = ref


class _RawWriter(otf2.writer.Writer):
    raw: tuple = ()

    def _write_global_definitions(self) -> None:
        with DefinitionWriter(self) as w:
            for kind, args in self.raw:
                getattr(_otf2, "GlobalDefWriter_Write" + kind)(w._handle, *args)


def basic_definitions(events: int = 4, group: int = 0) -> list[tuple[str, tuple]]:
    """One process, one thread (Location 0 declaring ``events`` records, in
    location group ``group``), Region 0 "main", Comm-free."""
    return [
        ("ClockProperties", (1000000000, 0, 1000, UNDEF * (2**32 + 1))),
        ("String", (0, "main")),
        ("String", (1, "node")),
        ("String", (2, "P#0")),
        ("String", (3, "P#0T#0")),
        ("SystemTreeNode", (0, 1, 1, UNDEF)),
        ("LocationGroup", (0, 2, LocationGroupType.PROCESS, 0, UNDEF)),
        ("Location", (0, 3, LocationType.CPU_THREAD, events, group)),
        ("Region", (0, 0, 0, 0, RegionRole.FUNCTION, Paradigm.USER, RegionFlag.NONE, UNDEF,
                    0, 0)),
    ]


def thread_records() -> list[Any]:
    """ThreadBegin (thread contingent UNDEFINED), Enter/Leave main, ThreadEnd
    (UNDEFINED): what an older EZTrace wrote for each thread."""
    return [oev.ThreadBegin(10, Ref(UNDEF), 0), oev.Enter(20, Ref(0)),
            oev.Leave(500, Ref(0)), oev.ThreadEnd(600, Ref(UNDEF), 0)]


def craft(directory: Path, raw: list[tuple[str, tuple]],
          records: list[Any] | None = None) -> Path:
    """Write the archive ``directory/traces.otf2``: global definitions ``raw``
    (kind, arguments of ``_otf2.GlobalDefWriter_Write<kind>``) in this order,
    and ``records`` (``otf2`` event objects; default :func:`thread_records`) on
    location 0. Returns the anchor file's path."""
    writer = _RawWriter(str(directory), timer_resolution=1000000000)
    writer.raw = tuple(raw)
    reg = writer.definitions
    loc = reg.location("P#0T#0", group=reg.location_group(
        "P#0", system_tree_parent=reg.system_tree_node("node")))
    assert loc._ref == 0
    ew = writer.event_writer_from_location(loc)
    for event in thread_records() if records is None else records:
        ew.write(event)
    writer.close()
    return directory / "traces.otf2"
