"""Compensate a trace segment by segment: memory bounded by a segment (issue #7).

The engine (:mod:`compensate.engine`) works on a whole trace in memory. Here the
trace is read in chunks and cut, in measured time, into *segments* at *safe
cuts*: a time ``T`` such that nothing crosses it — no message sent before ``T``
is received after it, no collective has members on both sides, no request
(Isend, Irecv, nonblocking collective) is open across it. Then every dependency
of a record after ``T`` lies after ``T`` too, except the record's own location's
past, which R1 summarises: the approximated time of the last record before
``T``, the overhead its timestamp group left to charge, and the calls still open
at ``T`` (a receive's ``enter.recv`` may precede the cut). Those few *context*
records are put in front of each location's part of the next segment with their
times pinned (:func:`compensate.engine.approximate`), and the segment goes
through the whole pipeline of the in-memory path — match, compensate, verify —
and is written. The result is the in-memory result, record for record (the
floats are summed in another order, which could move a timestamp by one tick in
rare ties of the rounding; tests compare both paths).

Segments end at the latest safe cut once :data:`SEGMENT_RECORDS` records are
pending. A trace without safe cuts (a message that is never received, a request
that is never completed) is processed as one segment, as in memory. Input that
is not in time order across locations (possible in a hand-written ``.trace``)
raises :class:`NotStreamable`, and so does a problem the in-memory path would
report with other record numbers (:class:`SegmentError`): the caller then runs
the in-memory path, which gives the exact error.

METRIC samples are mapped through their process's time function
(:mod:`compensate.engine.metrics`): the cutter holds a sample back until the
segment that holds the reference record after it, and the text writer's
watermark allows for such late samples (:meth:`_Segmenter.watermark`).
Enter/Leave follow the tolerant nesting rule of
:class:`compensate.matching.Nesting` across chunks and segments.

Why one module (over 600 lines): cutting (:class:`_Cutter`), the per-segment
context (:class:`_Segmenter`) and the two passes share one invariant — what may
cross a cut and what a segment carries from the one before — and each part is
only correct together with the others; split apart, that invariant would be
stated in three places.
"""

from __future__ import annotations

import ctypes
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from compensate.engine import EngineOptions, Stats, approximate, rounded_times
from compensate.engine.carry import LinkCarry, Row
from compensate.engine.fit import FitOutcome, Observations, observe_transfers, outcome_of
from compensate.matching import Matching, match, nesting
from compensate.matching.devices import is_synchronize
from compensate.matching.lock_order import mark_implied, release_reach
from compensate.matching.p2p import _key_ids, members_of
from compensate.model import (
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    ENTER,
    IMRECV,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    KIND_CODE,
    LEAVE,
    MRECV,
    NBC_COMPLETE,
    NBC_REQUEST,
    PINIT_KINDS,
    PROBE,
    RECV,
    REQUEST_CANCELLED,
    SEND,
    Definitions,
    Events,
    Trace,
    TraceError,
)
from compensate.platform import Platform
from compensate.verify import Verification, verify


def _kinds(*codes: int) -> np.ndarray:
    """A table indexed by record kind code: ``_kinds(A, B)[ev.kind]`` is
    ``np.isin(ev.kind, (A, B))`` without isin's fixed cost (~30 us), which the
    cutter would pay for every location of every chunk."""
    table = np.zeros(len(KIND_CODE), dtype=bool)
    table[list(codes)] = True
    return table


#: record kinds that open (+1) / close (-1) something no cut may fall inside, besides
#: messages, MPI collectives and requests (see _Cutter._steps)
_OPENS = _kinds(KIND_CODE["ThreadFork"], KIND_CODE["ThreadCreate"], KIND_CODE["ThreadEnd"],
                KIND_CODE["OmpFork"], KIND_CODE["RmaWinCreate"],
                KIND_CODE["RmaCollectiveBegin"], *PINIT_KINDS)
_CLOSES = _kinds(KIND_CODE["ThreadJoin"], KIND_CODE["ThreadBegin"], KIND_CODE["ThreadWait"],
                 KIND_CODE["OmpJoin"], KIND_CODE["RmaWinDestroy"],
                 KIND_CODE["RmaCollectiveEnd"])
_REQUEST_KINDS = _kinds(ISEND, IRECV_REQUEST, NBC_REQUEST, ISEND_COMPLETE, IRECV,
                        NBC_COMPLETE, REQUEST_CANCELLED)
#: messages sent / received, collectives completed (_Cutter._aligned)
_SENDS = _kinds(SEND, ISEND)
_RECVS = _kinds(RECV, IRECV)
_COLL_DONE = _kinds(COLL_END, NBC_COMPLETE)
#: the records _Cutter._aligned reads: every other record's part in a cut is its time
#: (_CountingCutter)
_ALIGNED = _kinds(SEND, ISEND, RECV, IRECV, PROBE, COLL_END, NBC_COMPLETE)

#: Records pending before the segmenter looks for a safe cut.
SEGMENT_RECORDS = 1 << 18


def chunk_records_for(segment_records: int) -> int:
    """The chunk size the command reads with ``--segment-records N``: N/4 records (at
    most the default), so that a small N really cuts a small trace into segments
    (the cutter looks for a cut after each chunk)."""
    from compensate.formats import DEFAULT_CHUNK_RECORDS
    return max(1, min(DEFAULT_CHUNK_RECORDS, segment_records // 4))


#: The kind the last context record gets for matching: one matching ignores (its
#: own dependency was resolved in the segment before; its true kind stays in the
#: trace the engine sees, for R1 and the receive rules).
_NEUTRAL = KIND_CODE["Metric"]


#: Free heap memory (bytes) the process may keep between segments for the next
#: one to reuse (:func:`release_memory`).
KEEP_FREE_HEAP = 64 << 20


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (``fordblks``: free bytes held by malloc)."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc_release(keep: int) -> Callable[[], None]:
    """glibc's ``malloc_trim(0)`` once malloc holds more than ``keep`` free bytes
    (``mallinfo2``; every time if glibc is older than 2.33); a no-op elsewhere."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (AttributeError, OSError):
        return lambda: None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    info = getattr(libc, "mallinfo2", None)
    if info is None:
        return lambda: trim(0)
    info.argtypes, info.restype = [], _MallInfo2

    def release() -> None:
        if info().fordblks > keep:
            trim(0)
    return release


def steady_malloc(keep: int = KEEP_FREE_HEAP) -> None:
    """Fix glibc's two malloc thresholds for a streamed run (a no-op elsewhere):
    blocks under 32 MiB from the heap (``M_MMAP_THRESHOLD``), and the heap's top
    handed back by ``free`` only above ``keep`` bytes (``M_TRIM_THRESHOLD``; the
    same bound :func:`release_memory` keeps between segments).

    By default glibc starts with 128 KiB / 256 KiB and raises both as larger
    mapped blocks are freed, so a run's first segments get their arrays as fresh
    mappings and hand them back at once, and fault them in again the next time.
    Fixed from the start (32 MiB is glibc's own upper bound for the adjusted
    threshold): 10^6-record stencil `lower` 81 k -> 59 k page faults and ~0.1 s
    less CPU (1.23 -> 1.14 s), peak +2 MiB; at 10^7 the same CPU and a +4 MiB peak;
    `fitted` at 10^6 the same CPU, peak 248 -> 234 MiB (docs/performance.md). Called
    by the command, not on import: the thresholds are the whole process's."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (AttributeError, OSError):
        return
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc's thresholds, not musl's stub
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, keep)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


#: Hand the heap a segment freed back to the system before the next segment, once
#: it holds more than :data:`KEEP_FREE_HEAP` free bytes. Without trimming, every
#: segment's transient arrays leave free holes that the next segment's allocations
#: only partly reuse, and the peak keeps creeping up with the number of segments
#: (10^7-record stencil OTF2: 571-586 MiB, with: 477 MiB). Trimming after every
#: segment instead made the next segment fault all its memory in again (656 k
#: page faults, ~18 % of the CPU time of a 10^7-record run); keeping up to 64 MiB
#: free leaves 251 k, and the same peak (docs/performance.md).
release_memory = _libc_release(KEEP_FREE_HEAP)


class NotStreamable(Exception):
    """The input cannot be cut into segments (not in time order across locations)."""


class SegmentError(Exception):
    """A segment failed with a :class:`TraceError` whose record numbers refer to the
    segment; the in-memory path reports it exactly."""


@dataclass
class _Context:
    """What one location carries from one segment to the next."""

    # rows: (columns, payload, approximated float, written int, record index)
    stack: list[Row] = field(default_factory=list)  # open Enters
    last: Row | None = None  # the last record, if not on the stack
    carry: float = 0.0  # overhead (ticks) the last timestamp group left to charge
    #: earlier senders of links that may cross the cut (compensate.engine.carry)
    carried: list[Row] = field(default_factory=list)
    last_carried: bool = False  # the last record is such a sender: matched again

    def records(self) -> list[Row]:
        rows = self.stack + self.carried + ([self.last] if self.last is not None else [])
        return sorted(rows, key=lambda r: r[4]) if self.carried else rows


@dataclass
class StreamResult:
    """What the whole run did (the sums over all segments)."""

    stats: Stats
    verification: Verification
    counts: dict
    records: int = 0
    locations: int = 0
    segments: int = 0
    largest_segment: int = 0
    measured_span: tuple[int, int] | None = None  # (first, last) timestamp
    approximated_span: tuple[int, int] | None = None
    #: the first Enter/Leave that does not nest (``Matching.nesting_first``)
    nesting_first: dict | None = None


# -- cutting ---------------------------------------------------------------------------

class _Cutter:
    """Collects chunks and hands out segments that end at safe cuts."""

    #: whether the busy function counts the messages in flight (a distributed run's
    #: ranks leave them to the exact check summed over ranks:
    #: :mod:`compensate.parallel.cutting`)
    MESSAGES = True

    def __init__(self, defs: Definitions, segment_records: int,
                 replay: list[tuple[int, int, int | None]] | None = None) -> None:
        self.defs = defs
        self.target = segment_records
        #: every cut attempt as (records pending, their first time, the cut or None);
        #: ``replay``: the attempts of an earlier pass over the same chunks, taken
        #: instead of searching for cuts (see :func:`fit_pass`)
        self.attempts: list[tuple[int, int, int | None]] = []
        self.replay = iter(replay) if replay is not None else None
        self.pending: dict[int, list[Events]] = defaultdict(list)
        self.count = 0
        self.next_try = segment_records
        self.last_cut: int | None = None
        self.busy_t: list[np.ndarray] = []  # times of +-1 steps of "something open"
        self.busy_d: list[np.ndarray] = []
        self.open_requests: dict[int, dict[int, int]] = defaultdict(dict)  # loc -> id -> kind
        self.isend_channel: dict[tuple[int, int], tuple] = {}  # (loc, request) -> channel
        self.cancelled: list[tuple[int, int, tuple]] = []  # (time, loc, channel) of Isends
        self.coll_done: dict[tuple, int] = defaultdict(int)  # (comm key, loc) -> completed
        # regions of the calls open after the last record (entry order), and the
        # positions among them of the open calls around a send
        self.open_regions: dict[int, list[int]] = defaultdict(list)
        self.send_calls: dict[int, list[int]] = defaultdict(list)
        # METRIC locations and their reference threads (compensate.engine.metrics); the
        # last measured time of each reference handed out in a segment
        self.refs = {m: r for m, r in defs.metric_references().items() if r is not None}
        self.ref_last: dict[int, int] = {}
        # host synchronize calls (R9): no cut inside one, so that the device Leave
        # it waits for is matched in the same segment
        self.sync_regions = np.array([r for r, name in defs.regions.items()
                                      if is_synchronize(name)], dtype=np.int64)

    # the busy function: messages in flight + calls around a send that are still open
    # (matching needs the send call's Leave) + open collective calls + open requests
    def _steps(self, loc: int, ev: Events) -> None:
        k, t = ev.kind, ev.time
        # a matched probe opens (+1) what its MpiMrecv / MpiImrecv closes (-1 more
        # than the message itself): no cut between a probe and its receive; thread
        # synchronisation: a parallel region is open from its fork to its join, a
        # Pthread from its create to its begin and from its end to its wait; an RMA
        # window from its creation to its destruction, its collectives from begin to
        # end (R10); an MPI-4 partitioned operation from its Init on (no record frees
        # it: rounds match by the order of the Inits, so no cut after the first one)
        took = (k == PROBE) & (ev.size_recv >= 0)
        plus = (k == COLL_BEGIN) | took | _OPENS[k]
        matched = (k == MRECV) | (k == IMRECV)
        minus = (k == COLL_END) | _CLOSES[k]
        if self.MESSAGES:  # a message is in flight from its send to its receive
            plus = plus | (k == SEND) | (k == ISEND)
            minus = minus | (k == RECV) | (k == IRECV) | matched
        if self.sync_regions.size:
            in_sync = np.isin(ev.region, self.sync_regions)
            plus = plus | ((k == ENTER) & in_sync)
            minus = minus | ((k == LEAVE) & in_sync)
        times = [t[plus], t[minus], t[matched]]
        deltas = [np.ones(int(plus.sum()), np.int64), -np.ones(int(minus.sum()), np.int64),
                  -np.ones(int(matched.sum()), np.int64)]
        opened, closed = self._send_call_ends(loc, ev)
        times += [opened, closed]
        deltas += [np.ones(opened.size, np.int64), -np.ones(closed.size, np.int64)]
        req = np.flatnonzero(_REQUEST_KINDS[k])
        if req.size:
            rt, rd = [], []
            opened = self.open_requests[loc]
            for i in req.tolist():
                kind, r = int(k[i]), int(ev.request[i])
                if kind in (ISEND, IRECV_REQUEST, NBC_REQUEST):
                    opened[r] = kind
                    rt.append(t[i])
                    rd.append(1)
                    if kind == ISEND:
                        self.isend_channel[(loc, r)] = (int(ev.comm[i]), int(ev.peer[i]),
                                                        int(ev.tag[i]))
                elif r in opened:
                    was = opened.pop(r)
                    rt.append(t[i])
                    rd.append(-1)
                    channel = self.isend_channel.pop((loc, r), None) if was == ISEND else None
                    if kind == REQUEST_CANCELLED and channel is not None:
                        if self.MESSAGES:
                            rt.append(t[i])  # the message will never be received
                            rd.append(-1)
                        self.cancelled.append((int(t[i]), loc, channel))
            times.append(np.array(rt, dtype=np.int64))
            deltas.append(np.array(rd, dtype=np.int64))
        self.busy_t.append(np.concatenate(times))
        self.busy_d.append(np.concatenate(deltas))

    def _send_call_ends(self, loc: int, ev: Events) -> tuple[np.ndarray, np.ndarray]:
        """(times of sends inside a call, times of the Leaves that close such calls —
        of this chunk's sends or earlier ones): the call around a send ends with the
        first Leave after it on the send's call level (the tolerant nesting rule of
        :class:`compensate.matching.Nesting`, continued across chunks: the calls
        still open go in front of the chunk as Enters, on levels 1, 2, ...)."""
        k = ev.kind
        carried_regions = self.open_regions[loc]
        c = len(carried_regions)
        # (np.concatenate, not np.r_: this runs per location and chunk, r_ costs ~10 us)
        nest = nesting(np.concatenate((np.full(c, ENTER, k.dtype), k)),
                       np.concatenate((np.array(carried_regions, dtype=ev.region.dtype),
                                       ev.region)))
        before = nest.before[c:]
        sends = np.flatnonzero((k == SEND) | (k == ISEND))
        lvl = before[sends]
        sends, lvl = sends[lvl > 0], lvl[lvl > 0]  # outside any call: no Leave to wait for
        carried = np.array(self.send_calls[loc], dtype=np.int64) + 1  # position -> level
        w_lvl = np.concatenate((carried, lvl))
        w_after = np.concatenate((np.full(carried.size, -1, np.int64), sends))
        ends, still = [], []
        for d in np.unique(w_lvl).tolist():
            cand = nest.leaves.get(d, np.zeros(0, np.int64)) - c
            sel = w_lvl == d
            j = np.searchsorted(cand, w_after[sel], side="right")
            ok = j < cand.size
            ends.append(ev.time[cand[j[ok]]])
            still += [d] * int(np.count_nonzero(~ok))
        # the calls open after the chunk, and the pending send calls by their position
        open_end = nest.open_end
        position = {lv: p for p, lv in enumerate((nest.before[open_end] + 1).tolist())}
        self.send_calls[loc] = [position[d] for d in still]
        self.open_regions[loc] = np.concatenate((np.array(carried_regions, dtype=np.int64),
                                                 ev.region.astype(np.int64)))[open_end].tolist()
        return ev.time[sends], (np.concatenate(ends) if ends else np.zeros(0, np.int64))

    def take(self, loc: int, ev: Events) -> bool:
        """Append a location's records to what is pending (False if there are none);
        NotStreamable if they start before the last cut (the input is not in time
        order)."""
        if not len(ev):
            return False
        if self.last_cut is not None and int(ev.time[0]) < self.last_cut:
            raise NotStreamable(
                f"location {loc} has a record at {int(ev.time[0])}, before the cut at "
                f"{self.last_cut} made earlier: the input is not in time order")
        self._hold(loc, ev)
        self.count += len(ev)
        return True

    def _hold(self, loc: int, ev: Events) -> None:
        """Keep records taken until they are cut off (all of them, whole)."""
        self.pending[loc].append(ev)

    def add(self, chunk: dict[int, Events], cut: bool = True) -> Iterator[dict[int, Events]]:
        """Take a chunk; yield the segments that are complete (none without ``cut``:
        the chunk is only taken, as part of a larger one that follows)."""
        for loc, ev in chunk.items():
            if self.take(loc, ev) and self.replay is None:
                self._steps(loc, ev)
        while cut and self.count >= self.next_try:
            seg = self._cut()
            if seg is None:
                self.next_try = int(self.count * 1.5) + 1
                break
            if seg:  # (empty when only METRIC samples waiting for a reference record)
                yield seg
            self.next_try = self.count + self.target

    def rest(self) -> dict[int, Events] | None:
        """Everything still pending (the last segment)."""
        if not self.count:
            return None
        seg = {loc: Events.concat(parts) for loc, parts in self.pending.items() if parts}
        self.pending.clear()
        self.count = 0
        return seg

    def _merge(self) -> dict[int, Events]:
        """The pending records, each location's parts joined (and kept so)."""
        merged = {loc: Events.concat(parts) for loc, parts in self.pending.items() if parts}
        self.pending = defaultdict(list, {loc: [ev] for loc, ev in merged.items()})
        return merged

    def _bounds(self, merged: dict[int, Events]) -> tuple[int, int]:
        """(first, last) measured time of the pending records."""
        return (min(int(ev.time[0]) for ev in merged.values()),
                max(int(ev.time[-1]) for ev in merged.values()))

    def _cut(self) -> dict[int, Events] | None:
        merged = self._merge()
        first, last = self._bounds(merged)
        if self.replay is not None:
            count, first_then, cut = next(self.replay, (-1, -1, None))
            if (count, first_then) != (self.count, first):
                raise NotStreamable("the second pass over the input did not read the "
                                    "records the first pass read")
            return None if cut is None else self._split(merged, cut, None, None, None)
        bt = np.concatenate(self.busy_t) if self.busy_t else np.zeros(0, np.int64)
        bd = np.concatenate(self.busy_d) if self.busy_d else np.zeros(0, np.int64)
        order = np.argsort(bt, kind="stable")
        bt, bd = bt[order], bd[order]
        level = np.cumsum(bd)  # level[i]: open things after the first i+1 steps
        # a cut at T is safe if the steps before T sum to 0: the largest such T in
        # (bt[i], bt[i+1]] is bt[i+1]; after the last step, the latest record time
        cand = free_ends(bt, level)
        if not bt.size or level[-1] == 0:
            cand = np.r_[cand, last] if (not bt.size or last > bt[-1]) else cand
        if bt.size and bt[0] > first:
            cand = np.r_[bt[0], cand]
        cand = cand[cand > first]
        for cut in cand[::-1][:4].tolist():  # latest safe cuts first
            done = self._aligned(merged, cut)
            if done is not None:
                self.attempts.append((self.count, first, cut))
                return self._split(merged, cut, bt, bd, done)
        self.attempts.append((self.count, first, None))
        return None

    def _aligned(self, merged: dict[int, Events], cut: int) -> dict | None:
        """Exactly: no channel with a message in flight, every communicator's members
        through the same number of collectives, at ``cut``. Returns the completed
        collectives per (communicator, member) then, or None."""
        channels, signs, done = self._balance(merged, cut)
        if channels.shape[1] and np.any(np.bincount(_key_ids(list(channels)), weights=signs)):
            return None
        return done if collectives_aligned(self.defs, done) else None

    def _balance(self, merged: dict[int, Events], cut: int
                 ) -> tuple[np.ndarray, np.ndarray, dict]:
        """The sends (+1) and receives (-1) of the pending records before ``cut`` by
        channel (rows: sender, receiver, communicator, tag; a column each), and the
        completed collectives per (communicator key, location) then.

        All locations' records before the cut at once (one flat set of columns), so
        that its cost is a few numpy calls per cut, not per location and channel."""
        done = dict(self.coll_done)
        defs = self.defs
        locs = list(merged)
        if not locs:  # (nothing pending: the last cut's state, which was aligned)
            return np.zeros((4, 0), np.int64), np.zeros(0, np.int64), done
        evs = [merged[loc] for loc in locs]
        ns = [int(np.searchsorted(ev.time, cut, side="left")) for ev in evs]
        k = np.concatenate([ev.kind[:n] for ev, n in zip(evs, ns, strict=True)])
        pos = np.repeat(np.arange(len(locs), dtype=np.int64), ns)
        send = _SENDS[k]
        # a receive, or a matched probe (it took the message)
        recv = _RECVS[k] | ((k == PROBE) &
                            (np.concatenate([ev.size_recv[:n] for ev, n
                                             in zip(evs, ns, strict=True)]) >= 0))
        idx = np.flatnonzero(send | recv)
        keys, signs = [], []
        if idx.size:
            key, sign = _channel_keys(defs, locs, evs, ns, idx, pos[idx], send[idx])
            keys.append(key)
            signs.append(sign)
        del send, recv, idx
        coll = np.flatnonzero(_COLL_DONE[k])
        if coll.size:
            ccomm = np.concatenate([ev.comm[:n] for ev, n in zip(evs, ns, strict=True)]
                                   )[coll].astype(np.int64)
            cp = pos[coll]
            ids = _key_ids([ccomm, cp])
            _, first, counts = np.unique(ids, return_index=True, return_counts=True)
            for comm_, q, c in zip(ccomm[first].tolist(), cp[first].tolist(),
                                   counts.tolist(), strict=True):
                loc = locs[q]
                key = comm_ if defs.comms.get(comm_) and defs.comms[comm_].members \
                    else (comm_, loc)
                done[(key, loc)] = done.get((key, loc), 0) + c
        for t, loc, (comm_, peer_, tag_) in self.cancelled:  # matching drops these sends
            if t < cut:
                members = members_of(defs, comm_, loc)
                other_ = members[peer_] if 0 <= peer_ < len(members) else -1
                keys.append(np.array([[loc], [other_], [comm_], [tag_]], dtype=np.int64))
                signs.append(np.array([-1], dtype=np.int64))
        if not keys:
            return np.zeros((4, 0), np.int64), np.zeros(0, np.int64), done
        cols = keys[0] if len(keys) == 1 else np.concatenate(keys, axis=1)
        return cols, np.concatenate(signs), done

    def _split(self, merged: dict[int, Events], cut: int, bt: np.ndarray | None,
               bd: np.ndarray | None, done: dict | None) -> dict[int, Events]:
        """The segment before ``cut``; the rest stays pending. ``bt``/``bd``/``done``:
        the cut search's state after the cut (None when replaying cuts)."""
        seg: dict[int, Events] = {}
        self.pending = defaultdict(list)
        self.count = 0
        ends = self._ends({loc: ev.time for loc, ev in merged.items()}, cut)
        for loc, ev in merged.items():
            n = ends[loc]
            if n:
                seg[loc] = ev.slice(0, n)
            if n < len(ev):
                # a copy, not a view of the joined arrays (which would then live
                # until the next cut): the segment's arrays go once its holder
                # drops them (_Segmenter.traces)
                self.pending[loc].append(ev.copy(slice(n, len(ev))))
                self.count += len(ev) - n
        self._cut_at(cut, bt, bd, done)
        return seg

    def _ends(self, times: dict[int, np.ndarray], cut: int) -> dict[int, int]:
        """How many of each location's pending records (``times``: their measured
        times) go into the segment that ends at ``cut``: those before it, METRIC
        samples held back for the reference record after them."""
        for ref in set(self.refs.values()):  # the references' last records before the cut
            t = times.get(ref)
            n = int(np.searchsorted(t, cut, side="left")) if t is not None else 0
            if n:
                self.ref_last[ref] = int(t[n - 1])
        ends = {}
        for loc, t in times.items():
            n = int(np.searchsorted(t, cut, side="left"))
            ref = self.refs.get(loc)
            if ref is not None:  # a metric sample waits for the reference record after it
                last = self.ref_last.get(ref)
                n = 0 if last is None else min(n, int(np.searchsorted(t, last, "right")))
            ends[loc] = n
        return ends

    def _cut_at(self, cut: int, bt: np.ndarray | None, bd: np.ndarray | None,
                done: dict | None) -> None:
        """The search's state after a cut at ``cut`` (see :meth:`_split`)."""
        if bt is not None and bd is not None and done is not None:
            keep = bt >= cut
            self.busy_t, self.busy_d = [bt[keep]], [bd[keep]]
            self.coll_done = defaultdict(int, done)
            self.cancelled = [c for c in self.cancelled if c[0] >= cut]
        self.last_cut = cut


def free_ends(bt: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Of the busy function's steps (times ``bt`` sorted, ``level`` after each), the
    latest safe cut of each interval it is 0 on that a step ends: a step's time
    where the steps before it sum to 0 (the records before it close everything
    they opened)."""
    if not bt.size:
        return bt
    free = np.flatnonzero(level[:-1] == 0)
    return bt[free + 1][bt[free + 1] > bt[free]]


def collectives_aligned(defs: Definitions, done: dict) -> bool:
    """Whether every communicator's members completed the same number of
    collectives (``done``: completed per (communicator key, location), as
    :meth:`_Cutter._balance` gives them; a member without an entry completed none)."""
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


def _channel_keys(defs: Definitions, locs: list[int], evs: list[Events], ns: list[int],
                  idx: np.ndarray, p: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For :meth:`_Cutter._aligned`: the channel (sender, receiver, communicator, tag)
    of the records ``idx`` of the first ``ns`` records of ``evs`` joined (``p``: their
    location's position in ``locs``, ``s``: which are sends), as the rows of one
    array, and their signs (+1 sent, -1 received). A function of its own so that its
    intermediate columns are freed before the channels are grouped (the cut pass's
    transient)."""
    comm = np.concatenate([ev.comm[:n] for ev, n in zip(evs, ns, strict=True)]
                          )[idx].astype(np.int64)
    peer = np.concatenate([ev.peer[:n] for ev, n in zip(evs, ns, strict=True)]
                          )[idx].astype(np.int64)
    tag = np.concatenate([ev.tag[:n] for ev, n in zip(evs, ns, strict=True)]
                         )[idx].astype(np.int64)
    # the peer's location through its communicator as seen from the record's
    # location: one members table per distinct (communicator, location)
    pair_ids = _key_ids([comm, p])
    first = np.unique(pair_ids, return_index=True)[1]
    tables, starts, lengths = [], [], []
    at = 0
    for c, q in zip(comm[first].tolist(), p[first].tolist(), strict=True):
        members = members_of(defs, c, locs[q]) or (-1,)
        tables.append(np.array(members, dtype=np.int64))
        starts.append(at)
        lengths.append(len(members))
        at += len(members)
    table = np.concatenate(tables)
    start = np.array(starts, dtype=np.int64)[pair_ids]
    ok = (peer >= 0) & (peer < np.array(lengths, dtype=np.int64)[pair_ids])
    other = np.full(idx.size, -1, np.int64)
    other[ok] = table[start[ok] + peer[ok]]
    del peer, pair_ids, start, ok
    here = np.array(locs, dtype=np.int64)[p]
    return (np.stack([np.where(s, here, other), np.where(s, other, here), comm, tag]),
            np.where(s, 1, -1).astype(np.int64))


class _CountingCutter(_Cutter):
    """The cutter's search for the segments' cuts and record counts only (the
    base of a distributed rank's cutter, :mod:`compensate.parallel.cutting`, and
    of :func:`compensate.parallel.segments.cut_times`): the
    same attempts and cuts as :class:`_Cutter`, but of the records it takes it keeps
    every record's time (the counts, the references of METRIC samples) and, whole,
    only the records :meth:`_Cutter._aligned` reads (:data:`_ALIGNED`); the busy
    function is built from each whole chunk as it is taken. A segment is then
    ``{location: measured times of its records}``. 10^6-record stencil: 28 % of the
    records kept whole, the pass's traced peak 60 -> 17 MiB (docs/parallel.md).
    The remainder after a cut is copied, so that the joined arrays are freed with
    the segment."""

    def __init__(self, defs: Definitions, segment_records: int) -> None:
        super().__init__(defs, segment_records)
        self.times: dict[int, list[np.ndarray]] = defaultdict(list)
        self.merged_times: dict[int, np.ndarray] = {}

    def _hold(self, loc: int, ev: Events) -> None:
        self.times[loc].append(ev.time)
        keep = _ALIGNED[ev.kind]
        if keep.any():
            self.pending[loc].append(ev.copy(keep))

    def _merge(self) -> dict[int, Events]:
        self.merged_times = {loc: np.concatenate(parts) if len(parts) > 1 else parts[0]
                             for loc, parts in self.times.items() if parts}
        self.times = defaultdict(list, {loc: [t] for loc, t in self.merged_times.items()})
        return super()._merge()

    def _bounds(self, merged: dict[int, Events]) -> tuple[int, int]:
        times = self.merged_times.values()
        return min(int(t[0]) for t in times), max(int(t[-1]) for t in times)

    def _split(self, merged: dict[int, Events], cut: int, bt: np.ndarray | None,
               bd: np.ndarray | None, done: dict | None) -> dict[int, np.ndarray]:
        seg: dict[int, np.ndarray] = {}
        self.pending = defaultdict(list)
        self.times = defaultdict(list)
        self.count = 0
        ends = self._ends(self.merged_times, cut)
        for loc, t in self.merged_times.items():
            n = ends[loc]
            if n:
                seg[loc] = t[:n]
            if n < len(t):
                self.times[loc].append(t[n:].copy())
                self.count += len(t) - n
            ev = merged.get(loc)
            if ev is not None:  # the kept records of the n: those up to the n-th's time
                m = int(np.searchsorted(ev.time, t[n - 1], "right")) if n else 0
                if m < len(ev):
                    self.pending[loc].append(ev.copy(slice(m, None)))
        self.merged_times = {}
        self._cut_at(cut, bt, bd, done)
        return seg

    def rest(self) -> dict[int, np.ndarray] | None:
        if not self.count:
            return None
        seg = {loc: np.concatenate(parts) for loc, parts in self.times.items() if parts}
        self.times.clear()
        self.pending.clear()
        self.count = 0
        return seg


def segments(defs: Definitions, chunks: Iterable[dict[int, Events]],
             segment_records: int = SEGMENT_RECORDS) -> Iterator[dict[int, Events]]:
    """The records of ``chunks`` (successive slices of every location, in time
    order), regrouped into segments that end at safe cuts."""
    cutter = _Cutter(defs, segment_records)
    yield from _segments(cutter, chunks)


def _segments(cutter: _Cutter, chunks: Iterable[dict[int, Events]]
              ) -> Iterator[dict[int, Events]]:
    for chunk in chunks:
        yield from cutter.add(chunk)
    rest = cutter.rest()
    if rest:
        yield rest


# -- one segment ------------------------------------------------------------------------

class _Segmenter:
    """Runs each segment through match -> (observe | compensate -> verify) with the
    context the segments before it left."""

    def __init__(self, defs: Definitions, platform: Platform, source: str,
                 eager_limit: int | None, strict: bool = False) -> None:
        self.defs = defs
        self.platform = platform
        self.source = source
        self.eager_limit = eager_limit
        self.strict = strict
        self.done: dict[int, int] = defaultdict(int)  # records of earlier segments
        #: the first Enter/Leave that does not nest (record index in the location)
        self.nesting_first: dict | None = None
        self.ovh = platform.overhead_table() * float(defs.timer_resolution)
        self.dev_ovh = platform.device_overhead * float(defs.timer_resolution)
        self.ctx: dict[int, _Context] = defaultdict(_Context)
        self.t0: int | None = None
        self.links = LinkCarry(defs)

    def traces(self, seg: dict[int, Events]) -> tuple[Trace, Trace, dict]:
        """(trace for the engine, trace for matching, pins) of a segment with its
        context records in front. A location of ``seg`` with context records
        becomes a view of its records in the engine's trace (the same records: its
        own arrays are freed, location by location, where nothing else holds them,
        as in a rank's segment: compensate.parallel.segments)."""
        events, for_match, pins = {}, {}, {}
        for loc in self.ctx:  # a carried sender on a location without records here
            if self.ctx[loc].carried and loc not in seg:
                seg[loc] = Events.from_rows([], [])
        for loc, ev in seg.items():
            ctx = self.ctx[loc]
            rows = ctx.records()
            if not rows:
                events[loc] = for_match[loc] = ev
                continue
            head = Events.from_rows([r[0] for r in rows], [r[1] for r in rows])
            events[loc] = Events.concat([head, ev])
            seg[loc] = events[loc].slice(len(rows), len(rows) + len(ev))
            if ctx.last is not None and not ctx.last_carried:
                kind = events[loc].kind.copy()
                kind[len(rows) - 1] = _NEUTRAL
                for_match[loc] = replace(events[loc], kind=kind)
            else:
                for_match[loc] = events[loc]
            pins[loc] = (np.array([r[2] for r in rows]), ctx.carry)
        return (Trace(self.defs, events, self.source), Trace(self.defs, for_match, self.source),
                pins)

    def references(self, seg: dict[int, Events]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """(measured, approximated) time of the last record of each reference thread
        of a METRIC location (compensate.engine.metrics) that has no records in
        ``seg``: what that segment's samples are mapped through (float ticks from
        t0)."""
        out = {}
        for ref in set(self.defs.metric_references().values()):
            if ref is None or ref in seg:
                continue
            rows = self.ctx[ref].records() if ref in self.ctx else []
            if rows:
                m = float(rows[-1][0][0] - self.t0)
                out[ref] = (np.array([m]), np.array([rows[-1][2]]))
        return out

    def watermark(self, cutter: _Cutter, seg: dict[int, Events], start: int) -> int:
        """No location that has written nothing yet will write a record before the
        returned time (see ``compensate_stream``). A METRIC location's samples may
        come a segment late (they wait for their reference's next record) and take
        their reference's time function, so for one that has written nothing yet
        the bound is its reference's last written time (every later sample maps at
        or after it), or, while the reference has written nothing either, its own
        earliest sample still to write (a sample before the reference's first
        record keeps that record's shift, which is >= 0)."""
        low = start
        for loc, ref in cutter.refs.items():
            if self.done[loc]:
                continue
            if self.done[ref]:  # (rounded as rounded_times rounds the samples)
                low = min(low, int(np.rint(self.ctx[ref].records()[-1][2])) + self.t0)
                continue
            firsts = [int(ev.time[0]) for ev in cutter.pending.get(loc, ()) if len(ev)]
            if loc in seg:
                firsts.append(int(seg[loc].time[0]))
            if firsts:
                low = min(low, min(firsts))
        return low

    def match(self, mtrace: Trace) -> Matching:
        try:
            matching = match(mtrace, eager_limit=self.eager_limit, strict=self.strict)
        except TraceError as exc:
            raise SegmentError(str(exc)) from exc
        first = matching.nesting_first
        if first is not None and self.nesting_first is None:
            # segments come in time order: the first segment with one has the first;
            # its index counts the records of earlier segments, not the context
            loc = first["location"]
            p = len(self.ctx[loc].records()) if loc in self.ctx else 0
            self.nesting_first = dict(first, index=self.done[loc] + first["index"] - p)
        self._lock_order(mtrace, matching)
        self._synchronizes(mtrace, matching)
        return matching

    def _synchronizes(self, mtrace: Trace, matching: Matching) -> None:
        """A host synchronize call of this segment links, as in memory, to each
        stream's latest device Leave before it that is not before the thread's
        previous synchronize (compensate.matching.devices). Where that Leave is in
        an earlier segment it is carried (compensate.engine.carry), and the
        segment's matcher, which does not know the thread's previous synchronize,
        links it also for a thread that had already synchronized after it: those
        links are dropped here. NotStreamable where the Leave was not carried (its
        activity began in an earlier segment still): the link would be lost and
        the call could return before the device work ended, so the caller runs the
        whole trace in memory."""
        syncs = matching.devices.syncs if matching.devices is not None else []
        if any(s.kind == "synchronize" for s in syncs) and self.links.sync_after:
            kept = []
            for s in syncs:
                if s.kind == "synchronize":
                    after = self.links.sync_after.get(s.recv[0], -1)
                    s.sends = [(loc, i) for loc, i in s.sends
                               if int(mtrace.events[loc].time[i]) >= after]
                    if not s.sends:
                        continue
                kept.append(s)
            matching.devices.syncs = kept
        links = self.links
        if not links.device_leave:
            return
        defs = self.defs
        streams: dict[int, list[int]] = defaultdict(list)
        for loc in links.device_leave:
            streams[defs.process_of(loc)].append(loc)
        for loc, ev in mtrace.events.items():
            d = defs.locations.get(loc)
            mine = streams.get(defs.process_of(loc)) if d is not None and d.is_cpu else None
            if not mine or loc not in self.done:
                continue
            p = len(self.ctx[loc].records()) if loc in self.ctx else 0
            sync = np.flatnonzero((ev.kind[p:] == LEAVE)
                                  & np.isin(ev.region[p:], links.sync_regions))
            if not sync.size:
                continue
            i = p + int(sync[0])
            t = int(ev.time[i])
            after = links.sync_after.get(loc, -1)
            for s_loc in mine:
                sev = mtrace.events.get(s_loc)  # (a carried Leave keeps its kind here)
                here = sev is not None and bool(np.any((sev.kind == LEAVE) & (sev.time < t)))
                if not here and links.device_leave[s_loc] >= after:
                    raise NotStreamable(
                        f"location {loc}, record {self.done[loc] + i - p}: a synchronize "
                        f"call after the cut waits for device work on location {s_loc} "
                        f"that ended before it; this trace is compensated in memory")

    def _lock_order(self, mtrace: Trace, matching: Matching) -> None:
        """Lock hand-overs across the cut that fork/join, barriers or Pthread
        create/join order (compensate.matching.lock_order): seed the locations each
        carried release happened before, and keep this segment's for the next."""
        rows = {loc: self.ctx[loc].records() if loc in self.ctx else []
                for loc in mtrace.events}
        seeds: dict[int, dict[int, int]] = {}
        for loc, rs in rows.items():
            for pos, r in enumerate(rs):
                for x in self.links.reach.get((loc, r[4]), ()):
                    seeds.setdefault(x, {})[loc] = pos
        if seeds:
            mark_implied(mtrace, matching.threads, seeds)
        if not (seeds or matching.threads.syncs or matching.threads.barriers):
            self.links.reach = {}
            return
        self.links.reach = {
            (loc, rows[loc][i][4] if i < len(rows[loc])
             else self.done[loc] + i - len(rows[loc])): locs
            for (loc, i), locs in release_reach(mtrace, matching.threads, seeds).items()}

    def advance(self, seg: dict[int, Events], values: dict[int, np.ndarray] | None,
                written: dict[int, np.ndarray] | None, matching: Matching) -> None:
        """Update every location's context with the records of ``seg`` (``values``:
        their approximated float times, ``written``: their output timestamps; None
        in the fitting pass). ``matching`` is the segment's: its
        :attr:`~compensate.matching.Matching.open_calls` (indices into the segment
        with its context in front) are the calls still open after it."""
        base: dict[int, int] = {}
        for loc, ev in seg.items():
            ctx = self.ctx[loc]
            n = len(ev)
            if not n:  # only carried context records were in front
                continue
            base[loc] = self.done[loc]
            self.done[loc] += n
            v = values[loc] if values is not None else np.zeros(n)
            w = written[loc] if written is not None else np.zeros(n, np.int64)
            rows = ctx.records()  # the context records in front of the segment
            p = len(rows)
            stack = []
            for i in matching.open_calls.get(loc, np.zeros(0, np.int64)).tolist():
                if i < p:  # a call opened in an earlier segment, still open
                    stack.append(rows[i])
                else:
                    j = i - p
                    stack.append((ev.row(j), ev.payload[j], float(v[j]), int(w[j]),
                                  base[loc] + j))
            ctx.stack = stack
            last = n - 1
            is_open = bool(stack) and int(matching.open_calls[loc][-1]) == p + last
            ctx.last = None if is_open else \
                (ev.row(last), ev.payload[last], float(v[last]), int(w[last]),
                 base[loc] + last)
            # the overhead of the trailing timestamp group (R1: charged to the next gap)
            t = ev.time
            first = int(np.searchsorted(t, t[last], side="left"))
            o = self.platform.location_overheads(loc, ev.kind[first:], ev.region[first:],
                                                 ev.overhead[first:]) \
                * float(self.defs.timer_resolution)
            if loc in self.defs.locations and self.defs.locations[loc].is_device:
                o = np.full_like(o, self.dev_ovh)  # the device overhead (R9, default 0)
            flush = ev.kind[first:] == BUFFER_FLUSH
            carry = float(o.sum())
            if flush.any():
                carry += float((ev.size[first:][flush] - t[first:][flush]).sum())
            ctx.carry = carry

        def row_of(loc: int, j: int) -> Row:
            ev = seg[loc]
            v = float(values[loc][j]) if values is not None else 0.0
            w = int(written[loc][j]) if written is not None else 0
            return (ev.row(j), ev.payload[j], v, w, base[loc] + j)

        self.links.update({loc: ev for loc, ev in seg.items() if len(ev)}, row_of)
        carried = self.links.carried()
        for loc, ctx in self.ctx.items():
            mine = carried.get(loc, [])
            own = {r[4] for r in ctx.stack} | ({ctx.last[4]} if ctx.last is not None else set())
            ctx.carried = [r for r in mine if r[4] not in own]
            ctx.last_carried = ctx.last is not None and any(r[4] == ctx.last[4] for r in mine)
        for loc in carried:
            if loc not in self.ctx:
                self.ctx[loc].carried = carried[loc]


def _sum_counts(total: dict, part: dict) -> None:
    for key, value in part.items():
        if isinstance(value, dict):
            _sum_counts(total.setdefault(key, {}), value)
        else:
            total[key] = total.get(key, 0) + value


def _add_stats(total: Stats, part: Stats) -> None:
    for key, value in part.__dict__.items():
        if isinstance(value, dict):
            counts = getattr(total, key)
            for k, x in value.items():
                counts[k] = counts.get(k, 0) + x
        elif key == "overcompensated_max_s":
            total.overcompensated_max_s = max(total.overcompensated_max_s, value)
        elif key in ("flush_seconds_removed", "flush_ticks", "flush_resolution"):
            continue  # (exact: below)
        else:
            setattr(total, key, getattr(total, key) + value)
    if part.flush_ticks:
        total.add_flush_ticks(part.flush_ticks, part.flush_resolution)


def _span(span: tuple[int, int] | None, lo: int, hi: int) -> tuple[int, int]:
    return (lo, hi) if span is None else (min(span[0], lo), max(span[1], hi))


def fit_pass(defs: Definitions, chunks: Iterable[dict[int, Events]], platform: Platform,
             source: str, eager_limit: int | None,
             segment_records: int = SEGMENT_RECORDS, strict: bool = False,
             cuts: list | None = None, segments: list | None = None,
             group: int = 1) -> FitOutcome:
    """``--bound fitted``, first pass: observe the transfers segment by segment and fit.

    The outcome's ``links`` are the least latency per kind of thread, device and
    RMA synchronisation link over all segments
    (:func:`compensate.engine.fit.observe_links`): the second pass must be given
    them (``EngineOptions.link_latency``), else each segment would time its links
    by the least latency of its own, and the result would depend on the cuts.

    ``cuts``, a list, receives the cutter's attempts: :func:`compensate_stream` given
    them (and the same chunks) cuts the same segments without searching again.
    ``segments``, a list, receives each segment's ``(cut, records)`` as
    :func:`compensate.parallel.segments.cut_times` gives them (the distributed
    streamed run's cuts). ``group``: as :func:`~compensate.parallel.segments.cut_times`'s
    (chunks ``group`` times smaller, a cut looked for after every ``group``-th: the
    same segments)."""
    sg = _Segmenter(defs, platform, source, eager_limit, strict)
    observed: list[Observations] = []
    cutter = _Cutter(defs, segment_records)
    ended: list[bool] = []
    t0: int | None = None

    def cut() -> Iterator[dict[int, Events]]:  # (_segments' for group 1)
        k = 0
        for k, chunk in enumerate(chunks, 1):
            yield from cutter.add(chunk, cut=k % group == 0)
        if k % group:  # the last one-process chunk, shorter: its look for a cut
            yield from cutter.add({})
        ended.append(True)  # the rest: its cut is None
        rest = cutter.rest()
        if rest:
            yield rest

    for seg in cut():
        if segments is not None:
            segments.append((None if ended else cutter.last_cut,
                             sum(len(ev) for ev in seg.values())))
        if t0 is None:  # the engine's origin of times (compensate_stream's sg.t0)
            t0 = min(int(ev.time[0]) for ev in seg.values())
        trace, mtrace, _ = sg.traces(seg)
        matching = sg.match(mtrace)
        observed.append(observe_transfers(trace, matching, platform, t0=t0))
        sg.advance(seg, None, None, matching)
        seg = trace = mtrace = matching = None
        release_memory()
    if cuts is not None:
        cuts[:] = cutter.attempts
    return outcome_of(Observations.concat(observed), 1.0 / defs.timer_resolution,
                      platform.network)


def compensate_stream(defs: Definitions, chunks: Iterable[dict[int, Events]],
                      platform: Platform, options: EngineOptions,
                      write: Callable[[int, Events], None], *, source: str = "",
                      eager_limit: int | None = None,
                      progress: Callable[[int], None] | None = None,
                      segment_records: int = SEGMENT_RECORDS,
                      advance: Callable[[int], None] | None = None,
                      strict: bool = False, cuts: list | None = None) -> StreamResult:
    """Compensate the records of ``chunks`` segment by segment and hand each
    location's output records to ``write(location, events)`` in order.

    ``advance(time)`` (e.g. :meth:`compensate.formats.TraceWriter.advance`) gets,
    before each segment, a watermark: no location handed nothing yet will be
    handed a record earlier than ``time`` (the segment's first measured time).

    ``cuts``: the cut attempts :func:`fit_pass` recorded over the same chunks; the
    segments are then cut where that pass cut them, without searching again (the
    same segments; :class:`NotStreamable` if the chunks are not the same).

    Nothing is passed to ``write`` for a segment that fails verification: the run
    stops there (``result.verification`` says why) and the caller discards the
    output. Raises :class:`NotStreamable` / :class:`SegmentError` (see the module
    docstring) and :class:`TraceError` for bad input.
    """
    sg = _Segmenter(defs, platform, source, eager_limit, strict)
    out = StreamResult(Stats(), Verification(), {})
    cutter = _Cutter(defs, segment_records, replay=cuts)
    for seg in _segments(cutter, chunks):
        n_seg = sum(len(ev) for ev in seg.values())
        out.segments += 1
        out.largest_segment = max(out.largest_segment, n_seg)
        start = min(int(ev.time[0]) for ev in seg.values())
        if sg.t0 is None:
            sg.t0 = start
        if advance is not None:
            # Valid: later records were measured at or after ``start``; a location's
            # output times never decrease (rounded_times' ``floor``); its first record
            # has nothing before it, so it is START (its measured time) or a receive
            # from ``enter_const = recv_m - cs``, where every case of R2 (recv_time,
            # the inline fast path) gives >= ready + cs = recv_m. Other rules are for
            # records after their own Enter/CollectiveBegin/request record. METRIC
            # samples are mapped, not compensated: _Segmenter.watermark.
            advance(sg.watermark(cutter, seg, start))
        trace, mtrace, pins = sg.traces(seg)
        matching = sg.match(mtrace)
        values: dict[int, np.ndarray] = {}
        written: dict[int, np.ndarray] = {}
        out_events: dict[int, Events] = {}
        approx = None
        if options.bound == "none":
            for loc, ev in seg.items():
                values[loc] = (ev.time - sg.t0).astype(np.float64)
                written[loc] = ev.time
            stats = Stats()
        else:
            try:
                approx, _, stats = approximate(trace, platform, options, matching,
                                               t0=sg.t0, pins=pins,
                                               references=sg.references(seg))
            except TraceError as exc:
                raise SegmentError(str(exc)) from exc
            for loc, ev in seg.items():
                p = len(pins[loc][0]) if loc in pins else 0
                values[loc] = approx[loc][p:]
                if not len(ev):
                    written[loc] = np.zeros(0, np.int64)
                    continue
                floor = sg.ctx[loc].records()[-1][3] if p else None
                written[loc], _ = rounded_times(ev, values[loc], sg.t0, floor)
        for loc, ev in trace.events.items():
            p = len(pins[loc][0]) if loc in pins else 0
            ctx_times = [r[3] for r in sg.ctx[loc].records()] if p else []
            t = np.concatenate([np.array(ctx_times, dtype=np.int64), written[loc]])
            flush = ev.kind == BUFFER_FLUSH
            size = None
            if options.bound != "none" and np.any(flush):
                size = ev.size.copy()
                size[flush] = t[flush]
            out_events[loc] = ev.with_time(t, size)
        check = verify(Trace(defs, out_events, source), matching, measured=trace,
                       skip={loc: len(pins[loc][0]) for loc in pins})
        _add_verification(out.verification, check)
        stats.messages = matching.table.message_count
        stats.unmatched_sends = matching.unmatched_sends
        stats.collective_instances = len(matching.instances)
        stats.unknown_collective_ops = matching.unknown_ops
        _add_stats(out.stats, stats)
        _sum_counts(out.counts, matching.counts())
        if not check.ok:
            return out
        for loc, ev in seg.items():
            if not len(ev):
                continue
            p = len(pins[loc][0]) if loc in pins else 0
            write(loc, out_events[loc].slice(p, p + len(ev)))
            out.measured_span = _span(out.measured_span, int(ev.time[0]), int(ev.time[-1]))
            w = written[loc]
            out.approximated_span = _span(out.approximated_span, int(w[0]), int(w[-1]))
        out.records += n_seg
        sg.advance(seg, values, written, matching)
        # drop this segment's arrays before handing the freed heap back
        seg = trace = mtrace = matching = values = written = out_events = approx = None
        release_memory()
        if progress:
            progress(out.records)
    out.stats.records = out.records
    out.locations = out.stats.locations = len(defs.locations)  # as in memory: all defined
    out.nesting_first = sg.nesting_first
    return out


def _add_verification(total: Verification, part: Verification) -> None:
    total.order += part.order
    total.messages += part.messages
    total.collectives += part.collectives
    total.metrics += part.metrics
    total.threads += part.threads
    total.devices += part.devices
    total.partitioned += part.partitioned
    for kind, n in part.carried_local_only.items():
        total.carried_local_only[kind] = total.carried_local_only.get(kind, 0) + n
    total.examples += part.examples[:max(0, 10 - len(total.examples))]


def trace_chunks(trace: Trace, chunk_records: int) -> Iterator[dict[int, Events]]:
    """An in-memory trace as chunks in time order (ties by location), as a reader
    of the global record order yields them (for tests and library use)."""
    locs = list(trace.events)
    times = np.concatenate([trace.events[loc].time for loc in locs]) if locs else []
    owner = np.concatenate([np.full(len(trace.events[loc]), j) for j, loc in enumerate(locs)]) \
        if locs else []
    order = np.lexsort((owner, times))
    counts = np.zeros(len(locs), dtype=np.int64)
    for start in range(0, len(order), chunk_records):
        per = np.bincount(owner[order[start:start + chunk_records]], minlength=len(locs))
        chunk = {}
        for j in np.flatnonzero(per).tolist():
            a = int(counts[j])
            chunk[locs[j]] = trace.events[locs[j]].slice(a, a + int(per[j]))
            counts[j] += per[j]
        yield chunk
