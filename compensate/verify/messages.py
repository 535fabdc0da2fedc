"""The point-to-point invariants of R7 (messages, synchronous sends and the probes
that found a message), checked over the message table of
:mod:`compensate.matching.p2p`, and what they read of other locations."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from compensate.matching import Matching
from compensate.model import Trace
from compensate.verify.result import Verification, note


def verify_messages(trace: Trace, matching: Matching, v: Verification) -> None:
    """Count in ``v.messages``: every receive (a matched probe, where one took the
    message) not strictly after its send (before it, for a send to self), every
    plain MPI_Probe/Iprobe that found a message not strictly after that message's
    send (the table's ``probe`` rows: a probe reports a message that exists), and
    a synchronous send's call that ended before its receive was posted (for an
    MPI_Issend: its MpiIsendComplete, which matching puts in ``send_exit_idx``);
    vectorised over the message table."""
    table = matching.table
    if not len(table):
        return
    times = [trace.events[loc].time for loc in table.loc_ids]
    lengths = np.array([len(x) for x in times], dtype=np.int64)
    off = np.r_[0, np.cumsum(lengths)[:-1]]
    flat = np.concatenate(times).astype(np.int64)
    send_t = flat[off[table.send_li] + table.send_idx]
    recv_t = flat[off[table.recv_li] + table.recv_idx]
    to_self = table.send_li == table.recv_li
    ids = table.loc_ids  # the receives (and synchronous sends' exits) checked here
    mine = np.array([v.owns(loc) for loc in ids], dtype=bool)
    bad = np.flatnonzero(np.where(to_self, recv_t < send_t, recv_t <= send_t)
                         & mine[table.recv_li])
    v.messages += int(bad.size)
    for j in bad[:10].tolist():
        what = ("probe not after the send of the message it found" if table.probe[j]
                else "receive not after its send")
        note(v, f"location {ids[table.recv_li[j]]}, record {int(table.recv_idx[j])}: {what} "
                f"(location {ids[table.send_li[j]]}, record {int(table.send_idx[j])})", (0, j))
    # a synchronous send's call cannot end before the receive was posted (counted with
    # the messages)
    sync = np.flatnonzero(table.synchronous & ~to_self & (table.recv_post_idx >= 0)
                          & mine[table.send_li])
    exit_t = flat[off[table.send_li[sync]] + table.send_exit_idx[sync]]
    post_t = flat[off[table.recv_li[sync]] + table.recv_post_idx[sync]]
    early = sync[exit_t < post_t]
    v.messages += int(early.size)
    for j in early[:10].tolist():
        note(v, f"location {ids[table.send_li[j]]}, record {int(table.send_exit_idx[j])}: "
                f"synchronous send returned before its receive was posted (location "
                f"{ids[table.recv_li[j]]}, record {int(table.recv_post_idx[j])})", (1, j))


def message_reads(matching: Matching, own: set[int]) -> Iterator[tuple[int, np.ndarray]]:
    """``(location, record indices)`` that :func:`verify_messages` reads of
    locations not in ``own`` when it checks the dependencies whose dependent end is
    in ``own``: a message's (or a probe's) send, and, for a synchronous send whose
    call is in ``own``, the posting of its receive."""
    t = matching.table
    if not len(t):
        return
    ids = t.loc_ids
    mine = np.array([loc in own for loc in ids], dtype=bool)
    rows = np.flatnonzero(mine[t.recv_li] & ~mine[t.send_li])
    for li in np.unique(t.send_li[rows]).tolist():
        yield ids[li], t.send_idx[rows[t.send_li[rows] == li]]
    sync = np.flatnonzero(t.synchronous & (t.recv_post_idx >= 0) & mine[t.send_li]
                          & ~mine[t.recv_li])
    for li in np.unique(t.recv_li[sync]).tolist():
        yield ids[li], t.recv_post_idx[sync[t.recv_li[sync] == li]]
