"""The span of timestamps the engine keeps exact, and the refusal of a trace beyond it.

The engine computes in float64 ticks relative to an origin ``t0`` (the earliest
measured timestamp: of the trace, of the first streamed segment, of all ranks),
never on absolute timestamps: OTF2 timestamps are uint64 and a trace may start
anywhere up to 2^63 - 1 ticks. A float64 holds every integer up to 2^53 exactly,
and every half tick up to 2^52; R1's running sums subtract overheads that are
fractions of a tick and round the result to an integer at the end, so the engine
needs the half ticks: :data:`MAX_SPAN` is 2^52 ticks (about 52 days at a 1 GHz
timer, 4.5e6 s at 1 ns resolution). A record more than that after ``t0`` (a
BufferFlush's stop time included) cannot be compensated exactly, and the trace is
refused at that record (docs/messages.md) rather than rounded: above 2^53 a
1,000-tick gap can collapse to 0 and orders the measured run had can be lost.

Every fraction of a tick the engine takes from the platform (a record's overhead
and its part before the stamp, a copy or network time, a cold call's charge) is
put on a grid of :data:`GRID` steps a tick first (:func:`on_grid`): sums of such
values are exact below 2^53 / GRID ticks (about 39 hours at a 1 GHz timer), so
they do not depend on the order they are summed in. A streamed segment sums
from the time of its context's last record where the whole run sums from an
earlier record; without the grid the two could fall on either side of a half
tick and round to neighbouring ticks.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from compensate.model import BUFFER_FLUSH, Events, TraceError

#: ticks after t0 that the engine's float64 arithmetic keeps exact to half a tick
MAX_SPAN = 2 ** 52

#: steps a tick of the grid fractions of a tick are put on (a power of two)
GRID = 64


def on_grid(ticks):
    """``ticks`` (a float or an array) rounded to the nearest multiple of 1/GRID of a
    tick (module docstring): at most 1/128 of a tick off."""
    return np.round(np.asarray(ticks, dtype=np.float64) * GRID) / GRID if np.ndim(ticks) \
        else round(float(ticks) * GRID) / GRID


def check_span(events: Mapping[int, Events], t0: int, resolution: float, source: str = "",
               first: Mapping[int, int] | None = None) -> None:
    """Raise TraceError at the earliest record of ``events`` whose timestamp (or
    BufferFlush stop time) lies more than :data:`MAX_SPAN` ticks from ``t0``.
    ``first[loc]``: the number of the location's records before ``events[loc]``
    (a streamed segment's records are numbered as in the whole trace)."""
    worst: tuple[int, int, int, int] | None = None  # (time, location, index, tick)
    for loc, ev in events.items():
        if not len(ev):
            continue
        stop = np.where(ev.kind == BUFFER_FLUSH, np.maximum(ev.size, ev.time), ev.time)
        bad = (ev.time - t0 > MAX_SPAN) | (ev.time < t0) | (stop - t0 > MAX_SPAN)
        if not bad.any():
            continue
        i = int(np.flatnonzero(bad)[0])
        key = (int(ev.time[i]), loc, i, int(stop[i]))
        if worst is None or key[:2] < worst[:2]:
            worst = key
    if worst is None:
        return
    time, loc, i, tick = worst
    raise TraceError(span_message(tick if tick - t0 > MAX_SPAN else time, t0, resolution),
                     source=source, location=loc,
                     index=i + (first.get(loc, 0) if first else 0))


def span_message(time: int, t0: int, resolution: float) -> str:
    """Why a timestamp ``time`` is refused: its span from ``t0`` in ticks and seconds."""
    span = time - t0
    res = float(resolution)
    return (f"timestamp {time} lies {span:,} ticks ({span / res:.6g} s at "
            f"{res:.6g} ticks/s) from the trace's first timestamp {t0}: more than "
            f"2^52 = {MAX_SPAN:,} ticks ({MAX_SPAN / res:.6g} s), the span the engine's "
            f"float64 ticks keep exact (docs/design.md); refusing the trace rather than "
            f"rounding it")
