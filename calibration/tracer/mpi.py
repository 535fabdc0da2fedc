"""Record every mpi4py communication call of a program as OTF2 MPI records.

mpi4py's classes are immutable extension types (``MPI.Comm.send = f`` raises
TypeError), so their methods cannot be monkeypatched in place. Instead
:func:`install` substitutes Python subclasses where programs find them:
``MPI.COMM_WORLD`` becomes a :class:`TracedIntracomm` (so do the communicators
created from it: Dup and Clone return ``type(self)``, the results of Split,
Split_type, Create and Create_group are wrapped), the requests its nonblocking
calls return are :class:`TracedRequest`, and ``MPI.Request`` is replaced by
:class:`TracedRequest` so that ``MPI.Request.Waitall(reqs)`` is traced as well.
Topology communicators (``Create_cart`` and ``Cartcomm.Sub``, ``Create_graph``,
``Create_dist_graph(_adjacent)``) are :class:`TracedCartcomm`,
:class:`TracedGraphcomm`, :class:`TracedDistgraphcomm`: subclasses of both
:class:`TracedIntracomm` and mpi4py's class (mpi4py's communicator classes share
one C layout, so the layout allows it), whose calls are recorded as on
COMM_WORLD and whose local queries (Get_coords, Shift, Get_topo, ...) are
mpi4py's. Every created communicator is registered in creation order
(:func:`_created`). An intercommunicator (``Create_intercomm``) is not traced
(:class:`TracedIntercomm`, warned about); the intracommunicator its ``Merge``
makes is. Idup's communicator is registered when first used (:func:`calls._idup`);
``Create_from_group``, ``f2py`` and ``fromhandle`` return traced communicators
(:mod:`calibration.tracer.views`); the program's own MPI.Init/Finalize:
:mod:`calibration.tracer.mpiinit`.

Each wrapped call is recorded like Score-P's MPI adapter does: Enter of the
``MPI_X`` region, then the call's own records, then Leave:

* send/Send/ssend/Ssend: MpiSend (bytes: the buffer, or the pickled object);
  recv/Recv: MpiRecv after the call, with source, tag and byte count from the
  status (so ANY_SOURCE/ANY_TAG are resolved); sendrecv/Sendrecv: both.
* isend/Isend/issend/Issend: MpiIsend with a request id; irecv/Irecv:
  MpiIrecvRequest; completion in Wait, Test and the calls on arrays of requests
  (Waitall/any/some, Testall/any/some, both cases): MpiIrecv (from the status) or
  MpiIsendComplete, MpiRequestTest for a request tested and left incomplete
  (:mod:`calibration.tracer.requests`, also Cancel, Free and persistent requests).
* Psend_init/Precv_init (MPI-4 partitioned): a traced partitioned request whose
  Start, Pready(_range/_list), Parrived, Wait and Test record the seed's events
  (:mod:`calibration.tracer.partitioned`).
* MPI.Win (one-sided communication): :class:`calibration.tracer.rma.TracedWin`
  records window creation, fences, transfers, PSCW and locks as Score-P's Rma*
  records (:mod:`calibration.tracer.rma`).
* barrier, bcast, scatter, gather, reduce, allreduce, allgather, alltoall (both
  cases): MpiCollectiveBegin, the call, MpiCollectiveEnd with the operation, the
  root and the bytes this rank sent and received (:mod:`calibration.tracer.sizes`).
* buffered and ready sends, Sendrecv_replace, probes, scans, the v-collectives,
  reduce-scatters and the nonblocking collectives: :mod:`calibration.tracer.calls`,
  which also warns once on stderr about each communicating method left untraced.

A call records on the calling thread's buffer (:meth:`Recorder.current
<calibration.tracer.buffer.Recorder.current>`), so MPI from a worker thread lands on
that thread's location, never among the main thread's records. OTF2 maps an MPI
rank to one location, so a rank's MPI calls must all come from one thread (as in
Score-P, which supports MPI_THREAD_FUNNELED): the archive writer maps the rank to
the thread that made them and warns if several did
(:func:`calibration.tracer.archive.write_archive`).

**Stamps first, work after** (for the in-situ overhead,
:mod:`calibration.tracer.insitu`): the public method stamps the Enter as it is
called (``_now()`` is its helper's first argument), the helper stamps the records
it writes before the MPI call back to back, then looks up the buffer and the
communicator, sizes the message and stores, and calls :meth:`Buffer.back
<calibration.tracer.buffer.Buffer.back>` right before the MPI call; after it
returns, the completion record and the Leave are stamped at once, the status is
read (a nonblocking call's request wrapped), and ``back`` again. So everything
the wrapper does lies after a timestamp, and each record's real cost in this run
is measured.

**A call that raises** keeps its Enter/Leave (it took time) but not the
record written before it (MpiSend, MpiIsend, MpiIrecvRequest,
MpiCollectiveBegin): no message left, no collective took place
(:func:`calibration.tracer.requests.unwrite`).

Calls to ``MPI.PROC_NULL`` get Enter/Leave but no message record. The tracer's
own communication uses a communicator duplicated before :func:`install` and the
base-class methods, so it is never recorded.
"""

from __future__ import annotations

import pickle
from time import monotonic_ns
from typing import Any

from mpi4py import MPI

from calibration.tracer import buffer as tb
from calibration.tracer import calls, mpiinit, pkl5, rma, views
from calibration.tracer import partitioned as ptr
from calibration.tracer import requests as rq
from calibration.tracer import sizes as sz
from calibration.tracer.requests import TracedRequest
from compensate.model import COLLECTIVE_OPS

_Comm = MPI.Comm
_Intracomm = MPI.Intracomm
_PROC_NULL = MPI.PROC_NULL
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG
_NO_ROOT = -1

_now = monotonic_ns  # a wrapped call's Enter stamp, taken as it is called
_leave = rq.leave  # Leave of a wrapped call (or of one that raised)
_rec: tb.Recorder = tb.Recorder()  # replaced by install()
_world_group: Any = None
_status = MPI.Status()  # scratch status of the master thread's calls made without one

_REGIONS: dict[str, int] = {}
_PREGIONS: dict[str, int] = {}  # MPI-4 partitioned calls (calibration.tracer.partitioned)
_ROLES = {
    "POINT2POINT": ("Send", "Ssend", "Recv", "Sendrecv", "Isend", "Issend", "Irecv",
                    "Wait", "Waitall", "Test"),
    "BARRIER": ("Barrier",),
    "COLL_ONE2ALL": ("Bcast", "Scatter"),
    "COLL_ALL2ONE": ("Gather", "Reduce"),
    "COLL_ALL2ALL": ("Allreduce", "Allgather", "Alltoall"),
}


def install(recorder: tb.Recorder) -> None:
    """Route the program's MPI calls through the tracer, recording into ``recorder``."""
    global _rec, _world_group
    _rec = recorder
    tb.set_pickle_protocol(getattr(MPI.pickle, "PROTOCOL", pickle.HIGHEST_PROTOCOL))
    for role, names in _ROLES.items():
        for name in names:
            full = f"MPI_{name}"
            _REGIONS[full] = recorder.region_id((full, full, "", 0, "mpi", role))
    world = MPI.COMM_WORLD
    _world_group = world.Get_group()
    _BY_HANDLE.clear()
    traced = TracedIntracomm(world)
    _register(traced, new=True)
    MPI.COMM_WORLD = traced
    MPI.COMM_SELF = TracedIntracomm(MPI.COMM_SELF)  # registered when first used
    _PREGIONS.update(ptr.register(recorder))
    rma.install(recorder, _cid, _world_group)
    rq.bind(recorder, _REGIONS)  # MPI.Request, MPI.Prequest: the traced classes
    calls.bind(recorder, _REGIONS, _cid, TracedIntracomm,
               (TracedCartcomm, TracedGraphcomm, TracedDistgraphcomm))
    pkl5.install(MPI, TracedIntracomm)  # mpi4py.util.pkl5's unbound calls, traced
    # (after pkl5, whose classes derive from mpi4py's)
    MPI.Comm, MPI.Intracomm = views.stand_ins(
        _Comm, _Intracomm, _MAKERS, {"Create_from_group": classmethod(_create_from_group)})
    tb.set_serializer(MPI.pickle.dumps)  # the program's serializer, if it sets one
    mpiinit.install()  # the program's own MPI.Init/Init_thread/Finalize


def _scratch(rec: tb.Buffer) -> Any:
    """A status for a call made without one: the master thread reuses one, other
    threads get a fresh one (two threads may be inside MPI at once)."""
    return _status if rec is _rec.main else MPI.Status()


def _cid(comm: Any) -> int:
    """Local id of a traced communicator (registered now if it was created by a
    method that is not wrapped)."""
    try:
        return comm._cid
    except AttributeError:  # (an Idup communicator is new: calls._idup)
        return _register(comm, new=getattr(comm, "_fresh", False))


#: MPI handle -> (world ranks, local id) of the communicators registered: another
#: Python object of the same communicator (``mpi4py.util.pkl5.Intracomm(comm)``)
#: gets the same id (the members are compared: a freed handle may be reused)
_BY_HANDLE: dict[int, tuple[tuple[int, ...], int]] = {}


def _register(comm: Any, new: bool = False) -> int:
    """Give ``comm`` its local id: a ``new`` communicator (one a creation call
    returned) a new one, any other object that of its handle's communicator if
    that one is registered with the same members."""
    if not comm:  # MPI.COMM_NULL
        return -1
    members = tuple(int(m) for m in MPI.Group.Translate_ranks(
        _Comm.Get_group(comm), list(range(_Comm.Get_size(comm))), _world_group))
    handle = _Comm.py2f(comm)
    known = _BY_HANDLE.get(handle)
    if not new and known is not None and known[0] == members:
        cid = known[1]
    else:
        cid = _rec.comm_id(members)
        _BY_HANDLE[handle] = (members, cid)
    comm._cid = cid
    return cid


def _collective(t: int, comm: Any, name: str, op: str, root: int, fn: Any, args: tuple,
                sizes: Any) -> Any:
    tb_ = monotonic_ns()
    rec, region = _rec.current(), _REGIONS[name]
    cid = _cid(comm)
    rec.enter_at(t, region)
    rec.add_record(tb_, tb.COLL_BEGIN, ())
    rec.back(t)
    try:
        result = fn(comm, *args)
    except BaseException:
        rq.unwrite(rec, tb_, tb.COLL_BEGIN, ())  # no End will follow (rq.unwrite)
        _leave(rec, region)
        raise
    te = monotonic_ns()
    tl = monotonic_ns()
    sent, received = sizes(comm, args, result)
    rec.add_record(te, tb.COLL_END, (COLLECTIVE_OPS[op], cid, root, sent, received))
    rec.leave_at(tl, region)
    rec.back(te)
    return result


# ---------------------------------------------------------------------------------

class TracedIntracomm(calls.MoreCalls, MPI.Intracomm):
    """An intracommunicator whose communication calls are recorded (more of them in
    :class:`calibration.tracer.calls.MoreCalls`)."""

    # -- communicator creation: register in creation order ---------------------------
    def _created(self, comm: Any) -> Any:
        return _created(comm)

    def Dup(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Dup(self, *args, **kwargs))

    def Clone(self) -> Any:
        return self._created(_Intracomm.Clone(self))

    def Split(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Split(self, *args, **kwargs))

    def Split_type(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Split_type(self, *args, **kwargs))

    def Create(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Create(self, *args, **kwargs))

    def Create_group(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Create_group(self, *args, **kwargs))

    def Create_cart(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Create_cart(self, *args, **kwargs))

    def Create_graph(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Create_graph(self, *args, **kwargs))

    def Create_dist_graph(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Create_dist_graph(self, *args, **kwargs))

    def Create_dist_graph_adjacent(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(_Intracomm.Create_dist_graph_adjacent(self, *args, **kwargs))

    def Create_intercomm(self, *args: Any, **kwargs: Any) -> Any:
        """An intercommunicator is not traced (:class:`TracedIntercomm`): warned
        about on the first call, as an untraced method is."""
        calls.warn_untraced("MPI.Comm.Create_intercomm", calls.UNTRACED_INTERCOMM)
        return _created(_Intracomm.Create_intercomm(self, *args, **kwargs))

    # -- blocking point to point -------------------------------------------------------
    def _send(self, t: int, name: str, fn: Any, obj: Any, dest: int, tag: int,
              pickled: bool) -> None:
        ts = monotonic_ns()
        rec, region = _rec.current(), _REGIONS[name]
        cid = _cid(self)
        rec.enter_at(t, region)
        fields = None
        try:
            if dest != _PROC_NULL:
                fields = (dest, cid, tag, tb.pickled_size(obj) if pickled else sz.nbytes(obj))
                rec.add_record(ts, tb.MPI_SEND, fields)
            rec.back(t)
            fn(self, obj, dest, tag)
        except Exception:
            if fields is not None:  # the call failed: no message left (rq.unwrite)
                rq.unwrite(rec, ts, tb.MPI_SEND, fields)
            raise
        finally:
            _leave(rec, region)

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        self._send(_now(), "MPI_Send", _Comm.send, obj, dest, tag, True)

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        self._send(_now(), "MPI_Ssend", _Comm.ssend, obj, dest, tag, True)

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._send(_now(), "MPI_Send", _Comm.Send, buf, dest, tag, False)

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._send(_now(), "MPI_Ssend", _Comm.Ssend, buf, dest, tag, False)

    def _recv(self, t: int, fn: Any, buf: Any, source: int, tag: int, status: Any) -> Any:
        rec, region = _rec.current(), _REGIONS["MPI_Recv"]
        cid = _cid(self)
        st = _scratch(rec) if status is None else status
        rec.enter_at(t, region)
        rec.back(t)
        try:
            result = fn(self, buf, source, tag, st)
        except BaseException:
            _leave(rec, region)
            raise
        _received(rec, region, source, cid, st)
        return result

    def recv(self, buf: Any = None, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
             status: Any = None) -> Any:
        return self._recv(_now(), _Comm.recv, buf, source, tag, status)

    def Recv(self, buf: Any, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
             status: Any = None) -> None:
        self._recv(_now(), _Comm.Recv, buf, source, tag, status)

    def _sendrecv(self, t: int, fn: Any, sendobj: Any, dest: int, sendtag: int, recvbuf: Any,
                  source: int, recvtag: int, status: Any, pickled: bool,
                  name: str = "MPI_Sendrecv") -> Any:
        ts = monotonic_ns()
        rec, region = _rec.current(), _REGIONS[name]
        cid = _cid(self)
        st = _scratch(rec) if status is None else status
        rec.enter_at(t, region)
        fields = None
        try:
            if dest != _PROC_NULL:
                fields = (dest, cid, sendtag, tb.pickled_size(sendobj) if pickled
                          else sz.nbytes(sendobj))
                rec.add_record(ts, tb.MPI_SEND, fields)
            rec.back(t)
            result = fn(self, sendobj, dest, sendtag, recvbuf, source, recvtag, st)
        except Exception:
            if fields is not None:  # the call failed: no message left (rq.unwrite)
                rq.unwrite(rec, ts, tb.MPI_SEND, fields)
            _leave(rec, region)
            raise
        except BaseException:
            _leave(rec, region)
            raise
        _received(rec, region, source, cid, st)
        return result

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = _ANY_SOURCE, recvtag: int = _ANY_TAG,
                 status: Any = None) -> Any:
        return self._sendrecv(_now(), _Comm.sendrecv, sendobj, dest, sendtag, recvbuf, source,
                              recvtag, status, True)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = _ANY_SOURCE, recvtag: int = _ANY_TAG,
                 status: Any = None) -> None:
        self._sendrecv(_now(), _Comm.Sendrecv, sendbuf, dest, sendtag, recvbuf, source, recvtag,
                       status, False)

    # -- nonblocking point to point ----------------------------------------------------
    def _isend(self, t: int, name: str, fn: Any, obj: Any, dest: int, tag: int,
               pickled: bool) -> TracedRequest:
        ts = monotonic_ns()
        rec, region = _rec.current(), _REGIONS[name]
        cid = _cid(self)
        rec.enter_at(t, region)
        fields = None
        try:
            rid = _rec.new_request()
            if dest != _PROC_NULL:
                fields = (dest, cid, tag, tb.pickled_size(obj) if pickled else sz.nbytes(obj),
                          rid)
                rec.add_record(ts, tb.MPI_ISEND, fields)
            rec.back(t)
            handle = fn(self, obj, dest, tag)
        except Exception:
            if fields is not None:  # the call failed: no message left (rq.unwrite)
                rq.unwrite(rec, ts, tb.MPI_ISEND, fields)
            _leave(rec, region)
            raise
        except BaseException:
            _leave(rec, region)
            raise
        return _issued(rec, region, handle, (rid, cid, rq.SEND) if dest != _PROC_NULL else None)

    def isend(self, obj: Any, dest: int, tag: int = 0) -> TracedRequest:
        return self._isend(_now(), "MPI_Isend", _Comm.isend, obj, dest, tag, True)

    def issend(self, obj: Any, dest: int, tag: int = 0) -> TracedRequest:
        return self._isend(_now(), "MPI_Issend", _Comm.issend, obj, dest, tag, True)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> TracedRequest:
        return self._isend(_now(), "MPI_Isend", _Comm.Isend, buf, dest, tag, False)

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> TracedRequest:
        return self._isend(_now(), "MPI_Issend", _Comm.Issend, buf, dest, tag, False)

    def _irecv(self, t: int, fn: Any, buf: Any, source: int, tag: int) -> TracedRequest:
        tr = monotonic_ns()
        rec, region = _rec.current(), _REGIONS["MPI_Irecv"]
        cid = _cid(self)
        rec.enter_at(t, region)
        fields = None
        try:
            rid = _rec.new_request()
            if source != _PROC_NULL:  # (from PROC_NULL: no receive, no record)
                fields = (rid,)
                rec.add_record(tr, tb.MPI_IRECV_REQUEST, fields)
            rec.back(t)
            handle = fn(self, buf, source, tag)
        except Exception:
            if fields is not None:  # no receive was posted (rq.unwrite)
                rq.unwrite(rec, tr, tb.MPI_IRECV_REQUEST, fields)
            _leave(rec, region)
            raise
        except BaseException:
            _leave(rec, region)
            raise
        return _issued(rec, region, handle, (rid, cid, rq.RECV) if source != _PROC_NULL else None)

    def irecv(self, buf: Any = None, source: int = _ANY_SOURCE,
              tag: int = _ANY_TAG) -> TracedRequest:
        return self._irecv(_now(), _Comm.irecv, buf, source, tag)

    def Irecv(self, buf: Any, source: int = _ANY_SOURCE,
              tag: int = _ANY_TAG) -> TracedRequest:
        return self._irecv(_now(), _Comm.Irecv, buf, source, tag)

    def Psend_init(self, buf: Any, partitions: int, dest: int, tag: int = 0) -> Any:
        return ptr.init(self, _rec, _PREGIONS, _cid(self), True, buf, partitions, dest, tag)

    def Precv_init(self, buf: Any, partitions: int, source: int, tag: int = 0) -> Any:
        return ptr.init(self, _rec, _PREGIONS, _cid(self), False, buf, partitions, source,
                        tag)

    # -- collectives -------------------------------------------------------------------
    def _coll(self, t: int, name: str, op: str, root: int, fn: Any, args: tuple,
              sizes: Any) -> Any:
        return _collective(t, self, name, op, root, fn, args, sizes)

    def barrier(self) -> None:
        return _collective(_now(), self, "MPI_Barrier", "BARRIER", _NO_ROOT, _Comm.barrier, (),
                           sz.none)

    def Barrier(self) -> None:
        return _collective(_now(), self, "MPI_Barrier", "BARRIER", _NO_ROOT, _Comm.Barrier, (),
                           sz.none)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return _collective(_now(), self, "MPI_Bcast", "BCAST", root, _Comm.bcast, (obj, root),
                           sz.bcast)

    def Bcast(self, buf: Any, root: int = 0) -> None:
        return _collective(_now(), self, "MPI_Bcast", "BCAST", root, _Comm.Bcast, (buf, root),
                           sz.Bcast)

    def scatter(self, sendobj: Any, root: int = 0) -> Any:
        return _collective(_now(), self, "MPI_Scatter", "SCATTER", root, _Comm.scatter,
                           (sendobj, root), sz.scatter)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        return _collective(_now(), self, "MPI_Scatter", "SCATTER", root, _Comm.Scatter,
                           (sendbuf, recvbuf, root), sz.Scatter)

    def gather(self, sendobj: Any, root: int = 0) -> Any:
        return _collective(_now(), self, "MPI_Gather", "GATHER", root, _Comm.gather,
                           (sendobj, root), sz.gather)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        return _collective(_now(), self, "MPI_Gather", "GATHER", root, _Comm.Gather,
                           (sendbuf, recvbuf, root), sz.Gather)

    def reduce(self, sendobj: Any, op: Any = MPI.SUM, root: int = 0) -> Any:
        return _collective(_now(), self, "MPI_Reduce", "REDUCE", root, _Comm.reduce,
                           (sendobj, op, root), sz.reduce)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0) -> None:
        return _collective(_now(), self, "MPI_Reduce", "REDUCE", root, _Comm.Reduce,
                           (sendbuf, recvbuf, op, root), sz.Reduce)

    def allreduce(self, sendobj: Any, op: Any = MPI.SUM) -> Any:
        return _collective(_now(), self, "MPI_Allreduce", "ALLREDUCE", _NO_ROOT, _Comm.allreduce,
                           (sendobj, op), sz.allreduce)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> None:
        return _collective(_now(), self, "MPI_Allreduce", "ALLREDUCE", _NO_ROOT, _Comm.Allreduce,
                           (sendbuf, recvbuf, op), sz.Allreduce)

    def allgather(self, sendobj: Any) -> Any:
        return _collective(_now(), self, "MPI_Allgather", "ALLGATHER", _NO_ROOT, _Comm.allgather,
                           (sendobj,), sz.allgather)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        return _collective(_now(), self, "MPI_Allgather", "ALLGATHER", _NO_ROOT, _Comm.Allgather,
                           (sendbuf, recvbuf), sz.Allgather)

    def alltoall(self, sendobj: Any) -> Any:
        return _collective(_now(), self, "MPI_Alltoall", "ALLTOALL", _NO_ROOT, _Comm.alltoall,
                           (sendobj,), sz.alltoall)

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        return _collective(_now(), self, "MPI_Alltoall", "ALLTOALL", _NO_ROOT, _Comm.Alltoall,
                           (sendbuf, recvbuf), sz.Alltoall)


# Topologies: the communicator with its traced calls, and the mpi4py class's own
# methods (local queries; neighbour collectives untraced, warned about: calls.bind).

class TracedCartcomm(TracedIntracomm, MPI.Cartcomm):
    """A Cartesian communicator (``Create_cart``, ``Sub``) traced as
    :class:`TracedIntracomm` is; ``Get_coords``, ``Shift`` etc. are mpi4py's."""

    def Sub(self, *args: Any, **kwargs: Any) -> Any:
        return self._created(MPI.Cartcomm.Sub(self, *args, **kwargs))


class TracedGraphcomm(TracedIntracomm, MPI.Graphcomm):
    """A graph communicator (``Create_graph``) traced as :class:`TracedIntracomm` is."""


class TracedDistgraphcomm(TracedIntracomm, MPI.Distgraphcomm):
    """A distributed graph communicator (``Create_dist_graph(_adjacent)``) traced as
    :class:`TracedIntracomm` is."""


class TracedIntercomm(MPI.Intercomm):
    """An intercommunicator (``Create_intercomm``): none of its calls is traced (its
    ranks name the remote group, which a trace's communicator, a list of members,
    cannot express); only ``Merge`` is wrapped, so that the intracommunicator it
    makes is traced."""

    def Merge(self, *args: Any, **kwargs: Any) -> Any:
        return _created(MPI.Intercomm.Merge(self, *args, **kwargs))


#: the traced class of each communicator class mpi4py's creation calls return
#: (Split/Create give the base class; Dup and Clone give ``type(self)``)
_TRACED: dict[type, type] = {
    MPI.Intracomm: TracedIntracomm, MPI.Cartcomm: TracedCartcomm,
    MPI.Graphcomm: TracedGraphcomm, MPI.Distgraphcomm: TracedDistgraphcomm,
    MPI.Intercomm: TracedIntercomm,
}


def _created(comm: Any) -> Any:
    """A communicator a creation call returned, as the program gets it: of its
    traced class (:data:`_TRACED`) and registered in creation order; an
    intercommunicator is wrapped but not registered (nothing on it is recorded);
    MPI.COMM_NULL as it is."""
    if comm:
        traced = _TRACED.get(type(comm))
        if traced is not None:
            comm = traced(comm)
        if not isinstance(comm, MPI.Intercomm):
            _register(comm, new=True)
    return comm


def _adopt(comm: Any) -> Any:
    """Another object of an existing communicator (``f2py``, ``fromhandle``): of its
    traced class, with its handle's id if registered (:func:`_register`)."""
    traced = _TRACED.get(type(comm))
    return traced(comm) if comm and traced is not None else comm


def _create_from_group(cls: Any, group: Any, stringtag: str = "org.mpi4py",
                       info: Any = MPI.INFO_NULL, errhandler: Any = None) -> Any:
    """``Intracomm.Create_from_group`` (MPI-4, ``MPI.Session`` programs): as Create's."""
    return _created(_Intracomm.Create_from_group(group, stringtag, info, errhandler))


#: the class methods that make communicators, traced (:mod:`calibration.tracer.views`;
#: also on TracedIntracomm: ``COMM_WORLD.Create_from_group(...)``)
_MAKERS = {"f2py": classmethod(lambda cls, arg: _adopt(_Comm.f2py(arg))),
           "fromhandle": classmethod(lambda cls, handle: _adopt(_Comm.fromhandle(handle)))}
for _name, _method in {**_MAKERS, "Create_from_group": classmethod(_create_from_group),
                       "__reduce__": views.by_name(_Intracomm)}.items():
    setattr(TracedIntracomm, _name, _method)  # (__reduce__: pickling COMM_WORLD)


# ---------------------------------------------------------------------------------

def _issued(rec: tb.Buffer, region: int, handle: Any, info: tuple | None) -> TracedRequest:
    """Leave of a nonblocking call, stamped as the MPI call returns; the request is
    wrapped (a Python object and its ``_info``) after the stamp, in the Leave's
    bracket, so the wrapping is charged to the Leave (docs/calibration.md, "Where an
    MPI call's time goes"). Wrapped before the stamp it lay inside the call's span,
    measured by no bracket: ~0.1-0.15 µs per Isend/Irecv that stayed in the
    compensated trace."""
    tl = monotonic_ns()
    req = TracedRequest(handle)
    req._info = info
    rec.leave_at(tl, region)
    rec.back(tl)
    return req


def _received(rec: tb.Buffer, region: int, source: int, cid: int, status: Any) -> None:
    """MpiRecv (from the status) and Leave after a receive returned: both stamped
    first, the status read after them."""
    tr = monotonic_ns()
    tl = monotonic_ns()
    if source != _PROC_NULL:
        rec.add_record(tr, tb.MPI_RECV, (status.Get_source(), cid, status.Get_tag(),
                                         status.Get_count()))
    rec.leave_at(tl, region)
    rec.back(tr)
