"""A platform file's per-region costs bound to one trace's region ids.

The platform file states costs per region *name* (``event_overhead_by_region``,
``overhead_before_stamp_by_region``: docs/platform-file.md); a trace's records
carry region *ids*, and several ids may share one name (EZTrace numbers rank
``r``'s definitions from ``r * 2^30``, so every rank has its own id for
``pthread_mutex_lock``). :func:`bind` turns the names into one sorted id table
once per trace's definitions (:meth:`compensate.platform.Platform.region_costs`
keeps it), and :meth:`RegionCosts.find` looks up every Enter/Leave record of a
location in one vectorised search, so that no per-record Python runs on the
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
    overhead (``cost``) and of overhead before the stamp (``pre``)."""

    names: tuple[str, ...]
    ids: np.ndarray
    entry: np.ndarray
    cost: np.ndarray
    pre: np.ndarray

    def find(self, kinds: np.ndarray, regions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Enter/Leave records of ``kinds``/``regions`` (one location's columns)
        whose region has an entry: (their indices, their rows in the table, their
        column: 0 Enter, 1 Leave)."""
        empty = np.zeros(0, np.intp)
        if not self.ids.size or not len(kinds):
            return empty, empty, empty
        idx = np.flatnonzero((kinds == ENTER) | (kinds == LEAVE))
        if not idx.size:
            return empty, empty, empty
        r = np.asarray(regions)[idx].astype(np.int64)
        pos = np.minimum(np.searchsorted(self.ids, r), len(self.ids) - 1)
        hit = self.ids[pos] == r
        idx, pos = idx[hit], pos[hit]
        return idx, pos, (np.asarray(kinds)[idx] == LEAVE).astype(np.intp)

    def apply(self, values: np.ndarray, kinds: np.ndarray, regions: np.ndarray,
              which: str) -> np.ndarray:
        """``values`` (seconds per record, modified) with each entry's ``which``
        (``"cost"`` or ``"pre"``) where the entry names the record."""
        idx, pos, col = self.find(kinds, regions)
        if idx.size:
            v = getattr(self, which)[pos, col]
            use = ~np.isnan(v)
            values[idx[use]] = v[use]
        return values

    def matches(self, kinds: np.ndarray, regions: np.ndarray) -> np.ndarray:
        """How many records of ``kinds``/``regions`` each entry (of ``names``) matched."""
        _, pos, _ = self.find(kinds, regions)
        return np.bincount(self.entry[pos], minlength=len(self.names))


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

    return RegionCosts(names, ids, entry, table(costs), table(before))
