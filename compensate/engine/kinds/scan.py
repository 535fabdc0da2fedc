"""Scans (MPI_Scan, MPI_Exscan): rank i's exit waits for the enters of ranks <= i
(scan) or < i (exscan), timed like R3 with each member's own measured exit
(per-process). Rank 0 of an exscan depends on nobody.

Matching: :mod:`compensate.matching.collectives` (classes ``scan``, ``exscan``).
"""

from __future__ import annotations

from compensate.engine.graph import Graph
from compensate.engine.kinds.nton import NToN, sync_times
from compensate.engine.pending import Pending, PendingLatest
from compensate.matching import Instance
from compensate.matching.collectives import SCAN


def build(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """One :class:`~compensate.engine.kinds.nton.NToN` rule per member that waits
    and that the graph evaluates (:meth:`~compensate.engine.graph.Graph.evaluated`)."""
    for i in graph.evaluated(lis):
        upto = range(i + 1) if inst.cls == SCAN else range(i)
        if not upto:
            continue  # rank 0 of an exscan depends on nobody
        members = list(upto)
        if i not in members:
            members.append(i)
        sync = sync_times(graph, inst, lis, members, [i])[i]
        latest = PendingLatest([(lis[j], inst.begin_idx[j]) for j in members])
        dep_rules[(lis[i], inst.end_idx[i])] = [Pending(
            NToN, (latest, sync, ("ref", lis[i], inst.begin_idx[i])),
            [(lis[j], inst.begin_idx[j]) for j in members])]
