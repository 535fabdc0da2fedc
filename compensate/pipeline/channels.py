"""What the stream cutter's exact check reads at a cut
(:meth:`compensate.pipeline.cuts.Cutter.balance`): the channel of each message
record, and whether every communicator's members completed the same number of
collectives."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from compensate.matching.p2p import peer_locations
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


class Dropped:
    """The records the matching drops (cancelled Isends: ``sign`` -1, their location
    sends) or leaves unpaired (receives past a gap: +1, their location receives),
    as columns (time, location, communicator, peer rank, tag), in the order taken.
    The cutter's exact check asks for the channels of those before every candidate
    cut (:meth:`keys`); a tracer that never completes its receive requests leaves
    many, so each one's peer location is looked up once, not at every candidate."""

    def __init__(self, sign: int) -> None:
        self.sign = sign
        self._parts: list[np.ndarray] = []  # (5, k) blocks not yet joined
        self._cols = np.zeros((5, 0), np.int64)
        self._other = np.zeros(0, np.int64)  # the peer locations of the first rows

    def add(self, time: np.ndarray, loc: int, comm: np.ndarray, peer: np.ndarray,
            tag: np.ndarray) -> None:
        """Records of location ``loc`` (columns of equal length)."""
        if len(time):
            self._parts.append(np.stack([np.asarray(time, np.int64),
                                         np.full(len(time), loc, np.int64),
                                         np.asarray(comm, np.int64),
                                         np.asarray(peer, np.int64),
                                         np.asarray(tag, np.int64)]))

    def add_one(self, time: int, loc: int, channel: tuple[int, int, int]) -> None:
        """One record of ``loc`` on ``channel`` (communicator, peer rank, tag)."""
        self.add(np.array([time]), loc, *(np.array([x]) for x in channel))

    def columns(self, start: int = 0) -> np.ndarray:
        """Rows time, location, communicator, peer rank, tag of the records taken
        from the ``start``-th on."""
        if self._parts:
            self._cols = np.concatenate([self._cols, *self._parts], axis=1)
            self._parts = []
        return self._cols[:, start:]

    def __len__(self) -> int:
        return self._cols.shape[1] + sum(p.shape[1] for p in self._parts)

    def tuples(self) -> list[tuple[int, int, tuple[int, int, int]]]:
        """(time, location, (communicator, peer rank, tag)) of each record."""
        return [(t, loc, (c, p, tag)) for t, loc, c, p, tag in self.columns().T.tolist()]

    def keys(self, defs: Definitions, cut: int) -> np.ndarray | None:
        """The channels (rows: sender, receiver, communicator, tag; a column each)
        of the records stamped before ``cut``; the peer's location is -1 where its
        rank is none of the communicator's. None if there is none."""
        cols = self.columns()
        if len(self._other) < cols.shape[1]:
            new = cols[:, len(self._other):]
            self._other = np.concatenate(
                [self._other, peer_locations(defs, new[2], new[3], new[1])])
        sel = cols[0] < cut
        if not sel.any():
            return None
        loc, other = cols[1, sel], self._other[sel]
        ends = (loc, other) if self.sign < 0 else (other, loc)
        return np.stack((ends[0], ends[1], cols[2, sel], cols[4, sel]))

    def drop_before(self, cut: int) -> None:
        """Forget the records stamped before ``cut`` (a segment took them)."""
        cols = self.columns()
        keep = cols[0] >= cut
        self._cols = cols[:, keep]
        self._other = self._other[keep[:len(self._other)]]
