"""Which tracer overhead each record is charged (docs/design.md §2 and R1), once.

R1 removes, from the gap after each record, the time the tracer spent writing it.
How much that is depends on the record and its location:

* by default the platform's overhead of the record's kind; where the platform has
  an in-situ table for the location (the trace's own measurements), that table's,
  and each record's own measured cost (the OTF2 attribute ``COMPENSATE::OVERHEAD``)
  where it has one (:meth:`compensate.platform.Platform.location_overheads`);
* on an accelerator stream the platform's ``device_overhead`` instead (device
  activity is not dilated by host tracing, R9; default 0);
* on a METRIC location nothing (its samples are not a program timeline: they are
  mapped through their process's times afterwards, :mod:`compensate.engine.metrics`);
* a BufferFlush also its whole duration (the program stood still, R6).

:func:`record_overheads` is that rule for the engine's graph (R1's gaps), the
network fit (when a record's writing ended) and the stream's context (the overhead
a segment's last timestamp group leaves to the next gap); :func:`written_overheads`
is the first point alone, the cost of writing each record as measured or stated,
which the rules of dependent records read for the sender's side of a transfer.
"""

from __future__ import annotations

import numpy as np

from compensate.model import BUFFER_FLUSH, Definitions, Events
from compensate.platform import Platform


def written_overheads(platform: Platform, defs: Definitions, loc: int, events: Events,
                      start: int = 0) -> np.ndarray:
    """Ticks each record of location ``loc`` from record ``start`` on cost the tracer
    to write, by the platform (its kind, or the location's in-situ table and the
    record's own measured cost)."""
    return platform.location_overheads(loc, events.kind[start:], events.region[start:],
                                       events.overhead[start:]) \
        * float(defs.timer_resolution)


def record_overheads(platform: Platform, defs: Definitions, loc: int, events: Events,
                     start: int = 0, *, flushes: bool = True,
                     written: np.ndarray | None = None) -> np.ndarray:
    """Ticks of overhead R1 charges each record of location ``loc`` from record
    ``start`` on (module docstring). ``flushes``: include each BufferFlush's
    duration (a caller that takes a flush's stop time instead leaves it out).
    ``written``: these records' :func:`written_overheads`, if already at hand (not
    modified)."""
    o = written_overheads(platform, defs, loc, events, start) if written is None \
        else written.copy()
    info = defs.locations.get(loc)
    if info is not None and info.is_metric:
        o[:] = 0.0
    if info is not None and info.is_device:
        o[:] = platform.device_overhead * float(defs.timer_resolution)
    if flushes:
        kind = events.kind[start:]
        flush = np.flatnonzero(kind == BUFFER_FLUSH)
        if flush.size:
            o[flush] += (events.size[start:][flush] - events.time[start:][flush]) \
                .astype(np.float64)
    return o
