"""Processes whose clocks disagree with their messages: constant offsets that align them.

A message is received after it was sent. A trace in which a matched receive is
stamped *before* its send has processes on different time axes: the tracer
took each process's timestamps from a clock of its own (EZTrace 2.0, for one,
counts every process's time from its own start and writes no ClockOffset
definition). Compensating such a trace as it is would push every receive behind
its send and add the clocks' difference to the run at every message.

Threads of one process share its clock, so the unknown is one constant offset
``d[p]`` per process (location group), the time on process ``p``'s clock plus
``d[p]`` being the common time. Each message from ``a`` to ``b`` says
``d[b] - d[a] >= t_send - t_recv``; messages the other way bound it from above.
Collectives say the same as messages: no member leaves an n-to-n operation
before every member has entered it (taken between its first member and each
other, both ways), a 1-to-n one before its root has entered, and the root of an
n-to-1 one leaves after every member has entered.
For each pair of processes that exchanged messages, the offset is the value of
that interval nearest 0: the smallest shift that puts every message between them
in order, which moves no record more than the trace demands. (The middle of the
interval, the classic two-way estimate, assumes equal transfer times both ways;
on a loaded machine, where a transfer can wait milliseconds for its receiver to
be scheduled, it moved a 2-rank EZTrace ring by 2.8 ms where 94 µs ordered every
message.) Where the interval is empty (the clocks drift) its middle is taken.
The pairs are chained from the first process along a breadth-first spanning
tree; where that breaks a bound between two processes the tree does not link (a
ring of three, whose third pair only its messages relate) and some offsets meet
every bound, the processes are fixed one by one in the tree's order within what
the bounds through all of them allow. Only a trace that violates the order (some receive before its
send) is changed: a trace whose clocks agree with every message keeps its times.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from compensate.matching.collectives import N_TO_N, N_TO_ONE, ONE_TO_N, Instance
from compensate.matching.nomessage import times_at
from compensate.matching.p2p import MessageTable, peer_locations
from compensate.model import BUFFER_FLUSH, IRECV, ISEND, RECV, SEND, Definitions, Events, Trace


@dataclass(frozen=True)
class ClockAlignment:
    """What :func:`align_clocks` did: the receives stamped before their sends, the
    largest such inversion (ticks) and the offset added to each process's records
    (location-group id -> ticks, only those not 0)."""

    inverted: int
    worst: int
    offsets: dict[int, int]

    def to_dict(self, resolution: int) -> dict:
        """The summary's ``clock_alignment`` object (seconds)."""
        return {"receives_before_send": self.inverted, "worst_s": self.worst / resolution,
                "offsets_s": {str(g): d / resolution for g, d in sorted(self.offsets.items())}}


def _collective_pairs(instances: list[Instance]) -> tuple[list, list]:
    """The (location, record) pairs of the orders collectives imply: (earlier, later)."""
    early, late = [], []
    for inst in instances:
        if not inst.synchronising or len(inst.locs) < 2:
            continue
        members = list(zip(inst.locs, inst.begin_idx, inst.end_idx, strict=True))
        root = next((m for m in members if m[0] == inst.root), members[0])
        for m in members:
            if m is root:
                continue
            if inst.cls in (N_TO_N, ONE_TO_N):  # root's enter -> member's exit
                early.append((root[0], root[1]))
                late.append((m[0], m[2]))
            if inst.cls in (N_TO_N, N_TO_ONE):  # member's enter -> root's exit
                early.append((m[0], m[1]))
                late.append((root[0], root[2]))
    return early, late


#: per order (a message, or one a collective implies): the earlier record's and the
#: later record's process, and their times (:func:`orders`)
Orders = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def orders(trace: Trace, table: MessageTable, instances: list[Instance] = (),
           receivers: set[int] | None = None) -> Orders:
    """Per message (not the probe rows) and per order a collective implies: the
    earlier record's and the later record's process, and their times; with
    ``receivers``, only those whose later record is on one of these locations."""
    rows = ~table.probe
    if receivers is not None and len(table):
        on = np.array([loc in receivers for loc in table.loc_ids], dtype=bool)
        rows &= on[table.recv_li]
    defs = trace.definitions
    proc_of = np.array([defs.process_of(loc) for loc in table.loc_ids] or [0], dtype=np.int64)
    s_li, r_li = table.send_li[rows], table.recv_li[rows]
    p_s, p_r = proc_of[s_li], proc_of[r_li]
    evs = [trace.events[loc] for loc in table.loc_ids]
    t_s = times_at(evs, s_li, table.send_idx[rows])
    t_r = times_at(evs, r_li, table.recv_idx[rows])
    early, late = _collective_pairs(list(instances))
    if receivers is not None:
        kept = [i for i, (loc, _) in enumerate(late) if loc in receivers]
        early, late = [early[i] for i in kept], [late[i] for i in kept]
    if early:
        pos = {loc: li for li, loc in enumerate(trace.events)}
        every = list(trace.events.values())
        proc = np.array([defs.process_of(loc) for loc in trace.events], dtype=np.int64)

        def columns(pairs):
            li = np.array([pos[loc] for loc, _ in pairs], dtype=np.int64)
            return proc[li], times_at(every, li, np.array([i for _, i in pairs], dtype=np.int64))
        (ce_p, ce_t), (cl_p, cl_t) = columns(early), columns(late)
        p_s, t_s = np.concatenate([p_s, ce_p]), np.concatenate([t_s, ce_t])
        p_r, t_r = np.concatenate([p_r, cl_p]), np.concatenate([t_r, cl_t])
    return p_s, p_r, t_s, t_r


def counted(found: Orders) -> tuple[int, int]:
    """Of ``found``, the later records stamped before the earlier one on another
    process: (count, largest in ticks)."""
    p_s, p_r, t_s, t_r = found
    ahead = (t_s - t_r)[(p_s != p_r) & (t_r < t_s)]
    return int(ahead.size), int(ahead.max()) if ahead.size else 0


def inversions(trace: Trace, table: MessageTable, instances: list[Instance] = (),
               receivers: set[int] | None = None) -> tuple[int, int]:
    """Receives stamped before their send on another process, and collective exits
    before the enter they wait for: (count, largest in ticks). ``receivers``: only
    those on these locations (a distributed rank's own)."""
    if len(table) == 0 and not instances:
        return 0, 0
    return counted(orders(trace, table, instances, receivers))


def process_offsets(trace: Trace, table: MessageTable, instances: list[Instance] = ()
                    ) -> dict[int, int]:
    """Offset (ticks) per process that puts every message's receive after its send,
    from pairwise bounds chained along a spanning tree (module docstring)."""
    return chained_offsets(bounds(orders(trace, table, instances)))


def bounds(found: Orders) -> dict[tuple[int, int], int]:
    """``{(a, b): value}``, the largest ``d[b] - d[a] >= value`` the orders ``found``
    imply. Bounds of disjoint parts merge by taking the largest per pair."""
    p_s, p_r, t_s, t_r = found
    lower: dict[tuple[int, int], int] = {}  # (a, b): d[b] - d[a] >= value
    # a receive at least one tick after its send (eq. 7): d[b] - d[a] >= t_s - t_r + 1
    for a, b, gap in zip(p_s.tolist(), p_r.tolist(), (t_s - t_r + 1).tolist(), strict=True):
        if a != b and gap > lower.get((a, b), -(1 << 62)):
            lower[(a, b)] = gap
    return lower


#: processes up to which :func:`chained_offsets` solves every pair's bounds at once
#: (all pairs' longest chains of bounds: memory and time grow as its square and cube)
JOINT_LIMIT = 512


def chained_offsets(lower: dict[tuple[int, int], int]) -> dict[int, int]:
    """Offset (ticks) per process from the pairwise bounds ``lower``
    (:func:`bounds`), chained from the first process along a breadth-first
    spanning tree. Where that breaks a bound between two processes off the tree
    (a ring of three: 0-1 and 0-2 chained, 1-2 not looked at) and some offsets
    meet every bound, those are taken instead (:func:`_joint`)."""
    neighbours: dict[int, set[int]] = {}
    for a, b in lower:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    offsets: dict[int, int] = {}
    parent: dict[int, int] = {}
    for root in sorted(neighbours):
        if root in offsets:
            continue
        offsets[root] = 0
        todo = deque([root])
        while todo:
            a = todo.popleft()
            for b in sorted(neighbours[a]):
                if b not in offsets:
                    offsets[b] = offsets[a] + _pair_offset(lower, a, b)
                    parent[b] = a
                    todo.append(b)
    if all(offsets[b] - offsets[a] >= v for (a, b), v in lower.items()):
        return offsets
    return _joint(lower, list(offsets), parent) or offsets


def _joint(lower: dict[tuple[int, int], int], order: list[int], parent: dict[int, int]
           ) -> dict[int, int] | None:
    """Offsets that meet every bound of ``lower``, or None where none do (clocks
    that drift) or there are more than :data:`JOINT_LIMIT` processes. The
    processes are fixed in ``order`` (the spanning tree's, roots first), each at
    the value its bounds through every process fixed before it allow that is
    nearest its tree parent's (a root: 0), so that where the tree meets every
    bound this gives its offsets. The bounds through chains of processes come from
    all pairs' shortest paths (Floyd-Warshall) of ``d[a] - d[b] <= -lower[a, b]``,
    which also show whether any offsets meet them all (no negative cycle)."""
    n = len(order)
    if n > JOINT_LIMIT:
        return None
    at = {p: i for i, p in enumerate(order)}
    upper = np.full((n, n), np.inf)  # upper[u, v]: d[v] - d[u] <= upper[u, v]
    np.fill_diagonal(upper, 0.0)
    for (a, b), v in lower.items():  # d[a] - d[b] <= -v
        upper[at[b], at[a]] = min(upper[at[b], at[a]], -float(v))
    for k in range(n):
        np.minimum(upper, upper[:, k:k + 1] + upper[k:k + 1, :], out=upper)
    if (np.diag(upper) < 0).any():
        return None
    fixed = np.zeros(n, dtype=bool)
    value = np.zeros(n)
    for i, p in enumerate(order):
        high = float(np.min(value[fixed] + upper[fixed, i])) if fixed.any() else np.inf
        low = float(np.max(value[fixed] - upper[i, fixed])) if fixed.any() else -np.inf
        near = value[at[parent[p]]] if p in parent else 0.0
        value[i] = min(max(near, low), high)
        fixed[i] = True
    return {p: int(value[i]) for i, p in enumerate(order)}


def _pair_offset(lower: dict[tuple[int, int], int], a: int, b: int) -> int:
    """``d[b] - d[a]``: of the interval [lower(a->b), -lower(b->a)] the value
    nearest 0 (the smallest shift that orders every message between the two; 0 if
    they are in order), or its middle where the interval is empty (the clocks
    drift: no constant offset orders every message)."""
    lo, hi = lower.get((a, b)), lower.get((b, a))
    low = lo if lo is not None else -(1 << 62)
    high = -hi if hi is not None else 1 << 62
    if low > high:
        return (low + high) // 2
    return min(max(0, low), high)


def align_clocks(trace: Trace, table: MessageTable, instances: list[Instance] = ()
                 ) -> tuple[Trace, ClockAlignment] | None:
    """The trace with each process's records shifted by its offset, and what was
    done; None where no receive lies before its send (nothing to align)."""
    if len(table) == 0 and not instances:
        return None
    found = orders(trace, table, instances)  # (once: the count and the bounds)
    count, worst = counted(found)
    if count == 0:
        return None
    return shifted(trace, chained_offsets(bounds(found)), count, worst)


def shifted(trace: Trace, found: dict[int, int], count: int, worst: int
            ) -> tuple[Trace, ClockAlignment] | None:
    """The trace with each process's records shifted by ``found`` (made
    non-negative: no record moves earlier than measured) and what was done
    (``count`` receives before their sends, the largest by ``worst`` ticks); None
    where every process keeps its times."""
    offsets = normalised(found)  # no record moves earlier than measured
    if not offsets:
        return None
    defs = trace.definitions
    times, sizes = {}, {}
    for loc, ev in trace.events.items():
        times[loc], sizes[loc] = shifted_times(ev, offsets.get(defs.process_of(loc), 0))
    return trace.with_times(times, sizes), ClockAlignment(count, worst, offsets)


def shifted_times(ev: Events, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``time`` and ``size`` columns of ``ev`` with its times moved by ``shift``
    ticks (a BufferFlush's stop time, in ``size``, is a time too)."""
    if not shift:
        return ev.time, ev.size
    shift = np.int64(shift)
    flush = ev.kind == BUFFER_FLUSH
    return ev.time + shift, (np.where(flush, ev.size + shift, ev.size) if flush.any()
                             else ev.size)


def normalised(found: dict[int, int]) -> dict[int, int]:
    """The offsets ``found`` (process -> ticks, :func:`chained_offsets`) as
    :func:`shifted` applies them: none negative, the zeros left out."""
    least = min(found.values(), default=0)
    return {g: d - least for g, d in found.items() if d != least}


def first_offsets(defs: Definitions, head: dict[int, Events]) -> dict[int, int]:
    """A first estimate of the processes' offsets from the first records of a trace
    (``head``: each location's first records, as a stream's first chunks hold
    them): per channel (sender, receiver, communicator, tag) the k-th MpiSend or
    MpiIsend with the k-th MpiRecv or MpiIrecv, as far as both are in ``head``,
    chained as :func:`process_offsets` chains the whole trace's. Only a guess
    (probes, cancelled sends and posting order are not looked at): it brings the
    processes near enough that a stream can be cut while the exact offsets are
    gathered (:func:`compensate.pipeline.run.clock_pass`); {} where every message
    it pairs is in order."""
    sends = _channel_rows(defs, head, (SEND, ISEND), True)
    recvs = _channel_rows(defs, head, (RECV, IRECV), False)
    if not sends.shape[1] or not recvs.shape[1]:
        return {}
    _, key = np.unique(np.concatenate([sends[:4], recvs[:4]], axis=1), axis=1,
                       return_inverse=True)
    key = key.ravel()
    width = key.size + 1  # (more than any key has rows)
    code_s = _nth_of_key(key[:sends.shape[1]], sends[4], width)
    code_r = _nth_of_key(key[sends.shape[1]:], recvs[4], width)
    _, i, j = np.intersect1d(code_s, code_r, assume_unique=True, return_indices=True)
    # each pair's sender and receiver location (the head's own: column 0 of a
    # send's row, 1 of a receive's) to its process, once per location
    ids, at = np.unique(np.concatenate([sends[0, i], recvs[1, j]]), return_inverse=True)
    proc = np.array([defs.process_of(int(x)) for x in ids], dtype=np.int64)[at.ravel()]
    p_s, p_r = proc[:i.size], proc[i.size:]
    return normalised(chained_offsets(bounds((p_s, p_r, sends[4, i], recvs[4, j]))))


def _channel_rows(defs: Definitions, head: dict[int, Events], kinds: tuple, sending: bool
                  ) -> np.ndarray:
    """Rows (sender, receiver, communicator, tag, time) of the records of ``kinds``
    in ``head`` (their peer rank taken to its location; ``sending``: the record's
    location is the sender)."""
    parts = []
    for loc, ev in head.items():
        idx = np.flatnonzero(np.isin(ev.kind, kinds))
        parts.append(np.vstack([np.full(idx.size, loc, dtype=np.int64)]
                               + [getattr(ev, f)[idx].astype(np.int64)
                                  for f in ("comm", "peer", "tag", "time")]))
    if not parts:
        return np.zeros((5, 0), dtype=np.int64)
    here, comm, peer, tag, time = np.concatenate(parts, axis=1)
    other = peer_locations(defs, comm, peer, here)
    ok = other >= 0  # (a rank the communicator does not have, or no communicator)
    pair = [here, other] if sending else [other, here]
    return np.vstack(pair + [comm, tag, time])[:, ok]


def _nth_of_key(key: np.ndarray, time: np.ndarray, width: int) -> np.ndarray:
    """Per row, a code unique to (its key, its place among the key's rows in time
    order): ``key * width + place``."""
    order = np.lexsort((time, key))
    k = key[order]
    start = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    nth = np.arange(k.size) - np.repeat(start, np.diff(np.r_[start, k.size]))
    code = np.empty(k.size, dtype=np.int64)
    code[order] = k * width + nth
    return code
