"""The compensation engine: measured timestamps in, approximated timestamps out.

Implements DESIGN.md §3 (rules R1–R6) in the shape of §5:

* Per location, the records between two *dependent* records are a local run: R1
  makes their approximated times a cumulative sum of the measured gaps minus the
  overhead of each gap's opening record (numpy, no per-record Python work).
* A dependent record (a matched MpiRecv, a collective's MpiCollectiveEnd that
  waits for other members) names the remote records it needs. If one of them is
  not approximated yet, the location parks on exactly that record and is woken when
  the owning location passes it: no retry lists, no rescans.
* Locations that can make progress sit in a priority queue (a SortedList keyed by
  approximated time) and advance at most ``window`` records per turn, so the
  engine walks the trace in approximated-time order as the paper's queueing
  system does.

All arithmetic is in float ticks relative to the earliest measured timestamp;
results are rounded to integer ticks at the end, which keeps every order the
float values have (each receive is placed at least one tick after its send).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sortedcontainers import SortedList

from .fit import WAIT_MARGIN
from .matching import (
    EXSCAN,
    N_TO_N,
    N_TO_ONE,
    ONE_TO_N,
    SCAN,
    Instance,
    Matching,
    Message,
    match,
    needed_members,
)
from .model import BUFFER_FLUSH, ISEND, KIND_NAMES, SEND, Trace, TraceError
from .platform import Platform

BOUNDS = ("lower", "upper", "fitted", "none")
COLLECTIVE_EXITS = ("uniform", "per-process")


@dataclass
class EngineOptions:
    bound: str = "lower"  # lower | upper | fitted | none (identity: times unchanged)
    collective_exit: str = "uniform"  # uniform (eq. 12) | per-process (eq. 13)
    window: int = 65536  # records a location may advance per turn
    # bound="fitted": network time in seconds of an s-byte message (without the two
    # buffer copies), e.g. a latency + bytes/bandwidth fit to the observed transfers
    network_time: Callable[[int], float] | None = None

    def __post_init__(self) -> None:
        if self.bound not in BOUNDS:
            raise ValueError(f"bound must be one of {BOUNDS}, got {self.bound!r}")
        if self.bound == "fitted" and self.network_time is None:
            raise ValueError("bound 'fitted' needs network_time (a fitted transfer model)")
        if self.collective_exit not in COLLECTIVE_EXITS:
            raise ValueError(f"collective_exit must be one of {COLLECTIVE_EXITS}")


@dataclass
class Stats:
    """What happened, for the summary."""

    records: int = 0
    locations: int = 0
    overcompensated: int = 0
    messages: int = 0
    unmatched_sends: int = 0
    collective_instances: int = 0
    unknown_collective_ops: int = 0
    p2p_cases: dict = field(default_factory=lambda: {
        "m1_a1": 0, "m1_a2": 0, "m2_lower": 0, "m2_upper": 0, "m2_fitted": 0,
        "m2_fitted_clamped": 0, "m1_receiver_late": 0, "synchronous": 0, "nbc_observed": 0,
        "nbc_bounded": 0})
    buffer_flushes: int = 0
    flush_seconds_removed: float = 0.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Result:
    trace: Trace
    stats: Stats
    matching: Matching


# A dependent record: what it needs (location, index) and how to compute it from
# its R1 (local) candidate time.
@dataclass
class _Dep:
    needs: list[tuple[int, int]]
    resolve: Callable[[float], float]


class _Engine:
    def __init__(self, trace: Trace, platform: Platform, opts: EngineOptions,
                 matching: Matching, progress: Callable[[int], None] | None) -> None:
        self.trace = trace
        self.opts = opts
        self.m = matching
        self.progress = progress
        res = float(trace.definitions.timer_resolution)
        self.res = res
        self.tick = 1.0
        self.ovh = platform.overhead_table() * res  # ticks per kind code
        self.platform = platform
        self._copy: dict[int, float] = {}
        self.stats = Stats()
        self.locs = list(trace.events)
        t0 = min((int(e.time[0]) for e in trace.events.values() if len(e)), default=0)
        self.t0 = t0
        self.tm: dict[int, np.ndarray] = {}  # measured, float ticks relative to t0
        self.gap: dict[int, np.ndarray] = {}  # R1 increments (clamped at 0)
        self.a: dict[int, np.ndarray] = {}  # approximated
        self.ptr: dict[int, int] = {}
        self.deps: dict[int, dict[int, _Dep]] = {}
        self.dep_idx: dict[int, np.ndarray] = {}
        self.dpos: dict[int, int] = {}
        self.waiters: dict[int, list[tuple[int, int]]] = {}
        for loc, ev in trace.events.items():
            tm = (ev.time - t0).astype(np.float64)
            self.tm[loc] = tm
            n = len(tm)
            o = self.ovh[ev.kind].copy()
            flush = np.flatnonzero(ev.kind == BUFFER_FLUSH)
            if flush.size:
                o[flush] += (ev.size[flush] - ev.time[flush]).astype(np.float64)
                self.stats.buffer_flushes += int(flush.size)
                self.stats.flush_seconds_removed += float(
                    np.sum(ev.size[flush] - ev.time[flush]) / res)
            gap = np.zeros(n)
            if n > 1:
                gap[1:] = np.diff(tm) - o[:-1]
            self.gap[loc] = gap
            self.a[loc] = np.empty(n)
            self.ptr[loc] = 0
            self.deps[loc] = {}
            self.waiters[loc] = []
        self._cache_copy_costs()
        self._build_deps()
        for loc in self.locs:
            self.dep_idx[loc] = np.array(sorted(self.deps[loc]), dtype=np.int64)
            self.dpos[loc] = 0
            gap = self.gap[loc]
            local = np.ones(len(gap), dtype=bool)
            local[0:1] = False
            local[self.dep_idx[loc]] = False
            self.stats.overcompensated += int(np.count_nonzero(gap[local] < 0))
            np.maximum(gap, 0.0, out=gap)

    # -- copy cost ----------------------------------------------------------------
    def _cache_copy_costs(self) -> None:
        """C(s)·s in ticks for every message size in the trace, in one vectorised
        call (a numpy call per message was the engine's largest cost)."""
        sizes = [np.unique(e.size[e.size >= 0]) for e in self.trace.events.values()]
        sizes += [np.unique(e.size_recv[e.size_recv >= 0]) for e in self.trace.events.values()]
        allsizes = np.unique(np.concatenate(sizes)) if sizes else np.zeros(0, dtype=np.int64)
        costs = np.asarray(self.platform.copy_time(allsizes.astype(float))) * self.res
        self._copy = dict(zip(allsizes.tolist(), np.atleast_1d(costs).tolist(), strict=True))

    def copy(self, size: int) -> float:
        """Ticks to copy an ``size``-byte buffer."""
        c = self._copy.get(size)
        if c is None:
            c = self._copy[size] = float(self.platform.copy_time(size)) * self.res
        return c

    # -- dependencies -----------------------------------------------------------
    def _add_dep(self, loc: int, idx: int, needs: list[tuple[int, int]],
                 resolve: Callable[[float], float]) -> None:
        """Register a dependent record; two rules on one record: the later wins."""
        old = self.deps[loc].get(idx)
        if old is None:
            self.deps[loc][idx] = _Dep(needs, resolve)
        else:
            first = old.resolve
            self.deps[loc][idx] = _Dep(old.needs + needs,
                                       lambda local: max(first(local), resolve(local)))

    def _build_deps(self) -> None:
        for msg in self.m.messages:
            if msg.send_loc == msg.recv_loc:
                continue  # send to self: ordered by the location itself
            if msg.synchronous:
                self._sync_deps(msg)
            else:
                self._add_dep(msg.recv_loc, msg.recv_idx, [(msg.send_loc, msg.send_idx)],
                              self._p2p_resolver(msg))
        for inst in self.m.instances:
            self._collective_deps(inst)

    def _kind_ovh(self, loc: int, idx: int) -> float:
        return float(self.ovh[self.trace.events[loc].kind[idx]])

    def _ready(self, loc: int, idx: int) -> float:
        """Approximated time at which the receiver can take a message arriving for its
        record ``idx``: right after the previous record, plus that record's buffer
        copy if it was a send in the same call (MPI_Sendrecv)."""
        if idx <= 0:
            return -np.inf
        ev = self.trace.events[loc]
        prev = idx - 1
        extra = self.copy(int(ev.size[prev])) if ev.kind[prev] in (SEND, ISEND) else 0.0
        return self.a[loc][prev] + extra

    def _receiver_was_late(self, loc: int, idx: int, cs: float) -> bool:
        """In the measurement, was the receiver (not the message) the late party for
        record ``idx``: was it ready only after the message had arrived? Ready =
        the record before plus its overhead (and its copy, if a send); the same
        criterion and margin the network fit uses (:data:`compensate.fit.WAIT_MARGIN`)."""
        if idx <= 0:
            return False
        ev = self.trace.events[loc]
        prev = idx - 1
        k = ev.kind[prev]
        start = float(ev.size[prev] - self.t0) if k == BUFFER_FLUSH else self.tm[loc][prev]
        free = start + float(self.ovh[k])
        if k in (SEND, ISEND):
            free += self.copy(int(ev.size[prev]))
        margin = 1.0 + WAIT_MARGIN * (cs + free - self.tm[loc][prev])
        return not self.tm[loc][idx] - cs > free + margin

    def _recv_time(self, send_loc: int, send_idx: int, send_exit_m: float,
                   recv_loc: int, enter_idx: int, size: int, recv_m: float,
                   recv_idx: int) -> float:
        """R2 for one message: approximated receive time (needs send_a known).
        ``enter_idx`` is the Enter of the receive call (decides m.1/m.2); the receiver
        is ready after the record before ``recv_idx`` (several completions in one
        MPI_Waitall take their messages one after the other)."""
        send_a = self.a[send_loc][send_idx]
        send_m = self.tm[send_loc][send_idx]
        cs = self.copy(size)
        if enter_idx >= 0:
            enter_a = self.a[recv_loc][enter_idx]
            enter_m = self.tm[recv_loc][enter_idx]
        else:  # the receive opens its location: it starts where measured
            enter_m = recv_m
            enter_a = recv_m - cs
        ready = max(enter_a, self._ready(recv_loc, recv_idx))
        # the send record's own writing cost lies inside the observed transfer
        observed = recv_m - send_m - self._kind_ovh(send_loc, send_idx)
        cases = self.stats.p2p_cases
        overlapped = enter_m <= send_exit_m
        if overlapped and self.opts.bound == "fitted" and recv_idx >= 0 and \
                self._receiver_was_late(recv_loc, recv_idx, cs):
            # the calls overlapped but the receiver, not the message, was late: the
            # interval holds the receiver's lateness, not the transfer (R2f uses the fit)
            overlapped = False
            cases["m1_receiver_late"] += 1
        if overlapped:  # m.1: the calls overlapped, transfer observed
            recv_a = max(send_a + observed, ready + cs)
            cases["m1_a1" if send_a + observed > ready + cs else "m1_a2"] += 1
        else:  # m.2: bounds only (eq. 8-10)
            comm_min = (ready - send_a) + cs
            if self.opts.bound == "lower":
                comm = max(2.0 * cs, comm_min)
                cases["m2_lower"] += 1
            elif self.opts.bound == "upper":
                comm = max(observed, comm_min)
                cases["m2_upper"] += 1
            else:  # fitted (R2f): the modelled transfer, clamped into [lower, upper]
                lo, hi = max(2.0 * cs, comm_min), max(observed, comm_min)
                fit = 2.0 * cs + self.opts.network_time(size) * self.res
                comm = min(max(fit, lo), hi)
                cases["m2_fitted"] += 1
                cases["m2_fitted_clamped"] += int(comm != fit)
            recv_a = send_a + comm
        # eq. 7: the receive completes after it was entered, and after the send
        return max(recv_a, send_a + self.tick, enter_a + self.tick)

    def _p2p_resolver(self, msg: Message) -> Callable[[float], float]:
        send_exit_m = self.tm[msg.send_loc][msg.send_exit_idx]
        recv_m = self.tm[msg.recv_loc][msg.recv_idx]

        def resolve(local: float) -> float:
            return self._recv_time(msg.send_loc, msg.send_idx, send_exit_m, msg.recv_loc,
                                   msg.recv_enter_idx, msg.size, recv_m, msg.recv_idx)
        return resolve

    def _sync_deps(self, msg: Message) -> None:
        """A synchronous send: the transfer starts at the handshake, when both the
        send was issued and the receive posted; after it, the sender's call ends and
        the receive completes. Both intervals after the handshake are measured, so
        both bounds use them (the model of DESIGN.md section 2, "synchronous")."""
        s_loc, s_idx, r_loc, post = msg.send_loc, msg.send_idx, msg.recv_loc, msg.recv_post_idx
        ts_m, post_m = self.tm[s_loc][s_idx], self.tm[r_loc][post]
        handshake_m = max(ts_m + self._kind_ovh(s_loc, s_idx),
                          post_m + self._kind_ovh(r_loc, post))
        to_exit = max(0.0, self.tm[s_loc][msg.send_exit_idx] - handshake_m)
        to_recv = max(0.0, self.tm[r_loc][msg.recv_idx] - handshake_m)
        enter_idx = msg.recv_enter_idx
        self.stats.p2p_cases["synchronous"] += 1

        def handshake_a() -> float:
            return max(self.a[s_loc][s_idx], self.a[r_loc][post])

        def exit_time(local: float) -> float:
            return handshake_a() + to_exit

        def recv_time(local: float) -> float:
            t = max(handshake_a() + to_recv, self.a[s_loc][s_idx] + self.tick)
            if enter_idx >= 0:
                t = max(t, self.a[r_loc][enter_idx] + self.tick)
            return t

        self._add_dep(s_loc, msg.send_exit_idx, [(r_loc, post)], exit_time)
        self._add_dep(r_loc, msg.recv_idx, [(s_loc, s_idx)], recv_time)

    def _collective_deps(self, inst: Instance) -> None:
        n = len(inst.locs)
        begins = list(zip(inst.locs, inst.begin_idx, strict=True))
        if inst.nonblocking:
            self._nonblocking_collective_deps(inst)
        elif inst.cls == N_TO_N:
            for i in range(n):
                self.deps[inst.locs[i]][inst.end_idx[i]] = _Dep(
                    begins, self._nn_resolver(inst, i, list(range(n))))
        elif inst.cls in (SCAN, EXSCAN):
            for i in range(n):
                upto = range(i + 1) if inst.cls == SCAN else range(i)
                if not upto:
                    continue  # rank 0 of an exscan depends on nobody
                members = list(upto)
                if i not in members:
                    members.append(i)
                self.deps[inst.locs[i]][inst.end_idx[i]] = _Dep(
                    [begins[j] for j in members], self._nn_resolver(inst, i, members))
        elif inst.cls == ONE_TO_N:
            r = inst.locs.index(inst.root)
            for i in range(n):
                if i == r or inst.locs[i] == inst.root:
                    continue
                self.deps[inst.locs[i]][inst.end_idx[i]] = _Dep(
                    [begins[r]], self._one_to_n_resolver(inst, r, i))
        elif inst.cls == N_TO_ONE:
            r = inst.locs.index(inst.root)
            others = [i for i in range(n) if i != r and inst.locs[i] != inst.root]
            if others:
                self.deps[inst.root][inst.end_idx[r]] = _Dep(
                    [begins[i] for i in others], self._n_to_one_resolver(inst, r, others))
        self.stats.collective_instances += 1

    def _nonblocking_collective_deps(self, inst: Instance) -> None:
        """Nonblocking collectives: the dependency applies at the completion record.

        n-to-n (as R3): the operation finishes D after the latest request, and a
        completion happens when its call is ready (the record before it) and the
        operation has finished: ``complete_a = max(ready_a, latest request_a + D)``.
        D is observed when some member waited in its completion call (its completion
        is later than the record before it plus that record's overhead):
        ``D = complete_m - max_j(request_m[j] + O)`` for that member. When nobody
        waited D is only bounded: lower 0, upper the smallest ``complete_m - sync_m``.
        Other classes: the completion follows its own timeline (R1) but never
        precedes the requests it waits for.
        """
        locs, b, e = inst.locs, inst.begin_idx, inst.end_idx
        n = len(locs)
        if inst.cls == N_TO_N:
            sync_m = max(self.tm[locs[j]][b[j]] + self._kind_ovh(locs[j], b[j])
                         for j in range(n))
            after_sync = [self.tm[locs[i]][e[i]] - sync_m for i in range(n)]
            waited = [after_sync[i] for i in range(n)
                      if self.tm[locs[i]][e[i]] - self.tm[locs[i]][e[i] - 1]
                      - self._kind_ovh(locs[i], e[i] - 1) > self.tick]
            if waited:
                d_obs = max(0.0, min(waited))
                self.stats.p2p_cases["nbc_observed"] += 1
            elif self.opts.bound == "lower":
                d_obs = 0.0
                self.stats.p2p_cases["nbc_bounded"] += 1
            else:
                d_obs = max(0.0, min(after_sync))
                self.stats.p2p_cases["nbc_bounded"] += 1
            begins = list(zip(locs, b, strict=True))
            for i in range(n):
                own = (locs[i], b[i])

                def resolve(local: float, own=own) -> float:
                    latest = max(self.a[lc][x] for lc, x in begins)
                    others = max((self.a[lc][x] for lc, x in begins if (lc, x) != own),
                                 default=-np.inf)
                    return max(latest + d_obs, others + self.tick)
                self.deps[locs[i]][e[i]] = _Dep(begins, resolve)
            return
        for i, (loc, end) in enumerate(zip(locs, e, strict=True)):
            needed = [(locs[j], b[j]) for j in needed_members(inst, i) if j != i]
            if not needed:
                continue

            def resolve_local(local: float, needed=needed) -> float:
                return max(local, max(self.a[lc][x] for lc, x in needed) + self.tick)
            self.deps[loc][end] = _Dep(needed, resolve_local)

    def _nn_resolver(self, inst: Instance, i: int, members: list[int]) -> Callable[[], float]:
        """R3: exit after the latest approximated enter plus the measured sync time."""
        locs, b, e = inst.locs, inst.begin_idx, inst.end_idx
        bm = [self.tm[locs[j]][b[j]] for j in members]
        jj = members[int(np.argmax(bm))]
        enter_m_j = self.tm[locs[jj]][b[jj]]
        o_j = self._kind_ovh(locs[jj], b[jj])
        if self.opts.collective_exit == "uniform" and inst.cls == N_TO_N:
            ll = members[int(np.argmin([self.tm[locs[j]][e[j]] for j in members]))]
        else:  # per-process; scans end at different times by definition
            ll = i
        exit_m_l = self.tm[locs[ll]][e[ll]]
        # overheads of records between the latest enter and the exit on l's location
        ev_l = self.trace.events[locs[ll]]
        inside = np.arange(b[ll] + 1, e[ll])
        if inside.size:
            inside = inside[self.tm[locs[ll]][inside] >= enter_m_j]
        o_inside = float(np.sum(self.ovh[ev_l.kind[inside]])) if inside.size else 0.0
        if ll == jj:
            o_inside += 0.0  # j's own begin overhead is o_j already
        sync = max(0.0, exit_m_l - enter_m_j - o_j - o_inside)
        own_loc, own_begin = locs[i], b[i]

        def resolve(local: float) -> float:
            k = max(self.a[locs[j]][b[j]] for j in members)
            return max(k + sync, self.a[own_loc][own_begin] + self.tick)
        return resolve

    def _one_to_n_resolver(self, inst: Instance, r: int, i: int) -> Callable[[float], float]:
        """R4: a message from the root's enter to member i's exit."""
        locs = inst.locs
        exit_root_m = self.tm[locs[r]][inst.end_idx[r]]
        recv_m = self.tm[locs[i]][inst.end_idx[i]]

        def resolve(local: float) -> float:
            return self._recv_time(locs[r], inst.begin_idx[r], exit_root_m, locs[i],
                                   inst.begin_idx[i], inst.size_recv[i], recv_m,
                                   inst.end_idx[i])
        return resolve

    def _n_to_one_resolver(self, inst: Instance, r: int,
                           others: list[int]) -> Callable[[float], float]:
        """R5: the root's exit waits for a message from every member's enter."""
        locs = inst.locs

        def resolve(local: float) -> float:
            recv_m = self.tm[locs[r]][inst.end_idx[r]]
            return max(
                self._recv_time(locs[i], inst.begin_idx[i], self.tm[locs[i]][inst.end_idx[i]],
                                locs[r], inst.begin_idx[r], inst.size_sent[i], recv_m,
                                inst.end_idx[r])
                for i in others)
        return resolve

    # -- scheduling -------------------------------------------------------------
    def _advance(self, loc: int) -> tuple[bool, int | None]:
        """Advance ``loc`` by at most one window. Returns (finished, parked_on_loc)."""
        a, gap = self.a[loc], self.gap[loc]
        n = len(a)
        p = self.ptr[loc]
        stop = min(n, p + self.opts.window)
        didx, dpos = self.dep_idx[loc], self.dpos[loc]
        while p < stop:
            d = int(didx[dpos]) if dpos < len(didx) else n
            end = min(d, stop)
            if p < end:
                if p == 0:
                    a[0] = self.tm[loc][0]
                    p = 1
                if p < end:
                    a[p:end] = a[p - 1] + np.cumsum(gap[p:end])
                p = end
                self.ptr[loc] = p
            if p == n or p == stop:
                break
            dep = self.deps[loc][d]
            for (s_loc, s_idx) in dep.needs:
                if self.ptr[s_loc] <= s_idx:
                    heapq.heappush(self.waiters[s_loc], (s_idx, loc))
                    self.dpos[loc] = dpos
                    return False, s_loc
            local = a[p - 1] + gap[p] if p > 0 else self.tm[loc][0]
            value = dep.resolve(local)
            if p > 0:
                value = max(value, a[p - 1])
            a[p] = value
            p += 1
            dpos += 1
            self.ptr[loc] = p
        self.dpos[loc] = dpos
        return p == n, None

    def run(self) -> dict[int, np.ndarray]:
        queue = SortedList()
        for loc in self.locs:
            if len(self.a[loc]):
                queue.add((float(self.tm[loc][0]), loc))
        parked: dict[int, int] = {}
        done = 0
        reported = 0
        while queue:
            _, loc = queue.pop(0)
            before = self.ptr[loc]
            finished, on = self._advance(loc)
            done += self.ptr[loc] - before
            if on is not None:
                parked[loc] = on
            elif not finished:
                queue.add((float(self.a[loc][self.ptr[loc] - 1]), loc))
            # wake everybody waiting for records this location has now passed
            w = self.waiters[loc]
            while w and w[0][0] < self.ptr[loc]:
                _, waiter = heapq.heappop(w)
                if parked.pop(waiter, None) is not None:
                    p = self.ptr[waiter]
                    queue.add((float(self.a[waiter][p - 1]) if p else 0.0, waiter))
            if self.progress and done - reported >= 100_000:
                self.progress(done)
                reported = done
        if parked:
            loc, on = next(iter(parked.items()))
            i = self.ptr[loc]
            kind = KIND_NAMES[self.trace.events[loc].kind[i]]
            raise TraceError(
                f"{kind} waits for location {on}, record "
                f"{min(s for s, w in self.waiters[on] if w == loc)}, which can never be "
                f"reached: the trace's dependencies form a cycle (inconsistent trace)",
                source=self.trace.source, location=loc, index=i)
        if self.progress:
            self.progress(done)
        return self.a


def compensate(trace: Trace, platform: Platform, options: EngineOptions | None = None,
               matching: Matching | None = None,
               progress: Callable[[int], None] | None = None) -> Result:
    """Approximate the uninstrumented run of ``trace`` (rules R1–R6 of DESIGN.md).

    Returns the approximated trace (same records, new times; BufferFlush stop times
    equal their start), statistics, and the matching it used.
    """
    options = options or EngineOptions()
    matching = matching or match(trace)
    if options.bound == "none":
        eng = None
        stats = Stats()
        out = trace
    else:
        eng = _Engine(trace, platform, options, matching, progress)
        approx = eng.run()
        stats = eng.stats
        times, sizes = {}, {}
        for loc, ev in trace.events.items():
            t = np.rint(approx[loc]).astype(np.int64) + eng.t0
            # rounding keeps order: make it explicit against float noise
            if len(t) > 1:
                np.maximum.accumulate(t, out=t)
            times[loc] = t
            flush = ev.kind == BUFFER_FLUSH
            if np.any(flush):
                size = ev.size.copy()
                size[flush] = t[flush]
                sizes[loc] = size
        out = trace.with_times(times, sizes)
    stats.records = trace.record_count
    stats.locations = len(trace.events)
    stats.messages = len(matching.messages)
    stats.unmatched_sends = matching.unmatched_sends
    stats.collective_instances = len(matching.instances)
    stats.unknown_collective_ops = matching.unknown_ops
    return Result(out, stats, matching)
