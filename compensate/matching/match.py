"""Link the records that depend on each other across locations (docs/design.md §4).

* Point-to-point: per (sender, receiver, communicator, tag) the k-th MpiSend matches
  the k-th MpiRecv (MPI's non-overtaking rule); ranks are mapped to locations
  through the communicator's group.
* Collectives: on each communicator, the k-th MpiCollectiveEnd of every member
  belongs to instance k; its "enter" is the MpiCollectiveBegin before it.
* Call structure: for every send and receive, the Enter of the enclosing MPI call
  (``enter.recv``) and the Leave that ends it (``exit.send``), which the
  compensation rules compare.

Structural problems (time going backwards, Leave without Enter, a receive without a
send, a collective instance with missing members) raise :class:`TraceError` naming
the file, the location(s) and the record index.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from compensate.matching.collectives import (
    N_TO_ONE,
    ONE_TO_N,
    Instance,
    classify_instance,
    collective_class,
)
from compensate.matching.p2p import Message, MessageTable, match_p2p
from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OP_NAMES,
    ENTER,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    KIND_NAMES,
    LEAVE,
    NBC_COMPLETE,
    NBC_REQUEST,
    REQUEST_CANCELLED,
    Events,
    Trace,
    TraceError,
)


@dataclass
class Matching:
    """The dependencies of a trace: matched messages (as columns, :attr:`table`) and
    collective instances. :attr:`messages` gives the messages as objects."""

    table: MessageTable = field(default_factory=MessageTable.empty)
    instances: list[Instance] = field(default_factory=list)
    unmatched_sends: int = 0
    cancelled_requests: int = 0
    unknown_ops: int = 0

    @cached_property
    def messages(self) -> list[Message]:
        """Every matched message as a :class:`Message` (built on first use)."""
        return self.table.rows()

    def counts(self) -> dict:
        """How many dependencies of each kind the trace has (for the summary)."""
        t = self.table
        by_cls: dict[str, int] = {}
        for inst in self.instances:
            key = inst.cls + (" nonblocking" if inst.nonblocking else "") + (
                "" if inst.synchronising else " (local)")
            by_cls[key] = by_cls.get(key, 0) + 1
        return {
            "messages": len(t),
            "blocking": int(np.count_nonzero(~t.nonblocking_send & ~t.nonblocking_recv)),
            "nonblocking_send": int(np.count_nonzero(t.nonblocking_send)),
            "nonblocking_recv": int(np.count_nonzero(t.nonblocking_recv)),
            "synchronous": int(np.count_nonzero(t.synchronous)),
            "to_self": int(np.count_nonzero(t.send_li == t.recv_li)),
            "unmatched_sends": self.unmatched_sends,
            "cancelled_requests": self.cancelled_requests,
            "collectives": dict(sorted(by_cls.items())),
            "unknown_collective_ops": self.unknown_ops,
        }


def _where(trace: Trace, loc: int, idx: int | None = None) -> dict:
    return {"source": trace.source, "location": loc, "index": idx}


def check_structure(trace: Trace, loc: int, ev: Events) -> tuple[np.ndarray, dict, dict]:
    """Check time order and Enter/Leave nesting on one location.

    Returns (depth before each record, {depth: Enter indices whose call opens that
    depth}, {depth: Leave indices closing that depth}).
    """
    t = ev.time
    if len(t) > 1:
        back = np.flatnonzero(np.diff(t) < 0)
        if back.size:
            i = int(back[0]) + 1
            raise TraceError(
                f"time {int(t[i])} is before the previous record's {int(t[i - 1])}",
                **_where(trace, loc, i))
    step = np.where(ev.kind == ENTER, 1, 0) - np.where(ev.kind == LEAVE, 1, 0)
    after = np.cumsum(step)
    before = after - step
    if after.size and after.min() < 0:
        i = int(np.flatnonzero(after < 0)[0])
        raise TraceError("Leave without a matching Enter", **_where(trace, loc, i))
    enters_idx = np.flatnonzero(ev.kind == ENTER)
    leaves_idx = np.flatnonzero(ev.kind == LEAVE)
    enters: dict[int, np.ndarray] = {}
    leaves: dict[int, np.ndarray] = {}
    if enters_idx.size:
        d_e = after[enters_idx]
        order = np.argsort(d_e, kind="stable")
        for d, grp in _split_by(d_e[order], enters_idx[order]):
            enters[d] = grp
    if leaves_idx.size:
        d_l = before[leaves_idx]
        order = np.argsort(d_l, kind="stable")
        for d, grp in _split_by(d_l[order], leaves_idx[order]):
            leaves[d] = grp
    # At each depth, Enters and Leaves alternate: the k-th Leave closes the k-th Enter.
    for d, lv in leaves.items():
        en = enters.get(d, np.zeros(0, dtype=np.int64))
        k = min(len(en), len(lv))
        bad = np.flatnonzero(ev.region[en[:k]] != ev.region[lv[:k]])
        if bad.size:
            i = int(lv[bad[0]])
            raise TraceError(
                f"Leave of region {int(ev.region[i])} does not match the open Enter of "
                f"region {int(ev.region[en[bad[0]]])} (record {int(en[bad[0]])})",
                **_where(trace, loc, i))
    return before, enters, leaves


def _split_by(keys: np.ndarray, values: np.ndarray):
    if keys.size == 0:
        return
    cuts = np.flatnonzero(np.diff(keys)) + 1
    for k, v in zip(np.split(keys, cuts), np.split(values, cuts), strict=True):
        yield int(k[0]), v


def _posting_records(trace: Trace, loc: int, ev: Events) -> tuple[dict, set]:
    """For one location: {MpiIrecv/NonBlockingCollectiveComplete index: index of the
    request record that posted it}, and the indices of cancelled MpiIsend /
    MpiIrecvRequest records. Request ids are reused once a request completes, so the
    posting record is the latest one with that id before the completion."""
    posted: dict[int, int] = {}
    cancelled: set[int] = set()
    open_p2p: dict[int, int] = {}
    open_nbc: dict[int, int] = {}
    kinds = ev.kind
    for i in np.flatnonzero(np.isin(kinds, (ISEND, IRECV_REQUEST, IRECV, REQUEST_CANCELLED,
                                            NBC_REQUEST, NBC_COMPLETE))).tolist():
        k, r = int(kinds[i]), int(ev.request[i])
        if k in (ISEND, IRECV_REQUEST):
            open_p2p[r] = i
        elif k == NBC_REQUEST:
            open_nbc[r] = i
        elif k == IRECV:
            posted[i] = open_p2p.pop(r, i)  # no request record: posted where completed
        elif k == NBC_COMPLETE:
            if r not in open_nbc:
                raise TraceError(f"NonBlockingCollectiveComplete of request {r} without its "
                                 f"NonBlockingCollectiveRequest", **_where(trace, loc, i))
            posted[i] = open_nbc.pop(r)
        elif k == REQUEST_CANCELLED and r in open_p2p:
            cancelled.add(open_p2p.pop(r))
    return posted, cancelled


def match(trace: Trace, eager_limit: int | None = None) -> Matching:
    """Check structure and link sends to receives and collective ends into instances.

    ``eager_limit``: blocking MPI_Send messages larger than this many bytes are
    treated as synchronous (rendezvous), like MPI_Ssend always is.
    """
    defs = trace.definitions
    result = Matching()
    structure = {}
    posting = {}
    for loc, ev in trace.events.items():
        if loc not in defs.locations:
            raise TraceError("records for an undefined location", **_where(trace, loc))
        structure[loc] = check_structure(trace, loc, ev)
        posting[loc] = _posting_records(trace, loc, ev)
        result.cancelled_requests += len(posting[loc][1])

    for matcher in MATCHERS:
        matcher(trace, structure, posting, eager_limit, result)
    return result


def match_collectives(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
                      result: Matching) -> None:
    """Collective instances: per communicator, the k-th collective each member posted
    (blocking MpiCollectiveBegin or NonBlockingCollectiveRequest) is instance k."""
    defs = trace.definitions
    ops_of: dict = defaultdict(lambda: defaultdict(list))  # key -> loc -> [(post, end)]
    for loc, ev in trace.events.items():
        end_idx = np.flatnonzero(ev.kind == COLL_END)
        begin_idx = np.flatnonzero(ev.kind == COLL_BEGIN)
        # every End needs its own Begin: Begins and Ends alternate on a location
        if len(begin_idx) != len(end_idx) or np.any(begin_idx > end_idx) or (
                len(end_idx) > 1 and np.any(begin_idx[1:] < end_idx[:-1])):
            i = _first_unpaired(begin_idx, end_idx)
            raise TraceError("MpiCollectiveBegin/MpiCollectiveEnd do not pair up",
                             **_where(trace, loc, i))
        pairs = list(zip(begin_idx.tolist(), end_idx.tolist(), strict=True))
        posted = posting[loc][0]
        pairs += [(posted[i], i) for i in np.flatnonzero(ev.kind == NBC_COMPLETE).tolist()]
        for b, i in sorted(pairs):
            comm = int(ev.comm[i])
            if comm not in defs.comms:
                raise TraceError(f"{KIND_NAMES[ev.kind[i]]} on undefined communicator {comm}",
                                 **_where(trace, loc, i))
            key = comm if defs.comms[comm].members else (comm, loc)
            ops_of[key][loc].append((b, i))
    for key, per_loc in ops_of.items():
        comm = key if isinstance(key, int) else key[0]
        members = defs.comms[comm].members or (key[1],)
        counts = {m: len(per_loc.get(m, ())) for m in members}
        n = max(counts.values())
        for m, c in counts.items():
            if c < n:
                other = next(x for x in members if counts[x] == n)
                raise TraceError(
                    f"collective instance {c} on communicator {comm} has no member on "
                    f"location {m} (location {m} has {c} collective operations on it, "
                    f"location {other} has {n})",
                    source=trace.source, location=other, index=per_loc[other][c][1])
        for k in range(n):
            begins = [per_loc[m][k][0] for m in members]
            idx = [per_loc[m][k][1] for m in members]
            evs = [trace.events[m] for m in members]
            ops = {int(e.op[i]) for e, i in zip(evs, idx, strict=True)}
            if len(ops) > 1:
                raise TraceError(
                    f"collective instance {k} on communicator {comm} mixes operations "
                    f"{sorted(COLLECTIVE_OP_NAMES.get(o, str(o)) for o in ops)}",
                    source=trace.source, location=members[0], index=idx[0])
            op = ops.pop()
            cls, known = collective_class(op)
            if not known:
                result.unknown_ops += 1
            root_rank = int(evs[0].peer[idx[0]])
            root = members[root_rank] if 0 <= root_rank < len(members) else -1
            if cls in (ONE_TO_N, N_TO_ONE) and root < 0:
                raise TraceError(
                    f"{COLLECTIVE_OP_NAMES[op]} instance {k} on communicator {comm} has no "
                    f"valid root (rank {root_rank})", source=trace.source,
                    location=members[0], index=idx[0])
            inst = Instance(
                comm=comm, op=op, cls=cls, known_op=known, root=root, locs=list(members),
                begin_idx=begins, end_idx=idx,
                size_sent=[int(e.size[i]) for e, i in zip(evs, idx, strict=True)],
                size_recv=[int(e.size_recv[i]) for e, i in zip(evs, idx, strict=True)],
                nonblocking=any(int(e.kind[i]) == NBC_COMPLETE
                                for e, i in zip(evs, idx, strict=True)))
            classify_instance(inst, [int(e.time[b]) for e, b in zip(evs, begins, strict=True)],
                              [int(e.time[i]) for e, i in zip(evs, idx, strict=True)])
            result.instances.append(inst)


def match_messages(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
                   result: Matching) -> None:
    """Point-to-point: FIFO queues of sends per (sender, receiver, comm, tag), in
    posting order; receives take them in *their* posting order (MPI non-overtaking)."""
    result.table, result.unmatched_sends = match_p2p(trace, structure, posting, eager_limit)


#: What :func:`match` links, one matcher per family of records, each filling its
#: part of the :class:`Matching` (a new kind of dependency adds a matcher here and a
#: handler in :mod:`compensate.engine.kinds`).
MATCHERS = (match_messages, match_collectives)


def _first_unpaired(begin_idx: np.ndarray, end_idx: np.ndarray) -> int:
    """Index of the first record where Begin/End alternation breaks."""
    seq = sorted([(int(i), 0) for i in begin_idx] + [(int(i), 1) for i in end_idx])
    open_ = False
    for i, is_end in seq:
        if is_end and not open_:
            return i
        if not is_end and open_:
            return i
        open_ = not is_end
    return seq[-1][0] if seq else 0


__all__ = ["MATCHERS", "Matching", "check_structure", "match"]
