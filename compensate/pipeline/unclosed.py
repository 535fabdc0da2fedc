"""What the rest of a trace never closes: the stream cutter's look-ahead
(docs/design.md §5, "Streaming in segments").

The cutter (:class:`compensate.pipeline.cuts.Cutter`) cuts only where nothing is
open: no message in flight, no request open. Some things open in a trace never
close: a send no receive in the whole trace takes (EZTrace writes no receive for
an ``MPI_Irecv`` completed in ``MPI_Wait``/``MPI_Waitall``/``MPI_Test*``: every
such message's send is unmatched), a request no record completes. Reading
forward, the cutter cannot tell them from a message still in flight, so after the
first such record it never cuts again and the streamed run holds the rest of the
trace in memory at once. :func:`scan` reads the trace once more and names them,
so that the cutter can count them as closed where they open:

- a request-opening record (MpiIsend, MpiIrecvRequest, NonBlockingCollectiveRequest)
  that no later record of its location completes or cancels, paired as the cutter
  pairs them (by request id; a new request under an id still open leaves the
  earlier one open for good);
- an MpiCollectiveBegin no MpiCollectiveEnd closes: the next collective record of
  its location is another Begin, or there is none (EZTrace 2.0 writes only a Begin
  in MPI_Ibarrier, MPI_Ibcast, MPI_Iallreduce, ...; matching leaves it a local
  record, :func:`compensate.matching.collectives.collective_pairs`, and the
  cutter's collective counts take Ends only);
- a send (MpiSend, MpiIsend; not one to MPI_PROC_NULL, which sends nothing) beyond
  its channel's receives: per channel (sender, receiver, communicator, tag) the
  receives (MpiRecv, MpiIrecv, a probe that took its message) of the whole trace
  take the channel's sends in order (MPI's non-overtaking rule, which the cutter's
  exact check assumes), and a cancelled MpiIsend takes no receive, so the sends
  after the first ``receives`` are never received, where they come after its last
  receive (its last *balance point*, :mod:`compensate.matching.nomessage`,
  follows that receive). A channel with a gap (a receive the tracer did not record
  among the recorded ones), read whole here: its sends from its last balance point
  on, and its receives after that point (``receives``), which matching leaves
  unpaired in the whole trace and, named so, in every segment. Read in parts (a
  distributed rank's own locations), the part holding a channel's sends finds
  its gap (:meth:`Scanned.gapped`) and the part holding its receives its last
  balance point (:meth:`Scanned.balances`), the ranks exchanging both. Both
  compare times across processes: a pass over clocks aligned after the scan
  takes them found again on the moved times (:meth:`Unclosed.moved`). With a
  matched probe among its receives such a channel stays open after the gap.
  None where some channel has
  more receives than sends (a receive whose status names no real sender, as
  EZTrace's ``MPI_Waitsome`` writes: :mod:`compensate.matching.nomessage`): the
  cutter's busy function counts every receive as closing a message, so such a
  receive already closes one of those sends there.

A cut after such a record is exact: matching leaves the record unmatched in the
segment as in the whole trace, and the cutter's exact check
(:meth:`~compensate.pipeline.cuts.Cutter.balance`) leaves never-received sends
out of their channel's balance as it does cancelled ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from compensate.matching.groups import key_ids
from compensate.matching.nomessage import last_balance
from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    NBC_COMPLETE,
    NBC_REQUEST,
    NONE,
    PROBE,
    REQUEST_CANCELLED,
    Definitions,
    Events,
    kind_table,
)
from compensate.pipeline.channels import channel_keys, sent_and_received

_OPEN = (ISEND, IRECV_REQUEST, NBC_REQUEST)
#: the records that open a request or complete or cancel one, paired by request id
#: (the cutter's and this scan's one rule)
REQUEST_KINDS = kind_table(_OPEN, ISEND_COMPLETE, IRECV, NBC_COMPLETE, REQUEST_CANCELLED)
#: :meth:`Scanned.counts`: per channel, its receives, its sends that could be
#: received, its last receive's time
Counts = tuple[dict[tuple, int], dict[tuple, int], dict[tuple, int]]


@dataclass
class Unclosed:
    """Per location, the record numbers (counted from the location's first record)
    of the requests (``requests``), sends (``sends``) and collective Begins
    (``begins``) the trace never closes, and the receives past a gap on their
    channel (``receives``, module docstring); sorted. ``gaps``: whether some
    channel of the whole trace has a gap (its receives past it named here where
    this part holds them)."""

    requests: dict[int, np.ndarray] = field(default_factory=dict)
    sends: dict[int, np.ndarray] = field(default_factory=dict)
    begins: dict[int, np.ndarray] = field(default_factory=dict)
    receives: dict[int, np.ndarray] = field(default_factory=dict)
    gaps: bool = False
    #: the scan of the whole trace it came from (:meth:`moved`), if any
    scanned: Any = field(default=None, repr=False, compare=False)

    def moved(self, shift: dict[int, int]) -> Unclosed:
        """What the whole trace never closes on its times moved by ``shift`` (per
        location, ticks: a pass over clocks aligned), where a channel's gap and its
        last balance point compare times across processes."""
        if not shift or self.scanned is None:
            return self
        return self.scanned.unclosed(shift=shift)

    def of(self, which: str, loc: int, start: int, stop: int) -> np.ndarray:
        """The numbers of ``which`` (``requests``, ``sends``, ``begins`` or
        ``receives``) of ``loc`` in
        ``[start, stop)``, less ``start``: positions in a chunk that begins at
        record ``start``."""
        numbers = getattr(self, which).get(loc)
        if numbers is None:
            return np.zeros(0, np.int64)
        lo, hi = np.searchsorted(numbers, [start, stop])
        return numbers[lo:hi] - start

    def opened(self, loc: int, start: int, stop: int) -> np.ndarray:
        """:meth:`of` the requests and the collective Begins together: the records
        the cutter closes where they open (a send also leaves its channel's balance)."""
        return np.concatenate((self.of("requests", loc, start, stop),
                               self.of("begins", loc, start, stop)))


@dataclass
class Scanned:
    """What :func:`scan_part` read: per location, its requests left open and
    its cancelled Isends, and per channel its sends' record numbers and times (all
    on the sender's location) and its receives' count, record numbers and times."""

    seen: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    open_requests: dict[int, dict[int, tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(dict))  # loc -> id -> (kind, number)
    unclosed_requests: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    cancelled: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    sends: dict[tuple, list[np.ndarray]] = field(default_factory=lambda: defaultdict(list))
    send_times: dict[tuple, list[np.ndarray]] = field(
        default_factory=lambda: defaultdict(list))
    receives: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))
    #: per channel its receives' record numbers and times (on the receiver's
    #: location), and the channels a matched probe took a message on
    recv_numbers: dict[tuple, list[np.ndarray]] = field(
        default_factory=lambda: defaultdict(list))
    recv_times: dict[tuple, list[np.ndarray]] = field(
        default_factory=lambda: defaultdict(list))
    probed: set[tuple] = field(default_factory=set)
    #: per location, its last MpiCollectiveBegin if no End came after it, and the
    #: Begins another Begin followed before any End
    open_begin: dict[int, int] = field(default_factory=dict)
    lone_begins: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    #: :meth:`counts` of the whole scan, on its :meth:`slim` copy
    totals: Counts | None = None

    def _sent(self) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
        """Each channel's sends that could be received (not cancelled Isends): their
        record numbers and times."""
        out = {}
        for channel, parts in self.sends.items():
            numbers = np.concatenate(parts)
            times = np.concatenate(self.send_times[channel])
            cancelled = self.cancelled.get(channel[0])
            if cancelled:  # (a cancelled Isend takes no receive)
                kept = ~np.isin(numbers, list(cancelled))
                numbers, times = numbers[kept], times[kept]
            out[channel] = numbers, times
        return out

    def counts(self) -> Counts:
        """(receives, sends that could be received, the last receive's time) per
        channel of the locations read: summed over every part of the trace
        (:func:`add_counts`), what :meth:`unclosed` needs."""
        if self.totals is not None:
            return self.totals
        return (dict(self.receives), {c: int(n.size) for c, (n, _) in self._sent().items()},
                {c: int(parts[-1][-1]) for c, parts in self.recv_times.items()})

    def gapped(self, totals: Counts, shift: dict[int, int] | None = None
               ) -> dict[tuple, np.ndarray]:
        """Of the channels whose sends this part holds, those with a gap (some
        receives, fewer than the sends that could be received, the first of those
        beyond them not after the last receive and the send before it): the send
        times of each; none where some channel has more receives than sends.
        ``totals``: :meth:`counts` summed over the whole trace; ``shift``: per
        location, ticks added to its times (:meth:`Unclosed.moved`)."""
        receives, sent, last = totals
        if any(n > sent.get(channel, 0) for channel, n in receives.items()):
            return {}
        out = {}
        for channel, (_, times) in self._sent().items():
            received = receives.get(channel, 0)
            if 0 < received < times.size and not _trailing(channel, times, received, last,
                                                           shift):
                out[channel] = times + _by(shift, channel[0])
        return out

    def balances(self, gapped: dict[tuple, np.ndarray],
                 shift: dict[int, int] | None = None) -> dict[tuple, int]:
        """Of the channels with a gap (``gapped``: the send times of each, as
        :meth:`gapped` gives them) whose receives this part holds, how many of its
        receives lie before its last balance point
        (:func:`compensate.matching.nomessage.last_balance`); none of a channel with
        a matched probe among its receives (it stays open). ``shift``: as for
        :meth:`gapped`."""
        out = {}
        for channel, send_times in gapped.items():
            if channel in self.recv_times and channel not in self.probed:
                times = np.concatenate(self.recv_times[channel]) + _by(shift, channel[1])
                out[channel] = int(last_balance(np.zeros(send_times.size, np.int64),
                                                send_times, np.zeros(times.size, np.int64),
                                                times, 1)[0])
        return out

    def unclosed(self, totals: Counts | None = None, balance: dict[tuple, int] | None = None,
                 shift: dict[int, int] | None = None) -> Unclosed:
        """The requests still open at the end and the sends beyond their channel's
        receives, of the locations read; no sends where some channel has more
        receives than sends; of a channel with a gap, its sends from its last
        balance point on and its receives after it (module docstring). ``totals``:
        :meth:`counts` summed over the whole trace (default: this part's, the whole
        trace read here); ``balance``: :meth:`balances` of every channel with a gap
        (default: this part's, where the whole trace is read here, else none: such
        channels stay open); ``shift``: as for :meth:`gapped`."""
        whole = totals is None  # (both ends of every channel read here)
        receives, sent, last = totals if totals is not None else self.counts()
        if balance is None:
            balance = self.balances(self.gapped((receives, sent, last), shift), shift) \
                if whole else {}
        requests: dict[int, list[int]] = defaultdict(list, {
            loc: list(v) for loc, v in self.unclosed_requests.items()})  # (a copy)
        for loc, opened in self.open_requests.items():
            requests[loc].extend(number for _, number in opened.values())
        sends: dict[int, list[np.ndarray]] = defaultdict(list)
        unpaired: dict[int, list[np.ndarray]] = defaultdict(list)
        excess = any(n > sent.get(channel, 0) for channel, n in receives.items())
        for channel, (numbers, times) in ({} if excess else self._sent()).items():
            received = receives.get(channel, 0)
            if channel in balance:
                sends[channel[0]].append(numbers[balance[channel]:])
            elif numbers.size > received and (
                    not received or _trailing(channel, times, received, last, shift)):
                sends[channel[0]].append(numbers[received:])
        for channel, m in balance.items():
            if channel in self.recv_numbers:
                unpaired[channel[1]].append(self._past(channel, m))
        begins = {loc: np.array(sorted(v), dtype=np.int64)
                  for loc, v in self.lone_begins.items() if v}
        for loc, number in self.open_begin.items():
            begins[loc] = np.append(begins.get(loc, np.zeros(0, np.int64)), number)
        return Unclosed(
            {loc: np.array(sorted(v), dtype=np.int64) for loc, v in requests.items() if v},
            {loc: np.sort(np.concatenate(v)) for loc, v in sends.items()}, begins,
            {loc: np.sort(np.concatenate(v)) for loc, v in unpaired.items()}, bool(balance),
            self.slim((receives, sent, last)) if whole else None)

    def slim(self, totals: Counts | None = None) -> Scanned:
        """A copy that :meth:`unclosed` gives the same on any times moved
        (:meth:`Unclosed.moved`), kept for the passes after the clock pass: every
        channel's counts, but the record numbers and times only of the channels
        with sends no receive takes (a shift changes nothing of the others, which
        hold most of a trace's messages). ``totals``: this scan's :meth:`counts`,
        where the caller has them."""
        totals = totals if totals is not None else self.counts()
        receives, sent, _ = totals
        keep = {c for c, n in sent.items() if receives.get(c, 0) < n}
        return replace(self, totals=totals, **{
            name: {c: v for c, v in getattr(self, name).items() if c in keep}
            for name in ("sends", "send_times", "recv_numbers", "recv_times")})

    def _past(self, channel: tuple, m: int) -> np.ndarray:
        """The record numbers of a channel's receives after its first ``m`` (in time
        order): those past its last balance point."""
        numbers = np.concatenate(self.recv_numbers[channel])
        order = np.lexsort((numbers, np.concatenate(self.recv_times[channel])))
        return numbers[order[m:]]


def _by(shift: dict[int, int] | None, loc: int) -> int:
    return shift.get(loc, 0) if shift else 0


def _trailing(channel: tuple, times: np.ndarray, received: int, last: dict,
              shift: dict[int, int] | None) -> bool:
    """Whether a channel's sends beyond its ``received`` receives (send ``times``)
    only trail them: the first of them after the last receive and the send before
    it, on the times moved by ``shift``."""
    moved = _by(shift, channel[1]) - _by(shift, channel[0])
    return bool(times[received] > max(times[received - 1], last[channel] + moved))


def add_counts(parts: Iterable[Counts]) -> Counts:
    """Every part's :meth:`Scanned.counts` added up per channel (the last receive:
    the latest)."""
    receives: dict[tuple, int] = defaultdict(int)
    sent: dict[tuple, int] = defaultdict(int)
    last: dict[tuple, int] = {}
    for r, s, t in parts:
        for channel, n in r.items():
            receives[channel] += n
        for channel, n in s.items():
            sent[channel] += n
        for channel, x in t.items():
            last[channel] = max(x, last.get(channel, x))
    return dict(receives), dict(sent), last


def scan(defs: Definitions, chunks: Iterable[dict[int, Events]]) -> Unclosed:
    """The requests and sends of the trace read in ``chunks`` (the whole trace, as
    a streamed run reads it) that no record closes (module docstring)."""
    return scan_part(defs, chunks).unclosed()


def scan_part(defs: Definitions, chunks: Iterable[dict[int, Events]]) -> Scanned:
    """:func:`scan`'s reading of ``chunks``, which may hold only some locations (a
    distributed rank's own): what :meth:`Scanned.unclosed` needs, with the channel
    counts of every location read (:meth:`Scanned.counts`) to add up across ranks."""
    st = Scanned()
    for chunk in chunks:
        for loc, ev in chunk.items():
            base = st.seen[loc]
            st.seen[loc] = base + len(ev)
            _requests(st, loc, ev, base)
            _messages(st, defs, loc, ev, base)
            _begins(st, loc, ev, base)
    return st


def _begins(st: Scanned, loc: int, ev: Events, base: int) -> None:
    """Find the collective Begins of one location's chunk that no End closes: each
    followed by another Begin before any End (the last one's fate is the next
    chunk's)."""
    idx = np.flatnonzero((ev.kind == COLL_BEGIN) | (ev.kind == COLL_END))
    if not idx.size:
        return
    begin = ev.kind[idx] == COLL_BEGIN
    prev = st.open_begin.pop(loc, None)
    if prev is not None and begin[0]:
        st.lone_begins[loc].append(prev)
    lone = idx[:-1][begin[:-1] & begin[1:]]
    st.lone_begins[loc].extend((base + lone).tolist())
    if begin[-1]:
        st.open_begin[loc] = base + int(idx[-1])


def _requests(st: Scanned, loc: int, ev: Events, base: int) -> None:
    """Pair the request records of one location's chunk as the cutter does."""
    opened = st.open_requests[loc]
    for i in np.flatnonzero(REQUEST_KINDS[ev.kind]).tolist():
        kind, r = int(ev.kind[i]), int(ev.request[i])
        if kind in _OPEN:
            if r in opened:  # (an id reused while open: the earlier stays open)
                st.unclosed_requests[loc].append(opened[r][1])
            opened[r] = (kind, base + i)
        elif r in opened:
            was, number = opened.pop(r)
            if kind == REQUEST_CANCELLED and was == ISEND:
                st.cancelled[loc].add(number)


def _messages(st: Scanned, defs: Definitions, loc: int, ev: Events, base: int) -> None:
    """Count the receives of one location's chunk by channel, and keep the record
    numbers of its sends by channel."""
    send, recv = sent_and_received(ev.kind, ev.size_recv)
    idx = np.flatnonzero((send | recv) & (ev.peer != NONE))
    if not idx.size:
        return
    n = len(ev)
    keys, _ = channel_keys(defs, [loc], [ev], [n], idx, np.zeros(idx.size, np.int64),
                           send[idx])
    ids = key_ids(list(keys))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    for j, f in enumerate(first.tolist()):
        channel = tuple(keys[:, f].tolist())
        mine = idx[inverse == j]
        if send[idx[f]]:
            st.sends[channel].append(base + mine)
            st.send_times[channel].append(ev.time[mine].astype(np.int64))
        else:
            st.receives[channel] += int(mine.size)
            st.recv_numbers[channel].append(base + mine)
            st.recv_times[channel].append(ev.time[mine].astype(np.int64))
            if (ev.kind[mine] == PROBE).any():
                st.probed.add(channel)
