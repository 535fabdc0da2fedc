"""A ``.trace`` output written in parts by several processes: the text half of
:mod:`compensate.formats.parts` (docs/parallel-io.md).

A ``.trace`` file interleaves all locations' lines in one time order (time, then
location id, then record order). Each part writes its locations' lines in that
order to its own file, ``PARTS/<part>.trace`` (a :class:`TextPart`, a
:class:`~compensate.formats.text.TextEventWriter` over its locations);
:func:`commit_parts` writes the header and merges the parts' lines, streaming
(``heapq.merge``, one line per part in memory; in rounds of :data:`FAN_IN` parts
when there are more), re-padding the time and kind columns to the widths of the
whole file. The result is byte for byte what one process writes for the same
records while the parts' merge buffers suffice.

It lives in the text package because it formats and parses the format's own
lines (the header, the column comment); the generic protocol (the temporary
directory, which part owns which location, moving the output into place) is
:mod:`compensate.formats.parts`'s.
"""

from __future__ import annotations

import contextlib
import heapq
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from compensate.formats.text.write import _COMMENT, MAX_BUFFERED, TextEventWriter, _Formatter
from compensate.model import KIND_NAMES, Definitions, Events, TraceError

#: Parts merged at once: with more, they are merged in rounds of this many into
#: intermediate files, so that the committing process never holds more open files.
FAN_IN = 128


class TextPart:
    """One part of a ``.trace`` output: the lines of ``locations`` (ids) in the
    file's order, written to ``PARTS/<part>.trace`` (``parts``: the directory of
    the parts inside ``tmp``, the output's temporary directory); ``out`` is the
    output the messages name. Nothing is created until :meth:`open`."""

    def __init__(self, tmp: Path, parts: Path, part: int, out: Path) -> None:
        #: the part's file, which :meth:`remove` deletes
        self.scratch = parts / f"{part}.trace"
        self.out = out
        #: whether :meth:`open` created the file (:meth:`remove` deletes only that)
        self.made = False
        self._locations: tuple[int, ...] = ()
        self._sink: TextEventWriter | None = None

    def open(self, definitions: Definitions, locations: tuple[int, ...],
             max_buffered: int | None = None) -> None:
        """Create the part's file; ``max_buffered``: the merge buffer's cap (None:
        the one-process writer's default, :data:`MAX_BUFFERED`)."""
        self._locations = locations
        self.made = True  # (the writer creates the file)
        self._sink = TextEventWriter(
            str(self.scratch), definitions,
            max_buffered=MAX_BUFFERED if max_buffered is None else max_buffered,
            locations=locations)

    def write(self, loc: int, events: Events) -> None:
        """Append ``events`` to ``loc``, one of this part's locations (TraceError
        for another)."""
        if int(loc) not in self._locations:
            raise TraceError("location is not among those this writer writes",
                             source=str(self.out), location=int(loc))
        self._sink.write(loc, events)

    def finish(self, loc: int) -> None:
        """``loc`` gets no more records: it no longer holds back the merge."""
        self._sink.finish(loc)

    def advance(self, time: int) -> None:
        """The producer's watermark (:meth:`TextEventWriter.advance`)."""
        self._sink.advance(time)

    def close(self) -> dict[str, Any]:
        """Finish the file; what :func:`commit_parts` needs of it: the latest time,
        the kinds written (the column widths) and the file."""
        sink, self._sink = self._sink, None
        sink.close()
        max_time, kinds = sink.written()
        return {"max_time": max_time, "kinds": kinds, "file": str(self.scratch)}

    def abandon(self) -> None:
        """Close the file after a failure (:meth:`remove` deletes it)."""
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.abandon()

    def remove(self) -> None:
        """Delete the part's file if :meth:`open` created it."""
        if self.made:
            with contextlib.suppress(OSError):
                os.unlink(self.scratch)


def _record_lines(path: str | Path, header: bool = True) -> Iterator[str]:
    """The record lines of a part's ``.trace`` file (after its header and the
    column comment; ``header=False``: an intermediate file of record lines)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        if header:
            for line in f:
                if line == "events\n":
                    break
            for line in f:
                if line != _COMMENT:
                    yield line
                break
        yield from f


def _keyed(lines: Iterator[str]) -> Iterator[tuple[int, int, str]]:
    """Each line with its sort key (time, location)."""
    for line in lines:
        t, loc, _ = line.split(None, 2)
        yield int(t), int(loc), line


def _merge(streams: list[Iterator[tuple[int, int, str]]]) -> Iterator[tuple[int, int, str]]:
    """The lines of several streams, each in (time, location, record) order, in
    that order (a location's lines are all in one stream)."""
    return heapq.merge(*streams, key=lambda x: (x[0], x[1]))


def _merged_lines(files: list[tuple[str | Path, bool]], scratch: Path) -> Iterator[str]:
    """Every record line of ``files`` ((path, has a header)) in the one-process
    order, merging at most :data:`FAN_IN` files at a time."""
    rounds = 0
    while len(files) > FAN_IN:
        rounds += 1
        merged = []
        for j in range(0, len(files), FAN_IN):
            group = files[j:j + FAN_IN]
            path = scratch / f"round{rounds}-{j // FAN_IN}"
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(line for _, _, line in
                             _merge([_keyed(_record_lines(p, h)) for p, h in group]))
            for p, _ in group:
                os.unlink(p)
            merged.append((path, False))
        files = merged
    for _, _, line in _merge([_keyed(_record_lines(p, h)) for p, h in files]):
        yield line


def commit_parts(tmp: Path, parts: Path, out: Path, definitions: Definitions,
                 records: list[dict[str, Any]]) -> Path:
    """The whole ``.trace`` file, written to ``PARTS/merged`` and returned: the
    header and every part's lines (``records``: what each :meth:`TextPart.close`
    returned) merged in the one-process order (time, location id, record order),
    each line re-padded to the file's column widths (those
    :class:`~compensate.formats.text.TextEventWriter` computes from every record:
    the longest time, location id and kind name). ``tmp``, the output's temporary
    directory, is not written (the caller moves the file to the output)."""
    merged = parts / "merged"
    max_time = max((int(r["max_time"]) for r in records), default=-1)
    kinds = {int(k) for r in records for k in r["kinds"]}
    tw = len(str(max_time))
    lw = max((len(str(loc)) for loc in definitions.locations), default=1)
    kw = max((len(KIND_NAMES[k]) for k in kinds), default=0)
    lines = _merged_lines([(r["file"], True) for r in records], parts)
    with open(merged, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(_Formatter(definitions, str(out)).header())
        if kinds:
            f.write(_COMMENT)
        buf: list[str] = []
        for line in lines:
            p = line.rstrip("\n").split(None, 3)
            if len(p) == 4:
                buf.append(f"{p[0]:>{tw}} {p[1]:>{lw}} {p[2]:<{kw}} {p[3]}\n")
            else:
                buf.append(f"{p[0]:>{tw}} {p[1]:>{lw}} {p[2]}\n")
            if len(buf) >= 8192:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))
    return merged
