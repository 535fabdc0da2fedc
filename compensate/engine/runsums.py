"""Segmented running sums, exactly as a sequential sum restarted at each segment.

The engine's R1 makes the approximated time of a local record the time of the
segment's first record (a dependent record, or record 0) plus the running sum of
the gaps after it: ``a[i] = a[p] + (gap[p+1] + ... + gap[i])``, summed left to
right (``np.cumsum`` of the slice). These partial sums do not depend on any
approximated time, so they are computed for the whole trace up front, and the
engine only has to find ``a[p]`` for each segment start.

A global ``np.cumsum`` minus the value at the segment start gives the same
numbers only when no sum rounds: true when every value is an integer and the
total stays below 2**53 (timestamps in ticks, overheads of whole ticks), and
then that is what is done. Otherwise, to stay bit-identical with a per-segment
``np.cumsum``, segments are summed on their own: short ones row-wise in padded
2-D blocks of similar length (one ``cumsum(axis=1)`` per power-of-two length
class: a sequential sum per row), long ones one by one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["segmented_cumsum"]

#: Segments longer than this are summed one by one (their count is then small).
LONG = 4096


def _exact_integers(values: np.ndarray) -> bool:
    """All values integers and their absolute sum below 2**53 (float sums exact)?"""
    return bool(np.all(np.floor(values) == values)) and \
        float(np.sum(np.abs(values))) < 2.0 ** 53


def segmented_cumsum(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running sums of ``values`` restarted at every index in ``starts``.

    ``starts`` is sorted, unique and begins with 0 (if ``values`` is not empty). The
    result ``S`` has ``S[p] = 0.0`` at each start ``p`` and ``S[i] = S[i-1] +
    values[i]`` inside a segment: ``S[p+1:q] == np.cumsum(values[p+1:q])`` bit for
    bit, for consecutive starts ``p < q``.
    """
    n = len(values)
    out = np.zeros(n, dtype=np.float64)
    if n == 0:
        return out
    starts = np.asarray(starts, dtype=np.int64)
    if _exact_integers(values):
        # every partial sum is an integer below 2**53, so exact in any grouping: one
        # running sum over everything, minus its value at each segment start
        v = values.copy()
        v[starts] = 0.0
        np.cumsum(v, out=out)
        out -= np.repeat(out[starts], np.diff(np.r_[starts, n]))
        return out
    lengths = np.diff(np.r_[starts, n]) - 1  # summed elements after each start
    for j in np.flatnonzero(lengths > LONG).tolist():
        p = int(starts[j])
        out[p + 1:p + 1 + int(lengths[j])] = np.cumsum(values[p + 1:p + 1 + int(lengths[j])])
    short = np.flatnonzero((lengths > 0) & (lengths <= LONG))
    if not short.size:
        return out
    width_class = np.ceil(np.log2(lengths[short])).astype(np.int64)
    for c in np.unique(width_class).tolist():
        seg = short[width_class == c]
        width = 1 << c
        ln = lengths[seg]
        rows = np.repeat(np.arange(seg.size), ln)
        cols = np.arange(rows.size) - np.repeat(np.cumsum(ln) - ln, ln)
        src = np.repeat(starts[seg] + 1, ln) + cols
        block = np.zeros((seg.size, width), dtype=np.float64)
        block[rows, cols] = values[src]
        np.cumsum(block, axis=1, out=block)
        out[src] = block[rows, cols]
    return out
