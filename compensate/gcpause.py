"""Pausing Python's cyclic garbage collector around allocation-heavy phases.

Reading a trace keeps one or more Python objects per record alive (OTF2 event
objects, row tuples) and the engine builds some 10^5 small acyclic objects per
10^6 records. None of them form reference cycles, but every generation-2
collection still rescans all of them: measured on a 10^6-record trace, that was
20-30 % of reading and about a third of the engine's time.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Generator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Generator[None, None, None]:
    """Disable the cyclic collector for the duration (re-enabled on exit if it was
    on; re-entrant). Reference counting still frees everything acyclic."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
