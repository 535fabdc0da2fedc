"""The trace formats, one entry each: how a path names the format, how it is read
and written, and the properties the code that reads and writes traces branches
on.

Everything that treats OTF2 archives and ``.trace`` files differently asks the
format's :class:`Format` (from :func:`format_of` a path, or :func:`format_named`
its name) instead of comparing names, so that the difference is stated once,
here:

* **recognised by** its file suffix (``*.otf2``: an OTF2 anchor file,
  ``*.trace``: the text format);
* **read** whole (:attr:`Format.read`), in chunks (:attr:`Format.read_chunks`),
  or only its locations' record counts (:attr:`Format.record_counts`);
* **written** whole (:attr:`Format.write`), incrementally
  (:attr:`Format.open_writer`, the backend of
  :class:`~compensate.formats.TraceWriter`) or in parts by several processes
  (:attr:`Format.part_writer`, :attr:`Format.commit_parts`, the backend of
  :mod:`compensate.formats.parts`);
* **properties**: :attr:`Format.archive` (an output is a directory of files
  around an anchor file, so it replaces the anchor's directory),
  :attr:`Format.needs_payload` (writing needs the records' payload objects) and
  :attr:`Format.global_order` (one file in global time order, which the writer
  merges).

The implementations are the format packages (:mod:`compensate.formats.otf2`,
:mod:`compensate.formats.text`); each entry imports its package only when one of
its functions is called, so that looking a format up costs nothing (the OTF2
package loads the OTF2 library).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compensate.model import Definitions, Events, Trace, TraceError
from compensate.smallfile import kind_of, special_in_archive

__all__ = ["FORMATS", "OTF2", "TEXT", "TRACE_FORMATS", "Format", "format_named", "format_of"]


@dataclass(frozen=True)
class Format:
    """One trace format: its name and suffix, its readers and writers, and what
    callers branch on. The functions take the path as a string."""

    #: the short name (``"otf2"``, ``"text"``): messages, a parallel output's record
    name: str
    #: the file suffix that names the format (lower case; matched case-insensitively)
    suffix: str
    #: an output is an archive: a directory of files around the anchor file the path
    #: names, so it replaces the anchor's directory and is staged as a directory;
    #: else one file, which it replaces
    archive: bool
    #: writing records needs their payload objects: False for OTF2, whose writer
    #: copies records read with ``payload=False`` (the C path) from their input, so a
    #: run writing OTF2 reads without payloads
    needs_payload: bool
    #: the output holds all locations' records in one global time order, which the
    #: writer merges (``finish``/``advance`` tell it when a location no longer holds
    #: it back); else each location's records are written on their own
    global_order: bool
    #: ``read(path, locations)``: the whole trace, or only ``locations``' records
    #: (:func:`compensate.formats.read_trace`)
    read: Callable[[str, Iterable[int] | None], Trace]
    #: ``read_chunks(path, chunk_records, payload, locations)``: the definitions and
    #: an iterator over chunks of records (:func:`compensate.formats.read_chunks`)
    read_chunks: Callable[[str, int, bool, Iterable[int] | None],
                          tuple[Definitions, Iterator[dict[int, Events]]]]
    #: ``record_counts(path)``: each location's number of records if the format
    #: records it without reading the records, else None
    #: (:func:`compensate.formats.location_record_counts`)
    record_counts: Callable[[str], dict[int, int | None]]
    #: ``read_buffers(path)``: the bytes a reader holds whatever the records, per
    #: location it reads and once, and the locations (:func:`compensate.formats.read_buffers`)
    read_buffers: Callable[[str], tuple[int, int, int]]
    #: ``write(trace, path)``: the whole trace, not atomically
    write: Callable[[Trace, str], None]
    #: ``open_writer(path, definitions, **options)``: the sink a
    #: :class:`~compensate.formats.TraceWriter` writes into (``write``, ``close``,
    #: ``abandon``; ``finish``/``advance`` where :attr:`global_order`); the option
    #: ``max_buffered`` caps a text writer's merge and means nothing to OTF2
    open_writer: Callable[..., Any]
    #: ``part_writer(tmp, parts, part, out)``: one part of a parallel output
    #: (:class:`compensate.formats.otf2.parts.Otf2Part`,
    #: :class:`compensate.formats.text.parts.TextPart`)
    part_writer: Callable[[Path, Path, int, Path], Any]
    #: ``commit_parts(tmp, parts, out, definitions, records)``: what all parts share,
    #: written once the parts are closed; returns the path to move into place (the
    #: staged archive directory, or the merged file)
    commit_parts: Callable[[Path, Path, Path, Definitions, list[dict[str, Any]]], Path]

    def target(self, out: Path) -> Path:
        """The path an output at ``out`` replaces: for an archive its anchor file's
        directory (``out/traces.otf2`` replaces ``out/``), else ``out`` itself."""
        return out.parent if self.archive else out


# -- OTF2 (the package loads the OTF2 library: imported on use) ---------------------


def _read_otf2(path: str, locations: Iterable[int] | None = None) -> Trace:
    from compensate.formats.otf2 import read_otf2
    return read_otf2(path, locations)


def _read_otf2_chunks(path: str, chunk_records: int, payload: bool = True,
                      locations: Iterable[int] | None = None
                      ) -> tuple[Definitions, Iterator[dict[int, Events]]]:
    from compensate.formats.otf2 import read_otf2_chunks
    return read_otf2_chunks(path, chunk_records, payload=payload, locations=locations)


def _otf2_record_counts(path: str) -> dict[int, int | None]:
    from compensate.formats.otf2.read import location_record_counts
    return dict(location_record_counts(path))


def _otf2_read_buffers(path: str) -> tuple[int, int, int]:
    from compensate.formats.otf2.read import read_buffer_sizes
    return read_buffer_sizes(path)


def _write_otf2(trace: Trace, path: str) -> None:
    from compensate.formats.otf2 import write_otf2
    write_otf2(trace, path)


def _open_otf2_writer(path: str, definitions: Definitions, *,
                      max_buffered: int | None = None) -> Any:
    from compensate.formats.otf2 import Otf2EventWriter
    return Otf2EventWriter(path, definitions)


def _otf2_part(tmp: Path, parts: Path, part: int, out: Path) -> Any:
    from compensate.formats.otf2.parts import Otf2Part
    return Otf2Part(tmp, parts, part, out)


def _commit_otf2_parts(tmp: Path, parts: Path, out: Path, definitions: Definitions,
                       records: list[dict[str, Any]]) -> Path:
    from compensate.formats.otf2.parts import commit_parts
    return commit_parts(tmp, parts, out, definitions, records)


# -- text --------------------------------------------------------------------------


def _read_text(path: str, locations: Iterable[int] | None = None) -> Trace:
    from compensate.formats.text import read_text
    return read_text(path, locations)


def _read_text_chunks(path: str, chunk_records: int, payload: bool = True,
                      locations: Iterable[int] | None = None
                      ) -> tuple[Definitions, Iterator[dict[int, Events]]]:
    # (``payload``: a text record's fields are its payload, always read)
    from compensate.formats.text import read_text_chunks
    return read_text_chunks(path, chunk_records, locations)


def _text_record_counts(path: str) -> dict[int, int | None]:
    # the header does not say: None for every location (the definitions only)
    from compensate.formats.text import read_text_chunks
    definitions, chunks = read_text_chunks(path, None)
    chunks.close()
    return dict.fromkeys(sorted(definitions.locations))


def _write_text(trace: Trace, path: str) -> None:
    from compensate.formats.text import write_text
    write_text(trace, path)


def _open_text_writer(path: str, definitions: Definitions, **options: Any) -> Any:
    from compensate.formats.text import TextEventWriter
    return TextEventWriter(path, definitions, **options)


def _text_part(tmp: Path, parts: Path, part: int, out: Path) -> Any:
    from compensate.formats.text.parts import TextPart
    return TextPart(tmp, parts, part, out)


def _commit_text_parts(tmp: Path, parts: Path, out: Path, definitions: Definitions,
                       records: list[dict[str, Any]]) -> Path:
    from compensate.formats.text.parts import commit_parts
    return commit_parts(tmp, parts, out, definitions, records)


# -- the registry ------------------------------------------------------------------

#: OTF2 archives: the anchor file ``*.otf2`` with ``*.def`` and a data directory
#: of per-location event files beside it
OTF2 = Format(name="otf2", suffix=".otf2", archive=True, needs_payload=False,
              global_order=False, read=_read_otf2, read_chunks=_read_otf2_chunks,
              record_counts=_otf2_record_counts, read_buffers=_otf2_read_buffers,
              write=_write_otf2,
              open_writer=_open_otf2_writer, part_writer=_otf2_part,
              commit_parts=_commit_otf2_parts)

#: the ``.trace`` text format (docs/trace-format.md): one file, one record a line
TEXT = Format(name="text", suffix=".trace", archive=False, needs_payload=True,
              global_order=True, read=_read_text, read_chunks=_read_text_chunks,
              record_counts=_text_record_counts, read_buffers=lambda path: (0, 0, 0),
              write=_write_text,
              open_writer=_open_text_writer, part_writer=_text_part,
              commit_parts=_commit_text_parts)

#: every format, in the order messages name them
TRACE_FORMATS: tuple[Format, ...] = (OTF2, TEXT)

#: file suffix -> format name (as before the registry: ``{".otf2": "otf2", ...}``)
FORMATS: dict[str, str] = {f.suffix: f.name for f in TRACE_FORMATS}

_BY_SUFFIX = {f.suffix: f for f in TRACE_FORMATS}
_BY_NAME = {f.name: f for f in TRACE_FORMATS}


def format_of(path: str | Path, *, must_exist: bool = False) -> Format:
    """The format a trace path names by its suffix (case-insensitive); ValueError
    for any other suffix. ``must_exist``: the path is an input, which must be a
    file (a one-line TraceError otherwise)."""
    fmt = _BY_SUFFIX.get(Path(path).suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: unknown trace format (use an OTF2 anchor file '*.otf2' "
                         f"or a text trace '*.trace')")
    if must_exist and not os.path.isfile(path):
        try:  # a FIFO or a device is no trace: say what it is, never wait on it
            what = f"is {kind_of(os.stat(path).st_mode)}, not a regular file"
        except OSError:
            what = "no such file"
        raise TraceError(what, source=str(path))
    special = special_in_archive(path) if must_exist and fmt.archive else None
    if special is not None:
        raise TraceError(f"{special[0]} is {special[1]}, not a regular file",
                         source=str(path))
    return fmt


def format_named(name: str) -> Format:
    """The format called ``name`` (:attr:`Format.name`); KeyError for another."""
    return _BY_NAME[name]
