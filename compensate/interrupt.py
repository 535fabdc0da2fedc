"""SIGINT and SIGTERM for the commands: exit 130 / 143, one line, nothing written.

Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to
be, including inside a Python callback that a C library (the ``otf2`` bindings'
reader and writer callbacks, our own OTF2 error and memory callbacks) calls:
there the exception is printed with a traceback and swallowed, and the library
either fails with a misleading error (``INTERRUPTED_BY_CALLBACK``) or goes on
without the record the callback was building. So the commands install
:func:`handling`, whose handler

* **records** the first signal, always, before anything else, and
* **raises** :class:`Interrupted` (a KeyboardInterrupt) only where that is safe:
  not inside a :func:`deferred` region (the calls into the OTF2 library, during
  which it only records, and :func:`deferred` raises when the region ends) and not
  inside a :func:`shielded` one (cleanup, which must not be cut short; the
  signal is left to the next :func:`check`). A second signal is only recorded,
  so that the cleanup of the first one runs to the end.

Whatever C code or a stray ``except`` swallowed, the record stays: :func:`check`
(at every chunk and phase boundary, :func:`checkpoint`), :func:`commit_point`
(right before an output is moved into place, see
:class:`compensate.formats.paths.AtomicOutput`) and :func:`run` (before a command
returns its status) look at it. So a command never returns 0 after an interrupt
and never moves an output into place after one. :func:`commit_point` is the
point of no return: once it has passed, the output is complete and goes into
place, and SIGINT and SIGTERM are ignored (``SIG_IGN``) from then on: a signal
arriving after it (while the summary line is printed, or while the interpreter
shuts down, for a command run as the whole process: ``run(process=True)``) comes
after the work is done and does not change the exit status.

Outside :func:`handling` (the Python API, tests calling functions) nothing is
installed and every function here is a no-op, so library code may call them
freely.

Test hook: with ``COMPENSATE_TEST_INTERRUPT=SIG:NAME:N[:DELAY]`` set when
:func:`handling` starts (``SIG`` ``INT`` or ``TERM``), the ``N``-th
:func:`checkpoint` or :func:`deferred` region named ``NAME`` sends the signal to
the process, at once or ``DELAY`` seconds later from a timer thread (so that it
lands in the middle of whatever the main thread does next, e.g. inside the OTF2
library). ``tests/cli/test_interrupt.py`` interrupts runs at many points with
it; unset, it costs one comparison per checkpoint.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: The signals the commands handle.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: The environment variable of the test hook (see the module docstring).
TEST_HOOK = "COMPENSATE_TEST_INTERRUPT"


class Interrupted(KeyboardInterrupt):
    """Raised after SIGINT or SIGTERM; ``signum`` is the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


_active = False               # handlers installed (inside handling())
_received: int | None = None  # the first signal, once one has come
_defer = 0                    # depth of deferred()/shielded() regions
_committed = False            # commit_point() has passed: later signals are ignored
_hook: list | None = None     # [signal, name, n, delay] of the test hook, or None
_running = False              # inside run()
_undoable = False             # run() has a cleanup that undoes every output: no
#                               point of no return before the command ends
_passed = False               # an output passed commit_point() in this (or the last) run
_process = False              # run(process=True): the command is the whole process


def signal_name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``, ..."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_status(signum: int) -> int:
    """The shell's status for a process ended by ``signum``: 128 + its number."""
    return 128 + int(signum)


def _handler(signum: int, _frame: object) -> None:
    global _received
    if _committed or _received is not None:
        return
    _received = signum
    if _defer == 0:
        raise Interrupted(signum)


@contextlib.contextmanager
def handling() -> Generator[None, None, None]:
    """Install the handlers for SIGINT and SIGTERM for the duration (a command's
    run) and restore the previous ones afterwards. A no-op outside the main
    thread (Python delivers signals only there)."""
    global _active, _received, _defer, _committed, _hook, _undoable, _passed
    if _active or threading.current_thread() is not threading.main_thread():
        yield  # nested (the outer one stays in charge), or signals cannot come here
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    _received, _defer, _committed, _hook, _passed = None, 0, False, _parse_hook(), False
    _active = True
    try:
        for s in SIGNALS:
            signal.signal(s, _handler)
        yield
    finally:
        for s, h in previous.items():
            # a command that is the whole process and has moved its output into
            # place ignores the signals to its end (the interpreter's shutdown too)
            signal.signal(s, signal.SIG_IGN if _process and _passed else h)
        _active, _hook, _undoable = False, None, False
        _received, _defer, _committed = None, 0, False


def received() -> int | None:
    """The signal received so far in this run (None: none, or none before the
    point of no return)."""
    return _received


def check() -> None:
    """Raise :class:`Interrupted` if a signal has been received (and swallowed)
    during the current :func:`handling` (outside it: a no-op, so a signal of an
    earlier, finished run never surfaces in later library calls)."""
    if _active and _received is not None and not _committed:
        raise Interrupted(_received)


def checkpoint(name: str) -> None:
    """A phase or chunk boundary: the test hook's trigger point, then :func:`check`."""
    if _hook is not None:
        _trigger(name)
    check()


def checkpoints(items: Iterable[T], name: str) -> Iterator[T]:
    """``items`` with a :func:`checkpoint` before each next item (e.g. each chunk)."""
    it = iter(items)
    while True:
        checkpoint(name)
        try:
            item = next(it)
        except StopIteration:
            return
        yield item


@contextlib.contextmanager
def deferred(name: str | None = None) -> Generator[None, None, None]:
    """A region where a signal is only recorded (calls into C code that calls back
    into Python); :class:`Interrupted` is raised when the outermost region ends
    normally. ``name`` is a test-hook trigger point."""
    global _defer
    _defer += 1
    try:
        if _hook is not None and name is not None:
            _trigger(name)
        yield
    finally:
        _defer -= 1
    if _defer == 0:
        check()


@contextlib.contextmanager
def shielded() -> Generator[None, None, None]:
    """A region a signal must not cut short (cleanup, ``__del__``): the signal is
    only recorded, and left to the next :func:`check`."""
    global _defer
    _defer += 1
    try:
        yield
    finally:
        _defer -= 1


def commit_point() -> None:
    """Right before an output is moved into place: raise if a signal came (nothing
    has been moved yet); otherwise pass the point of no return, after which
    SIGINT and SIGTERM are ignored (``SIG_IGN``: see the module docstring). A
    no-op outside :func:`handling`."""
    global _committed, _passed
    if _hook is not None:
        _trigger("commit")
    check()
    if _active and not _undoable:
        _committed = _passed = True
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                signal.signal(s, signal.SIG_IGN)


def committed() -> bool:
    """Whether an output of the current (or the last finished) :func:`handling`
    passed :func:`commit_point`: it is in place, or about to be, whatever fails
    later."""
    return _passed


def run(prog: str, body: Callable[[], int], cleanup: Callable[[], None] | None = None,
        *, process: bool = False) -> int:
    """Run a command's ``body`` under :func:`handling` and return its exit status;
    after SIGINT/SIGTERM (even one that ``body`` swallowed, and whatever status it
    returned) ``cleanup()`` runs shielded (a command with a ``cleanup`` that undoes all
    its outputs, e.g. several written one after the other, has no point of no return:
    :func:`commit_point` only checks), one line ``PROG: interrupted by SIGINT``
    goes to stderr and the status is 130 / 143. ``body`` must not print anything for
    a KeyboardInterrupt itself (this does). Re-entrant: a nested call just runs
    ``body`` and leaves the interrupt to the outermost one. ``process``: the
    command is the whole process (a console script, ``python -m``), so that once
    an output is in place SIGINT and SIGTERM stay ignored until the process
    exits, through the interpreter's shutdown, instead of the previous handlers
    coming back (which would end a finished run by the signal: a shell would
    read 130 / 143, "nothing written", with the output in place)."""
    global _running, _process
    if _running:  # nested (a command calling another's main): the outer run reports
        return body()
    _running, _process = True, process
    try:
        return _run(prog, body, cleanup)
    finally:
        _running, _process = False, False


def _run(prog: str, body: Callable[[], int], cleanup: Callable[[], None] | None) -> int:
    global _committed, _undoable
    with handling():
        _undoable = cleanup is not None
        code: int | None = None
        fallback = signal.SIGINT
        try:
            try:
                code = body()
            except KeyboardInterrupt as exc:
                code, fallback = None, getattr(exc, "signum", signal.SIGINT)
            except BaseException:
                if _received is None:
                    raise
                code = None  # an error the interrupt caused (e.g. inside an import)
            if _received is None:
                _committed = True  # done: a signal from now on comes after the command
        except KeyboardInterrupt as exc:  # the first signal, just after body returned
            code, fallback = None, getattr(exc, "signum", signal.SIGINT)
        # from here on no signal raises: one has been recorded, or the command is done
        signum = _received
        if signum is None and code is None:
            signum = fallback  # a KeyboardInterrupt raised outside our handler
        if signum is None:
            return int(code)
        if cleanup is not None:
            with shielded(), contextlib.suppress(Exception):
                cleanup()
        print(f"{prog}: interrupted by {signal_name(signum)}; nothing written",
              file=sys.stderr)
        sys.stderr.flush()
        return exit_status(signum)


def launch(prog: str, module: str, argv: list[str] | None = None) -> int:
    """The console-script entry of a command whose imports (numpy, scipy, otf2)
    take a second: import ``module`` under :func:`run`, so that a signal meanwhile
    is one line and 130 / 143 like any other, then return ``module.main(argv)``
    (which runs itself under :func:`run`)."""
    loaded: list = []

    def load() -> int:
        with deferred("import"):
            loaded.append(importlib.import_module(module))
        return 0

    code = run(prog, load)
    return loaded[0].main(argv) if loaded and code == 0 else code


# -- test hook -----------------------------------------------------------------------

def _parse_hook() -> list | None:
    spec = os.environ.get(TEST_HOOK)
    if not spec:
        return None
    parts = spec.split(":")
    sig = getattr(signal, "SIG" + parts[0].upper().removeprefix("SIG"))
    delay = float(parts[3]) if len(parts) > 3 else 0.0
    return [sig, parts[1], int(parts[2]) if len(parts) > 2 else 1, delay]


def _trigger(name: str) -> None:
    hook = _hook
    if hook is None or hook[1] != name:
        return
    hook[2] -= 1
    if hook[2] != 0:
        return
    sig, delay = hook[0], hook[3]
    if delay > 0:
        t = threading.Timer(delay, os.kill, (os.getpid(), sig))
        t.daemon = True
        t.start()
    else:
        # to this thread, and the handler has run when it returns (os.kill may be
        # delivered to another thread, e.g. a BLAS worker, and handled later)
        signal.raise_signal(sig)
