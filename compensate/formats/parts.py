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

* **OTF2.** Each part writes a small archive of its own under
  ``TMP/.parts/<part>/`` (the OTF2 library needs no collective calls: every
  part is its own serial archive) with the event and local definition files of
  its locations only, moves those into ``TMP/<name>/`` and records each
  location's event count and its first and last timestamp in
  ``TMP/.parts/<part>.json``. :func:`commit` writes the anchor file and the
  global definitions with those counts (a Location's ``numberOfEvents``) and
  that time range (the ClockProperties), then renames ``TMP`` to the archive
  directory. A location's files depend only on its own records, so the archive
  is byte for byte the one-process archive. Records that writing would add
  definitions for (records built from a text trace's fields: ProgramBegin's
  strings, RMA member groups) cannot be split so, as their references would
  differ between the parts: such a part fails at :meth:`PartWriter.close` with
  a one-line TraceError (write that output from one process).
* **Text.** A ``.trace`` file interleaves all locations' lines in one time
  order (time, then location id, then record order). Each part writes its
  locations' lines in that order to ``TMP/.parts/<part>.trace`` (a
  :class:`~compensate.formats.text.TextEventWriter` over its locations);
  :func:`commit` writes the header and merges the parts' lines, streaming
  (``heapq.merge``, one line per part in memory; in rounds of :data:`FAN_IN`
  parts when there are more), re-padding the time and kind
  columns to the widths of the whole file, into ``TMP/.parts/merged`` and
  renames that to the output.

The temporary directory holds ``TMP/.parts/output.json``, which says what the
output is, so that every function needs only ``TMP``; all processes must see
the same file system path.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import shutil
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import compensate.interrupt as interrupt
from compensate.formats.paths import (
    _archive_dir,
    _make_parents,
    _remove_empty,
    install_staged,
    make_temp_dir,
    output_error,
    staging_dir,
    trace_format,
)
from compensate.model import KIND_NAMES, Definitions, Events, Trace, TraceError

__all__ = ["PartWriter", "abort", "begin", "commit", "write_part"]

_PARTS = ".parts"


def _info(tmp: Path) -> dict[str, Any]:
    try:
        with open(tmp / _PARTS / "output.json", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise TraceError(f"not a temporary output made by begin() ({exc})",
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
    fmt = trace_format(out)
    if target is None:
        target = _archive_dir(out) if fmt == "otf2" else out
    parents: list[Path] = []
    tmp: Path | None = None
    try:
        parents = _make_parents(target.parent)
        # an existing archive directory is kept (a mount point, a directory in one
        # we cannot write): the archive is made inside it, as AtomicOutput does
        if fmt == "otf2":
            tmp, inside = staging_dir(target, out)
        else:
            tmp, inside = make_temp_dir(target.parent, f".{target.name}.tmp-"), False
        (tmp / _PARTS).mkdir()
        _write_json(tmp / _PARTS / "output.json",
                    {"out": str(out), "target": str(target), "format": fmt,
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
    are opened).
    """

    def __init__(self, tmp: str | Path, part: int, definitions: Definitions,
                 locations: Iterable[int], *, max_buffered: int | None = None) -> None:
        from compensate.formats.text import MAX_BUFFERED

        self.tmp = Path(tmp)
        self.part = int(part)
        info = _info(self.tmp)
        self.format = info["format"]
        self.out = Path(info["out"])
        self.locations = tuple(sorted({int(loc) for loc in locations}))
        unknown = set(self.locations).difference(definitions.locations)
        if unknown:
            raise TraceError("location of a part is not defined", source=str(self.out),
                             location=min(unknown))
        # an OTF2 part's own archive directory, a text part's file
        self._scratch = self.tmp / _PARTS / (str(self.part) if self.format == "otf2"
                                             else f"{self.part}.trace")
        self._sink: Any = None
        self._state = "open"
        self._made = False  # whether _scratch is this writer's (abort removes only that)
        with self._aborting():
            if (self.tmp / _PARTS / f"{self.part}.json").exists() or self._scratch.exists():
                raise TraceError(f"part {self.part} is written twice", source=str(self.out))
            if self.format == "otf2":
                self._scratch.mkdir()
                self._made = True
                from compensate.formats.otf2 import Otf2EventWriter
                self._sink = Otf2EventWriter(str(self._scratch / self.out.name), definitions,
                                             locations=self.locations,
                                             global_definitions=False)
                self._defined = _definition_counts(self._sink.registry)
            else:
                from compensate.formats.text import TextEventWriter
                self._made = True  # (the writer creates the file)
                self._sink = TextEventWriter(
                    str(self._scratch), definitions,
                    max_buffered=MAX_BUFFERED if max_buffered is None else max_buffered,
                    locations=self.locations)

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
        """``loc`` gets no more records (text: it no longer holds back the merge)."""
        if self.format != "otf2":
            self._call("finish", loc)

    def advance(self, time: int) -> None:
        """The producer's watermark (:meth:`compensate.formats.TraceWriter.advance`)."""
        if self.format != "otf2":
            self._call("advance", time)

    def _call(self, method: str, *args: Any) -> None:
        if self._state != "open":
            raise TraceError(f"the part writer is already {self._state}", source=str(self.out))
        if self.format != "otf2" and method == "write" and int(args[0]) not in self.locations:
            self.abort()
            raise TraceError("location is not among those this writer writes",
                             source=str(self.out), location=int(args[0]))
        with self._aborting():
            getattr(self._sink, method)(*args)

    def close(self) -> None:
        """Finish this part: its files in place inside ``tmp`` and the record of
        what it wrote, which :func:`commit` reads."""
        if self._state != "open":
            raise TraceError(f"the part writer is already {self._state}", source=str(self.out))
        with self._aborting():
            if self.format == "otf2":
                record = self._close_otf2()
            else:
                record = self._close_text()
            record["locations"] = list(self.locations)
            _write_json(self.tmp / _PARTS / f"{self.part}.json", record)
        self._state = "closed"

    def _close_otf2(self) -> dict[str, Any]:
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
        src, dst = self._scratch / name, self.tmp / name
        dst.mkdir(exist_ok=True)
        for loc in self.locations:  # the location's event and local definition files
            evt = src / f"{loc}.evt"
            if not evt.exists():  # OTF2 wrote another layout: never a partial archive
                raise TraceError(f"OTF2 wrote no event file {evt.name} for this location",
                                 source=str(self.out), location=loc)
            os.replace(evt, dst / evt.name)
            if (src / f"{loc}.def").exists():
                os.replace(src / f"{loc}.def", dst / f"{loc}.def")
        shutil.rmtree(self._scratch)
        return {"counts": {str(k): v for k, v in counts.items()}, "first": first, "last": last}

    def _close_text(self) -> dict[str, Any]:
        sink = self._sink
        sink.close()
        self._sink = None
        kinds = sorted(k for k in sink._kinds if 0 <= k < len(KIND_NAMES))
        return {"max_time": sink._max_time, "kinds": kinds,
                "file": str(self._scratch)}

    def abort(self) -> None:
        """Remove this part's files (idempotent; nothing after :meth:`close`)."""
        if self._state == "closed":
            return
        self._state = "aborted"
        sink, self._sink = self._sink, None
        with interrupt.shielded():
            if sink is not None:
                with contextlib.suppress(Exception):
                    sink.abandon()
            if not self._made:
                return
            if self.format == "otf2":
                shutil.rmtree(self._scratch, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(self._scratch)

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            if self._state == "open":
                self.close()
        else:
            self.abort()


def _definition_counts(registry: Any) -> dict[str, int]:
    """How many definitions of each kind the ``otf2`` registry holds."""
    return {name: len(sub) for name, sub in vars(registry).items()
            if type(sub).__name__.endswith("Registry") and hasattr(sub, "__len__")}


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
        if isinstance(source, Trace) and writer.format != "otf2":
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
    info = _info(tmp)
    out, target = info["out"], Path(info["target"])
    try:
        try:
            records = _parts(tmp, definitions, out)
            if info["format"] == "otf2":
                _commit_otf2(tmp, Path(out), definitions, records)
            else:
                merged = _commit_text(tmp, out, definitions, records)
        except OSError as exc:
            raise output_error(out, "write", exc) from None
        with interrupt.shielded():
            interrupt.commit_point()
            try:
                if info["format"] == "otf2":
                    shutil.rmtree(tmp / _PARTS)
                    install_staged(tmp, target, Path(out).name, info.get("inside", False))
                else:
                    os.replace(merged, target)
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
        info = _info(tmp)
    except TraceError:
        return
    _discard(tmp, info)


def _discard(tmp: Path, info: dict[str, Any]) -> None:
    with interrupt.shielded():
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty([Path(p) for p in info.get("parents", [])])


# -- OTF2 ----------------------------------------------------------------------


def _commit_otf2(tmp: Path, out: Path, definitions: Definitions,
                 records: list[dict[str, Any]]) -> None:
    """The anchor file and the global definitions, with the parts' event counts
    and time range, written by a definitions-only archive writer."""
    from compensate.formats.otf2 import Otf2EventWriter

    counts: dict[int, int] = {}
    firsts, lasts = [], []
    for record in records:
        counts.update((int(k), int(v)) for k, v in record["counts"].items())
        if record["first"] is not None:
            firsts.append(int(record["first"]))
            lasts.append(int(record["last"]))
    scratch = tmp / _PARTS / "definitions"
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


# -- text ----------------------------------------------------------------------


#: Parts merged at once: with more, they are merged in rounds of this many into
#: intermediate files, so that the committing process never holds more open files.
FAN_IN = 128


def _record_lines(path: str | Path, header: bool = True) -> Iterator[str]:
    """The record lines of a part's ``.trace`` file (after its header and the
    column comment; ``header=False``: an intermediate file of record lines)."""
    from compensate.formats.text.write import _COMMENT

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


def _commit_text(tmp: Path, out: str, definitions: Definitions,
                 records: list[dict[str, Any]]) -> Path:
    """The header and every part's lines merged in the one-process order (time,
    location id, record order), each line re-padded to the file's column widths
    (those :class:`~compensate.formats.text.TextEventWriter` computes from every
    record: the longest time, location id and kind name)."""
    from compensate.formats.text.write import _COMMENT, _Formatter

    merged = tmp / _PARTS / "merged"
    max_time = max((int(r["max_time"]) for r in records), default=-1)
    kinds = {int(k) for r in records for k in r["kinds"]}
    tw = len(str(max_time))
    lw = max((len(str(loc)) for loc in definitions.locations), default=1)
    kw = max((len(KIND_NAMES[k]) for k in kinds), default=0)
    lines = _merged_lines([(r["file"], True) for r in records], tmp / _PARTS)
    with open(merged, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(_Formatter(definitions, out).header())
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
