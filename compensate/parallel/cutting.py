"""The agreed cut: the streamed distributed run's segments, found by the ranks
together, each reading only its own locations (docs/parallel.md "Streaming
within a rank").

A segment is, on every rank, the records of its own locations measured before
one time ``T`` that is safe for the whole trace: nothing crosses it (the
one-process cutter's invariant, :class:`compensate.pipeline.cuts.Cutter`). The
cutter's busy function is a sum of +1/-1 steps, and the ranks split it between
them so that every part is never negative: a rank holds the steps of its own
locations that do not leave their process (calls open around a send, open
collective calls, requests, thread forks, RMA windows, partitioned operations,
synchronize regions, a matched probe before its receive: ownership never splits
a process) and, of every message, both ends on the rank that owns its
*receiver*: the receive's -1 is its own record, the send's +1 (and the -1 of a
cancelled Isend) the sender ships to it (:class:`_LocalCutter`). Each part is
then 0 exactly where none of its calls and messages is open, so the whole
busy function is 0 where every rank's part is: the trace's safe times are the
intersection of the ranks' safe times, the one-process cutter's candidates and
no others. The ranks agree on ``T`` (:func:`agreed_cuts`):

1. every rank reads its own locations in steps that keep the ranks level in
   time: a rank behind the latest horizon (the latest time a rank has read)
   reads up to it while the one at it reads a chunk on, and no rank reads more
   than its share of a segment (``segment_records`` times its share of the
   trace's records) beyond what it kept from the last cut (a rank whose
   records are dense where another's are sparse stops there and waits for the
   cut; the others then read up to its horizon, where no cut lies beyond, and a
   rank reads past the others only below its share since the last cut); once the
   ranks hold a segment's records
   together (or no rank may read), they look for a cut, up to the smallest
   horizon ``H`` (every own record before it is read on every rank: the
   readers give time order);
2. every rank ships the send times of the messages to other ranks' locations
   before ``H`` to their receivers' ranks (one ``alltoall``), then offers its
   latest safe intervals before ``H`` (one ``allgather``, at most
   :data:`~compensate.pipeline.candidates.BATCH` intervals a rank); their
   intersection gives the latest times safe for the whole trace;
3. the exact check of the latest (the one-process cutter's two conditions,
   summed over ranks): per channel (sender, receiver, communicator, tag) the
   sends before ``T`` less the cancelled Isends equal the receives before
   ``T``, and every member of a communicator completed the same number of
   collectives (:meth:`~compensate.pipeline.cuts.Cutter.balance`,
   :func:`~compensate.pipeline.channels.collectives_aligned`); if it fails, the
   next safe time, up to :data:`ATTEMPTS` as the one-process cutter tries its
   four latest candidates, then every rank reads further (half as much again,
   as one process does). As in one process, the search first goes no later than
   the fill time, before which about a segment's worth of the pending records
   lie (:func:`~compensate.pipeline.candidates.fills_of`, from a sample of
   every location's times), then twice that, ..., then up to ``H``; while a
   segment's worth is still pending after a cut, the ranks look for the next at
   once, and again once every input has ended.

No rank reads more than its own locations, and the one-process run's serial
pass over the whole trace is gone. The cuts differ from the one-process run's
(which looks for a cut after each chunk of the whole trace), so the summary's
``segments`` is this run's; the output is the same, record for record, because
the streamed output does not depend on where the segments are cut
(tests/engine/test_stream.py: every program, any chunking, equal to the
in-memory run). An input not in time order raises
:class:`~compensate.pipeline.cuts.NotStreamable` on the rank that sees it, and
every rank falls back with it (the ``step`` given).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from compensate.matching.groups import key_ids
from compensate.matching.p2p import members_of
from compensate.model import IMRECV, IRECV, MRECV, NONE, RECV, Definitions, Events, kind_table
from compensate.parallel.transport import Transport
from compensate.pipeline.candidates import (
    ATTEMPTS,
    SAMPLES,
    after_cut,
    common,
    fills_of,
    next_search,
    offer,
    reads_ahead,
    safe_intervals,
    sample_of,
    searches_at_end,
)
from compensate.pipeline.channels import SENDS
from compensate.pipeline.counting import CountingCutter
from compensate.pipeline.cuts import SEGMENT_RECORDS
from compensate.pipeline.unclosed import Unclosed, add_counts, scan_part

#: a message sent (+1 on its receiver's rank) / received (-1, the one-process
#: busy function's message part: :class:`compensate.pipeline.cuts.Cutter`)
_RECEIVED = kind_table(RECV, IRECV, MRECV, IMRECV)


class _LocalCutter(CountingCutter):
    """The counting cutter over one rank's own locations, whose busy function is
    this rank's part of the trace's (module docstring): the steps inside its
    processes, and every message that its locations receive; the +1 of a message
    to another rank's location waits in :attr:`outbox` until it is shipped."""

    MESSAGES = False  # (the base's local part; the messages are added here)

    def __init__(self, defs: Definitions, segment_records: int, owner: dict[int, int],
                 rank: int) -> None:
        super().__init__(defs, segment_records)
        self.owner = owner
        self.rank = rank
        #: destination rank -> (times, deltas) of the steps not shipped yet
        self.outbox: dict[int, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
        self._ranks: dict[tuple[int, int], np.ndarray] = {}
        #: the agreed cut's search state: (steps' times, their deltas, cut,
        #: completed collectives before it)
        self.agreed: tuple | None = None

    def _member_ranks(self, comm: int, loc: int) -> np.ndarray:
        """The owning rank of each member of ``comm`` as ``loc`` sees it."""
        key = (comm, loc)
        if key not in self._ranks:
            self._ranks[key] = np.array(
                [self.owner.get(m, -1) for m in members_of(self.defs, comm, loc)] or [-1],
                dtype=np.int64)
        return self._ranks[key]

    def _destinations(self, loc: int, comm: np.ndarray, peer: np.ndarray) -> np.ndarray:
        """The rank that owns each message's receiver (-1: no such location; its
        step then stays here, never closed, as in the one-process busy function)."""
        out = np.full(comm.size, -1, np.int64)
        for c in np.unique(comm).tolist():
            ranks = self._member_ranks(int(c), loc)
            sel = np.flatnonzero(comm == c)
            p = peer[sel].astype(np.int64)
            ok = (p >= 0) & (p < ranks.size)
            out[sel[ok]] = ranks[p[ok]]
        return out

    def feed(self, loc: int, ev: Events) -> bool:
        """:meth:`~compensate.pipeline.cuts.Cutter.feed` (the local part), then the
        messages' part of the records (not to or from MPI_PROC_NULL, which sends
        nothing: as in the one-process busy function)."""
        cancelled = len(self.cancelled)
        if not super().feed(loc, ev):
            return False
        real = ev.peer != NONE
        sends = np.flatnonzero(SENDS[ev.kind] & real)
        self._route(ev.time[sends], np.ones(sends.size, np.int64),
                    self._destinations(loc, ev.comm[sends], ev.peer[sends]))
        # Isends cancelled in this chunk, and sends never received (read ahead)
        self._never_received(self.cancelled.columns(cancelled))
        received = ev.time[_RECEIVED[ev.kind] & real]
        self.busy_t.append(received)
        self.busy_d.append(-np.ones(received.size, np.int64))
        return True

    def read_ahead(self, unclosed: Unclosed) -> None:
        """:meth:`~compensate.pipeline.counting.CountingCutter.read_ahead`, with
        the -1 of each pending send never received where its +1 went."""
        before = len(self.cancelled)
        super().read_ahead(unclosed)
        self._never_received(self.cancelled.columns(before))

    def _never_received(self, sends: np.ndarray) -> None:
        """The -1 of each send no receive takes (``sends``: rows time, location,
        communicator, peer rank, tag, as :attr:`cancelled` holds them), to the rank
        its +1 went to."""
        if not sends.shape[1]:
            return
        times, locs, comm, peer = sends[:4]
        dest = np.full(times.size, -1, np.int64)
        for loc in np.unique(locs).tolist():  # (per location, not per send)
            at = np.flatnonzero(locs == loc)
            dest[at] = self._destinations(loc, comm[at], peer[at])
        self._route(times, -np.ones(times.size, np.int64), dest)

    def _route(self, times: np.ndarray, deltas: np.ndarray, dest: np.ndarray) -> None:
        """Steps of messages: into the outbox of their receiver's rank ``dest``,
        or into this rank's busy function (its own, or -1: no such location)."""
        away = (dest >= 0) & (dest != self.rank)
        for q in np.unique(dest[away]).tolist():
            sel = dest == q
            self.outbox[q].append((times[sel], deltas[sel]))
        self.busy_t.append(times[~away])
        self.busy_d.append(deltas[~away])


def _ship(t: Transport, cutter: _LocalCutter, horizon: int) -> None:
    """Every step before ``horizon`` waiting in the outbox to its receiver's rank,
    and the steps other ranks shipped here into the busy function (one
    ``alltoall``)."""
    items: list[Any] = []
    for q in range(t.size):
        parts = cutter.outbox.pop(q, [])
        if not parts:
            items.append(None)
            continue
        times = np.concatenate([p[0] for p in parts])
        deltas = np.concatenate([p[1] for p in parts])
        now = times < horizon
        if not now.all():
            cutter.outbox[q].append((times[~now], deltas[~now]))
        items.append((times[now], deltas[now]) if now.any() else None)
    for got in t.alltoall(items):
        if got is not None:
            cutter.busy_t.append(got[0])
            cutter.busy_d.append(got[1])


def _unbalanced(channels: np.ndarray, signs: np.ndarray) -> dict[tuple, int]:
    """This rank's channels whose sends and receives before the cut do not cancel
    out, with their sums."""
    if not channels.shape[1]:
        return {}
    ids = key_ids(list(channels))
    sums = np.bincount(ids, weights=signs).astype(np.int64)
    first = np.unique(ids, return_index=True)[1]
    out = {}
    for i in np.flatnonzero(sums).tolist():
        out[tuple(channels[:, first[i]].tolist())] = int(sums[i])
    return out


def _widen(ranges: dict, key: Any, lo: int, hi: int) -> None:
    a, b = ranges.get(key, (lo, hi))
    ranges[key] = (min(a, lo), max(b, hi))


def _collective_ranges(defs: Definitions, done: dict, mine: list[int]) -> dict[Any, tuple]:
    """The two conditions of :func:`compensate.pipeline.channels.collectives_aligned`
    over this rank's locations, as ranges the ranks can merge: per communicator
    with members, the (fewest, most) collectives completed by the locations that
    completed any on it (key ``("done", comm)``) and by its members here (key
    ``("members", comm)``; a member without an entry completed none). A
    communicator without members is keyed by (communicator, location): one
    location, always aligned."""
    out: dict[Any, tuple] = {}
    for (key, _), c in done.items():
        if isinstance(key, int):
            _widen(out, ("done", key), c, c)
    own = set(mine)
    for comm, d in defs.comms.items():
        for m in d.members or ():
            if m in own:
                c = done.get((comm, m), 0)
                _widen(out, ("members", comm), c, c)
    return out


def chunk_records(segment_records: int, share: float, largest: int) -> int:
    """How many records a rank reads at a time for the cut: its share of a
    segment, at most ``largest`` (a rank reads on until it holds its share, a
    chunk at a time: chunks larger than the share would make the segments larger
    than asked for; smaller ones cost the reading and the cutter their fixed work
    per location and chunk more often, and the ranks a round of the agreement
    each)."""
    return max(1, min(largest, math.ceil(segment_records * share)))


def share_of(mine: list[int], counts: dict[int, int | None]) -> float:
    """This rank's part of the trace's records (``counts``: every location's, as
    :func:`compensate.formats.location_record_counts` gives them; where one is not
    known, as for a text trace or an OTF2 archive whose definitions give every
    location 0 records, its part of the locations)."""
    if not counts:
        return 0.0
    total = sum(c or 0 for c in counts.values())
    if not total or any(c is None for c in counts.values()):  # (a writer that left
        return len(mine) / len(counts)  # OTF2's numberOfEvents 0: not known either)
    return sum(counts[loc] or 0 for loc in mine) / total


class _Reader:
    """A rank's reading for the cut: its chunks fed to the cutter, its horizon
    (the latest time read), how many pending records it may hold before the next
    look for a cut (:attr:`cap`), and below how many it may read past the others
    (:attr:`lead`: its share of a segment since the last cut)."""

    def __init__(self, cutter: _LocalCutter, chunks: Iterable[dict[int, Events]],
                 quota: int) -> None:
        self.cutter = cutter
        self.chunks = iter(chunks)
        self.quota = quota
        self.cap = self.lead = quota
        self.ended = False
        self.horizon: int | None = None

    def chunk(self) -> None:
        """Feed the next chunk (or note the end)."""
        chunk = next(self.chunks, None)
        if chunk is None:
            self.ended = True
            return
        for loc, ev in chunk.items():
            if self.cutter.feed(loc, ev):
                last = int(ev.time[-1])
                self.horizon = last if self.horizon is None else max(self.horizon, last)

    def may_read(self) -> bool:
        return not self.ended and self.cutter.count < self.cap

    def may(self) -> int:
        """0: may not read; 1: may catch up with the others; 2: may also read past
        them."""
        if not self.may_read():
            return 0
        return 2 if self.cutter.count < self.lead else 1

    def advance(self, read: bool, target: int | None) -> tuple:
        """If ``read``, read up to ``target`` (past it; None: one chunk), within
        the cap; then :meth:`state`."""
        if read:
            self.chunk()
            while self.may_read() and target is not None and \
                    (self.horizon is None or self.horizon <= target):
                self.chunk()
        return self.state()

    def state(self) -> tuple:
        """(ended, horizon, pending records, may read (:meth:`may`), first pending
        time)."""
        c = self.cutter
        first = min((int(p[0][0]) for p in c.times.values() if p), default=None)
        return self.ended, self.horizon, c.count, self.may(), first


def _readers(every: list[tuple]) -> tuple[list[int], int | None]:
    """Which ranks read next (``every``: the ranks' :meth:`_Reader.state`) and up
    to what time: the ranks behind the latest horizon that may read catch up with
    it while those at it that may read past the others read a chunk on. Where a
    rank that has not ended may read no more, no cut can lie beyond its horizon:
    only the ranks behind it read, up to it."""
    live = [(r, s) for r, s in enumerate(every) if not s[0]]
    held = [s[1] for _, s in live if not s[3] and s[1] is not None]
    if held:
        top = min(held)
        return [r for r, s in live if s[3] and (s[1] is None or s[1] < top)], top
    top = max((s[1] for _, s in live if s[1] is not None), default=None)
    who = [r for r, s in live if s[3] and (s[1] is None or top is None or s[1] < top
                                           or s[3] == 2)]
    # all that may read are at the top past their share: none is behind, and a cut
    # there may take nothing (METRIC samples held back): they read on
    return who or [r for r, s in live if s[3]], top


class CutAgreement:
    """The ranks' agreement on the segments' cuts (module docstring), one cut at a
    time: :meth:`next_cut` reads on until the ranks agree the next one, so that a
    rank can compensate each segment as soon as its cut is agreed and the reading
    for the cut is the segment pass's reading too
    (:class:`compensate.parallel.reading.OneRead`). Arguments as :func:`agreed_cuts`;
    ``step(f, *args)`` runs each local phase (a NotStreamable on any rank raises on
    every rank: :func:`compensate.parallel.segments.fallback_step`); ``gather(f,
    *args)``: every rank's ``f(*args)``, gathered, as a phase of ``step``
    (:func:`compensate.parallel.segments.fallback_gather`: one ``allgather`` for
    both; default ``allgather(step(f, *args))``). Collective, as is every
    :meth:`next_cut`."""

    def __init__(self, defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                 transport: Transport, mine: list[int], share: float,
                 segment_records: int = SEGMENT_RECORDS,
                 step: Callable[..., Any] = lambda f, *a: f(*a),
                 gather: Callable[..., list[Any]] | None = None,
                 lookahead: Callable[[], Iterable[dict[int, Events]]] | None = None,
                 shift: dict[int, int] | None = None) -> None:
        t = self.transport = transport
        #: ``lookahead()``: a fresh read of the own locations, scanned for what the
        #: trace never closes once the ranks would hold more than LOOKAHEAD_AFTER segments'
        #: records (:meth:`_read_ahead`); ``shift``: per location, the ticks its
        #: records are moved by (aligned clocks), which a gap's balance point takes on
        self.lookahead, self.shift = lookahead, shift
        self.defs, self.mine, self.step = defs, mine, step
        self.gather = gather or (lambda f, *a: t.allgather(step(f, *a)))
        self.segment_records = segment_records
        owner = {loc: r for r, locs in enumerate(t.allgather(list(mine))) for loc in locs}
        self.cutter = _LocalCutter(defs, segment_records, owner, t.rank)
        self.reader = _Reader(self.cutter, own_chunks,
                              max(1, math.ceil(segment_records * share)))
        self.next_try = segment_records
        #: the records pending when a search last found no cut (or one that took none)
        self.failed: int | None = None
        self.every: list[tuple] | None = None  # the ranks' reading states
        self.over = False
        #: what the look-ahead found of the own locations (its receives past a
        #: gap: left unpaired by the segments' matching)
        self.unclosed: Unclosed | None = None

    def __iter__(self) -> Iterator[tuple[int | None, int]]:
        while (cut := self.next_cut()) is not None:
            yield cut

    def next_cut(self) -> tuple[int | None, int] | None:
        """The next segment as ``(cut, records)`` (:func:`agreed_cuts`), None once
        every segment was given. Collective."""
        t, reader, cutter, gather = self.transport, self.reader, self.cutter, self.gather
        if self.over:
            return None
        if self.every is None:
            self.every = gather(reader.advance, True, None)
        while True:
            every = self.every
            total = sum(n for _, _, n, _, _ in every)
            who, target = _readers(every)
            # (a rank that read no record yet may still hold the earliest ones)
            blank = any(not e and h is None for e, h, *_ in every)
            if (total < self.next_try or blank) and who:
                self.every = gather(reader.advance, t.rank in who, target)
                continue
            ended = all(e for e, *_ in every)
            if ended and total < self.next_try \
                    and not searches_at_end(total, self.segment_records, self.failed):
                break  # the rest is the last segment
            cut = _look(t, cutter, self.defs, self.mine, every, gather,
                        self.segment_records)
            if cut is None:
                if self._read_ahead(total):
                    continue  # (the search again, over what is pending)
                if ended:
                    break
                self.failed, self.next_try = total, next_search(total)
                reader.cap = reader.lead = next_search(cutter.count)
                self.every = gather(reader.state)
                continue
            every = gather(_cut_here, reader, cut)
            kept, n = sum(k for _, k, _ in every), sum(n for n, _, _ in every)
            self.next_try = after_cut(kept, n > 0, self.segment_records)
            if not n:  # (METRIC samples held back: no search again on just these)
                self.failed = kept
            self.every = [state for *_, state in every]
            return cut, n
        self.over = True
        rest = sum(t.allgather(cutter.count))
        return (None, rest) if rest else None


    def _read_ahead(self, total: int) -> bool:
        """Before the ranks hold LOOKAHEAD_AFTER segments' records without a cut (and
        once only): every rank scans its own locations for the requests they never
        complete and the sends to them or from them (:func:`scan_part`), the ranks
        add up every channel's receives and sends, and each rank's cutter closes
        its own never-completed requests and never-received sends, and of each
        channel with a gap, its sends from the last balance point on and its
        receives past it, from the send times the sender's rank gathers and the
        balance the receiver's rank finds (the one-process cutter's look-ahead,
        :mod:`compensate.pipeline.unclosed`). Whether it did. Collective."""
        if self.lookahead is None or not reads_ahead(total, self.segment_records):
            return False
        read, self.lookahead = self.lookahead, None
        scanned = []

        def scan() -> tuple[dict, dict, dict]:
            scanned.append(scan_part(self.defs, read()))
            return scanned[0].counts()

        totals = add_counts(self.gather(scan))
        sh = self.shift
        gapped = {k: v for part in self.gather(lambda: scanned[0].gapped(totals, sh))
                  for k, v in part.items()}
        balance = {k: v for part in self.gather(lambda: scanned[0].balances(gapped, sh))
                   for k, v in part.items()} if gapped else {}
        self.step(lambda: self.cutter.read_ahead(scanned[0].unclosed(totals, balance, sh)))
        self.unclosed = self.cutter.unclosed
        return True


def agreed_cuts(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                transport: Transport, mine: list[int], share: float,
                segment_records: int = SEGMENT_RECORDS,
                step: Callable[..., Any] = lambda f, *a: f(*a),
                lookahead: Callable[[], Iterable[dict[int, Events]]] | None = None,
                ) -> list[tuple[int | None, int]]:
    """The segments of the streamed distributed run, ``(cut, records)`` each (the
    segment holds the records measured before ``cut``, None: every record left;
    ``records`` in all ranks), agreed by the ranks from their own ``own_chunks``
    (module docstring; :class:`CutAgreement` gives them one at a time). ``share``:
    this rank's part of the records (it holds at most ``segment_records * share``
    beyond what it kept from the last cut before the ranks look for one).
    ``step``, ``lookahead``: as :class:`CutAgreement` takes them. Collective."""
    return list(CutAgreement(defs, own_chunks, transport, mine, share, segment_records, step,
                             lookahead=lookahead))


def _look(t: Transport, cutter: _LocalCutter, defs: Definitions, mine: list[int],
          every: list[tuple], gather: Callable[..., list[Any]],
          segment_records: int) -> int | None:
    """The latest time up to the smallest horizon of the ranks still reading (the
    latest record time when every input has ended), after the first pending
    record, that is safe for the whole trace and passes the exact check, looked
    for first up to the fill time, then up to the next
    (:func:`~compensate.pipeline.candidates.tries`, its fill times from the ranks'
    samples); None if none of the :data:`ATTEMPTS` latest up to any passes.
    ``gather``: as :class:`CutAgreement`'s."""
    firsts = [f for *_, f in every if f is not None]
    live = [h for e, h, *_ in every if not e and h is not None]
    if not firsts:
        return None
    first = min(firsts)
    if cutter.last_cut is not None:  # (no cut at or before the last: as in one process)
        first = max(first, cutter.last_cut)
    top = min(live) if live else max(h for _, h, *_ in every if h is not None)
    _ship(t, cutter, top)
    state: dict[str, Any] = {}
    step = max(1, segment_records // SAMPLES)

    def prepare() -> tuple:  # (this rank's busy function, sorted; its first offer)
        state["merged"] = cutter.merge()
        bt, bd = cutter.busy()
        order = np.argsort(bt, kind="stable")
        state["steps"] = bt, bd = bt[order], bd[order]
        state["safe"] = safe_intervals(bt, np.cumsum(bd))
        sample = sample_of(cutter.pending_times(state["merged"]), step)
        return offer(*state["safe"], first, top), sample

    got = gather(prepare)
    fills = fills_of([s for _, s in got], step, segment_records)
    offers: list | None = [o for o, _ in got]
    tried: set[int] = set()
    for limit in [*sorted({f for f in fills if f < top}), top]:
        cut = _search(t, cutter, defs, mine, state, offers, first, limit, gather, tried)
        if cut is not None:
            return cut
        offers = None  # (the next search's offers from its own limit down)
    return None


def _search(t: Transport, cutter: _LocalCutter, defs: Definitions, mine: list[int],
            state: dict, offers: list | None, first: int, top: int,
            gather: Callable[..., list[Any]], tried: set[int]) -> int | None:
    """The exact check on the :data:`ATTEMPTS` latest times safe on every rank in
    ``(first, top]`` not ``tried`` yet, latest first (:func:`_look`'s ``state``;
    ``offers``: every rank's first offer, None to gather them for ``top``); the
    first that passes."""
    merged, steps, (lo, hi) = state["merged"], state["steps"], state["safe"]
    checked = 0
    while checked < ATTEMPTS and top > first:
        if offers is None:
            offers = t.allgather(offer(lo, hi, first, top))
        cands, floor = common(offers, top)
        top = min(top, floor)
        offers = None
        for cut in [c for c in cands if c not in tried][:ATTEMPTS - checked]:
            checked += 1
            tried.add(cut)
            if _exact(t, cutter, defs, mine, merged, cut, gather, steps):
                return cut
    return None


def _exact(t: Transport, cutter: _LocalCutter, defs: Definitions, mine: list[int],
           merged: dict[int, Events], cut: int, gather: Callable[..., list[Any]],
           steps: tuple[np.ndarray, np.ndarray]) -> bool:
    """The exact check at ``cut``, summed over the ranks (module docstring); where
    it passes, the cutter keeps the search's state for :func:`split`."""
    kept: list[dict] = []

    def check() -> tuple[dict, dict]:
        channels, signs, done = cutter.balance(merged, cut)
        kept.append(done)
        return _unbalanced(channels, signs), _collective_ranges(defs, done, mine)

    every = gather(check)
    done = kept[0]
    balance: dict[tuple, int] = {}
    merged_ranges: dict[Any, tuple] = {}
    for part_channels, part_ranges in every:
        for key, v in part_channels.items():
            balance[key] = balance.get(key, 0) + v
        for key, (lo, hi) in part_ranges.items():
            _widen(merged_ranges, key, lo, hi)
    if any(balance.values()) or any(lo != hi for lo, hi in merged_ranges.values()):
        return False
    cutter.agreed = (*steps, cut, done)
    return True


def _cut_here(reader: _Reader, cut: int) -> tuple[int, int, tuple]:
    """Split at the agreed ``cut`` (:func:`split`) and let the reader read its
    share again: (records in the segment, records kept, the reader's state)."""
    n = split(reader.cutter, cut)
    reader.cap, reader.lead = reader.cutter.count + reader.quota, reader.quota
    return n, reader.cutter.count, reader.state()


def split(cutter: _LocalCutter, cut: int) -> int:
    """Cut this rank's pending records at the agreed ``cut``; how many went into
    the segment."""
    bt, bd, at, done = cutter.agreed
    if at != cut:
        raise RuntimeError(f"rank cut at {at}, not at the agreed {cut}")
    merged = {loc: parts[0] for loc, parts in cutter.pending.items() if parts}
    seg = cutter.split(merged, cut, bt, bd, done)
    cutter.agreed = None
    return sum(len(x) for x in seg.values())
