"""Collective operations: the class of each MPI operation (how it constrains its
members' exits) and one matched instance. The class table is where a new collective
operation is added; :mod:`compensate.engine.kinds` maps each class to its rule.

Every operation OTF2 defines (``OTF2_CollectiveOp`` 0-22) has a class here, so
``Matching.unknown_ops`` counts only numbers outside OTF2's list. The handle
operations Score-P >= 7 records for communicator and window management
(docs/compensation.md, "Handle collectives") are two classes of their own:

* ``create`` (CREATE_HANDLE, ALLOCATE, CREATE_HANDLE_AND_ALLOCATE: MPI_Comm_dup,
  _split, _create, MPI_Cart_create, MPI_Win_create/allocate, MPI_Init's
  MPI_COMM_WORLD): collective over the parent communicator, and synchronising in
  every implementation (the members agree on a context id, windows exchange base
  addresses), so timed like an n-to-n operation (R3).
* ``free`` (DESTROY_HANDLE, DEALLOCATE, DESTROY_HANDLE_AND_DEALLOCATE:
  MPI_Comm_free, MPI_Win_free, MPI_Finalize): collective, but MPI lets an
  implementation free a communicator locally. An instance counts as synchronising
  (n-to-n) only if its measurement is consistent with that -- no member's end
  before another member's begin (:func:`classify_instance`); otherwise it carries
  no dependency and its exits stay on their own timelines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OP_NAMES,
    ENTER,
    IRECV,
    ISEND,
    KIND_NAMES,
    LEAVE,
    RECV,
    SEND,
    Definitions,
    Trace,
    TraceError,
    kind_table,
)

#: the point-to-point records whose communicator names their rank
P2P_KINDS = np.array([SEND, ISEND, RECV, IRECV])
_P2P = kind_table(P2P_KINDS)

# How each collective operation constrains its members' exits.
N_TO_N = "n-to-n"
ONE_TO_N = "1-to-n"
N_TO_ONE = "n-to-1"
SCAN = "scan"
EXSCAN = "exscan"
CREATE = "create"
FREE = "free"
#: Classes whose members' exits wait for every member's enter (when synchronising).
SYNCHRONISING = frozenset({N_TO_N, CREATE, FREE})

#: MPI operation name -> dependency class (every OTF2 operation; numbers OTF2 does not
#: define: n-to-n, conservatively).
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
    "CREATE_HANDLE": CREATE,
    "ALLOCATE": CREATE,
    "CREATE_HANDLE_AND_ALLOCATE": CREATE,
    "DESTROY_HANDLE": FREE,
    "DEALLOCATE": FREE,
    "DESTROY_HANDLE_AND_DEALLOCATE": FREE,
}


def needed_members(inst: Instance, i: int) -> list[int]:
    """Members (positions in ``inst.locs``) whose enter member ``i``'s exit waits for,
    by collective class: everybody (n-to-n, handle creation, a synchronising free),
    the root (1-to-n non-root), every other member (n-to-1 root), ranks <= i (scan)
    or < i (exscan); [] for a local exit (and for a free that did not synchronise)."""
    n = len(inst.locs)
    if not inst.synchronising:
        return []
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
    #: False for a ``free`` instance whose measurement shows no synchronisation
    synchronising: bool = True


def classify_instance(inst: Instance, begin_times: list[int], end_times: list[int]) -> None:
    """Decide from the measured times whether a ``free`` instance synchronised: only if
    no member ended before another member began (a free that MPI let stay local
    shows exits before late members' enters). Other classes are left as they are."""
    if inst.cls == FREE and begin_times and min(end_times) < max(begin_times):
        inst.synchronising = False


def call_enter(kind: np.ndarray, idx: int) -> int:
    """The Enter of the call that holds record ``idx`` of a location with record
    kinds ``kind`` (the MPI_Wait/Test around a nonblocking completion), or the record
    before it if it is in no call (-1 at the start of the location)."""
    depth = 0
    for j in range(idx - 1, -1, -1):
        k = kind[j]
        if k == LEAVE:
            depth += 1
        elif k == ENTER:
            if depth == 0:
                return j
            depth -= 1
    return idx - 1


def call_leave(kind: np.ndarray, idx: int) -> int:
    """The Leave that ends the call holding record ``idx`` (the MPI_Ibcast ... call
    around a nonblocking collective's request), or ``idx`` itself if it is in no
    call."""
    depth = 0
    for j in range(idx + 1, len(kind)):
        k = kind[j]
        if k == ENTER:
            depth += 1
        elif k == LEAVE:
            if depth == 0:
                return j
            depth -= 1
    return idx


def thread_ranks(defs: Definitions) -> dict[int, dict[int, int]]:
    """``{communicator: {CPU thread: the member of its process}}``, for the
    communicators of ranks (:meth:`~compensate.model.Definitions.is_rank_comm`)
    whose members' processes have other CPU threads. Under MPI_THREAD_SERIALIZED any
    thread of a process may make the rank's calls (``omp single``); a collective on
    such a thread is the rank's, in the time order of the process's calls
    (:func:`compensate.matching.match.match_collectives`)."""
    out: dict[int, dict[int, int]] = {}
    for cid, c in defs.comms.items():
        if defs.is_rank_comm(c):
            table = {x: m for m in c.members for x in defs.sibling_threads(m)}
            if table:
                out[cid] = table
    return out


def refuse_off_member(trace: Trace, loc: int, idx: np.ndarray,
                      ranks: dict[int, dict[int, int]] | None = None) -> None:
    """Refuse the first of the collective records ``idx`` and point-to-point
    records (MpiSend, MpiIsend, MpiRecv, MpiIrecv) of ``loc`` whose communicator
    has members of which ``loc`` is not one. In OTF2 a rank of a communicator is
    one location; where all of a rank's MPI records lie on one thread other than
    the one the archive lists, the reader names that thread
    (:mod:`compensate.formats.mpithreads`), and a collective on another thread of
    a member's process is the member's (``ranks``: :func:`thread_ranks`). What is
    left here: messages sent or received on two threads of one process (the
    listed one and another, or two others: EZTrace with MPI_THREAD_MULTIPLE),
    whose pairing would need the rank's sends in one order over its threads (MPI
    orders them per thread only); and a collective on a process that is not a
    member. Refused rather than paired by the order of one thread's sends alone."""
    ev, comms = trace.events[loc], trace.definitions.comms
    mark = _P2P.take(ev.kind)  # (a mask: isin and union1d sort)
    mark[idx] = True
    if len(idx) and ranks:  # a collective on another thread of a member's process
        # is the member's (``ranks``: :func:`thread_ranks`)
        mark[[i for i in idx.tolist() if loc in ranks.get(int(ev.comm[i]), ())]] = False
    idx = np.flatnonzero(mark)
    used = ev.comm[idx]
    for comm in np.unique(used).tolist():
        c = comms.get(comm)
        if c is None or not c.members or loc in c.member_set:
            continue
        i = int(idx[np.flatnonzero(used == comm)[0]])
        shown = ", ".join(map(str, c.members[:4])) + (", ..." if len(c.members) > 4 else "")
        why = ("messages sent or received on several threads of one rank (a rank's "
               "messages are one location's: the thread that holds them all)"
               if _P2P[ev.kind[i]] else "a collective on a process that is not one of "
               "its members")
        raise TraceError(
            f"{KIND_NAMES[ev.kind[i]]} on communicator {comm} (\"{c.name}\") on location "
            f"{loc}, which is not one of its members ({shown}): {why}; not modelled",
            source=trace.source, location=loc, index=i)


def collective_pairs(kind: np.ndarray, level: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The MpiCollectiveBegin/End records of one location that pair up, as
    (begins, ends), how many Begins have no End, and the first End with no Begin
    of its own (-1: none; the caller refuses it).

    OTF2 brackets a blocking collective by a Begin and an End in one call: an End
    pairs with the latest Begin before it if that Begin comes after the End before
    and (``level``: the call level before each record, :class:`Nesting`) lies in
    the same call. A Begin no End pairs with is a collective whose end the tracer
    did not record (EZTrace 2.0 writes only a Begin in MPI_Ibcast and
    MPI_Iallreduce, nothing in the MPI_Wait that completes them): it stays a local
    record."""
    begin = np.flatnonzero(kind == COLL_BEGIN)
    end = np.flatnonzero(kind == COLL_END)
    last = np.searchsorted(begin, end) - 1  # the latest Begin before each End
    prev_end = np.concatenate(([-1], end[:-1]))
    ok = last >= 0
    ok[ok] = begin[last[ok]] > prev_end[ok]
    if level is not None and ok.any():  # no call closed between them
        b, e = begin[last[ok]], end[ok]
        bounds = np.column_stack((b, e + 1)).ravel()
        low = np.minimum.reduceat(np.append(level, level[-1:]), bounds)[::2]
        ok[ok] = (level[b] == level[e]) & (low >= level[b])
    if not ok.all():
        return begin[last[ok]], end[ok], 0, int(end[np.argmin(ok)])
    return begin[last], end, int(begin.size - end.size), -1
