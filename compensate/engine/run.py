"""The compensation engine: measured timestamps in, approximated timestamps out.

Implements docs/design.md §3 (rules R1–R6) in the shape of §5:

* Per location, the records between two *dependent* records are a local run: R1
  makes their approximated times the time of the run's first record plus a
  running sum of the measured gaps minus the overhead of each gap's opening
  record. Those sums do not depend on any approximated time, so they are
  computed for the whole trace up front with numpy (:mod:`compensate.engine.runsums`)
  and the engine only computes one value per run: the dependent record that
  opens it (its *anchor*, :mod:`compensate.engine.graph`).
* A dependent record (a matched MpiRecv, a collective's MpiCollectiveEnd that
  waits for other members) needs the times of certain remote records. If one of
  them is not known yet, its location parks on exactly that record's anchor and
  is woken when the anchor is computed: no retry lists, no rescans, O(1) per
  wake-up. Which location runs next does not change any result (every value is a
  function of the values it needs), so runnable locations are kept on a plain
  stack rather than in a priority queue.
* The common rule, an eager point-to-point receive (R2, R2f under the fitted
  bound), is evaluated inline from per-message lists precomputed with numpy (by
  :func:`compensate.engine.receive.receive_time`, as the rule objects evaluate R2);
  everything else through the small rule objects of :mod:`compensate.engine.rules`.
* The loop runs in C where a C compiler is at hand (:mod:`compensate.engine.native`,
  ``loop.c``): the stack, parking, waking and the inline receives, with the same
  double operations in the same order (the same values bit for bit); each generic
  anchor comes back here once its needs are known (:meth:`_Engine._scheduled`), and
  in the distributed run each value another rank asked for and each time nothing
  is runnable. Otherwise the Python loop (:meth:`_Engine._python_loop`).

* Distributed (``approximate(..., exchange=...)``, docs/parallel.md): the
  locations other ranks own are ghosts, never evaluated: their only anchors are
  their first records and the records this rank's rules read
  (:meth:`compensate.engine.graph.Graph.set_rules`), unknown until their owners
  send them; after each run of a location the exchange sends the values other
  ranks asked for that it computed (point to point), and when nothing is runnable
  it brings theirs, which wake their waiters exactly like a local value does
  (:class:`compensate.engine.exchange.AnchorExchange`: what the engine needs of
  the exchange, which :mod:`compensate.parallel` implements).

All arithmetic is in float ticks relative to the earliest measured timestamp;
results are rounded to integer ticks at the end, which keeps every order the
float values have (each receive is placed at least one tick after its send).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from compensate.engine.exchange import AnchorExchange
from compensate.engine.graph import FAST_P2P, START, Graph
from compensate.engine.kinds import rules_of
from compensate.engine.metrics import map_metric_samples
from compensate.engine.native import BUDGET, DONE, GENERIC, FastLoop, fast_loop
from compensate.engine.pending import positions
from compensate.engine.receive import receive_time
from compensate.engine.rules import Context, Need, Rule
from compensate.engine.span import on_grid
from compensate.gcpause import gc_paused
from compensate.matching import Matching, match
from compensate.model import BUFFER_FLUSH, KIND_NAMES, Events, Trace, TraceError
from compensate.platform import Platform

BOUNDS = ("lower", "upper", "fitted", "none")
COLLECTIVE_EXITS = ("uniform", "per-process")


@dataclass
class EngineOptions:
    bound: str = "lower"  # lower | upper | fitted | none (identity: times unchanged)
    collective_exit: str = "uniform"  # uniform (eq. 12) | per-process (eq. 13)
    # bound="fitted": network time in seconds of an s-byte message (without the two
    # buffer copies), e.g. a latency + bytes/bandwidth fit to the observed transfers
    network_time: Callable[[int], float] | None = None
    # bound="lower" standing in for "fitted" (too few transfers to fit the network):
    # thread and device links (R8, R9) still take the least latency the trace
    # observed for their kind, which needs no network fit
    fit_links: bool = False
    # the fitted latency of thread, device and RMA synchronisation links (R8-R10)
    # under "fitted" or fit_links: ``{family: {kind: ticks}}``, the least the whole
    # trace observed (compensate.engine.fit.observe_links, FitOutcome.links). A
    # segment of a streamed trace or a rank's view sees only part of the trace: its
    # caller passes this. None: taken from the trace being compensated.
    link_latency: dict[str, dict[str, float]] | None = None

    def __post_init__(self) -> None:
        if self.bound not in BOUNDS:
            raise ValueError(f"bound must be one of {BOUNDS}, got {self.bound!r}")
        if self.bound == "fitted" and self.network_time is None:
            raise ValueError("bound 'fitted' needs network_time (a fitted transfer model)")
        if self.collective_exit not in COLLECTIVE_EXITS:
            raise ValueError(f"collective_exit must be one of {COLLECTIVE_EXITS}")


#: :attr:`Stats.overhead_removed` counts the overhead removed in this fraction of a tick
OVERHEAD_UNITS = 1 << 16


@dataclass
class Stats:
    """What happened, for the summary."""

    records: int = 0
    locations: int = 0
    overcompensated: int = 0
    #: overcompensated records by record kind name (the kind of the clamped record)
    overcompensated_by_kind: dict = field(default_factory=dict)
    #: the largest overhead that did not fit a gap, in seconds (how far the record
    #: would have moved before its predecessor)
    overcompensated_max_s: float = field(default=0.0, metadata={"combine": max})
    messages: int = 0
    unmatched_sends: int = 0
    collective_instances: int = 0
    unknown_collective_ops: int = 0
    p2p_cases: dict = field(default_factory=lambda: {
        "m1_a1": 0, "m1_a2": 0, "m2_lower": 0, "m2_upper": 0, "m2_fitted": 0,
        "m2_fitted_clamped": 0, "m1_receiver_late": 0, "m2_message_late": 0, "synchronous": 0,
        "nbc_observed": 0, "nbc_bounded": 0})
    buffer_flushes: int = 0
    #: (derived from the ticks after a sum of parts: :meth:`derive`)
    flush_seconds_removed: float = field(default=0.0, metadata={"combine": None})
    #: the flushes' ticks, summed exactly, and the timer resolution: the seconds
    #: are ``flush_ticks / flush_resolution`` however the sum was split (segments,
    #: ranks), not a float sum whose last bit depends on the order
    flush_ticks: int = 0
    flush_resolution: int = field(default=0, metadata={"combine": max})
    #: per entry of the platform's by-region costs (region name): the Enter/Leave
    #: records it was charged to (counted as :mod:`compensate.engine.graph` builds)
    region_records: dict = field(default_factory=dict)
    #: the tracer overhead R1 took out of the records (each one's overhead, a
    #: flush's duration, a cold call's charge), in units of 1/OVERHEAD_UNITS tick,
    #: each record's rounded: a sum exact in any order (segments, ranks). With the
    #: upper bound and per-process exits, the most a compensated span can be
    #: shorter than the measured one (:func:`compensate.cli.compensate.model_note`)
    overhead_removed: int = 0

    def add_flush_ticks(self, ticks: int, resolution: int) -> None:
        """Count ``ticks`` more of BufferFlush time removed."""
        self.flush_ticks += int(ticks)
        self.flush_resolution = int(resolution)
        self.flush_seconds_removed = self.flush_ticks / self.flush_resolution

    def add_overhead(self, ticks: np.ndarray) -> None:
        """Count the overhead ``ticks`` (per record, float) as removed."""
        self.overhead_removed += int(np.rint(ticks * OVERHEAD_UNITS).astype(np.int64).sum())

    def overhead_seconds(self, resolution: int) -> float:
        """:attr:`overhead_removed` in seconds (``resolution``: ticks per second)."""
        return self.overhead_removed / OVERHEAD_UNITS / resolution

    def derive(self) -> None:
        """The seconds of the flushes' ticks (after a sum of parts)."""
        if self.flush_resolution:
            self.flush_seconds_removed = self.flush_ticks / self.flush_resolution

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Result:
    trace: Trace
    stats: Stats
    matching: Matching


#: Dependent records evaluated between two progress reports.
PROGRESS_EVERY = 1 << 15


class _Engine:
    """Evaluates the anchors of a :class:`~compensate.engine.graph.Graph` in dependency order."""

    def __init__(self, trace: Trace, platform: Platform, opts: EngineOptions,
                 matching: Matching, progress: Callable[[int], None] | None,
                 t0: int | None = None,
                 pins: dict[int, tuple[np.ndarray, float]] | None = None,
                 exchange: AnchorExchange | None = None) -> None:
        self.trace = trace
        self.exchange = exchange
        self.opts = opts
        self.progress = progress
        self.stats = Stats()
        res = float(trace.definitions.timer_resolution)
        network = None
        if opts.network_time is not None:
            def network(size: int, _f=opts.network_time) -> float:
                return on_grid(_f(size) * res)
        ghosts = exchange.ghosts(trace) if exchange is not None else ()
        self.graph = Graph(trace, platform, opts.bound, opts.collective_exit,
                           opts.network_time, matching, self.stats, t0, pins, ghosts,
                           opts.link_latency)
        self._set_rules(matching)
        self.ctx = Context(opts.bound, network, self.stats.p2p_cases,
                           "fitted" if opts.fit_links else opts.bound)
        self.t0 = self.graph.t0

    def _set_rules(self, matching: Matching) -> None:
        """Give the graph the rules of its dependent records: in the distributed run
        only this rank's, whose reads of ghost records become anchors."""
        g = self.graph
        dep_rules = rules_of(g, matching)
        if not g.has_ghosts:
            g.set_rules(dep_rules)
            return
        dep_rules = g.own_rules(dep_rules)
        reads = [g.g(li, i) for li, i in positions(
            [p for pending in dep_rules.values() for p in pending], set()) if g.ghost[li]]
        g.set_rules(dep_rules, np.asarray(reads, dtype=np.int64))

    def run(self) -> dict[int, np.ndarray]:
        """Compute every anchor, then every record's time (float ticks from t0)."""
        g, xch = self.graph, self.exchange
        # anchor times; NaN = not computed yet (a flat array of doubles: no Python
        # object per value, and cache-friendly at 10^6+ anchors)
        A = array("d", [math.nan]) * len(g.agpos)
        cur = self._start(A)
        waiters: dict[int, list[int]] = {}
        if xch is not None:  # distributed (compensate.parallel): other ranks' locations
            # are ghosts (only the records this rank reads are anchors, values NaN
            # until they arrive); anchors other ranks need have a waiter list from
            # the start, so that computing them takes the wake-up path
            xch.start(g, A, cur, waiters)
        # the C loop (compensate.engine.native); None: everything in Python
        fast = fast_loop(g, A, self.opts.bound == "fitted") if len(A) else None
        a_end = g.a_end.tolist()
        runnable = [li for li in range(len(cur) - 1, -1, -1) if cur[li] < a_end[li]]
        if fast is not None:  # scheduled in C
            self._scheduled(fast, A, cur, a_end, runnable, waiters)
        else:
            self._python_loop(A, cur, waiters, fast, runnable)
        self._count_cases(fast)
        parked = self._waiting(A, cur)
        if xch is not None:  # each rank counted its own records (the handlers built and
            # counted only their rules): reduce over the ranks
            # (and, after a cycle, the rank whose waiting location comes first names
            # it, as the one-process run does; the others stop without an error)
            xch.reduce(g, self.stats, min(parked) if parked else None)
        if parked:
            self._cycle(parked, cur)
        if self.progress:
            self.progress(g.total)
        return self._times(A)

    def _start(self, A: array) -> list[int]:
        """Set the anchors known before any rule runs: the pinned leading records of
        a stream segment's locations, else each location's first record (its
        measured time). Returns the next anchor to compute per location position."""
        g = self.graph
        code, tm_at, a_end = g.code, g.tm_at, g.a_end.tolist()
        cur = g.a_first.tolist()
        for li in range(len(cur)):
            if g.ghost[li]:  # another rank's location (the exchange brings its values)
                continue
            k = cur[li]
            pinned = g.pins[li][0]
            if pinned:  # leading records whose times are given (stream segments)
                A[k:k + len(pinned)] = array("d", pinned)
                cur[li] = k + len(pinned)
            elif k < a_end[li] and code[k] == START:  # keeps its measured time
                A[k] = tm_at[k]
                cur[li] = k + 1
        return cur

    def _python_loop(self, A: array, cur: list[int], waiters: dict[int, list[int]],
                     fast: FastLoop | None, stack: list[int]) -> None:
        """The anchor loop in Python (where the C loop cannot be built): locations
        ``stack`` are runnable (the last one first); each runs from ``cur[li]`` until
        an anchor whose inputs are not all known, where it parks on the first unknown
        one (``waiters``) until that is computed. Inline receives go through
        :func:`~compensate.engine.receive.receive_time`, or in runs to the C loop
        ``fast`` where there is one; it stops before every anchor in ``watched``
        (one with waiters, local or on other ranks), which this loop computes to
        wake them. Updates ``cur``."""
        g, xch, progress, counts = self.graph, self.exchange, self.progress, self.ctx.counts
        code, has_prev, prev_s, a_end = g.code, g.has_prev, g.prev_s, g.a_end.tolist()
        s_anchor, s_off, e_anchor, e_off = g.f_s_anchor, g.f_s_off, g.f_e_anchor, g.f_e_off
        enter_c, extra, f_cs, bound_c = g.f_enter_c, g.f_extra, g.f_cs, g.f_bound_c
        f_observed, f_overlapped, f_fit = g.f_observed, g.f_overlapped, g.f_fit
        fitted = self.opts.bound == "fitted"
        generic, rules_value = g.generic, _rules_evaluator(g, self.ctx)
        run_fast, fast_ptr, watched = _watched(fast, waiters, len(A))
        evaluated, next_report = 0, PROGRESS_EVERY
        while True:
            while stack:
                li = stack.pop()
                k, end = cur[li], a_end[li]
                while True:  # (not ``while k < end``: CPython 3.11 specializes the
                    if k >= end:  # bytecode of a function that runs once only at
                        break  # backward jumps, which that form does not make)
                    if run_fast is not None and code[k] == FAST_P2P and not watched[k]:
                        k = run_fast(fast_ptr, k, end)  # up to the next anchor Python
                        if k == end:  # must handle (see compensate.engine.native)
                            break
                    if code[k] == FAST_P2P:  # R2 (R2f), eager message, inline
                        sk = s_anchor[k]
                        send_a = A[sk]
                        if send_a != send_a:  # NaN: not computed yet
                            waiters.setdefault(sk, []).append(li)
                            watched[sk] = 1
                            break
                        ek = e_anchor[k]
                        value = receive_time(
                            send_a + s_off[k], A[ek] + e_off[k] if ek >= 0 else enter_c[k],
                            A[k - 1] + prev_s[k] if has_prev[k] else None, extra[k],
                            f_cs[k], f_observed[k], f_overlapped[k], bound_c[k],
                            f_fit[k] if fitted else None, counts)
                    else:
                        need = first_unknown(generic[k][0], A)
                        if need is not None:
                            waiters.setdefault(need[0], []).append(li)
                            watched[need[0]] = 1
                            break
                        value = rules_value(A, k)
                    A[k] = value
                    if watched[k]:  # local waiters, or other ranks want it
                        stack.extend(waiters.pop(k, ()))
                        if xch is not None:
                            xch.computed(k)
                    k += 1
                evaluated += k - cur[li]
                cur[li] = k
                if xch is not None:  # values other ranks wait for: send them now, not
                    xch.flush(A)  # when this rank runs out of work
                if progress is not None and evaluated >= next_report:
                    next_report = evaluated + PROGRESS_EVERY
                    progress(self._records_done(cur))
            if not self._round(A, cur, waiters, stack):
                return

    def _round(self, A: array, cur: list[int], waiters: dict[int, list[int]],
               stack: list[int]) -> bool:
        """Nothing is runnable: in the distributed run send the values other ranks
        wait for and take theirs, waking their waiters. False once there is nothing
        more to do (always in the one-process run)."""
        xch = self.exchange
        if xch is None or xch.finished:
            return False
        for k in xch.round(A, cur):
            stack.extend(waiters.pop(k, ()))
        return True

    def _scheduled(self, fast: FastLoop, A: array, cur: list[int], a_end: list[int],
                   runnable: list[int], wanted: dict[int, list[int]]) -> None:
        """The anchor loop with its scheduling in C (``cmp_schedule``,
        :mod:`compensate.engine.native`): the C loop evaluates the inline receives,
        parks and wakes locations, and hands every generic anchor whose needs are
        all known to this loop, which evaluates its rules as :meth:`_python_loop`
        does. In the distributed run (``wanted``: the anchors other ranks asked
        for) the exchange sends what a location's run computed of them, and when
        nothing is runnable takes the others' values, whose waiters the C loop
        wakes. Updates ``cur``."""
        g, xch = self.graph, self.exchange
        rules_value = _rules_evaluator(g, self.ctx)
        watched = fast.watched
        for k in wanted:
            watched[k] = 1
        sch = fast.scheduler(cur, a_end, runnable, g.generic, len(wanted),
                             xch.outbox if xch is not None else None)
        state, step, computed, cur_c = sch.state, sch.step, sch.computed, sch.cur
        budget = PROGRESS_EVERY if self.progress else 1 << 62
        while True:
            r = step(budget)
            if state.nout:  # (OUT, or before a generic anchor) values other ranks want
                # (and take what arrived meanwhile: a value another rank sent wakes
                # its location now, not when this rank runs out of work)
                sch.wake(xch.flush_and_take(A, sch.taken()))
            if r == DONE:
                if xch is None or xch.finished:
                    break
                sch.wake(xch.round(A, cur_c))
                continue
            if r == BUDGET:
                self.progress(self._records_done(cur_c))
            if r != GENERIC:
                continue
            li = state.out_li
            k = cur_c[li]
            A[k] = rules_value(A, k)
            computed(li, k)
            if watched[k]:  # another rank asked for it: sent at once
                xch.computed(k)
                xch.flush(A)
        cur[:] = cur_c.tolist()

    def _waiting(self, A: array, cur: list[int]) -> dict[int, tuple[int, int]]:
        """The locations left waiting once nothing is runnable: location position ->
        (location id, record) of the first value it needs that is unknown (-1 and a
        message row for a receive waiting for its send). Empty unless the
        dependencies form a cycle."""
        g = self.graph
        parked = {}
        for li, (k, end) in enumerate(zip(cur, g.a_end.tolist(), strict=True)):
            if k < end:
                if g.code[k] == FAST_P2P:
                    parked[li] = (-1, g.f_row[k])
                else:
                    need = first_unknown(g.generic[k][0], A)
                    parked[li] = (need[1], need[2])
        return parked

    def _count_cases(self, fast: FastLoop | None) -> None:
        """Add R2's case counts (the Python evaluations' and the C loop's) and the
        inline receives' late parties to the statistics."""
        a1, a2, m2, clamped, over = self.ctx.counts
        if fast is not None:
            f1, f2, fm, fc, fo = fast.counts()
            a1, a2, m2, clamped, over = a1 + f1, a2 + f2, m2 + fm, clamped + fc, over + fo
        cases, g = self.stats.p2p_cases, self.graph
        cases["m1_a1"] += a1
        cases["m1_a2"] += a2
        cases["m2_" + self.opts.bound] += m2
        cases["m2_fitted_clamped"] += clamped
        if self.opts.bound == "fitted":  # (only a fitted run's summary has the key)
            cases["m2_fitted_overridden"] = cases.get("m2_fitted_overridden", 0) + over
        cases["m1_receiver_late"] += g.fast_receiver_late  # (of this rank's receives only
        cases["m2_message_late"] += g.fast_message_late  # in the distributed run: summed)

    def _cycle(self, parked: dict[int, tuple[int, int]], cur: list[int]) -> None:
        """Raise the error of locations left waiting: the dependencies form a cycle.
        It names the first of them (in the distributed run, if this rank holds the
        first of all ranks; else RemoteFailure naming the rank that does)."""
        g = self.graph
        li = min(parked)
        if self.exchange is not None:
            self.exchange.check_first_waiting(li)
        on_loc, on_idx = parked[li]
        if on_loc == -1:
            on_loc, on_idx = g.message_send(on_idx)
        i = int(g.anchor_rec[cur[li]])
        kind = KIND_NAMES[g.evs[li].kind[i]]
        raise TraceError(
            f"{kind} waits for location {on_loc}, record {on_idx}, which can never be "
            f"reached: the trace's dependencies form a cycle (inconsistent trace)",
            source=self.trace.source, location=g.loc_ids[li], index=i)

    def _records_done(self, cur: list[int]) -> int:
        g = self.graph
        return sum(int(g.anchor_rec[k]) if k < e else int(g.lengths[li])
                   for li, (k, e) in enumerate(zip(cur, g.a_end.tolist(), strict=True)))

    def _times(self, A: array) -> dict[int, np.ndarray]:
        """Every record's approximated time: its anchor's time plus its R1 offset."""
        g = self.graph
        seg = np.diff(np.r_[g.agpos, g.total])
        flat = np.repeat(np.frombuffer(A, dtype=np.float64), seg) + g.S if g.total else g.S
        return {loc: flat[int(g.off[li]):int(g.off[li] + g.lengths[li])]
                for li, loc in enumerate(g.loc_ids)}


def first_unknown(rules: list[Rule], A: array) -> Need | None:
    """The first need of ``rules`` (in their order) whose anchor is not computed
    yet, None if all are known."""
    for rule in rules:
        for need in rule.needs:
            x = A[need[0]]
            if x != x:  # NaN
                return need
    return None


def _rules_evaluator(g: Graph, ctx: Context) -> Callable[[array, int], float]:
    """``value(A, k)``: the time of generic anchor ``k`` whose needs are known, the
    latest of its rules' values and never before its previous record (R1)."""
    generic, has_prev, prev_s, tm_at = g.generic, g.has_prev, g.prev_s, g.tm_at

    def value(A: array, k: int) -> float:
        rules, gap = generic[k]
        if has_prev[k]:
            prev_a = A[k - 1] + prev_s[k]
            local = prev_a + gap
        else:
            local = prev_a = tm_at[k]
        v = rules[0].value(A, local, prev_a, ctx)
        for rule in rules[1:]:
            v = max(v, rule.value(A, local, prev_a, ctx))
        if has_prev[k] and prev_a > v:
            v = prev_a
        return v

    return value


def _watched(fast: FastLoop | None, waiters: dict[int, list[int]],
             na: int) -> tuple[Callable[[int, int, int], int] | None, int, bytearray | array]:
    """The C loop's entry point and address (None, 0 without it), and the anchors
    the Python loop must compute itself: marked 1 for every anchor of ``waiters``
    (other ranks asked for them) and, as the loop goes, every anchor a location
    waits for."""
    watched = fast.watched if fast is not None else bytearray(na)
    for k in waiters:
        watched[k] = 1
    if fast is None:
        return None, 0, watched
    return fast.kernel, fast.address, watched


def approximate(trace: Trace, platform: Platform, options: EngineOptions, matching: Matching,
                progress: Callable[[int], None] | None = None, *, t0: int | None = None,
                pins: dict[int, tuple[np.ndarray, float]] | None = None,
                references: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
                exchange: AnchorExchange | None = None,
                ) -> tuple[dict[int, np.ndarray], int, Stats]:
    """The engine itself: every record's approximated time in float ticks from ``t0``
    (default: the earliest measured timestamp), ``t0``, and the statistics.

    ``pins`` (used by :mod:`compensate.pipeline.cuts` for one segment of a long trace):
    ``{location: (times, carry)}`` gives the approximated times (float ticks from
    ``t0``) of the location's first ``len(times)`` records, which are context from
    earlier segments; the record after them follows R1 from the last of them, whose
    timestamp group left the overhead ``carry`` (ticks) to charge.

    METRIC locations' samples then take their process's time function
    (:mod:`compensate.engine.metrics`); ``references`` gives the (measured,
    approximated) points of a reference thread without records in ``trace``.

    ``exchange`` (:class:`compensate.engine.exchange.AnchorExchange`, the distributed
    run of docs/parallel.md): only the locations this rank owns are evaluated; the
    anchors of the others arrive through it, and the anchors others need leave
    through it. Then only the owned locations' times are meaningful, and METRIC
    samples are left unmapped: their reference thread may be another rank's, so the
    caller maps them once every time is at hand."""
    with gc_paused():
        eng = _Engine(trace, platform, options, matching, progress, t0, pins, exchange)
        approx = eng.run()
    if exchange is None:
        map_metric_samples(trace, approx, eng.t0, pins, references)
    return approx, eng.t0, eng.stats


def to_ticks(approx: np.ndarray | float) -> np.ndarray:
    """Approximated times rounded to whole ticks, halves up. The rules keep a
    dependent record at least one tick (``TICK``) after what it waits for, and
    rounding halves up keeps that tick: ``x + 1`` rounds to at least one more than
    ``x``. Rounding halves to even (``np.rint``) does not: 1.5 and 2.5 both give 2."""
    return np.floor(np.asarray(approx, dtype=np.float64) + 0.5).astype(np.int64)


def rounded_times(ev: Events, approx: np.ndarray, t0: int,
                  floor: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Integer timestamps of one location from its float approximations, and its new
    size column if it has BufferFlush records (their stop time = their start).
    Rounding keeps the order; ``np.maximum.accumulate`` makes that explicit against
    float noise (from ``floor``, the last time written before, if given)."""
    t = to_ticks(approx) + t0
    if floor is not None and len(t):
        t[0] = max(t[0], floor)
    if len(t) > 1:
        np.maximum.accumulate(t, out=t)
    size = None
    flush = ev.kind == BUFFER_FLUSH
    if np.any(flush):
        size = ev.size.copy()
        size[flush] = t[flush]
    return t, size


def compensate(trace: Trace, platform: Platform, options: EngineOptions | None = None,
               matching: Matching | None = None,
               progress: Callable[[int], None] | None = None) -> Result:
    """Approximate the uninstrumented run of ``trace`` (rules R1–R6 of docs/design.md).

    Returns the approximated trace (same records, new times; BufferFlush stop times
    equal their start), statistics, and the matching it used.
    """
    options = options or EngineOptions()
    matching = matching or match(trace)
    if options.bound == "none":
        stats = Stats()
        out = trace
    else:
        approx, t0, stats = approximate(trace, platform, options, matching, progress)
        times, sizes = {}, {}
        for loc, ev in trace.events.items():
            times[loc], size = rounded_times(ev, approx[loc], t0)
            if size is not None:
                sizes[loc] = size
        out = trace.with_times(times, sizes)
    count_trace(stats, trace, matching)
    return Result(out, stats, matching)


def count_trace(stats: Stats, trace: Trace, matching: Matching) -> None:
    """The summary's counts of the whole trace and its matching (also set by the
    distributed run, whose rank 0 holds the whole matching)."""
    stats.records = trace.record_count
    stats.locations = len(trace.events)
    stats.messages = matching.table.message_count
    stats.unmatched_sends = matching.unmatched_sends
    stats.collective_instances = len(matching.instances)
    stats.unknown_collective_ops = matching.unknown_ops
