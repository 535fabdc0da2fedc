"""The forward replay's exchange: the records whose times cross ranks (docs/parallel.md).

A rank evaluates the anchors of the locations it owns (:mod:`compensate.parallel.ownership`);
the other locations are *ghosts* (:meth:`Exchange.ghosts`), which the engine never
evaluates: of a ghost location, only its first record and the records this rank's
rules read are anchors (:meth:`compensate.engine.graph.Graph.set_rules`; each its
own segment), their values unknown (NaN) until their owners send them; the other
ghost records cost no anchor. Values are keyed by (location, record): a ghost
index never needs to agree with the owner's anchor numbering. The value sent for
a record is ``A[anchor] + offset`` on its owner, exactly what a rule's
:data:`~compensate.engine.rules.Ref` computes in the one-process run; the rule
on the receiving rank reads it from the ghost anchor with offset 0, so the floats
are bit-identical.

* **Setup** (:meth:`Exchange.start`): each rank lists the ghost records its own
  dependent records read (the fast path's send, every generic rule's ``needs``) and
  sends each owner its list, (location, record, request id) rows of an int64
  buffer, in one exchange step (:meth:`Exchange._step`); the id is the record's
  place in the rank's list. The owner gives the anchor of each requested record a
  waiter list, so that computing it takes the engine's wake-up path and
  :meth:`Exchange.computed` queues it.
* **Point to point** (:meth:`Exchange.flush`, after each run of a location that
  computed a value another rank asked for, and :meth:`Exchange.round`, called when
  the engine has nothing runnable): the rank sends the values computed since its
  last send, one message per destination — (request id, value) pairs of doubles,
  never one message per value — with a nonblocking send whose request it keeps
  until the end; when it has nothing runnable it takes whatever arrived from any
  rank (each value goes straight to the ghost anchor its id names), and if nothing
  did, it waits for a message: the only place a rank blocks, and only on values it
  needs. Nothing is pickled (mpi4py's buffer API), and no rank waits in a
  collective call for ranks it does not depend on. The engine's C loop schedules
  (:mod:`compensate.engine.native`): it writes the asked-for values into the
  outbox (:class:`compensate.engine.exchange.Outbox`, a buffer region per
  destination) as it computes them and returns after the location's run, so a
  value leaves as soon as its location
  stops, not when the rank runs out of work; then the rank takes what has arrived
  (:meth:`Exchange.flush_and_take`, one probe), so that a value another rank sent
  wakes its location while this rank still has other work (sent at the next run's
  end, not only when both ranks ran out: sending at once and taking at once is
  what keeps a chain crossing ranks moving; batching a destination's values until
  the rank runs out of work sends fewer messages but makes the other side wait
  more).
* **The end** (:meth:`Exchange._decide`): a rank with nothing to compute joins a
  *wave*, a nonblocking sum (``Iallreduce``) of every rank's (messages sent,
  messages taken, done, failed), and keeps taking messages while it is in flight.
  Every rank sees every wave's sums, in the same order, so all stop after the same
  wave: every rank done (its own anchors computed and every value it asked for
  taken) — finished; a rank failed (:meth:`fail` joins a wave that says so) —
  every rank takes and drops what is still on its way to it (:meth:`_stop`) and
  stops (:class:`RemoteFailure`); two consecutive waves with the same sums, every
  message sent taken, and a rank not done — quiescent for good, the dependencies
  form a cycle (Mattern's four-counter method: a rank joins a wave only while
  passive and only a message makes it active again, so equal counts over two waves
  mean every rank was passive with nothing in transit between them): the
  one-process run's "can never be reached" error, raised by the rank of the first
  waiting location.
* **Statistics** (:meth:`Exchange.reduce`): what each rank counted for its own
  locations, reduced to the one-process numbers.
"""

from __future__ import annotations

import time
from array import array
from typing import Any

import numpy as np

from compensate.engine.exchange import Outbox, Wire
from compensate.engine.graph import FAST_P2P, Graph
from compensate.model import BUFFER_FLUSH
from compensate.parallel.transport import Transport, Wave
from compensate.pipeline.totals import add_counts


def ghost_pins(trace: Any, owner: dict[int, int], rank: int) -> dict[int, tuple]:
    """No pins: the engine takes the ghost locations from the exchange
    (:meth:`Exchange.ghosts`) and ignores pins on them. Kept for callers of the first
    version, which pinned every ghost record (an anchor and a Python float each)."""
    return {}


#: an exchange step's header, one row per destination (:meth:`Exchange._step`):
#: status, the rows this rank sends that destination, the rows it sends in all, the
#: rows of them that did not fit inline, then the first rows for that destination
#: inline (:func:`inline_words` int64 words)
_FIELDS = 4
_OK, _FAILED = 0, 1
#: up to this many ranks a step's header carries rows inline (see inline_words)
INLINE_RANKS = 256


def inline_words(size: int) -> int:
    """The int64 words of rows each header row carries inline at ``size`` ranks: 12
    (four values of a round, six requests of the setup) up to :data:`INLINE_RANKS`
    ranks, none above (the header then costs each rank 32 bytes per rank). A round
    whose rows all fit is one ``Alltoall``; issue #21's stencil sends 1.3 values a
    round per rank. The same on every rank and for every step (a failing rank's
    header must match the step the others wait in)."""
    return 12 if size <= INLINE_RANKS else 0


#: seconds a blocked rank (not done) waits for a message before it joins a wave: a
#: value is usually on its way, and a wave joined at every block would cost one
#: ``Iallreduce`` per hop; a cycle is then found after two such delays (a done rank
#: joins at once: its contribution ends the replay)
WAVE_DELAY = 0.005


class RemoteFailure(Exception):
    """Another rank failed; ``rank`` is the first that did (it reports the error),
    -1 if not known here (a wave tells that a rank failed, not which: the driver's
    agreement names it)."""

    def __init__(self, rank: int) -> None:
        super().__init__(f"rank {rank} failed" if rank >= 0 else "another rank failed")
        self.rank = rank


class Exchange:
    """The engine's link to the other ranks (see the module docstring): the
    :class:`compensate.engine.exchange.AnchorExchange` of the distributed run.

    ``owner``: ``{location id: rank}`` for every location of the trace; ``index``:
    the trimmed ghosts' index map (:mod:`compensate.parallel.trim`; rows name
    original record indices, the graph trimmed positions)."""

    def __init__(self, transport: Transport, owner: dict[int, int],
                 index: dict[int, np.ndarray] | None = None) -> None:
        self.transport = transport
        self.owner = owner
        self.index = index or {}
        self.finished = False
        #: after a cycle: (position, rank) of the first location still waiting
        self.first_waiting: tuple[int, int] | None = None
        #: times the engine had nothing runnable and no value had arrived: this rank
        #: waited (also summed over the run in the transport's traffic)
        self.waits = 0
        self._sent = 0  # values this rank's Python side sent
        self._received = 0
        self.expected = 0  # values this rank will receive (from the setup)
        #: where the engine's C loop sends and takes the messages itself (None: only
        #: this object does; :meth:`start`)
        self._wire: Wire | None = None
        #: the anchors computed outside the C loop whose values other ranks asked
        #: for, not yet in the outbox (:meth:`computed`)
        self._out: list[int] = []
        #: the values other ranks asked for, by destination (:meth:`start`)
        self.outbox: Outbox | None = None
        self._owned: list[int] = []
        self._a_end: list[int] = []
        #: anchors of this rank's own locations: the values its engine computes (the
        #: cost model's count, docs/performance.md)
        self.own_anchors: int | None = None
        self._graph: Graph | None = None
        #: the ghost anchors this rank asked for, by request id (:meth:`start`)
        self._wanted: list[int] = []
        # point to point (after the setup step): messages sent to / taken from each
        # rank, the sends in flight (request, buffer), the wave in flight and the
        # sums of the last completed one
        self._p2p = False
        # (Python lists: a numpy scalar's increment costs more than the rest of a
        # message's bookkeeping)
        size = transport.size
        self._to = [0] * size
        self._from = [0] * size
        self._messages_sent = self._messages_received = 0
        self._sends: list[tuple[Any, np.ndarray]] = []
        self._wave: Wave | None = None
        self._last: tuple[int, int, int, int] | None = None

    # -- collective steps ------------------------------------------------------------
    def _step(self, rows: np.ndarray, dest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One exchange step, nothing pickled: ``rows`` (n, width) int64 go to the
        ranks ``dest`` (n,). An ``Alltoall`` of the header (one row per destination:
        status, how many rows for it, how many in all, how many did not fit inline,
        and the first :func:`inline_words` words of its rows), then, only if some
        rank's rows did not all fit (every rank sees the same totals, so all call it
        or none), an ``Alltoallv`` of the rest. Returns the rows received, by source
        rank and in the order sent, and the header received (row ``r`` from rank
        ``r``). RemoteFailure if any rank failed."""
        t = self.transport
        size, n, width = t.size, len(dest), rows.shape[1]
        words = inline_words(size)
        fit = words // width  # rows inline per destination
        head = np.zeros((size, _FIELDS + words), np.int64)  # status _OK (0)
        counts: np.ndarray | None = None
        over: list[np.ndarray] = []
        if n:  # (slices, not fancy indexing of the rows: 20x faster for 10^4 rows)
            if n > 1 and bool(np.any(dest[1:] < dest[:-1])):
                order = np.argsort(dest, kind="stable")
                rows, dest = np.take(rows, order, axis=0), dest[order]
            counts = np.bincount(dest, minlength=size)
            lo = 0
            nz = np.flatnonzero(counts)
            for d, c in zip(nz.tolist(), counts[nz].tolist(), strict=True):
                k = min(c, fit)
                head[d, _FIELDS:_FIELDS + k * width] = rows[lo:lo + k].reshape(-1)
                if c > k:
                    over.append(rows[lo + k:lo + c])
                lo += c
            head[:, 1] = counts
            head[:, 2] = n
            head[:, 3] = n - min(n, sum(min(c, fit) for c in counts.tolist()))
        got = t.alltoall_array(head)
        if got[:, 0].any():
            self.finished = True
            raise RemoteFailure(int(np.flatnonzero(got[:, 0] != _OK)[0]))
        recv = got[:, 1]
        more = None
        if got[:, 3].any():  # (the same on every rank: each one's overflow in all)
            send = np.concatenate(over).reshape(-1) if over else np.zeros(0, np.int64)
            sent = np.zeros(size, np.int64) if counts is None else \
                np.maximum(counts - fit, 0) * width
            more = t.alltoallv_array(send, sent,
                                     np.maximum(recv - fit, 0) * width).reshape(-1, width)
        parts, at = [], 0
        nz = np.flatnonzero(recv)
        for src, c in zip(nz.tolist(), recv[nz].tolist(), strict=True):
            k = min(c, fit)
            parts.append(got[src, _FIELDS:_FIELDS + k * width].reshape(k, width))
            if c > k:
                parts.append(more[at:at + c - k])
                at += c - k
        if not parts:
            return np.zeros((0, width), np.int64), got
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), got

    def fail(self) -> None:
        """This rank failed: tell the others. Before the point-to-point phase, in
        the setup step they wait in (a header with status failed); during it, by
        finishing the wave in flight and joining one more that carries the failure
        (every rank then drains and stops, :meth:`_decide`); a no-op once the replay
        is over (the driver's next agreement carries it)."""
        if self.finished:
            return
        self.finished = True
        t = self.transport
        if not self._p2p:
            head = np.zeros((t.size, _FIELDS + inline_words(t.size)), np.int64)
            head[:, 0] = _FAILED
            t.alltoall_array(head)
            return
        if self._wave is not None:
            res = self._wave.wait()
            self._wave = None
            if res[3]:  # another rank failed in the same wave: drain as they do
                self._stop(drain=True)
                return
        t.iallreduce_sum(self._counters(False, failed=True)).wait()
        self._stop(drain=True)

    # -- the engine's hooks ---------------------------------------------------------
    def ghosts(self, trace: Any) -> list[int]:
        """The locations of ``trace`` that other ranks own: the engine's ghosts."""
        me = self.transport.rank
        return [loc for loc in trace.events if self.owner[loc] != me]

    def start(self, g: Graph, A: array, cur: list[int], waiters: dict[int, list[int]]) -> None:
        """Ask the owners for the ghost records this rank's rules read, and register
        the records the others asked for. Of ghost locations only the records this
        rank's rules read are anchors (value NaN until it arrives), and none of them
        is evaluated."""
        me, size = self.transport.rank, self.transport.size
        loc_rank = np.array([self.owner[loc] for loc in g.loc_ids], dtype=np.int64)
        a_end = g.a_end.tolist()
        owned = [li for li in range(len(cur)) if loc_rank[li] == me]
        for li in range(len(cur)):
            if loc_rank[li] != me:
                cur[li] = a_end[li]
        self._owned, self._a_end = owned, a_end
        self._graph = g
        anchor_rank = loc_rank[g.anchor_loc] if len(g.anchor_loc) else np.zeros(0, np.int64)
        first = g.a_first.tolist()
        self.own_anchors = sum(a_end[li] - first[li] for li in owned)
        w = self._reads(g, anchor_rank == me)
        # ghost records (each an anchor; the others first: most reads are own anchors)
        w = np.unique(w[anchor_rank[w] != me]) if w.size else w
        self.expected = int(w.size)
        locs = np.asarray(g.loc_ids, dtype=np.int64)[g.anchor_loc[w]] if w.size else w
        recs = g.anchor_rec[w] if w.size else w
        if self.index and w.size:  # trimmed ghosts: ask for the original records
            recs = recs.copy()
            for loc in np.unique(locs).tolist():
                if loc in self.index:
                    sel = locs == loc
                    recs[sel] = self.index[loc][recs[sel]]
        # (location, record, request id): the owner sends back (id, value) pairs and
        # the id is the ghost anchor's place in ``_wanted``
        rows = np.empty((len(w), 3), np.int64)
        if w.size:
            rows[:, 0], rows[:, 1], rows[:, 2] = locs, recs, np.arange(len(w))
        self._wanted = w.tolist()
        asked, head = self._step(rows, anchor_rank[w])
        self._p2p = True  # (from here on a failure is told in a wave, :meth:`fail`)
        source = np.repeat(np.arange(size), head[:, 1])
        # the value a remote rule reads: A[anchor] + offset, as Graph.ref computes it
        # (the records asked for are of this rank's own locations, whole)
        locs, at = np.unique(asked[:, 0], return_inverse=True)
        pos = np.array([g.pos_of[loc] for loc in locs.tolist()], dtype=np.int64)[at]
        gidx = g.off[pos] + asked[:, 1] if len(pos) else pos
        anchors = g.anchor_of(gidx) if len(pos) else pos
        offsets = g.S[gidx] if len(pos) else np.zeros(0)
        self.outbox = Outbox.of_columns(len(A), size, anchors, source, asked[:, 2], offsets)
        path = self.transport.wire_path()
        if path is not None:  # the C loop sends and takes the messages itself
            self._wire = self.outbox.wire = Wire(*path, self._wanted, size, len(anchors),
                                                 self.expected)
        # each anchor asked for once, in the order asked: a waiter list each, and
        # those known from the start (a first record) queued to be sent
        uniq, at = np.unique(anchors, return_index=True)
        asked_once = uniq[np.argsort(at)]
        waiters.update({k: [] for k in asked_once.tolist() if k not in waiters})
        known = asked_once[~np.isnan(np.frombuffer(A, dtype=np.float64)[asked_once])]
        self._out.extend(known.tolist())
        if self._wire is not None:  # (sent now: the C loop sends only what it computes)
            self.flush(A)

    @staticmethod
    def _reads(g: Graph, own: np.ndarray) -> np.ndarray:
        """The anchors the own anchors (``own``: a mask over the anchors) read: the
        inline receives' send and enter anchors (numpy over the graph's columns),
        every generic rule's needs."""
        code = np.frombuffer(g.code, dtype=np.int8)
        fast = own & (code == FAST_P2P)
        s_anchor = np.frombuffer(g.f_s_anchor, dtype=np.int64)[fast]
        e_anchor = np.frombuffer(g.f_e_anchor, dtype=np.int64)[fast]
        generic: list[int] = []
        shared: set[int] = set()  # (a collective instance's members share one needs list)
        for k, (rules, _) in g.generic.items():
            if own[k]:
                for rule in rules:
                    needs = rule.needs
                    if id(needs) not in shared:
                        shared.add(id(needs))
                        generic.extend([need[0] for need in needs])
        return np.concatenate([s_anchor, e_anchor[e_anchor >= 0],
                               np.asarray(generic, dtype=np.int64)])

    def computed(self, k: int) -> None:
        """Anchor ``k`` was computed; queue it if other ranks asked for a record of
        its segment."""
        if self.outbox is not None and self.outbox.wants(k):
            self._out.append(k)

    # -- point to point --------------------------------------------------------------
    def flush(self, A: array) -> None:
        """Send the values written to the outbox since the last send, if any (the
        engine calls this after every run of a location that computed one): one
        message per destination, its (request id, value) pairs of doubles sent from
        where the outbox holds them, never one message per value."""
        ob = self.outbox
        if ob is None:
            return
        if self._out:  # (computed outside the C loop)
            for k in self._out:
                ob.put(A, k)
            self._out = []
        if not ob.dirty[0]:
            return
        box = ob.box
        for rank, lo, hi in ob.pending():
            self._sent += (hi - lo) // 2
            self._send_values(rank, np.frombuffer(box, dtype=np.int64, count=hi - lo,
                                                  offset=8 * lo))

    def _send_values(self, dest: int, buf: np.ndarray) -> None:
        """One message of ``buf`` to rank ``dest``: (request id, value) pairs of
        doubles, as int64 words (nonblocking; the buffer is kept with its request
        until :meth:`_stop` waits for them)."""
        self._sends.append((self.transport.isend_array(dest, buf), buf))
        self._to[dest] += 1
        self._messages_sent += 1

    def flush_and_take(self, A: array, ks: list[int]) -> list[int]:
        """:meth:`computed` for each of ``ks``, :meth:`flush`, then take the
        messages that have arrived, without waiting (the engine's scheduled loop
        calls this after every run of a location that computed values others asked
        for): a location parked on another rank's value runs as soon as that value
        is here, which keeps the chain of values that cross ranks moving while this
        rank still has other work. Their anchors."""
        computed = self.computed
        for k in ks:
            computed(k)
        self.flush(A)
        msgs = self.transport.poll_arrays()
        return self._arrived(msgs, A) if msgs else []

    def _arrived(self, msgs: list[tuple[int, np.ndarray]],
                 A: array) -> list[int]:
        """Count the messages taken (first: the drain after a failure relies on the
        counts), then :meth:`_take` them."""
        got = self._from
        for src, _ in msgs:
            got[src] += 1
        self._messages_received += len(msgs)
        return self._take(msgs, A)

    def _take(self, msgs: list[tuple[int, np.ndarray]], A: array) -> list[int]:
        """Fill the ghost anchors of the arrived messages ((request id, value)
        pairs: the id is the anchor's place in the list this rank asked for, each
        record asked for an anchor of its own, Graph.set_rules); their anchors."""
        wanted, ks = self._wanted, []
        for _, buf in msgs:
            pairs = buf.view(np.float64).tolist()
            if len(pairs) == 2:  # (the usual message: one value)
                k = wanted[int(pairs[0])]
                A[k] = pairs[1]
                ks.append(k)
                continue
            for i in range(0, len(pairs), 2):
                k = wanted[int(pairs[i])]
                A[k] = pairs[i + 1]
                ks.append(k)
        if self._wire is not None:  # (the C loop reads it: whether a value is still due)
            self._wire.tally[1] += len(ks)
        else:
            self._received += len(ks)
        return ks

    @property
    def sent(self) -> int:
        """The values this rank sent (its Python side's and its C loop's)."""
        return self._sent + (self._wire.count("values_sent") if self._wire else 0)

    @property
    def received(self) -> int:
        """The values this rank took."""
        return self._received + (self._wire.count("values_taken") if self._wire else 0)

    def _messages(self) -> tuple[int, int]:
        """The messages this rank sent and took (its Python side's and its C loop's)."""
        w = self._wire
        if w is None:
            return self._messages_sent, self._messages_received
        return (self._messages_sent + w.count("messages_sent"),
                self._messages_received + w.count("messages_taken"))

    def _wire_checked(self) -> None:
        """Raise if the C loop's message path failed (the MPI library's error code)."""
        if self._wire is not None and self._wire.count("error"):
            code = self._wire.count("error")
            raise RuntimeError("the replay's messages: " + (
                f"MPI error {code}" if code > 0 else "a message this rank did not ask for"))

    def _done(self, cur: list[int]) -> bool:
        """Every own anchor computed and every value asked for received."""
        a_end = self._a_end
        return self.received == self.expected and all(cur[li] >= a_end[li]
                                                      for li in self._owned)

    def _stop(self, drain: bool = False) -> None:
        """The replay is over on every rank (the same wave told them all): wait for
        this rank's sends. After a failure (``drain``) messages may still be on
        their way: one ``alltoall`` of how many messages each rank sent each other,
        and this rank receives (and drops) those it has not taken yet, so that no
        send is left waiting for its receive."""
        self.finished = True
        # the engine's graph (its per-record arrays: ~100 bytes a record) is no longer
        # read: the exchange outlives the replay (its counts go into the summary)
        self._graph, self._wanted = None, []
        t = self.transport
        w = self._wire
        if drain:
            to, taken = self._to, self._from
            if w is not None:
                to = [a + b for a, b in zip(to, w.sent_to, strict=True)]
                taken = [a + b for a, b in zip(taken, w.taken_from, strict=True)]
            sent_me = t.alltoall_array(np.array(to, np.int64).reshape(-1, 1))[:, 0]
            for src, n in enumerate(sent_me.tolist()):
                for _ in range(n - taken[src]):
                    t.recv_array(src)
                    self._messages_received += 1
                    self._from[src] += 1
        wired = []
        if w is not None:  # (the C loop's sends: counted in the traffic here)
            wired = t.requests_of(w.handles_used())
            t.traffic.messages += w.count("messages_sent")
            t.traffic.wire_messages += w.count("messages_sent")
            t.traffic.message_bytes += 16 * w.count("values_sent")
            self.waits += w.count("waits")
            t.traffic.waits += w.count("waits")
            t.traffic.wait_seconds += w.count("wait_ns") / 1e9
        t.wait_sends([req for req, _ in self._sends] + wired)
        self._sends = []
        self.outbox = None  # (its regions were the sends' buffers)

    def _counters(self, done: bool, failed: bool = False) -> np.ndarray:
        return np.array([*self._messages(), int(done), int(failed)], dtype=np.int64)

    def _decide(self, res: np.ndarray) -> bool:
        """Apply a completed wave's sums (the same on every rank, so every rank stops
        after the same wave): another rank failed (every rank drains and stops,
        RemoteFailure), every rank done (finished), or quiescent: every message sent
        was received and the counts did not move since the previous wave, while some
        rank is not done — a dependency cycle (finished; the engine's parked check
        names it). True if the replay is over."""
        sent, received, done, failed = res.tolist()
        last, self._last = self._last, (sent, received, done, failed)
        if failed:
            self._stop(drain=True)
            raise RemoteFailure(-1)
        if done == self.transport.size or (sent == received and last == self._last):
            self._stop()
            return True
        return False

    def round(self, A: array, cur: list[int]) -> list[int]:
        """The engine has nothing runnable: send the queued values (one message per
        destination), take what arrived; if nothing did, wait for a message (up to
        :data:`WAVE_DELAY` if this rank is not done), then join a wave (a
        nonblocking sum of every rank's message counts and status,
        :meth:`_decide`) and keep waiting for a message while it is in flight.
        Returns the ghost anchors that arrived (their values are in ``A``); sets
        :attr:`finished` when the replay is over."""
        t = self.transport
        self._wire_checked()
        self.flush(A)  # (queued, or written by the C loop)
        msgs = t.poll_arrays()
        if msgs:
            return self._arrived(msgs, A)
        # nothing runnable and nothing arrived: this rank waits (the summary's count)
        self.waits += 1
        start = time.perf_counter()
        try:
            return self._wait(A, cur)
        finally:
            t.traffic.waits += 1
            t.traffic.wait_seconds += time.perf_counter() - start

    def _wait(self, A: array, cur: list[int]) -> list[int]:
        """:meth:`round` once nothing has arrived: wait for a message, then the waves."""
        t = self.transport
        done = self._done(cur)
        while True:
            if self._wave is None:  # this rank is passive: join the next wave, if
                if not done:  # blocked, after a while (most values are on their way)
                    msg = t.wait_message(None, WAVE_DELAY)
                    if msg is not None:
                        return self._arrived([msg, *t.poll_arrays()], A)
                self._wave = t.iallreduce_sum(self._counters(done))
            msg = t.wait_message(self._wave)
            if msg is not None:
                return self._arrived([msg, *t.poll_arrays()], A)
            res, self._wave = self._wave.result, None
            if self._decide(res):
                return []

    def reduce(self, g: Graph, stats: Any, waiting: int | None = None) -> None:
        # (``waiting``: this rank's first location position still waiting after a
        # cycle, None if none; see :meth:`check_first_waiting`)
        """Make ``stats`` the one-process statistics: the case counters are every
        rank's summed (of its own records: counted while its rules were built, the
        handlers building only those, and while they were evaluated, the fast path's
        late parties included); R1 overcompensation and
        BufferFlush statistics and the overhead removed, which each rank counted for
        its own locations (the graph gives ghost locations no R1 gaps), summed,
        their largest shortfall the largest; the flush ticks summed (exact integers:
        the same seconds as the one-process run's); the by-region records summed."""
        t = self.transport
        cases = stats.p2p_cases
        flush = {}
        for li in self._owned:
            ev = g.evs[li]
            f = np.flatnonzero(ev.kind == BUFFER_FLUSH)
            f = f[f >= len(g.pins[li][0])]  # a segment's context was counted before
            if f.size:  # as Graph._flat_columns counts it
                flush[g.loc_ids[li]] = int(np.sum(ev.size[f] - ev.time[f]))
        mine = (dict(cases), stats.overcompensated,
                dict(stats.overcompensated_by_kind), stats.overcompensated_max_s,
                stats.buffer_flushes, flush,
                None if waiting is None else g.loc_ids[waiting], dict(stats.region_records),
                stats.overhead_removed)
        got = t.allgather(mine)
        # after a cycle: the first location (in the trace's order) still waiting
        order = {loc: i for i, loc in enumerate(g.loc_ids)}
        stuck = [(order[d[6]], rank) for rank, d in enumerate(got) if d[6] is not None]
        self.first_waiting = min(stuck) if stuck else None
        for k in cases:
            cases[k] = sum(d[0].get(k, 0) for d in got)
        stats.overcompensated = sum(d[1] for d in got)
        stats.overcompensated_by_kind, stats.region_records = {}, {}
        for d in got:
            add_counts(stats.overcompensated_by_kind, d[2])
            add_counts(stats.region_records, d[7])
        stats.overcompensated_max_s = max(d[3] for d in got)
        stats.buffer_flushes, stats.overhead_removed = (sum(d[4] for d in got),
                                                        sum(d[8] for d in got))
        ticks = sum(x for d in got for x in d[5].values())
        stats.flush_ticks, stats.flush_seconds_removed = 0, 0.0
        if ticks:
            stats.add_flush_ticks(ticks, g.trace.definitions.timer_resolution)

    def check_first_waiting(self, li: int) -> None:
        """After a cycle: return if this rank's location position ``li`` is the first
        location still waiting of all ranks (this rank then raises the one-process
        run's error naming it); else RemoteFailure naming the rank that reports it."""
        first = self.first_waiting
        if first is not None and first[1] != self.transport.rank:
            raise RemoteFailure(first[1])
