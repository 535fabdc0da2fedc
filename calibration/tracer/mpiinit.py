"""The program's own MPI initialization and finalization under the tracer.

The tracer initializes MPI before the program runs (it needs MPI for its own
communicator and clock offsets) and finalizes it after the trace has been
gathered. A program that calls ``MPI.Init``/``MPI.Init_thread`` itself (with
``mpi4py.rc.initialize = False``) or ``MPI.Finalize`` must still run as untraced:
its Init finds MPI initialized and does nothing, its Finalize is deferred, and
``MPI.Is_finalized`` answers as untraced. A thread level the program asks for
(``Init_thread``, ``mpi4py.rc.thread_level``) below the one MPI provides cannot be
honoured; that is said once on stderr. Installed by
:func:`calibration.tracer.mpi.install`.
"""

from __future__ import annotations

from typing import Any

import mpi4py
from mpi4py import MPI

from calibration.tracer.messages import warn


def install() -> None:
    """Replace the program's MPI.Init/Init_thread/Query_thread/Finalize/Is_finalized."""
    _finalized[0] = False
    MPI.Finalize = _deferred_finalize
    MPI.Is_finalized = _is_finalized
    _level_noted[0] = False
    _rc_level[0] = getattr(mpi4py.rc, "thread_level", None)
    MPI.Init = _init
    MPI.Init_thread = _init_thread
    MPI.Query_thread = _query_thread


#: [True once the program called MPI.Finalize()]: what it reads in MPI.Is_finalized.
_finalized = [False]
_real_is_finalized = MPI.Is_finalized


def _deferred_finalize() -> None:
    """The program's MPI.Finalize(): postponed until the trace has been gathered
    (mpi4py finalizes MPI at exit), but from now on the program's
    ``MPI.Is_finalized()`` says True, as it would untraced."""
    _finalized[0] = True


def _is_finalized() -> bool:
    """The program's MPI.Is_finalized(): True after its MPI.Finalize() (deferred,
    so MPI itself is still up for the tracer), else MPI's own answer."""
    return _finalized[0] or _real_is_finalized()


_real_init = MPI.Init
_real_is_initialized = MPI.Is_initialized
_real_init_thread = MPI.Init_thread
_real_query_thread = MPI.Query_thread
#: MPI's thread levels by value, as the note names them
_LEVEL_NAMES = {MPI.THREAD_SINGLE: "SINGLE", MPI.THREAD_FUNNELED: "FUNNELED",
                MPI.THREAD_SERIALIZED: "SERIALIZED", MPI.THREAD_MULTIPLE: "MULTIPLE"}
#: mpi4py.rc.thread_level's values
_RC_LEVELS = {"single": MPI.THREAD_SINGLE, "funneled": MPI.THREAD_FUNNELED,
              "serialized": MPI.THREAD_SERIALIZED, "multiple": MPI.THREAD_MULTIPLE}
#: [True once the note on the thread level was written] (once per process)
_level_noted = [False]
#: [mpi4py.rc.thread_level when tracing started]: a program that changes it asks for
#: a level the tracer's initialization did not use
_rc_level: list[Any] = [None]


def _note_level(required: Any, what: str) -> None:
    """One line on stderr, once, when the program asks for a thread level below the
    one MPI provides: the tracer initialized MPI before the program ran (with
    mpi4py's default, MULTIPLE), so the program's request cannot be honoured."""
    provided = _real_query_thread()
    if _level_noted[0] or not isinstance(required, int) or required >= provided:
        return
    _level_noted[0] = True
    name = _LEVEL_NAMES.get(provided, str(provided))
    warn(f"calibration.record: note: MPI was initialized by the tracer with thread level "
        f"{name}; the program's {what} returns that level")


def note_rc_thread_level() -> None:
    """:func:`_note_level` for an ``mpi4py.rc.thread_level`` the program set (it
    takes effect when mpi4py initializes MPI, which the tracer did before): when the
    program calls MPI.Query_thread(), and after it ended (:mod:`calibration.record`)."""
    level = getattr(mpi4py.rc, "thread_level", None)
    if level != _rc_level[0] and getattr(mpi4py.rc, "initialize", True) and \
            isinstance(level, str) and level.lower() in _RC_LEVELS:
        _note_level(_RC_LEVELS[level.lower()],
                    f"mpi4py.rc.thread_level = {level!r} has no effect: MPI.Query_thread()")


def _tracer_holds_mpi() -> bool:
    """MPI is up, initialized by the tracer, and the program has not finalized it
    (after its MPI.Finalize, its Init calls MPI's and fails as it would untraced)."""
    return not _finalized[0] and _real_is_initialized()


def _init() -> None:
    """The program's MPI.Init() (``mpi4py.rc.initialize = False``): MPI is
    initialized already, by the tracer, so it does nothing, as the program's
    MPI.Finalize() is deferred (:func:`_deferred_finalize`); after that
    Finalize it fails as it would untraced."""
    if not _tracer_holds_mpi():
        _real_init()


def _init_thread(required: int = MPI.THREAD_MULTIPLE) -> int:
    """The program's MPI.Init_thread(required): as :func:`_init`, returning the
    level MPI provides (MPI.Query_thread()); a ``required`` level below it is
    noted once on stderr (:func:`_note_level`)."""
    if not _tracer_holds_mpi():
        return _real_init_thread(required)
    _note_level(required, f"MPI.Init_thread({_LEVEL_NAMES.get(required, required)})")
    return _real_query_thread()


def _query_thread() -> int:
    """The program's MPI.Query_thread(): MPI's answer, noted once if the program
    set a lower ``mpi4py.rc.thread_level`` (:func:`note_rc_thread_level`)."""
    note_rc_thread_level()
    return _real_query_thread()
