"""The in-memory trace model: definitions plus per-location columnar event arrays.

Every reader (OTF2, `.trace`) produces a :class:`Trace`; every writer consumes one,
and the engine only ever touches the numpy columns of :class:`Events`. Records the
engine does not interpret keep their original payload (an OTF2 event object, or
the text fields of a `.trace` line) so that writers can copy them unchanged except
for their timestamp.

Column meaning by kind (unused cells hold -1):

=====================  ========  =======  ======  =====  ==============  =========  =========
kind                   region    peer     comm    tag    size            size_recv  op
=====================  ========  =======  ======  =====  ==============  =========  =========
Enter / Leave          region id
MpiSend                          receiver comm id tag    bytes
                                 rank
MpiRecv                          sender   comm id tag    bytes
                                 rank
MpiCollectiveEnd                 root     comm id        size_sent       size_recv  coll. op
                                 rank (-1
                                 if none)
BufferFlush                                              stop_time
                                                         (ticks)
=====================  ========  =======  ======  =====  ==============  =========  =========

MPI-4 partitioned kinds (``MpiPsendInit`` ... ``MpiPrecvComplete``): the Init
records fill peer (receiver/sender rank), comm, tag, size (bytes of the whole
buffer) and ``size_recv`` (number of partitions); ``MpiPready``, ``MpiParrived``
and ``MpiPtested`` hold the partition index in ``size_recv``; all hold the
request id in ``request``.

The ``request`` column holds the request id of MpiIsend, MpiIsendComplete,
MpiIrecvRequest, MpiIrecv, MpiRequestTest, MpiRequestCancelled,
NonBlockingCollectiveRequest and NonBlockingCollectiveComplete (request ids are
scoped per location). MpiIsend/MpiIrecv fill peer/comm/tag/size like
MpiSend/MpiRecv; NonBlockingCollectiveComplete like MpiCollectiveEnd.

``peer`` ranks are ranks *in the record's communicator*, exactly as OTF2 stores them;
:meth:`Definitions.location_of` maps them to location ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress
from typing import Any

import numpy as np

from compensate.errors import Refusal

# ---------------------------------------------------------------------------
# Record kinds. The code of a kind is its index in KIND_NAMES; the names are the
# OTF2 event record names as the `otf2` package spells them. The first block is
# what the engine interprets; the rest are carried as local events.
KIND_NAMES: tuple[str, ...] = (
    "Enter",
    "Leave",
    "MpiSend",
    "MpiRecv",
    "MpiCollectiveBegin",
    "MpiCollectiveEnd",
    "BufferFlush",
    "MeasurementOnOff",
    "ProgramBegin",
    "ProgramEnd",
    "Metric",
    # --- carried, not interpreted (yet) ---
    "CallingContextEnter",
    "CallingContextLeave",
    "CallingContextSample",
    "CommCreate",
    "CommDestroy",
    "IoAcquireLock",
    "IoChangeStatusFlags",
    "IoCreateHandle",
    "IoDeleteFile",
    "IoDestroyHandle",
    "IoDuplicateHandle",
    "IoOperationBegin",
    "IoOperationCancelled",
    "IoOperationComplete",
    "IoOperationIssued",
    "IoOperationTest",
    "IoReleaseLock",
    "IoSeek",
    "IoTryLock",
    "MpiImrecv",
    "MpiImrecvRequest",
    "MpiIrecv",
    "MpiIrecvRequest",
    "MpiIsend",
    "MpiIsendComplete",
    "MpiMrecv",
    "MpiProbe",
    "MpiRequestCancelled",
    "MpiRequestTest",
    "NonBlockingCollectiveComplete",
    "NonBlockingCollectiveRequest",
    "OmpAcquireLock",
    "OmpFork",
    "OmpJoin",
    "OmpReleaseLock",
    "OmpTaskComplete",
    "OmpTaskCreate",
    "OmpTaskSwitch",
    "ParameterInt",
    "ParameterString",
    "ParameterUnsignedInt",
    "RmaAcquireLock",
    "RmaAtomic",
    "RmaCollectiveBegin",
    "RmaCollectiveEnd",
    "RmaGet",
    "RmaGroupSync",
    "RmaOpCompleteBlocking",
    "RmaOpCompleteNonBlocking",
    "RmaOpCompleteRemote",
    "RmaOpTest",
    "RmaPut",
    "RmaReleaseLock",
    "RmaRequestLock",
    "RmaSync",
    "RmaTryLock",
    "RmaWaitChange",
    "RmaWinCreate",
    "RmaWinDestroy",
    "ThreadAcquireLock",
    "ThreadBegin",
    "ThreadCreate",
    "ThreadEnd",
    "ThreadFork",
    "ThreadJoin",
    "ThreadReleaseLock",
    "ThreadTaskComplete",
    "ThreadTaskCreate",
    "ThreadTaskSwitch",
    "ThreadTeamBegin",
    "ThreadTeamEnd",
    "ThreadWait",
    # --- MPI-4 partitioned point-to-point (the seed's event model, issue #20;
    # OTF2 3.x has no such records: docs/trace-format.md, "Partitioned communication")
    "MpiPsendInit",
    "MpiPrecvInit",
    "MpiPsendRequest",
    "MpiPrecvRequest",
    "MpiPready",
    "MpiParrived",
    "MpiPtested",
    "MpiPsendComplete",
    "MpiPrecvComplete",
)
KIND_CODE: dict[str, int] = {name: i for i, name in enumerate(KIND_NAMES)}


def kind_table(*codes: Any) -> np.ndarray:
    """A table indexed by record kind code (``codes``: codes or iterables of
    codes): ``kind_table(A, B).take(ev.kind)`` is ``np.isin(ev.kind, (A, B))``
    without isin's sort, which is most of its cost on the columns of one location
    of one segment."""
    table = np.zeros(len(KIND_NAMES), dtype=bool)
    for c in codes:
        table[list(c) if isinstance(c, (list, tuple, set, frozenset, np.ndarray)) else c] = True
    return table

ENTER = KIND_CODE["Enter"]
LEAVE = KIND_CODE["Leave"]
SEND = KIND_CODE["MpiSend"]
RECV = KIND_CODE["MpiRecv"]
COLL_BEGIN = KIND_CODE["MpiCollectiveBegin"]
COLL_END = KIND_CODE["MpiCollectiveEnd"]
BUFFER_FLUSH = KIND_CODE["BufferFlush"]
MEASUREMENT_ONOFF = KIND_CODE["MeasurementOnOff"]
PROGRAM_BEGIN = KIND_CODE["ProgramBegin"]
PROGRAM_END = KIND_CODE["ProgramEnd"]
METRIC = KIND_CODE["Metric"]
ISEND = KIND_CODE["MpiIsend"]
ISEND_COMPLETE = KIND_CODE["MpiIsendComplete"]
IRECV_REQUEST = KIND_CODE["MpiIrecvRequest"]
IRECV = KIND_CODE["MpiIrecv"]
REQUEST_TEST = KIND_CODE["MpiRequestTest"]
REQUEST_CANCELLED = KIND_CODE["MpiRequestCancelled"]
NBC_REQUEST = KIND_CODE["NonBlockingCollectiveRequest"]
NBC_COMPLETE = KIND_CODE["NonBlockingCollectiveComplete"]
# Matched probes (MPI_Mprobe/Improbe, then MPI_Mrecv/Imrecv). A message id lives in the
# ``size_recv`` column (MpiProbe: -1 for a plain MPI_Probe/Iprobe, which does not
# take the message), the message length in ``size``, a request id in ``request``.
PROBE = KIND_CODE["MpiProbe"]
MRECV = KIND_CODE["MpiMrecv"]
IMRECV_REQUEST = KIND_CODE["MpiImrecvRequest"]
IMRECV = KIND_CODE["MpiImrecv"]

# MPI-4 partitioned point-to-point (compensate/partitioned.py). The Init records fill
# peer/comm/tag/size like MpiIsend/MpiIrecv plus the number of partitions in
# ``size_recv``; Pready/Parrived/Ptested carry the partition index in ``size_recv``;
# all carry the request id in ``request``.
PSEND_INIT = KIND_CODE["MpiPsendInit"]
PRECV_INIT = KIND_CODE["MpiPrecvInit"]
PSEND_REQUEST = KIND_CODE["MpiPsendRequest"]
PRECV_REQUEST = KIND_CODE["MpiPrecvRequest"]
PREADY = KIND_CODE["MpiPready"]
PARRIVED = KIND_CODE["MpiParrived"]
PTESTED = KIND_CODE["MpiPtested"]
PSEND_COMPLETE = KIND_CODE["MpiPsendComplete"]
PRECV_COMPLETE = KIND_CODE["MpiPrecvComplete"]
#: every partitioned kind; those with a partition index; those with an envelope
PARTITIONED_KINDS = frozenset({PSEND_INIT, PRECV_INIT, PSEND_REQUEST, PRECV_REQUEST, PREADY,
                               PARRIVED, PTESTED, PSEND_COMPLETE, PRECV_COMPLETE})
PARTITION_KINDS = frozenset({PREADY, PARRIVED, PTESTED})
PINIT_KINDS = frozenset({PSEND_INIT, PRECV_INIT})

#: Kinds whose fields live in the numpy columns (the rest only in the payload).
INTERPRETED = PARTITIONED_KINDS | frozenset({
                         ENTER, LEAVE, SEND, RECV, COLL_BEGIN, COLL_END, BUFFER_FLUSH, ISEND,
                         ISEND_COMPLETE, IRECV_REQUEST, IRECV, REQUEST_TEST, REQUEST_CANCELLED,
                         NBC_REQUEST, NBC_COMPLETE, PROBE, MRECV, IMRECV_REQUEST, IMRECV})
#: Kinds that carry a request id in the ``request`` column.
REQUEST_KINDS = frozenset({ISEND, ISEND_COMPLETE, IRECV_REQUEST, IRECV, REQUEST_TEST,
                           REQUEST_CANCELLED, NBC_REQUEST, NBC_COMPLETE})

# Collective operations, numbered as OTF2 numbers them (OTF2_CollectiveOp).
COLLECTIVE_OPS: dict[str, int] = {
    "BARRIER": 0,
    "BCAST": 1,
    "GATHER": 2,
    "GATHERV": 3,
    "SCATTER": 4,
    "SCATTERV": 5,
    "ALLGATHER": 6,
    "ALLGATHERV": 7,
    "ALLTOALL": 8,
    "ALLTOALLV": 9,
    "ALLTOALLW": 10,
    "ALLREDUCE": 11,
    "REDUCE": 12,
    "REDUCE_SCATTER": 13,
    "SCAN": 14,
    "EXSCAN": 15,
    "REDUCE_SCATTER_BLOCK": 16,
    "CREATE_HANDLE": 17,
    "DESTROY_HANDLE": 18,
    "ALLOCATE": 19,
    "DEALLOCATE": 20,
    "CREATE_HANDLE_AND_ALLOCATE": 21,
    "DESTROY_HANDLE_AND_DEALLOCATE": 22,
}
COLLECTIVE_OP_NAMES: dict[int, str] = {v: k for k, v in COLLECTIVE_OPS.items()}

NONE = -1  # marker for an unused column cell / undefined root

#: The columns of a record that every trace format has (the ``.trace`` format's
#: fields, the simulator's rows).
RECORD_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("time", np.int64),
    ("kind", np.int16),
    ("region", np.int32),
    ("peer", np.int32),
    ("comm", np.int32),
    ("tag", np.int64),
    ("size", np.int64),
    ("size_recv", np.int64),
    ("op", np.int16),
    ("request", np.int64),
)
#: Every column of :class:`Events`: the record columns and ``overhead``, the
#: tracer's own cost after the record in ns as the trace measured it in the run
#: (an OTF2 trace's ``COMPENSATE::OVERHEAD`` attribute, docs/calibration.md "Mean,
#: not median"), NONE where it has none: then the overhead tables decide
#: (:meth:`compensate.platform.Platform.location_overheads`).
COLUMNS: tuple[tuple[str, Any], ...] = (*RECORD_COLUMNS, ("overhead", np.int32))


@dataclass
class Events:
    """The records of one location, in recorded order, as parallel numpy columns.

    ``payload[i]`` is what a writer needs to reproduce record ``i`` beyond the
    columns: the original OTF2 event object, a dict of text fields, or None.
    """

    time: np.ndarray
    kind: np.ndarray
    region: np.ndarray
    peer: np.ndarray
    comm: np.ndarray
    tag: np.ndarray
    size: np.ndarray
    size_recv: np.ndarray
    op: np.ndarray
    request: np.ndarray
    payload: list[Any] = field(default_factory=list)
    overhead: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.overhead is None:  # a format or builder without per-record overheads
            self.overhead = np.full(len(self.time), NONE, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.time)

    @classmethod
    def from_rows(cls, rows: list[tuple], payload: list[Any] | None = None) -> Events:
        """Build columns from rows in COLUMNS order (time, kind, region, ..., request);
        rows may omit trailing columns, which are then NONE."""
        n = len(rows)
        width = len(COLUMNS)
        if n:
            table = np.array([tuple(r) + (NONE,) * (width - len(r)) for r in rows],
                             dtype=np.int64).reshape(n, width)
        else:
            table = np.zeros((0, width), dtype=np.int64)
        cols = {name: np.ascontiguousarray(table[:, j], dtype=dtype)
                for j, (name, dtype) in enumerate(COLUMNS)}
        return cls(**cols, payload=list(payload) if payload is not None else [None] * n)

    def slice(self, start: int, stop: int) -> Events:
        """Records ``start`` to ``stop`` (views of the columns)."""
        cols = {name: getattr(self, name)[start:stop] for name, _ in COLUMNS}
        return Events(**cols, payload=self.payload[start:stop])

    def copy(self, which: np.ndarray | slice | None = None) -> Events:
        """Records ``which`` (a slice or a boolean mask; None: all) with their own
        copy of every column, so that they do not keep a larger array alive."""
        which = slice(None) if which is None else which
        if isinstance(which, slice):
            cols = {name: getattr(self, name)[which].copy() for name, _ in COLUMNS}
            return Events(**cols, payload=self.payload[which])
        cols = {name: getattr(self, name)[which] for name, _ in COLUMNS}  # (copies)
        return Events(**cols, payload=list(compress(self.payload, which)))

    def row(self, i: int) -> tuple:
        """Record ``i`` as a row in COLUMNS order (for :meth:`from_rows`)."""
        return tuple(int(getattr(self, name)[i]) for name, _ in COLUMNS)

    @classmethod
    def concat(cls, parts: list[Events]) -> Events:
        """The records of ``parts``, one after the other."""
        if len(parts) == 1:
            return parts[0]
        cols = {name: np.concatenate([getattr(p, name) for p in parts]).astype(dtype, copy=False)
                for name, dtype in COLUMNS}
        return cls(**cols, payload=list(chain.from_iterable(p.payload for p in parts)))

    def with_time(self, time: np.ndarray, size: np.ndarray | None = None) -> Events:
        """A copy sharing everything but the timestamps (and, if given, the ``size``
        column, which carries BufferFlush stop times)."""
        return Events(
            time=np.asarray(time, dtype=np.int64),
            kind=self.kind,
            region=self.region,
            peer=self.peer,
            comm=self.comm,
            tag=self.tag,
            size=self.size if size is None else np.asarray(size, dtype=np.int64),
            size_recv=self.size_recv,
            op=self.op,
            request=self.request,
            overhead=self.overhead,
            payload=self.payload,
        )


#: OTF2 location types (``OTF2_LocationType``; OTF2 3 renamed GPU to ACCELERATOR_STREAM,
#: same value) and location group types (``OTF2_LocationGroupType``), by name.
CPU_THREAD = "CPU_THREAD"
ACCELERATOR_STREAM = "ACCELERATOR_STREAM"
METRIC_LOCATION = "METRIC"
LOCATION_TYPES = ("UNKNOWN", CPU_THREAD, ACCELERATOR_STREAM, METRIC_LOCATION)
PROCESS = "PROCESS"
LOCATION_GROUP_TYPES = ("UNKNOWN", PROCESS, "ACCELERATOR")


@dataclass
class Location:
    """A stream of records, by nature (docs/design.md §4, "Locations by nature").

    ``type`` is its OTF2 location type: a ``CPU_THREAD`` runs the program and the
    tracer (R1 applies), an ``ACCELERATOR_STREAM`` holds device activity, a
    ``METRIC`` location holds asynchronous samples *about* its process (mapped
    through the process's time function, not compensated on their own), and
    ``UNKNOWN`` is treated as a CPU thread. ``group`` is its location group,
    ``group_type`` that group's type (``PROCESS``: an MPI rank or a plain process;
    ``ACCELERATOR``: a device context) and ``group_creator`` the location group
    that created it (-1 if none: OTF2 ≥ 3 names the process that owns an
    accelerator context this way). Traces without types (old ``.trace`` files)
    hold CPU threads in process groups."""

    id: int
    name: str = ""
    group: int = 0
    group_name: str = ""
    type: str = CPU_THREAD
    group_type: str = PROCESS
    group_creator: int = -1

    @property
    def is_cpu(self) -> bool:
        """Whether the location runs program code (a CPU thread, or of unknown type)."""
        return self.type in (CPU_THREAD, "UNKNOWN")

    @property
    def is_metric(self) -> bool:
        return self.type == METRIC_LOCATION

    @property
    def is_device(self) -> bool:
        """An accelerator stream (OTF2 GPU / ACCELERATOR_STREAM)."""
        return self.type == ACCELERATOR_STREAM


@dataclass
class Comm:
    """A communicator; ``members[r]`` is the location id of rank ``r``: the location
    that holds rank ``r``'s MPI records. ``inter``: an MPI inter-communicator (OTF2
    InterComm: two groups, ranks of the other one), which the model does not time:
    a record on one is refused by matching. ``listed``: the locations the trace's
    definitions list, where a rank's records lie on another thread of its process
    (:mod:`compensate.formats.mpithreads`; None: ``members``), which writers write."""

    id: int
    name: str
    members: tuple[int, ...]
    inter: bool = False
    listed: tuple[int, ...] | None = None

    @property
    def written(self) -> tuple[int, ...]:
        """The members as the trace's definitions list them."""
        return self.members if self.listed is None else self.listed

    @cached_property
    def member_set(self) -> frozenset[int]:
        """``members`` as a set (a member test per location in constant time)."""
        return frozenset(self.members)


@dataclass
class Window:
    """An MPI RMA window (OTF2 RmaWin): its name and communicator (the ``remote`` rank
    of an RMA record is a rank in it; its members synchronise in a fence)."""

    id: int
    name: str
    comm: int


#: OTF2 region roles of a barrier; in paradigm :data:`THREAD_BARRIER_PARADIGMS` the
#: members of a thread team synchronise in it (R8); in MPI it is an MPI_Barrier
BARRIER_ROLES = frozenset({"BARRIER", "IMPLICIT_BARRIER"})
#: paradigms whose barrier regions are thread-team barriers (not e.g. CUDA's
#: cudaSynchronize, which Score-P also marks IMPLICIT_BARRIER, nor MPI_Barrier)
THREAD_BARRIER_PARADIGMS = frozenset({"OPENMP"})


@dataclass
class Definitions:
    """What the engine and the text format need from a trace's definitions.

    ``otf2`` holds the original OTF2 definitions and archive metadata when the trace
    came from an OTF2 archive (opaque to everything but :mod:`compensate.formats.otf2`),
    so that an OTF2 writer can reproduce every definition exactly.
    """

    timer_resolution: int
    locations: dict[int, Location]
    regions: dict[int, str] = field(default_factory=dict)
    comms: dict[int, Comm] = field(default_factory=dict)
    otf2: Any = None
    #: region id -> (OTF2 region role, paradigm), upper case (``"IMPLICIT_BARRIER"``,
    #: ``"OPENMP"``), where the trace gives them; a region not listed is a plain
    #: function of no known paradigm (OpenMP barriers are found by these: R8)
    region_roles: dict[int, tuple[str, str]] = field(default_factory=dict)
    #: location id -> the tracer's in-situ overhead table for it, where the trace
    #: carries one (parsed JSON, compensate.insitu; OTF2 LocationProperty
    #: ``COMPENSATE::INSITU_OVERHEAD``, the .trace location field ``insitu=``)
    insitu: dict[int, dict] = field(default_factory=dict)
    #: RMA windows by id (R10; :mod:`compensate.formats.rma` says the RMA records' fields)
    windows: dict[int, Window] = field(default_factory=dict)

    def location_of(self, comm: int, rank: int) -> int:
        """Map a rank in communicator ``comm`` to a location id (KeyError/IndexError if unknown)."""
        return self.comms[comm].members[rank]

    # -- the location model: process -> CPU threads, accelerator streams, metrics ----
    def process_of(self, loc: int) -> int:
        """The location group that is ``loc``'s process: its own group, or, for a
        group that is not a process (an accelerator context), the group that
        created it, followed up to a process (the own group if the chain ends)."""
        group = self.locations[loc].group
        kinds, creators, _ = self._group_table()
        seen = {group}
        g = group
        while kinds.get(g, PROCESS) != PROCESS and creators.get(g, -1) >= 0 \
                and creators[g] not in seen:
            g = creators[g]
            seen.add(g)
        return g if kinds.get(g, PROCESS) == PROCESS else group

    def _group_table(self) -> tuple[dict[int, str], dict[int, int], dict[int, list[int]]]:
        # (kept while the locations are the same: process_of is called per location,
        # and rebuilding it each time made 10^4 locations take minutes)
        key = (id(self.locations), len(self.locations))
        cached = self.__dict__.get("_groups_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        kinds: dict[int, str] = {}
        creators: dict[int, int] = {}
        threads: dict[int, list[int]] = {}
        for loc in self.locations.values():
            kinds.setdefault(loc.group, loc.group_type)
            creators.setdefault(loc.group, loc.group_creator)
            if loc.is_cpu:
                threads.setdefault(loc.group, []).append(loc.id)
        self.__dict__["_groups_cache"] = (key, (kinds, creators, threads))
        return kinds, creators, threads

    def cpu_threads(self, process: int) -> list[int]:
        """The CPU threads of location group ``process``, in definition order (the
        first is its master thread)."""
        return list(self._group_table()[2].get(process, ()))

    def sibling_threads(self, loc: int) -> list[int]:
        """The other CPU threads of ``loc``'s location group, in definition order:
        the threads that may make its rank's MPI calls (MPI_THREAD_SERIALIZED or
        MULTIPLE; :mod:`compensate.formats.mpithreads`)."""
        return [x for x in self.cpu_threads(self.locations[loc].group) if x != loc]

    def is_rank_comm(self, comm: Comm) -> bool:
        """Whether ``comm`` is a communicator of ranks: not an inter-communicator,
        and its members are defined locations of as many location groups (a thread
        team's members, or an accelerator context's, lie in one; Score-P defines
        those communicators beside the MPI ones). The same for its listed members
        and its members: a rank read on another thread stays in its group."""
        if comm.inter or any(m not in self.locations for m in comm.members):
            return False
        groups = {self.locations[m].group for m in comm.members}
        return len(groups) == len(comm.members)

    def reference_of(self, loc: int) -> int | None:
        """The CPU thread whose measured -> approximated time function a METRIC
        location's samples take (docs/design.md §4): the master (first) CPU thread
        of its process; if the process has none, the master thread of the first
        process that has one; None if the trace has no CPU thread at all."""
        own = self.cpu_threads(self.process_of(loc))
        if own:
            return own[0]
        return next((x.id for x in self.locations.values() if x.is_cpu), None)

    def metric_references(self) -> dict[int, int | None]:
        """``{METRIC location: its reference CPU thread}`` (see :meth:`reference_of`)."""
        return {loc.id: self.reference_of(loc.id) for loc in self.locations.values()
                if loc.is_metric}


@dataclass
class Trace:
    """Definitions plus each location's records (keys of ``events`` are location ids)."""

    definitions: Definitions
    events: dict[int, Events]
    source: str = ""  # file the trace was read from, for error messages

    @property
    def record_count(self) -> int:
        return sum(len(e) for e in self.events.values())

    @property
    def span_seconds(self) -> float:
        """Total execution time: latest record minus earliest, in seconds (0 if empty)."""
        ts = [e.time for e in self.events.values() if len(e)]
        if not ts:
            return 0.0
        lo = min(int(t[0]) for t in ts)
        hi = max(int(t[-1]) for t in ts)
        return (hi - lo) / self.definitions.timer_resolution

    def with_times(self, times: dict[int, np.ndarray],
                   sizes: dict[int, np.ndarray] | None = None) -> Trace:
        """The same trace with new per-location timestamps (records unchanged);
        ``sizes`` optionally replaces the size column (BufferFlush stop times)."""
        sizes = sizes or {}
        return Trace(
            self.definitions,
            {loc: ev.with_time(times[loc], sizes.get(loc)) for loc, ev in self.events.items()},
            self.source,
        )


class TraceError(Refusal):
    """Bad input: ``SOURCE: location L, record R: MESSAGE`` (``<trace>`` without a
    source). A :class:`~compensate.errors.Refusal` whose fields ``file``,
    ``location``, ``record`` and ``reason`` are ``source``, ``location``,
    ``index`` and ``message``."""

    unnamed = "<trace>"

    def __init__(self, message: str, *, source: str = "", location: int | None = None,
                 index: int | None = None) -> None:
        super().__init__(message, file=source, location=location, record=index)
