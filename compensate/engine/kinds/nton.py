"""n-to-n collectives (R3: Barrier, Allreduce, Allgather(v), Alltoall(v/w),
Reduce_scatter(_block), and operations of unknown class, conservatively): nobody
leaves before the last member entered; then the operation takes the measured
synchronisation time (eq. 12 ``uniform`` or eq. 13 ``per-process``).

Matching: :mod:`compensate.matching.collectives` (class ``n-to-n``). Every member's
MpiCollectiveEnd depends on every member's MpiCollectiveBegin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.pending import Pending, PendingLatest, SharedNeeds
from compensate.engine.rules import TICK, Context, Latest, Need, Ref, Rule, at
from compensate.matching import Instance
from compensate.matching.collectives import N_TO_N, SYNCHRONISING


class NToN(Rule):
    """R3 (and scans): exit after the latest approximated enter plus the measured
    synchronisation time, and strictly after the member's own enter."""

    __slots__ = ("latest", "sync", "own")

    def __init__(self, latest: Latest, sync: float, own: Ref, needs: list[Need]) -> None:
        self.latest, self.sync, self.own, self.needs = latest, sync, own, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        return max(self.latest.get(A) + self.sync, at(A, self.own) + TICK)


def build(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict,
          syncs: Sequence[float] | Mapping[int, float] | None = None) -> None:
    """One :class:`NToN` rule per member whose exit the graph evaluates (not on a
    ghost location: another rank builds that one); all share the latest enter.
    ``syncs``: every member's synchronisation time if known (:func:`sync_table`)."""
    everyone = list(range(len(inst.locs)))
    who = graph.evaluated(lis)
    if not who:
        return
    begins = [(lis[j], inst.begin_idx[j]) for j in everyone]
    latest, needs = PendingLatest(begins), SharedNeeds(begins)
    if syncs is None:
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


def sync_table(graph: Graph, instances: list[Instance]) -> dict[int, list[float]]:
    """:func:`sync_times` of every member of the blocking n-to-n ``instances`` (by
    instance number), computed as one array per member count: the same float
    operations in the same order, so the same values. Empty where buffer flushes
    may have delayed a joining (the per-instance path handles them)."""
    if graph.flushes.any:
        return {}
    groups: dict[int, list[int]] = {}
    for n, inst in enumerate(instances):
        if inst.cls == N_TO_N and not inst.nonblocking:
            groups.setdefault(len(inst.locs), []).append(n)
    out: dict[int, list[float]] = {}
    for numbers in groups.values():
        rows = _group_syncs(graph, [instances[n] for n in numbers])
        out.update(zip(numbers, rows.tolist(), strict=True))
    return out


def _group_syncs(graph: Graph, group: list[Instance]) -> np.ndarray:
    """:func:`sync_times` of every member (columns) of instances of one size (rows)."""
    pos = np.array([graph.pos_of[loc] for inst in group for loc in inst.locs],
                   dtype=np.int64).reshape(len(group), -1)
    base = graph.off[pos]
    gb = base + np.array([inst.begin_idx for inst in group], dtype=np.int64)
    ge = base + np.array([inst.end_idx for inst in group], dtype=np.int64)
    tm = graph.tm
    ovh = np.where(graph.device[gb], graph.dev_ovh, graph.rovh[gb])
    rows = np.arange(len(group))[:, None]
    jj = np.argmax(tm[gb] + ovh, axis=1)[:, None]  # the latest joining
    enter, o_j = tm[gb][rows, jj], ovh[rows, jj]
    if graph.collective_exit == "uniform" and N_TO_N in SYNCHRONISING:
        ll = np.broadcast_to(np.argmin(tm[ge], axis=1)[:, None], gb.shape)
    else:
        ll = np.broadcast_to(np.arange(gb.shape[1]), gb.shape)
    start, stop = gb[rows, ll] + 1, ge[rows, ll]
    x = tm[stop] - enter - o_j - _inside(graph, start.ravel(), stop.ravel(),
                                         np.broadcast_to(enter, start.shape).ravel()
                                         ).reshape(start.shape)
    return np.where(x > 0.0, x, 0.0)  # (Python's max(0.0, x))


def _inside(graph: Graph, start: np.ndarray, stop: np.ndarray, enter: np.ndarray
            ) -> np.ndarray:
    """Per range [start, stop) of global records: the sum of the overheads of its
    records stamped at or after ``enter``, as ``np.sum`` sums them (of two or more,
    by ``np.sum`` itself: its order of additions is its own)."""
    n = np.maximum(stop - start, 0)
    out = np.zeros(len(start))
    if not n.any():
        return out
    first = np.cumsum(n) - n
    owner = np.repeat(np.arange(len(start)), n)
    idx = np.arange(int(n.sum())) - np.repeat(first, n) + np.repeat(start, n)
    taken = graph.tm[idx] >= enter[owner]
    kept = np.bincount(owner[taken], minlength=len(start))
    one = taken & (kept[owner] == 1)
    out[owner[one]] = graph.rovh[idx[one]]
    for k in np.flatnonzero(kept > 1).tolist():
        block = slice(int(first[k]), int(first[k] + n[k]))
        out[k] = float(np.sum(graph.rovh[idx[block][taken[block]]]))
    return out
