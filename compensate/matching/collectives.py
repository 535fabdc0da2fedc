"""Collective operations: the class of each MPI operation (how it constrains its
members' exits) and one matched instance. The class table is where a new collective
operation is added; :mod:`compensate.engine.kinds` maps each class to its rule."""

from __future__ import annotations

from dataclasses import dataclass

from compensate.model import (
    COLLECTIVE_OP_NAMES,
)

# How each collective operation constrains its members' exits.
N_TO_N = "n-to-n"
ONE_TO_N = "1-to-n"
N_TO_ONE = "n-to-1"
SCAN = "scan"
EXSCAN = "exscan"

#: MPI operation name -> dependency class (operations not listed: n-to-n, conservatively).
COLLECTIVE_CLASSES: dict[str, str] = {
    "BARRIER": N_TO_N,
    "ALLGATHER": N_TO_N,
    "ALLGATHERV": N_TO_N,
    "ALLTOALL": N_TO_N,
    "ALLTOALLV": N_TO_N,
    "ALLTOALLW": N_TO_N,
    "ALLREDUCE": N_TO_N,
    "REDUCE_SCATTER": N_TO_N,
    "REDUCE_SCATTER_BLOCK": N_TO_N,
    "BCAST": ONE_TO_N,
    "SCATTER": ONE_TO_N,
    "SCATTERV": ONE_TO_N,
    "GATHER": N_TO_ONE,
    "GATHERV": N_TO_ONE,
    "REDUCE": N_TO_ONE,
    "SCAN": SCAN,
    "EXSCAN": EXSCAN,
}


def needed_members(inst: Instance, i: int) -> list[int]:
    """Members (positions in ``inst.locs``) whose enter member ``i``'s exit waits for,
    by collective class: everybody (n-to-n), the root (1-to-n non-root), every other
    member (n-to-1 root), ranks <= i (scan) or < i (exscan); [] for a local exit."""
    n = len(inst.locs)
    if inst.cls == ONE_TO_N:
        r = inst.locs.index(inst.root)
        return [] if i == r else [r]
    if inst.cls == N_TO_ONE:
        r = inst.locs.index(inst.root)
        return [j for j in range(n) if j != r] if i == r else []
    if inst.cls == SCAN:
        return list(range(i + 1))
    if inst.cls == EXSCAN:
        return list(range(i))
    return list(range(n))


def collective_class(op: int) -> tuple[str, bool]:
    """(dependency class, known) for an OTF2 collective op code; unknown ops are
    treated conservatively as n-to-n."""
    name = COLLECTIVE_OP_NAMES.get(int(op))
    cls = COLLECTIVE_CLASSES.get(name) if name else None
    return (cls, True) if cls else (N_TO_N, False)


@dataclass
class Instance:
    """One collective operation instance: member locations in rank order.

    ``begin_idx`` is each member's enter (MpiCollectiveBegin, or the
    NonBlockingCollectiveRequest of a nonblocking collective), ``end_idx`` its exit
    (MpiCollectiveEnd / NonBlockingCollectiveComplete).
    """

    comm: int
    op: int
    cls: str
    known_op: bool
    root: int  # location id of the root, -1 if none
    locs: list[int]
    begin_idx: list[int]
    end_idx: list[int]
    size_sent: list[int]
    size_recv: list[int]
    nonblocking: bool = False
