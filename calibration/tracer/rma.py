"""The mpi4py tracer's MPI one-sided communication (RMA) calls (issue #19, R10).

:func:`install` replaces ``MPI.Win`` by :class:`TracedWin`, so the windows a
program creates (``MPI.Win.Create``, ``Allocate``, ``Allocate_shared``,
``Create_dynamic``) are traced; their calls are recorded inside the Enter/Leave of
the MPI call, as Score-P's MPI adapter records them (``SCOREP_Mpi_Rma``) and as
:mod:`compensate.formats.fields` and :mod:`compensate.matching.rma` read them:

* creation: RmaCollectiveBegin, the call, RmaWinCreate, RmaCollectiveEnd
  (CREATE_HANDLE; CREATE_HANDLE_AND_ALLOCATE for the allocating calls);
  ``Free``: RmaWinDestroy, RmaCollectiveBegin, the call, RmaCollectiveEnd
  (DESTROY_HANDLE, DESTROY_HANDLE_AND_DEALLOCATE). The window definition names
  the window's communicator.
* ``Fence``: RmaCollectiveBegin, the call, one RmaOpCompleteBlocking per
  operation the epoch issued, RmaCollectiveEnd (BARRIER, PROCESS|MEMORY).
* ``Put`` / ``Get``: RmaPut / RmaGet (target rank in the window's communicator,
  bytes of the origin buffer); ``Accumulate``: RmaAtomic ACCUMULATE (sent);
  ``Get_accumulate`` and ``Fetch_and_op``: FETCH_AND_ACCUMULATE (sent, received);
  ``Compare_and_swap``: COMPARE_AND_SWAP. Before the call. Matching ids as
  Score-P's implicit requests: one per (window, target) until the epoch that
  issued it is completed. A call to ``MPI.PROC_NULL`` records only Enter/Leave.
* PSCW: ``Post`` and ``Start``: RmaGroupSync (PROCESS, the group's members)
  after the Enter; ``Complete``: RmaGroupSync (PROCESS|MEMORY, the start's group)
  after the Enter, the call, the completions; ``Wait``: RmaGroupSync
  (PROCESS|MEMORY, the post's group) after the Enter; ``Test``: after the call,
  RmaGroupSync with PROCESS|MEMORY if it returned true, NONE if not. The
  complete's record sits before the call: the target's wait cannot return before
  the complete began, but may before it returned.
* passive target: ``Lock``: RmaRequestLock (lock id 0, EXCLUSIVE or SHARED) after
  the Enter (MPI's lock may be granted lazily: no RmaAcquireLock, as Score-P);
  ``Unlock``: the call, the completions of that target's operations,
  RmaReleaseLock; ``Lock_all`` / ``Unlock_all`` the same with the target
  undefined (all ranks) and a SHARED lock.
* ``Flush``, ``Flush_all``, ``Flush_local``, ``Flush_local_all``, ``Sync``:
  Enter/Leave only (not modelled: the operations stay in their epoch, completed
  at its unlock).

**A call that raises** keeps its Enter/Leave (it took time) but none of the
records written before the call (:func:`calibration.tracer.requests.unwrite`, as
:mod:`calibration.tracer.mpi` does): a failed creation leaves no
RmaCollectiveBegin, a failed ``Free`` no RmaWinDestroy and RmaCollectiveBegin, a
failed ``Fence`` no RmaCollectiveBegin (a Begin without its End goes on any
exception, a KeyboardInterrupt too); a failed transfer no RmaPut/RmaGet/RmaAtomic
and no matching id waiting for its completion, a failed ``Post``/``Start``/
``Complete``/``Wait`` no RmaGroupSync (and the window keeps the group of the
epoch it is in), a failed ``Lock``/``Lock_all`` no RmaRequestLock. Nothing then
claims an operation, a synchronisation or a window that did not happen. Records
written after the call (``Unlock``, ``Test``, the creations' RmaWinCreate) are
not written when it raises.

Not traced, and warned about on their first call (:data:`UNTRACED`):
request-based operations (``Rput``, ``Rget``, ``Raccumulate``,
``Rget_accumulate``) and ``Attach``/``Detach`` of dynamic windows; not traced:
windows created by methods not listed above.

In-situ brackets (:mod:`calibration.tracer.insitu`): the public method stamps the
Enter, the records before the call follow, then ``back``; after the call the
records and the Leave are stamped and ``back`` again, as in
:mod:`calibration.tracer.mpi`.
"""

from __future__ import annotations

from time import monotonic_ns
from typing import Any

from mpi4py import MPI

from calibration.tracer import buffer as tb
from calibration.tracer import calls
from calibration.tracer import requests as rq
from calibration.tracer import sizes as sz
from compensate.model import COLLECTIVE_OPS

_Win = MPI.Win
#: mpi4py's own window class, untraced (the calibration's RMA measurement uses it)
UNTRACED_WIN = _Win
_Group = MPI.Group
_PROC_NULL = MPI.PROC_NULL
_EXCLUSIVE = MPI.LOCK_EXCLUSIVE
_now = monotonic_ns
PROCESS, MEMORY = 1, 2  # OTF2 RmaSyncLevel bits
EXCLUSIVE, SHARED = 0, 1  # lock type field of RMA_REQUEST_LOCK
#: OTF2 RmaAtomicType numbers
ACCUMULATE, COMPARE_AND_SWAP, FETCH_AND_ACCUMULATE = 0, 3, 7

REGION_NAMES = (
    "MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared", "MPI_Win_create_dynamic",
    "MPI_Win_free", "MPI_Win_fence", "MPI_Put", "MPI_Get", "MPI_Accumulate",
    "MPI_Get_accumulate", "MPI_Fetch_and_op", "MPI_Compare_and_swap", "MPI_Win_post",
    "MPI_Win_start", "MPI_Win_complete", "MPI_Win_wait", "MPI_Win_test", "MPI_Win_lock",
    "MPI_Win_unlock", "MPI_Win_lock_all", "MPI_Win_unlock_all", "MPI_Win_flush",
    "MPI_Win_flush_all", "MPI_Win_flush_local", "MPI_Win_flush_local_all", "MPI_Win_sync",
)

_rec: tb.Recorder = tb.Recorder()
_regions: dict[str, int] = {}
_cid: Any = None  # calibration.tracer.mpi._cid
_world_group: Any = None


def install(recorder: tb.Recorder, cid: Any, world_group: Any) -> None:
    """Trace the windows the program creates (called by
    :func:`calibration.tracer.mpi.install`, after the other MPI regions, so that
    their ids stay); ``cid(comm)`` gives a communicator's local id."""
    global _rec, _cid, _world_group
    _rec, _cid, _world_group = recorder, cid, world_group
    for name in REGION_NAMES:
        _regions[name] = recorder.region_id((name, name, "", 0, "mpi", "RMA"))
    for name in UNTRACED:  # warned once, then mpi4py's
        if hasattr(MPI.Win, name):
            setattr(TracedWin, name, calls.stand_in(TracedWin, name, MPI.Win))
    MPI.Win = TracedWin


#: Window methods that move data or change the window but are not traced: each
#: warns on its first call (:func:`calibration.tracer.calls.stand_in`).
UNTRACED = ("Rput", "Rget", "Raccumulate", "Rget_accumulate", "Attach", "Detach")


def _world(group: Any) -> tuple[int, ...]:
    """World ranks of the members of an MPI group."""
    return tuple(int(r) for r in _Group.Translate_ranks(group, list(range(group.Get_size())),
                                                       _world_group))


class _Info:
    """A traced window's state: local id, whether MPI allocated its memory,
    open matching ids per target, the PSCW groups (world ranks, ranks)."""

    def __init__(self, wid: int, allocated: bool) -> None:
        self.wid = wid
        self.allocated = allocated
        self.pending: dict[int, int] = {}  # target rank -> matching id
        self.exposure: tuple[int, ...] = ()  # the post's group (world ranks)
        self.access: tuple[int, ...] = ()  # the start's group (world ranks)


_leave = rq.leave  # Leave of a wrapped call (or of one that raised)


def _create(t: int, name: str, allocated: bool, fn: Any, comm: Any) -> Any:
    """A window creation call ``fn()``: Enter, RmaCollectiveBegin, the call,
    RmaWinCreate, RmaCollectiveEnd, Leave; if the call raises, no window exists
    and its Begin would have no End: the Begin is taken back (on any exception)."""
    rec, region = _rec.current(), _regions[name]
    rec.enter_at(t, region)
    tb_ = monotonic_ns()
    rec.add_record(tb_, tb.RMA_COLL_BEGIN, ())
    rec.back(t)
    try:
        win = fn()
    except BaseException:
        rq.unwrite(rec, tb_, tb.RMA_COLL_BEGIN, ())  # no window, no End (rq.unwrite)
        _leave(rec, region)
        raise
    te = monotonic_ns()
    wid = _rec.win_id(_cid(comm))
    win._info = _Info(wid, allocated)
    rec.add_record(te, tb.RMA_WIN_CREATE, (wid,))
    op = "CREATE_HANDLE_AND_ALLOCATE" if allocated else "CREATE_HANDLE"
    rec.add_record(monotonic_ns(), tb.RMA_COLL_END, (COLLECTIVE_OPS[op], 0, wid))
    rec.leave_at(monotonic_ns(), region)
    rec.back(te)
    return win


class TracedWin(MPI.Win):
    """An RMA window whose calls are recorded (module docstring); ``_info`` is its
    :class:`_Info`, None for a window the tracer did not see created."""

    _info: _Info | None = None

    # -- creation and free ---------------------------------------------------------
    @classmethod
    def Create(cls, memory: Any, disp_unit: int = 1, info: Any = MPI.INFO_NULL,
               comm: Any = MPI.COMM_SELF) -> Any:
        base = super().Create
        return _create(_now(), "MPI_Win_create", False,
                       lambda: base(memory, disp_unit, info, comm), comm)

    @classmethod
    def Allocate(cls, size: int, disp_unit: int = 1, info: Any = MPI.INFO_NULL,
                 comm: Any = MPI.COMM_SELF) -> Any:
        base = super().Allocate
        return _create(_now(), "MPI_Win_allocate", True,
                       lambda: base(size, disp_unit, info, comm), comm)

    @classmethod
    def Allocate_shared(cls, size: int, disp_unit: int = 1, info: Any = MPI.INFO_NULL,
                        comm: Any = MPI.COMM_SELF) -> Any:
        base = super().Allocate_shared
        return _create(_now(), "MPI_Win_allocate_shared", True,
                       lambda: base(size, disp_unit, info, comm), comm)

    @classmethod
    def Create_dynamic(cls, info: Any = MPI.INFO_NULL, comm: Any = MPI.COMM_SELF) -> Any:
        base = super().Create_dynamic
        return _create(_now(), "MPI_Win_create_dynamic", False,
                       lambda: base(info, comm), comm)

    def Free(self) -> None:
        """Win.Free: Enter, RmaWinDestroy, RmaCollectiveBegin, the call,
        RmaCollectiveEnd, Leave. If the call raises (an epoch still open), the
        window lives on: its RmaWinDestroy is taken back on an ``Exception``, the
        Begin, which no End will follow, on any exception; the window stays
        traced, so that the program's next Free is recorded."""
        t = _now()
        info = self._info
        if info is None:
            return _Win.Free(self)
        rec, region = _rec.current(), _regions["MPI_Win_free"]
        rec.enter_at(t, region)
        td, destroy = monotonic_ns(), (info.wid,)
        rec.add_record(td, tb.RMA_WIN_DESTROY, destroy)
        tb_ = monotonic_ns()
        rec.add_record(tb_, tb.RMA_COLL_BEGIN, ())
        rec.back(t)
        try:
            _Win.Free(self)
        except BaseException as exc:
            rq.unwrite(rec, tb_, tb.RMA_COLL_BEGIN, ())  # no End will follow
            if isinstance(exc, Exception):  # MPI refused: the window is not freed
                rq.unwrite(rec, td, tb.RMA_WIN_DESTROY, destroy)
            _leave(rec, region)
            raise
        te = monotonic_ns()
        op = "DESTROY_HANDLE_AND_DEALLOCATE" if info.allocated else "DESTROY_HANDLE"
        rec.add_record(te, tb.RMA_COLL_END, (COLLECTIVE_OPS[op], 0, info.wid))
        rec.leave_at(monotonic_ns(), region)
        rec.back(te)
        self._info = None

    # -- helpers ---------------------------------------------------------------------
    def _plain(self, t: int, name: str, fn: Any, *args: Any) -> Any:
        """Enter, the call, Leave (a call R10 does not model)."""
        return rq.plain(_rec.current(), t, _regions[name], fn, self, *args)

    def _before(self, t: int, name: str, kind: int, fields: Any, fn: Any, *args: Any,
                undo: Any = None) -> Any:
        """Enter, the record ``kind`` with ``fields()`` (None: no record), the call,
        Leave. If the call raises an ``Exception``, the record is taken back
        (:func:`calibration.tracer.requests.unwrite`: no such operation,
        synchronisation or lock request took place) and ``undo()`` reverts what
        ``fields()`` changed in the window's state (it must be safe to call even
        if ``fields()`` itself raised)."""
        rec, region = _rec.current(), _regions[name]
        rec.enter_at(t, region)
        f, tr = None, 0
        try:
            f = fields()
            if f is not None:
                tr = monotonic_ns()
                rec.add_record(tr, kind, f)
            rec.back(t)
            return fn(self, *args)
        except Exception:
            if f is not None:  # the call failed: its record goes (rq.unwrite)
                rq.unwrite(rec, tr, kind, f)
            if undo is not None:
                undo()
            raise
        finally:
            _leave(rec, region)

    def _closing(self, t: int, name: str, before: list[tuple[int, tuple]], fn: Any,
                 args: tuple, targets: Any, after: Any) -> Any:
        """Enter, ``before`` records, the call, RmaOpCompleteBlocking of the pending
        operations to ``targets`` (None: all), the records ``after(result)`` lists,
        Leave. If the call raises, the epoch is not closed: its operations stay
        pending and the ``before`` records are taken back, on an ``Exception``
        (a Complete's RmaGroupSync), an RmaCollectiveBegin on any exception (no
        End will follow it)."""
        info = self._info
        rec, region = _rec.current(), _regions[name]
        rec.enter_at(t, region)
        written = []
        for kind, fields in before:
            tr = monotonic_ns()
            rec.add_record(tr, kind, fields)
            written.append((tr, kind, fields))
        rec.back(t)
        try:
            result = fn(self, *args)
        except BaseException as exc:
            for tr, kind, fields in reversed(written):
                if kind == tb.RMA_COLL_BEGIN or isinstance(exc, Exception):
                    rq.unwrite(rec, tr, kind, fields)  # no such sync (rq.unwrite)
            _leave(rec, region)
            raise
        te = monotonic_ns()
        first = True
        pending = info.pending
        done = list(pending) if targets is None else [r for r in targets if r in pending]
        for target in done:
            rec.add_record(te if first else monotonic_ns(), tb.RMA_OP_COMPLETE,
                           (info.wid, pending.pop(target)))
            first = False
        for kind, fields in after(result):
            rec.add_record(te if first else monotonic_ns(), kind, fields)
            first = False
        rec.leave_at(te if first else monotonic_ns(), region)
        rec.back(te)
        return result

    def _mid(self, target: int) -> int:
        """The matching id of an operation to ``target`` (Score-P's implicit request:
        shared by the epoch's operations to that target)."""
        pending = self._info.pending
        mid = pending.get(target)
        if mid is None:
            mid = pending[target] = _rec.new_request()
        return mid

    def _xfer(self, t: int, name: str, kind: int, target: int, fields: Any, fn: Any,
              *args: Any) -> Any:
        """A transfer or atomic operation: its record before the call. If the call
        raises, the matching id it opened for ``target`` (none of the epoch's
        operations to it before) is dropped, so that no completion of an
        operation that never happened is recorded at the epoch's end."""
        if self._info is None or target == _PROC_NULL:
            return self._plain(t, name, fn, *args) if self._info else fn(self, *args)
        wid, pending = self._info.wid, self._info.pending
        fresh = target not in pending

        def undo() -> None:
            if fresh:
                pending.pop(target, None)
        return self._before(t, name, kind,
                            lambda: (wid, target, *fields(), self._mid(target)), fn, *args,
                            undo=undo)

    # -- active target: fence ----------------------------------------------------------
    def Fence(self, assertion: int = 0) -> None:
        t = _now()
        if self._info is None:
            return _Win.Fence(self, assertion)
        wid = self._info.wid
        return self._closing(t, "MPI_Win_fence", [(tb.RMA_COLL_BEGIN, ())], _Win.Fence,
                             (assertion,), None,
                             lambda _: [(tb.RMA_COLL_END, (COLLECTIVE_OPS["BARRIER"],
                                                           PROCESS | MEMORY, wid))])

    # -- transfers ---------------------------------------------------------------------
    def Put(self, origin: Any, target_rank: int, target: Any = None) -> None:
        return self._xfer(_now(), "MPI_Put", tb.RMA_PUT, target_rank,
                          lambda: (sz.nbytes(origin),), _Win.Put, origin, target_rank, target)

    def Get(self, origin: Any, target_rank: int, target: Any = None) -> None:
        return self._xfer(_now(), "MPI_Get", tb.RMA_GET, target_rank,
                          lambda: (sz.nbytes(origin),), _Win.Get, origin, target_rank, target)

    def Accumulate(self, origin: Any, target_rank: int, target: Any = None,
                   op: Any = MPI.SUM) -> None:
        return self._xfer(_now(), "MPI_Accumulate", tb.RMA_ATOMIC, target_rank,
                          lambda: (ACCUMULATE, sz.nbytes(origin), 0), _Win.Accumulate,
                          origin, target_rank, target, op)

    def Get_accumulate(self, origin: Any, result: Any, target_rank: int, target: Any = None,
                       op: Any = MPI.SUM) -> None:
        return self._xfer(_now(), "MPI_Get_accumulate", tb.RMA_ATOMIC, target_rank,
                          lambda: (FETCH_AND_ACCUMULATE, sz.nbytes(origin), sz.nbytes(result)),
                          _Win.Get_accumulate, origin, result, target_rank, target, op)

    def Fetch_and_op(self, origin: Any, result: Any, target_rank: int, target_disp: int = 0,
                     op: Any = MPI.SUM) -> None:
        return self._xfer(_now(), "MPI_Fetch_and_op", tb.RMA_ATOMIC, target_rank,
                          lambda: (FETCH_AND_ACCUMULATE, sz.nbytes(origin), sz.nbytes(result)),
                          _Win.Fetch_and_op, origin, result, target_rank, target_disp, op)

    def Compare_and_swap(self, origin: Any, compare: Any, result: Any, target_rank: int,
                         target_disp: int = 0) -> None:
        return self._xfer(_now(), "MPI_Compare_and_swap", tb.RMA_ATOMIC, target_rank,
                          lambda: (COMPARE_AND_SWAP, sz.nbytes(origin), sz.nbytes(result)),
                          _Win.Compare_and_swap, origin, compare, result, target_rank,
                          target_disp)

    # -- active target: post / start / complete / wait ---------------------------------
    def Post(self, group: Any, assertion: int = 0) -> None:
        t = _now()
        info = self._info
        if info is None:
            return _Win.Post(self, group, assertion)

        exposure = info.exposure

        def fields() -> tuple:
            info.exposure = _world(group)
            return (PROCESS, info.wid, info.exposure)

        def undo() -> None:  # not posted: the exposure epoch is the one before
            info.exposure = exposure
        return self._before(t, "MPI_Win_post", tb.RMA_GROUP_SYNC, fields, _Win.Post, group,
                            assertion, undo=undo)

    def Start(self, group: Any, assertion: int = 0) -> None:
        t = _now()
        info = self._info
        if info is None:
            return _Win.Start(self, group, assertion)

        access = info.access

        def fields() -> tuple:
            info.access = _world(group)
            return (PROCESS, info.wid, info.access)

        def undo() -> None:  # not started: the access epoch is the one before
            info.access = access
        return self._before(t, "MPI_Win_start", tb.RMA_GROUP_SYNC, fields, _Win.Start, group,
                            assertion, undo=undo)

    def Complete(self) -> None:
        t = _now()
        info = self._info
        if info is None:
            return _Win.Complete(self)
        return self._closing(t, "MPI_Win_complete",
                             [(tb.RMA_GROUP_SYNC, (PROCESS | MEMORY, info.wid, info.access))],
                             _Win.Complete, (), None, lambda _: [])

    def Wait(self) -> None:
        t = _now()
        info = self._info
        if info is None:
            return _Win.Wait(self)
        return self._before(t, "MPI_Win_wait", tb.RMA_GROUP_SYNC,
                            lambda: (PROCESS | MEMORY, info.wid, info.exposure), _Win.Wait)

    def Test(self) -> bool:
        t = _now()
        info = self._info
        if info is None:
            return _Win.Test(self)
        return self._closing(t, "MPI_Win_test", [], _Win.Test, (), (),
                             lambda flag: [(tb.RMA_GROUP_SYNC,
                                            ((PROCESS | MEMORY) if flag else 0, info.wid,
                                             info.exposure))])

    # -- passive target ------------------------------------------------------------------
    def Lock(self, rank: int, lock_type: int = _EXCLUSIVE, assertion: int = 0) -> None:
        t = _now()
        info = self._info
        if info is None or rank == _PROC_NULL:
            return _Win.Lock(self, rank, lock_type, assertion)
        kind = EXCLUSIVE if lock_type == _EXCLUSIVE else SHARED
        return self._before(t, "MPI_Win_lock", tb.RMA_REQUEST_LOCK,
                            lambda: (info.wid, rank, kind), _Win.Lock, rank, lock_type,
                            assertion)

    def Unlock(self, rank: int) -> None:
        t = _now()
        info = self._info
        if info is None or rank == _PROC_NULL:
            return _Win.Unlock(self, rank)
        return self._closing(t, "MPI_Win_unlock", [], _Win.Unlock, (rank,), (rank,),
                             lambda _: [(tb.RMA_RELEASE_LOCK, (info.wid, rank))])

    def Lock_all(self, assertion: int = 0) -> None:
        t = _now()
        info = self._info
        if info is None:
            return _Win.Lock_all(self, assertion)
        return self._before(t, "MPI_Win_lock_all", tb.RMA_REQUEST_LOCK,
                            lambda: (info.wid, -1, SHARED), _Win.Lock_all, assertion)

    def Unlock_all(self) -> None:
        t = _now()
        info = self._info
        if info is None:
            return _Win.Unlock_all(self)
        return self._closing(t, "MPI_Win_unlock_all", [], _Win.Unlock_all, (), None,
                             lambda _: [(tb.RMA_RELEASE_LOCK, (info.wid, -1))])

    # -- not modelled: plain regions -------------------------------------------------------
    def Flush(self, rank: int) -> None:
        return self._plain(_now(), "MPI_Win_flush", _Win.Flush, rank)

    def Flush_all(self) -> None:
        return self._plain(_now(), "MPI_Win_flush_all", _Win.Flush_all)

    def Flush_local(self, rank: int) -> None:
        return self._plain(_now(), "MPI_Win_flush_local", _Win.Flush_local, rank)

    def Flush_local_all(self) -> None:
        return self._plain(_now(), "MPI_Win_flush_local_all", _Win.Flush_local_all)

    def Sync(self) -> None:
        return self._plain(_now(), "MPI_Win_sync", _Win.Sync)
