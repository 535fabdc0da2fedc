"""Clock alignment (:mod:`compensate.matching.clocks`) reduced across ranks
(docs/parallel.md "Processes on clocks of their own").

The one-process run shifts each process by a constant where a receive is stamped
before its send. The offsets come from one bound per ordered pair of processes,
the largest that any message or collective between them implies; bounds merge by
taking the largest. So each rank bounds the orders whose later record (the
receive, a collective's exit) is on a location it owns, from its view of the
trace (the send and every collective call are in it: :mod:`compensate.parallel.trim`),
every rank gathers every rank's bounds and chains the same offsets as one process
does from the whole trace. Each order is counted by one rank: the counts sum to the
one-process count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compensate.matching import Matching
from compensate.matching.clocks import (
    ClockAlignment,
    Orders,
    bounds,
    chained_offsets,
    counted,
    orders,
    shifted,
)
from compensate.model import Trace
from compensate.parallel.transport import Transport


def reduced_alignment(transport: Transport, trace: Trace, matching: Matching,
                      mine: list[int], step: Callable[..., Any] = lambda f, *a: f(*a)
                      ) -> tuple[Trace, ClockAlignment] | None:
    """This rank's view ``trace`` with every process shifted as
    :func:`compensate.matching.clocks.align_clocks` shifts the whole trace, and what
    was done (the same on every rank); None where no receive of any rank lies
    before its send. Collective: every rank calls it. ``step(f, *args)`` runs this
    rank's own computations (:func:`compensate.parallel.driver.agreed`: a failure
    raises on every rank), the transport's calls stay outside it."""
    found, here = step(_own_orders, trace, matching, set(mine))
    counts = transport.allgather(here)
    count = sum(c for c, _ in counts)
    if count == 0:
        return None
    worst = max(w for _, w in counts)
    lower: dict[tuple[int, int], int] = {}
    for part in transport.allgather(step(bounds, found)):
        for pair, value in part.items():
            lower[pair] = max(value, lower.get(pair, value))
    return step(shifted, trace, chained_offsets(lower), count, worst)


def _own_orders(trace: Trace, matching: Matching, own: set[int]) -> tuple[Orders, tuple]:
    """The orders whose later record is on ``own`` and their (count, largest)
    inversion: gathered once for both reductions."""
    found = orders(trace, matching.table, matching.instances, own)
    return found, counted(found)
