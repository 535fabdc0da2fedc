"""One line and an exit status for a command's failure (docs/messages.md).

``compensate`` and its ``report``/``export`` subcommands turn every exception into
one line on stderr: bad input or an output that cannot be written (3: a
:class:`~compensate.errors.Refusal`, i.e. a TraceError, PlatformError or
OutputError), an OS error opening something (3, with the path and the OS's
reason), anything else an internal error (1; ``COMPENSATE_DEBUG=1`` re-raises it
for the traceback). Usage errors (2)
the caller reports itself, since each command prints its own synopsis.
"""

from __future__ import annotations

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
