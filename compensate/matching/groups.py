"""Records grouped by value. :func:`by_value`: a column's positions per value,
without a sort where every record has the same one (a location's communicator
column, the depths of its MPI records: matching and trimming ask this per
location and segment, where ``np.unique`` cost more than the rest of their work
on the column), with one sort where there are many (a message table's rows by
location). :func:`key_ids`: dense ids of the distinct rows of several columns
(message channels)."""

from __future__ import annotations

import numpy as np


def by_value(values: np.ndarray) -> list[tuple[int, np.ndarray | None]]:
    """``(value, its positions in values)`` per distinct value of ``values``, in
    increasing order of value, each value's positions in increasing order; the
    positions None where every element has that value. Empty for an empty column.
    Over many values (a message table's rows by location), one stable sort, not
    one comparison of the whole column per value (the square of the locations)."""
    if not len(values):
        return []
    first = values[0]
    if bool((values == first).all()):
        return [(int(first), None)]
    distinct = np.unique(values)
    if len(distinct) <= _FEW:
        return [(int(v), np.flatnonzero(values == v)) for v in distinct.tolist()]
    order = np.argsort(values, kind="stable")
    bounds = np.searchsorted(values[order], distinct).tolist() + [len(values)]
    return [(int(v), order[bounds[k]:bounds[k + 1]])
            for k, v in enumerate(distinct.tolist())]


#: up to this many distinct values, one comparison per value beats a sort
_FEW = 8


def key_ids(columns: list[np.ndarray]) -> np.ndarray:
    """Dense ids 0..k-1 of the distinct rows of the given integer columns.

    The columns are packed into one int64 (each shifted to start at 0, in as many
    bits as its range needs) and grouped with one sort; columns whose ranges do
    not fit together are first replaced by dense codes. Much faster than
    ``np.unique(axis=0)`` or one ``np.unique`` per column."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    code = np.zeros(n, dtype=np.int64)
    bits = 0
    for col in columns:
        lo, hi = int(col.min()), int(col.max())
        width = max(1, (hi - lo).bit_length())
        if bits + width > 62:  # re-densify what we have so far, then go on
            code = _dense(code)
            bits = max(1, int(code.max()).bit_length())
            if bits + width > 62:
                _, inv = np.unique(col, return_inverse=True)
                col, lo = inv.reshape(-1), 0
                width = max(1, int(col.max()).bit_length())
        code = (code << width) | (col.astype(np.int64) - lo)
        bits += width
    return _dense(code)


def _dense(code: np.ndarray) -> np.ndarray:
    """Dense ids (in sorted order of ``code``) of the values of ``code``."""
    order = np.argsort(code, kind="stable")
    s = code[order]
    ids = np.empty(len(code), dtype=np.int64)
    ids[order] = np.cumsum(np.r_[False, s[1:] != s[:-1]])
    return ids
