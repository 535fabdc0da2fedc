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

import numpy as np

if TYPE_CHECKING:
    from compensate.engine.graph import Graph


#: :attr:`Wire.tally`'s fields: values sent, values taken (by the C loop and by
#: the exchange's Python side: the C loop waits only while a value is still due),
#: messages sent, messages taken, send requests used, error (the MPI library's
#: error code, -1 for a message this rank did not ask for or more sends than
#: routes; 0: none), the times the C loop waited for a value and their nanoseconds
TALLY = ("values_sent", "values_taken", "messages_sent", "messages_taken", "requests",
         "error", "waits", "wait_ns")
#: seconds the C loop waits for a value still due, when nothing is runnable, before
#: it hands the wait to the exchange's Python side (which then joins the waves)
WIRE_SPIN = 0.005


class Wire:
    """The distributed run's message path where the engine's C loop sends and takes
    the messages itself (``cmp_wire`` in loop.c): the MPI library's ``MPI_Isend``,
    ``MPI_Iprobe``, ``MPI_Recv`` and ``MPI_Get_count`` (``functions``, their
    addresses) with MPICH's handles (C ints: ``handles``, the communicator, the
    int64 datatype, the messages' tag and ``MPI_ANY_SOURCE``), the request ids'
    ghost anchors (``wanted``), and what the exchange's Python side shares with it:
    the messages sent to and taken from each rank (``sent_to``, ``taken_from``:
    the termination waves count them) and :data:`TALLY`. ``sends`` is the most
    messages it may send (each carries one value at least); ``values`` the values
    this rank asked for (no message is larger). ``spin``: :data:`WIRE_SPIN`."""

    def __init__(self, functions: tuple[int, int, int, int],
                 handles: tuple[int, int, int, int], wanted: list[int], size: int,
                 sends: int, values: int, spin: float = WIRE_SPIN) -> None:
        self.functions, self.handles = functions, handles
        self.wanted = array("q", wanted or [0])
        self.nwanted = len(wanted)
        self.sent_to = array("q", bytes(8 * size))
        self.taken_from = array("q", bytes(8 * size))
        self.tally = array("q", bytes(8 * len(TALLY)))
        self.requests = array("i", bytes(4 * max(sends, 1)))
        self.inbox = array("d", bytes(8 * max(2 * values, 2)))
        self.spin_ns = int(spin * 1e9)

    def count(self, name: str) -> int:
        """One of :data:`TALLY`."""
        return self.tally[TALLY.index(name)]

    def handles_used(self) -> list[int]:
        """The requests of the sends made so far (MPI handles)."""
        return self.requests[:self.count("requests")].tolist()


class Outbox:
    """The values other ranks asked for, written where they leave from: one buffer
    region per destination rank of (request id, value) pairs of doubles, so that
    the engine's C loop (``cmp_put`` in loop.c, :mod:`compensate.engine.native`)
    writes them as it computes them and the exchange only sends each region's new
    pairs, with no Python object per value. :meth:`put` is ``cmp_put`` in Python
    (the Python loop's, and the values computed outside the C loop).

    ``routes``: (anchor, rank, request id, offset) of every value to send: anchor
    ``k``'s value ``A[k] + offset`` goes to ``rank`` under that id. A region holds
    every pair its rank will get (each anchor is computed once), so a sent region
    is never written again and is sent from where it lies. The arrays must not be
    resized while the C loop holds their addresses."""

    def __init__(self, anchors: int, size: int,
                 routes: list[tuple[int, int, float, float]]) -> None:
        cols = np.array(routes, dtype=np.float64).reshape(-1, 4)
        self._build(anchors, size, cols[:, 0].astype(np.int64), cols[:, 1].astype(np.int64),
                    cols[:, 2], cols[:, 3])

    @classmethod
    def of_columns(cls, anchors: int, size: int, anchor: np.ndarray, rank: np.ndarray,
                   ident: np.ndarray, offset: np.ndarray) -> Outbox:
        """The outbox of the routes given as columns (numpy, no Python object per
        route): ``anchor``, ``rank``, request ``ident`` and ``offset`` of each."""
        out = cls.__new__(cls)
        out._build(anchors, size, np.asarray(anchor, dtype=np.int64),
                   np.asarray(rank, dtype=np.int64), np.asarray(ident, dtype=np.float64),
                   np.asarray(offset, dtype=np.float64))
        return out

    def _build(self, anchors: int, size: int, anchor: np.ndarray, rank: np.ndarray,
               ident: np.ndarray, offset: np.ndarray) -> None:
        order = np.argsort(anchor, kind="stable")  # (stable: the order asked)
        anchor, rank = anchor[order], rank[order]
        first = np.full(anchors, -1, dtype=np.int64)
        keys, at_first = np.unique(anchor, return_index=True)
        first[keys] = at_first
        self.first = array("q", first.tobytes())
        self.anchor = array("q", anchor.tobytes())
        self.rank = array("q", rank.tobytes())
        self.ident = array("d", np.ascontiguousarray(ident[order]).tobytes())
        self.offset = array("d", np.ascontiguousarray(offset[order]).tobytes())
        per_rank = 2 * np.bincount(rank, minlength=size)
        at = int(per_rank.sum())
        base = array("q", (np.cumsum(per_rank) - per_rank).astype(np.int64).tobytes())
        self.box = array("d", bytes(8 * max(at, 1)))
        self.box_n = array("q", base)  # per rank: one past its last pair written
        self.box_sent = array("q", base)  # and sent
        self.dirty = array("q", bytes(8 * (size + 1)))  # dirty[0] ranks from dirty[1] on
        #: where the C loop sends and takes the messages itself (None: the exchange's
        #: Python side sends them)
        self.wire: Wire | None = None

    def wants(self, k: int) -> bool:
        """Whether another rank asked for anchor ``k``."""
        return self.first[k] >= 0

    def put(self, A: array, k: int) -> None:
        """Anchor ``k`` was computed: its pairs into the regions of the ranks that
        asked for it (``cmp_put``)."""
        j, n = self.first[k], len(self.anchor)
        while 0 <= j < n and self.anchor[j] == k:
            r = self.rank[j]
            at = self.box_n[r]
            if at == self.box_sent[r]:
                self.dirty[0] += 1
                self.dirty[self.dirty[0]] = r
            self.box[at] = self.ident[j]
            self.box[at + 1] = A[k] + self.offset[j]
            self.box_n[r] = at + 2
            j += 1

    def pending(self) -> list[tuple[int, int, int]]:
        """(rank, first, end) of the pairs written and not sent yet, per rank
        (doubles of :attr:`box`), now counted as sent."""
        dirty, out = self.dirty, []
        for i in range(1, dirty[0] + 1):
            r = dirty[i]
            out.append((r, self.box_sent[r], self.box_n[r]))
            self.box_sent[r] = self.box_n[r]
        dirty[0] = 0
        return out


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
    #: where the values other ranks asked for are written (set by :meth:`start`):
    #: the engine's C loop writes them there, :meth:`flush` sends them
    outbox: Outbox | None

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

    def reduce(self, g: Graph, stats: Any, waiting: int | None = None) -> None:
        """Make ``stats`` (:class:`compensate.engine.run.Stats`), which counts this
        rank's own records (the rules' building as their evaluation), the whole
        run's; ``waiting``: the first location position left waiting here, None if
        none."""
        ...

    def check_first_waiting(self, li: int) -> None:
        """After a cycle: return if location position ``li`` is the first waiting
        location of all ranks (the engine then raises the error naming it); else
        raise the error that another rank reports it."""
        ...
