"""Write the gathered buffers of all ranks as one OTF2 archive.

Rank 0 receives every rank's :class:`RankData` and calls :func:`write_archive`.
Local region and communicator ids are unified by their keys
(:data:`~calibration.tracer.buffer.RegionKey`, :data:`~calibration.tracer.buffer.CommKey`).
Each rank is a location group "MPI Rank r" under a system-tree node named after its
host; each of its Python threads is a CPU_THREAD location in that group: "Master
thread", then "Pthread thread N" in the order the threads were created (N = the
sequence count, as Score-P names them), then "Orphan thread N" for threads not
started through ``threading.Thread``. The master threads come first, so that
location r is rank r's master thread.

Thread records follow Score-P's Pthread adapter: a Paradigm definition PTHREAD
(class THREAD_CREATE_WAIT), a COMM_LOCATIONS group of paradigm PTHREAD over every
CPU thread location, and per rank a COMM_GROUP of its threads and a communicator
over it, the "thread contingent" that ThreadCreate/Begin/End/Wait reference.
ThreadEnd carries the sequence count of a ThreadWait that joined the thread, and
OTF2_UNDEFINED_UINT64 where none did (OTF2's definition of the record); lock
records carry the model PTHREAD.

MPI: OTF2 maps an MPI rank to one location (the COMM_LOCATIONS group of paradigm
MPI). That is the thread that made the rank's point-to-point (and one-sided,
partitioned) calls, or, where it made none, the one thread that made its
collectives, else the master thread: compensate takes a rank's collectives from
any thread of its process (:func:`compensate.matching.collectives.thread_ranks`).
If several threads of a rank made point-to-point calls, the rank stays mapped to
its master thread and a warning says that the others' messages cannot be matched.

Timestamps are the ranks' local ``monotonic_ns`` values; every location gets two
ClockOffset definitions (start and end of the run, :mod:`calibration.tracer.clock`),
which the OTF2 reader applies with linear interpolation, so readers see every rank
on rank 0's clock.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from time import monotonic_ns
from typing import Any

import _otf2
import numpy as np
import otf2
import otf2.events as oev
from otf2.definition_writer import DefinitionWriter
from otf2.enums import (
    CollectiveOp,
    GroupType,
    LocationGroupType,
    LocationType,
    LockType,
    Paradigm,
    ParadigmClass,
    RegionRole,
    RmaAtomicType,
    RmaSyncLevel,
    Type,
)

from calibration.tracer import buffer as tb
from calibration.tracer import evtwrite, insitu, reentry
from calibration.tracer.clock import Offset, corrected
from calibration.tracer.evtwrite import UNDEF_U32 as _UNDEF_U32
from calibration.tracer.evtwrite import event as _event
from compensate.formats.partitioned import make_event
from compensate.formats.paths import replace_entries
from compensate.model import KIND_CODE

TIMER_RESOLUTION = 10**9  # monotonic_ns ticks


@dataclass
class ThreadData:
    """One thread's records, as a :class:`~calibration.tracer.buffer.Buffer`
    holds them; ``sequence`` is 0 for the master thread, None for an orphan."""

    name: str
    sequence: int | None
    data: Any  # array('q') of (time, code) pairs
    extra: list[tuple]
    ints: Any = ()
    backs: Any = ()  # in-situ brackets (calibration.tracer.insitu)
    #: the decorator's sampled layers, taken out of ``data``
    #: (calibration.tracer.insitu.split_layers); None: none
    layers: Any = None

    @property
    def times(self) -> Any:
        return self.data[0::2]

    def rows(self) -> list[tuple]:
        return tb.rows(self.data, self.extra, self.ints)


@dataclass
class RankData:
    """What one rank sends to rank 0 at the end of the run."""

    rank: int
    host: str
    threads: list[ThreadData]
    regions: list[tb.RegionKey]
    comms: list[tb.CommKey]
    offsets: list[Offset] = field(default_factory=list)
    realtime: tuple[int, int] = (0, 0)  # (monotonic_ns, time_ns) read together
    notes: list[str] = field(default_factory=list)
    threaded: bool = False  # the rank left the single-threaded fast path
    #: the master thread's CPU and run-queue seconds and wall seconds during the
    #: program (calibration.tracer.insitu.sched_now), if known
    sched: dict[str, float] | None = None
    back_ns: float = 0.0  # calibration.tracer.insitu.back_cost on this rank
    #: ns per wrapper call outside the brackets, on this rank
    #: (calibration.tracer.overhead.wrapper_residues)
    residues: dict[str, float] = field(default_factory=dict)
    #: the extra cost of a traced call after untraced work, on this rank
    #: (calibration.tracer.overhead.cold_ladder), None if not measured
    cold: dict[str, Any] | None = None
    wins: list[tuple[tb.CommKey, int]] = field(default_factory=list)  # RMA windows

    @classmethod
    def of(cls, rank: int, host: str, recorder: tb.Recorder, offsets: list[Offset],
           realtime: tuple[int, int]) -> RankData:
        notes: list[str] = []
        threads = snapshot(recorder, notes)
        return cls(rank, host, threads, recorder.regions, recorder.comms, offsets,
                   realtime, [f"rank {rank}: {n}" for n in notes], recorder.threaded,
                   wins=list(recorder.wins))

    def rows(self) -> list[tuple]:
        """The master thread's records."""
        return self.threads[0].rows()


def snapshot(recorder: tb.Recorder, notes: list[str] | None = None) -> list[ThreadData]:
    """Copies of the recorder's buffers, master first, then by sequence count. A
    thread still running (a daemon thread, or an orphan) may be recording while we
    copy: its copy ends at a whole record, and gets Leave records for its open
    regions and its ThreadEnd at the time it was stopped
    (:meth:`~calibration.tracer.buffer.Recorder.stop_threads`, else of the copy),
    as Score-P ends such "latecomer" threads at the end of the measurement."""
    out = []
    now = monotonic_ns()
    buffers = sorted(recorder.buffers, key=lambda b: (b.sequence is None,
                                                      b.sequence or 0))
    for buf in buffers:
        data = array("q", buf.data)  # data first: extra and ints are at least as long
        data, unpaired = reentry.realign(data)
        if unpaired and notes is not None:
            notes.append(f"{buf.name}: {unpaired} record halves without a partner (a "
                         "record being written when the buffer was copied, or one "
                         "broken by a signal handler) were left out")
        del data[len(data) & ~1:]
        extra, ints = list(buf.extra), array("q", buf.ints)
        if buf is not recorder.main and not buf.ended:
            stack = _open_regions(data)
            stop = now if recorder.stopped_at is None else recorder.stopped_at
            end = max(stop, data[-2] if data else stop)
            for region in reversed(stack):
                data.extend((end, tb.LEAVE | region << tb.KIND_BITS))
            if buf.sequence is not None:
                data.extend((end, tb.THREAD_END | buf.sequence << tb.KIND_BITS))
            if notes is not None:
                notes.append(f"{buf.name} was still running at the end of the program; "
                             f"its {len(stack)} open regions end there")
        data, backs, late, dropped = reentry.restore_order(data, array("q", buf.backs))
        if late and notes is not None:
            notes.append(f"{buf.name}: {late} records were appended after later ones "
                         "(a traced function ran inside the tracer: a finalizer, a gc "
                         "callback or a signal handler) and were put in time order; "
                         f"{dropped} in-situ brackets around them were dropped")
        data, layers = insitu.split_layers(data)
        out.append(ThreadData(buf.name, buf.sequence, data, extra, ints, backs, layers))
    return out


def _open_regions(data: Any) -> list[int]:
    stack: list[int] = []
    for code in data[1::2]:
        kind = code & tb.KIND_MASK
        if kind == tb.ENTER:
            stack.append(code >> tb.KIND_BITS)
        elif kind == tb.LEAVE and stack:
            stack.pop()
    return stack


def _kinds(thread: ThreadData) -> np.ndarray:
    return np.asarray(thread.data, dtype=np.int64)[1::2] & tb.KIND_MASK


class _Writer(otf2.writer.Writer):
    """``otf2.writer.Writer`` with ClockProperties from the corrected first/last
    timestamps and a realtime anchor we know (the stock one takes ``time.time()``
    whenever the first event happens to be written)."""

    def __init__(self, *args: Any, clock: tuple[int, int, int], **kwargs: Any) -> None:
        self._clock = clock  # (global offset, trace length, realtime ns)
        super().__init__(*args, **kwargs)

    def _write_global_definitions(self) -> None:
        if not self.is_primary:
            return
        with DefinitionWriter(self) as gdw:
            gdw.write_clock_properties(self.timer_resolution, *self._clock)
            self.definitions.write(gdw)


def remove_archive(path: str) -> None:
    """Delete the archive whose anchor file is ``path`` (anchor, .def, event dir)."""
    directory, base = os.path.split(os.path.abspath(path))
    stem = os.path.splitext(base)[0]
    for name in (f"{stem}.otf2", f"{stem}.def"):
        p = os.path.join(directory, name)
        if os.path.isfile(p):
            os.remove(p)
    events = os.path.join(directory, stem)
    if os.path.isdir(events):
        shutil.rmtree(events)


def archive_exists(path: str) -> bool:
    directory, base = os.path.split(os.path.abspath(path))
    stem = os.path.splitext(base)[0]
    return any(os.path.exists(os.path.join(directory, n))
               for n in (f"{stem}.otf2", f"{stem}.def", stem))


def write_archive(path: str, ranks: list[RankData], program: str = "",
                  warnings: list[str] | None = None,
                  overhead_defaults: dict[str, float] | None = None,
                  tables: list[dict] | None = None) -> int:
    """Write ``ranks`` as the OTF2 archive ``path`` (``run/traces.otf2``); returns
    the number of records written. Problems that do not stop the writing (MPI
    calls from several threads of a rank, threads still running at the end) are
    appended to ``warnings``. Every location gets its in-situ overhead table
    (:func:`calibration.tracer.insitu.location_table`, with ``overhead_defaults``
    for the records that were not bracketed) as a LocationProperty; ``tables``,
    if given, receives them (:mod:`calibration.tracer.attribution`). The archive
    is written into a hidden staging directory beside ``path`` and moved into
    place when complete, replacing an archive of that name only then: an
    exception (or KeyboardInterrupt) leaves nothing of it at ``path`` and the old
    archive as it was. An archive the disk has no room for is refused before
    writing (:func:`_check_space`)."""
    directory, base = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(base)
    if ext != ".otf2" or not stem:
        raise ValueError(f"{path}: an OTF2 anchor file name must look like NAME.otf2")
    ranks = sorted(ranks, key=lambda d: d.rank)
    warn = warnings if warnings is not None else []
    for d in ranks:
        warn.extend(d.notes)
    first = [corrected(th.data[0], d.offsets) for d in ranks for th in d.threads
             if len(th.data)]
    last = [corrected(th.data[-2], d.offsets) for d in ranks for th in d.threads
            if len(th.data)]
    start = min(first, default=0)
    mono0, real0 = ranks[0].realtime
    realtime = real0 + (start - mono0) if real0 else 0xFFFFFFFFFFFFFFFF
    clock = (start, max(last, default=start) - start, realtime)

    os.makedirs(directory, exist_ok=True)
    _check_space(directory, ranks)
    # written beside the output and moved into place once complete, the anchor
    # last: a write that fails or is interrupted (KeyboardInterrupt) leaves
    # nothing new at ``path`` and an archive already there as it was (--force
    # replaces it only now), so that the next run needs no --force
    staging = tempfile.mkdtemp(prefix=f".{stem}.", suffix=".partial", dir=directory)
    try:
        written = _write_into(staging, stem, ranks, clock, program, warn,
                              overhead_defaults, tables)
        replace_entries(staging, directory, f"{stem}.otf2")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written


#: Upper estimates of an archive's bytes per record (an Enter with its in-situ
#: cost attribute takes ~21 B, the largest MPI records ~40 B), per location (its
#: local definitions and table) and for the global definitions (a 2-record
#: archive of one location: 12.5 KB).
BYTES_PER_RECORD = 48
BYTES_PER_LOCATION = 32 << 10
BYTES_PER_ARCHIVE = 64 << 10


def _check_space(directory: str, ranks: list[RankData]) -> None:
    """Refuse (OSError ENOSPC, one line) to write an archive that would not fit:
    the OTF2 library buffers the events in memory and writes them when the
    archive is closed, and a full disk there aborts the process (a double free in
    OTF2 3.0's error path) instead of returning an error."""
    records = sum(len(th.data) // 2 for d in ranks for th in d.threads)
    locations = sum(len(d.threads) for d in ranks)
    need = BYTES_PER_RECORD * records + BYTES_PER_LOCATION * locations + BYTES_PER_ARCHIVE
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return  # nothing to go by: write and see
    if free < need:
        raise OSError(errno.ENOSPC, f"{directory}: the archive needs about "
                      f"{need / 2**20:,.1f} MiB ({records:,} records), "
                      f"{free / 2**20:,.1f} MiB free")


def _write_into(directory: str, stem: str, ranks: list[RankData],
                clock: tuple[int, int, int], program: str, warn: list[str],
                overhead_defaults: dict[str, float] | None,
                tables: list[dict] | None) -> int:
    """The body of :func:`write_archive`: write the archive ``stem`` into
    ``directory`` (its staging directory); returns the number of records."""
    writer = _Writer(directory, archive_name=stem, timer_resolution=TIMER_RESOLUTION,
                     clock=clock)
    written = 0
    try:
        writer.creator = "compensate calibration.record (mpi4py tracer)"
        if program:
            writer.description = program
        defs = writer.definitions
        locations, regions, comms, contingents = _definitions(defs, ranks, warn)
        written_tables = _insitu_properties(defs, ranks, locations,
                                            overhead_defaults or {}, tables)
        mpi_loc = {d.rank: locations[d.rank][_mpi_thread(d, [])] for d in ranks}
        rma = _RmaDefs(defs, ranks, comms, mpi_loc)
        own = defs.attribute(insitu.ATTRIBUTE, "the tracer's cost after this record, "
                             "measured in this run (ns)", Type.UINT64)
        for d in ranks:
            region_map = [regions[key] for key in d.regions]
            comm_map = [comms[key] for key in d.comms]
            win_map = [rma.windows[key] for key in d.wins]
            contingent = contingents.get(d.rank)
            waited = set()
            for th in d.threads:
                codes = np.asarray(th.data, dtype=np.int64)[1::2]
                waited.update((codes[(codes & tb.KIND_MASK) == tb.THREAD_WAIT]
                               >> tb.KIND_BITS).tolist())
            names = [key[0] for key in d.regions]
            for i, th in enumerate(d.threads):
                loc = locations[d.rank][i]
                ew = writer.event_writer_from_location(loc)
                cost = insitu.record_overheads(th.data, th.backs, d.back_ns, names,
                                               d.residues, th.layers,
                                               written_tables[d.rank, i])
                # the common kinds straight through the C library, the others as
                # otf2 event objects; records and costs one at a time (10^6 tuples
                # and ints at once took ~140 MB)
                evtwrite.write_rows(writer, ew, tb.iter_rows(th.data, th.extra, th.ints),
                                    _values(cost), own, region_map, comm_map,
                                    _fallback(ew, defs, rma, own, region_map, comm_map,
                                              win_map, contingent, waited))
                written += len(th.data) // 2
                dw = _otf2.Archive_GetDefWriter(writer.handle, loc._ref)
                for o in d.offsets:
                    _otf2.DefWriter_WriteClockOffset(dw, int(o.time), int(o.offset),
                                                     float(o.error))
        writer.close()
    except BaseException:
        handle, writer._handle = writer._handle, None
        if handle is not None:
            try:
                _otf2.Archive_Close(handle)
            except Exception:  # noqa: BLE001 - already failing
                pass
        raise
    return written


def _values(a: np.ndarray, chunk: int = 1 << 16) -> Iterator[int]:
    """The elements of ``a`` as Python ints, ``chunk`` at a time."""
    for i in range(0, len(a), chunk):
        yield from a[i:i + chunk].tolist()


def _fallback(ew: Any, defs: Any, rma: _RmaDefs, own: Any, region_map: list,
              comm_map: list, win_map: list, contingent: Any, waited: set) -> Any:
    """``write(rec, o)``: write one record of a location through its event object
    (:func:`calibration.tracer.evtwrite.write_rows`' fallback), with the in-situ
    cost ``o`` as attribute ``own`` unless ``o < 0``."""
    def write(rec: tuple, o: int) -> None:
        kind = rec[1]
        ev = (partitioned_event(defs, rec, comm_map) if kind in tb.PARTITIONED_KINDS else
              rma.event(rec, win_map) if kind in tb.RMA_KINDS else
              _event(rec, region_map, comm_map, contingent, waited))
        if o >= 0 and kind not in tb.PARTITIONED_KINDS:
            # (a partitioned record's attribute list is its fields:
            # compensate.formats.otf2.nativerecords reads it whole)
            ev.attributes = {**(ev.attributes or {}), own: o}
        ew.write(ev)
    return write


def _insitu_properties(defs: Any, ranks: list[RankData], locations: dict,
                       defaults: dict[str, float],
                       tables: list[dict] | None = None) -> dict[tuple[int, int], dict]:
    """One :data:`calibration.tracer.insitu.PROPERTY` per location (each table also
    appended to ``tables``, if given); returns them by (rank, thread index)."""
    out = {}
    for d in ranks:
        names = [key[0] for key in d.regions]
        for i, th in enumerate(d.threads):
            table = insitu.location_table(th.data, th.backs, names, defaults, d.back_ns,
                                          d.sched if i == 0 else None, d.residues,
                                          d.cold, th.layers)
            out[d.rank, i] = table
            if tables is not None:
                tables.append(table)
            defs.location_property(locations[d.rank][i], insitu.PROPERTY, Type.STRING,
                                   insitu.to_json(table))
    return out


_PARADIGMS = {"user": Paradigm.USER, "mpi": Paradigm.MPI, "pthread": Paradigm.PTHREAD}


#: MPI kinds whose records compensate matches on any thread of a rank (collectives)
_COLLECTIVE_KINDS = frozenset((tb.COLL_BEGIN, tb.COLL_END, tb.NBC_REQUEST, tb.NBC_COMPLETE))


def _mpi_thread(d: RankData, warn: list[str]) -> int:
    """Index of the thread of rank ``d`` that OTF2 maps the rank to (see the
    module docstring)."""
    def calls(kinds: frozenset) -> list[int]:
        return [i for i, th in enumerate(d.threads) if np.isin(_kinds(th), list(kinds)).any()]

    using, talking = calls(tb.MPI_KINDS), calls(tb.MPI_KINDS - _COLLECTIVE_KINDS)
    if len(talking) > 1:
        names = ", ".join(d.threads[i].name for i in talking)
        warn.append(f"rank {d.rank}: point-to-point or one-sided MPI calls from "
                    f"{len(talking)} threads ({names}); OTF2 maps an MPI rank to one "
                    f"location, the master thread here: compensate takes a rank's "
                    f"collectives from any of its threads, but its messages from that "
                    f"one only (make them all from one thread)")
        return 0
    if talking:  # (its collectives may come from any thread: compensate takes them)
        return talking[0]
    return using[0] if len(using) == 1 else 0


def _definitions(defs: Any, ranks: list[RankData],
                 warn: list[str]) -> tuple[dict, dict, dict, dict]:
    defs.paradigm(Paradigm.MPI, "MPI", ParadigmClass.PROCESS)
    threaded = any(len(d.threads) > 1 or np.isin(_kinds(th), _THREAD_KINDS).any()
                   for d in ranks for th in d.threads)
    if threaded:
        defs.paradigm(Paradigm.PTHREAD, "Pthread", ParadigmClass.THREAD_CREATE_WAIT)
    machine = defs.system_tree_node("machine", class_name="machine", parent=None)
    nodes: dict[str, Any] = {}
    groups: dict[int, Any] = {}
    locations: dict[int, list[Any]] = {}
    for d in ranks:  # master threads first: location r is rank r's master thread
        node = nodes.get(d.host)
        if node is None:
            node = nodes[d.host] = defs.system_tree_node(d.host, class_name="node",
                                                         parent=machine)
        groups[d.rank] = defs.location_group(f"MPI Rank {d.rank}",
                                             location_group_type=LocationGroupType.PROCESS,
                                             system_tree_parent=node)
        locations[d.rank] = [defs.location(d.threads[0].name, type=LocationType.CPU_THREAD,
                                           group=groups[d.rank])]
    for d in ranks:
        for th in d.threads[1:]:
            locations[d.rank].append(defs.location(th.name, type=LocationType.CPU_THREAD,
                                                   group=groups[d.rank]))
    mpi_loc = {d.rank: locations[d.rank][_mpi_thread(d, warn)] for d in ranks}
    regions: dict[tb.RegionKey, Any] = {}
    for d in ranks:
        for key in d.regions:
            if key in regions:
                continue
            name, canonical, source, line, paradigm, role = key
            regions[key] = defs.region(
                name, canonical_name=canonical,
                region_role=getattr(RegionRole, role),
                paradigm=_PARADIGMS[paradigm],
                source_file=source or None, begin_line_number=int(line))
    comms: dict[tb.CommKey, Any] = {}
    keys = sorted({key for d in ranks for key in d.comms},
                  key=lambda k: (len(k[0]) != len(ranks), k[1], k[0]))
    if keys:
        defs.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                   members=tuple(mpi_loc[r] for r in sorted(mpi_loc)))
    world = tuple(sorted(locations))
    for members, occurrence in keys:
        group = defs.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                           members=tuple(mpi_loc[m] for m in members))
        if members == world and occurrence == 0:
            name = "MPI_COMM_WORLD"
        else:
            name = f"MPI_Comm {len(comms)}"
        comms[(members, occurrence)] = defs.comm(name, group=group, parent=None)
    contingents: dict[int, Any] = {}
    if threaded:
        defs.group("PTHREAD", group_type=GroupType.COMM_LOCATIONS,
                   paradigm=Paradigm.PTHREAD,
                   members=tuple(loc for d in ranks for loc in locations[d.rank]))
        for d in ranks:
            group = defs.group(f"Pthread threads of MPI Rank {d.rank}",
                               group_type=GroupType.COMM_GROUP, paradigm=Paradigm.PTHREAD,
                               members=tuple(locations[d.rank]))
            contingents[d.rank] = defs.comm(f"Pthread threads of MPI Rank {d.rank}",
                                            group=group, parent=None)
    return locations, regions, comms, contingents


_THREAD_KINDS = sorted(tb.SEQUENCE_KINDS | tb.LOCK_KINDS)


#: MPI-4 partitioned tracer kind (calibration.tracer.partitioned) -> (model kind, the
#: model columns of its fields in order)
_COLUMNS = {
    tb.P_SEND_INIT: ("MpiPsendInit", ("peer", "comm", "tag", "size", "size_recv", "request")),
    tb.P_RECV_INIT: ("MpiPrecvInit", ("peer", "comm", "tag", "size", "size_recv", "request")),
    tb.P_SEND_REQUEST: ("MpiPsendRequest", ("request",)),
    tb.P_RECV_REQUEST: ("MpiPrecvRequest", ("request",)),
    tb.P_READY: ("MpiPready", ("request", "size_recv")),
    tb.P_ARRIVED: ("MpiParrived", ("request", "size_recv")),
    tb.P_TESTED: ("MpiPtested", ("request", "size_recv")),
    tb.P_SEND_COMPLETE: ("MpiPsendComplete", ("request",)),
    tb.P_RECV_COMPLETE: ("MpiPrecvComplete", ("request",)),
}


def partitioned_event(defs: Any, rec: tuple, comms: list) -> Any:
    """The OTF2 record of a traced partitioned record ``(time, kind, *fields)``
    (:mod:`compensate.formats.partitioned`); ``comms`` maps local comm ids to
    their OTF2 definitions."""
    name, columns = _COLUMNS[rec[1]]
    fields = dict(zip(columns, rec[2:], strict=True))
    comm = comms[fields["comm"]] if "comm" in fields else None
    return make_event(defs, KIND_CODE[name], rec[0], fields, comm)


class _RmaDefs:
    """The RMA window definitions of the archive (one per window key, on its
    communicator) and the OTF2 records of the tracer's RMA kinds
    (:mod:`calibration.tracer.rma`); an RmaGroupSync's members become a group of
    the ranks' MPI locations, one definition per distinct member set."""

    def __init__(self, defs: Any, ranks: list[RankData], comms: dict, mpi_loc: dict) -> None:
        self.defs, self.mpi_loc = defs, mpi_loc
        self.windows: dict = {}
        for key in sorted({k for d in ranks for k in d.wins}):
            self.windows[key] = defs.rma_win(f"MPI_Win {len(self.windows)}", comms[key[0]])
        self.groups: dict[tuple[int, ...], Any] = {}

    def group(self, members: tuple[int, ...]) -> Any:
        g = self.groups.get(members)
        if g is None:
            g = self.groups[members] = self.defs.group(
                "", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                members=tuple(self.mpi_loc[m] for m in members))
        return g

    def event(self, rec: tuple, wins: list) -> Any:
        t, kind, f = rec[0], rec[1], rec[2:]
        if kind == tb.RMA_COLL_BEGIN:
            return oev.RmaCollectiveBegin(t)
        if kind == tb.RMA_COLL_END:
            return oev.RmaCollectiveEnd(t, CollectiveOp(f[0]), RmaSyncLevel(f[1]), wins[f[2]],
                                        _UNDEF_U32, 0, 0)
        if kind == tb.RMA_GROUP_SYNC:
            return oev.RmaGroupSync(t, RmaSyncLevel(f[0]), wins[f[1]], self.group(f[2]))
        win = wins[f[0]]
        if kind == tb.RMA_WIN_CREATE:
            return oev.RmaWinCreate(t, win)
        if kind == tb.RMA_WIN_DESTROY:
            return oev.RmaWinDestroy(t, win)
        remote = _UNDEF_U32 if f[1] < 0 else f[1]
        if kind == tb.RMA_REQUEST_LOCK:
            return oev.RmaRequestLock(t, win, remote, 0,
                                      LockType.EXCLUSIVE if f[2] == 0 else LockType.SHARED)
        if kind == tb.RMA_RELEASE_LOCK:
            return oev.RmaReleaseLock(t, win, remote, 0)
        if kind == tb.RMA_PUT:
            return oev.RmaPut(t, win, remote, f[2], f[3])
        if kind == tb.RMA_GET:
            return oev.RmaGet(t, win, remote, f[2], f[3])
        if kind == tb.RMA_ATOMIC:
            return oev.RmaAtomic(t, win, remote, RmaAtomicType(f[2]), f[3], f[4], f[5])
        if kind == tb.RMA_OP_COMPLETE:
            return oev.RmaOpCompleteBlocking(t, win, f[1])
        raise ValueError(f"unknown RMA record kind {kind}")
