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
    d = depth_before[idx]
    for dv in np.unique(d).tolist():
        en = enters.get(dv) if dv > 0 else None
        if en is None or not len(en):
            continue
        sel = np.flatnonzero(d == dv)
        p = np.searchsorted(en, idx[sel]) - 1
        good = p >= 0
        out[sel[good]] = en[p[good]]
    return out


def closing_leaves(depth_before: np.ndarray, leaves: dict, idx: np.ndarray) -> np.ndarray:
    """Per record of ``idx``: the Leave that closes the call enclosing it (-1 if none)."""
    out = np.full(len(idx), -1, dtype=np.int64)
    if not len(idx):
        return out
    d = depth_before[idx]
    for dv in np.unique(d).tolist():
        lv = leaves.get(dv) if dv > 0 else None
        if lv is None or not len(lv):
            continue
        sel = np.flatnonzero(d == dv)
        p = np.searchsorted(lv, idx[sel])
        good = p < len(lv)
        out[sel[good]] = lv[p[good]]
    return out
