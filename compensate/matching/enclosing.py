"""The call around a record: the innermost Enter still open at it and the Leave that
closes that call, by nesting depth (the matching's nesting tables), for many
records at once."""

from __future__ import annotations

import numpy as np

from compensate.matching.groups import by_value


def enclosing_enters(depth_before: np.ndarray, enters: dict, idx: np.ndarray) -> np.ndarray:
    """Per record of ``idx``: the innermost Enter still open there (-1 if none)."""
    out = np.full(len(idx), -1, dtype=np.int64)
    if not len(idx):
        return out
    for dv, sel in by_value(depth_before[idx]):
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
    for dv, sel in by_value(depth_before[idx]):
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
