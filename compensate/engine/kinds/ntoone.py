"""n-to-1 collectives (R5: Gather(v), Reduce; not in the paper): the mirror of R4.
The root's exit waits for an implied message from every other member's enter, each
timed with R2; the other exits are local. The root's wait shows at most one
transfer, that of the last arrival (:func:`last_arrival`): only that message can be
R2's case m.1; the others are timed with the bounds (or the fit) of case m.2.

Matching: :mod:`compensate.matching.collectives` (class ``n-to-1``).
"""

from __future__ import annotations

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.kinds.p2p import implied_message
from compensate.engine.pending import Pending
from compensate.engine.rules import Context, Need, RecvParams, Rule, recv_time
from compensate.matching import Instance


class NToOne(Rule):
    """R5: the root's exit waits for a message from every other member's enter."""

    __slots__ = ("params",)

    def __init__(self, params: list[RecvParams], needs: list[Need]) -> None:
        self.params, self.needs = params, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        return max(recv_time(p, A, prev_a, ctx) for p in self.params)


def build(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """One :class:`NToOne` rule at the root's exit, if the graph evaluates it
    (:meth:`~compensate.engine.graph.Graph.evaluated`)."""
    r = inst.locs.index(inst.root)
    if graph.has_ghosts and graph.ghost[lis[r]]:
        return
    others = [i for i in range(len(inst.locs)) if i != r and inst.locs[i] != inst.root]
    if not others:
        return
    last = last_arrival(graph, inst, lis, others)
    params = [implied_message(graph, lis[i], inst.begin_idx[i], inst.end_idx[i], lis[r],
                              inst.begin_idx[r], inst.size_sent[i], inst.end_idx[r],
                              one_of_many=i != last)
              for i in others]
    dep_rules[(lis[r], inst.end_idx[r])] = [Pending(
        NToOne, (params,), [(lis[i], inst.begin_idx[i]) for i in others])]


def last_arrival(graph: Graph, inst: Instance, lis: list[int], others: list[int]) -> int:
    """The member whose message reached the root last in the measured run: the
    root's wait, if it waited, shows that message's transfer and no other (R2's m.1
    applies to it alone). Under the fitted bound by the fitted model; otherwise the
    member whose data left last (begin + overhead, or the end of a flush after the
    begin, + copy; with equal sizes, as in a Gather or Reduce, that is the last to
    arrive)."""
    arrival = []
    for i in others:
        g, size = graph.g(lis[i], inst.begin_idx[i]), int(inst.size_sent[i])
        net = graph.network_time(size) * graph.res if graph.network_time is not None else 0.0
        left = graph.tm[g] + graph.kind_ovh(g)
        if graph.flushes.any:  # R6 extended: a member that flushed after its begin sent
            left = float(graph.flushes.ready_after(  # when the flush ended
                g, graph.g(lis[i], inst.end_idx[i]), left, True))
        arrival.append(left + 2.0 * graph.copy(size) + net)
    return others[int(np.argmax(arrival))]
