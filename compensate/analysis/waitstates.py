"""The KOJAK/Scalasca wait-state patterns: Late Sender, Late Receiver, Wait at N×N,
Wait at Barrier, Late Broadcast, Early Reduce, and Wait at Create / Wait at Free
for communicator and window creation and freeing (Score-P's handle collectives),
the MPI-4 partitioned Late Sender / Late Receiver
(:mod:`compensate.analysis.partitioned`) and the MPI one-sided patterns (Late Post,
Early Transfer, Early Wait, Late Complete, Wait at Fence, Early Fence, Lock
Competition: :mod:`compensate.analysis.rma`) (definitions: docs/analysis.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compensate.analysis.calls import (
    _BARRIER,
    STANDARD_SEND_REGIONS,
    SYNC_SEND_REGIONS,
    WAIT_STATES,
    Calls,
    _region_lookup,
    calls_of,
    trace_origin,
)
from compensate.analysis.partitioned import partitioned_waits
from compensate.analysis.rma import rma_waits
from compensate.matching import Matching, match
from compensate.matching.collectives import CREATE, FREE, N_TO_N, N_TO_ONE, ONE_TO_N
from compensate.model import Definitions, Trace

#: Synchronising classes whose members wait for the last enter, and their wait state
#: (barriers are told apart by their operation).
_NXN_STATES = {N_TO_N: "wait_nxn", CREATE: "wait_create", FREE: "wait_free"}


@dataclass
class WaitStates:
    """Waiting time per wait state and location (seconds).

    ``instances[state]`` lists every positive wait as ``(location, start, seconds)``
    with ``start`` relative to the trace origin (where the waiting begins: the
    receive's enter for Late Sender, the send's enter for Late Receiver, the
    member's enter for the collective patterns).
    """

    by_location: dict[str, dict[int, float]]
    instances: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)

    def total(self, state: str) -> float:
        return sum(self.by_location[state].values())

    def count(self, state: str) -> int:
        return len(self.instances.get(state, ()))

    def at(self, loc: int) -> float:
        """All waiting time on location ``loc``."""
        return sum(self.by_location[s].get(loc, 0.0) for s in WAIT_STATES)

    def to_dict(self) -> dict:
        return {s: {"total": self.total(s), "count": self.count(s),
                    "by_location": {str(k): v for k, v in self.by_location[s].items()}}
                for s in WAIT_STATES}


def _call_times(calls: Calls, idx: np.ndarray, time: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(enter time, end time, call position) of the call around each record; a record
    outside any call stands for itself (enter = end = its own time)."""
    pos = calls.enclosing(idx)
    inside = pos >= 0
    p = np.maximum(pos, 0)
    own = time[idx] if len(idx) else np.zeros(0, dtype=np.int64)
    t0 = np.where(inside, calls.t0[p] if len(calls) else own, own)
    t1 = np.where(inside, calls.t1[p] if len(calls) else own, own)
    return t0, t1, pos


def wait_states(trace: Trace, matching: Matching | None = None, *,
                eager_limit: int | None = None,
                calls: dict[int, Calls] | None = None) -> WaitStates:
    """Detect the wait states of ``trace`` (definitions in docs/analysis.md).

    ``eager_limit``: MPI_Send messages larger than this many bytes are synchronous
    (rendezvous), smaller ones never wait for the receiver. Without it, whether an
    MPI_Send waited is inferred from its timing (see :func:`_late_receiver`).
    """
    defs = trace.definitions
    res = float(defs.timer_resolution)
    matching = matching if matching is not None else match(trace, eager_limit=eager_limit)
    calls = calls if calls is not None else calls_of(trace)
    origin = trace_origin(trace)
    locs = sorted(trace.events)
    by_loc = {s: dict.fromkeys(locs, 0.0) for s in WAIT_STATES}
    inst: dict[str, list[tuple[int, float, float]]] = {s: [] for s in WAIT_STATES}

    def add(state: str, loc: np.ndarray, start: np.ndarray, wait: np.ndarray) -> None:
        keep = wait > 0
        for lc, st, w in zip(loc[keep].tolist(), start[keep].tolist(), wait[keep].tolist(),
                             strict=True):
            by_loc[state][lc] = by_loc[state].get(lc, 0.0) + w / res
            inst[state].append((lc, (st - origin) / res, w / res))

    # --- point to point: per message, the send call and the receive call (for a
    # nonblocking receive, the completion call that holds the MpiIrecv record)
    msgs = [x for x in matching.messages if x.send_loc != x.recv_loc]  # self: no waiting
    if msgs:
        n = len(msgs)
        s_loc = np.fromiter((x.send_loc for x in msgs), np.int64, n)
        s_idx = np.fromiter((x.send_idx for x in msgs), np.int64, n)
        r_loc = np.fromiter((x.recv_loc for x in msgs), np.int64, n)
        r_idx = np.fromiter((x.recv_idx for x in msgs), np.int64, n)
        size = np.fromiter((x.size for x in msgs), np.int64, n)
        known_sync = np.fromiter((x.synchronous for x in msgs), bool, n)
        # where a nonblocking receive was posted (its MpiIrecvRequest), if recorded
        post = np.fromiter((x.recv_post_idx if x.nonblocking_recv and x.recv_post_idx >= 0
                            and x.recv_post_idx != x.recv_idx and not x.no_recv_copy else -1
                            for x in msgs), np.int64, n)
        s_e, s_x, r_e, r_x, r_post = (np.zeros(n, np.int64) for _ in range(5))
        s_region = np.full(n, -1, dtype=np.int64)
        r_call = np.full(n, -1, dtype=np.int64)
        for loc in np.unique(np.concatenate([s_loc, r_loc])):
            c = calls[int(loc)]
            t = c.events.time
            sel = np.flatnonzero(s_loc == loc)
            s_e[sel], s_x[sel], pos = _call_times(c, s_idx[sel], t)
            s_region[sel] = np.where(pos >= 0, c.region[np.maximum(pos, 0)] if len(c) else -1,
                                     -1)
            sel = np.flatnonzero(r_loc == loc)
            r_e[sel], r_x[sel], r_call[sel] = _call_times(c, r_idx[sel], t)
            r_post[sel] = r_e[sel]
            sel = sel[post[sel] >= 0]
            r_post[sel], _, _ = _call_times(c, post[sel], t)
        # Late Sender: the receiver entered before the sender; bounded by the receive
        # call, and counted once per call (the latest sender) when a call such as
        # MPI_Waitall completes several receives
        wait = np.clip(s_e - r_e, 0, r_x - r_e)
        key = np.where(r_call >= 0, r_call, -1 - np.arange(n))  # unique if not in a call
        order = np.lexsort((-wait, key, r_loc))
        first = np.ones(n, dtype=bool)
        first[1:] = (r_loc[order][1:] != r_loc[order][:-1]) | (key[order][1:] != key[order][:-1])
        keep = order[first]
        add("late_sender", r_loc[keep], r_e[keep], wait[keep])
        wait = _late_receiver(defs, s_e, s_x, r_post, s_region, size, known_sync, eager_limit)
        add("late_receiver", s_loc, s_e, wait)

    # --- collectives: member enter/end = the enclosing call (else the begin/end record)
    for ins in matching.instances:
        n = len(ins.locs)
        if n < 2 or ins.cls not in (*_NXN_STATES, ONE_TO_N, N_TO_ONE) or ins.nonblocking \
                or not ins.synchronising:
            continue
        enter = np.zeros(n, np.int64)
        end = np.zeros(n, np.int64)
        for k, (loc, b, e) in enumerate(zip(ins.locs, ins.begin_idx, ins.end_idx, strict=True)):
            c = calls[loc]
            t = c.events.time
            t0, _, _ = _call_times(c, np.array([b]), t)
            _, t1, _ = _call_times(c, np.array([e]), t)
            enter[k], end[k] = t0[0], t1[0]
        locs_a = np.asarray(ins.locs, dtype=np.int64)
        span = end - enter
        if ins.cls in _NXN_STATES:
            state = "wait_barrier" if ins.op == _BARRIER else _NXN_STATES[ins.cls]
            add(state, locs_a, enter, np.clip(enter.max() - enter, 0, span))
            continue
        r = ins.locs.index(ins.root)
        others = np.arange(n) != r
        if ins.cls == ONE_TO_N:
            add("late_broadcast", locs_a[others], enter[others],
                np.clip(enter[r] - enter[others], 0, span[others]))
        else:
            w = np.clip(enter[others].max() - enter[r], 0, span[r])
            add("early_reduce", locs_a[r:r + 1], enter[r:r + 1], np.array([w]))
    # --- MPI-4 partitioned (compensate.analysis.partitioned)
    if matching.partitioned.transfers:
        for state, (loc, start, wait) in partitioned_waits(matching, calls,
                                                           _call_times).items():
            add(state, loc, start, wait)
    # --- MPI one-sided communication (compensate.analysis.rma)
    if matching.rma.links or matching.rma.collectives:
        for state, (loc, start, wait) in rma_waits(trace, matching, calls,
                                                   _call_times).items():
            add(state, loc, start, wait)
    return WaitStates(by_loc, inst)


def _late_receiver(defs: Definitions, s_e: np.ndarray, s_x: np.ndarray, r_post: np.ndarray,
                   s_region: np.ndarray, size: np.ndarray, known_sync: np.ndarray,
                   eager_limit: int | None) -> np.ndarray:
    """Ticks each send call waited for its receive to be posted (0 where it did not).

    ``r_post`` is where the receive was posted: the Enter of a blocking receive
    call, the Enter of the MPI_Irecv call of a nonblocking one. A send waits only if
    the receive was posted while the send call ran (``s_e < r_post < s_x``) and the
    send was synchronous: matched as synchronous (MPI_Ssend, or MPI_Send above the
    eager limit given to :func:`compensate.matching.match`); an MPI_Ssend; an
    MPI_Send above ``eager_limit``; or, without an eager limit, an MPI_Send whose call
    went on after the receive was posted at most as long as it had run before it
    (``r_post - s_e >= s_x - r_post``). An eager send lasts its local buffer copy
    whatever the receiver does, so this rule can misread at most half of such a copy
    as waiting; a rendezvous send that waited less than its transfer took is missed.
    """
    sync = known_sync | _region_lookup(defs, s_region, SYNC_SEND_REGIONS.__contains__
                                       ).astype(bool)
    standard = _region_lookup(defs, s_region, STANDARD_SEND_REGIONS.__contains__).astype(bool)
    if eager_limit is not None:
        sync |= standard & (size > eager_limit)
    else:
        sync |= standard & (r_post - s_e >= s_x - r_post)
    overlapped = (s_e < r_post) & (r_post < s_x)
    return np.where(sync & overlapped, r_post - s_e, 0)


# ---------------------------------------------------------------------------------
# behaviour breakdown and comparison
