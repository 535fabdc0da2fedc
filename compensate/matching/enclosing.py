"""The call around a record: the innermost Enter still open at it and the Leave that
closes that call, by nesting depth (the matching's nesting tables), for many
records at once."""

from __future__ import annotations

import numpy as np


def enclosing_enters(depth_before: np.ndarray, enters: dict, idx: np.ndarray) -> np.ndarray:
    """Per record of ``idx``: the innermost Enter still open there (-1 if none)."""
    out = np.full(len(idx), -1, dtype=np.int64)
    if not len(idx):
        return out
    for dv, sel in _levels(depth_before[idx]):
        en = enters.get(dv) if dv > 0 else None
        if en is None or not len(en):
            continue
        at = idx if sel is None else idx[sel]
        p = np.searchsorted(en, at) - 1
        good = p >= 0
        if sel is None and bool(good.all()):
            return en[p]
        out[good if sel is None else sel[good]] = en[p[good]]
    return out


def closing_leaves(depth_before: np.ndarray, leaves: dict, idx: np.ndarray) -> np.ndarray:
    """Per record of ``idx``: the Leave that closes the call enclosing it (-1 if none)."""
    out = np.full(len(idx), -1, dtype=np.int64)
    if not len(idx):
        return out
    for dv, sel in _levels(depth_before[idx]):
        lv = leaves.get(dv) if dv > 0 else None
        if lv is None or not len(lv):
            continue
        at = idx if sel is None else idx[sel]
        p = np.searchsorted(lv, at)
        good = p < len(lv)
        if sel is None and bool(good.all()):
            return lv[p]
        out[good if sel is None else sel[good]] = lv[p[good]]
    return out


def _levels(d: np.ndarray) -> list[tuple[int, np.ndarray | None]]:
    """``(depth, positions in d)`` per distinct depth of ``d`` (not empty); the
    positions None where every record is at one depth (the usual case: a
    location's MPI records all directly inside calls at one level)."""
    lo, hi = int(d.min()), int(d.max())
    if lo == hi:
        return [(lo, None)]
    return [(dv, np.flatnonzero(d == dv)) for dv in np.unique(d).tolist()]
