"""MPI calls that communicate but hold no record of it.

A tracer records a call's messages or collective inside its Enter/Leave (OTF2's
MpiSend/MpiRecv, MpiCollectiveBegin/End). Some write only the Enter and Leave for
some calls (EZTrace 2.0: MPI_Sendrecv, MPI_Scan, MPI_Comm_split, MPI_Comm_dup):
the dependency those calls make between processes is not in the trace, so it
cannot be modelled; the call is local time to the compensation.
:func:`unrecorded_calls` counts them by name, for the summary and the note that
says so; they are found by the call's name (the MPI standard's blocking calls
that always exchange data with other ranks) and an Enter followed at once by its
own Leave.
"""

from __future__ import annotations

import numpy as np

from compensate.model import ENTER, LEAVE, Definitions, Events

#: blocking MPI calls that exchange data with other processes whenever their
#: communicator has more than one member (MPI 4.1, chapters 3, 6, 7, 8 and 12):
#: messages, collectives, and the calls that make a communicator or window from
#: another (its members agree on a context id, or exchange their colours, keys or
#: base addresses, in every implementation; compensate.matching.collectives times
#: them like n-to-n operations where the tracer records them)
COMMUNICATING = frozenset(f"MPI_{n}" for n in (
    "Send", "Bsend", "Ssend", "Rsend", "Recv", "Mrecv", "Sendrecv", "Sendrecv_replace",
    "Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
    "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce", "Allreduce",
    "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan", "Neighbor_allgather",
    "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv",
    "Neighbor_alltoallw", "Comm_dup", "Comm_dup_with_info", "Comm_split",
    "Comm_split_type", "Comm_create", "Comm_create_group", "Cart_create", "Cart_sub",
    "Graph_create", "Dist_graph_create", "Dist_graph_create_adjacent",
    "Intercomm_create", "Intercomm_merge", "Win_create", "Win_allocate",
    "Win_allocate_shared", "Win_create_dynamic"))


def communicating_regions(defs: Definitions) -> np.ndarray:
    """The ids of the regions named after a call of :data:`COMMUNICATING`."""
    return np.array(sorted(r for r, name in defs.regions.items() if name in COMMUNICATING),
                    dtype=np.int64)


def unrecorded_calls(defs: Definitions, ev: Events, regions: np.ndarray) -> dict[str, int]:
    """Per call name, how many calls of ``regions`` (sorted ids) on this location are an Enter
    followed at once by its own Leave (no record of their communication)."""
    if not regions.size or len(ev) < 2:
        return {}
    k, r = ev.kind, ev.region
    hit = np.flatnonzero((k[:-1] == ENTER) & (k[1:] == LEAVE) & (r[:-1] == r[1:]))
    at = np.minimum(np.searchsorted(regions, r[hit]), regions.size - 1)  # (regions sorted:
    hit = hit[regions[at] == r[hit]]  # a search, not isin's sort, per location)
    if not hit.size:
        return {}
    ids, counts = np.unique(r[hit], return_counts=True)
    return {defs.regions[int(i)]: int(c) for i, c in zip(ids, counts, strict=True)}
