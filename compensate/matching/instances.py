"""Collective instances from every location's collective operations: per
communicator, the k-th operation each member posted is instance k
(:func:`compensate.matching.match.match_collectives`).

Each location's operations are taken as columns (begin, end, the end record's
op, sizes, root, the begin and end times), grouped by communicator and member,
and each communicator's instances are checked and built from one matrix per
column (instances by members): the per-member work is numpy, only the
:class:`~compensate.matching.collectives.Instance` of each instance is a Python
object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compensate.matching.collectives import (
    N_TO_ONE,
    ONE_TO_N,
    Instance,
    classify_instance,
    collective_class,
)
from compensate.matching.nomessage import root_words
from compensate.model import COLLECTIVE_OP_NAMES, KIND_NAMES, NBC_COMPLETE, Trace, TraceError

#: the columns of an operation, in :class:`Ops`' order
_FIELDS = ("t", "loc", "b", "i", "op", "size", "size_recv", "peer", "nbc", "t_end")


@dataclass
class Ops:
    """Collective operations as columns (:data:`_FIELDS`): begin time, location,
    begin and end record, the end record's op, sizes and peer (the root rank),
    whether the end is a nonblocking completion, and the end time."""

    t: np.ndarray
    loc: np.ndarray
    b: np.ndarray
    i: np.ndarray
    op: np.ndarray
    size: np.ndarray
    size_recv: np.ndarray
    peer: np.ndarray
    nbc: np.ndarray
    t_end: np.ndarray

    def take(self, sel: np.ndarray) -> Ops:
        return Ops(*(getattr(self, f)[sel] for f in _FIELDS))


def operations(trace: Trace, loc: int, b: np.ndarray, i: np.ndarray) -> Ops:
    """The operations (begin ``b``, end ``i``) of ``loc`` as :class:`Ops`."""
    ev = trace.events[loc]
    return Ops(ev.time[b].astype(np.int64), np.full(len(b), loc, dtype=np.int64),
               b.astype(np.int64), i.astype(np.int64), ev.op[i].astype(np.int64),
               ev.size[i].astype(np.int64), ev.size_recv[i].astype(np.int64),
               ev.peer[i].astype(np.int64), ev.kind[i] == NBC_COMPLETE,
               ev.time[i].astype(np.int64))


def by_member(parts: list[Ops]) -> Ops:
    """One member's operations from its locations' ``parts``, in the order of
    (begin time, location, begin, end): a process's threads' calls in time order."""
    ops = Ops(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS)) \
        if len(parts) > 1 else parts[0]
    return ops.take(np.lexsort((ops.i, ops.b, ops.loc, ops.t)))


def instances(trace: Trace, comm: int, members: tuple | list,
              per_member: dict[int, Ops]) -> tuple[list[Instance], int]:
    """The instances of ``comm`` whose ``members`` (rank order) posted the
    operations ``per_member`` (:func:`by_member`), and how many of them have an op
    of unknown class. TraceError for a member with fewer operations than another,
    an instance mixing operations, or a rooted one without a valid root."""
    counts = {m: len(per_member[m].t) if m in per_member else 0 for m in members}
    n = max(counts.values())
    for m, c in counts.items():
        if c < n:
            other = next(x for x in members if counts[x] == n)
            raise TraceError(
                f"collective instance {c} on communicator {comm} has no member on "
                f"location {m} (location {m} has {c} collective operations on it, "
                f"location {other} has {n})",
                source=trace.source, location=int(per_member[other].loc[c]),
                index=int(per_member[other].i[c]))
    if n == 0:
        return [], 0
    cols = {f: np.column_stack([getattr(per_member[m], f) for m in members])
            for f in _FIELDS}
    op = cols["op"][:, 0]
    classes = {o: collective_class(o) for o in np.unique(op).tolist()}
    rooted = np.array([classes[o][0] in (ONE_TO_N, N_TO_ONE) for o in op.tolist()])
    root_rank = cols["peer"][:, 0]
    valid = (root_rank >= 0) & (root_rank < len(members))
    mixed = np.any(cols["op"] != op[:, None], axis=1)
    bad = np.flatnonzero(mixed | (rooted & ~valid))
    if bad.size:
        _refuse(trace, comm, int(bad[0]), cols, bool(mixed[bad[0]]), len(members))
    root = np.where(valid, cols["loc"][np.arange(n), np.where(valid, root_rank, 0)], -1)
    rows = {f: cols[f].tolist() for f in ("loc", "b", "i", "size", "size_recv", "t", "t_end")}
    nonblocking = cols["nbc"].any(axis=1).tolist()
    out, unknown = [], 0
    for k, (o, r) in enumerate(zip(op.tolist(), root.tolist(), strict=True)):
        cls, known = classes[o]
        unknown += not known
        inst = Instance(comm=comm, op=o, cls=cls, known_op=known, root=r,
                        locs=rows["loc"][k], begin_idx=rows["b"][k], end_idx=rows["i"][k],
                        size_sent=rows["size"][k], size_recv=rows["size_recv"][k],
                        nonblocking=nonblocking[k])
        classify_instance(inst, rows["t"][k], rows["t_end"][k])
        out.append(inst)
    return out, unknown


def _refuse(trace: Trace, comm: int, k: int, cols: dict[str, np.ndarray], mixed: bool,
            members: int) -> None:
    """Refuse instance ``k`` of ``comm``: it mixes operations, or has no valid root."""
    loc, idx = int(cols["loc"][k, 0]), int(cols["i"][k, 0])
    if mixed:
        ops = sorted(COLLECTIVE_OP_NAMES.get(o, str(o)) for o in set(cols["op"][k].tolist()))
        raise TraceError(f"collective instance {k} on communicator {comm} mixes operations "
                         f"{ops}", source=trace.source, location=loc, index=idx)
    op, root_rank = int(cols["op"][k, 0]), int(cols["peer"][k, 0])
    raise TraceError(
        f"{COLLECTIVE_OP_NAMES[op]} instance {k} on communicator {comm} has no "
        f"valid root {root_words(trace, comm, root_rank, members)}",
        source=trace.source, location=loc, index=idx)


def undefined_comm(trace: Trace, loc: int, i: np.ndarray) -> None:
    """Refuse the first of the end records ``i`` of ``loc`` (in their order) on an
    undefined communicator."""
    ev, comms = trace.events[loc], trace.definitions.comms
    used = ev.comm[i]
    if all(c in comms for c in np.unique(used).tolist()):
        return
    first = int(i[[c in comms for c in used.tolist()].index(False)])
    raise TraceError(f"{KIND_NAMES[ev.kind[first]]} on undefined communicator "
                     f"{int(ev.comm[first])}", source=trace.source, location=loc, index=first)
