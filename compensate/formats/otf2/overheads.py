"""Each record's own tracer overhead, as an OTF2 trace may carry it.

The project's mpi4py tracer writes, on every record whose cost it bracketed in
the run, the attribute :data:`ATTRIBUTE` (UINT64, ns: the tracer's cost after
that record, capped by the gap to the next one; ``calibration/tracer/insitu.py``,
docs/calibration.md "Mean, not median"). Both OTF2 readers put it into the
``overhead`` column of :class:`~compensate.model.Events` (NONE where a record
has none), and the engine takes it instead of the location's table for those
records (:meth:`compensate.platform.Platform.location_overheads`). Other OTF2
tools ignore the attribute; ``compensate`` copies it into its output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compensate.model import NONE

__all__ = ["ATTRIBUTE", "attribute_column", "event_overheads"]

#: The attribute's name (the tracer writes the same, ``calibration.tracer.insitu``).
ATTRIBUTE = "COMPENSATE::OVERHEAD"
_INT32_MAX = 2**31 - 1


def attribute_column(nattrs: np.ndarray, attrs: np.ndarray, ref: int) -> np.ndarray:
    """The ``overhead`` column from the native reader's kept attribute lists:
    per record its number of attributes (``nattrs``, -1 as unsigned: unreadable)
    and up to MAX_ATTRS (reference, type, value) triples (``attrs``), the value
    of attribute ``ref`` where present, else NONE."""
    n = len(nattrs)
    out = np.full(n, NONE, dtype=np.int32)
    if not n:
        return out
    triples = attrs.reshape(n, -1, 3)
    slots = np.arange(triples.shape[1])
    count = nattrs.astype(np.int64)
    count[nattrs == np.iinfo(nattrs.dtype).max] = 0
    hit = (triples[:, :, 0] == ref) & (slots[None, :] < count[:, None])
    rows = np.flatnonzero(hit.any(axis=1))
    if rows.size:
        col = hit[rows].argmax(axis=1)
        out[rows] = np.minimum(triples[rows, col, 2], _INT32_MAX).astype(np.int32)
    return out


def event_overheads(events: list[Any]) -> np.ndarray | None:
    """The ``overhead`` column of ``otf2`` event objects (their ``attributes``
    dicts), or None if none of them carries :data:`ATTRIBUTE`."""
    out = None
    for i, ev in enumerate(events):
        attrs = getattr(ev, "attributes", None)
        if not attrs:
            continue
        for attr, value in attrs.items():
            if getattr(attr, "name", None) == ATTRIBUTE:
                if out is None:
                    out = np.full(len(events), NONE, dtype=np.int32)
                out[i] = min(int(value), _INT32_MAX)
                break
    return out
