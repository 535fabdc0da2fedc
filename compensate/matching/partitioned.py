"""MPI-4 partitioned point-to-point: which records depend on which (issue #20;
rule R11 of docs/compensation.md).

The records are the seed's events (``MpiPsendInit`` ... ``MpiPrecvComplete``,
:mod:`compensate.model`). On each location a request id names one partitioned
operation from its Init record on (a later Init with the same id starts a new
operation); each ``MpiPsendRequest`` / ``MpiPrecvRequest`` (MPI_Start) starts the
next *round* of it, which its ``MpiPsendComplete`` / ``MpiPrecvComplete`` ends.

Matching, as MPI defines it: partitioned operations match by envelope (sender,
receiver, communicator, tag; no wildcards) in the order of their *initialisation*
-- the k-th MpiPsendInit from s to r with (comm, tag) pairs with the k-th
MpiPrecvInit on r from s with (comm, tag) -- not in the order of MPI_Start. Round
n of the send pairs with round n of the receive (each start of a persistent
operation is the next transfer).

Within a pair of rounds, send partition ``i`` (of ``s``) and receive partition
``j`` (of ``r``) share buffer bytes when their byte ranges overlap; for a buffer of
``B`` bytes send partition ``i`` covers ``[i·B/s, (i+1)·B/s)``. (That is the seed's
``I(j) = {⌊s·j/r⌋ … ⌈s·(j+1)/r⌉ − 1}`` for the element-wise split.) Each
overlapping pair is one :class:`PartitionMessage`, from the send partition's
``MpiPready`` to the record that *observes* receive partition ``j``: the first
``MpiParrived`` of ``j`` in the round (a successful MPI_Parrived), else the
round's ``MpiPrecvComplete`` (the completion call makes every partition
arrived). A round whose completion is missing and that observed a partition by
no Parrived has no messages for it (counted in :attr:`PartitionedDeps.unobserved`).
The send completion is local (R11: the library needs only the sender's own
Pready calls, which precede it); the verifier checks it follows them.

Bad input (a partitioned record of a request id with no Init, a partition index
outside ``0 .. partitions-1``, a Pready/Parrived outside a started round, a peer
rank outside the communicator) raises :class:`TraceError` naming the location and
the record. Operations without a partner and rounds beyond the partner's count
are counted as unmatched and stay local.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from compensate.model import (
    KIND_NAMES,
    PARRIVED,
    PARTITIONED_KINDS,
    PREADY,
    PRECV_COMPLETE,
    PRECV_INIT,
    PRECV_REQUEST,
    PSEND_COMPLETE,
    PSEND_INIT,
    PSEND_REQUEST,
    PTESTED,
    Trace,
    TraceError,
    kind_table,
)

_KINDS = np.array(sorted(PARTITIONED_KINDS), dtype=np.int16)
_PARTITIONED = kind_table(_KINDS)


@dataclass
class Round:
    """One start of a partitioned operation on one location: the start record,
    the first Pready (send) or Parrived (receive) record of every partition (-1:
    none), the Ptested records, and the completion record (-1: none)."""

    start: int
    marks: list[int]
    tested: list[int] = field(default_factory=list)
    complete: int = -1


@dataclass
class Operation:
    """A partitioned send or receive from its Init record on."""

    loc: int
    send: bool
    init: int  # index of its Init record
    peer: int  # peer location
    comm: int
    tag: int
    size: int  # bytes of the whole buffer
    parts: int
    rounds: list[Round] = field(default_factory=list)


@dataclass
class PartitionMessage:
    """Send partition -> receive partition of one round: ``send`` is the
    MpiPready record, ``recv`` the record that observed the receive partition
    (MpiParrived or MpiPrecvComplete), ``size`` the bytes they share."""

    send: tuple[int, int]
    recv: tuple[int, int]
    size: int
    send_partition: int
    recv_partition: int
    #: bytes of the whole send partition (what its Pready copies out)
    send_size: int = 0


@dataclass
class Transfer:
    """A matched pair of rounds (for the verifier and the wait-state report)."""

    send_op: Operation
    recv_op: Operation
    send_round: Round
    recv_round: Round


@dataclass
class PartitionedDeps:
    """Everything partitioned of a trace: the per-partition messages and the
    matched rounds, and what could not be matched."""

    messages: list[PartitionMessage] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    unmatched_operations: int = 0
    unmatched_rounds: int = 0
    unobserved: int = 0

    def counts(self) -> dict:
        return {"transfers": len(self.transfers), "partition_messages": len(self.messages),
                "unmatched_operations": self.unmatched_operations,
                "unmatched_rounds": self.unmatched_rounds, "unobserved": self.unobserved}


def overlap(i: int, s: int, j: int, r: int, size: int) -> tuple[bool, int]:
    """Whether send partition ``i`` of ``s`` and receive partition ``j`` of ``r``
    share buffer elements (the seed's I(j)/J(i), on the normalised buffer), and
    how many bytes of a ``size``-byte buffer they share."""
    # element-wise on a buffer of s·r units: send i = [i·r, (i+1)·r), recv j = [j·s, (j+1)·s)
    shares = max(i * r, j * s) < min((i + 1) * r, (j + 1) * s)
    lo = max(i * size // s, j * size // r)
    hi = min((i + 1) * size // s, (j + 1) * size // r)
    return shares, max(0, hi - lo)


def _operations(trace: Trace, loc: int) -> list[Operation]:
    """The partitioned operations of one location, with their rounds."""
    ev = trace.events[loc]
    defs = trace.definitions
    idx = np.flatnonzero(np.isin(ev.kind, _KINDS))
    ops: list[Operation] = []
    live: dict[int, Operation] = {}

    def fail(i: int, message: str) -> TraceError:
        return TraceError(message, source=trace.source, location=loc, index=i)

    for i in idx.tolist():
        k, req = int(ev.kind[i]), int(ev.request[i])
        name = KIND_NAMES[k]
        if k in (PSEND_INIT, PRECV_INIT):
            comm, peer = int(ev.comm[i]), int(ev.peer[i])
            try:
                peer_loc = defs.location_of(comm, peer)
            except (KeyError, IndexError):
                raise fail(i, f"{name}: rank {peer} is not in communicator {comm}") from None
            parts = int(ev.size_recv[i])
            if parts < 1:
                raise fail(i, f"{name}: {parts} partitions, expected at least 1")
            op = Operation(loc, k == PSEND_INIT, i, peer_loc, comm, int(ev.tag[i]),
                           max(0, int(ev.size[i])), parts)
            ops.append(op)
            live[req] = op
            continue
        op = live.get(req)
        if op is None:
            raise fail(i, f"{name} of request {req} without its "
                          f"{'MpiPsendInit' if k in _SEND_SIDE else 'MpiPrecvInit'}")
        if op.send != (k in _SEND_SIDE):
            raise fail(i, f"{name} of request {req}, which is a partitioned "
                          f"{'send' if op.send else 'receive'}")
        if k in (PSEND_REQUEST, PRECV_REQUEST):
            op.rounds.append(Round(i, [-1] * op.parts))
            continue
        rnd = op.rounds[-1] if op.rounds and op.rounds[-1].complete < 0 else None
        if rnd is None:
            raise fail(i, f"{name} of request {req} outside a started round (no "
                          f"{'MpiPsendRequest' if op.send else 'MpiPrecvRequest'} before it)")
        if k in (PSEND_COMPLETE, PRECV_COMPLETE):
            rnd.complete = i
            continue
        part = int(ev.size_recv[i])
        if not 0 <= part < op.parts:
            raise fail(i, f"{name}: partition {part} of request {req}, expected "
                          f"0..{op.parts - 1}")
        if k == PTESTED:
            rnd.tested.append(i)
        elif rnd.marks[part] < 0:  # the first Pready / successful Parrived counts
            rnd.marks[part] = i
    return ops


_SEND_SIDE = frozenset({PSEND_INIT, PSEND_REQUEST, PREADY, PSEND_COMPLETE})
_RECV_SIDE = frozenset({PRECV_INIT, PRECV_REQUEST, PARRIVED, PTESTED, PRECV_COMPLETE})


def match_partitioned(trace: Trace) -> PartitionedDeps:
    """The partitioned dependencies of ``trace`` (module docstring)."""
    deps = PartitionedDeps()
    sends: dict[tuple, list[Operation]] = defaultdict(list)
    recvs: dict[tuple, list[Operation]] = defaultdict(list)
    for loc, ev in trace.events.items():
        if not len(ev) or not _PARTITIONED.take(ev.kind).any():
            continue
        for op in _operations(trace, loc):
            if op.send:
                sends[(loc, op.peer, op.comm, op.tag)].append(op)
            else:
                recvs[(op.peer, loc, op.comm, op.tag)].append(op)
    for key in sorted(set(sends) | set(recvs)):
        s_ops, r_ops = sends.get(key, []), recvs.get(key, [])
        deps.unmatched_operations += abs(len(s_ops) - len(r_ops))
        for s_op, r_op in zip(s_ops, r_ops, strict=False):
            deps.unmatched_rounds += abs(len(s_op.rounds) - len(r_op.rounds))
            for s_rnd, r_rnd in zip(s_op.rounds, r_op.rounds, strict=False):
                deps.transfers.append(Transfer(s_op, r_op, s_rnd, r_rnd))
                _messages(s_op, r_op, s_rnd, r_rnd, deps)
    return deps


def _messages(s_op: Operation, r_op: Operation, s_rnd: Round, r_rnd: Round,
              deps: PartitionedDeps) -> None:
    s, r = s_op.parts, r_op.parts
    size = min(s_op.size, r_op.size)
    for j in range(r):
        obs = r_rnd.marks[j] if r_rnd.marks[j] >= 0 else r_rnd.complete
        if obs < 0:
            deps.unobserved += 1
            continue
        lo, hi = (s * j) // r, -((-s * (j + 1)) // r)  # the seed's I(j)
        for i in range(lo, min(hi, s)):
            shares, nbytes = overlap(i, s, j, r, size)
            if not shares or s_rnd.marks[i] < 0:
                continue
            share = (i + 1) * size // s - i * size // s
            deps.messages.append(PartitionMessage((s_op.loc, s_rnd.marks[i]),
                                                  (r_op.loc, obs), nbytes, i, j, share))


def fit_candidates(trace: Trace, deps: PartitionedDeps, group: int) -> list[tuple]:
    """The partition messages as rows of :func:`compensate.engine.fit._candidates`
    (send location, Pready, the Leave of its call, receive location, the Enter of
    the observing call, the observing record, bytes, 1, -1, group): several
    messages observed at one record form a group numbered from ``group`` on (only
    the last departure can show its transfer), a single one has group -1."""
    from compensate.matching.collectives import call_enter, call_leave

    by_recv: dict[tuple[int, int], list[PartitionMessage]] = defaultdict(list)
    for m in deps.messages:
        if m.send[0] != m.recv[0]:
            by_recv[m.recv].append(m)
    rows = []
    for (r_loc, r_idx), msgs in by_recv.items():
        enter = call_enter(trace.events[r_loc].kind, r_idx)
        g = group if len(msgs) > 1 else -1
        group += len(msgs) > 1
        for m in msgs:
            s_loc, s_idx = m.send
            rows.append((s_loc, s_idx, call_leave(trace.events[s_loc].kind, s_idx), r_loc,
                         enter, r_idx, m.size, 1, -1, g))
    return rows
