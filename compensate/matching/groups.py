"""A column's records grouped by value, without a sort where every record has the
same one: a location's communicator column (one communicator nearly always), the
depths of its MPI records (all directly inside calls at one level). Matching and
trimming ask this per location and segment, where ``np.unique`` cost more than
the rest of their work on the column."""

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
