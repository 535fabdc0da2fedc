"""The per-rank record buffer of the mpi4py tracer (``python -m calibration.record``).

Records live in memory until the end of the run, when the buffers of all ranks are
gathered and written as one OTF2 archive (:mod:`calibration.tracer.archive`). Times
come from :func:`time.monotonic_ns` (one clock per node).

Storage is two ``array('q')`` columns, ``times`` and ``codes``, plus a list of field
tuples for the rarer MPI records: ``code = kind | index << 4`` where ``index`` is the
region id of an Enter/Leave and otherwise the position of the record's fields in
``extra``. An Enter/Leave therefore allocates no object the garbage collector
tracks. That matters for compensation, not only for speed: with one tuple per
record (the first version) every 700th record triggered a collection, so the cost
of a record was 140 ns in most gaps and microseconds in a few, a distribution no
constant ``O`` per record can remove; with the arrays the gaps are tight (measured:
p50 200 ns, p99 230 ns against p50 140 ns, p99 2.1 µs).

Each record method takes its timestamp *first* and only then does the work of the
record (reading a status, sizing a pickled object, storing): the measurement model
of docs/design.md §2 charges the time after a record's timestamp to that record's kind
(``O(kind)``), and :mod:`calibration.tracer.overhead` times exactly these methods
back to back to calibrate it.

Fields per kind in :meth:`Recorder.rows` (``comm`` is the local communicator id,
see :meth:`Recorder.comm_id`; ``peer`` a rank in that communicator):

=====================  ===========================================
ENTER, LEAVE           region
MPI_SEND, MPI_RECV     peer, comm, tag, bytes
MPI_ISEND, MPI_IRECV   peer, comm, tag, bytes, request id
MPI_IRECV_REQUEST,     request id
MPI_ISEND_COMPLETE,
MPI_REQUEST_TEST
COLL_BEGIN             (none)
COLL_END               op (OTF2 numbering), comm, root (-1: none), bytes sent,
                       bytes received
PROGRAM_BEGIN          program name, arguments
PROGRAM_END            exit status
=====================  ===========================================
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Callable
from time import monotonic_ns
from typing import Any

(ENTER, LEAVE, MPI_SEND, MPI_RECV, MPI_ISEND, MPI_IRECV_REQUEST, MPI_IRECV,
 MPI_ISEND_COMPLETE, MPI_REQUEST_TEST, COLL_BEGIN, COLL_END, PROGRAM_BEGIN,
 PROGRAM_END) = range(13)

#: OTF2 record names of the kinds above (the names the platform file uses).
KIND_NAMES: tuple[str, ...] = (
    "Enter", "Leave", "MpiSend", "MpiRecv", "MpiIsend", "MpiIrecvRequest", "MpiIrecv",
    "MpiIsendComplete", "MpiRequestTest", "MpiCollectiveBegin", "MpiCollectiveEnd",
    "ProgramBegin", "ProgramEnd",
)

#: Region key: (name, canonical name, source file, first line, paradigm, role).
#: ``paradigm`` is "user" or "mpi"; ``role`` an OTF2 RegionRole name.
RegionKey = tuple[str, str, str, int, str, str]

#: Communicator key: (world ranks of the members, occurrence). The n-th communicator
#: a rank creates with a given member list gets occurrence n; every member creates
#: it in the same order (creation is collective), so the key is the same on all.
CommKey = tuple[tuple[int, ...], int]

_PROTOCOL = pickle.HIGHEST_PROTOCOL


def set_pickle_protocol(protocol: int) -> None:
    """Size lower-case (pickled) messages with the protocol mpi4py uses."""
    global _PROTOCOL
    _PROTOCOL = protocol


def pickled_size(obj: Any) -> int:
    """Bytes of ``obj`` as mpi4py's lower-case API sends it (one extra pickling)."""
    return len(pickle.dumps(obj, _PROTOCOL))


KIND_BITS = 4  # code = kind | index << KIND_BITS


def rows(times: Any, codes: Any, extra: list[tuple]) -> list[tuple]:
    """Records as tuples ``(time, kind, *fields)`` from the stored columns."""
    out = []
    mask = (1 << KIND_BITS) - 1
    for t, code in zip(times, codes, strict=True):
        kind, index = code & mask, code >> KIND_BITS
        if kind == ENTER or kind == LEAVE:
            out.append((t, kind, index))
        else:
            out.append((t, kind, *extra[index]))
    return out


class Recorder:
    """One rank's records, regions and communicators (see the module docstring)."""

    def __init__(self) -> None:
        self.times = array("q")
        self.codes = array("q")
        self.extra: list[tuple] = []
        self.add_time = self.times.append
        self.add_code = self.codes.append
        self._add_extra = self.extra.append
        self.regions: list[RegionKey] = []
        self._region_ids: dict[RegionKey, int] = {}
        self.comms: list[CommKey] = []
        self._comm_count: dict[tuple[int, ...], int] = {}
        self._next_request = 1

    def __len__(self) -> int:
        return len(self.times)

    def rows(self) -> list[tuple]:
        """The records as ``(time, kind, *fields)`` tuples, in order."""
        return rows(self.times, self.codes, self.extra)

    def clear(self) -> None:
        del self.times[:], self.codes[:], self.extra[:]

    # -- definitions ---------------------------------------------------------------
    def region_id(self, key: RegionKey) -> int:
        """Local id of a region (registered on first use)."""
        rid = self._region_ids.get(key)
        if rid is None:
            rid = self._region_ids[key] = len(self.regions)
            self.regions.append(key)
        return rid

    def comm_id(self, members: tuple[int, ...]) -> int:
        """Register a newly created communicator by its members' world ranks."""
        occurrence = self._comm_count.get(members, 0)
        self._comm_count[members] = occurrence + 1
        self.comms.append((members, occurrence))
        return len(self.comms) - 1

    def new_request(self) -> int:
        """A request id, unique on this rank (counting from 1, as Score-P does)."""
        rid = self._next_request
        self._next_request = rid + 1
        return rid

    # -- records: timestamp first, then the work --------------------------------------
    def add_record(self, t: int, kind: int, fields: tuple) -> None:
        self.add_time(t)
        self.add_code(kind | len(self.extra) << KIND_BITS)
        self._add_extra(fields)

    def enter(self, region: int) -> None:
        self.add_time(monotonic_ns())
        self.add_code(ENTER | region << KIND_BITS)

    def leave(self, region: int) -> None:
        self.add_time(monotonic_ns())
        self.add_code(LEAVE | region << KIND_BITS)

    def send(self, peer: int, comm: int, tag: int, nbytes: int) -> None:
        self.add_record(monotonic_ns(), MPI_SEND, (peer, comm, tag, nbytes))

    def send_obj(self, peer: int, comm: int, tag: int, obj: Any) -> None:
        t = monotonic_ns()
        self.add_record(t, MPI_SEND, (peer, comm, tag, pickled_size(obj)))

    def recv(self, comm: int, status: Any) -> None:
        t = monotonic_ns()
        self.add_record(t, MPI_RECV, (status.Get_source(), comm, status.Get_tag(),
                                status.Get_count()))

    def isend(self, peer: int, comm: int, tag: int, nbytes: int, request: int) -> None:
        self.add_record(monotonic_ns(), MPI_ISEND, (peer, comm, tag, nbytes, request))

    def isend_obj(self, peer: int, comm: int, tag: int, obj: Any, request: int) -> None:
        t = monotonic_ns()
        self.add_record(t, MPI_ISEND, (peer, comm, tag, pickled_size(obj), request))

    def irecv_request(self, request: int) -> None:
        self.add_record(monotonic_ns(), MPI_IRECV_REQUEST, (request,))

    def irecv(self, comm: int, status: Any, request: int) -> None:
        t = monotonic_ns()
        self.add_record(t, MPI_IRECV, (status.Get_source(), comm, status.Get_tag(),
                                 status.Get_count(), request))

    def isend_complete(self, request: int) -> None:
        self.add_record(monotonic_ns(), MPI_ISEND_COMPLETE, (request,))

    def request_test(self, request: int) -> None:
        self.add_record(monotonic_ns(), MPI_REQUEST_TEST, (request,))

    def coll_begin(self) -> None:
        self.add_record(monotonic_ns(), COLL_BEGIN, ())

    def coll_end(self, op: int, comm: int, root: int,
                 sizes: Callable[..., tuple[int, int]], *args: Any) -> None:
        """``sizes(*args)`` -> (bytes sent, bytes received), evaluated after the
        timestamp (it may pickle objects)."""
        t = monotonic_ns()
        sent, received = sizes(*args)
        self.add_record(t, COLL_END, (op, comm, root, sent, received))

    def program_begin(self, name: str, args: list[str]) -> None:
        self.add_record(monotonic_ns(), PROGRAM_BEGIN, (name, list(args)))

    def program_end(self, status: int) -> None:
        self.add_record(monotonic_ns(), PROGRAM_END, (int(status),))
