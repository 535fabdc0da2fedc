"""The forward replay's exchange: anchors that cross ranks (docs/parallel.md).

Every rank builds the same :class:`~compensate.engine.graph.Graph` (today from the
whole trace), so an anchor has the same number on every rank. A rank evaluates
only the anchors of the locations it owns (:mod:`compensate.parallel.ownership`);
the other locations are *ghosts*: the engine never evaluates them, their anchors'
values arrive from their owners. The value sent is ``A[anchor]`` itself, and the
receiving rule adds its own R1 offset exactly as in the one-process run, so the
floats are bit-identical.

* **Setup** (:meth:`Exchange.start`): each rank lists the remote anchors its own
  dependent records read (the fast path's send anchor, every generic rule's
  ``needs``) and sends each owner its list in one ``alltoall``; the owner gives each
  requested anchor a waiter list, so that computing it takes the engine's wake-up
  path and :meth:`Exchange.computed` queues it.
* **Rounds** (:meth:`Exchange.round`): when the engine has nothing runnable, the rank
  sends every queued value to the ranks that asked for it (one packed pair of numpy
  arrays per destination) and takes what the others sent, in one ``alltoall`` that
  also carries every rank's status (failed, done, values sent). Then every rank
  knows the same thing: all done and nothing sent — finished; nothing sent but
  somebody not done — the dependencies form a cycle (the one-process run's
  "can never be reached" error, raised by every rank still waiting); a rank
  failed — every rank stops (:class:`RemoteFailure`). Nobody blocks forever,
  because a rank enters a round only after its runnable work is done and every
  rank takes part in every round until all agree to stop.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

from compensate.engine.graph import FAST_P2P, GENERIC, Graph
from compensate.parallel.transport import Transport


class RemoteFailure(Exception):
    """Another rank failed; ``rank`` is the first that did (it reports the error)."""

    def __init__(self, rank: int) -> None:
        super().__init__(f"rank {rank} failed")
        self.rank = rank


class Exchange:
    """The engine's link to the other ranks (see the module docstring).

    ``owner``: ``{location id: rank}`` for every location of the trace."""

    def __init__(self, transport: Transport, owner: dict[int, int]) -> None:
        self.transport = transport
        self.owner = owner
        self.finished = False
        self.rounds = 0
        self.sent = 0  # values this rank sent
        self.received = 0
        self.expected = 0  # values this rank will receive (from the setup)
        self._out: list[int] = []
        self._dest: dict[int, list[int]] = {}
        self._owned: list[int] = []
        self._a_end: list[int] = []
        self._A: array | None = None

    # -- collective steps ------------------------------------------------------------
    def _alltoall(self, payloads: list[Any], status: tuple = ()) -> list[tuple[tuple, Any]]:
        """One ``alltoall`` of ``(status, payload)``; RemoteFailure if any rank failed."""
        t = self.transport
        got = t.alltoall([(("ok", *status), p) for p in payloads])
        for rank, (st, _) in enumerate(got):
            if st[0] == "failed":
                self.finished = True
                raise RemoteFailure(rank)
        return got

    def fail(self) -> None:
        """This rank failed: tell the others in the round they are waiting in (a
        no-op once the rounds are over; the driver's next agreement carries it)."""
        if self.finished:
            return
        self.finished = True
        t = self.transport
        t.alltoall([(("failed",), None)] * t.size)

    # -- the engine's hooks ---------------------------------------------------------
    def start(self, g: Graph, A: array, cur: list[int], waiters: dict[int, list[int]]) -> None:
        """Mark ghosts (never evaluated), ask the owners for the remote anchors this
        rank's records read, and register the anchors the others asked for."""
        me, size = self.transport.rank, self.transport.size
        loc_rank = np.array([self.owner[loc] for loc in g.loc_ids], dtype=np.int64)
        a_end = g.a_end.tolist()
        owned = [li for li in range(len(cur)) if loc_rank[li] == me]
        for li in range(len(cur)):
            if loc_rank[li] != me:
                cur[li] = a_end[li]
        self._owned, self._a_end, self._A = owned, a_end, A
        anchor_rank = loc_rank[g.anchor_loc] if len(g.anchor_loc) else np.zeros(0, np.int64)
        code, generic = g.code, g.generic
        s_anchor, e_anchor = g.f_s_anchor, g.f_e_anchor
        first = g.a_first.tolist()
        wanted: list[int] = []
        for li in owned:
            for k in range(first[li], a_end[li]):
                c = code[k]
                if c == FAST_P2P:
                    wanted.append(s_anchor[k])
                    if e_anchor[k] >= 0:
                        wanted.append(e_anchor[k])
                elif c == GENERIC:
                    for rule in generic[k][0]:
                        wanted.extend(need[0] for need in rule.needs)
        w = np.unique(np.asarray(wanted, dtype=np.int64))
        if w.size:
            Aw = np.frombuffer(A, dtype=np.float64)[w]
            w = w[(anchor_rank[w] != me) & np.isnan(Aw)]  # remote, not known at start
        self.expected = int(w.size)
        wr = anchor_rank[w]
        got = self._alltoall([w[wr == r] for r in range(size)])
        for rank, (_, asked) in enumerate(got):
            for k in asked.tolist():
                waiters.setdefault(k, [])
                self._dest.setdefault(k, []).append(rank)
                if not math.isnan(A[k]):  # known from the start (a first record)
                    self._out.append(k)

    def computed(self, k: int) -> None:
        """Anchor ``k`` was computed; queue it if other ranks asked for it."""
        if k in self._dest:
            self._out.append(k)

    def round(self, A: array, cur: list[int], parked: dict[int, tuple[int, int]]) -> list[int]:
        """Send the queued values, take the others'; the anchors that arrived (their
        values are in ``A``). Sets :attr:`finished` when every rank is done."""
        t = self.transport
        ends = self._a_end
        done = all(cur[li] >= ends[li] for li in self._owned) and \
            self.received >= self.expected
        batches: list[list[int]] = [[] for _ in range(t.size)]
        for k in self._out:
            for r in self._dest[k]:
                batches[r].append(k)
        self._out = []
        payloads = []
        n = 0
        for b in batches:
            ids = np.asarray(b, dtype=np.int64)
            payloads.append((ids, np.array([A[k] for k in b], dtype=np.float64)))
            n += len(b)
        self.sent += n
        self.rounds += 1
        got = self._alltoall(payloads, (done, n))
        arrived: list[int] = []
        for _, (ids, vals) in got:
            if len(ids):
                for k, v in zip(ids.tolist(), vals.tolist(), strict=True):
                    A[k] = v
                arrived.extend(ids.tolist())
        self.received += len(arrived)
        total = sum(st[2] for st, _ in got)
        if total == 0:  # nothing moves any more: done, or a cycle (the engine's
            self.finished = True  # parked check names it on each waiting rank)
        return arrived

    def sum_counts(self, cases: dict[str, int], base: dict[str, int]) -> None:
        """``cases`` = ``base`` (counted while building the graph, the same on every
        rank) plus every rank's own evaluation counts (``cases - base``), summed."""
        t = self.transport
        mine = {k: v - base.get(k, 0) for k, v in cases.items()}
        got = self._alltoall([mine] * t.size)
        for k in cases:
            cases[k] = base.get(k, 0) + sum(d.get(k, 0) for _, d in got)
