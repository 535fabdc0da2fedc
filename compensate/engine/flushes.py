"""BufferFlush records inside a communication call (R6 extended, docs/design.md §3).

R1 removes a flush's duration from the gap after it (R6), so every approximated
time is free of it. The dependency rules also read *measured* intervals that they
treat as observed: whether a receive call was already waiting when its send call
ended (R2's m.1/m.2 decision), how long a collective synchronised after its last
member arrived (R3), when a collective's root or member sent its implied message
(R4, R5). A flush inside the call would leak into those intervals as waiting.

The measurement model (§2): a flush from ``time`` to ``stop_time`` on a location
delays everything that location does after ``time``. So inside a call it moves the
location's *readiness* to the flush's end: a receive posted in a call that then
flushed is ready when the flush ended; a collective member that flushed after its
MpiCollectiveBegin joins when the flush ended. If the partner was later than that
(the flush lay before the message's or the last member's arrival), the wait
absorbed the flush and nothing changes; if it was earlier, the flush delayed the
completion, and the rules see that now through the later readiness. A flush after
a send record inside the send call does not delay the message, only the call's
end: the call's measured span loses the flush's duration.

These functions give the rules those corrected measured times; with no flush in a
trace they are never called (:attr:`FlushIndex.any` is false) and outputs are
unchanged.
"""

from __future__ import annotations

import numpy as np

from compensate.model import BUFFER_FLUSH


class FlushIndex:
    """Per global record of a :class:`compensate.engine.graph.Graph`: the latest
    BufferFlush at or before it on its location, and the flush time so far."""

    def __init__(self, kind: np.ndarray, size: np.ndarray, tm: np.ndarray, rovh: np.ndarray,
                 off: np.ndarray, lengths: np.ndarray, t0: int) -> None:
        is_flush = kind == BUFFER_FLUSH
        self.any = bool(is_flush.any())
        if not self.any:
            return
        n = len(kind)
        idx = np.where(is_flush, np.arange(n), -1)
        last = np.maximum.accumulate(idx) if n else idx
        start = np.repeat(off, lengths)  # first record of each record's location
        last[last < start] = -1
        #: global index of the latest flush at or before each record (-1: none)
        self.last = last
        stop = (size - t0).astype(np.float64)
        #: measured end of each flush (ticks from t0; meaningful at flushes only)
        self.stop = np.where(is_flush, stop, tm)
        #: measured end of each flush plus its own overhead: when its location went on
        self.free = self.stop + rovh
        dur = np.where(is_flush, stop - tm, 0.0)
        #: flush time on the location up to and including each record (ticks)
        self.cum = np.cumsum(dur)
        self.tm = tm

    def last_inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Global index of the latest flush strictly between records ``lo`` and ``hi``
        (same location, ``lo < hi``) that ended by ``hi``'s time, -1 where none. A
        flush that ended after ``hi`` was stamped cannot have delayed ``hi`` (the
        tracer took ``hi``'s timestamp first and flushed while writing it)."""
        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        cand = self.last[np.maximum(hi - 1, 0)]
        ok = (hi - 1 > lo) & (cand > lo)
        ok &= self.stop[np.where(ok, cand, 0)] <= self.tm[hi]
        return np.where(ok, cand, -1)

    def ready_after(self, lo: np.ndarray, hi: np.ndarray, t: np.ndarray,
                    overhead: bool = False) -> np.ndarray:
        """``t`` (a measured time in the call opened at ``lo``), moved to the end of
        the latest flush strictly between ``lo`` and ``hi`` if that is later: when
        the location was ready for the record ``hi`` (``overhead``: plus the flush's
        own overhead, where ``t`` includes the opening record's)."""
        f = self.last_inside(lo, hi)
        has = f >= 0
        fi = np.where(has, f, 0)
        end = (self.free if overhead else self.stop)[fi]
        return np.where(has, np.maximum(t, end), t)

    def inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Flush time (ticks) strictly between records ``lo`` and ``hi`` (same
        location, ``lo < hi``)."""
        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        return np.where(hi - 1 > lo, self.cum[np.maximum(hi - 1, 0)] - self.cum[lo], 0.0)
