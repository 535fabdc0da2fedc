"""A platform file's per-region costs bound to one trace's region ids.

The platform file states costs per region *name* (``event_overhead_by_region``,
``overhead_before_stamp_by_region``: docs/platform-file.md); a trace's records
carry region *ids*, and several ids may share one name (EZTrace numbers rank
``r``'s definitions from ``r * 2^30``, so every rank has its own id for
``pthread_mutex_lock``). :func:`bind` turns the names into one sorted id table
once per trace's definitions (:meth:`compensate.platform.Platform.region_costs`
keeps it), and :meth:`RegionCosts.rows` looks up every Enter/Leave record of a
location in one vectorised pass, so that no per-record Python runs on the
engine's path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from compensate.model import KIND_CODE

#: The records a by-region entry may name, in column order of :class:`RegionCosts`.
RECORDS = ("Enter", "Leave")
ENTER, LEAVE = KIND_CODE["Enter"], KIND_CODE["Leave"]


@dataclass(frozen=True)
class RegionCosts:
    """Per region id with a by-region entry (``ids``, sorted): the entry's index in
    ``names`` (``entry``) and its seconds per record (columns Enter, Leave; NaN
    where the entry does not name the record: the kind's value holds there) of
    overhead (``cost``) and of overhead before the stamp (``pre``); ``defined``:
    the entries (indices in ``names``) whose name the trace defines a region of."""

    names: tuple[str, ...]
    ids: np.ndarray
    entry: np.ndarray
    cost: np.ndarray
    pre: np.ndarray
    defined: frozenset[int] = frozenset()

    def rows(self, kinds: np.ndarray, regions: np.ndarray) -> np.ndarray | None:
        """Per record of ``kinds``/``regions`` (one location's columns): its row in
        the table if it is an Enter/Leave of a region with an entry, else -1; None
        where no record is."""
        if not self.ids.size or not len(kinds):
            return None
        kinds, regions = np.asarray(kinds), np.asarray(regions, np.int64)
        el = (kinds == ENTER) | (kinds == LEAVE)
        first = int(np.argmax(el))
        if not el[first]:
            return None
        # (other records' region column is NONE: they take the first Enter/Leave's
        # region, masked below, so that the ids looked up lie close together)
        r = np.where(el, regions, regions[first])
        lo, hi = int(r.min()), int(r.max())
        a, b = (int(x) for x in np.searchsorted(self.ids, [lo, hi + 1]))
        if a == b:
            return None
        if hi - lo <= max(4 * len(r), 1 << 16):
            # one location's ids lie close together (EZTrace numbers a rank's from
            # rank * 2^30): a dense table over their range is one gather, where a
            # binary search per record costs several times the rest of the lookup
            table = np.full(hi - lo + 1, -1, np.intp)
            table[self.ids[a:b] - lo] = np.arange(a, b)
            rows = table[r - lo]
        else:
            pos = np.minimum(np.searchsorted(self.ids, r), len(self.ids) - 1)
            rows = np.where(self.ids[pos] == r, pos, -1)
        rows[~el] = -1
        return rows

    def apply(self, values: np.ndarray, kinds: np.ndarray, regions: np.ndarray,
              which: str) -> np.ndarray:
        """``values`` (seconds per record) with each entry's ``which`` (``"cost"``
        or ``"pre"``) where the entry names the record (a new array where any
        does, else ``values`` itself)."""
        rows = self.rows(kinds, regions)
        if rows is None:
            return values
        flat = np.append(getattr(self, which).ravel(), np.nan)  # (the last: no entry)
        key = np.where(rows >= 0, 2 * rows + (np.asarray(kinds) == LEAVE), len(flat) - 1)
        v = flat[key]
        return np.where(np.isnan(v), values, v)

    def matches(self, kinds: np.ndarray, regions: np.ndarray) -> np.ndarray:
        """How many records of ``kinds``/``regions`` each entry (of ``names``) matched."""
        rows = self.rows(kinds, regions)
        hit = np.zeros(0, np.intp) if rows is None else rows[rows >= 0]
        return np.bincount(self.entry[hit], minlength=len(self.names))


def bind(costs: Mapping[str, Mapping[str, float]], before: Mapping[str, Mapping[str, float]],
         regions: Mapping[int, str]) -> RegionCosts:
    """The :class:`RegionCosts` of a platform's by-region ``costs`` and ``before``
    (region name -> {"Enter"/"Leave": seconds}) for a trace's ``regions`` (id ->
    name): every id whose name has an entry in either."""
    names = tuple(sorted(set(costs) | set(before)))
    number = {name: i for i, name in enumerate(names)}
    pairs = sorted((int(rid), number[name]) for rid, name in regions.items()
                   if name in number)
    ids = np.array([rid for rid, _ in pairs], dtype=np.int64)
    entry = np.array([e for _, e in pairs], dtype=np.intp)

    def table(given: Mapping[str, Mapping[str, float]]) -> np.ndarray:
        per_entry = np.array([[float(given.get(name, {}).get(k, np.nan)) for k in RECORDS]
                              for name in names], dtype=np.float64).reshape(-1, 2)
        return per_entry[entry] if entry.size else np.zeros((0, 2))

    return RegionCosts(names, ids, entry, table(costs), table(before),
                       frozenset(entry.tolist()))
