"""Record Python ``threading`` threads and locks as OTF2 Pthread records.

:func:`install` patches the ``threading`` module the way Score-P's Pthread adapter
wraps ``pthread_create``, ``pthread_join`` and the mutex calls:

* ``Thread.start()``: Enter of the region ``threading.Thread.start`` (role
  THREAD_CREATE), ThreadCreate with a new sequence count, the real start, Leave.
* The new thread: its first record is ThreadBegin (same sequence count), its last
  ThreadEnd, on its own location "Pthread thread N" (N = the sequence count, as
  Score-P names them; the main thread is "Master thread").
* ``Thread.join()``: Enter ``threading.Thread.join`` (role THREAD_WAIT), the real
  join, then ThreadWait if the thread has ended (a join that timed out records
  none; only the first join that sees the end does), Leave.
* ``threading.Lock()`` / ``threading.RLock()`` return :class:`TracedLock` /
  :class:`TracedRLock`: ``acquire`` (and ``with lock:``) is Enter
  ``threading.Lock.acquire``, the real acquire, ThreadAcquireLock if it succeeded,
  Leave; ``release`` is Enter, ThreadReleaseLock, the real release, Leave. The
  acquisition order counts the lock's acquisitions from 1 and is updated while the
  lock is held; a release carries the order of its acquire. An RLock records only
  the outermost acquire and release (the hand-over between threads), and the
  release/re-acquire inside ``Condition.wait`` (via ``_release_save`` and
  ``_acquire_restore``) as a release and a new acquisition, like Score-P's
  ``pthread_cond_wait``.

Before a second thread can record, :meth:`Recorder.go_threaded
<calibration.tracer.buffer.Recorder.go_threaded>` ends the decorator's
single-threaded fast path: in ``Thread.start`` and in ``_thread.start_new_thread``
(patched too; such a thread has no Create/Begin records and records on an "Orphan
thread" location), or at :func:`install` if threads already run. Not seen: a
thread created outside Python (by a C library) that calls traced functions before
any Python thread was started — its records would land on the master thread.

Which locks: those created after :func:`install` through ``threading.Lock`` or
``threading.RLock`` (the program's, and those of libraries such as ``queue``),
except the ones the ``threading`` module makes for itself (the Events and
Conditions inside every Thread, Semaphores, Barriers, a Condition's default
RLock): those would add records to every ``start()`` that are the module's
bookkeeping, not the program's synchronisation.

**Why ``Thread._bootstrap_inner``.** ``start()`` runs the OS thread on
``Thread._bootstrap``, which calls ``self._bootstrap_inner()``; that sets the
thread's started event, calls ``self.run()`` and handles run's exceptions. Hooking
``run`` would miss every subclass that overrides it (and ``Timer``); hooking
``_bootstrap_inner`` on the class covers them all, and ``ThreadPoolExecutor``
workers, because ``_bootstrap`` looks it up on the instance. It is the first and
the last Python code of the thread that can record, and ``join()`` returns only
after it has returned (the join waits for the thread state's lock, released when
the C thread state is deleted), so ThreadEnd always precedes the ThreadWait.
``_bootstrap_inner`` is a private name of CPython's threading module (3.8 to 3.13
have it); :func:`install` fails with a clear error where it is missing.
"""

from __future__ import annotations

import _thread
import sys
import threading
from time import monotonic_ns
from typing import Any

from calibration.tracer import buffer as tb

_Thread = threading.Thread
_orig: dict[str, Any] = {}
_recorder: tb.Recorder | None = None
_R: dict[str, int] = {}
_THREADING = threading.__dict__
_allocate_lock = _thread.allocate_lock

_REGIONS = (
    ("threading.Thread.start", "THREAD_CREATE"),
    ("threading.Thread.join", "THREAD_WAIT"),
    ("threading.Lock.acquire", "WRAPPER"),
    ("threading.Lock.release", "WRAPPER"),
    ("threading.RLock.acquire", "WRAPPER"),
    ("threading.RLock.release", "WRAPPER"),
)


class TracedLock:
    """A ``threading.Lock`` whose acquisitions and releases are recorded."""

    __slots__ = ("_lock", "_id", "_order", "_rec", "_ra", "_rr", "__weakref__")
    _names = ("threading.Lock.acquire", "threading.Lock.release")

    def __init__(self, lock: Any, lock_id: int, recorder: tb.Recorder) -> None:
        self._lock = lock
        self._id = lock_id
        self._order = 0
        self._rec = recorder
        self._ra, self._rr = (_R[n] for n in self._names)  # region ids in recorder

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        # stamp first, work after, then hand back (in-situ bracket: buffer.back)
        t = monotonic_ns()
        rec, region = self._rec.current(), self._ra
        rec.enter_at(t, region)
        rec.back(t)
        try:
            ok = self._lock.acquire(blocking, timeout)
        except BaseException:
            t = monotonic_ns()
            rec.leave_at(t, region)
            rec.back(t)
            raise
        ta = monotonic_ns()
        tl = monotonic_ns()
        if ok:
            self._acquired(rec, ta)
        rec.leave_at(tl, region)
        rec.back(ta)
        return ok

    def _acquired(self, rec: tb.Buffer, t: int) -> None:
        self._order += 1  # we hold the lock: no other thread counts now
        rec.lock_record_at(t, tb.THREAD_ACQUIRE_LOCK, self._id, self._order)

    def release(self, *_exc: Any) -> None:  # also __exit__: no frame of its own
        t = monotonic_ns()
        tr = monotonic_ns()
        rec, region = self._rec.current(), self._rr
        rec.enter_at(t, region)
        try:
            if self._lock.locked():  # else the release below raises RuntimeError
                rec.lock_record_at(tr, tb.THREAD_RELEASE_LOCK, self._id, self._order)
            rec.back(t)
            self._lock.release()
        finally:
            tl = monotonic_ns()
            rec.leave_at(tl, region)
            rec.back(tl)

    # ``with lock:`` calls the wrappers themselves: a ``def __enter__`` calling
    # ``self.acquire()`` would put one more Python frame before the first stamp and
    # after the last hand-back, a cost no bracket sees (docs/calibration.md,
    # "Wrapper residue")
    __enter__ = acquire
    __exit__ = release

    def locked(self) -> bool:
        return self._lock.locked()

    def __getattr__(self, name: str) -> Any:  # _at_fork_reinit, ...
        return getattr(self._lock, name)

    def __repr__(self) -> str:
        return f"<traced {self._lock!r} id={self._id}>"


class TracedRLock(TracedLock):
    """A ``threading.RLock``; only the outermost acquire/release are lock records."""

    __slots__ = ("_depth",)
    _names = ("threading.RLock.acquire", "threading.RLock.release")

    def __init__(self, lock: Any, lock_id: int, recorder: tb.Recorder) -> None:
        super().__init__(lock, lock_id, recorder)
        self._depth = 0

    def _acquired(self, rec: tb.Buffer, t: int) -> None:
        self._depth += 1
        if self._depth == 1:
            super()._acquired(rec, t)

    def release(self, *_exc: Any) -> None:  # also __exit__
        t = monotonic_ns()
        tr = monotonic_ns()
        rec, region = self._rec.current(), self._rr
        rec.enter_at(t, region)
        try:
            if self._lock._is_owned():  # else the release below raises RuntimeError
                self._depth -= 1
                if self._depth == 0:
                    rec.lock_record_at(tr, tb.THREAD_RELEASE_LOCK, self._id, self._order)
            rec.back(t)
            self._lock.release()
        finally:
            tl = monotonic_ns()
            rec.leave_at(tl, region)
            rec.back(tl)

    __exit__ = release

    # the protocol threading.Condition uses with an RLock
    def _is_owned(self) -> bool:
        return self._lock._is_owned()

    def _release_save(self) -> Any:
        self._rec.current().lock_record(tb.THREAD_RELEASE_LOCK, self._id, self._order)
        depth, self._depth = self._depth, 0
        return self._lock._release_save(), depth

    def _acquire_restore(self, saved: Any) -> None:
        state, depth = saved
        self._lock._acquire_restore(state)
        self._depth = depth
        self._order += 1
        self._rec.current().lock_record(tb.THREAD_ACQUIRE_LOCK, self._id, self._order)


def _from_threading() -> bool:
    """Is the lock being made by the threading module itself (the caller of the
    factory that called us)?"""
    return sys._getframe(2).f_globals is _THREADING


def _lock() -> Any:
    """``threading.Lock()`` while tracing."""
    if _recorder is None or _from_threading():
        return _allocate_lock()
    return TracedLock(_allocate_lock(), _recorder.new_lock(), _recorder)


def _rlock(*args: Any, **kwargs: Any) -> Any:
    """``threading.RLock()`` while tracing."""
    inner = _orig["RLock"](*args, **kwargs)
    if _recorder is None or _from_threading():
        return inner
    return TracedRLock(inner, _recorder.new_lock(), _recorder)


def _start(self: threading.Thread) -> None:
    if _recorder is None or "_compensate_seq" in self.__dict__:
        return _orig["start"](self)  # a second start() raises there
    _recorder.go_threaded()  # before a second thread can record
    rec = _recorder.current()
    region = _R["threading.Thread.start"]
    rec.enter(region)
    try:
        seq = self._compensate_seq = _recorder.next_sequence()
        rec.thread_record(tb.THREAD_CREATE, seq)
        _orig["start"](self)
    finally:
        rec.leave(region)


def _start_new_thread(function: Any, args: Any, *kwargs: Any) -> Any:
    """``_thread.start_new_thread`` while tracing: the new thread is an orphan
    (no Create/Begin records), but the decorator must look it up."""
    if _recorder is not None:
        _recorder.go_threaded()
    return _orig["start_new_thread"](function, args, *kwargs)


def _bootstrap_inner(self: threading.Thread) -> None:
    recorder, seq = _recorder, self.__dict__.get("_compensate_seq")
    if recorder is None or seq is None:
        return _orig["_bootstrap_inner"](self)
    buf = recorder.thread_begins(seq)
    try:
        _orig["_bootstrap_inner"](self)
    finally:
        recorder.thread_ends(buf)


def _join(self: threading.Thread, timeout: float | None = None) -> None:
    if _recorder is None:
        return _orig["join"](self, timeout)
    rec = _recorder.current()
    region = _R["threading.Thread.join"]
    rec.enter(region)
    try:
        _orig["join"](self, timeout)
        seq = self.__dict__.get("_compensate_seq")
        # setdefault is atomic: only the first join that sees the end records
        token = object()
        if (seq is not None and not self.is_alive()
                and self.__dict__.setdefault("_compensate_waited", token) is token):
            rec.thread_record(tb.THREAD_WAIT, seq)
    finally:
        rec.leave(region)


def install(recorder: tb.Recorder) -> None:
    """Record the program's threads and locks into ``recorder``."""
    global _recorder
    if not hasattr(_Thread, "_bootstrap_inner"):
        raise RuntimeError("this Python's threading.Thread has no _bootstrap_inner; "
                           "the tracer cannot record threads here")
    for name, role in _REGIONS:
        _R[name] = recorder.region_id((name, name, "", 0, "pthread", role))
    if not _orig:
        _orig.update(start=_Thread.start, join=_Thread.join,
                     _bootstrap_inner=_Thread._bootstrap_inner, Lock=threading.Lock,
                     RLock=threading.RLock, start_new_thread=_thread.start_new_thread)
    _recorder = recorder
    if threading.active_count() > 1 or _thread._count() > 0:
        recorder.go_threaded()  # threads already run: no single-threaded fast path
    _Thread.start = _start
    _Thread.join = _join
    _Thread._bootstrap_inner = _bootstrap_inner
    threading.Lock = _lock
    threading.RLock = _rlock
    _thread.start_new_thread = _start_new_thread


def uninstall() -> None:
    """Restore the ``threading`` module. Locks made meanwhile stay traced objects
    and keep recording into their recorder (harmless once it has been written)."""
    global _recorder
    if not _orig:
        return
    _Thread.start = _orig["start"]
    _Thread.join = _orig["join"]
    _Thread._bootstrap_inner = _orig["_bootstrap_inner"]
    threading.Lock = _orig["Lock"]
    threading.RLock = _orig["RLock"]
    _thread.start_new_thread = _orig["start_new_thread"]
    _recorder = None


def wait_for_threads() -> None:
    """What the interpreter does when ``__main__`` ends: run the threading
    module's exit hooks (``concurrent.futures`` shuts its workers down there) and
    wait for the non-daemon threads, so that the program ends, as without the
    tracer, when its last non-daemon thread has ended. Joins that the exit hooks
    make are recorded like any join; the final wait itself is no join call and is
    not recorded."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None and threading.current_thread() is threading.main_thread():
        shutdown()
        return
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            _orig.get("join", _Thread.join)(t)
