"""The record buffers of the mpi4py tracer (``python -m calibration.record``): one
:class:`Recorder` per rank, one :class:`Buffer` per Python thread.

Records live in memory until the end of the run, when the buffers of all ranks are
gathered and written as one OTF2 archive (:mod:`calibration.tracer.archive`), each
thread as its own location. Times come from :func:`time.monotonic_ns` (one clock per
node, shared by the threads of a process).

**Per thread.** Every Python thread records into its own :class:`Buffer`, found by
:meth:`Recorder.current` (a dict lookup on :func:`threading.get_ident`); a single
buffer per rank would interleave the records of all threads on one location, with
mis-nested Enter/Leave. The main thread's buffer is registered when the Recorder is
made, a thread started with ``threading.Thread.start`` registers its own when it
begins and is removed when it ends (:mod:`calibration.tracer.threads`), so a reused
thread id never finds an old buffer; any other thread (``_thread.start_new_thread``)
gets an "orphan" buffer through a ``threading.local`` on its first record.

**The single-threaded fast path.** The lookup costs the function decorator ~60 ns
per call (a C call and a dict lookup: ~+20 % per record, docs/calibration.md). While
the process has one Python thread there is nothing to look up, so the decorator
appends to the master's buffer directly until :meth:`Recorder.go_threaded` is
called — by :mod:`calibration.tracer.threads` just before the first thread is
started (``Thread.start``, ``_thread.start_new_thread``), or at install if threads
already run. From then on every call looks its thread up. The calibration times the
path the run used (:func:`calibration.tracer.overhead.calibrate`, ``threaded``).

**Storage.** ``data`` is one ``array('q')`` of (time, code) pairs, plus a list of
field tuples (``extra``) for the rarer MPI records and an ``array('q')`` of integer
fields (``ints``) for lock records: ``code = kind | index << KIND_BITS`` where
``index`` is the region id of an Enter/Leave, the sequence count of a thread
record, the position of (lock id, acquisition order) in ``ints`` for a lock
record, and otherwise the position of the record's fields in ``extra``. An
Enter/Leave, thread or lock record therefore allocates no object the garbage
collector tracks. That matters for compensation, not only for speed: with one
tuple per record (the first version) every 700th record triggered a collection, so
the cost of a record was 140 ns in most gaps and microseconds in a few, a
distribution no constant ``O`` per record can remove; with the arrays the gaps are
tight (measured: p50 200 ns, p99 230 ns against p50 140 ns, p99 2.1 µs).
A growing array still writes into fresh memory, a page fault (~3 µs) every 256
records; the tracer's buffers therefore keep written memory ahead of their records
(:meth:`Buffer.reserve`), and a reservation made while the program runs is a
BufferFlush record, which ``compensate`` removes.

**Why one module.** The buffer's layout (the code word, ``extra``, ``ints``), the
record methods that write it, the memory reservation that keeps it ahead of the
records, the in-situ brackets and :func:`rows`, which reads it back for the writer,
are one data structure and its readers and writers: split, each part would depend
on the others' private layout.

Each record method takes its timestamp *first* and only then does the work of the
record (reading a status, sizing a pickled object, storing): the measurement model
of docs/design.md §2 charges the time after a record's timestamp to that record's kind
(``O(kind)``), and :mod:`calibration.tracer.overhead` times exactly these methods
back to back to calibrate it.

Fields per kind in :func:`rows` (``comm`` is the local communicator id,
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
THREAD_CREATE,         sequence count (per rank, 1 for the first thread
THREAD_BEGIN,          started; links ThreadCreate to ThreadBegin and
THREAD_END,            ThreadEnd to ThreadWait, as OTF2 defines them)
THREAD_WAIT
THREAD_ACQUIRE_LOCK,   lock id (per rank), acquisition order (per lock,
THREAD_RELEASE_LOCK    from 1; an acquire and its release share it)
P_SEND_INIT,           peer, comm, tag, bytes, partitions, request id
P_RECV_INIT
P_SEND_REQUEST, ...    request id (P_SEND/RECV_REQUEST/COMPLETE)
P_READY, P_ARRIVED,    request id, partition
P_TESTED
RMA_WIN_CREATE,        window (local id, :meth:`Recorder.win_id`)
RMA_WIN_DESTROY
RMA_COLL_BEGIN         (none)
RMA_COLL_END           op (OTF2 numbering), sync level (OTF2 bits), window
RMA_GROUP_SYNC         sync level, window, members (world ranks)
RMA_REQUEST_LOCK       window, target rank (-1: all), lock type (0 exclusive,
                       1 shared)
RMA_RELEASE_LOCK       window, target rank (-1: all)
RMA_PUT, RMA_GET       window, target rank, bytes, matching id
RMA_ATOMIC             window, target rank, OTF2 atomic type, bytes sent,
                       bytes received, matching id
RMA_OP_COMPLETE        window, matching id (RmaOpCompleteBlocking)
BUFFER_FLUSH           stop time (the tracer's own work: :meth:`Buffer.reserve`)
NBC_REQUEST,           request id (NonBlockingCollectiveRequest; MpiRequestCancelled)
REQUEST_CANCELLED
NBC_COMPLETE           op, comm, root (-1: none), bytes sent, bytes received, request id
PROBE                  sender, comm, tag, message id (MPI_Mprobe/Improbe: MpiProbe)
MRECV                  message id, bytes (MpiMrecv)
IMRECV_REQUEST         message id, request id (MpiImrecvRequest)
IMRECV                 request id, bytes (MpiImrecv)
=====================  ===========================================
"""

from __future__ import annotations

import _thread
import gc
import itertools
import pickle
import sys
import threading
import weakref
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from itertools import repeat
from time import monotonic_ns
from typing import Any

(ENTER, LEAVE, MPI_SEND, MPI_RECV, MPI_ISEND, MPI_IRECV_REQUEST, MPI_IRECV,
 MPI_ISEND_COMPLETE, MPI_REQUEST_TEST, COLL_BEGIN, COLL_END, PROGRAM_BEGIN,
 PROGRAM_END, THREAD_CREATE, THREAD_BEGIN, THREAD_END, THREAD_WAIT,
 THREAD_ACQUIRE_LOCK, THREAD_RELEASE_LOCK) = range(19)
# MPI-4 partitioned point-to-point (calibration.tracer.partitioned; the model's kinds)
(P_SEND_INIT, P_RECV_INIT, P_SEND_REQUEST, P_RECV_REQUEST, P_READY, P_ARRIVED, P_TESTED,
 P_SEND_COMPLETE, P_RECV_COMPLETE) = range(19, 28)
# MPI one-sided communication (calibration.tracer.rma; the model's Rma* kinds)
(RMA_WIN_CREATE, RMA_WIN_DESTROY, RMA_COLL_BEGIN, RMA_COLL_END, RMA_GROUP_SYNC,
 RMA_REQUEST_LOCK, RMA_RELEASE_LOCK, RMA_PUT, RMA_GET, RMA_ATOMIC,
 RMA_OP_COMPLETE) = range(28, 39)
#: the tracer's own buffer work (:meth:`Buffer.reserve`), an OTF2 BufferFlush
BUFFER_FLUSH = 39
# nonblocking collectives and cancelled requests (calibration.tracer.requests)
NBC_REQUEST, NBC_COMPLETE, REQUEST_CANCELLED = range(40, 43)
# matched probes and their receives (calibration.tracer.calls)
PROBE, MRECV, IMRECV_REQUEST, IMRECV = range(43, 47)
#: the decorator's second layer on a sampled call (calibration.tracer.functions):
#: taken out when the buffers are copied (calibration.tracer.insitu.split_layers),
#: so no OTF2 record has these kinds and KIND_NAMES does not name them
LAYER_ENTER, LAYER_LEAVE = 47, 48

#: OTF2 record names of the kinds above (the names the platform file uses).
KIND_NAMES: tuple[str, ...] = (
    "Enter", "Leave", "MpiSend", "MpiRecv", "MpiIsend", "MpiIrecvRequest", "MpiIrecv",
    "MpiIsendComplete", "MpiRequestTest", "MpiCollectiveBegin", "MpiCollectiveEnd",
    "ProgramBegin", "ProgramEnd", "ThreadCreate", "ThreadBegin", "ThreadEnd",
    "ThreadWait", "ThreadAcquireLock", "ThreadReleaseLock",
    "MpiPsendInit", "MpiPrecvInit", "MpiPsendRequest", "MpiPrecvRequest", "MpiPready",
    "MpiParrived", "MpiPtested", "MpiPsendComplete", "MpiPrecvComplete",
    "RmaWinCreate", "RmaWinDestroy", "RmaCollectiveBegin", "RmaCollectiveEnd",
    "RmaGroupSync", "RmaRequestLock", "RmaReleaseLock", "RmaPut", "RmaGet", "RmaAtomic",
    "RmaOpCompleteBlocking",
    "BufferFlush",
    "NonBlockingCollectiveRequest", "NonBlockingCollectiveComplete", "MpiRequestCancelled",
    "MpiProbe", "MpiMrecv", "MpiImrecvRequest", "MpiImrecv",
)

#: Kinds that are MPI records (a thread that wrote one made MPI calls).
PARTITIONED_KINDS = frozenset(range(P_SEND_INIT, P_RECV_COMPLETE + 1))
RMA_KINDS = frozenset(range(RMA_WIN_CREATE, RMA_OP_COMPLETE + 1))
MPI_KINDS = (frozenset(range(MPI_SEND, COLL_END + 1)) | PARTITIONED_KINDS | RMA_KINDS
             | frozenset(range(NBC_REQUEST, IMRECV + 1)))
#: Kinds whose index is a sequence count.
SEQUENCE_KINDS = frozenset((THREAD_CREATE, THREAD_BEGIN, THREAD_END, THREAD_WAIT))
LOCK_KINDS = frozenset((THREAD_ACQUIRE_LOCK, THREAD_RELEASE_LOCK))

#: Region key: (name, canonical name, source file, first line, paradigm, role).
#: ``paradigm`` is "user", "mpi" or "pthread"; ``role`` an OTF2 RegionRole name.
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


def _standard_dumps(obj: Any) -> bytes:
    """The standard pickle at mpi4py's protocol: the serializer until
    :func:`set_serializer` names mpi4py's own."""
    return pickle.dumps(obj, _PROTOCOL)


_dumps: Callable[[Any], Any] = _standard_dumps


def set_serializer(dumps: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Size lower-case messages with ``dumps`` (the tracer passes
    ``MPI.pickle.dumps``, which serializes with whatever the program configured by
    ``MPI.pickle.__init__``, as mpi4py's send does); returns the previous one."""
    global _dumps
    previous, _dumps = _dumps, dumps
    return previous


def pickled_size(obj: Any) -> int:
    """Bytes of ``obj`` as mpi4py's lower-case API sends it (one extra
    serialization, by the serializer mpi4py is configured with). 0 if that
    serializer refuses the object: the tracer never raises into the program, the
    real call raises by itself if it must."""
    try:
        data = _dumps(obj)
        return data.nbytes if isinstance(data, memoryview) else len(data)
    except Exception:  # noqa: BLE001 - the program's serializer, the program's error
        return 0


KIND_BITS = 6  # code = kind | index << KIND_BITS (up to 64 kinds)
KIND_MASK = (1 << KIND_BITS) - 1
#: The clock when the tracer was imported: every timestamp a buffer holds is
#: later, every record code smaller (:func:`calibration.tracer.reentry.realign`).
EPOCH = monotonic_ns()

#: Items (int64) of touched memory a reserving buffer keeps ahead of its records
#: at least (:meth:`Buffer.reserve`): 512 KiB, 32,768 records.
RESERVE_ITEMS = 1 << 16
_ZEROS = memoryview(bytes(8 * RESERVE_ITEMS))
_EMPTY_SIZE = sys.getsizeof(array("q"))
_CUT = slice(-15, None)


def capacity(a: Any) -> int:
    """Items the ``array('q')`` ``a`` holds without reallocating (its allocation,
    from ``sys.getsizeof``)."""
    return (sys.getsizeof(a) - _EMPTY_SIZE) // a.itemsize


def _size_field() -> Any:
    """A setter of an ``array``'s length that keeps its allocation, or None.

    CPython's ``array_resize`` itself just sets ``ob_size`` when the allocation
    is large enough and fewer than 16 items go; this does the same for any
    number of items, through ctypes, at the field's place in the object header
    (after the reference count and the type). Checked on a probe array first:
    None where the layout differs (another implementation), and
    :func:`prefault` then cuts 15 items at a time (~60 ns each)."""
    try:
        import ctypes  # noqa: PLC0415 - only for this
    except ImportError:  # pragma: no cover
        return None
    offset = 2 * ctypes.sizeof(ctypes.c_void_p)

    def set_len(a: Any, n: int) -> None:
        ctypes.c_ssize_t.from_address(id(a) + offset).value = n

    probe = array("q", range(40))
    if ctypes.c_ssize_t.from_address(id(probe) + offset).value != 40:
        return None  # pragma: no cover
    cap = capacity(probe)
    set_len(probe, 20)
    if len(probe) != 20 or capacity(probe) != cap or probe.tolist() != list(range(20)):
        return None  # pragma: no cover
    return set_len


_SET_LEN = _size_field()


def prefault(a: Any, items: int) -> bool:
    """Allocate and touch memory for ``items`` more items of the ``array('q')``
    ``a`` without changing its contents; True if the allocation was kept.

    Appending to an array whose memory was never written costs a page fault per
    4 KiB (~3 µs on this machine's VM, every 256 records); here the faults, and
    the reallocations, happen now. The array is extended with zeros (written, so
    touched) and its length set back without giving the memory up (by
    :data:`_SET_LEN`, else 15 items at a time: CPython's ``array_resize`` keeps
    the allocation when fewer than 16 items go). Another implementation may free
    it; the result says so.

    The collector is off meanwhile: a collection (the ctypes setter allocates)
    runs the program's finalizers, whose traced records would land after the
    zeros and be cut with them (3 of 2,000 ``__del__`` calls were missing from a
    trace). Records a signal handler appends meanwhile are moved down to ``n``."""
    n = len(a)
    collecting = gc.isenabled()
    gc.disable()
    try:
        left = items
        while left > 0:
            k = min(left, RESERVE_ITEMS)
            a.frombytes(_ZEROS[:8 * k])
            left -= k
        late = a[n + items:] if len(a) > n + items else None
        if _SET_LEN is not None:
            _SET_LEN(a, n)
        else:
            deque(map(a.__delitem__, repeat(_CUT, (len(a) - n) // 15)), maxlen=0)
            del a[n:]
        if late is not None:
            a.extend(late)
    finally:
        if collecting:
            gc.enable()
    return capacity(a) >= n + items


def rows(data: Any, extra: list[tuple], ints: Any = ()) -> list[tuple]:
    """Records as tuples ``(time, kind, *fields)`` from a buffer's stored columns
    (``data``: (time, code) pairs)."""
    return list(iter_rows(data, extra, ints))


def iter_rows(data: Any, extra: list[tuple], ints: Any = ()) -> Iterator[tuple]:
    """:func:`rows` one at a time (the archive writer: a list of 10^6 tuples took
    ~100 MB at once)."""
    it = iter(data)
    for t, code in zip(it, it, strict=True):
        kind, index = code & KIND_MASK, code >> KIND_BITS
        if kind == ENTER or kind == LEAVE or kind in SEQUENCE_KINDS:
            yield (t, kind, index)
        elif kind in LOCK_KINDS:
            yield (t, kind, ints[index], ints[index + 1])
        else:
            yield (t, kind, *extra[index])


class Buffer:
    """One thread's records (see the module docstring). ``name`` is the OTF2
    location name, ``sequence`` the thread's sequence count (0 for the main
    thread, None for an orphan thread); ``ended`` is set by its ThreadEnd."""

    def __init__(self, name: str = "Master thread", sequence: int | None = 0) -> None:
        self.name = name
        self.sequence = sequence
        self.ended = False
        self.data = array("q")
        self.extra: list[tuple] = []
        self.ints = array("q")
        self.add = self.data.append
        self._add_extra = self.extra.append
        self._add_int = self.ints.append
        #: in-situ brackets of the MPI and lock wrappers: (first stamp of the
        #: wrapper's run of records, time the tracer handed control back) pairs
        #: (:meth:`back`, :mod:`calibration.tracer.insitu`)
        self.backs = array("q")
        self._add_back = self.backs.append
        #: lengths of ``data`` / ``backs`` at which :meth:`back` reserves more
        #: memory (:meth:`reserve`; never unless the buffer reserves)
        self._limit = self._back_limit = sys.maxsize

    def __len__(self) -> int:
        return len(self.data) // 2

    @property
    def times(self) -> Any:
        """The timestamps (a copy)."""
        return self.data[0::2]

    @property
    def codes(self) -> Any:
        return self.data[1::2]

    def rows(self) -> list[tuple]:
        """The records as ``(time, kind, *fields)`` tuples, in order."""
        return rows(self.data, self.extra, self.ints)

    def clear(self) -> None:
        del self.data[:], self.extra[:], self.ints[:], self.backs[:]

    # -- in-situ brackets -------------------------------------------------------------
    def back(self, first: int) -> None:
        """The tracer hands control back (to the program or to the MPI library)
        after a run of records whose first timestamp is ``first``: the time now,
        less each record's timestamp, is what those records cost in situ
        (:mod:`calibration.tracer.insitu`).

        Memory is reserved (:meth:`reserve`) only at the hand-back that ends a
        wrapped call (its last record is the Leave), never at the one right
        before the MPI or lock call: a BufferFlush there would lie inside the
        communication, between the send's (or the collective's) record and the
        call itself, where compensate keeps the measured time (R2's observed
        transfer, R3's synchronisation) and R6 cannot remove it: 2-3.5 ms per
        Monte-Carlo run, all of them there (docs/calibration.md, "Buffer
        memory"). After the Leave it is the program's time, removed exactly."""
        t = monotonic_ns()
        self._add_back(first)
        self._add_back(t)
        if ((len(self.data) > self._limit or len(self.backs) > self._back_limit)
                and self.data and self.data[-1] & KIND_MASK == LEAVE):
            self.reserve()

    def reserve(self, record: bool = True) -> None:
        """Touch the memory the next records will take, now, and record the time
        it took as a BufferFlush (``record``) that ``compensate`` removes (R6).

        The tracer's buffers grow into fresh memory: every 256 records a page
        fault (~3 µs here), ~13 ns per record in all, rare and large, so the
        median of the in-situ samples never sees it and the calibration's short
        samples mostly miss it (docs/calibration.md, "Buffer memory"). Instead
        the buffer keeps touched memory ahead of its records: at least
        :data:`RESERVE_ITEMS` items or a quarter of what it holds (an eighth of
        that for the brackets), topped up by :meth:`back` (at an MPI or lock
        wrapper's hand-back, never on the decorator's hot path) when half of it
        is used. A run that writes more
        than the headroom between two hand-backs faults as before for the rest.
        Called with ``record=False`` before the program starts."""
        t = monotonic_ns()
        data, backs = self.data, self.backs
        if len(data) > self._limit:
            grow = max(RESERVE_ITEMS, len(data) // 4)
            self._limit = len(data) + grow // 2 if prefault(data, grow) else sys.maxsize
        if len(backs) > self._back_limit:
            grow = max(RESERVE_ITEMS // 8, len(backs) // 4)
            self._back_limit = (len(backs) + grow // 2 if prefault(backs, grow)
                                else sys.maxsize)
        if record:
            te = monotonic_ns()
            self.add_record(t, BUFFER_FLUSH, (te,))

    def reserve_at_next_back(self) -> None:
        """Make :meth:`back` reserve memory (:meth:`reserve`) from now on, first at
        its next call."""
        self._limit = self._back_limit = -1

    def enter_at(self, t: int, region: int) -> None:
        """Enter stamped ``t`` (a wrapper stamps first and works after)."""
        self.add(t)
        self.add(ENTER | region << KIND_BITS)

    def leave_at(self, t: int, region: int) -> None:
        self.add(t)
        self.add(LEAVE | region << KIND_BITS)

    def lock_record_at(self, t: int, kind: int, lock: int, order: int) -> None:
        self.add(t)
        self.add(kind | len(self.ints) << KIND_BITS)
        self._add_int(lock)
        self._add_int(order)

    # -- records: timestamp first, then the work --------------------------------------
    def add_record(self, t: int, kind: int, fields: tuple) -> None:
        self.add(t)
        self.add(kind | len(self.extra) << KIND_BITS)
        self._add_extra(fields)

    def enter(self, region: int) -> None:
        self.add(monotonic_ns())
        self.add(ENTER | region << KIND_BITS)

    def leave(self, region: int) -> None:
        self.add(monotonic_ns())
        self.add(LEAVE | region << KIND_BITS)

    def send(self, peer: int, comm: int, tag: int, nbytes: int) -> None:
        self.add_record(monotonic_ns(), MPI_SEND, (peer, comm, tag, nbytes))

    def recv(self, comm: int, status: Any) -> None:
        t = monotonic_ns()
        self.add_record(t, MPI_RECV, (status.Get_source(), comm, status.Get_tag(),
                                      status.Get_count()))

    def isend(self, peer: int, comm: int, tag: int, nbytes: int, request: int) -> None:
        self.add_record(monotonic_ns(), MPI_ISEND, (peer, comm, tag, nbytes, request))

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

    def partitioned(self, kind: int, fields: tuple) -> None:
        """An MPI-4 partitioned record (``P_*`` kinds, fields as in the table above)."""
        self.add_record(monotonic_ns(), kind, fields)

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

    def thread_record(self, kind: int, sequence: int) -> None:
        """ThreadCreate, ThreadBegin, ThreadEnd or ThreadWait of ``sequence``."""
        self.add(monotonic_ns())
        self.add(kind | sequence << KIND_BITS)

    def lock_record(self, kind: int, lock: int, order: int) -> None:
        """ThreadAcquireLock or ThreadReleaseLock."""
        self.add(monotonic_ns())
        self.add(kind | len(self.ints) << KIND_BITS)
        self._add_int(lock)
        self._add_int(order)


def _discard(_value: int) -> None:
    """A released thread's record adder (:meth:`Recorder.release_threads`)."""


class Recorder:
    """One rank's threads' buffers, regions, communicators, lock ids and sequence
    counts (see the module docstring). The thread that makes it is the master
    thread, whose buffer is :attr:`main`."""

    def __init__(self, reserve: bool = False) -> None:
        self.main = Buffer("Master thread", 0)
        #: buffers keep touched memory ahead of their records (:meth:`Buffer.reserve`;
        #: the tracer's run, not the calibration)
        self.reserving = reserve
        if reserve:
            self.main.reserve_at_next_back()
            self.main.reserve(record=False)
        #: True once a second thread may run: record paths must look threads up
        self.threaded = False
        self._on_threaded: list[Callable[[], None]] = []
        self._owned_switches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.buffers: list[Buffer] = [self.main]
        self._local = threading.local()
        #: thread ident -> the thread's Buffer / its ``add`` (the decorator's path).
        #: Plain dicts: a subclass with ``__missing__`` is not specialised by the
        #: interpreter and cost ~14 ns more per record; unregistered threads take
        #: the KeyError path (:meth:`orphan`), free in Python 3.11 until raised.
        self.by_thread: dict[int, Buffer] = {}
        self.adders: dict[int, Callable[[int], None]] = {}
        self._register(threading.get_ident(), self.main)
        self.regions: list[RegionKey] = []
        self._region_ids: dict[RegionKey, int] = {}
        self.comms: list[CommKey] = []
        self._comm_count: dict[tuple[int, ...], int] = {}
        #: RMA windows: (communicator key, occurrence on it), by local id
        self.wins: list[tuple[CommKey, int]] = []
        self._win_count: dict[CommKey, int] = {}
        self._define = _thread.allocate_lock()  # the tracer's own, never traced
        self._requests = itertools.count(1)
        self._sequences = itertools.count(1)
        self._locks = itertools.count(1)
        self._orphans = itertools.count(1)
        #: when :meth:`stop_threads` stopped the threads still running (None: not yet)
        self.stopped_at: int | None = None
        self._gate = _thread.allocate_lock()  # held while they are stopped

    def __len__(self) -> int:
        return sum(len(b) for b in self.buffers)

    def current(self) -> Buffer:
        """The calling thread's buffer."""
        try:
            return self.by_thread[threading.get_ident()]
        except KeyError:
            return self.orphan()

    # -- threads ---------------------------------------------------------------------
    def _register(self, ident: int, buf: Buffer) -> None:
        self.by_thread[ident] = buf
        self.adders[ident] = buf.add

    def when_threaded(self, switch: Callable[[], None], owner: Any = None) -> None:
        """Call ``switch()`` when the process becomes multi-threaded (now if it is).
        With an ``owner`` (a decorator's wrapper), only while the owner lives: a
        nested ``def`` makes a new wrapper each time it runs, and a list of their
        switches grew by two per run (170 MiB after 300,000 runs)."""
        if self.threaded:
            switch()
        elif owner is None:
            self._on_threaded.append(switch)
        else:
            self._owned_switches[owner] = switch

    def go_threaded(self) -> None:
        """Leave the single-threaded fast path, for good; called before a second
        thread can run."""
        if not self.threaded:
            self.threaded = True
            for switch in [*self._on_threaded, *self._owned_switches.values()]:
                switch()
            self._on_threaded.clear()
            self._owned_switches.clear()

    def stop_threads(self) -> None:
        """After the program (its non-daemon threads joined): the threads still
        running, daemon threads, stop recording. A traced call of theirs waits at
        its next record, without the GIL, until :meth:`release_threads` (a busy
        daemon thread kept recording through the tracer's finalization, competing
        for the GIL: minutes and gigabytes, found by probing); an MPI or lock
        wrapper of theirs records into a discarded buffer. ``stopped_at`` is the
        time; :func:`calibration.tracer.archive.snapshot` ends their open
        regions there."""
        self.stopped_at = monotonic_ns()
        gate = self._gate
        gate.acquire()

        def wait(_value: int) -> None:
            gate.acquire()
            gate.release()

        self._swap_threads(wait)

    def release_threads(self) -> None:
        """After the tracer's finalization: let the threads :meth:`stop_threads`
        stopped go on (as daemon threads do while the interpreter exits), recording
        nothing."""
        if self.stopped_at is not None and self._gate.locked():
            self._swap_threads(_discard)
            self._gate.release()

    def _swap_threads(self, add: Callable[[int], None]) -> None:
        main = threading.get_ident()
        for ident in list(self.adders):
            if ident != main:
                self.adders[ident] = add
        for ident in list(self.by_thread):
            if ident != main:
                self.by_thread[ident] = Buffer("discarded", None)

    def orphan(self) -> Buffer:
        """The calling unregistered thread's buffer (made on its first record)."""
        buf = getattr(self._local, "buffer", None)
        if buf is None:
            buf = self._local.buffer = Buffer(f"Orphan thread {next(self._orphans)}", None)
            if self.reserving:
                buf.reserve_at_next_back()
            self.buffers.append(buf)
        return buf

    def next_sequence(self) -> int:
        """The sequence count of a thread being created (1, 2, ... per rank)."""
        return next(self._sequences)

    def thread_begins(self, sequence: int) -> Buffer:
        """Called first thing in a new thread: its buffer, registered, with the
        ThreadBegin record."""
        buf = Buffer(f"Pthread thread {sequence}", sequence)
        if self.reserving:
            buf.reserve_at_next_back()
        self.buffers.append(buf)
        self._register(threading.get_ident(), buf)
        buf.thread_record(THREAD_BEGIN, sequence)
        return buf

    def thread_ends(self, buf: Buffer) -> None:
        """Called last thing in a thread: ThreadEnd, then unregister (the OS may
        reuse the ident for a later thread)."""
        buf.thread_record(THREAD_END, buf.sequence or 0)
        buf.ended = True
        ident = threading.get_ident()
        self.by_thread.pop(ident, None)
        self.adders.pop(ident, None)

    def new_lock(self) -> int:
        """A lock id, unique on this rank (from 1)."""
        return next(self._locks)

    # -- definitions ---------------------------------------------------------------
    def region_id(self, key: RegionKey) -> int:
        """Local id of a region (registered on first use)."""
        rid = self._region_ids.get(key)
        if rid is None:
            with self._define:
                rid = self._region_ids.get(key)
                if rid is None:
                    rid = len(self.regions)
                    self.regions.append(key)
                    self._region_ids[key] = rid
        return rid

    def comm_id(self, members: tuple[int, ...]) -> int:
        """Register a newly created communicator by its members' world ranks."""
        with self._define:
            occurrence = self._comm_count.get(members, 0)
            self._comm_count[members] = occurrence + 1
            self.comms.append((members, occurrence))
            return len(self.comms) - 1

    def win_id(self, comm: int) -> int:
        """Register a newly created RMA window on the local communicator ``comm``:
        its local id. Window key: (the communicator's key, occurrence on it), the
        same on every member (creation is collective)."""
        with self._define:
            key = self.comms[comm] if comm >= 0 else ((), 0)
            occurrence = self._win_count.get(key, 0)
            self._win_count[key] = occurrence + 1
            self.wins.append((key, occurrence))
            return len(self.wins) - 1

    def new_request(self) -> int:
        """A request id, unique on this rank (counting from 1, as Score-P does)."""
        return next(self._requests)

    # -- the master thread's records (the calls record.py makes) ---------------------
    def program_begin(self, name: str, args: list[str]) -> None:
        self.main.program_begin(name, args)

    def program_end(self, status: int) -> None:
        self.main.program_end(status)
