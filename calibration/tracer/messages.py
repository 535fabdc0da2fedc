"""The tracer's own messages (warnings, errors, its summary line) on the process's
stderr: a duplicate of file descriptor 2 taken before the program runs
(:func:`open_stream`, by :func:`calibration.record.main`), so that they reach
the terminal when the program closes or replaces ``sys.stderr``, and never land
in a buffer the program put there.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

#: The tracer's stderr (:func:`say`): a duplicate of the process's fd 2 taken
#: before the program runs; empty while :func:`calibration.record.main` is not running.
STREAMS: list[TextIO] = []


def open_stream() -> TextIO:
    """A stream on a duplicate of the process's stderr, so that the tracer's
    messages still reach it when the program closes or replaces ``sys.stderr``;
    ``sys.stderr`` itself where it has no file descriptor."""
    try:
        fd = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return sys.stderr
    return os.fdopen(fd, "w", encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
                     errors="backslashreplace", buffering=1)


def say(message: str, end: str = "\n") -> None:
    """Print one of the tracer's messages on its stderr (:data:`STREAMS`); a
    stderr that cannot be written loses the message rather than failing the run."""
    stream = STREAMS[-1] if STREAMS else sys.stderr
    try:
        print(message, end=end, file=stream, flush=True)
    except (AttributeError, OSError, ValueError):
        pass
