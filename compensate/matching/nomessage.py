"""Point-to-point records that carry no message the matching can identify.

Two kinds, both kept as local records (R1 only), counted per location and named in
a note (docs/messages.md), never guessed:

* **MPI_PROC_NULL**: a send or receive record whose peer OTF2 leaves UNDEFINED.
  MPI completes a send to or a receive from MPI_PROC_NULL at once, with no
  message; EZTrace writes such records (a non-periodic halo's edge ranks), Score-P
  writes none. They never open a channel, so the stream cutter skips them too
  (:func:`message_peers`).
* **Unidentified receives**: a receive whose status cannot be a message's: its
  sender is not a rank of its communicator, or its length is 2^63 bytes or more
  (the readers give it as NONE, as they give an UNDEFINED one), or it was
  written by a call that completes an array of requests and no send of the trace
  has its channel. EZTrace 2.0's MPI_Waitsome writes its completions so (sender
  4061011728, length 2^64 - 32766; sender 0, tag 0, length 0). Such a receive took
  some message from some sender with some tag, so MPI's non-overtaking order pairs
  every later receive of its channel with the wrong send if it is left out alone.
  As the channel is unknown, every receive of that location on that communicator
  posted at or after it is left unmatched too (``left``): fewer dependencies,
  none wrong. The sends they took stay unmatched sends.
* **Receives past a gap**: a channel (sender, receiver, communicator, tag) with
  fewer receives than sends, where a receive the tracer did not record lies among
  the recorded ones (EZTrace 2.0 writes no MpiIrecv for an MPI_Irecv completed in
  MPI_Wait, MPI_Waitall or MPI_Test, so a channel that mixes them with MPI_Recv
  has such gaps). MPI's order pairs the k-th receive with the k-th send only up to
  the channel's last *balance point*: a time T before which the channel's sends
  and receives are equally many, j each. Those j receives took the j sends before
  T (a message is received after it is sent), so they pair in order; a recorded
  receive after the last balance point took some later send, which one the trace
  cannot say. Such receives are local records (``gap``), their sends unmatched
  sends: :func:`receives_past_gaps`. Where only the channel's last receives are
  missing (a message never received, a trace cut short), its last balance point
  follows its last receive and every receive pairs. The rule keeps a segment's
  pairing the whole trace's: the stream cuts only at times every channel
  balances, and past a gap only once its look-ahead has named the receives after
  it (``past``, :func:`receives_kept`; :mod:`compensate.pipeline.unclosed`).

:func:`off_rank_hint` says why a receive that does name a rank has no send.
A receive records the length of the message it took, so where MPI's order pairs
it with a send of another length the channel lacks records and is refused
(:func:`refuse_other_lengths`).
"""

from __future__ import annotations

import numpy as np

from compensate.matching.enclosing import enclosing_enters
from compensate.matching.groups import by_value
from compensate.model import IRECV, KIND_NAMES, NONE, RECV, Definitions, Events, Trace, TraceError

#: MPI calls that complete an array of requests, writing each one's status from an array
ARRAY_COMPLETIONS = ("MPI_Waitsome", "MPI_Testsome", "MPI_Waitany", "MPI_Testany",
                     "MPI_Waitall", "MPI_Testall")
#: the summary's counts (``dependencies``), in the order :func:`receives_kept` gives them
NO_MESSAGE = ("proc_null_records", "unidentified_receives", "receives_left_unmatched",
              "receives_past_a_gap")


def message_peers(ev: Events, idx: np.ndarray) -> np.ndarray:
    """Of the point-to-point records ``idx``, those that name a peer (not
    MPI_PROC_NULL): the records that can be a message."""
    return idx[ev.peer[idx] != NONE]


def receives_kept(defs: Definitions, loc: int, ev: Events, at: np.ndarray,
                  order: np.ndarray, past: np.ndarray | None = None
                  ) -> tuple[np.ndarray, tuple[int, ...]]:
    """Which receives of location ``loc`` the matching may pair: a mask over ``at``
    (the records holding sender, communicator and tag) given ``order`` (their
    posting positions), and the counts of :data:`NO_MESSAGE` (module docstring). A
    receive on an undefined communicator is kept: the matching refuses it, naming
    it. ``past``: records of receives known to lie past a gap on their channel (a
    stream's look-ahead, :mod:`compensate.pipeline.unclosed`), left unpaired."""
    peer = ev.peer[at].astype(np.int64)
    comm = ev.comm[at].astype(np.int64)
    null = peer == NONE
    data = (ev.kind[at] == RECV) | (ev.kind[at] == IRECV)  # (not a matched probe)
    bad = ~null & data & (ev.size[at] == NONE)
    for c, _ in by_value(comm[~null]):
        if c in defs.comms:
            c_def = defs.comms[c]
            n = len(c_def.members) if c_def.members else 1  # (MPI_COMM_SELF: one rank)
            bad |= (comm == c) & ~null & ((peer < 0) | (peer >= n))
    keep = ~null & ~bad
    gap = 0
    if past is not None and past.size:
        known = np.isin(at, past) & keep
        gap = int(np.count_nonzero(known))
        keep &= ~known
    left = 0
    for c in np.unique(comm[bad]).tolist():
        on = comm == c
        start = order[bad & on].min()
        dropped = keep & on & (order >= start)
        left += int(np.count_nonzero(dropped))
        keep &= ~dropped
    return keep, (int(np.count_nonzero(null)), int(np.count_nonzero(bad)), left, gap)


def from_array(trace: Trace, structure: dict, loc_ids: list[int], dst: np.ndarray,
               idx: np.ndarray, which: np.ndarray) -> np.ndarray:
    """Of the joined receive columns (``dst``: location positions, ``idx``: records),
    those among ``which`` written by a call that completes an array of requests
    (:data:`ARRAY_COMPLETIONS`): their status came from an array, where EZTrace 2.0's
    MPI_Waitsome goes wrong. Elsewhere a receive without a send is refused, as a
    trace that does not hold its sends (``structure``: the matching's call nesting)."""
    out = np.zeros(len(dst), dtype=bool)
    regions = trace.definitions.regions
    for d in np.unique(dst[which]).tolist():
        sel = np.flatnonzero(which & (dst == d))
        loc = loc_ids[d]
        before, enters, _ = structure[loc]
        enter = enclosing_enters(before, enters, idx[sel])
        region = trace.events[loc].region
        out[sel] = [e >= 0 and regions.get(int(region[e]), "").startswith(ARRAY_COMPLETIONS)
                    for e in enter.tolist()]
    return out


def receives_left(over: np.ndarray, dst: np.ndarray, comm: np.ndarray, order: np.ndarray,
                  loc_ids: list[int], skipped: dict) -> np.ndarray:
    """Which of the joined receive columns (``dst``: location positions in
    ``loc_ids``, ``comm``, ``order``: posting positions) the matching may still
    pair, where the receives ``over`` lie on a channel no send has (a status the
    tracer got wrong): on each (location, communicator) holding some, every receive
    posted at or after the first of them is left (module docstring). Adds the
    counts to ``skipped`` (location -> (MPI_PROC_NULL records, unidentified
    receives, receives left after one)): the receives of those channels as
    unidentified, the others as left."""
    keep = np.ones(len(dst), dtype=bool)
    for d, c in {(int(a), int(b)) for a, b in zip(dst[over], comm[over], strict=True)}:
        on = (dst == d) & (comm == c)
        dropped = on & (order >= order[on & over].min())
        keep &= ~dropped
        n_over = int(np.count_nonzero(dropped & over))
        add_skipped(skipped, loc_ids[d],
                    (0, n_over, int(np.count_nonzero(dropped)) - n_over, 0))
    return keep


def add_skipped(skipped: dict, loc: int, counts: tuple[int, ...]) -> None:
    """Add a location's counts (in the order of :data:`NO_MESSAGE`) to ``skipped``."""
    had = skipped.get(loc, (0,) * len(NO_MESSAGE))
    skipped[loc] = tuple(a + b for a, b in zip(had, counts, strict=True))


def last_balance(s_key: np.ndarray, s_time: np.ndarray, r_key: np.ndarray,
                 r_time: np.ndarray, nkeys: int) -> np.ndarray:
    """Per channel key, how many receives lie before its last balance point (module
    docstring): the largest j <= its receives such that some time T has j sends and
    j receives before it, i.e. max(s[j-1], r[j-1]) < min(s[j], r[j]) over the
    channel's send and receive times sorted (r[receives] = +inf; j = 0 always
    balances). Only for keys with more sends than receives (others: their count)."""
    n_s = np.bincount(s_key, minlength=nkeys)
    n_r = np.bincount(r_key, minlength=nkeys)
    m = np.minimum(n_r, n_s)
    so = np.lexsort((s_time, s_key))
    ro = np.lexsort((r_time, r_key))
    st, rk, rt = s_time[so], r_key[ro], r_time[ro]
    gapped = (n_r > 0) & (n_r < n_s)
    sel = np.flatnonzero(gapped[rk])  # the sorted receives of such keys
    if not sel.size:
        return m
    s_start = np.r_[0, np.cumsum(n_s)[:-1]]
    r_start = np.r_[0, np.cumsum(n_r)[:-1]]
    k = rk[sel]
    j = sel - r_start[k]  # (0-based: the balance count j + 1)
    nxt = np.where(j + 1 < n_r[k], rt[np.minimum(sel + 1, len(rt) - 1)], np.iinfo(np.int64).max)
    lo = np.maximum(st[s_start[k] + j], rt[sel])
    hi = np.minimum(st[s_start[k] + j + 1], nxt)
    m[gapped] = 0
    ok = lo < hi
    np.maximum.at(m, k[ok], j[ok] + 1)
    return m


def receives_past_gaps(evs: list[Events], s_li: np.ndarray, s_idx: np.ndarray,
                       s_key: np.ndarray, r_li: np.ndarray, r_idx: np.ndarray,
                       r_key: np.ndarray, nkeys: int, loc_ids: list[int],
                       skipped: dict, shift: dict | None = None) -> np.ndarray:
    """Which of the joined receive columns (``r_li``: location positions, ``r_idx``:
    the records holding the message's channel, ``r_key``: its key) the matching may
    pair: on a channel with fewer receives than sends, those before its last
    balance point (:func:`last_balance`; module docstring). The others are counted
    in ``skipped`` as ``receives_past_a_gap``. ``shift``: per location id, ticks
    taken off its times first (the times as read)."""
    n_s = np.bincount(s_key, minlength=nkeys)
    n_r = np.bincount(r_key, minlength=nkeys)
    keep = np.ones(len(r_key), dtype=bool)
    if not np.any((n_r > 0) & (n_r < n_s)):
        return keep
    s_time, r_time = (times_at(evs, li, idx) for li, idx in ((s_li, s_idx), (r_li, r_idx)))
    if shift:
        moved = np.array([shift.get(loc, 0) for loc in loc_ids], dtype=np.int64)
        s_time, r_time = s_time - moved[s_li], r_time - moved[r_li]
    m = last_balance(s_key, s_time, r_key, r_time, nkeys)
    order = np.lexsort((r_time, r_key))
    rank = np.empty(len(r_key), dtype=np.int64)
    r_start = np.r_[0, np.cumsum(n_r)[:-1]]
    rank[order] = np.arange(len(r_key)) - r_start[r_key[order]]
    keep = rank < m[r_key]
    for d in np.unique(r_li[~keep]).tolist():
        add_skipped(skipped, loc_ids[d], (0, 0, 0, int(np.count_nonzero(~keep & (r_li == d)))))
    return keep


def times_at(evs: list[Events], li: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The times of records ``idx`` of the locations ``evs[li]`` (vectorised per
    location: records sorted by location, one gather each)."""
    out = np.empty(len(idx), dtype=np.int64)
    order = np.argsort(li, kind="stable")
    bounds = np.flatnonzero(np.diff(li[order])) + 1
    for part in np.split(order, bounds):
        if len(part):
            out[part] = evs[int(li[part[0]])].time[idx[part]]
    return out


def refuse_receive(trace: Trace, loc: int, i: int, src: int, comm: int, tag: int,
                   hint: str) -> None:
    """Refuse receive ``i`` of location ``loc``, from location ``src``, which has no
    send (``hint``: :func:`off_rank_hint`'s clause, else :func:`intercomm_hint`'s)."""
    raise TraceError(
        f"{KIND_NAMES[trace.events[loc].kind[i]]} from location {src} (comm {comm}, "
        f"tag {tag}) has no matching send on location {src}"
        f"{hint or intercomm_hint(trace, comm)}",
        source=trace.source, location=loc, index=i)


def calls(trace: Trace, prefixes: tuple[str, ...]) -> bool:
    """Whether the program calls a function whose name (a region's, any case)
    begins with one of ``prefixes`` (lower case)."""
    return any(name.lower().startswith(prefixes) for name in trace.definitions.regions.values())


def intercomm_hint(trace: Trace, comm: int) -> str:
    """For an unmatched receive on communicator ``comm``: if the program created an
    inter-communicator (it calls MPI_Intercomm_create) and the trace defines none
    (OTF2's InterComm), the likely cause, as a clause to append; else ''. An
    inter-communicator's ranks name the other group; EZTrace 2.0 writes each group's
    side as an intra-communicator of its own group, so a peer rank names a member
    of the wrong group and the two sides' messages cannot be paired from the
    trace."""
    if any(c.inter for c in trace.definitions.comms.values()) or not calls(
            trace, ("mpi_intercomm_create",)):
        return ""
    return (f"; the program creates inter-communicators (MPI_Intercomm_create) and the "
            f"trace defines none: communicator {comm} may be one written as an "
            "intra-communicator of its own group, whose ranks then name the wrong "
            "group (EZTrace 2.0 writes them so); not modelled")


def root_words(trace: Trace, comm: int, root: int, members: int) -> str:
    """Why a rooted collective's root ``root`` (as its first member names it) is
    none of the ``members`` ranks of communicator ``comm``: the parenthesis and
    clause a refusal
    appends. The readers give every OTF2 root of 2^31 or more as NONE: OTF2's
    NONE, SELF and THIS_GROUP, the roots (MPI_PROC_NULL, MPI_ROOT) a process of
    an inter-communicator's root group names."""
    if root >= 0:
        return f"(rank {root}, of {members} members)"
    return ("(the member names no rank: OTF2's root NONE, SELF or THIS_GROUP, which a "
            "rooted collective names only on an inter-communicator, for MPI_ROOT and "
            f"MPI_PROC_NULL){intercomm_hint(trace, comm)}")


def refuse_received_before_sent(trace: Trace, loc_ids: list[int], send_li: np.ndarray,
                                send_idx: np.ndarray, recv_li: np.ndarray,
                                recv_idx: np.ndarray) -> None:
    """Refuse the first message to self whose receive record comes before its send
    on their one location: a receive record is written when the message has been
    received, which cannot be before it was sent, so MPI's message order paired
    records the trace's communicators or ranks do not describe (an
    inter-communicator written as an intra-communicator of its own group names
    the remote group's rank as its own: :func:`intercomm_hint`)."""
    bad = np.flatnonzero((send_li == recv_li) & (recv_idx < send_idx))
    if not bad.size:
        return
    j = int(bad[np.argmin(recv_idx[bad])])
    loc = loc_ids[int(recv_li[j])]
    i, s = int(recv_idx[j]), int(send_idx[j])
    ev = trace.events[loc]
    raise TraceError(
        f"{KIND_NAMES[ev.kind[i]]} from location {loc} itself (comm {int(ev.comm[i])}, tag "
        f"{int(ev.tag[i])}) pairs by MPI's message order with the {KIND_NAMES[ev.kind[s]]} "
        f"at record {s}, after it: a message to self cannot be received before it is sent"
        f"{intercomm_hint(trace, int(ev.comm[i]))}",
        source=trace.source, location=loc, index=i)


def refuse_other_lengths(trace: Trace, loc_ids: list[int], evs: list[Events],
                         send_li: np.ndarray, send_idx: np.ndarray, recv_li: np.ndarray,
                         recv_idx: np.ndarray, size: np.ndarray) -> None:
    """Refuse the first message whose receive (``recv_idx``, the record holding its
    length) and send, paired by MPI's order, give different lengths: a receive
    records the length of the message it took (its status), so such a pair is not
    one message. A channel pairs so when the trace lacks some of its receives or
    sends (EZTrace writes no receive for an MPI_Irecv completed in MPI_Wait or
    MPI_Waitall): every later message of the channel would pair wrongly, and a
    compensation of them would be wrong without a sign."""
    sent = np.full(len(send_idx), NONE, dtype=np.int64)
    for li in np.unique(send_li).tolist():
        sel = np.flatnonzero(send_li == li)
        sent[sel] = evs[li].size[send_idx[sel]]
    bad = (sent != size) & (sent != NONE) & (size != NONE)
    if not bad.any():
        return
    j = int(np.argmax(bad))
    s_loc, r_loc = loc_ids[int(send_li[j])], loc_ids[int(recv_li[j])]
    raise TraceError(
        f"{KIND_NAMES[evs[int(recv_li[j])].kind[recv_idx[j]]]} of {int(size[j])} bytes "
        f"pairs by MPI's message order with the "
        f"{KIND_NAMES[evs[int(send_li[j])].kind[send_idx[j]]]} of {int(sent[j])} bytes on "
        f"location {s_loc}, record {int(send_idx[j])}: the trace lacks receives or sends of "
        f"this channel (as EZTrace writes no receive for an MPI_Irecv completed in MPI_Wait "
        f"or MPI_Waitall){dup_hint(trace)}, so its messages cannot be paired",
        source=trace.source, location=r_loc, index=int(recv_idx[j]))


#: the calls that make a communicator EZTrace 2.0 may write as its parent's
_DUPLICATING = ("mpi_comm_dup", "mpi_comm_idup")


def dup_hint(trace: Trace) -> str:
    """For a channel whose records do not pair: if the program duplicates a
    communicator (MPI_Comm_dup), the other likely cause, as a clause to append;
    else ''. EZTrace 2.0 writes the messages and collectives on a duplicate under
    its parent's id (MPI_COMM_WORLD's), so two MPI channels become one."""
    if not calls(trace, _DUPLICATING):
        return ""
    return (" or holds two channels in one (the program calls MPI_Comm_dup, and EZTrace "
            "2.0 writes the messages on a duplicate as on its parent communicator)")


def off_rank_hint(trace: Trace, locations: list[int], comms: list[int]) -> str:
    """For an unmatched receive: if point-to-point records lie on ``locations`` that
    none of the communicators ``comms`` they use has as a member (the locations of
    a rank's other threads), the likely cause, as a clause to append; else ''."""
    defs = trace.definitions.comms
    if any(c in defs and not defs[c].members for c in comms):
        return ""  # (MPI_COMM_SELF: the members are whoever uses it)
    ranks = {m for c in comms if c in defs for m in defs[c].members}
    off = sorted(loc for loc in locations if loc >= 0 and loc not in ranks)
    if not ranks or not off:
        return ""
    shown = ", ".join(map(str, off[:3])) + (", ..." if len(off) > 3 else "")
    return (f"; MPI messages lie on location(s) {shown}, which no MPI communicator "
            "has as a member: messages sent or received on several threads of one rank "
            "(a rank's messages are one location's: the thread that holds them all); "
            "not modelled")
