"""What the engine needs of a distributed run's exchange (docs/parallel.md).

In the distributed run (``mpiexec -n P compensate``) each rank evaluates the
anchors of the locations it owns; the other locations are *ghosts*, whose anchors
the rules read arrive from their owners, and the anchors other ranks read leave
for them. :class:`AnchorExchange` states that link as the engine uses it
(:func:`compensate.engine.run.approximate`, ``exchange=``), so that the engine does
not depend on the package that implements it (:mod:`compensate.parallel.exchange`,
over MPI or threads): the engine is the evaluator, the parallel package the
transport.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from compensate.engine.graph import Graph


class AnchorExchange(Protocol):
    """The engine's link to the other ranks of a distributed run.

    The engine calls, in this order: :meth:`ghosts` while it builds its graph,
    :meth:`start` once before evaluating, then while it evaluates :meth:`computed`
    for every anchor some rank waits for, :meth:`flush` (or
    :meth:`flush_and_take`) after each run of a location and :meth:`round`
    whenever nothing is runnable, until :attr:`finished`; then :meth:`reduce`, and
    :meth:`check_first_waiting` if locations are left waiting (a dependency
    cycle)."""

    #: the replay is over on every rank (set by :meth:`round`)
    finished: bool

    def ghosts(self, trace: Any) -> list[int]:
        """The locations of ``trace`` that other ranks own: never evaluated here."""
        ...

    def start(self, g: Graph, A: array, cur: list[int], waiters: dict[int, list[int]]) -> None:
        """Before the evaluation: mark the ghost locations done in ``cur`` (per
        location position, the next anchor to compute) and give every anchor that
        other ranks read an entry in ``waiters`` (anchor -> parked location
        positions), so that computing it takes the engine's wake-up path
        (:meth:`computed`)."""
        ...

    def computed(self, k: int) -> None:
        """Anchor ``k``, which had an entry in ``waiters``, now has its value in ``A``."""
        ...

    def flush(self, A: array) -> None:
        """Send the values of the anchors :meth:`computed` since the last send that
        other ranks wait for (nothing if none)."""
        ...

    def flush_and_take(self, A: array, ks: list[int]) -> list[int]:
        """:meth:`computed` for each anchor of ``ks``, :meth:`flush`, then take what
        has arrived from other ranks into ``A`` (without waiting) and return those
        anchors."""
        ...

    def round(self, A: array, cur: list[int]) -> list[int]:
        """Nothing is runnable on this rank: send what other ranks wait for, take
        what arrived (waiting for it if need be) into ``A`` and return those
        anchors; set :attr:`finished` once every rank is done (``cur``: per
        location position the next anchor to compute) or none can go on."""
        ...

    def reduce(self, g: Graph, stats: Any, base: dict[str, int],
               waiting: int | None = None) -> None:
        """Make ``stats`` (:class:`compensate.engine.run.Stats`), which counts this
        rank's own records, the whole run's
        (``base``: the case counters every rank counted alike before evaluating);
        ``waiting``: the first location position left waiting here, None if none."""
        ...

    def check_first_waiting(self, li: int) -> None:
        """After a cycle: return if location position ``li`` is the first waiting
        location of all ranks (the engine then raises the error naming it); else
        raise the error that another rank reports it."""
        ...
