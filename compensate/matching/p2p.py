"""Point-to-point matching in numpy columns (docs/design.md §4), for :mod:`compensate.matching`.

Per (sender, receiver, communicator, tag) the k-th MpiSend/MpiIsend matches the k-th
MpiRecv/MpiIrecv (MPI's non-overtaking rule; receives in their posting order). A
matched probe (MPI_Mprobe/Improbe: an MpiProbe with a message id) takes its place in
that order and is the message's receive record (it waits for the message; the
``no_recv_copy`` column says that it copies nothing); the MpiMrecv/MpiImrecv that
copies the data in follows it locally (:func:`matched_receives`). Records that carry
no message the matching can identify are left out first (:mod:`.nomessage`).
Matching, the call structure around each message and the synchronous-send test are
array operations over all messages at once. The result is a :class:`MessageTable`
(one row per message: receive keys in order of first appearance, then posting
order); :class:`Message` objects are built from it only when asked for. Errors are
one-line :class:`~compensate.model.TraceError` messages naming the first offending
record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compensate.matching.enclosing import closing_leaves, enclosing_enters
from compensate.matching.groups import by_value, key_ids
from compensate.matching.nomessage import (
    add_skipped,
    from_array,
    message_peers,
    off_rank_hint,
    receives_kept,
    receives_left,
    receives_past_gaps,
    refuse_other_lengths,
    refuse_receive,
    refuse_received_before_sent,
)
from compensate.model import (
    IMRECV,
    IMRECV_REQUEST,
    IRECV,
    ISEND,
    ISEND_COMPLETE,
    KIND_NAMES,
    MRECV,
    NONE,
    PROBE,
    RECV,
    SEND,
    Definitions,
    Events,
    Trace,
    TraceError,
    kind_table,
)


@dataclass
class Message:
    """One matched point-to-point message (indices are record positions)."""

    send_loc: int
    send_idx: int  # the MpiSend / MpiIsend record
    recv_loc: int
    recv_idx: int  # the MpiRecv / MpiIrecv record (the completion), or a matched MpiProbe
    size: int
    send_exit_idx: int  # Leave ending the send call (or the send record itself)
    recv_enter_idx: int  # Enter of the receive (completion) call (or the record before; -1)
    nonblocking_send: bool = False
    nonblocking_recv: bool = False
    # synchronous (MPI_Ssend, MPI_Issend, or larger than the eager limit): the send
    # call cannot end (an MPI_Issend: its MpiIsendComplete, then ``send_exit_idx``,
    # cannot happen) before the receive was posted; ``recv_post_idx`` is that posting
    # record (the Enter of a blocking receive call, the MpiIrecvRequest of an MPI_Irecv)
    synchronous: bool = False
    recv_post_idx: int = -1
    # the receive record is a matched probe (MPI_Mprobe/Improbe): it waits for the
    # message but copies nothing (the MPI_Mrecv/Imrecv after it does, locally)
    no_recv_copy: bool = False
    # an eager blocking send whose call receives after it (MPI_Sendrecv): the call's
    # Leave ends the receive part, and says nothing of when the message arrived
    exchange: bool = False
    # not a message of its own: a plain MPI_Probe/Iprobe (MpiProbe without message id)
    # that found this message; ``recv_idx`` is the probe, which cannot return before
    # the message was sent (the receive that takes the message has its own row)
    probe: bool = False


_INT_COLUMNS = ("send_li", "send_idx", "recv_li", "recv_idx", "size", "send_exit_idx",
                "recv_enter_idx", "recv_post_idx")
_BOOL_COLUMNS = ("nonblocking_send", "nonblocking_recv", "synchronous", "no_recv_copy",
                 "exchange", "probe")


@dataclass
class MessageTable:
    """All matched messages as parallel numpy columns, one row per message.

    ``send_li``/``recv_li`` are *positions* of the locations in ``loc_ids`` (the
    trace's location order), not location ids: ids may exceed int64 and dense
    positions index per-location lists directly. The other columns mean what the
    fields of :class:`Message` mean. ``no_recv_copy`` marks the messages whose
    receive record is a matched probe (R2 with a receive copy of zero);
    ``exchange`` the sends of MPI_Sendrecv (R2's overlap test, docs/design.md §3);
    ``probe`` the rows, after all messages, that tie a plain MPI_Probe/Iprobe to the
    message it found (:func:`plain_probe_rows`): R2 with no receive copy, and not
    counted as messages.
    """

    loc_ids: list[int]
    send_li: np.ndarray
    send_idx: np.ndarray
    recv_li: np.ndarray
    recv_idx: np.ndarray
    size: np.ndarray
    send_exit_idx: np.ndarray
    recv_enter_idx: np.ndarray
    recv_post_idx: np.ndarray
    nonblocking_send: np.ndarray
    nonblocking_recv: np.ndarray
    synchronous: np.ndarray
    no_recv_copy: np.ndarray
    exchange: np.ndarray
    probe: np.ndarray

    def __len__(self) -> int:
        return len(self.send_idx)

    @property
    def message_count(self) -> int:
        """The messages: the rows that are not a plain probe's."""
        return int(len(self.send_idx) - np.count_nonzero(self.probe))

    @classmethod
    def empty(cls, loc_ids: list[int] | None = None) -> MessageTable:
        cols = {name: np.zeros(0, dtype=np.int64) for name in _INT_COLUMNS}
        cols.update({name: np.zeros(0, dtype=bool) for name in _BOOL_COLUMNS})
        return cls(loc_ids=list(loc_ids or []), **cols)

    def rows(self) -> list[Message]:
        """The messages as :class:`Message` objects (location ids, Python ints)."""
        ids = self.loc_ids
        cols = [getattr(self, name).tolist() for name in _INT_COLUMNS + _BOOL_COLUMNS]
        return [Message(send_loc=ids[sl], send_idx=si, recv_loc=ids[rl], recv_idx=ri, size=sz,
                        send_exit_idx=sx, recv_enter_idx=re, nonblocking_send=nbs,
                        nonblocking_recv=nbr, synchronous=sy, recv_post_idx=rp,
                        no_recv_copy=nc, exchange=ex, probe=pr)
                for sl, si, rl, ri, sz, sx, re, rp, nbs, nbr, sy, nc, ex, pr
                in zip(*cols, strict=True)]


def members_of(defs: Definitions, comm: int, loc: int) -> tuple[int, ...]:
    """Location ids of ``comm``'s ranks as seen from ``loc`` (an empty group is
    MPI_COMM_SELF: just ``loc``); () for an undefined communicator."""
    c = defs.comms.get(comm)
    if c is None:
        return ()
    return c.members if c.members else (loc,)


def peer_location(trace: Trace, loc: int, idx: int, ev: Events) -> int:
    """The location of the peer rank of record ``idx`` (TraceError if it has none)."""
    defs = trace.definitions
    comm = int(ev.comm[idx])
    members = members_of(defs, comm, loc)
    rank = int(ev.peer[idx])
    where = {"source": trace.source, "location": loc, "index": idx}
    if comm not in defs.comms:
        raise TraceError(f"{KIND_NAMES[ev.kind[idx]]} on undefined communicator {comm}", **where)
    if not 0 <= rank < len(members):
        raise TraceError(
            f"{KIND_NAMES[ev.kind[idx]]} names rank {rank}, but communicator {comm} "
            f"has {len(members)} members", **where)
    return members[rank]


def peer_locations(defs: Definitions, comm: np.ndarray, peer: np.ndarray,
                   here: np.ndarray) -> np.ndarray:
    """The location of each record's peer rank ``peer`` in its communicator ``comm``
    as seen from its location ``here`` (-1: no such rank): one members table per
    communicator (MPI_COMM_SELF has none: its one rank is the location itself)."""
    other = np.full(peer.size, -1, np.int64)
    for c, sel in by_value(comm):
        at = np.arange(peer.size) if sel is None else sel
        comm_def = defs.comms.get(c)
        if comm_def is None:  # (an undefined communicator: no such rank)
            continue
        p = peer[at]
        if comm_def.members:
            table = np.asarray(comm_def.members, dtype=np.int64)
            ok = (p >= 0) & (p < table.size)
            other[at[ok]] = table[p[ok]]
        else:
            ok = p == 0
            other[at[ok]] = here[at[ok]]
    return other


def _peer_positions(trace: Trace, pos_of: dict[int, int], loc: int, ev: Events,
                    idx: np.ndarray, tables: dict[int, np.ndarray] | None = None
                    ) -> np.ndarray:
    """Location positions of the peers of records ``idx`` of ``loc`` (vectorised per
    communicator); the first bad record raises exactly as :func:`peer_location`.
    ``tables``: each communicator's rank-to-position table, kept across the calls
    of one matching (built once per communicator, not once per location: a
    communicator of every location would cost the square of the locations)."""
    out = np.full(len(idx), -1, dtype=np.int64)
    if not len(idx):
        return out
    ok = np.zeros(len(idx), dtype=bool)
    comm = ev.comm[idx]
    rank = ev.peer[idx].astype(np.int64)
    for c, sel in by_value(comm):
        if c not in trace.definitions.comms:
            continue
        members = members_of(trace.definitions, c, loc)
        r = rank if sel is None else rank[sel]
        good = (r >= 0) & (r < len(members))
        table = None if tables is None else tables.get(c)
        if table is None:
            table = np.array([pos_of.get(m, -1) for m in members], dtype=np.int64)
            if tables is not None and trace.definitions.comms[c].members:
                tables[c] = table  # (MPI_COMM_SELF's one member is the location)
        at = good if sel is None else sel[good]
        out[at] = table[r[good]]
        ok[at] = True
    if not ok.all():
        peer_location(trace, loc, int(idx[np.argmin(ok)]), ev)  # raises
    return out  # -1: a member location without records (it can match nothing)


def _concat(parts: list[tuple], width: int) -> list[np.ndarray]:
    """Column-wise concatenation of per-location tuples of arrays."""
    if not parts:
        return [np.zeros(0, dtype=np.int64) for _ in range(width)]
    return [np.concatenate([p[j] for p in parts]) for j in range(width)]


def _group_ranks(keys: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rank of each element within its key group, counting in ``order``."""
    rank = np.empty(len(keys), dtype=np.int64)
    if not len(keys):
        return rank
    sk = keys[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    lengths = np.diff(np.r_[starts, len(sk)])
    rank[order] = np.arange(len(sk)) - np.repeat(starts, lengths)
    return rank


#: Send calls that are synchronous (the send cannot complete before the matching
#: receive was posted): MPI_Ssend, and MPI_Issend, which Score-P records as an
#: MpiIsend inside a region of that name (OTF2 has no record kind of its own for it).
SYNC_SEND_PREFIXES = ("MPI_Ssend", "MPI_Issend")


def _completions(ev: Events, sends: np.ndarray) -> np.ndarray:
    """Per MpiIsend record of ``sends``: the MpiIsendComplete that completes its request
    (the first with the same request id after it; -1 if none)."""
    done = np.flatnonzero(ev.kind == ISEND_COMPLETE)
    out = np.full(len(sends), -1, dtype=np.int64)
    if not done.size:
        return out
    req = ev.request[done]
    for j, (i, r) in enumerate(zip(sends.tolist(), ev.request[sends].tolist(), strict=True)):
        cand = done[(req == r) & (done > i)]
        if cand.size:
            out[j] = cand[0]
    return out


#: the records :func:`matched_receives` reads
_MATCHED = kind_table(PROBE, MRECV, IMRECV_REQUEST, IMRECV)


def matched_receives(trace: Trace, loc: int, ev: Events
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The matched-probe receives of one location: (MpiMrecv/MpiImrecv records, the
    MpiProbe that took each one's message, each one's posting record).

    MPI_Mprobe/Improbe match the message (MpiProbe with a message id); MPI_Mrecv
    (MpiMrecv) or MPI_Imrecv (MpiImrecvRequest, completed by MpiImrecv in
    MPI_Wait/Test) receive it. The probe therefore holds the sender, communicator
    and tag and fixes the non-overtaking order, and :func:`match_p2p` makes it the
    message's receive record; the receive holds the size. The posting record is the
    MpiImrecvRequest of an MPI_Imrecv, else the receive itself (:func:`match_p2p`
    then uses the Enter of its call, as for MpiRecv). Message and
    request ids are per location and reused after completion: each receive takes the
    latest probe (request) with its id before it. A receive without one is an error."""
    sel = np.flatnonzero(_MATCHED.take(ev.kind))
    recv, probe, post = [], [], []
    by_message: dict[int, int] = {}
    by_request: dict[int, tuple[int, int]] = {}  # request -> (probe, ImrecvRequest)
    for i in sel.tolist():
        k = int(ev.kind[i])
        if k == PROBE:
            if int(ev.size_recv[i]) != NONE:
                by_message[int(ev.size_recv[i])] = i
            continue
        if k == IMRECV:
            found = by_request.pop(int(ev.request[i]), None)
            what = f"request {int(ev.request[i])} without its MpiImrecvRequest"
        else:
            p = by_message.pop(int(ev.size_recv[i]), None)
            found = None if p is None else (p, i)
            what = f"message {int(ev.size_recv[i])} without the MpiProbe that matched it"
        if found is None:
            raise TraceError(f"{KIND_NAMES[k]} of {what}", source=trace.source, location=loc,
                             index=i)
        if k == IMRECV_REQUEST:
            by_request[int(ev.request[i])] = found
            continue
        recv.append(i)
        probe.append(found[0])
        post.append(found[1])
    arr = [np.array(x, dtype=np.int64) for x in (recv, probe, post)]
    return arr[0], arr[1], arr[2]


def match_p2p(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
              past: dict, shift: dict | None = None) -> tuple[MessageTable, int, dict]:
    """Match every receive to its send. Returns (the messages, unmatched sends, the
    records that carry no message the matching can identify, per location:
    :data:`compensate.matching.nomessage.NO_MESSAGE`).

    ``structure[loc]`` is :func:`compensate.matching.check_structure`'s result,
    ``posting[loc]`` the (posting records, cancelled sends) of the location,
    ``past[loc]`` its receives known to lie past a gap (:func:`.nomessage.receives_kept`),
    ``shift[loc]`` the ticks its times were moved by (the gap rule takes them off).
    """
    loc_ids = list(trace.events)
    pos_of = {loc: li for li, loc in enumerate(loc_ids)}
    evs = [trace.events[loc] for loc in loc_ids]
    tables: dict[int, np.ndarray] = {}  # (:func:`_peer_positions`)
    skipped: dict[int, tuple[int, int, int]] = {}  # :mod:`.nomessage`'s, per location
    # sends, location by location (errors in this order, before any receive's)
    s_parts = []
    for li, (loc, ev) in enumerate(zip(loc_ids, evs, strict=True)):
        idx = np.flatnonzero((ev.kind == SEND) | (ev.kind == ISEND))
        cancelled = posting[loc][1]
        if cancelled and idx.size:
            idx = idx[~np.isin(idx, np.fromiter(cancelled, dtype=np.int64))]
        named = message_peers(ev, idx)
        if named.size < idx.size:
            add_skipped(skipped, loc, (idx.size - named.size, 0, 0, 0))
        idx = named
        dst = _peer_positions(trace, pos_of, loc, ev, idx, tables)
        s_parts.append((np.full(idx.size, li, dtype=np.int64), idx, dst,
                        ev.comm[idx].astype(np.int64), ev.tag[idx].astype(np.int64)))
    r_parts = []
    for li, (loc, ev) in enumerate(zip(loc_ids, evs, strict=True)):
        idx = np.flatnonzero((ev.kind == RECV) | (ev.kind == IRECV))
        post = idx.copy()
        posted = posting[loc][0]  # also holds nonblocking collective completions
        if posted and idx.size:
            done = np.fromiter(posted, dtype=np.int64, count=len(posted))
            by = np.fromiter(posted.values(), dtype=np.int64, count=len(posted))
            mine = np.isin(done, idx)
            post[np.searchsorted(idx, done[mine])] = by[mine]
        # matched-probe receives: sender, communicator, tag and the matching order
        # come from the probe that took the message. The probe is where the receiver
        # waits for the message: it is the message's receive record (without a copy);
        # the MPI_Mrecv/Imrecv that copies the data in follows locally. The receive's
        # posting (a synchronous sender waits for it) stays the MPI_Mrecv's Enter or the
        # MpiImrecvRequest; the data record (the receive) holds the size.
        m_recv, m_probe, m_post = matched_receives(trace, loc, ev)
        before, enters, _ = structure[loc]
        blocking = ev.kind[m_post] == MRECV
        if blocking.any():
            e = enclosing_enters(before, enters, m_post[blocking])
            m_post[blocking] = np.where(e >= 0, e, m_post[blocking] - 1)
        # (np.concatenate, not np.r_: per location, r_ costs ~5 us a call)
        at = np.concatenate((idx, m_probe))  # the records holding sender, comm. and tag
        order = np.concatenate((post, m_probe))  # the records whose positions fix the order
        data = np.concatenate((idx, m_recv))
        probe = np.concatenate((np.zeros(idx.size, dtype=np.int64),
                                np.ones(m_probe.size, dtype=np.int64)))
        idx, post = np.concatenate((idx, m_probe)), np.concatenate((post, m_post))
        keep, counts = receives_kept(trace.definitions, loc, ev, at, order, past.get(loc))
        if not keep.all():
            add_skipped(skipped, loc, counts)
            at, order, data, probe, idx, post = (
                a[keep] for a in (at, order, data, probe, idx, post))
        src = _peer_positions(trace, pos_of, loc, ev, at, tables)
        r_parts.append((src, np.full(idx.size, li, dtype=np.int64), idx, post,
                        ev.comm[at].astype(np.int64), ev.tag[at].astype(np.int64), order,
                        data, probe))
    s_src, s_idx, s_dst, s_comm, s_tag = _concat(s_parts, 5)
    (r_src, r_dst, r_idx, r_post, r_comm, r_tag, r_order_key, r_data,
     r_probe) = _concat(r_parts, 9)
    p_src, p_dst, p_idx, p_comm, p_tag = _plain_probes(trace, pos_of, evs, tables)
    ns = len(s_idx)

    def keys() -> tuple[np.ndarray, np.ndarray, int]:
        key = key_ids([np.r_[s_src, r_src, p_src], np.r_[s_dst, r_dst, p_dst],
                       np.r_[s_comm, r_comm, p_comm], np.r_[s_tag, r_tag, p_tag]])
        return key[:ns + len(r_idx)], key[ns + len(r_idx):], int(key.max()) + 1 if key.size else 0

    key, p_key, nkeys = keys()
    n_sends, n_recvs = (np.bincount(k, minlength=nkeys) for k in (key[:ns], key[ns:]))
    over = (n_recvs > 0) & (n_sends == 0)
    hint = ""
    if over.any():  # receives on a channel without sends: their statuses are wrong
        over = over[key[ns:]]
        hint = off_rank_hint(trace, [loc_ids[k] for k in np.unique(np.r_[s_src, r_dst])],
                             np.unique(np.r_[s_comm, r_comm]).tolist())
        gone = over & ((r_src < 0) | ~from_array(trace, structure, loc_ids, r_dst, r_idx, over))
        # (refused below where a sender has no records, is another thread, or a call
        # of one request wrote the status)
        if not gone.any() and not hint:
            keep = receives_left(over, r_dst, r_comm, r_order_key, loc_ids, skipped)
            (r_src, r_dst, r_idx, r_post, r_comm, r_tag, r_order_key, r_data, r_probe) = (
                a[keep] for a in (r_src, r_dst, r_idx, r_post, r_comm, r_tag, r_order_key,
                                  r_data, r_probe))
            key, p_key, nkeys = keys()
    keep = receives_past_gaps(evs, s_src, s_idx, key[:ns], r_dst, r_idx, key[ns:], nkeys,
                              loc_ids, skipped, shift)
    if not keep.all():  # (receives a channel's gap leaves without their send)
        (r_src, r_dst, r_idx, r_post, r_comm, r_tag, r_order_key, r_data, r_probe) = (
            a[keep] for a in (r_src, r_dst, r_idx, r_post, r_comm, r_tag, r_order_key,
                              r_data, r_probe))
        key, p_key, nkeys = keys()
    n_sends, n_recvs = (np.bincount(k, minlength=nkeys) for k in (key[:ns], key[ns:]))
    nr = len(r_idx)
    s_key, r_key = key[:ns], key[ns:]
    s_order = np.argsort(s_key, kind="stable")  # per key: location order, record order
    r_order = np.lexsort((r_idx, r_order_key, r_key))  # per key: posting (probe) order
    r_rank = _group_ranks(r_key, r_order)
    # receive keys in order of first appearance, then posting order: the message order
    first = np.full(nkeys, nr, dtype=np.int64)
    np.minimum.at(first, r_key, np.arange(nr))
    m_order = np.lexsort((r_rank, first[r_key]))
    bad = r_rank[m_order] >= n_sends[r_key[m_order]]
    if bad.any():
        j = int(m_order[np.argmax(bad)])
        li, i, src = int(r_dst[j]), int(r_idx[j]), int(r_src[j])
        src_id = loc_ids[src] if src >= 0 else peer_location(trace, loc_ids[li], i, evs[li])
        refuse_receive(trace, loc_ids[li], i, src_id, int(r_comm[j]), int(r_tag[j]), hint)
    unmatched = int(np.maximum(n_sends - n_recvs, 0).sum())
    # the k-th send of a key: position in the key-sorted send list
    s_start = np.r_[0, np.cumsum(n_sends)[:-1]] if nkeys else np.zeros(0, np.int64)
    r_idx, r_dst, r_src, r_post = r_idx[m_order], r_dst[m_order], r_src[m_order], r_post[m_order]
    r_data, no_copy = r_data[m_order], r_probe[m_order].astype(bool)
    sj = s_order[s_start[r_key[m_order]] + r_rank[m_order]] if nr else np.zeros(0, np.int64)
    m_sidx = s_idx[sj]
    n = len(m_sidx)
    exit_idx = np.full(n, -1, dtype=np.int64)
    call_enter = np.full(n, -1, dtype=np.int64)  # Enter of the send call (sync test)
    enter_idx = np.full(n, -1, dtype=np.int64)
    s_kind = np.zeros(n, dtype=np.int64)
    r_kind = np.zeros(n, dtype=np.int64)
    size = np.zeros(n, dtype=np.int64)
    ssend = np.zeros(n, dtype=bool)  # send call is MPI_Ssend... (or MPI_Issend...)
    plain = np.zeros(n, dtype=bool)  # send call is MPI_Send...
    completion = np.full(n, -1, dtype=np.int64)  # MpiIsendComplete of an MPI_Issend
    receives_after = np.zeros(n, dtype=bool)  # the send's call receives after it
    regions = trace.definitions.regions
    rows = np.arange(n)
    for li, sel in by_value(r_src):  # the sends, by sending location
        if li < 0:  # (every matched row has a sender: none here)
            continue
        sel = rows if sel is None else sel
        ev = evs[li]
        before, enters, leaves = structure[loc_ids[li]]
        if sel.size:
            s = m_sidx[sel]
            exit_idx[sel] = closing_leaves(before, leaves, s)
            recvs = np.r_[0, np.cumsum(ev.kind == RECV)]  # MpiRecv records before i
            x = exit_idx[sel]
            receives_after[sel] = (x > s) & (recvs[np.maximum(x, s)] > recvs[s + 1])
            ce = enclosing_enters(before, enters, s)
            call_enter[sel] = ce
            s_kind[sel] = ev.kind[s]
            has = ce >= 0
            if has.any():
                used, which = np.unique(ev.region[ce[has]], return_inverse=True)
                names = [regions.get(r, "") for r in used.tolist()]
                ssend[sel[has]] = np.array([x.startswith(SYNC_SEND_PREFIXES)
                                            for x in names])[which]
                plain[sel[has]] = np.array([x.startswith("MPI_Send") for x in names])[which]
            issend = sel[ssend[sel] & (s_kind[sel] == ISEND)]
            if issend.size:
                completion[issend] = _completions(ev, m_sidx[issend])
    for li, sel in by_value(r_dst):  # the receives, by receiving location
        if li < 0:
            continue
        sel = rows if sel is None else sel
        ev = evs[li]
        before, enters, _ = structure[loc_ids[li]]
        if sel.size:
            i = r_idx[sel]
            enter_idx[sel] = enclosing_enters(before, enters, i)
            r_kind[sel] = ev.kind[r_data[sel]]
            size[sel] = ev.size[r_data[sel]]
    refuse_other_lengths(trace, loc_ids, evs, r_src, m_sidx, r_dst, r_data, size)
    refuse_received_before_sent(trace, loc_ids, r_src, m_sidx, r_dst, r_idx)
    enter_idx = np.where(enter_idx < 0, r_idx - 1, enter_idx)
    nb_recv = (r_kind == IRECV) | (r_kind == IMRECV)
    post_idx = np.where(no_copy | (nb_recv & (r_post != r_idx)), r_post, enter_idx)
    is_sync = ssend | ((size > eager_limit) & plain if eager_limit is not None else False)
    sync = (s_kind == SEND) & (exit_idx >= 0) & (post_idx >= 0) & (call_enter >= 0) & is_sync
    # MPI_Issend: synchronous where its completion (MpiIsendComplete) is in the trace; the
    # completion then takes the place of the send call's end
    sync_nb = (s_kind == ISEND) & (completion >= 0) & (post_idx >= 0) & ssend
    sync |= sync_nb
    exit_idx = np.where(sync_nb, completion, exit_idx)
    # an eager blocking send in a call that receives after it (MPI_Sendrecv): the
    # call's Leave ends its receive part (docs/design.md §3 R2, "exchange")
    exchange = receives_after & (s_kind == SEND) & ~sync & (exit_idx >= 0)
    table = MessageTable(
        loc_ids=loc_ids, send_li=r_src.copy(), send_idx=m_sidx, recv_li=r_dst.copy(),
        recv_idx=r_idx.copy(), size=size, send_exit_idx=np.where(exit_idx >= 0, exit_idx, m_sidx),
        recv_enter_idx=enter_idx, recv_post_idx=post_idx, nonblocking_send=s_kind == ISEND,
        nonblocking_recv=nb_recv, synchronous=sync & (r_src != r_dst), no_recv_copy=no_copy,
        exchange=exchange & (r_src != r_dst), probe=np.zeros(nr, dtype=bool))
    if p_idx.size and nr:
        table = plain_probe_rows(trace, structure, table, r_key[m_order],
                                 r_order_key[m_order], p_key, p_dst, p_idx)
    return table, unmatched, skipped


def _plain_probes(trace: Trace, pos_of: dict[int, int], evs: list[Events],
                  tables: dict[int, np.ndarray] | None = None) -> list[np.ndarray]:
    """(sender position, receiver position, record, communicator, tag) of every plain
    MpiProbe (no message id) whose sender resolves; the others stay local (a probe
    takes no message: no reason to refuse the trace)."""
    parts = []
    for li, (loc, ev) in enumerate(zip(pos_of, evs, strict=True)):
        idx = np.flatnonzero((ev.kind == PROBE) & (ev.size_recv == NONE))
        if not idx.size:
            continue
        try:
            src = _peer_positions(trace, pos_of, loc, ev, idx, tables)
        except TraceError:
            continue
        keep = src >= 0
        idx, src = idx[keep], src[keep]
        parts.append((src, np.full(idx.size, li, dtype=np.int64), idx,
                      ev.comm[idx].astype(np.int64), ev.tag[idx].astype(np.int64)))
    return _concat(parts, 5)


def plain_probe_rows(trace: Trace, structure: dict, table: MessageTable,
                     row_key: np.ndarray, row_pos: np.ndarray, p_key: np.ndarray,
                     p_li: np.ndarray, p_idx: np.ndarray) -> MessageTable:
    """``table`` with one ``probe`` row per plain MpiProbe (MPI_Probe, or MPI_Iprobe
    with flag true) that found a message: that of the first receive of its key posted
    after it (``row_key``/``row_pos``: each row's key and posting position; a receive
    posted before the probe would have taken the message). The row makes the probe
    R2's receive record with no receive copy, checked by the verifier like any
    receive (docs/compensation.md, "Plain probes"). A probe before that message's
    send in the measured trace (a probe on another thread, a receive the trace
    lacks) gets no row and stays local."""
    n = len(row_key)
    allk = np.r_[row_key, p_key]
    allp = np.r_[row_pos, p_idx]
    order = np.lexsort((allp, allk))
    is_row = order < n
    # sorted position of the first message row at or after each sorted position
    at = np.where(is_row, np.arange(order.size), order.size)
    nxt = np.minimum.accumulate(at[::-1])[::-1]
    q = np.flatnonzero(~is_row)  # the probes, in sorted order
    cand = nxt[q]
    ok = cand < order.size
    rows = np.full(q.size, -1, dtype=np.int64)
    rows[ok] = order[cand[ok]]
    pj = order[q] - n  # probe numbers
    ok &= allk[np.maximum(rows, 0)] == p_key[pj]
    rows, pj = rows[ok], pj[ok]
    if not rows.size:
        return table
    li, idx = p_li[pj], p_idx[pj]
    loc_ids = table.loc_ids
    evs = [trace.events[loc] for loc in loc_ids]
    send_t = np.array([evs[a].time[b] for a, b in
                       zip(table.send_li[rows].tolist(), table.send_idx[rows].tolist(),
                           strict=True)], dtype=np.int64)
    probe_t = np.array([evs[a].time[b] for a, b in zip(li.tolist(), idx.tolist(),
                                                          strict=True)], dtype=np.int64)
    keep = send_t <= probe_t
    rows, li, idx = rows[keep], li[keep], idx[keep]
    if not rows.size:
        return table
    enter = np.full(rows.size, -1, dtype=np.int64)
    for pos in np.unique(li).tolist():
        sel = np.flatnonzero(li == pos)
        before, enters, _ = structure[loc_ids[pos]]
        enter[sel] = enclosing_enters(before, enters, idx[sel])
    enter = np.where(enter < 0, idx - 1, enter)
    k = rows.size
    no = np.zeros(k, dtype=bool)
    add = {"send_li": table.send_li[rows], "send_idx": table.send_idx[rows],
           "recv_li": li, "recv_idx": idx, "size": table.size[rows],
           "send_exit_idx": table.send_exit_idx[rows], "recv_enter_idx": enter,
           "recv_post_idx": enter, "nonblocking_send": table.nonblocking_send[rows],
           "nonblocking_recv": no, "synchronous": no, "no_recv_copy": np.ones(k, dtype=bool),
           "exchange": no, "probe": np.ones(k, dtype=bool)}
    return MessageTable(loc_ids=loc_ids, **{name: np.concatenate((getattr(table, name),
                                                                  add[name]))
                                            for name in _INT_COLUMNS + _BOOL_COLUMNS})
