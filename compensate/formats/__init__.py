"""Trace formats: read and write OTF2 archives and ``.trace`` text files.

One package per format (:mod:`compensate.formats.otf2`, :mod:`compensate.formats.text`),
each with a reader and a writer, and one entry per format in
:mod:`compensate.formats.registry` (:func:`format_of` a path: its suffix, readers,
writers and properties); around them what every format shares:
:func:`read_trace` / :func:`write_trace` for whole traces (dispatch by suffix),
:func:`read_chunks` and :class:`TraceWriter` for streaming, and the output rules
of :mod:`compensate.formats.paths` (atomic, never the input).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from compensate.formats import mpithreads
from compensate.formats.chunks import (
    DEFAULT_CHUNK_RECORDS,
    ChunkIterator,
    join_blocks,
    selected_locations,
)
from compensate.formats.paths import (
    AtomicFile,
    AtomicOutput,
    OutputError,
    input_format,
    is_part_of_input,
    output_error,
    output_target,
    trace_format,
)
from compensate.formats.registry import (
    FORMATS,
    TRACE_FORMATS,
    Format,
    format_named,
    format_of,
)
from compensate.formats.writer import TraceWriter
from compensate.model import Definitions, Events, Trace

__all__ = ["DEFAULT_CHUNK_RECORDS", "FORMATS", "TRACE_FORMATS", "AtomicFile", "AtomicOutput",
           "ChunkIterator", "Format", "OutputError", "TraceWriter", "format_named", "format_of",
           "input_format", "is_part_of_input", "location_record_counts", "output_error",
           "output_target", "read_blocks", "read_buffers", "read_chunks", "read_trace",
           "trace_format", "write_trace"]


def read_trace(path: str | Path, locations: Iterable[int] | None = None) -> Trace:
    """Read an OTF2 archive or a text trace (TraceError on bad input).
    (:func:`read_chunks` reads it chunk by chunk.)

    ``locations`` (ids; None: all) reads only these locations' records, for a
    process that owns them (docs/parallel-io.md): the definitions are read whole,
    ``events`` holds exactly the selected locations, and record ``i`` of a
    location is its ``i``-th record in the whole trace. OTF2 opens only their
    event files; a text trace is scanned whole, keeping only their lines. An id
    the definitions lack is a one-line TraceError. (Ranks that call MPI from
    another thread: :func:`read_chunks`.)"""
    path = str(path)
    fmt = format_of(path, must_exist=True)
    trace = fmt.read(path, locations)
    if locations is None:  # (every record at hand)
        ranks = mpithreads.found_in_memory(trace.definitions, trace.events)
        mpithreads.remember(path, ranks)
        trace.definitions = mpithreads.renamed(trace.definitions, ranks)
    else:
        trace.definitions = mpithreads.for_selection(path, trace.definitions)
    return trace


#: Records per block of :func:`read_blocks`
BLOCK_RECORDS = 1 << 16


def read_blocks(path: str | Path, locations: Iterable[int] | None = None, *,
                payload: bool = True, block: int = BLOCK_RECORDS) -> Trace:
    """``read_trace(path, locations)`` read :func:`read_chunks`' way, ``block``
    records at a time, each location's blocks joined column by column (the
    transient: one block and one column). :func:`read_trace` parses a selection
    at once: a ``.trace`` file's lines become Python row tuples before the
    columns, and an OTF2 archive is read through the ``otf2`` package, an event
    object per record kept as its payload. ``payload=False``: the records are
    written, if at all, to an OTF2 archive; an OTF2 input is then read by the C
    path where it can be (payloads ``NATIVE``, copied from the input by the
    writer), several times faster. The records, their indices, the ranks on
    other threads and every error message are ``read_trace``'s."""
    path = str(path)
    mine = None if locations is None else tuple(locations)
    definitions, chunks = read_chunks(path, block, payload=payload, locations=mine)
    pieces: dict[int, list[Events]] = {}
    with contextlib.closing(chunks):
        for chunk in chunks:
            for loc, events in chunk.items():
                pieces.setdefault(loc, []).append(events)
    meta = definitions.otf2
    order = meta.location_order if meta is not None else tuple(definitions.locations)
    selection = selected_locations(order, mine, path)
    events = {loc: join_blocks(pieces.pop(loc, []))
              for loc in (order if selection is None else selection)}
    return Trace(definitions=definitions, events=events, source=path)


def write_trace(trace: Trace, out_path: str | Path, target: Path | None = None, *,
                output: AtomicOutput | None = None,
                before_commit: Callable[[], None] | None = None) -> None:
    """Write ``trace`` to ``out_path`` atomically (temporary name, then rename; into
    ``output`` if given, e.g. created before a long computation so that an unusable
    path fails first). ``before_commit()`` runs right before the rename.
    (:class:`compensate.formats.writer.TraceWriter` writes chunk by chunk.)"""
    out = output if output is not None else AtomicOutput(out_path, target)
    try:
        try:
            out.trace_format.write(trace, out.path)
        except OSError as exc:
            raise output_error(out.out, "write", exc) from None
        out.commit(before_commit)
    except BaseException:
        out.discard()
        raise


def read_chunks(path: str | Path, chunk_records: int = DEFAULT_CHUNK_RECORDS, *,
                payload: bool = True, locations: Iterable[int] | None = None,
                mpi_threads: bool = True) -> tuple[Definitions, Iterator[dict[int, Events]]]:
    """Definitions of the trace ``path`` and an iterator over its records in chunks.

    ``path`` is an OTF2 anchor file (``*.otf2``) or a text trace (``*.trace``).
    Each chunk maps location id -> :class:`Events` with that location's next
    records, for the locations that have records among the chunk's
    ``chunk_records`` records (the last chunk may be smaller). Record order: the
    OTF2 global reader's (timestamp order across locations), or the file's for
    text. Concatenated, a location's chunks equal ``read_trace(path).events[loc]``
    (payloads: new ``otf2`` event objects or text field dicts, as there).

    A missing file or bad definitions/header raise :class:`TraceError` here; a
    bad record raises it from the iterator, with the same message as
    ``read_trace`` (record index counted over the whole location). The iterator
    keeps no record of a chunk it has returned; it releases the file at the end,
    on an error, or on ``close()``.

    ``payload=False`` says that the caller needs only the columns and writes the
    records, if at all, to an OTF2 archive: an OTF2 input is then read by the C
    path where possible (payloads ``NATIVE``, copied from the input by the OTF2
    writer; :mod:`compensate.formats.otf2.native`).

    ``locations``: only these locations' records, as for :func:`read_trace`;
    ``chunk_records`` then counts only theirs.

    A rank whose MPI records all lie on another thread of its process than the one
    the communicators list is that thread in the definitions' communicators
    (:mod:`compensate.formats.mpithreads`): found by reading the locations
    concerned, once per file, for a whole read; a read of ``locations`` only reads
    no other location, and maps ranks as this process learned them (a whole read,
    the distributed command's agreement), else as listed. ``mpi_threads=False``:
    as listed.
    """
    if chunk_records < 1:
        raise ValueError(f"chunk_records must be at least 1, got {chunk_records}")
    path = str(path)
    fmt = format_of(path, must_exist=True)
    defs, chunks = fmt.read_chunks(path, chunk_records, payload, locations)
    if not mpi_threads:
        return defs, chunks
    if locations is not None:
        return mpithreads.for_selection(path, defs), chunks
    return mpithreads.for_file(path, defs, _location_reader(fmt, path)), chunks


def _location_reader(fmt: Format, path: str) -> mpithreads.Reader:
    """``read(locations)``: chunks of those locations' records of ``path``, columns
    only (:func:`compensate.formats.mpithreads.for_file` looks for MPI records)."""
    def read(locations: Iterable[int]) -> Iterator[dict[int, Events]]:
        return fmt.read_chunks(path, mpithreads.SCAN_CHUNK, False, list(locations))[1]
    return read


def read_buffers(path: str | Path) -> tuple[int, int, int]:
    """The bytes the reader of ``path`` holds whatever its records, per location it
    reads and once (OTF2: the library's event and definition chunks, as the
    archive's writer sized them; a text trace: none worth counting), and its
    locations (OTF2's anchor file says; a text trace: 0, not counted)."""
    path = str(path)
    return format_of(path, must_exist=True).read_buffers(path)


def location_record_counts(path: str | Path) -> dict[int, int | None]:
    """Each location's number of records without reading any record, for dividing
    locations among processes: an OTF2 Location definition's ``numberOfEvents``;
    None for a text trace (its header does not say)."""
    path = str(path)
    return format_of(path, must_exist=True).record_counts(path)
