"""Write the gathered buffers of all ranks as one OTF2 archive.

Rank 0 receives every rank's :class:`RankData` and calls :func:`write_archive`.
Local region and communicator ids are unified by their keys
(:data:`~calibration.tracer.buffer.RegionKey`, :data:`~calibration.tracer.buffer.CommKey`);
each rank is one location (its master thread) in a location group "MPI Rank r"
under a system-tree node named after its host. Timestamps are the ranks' local
``monotonic_ns`` values; every location gets two ClockOffset definitions (start and
end of the run, :mod:`calibration.tracer.clock`), which the OTF2 reader applies
with linear interpolation, so readers see every rank on rank 0's clock.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any

import _otf2
import otf2
import otf2.events as oev
from otf2.definition_writer import DefinitionWriter
from otf2.enums import (
    CollectiveOp,
    GroupType,
    LocationGroupType,
    LocationType,
    Paradigm,
    ParadigmClass,
    RegionRole,
)

from calibration.tracer import buffer as tb
from calibration.tracer.clock import Offset

TIMER_RESOLUTION = 10**9  # monotonic_ns ticks
_UNDEF_U32 = 0xFFFFFFFF


@dataclass
class RankData:
    """What one rank sends to rank 0 at the end of the run."""

    rank: int
    host: str
    times: Any  # array('q') or a sequence of int: the Recorder's columns
    codes: Any
    extra: list[tuple]
    regions: list[tb.RegionKey]
    comms: list[tb.CommKey]
    offsets: list[Offset] = field(default_factory=list)
    realtime: tuple[int, int] = (0, 0)  # (monotonic_ns, time_ns) read together

    @classmethod
    def of(cls, rank: int, host: str, recorder: tb.Recorder, offsets: list[Offset],
           realtime: tuple[int, int]) -> RankData:
        return cls(rank, host, recorder.times, recorder.codes, recorder.extra,
                   recorder.regions, recorder.comms, offsets, realtime)

    def rows(self) -> list[tuple]:
        return tb.rows(self.times, self.codes, self.extra)


def corrected(t: int, offsets: list[Offset]) -> int:
    """``t`` on rank 0's clock: linear interpolation (and extrapolation) between the
    offset measurements, as the OTF2 reader does."""
    if not offsets:
        return t
    if len(offsets) == 1 or offsets[-1].time == offsets[0].time:
        return t + offsets[0].offset
    a, b = offsets[0], offsets[-1]
    slope = (b.offset - a.offset) / (b.time - a.time)
    return t + round(a.offset + slope * (t - a.time))


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


def write_archive(path: str, ranks: list[RankData], program: str = "") -> int:
    """Write ``ranks`` as the OTF2 archive ``path`` (``run/traces.otf2``); returns
    the number of records written."""
    directory, base = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(base)
    if ext != ".otf2" or not stem:
        raise ValueError(f"{path}: an OTF2 anchor file name must look like NAME.otf2")
    ranks = sorted(ranks, key=lambda d: d.rank)
    first = [corrected(d.times[0], d.offsets) for d in ranks if len(d.times)]
    last = [corrected(d.times[-1], d.offsets) for d in ranks if len(d.times)]
    start = min(first, default=0)
    mono0, real0 = ranks[0].realtime
    realtime = real0 + (start - mono0) if real0 else 0xFFFFFFFFFFFFFFFF
    clock = (start, max(last, default=start) - start, realtime)

    os.makedirs(directory, exist_ok=True)
    writer = _Writer(directory, archive_name=stem, timer_resolution=TIMER_RESOLUTION,
                     clock=clock)
    written = 0
    try:
        writer.creator = "compensate calibration.record (mpi4py tracer)"
        if program:
            writer.description = program
        defs = writer.definitions
        locations, regions, comms = _definitions(defs, ranks)
        for d in ranks:
            loc = locations[d.rank]
            ew = writer.event_writer_from_location(loc)
            region_map = [regions[key] for key in d.regions]
            comm_map = [comms[key] for key in d.comms]
            for rec in d.rows():
                ew.write(_event(rec, region_map, comm_map))
            written += len(d.times)
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


def _definitions(defs: Any, ranks: list[RankData]) -> tuple[dict, dict, dict]:
    defs.paradigm(Paradigm.MPI, "MPI", ParadigmClass.PROCESS)
    machine = defs.system_tree_node("machine", class_name="machine", parent=None)
    nodes: dict[str, Any] = {}
    locations: dict[int, Any] = {}
    for d in ranks:
        node = nodes.get(d.host)
        if node is None:
            node = nodes[d.host] = defs.system_tree_node(d.host, class_name="node",
                                                         parent=machine)
        group = defs.location_group(f"MPI Rank {d.rank}",
                                    location_group_type=LocationGroupType.PROCESS,
                                    system_tree_parent=node)
        locations[d.rank] = defs.location("Master thread", type=LocationType.CPU_THREAD,
                                          group=group)
    regions: dict[tb.RegionKey, Any] = {}
    for d in ranks:
        for key in d.regions:
            if key in regions:
                continue
            name, canonical, source, line, paradigm, role = key
            regions[key] = defs.region(
                name, canonical_name=canonical,
                region_role=getattr(RegionRole, role),
                paradigm=Paradigm.MPI if paradigm == "mpi" else Paradigm.USER,
                source_file=source or None, begin_line_number=int(line))
    comms: dict[tb.CommKey, Any] = {}
    keys = sorted({key for d in ranks for key in d.comms},
                  key=lambda k: (len(k[0]) != len(ranks), k[1], k[0]))
    if keys:
        defs.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                   members=tuple(locations[r] for r in sorted(locations)))
    world = tuple(sorted(locations))
    for members, occurrence in keys:
        group = defs.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                           members=tuple(locations[m] for m in members))
        if members == world and occurrence == 0:
            name = "MPI_COMM_WORLD"
        else:
            name = f"MPI_Comm {len(comms)}"
        comms[(members, occurrence)] = defs.comm(name, group=group, parent=None)
    return locations, regions, comms


def _event(rec: tuple, regions: list, comms: list) -> Any:
    t, kind = rec[0], rec[1]
    if kind == tb.ENTER:
        return oev.Enter(t, regions[rec[2]])
    if kind == tb.LEAVE:
        return oev.Leave(t, regions[rec[2]])
    if kind == tb.MPI_SEND:
        return oev.MpiSend(t, rec[2], comms[rec[3]], rec[4], rec[5])
    if kind == tb.MPI_RECV:
        return oev.MpiRecv(t, rec[2], comms[rec[3]], rec[4], rec[5])
    if kind == tb.MPI_ISEND:
        return oev.MpiIsend(t, rec[2], comms[rec[3]], rec[4], rec[5], rec[6])
    if kind == tb.MPI_IRECV:
        return oev.MpiIrecv(t, rec[2], comms[rec[3]], rec[4], rec[5], rec[6])
    if kind == tb.MPI_IRECV_REQUEST:
        return oev.MpiIrecvRequest(t, rec[2])
    if kind == tb.MPI_ISEND_COMPLETE:
        return oev.MpiIsendComplete(t, rec[2])
    if kind == tb.MPI_REQUEST_TEST:
        return oev.MpiRequestTest(t, rec[2])
    if kind == tb.COLL_BEGIN:
        return oev.MpiCollectiveBegin(t)
    if kind == tb.COLL_END:
        op, comm, root, sent, received = rec[2:7]
        return oev.MpiCollectiveEnd(t, CollectiveOp(op), comms[comm],
                                    _UNDEF_U32 if root < 0 else root, sent, received)
    if kind == tb.PROGRAM_BEGIN:
        return oev.ProgramBegin(t, rec[2], rec[3])
    if kind == tb.PROGRAM_END:
        return oev.ProgramEnd(t, rec[2])
    raise ValueError(f"unknown record kind {kind}")
