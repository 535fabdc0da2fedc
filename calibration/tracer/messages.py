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


#: [whether this process prints the tracer's warnings as they happen]: rank 0 of
#: the job does; the other ranks keep theirs for the end (:func:`say_others`), so
#: that a job prints each warning once, not once per rank
_FIRST: list[bool] = [True]
#: The warnings this process gave, in order (printed or kept)
_GIVEN: dict[str, None] = {}


def set_first_rank(first: bool) -> None:
    """Whether this process is the job's rank 0 (:data:`_FIRST`)."""
    _FIRST[0] = first


def warn(message: str) -> None:
    """A warning of the tracer's, once per process: printed now on the job's rank 0,
    kept on the others for :func:`say_others`."""
    if message in _GIVEN:
        return
    _GIVEN[message] = None
    if _FIRST[0]:
        say(message)


def given() -> list[str]:
    """The warnings this process gave (:func:`warn`), in order."""
    return list(_GIVEN)


def others(per_rank: list[list[str]]) -> list[str]:
    """The lines rank 0 adds at the end for the warnings only other ranks gave
    (``per_rank[r]``: rank r's :func:`given`): each once, naming its ranks."""
    printed = set(per_rank[0]) if per_rank else set()
    ranks: dict[str, list[int]] = {}
    for r, messages in enumerate(per_rank[1:], 1):
        for m in messages:
            if m not in printed:
                ranks.setdefault(m, []).append(r)
    return [f"{m} (rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))})"
            for m, rs in ranks.items()]


def say_others(per_rank: list[list[str]]) -> None:
    """Print :func:`others` (rank 0, after the program)."""
    for line in others(per_rank):
        say(line)
