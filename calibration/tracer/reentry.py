"""Records of one buffer that program code wrote from *inside* the tracer.

Every tracer path takes a timestamp first and appends its record after; Python
code can run in between: the cyclic garbage collector runs finalizers
(``__del__``, weakref callbacks, ``gc.callbacks``) at whatever allocation
triggers it, and a signal handler runs between any two calls. When that code is
a traced function of the program, its records land in the buffer before the
interrupted one (:func:`restore_order`), or between the two halves of it
(:func:`realign`). Both repairs run when the buffers are copied
(:func:`calibration.tracer.archive.snapshot`), before anything reads the
records; buffers without such records pass unchanged (docs/realrun.md, "Code
that runs inside the tracer").
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from calibration.tracer import buffer as tb


def realign(data: Any, epoch: int = tb.EPOCH) -> tuple[Any, int]:
    """Pair each record code of a buffer with its own timestamp again; returns
    the (time, code) pairs and how many values were left without a partner.

    A record is two appends, its time and then its code (one C call for the
    pair costs ~150 ns more per record on the decorator's path). A Python signal
    handler runs between any two calls, and a traced handler appends whole
    records there: the stream then reads t, [t', c', ...], c and every later
    pair is shifted by one, which wrote nonsense or failed the whole archive.
    Times and codes are told apart by value: every time is at least ``epoch``
    (the clock when the tracer was imported, :data:`tb.EPOCH`: nanoseconds since
    boot), every code (a kind and a region, lock or field index) is smaller
    unless one thread's buffer held over ``epoch / 64`` MPI or lock records (a
    billion a minute after boot). The interrupting records nest inside the
    interrupted pair, so a stack of pending times pairs each code with the latest
    unpaired time; the interrupting records come out before the interrupted one,
    with later times, which :func:`restore_order` then puts in place. A buffer whose even
    positions are all times and odd ones all codes is returned as it is (so is
    one without times from the clock: synthetic buffers in tests)."""
    values = np.frombuffer(data, dtype=np.int64) if len(data) else np.zeros(0, np.int64)
    is_time = values >= epoch
    n = len(values) - len(values) % 2
    if not is_time.any() or (is_time[0:n:2].all() and not is_time[1:n:2].any()
                             and (n == len(values) or is_time[-1])):
        return data, 0
    out, pending, lost = array("q"), [], 0
    for v, t in zip(values.tolist(), is_time.tolist(), strict=True):
        if t:
            pending.append(v)
        elif pending:
            out.append(pending.pop())
            out.append(v)
        else:
            lost += 1
    return out, lost + len(pending)


def restore_order(data: Any, backs: Any) -> tuple[Any, Any, int, int]:
    """Put one buffer's (time, code) pairs in time order; returns the pairs, the
    in-situ brackets still valid, how many records were appended after a later
    one and how many brackets were dropped.

    Every tracer path stamps a time first and appends its record after: the
    decorator at once, a wrapper after some lookups and allocations. Anything
    that runs Python code between the two (the cyclic garbage collector, which
    runs finalizers such as ``__del__`` and ``gc.callbacks`` at whatever
    allocation triggers it, or a signal handler) can record a traced function
    of the program with later times before the stamped record is appended.
    OTF2 requires a location's times to be non-decreasing (the writer refused
    such a buffer and the whole trace was lost). The re-entered code ran
    inside the interval between the stamp and the append, and its records
    form one properly nested block, so a stable sort by time gives each record
    the place it had in time and keeps every Enter/Leave pair nested.

    An in-situ bracket (:meth:`Buffer.back`) whose interval holds such a block
    would charge the program's finalizer to the tracer; it is dropped (its
    records fall back to the table's values), as is one that overlaps another
    bracket (a traced wrapper called from inside a wrapper). Pairs already in
    order are returned as they are."""
    pairs = np.frombuffer(data, dtype=np.int64).reshape(-1, 2) if len(data) else \
        np.zeros((0, 2), dtype=np.int64)
    times = pairs[:, 0]
    if len(times) < 2 or not (np.diff(times) < 0).any():
        return data, backs, 0, 0
    late = int((times[1:] < np.maximum.accumulate(times)[:-1]).sum())
    order = np.argsort(times, kind="stable")
    pairs = pairs[order]
    times = pairs[:, 0]
    bp = np.asarray(backs, dtype=np.int64).reshape(-1, 2)
    if len(bp):
        last = len(times) - 1
        i0 = np.minimum(np.searchsorted(times, bp[:, 0], "left"), last)
        i1 = np.clip(np.searchsorted(times, bp[:, 1], "right") - 1, i0, last)
        # a break: sorted record i+1 was not the next one written after record i
        breaks = np.concatenate([[0], np.cumsum(np.diff(order) != 1)])
        bad = breaks[i1] - breaks[i0] > 0
        by_first = np.argsort(bp[:, 0], kind="stable")
        overlap = bp[by_first[1:], 0] < bp[by_first[:-1], 1]
        bad[by_first[1:][overlap]] = True
        bad[by_first[:-1][overlap]] = True
        dropped = int(bad.sum())
        bp = bp[~bad]
    else:
        dropped = 0
    return (array("q", pairs.tobytes()), array("q", bp.tobytes()), late,
            dropped)
