"""Safe cuts: where a trace can be split into segments that depend on each other only
through each location's own history (docs/design.md §5, "Streaming in segments").

A cut at measured time ``T`` is safe when nothing crosses it: no message sent before
``T`` and received after it, no send call still open, no collective with members on both
sides, no request (Isend, Irecv, nonblocking collective) open across it, no parallel
region, Pthread create/begin or end/wait, RMA window or host synchronize call open
across it, and no MPI-4 partitioned operation after its first Init nor any EZTrace
Pthread call after the first one. :class:`Cutter` collects chunks of records (successive
slices of every location, in time order) and hands out segments that end at the latest
safe cut once :data:`SEGMENT_RECORDS` records are pending, no later than a segment's
worth of them where it can (:mod:`compensate.pipeline.candidates`): records held long
without a cut are cut in segments of that size. Input that is not in time order
across locations raises :class:`NotStreamable`.

The steps of its search are public: a distributed run's ranks search together
(:mod:`compensate.parallel.cutting`). :meth:`Cutter.feed` takes records into the busy
function (:meth:`Cutter.busy`), :meth:`Cutter.merge` and :meth:`Cutter.bounds` give the
pending records and their span, :meth:`Cutter.balance` the exact check's sums at a cut
(:meth:`Cutter.aligned` in one process), :meth:`Cutter.split` cuts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

import numpy as np

import compensate.pipeline.candidates as candidates
from compensate.families import FAMILIES, Cut
from compensate.formats.fields import field_of
from compensate.matching.collectives import thread_ranks
from compensate.matching.devices import is_synchronize
from compensate.matching.groups import key_ids
from compensate.matching.pthreads import cut_regions, cut_steps
from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    ENTER,
    IMRECV,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    KIND_CODE,
    LEAVE,
    MRECV,
    NBC_COMPLETE,
    NBC_REQUEST,
    NONE,
    PROBE,
    RECV,
    REQUEST_CANCELLED,
    SEND,
    Definitions,
    Events,
    kind_table,
)
from compensate.pipeline.channels import (
    RECEIVES,
    SENDS,
    Dropped,
    channel_keys,
    collectives_aligned,
    sent_and_received,
)
from compensate.pipeline.sendcalls import joined_send_call_ends, send_call_ends
from compensate.pipeline.unclosed import REQUEST_KINDS, Unclosed

#: record kinds that open (+1) / close (-1) something no cut may fall inside, from
#: the families' registry; messages, matched probes and MPI collectives are counted
#: by Cutter._steps itself (in flight or not, a probe only once it took its message)
_APART = ("message", "probe", "collective")
_CUTS = [f.cut for f in FAMILIES if isinstance(f.cut, Cut) and f.name not in _APART]
_OPENS = kind_table(*(KIND_CODE[k] for c in _CUTS for k in c.opens))
_CLOSES = kind_table(*(KIND_CODE[k] for c in _CUTS for k in c.closes))
#: the records of a Pthread's span (ThreadCreate -> ThreadBegin, ThreadEnd ->
#: ThreadWait) that open or close it only with a defined thread contingent: EZTrace
#: writes each thread's ThreadBegin/ThreadEnd with UNDEFINED, and a close nothing
#: opened would let the busy function reach 0 while something else is open
_CONTINGENT = kind_table(KIND_CODE["ThreadBegin"], KIND_CODE["ThreadEnd"])
#: collectives completed (Cutter.balance)
_COLL_DONE = kind_table(COLL_END, NBC_COMPLETE)
#: kinds that open and close nothing the busy function counts, and are no call's
#: Enter or Leave: a location's chunk of only these (a metric location's samples)
#: adds no step and leaves its open calls as they were
_INERT = kind_table(KIND_CODE["Metric"], KIND_CODE["CallingContextSample"])

#: Records pending before the segmenter looks for a safe cut.
SEGMENT_RECORDS = 1 << 18
#: the attempt a cutter's list of attempts holds where it read ahead (a replay of
#: them reads ahead there too)
AHEAD = (-2, -2, None)


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


class NotStreamable(Exception):
    """The input cannot be cut into segments (not in time order across locations)."""


class SegmentError(Exception):
    """A segment failed with a :class:`TraceError` whose record numbers refer to the
    segment; the in-memory path reports it exactly."""


class Cutter:
    """Collects chunks and hands out segments that end at safe cuts."""

    #: whether the busy function counts the messages in flight (a distributed run's
    #: ranks leave them to the exact check summed over ranks: parallel.cutting)
    MESSAGES = True

    def __init__(self, defs: Definitions, segment_records: int,
                 replay: list[tuple[int, int, int | None]] | None = None,
                 lookahead: Callable[[], Unclosed] | None = None) -> None:
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
        #: the records pending when a search last found no cut (or one that took none)
        self.failed: int | None = None
        self.last_cut: int | None = None
        self.busy_t: list[np.ndarray] = []  # times of +-1 steps of "something open"
        self.busy_d: list[np.ndarray] = []
        #: records taken whose steps are not in busy_t/busy_d yet (feed_chunk)
        self.unstepped: list[tuple[int, Events]] = []
        self.open_requests: dict[int, dict[int, int]] = defaultdict(dict)  # loc -> id -> kind
        self.isend_channel: dict[tuple[int, int], tuple] = {}  # (loc, request) -> channel
        self.cancelled = Dropped(-1)  # the cancelled Isends (and never received sends)
        #: the receives past a gap (:mod:`.unclosed`), which close no message:
        #: matching leaves them unpaired
        self.unpaired = Dropped(1)
        #: ``lookahead()``: what the rest of the trace never closes (:mod:`.unclosed`),
        #: read before the search would hold LOOKAHEAD_AFTER segments' records (no cut)
        self.lookahead = lookahead
        self.unclosed: Unclosed | None = None
        self.seen: dict[int, int] = defaultdict(int)  # records fed, by location
        self.coll_done: dict[tuple, int] = defaultdict(int)  # (comm key, loc) -> completed
        #: a collective on another thread of a member's process counts as the member's
        self.thread_ranks = thread_ranks(defs)
        # regions of the calls open after the last record (entry order), and the
        # positions among them of the open calls around a send
        self.open_regions: dict[int, list[int]] = defaultdict(list)
        self.send_calls: dict[int, list[int]] = defaultdict(list)
        # METRIC locations and their reference threads (compensate.engine.metrics); the
        # last measured time of each reference handed out in a segment
        self.refs = {m: r for m, r in defs.metric_references().items() if r is not None}
        self.ref_last: dict[int, int] = {}
        # host synchronize calls (R9): no cut inside one, so that the device Leave it
        # waits for is matched in the same segment
        self.sync_regions = np.array([r for r, name in defs.regions.items()
                                      if is_synchronize(name)], dtype=np.int64)
        self.pthread_regions = cut_regions(defs.regions)  # EZTrace's Pthread calls

    # the busy function: messages in flight + calls around a send that are still open
    # (matching needs the send call's Leave) + open collective calls + open requests
    def _steps(self, parts: list[tuple[int, Events]]) -> None:
        """Add the steps of the records ``parts`` (location, its next records; in
        the order taken) to the busy function: every part's at once, as one flat
        set of columns, so that a chunk of a few records on each of many locations
        costs a few numpy calls, not a few dozen per location."""
        ev = Events.concat([e for _, e in parts])
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
        linked = np.flatnonzero(_CONTINGENT[k])
        if linked.size:  # (a thread of no creator links to nothing: matching.threads)
            free = linked[[field_of(ev.payload[i], "thread_contingent") is None
                           for i in linked.tolist()]]
            plus[free] = minus[free] = False
        if self.sync_regions.size:
            in_sync = np.isin(ev.region, self.sync_regions)
            plus = plus | ((k == ENTER) & in_sync)
            minus = minus | ((k == LEAVE) & in_sync)
        if self.pthread_regions is not None:  # their links span the run: no cut after
            plus, minus = cut_steps(ev, self.pthread_regions, plus, minus)
        null = (ev.peer == NONE) & (SENDS[k] | RECEIVES[k])
        plus, minus = plus & ~null, minus & ~null  # (MPI_PROC_NULL: no message)
        times = [t[plus], t[minus], t[matched]]
        deltas = [np.ones(int(plus.sum()), np.int64), -np.ones(int(minus.sum()), np.int64),
                  -np.ones(int(matched.sum()), np.int64)]
        locs = list(dict.fromkeys(loc for loc, _ in parts))
        if len(locs) == 1:
            opened, closed = self._send_call_ends(locs[0], ev)
            owner = None
        else:
            pos = {loc: j for j, loc in enumerate(locs)}
            owner = np.repeat([pos[loc] for loc, _ in parts], [len(e) for _, e in parts])
            opened, closed, still, now = joined_send_call_ends(
                k, ev.region, t, owner, [self.open_regions[loc] for loc in locs],
                [self.send_calls[loc] for loc in locs])
            for loc, s, o in zip(locs, still, now, strict=True):
                self.send_calls[loc], self.open_regions[loc] = s, o
        times += [opened, closed]
        deltas += [np.ones(opened.size, np.int64), -np.ones(closed.size, np.int64)]
        req = np.flatnonzero(REQUEST_KINDS[k])
        if req.size:
            rt, rd = self._request_steps(ev, req, locs * req.size if owner is None else
                                         [locs[j] for j in owner[req].tolist()])
            times.append(np.array(rt, dtype=np.int64))
            deltas.append(np.array(rd, dtype=np.int64))
        self.busy_t.append(np.concatenate(times))
        self.busy_d.append(np.concatenate(deltas))

    def _never_closed(self, loc: int, ev: Events, start: int) -> None:
        """Close, where they open, the records of one location's records ``ev``
        (numbered from ``start``) that the rest of the trace never closes
        (requests, collective Begins, sends)."""
        u, n = self.unclosed, len(ev)
        self._close(loc, ev.time[u.opened(loc, start, start + n)], ev,
                    u.of("sends", loc, start, start + n))
        self._unpair(loc, ev, u.of("receives", loc, start, start + n))

    def _unpair(self, loc: int, rows: Events, past: np.ndarray) -> None:
        """The receives past a gap among ``rows`` (positions ``past``), which close
        no message: a +1 step undoes each one's -1 (which every busy function
        counts, a rank's too), and the exact check leaves them out."""
        if past.size:
            self.busy_t.append(rows.time[past].astype(np.int64))
            self.busy_d.append(np.ones(past.size, np.int64))
            self.unpaired.add(rows.time[past], loc, rows.comm[past], rows.peer[past],
                              rows.tag[past])

    def _close(self, loc: int, request_times: np.ndarray, rows: Events,
               sends: np.ndarray) -> None:
        """A -1 step at each never-completed request's time and, of the busy
        function's messages, at each never-received send (``sends``: positions in
        ``rows``); such a send leaves its channel's balance as a cancelled Isend
        does."""
        steps = np.concatenate((request_times, rows.time[sends])) if self.MESSAGES \
            else request_times
        self.busy_t.append(steps)
        self.busy_d.append(-np.ones(steps.size, np.int64))
        self.cancelled.add(rows.time[sends], loc, rows.comm[sends], rows.peer[sends],
                           rows.tag[sends])

    def _look_ahead(self) -> bool:
        """Read what the rest of the trace never closes (once, and only with a
        ``lookahead``), and close it in the pending records. Whether it was read."""
        if self.lookahead is None or self.unclosed is not None:
            return False
        self.read_ahead(self.lookahead())
        return True

    def read_ahead(self, unclosed: Unclosed) -> None:
        """Take ``unclosed``, what the rest of the trace never closes, and close it
        in the pending records; the records taken from now on close it as they
        come."""
        self.unclosed = unclosed
        for loc, parts in self.pending.items():
            held = sum(len(ev) for ev in parts)
            start = self.seen[loc] - held
            for ev in parts:
                self._never_closed(loc, ev, start)
                start += len(ev)

    def _request_steps(self, ev: Events, req: np.ndarray, req_locs: list[int]
                       ) -> tuple[list[int], list[int]]:
        """The steps (times, deltas) of the request records ``req`` of ``ev``, each of
        location ``req_locs[i]``: +1 where an Isend, Irecv or nonblocking collective
        starts a request, -1 where a record completes or cancels one still open
        (and -1 more for the message of a cancelled Isend, which no one receives)."""
        k, t = ev.kind, ev.time
        rt, rd = [], []
        for i, loc in zip(req.tolist(), req_locs, strict=True):
            opened = self.open_requests[loc]
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
                    self.cancelled.add_one(int(t[i]), loc, channel)
        return rt, rd

    def _send_call_ends(self, loc: int, ev: Events) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~compensate.pipeline.sendcalls.send_call_ends` of a location's
        records, its open calls and pending send calls carried to the next ones."""
        opened, closed, self.send_calls[loc], self.open_regions[loc] = send_call_ends(
            ev.kind, ev.region, ev.time, self.open_regions[loc], self.send_calls[loc])
        return opened, closed

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
        start, self.seen[loc] = self.seen[loc], self.seen[loc] + len(ev)
        if self.unclosed is not None:  # (read ahead: these close where they open)
            self._never_closed(loc, ev, start)
        return True

    def _hold(self, loc: int, ev: Events) -> None:
        """Keep records taken until they are cut off (all of them, whole)."""
        self.pending[loc].append(ev)

    def feed(self, loc: int, ev: Events) -> bool:
        """:meth:`take` a location's records and add what they open and close to the
        busy function (not when replaying an earlier pass's cuts, which needs none);
        False if there are none."""
        if not self.take(loc, ev):
            return False
        if self.replay is None and not _INERT[ev.kind].all():
            self.unstepped.append((loc, ev))
            self._step_taken()
        return True

    def feed_chunk(self, chunk: dict[int, Events]) -> None:
        """:meth:`feed` every location's records of ``chunk``, but their steps are
        added to the busy function only when it is read (:meth:`busy`), those of
        all the chunks taken until then at once: the cutter reads it only when it
        looks for a cut, and a small chunk's steps alone cost as much as many
        chunks' together."""
        for loc, ev in chunk.items():
            if self.take(loc, ev) and self.replay is None and not _INERT[ev.kind].all():
                self.unstepped.append((loc, ev))

    def _step_taken(self) -> None:
        """Add the steps of the records taken but not stepped yet (:meth:`feed_chunk`)."""
        if self.unstepped:
            self._steps(self.unstepped)
            self.unstepped = []

    def busy(self) -> tuple[np.ndarray, np.ndarray]:
        """The busy function's steps so far: their times and their deltas (+1 opens,
        -1 closes), in the order taken (not sorted)."""
        self._step_taken()
        bt = np.concatenate(self.busy_t) if self.busy_t else np.zeros(0, np.int64)
        bd = np.concatenate(self.busy_d) if self.busy_d else np.zeros(0, np.int64)
        return bt, bd

    def add(self, chunk: dict[int, Events], cut: bool = True) -> Iterator[dict[int, Events]]:
        """Take a chunk; yield the segments that are complete (none without ``cut``:
        the chunk is only taken, as part of a larger one that follows)."""
        self.feed_chunk(chunk)
        while cut and self.count >= self.next_try:
            seg = self._cut()
            if seg is None and self.replay is None \
                    and candidates.reads_ahead(self.count, self.target) and self._look_ahead():
                # (a replay takes the cuts its first pass found, and reads ahead where
                # it did: the receives past a gap the look-ahead names are matched so)
                self.attempts[-1] = AHEAD  # (the search again, as one attempt)
                seg = self._cut()
            if seg is None:
                self.failed, self.next_try = self.count, candidates.next_search(self.count)
                break
            if seg:  # (empty when only METRIC samples waiting for a reference record)
                yield seg
            else:
                self.failed = self.count
            self.next_try = candidates.after_cut(self.count, bool(seg), self.target)

    def end(self) -> Iterator[dict[int, Events]]:
        """Once every chunk was taken: the segments that the records still pending
        hold beyond a segment's worth, searched as after a chunk (unless the last
        search found no cut in just these records); :meth:`rest` gives the last."""
        if self.count < self.next_try and candidates.searches_at_end(
                self.count, self.target, self.failed):
            self.next_try = self.count
        yield from self.add({})

    def rest(self) -> dict[int, Events] | None:
        """Everything still pending (the last segment)."""
        if not self.count:
            return None
        seg = {loc: Events.concat(parts) for loc, parts in self.pending.items() if parts}
        self.pending.clear()
        self.count = 0
        return seg

    def merge(self) -> dict[int, Events]:
        """The pending records, each location's parts joined (and kept so)."""
        merged = {loc: Events.concat(parts) for loc, parts in self.pending.items() if parts}
        self.pending = defaultdict(list, {loc: [ev] for loc, ev in merged.items()})
        return merged

    def pending_times(self, merged: dict[int, Events]) -> list[np.ndarray]:
        """Every pending record's time, by location (``merged``: :meth:`merge`)."""
        return [ev.time for ev in merged.values()]

    def bounds(self, merged: dict[int, Events]) -> tuple[int, int]:
        """(first, last) measured time of the pending records (``merged``: :meth:`merge`)."""
        return (min(int(ev.time[0]) for ev in merged.values()),
                max(int(ev.time[-1]) for ev in merged.values()))

    def _cut(self) -> dict[int, Events] | None:
        merged = self.merge()
        first, last = self.bounds(merged)
        if self.replay is not None:
            count, first_then, cut = next(self.replay, (-1, -1, None))
            if (count, first_then, cut) == AHEAD and self.lookahead is not None:
                self._look_ahead()
                count, first_then, cut = next(self.replay, (-1, -1, None))
            if (count, first_then) != (self.count, first):
                raise NotStreamable("the second pass over the input did not read the "
                                    "records the first pass read")
            return None if cut is None else self.split(merged, cut, None, None, None)
        bt, bd = self.busy()
        order = np.argsort(bt, kind="stable")
        bt, bd = bt[order], bd[order]
        level = np.cumsum(bd)  # level[i]: open things after the first i+1 steps
        # a cut at T is safe if the steps before T sum to 0: the largest such T in
        # (bt[i], bt[i+1]] is bt[i+1]; after the last step, the latest record time
        cand = candidates.free_ends(bt, level)
        if not bt.size or level[-1] == 0:
            cand = np.r_[cand, last] if (not bt.size or last > bt[-1]) else cand
        if bt.size and bt[0] > first:
            cand = np.r_[bt[0], cand]
        # (no later than the last cut: it took every record before it but METRIC
        # samples held back, and a cut there again would take just those or nothing)
        cand = cand[cand > (first if self.last_cut is None else max(first, self.last_cut))]
        fills = candidates.fill_times(self.pending_times(merged), self.target) if cand.size else []
        for cut in candidates.tries(cand, fills):
            done = self.aligned(merged, cut)
            if done is not None:
                self.attempts.append((self.count, first, cut))
                return self.split(merged, cut, bt, bd, done)
        self.attempts.append((self.count, first, None))
        return None

    def aligned(self, merged: dict[int, Events], cut: int) -> dict | None:
        """The exact check, in one process: no channel with a message in flight,
        every communicator's members through the same number of collectives, at
        ``cut`` (``merged``: the pending records, :meth:`merge`). Returns the
        completed collectives per (communicator, member) then, or None."""
        channels, signs, done = self.balance(merged, cut)
        if channels.shape[1] and np.any(np.bincount(key_ids(list(channels)), weights=signs)):
            return None
        return done if collectives_aligned(self.defs, done) else None

    def balance(self, merged: dict[int, Events], cut: int
                ) -> tuple[np.ndarray, np.ndarray, dict]:
        """The sends (+1) and receives (-1) of the pending records before ``cut`` by
        channel (rows: sender, receiver, communicator, tag; a column each), and the
        completed collectives per (communicator key, location) then: what the exact
        check sums (:meth:`aligned`; over ranks, :mod:`compensate.parallel.cutting`).

        All locations' records before the cut at once (one flat set of columns), so
        that its cost is a few numpy calls per cut, not per location and channel."""
        self._step_taken()  # (the cancelled Isends)
        done = dict(self.coll_done)
        defs = self.defs
        locs = list(merged)
        if not locs:  # (nothing pending: the last cut's state, which was aligned)
            return np.zeros((4, 0), np.int64), np.zeros(0, np.int64), done
        evs = [merged[loc] for loc in locs]
        ns = [int(np.searchsorted(ev.time, cut, side="left")) for ev in evs]
        k = np.concatenate([ev.kind[:n] for ev, n in zip(evs, ns, strict=True)])
        pos = np.repeat(np.arange(len(locs), dtype=np.int64), ns)
        send, recv = sent_and_received(k, np.concatenate(
            [ev.size_recv[:n] for ev, n in zip(evs, ns, strict=True)]))
        idx = np.flatnonzero(send | recv)
        keys, signs = [], []
        if idx.size:
            key, sign = channel_keys(defs, locs, evs, ns, idx, pos[idx], send[idx])
            keys.append(key)
            signs.append(sign)
        del send, recv, idx
        coll = np.flatnonzero(_COLL_DONE[k])
        if coll.size:
            ccomm = np.concatenate([ev.comm[:n] for ev, n in zip(evs, ns, strict=True)]
                                   )[coll].astype(np.int64)
            cp = pos[coll]
            ids = key_ids([ccomm, cp])
            _, first, counts = np.unique(ids, return_index=True, return_counts=True)
            for comm_, q, c in zip(ccomm[first].tolist(), cp[first].tolist(),
                                   counts.tolist(), strict=True):
                loc = locs[q]
                key = comm_ if defs.comms.get(comm_) and defs.comms[comm_].members \
                    else (comm_, loc)
                loc = self.thread_ranks.get(comm_, {}).get(loc, loc)
                done[(key, loc)] = done.get((key, loc), 0) + c
        # matching drops these sends, and leaves these receives unpaired
        for dropped in (self.cancelled, self.unpaired):
            cols = dropped.keys(defs, cut)
            if cols is not None:
                keys.append(cols)
                signs.append(np.full(cols.shape[1], dropped.sign, dtype=np.int64))
        if not keys:
            return np.zeros((4, 0), np.int64), np.zeros(0, np.int64), done
        cols = keys[0] if len(keys) == 1 else np.concatenate(keys, axis=1)
        return cols, np.concatenate(signs), done

    def split(self, merged: dict[int, Events], cut: int, bt: np.ndarray | None,
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
                # drops them (Segmenter.traces)
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
        """The search's state after a cut at ``cut`` (see :meth:`split`)."""
        if bt is not None and bd is not None and done is not None:
            keep = bt >= cut
            self.busy_t, self.busy_d = [bt[keep]], [bd[keep]]
            self.coll_done = defaultdict(int, done)
            self.cancelled.drop_before(cut)
            self.unpaired.drop_before(cut)
        self.last_cut = cut


def cut_segments(cutter: Cutter, chunks: Iterable[dict[int, Events]]
                 ) -> Iterator[dict[int, Events]]:
    """The records of ``chunks`` regrouped by ``cutter`` into segments that end at
    safe cuts, the rest last."""
    for chunk in chunks:
        yield from cutter.add(chunk)
    yield from cutter.end()
    rest = cutter.rest()
    if rest:
        yield rest
