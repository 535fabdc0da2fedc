"""The traced program's view of the interpreter: as under ``python prog.py``.

:mod:`calibration.record` runs the script inside its own process, after loading
its own packages and wrapping MPI. While the script runs (:func:`enter` to
:func:`leave`), ``sys.path`` is the one ``python prog.py`` gives, a module of
the program named like the tracer's packages is the program's, and the
recursion limit leaves room for the decorator's frames while the program sets
and reads its own number; afterwards the tracer gets its own view back, with
mpi4py's standard serializer for its gathers (docs/realrun.md, "The script").
A program that ends its process with ``os._exit`` skips the tracer's
finalization, so no trace can be written: it is told so on stderr, and a
status 0 becomes :data:`OS_EXIT_STATUS`.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from calibration.tracer.messages import say

#: Python frames a traced call takes per frame of the program: the decorator's
#: wrapper and the function; one call in ``--layer-period`` of each function also
#: the measuring layer (:func:`frames_per_call`).
FRAMES_PER_CALL = 2
#: Frames for the tracer's own code below and inside the program's calls.
FRAME_MARGIN = 100
_INT_MAX = 2**31 - 1
#: Exit status of a process whose program called ``os._exit(0)``: no trace is
#: written, a failure of the tracer (status 1, as for outputs that cannot be
#: written: :mod:`calibration.record`); a non-zero status is kept.
OS_EXIT_STATUS = 1
#: The tracer's top-level packages, which a program's own module may shadow.
PACKAGES = ("calibration", "compensate")


def _depth() -> int:
    """Python frames on the current thread's stack."""
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def frames_per_call(layer_period: int) -> float:
    """Frames per frame of the program in a chain of traced calls: two, and one
    more in every ``layer_period``-th call of each function (0: never)."""
    return FRAMES_PER_CALL + (1 / layer_period if layer_period > 0 else 0)


def _scale_recursion_limit(layer_period: int) -> tuple[Any, Any, int]:
    """Give the program its own recursion limit: a chain of traced calls takes
    :func:`frames_per_call` frames per frame of the program, so the interpreter's
    limit becomes that many times the program's, plus the tracer's frames, and
    ``sys.setrecursionlimit`` and ``sys.getrecursionlimit`` set and read the
    program's number (a program that recurses 900 deep under the default 1000
    does so traced as well, and one that catches its RecursionError reaches about
    the depth it reaches untraced: 3x, as before, let it go 1.5x as deep).
    Returns what :func:`_restore_recursion_limit` puts back."""
    per_call = frames_per_call(layer_period)
    real_set, real_get = sys.setrecursionlimit, sys.getrecursionlimit
    saved = real_get()
    margin = _depth() + FRAME_MARGIN
    program = [saved]

    def setrecursionlimit(limit: int, /) -> None:
        """sys.setrecursionlimit as the program calls it: scaled for the tracer's
        frames; a limit Python refuses raises as it would untraced."""
        if not isinstance(limit, int) or not 1 <= limit <= _INT_MAX:
            real_set(limit)  # raises TypeError, ValueError or OverflowError
        real_set(min(math.ceil(per_call * limit) + margin, _INT_MAX))
        program[0] = limit

    def getrecursionlimit() -> int:
        """sys.getrecursionlimit as the program calls it: its own number."""
        return program[0]

    setrecursionlimit.__doc__ = real_set.__doc__
    getrecursionlimit.__doc__ = real_get.__doc__
    setrecursionlimit(saved)
    sys.setrecursionlimit, sys.getrecursionlimit = setrecursionlimit, getrecursionlimit
    return real_set, real_get, saved


def _restore_recursion_limit(saved: tuple[Any, Any, int]) -> None:
    """Undo :func:`_scale_recursion_limit`: the real functions and the limit."""
    real_set, real_get, limit = saved
    sys.setrecursionlimit, sys.getrecursionlimit = real_set, real_get
    real_set(limit)


def _program_path(script: str) -> list[str]:
    """sys.path as ``python prog.py`` gives it: the script's directory first, and
    not the working directory that ``python -m calibration.record`` put there
    (when :mod:`calibration.record` runs as ``__main__``, sys.path[0] is that entry)."""
    rest = list(sys.path)
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if (spec is not None and spec.name == "calibration.record" and not sys.flags.safe_path
            and rest and rest[0] in ("", os.getcwd())):
        del rest[0]
    return [os.path.dirname(os.path.realpath(script)), *rest]


def _shadowed(path: list[str]) -> list[str]:
    """The tracer's packages (:data:`PACKAGES`) for which the program, on ``path``,
    would import a module of its own: untraced its ``import calibration`` finds
    that one, so traced it must too."""
    import importlib.machinery  # noqa: PLC0415 - once, before the program

    names = []
    for name in PACKAGES:
        mine = sys.modules.get(name)
        if mine is None:
            continue
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            continue
        theirs = spec.origin or "".join(spec.submodule_search_locations or ())
        ours = getattr(mine, "__file__", None) or "".join(getattr(mine, "__path__", ()))
        if os.path.realpath(theirs) != os.path.realpath(ours):
            names.append(name)
    return names


def _hide_modules(names: list[str]) -> dict[str, Any]:
    """Take the tracer's modules ``names`` and their submodules out of sys.modules
    while the program runs, so that its own modules of those names are imported.
    The tracer's code holds its modules by reference and imports nothing while the
    program runs; returns the modules for :func:`_unhide_modules`."""
    hidden = {}
    for key in list(sys.modules):
        if key.partition(".")[0] in names:
            hidden[key] = sys.modules.pop(key)
    return hidden


def _unhide_modules(hidden: dict[str, Any]) -> None:
    """Put the tracer's modules back, dropping the program's of the same names."""
    names = {key.partition(".")[0] for key in hidden}
    for key in list(sys.modules):
        if key.partition(".")[0] in names:
            del sys.modules[key]
    sys.modules.update(hidden)


def _guard_exit() -> Any:
    """Make ``os._exit`` in the program's process say that no trace will be written
    (it ends the process without the tracer's finalization) before it exits, with
    the program's status, or :data:`OS_EXIT_STATUS` for a status 0 (the trace was
    lost: never exit 0 after a failure); a forked child's ``os._exit``
    (multiprocessing's way to end one) stays silent and keeps its status.
    Returns the real function for :func:`leave`."""
    real, pid = os._exit, os.getpid()

    def _exit(status: int, /) -> None:
        if os.getpid() == pid:
            failed = isinstance(status, int) and status == 0  # never 0 after a failure
            try:
                say(f"calibration.record: error: the program called os._exit({status}), "
                    "which ends the process without the tracer's finalization: no trace "
                    "is written (sys.exit() or returning lets the tracer write it)"
                    + (f"; exiting with status {OS_EXIT_STATUS}" if failed else ""))
            except Exception:  # noqa: BLE001, S110 - exiting regardless
                pass
            if failed:
                status = OS_EXIT_STATUS
        real(status)

    _exit.__doc__ = real.__doc__
    os._exit = _exit
    return real


def enter(script: str, MPI: Any, layer_period: int = 32) -> dict[str, Any]:
    """Make the interpreter look to the program as under ``python prog.py``: its
    sys.path, its own modules named like the tracer's packages, its recursion
    limit; ``os._exit`` warns that it loses the trace. Saves what the tracer needs
    back after the program, including mpi4py's serializer settings (the program
    may install its own and leave it)."""
    saved_path = list(sys.path)
    sys.path[:] = _program_path(script)
    hidden = _hide_modules(_shadowed(sys.path))
    return {"path": saved_path, "hidden": hidden, "recursion": _scale_recursion_limit(layer_period),
            "pickle": (MPI.pickle.PROTOCOL, MPI.pickle.THRESHOLD), "exit": _guard_exit()}


def leave(saved: dict[str, Any], MPI: Any) -> None:
    """Undo :func:`enter` once the program and its threads are done,
    before the tracer communicates: its gathers go through ``MPI.pickle``, which
    must be the standard pickle again whatever the program configured."""
    _restore_recursion_limit(saved["recursion"])
    os._exit = saved["exit"]
    _unhide_modules(saved["hidden"])
    sys.path[:] = saved["path"]
    protocol, threshold = saved["pickle"]
    MPI.pickle.__init__(None, None, protocol, threshold)
