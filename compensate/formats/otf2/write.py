"""Write the trace model as an OTF2 archive.

A trace read from OTF2 is written back with its original definitions and records
(:class:`~compensate.formats.otf2.library.Otf2Archive`), every timestamp taken from
the columns. A trace that did not come from OTF2 (the text format) has no
registry; for it :func:`write_otf2` synthesises minimal OTF2 definitions (system
tree node, location groups, locations, regions, MPI communicators) and builds the
records of the kinds the engine interprets from the columns
(:mod:`compensate.formats.otf2.records`). :class:`Otf2EventWriter` writes records
handed over chunk by chunk. The input's timer resolution and realtime timestamp
are kept; the global offset and trace length are the output's own
(:func:`clock_properties`). Every write is
checked (:func:`_write_call`), and a finished archive is read back before it is
handed on for the commit (:mod:`compensate.formats.otf2.check`).

Why one module (over 600 lines): everything here serves one OTF2 archive writer —
the memory callbacks, the clock, the synthesised definitions and the records
built from columns are each only meaningful inside it, and they share its
library handles and its error reporting.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

import _otf2
import numpy as np
import otf2
import otf2.event_writer
import otf2.events as oev
from otf2 import definitions as odef
from otf2.definition_writer import DefinitionWriter
from otf2.enums import (
    CollectiveOp,
    CommFlag,
    GroupType,
    LocationGroupType,
    LocationType,
    MeasurementMode,
    Paradigm,
    ParadigmClass,
    RegionRole,
    Type,
)
from otf2.registry import DefinitionRegistry

import compensate.insitu as insitu
import compensate.interrupt as interrupt
from compensate.formats.otf2.check import HINT, check_archive
from compensate.formats.otf2.globaldefs import added_definitions, write_raw
from compensate.formats.otf2.library import (
    _INT64_UNDEF,
    _TIMESTAMP_UNDEF,
    _UINT32_UNDEF,
    _UINT64_UNDEF,
    Otf2Archive,
    _capture_diagnostics,
    _diagnostics,
    _library_call,
)
from compensate.formats.otf2.records import MATCHED_KINDS, matched_event, otf2_event, write_records
from compensate.formats.outputerror import OutputError, output_error
from compensate.formats.partitioned import event_from_columns as partitioned_event
from compensate.formats.rma import RMA_KINDS
from compensate.model import (
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OP_NAMES,
    COLUMNS,
    ENTER,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    KIND_NAMES,
    LEAVE,
    MEASUREMENT_ONOFF,
    NBC_COMPLETE,
    NBC_REQUEST,
    PARTITIONED_KINDS,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RECV,
    REQUEST_CANCELLED,
    REQUEST_TEST,
    SEND,
    Definitions,
    Events,
    Trace,
    TraceError,
)

# ---------------------------------------------------------------------------
# Writing


# OTF2_MemoryAllocate / OTF2_MemoryFreeAll (the bindings' own prototypes lack the
# userData argument, so the callbacks are set up here directly).
_ALLOCATE_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint64,
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64)
_FREE_ALL_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint64,
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_bool)
_FILETYPE_EVENTS = 3  # OTF2_FILETYPE_EVENTS

#: The largest chunks an output is written with (OTF2's defaults,
#: ``OTF2_CHUNK_SIZE_EVENTS_DEFAULT`` and ``OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT``),
#: where the input's are larger (:func:`chunk_sizes`). OTF2's writer holds a chunk
#: per location it writes and every reader (``otf2-print``, Vampir, Scalasca, the
#: ``otf2`` package) an event and a definition chunk per location it reads, however
#: few records the location has, so an EZTrace input's 16 MiB chunks would cost
#: every tool that writes or opens the output time and memory (docs/eztrace.md,
#: "The output archive"). The records and definitions are the same in any size.
MAX_EVENT_CHUNK, MAX_DEFINITION_CHUNK = 1 << 20, 4 << 20


def _record_bytes(fields: tuple) -> int:
    """More than the bytes of one definition record of these fields (a string:
    its characters, a list: 8 bytes a member, anything else: 8)."""
    return 16 + sum(len(f.encode()) + 8 if isinstance(f, str)
                    else 8 * len(f) + 8 if isinstance(f, (tuple, list)) else 8
                    for f in fields)


def chunk_sizes(meta: Otf2Archive, locations: int) -> dict[str, int]:
    """The chunk sizes an output of the input ``meta`` (with ``locations``
    locations) is written with: the input's, at most :data:`MAX_EVENT_CHUNK` for
    events, and for definitions at most :data:`MAX_DEFINITION_CHUNK` where that
    is at least OTF2's 10 bytes per location and four times the largest record
    of the input's definitions (a group of every location: 8 bytes each; the
    input's own size where they were not kept as read)."""
    out = {}
    if meta.chunk_size_events:
        out["chunk_size_events"] = min(meta.chunk_size_events, MAX_EVENT_CHUNK)
    if meta.chunk_size_definitions:
        size = meta.chunk_size_definitions
        if meta.raw_definitions and size > MAX_DEFINITION_CHUNK:
            largest = max(_record_bytes(fields) for _, fields in meta.raw_definitions)
            if max(10 * locations, 4 * largest) <= MAX_DEFINITION_CHUNK:
                size = MAX_DEFINITION_CHUNK
        out["chunk_size_definitions"] = size
    return out


class _MemoryCallbacks(ctypes.Structure):
    _fields_ = [("allocate", _ALLOCATE_FN), ("free_all", _FREE_ALL_FN)]


def _libc_function(name: str, restype: Any, argtypes: list[Any]) -> Any:
    fn = getattr(ctypes.CDLL(None), name)
    fn.restype, fn.argtypes = restype, argtypes
    return fn


_mmap = _libc_function("mmap", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                  ctypes.c_int, ctypes.c_int, ctypes.c_long])
_munmap = _libc_function("munmap", ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t])
_MAP_FAILED = ctypes.c_void_p(-1).value


_madvise = _libc_function("madvise", ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int])
_HUGE_PAGE = 2 << 20  # a transparent huge page (x86-64, arm64 with 4 KiB pages)
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)  # Linux only


def _map_chunk(size: int) -> int | None:
    """``size`` bytes of fresh anonymous memory of their own (None if none): handed
    back to the system by :func:`_unmap_chunk` however the heap looks then.

    A chunk of whole huge pages (the 4 MiB definition chunks) is mapped aligned to
    them and marked ``MADV_HUGEPAGE``: OTF2 fills all of it when it writes it out,
    and where transparent huge pages are enabled (``madvise`` mode included) that
    is then a few 2 MiB page faults instead of 1024 4 KiB ones. Elsewhere the
    advice is ignored and the chunk is ordinary memory."""
    huge = _MADV_HUGEPAGE is not None and size % _HUGE_PAGE == 0
    span = size + _HUGE_PAGE if huge else size
    ptr = _mmap(None, span, mmap.PROT_READ | mmap.PROT_WRITE,
                mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if ptr in (None, _MAP_FAILED):
        return None
    if huge:  # keep the aligned ``size`` bytes, hand the rest back
        start = (ptr + _HUGE_PAGE - 1) & ~(_HUGE_PAGE - 1)
        if start > ptr:
            _munmap(ptr, start - ptr)
        if ptr + span > start + size:
            _munmap(start + size, ptr + span - start - size)
        _madvise(start, size, _MADV_HUGEPAGE)
        ptr = start
    return ptr


def _unmap_chunk(ptr: int, size: int) -> None:
    _munmap(ptr, size)


class _ChunkAllocator:
    """OTF2 memory callbacks that keep at most ``per_buffer`` chunks of each event
    buffer in memory.

    Without them the OTF2 library keeps up to 128 MiB of every location's events
    in memory before it writes any (it flushes a buffer only when it cannot get
    another chunk), i.e. a whole archive of up to a few GiB is held until the
    archive is closed. Refusing a further chunk makes it write the buffer's
    chunks to the event file and reuse the memory; the file is the same, chunk
    for chunk. Definition buffers are not limited.

    Each chunk is a mapping of its own (``mmap``), unmapped when OTF2 frees it:
    OTF2 fills the rest of every chunk when it writes it out (at the latest when
    the archive is closed, location after location), so a chunk from the heap
    stayed resident after its free while the next location's was filled: closing
    added ~140 MiB to the peak (32 locations, 1 MiB event and 4 MiB local
    definition chunks; docs/performance.md; the local definition writers now
    take theirs one after the other, :class:`_EventWriter`). Up to :data:`POOL`
    freed chunks of each size are kept for the next allocation (an event buffer gets a new chunk
    after every flush: a fresh mapping each time would fault all its pages in).
    """

    #: freed chunks kept per chunk size
    POOL = 2

    def __init__(self, per_buffer: int = 1) -> None:
        self.per_buffer = per_buffer
        self.chunks: dict[int, list[tuple[int, int]]] = {}  # buffer key -> (address, size)
        self.pool: dict[int, list[int]] = {}  # size -> addresses of freed chunks
        self.next_key = 1
        self.callbacks = _MemoryCallbacks(_ALLOCATE_FN(self._allocate),
                                          _FREE_ALL_FN(self._free_all))

    def install(self, archive_handle: Any) -> None:
        fn = _otf2.conf.lib["OTF2_Archive_SetMemoryCallbacks"]  # a private function object
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MemoryCallbacks), ctypes.c_void_p]
        fn.restype = ctypes.c_int
        rc = fn(ctypes.cast(archive_handle, ctypes.c_void_p), ctypes.byref(self.callbacks), None)
        if rc:
            _otf2.HandleErrorCode(_otf2.ErrorCode(rc))

    def _allocate(self, _user, file_type, _location, per_buffer, size):  # C callback
        try:
            key = per_buffer[0]
            if not key:
                key = per_buffer[0] = self.next_key
                self.next_key += 1
            chunks = self.chunks.setdefault(key, [])
            if file_type == _FILETYPE_EVENTS and len(chunks) >= self.per_buffer:
                return None  # OTF2 writes the buffer out and frees its chunks
            pooled = self.pool.get(size)
            ptr = pooled.pop() if pooled else _map_chunk(size)
            if ptr:
                chunks.append((ptr, size))
            return ptr
        except BaseException:  # never raise into C; NULL is an allocation failure
            return None

    def _free_all(self, _user, _file_type, _location, per_buffer, _final):  # C callback
        try:
            for ptr, size in self.chunks.pop(per_buffer[0], ()):
                pooled = self.pool.setdefault(size, [])
                if len(pooled) < self.POOL:
                    pooled.append(ptr)
                else:
                    _unmap_chunk(ptr, size)
        except BaseException:  # never raise into C
            pass

    def __del__(self) -> None:  # (after the archive: the writer holds it until then)
        for size, pooled in self.pool.items():
            for ptr in pooled:
                _unmap_chunk(ptr, size)
        self.pool = {}


class _EventWriter(otf2.event_writer.EventWriter):
    """``otf2.event_writer.EventWriter`` that takes its location's local definition
    writer only when it is closed.

    The stock one takes it when it is created (``Archive_GetDefWriter``; nothing is
    ever written to it, the local definition file holds only its header). OTF2
    gives each definition writer a buffer of one definition chunk (4 MiB in
    Score-P archives) and fills the rest of it when it writes the file, so 32
    locations held 32 such chunks from the start and faulted in 128 MiB at close
    (~32 k page faults at 10^6 records). Taken and released one after the other,
    they reuse one pooled chunk (:class:`_ChunkAllocator`); the files are the same.
    """

    def __init__(self, archive: Any, location: Any) -> None:
        self._archive = archive
        self._location = location
        self._def_handle = None
        self._handle = _otf2.Archive_GetEvtWriter(archive._handle, location._ref)
        location._number_of_events_written = 0

    def close(self) -> None:
        """Close the location's event and local definition writers (once: the
        archive's close calls it again for a writer closed before)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        self._def_handle = _otf2.Archive_GetDefWriter(self._archive._handle, self._location._ref)
        _otf2.Archive_CloseDefWriter(self._archive._handle, self._def_handle)
        _otf2.Archive_CloseEvtWriter(self._archive._handle, handle)


class _ArchiveWriter(otf2.writer.Writer):
    """``otf2.writer.Writer`` that writes the ClockProperties we ask for.

    The stock writer stamps the archive with ``time.time()`` as realtime timestamp,
    which would date the compensated run to the moment it was written: the
    input's realtime timestamp is kept. The global offset and trace length
    describe the output: its first record and the span to its last
    (:func:`clock_properties`), so that a timeline tool shows no empty tail where
    the compensation shortened the run. ``raw_definitions`` (an OTF2 input's
    definitions as read, :func:`~compensate.formats.otf2.globaldefs.read_registry`)
    are written as they were read, with the same ids and order, duplicates
    included; without them the registry's definitions are written. It also makes
    the timer resolution
    independent of the (immutable) ClockProperties object of a reader's
    registry, and never raises from ``__del__``.
    """

    def __init__(self, *args: Any, timer_resolution: int,
                 realtime_timestamp: int = _TIMESTAMP_UNDEF,
                 clock: tuple[int, int] | None = None, global_definitions: bool = True,
                 raw_definitions: tuple = (), **kwargs: Any) -> None:
        self._handle = None  # so that close() is a no-op if Archive_Open fails
        self._event_writers = {}
        self._global_definitions = global_definitions  # False: a part's event files only
        self._resolution = int(timer_resolution)
        self._realtime = int(realtime_timestamp)
        self._clock = clock
        self._raw = raw_definitions
        self._allocator = _ChunkAllocator()  # must outlive the archive handle
        super().__init__(*args, **kwargs)
        try:
            self._allocator.install(self._handle)
        except BaseException:
            self.abandon()
            raise

    @property
    def timer_resolution(self) -> int:
        return self._resolution

    def event_writer_from_location(self, location: Any) -> _EventWriter:
        """The location's event writer (created on first use: :class:`_EventWriter`)."""
        ew = self._event_writers.get(location._ref)
        if ew is None:
            ew = self._event_writers[location._ref] = _EventWriter(self, location)
        return ew

    def _write_global_definitions(self) -> None:
        if not self.is_primary or not self._global_definitions:
            return
        with DefinitionWriter(self) as global_def_writer:
            global_offset, trace_length = clock_properties(
                self._clock, self._first_timestamp, self._last_timestamp)
            if not self._raw:
                global_def_writer.write_clock_properties(self._resolution, global_offset,
                                                         trace_length, self._realtime)
                self.definitions.write(global_def_writer)
                return
            locations = list(self.definitions.locations)
            counts = {int(loc._ref): getattr(loc, "_number_of_events_written", 0)
                      for loc in locations}
            write_raw(global_def_writer._handle, self._raw,
                      (self._resolution, global_offset, trace_length, self._realtime), counts)
            for definition in added_definitions(self.definitions, self._raw):
                definition.write(global_def_writer, self.definitions)
            for location in locations:  # (as DefinitionRegistry.write: every event file)
                self.event_writer_from_location(location)

    def abandon(self) -> None:
        """Release the archive after a failure, without writing anything more
        (what the library says meanwhile, e.g. that it could not flush to a full
        disk, is the failure already reported: held back)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            with _capture_diagnostics(), contextlib.suppress(Exception):
                _otf2.Archive_Close(handle)

    def __del__(self) -> None:
        with interrupt.shielded(), contextlib.suppress(Exception):
            self.close()


def clock_properties(clock: tuple[int, int] | None, first: int | None,
                     last: int | None) -> tuple[int, int]:
    """(global offset, trace length) to write: the first timestamp written and the
    span to the last, which describe the output (:class:`_ArchiveWriter`);
    without a record, the input's ``clock`` (offset, length; None: no input
    clock, 0 and 0)."""
    if first is None:
        return (0, 0) if clock is None else (int(clock[0]), int(clock[1]))
    return first, last - first


def _split_anchor(path: str) -> tuple[str, str]:
    """``out/traces.otf2`` -> (``out``, ``traces``)."""
    directory, base = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(base)
    if ext != ".otf2" or not stem:
        raise TraceError("an OTF2 anchor file name must look like NAME.otf2", source=path)
    return directory, stem


def _add_def(registry: DefinitionRegistry, cls: type, ref: int, *args: Any,
             **kwargs: Any) -> Any:
    """Create a definition with a chosen reference (the public API numbers them
    itself), so that text-trace ids survive a round trip through OTF2."""
    sub = registry._registry_for_type(cls)
    obj = cls(sub, ref, *args, **kwargs)
    sub._register(obj)
    return obj


def _check_id(value: int, what: str, limit: int, path: str) -> int:
    if not 0 <= value < limit:
        raise TraceError(f"{what} id {value} cannot be an OTF2 reference", source=path)
    return int(value)


def _registry_from_model(defs: Definitions, path: str) -> DefinitionRegistry:
    """Minimal OTF2 definitions for a trace that did not come from OTF2."""
    reg = DefinitionRegistry()
    reg.strings.create("")  # the otf2 writer reserves string 0 for ""
    reg.clock_properties = odef.ClockProperties(None, timer_resolution=defs.timer_resolution)
    uses_mpi = bool(defs.comms) or any(n.startswith("MPI_") for n in defs.regions.values())
    if uses_mpi:
        reg.paradigm(Paradigm.MPI, "MPI", ParadigmClass.PROCESS)
    node = reg.system_tree_node("machine", class_name="machine", parent=None)

    # OTF2 readers expect definitions in reference order (otf2-print warns otherwise).
    model_locations = sorted(defs.locations.values(), key=lambda loc: loc.id)
    group_names: dict[int, str] = {}
    group_of: dict[int, Any] = {}  # group key -> its first location (type, creator)
    for loc in model_locations:
        if not group_names.get(loc.group):
            group_names[loc.group] = loc.group_name
        group_of.setdefault(loc.group, loc)
    next_ref = max((g for g in group_names if g >= 0), default=-1) + 1
    groups: dict[int, Any] = {}
    for key in sorted(group_names, key=lambda g: (g < 0, abs(g))):
        name = group_names[key]
        ref = key if key >= 0 else next_ref
        if key < 0:
            next_ref += 1
        first = group_of[key]
        groups[key] = _add_def(
            reg, odef.LocationGroup, _check_id(ref, "location group", _UINT32_UNDEF, path),
            name or f"MPI Rank {ref}",
            location_group_type=getattr(LocationGroupType, first.group_type,
                                        LocationGroupType.PROCESS),
            system_tree_parent=node,
            # an accelerator context names the process that created it (OTF2 >= 3;
            # definitions refer backwards only, so a creator defined later is dropped)
            creating_location_group=groups.get(first.group_creator))
    locations = {
        loc.id: _add_def(reg, odef.Location, _check_id(loc.id, "location", _UINT64_UNDEF, path),
                         loc.name, type=_location_type(loc.type), number_of_events=0,
                         group=groups[loc.group])
        for loc in model_locations
    }
    for lid, table in sorted(defs.insitu.items()):  # the tracer's in-situ overhead
        if lid in locations:
            reg.location_property(locations[lid], insitu.PROPERTY, Type.STRING,
                                  insitu.dumps(table))
    regions = dict(defs.regions)
    if regions and max(regions) < 4 * len(regions) + 64:
        # OTF2 readers expect region references 0, 1, 2, ... in order: fill id gaps
        # with unused placeholders so that text ids survive without warnings.
        for rid in range(max(regions)):
            regions.setdefault(rid, f"<unused region {rid}>")
    for rid, name in sorted(regions.items()):
        mpi = name.startswith("MPI_")
        role, paradigm = defs.region_roles.get(rid, ("FUNCTION", "MPI" if mpi else "USER"))
        _add_def(reg, odef.Region, _check_id(rid, "region", _UINT32_UNDEF, path), name,
                 canonical_name=name, region_role=getattr(RegionRole, role, RegionRole.FUNCTION),
                 paradigm=getattr(Paradigm, paradigm, Paradigm.USER))

    if defs.comms:
        in_comms = {m for c in defs.comms.values() for m in c.written}
        unknown = in_comms - locations.keys()
        if unknown:
            raise TraceError(f"communicator member location {min(unknown)} is not defined",
                             source=path)
        # OTF2 stores a communicator's group as ranks into the paradigm's
        # COMM_LOCATIONS group; the bindings translate from Location objects.
        reg.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                  members=tuple(loc for i, loc in locations.items() if i in in_comms))
        for cid, comm in sorted(defs.comms.items()):
            if comm.written:
                group = reg.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                  members=tuple(locations[m] for m in comm.written))
            else:
                group = reg.group("", group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI,
                                  members=())
            _add_def(reg, odef.Comm, _check_id(cid, "communicator", _UINT32_UNDEF, path),
                     comm.name, group=group, parent=None, flags=CommFlag.NONE)
    for wid, win in sorted(defs.windows.items()):  # RMA windows (R10)
        if win.comm not in defs.comms:
            raise TraceError(f"window {wid}: communicator {win.comm} is not defined",
                             source=path)
        _add_def(reg, odef.RmaWin, _check_id(wid, "window", _UINT32_UNDEF, path), win.name,
                 comm=reg.comms[win.comm])
    return reg


def _location_type(name: str) -> Any:
    """The OTF2 location type of a model type name (ACCELERATOR_STREAM is the
    bindings' GPU: the same value)."""
    if name == "ACCELERATOR_STREAM":
        return LocationType.GPU
    return getattr(LocationType, name, LocationType.CPU_THREAD)


def _undef(value: int, undefined: int) -> int:
    return undefined if value < 0 else int(value)


def _measurement_mode(value: Any) -> Any:
    if isinstance(value, str):
        value = value.strip().lower()
        if value in ("off", "0", "false", "2"):
            return MeasurementMode.OFF
        return MeasurementMode.ON
    if value is False or value == 2:
        return MeasurementMode.OFF
    return MeasurementMode.ON


def _exit_status(value: Any) -> int:
    if value is None or (isinstance(value, str) and value.strip().upper() in ("", "UNDEFINED")):
        return _INT64_UNDEF
    return int(value)


def _event_from_columns(reg: DefinitionRegistry, cols: dict[str, list[int]], i: int,
                        kind: int, payload: Any) -> Any:
    """The otf2 event of record ``i`` built from the columns (text traces); None
    for a kind that cannot be built without an OTF2 payload."""
    t = cols["time"][i]
    fields = payload if isinstance(payload, dict) else {}
    if kind == ENTER or kind == LEAVE:
        region = reg.regions[cols["region"][i]]
        return (oev.Enter if kind == ENTER else oev.Leave)(t, region)
    if kind == SEND or kind == RECV:
        cls = oev.MpiSend if kind == SEND else oev.MpiRecv
        return cls(t, _undef(cols["peer"][i], _UINT32_UNDEF), reg.comms[cols["comm"][i]],
                   _undef(cols["tag"][i], _UINT32_UNDEF), _undef(cols["size"][i], _UINT64_UNDEF))
    if kind == COLL_BEGIN:
        return oev.MpiCollectiveBegin(t)
    if kind == COLL_END:
        op = cols["op"][i]
        if op not in COLLECTIVE_OP_NAMES:
            raise ValueError(f"unknown collective operation {op}")
        return oev.MpiCollectiveEnd(
            t, CollectiveOp(op), reg.comms[cols["comm"][i]],
            _undef(cols["peer"][i], _UINT32_UNDEF), _undef(cols["size"][i], _UINT64_UNDEF),
            _undef(cols["size_recv"][i], _UINT64_UNDEF))
    if kind == BUFFER_FLUSH:
        return oev.BufferFlush(t, cols["size"][i])
    if kind == MEASUREMENT_ONOFF:
        return oev.MeasurementOnOff(t, _measurement_mode(fields.get("mode", "on")))
    if kind == PROGRAM_BEGIN:
        args = fields.get("args", [])
        args = [args] if isinstance(args, str) else [str(a) for a in args]
        return oev.ProgramBegin(t, str(fields.get("name", "")), args)
    if kind == PROGRAM_END:
        return oev.ProgramEnd(t, _exit_status(fields.get("status", 0)))
    request = _undef(cols["request"][i], _UINT64_UNDEF)
    if kind == ISEND or kind == IRECV:
        cls = oev.MpiIsend if kind == ISEND else oev.MpiIrecv
        return cls(t, _undef(cols["peer"][i], _UINT32_UNDEF), reg.comms[cols["comm"][i]],
                   _undef(cols["tag"][i], _UINT32_UNDEF), _undef(cols["size"][i], _UINT64_UNDEF),
                   request)
    simple = {ISEND_COMPLETE: oev.MpiIsendComplete, IRECV_REQUEST: oev.MpiIrecvRequest,
              REQUEST_TEST: oev.MpiRequestTest, REQUEST_CANCELLED: oev.MpiRequestCancelled,
              NBC_REQUEST: oev.NonBlockingCollectiveRequest}
    if kind in simple:
        return simple[kind](t, request)
    if kind == NBC_COMPLETE:
        op = cols["op"][i]
        if op not in COLLECTIVE_OP_NAMES:
            raise ValueError(f"unknown collective operation {op}")
        return oev.NonBlockingCollectiveComplete(
            t, CollectiveOp(op), reg.comms[cols["comm"][i]],
            _undef(cols["peer"][i], _UINT32_UNDEF), _undef(cols["size"][i], _UINT64_UNDEF),
            _undef(cols["size_recv"][i], _UINT64_UNDEF), request)
    if kind in PARTITIONED_KINDS:
        return partitioned_event(reg, cols, i, kind)
    if kind in RMA_KINDS:
        return otf2_event(KIND_NAMES[kind], t, fields, reg, _rma_groups(reg))
    return matched_event(reg, cols, i, kind) if kind in MATCHED_KINDS else None


def _rma_groups(reg: DefinitionRegistry) -> dict:
    """The group definitions made for RmaGroupSync member sets, by set (one each)."""
    groups = getattr(reg, "_compensate_rma_groups", None)
    if groups is None:
        groups = {}
        reg._compensate_rma_groups = groups
    return groups


def _check_location_times(ev: Events, path: str, loc: int, base: int = 0,
                          previous: int = -1) -> None:
    """Refuse what OTF2 cannot store, naming the record: negative times or stop
    times (timestamps are unsigned) and times going backwards on a location (the
    OTF2 event writer rejects them, but without saying where). ``ev`` holds the
    location's records from number ``base`` on; ``previous`` is the time of the
    record before them (-1: none)."""
    bad = np.flatnonzero(ev.time < 0)
    flush = np.flatnonzero((ev.kind == BUFFER_FLUSH) & (ev.size < 0))
    if bad.size or flush.size:
        i = int(min(bad[:1].tolist() + flush[:1].tolist()))
        raise TraceError("negative timestamp cannot be written to OTF2",
                         source=path, location=loc, index=base + i)
    if len(ev) and int(ev.time[0]) < previous:
        raise TraceError(f"timestamp {int(ev.time[0])} goes backwards (previous record "
                         f"at {previous})", source=path, location=loc, index=base)
    back = np.flatnonzero(np.diff(ev.time) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise TraceError(f"timestamp {int(ev.time[i])} goes backwards (previous record "
                         f"at {int(ev.time[i - 1])})", source=path, location=loc,
                         index=base + i)


def _check_times(trace: Trace, path: str) -> None:
    """:func:`_check_location_times` for every location of a whole trace."""
    for loc, ev in trace.events.items():
        _check_location_times(ev, path, loc)


def _has_ref(sub_registry: Any, ref: int) -> bool:
    try:
        return sub_registry[ref] is not None
    except (KeyError, IndexError, TypeError):
        return False


def _check_anchor(path: str) -> tuple[str, str]:
    """Directory and archive name of anchor file ``path``, which must not exist yet."""
    directory, name = _split_anchor(path)
    for existing in (f"{name}.otf2", f"{name}.def", name):
        if os.path.exists(os.path.join(directory, existing)):
            raise TraceError(f"{existing} already exists in {directory}; "
                             "refusing to overwrite an OTF2 archive", source=path)
    return directory, name


_WRITE_ACTION = "cannot write OTF2 archive"


@contextlib.contextmanager
def _write_call(path: str, point: str, reads_input: bool = False) -> Iterator[None]:
    """:func:`_library_call` for calls that write, which must not lose an error
    the OTF2 library only reports: when a buffer cannot be flushed (``EFBIG``
    under a file-size limit, ``ENOSPC`` on a full disk) the library calls the
    error callback and drops the data, but the write or close call that flushed
    returns success, and the archive's event files end in the middle of a
    chunk. Any error the library reports meanwhile (a code above 0; warnings
    are below) is an :class:`OutputError` once the calls return, and so is an
    OSError (the column spool's temporary file, on the output's file system).

    ``reads_input``: the calls also read the input archive (the C path's copy),
    whose reader reports what it tolerates (an absent local definition file);
    then only a report that names a file of the output counts (the read-back
    check, :func:`~compensate.formats.otf2.check.check_archive`, finds a loss
    either way)."""
    with _capture_diagnostics():  # (outer: the list survives the inner call's end)
        mark = len(_diagnostics)
        with _library_call(path, _WRITE_ACTION, point):
            try:
                yield
            except OSError as exc:  # (the column spool's file: OUT's file system)
                raise output_error(path, "write OTF2 archive", exc) from None
        failed = [(code, text) for code, text in _diagnostics[mark:] if code > 0]
    if reads_input:
        directory = os.path.dirname(os.path.abspath(path))
        failed = [(code, text) for code, text in failed if directory in text]
    if failed:
        code, text = failed[0]
        try:
            what = _otf2.Error_GetDescription(_otf2.ErrorCode(code))
        except Exception:  # an unknown code: the text alone
            what = f"OTF2 error {code}"
        where = f": {' '.join(text.split())}" if text else ""
        raise OutputError(f"{_WRITE_ACTION}: {what}{where} ({HINT})", file=path)


class Otf2EventWriter:
    """Writes an OTF2 archive location by location and chunk by chunk.

    ``write(loc, events)`` appends records to location ``loc`` (calls for
    different locations may interleave); records go to the location's OTF2 event
    writer at once, so memory stays bounded by the OTF2 library's buffers.
    Records read by the C path are the exception: their columns wait in a
    temporary file (:mod:`~compensate.formats.otf2.spool`) and the C path copies
    them from the input when the archive is closed, one location after the other,
    each location's event writer closed before the next is opened (the library's
    per-location buffers are then held for one location, not all).
    ``close()`` writes the definitions (with the event counts and time range of
    what was written) and finishes the archive; ``abandon()`` releases it after
    a failure without finishing it (the caller removes the files). The archive
    is the same as :func:`write_otf2` writes for the same records, whatever
    the interleaving.

    For one process's part of a parallel output (:mod:`compensate.formats.parts`):
    ``locations`` (ids; None: every defined location) are the locations this
    writer writes and opens event files for (the C path copies only theirs from
    its input); ``global_definitions=False`` writes no global definitions (the
    anchor file it still writes is the caller's to drop), and
    :meth:`set_written` gives a definitions-only writer (``locations=()``) the
    event counts and time range the parts wrote.
    """

    def __init__(self, path: str, definitions: Definitions, *,
                 locations: Iterable[int] | None = None,
                 global_definitions: bool = True) -> None:
        path = os.fspath(path)
        self.path = path
        directory, name = _check_anchor(path)
        meta = definitions.otf2
        if meta is not None and not isinstance(meta, Otf2Archive):
            raise TraceError(f"unexpected Definitions.otf2 of type {type(meta).__name__}",
                             source=path)
        # location -> [event writer, records written, last time written]
        self._locations: dict[int, list[Any]] = {}
        self._selection = None if locations is None else tuple(int(r) for r in locations)
        self._writer: _ArchiveWriter | None = None
        self._copier: Any = None  # native.NativeCopier for records read by the C path
        self._spool: Any = None  # spool.ColumnSpool: what the copier copies at close
        self._declared: dict[int, int] | None = None  # set_written's counts (check)
        if meta is not None and meta.native_source is not None and self._selection != ():
            from compensate.formats.otf2.native import NativeCopier
            mine = meta.location_order if self._selection is None else tuple(
                ref for ref in meta.location_order if ref in set(self._selection))
            self._copier = NativeCopier(meta.native_source, mine)
        try:
            with _write_call(path, "otf2-create"):
                if meta is None:
                    registry = _registry_from_model(definitions, path)
                    realtime = _TIMESTAMP_UNDEF
                    chunks: dict[str, int] = {}
                else:
                    registry = meta.registry
                    realtime = meta.realtime_timestamp
                    chunks = chunk_sizes(meta, len(definitions.locations))
                self.registry = registry
                os.makedirs(directory, exist_ok=True)
                clock = None if meta is None else (meta.global_offset, meta.trace_length)
                raw = () if meta is None else meta.raw_definitions
                writer = _ArchiveWriter(directory, archive_name=name, definitions=registry,
                                        timer_resolution=definitions.timer_resolution,
                                        realtime_timestamp=realtime, clock=clock,
                                        global_definitions=global_definitions,
                                        raw_definitions=raw, **chunks)
                self._writer = writer
                if meta is not None:
                    if meta.creator:
                        writer.creator = meta.creator
                    if meta.description:
                        writer.description = meta.description
                    if meta.machine_name:
                        writer.machine_name = meta.machine_name
                    for prop, value in meta.properties:
                        _otf2.Archive_SetProperty(writer.handle, prop, value, True)
                else:
                    writer.creator = "compensate"
        except BaseException:  # incl. an interrupt raised as the region ends
            self.abandon()
            raise

    def _location(self, ref: int, writer: bool = True) -> list[Any]:
        """[event writer, records written, last time written] of location ``ref``;
        the event writer is opened here unless ``writer`` is False (None until
        :meth:`_event_writer`)."""
        state = self._locations.get(ref)
        if state is None:
            if not _has_ref(self.registry.locations, ref):
                raise TraceError("location is not defined in the OTF2 definitions",
                                 source=self.path, location=ref)
            if self._selection is not None and ref not in self._selection:
                raise TraceError("location is not among those this writer writes",
                                 source=self.path, location=ref)
            state = self._locations[ref] = [None, 0, -1]
        if writer:
            self._event_writer(ref)
        return state

    def _event_writer(self, ref: int) -> Any:
        state = self._locations[ref]
        if state[0] is None:
            state[0] = self._writer.event_writer_from_location(self.registry.locations[ref])
        return state[0]

    def write(self, ref: int, ev: Events) -> None:
        """Append ``ev`` (times from its columns, BufferFlush stop times from
        ``size``) to location ``ref``; TraceError naming the record for what OTF2
        cannot store or build."""
        if self._writer is None:
            raise TraceError("the OTF2 archive is already closed", source=self.path)
        with _write_call(self.path, "otf2-write", reads_input=self._copier is not None):
            spooled = self._copier is not None and bool(len(ev)) and _native_payloads(ev)
            state = self._location(ref, writer=not spooled)
            base, previous = state[1], state[2]
            _check_location_times(ev, self.path, ref, base, previous)
            if spooled:
                # records read by the C path: copied from the input by the C path when
                # the archive is closed, location after location (spool.py: why)
                if self._spool is None:
                    from compensate.formats.otf2.spool import ColumnSpool
                    self._spool = ColumnSpool(os.path.dirname(self.path))
                self._spool.add(ref, ev.time, ev.size, ev.kind, base)
                self._writer._update_timestamps(int(ev.time[0]))
                self._writer._update_timestamps(int(ev.time[-1]))
            elif len(ev):
                self._copy_spooled(ref)  # what came before, first
                self._write_records(ref, state[0], ev, base)
            if len(ev):
                state[1] = base + len(ev)
                state[2] = int(ev.time[-1])

    def _copy_spooled(self, ref: int, finish: bool = False) -> None:
        """Copy location ``ref``'s spooled records from the input (the C path);
        ``finish``: it gets no more, close its event writer and its input reader
        (their OTF2 buffers are freed before the next location's are filled)."""
        spool = self._spool
        if spool is None or not spool.pending(ref):
            return
        ew = self._event_writer(ref)
        handle = ctypes.cast(ew.handle, ctypes.c_void_p).value
        for time, size, kind, base in spool.take(ref):
            self._copier.copy_columns(ref, handle, time, size, kind, base, self.path)
            ew._location._number_of_events_written += len(time)  # as EventWriter.write does
        if finish:
            ew.close()
            self._copier.release(ref)

    def _write_records(self, ref: int, ew: Any, ev: Events, base: int) -> None:
        reg, path = self.registry, self.path
        times = ev.time.tolist()
        kinds = ev.kind.tolist()
        sizes = ev.size.tolist()
        cols: dict[str, list[int]] | None = None

        def write_one(i: int) -> None:
            nonlocal cols
            kind = kinds[i]
            payload = ev.payload[i]
            if isinstance(payload, oev._Event):
                if type(payload).__name__ != KIND_NAMES[kind]:
                    raise TraceError(
                        f"record kind {KIND_NAMES[kind]} does not match its OTF2 payload "
                        f"{type(payload).__name__}", source=path, location=ref, index=base + i)
                payload.time = times[i]
                if kind == BUFFER_FLUSH:
                    payload.stop_time = sizes[i]
                write_event(ew, payload)
                return
            if type(payload).__name__ in ("_Native", "NativeFields"):
                raise TraceError("a record read by the OTF2 C path can only be written "
                                 "with its input archive", source=path, location=ref,
                                 index=base + i)
            if cols is None:
                cols = {name: getattr(ev, name).tolist() for name, _ in COLUMNS}
            try:
                obj = _event_from_columns(reg, cols, i, kind, payload)
            except (KeyError, ValueError, TypeError, AttributeError, TraceError) as exc:
                raise TraceError(f"cannot write {KIND_NAMES[kind]} record to OTF2: "
                                 f"undefined or invalid field ({exc})", source=path,
                                 location=ref, index=base + i) from exc
            if obj is None:
                raise TraceError(f"cannot write record kind {KIND_NAMES[kind]} to OTF2 "
                                 "from a text trace", source=path, location=ref, index=base + i)
            ew.write(obj)

        # attribute-free Enter/Leave/MpiSend/MpiRecv/MpiCollectiveBegin objects go
        # straight to the C library; everything else through write_one
        write_records(self._writer, ew, ev.payload, times, kinds, write_one)

    def close(self) -> None:
        """Open event writers for the defined locations nothing was written to (so
        that every location's event count in the definitions matches what is
        written), then write the definitions and finish the archive, and read it
        back (:meth:`check`): OutputError if it does not hold what was written."""
        if self._writer is None:
            raise TraceError("the OTF2 archive is already closed", source=self.path)
        try:
            with _write_call(self.path, "otf2-close", reads_input=self._copier is not None):
                if self._spool is not None:
                    for ref in self._spool.locations():
                        self._copy_spooled(ref, finish=True)
                    self._close_spool()
                mine = (loc._ref for loc in self.registry.locations) \
                    if self._selection is None else self._selection
                for ref in mine:
                    if ref not in self._locations:
                        self._location(ref)
                global_definitions = self._writer._global_definitions
                self._writer.close()  # (a failure: abandon() releases the archive)
                self._writer = None
                self._close_copier()
            self.check(global_definitions)
        except BaseException:
            self.abandon()
            raise

    def check(self, global_definitions: bool = True) -> None:
        """Read the finished archive back (:func:`~compensate.formats.otf2.check.check_archive`):
        each location's event file must hold the records handed to :meth:`write`, and
        the global definitions (if this writer wrote them) must declare those counts
        (those of :meth:`set_written` for a definitions-only writer). A signal
        meanwhile is raised when it is done (the definitions reader calls back into
        Python)."""
        if self._declared is not None:  # a definitions-only writer: counts from the parts
            expected, events = self._declared, False
        else:
            expected, events = {ref: state[1] for ref, state in self._locations.items()}, True
        with interrupt.deferred("otf2-check"):
            check_archive(self.path, expected, definitions=global_definitions, events=events)

    def written(self) -> tuple[dict[int, int], int | None, int | None]:
        """Records written per location (every location this writer writes), and
        the first and last timestamp written (None: no record)."""
        counts = {ref: state[1] for ref, state in self._locations.items()}
        for ref in self._selection or ():
            counts.setdefault(ref, 0)
        w = self._writer
        return counts, w._first_timestamp, w._last_timestamp

    def set_written(self, counts: dict[int, int], first: int | None,
                    last: int | None) -> None:
        """Give the definitions the event counts and time range other writers
        wrote (a definitions-only writer of a parallel output): each Location
        definition's ``numberOfEvents`` from ``counts``, the ClockProperties from
        ``first``/``last`` as if this writer had written them."""
        for loc in self.registry.locations:
            loc._number_of_events_written = int(counts.get(int(loc._ref), 0))
        if not self._locations:  # (the records are the parts': their counts are checked)
            self._declared = {int(loc._ref): int(loc._number_of_events_written)
                              for loc in self.registry.locations}
        w = self._writer
        w._first_timestamp, w._last_timestamp = first, last

    def abandon(self) -> None:
        """Release the archive after a failure, without writing anything more."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with interrupt.shielded():
                writer.abandon()
        with interrupt.shielded(), contextlib.suppress(Exception):
            self._close_copier()
        with interrupt.shielded(), contextlib.suppress(Exception):
            self._close_spool()

    def _close_spool(self) -> None:
        spool, self._spool = self._spool, None
        if spool is not None:
            spool.close()

    def _close_copier(self) -> None:
        copier, self._copier = self._copier, None
        if copier is not None:
            copier.close()


class _UndefinedRef:
    """What an UNDEFINED reference is written as (every OTF2 definition
    reference is 32 bits wide)."""

    _ref = _UINT32_UNDEF


_UNDEFINED_REF = _UndefinedRef()
_REF_FIELDS: dict[type, tuple[str, ...]] = {}


def _ref_fields(cls: type) -> tuple[str, ...]:
    """The attribute names of an ``otf2`` event class's definition references."""
    names = _REF_FIELDS.get(cls)
    if names is None:
        names = _REF_FIELDS[cls] = tuple(
            re.sub(r"(?<!^)(?=[A-Z])", "_", f[0]).lower()
            for f in getattr(cls, "_fields", ()) if str(f[1]).endswith("Ref"))
    return names


def write_event(ew: Any, event: Any) -> None:
    """Write the ``otf2`` event object ``event`` with the event writer ``ew``.
    A reference the record has as UNDEFINED (None in the object: OTF2 allows it,
    e.g. EZTrace's ThreadBegin/ThreadEnd with no thread contingent) is written
    as UNDEFINED; the ``otf2`` package's writer would fail on it."""
    undefined = [name for name in _ref_fields(type(event))
                 if getattr(event, name, _UNDEFINED_REF) is None]
    if not undefined:
        ew.write(event)
        return
    for name in undefined:
        setattr(event, name, _UNDEFINED_REF)
    try:
        ew.write(event)
    finally:
        for name in undefined:
            setattr(event, name, None)


def _native_payloads(ev: Events) -> bool:
    """Whether every record of ``ev`` was read by the C path."""
    from compensate.formats.otf2.native import NATIVE, NativeFields
    p = ev.payload
    return bool(p) and (p.count(NATIVE) == len(p) or
                        all(x is NATIVE or type(x) is NativeFields for x in p))


def write_otf2(trace: Trace, path: str) -> None:
    """Write ``trace`` as an OTF2 archive whose anchor file is ``path``.

    ``path`` names the anchor file (``out/traces.otf2``: archive directory ``out``,
    archive name ``traces``); the directory is created if needed but must not hold
    an archive of that name yet. All timestamps come from the columns (``time``,
    and ``size`` for BufferFlush stop times), never from the payload objects; an
    OTF2 payload object gets the written timestamps assigned before it is written.

    A trace read from OTF2 is written with its original definitions and archive
    metadata (``Definitions.otf2`` is authoritative; ``regions``/``comms`` are only
    a derived view; the global definitions as they were read, in the same order
    with the same ids); ClockProperties keep the input's realtime timestamp and
    timer resolution, the global offset and trace length are the first record's
    time and the span to the last (:func:`clock_properties`). A text trace
    gets synthesised definitions, and its records of the kinds Enter, Leave,
    MpiSend, MpiRecv, MpiCollectiveBegin/End, BufferFlush, MeasurementOnOff,
    ProgramBegin and ProgramEnd are built from the columns (other kinds raise).
    Negative or backwards timestamps and any library failure raise a one-line
    :class:`TraceError`. (:class:`Otf2EventWriter` writes the same archive from
    records handed over chunk by chunk.)
    """
    path = os.fspath(path)
    _check_anchor(path)
    _check_times(trace, path)
    writer = Otf2EventWriter(path, trace.definitions)
    try:
        for loc, ev in trace.events.items():
            writer.write(loc, ev)
        writer.close()
    except BaseException:
        writer.abandon()
        raise
