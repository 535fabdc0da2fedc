"""Nonblocking collectives (MPI_Ibarrier, MPI_Iallreduce, ...): the dependency
applies at the completion record (NonBlockingCollectiveComplete), the request
(NonBlockingCollectiveRequest) takes the place of the enter.

n-to-n (as R3): the operation finishes D after the latest request, and a completion
happens when its call is ready (the record before it) and the operation has
finished: ``complete_a = max(ready_a, latest request_a + D)``. D is observed when
some member waited in its completion call (its completion is later than the record
before it plus that record's overhead): ``D = complete_m - max_j(request_m[j] + O)``
for that member. When nobody waited D is only bounded: lower 0, upper the smallest
``complete_m - sync_m``.

1-to-n (MPI_Ibcast, MPI_Iscatter(v); R4 at the completion): per non-root member an
implied message from the root's request to the member's completion, timed with R2
and its lower/upper (and fitted) bounds, the completion call (MPI_Wait/Test) being
the receive call; the root's completion is local. n-to-1 (MPI_Igather(v),
MPI_Ireduce; R5 at the completion): the root's completion waits for an implied
message from every other member's request; the members' completions are local.
Scans: the completion follows its own timeline (R1) but never precedes the
requests it waits for.

Matching: :mod:`compensate.matching.collectives` (``Instance.nonblocking``).
"""

from __future__ import annotations

from compensate.engine.graph import Graph
from compensate.engine.kinds.ntoone import NToOne, last_arrival
from compensate.engine.kinds.p2p import P2PRecv, implied_message
from compensate.engine.pending import Pending, SharedNeeds, SharedRefs
from compensate.engine.rules import NEG_INF, TICK, Context, Need, Ref, Rule, at
from compensate.matching import Instance, needed_members
from compensate.matching.collectives import call_enter as enclosing_enter
from compensate.matching.collectives import call_leave as closing_leave


class NonblockingNToN(Rule):
    """Nonblocking n-to-n completion: ``max(latest request + D, every other
    member's request + 1 tick)``."""

    __slots__ = ("refs", "own", "d_obs")

    def __init__(self, refs: list[Ref], own: int, d_obs: float, needs: list[Need]) -> None:
        self.refs, self.own, self.d_obs, self.needs = refs, own, d_obs, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        times = [at(A, r) for r in self.refs]
        latest = max(times)
        others = max((t for j, t in enumerate(times) if j != self.own), default=NEG_INF)
        return max(latest + self.d_obs, others + TICK)


class AfterAll(Rule):
    """A completion that follows its own timeline (R1) but is at least one tick
    after every record it waits for (nonblocking collectives of other classes)."""

    __slots__ = ("refs",)

    def __init__(self, refs: list[Ref], needs: list[Need]) -> None:
        self.refs, self.needs = refs, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        return max(local, max(at(A, r) for r in self.refs) + TICK)


def build_nton(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """One :class:`NonblockingNToN` rule per member's completion that the graph
    evaluates (:meth:`~compensate.engine.graph.Graph.evaluated`). Whether D was
    observed is counted once per instance, where its first member's completion is
    evaluated (summed over the ranks of the distributed run, the one-process count)."""
    b, e = inst.begin_idx, inst.end_idx
    n = len(lis)
    who = graph.evaluated(lis)
    if not who:
        return
    tm, g, ovh = graph.tm, graph.g, graph.kind_ovh
    sync_m = max(tm[g(lis[j], b[j])] + ovh(g(lis[j], b[j])) for j in range(n))
    after_sync = [tm[g(lis[i], e[i])] - sync_m for i in range(n)]
    waited = [after_sync[i] for i in range(n)
              if tm[g(lis[i], e[i])] - tm[g(lis[i], e[i] - 1)]
              - ovh(g(lis[i], e[i] - 1)) > 1.0]
    if waited:
        d_obs = max(0.0, min(waited))
    elif graph.bound == "lower":
        d_obs = 0.0
    else:
        d_obs = max(0.0, min(after_sync))
    if who[0] == 0:
        graph.stats.p2p_cases["nbc_observed" if waited else "nbc_bounded"] += 1
    begins = [(lis[j], b[j]) for j in range(n)]
    refs, needs = SharedRefs(begins), SharedNeeds(begins)
    for i in who:
        dep_rules[(lis[i], e[i])] = [Pending(NonblockingNToN, (refs, i, d_obs), needs)]


def build_other(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """An :class:`AfterAll` rule at each completion that waits for other members
    and that the graph evaluates."""
    b, e = inst.begin_idx, inst.end_idx
    for i in graph.evaluated(lis):
        needed = [(lis[j], b[j]) for j in needed_members(inst, i) if j != i]
        if not needed:
            continue
        dep_rules[(lis[i], e[i])] = [Pending(
            AfterAll, ([("ref", li, x) for li, x in needed],), needed)]


def call_enter(graph: Graph, li: int, idx: int) -> int:
    """:func:`compensate.matching.collectives.call_enter` on location position ``li``."""
    return enclosing_enter(graph.evs[li].kind, idx)


def call_leave(graph: Graph, li: int, idx: int) -> int:
    """:func:`compensate.matching.collectives.call_leave` on location position ``li``."""
    return closing_leave(graph.evs[li].kind, idx)


def build_one_to_n(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """A :class:`~compensate.engine.kinds.p2p.P2PRecv` rule at every non-root
    completion the graph evaluates: the implied message from the root's request (R4
    at the completion)."""
    b, e = inst.begin_idx, inst.end_idx
    r = inst.locs.index(inst.root)
    who = [i for i in graph.evaluated(lis) if i != r and inst.locs[i] != inst.root]
    if not who:
        return
    root_exit = call_leave(graph, lis[r], b[r])
    for i in who:
        if i == r or inst.locs[i] == inst.root:
            continue
        p = implied_message(graph, lis[r], b[r], root_exit, lis[i],
                            call_enter(graph, lis[i], e[i]), inst.size_recv[i], e[i])
        dep_rules[(lis[i], e[i])] = [Pending(P2PRecv, (p,), [(lis[r], b[r])])]


def build_n_to_one(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """An :class:`~compensate.engine.kinds.ntoone.NToOne` rule at the root's
    completion, if the graph evaluates it: an implied message from every other
    member's request (R5)."""
    b, e = inst.begin_idx, inst.end_idx
    r = inst.locs.index(inst.root)
    if graph.has_ghosts and graph.ghost[lis[r]]:
        return
    others = [i for i in range(len(inst.locs)) if i != r and inst.locs[i] != inst.root]
    if not others:
        return
    last = last_arrival(graph, inst, lis, others)
    enter = call_enter(graph, lis[r], e[r])
    params = [implied_message(graph, lis[i], b[i], call_leave(graph, lis[i], b[i]), lis[r],
                              enter, inst.size_sent[i], e[r], one_of_many=i != last)
              for i in others]
    dep_rules[(lis[r], e[r])] = [Pending(NToOne, (params,), [(lis[i], b[i]) for i in others])]
