"""The mpi4py tracer's requests: completion, cancellation and persistent requests.

A traced nonblocking call (:mod:`calibration.tracer.mpi`, :mod:`calibration.tracer.calls`)
returns a :class:`TracedRequest` whose ``_info`` says what its completion record is:
``(request id, comm id, SEND)`` → MpiIsendComplete, ``(request id, comm id, RECV)``
→ MpiIrecv (source, tag and bytes from the status), ``(request id, comm id, COLL,
op, root, bytes sent, bytes received)`` → NonBlockingCollectiveComplete,
``(request id, comm id, MRECV)`` (a matched probe's message received by
``Message.Irecv``) → MpiImrecv (bytes from the status); None once
completed (and for calls to MPI.PROC_NULL, which record no message).
``MPI.Request`` is replaced by :class:`TracedRequest` at install, so the program's
``MPI.Request.Waitany(reqs)`` etc. come here.

Every completion call is recorded as Score-P's MPI adapter does
(``SCOREP_Mpi_Request.c``): Enter of the ``MPI_X`` region, the call, then, in the
order of the request array,

* Wait, Waitall, Waitany, Waitsome: the completion record of each traced request
  the call completed. Score-P with its XREQTEST group enabled also writes
  MpiRequestTest for each request of a Waitany/Waitsome array still active; by
  default it does not, and neither do we: a loop of Waitany over N requests wrote
  N²/2 of them (10^4 requests: 5·10^7 records, a run of 6 s untraced did not end
  in 180 s traced, 7.6 GB; found by probing), which ``compensate`` does not use;
* Test, Testall, Testany, Testsome: the completion records of the completed
  requests, MpiRequestTest for each traced request it tested and left active
  (Testall and Testany that complete nothing: MpiRequestTest for every active one:
  the program polls, and each poll costs it as much as the records);

then Leave. A request the program cancelled (``Cancel``: Enter/Leave of MPI_Cancel)
gets MpiRequestCancelled instead of its completion record if the status says the
cancel succeeded (``Status.Is_cancelled``, Score-P's ``MPI_Test_cancelled``).
``Free`` is Enter/Leave of MPI_Request_free; a freed active request's completion is
never recorded (MPI never reports it).

Persistent point to point (``Send_init``, ``Ssend_init``, ``Bsend_init``,
``Rsend_init``, ``Recv_init``): Enter/Leave of the init call, then each ``Start``
(and ``Prequest.Startall``) records what Score-P's MPI_Start does with its
nonblocking group on: MpiIsend (peer, comm, tag, bytes, a fresh request id) or
MpiIrecvRequest, completed by the calls above like any other request. The model
therefore needs no persistent kind of its own. A Start (Startall) that raises
takes its records back (:func:`unwrite`, as every wrapper does for the records it
wrote before a call that failed).

The in-situ discipline of :mod:`calibration.tracer.mpi` holds: the Enter is stamped
as the method is called, the first completion record and the Leave right after the
MPI call returns (later completion records as they are written), the statuses are
read after their stamp, and :meth:`Buffer.back <calibration.tracer.buffer.Buffer.back>`
closes each run of records.
"""

from __future__ import annotations

from time import monotonic_ns
from typing import Any

from mpi4py import MPI

from calibration.tracer import buffer as tb

_Request = MPI.Request
_Prequest = MPI.Prequest
_Comm = MPI.Comm
_PROC_NULL = MPI.PROC_NULL
_UNDEFINED = MPI.UNDEFINED
SEND, RECV, COLL, MRECV = 0, 1, 2, 3  # the third field of a request's _info

_now = monotonic_ns
_rec: tb.Recorder = tb.Recorder()  # replaced by bind()
_REGIONS: dict[str, int] = {}  # calibration.tracer.mpi's table (bind() adds to it)
_status = MPI.Status()

#: regions of this module's calls (registered after the others, so that ids stay)
REGION_NAMES = ("MPI_Waitany", "MPI_Waitsome", "MPI_Testall", "MPI_Testany", "MPI_Testsome",
                "MPI_Cancel", "MPI_Request_free", "MPI_Send_init", "MPI_Ssend_init",
                "MPI_Bsend_init", "MPI_Rsend_init", "MPI_Recv_init", "MPI_Start",
                "MPI_Startall", "MPI_Request_get_status")


def bind(recorder: tb.Recorder, regions: dict[str, int]) -> None:
    """Record into ``recorder``; ``regions`` is the tracer's region table (called by
    :func:`calibration.tracer.mpi.install`)."""
    global _rec, _REGIONS
    _rec, _REGIONS = recorder, regions
    for name in REGION_NAMES:
        regions[name] = recorder.region_id((name, name, "", 0, "mpi", "POINT2POINT"))
    MPI.Request = TracedRequest
    MPI.Prequest = TracedPersistent


def scratch(rec: tb.Buffer) -> Any:
    """A status for a call made without one: the master thread reuses one, other
    threads get a fresh one (two threads may be inside MPI at once)."""
    return _status if rec is _rec.main else MPI.Status()


def leave(rec: tb.Buffer, region: int) -> None:
    """Leave of a wrapped call (or of one that raised)."""
    t = monotonic_ns()
    rec.leave_at(t, region)
    rec.back(t)


def plain(rec: tb.Buffer, t: int, region: int, fn: Any, *args: Any) -> Any:
    """Enter of ``region`` at ``t``, ``fn(*args)``, Leave: a wrapped call that writes
    no record of its own (its time is MPI time, not the program's)."""
    rec.enter_at(t, region)
    rec.back(t)
    try:
        return fn(*args)
    finally:
        leave(rec, region)


def unwrite(rec: tb.Buffer, t: int, kind: int, fields: tuple) -> bool:
    """Take back the record ``rec.add_record(t, kind, fields)`` wrote before an MPI
    call that then raised; True if it was found and removed.

    A wrapper writes a send's MpiSend/MpiIsend (a collective's MpiCollectiveBegin,
    a request record) *before* the MPI call, stamps first (module docstring). If
    the call raises, no message left and no collective took place: the record
    would name a send that never happened (compensate then pairs the receive with
    it, or refuses a rank the call rejected) or a Begin without its End (which
    compensate refuses). The Enter/Leave of the call stay: it did take time.
    Wrappers take a record back when the call raised an ``Exception`` (MPI's
    errors, a bad buffer's TypeError, a pickling error), not on a
    KeyboardInterrupt or SystemExit: a signal handler's exception can be raised
    right after a call that completed, whose message did leave. A collective's
    Begin goes on any exception (a Begin without its End is refused either way).

    The record is found again rather than remembered by position, so nothing is
    stored on the path of a call that succeeds: searching back from the end of
    ``rec.data``, the first code of ``kind`` whose fields are ``fields`` (the very
    tuple, or an equal one for the shared empty tuple of MpiCollectiveBegin)
    preceded by its own time ``t``. Records written after it (traced functions
    run by pickling inside the call) stay in place. Its ``extra`` entry is left
    unreferenced: removing it would shift the indices of the later records. If a
    signal handler's records split the pair (time, code), the case of
    :func:`calibration.tracer.reentry.realign`, the search fails and the record
    stays, as it did before."""
    data, extra, mask, bits = rec.data, rec.extra, tb.KIND_MASK, tb.KIND_BITS
    for j in range(len(data) - 1, 0, -1):
        code = data[j]
        if code & mask != kind or data[j - 1] != t:
            continue
        index = code >> bits
        if index < len(extra) and (extra[index] is fields or
                                   (not fields and extra[index] == fields)):
            del data[j - 1:j + 1]
            return True
    return False


def complete(rec: tb.Buffer, info: tuple | None, status: Any, t: int) -> None:
    """The completion record of a traced request (none for untraced ones), stamped
    ``t``; a cancelled request's (third field ``-1 - what``) is MpiRequestCancelled
    if the cancel succeeded."""
    if info is None:
        return
    what = info[2]
    if what < 0:
        if status.Is_cancelled():
            rec.add_record(t, tb.REQUEST_CANCELLED, (info[0],))
            return
        what = -1 - what
    if what == RECV:
        rec.add_record(t, tb.MPI_IRECV, (status.Get_source(), info[1], status.Get_tag(),
                                         status.Get_count(), info[0]))
    elif what == SEND:
        rec.add_record(t, tb.MPI_ISEND_COMPLETE, (info[0],))
    elif what == MRECV:
        rec.add_record(t, tb.IMRECV, (info[0], status.Get_count()))
    else:
        rec.add_record(t, tb.NBC_COMPLETE, (info[3], info[1], info[4], info[5], info[6],
                                            info[0]))


def _finish(rec: tb.Buffer, region: int, reqs: list, infos: list, done: dict,
            tested: bool, tc: int) -> None:
    """After a completion call over ``reqs`` returned (``tc`` stamped then): in array
    order, the completion record of each traced request in ``done`` (position ->
    its status), MpiRequestTest for the other traced ones if ``tested``; Leave."""
    t = tc
    for pos, info in enumerate(infos):
        if info is None:
            continue
        st = done.get(pos)
        if st is not None:
            reqs[pos]._info = None
            complete(rec, info, st, t)
        elif tested:
            rec.add_record(t, tb.MPI_REQUEST_TEST, (info[0],))
        else:
            continue
        t = monotonic_ns()
    rec.leave_at(monotonic_ns(), region)
    rec.back(tc)


def _infos(reqs: list) -> list:
    """The ``_info`` of each request of an array (None for requests that are not
    :class:`TracedRequest`: untraced ones, and the partitioned requests of
    :mod:`calibration.tracer.partitioned`, whose ``_info`` means something else)."""
    return [q._info if isinstance(q, TracedRequest) else None for q in reqs]


def _info_of(req: Any) -> tuple | None:
    """A request's ``_info``; None for one the tracer did not make (no attribute,
    and none can be set on it)."""
    return req._info if isinstance(req, TracedRequest) else None


class TracedRequest(MPI.Request):
    """A request from a traced nonblocking call; ``_info`` as the module says.

    Its methods also run on requests the tracer did not make (MPI-IO, an
    untraced intercommunicator's, generalized requests), because ``MPI.Request``
    is this class while tracing and a program (and ``mpi4py.futures``) may call
    ``MPI.Request.Wait(req)`` or keep ``MPI.Request.test`` unbound: those calls are
    recorded as MPI time with no completion record, as the arrays' calls do."""

    _info: tuple | None = None

    def _wait(self, t: int, fn: Any, status: Any) -> Any:
        rec, region = _rec.current(), _REGIONS["MPI_Wait"]
        info = _info_of(self)
        st = scratch(rec) if status is None else status
        rec.enter_at(t, region)
        rec.back(t)
        try:
            result = fn(self, st)
        except BaseException:
            leave(rec, region)
            raise
        tc = monotonic_ns()
        tl = monotonic_ns()
        if info is not None:
            self._info = None
        complete(rec, info, st, tc)
        rec.leave_at(tl, region)
        rec.back(tc)
        return result

    def Wait(self, status: Any = None) -> Any:
        return TracedRequest._wait(self, _now(), _Request.Wait, status)

    def wait(self, status: Any = None) -> Any:
        return TracedRequest._wait(self, _now(), _Request.wait, status)

    def _test(self, t: int, fn: Any, status: Any) -> Any:
        rec, region = _rec.current(), _REGIONS["MPI_Test"]
        info = _info_of(self)
        st = scratch(rec) if status is None else status
        rec.enter_at(t, region)
        rec.back(t)
        try:
            result = fn(self, st)
        except BaseException:
            leave(rec, region)
            raise
        tc = monotonic_ns()
        tl = monotonic_ns()
        done = result[0] if isinstance(result, tuple) else result
        if info is not None:
            if done:
                self._info = None
                complete(rec, info, st, tc)
            else:
                rec.add_record(tc, tb.MPI_REQUEST_TEST, (info[0],))
        rec.leave_at(tl, region)
        rec.back(tc)
        return result

    def Test(self, status: Any = None) -> bool:
        return TracedRequest._test(self, _now(), _Request.Test, status)

    def test(self, status: Any = None) -> tuple[bool, Any]:
        return TracedRequest._test(self, _now(), _Request.test, status)

    def Cancel(self) -> None:
        TracedRequest._cancel(self, _now(), _Request.Cancel)

    def cancel(self) -> None:
        TracedRequest._cancel(self, _now(), _Request.cancel)

    def _cancel(self, t: int, fn: Any) -> None:
        rec, region = _rec.current(), _REGIONS["MPI_Cancel"]
        rec.enter_at(t, region)
        rec.back(t)
        try:
            fn(self)
            info = _info_of(self)
            if info is not None and info[2] >= 0:
                self._info = (info[0], info[1], -1 - info[2], *info[3:])
        finally:
            leave(rec, region)

    # MPI_Request_get_status, a non-destructive test: Enter/Leave only (the request
    # completes in a later Wait/Test, which records the completion), so that a
    # program polling with it spends MPI time, not its own, as Score-P records it
    def Get_status(self, status: Any = None) -> bool:
        return plain(_rec.current(), _now(), _REGIONS["MPI_Request_get_status"],
                     _Request.Get_status, self, status)

    def get_status(self, status: Any = None) -> bool:
        return plain(_rec.current(), _now(), _REGIONS["MPI_Request_get_status"],
                     _Request.get_status, self, status)

    def Free(self) -> None:
        t = _now()
        rec, region = _rec.current(), _REGIONS["MPI_Request_free"]
        rec.enter_at(t, region)
        rec.back(t)
        try:
            _Request.Free(self)
            if _info_of(self) is not None:
                self._info = None
        finally:
            leave(rec, region)

    # -- arrays of requests ------------------------------------------------------------
    @classmethod
    def _array(cls, t: int, name: str, fn: Any, requests: Any, status: Any, one: bool,
               outcome: Any) -> Any:
        """Waitall/Testall/Waitany/Testany/Waitsome/Testsome (both cases): ``fn(reqs,
        status)`` inside the call's Enter/Leave, ``status`` one Status (``one``) or one
        per request; ``outcome(result, status)`` -> ({position: status} of the
        requests that completed, whether the others were tested)."""
        rec, region = _rec.current(), _REGIONS[name]
        reqs = list(requests)
        infos = _infos(reqs)
        if status is None:
            status = scratch(rec) if one else [MPI.Status() for _ in reqs]
        rec.enter_at(t, region)
        rec.back(t)
        try:
            result = fn(reqs, status)
        except BaseException:
            leave(rec, region)
            raise
        tc = monotonic_ns()  # completions stamped as they are written, from here
        done, tested = outcome(result, status)
        _finish(rec, region, reqs, infos, done, tested, tc)
        return result

    @classmethod
    def Waitall(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Waitall", _Request.Waitall, requests, statuses,
                          False, _all_waited)

    @classmethod
    def waitall(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Waitall", _Request.waitall, requests, statuses,
                          False, _all_waited)

    @classmethod
    def Testall(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Testall", _Request.Testall, requests, statuses,
                          False, _all_tested)

    @classmethod
    def testall(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Testall", _Request.testall, requests, statuses,
                          False, _all_tested)

    @classmethod
    def Waitany(cls, requests: Any, status: Any = None) -> Any:
        return cls._array(_now(), "MPI_Waitany", _Request.Waitany, requests, status,
                          True, _any_waited)

    @classmethod
    def waitany(cls, requests: Any, status: Any = None) -> Any:
        return cls._array(_now(), "MPI_Waitany", _Request.waitany, requests, status,
                          True, _any_waited)

    @classmethod
    def Testany(cls, requests: Any, status: Any = None) -> Any:
        return cls._array(_now(), "MPI_Testany", _Request.Testany, requests, status,
                          True, _any_tested)

    @classmethod
    def testany(cls, requests: Any, status: Any = None) -> Any:
        return cls._array(_now(), "MPI_Testany", _Request.testany, requests, status,
                          True, _any_tested)

    @classmethod
    def Waitsome(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Waitsome", _Request.Waitsome, requests, statuses,
                          False, _some_waited)

    @classmethod
    def waitsome(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Waitsome", _Request.waitsome, requests, statuses,
                          False, _some_waited)

    @classmethod
    def Testsome(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Testsome", _Request.Testsome, requests, statuses,
                          False, _some_done)

    @classmethod
    def testsome(cls, requests: Any, statuses: Any = None) -> Any:
        return cls._array(_now(), "MPI_Testsome", _Request.testsome, requests, statuses,
                          False, _some_done)


# What each request-array call's result says (TracedRequest._array's ``outcome``).
def _all_waited(result: Any, sts: list) -> tuple[dict, bool]:
    """Waitall: every request completed."""
    return dict(enumerate(sts)), False


def _all_tested(result: Any, sts: list) -> tuple[dict, bool]:
    """Testall (flag first): all completed, or none and every one was tested."""
    flag = result[0] if isinstance(result, tuple) else result
    return (dict(enumerate(sts)) if flag else {}), True


def _any_waited(result: Any, st: Any) -> tuple[dict, bool]:
    """Waitany (index first): the one completed; no MpiRequestTest for the others
    (see the module docstring); no active request: nothing."""
    index = result[0] if isinstance(result, tuple) else result
    return ({index: st} if index != _UNDEFINED else {}), False


def _any_tested(result: Any, st: Any) -> tuple[dict, bool]:
    """Testany (index, flag): the one completed, and the others tested, also if
    none completed."""
    return _any_waited(result, st)[0], True


def _some_waited(result: Any, sts: list) -> tuple[dict, bool]:
    """Waitsome (indices first, None if no request was active): the k-th completed
    one's status is ``sts[k]``; no MpiRequestTest for the others."""
    return _some_done(result, sts)[0], False


def _some_done(result: Any, sts: list) -> tuple[dict, bool]:
    """Waitsome/Testsome (indices first, None if no request was active): the k-th
    completed one's status is ``sts[k]``; the others tested."""
    indices = result[0] if isinstance(result, tuple) else result
    if indices is None:
        return {}, False
    return {i: sts[k] for k, i in enumerate(indices)}, True


# ---------------------------------------------------------------------------------

class TracedPersistent(TracedRequest, MPI.Prequest):
    """A persistent point-to-point request of a traced communicator; ``_start`` =
    (comm id, peer, tag, bytes, is receive), None for MPI.PROC_NULL."""

    _start: tuple | None = None

    def _started(self, rec: tb.Buffer, t: int) -> tuple | None:
        """The Start record of this request stamped ``t`` (sets ``_info``); returns
        (time, kind, fields) of the record and the ``_info`` it replaced, for
        :meth:`_unstart`; None if it wrote none."""
        start = self._start
        if start is None:
            return None
        cid, peer, tag, nbytes, is_recv = start
        rid, before = _rec.new_request(), self._info
        if is_recv:
            fields: tuple = (rid,)
            rec.add_record(t, tb.MPI_IRECV_REQUEST, fields)
            self._info = (rid, cid, RECV)
            return t, tb.MPI_IRECV_REQUEST, fields, before
        fields = (peer, cid, tag, nbytes, rid)
        rec.add_record(t, tb.MPI_ISEND, fields)
        self._info = (rid, cid, SEND)
        return t, tb.MPI_ISEND, fields, before

    def _unstart(self, rec: tb.Buffer, written: tuple | None) -> None:
        """The Start (or Startall) call raised: the request did not start, so its
        Start record is taken back (:func:`unwrite`) and its ``_info`` is what it
        was (None, unless the program started a request still active)."""
        if written is not None:
            unwrite(rec, *written[:3])
            self._info = written[3]

    def Start(self) -> None:
        t = _now()
        ts = monotonic_ns()
        rec, region = _rec.current(), _REGIONS["MPI_Start"]
        rec.enter_at(t, region)
        written = None
        try:
            written = self._started(rec, ts)
            rec.back(t)
            _Prequest.Start(self)
        except Exception:
            self._unstart(rec, written)
            raise
        finally:
            leave(rec, region)

    @classmethod
    def Startall(cls, requests: Any) -> None:
        """Startall: the Start record of each traced request; if the call raises,
        all of them are taken back (MPI does not say which requests started)."""
        t = _now()
        ts = monotonic_ns()
        rec, region = _rec.current(), _REGIONS["MPI_Startall"]
        rec.enter_at(t, region)
        written: list[tuple[TracedPersistent, tuple | None]] = []
        try:
            reqs = list(requests)
            for q in reqs:
                if isinstance(q, TracedPersistent):
                    written.append((q, q._started(rec, ts)))
                    ts = monotonic_ns()
            rec.back(t)
            _Prequest.Startall(reqs)
        except Exception:
            for q, w in written:
                q._unstart(rec, w)
            raise
        finally:
            leave(rec, region)


def persistent(comm: Any, cid: int, name: str, fn: Any, buf: Any, peer: int, tag: int,
               is_recv: bool, nbytes: int) -> TracedPersistent:
    """``fn`` (Send_init, ..., Recv_init of ``comm``, local id ``cid``) traced:
    Enter/Leave of ``name``; the request's Start records come later."""
    t = _now()
    rec, region = _rec.current(), _REGIONS[name]
    rec.enter_at(t, region)
    rec.back(t)
    try:
        req = TracedPersistent(fn(comm, buf, peer, tag))
        if peer != _PROC_NULL:
            req._start = (cid, peer, tag, nbytes, is_recv)
        return req
    finally:
        leave(rec, region)
