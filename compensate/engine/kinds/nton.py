"""n-to-n collectives (R3: Barrier, Allreduce, Allgather(v), Alltoall(v/w),
Reduce_scatter(_block), and operations of unknown class, conservatively): nobody
leaves before the last member entered; then the operation takes the measured
synchronisation time (eq. 12 ``uniform`` or eq. 13 ``per-process``).

Matching: :mod:`compensate.matching.collectives` (class ``n-to-n``). Every member's
MpiCollectiveEnd depends on every member's MpiCollectiveBegin.
"""

from __future__ import annotations

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.pending import Pending, PendingLatest, SharedNeeds
from compensate.engine.rules import TICK, Context, Latest, Need, Ref, Rule, at
from compensate.matching import Instance
from compensate.matching.collectives import SYNCHRONISING


class NToN(Rule):
    """R3 (and scans): exit after the latest approximated enter plus the measured
    synchronisation time, and strictly after the member's own enter."""

    __slots__ = ("latest", "sync", "own")

    def __init__(self, latest: Latest, sync: float, own: Ref, needs: list[Need]) -> None:
        self.latest, self.sync, self.own, self.needs = latest, sync, own, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        return max(self.latest.get(A) + self.sync, at(A, self.own) + TICK)


def build(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """One :class:`NToN` rule per member whose exit the graph evaluates (not on a
    ghost location: another rank builds that one); all share the latest enter."""
    everyone = list(range(len(inst.locs)))
    who = graph.evaluated(lis)
    if not who:
        return
    begins = [(lis[j], inst.begin_idx[j]) for j in everyone]
    latest, needs = PendingLatest(begins), SharedNeeds(begins)
    syncs = sync_times(graph, inst, lis, everyone, who)
    for i in who:
        dep_rules[(lis[i], inst.end_idx[i])] = [Pending(
            NToN, (latest, syncs[i], ("ref", lis[i], inst.begin_idx[i])), needs)]


def sync_times(graph: Graph, inst: Instance, lis: list[int], members: list[int],
               who: list[int]) -> dict[int, float]:
    """R3's measured synchronisation time for each member ``i`` in ``who`` waiting
    for ``members``: from the latest measured enter to the (earliest, or own)
    measured exit, less the overheads recorded in between on the exiting location.
    The latest enter is the latest *joining*: a member joins once its enter record
    is written (docs/design.md §2), at its enter plus that record's overhead, which
    differs between locations (their in-situ tables) and between records (their
    own measured overheads)."""
    b, e = inst.begin_idx, inst.end_idx
    tm, g = graph.tm, graph.g
    joined = [tm[g(lis[j], b[j])] + graph.kind_ovh(g(lis[j], b[j])) for j in members]
    jj = members[int(np.argmax(joined))]
    enter_m_j = tm[g(lis[jj], b[jj])]
    o_j = graph.kind_ovh(g(lis[jj], b[jj]))
    fl = graph.flushes
    if fl.any:  # R6 extended: a member that flushed after its begin joined when the
        # flush ended; the synchronisation is measured from the latest joining
        bg = np.array([g(lis[j], b[j]) for j in members], dtype=np.int64)
        eg = np.array([g(lis[j], e[j]) for j in members], dtype=np.int64)
        last = fl.last_inside(bg, eg)
        last = last[last >= 0]
        if last.size and float(fl.free[last].max()) > enter_m_j + o_j:  # a flush made
            enter_m_j, o_j = float(fl.free[last].max()), 0.0  # the last joining later
    uniform = graph.collective_exit == "uniform" and inst.cls in SYNCHRONISING
    if uniform:
        earliest = members[int(np.argmin([tm[g(lis[j], e[j])] for j in members]))]
    out: dict[int, float] = {}
    by_exit: dict[int, float] = {}
    for i in who:
        ll = earliest if uniform else i  # per-process; scans end at different times
        if ll not in by_exit:
            exit_m_l = tm[g(lis[ll], e[ll])]
            # overheads of records between the latest enter and the exit on l's location
            inside = np.arange(b[ll] + 1, e[ll])
            if inside.size:
                inside = inside[tm[graph.off[lis[ll]] + inside] >= enter_m_j]
            o_inside = float(np.sum(graph.rovh[graph.off[lis[ll]] + inside])) \
                if inside.size else 0.0
            by_exit[ll] = max(0.0, exit_m_l - enter_m_j - o_j - o_inside)
        out[i] = by_exit[ll]
    return out
