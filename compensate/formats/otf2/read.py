"""Read OTF2 archives into the trace model.

The compensated trace has to open in the same tools as the measured one (Vampir,
Scalasca, pipit, ``otf2-print``) with the same definitions and the same records in
the same order per location, only with new timestamps (docs/design.md §1, §4).
So :func:`read_otf2` keeps, next to the numpy columns the engine works on, every
original ``otf2`` event object as the record's payload and the whole ``otf2``
definition registry plus the archive metadata in :attr:`Definitions.otf2`
(an :class:`~compensate.formats.otf2.library.Otf2Archive`), from which
:mod:`compensate.formats.otf2.write` re-emits exactly those definitions and records.
The global definitions are read as ``otf2-print`` reads them, where the ``otf2``
package alone would refuse valid archives (EZTrace's:
:mod:`compensate.formats.otf2.globaldefs`), and kept as read, in file order.
Errors are one-line :class:`~compensate.model.TraceError` messages
(:mod:`compensate.formats.otf2.library`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any

import _otf2
from otf2 import definitions as odef

import compensate.insitu as insitu
import compensate.interrupt as interrupt
from compensate.formats.chunks import ChunkIterator, NoChunks, selected_locations
from compensate.formats.otf2.columns import EventCollector, empty_events
from compensate.formats.otf2.globaldefs import TolerantReader
from compensate.formats.otf2.integrity import InputChecks, lenient_lookups
from compensate.formats.otf2.library import (
    BATCH_EVENTS,
    Otf2Archive,
    _diagnostics,
    _library_call,
    _library_errors,
    check_file_ends,
)
from compensate.formats.otf2.limits import ensure_open_files
from compensate.formats.otf2.syncobjects import tolerate_attribute_types
from compensate.model import (
    LOCATION_GROUP_TYPES,
    LOCATION_TYPES,
    NONE,
    PROCESS,
    Comm,
    Definitions,
    Events,
    Location,
    Trace,
    TraceError,
    Window,
)

# ---------------------------------------------------------------------------
# Reading


def _ref(obj: Any) -> int:
    """Reference number of a definition object (-1 for an undefined reference)."""
    return NONE if obj is None else int(obj._ref)


def _archive_metadata(handle: Any) -> dict[str, Any]:
    """Creator, description, machine name, properties, chunk sizes of an open reader."""
    lib = _otf2  # the ctypes layer below the otf2 bindings
    names = lib.Reader_GetPropertyNames(handle)
    chunks = lib.Reader_GetChunkSize(handle)
    return {
        "creator": lib.Reader_GetCreator(handle) or "",
        "description": lib.Reader_GetDescription(handle) or "",
        "machine_name": lib.Reader_GetMachineName(handle) or "",
        "properties": tuple((n, lib.Reader_GetProperty(handle, n)) for n in names),
        "chunk_size_events": int(chunks[0]),
        "chunk_size_definitions": int(chunks[1]),
        "trace_id": int(lib.Reader_GetTraceId(handle)),
        "version": tuple(int(v) for v in lib.Reader_GetVersion(handle)),
    }


def _type_name(value: Any, names: tuple[str, ...], default: str = "UNKNOWN") -> str:
    """The name of an OTF2 location (group) type by its numeric value (the bindings
    spell value 2 ``GPU``, OTF2 3 ``ACCELERATOR_STREAM``: the model uses the latter);
    ``default`` when the definition has none, UNKNOWN for a value beyond the table."""
    if value is None:
        return default
    try:
        code = int(getattr(value, "value", value))
    except (TypeError, ValueError):
        return "UNKNOWN"
    return names[code] if 0 <= code < len(names) else "UNKNOWN"


def _model_definitions(registry: Any, meta: Otf2Archive, source: str = "") -> Definitions:
    """The engine's view (:class:`Definitions`) of an otf2 definition registry."""
    locations: dict[int, Location] = {}
    for loc in registry.locations:
        group = loc.group
        creator = getattr(group, "creating_location_group", None) if group is not None else None
        locations[loc._ref] = Location(
            id=int(loc._ref), name=loc.name or "", group=_ref(group),
            group_name=(group.name or "") if group is not None else "",
            type=_type_name(loc.type, LOCATION_TYPES),
            group_type=_type_name(getattr(group, "location_group_type", None),
                                  LOCATION_GROUP_TYPES, PROCESS),
            group_creator=_ref(creator),
        )
    regions = {int(r._ref): r.name or "" for r in registry.regions}
    region_roles = {int(r._ref): (_enum_name(getattr(r, "region_role", None)),
                                  _enum_name(getattr(r, "paradigm", None)))
                    for r in registry.regions}
    comms: dict[int, Comm] = {}
    for c in registry.comms:  # the Comm registry (also holds InterComms)
        if registry.comms[c._ref] is not c:
            continue  # a thread team kept aside (its id an MPI communicator's: globaldefs)
        group = getattr(c, "group", None)
        members: tuple[int, ...] = ()
        if group is not None and group.members:
            if all(isinstance(m, odef.Location) for m in group.members):
                members = tuple(int(m._ref) for m in group.members)
        inter = isinstance(c, odef.InterComm)  # (members: none; refused if used)
        comms[int(c._ref)] = Comm(id=int(c._ref), name=c.name or "", members=members,
                                  inter=inter)
    windows = {int(w._ref): Window(id=int(w._ref), name=w.name or "", comm=_ref(w.comm))
               for w in registry.rma_wins}
    return Definitions(timer_resolution=meta.timer_resolution, locations=locations,
                       regions=regions, comms=comms, otf2=meta, region_roles=region_roles,
                       insitu=_insitu_tables(registry, source), windows=windows)


def _insitu_tables(registry: Any, source: str) -> dict[int, dict]:
    """The in-situ overhead tables of the archive's locations (compensate.insitu)."""
    out: dict[int, dict] = {}
    for prop in getattr(registry, "location_properties", ()):
        name = getattr(prop.name, "name", prop.name)  # a String definition or str
        if str(name) == insitu.PROPERTY and prop.location is not None:
            loc = int(prop.location._ref)
            out[loc] = insitu.parse(str(prop.value), source, loc)
    return out


def _enum_name(value: object) -> str:
    """An OTF2 enum value's name in upper case ("IMPLICIT_BARRIER"), "UNKNOWN" if None."""
    if value is None:
        return "UNKNOWN"
    names = getattr(type(value), "_names", None)
    if isinstance(names, dict):  # (a value beyond the table, e.g. a newer OTF2's: UNKNOWN)
        return str(names.get(getattr(value, "value", None), "UNKNOWN")).upper()
    return str(value).rsplit(".", 1)[-1].upper()


#: held while an archive's global definitions are read: they come through the
#: ``otf2`` package's Python callbacks, and two threads reading definitions at
#: once (ranks run as threads in the tests; a notebook's threads) failed now and
#: then with a value of the wrong size. No rank waits for another meanwhile.
_DEFINITIONS_LOCK = threading.Lock()


def _open_archive(path: str) -> tuple[Any, Definitions]:
    """Open the archive whose anchor file is ``path`` and read its definitions;
    returns the open ``otf2`` reader and the model's definitions (one thread at a
    time, :data:`_DEFINITIONS_LOCK`)."""
    with _DEFINITIONS_LOCK:
        return _open_archive_alone(path)


def _open_archive_alone(path: str) -> tuple[Any, Definitions]:
    """:func:`_open_archive` without the lock."""
    if not os.path.isfile(path):
        what = "is a directory, not an OTF2 anchor file" if os.path.isdir(path) \
            else "no such OTF2 anchor file"
        raise TraceError(what, source=path)
    check_file_ends(path, (), global_defs=True)
    tolerate_attribute_types()  # (an attribute value typed unlike its definition)
    # the definitions come through Python callbacks of the C reader
    with _library_call(path, "cannot read OTF2 archive", "otf2-open", definitions=True):
        reader = TolerantReader(path, os.path.splitext(path)[0] + ".def",
                                batch_events=BATCH_EVENTS)
        try:
            registry = reader.definitions
            clock = registry.clock_properties
            meta = Otf2Archive(
                registry=registry,
                timer_resolution=int(clock.timer_resolution),
                global_offset=int(clock.global_offset),
                trace_length=int(clock.trace_length),
                realtime_timestamp=int(clock.realtime_timestamp),
                location_order=tuple(int(loc._ref) for loc in registry.locations),
                raw_definitions=reader.raw_definitions,
                **_archive_metadata(reader.handle),
            )
            definitions = _model_definitions(registry, meta, path)
        except BaseException:
            reader.close()
            raise
    return reader, definitions


class Otf2Chunks(ChunkIterator):
    """Iterator over an open archive's records in chunks (see :func:`read_otf2_chunks`).

    Holds the ``otf2`` reader until the records are exhausted, a chunk fails,
    :meth:`close` is called or the iterator is garbage collected; keeps no event
    object of a chunk once it is returned.
    """

    def __init__(self, reader: Any, definitions: Definitions, path: str,
                 chunk_records: int | None, locations: tuple[int, ...] | None = None) -> None:
        self.path = path
        self.chunk_records = chunk_records
        self._reader = reader
        self._pairs: Iterator[tuple[Any, Any]] | None = None
        self._locations = locations  # None: every location
        order = definitions.otf2.location_order if locations is None else locations
        self._collector = EventCollector(order, path)
        self._checks = InputChecks(reader.definitions, path)  # the input against itself
        lenient_lookups(reader.definitions)  # an undefined reference: refused by the checks

    def _read(self) -> dict[int, Events]:
        selected = self._collector.order
        try:
            with _library_errors(self.path, "cannot read OTF2 archive", events=selected):
                if self._pairs is None:
                    events = self._reader.events
                    if self._locations is not None:  # OTF2_Reader_SelectLocation for each
                        registry = self._reader.definitions.locations
                        events = events([registry[ref] for ref in self._locations])
                    self._pairs = chain.from_iterable(_batches(iter(events)))
                chunk = self._collector.chunk(self._pairs, self.chunk_records)
        except TraceError as exc:
            if exc.location is not None and exc.record is None:  # a record's callback failed
                exc.update(record=self._collector.failed_index(exc.location,
                                                               self._buffered(exc.location)))
            raise
        self._checks.read(chunk, self._collector.count, payload=True)
        return chunk

    def _buffered(self, ref: int) -> int:
        """Records of location ``ref`` the ``otf2`` reader delivered in the batch
        that failed (before the failing one)."""
        events = getattr(self._reader, "_event_reader", None) if self._reader else None
        return sum(1 for loc, _ev in getattr(events, "buffer", ()) if loc._ref == ref)

    def _release(self) -> None:
        reader, self._reader, self._pairs = self._reader, None, None
        if reader is not None:
            with interrupt.shielded(), _library_errors(self.path, "cannot read OTF2 archive"):
                reader.close()


def _batches(pairs: Iterator[tuple[Any, Any]]) -> Iterator[list[tuple[Any, Any]]]:
    """The reader's ``(location, event)`` pairs in lists of :data:`BATCH_EVENTS`,
    each taken inside :func:`compensate.interrupt.deferred`: the ``otf2`` reader
    builds every event in a Python callback of the C library, and a
    KeyboardInterrupt raised there would be printed and swallowed (the record
    lost, or the read failing with INTERRUPTED_BY_CALLBACK). Every call into the
    C reader happens while a list is taken, so a signal is raised between lists."""
    while True:
        with interrupt.deferred("otf2-read"):
            batch = list(islice(pairs, BATCH_EVENTS))
        if not batch:
            return
        yield batch


def read_otf2_chunks(path: str, chunk_records: int | None, *, payload: bool = True,
                     locations: Iterable[int] | None = None
                     ) -> tuple[Definitions, ChunkIterator]:
    """Definitions of the archive ``path`` and an iterator over its records in chunks.

    Each chunk holds the next ``chunk_records`` records (all if None) in the order
    of the ``otf2`` global reader (timestamp order across locations), as
    ``{location: Events}`` for the locations that have records among them; each
    record keeps its ``otf2`` event object as payload. Problems with the archive
    or its definitions raise :class:`TraceError` here, problems with a record
    from the iterator (naming the location and the record's index within the
    whole location).

    ``payload=False``: the caller needs no payload objects, only the columns, and
    writes the records only to an OTF2 archive (which then copies them from this
    input). The records are then read by the C path
    (:mod:`compensate.formats.otf2.native`) if it is available: the same columns,
    payloads ``native.NATIVE`` (or a ``native.NativeFields`` dict of the
    normalised fields the engine may read, for kinds beyond the columns), and
    ``Definitions.otf2.native_source`` set to ``path``.

    ``locations`` (ids; None: all): read only these locations' event files (the
    OTF2 library's ``OTF2_Reader_SelectLocation``; the definitions are read
    whole): the chunks hold only their records, ``chunk_records`` counts only
    theirs, and a record's index is still its index within the whole location.
    An id the definitions lack is a TraceError naming it
    (:func:`selected_locations`).
    """
    path = os.fspath(path)
    reader, definitions = _open_archive(path)
    try:
        selection = selected_locations(definitions.otf2.location_order, locations, path)
        check_file_ends(path, definitions.otf2.location_order if selection is None
                        else selection)
    except BaseException:
        reader.close()
        raise
    try:  # one open event file per location read (limits.py)
        ensure_open_files(path, len(definitions.otf2.location_order if selection is None
                                    else selection))
    except BaseException:
        reader.close()
        raise
    if selection == ():  # the OTF2 readers refuse to read no location
        with interrupt.shielded(), _library_errors(path, "cannot read OTF2 archive"):
            reader.close()
        return definitions, NoChunks()
    if not payload:
        native = _native_chunks(reader, definitions, path, chunk_records, selection)
        if native is not None:
            return definitions, native
    return definitions, Otf2Chunks(reader, definitions, path, chunk_records, selection)


def _native_chunks(reader: Any, definitions: Definitions, path: str,
                   chunk_records: int | None, locations: tuple[int, ...] | None = None
                   ) -> ChunkIterator | None:
    """The C path's chunks (closing the ``otf2`` reader, whose definitions are
    read), or None if it cannot be used for this archive: also where the OTF2
    library reported a problem while opening it (a local definition file missing,
    whose mapping tables the records' references then lack), which the C path
    reads past and the ``otf2`` package's callbacks name."""
    import compensate.formats.otf2.native as native
    import compensate.formats.otf2.nativerecords as nativerecords

    if not native.available():
        return None
    meta = definitions.otf2
    if nativerecords.unsuitable(meta.registry) is not None:
        return None  # the otf2 package path writes it differently (nativerecords)
    try:
        with _library_errors(path, "cannot read OTF2 archive"):
            start = len(_diagnostics)  # (an outer capture may hold earlier ones)
            chunks = native.NativeChunks(
                path, meta.location_order if locations is None else locations,
                chunk_records, meta.registry)
            complained = len(_diagnostics) > start
    except BaseException:
        reader.close()
        raise
    if complained:
        chunks.close()
        return None
    with interrupt.shielded(), _library_errors(path, "cannot read OTF2 archive"):
        reader.close()
    meta.native_source = path
    return chunks


def read_otf2(path: str, locations: Iterable[int] | None = None) -> Trace:
    """Read the OTF2 archive whose anchor file is ``path`` (e.g. ``run/traces.otf2``).

    Every location gets an :class:`Events` (possibly empty) in the archive's
    location order; each record keeps its ``otf2`` event object as payload, and
    ``Definitions.otf2`` holds an :class:`Otf2Archive` so that :func:`write_otf2`
    can reproduce the archive. Raises :class:`TraceError` (one line, naming the
    file) if the archive cannot be read, and naming location and record if a
    location's timestamps go backwards.

    ``locations``: read only these locations' event files; ``events`` then holds
    exactly them, in the archive's order (:func:`read_otf2_chunks`).
    """
    path = os.fspath(path)
    if locations is not None:
        locations = tuple(locations)  # (an iterator would be used up below)
    definitions, chunks = read_otf2_chunks(path, None, locations=locations)
    with contextlib.closing(chunks):
        chunk = next(chunks, {})
        for _ in chunks:  # None: a single chunk; this only closes the reader
            raise AssertionError("more than one chunk")
    order = definitions.otf2.location_order
    selection = selected_locations(order, locations, path)
    events = {ref: chunk[ref] if ref in chunk else empty_events()
              for ref in (order if selection is None else selection)}
    return Trace(definitions=definitions, events=events, source=path)


#: More bytes per declared record than records take (Score-P's and the project's
#: archives hold 11-22 bytes per record, an event file's header included): a
#: location whose event file has more than this many bytes per record its
#: definition declares, beyond :data:`EVENT_FILE_HEADER`, holds more records than
#: declared (EZTrace declares 2 for every location)
MAX_RECORD_BYTES = 128
#: Bytes of an event file that holds no record
EVENT_FILE_HEADER = 64
#: Bytes of a typical event record (a type byte, a compressed time delta, a few
#: compressed fields): the estimate of a count a definition understates
TYPICAL_RECORD_BYTES = 14


def read_buffer_sizes(path: str) -> tuple[int, int, int]:
    """What the OTF2 library holds to read the archive whatever its records, in
    bytes, from the anchor file alone: an event chunk per location it reads (filled
    whole, however few records the location has), a definition chunk; and the
    archive's number of locations."""
    with _library_call(path, "cannot read OTF2 archive", "otf2-anchor"):
        handle = _otf2.Reader_Open(path)
        try:
            events, definitions = _otf2.Reader_GetChunkSize(handle)
            locations = _otf2.Reader_GetNumberOfLocations(handle)
        finally:
            _otf2.Reader_Close(handle)
    return int(events), int(definitions), int(locations)


def location_record_counts(path: str) -> dict[int, int]:
    """Each location's record count as its Location definition gives it
    (``numberOfEvents``), read from the global definitions alone, no record read:
    for dividing the locations among processes before reading them. Where the
    location's event file is too large for the declared count
    (:data:`MAX_RECORD_BYTES`), the file's size over :data:`TYPICAL_RECORD_BYTES`
    instead: an estimate, which is all a division needs."""
    path = os.fspath(path)
    reader, definitions = _open_archive(path)
    try:
        declared = {int(loc._ref): int(loc.number_of_events or 0)
                    for loc in definitions.otf2.registry.locations}
    finally:
        with interrupt.shielded(), _library_errors(path, "cannot read OTF2 archive"):
            reader.close()
    events_dir = os.path.splitext(path)[0]
    for ref, n in declared.items():
        try:
            size = os.stat(os.path.join(events_dir, f"{ref}.evt")).st_size
        except OSError:  # another substrate, or no events: the declaration stands
            continue
        if size > EVENT_FILE_HEADER + MAX_RECORD_BYTES * max(n, 1):
            declared[ref] = size // TYPICAL_RECORD_BYTES
    return declared
