"""1-to-n collectives (R4: Bcast, Scatter(v)): per receiver an implied message from
the root's enter to the receiver's exit, timed with R2 (the transfer is never fully
observable, so it is an upper-bound style estimate). The root's exit is local.

Matching: :mod:`compensate.matching.collectives` (class ``1-to-n``).
"""

from __future__ import annotations

from compensate.engine.graph import Graph
from compensate.engine.kinds.p2p import P2PRecv, implied_message
from compensate.engine.pending import Pending
from compensate.matching import Instance


def build(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """A :class:`~compensate.engine.kinds.p2p.P2PRecv` rule at every non-root exit
    the graph evaluates (:meth:`~compensate.engine.graph.Graph.evaluated`)."""
    r = inst.locs.index(inst.root)
    for i in graph.evaluated(lis):
        if i == r or inst.locs[i] == inst.root:
            continue
        p = implied_message(graph, lis[r], inst.begin_idx[r], inst.end_idx[r], lis[i],
                            inst.begin_idx[i], inst.size_recv[i], inst.end_idx[i])
        dep_rules[(lis[i], inst.end_idx[i])] = [Pending(
            P2PRecv, (p,), [(lis[r], inst.begin_idx[r])])]
