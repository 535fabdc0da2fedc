"""One output written by several processes, each writing its own locations
(issue #21: the parallel replay's write side; docs/parallel-io.md).

Each process (an MPI rank) owns a set of locations and writes only their
records; exactly one process writes what every location shares (the OTF2 anchor
file and global definitions, the text header) and moves the output into place.
The output equals, record for record, what one process writes with
:class:`~compensate.formats.TraceWriter` for the same records (an OTF2 archive
byte for byte, a ``.trace`` file byte for byte while the merge buffers
suffice), and appears atomically: everything is written into one temporary
directory beside the output, which only :func:`commit` moves into place.

The transport is the caller's. On every process, in this order::

    tmp = begin(out)                     # one process; the path sent to all
    ... barrier (tmp exists) ...
    write_part(tmp, part, trace, mine)   # every process, its own part number
        # or: with PartWriter(tmp, part, definitions, mine) as w: w.write(loc, ev) ...
    ... barrier (every part closed) ...
    commit(tmp, definitions)             # the process that called begin
    # on any failure, instead: abort(tmp)  (one process, after the others stopped)

Every defined location must be written by exactly one part (a part may own no
location); :func:`commit` refuses anything else with a one-line
:class:`~compensate.model.TraceError`.

* **OTF2** (:mod:`compensate.formats.otf2.parts`). Each part writes a small
  archive of its own under ``TMP/.parts/<part>/`` with the event and local
  definition files of its locations only, moves those into ``TMP/<name>/`` and
  records each location's event count and its first and last timestamp in
  ``TMP/.parts/<part>.json``. :func:`commit` writes the anchor file and the
  global definitions with those counts and that time range, then renames
  ``TMP`` to the archive directory: byte for byte the one-process archive.
  Records that writing would add definitions for (records built from a text
  trace's fields) cannot be split so: such a part fails at
  :meth:`PartWriter.close` with a one-line TraceError (write that output from
  one process).
* **Text** (:mod:`compensate.formats.text.parts`). A ``.trace`` file
  interleaves all locations' lines in one time order. Each part writes its
  locations' lines in that order to ``TMP/.parts/<part>.trace``; :func:`commit`
  writes the header and merges the parts' lines, streaming, re-padding the
  columns to the widths of the whole file, into ``TMP/.parts/merged`` and
  renames that to the output.

What differs between the formats is the format's entry in
:mod:`compensate.formats.registry` (its part writer, what :func:`commit` writes,
whether the output is an archive directory or one file, whether its records are
in one global time order); this module is the protocol they share.

The temporary directory holds ``TMP/.parts/output.json``, which says what the
output is, so that every function needs only ``TMP``; all processes must see
the same file system path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import compensate.interrupt as interrupt
from compensate.formats.paths import (
    _make_parents,
    _remove_empty,
    install_staged,
    make_temp_dir,
    output_error,
    staging_dir,
    staging_prefix,
)
from compensate.formats.registry import Format, format_named, format_of
from compensate.model import Definitions, Events, Trace, TraceError

__all__ = ["PartWriter", "abort", "begin", "commit", "write_part"]

_PARTS = ".parts"


def _read_info(tmp: Path) -> dict[str, Any]:
    """What :func:`begin` recorded of the output in ``tmp``."""
    try:
        with open(tmp / _PARTS / "output.json", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise TraceError(f"not a temporary output made by begin() ({exc})",
                         source=str(tmp)) from None


def _info(tmp: Path) -> tuple[dict[str, Any], Format]:
    """:func:`_read_info`, and the output's format."""
    info = _read_info(tmp)
    try:
        return info, format_named(info["format"])
    except (KeyError, TypeError):
        raise TraceError("not a temporary output made by begin() (no known format)",
                         source=str(tmp)) from None


def _write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` under a temporary name, then rename: a reader
    never sees half of it."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def begin(out_path: str | Path, target: Path | None = None) -> Path:
    """Create the temporary directory all parts write into, beside ``target``
    (default: the archive directory of an OTF2 ``out_path``, the file of a text
    one, as :class:`~compensate.formats.AtomicOutput`), and the parent
    directories it needs (removed again by :func:`abort` if left empty). Call on
    one process, before any part is written; send the path to the others."""
    out = Path(out_path).absolute()
    fmt = format_of(out)
    if target is None:
        target = fmt.target(out)
    parents: list[Path] = []
    tmp: Path | None = None
    try:
        parents = _make_parents(target.parent)
        # an existing archive directory is kept (a mount point, a directory in one
        # we cannot write): the archive is made inside it, as AtomicOutput does
        if fmt.archive:
            tmp, inside = staging_dir(target, out)
        else:
            tmp, inside = make_temp_dir(target.parent, staging_prefix(target.name, "tmp")), False
        (tmp / _PARTS).mkdir()
        _write_json(tmp / _PARTS / "output.json",
                    {"out": str(out), "target": str(target), "format": fmt.name,
                     "parents": [str(p) for p in parents], "inside": inside})
    except OSError as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(parents)
        raise output_error(out_path, "create the output", exc) from None
    return tmp


class PartWriter:
    """Writes part ``part`` (a number unique among the processes, e.g. the rank)
    of the output whose temporary directory is ``tmp``: the records of
    ``locations`` (ids), and nothing of any other location.

    ``write(loc, events)``, :meth:`finish` and :meth:`advance` are those of
    :class:`~compensate.formats.TraceWriter` (records in order per location,
    times final); :meth:`close` finishes the part (its files and its record of
    what it wrote), :meth:`abort` removes this part's files. As a context
    manager it closes on success and aborts on an exception. ``definitions``
    are the whole trace's (each process reads them whole); a trace read by the
    OTF2 C path copies the records from its input (only these locations' files
    are opened). The format's part writer
    (:attr:`~compensate.formats.registry.Format.part_writer`) writes the files.
    """

    def __init__(self, tmp: str | Path, part: int, definitions: Definitions,
                 locations: Iterable[int], *, max_buffered: int | None = None) -> None:
        self.tmp = Path(tmp)
        self.part = int(part)
        info, fmt = _info(self.tmp)
        #: the output's format (:class:`~compensate.formats.registry.Format`)
        self.trace_format = fmt
        self.out = Path(info["out"])
        self.locations = tuple(sorted({int(loc) for loc in locations}))
        unknown = set(self.locations).difference(definitions.locations)
        if unknown:
            raise TraceError("location of a part is not defined", source=str(self.out),
                             location=min(unknown))
        # the format's writer of this part: its scratch file or directory in .parts
        self._part = fmt.part_writer(self.tmp, self.tmp / _PARTS, self.part, self.out)
        self._state = "open"
        with self._aborting():
            if (self.tmp / _PARTS / f"{self.part}.json").exists() or \
                    self._part.scratch.exists():
                raise TraceError(f"part {self.part} is written twice", source=str(self.out))
            self._part.open(definitions, self.locations, max_buffered)

    @contextlib.contextmanager
    def _aborting(self) -> Generator[None, None, None]:
        """Any failure inside removes what this part wrote (:meth:`abort`); an OS
        error becomes the one-line output error naming OUT."""
        try:
            yield
        except OSError as exc:
            self.abort()
            raise output_error(self.out, "write", exc) from None
        except BaseException:
            self.abort()
            raise

    def write(self, loc: int, events: Events) -> None:
        """Append ``events`` (in order, times final) to location ``loc`` of this part."""
        self._call("write", loc, events)

    def finish(self, loc: int) -> None:
        """``loc`` gets no more records (a globally ordered output: it no longer
        holds back the merge; else nothing to do)."""
        if self.trace_format.global_order:
            self._call("finish", loc)

    def advance(self, time: int) -> None:
        """The producer's watermark (:meth:`compensate.formats.TraceWriter.advance`;
        only a globally ordered output has a merge it concerns)."""
        if self.trace_format.global_order:
            self._call("advance", time)

    def _call(self, method: str, *args: Any) -> None:
        if self._state != "open":
            raise TraceError(f"the part writer is already {self._state}", source=str(self.out))
        with self._aborting():
            getattr(self._part, method)(*args)

    def close(self) -> None:
        """Finish this part: its files in place inside ``tmp`` and the record of
        what it wrote, which :func:`commit` reads."""
        if self._state != "open":
            raise TraceError(f"the part writer is already {self._state}", source=str(self.out))
        with self._aborting():
            record = self._part.close()
            record["locations"] = list(self.locations)
            _write_json(self.tmp / _PARTS / f"{self.part}.json", record)
        self._state = "closed"

    def abort(self) -> None:
        """Remove this part's files (idempotent; nothing after :meth:`close`)."""
        if self._state == "closed":
            return
        self._state = "aborted"
        with interrupt.shielded():
            with contextlib.suppress(Exception):
                self._part.abandon()
            self._part.remove()

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            if self._state == "open":
                self.close()
        else:
            self.abort()


def write_part(tmp: str | Path, part: int, source: Trace | tuple[Definitions, Iterable],
               locations: Iterable[int]) -> None:
    """Write part ``part`` of the output in ``tmp``: the records of ``locations``
    from ``source``, a :class:`~compensate.model.Trace` (its ``events`` may hold
    only these locations, e.g. read with ``read_trace(path, locations)``) or
    ``(definitions, chunks)`` as :func:`compensate.formats.read_chunks` returns
    (chunks of ``{location: Events}``); times as they are in the records."""
    mine = tuple(locations)
    if isinstance(source, Trace):
        definitions = source.definitions
        held = {loc: source.events[loc] for loc in mine if loc in source.events}
        chunks: Iterable[dict[int, Events]] = [held]
    else:
        definitions, chunks = source
    with PartWriter(tmp, part, definitions, mine) as writer:
        if isinstance(source, Trace) and writer.trace_format.global_order:
            # a .trace part merges its records into time order: handed over in time
            # windows with a watermark, the merge writes each window out instead
            # of holding the whole part (the same bytes: TextEventWriter)
            finished = set()
            for chunk, watermark, done in _time_windows(held, _WINDOW):
                for loc, events in chunk.items():
                    writer.write(loc, events)
                for loc in done:  # no more records: it holds nothing back
                    writer.finish(loc)
                finished.update(done)
                writer.advance(watermark)
            mine = tuple(loc for loc in mine if loc not in finished)
        else:
            for chunk in chunks:
                for loc, events in chunk.items():
                    writer.write(loc, events)
        for loc in mine:
            writer.finish(loc)


#: Records per time window in which :func:`write_part` hands a held ``.trace``
#: part to the writer.
_WINDOW = 1 << 16


def _time_windows(events: dict[int, Events],
                  size: int) -> Iterator[tuple[dict[int, Events], int, list[int]]]:
    """``events`` (each location's times non-decreasing) cut at common times into
    chunks of about ``size`` records: ``(chunk, watermark, done)``, every record of
    a chunk earlier than its watermark and every later record at or after it (the
    last watermark is past every record), ``done`` the locations of ``events``
    (of those with records in order) whose last record was handed over by then. A
    location whose times go backwards is handed over whole in the first chunk (the
    writer then names its record)."""
    ordered = {loc: ev for loc, ev in events.items()
               if len(ev) < 2 or bool(np.all(ev.time[1:] >= ev.time[:-1]))}
    first: dict[int, Events] = {loc: ev for loc, ev in events.items() if loc not in ordered}
    times = np.sort(np.concatenate([ev.time for ev in ordered.values()])) if ordered \
        else np.zeros(0, np.int64)
    cuts = np.unique(times[size::size]).tolist()
    start = dict.fromkeys(ordered, 0)
    last = int(times[-1]) + 1 if len(times) else 0
    for cut in [*cuts, None]:
        chunk = dict(first)
        first = {}
        done = []
        for loc, ev in list(ordered.items()):
            stop = len(ev) if cut is None else int(np.searchsorted(ev.time, cut, side="left"))
            if stop > start[loc]:
                chunk[loc] = ev.slice(start[loc], stop)
                start[loc] = stop
            if stop == len(ev):
                done.append(loc)
                del ordered[loc]
        yield chunk, (last if cut is None else int(cut)), done


def _parts(tmp: Path, definitions: Definitions, out: str) -> list[dict[str, Any]]:
    """Every part's record, checked: each defined location in exactly one part."""
    records = []
    owner: dict[int, int] = {}
    for f in sorted((tmp / _PARTS).glob("*.json"), key=lambda p: p.name):
        if f.name == "output.json":
            continue
        with open(f, encoding="utf-8") as fh:
            record = json.load(fh)
        part = int(f.stem)
        for loc in record["locations"]:
            if loc in owner:
                raise TraceError(f"location written by parts {owner[loc]} and {part}",
                                 source=out, location=loc)
            owner[loc] = part
        records.append(record)
    missing = set(definitions.locations).difference(owner)
    if missing:
        raise TraceError("location written by no part", source=out, location=min(missing))
    closed = {f.stem for f in (tmp / _PARTS).glob("*.json")}
    unfinished = sorted(f.name.split(".")[0] for f in (tmp / _PARTS).iterdir()
                        if f.is_dir() or f.suffix == ".trace" and f.stem not in closed)
    if unfinished:
        raise TraceError(f"part {unfinished[0]} was not closed", source=out)
    return records


def commit(tmp: str | Path, definitions: Definitions) -> None:
    """Write what all parts share and move the output into place, replacing an
    existing one (as :meth:`compensate.formats.AtomicOutput.commit`: not after
    SIGINT/SIGTERM). Call on the process that called :func:`begin`, after every
    part is closed. On failure nothing is left at the output (the temporary
    directory is removed: :func:`abort`)."""
    tmp = Path(tmp)
    info, fmt = _info(tmp)
    out, target = info["out"], Path(info["target"])
    try:
        try:
            records = _parts(tmp, definitions, out)
            written = fmt.commit_parts(tmp, tmp / _PARTS, Path(out), definitions, records)
        except OSError as exc:
            raise output_error(out, "write", exc) from None
        with interrupt.shielded():
            interrupt.commit_point()
            try:
                if fmt.archive:  # the staged directory is the archive
                    shutil.rmtree(tmp / _PARTS)
                    install_staged(written, target, Path(out).name, info.get("inside", False))
                else:  # one file in it is the output
                    os.replace(written, target)
                    shutil.rmtree(tmp, ignore_errors=True)
            except OSError as exc:
                raise output_error(out, "move the output into place", exc) from None
    except BaseException:
        _discard(tmp, info)
        raise


def abort(tmp: str | Path) -> None:
    """Remove the temporary output and every part in it, and the directories
    :func:`begin` created for it if empty; the output is left as it was.
    Idempotent (a directory :func:`begin` did not make is never touched). Call
    once every process has stopped writing."""
    tmp = Path(tmp)
    try:
        info = _read_info(tmp)
    except TraceError:
        return
    _discard(tmp, info)


def _discard(tmp: Path, info: dict[str, Any]) -> None:
    with interrupt.shielded():
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty([Path(p) for p in info.get("parents", [])])
