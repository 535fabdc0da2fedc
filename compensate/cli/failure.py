"""One line and an exit status for a command's failure (docs/messages.md).

``compensate`` and its ``report``/``export`` subcommands turn every exception into
one line on stderr: bad input or an output that cannot be written (3: a
:class:`~compensate.errors.Refusal`, i.e. a TraceError, PlatformError or
OutputError), an OS error opening something (3, with the path and the OS's
reason), anything else an internal error (1; ``COMPENSATE_DEBUG=1`` re-raises it
for the traceback). Usage errors (2)
the caller reports itself, since each command prints its own synopsis.

Once an output is in place (:func:`compensate.interrupt.committed`), no later
failure makes the status non-zero: :func:`after_commit` turns it into a warning
line that says the output is complete, and :func:`flush_stdout` makes sure that a
stdout that cannot be written (``> /dev/full``, a closed pipe) fails while the
command can still say so, not in the interpreter's shutdown ("Exception
ignored ... BrokenPipeError", status 120).
"""

from __future__ import annotations

import contextlib
import os
import sys

import compensate.interrupt as interrupt
from compensate.errors import Refusal

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_INPUT = 0, 1, 2, 3


def failure_status(prog: str, exc: BaseException) -> int:
    """Print ``exc`` as one line prefixed ``PROG:`` and return its exit status. Call it
    from the ``except`` clause that caught ``exc``: an error an interrupt caused is
    re-raised as the interrupt, and a debug run or a non-Exception re-raises ``exc``."""
    interrupt.check()
    if isinstance(exc, MemoryError):  # outside the run's own guard: the same one line
        from compensate.pipeline.memory import out_of_memory
        exc = out_of_memory(exc)
    if isinstance(exc, Refusal):  # TraceError, PlatformError, OutputError
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    if isinstance(exc, OSError):  # e.g. the input cannot be opened
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{prog}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT
    if os.environ.get("COMPENSATE_DEBUG") or not isinstance(exc, Exception):
        raise exc
    print(f"{prog}: internal error: {type(exc).__name__}: {exc} "
          f"(set COMPENSATE_DEBUG=1 for a traceback; please report it)", file=sys.stderr)
    return EXIT_INTERNAL


def silence_stdout() -> None:
    """Point file descriptor 1 at the null device, so that what is still buffered
    for a stdout that failed (and the interpreter's own flush at exit) goes
    nowhere instead of failing again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)


def say(line: str) -> None:
    """Print ``line`` on stderr; a stderr that cannot be written is left be (there
    is nowhere else to say it)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr)
        sys.stderr.flush()


def after_commit(prog: str, out: str, exc: BaseException) -> int:
    """The status of a failure after the output ``out`` was moved into place (e.g.
    printing the summary line to a stdout that is a full device or a closed
    pipe): 0, and a warning line that says the output is complete."""
    if isinstance(exc, OSError):
        reason = f"{exc.filename}: " if exc.filename else ""
        reason += f"{exc.strerror or exc}"
        if exc.filename is None:
            silence_stdout()  # (e.g. the summary line: what stays buffered goes nowhere)
    else:
        reason = str(exc) or type(exc).__name__
    say(f"{prog}: warning: after writing the output: {reason}; {out} is complete")
    return EXIT_OK


def flush_stdout(prog: str, status: int) -> int:
    """At the end of a command that is the whole process: flush stdout now, where a
    failure can still be reported, and leave nothing for the interpreter's flush
    at exit to fail on. A stdout that cannot be written after an output was put
    in place is a warning (the status stays); before, it fails a command that
    would have exited 0 (3, ``PROG: error: stdout: REASON``)."""
    import compensate.interrupt as interrupt

    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        return status
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
    silence_stdout()
    if interrupt.committed():
        say(f"{prog}: warning: stdout: {reason}; the output is complete")
        return status
    if status == EXIT_OK:
        say(f"{prog}: error: stdout: {reason}")
        return EXIT_INPUT
    return status
