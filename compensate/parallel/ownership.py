"""Which rank owns which locations (docs/parallel.md, "Ownership").

A rank owns whole *processes* (:meth:`compensate.model.Definitions.process_of`: a
location group of type PROCESS with its CPU threads and METRIC locations, and the
accelerator contexts it created), never part of one: thread, lock, task, device
and metric dependencies (R8, R9) then stay inside a rank and only MPI-level
dependencies (point-to-point, collectives, RMA R10, partitioned R11) cross ranks.
The assignment is a function of the definitions alone, so every rank computes
the same one without talking: processes in id order, cut into ``size``
contiguous blocks. Given each location's record count (an OTF2 Location
definition's ``numberOfEvents``, or an estimate from its event file where that
understates it: :func:`compensate.formats.location_record_counts`),
the blocks balance records: a process goes to the rank whose share of the total
holds the middle of its records. Without counts (a text trace) they balance
process count, the first ``n % size`` blocks one larger. With more ranks than
processes (or a few heavy processes) some ranks own nothing (they still take
part in every collective step).
"""

from __future__ import annotations

from compensate.model import Definitions


def owners(defs: Definitions, locations: list[int], size: int,
           counts: dict[int, int | None] | None = None) -> dict[int, int]:
    """``{location: rank}`` for every location in ``locations`` (ids of the trace's
    events) on ``size`` ranks; balanced by records if ``counts`` gives every
    location's record count, else by process count."""
    if size < 1:
        raise ValueError(f"the number of ranks must be at least 1, got {size}")
    process = {loc: (defs.process_of(loc) if loc in defs.locations else -1 - loc)
               for loc in locations}
    order = sorted(set(process.values()))
    weights = _process_records(process, counts)
    if weights is not None:
        return {loc: _by_records(order, weights, size)[p] for loc, p in process.items()}
    n = len(order)
    base, extra = divmod(n, size)
    rank_of: dict[int, int] = {}
    i = 0
    for rank in range(size):
        count = base + (1 if rank < extra else 0)
        for p in order[i:i + count]:
            rank_of[p] = rank
        i += count
    return {loc: rank_of[p] for loc, p in process.items()}


def _process_records(process: dict[int, int],
                     counts: dict[int, int | None] | None) -> dict[int, int] | None:
    """Each process's record count, or None if a count is unknown or all are 0."""
    if counts is None or any(counts.get(loc) is None for loc in process):
        return None
    weights: dict[int, int] = {}
    for loc, p in process.items():
        weights[p] = weights.get(p, 0) + int(counts[loc] or 0)
    return weights if sum(weights.values()) > 0 else None


def _by_records(order: list[int], weights: dict[int, int], size: int) -> dict[int, int]:
    """Processes in ``order`` to ranks in contiguous blocks of about equal records:
    a process belongs to the rank whose ``total / size`` share holds its middle record."""
    total = sum(weights.values())
    rank_of, before = {}, 0
    for p in order:
        w = weights[p]
        rank_of[p] = min(size - 1, (2 * before + w) * size // (2 * total))
        before += w
    return rank_of
