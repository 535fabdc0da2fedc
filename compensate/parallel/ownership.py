"""Which rank owns which locations (docs/parallel.md, "Ownership").

A rank owns whole *processes* (:meth:`compensate.model.Definitions.process_of`: a
location group of type PROCESS with its CPU threads and METRIC locations, and the
accelerator contexts it created), never part of one: thread, lock, task, device
and metric dependencies (R8, R9) then stay inside a rank and only MPI-level
dependencies (point-to-point, collectives, RMA R10, partitioned R11) cross ranks.
The assignment is a function of the definitions alone, so every rank computes
the same one without talking: processes in id order, cut into ``size``
contiguous blocks of (almost) equal process count, the first ``n % size`` blocks
one larger. The definitions carry no record counts today, so the blocks balance
processes, not records. With more ranks than processes the last ranks own
nothing (they still take part in every collective step).
"""

from __future__ import annotations

from compensate.model import Definitions


def owners(defs: Definitions, locations: list[int], size: int) -> dict[int, int]:
    """``{location: rank}`` for every location in ``locations`` (ids of the trace's
    events) on ``size`` ranks."""
    if size < 1:
        raise ValueError(f"the number of ranks must be at least 1, got {size}")
    process = {loc: (defs.process_of(loc) if loc in defs.locations else -1 - loc)
               for loc in locations}
    order = sorted(set(process.values()))
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
