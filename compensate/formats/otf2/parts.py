"""An OTF2 archive written in parts by several processes: the OTF2 half of
:mod:`compensate.formats.parts` (docs/parallel-io.md).

Each part writes a small archive of its own under ``PARTS/<part>/`` (the OTF2
library needs no collective calls: every part is its own serial archive) with the
event and local definition files of its locations only, and moves those into the
output's data directory ``TMP/<name>/`` (an :class:`Otf2Part`); its record holds
each location's event count and its first and last timestamp.
:func:`commit_parts` writes the anchor file and the global definitions with those
counts (a Location's ``numberOfEvents``) and that time range (the
ClockProperties). A location's files depend only on its own records, so the
archive is byte for byte the one-process archive.

Records that writing would add definitions for (records built from a text
trace's fields: ProgramBegin's strings, RMA member groups) cannot be split so, as
their references would differ between the parts: such a part fails at
:meth:`Otf2Part.close` with a one-line TraceError (write that output from one
process).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from compensate.formats.otf2.write import Otf2EventWriter
from compensate.model import Definitions, Events, TraceError


class Otf2Part:
    """One part of an OTF2 output: the event and local definition files of
    ``locations`` (ids), written as an archive of its own in ``PARTS/<part>/``
    (``parts``: the directory of the parts inside ``tmp``, the output's temporary
    directory) and moved into ``TMP/<name>/`` by :meth:`close`; ``out`` is the
    output's anchor file. Nothing is created until :meth:`open`. A trace
    read by the OTF2 C path copies the records from its input (only these
    locations' files are opened)."""

    def __init__(self, tmp: Path, parts: Path, part: int, out: Path) -> None:
        #: the part's own archive directory, which :meth:`remove` deletes
        self.scratch = parts / str(part)
        self.tmp = tmp
        self.out = out
        #: whether :meth:`open` created the directory (:meth:`remove` deletes only that)
        self.made = False
        self._locations: tuple[int, ...] = ()
        self._sink: Otf2EventWriter | None = None
        self._defined: dict[str, int] = {}

    def open(self, definitions: Definitions, locations: tuple[int, ...],
             max_buffered: int | None = None) -> None:
        """Create the part's archive (``max_buffered`` is the text merge's: OTF2
        is written per location and buffers nothing)."""
        self._locations = locations
        self.scratch.mkdir()
        self.made = True
        self._sink = Otf2EventWriter(str(self.scratch / self.out.name), definitions,
                                     locations=locations, global_definitions=False)
        self._defined = _definition_counts(self._sink.registry)

    def write(self, loc: int, events: Events) -> None:
        """Append ``events`` to ``loc``, one of this part's locations (the OTF2
        writer refuses another)."""
        self._sink.write(loc, events)

    def close(self) -> dict[str, Any]:
        """Finish the part's archive and move its locations' files into the
        output's data directory; each location's event count and the time range
        written (:func:`commit_parts` reads them)."""
        sink = self._sink
        if _definition_counts(sink.registry) != self._defined:
            # its records would refer to definitions only this part has
            raise TraceError("writing these records to OTF2 adds definitions (records "
                             "built from a text trace's fields, e.g. ProgramBegin strings), "
                             "which the parts cannot share: write this output from one "
                             "process", source=str(self.out))
        counts, first, last = sink.written()
        sink.close()
        self._sink = None
        name = self.out.stem
        src, dst = self.scratch / name, self.tmp / name
        dst.mkdir(exist_ok=True)
        for loc in self._locations:  # the location's event and local definition files
            evt = src / f"{loc}.evt"
            if not evt.exists():  # OTF2 wrote another layout: never a partial archive
                raise TraceError(f"OTF2 wrote no event file {evt.name} for this location",
                                 source=str(self.out), location=loc)
            os.replace(evt, dst / evt.name)
            if (src / f"{loc}.def").exists():
                os.replace(src / f"{loc}.def", dst / f"{loc}.def")
        shutil.rmtree(self.scratch)
        return {"counts": {str(k): v for k, v in counts.items()}, "first": first, "last": last}

    def abandon(self) -> None:
        """Release the part's archive after a failure (:meth:`remove` deletes it)."""
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.abandon()

    def remove(self) -> None:
        """Delete the part's archive directory if :meth:`open` created it."""
        if self.made:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _definition_counts(registry: Any) -> dict[str, int]:
    """How many definitions of each kind the ``otf2`` registry holds."""
    return {name: len(sub) for name, sub in vars(registry).items()
            if type(sub).__name__.endswith("Registry") and hasattr(sub, "__len__")}


def commit_parts(tmp: Path, parts: Path, out: Path, definitions: Definitions,
                 records: list[dict[str, Any]]) -> Path:
    """The anchor file and the global definitions, with the parts' event counts
    and time range (``records``: what each :meth:`Otf2Part.close` returned),
    written into ``tmp`` by a definitions-only archive writer (in ``PARTS``
    first); ``tmp``, now the whole archive, is returned."""
    counts: dict[int, int] = {}
    firsts, lasts = [], []
    for record in records:
        counts.update((int(k), int(v)) for k, v in record["counts"].items())
        if record["first"] is not None:
            firsts.append(int(record["first"]))
            lasts.append(int(record["last"]))
    scratch = parts / "definitions"
    scratch.mkdir()
    writer = Otf2EventWriter(str(scratch / out.name), definitions, locations=())
    try:
        writer.set_written(counts, min(firsts, default=None), max(lasts, default=None))
        writer.close()
    except BaseException:
        writer.abandon()
        raise
    for name in (out.name, f"{out.stem}.def"):
        os.replace(scratch / name, tmp / name)
    if not (tmp / out.stem).exists():  # no location at all
        (tmp / out.stem).mkdir()
    return tmp
