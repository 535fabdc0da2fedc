"""The mpi4py tracer's further communicator calls (issue #22): a mixin of
:class:`calibration.tracer.mpi.TracedIntracomm`.

Recorded as Score-P's MPI adapter records them (Enter of the ``MPI_X`` region, the
call's records, Leave):

* ``bsend``/``Bsend``/``Rsend``: MpiSend, as ``Send`` (regions MPI_Bsend, MPI_Rsend);
  ``ibsend``/``Ibsend``/``Irsend``: MpiIsend with a request, as ``Isend``;
  ``Sendrecv_replace``: MpiSend and MpiRecv, as ``Sendrecv``.
* ``Probe``/``probe``, ``Iprobe``/``iprobe`` (that found a message): MpiProbe
  (sender, comm, tag, message id undefined) in MPI_Probe / MPI_Iprobe, as Score-P.
* Matched probes (``Mprobe``/``mprobe``, ``Improbe``/``improbe`` that found a
  message): MpiProbe (sender, comm, tag, a message id) after the call; the
  returned :class:`TracedMessage`'s ``Recv``/``recv`` write MpiMrecv (message id,
  bytes) in MPI_Mrecv, its ``Irecv``/``irecv`` MpiImrecvRequest in MPI_Imrecv and
  MpiImrecv where the request completes (OTF2 3.1's records, which compensate
  models as a receive split in two). ``MPI.Message`` is :class:`TracedMessage`
  while tracing, whose ``Probe(comm, ...)`` etc. are the communicator's.
* ``Send_init``, ``Ssend_init``, ``Bsend_init``, ``Rsend_init``, ``Recv_init``:
  persistent requests (:mod:`calibration.tracer.requests`).
* ``Idup``/``Idup_with_info``: no record (as ``Dup``); the communicator is traced,
  with an id of its own, and the request is traced (its Wait is an MPI_Wait).
* ``scan``/``Scan``, ``exscan``/``Exscan``, ``Reduce_scatter``,
  ``Reduce_scatter_block``, ``Gatherv``, ``Scatterv``, ``Allgatherv``,
  ``Alltoallv``, ``Alltoallw``: MpiCollectiveBegin/End with the OTF2 operation
  (SCAN, EXSCAN, REDUCE_SCATTER, ..., ALLTOALLW), the root for Gatherv/Scatterv
  (none for the others) and the bytes of :mod:`calibration.tracer.sizes`.
* Nonblocking collectives (``Ibarrier``, ``Ibcast``, ``Igather(v)``,
  ``Iscatter(v)``, ``Iallgather(v)``, ``Ialltoall(v/w)``, ``Ireduce``,
  ``Iallreduce``, ``Ireduce_scatter(_block)``, ``Iscan``, ``Iexscan``): as Score-P
  writes them, NonBlockingCollectiveRequest (a request id) inside the call and
  NonBlockingCollectiveComplete (operation, communicator, root, bytes) where a
  Wait/Test call completes the request (:func:`calibration.tracer.requests.complete`);
  compensate models them (the ``icoll`` kinds of docs/compensation.md).

Every other communicator method that communicates (:func:`untraced_names`: MPI
methods that are not local queries, such as the neighbour collectives of the
topology communicators, for which OTF2 has no collective operation) still works
but is not recorded: its first call writes one line on stderr naming it and
saying that its communication is missing from the trace (:func:`warn_untraced`),
then the plain method takes its place, so later calls cost nothing extra. A call
returning an intercommunicator (:data:`INTERCOMM_MAKERS`) says instead that all
communication on that intercommunicator is missing. ``Free`` and ``Shift`` are
local (:data:`LOCAL_NAMES`): never warned about.

A call that raises writes no communication record: the records a wrapper writes
before the MPI call (MpiIsend, NonBlockingCollectiveRequest, MpiImrecvRequest
here) are taken back (:func:`calibration.tracer.requests.unwrite`).
"""

from __future__ import annotations

import inspect
from time import monotonic_ns
from typing import Any

from mpi4py import MPI

from calibration.tracer import buffer as tb
from calibration.tracer import requests as rq
from calibration.tracer import sizes as sz
from calibration.tracer.messages import warn
from compensate.model import COLLECTIVE_OPS

_Comm = MPI.Comm
_Intracomm = MPI.Intracomm
_Message = MPI.Message
_PROC_NULL = MPI.PROC_NULL
_UNDEF_MESSAGE = 2**64 - 1  # OTF2_UNDEFINED_UINT64: a plain probe's message id
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG
_NO_ROOT = -1
_SUM = MPI.SUM
_now = monotonic_ns
_rec: tb.Recorder = tb.Recorder()  # replaced by bind()
_REGIONS: dict[str, int] = {}
_cid: Any = None  # calibration.tracer.mpi._cid

_ROLES = {
    "POINT2POINT": ("Bsend", "Rsend", "Ibsend", "Irsend", "Sendrecv_replace", "Probe",
                    "Iprobe", "Mprobe", "Improbe", "Mrecv", "Imrecv"),
    "COLL_ONE2ALL": ("Scatterv", "Ibcast", "Iscatter", "Iscatterv"),
    "COLL_ALL2ONE": ("Gatherv", "Igather", "Igatherv", "Ireduce"),
    "COLL_ALL2ALL": ("Scan", "Exscan", "Reduce_scatter", "Reduce_scatter_block", "Allgatherv",
                     "Alltoallv", "Alltoallw", "Ibarrier", "Iallgather", "Iallgatherv",
                     "Ialltoall", "Ialltoallv", "Ialltoallw", "Iallreduce", "Ireduce_scatter",
                     "Ireduce_scatter_block", "Iscan", "Iexscan"),
}

#: Methods that do not communicate (local queries, handles, attributes, error
#: handlers): never warned about.
LOCAL_PREFIXES = ("Get_", "Set_", "Is_", "is_", "Create_errhandler", "Create_keyval",
                  "Free_keyval", "Delete_attr", "Call_errhandler", "Compare", "Abort",
                  "Attach_buffer", "Detach_buffer", "Cart_map", "Graph_map", "f2py", "py2f",
                  "fromhandle", "fromint", "toint")
#: Further methods that send no message, never warned about either: ``Free``/``free``
#: (MPI_Comm_free marks the communicator for deallocation, its pending
#: communication completes as usual; a warning that its "messages" were lost was
#: noise) and a Cartesian communicator's ``Shift`` (neighbour ranks, computed
#: locally).
LOCAL_NAMES = frozenset({"Free", "free", "Shift"})
#: Methods that return an intercommunicator (plain mpi4py, none of its calls
#: traced: its ranks name the remote group, which the trace's communicators cannot
#: express), warned about with :data:`UNTRACED_INTERCOMM`.
INTERCOMM_MAKERS = frozenset({"Create_intercomm", "Spawn", "Spawn_multiple", "Accept",
                              "Connect"})
#: What the warning says of an untraced call, and of one returning an intercommunicator
UNTRACED = ("is not traced: its communication is missing from the trace and its time "
            "counts as the program's")
UNTRACED_INTERCOMM = ("returns an intercommunicator that is not traced: all communication "
                      "on it is missing from the trace")


def bind(recorder: tb.Recorder, regions: dict[str, int], cid: Any, cls: type,
         topologies: tuple[type, ...] = ()) -> None:
    """Record into ``recorder`` (regions into the tracer's table ``regions``,
    ``cid(comm)`` a communicator's local id); ``cls`` (the traced communicator
    class) gets the warning stand-ins of :func:`untraced_names`, and so do the
    traced topology classes ``topologies`` (subclasses of ``cls``) for the
    methods their mpi4py class adds (neighbour collectives). Called by
    :func:`calibration.tracer.mpi.install`."""
    global _rec, _REGIONS, _cid
    _rec, _REGIONS, _cid = recorder, regions, cid
    for role, names in _ROLES.items():
        for name in names:
            full = f"MPI_{name}"
            regions[full] = recorder.region_id((full, full, "", 0, "mpi", role))
    for traced in (cls, *topologies):
        base = mpi_base(traced)
        for name in untraced_names(traced, base):
            setattr(traced, name, stand_in(traced, name, base))
    MPI.Message = TracedMessage
    MPI.File = TracedFile


def mpi_base(cls: type) -> type:
    """The mpi4py class a traced class derives from (its first in the MRO)."""
    return next(k for k in cls.__mro__ if k.__module__ == MPI.__name__)


def untraced_names(cls: type, base: type = _Intracomm) -> list[str]:
    """The methods of ``base`` (an mpi4py class ``cls`` derives from) that
    communicate but ``cls`` does not trace: neither local (:data:`LOCAL_PREFIXES`,
    :data:`LOCAL_NAMES`) nor defined by ``cls`` or its traced bases."""
    own = cls.__mro__[:cls.__mro__.index(base)]
    out = []
    for name in dir(base):
        if name.startswith(("_", *LOCAL_PREFIXES)) or name in LOCAL_NAMES:
            continue
        if any(name in vars(k) for k in own):
            continue
        if type(inspect.getattr_static(base, name)).__name__ == \
                "cython_function_or_method":
            out.append(name)
    return out


def warn_untraced(name: str, why: str = UNTRACED) -> None:
    """One line on stderr the first time the job calls ``name`` untraced:
    ``name`` and ``why`` (:data:`UNTRACED`, :data:`UNTRACED_INTERCOMM`); once per
    job (:func:`calibration.tracer.messages.warn`)."""
    warn(f"calibration.record: {name} {why}")


def stand_in(cls: type, name: str, base: type = _Intracomm) -> Any:
    """``base.name`` that warns on its first call (as ``MPI.Comm.name`` for the
    communicator's own methods, ``MPI.Cartcomm.name`` etc. for a topology's),
    then puts the plain method in its place on ``cls``."""
    plain = getattr(base, name)
    label = f"MPI.{'Comm' if base is _Intracomm else base.__name__}.{name}"
    why = UNTRACED_INTERCOMM if name in INTERCOMM_MAKERS else UNTRACED

    def first_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        warn_untraced(label, why)
        setattr(cls, name, plain)  # later calls go straight to mpi4py
        return plain(self, *args, **kwargs)

    first_call.__name__ = name
    return first_call


def _idup(made: tuple[Any, Any]) -> tuple[Any, Any]:
    """Idup's (communicator, request): the communicator marked to get a new id
    when first used (``_fresh``, read by :func:`calibration.tracer.mpi._cid`), the
    request a :class:`calibration.tracer.requests.TracedRequest` without a
    completion record (its Wait is MPI time, and ``isinstance(req, MPI.Request)``
    holds as untraced)."""
    comm, req = made
    if comm:
        comm._fresh = True
    return comm, rq.TracedRequest(req)


def _sendrecv_replace(comm: Any, buf: Any, dest: int, sendtag: int, _recvbuf: Any,
                      source: int, recvtag: int, status: Any) -> None:
    _Comm.Sendrecv_replace(comm, buf, dest, sendtag, source, recvtag, status)


class MoreCalls:
    """The calls of the module docstring (and ``Dup_with_info``, registered like
    ``Dup``); ``_send``, ``_isend``, ``_sendrecv``, ``_coll`` and ``_created`` are
    :class:`calibration.tracer.mpi.TracedIntracomm`'s."""

    _send: Any
    _isend: Any
    _sendrecv: Any
    _coll: Any
    _created: Any

    def Dup_with_info(self, info: Any) -> Any:
        return self._created(_Intracomm.Dup_with_info(self, info))

    # Idup: the communicator is of the traced class (mpi4py makes ``type(self)``),
    # but MPI forbids using it before the request completes, so it is registered
    # (a new id, as Dup's) on its first traced call (:func:`_idup`)
    def Idup(self, info: Any = None) -> tuple[Any, Any]:
        return _idup(_Intracomm.Idup(self, info))

    def Idup_with_info(self, info: Any) -> tuple[Any, Any]:
        return _idup(_Intracomm.Idup_with_info(self, info))

    # -- point to point ----------------------------------------------------------------
    def bsend(self, obj: Any, dest: int, tag: int = 0) -> None:
        self._send(_now(), "MPI_Bsend", _Comm.bsend, obj, dest, tag, True)

    def Bsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._send(_now(), "MPI_Bsend", _Comm.Bsend, buf, dest, tag, False)

    def Rsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._send(_now(), "MPI_Rsend", _Comm.Rsend, buf, dest, tag, False)

    def ibsend(self, obj: Any, dest: int, tag: int = 0) -> Any:
        return self._isend(_now(), "MPI_Ibsend", _Comm.ibsend, obj, dest, tag, True)

    def Ibsend(self, buf: Any, dest: int, tag: int = 0) -> Any:
        return self._isend(_now(), "MPI_Ibsend", _Comm.Ibsend, buf, dest, tag, False)

    def Irsend(self, buf: Any, dest: int, tag: int = 0) -> Any:
        return self._isend(_now(), "MPI_Irsend", _Comm.Irsend, buf, dest, tag, False)

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                         source: int = _ANY_SOURCE, recvtag: int = _ANY_TAG,
                         status: Any = None) -> None:
        self._sendrecv(_now(), _sendrecv_replace, buf, dest, sendtag, None, source, recvtag,
                       status, False, "MPI_Sendrecv_replace")

    def Probe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
              status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Probe", _Comm.Probe, source, tag, status, True)

    def probe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
              status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Probe", _Comm.probe, source, tag, status, True)

    def Iprobe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Iprobe", _Comm.Iprobe, source, tag, status, True)

    def iprobe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Iprobe", _Comm.iprobe, source, tag, status, True)

    def _mprobe(self, t: int, name: str, fn: Any, source: int, tag: int,
                status: Any, plain: bool = False) -> Any:
        """A probe that found a message: MpiProbe (sender, comm, tag from the status)
        after the call; a matched probe's has a new message id and its message is a
        :class:`TracedMessage`, a plain one's (MPI_Probe, MPI_Iprobe with flag true:
        ``plain``) an undefined id, as Score-P writes them (compensate ties it to
        the message the next receive takes)."""
        rec, region = _rec.current(), _REGIONS[name]
        st = rq.scratch(rec) if status is None else status
        rec.enter_at(t, region)
        rec.back(t)
        try:
            msg = fn(self, source, tag, st)
        except BaseException:
            rq.leave(rec, region)
            raise
        tp = monotonic_ns()
        tl = monotonic_ns()
        first = tl
        if (msg is not False) if plain else (msg is not None):
            src = st.Get_source()
            if src != _PROC_NULL:
                mid = _UNDEF_MESSAGE if plain else _rec.new_request()
                rec.add_record(tp, tb.PROBE, (src, _cid(self), st.Get_tag(), mid))
                first = tp
            if not plain:
                msg = TracedMessage(msg)
                msg._probe = (mid, st.Get_count()) if src != _PROC_NULL else None
        rec.leave_at(tl, region)
        rec.back(first)
        return msg

    def Mprobe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Mprobe", _Comm.Mprobe, source, tag, status)

    def mprobe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Mprobe", _Comm.mprobe, source, tag, status)

    def Improbe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
                status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Improbe", _Comm.Improbe, source, tag, status)

    def improbe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
                status: Any = None) -> Any:
        return self._mprobe(_now(), "MPI_Improbe", _Comm.improbe, source, tag, status)

    # -- persistent point to point -----------------------------------------------------
    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Any:
        return rq.persistent(self, _cid(self), "MPI_Send_init", _Comm.Send_init, buf, dest,
                             tag, False, sz.nbytes(buf))

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Any:
        return rq.persistent(self, _cid(self), "MPI_Ssend_init", _Comm.Ssend_init, buf, dest,
                             tag, False, sz.nbytes(buf))

    def Bsend_init(self, buf: Any, dest: int, tag: int = 0) -> Any:
        return rq.persistent(self, _cid(self), "MPI_Bsend_init", _Comm.Bsend_init, buf, dest,
                             tag, False, sz.nbytes(buf))

    def Rsend_init(self, buf: Any, dest: int, tag: int = 0) -> Any:
        return rq.persistent(self, _cid(self), "MPI_Rsend_init", _Comm.Rsend_init, buf, dest,
                             tag, False, sz.nbytes(buf))

    def Recv_init(self, buf: Any, source: int = _ANY_SOURCE, tag: int = _ANY_TAG) -> Any:
        return rq.persistent(self, _cid(self), "MPI_Recv_init", _Comm.Recv_init, buf, source,
                             tag, True, 0)

    # -- collectives -------------------------------------------------------------------
    def scan(self, sendobj: Any, op: Any = _SUM) -> Any:
        return self._coll(_now(), "MPI_Scan", "SCAN", _NO_ROOT, _Intracomm.scan, (sendobj, op),
                          sz.scan)

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM) -> None:
        return self._coll(_now(), "MPI_Scan", "SCAN", _NO_ROOT, _Intracomm.Scan,
                          (sendbuf, recvbuf, op), sz.Scan)

    def exscan(self, sendobj: Any, op: Any = _SUM) -> Any:
        return self._coll(_now(), "MPI_Exscan", "EXSCAN", _NO_ROOT, _Intracomm.exscan,
                          (sendobj, op), sz.scan)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM) -> None:
        return self._coll(_now(), "MPI_Exscan", "EXSCAN", _NO_ROOT, _Intracomm.Exscan,
                          (sendbuf, recvbuf, op), sz.Scan)

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                       op: Any = _SUM) -> None:
        return self._coll(_now(), "MPI_Reduce_scatter", "REDUCE_SCATTER", _NO_ROOT,
                          _Comm.Reduce_scatter, (sendbuf, recvbuf, recvcounts, op),
                          sz.Reduce_scatter)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM) -> None:
        return self._coll(_now(), "MPI_Reduce_scatter_block", "REDUCE_SCATTER_BLOCK", _NO_ROOT,
                          _Comm.Reduce_scatter_block, (sendbuf, recvbuf, op),
                          sz.Reduce_scatter_block)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        return self._coll(_now(), "MPI_Gatherv", "GATHERV", root, _Comm.Gatherv,
                          (sendbuf, recvbuf, root), sz.Gatherv)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        return self._coll(_now(), "MPI_Scatterv", "SCATTERV", root, _Comm.Scatterv,
                          (sendbuf, recvbuf, root), sz.Scatterv)

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        return self._coll(_now(), "MPI_Allgatherv", "ALLGATHERV", _NO_ROOT, _Comm.Allgatherv,
                          (sendbuf, recvbuf), sz.Allgatherv)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        return self._coll(_now(), "MPI_Alltoallv", "ALLTOALLV", _NO_ROOT, _Comm.Alltoallv,
                          (sendbuf, recvbuf), sz.Alltoallv)

    def Alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        return self._coll(_now(), "MPI_Alltoallw", "ALLTOALLW", _NO_ROOT, _Comm.Alltoallw,
                          (sendbuf, recvbuf), sz.Alltoallw)

    # -- nonblocking collectives -------------------------------------------------------
    def _icoll(self, t: int, name: str, op: str, root: int, fn: Any, args: tuple,
               sizes: Any) -> rq.TracedRequest:
        """NonBlockingCollectiveRequest inside the call; the request completes with
        NonBlockingCollectiveComplete (operation, comm, root, bytes)."""
        tr = monotonic_ns()
        rec, region = _rec.current(), _REGIONS[name]
        rec.enter_at(t, region)
        rid = _rec.new_request()
        fields = (rid,)
        rec.add_record(tr, tb.NBC_REQUEST, fields)
        rec.back(t)
        try:
            handle = fn(self, *args)
        except Exception:
            rq.unwrite(rec, tr, tb.NBC_REQUEST, fields)  # no request: no collective
            rq.leave(rec, region)
            raise
        except BaseException:
            rq.leave(rec, region)
            raise
        tl = monotonic_ns()
        req = rq.TracedRequest(handle)
        sent, received = sizes(self, args, None)
        req._info = (rid, _cid(self), rq.COLL, COLLECTIVE_OPS[op], root, sent, received)
        rec.leave_at(tl, region)
        rec.back(tl)
        return req

    def Ibarrier(self) -> Any:
        return self._icoll(_now(), "MPI_Ibarrier", "BARRIER", _NO_ROOT, _Comm.Ibarrier, (),
                           sz.none)

    def Ibcast(self, buf: Any, root: int = 0) -> Any:
        return self._icoll(_now(), "MPI_Ibcast", "BCAST", root, _Comm.Ibcast, (buf, root),
                           sz.Bcast)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Any:
        return self._icoll(_now(), "MPI_Igather", "GATHER", root, _Comm.Igather,
                           (sendbuf, recvbuf, root), sz.Gather)

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Any:
        return self._icoll(_now(), "MPI_Igatherv", "GATHERV", root, _Comm.Igatherv,
                           (sendbuf, recvbuf, root), sz.Gatherv)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Any:
        return self._icoll(_now(), "MPI_Iscatter", "SCATTER", root, _Comm.Iscatter,
                           (sendbuf, recvbuf, root), sz.Scatter)

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Any:
        return self._icoll(_now(), "MPI_Iscatterv", "SCATTERV", root, _Comm.Iscatterv,
                           (sendbuf, recvbuf, root), sz.Scatterv)

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> Any:
        return self._icoll(_now(), "MPI_Iallgather", "ALLGATHER", _NO_ROOT, _Comm.Iallgather,
                           (sendbuf, recvbuf), sz.Allgather)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> Any:
        return self._icoll(_now(), "MPI_Iallgatherv", "ALLGATHERV", _NO_ROOT,
                           _Comm.Iallgatherv, (sendbuf, recvbuf), sz.Allgatherv)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> Any:
        return self._icoll(_now(), "MPI_Ialltoall", "ALLTOALL", _NO_ROOT, _Comm.Ialltoall,
                           (sendbuf, recvbuf), sz.Alltoall)

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> Any:
        return self._icoll(_now(), "MPI_Ialltoallv", "ALLTOALLV", _NO_ROOT, _Comm.Ialltoallv,
                           (sendbuf, recvbuf), sz.Alltoallv)

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any) -> Any:
        return self._icoll(_now(), "MPI_Ialltoallw", "ALLTOALLW", _NO_ROOT, _Comm.Ialltoallw,
                           (sendbuf, recvbuf), sz.Alltoallw)

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM, root: int = 0) -> Any:
        return self._icoll(_now(), "MPI_Ireduce", "REDUCE", root, _Comm.Ireduce,
                           (sendbuf, recvbuf, op, root), sz.Reduce)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM) -> Any:
        return self._icoll(_now(), "MPI_Iallreduce", "ALLREDUCE", _NO_ROOT, _Comm.Iallreduce,
                           (sendbuf, recvbuf, op), sz.Allreduce)

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                        op: Any = _SUM) -> Any:
        return self._icoll(_now(), "MPI_Ireduce_scatter", "REDUCE_SCATTER", _NO_ROOT,
                           _Comm.Ireduce_scatter, (sendbuf, recvbuf, recvcounts, op),
                           sz.Reduce_scatter)

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM) -> Any:
        return self._icoll(_now(), "MPI_Ireduce_scatter_block", "REDUCE_SCATTER_BLOCK",
                           _NO_ROOT, _Comm.Ireduce_scatter_block, (sendbuf, recvbuf, op),
                           sz.Reduce_scatter_block)

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM) -> Any:
        return self._icoll(_now(), "MPI_Iscan", "SCAN", _NO_ROOT, _Intracomm.Iscan,
                           (sendbuf, recvbuf, op), sz.Scan)

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: Any = _SUM) -> Any:
        return self._icoll(_now(), "MPI_Iexscan", "EXSCAN", _NO_ROOT, _Intracomm.Iexscan,
                           (sendbuf, recvbuf, op), sz.Scan)


class TracedMessage(MPI.Message):
    """The message of a traced matched probe; ``_probe`` = (message id, bytes), None
    once received (and for a probe of MPI.PROC_NULL)."""

    _probe: tuple | None = None

    def _mrecv(self, t: int, fn: Any, *args: Any) -> Any:
        """MPI_Mrecv: MpiMrecv (message id, bytes) after the call."""
        rec, region = _rec.current(), _REGIONS["MPI_Mrecv"]
        probe = self._probe
        rec.enter_at(t, region)
        rec.back(t)
        try:
            result = fn(self, *args)
        except BaseException:
            rq.leave(rec, region)
            raise
        tr = monotonic_ns()
        tl = monotonic_ns()
        first = tl
        if probe is not None:
            self._probe = None
            rec.add_record(tr, tb.MRECV, probe)
            first = tr
        rec.leave_at(tl, region)
        rec.back(first)
        return result

    def Recv(self, buf: Any, status: Any = None) -> None:
        return self._mrecv(_now(), _Message.Recv, buf, status)

    def recv(self, status: Any = None) -> Any:
        return self._mrecv(_now(), _Message.recv, status)

    def _imrecv(self, t: int, fn: Any, *args: Any) -> rq.TracedRequest:
        """MPI_Imrecv: MpiImrecvRequest (message id, request id) in the call; the
        request completes with MpiImrecv (request id, bytes)."""
        tr = monotonic_ns()
        rec, region = _rec.current(), _REGIONS["MPI_Imrecv"]
        probe = self._probe
        rec.enter_at(t, region)
        fields = None
        try:
            rid = _rec.new_request()
            if probe is not None:
                fields = (probe[0], rid)
                rec.add_record(tr, tb.IMRECV_REQUEST, fields)
            rec.back(t)
            handle = fn(self, *args)
        except Exception:
            if fields is not None:  # the message is still the program's to receive
                rq.unwrite(rec, tr, tb.IMRECV_REQUEST, fields)
            rq.leave(rec, region)
            raise
        except BaseException:
            rq.leave(rec, region)
            raise
        tl = monotonic_ns()  # stamped first, the request wrapped after (mpi._issued)
        req = rq.TracedRequest(handle)
        if probe is not None:
            self._probe = None
            req._info = (rid, -1, rq.MRECV)
        rec.leave_at(tl, region)
        rec.back(tl)
        return req

    def Irecv(self, buf: Any) -> rq.TracedRequest:
        return self._imrecv(_now(), _Message.Irecv, buf)

    def irecv(self) -> rq.TracedRequest:
        return self._imrecv(_now(), _Message.irecv)

    # MPI.Message.Probe(comm, ...) etc. (``MPI.Message`` is this class while
    # tracing): the communicator's own matched probe, traced if it is
    @classmethod
    def Probe(cls, comm: Any, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
              status: Any = None) -> Any:
        return comm.Mprobe(source, tag, status)

    @classmethod
    def probe(cls, comm: Any, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
              status: Any = None) -> Any:
        return comm.mprobe(source, tag, status)

    @classmethod
    def Iprobe(cls, comm: Any, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: Any = None) -> Any:
        return comm.Improbe(source, tag, status)

    @classmethod
    def iprobe(cls, comm: Any, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: Any = None) -> Any:
        return comm.improbe(source, tag, status)


_File = MPI.File
#: What the warning says of MPI-IO
UNTRACED_IO = ("(MPI-IO) is not traced: the time of the file's calls counts as the "
               "program's")


class TracedFile(_File):
    """MPI-IO is not traced (Score-P records it as I/O operations, which
    ``compensate`` does not model): the first ``MPI.File.Open`` says so. The file
    is of this class, so that ``isinstance(f, MPI.File)`` holds."""

    @classmethod
    def Open(cls, comm: Any, filename: Any, amode: int = MPI.MODE_RDONLY,
             info: Any = MPI.INFO_NULL) -> Any:
        warn_untraced("MPI.File.Open", UNTRACED_IO)
        return cls(_File.Open(comm, filename, amode, info))

