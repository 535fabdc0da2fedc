"""What the stream cutter's exact check reads at a cut
(:meth:`compensate.pipeline.cuts.Cutter.balance`): the channel of each message
record, and whether every communicator's members completed the same number of
collectives."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from compensate.matching.p2p import key_ids, members_of
from compensate.model import (
    IRECV,
    ISEND,
    NONE,
    PROBE,
    RECV,
    SEND,
    Definitions,
    Events,
    kind_table,
)

#: messages sent / received, as a channel's balance counts them
SENDS, RECEIVES = kind_table(SEND, ISEND), kind_table(RECV, IRECV)


def sent_and_received(kind: np.ndarray, size_recv: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Which records send a message and which took one (a receive, or a matched
    probe: it took its message): what the cutter's exact check counts at a cut
    (:meth:`~compensate.pipeline.cuts.Cutter.balance`) and the look-ahead over the
    whole trace (:mod:`compensate.pipeline.unclosed`), so that the two agree."""
    return SENDS[kind], RECEIVES[kind] | ((kind == PROBE) & (size_recv >= 0))


def collectives_aligned(defs: Definitions, done: dict) -> bool:
    """Whether every communicator's members completed the same number of
    collectives (``done``: completed per (communicator key, location), as
    :meth:`~compensate.pipeline.cuts.Cutter.balance` gives them; a member without
    an entry completed none)."""
    by_comm: dict = defaultdict(set)
    for (key, _loc), c in done.items():
        by_comm[key].add(c)
    for key, counts in by_comm.items():
        comm_ = key if isinstance(key, int) else key[0]
        members = defs.comms[comm_].members if comm_ in defs.comms else ()
        if len(counts) > 1 or (members and len({done.get((key, m), 0)
                                                for m in members}) > 1):
            return False
    return True


def channel_keys(defs: Definitions, locs: list[int], evs: list[Events], ns: list[int],
                 idx: np.ndarray, p: np.ndarray, s: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """For :meth:`~compensate.pipeline.cuts.Cutter.balance`: the channel (sender,
    receiver, communicator, tag) of the records ``idx`` of the first ``ns``
    records of ``evs`` joined (``p``: their location's position in ``locs``,
    ``s``: which are sends), as the rows of one array, and their signs (+1 sent,
    -1 received, 0 to or from MPI_PROC_NULL: :mod:`compensate.matching.nomessage`).
    A function of its own so that its intermediate columns are freed before the
    channels are grouped (the cut pass's transient)."""
    comm = np.concatenate([ev.comm[:n] for ev, n in zip(evs, ns, strict=True)]
                          )[idx].astype(np.int64)
    peer = np.concatenate([ev.peer[:n] for ev, n in zip(evs, ns, strict=True)]
                          )[idx].astype(np.int64)
    tag = np.concatenate([ev.tag[:n] for ev, n in zip(evs, ns, strict=True)]
                         )[idx].astype(np.int64)
    here = np.array(locs, dtype=np.int64)[p]
    other = peer_locations(defs, comm, peer, here)
    sign = np.where(s, 1, -1).astype(np.int64) * (peer != NONE)  # (MPI_PROC_NULL: none)
    del peer
    return (np.stack([np.where(s, here, other), np.where(s, other, here), comm, tag]),
            sign)


def dropped_keys(defs: Definitions, dropped: list[tuple[int, int, tuple]], cut: int,
                 sign: int) -> np.ndarray | None:
    """The channels (rows: sender, receiver, communicator, tag; a column each) of
    the ``dropped`` records stamped before ``cut``, given as (time, location,
    (communicator, peer rank, tag)): Isends matching drops as cancelled (``sign``
    -1: the location sends) or receives it leaves unpaired (+1: the location
    receives); the peer's location is -1 where its rank is none of the
    communicator's. None if there is none. (A tracer that never completes its
    receive requests leaves many such receives: one array for all of them.)"""
    rows = [(loc, c, p, tag) for t, loc, (c, p, tag) in dropped if t < cut]
    if not rows:
        return None
    loc, comm, peer, tag = np.array(rows, dtype=np.int64).T
    other = peer_locations(defs, comm, peer, loc)
    ends = (loc, other) if sign < 0 else (other, loc)
    return np.stack((ends[0], ends[1], comm, tag))


def peer_locations(defs: Definitions, comm: np.ndarray, peer: np.ndarray,
                   here: np.ndarray) -> np.ndarray:
    """The location of each record's peer rank ``peer`` in its communicator
    ``comm`` as seen from its location ``here`` (-1: no such rank): one members
    table per distinct (communicator, location)."""
    pair_ids = key_ids([comm, here])
    first = np.unique(pair_ids, return_index=True)[1]
    tables, starts, lengths = [], [], []
    at = 0
    for c, loc in zip(comm[first].tolist(), here[first].tolist(), strict=True):
        members = members_of(defs, c, loc) or (-1,)
        tables.append(np.array(members, dtype=np.int64))
        starts.append(at)
        lengths.append(len(members))
        at += len(members)
    table = np.concatenate(tables)
    start = np.array(starts, dtype=np.int64)[pair_ids]
    ok = (peer >= 0) & (peer < np.array(lengths, dtype=np.int64)[pair_ids])
    other = np.full(peer.size, -1, np.int64)
    other[ok] = table[start[ok] + peer[ok]]
    return other
