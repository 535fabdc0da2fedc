"""The dependency graph the engine evaluates: segments, anchors and rules.

Every location's records are cut into *segments* at its dependent records (and at
record 0). The first record of a segment is its *anchor*; the approximated time of
any record is its anchor's time plus a static R1 running sum
(:func:`compensate.engine.runsums.segmented_cumsum`). So the engine never walks records:
it only computes one value per anchor, in dependency order, and the per-record
times follow in one vectorised pass at the end.

:class:`Graph` lays all locations end to end in flat arrays (record ``i`` of
location position ``li`` is global record ``off[li] + i``; anchors are numbered in
global record order, so a location's anchors are consecutive) and holds, per
anchor, how to compute it:

* code 0: record 0 of its location, not dependent: its measured time;
* code 1: an eager point-to-point receive completing one message (any bound), the
  common case: evaluated inline by the engine from the flat typed arrays
  ``f_*`` (indexed by anchor);
* code 2: a list of :class:`compensate.engine.rules.Rule` objects (everything else, and
  records that two rules apply to: the later value wins).

The rules come from the handler table, :mod:`compensate.engine.kinds` (one module per
dependency kind), through :meth:`Graph.set_rules`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection

import numpy as np

from compensate.engine.flushes import FlushIndex
from compensate.engine.lateness import exchange_arrival, message_was_late, receiver_was_late
from compensate.engine.overheads import (
    before_stamp,
    event_times,
    group_before,
    r1_gaps,
    record_overheads,
    written_overheads,
)
from compensate.engine.rules import (
    Need,
    Ref,
)
from compensate.engine.runsums import segmented_cumsum
from compensate.engine.span import check_span, on_grid
from compensate.matching import (
    Matching,
)
from compensate.model import BUFFER_FLUSH, ISEND, KIND_NAMES, SEND, Events, Trace
from compensate.platform import Platform

START, FAST_P2P, GENERIC = 0, 1, 2


#: Shortfalls smaller than this (in timer ticks) are rounding, not overcompensation:
#: the overhead in ticks is a float product (seconds x resolution) whose last bits are
#: noise, while the measured gaps are exact integers.
NOISE_TICKS = 1e-6


class Graph:
    """Flat per-record arrays, anchors and the rule of every dependent record."""

    def __init__(self, trace: Trace, platform: Platform, bound: str, collective_exit: str,
                 network_time: Callable[[int], float] | None, matching: Matching,
                 stats: object, t0: int | None = None,
                 pins: dict[int, tuple[np.ndarray, float]] | None = None,
                 ghosts: Collection[int] = (),
                 link_latency: dict[str, dict[str, float]] | None = None) -> None:
        self.trace = trace
        #: the fitted latency of the zero-byte links (R8-R10) per family and kind,
        #: ticks, over the whole trace (EngineOptions.link_latency); None: what this
        #: graph shows (the whole trace in memory)
        self.link_latency = link_latency
        self.bound = bound
        self.collective_exit = collective_exit
        self.network_time = network_time
        self.stats = stats
        self.platform = platform
        res = float(trace.definitions.timer_resolution)
        self.res = res
        self.dev_ovh = on_grid(platform.device_overhead * res)  # ticks per accelerator record
        self.loc_ids = list(trace.events)
        self.evs = [trace.events[loc] for loc in self.loc_ids]
        self.pos_of = {loc: li for li, loc in enumerate(self.loc_ids)}
        lengths = np.array([len(ev) for ev in self.evs], dtype=np.int64)
        self.lengths = lengths
        self.off = np.r_[0, np.cumsum(lengths)[:-1]] if len(lengths) else np.zeros(0, np.int64)
        self.total = int(lengths.sum())
        self.t0 = min((int(e.time[0]) for e in self.evs if len(e)), default=0) \
            if t0 is None else int(t0)
        check_span(trace.events, self.t0, res, trace.source)  # float64 ticks stay exact
        #: per location position: another rank's location (the distributed run,
        #: docs/parallel.md), never evaluated; its only anchors are its first record
        #: and the records this rank's rules read (:meth:`set_rules`)
        ghosts = set(ghosts)
        self.ghost = [loc in ghosts for loc in self.loc_ids]
        self.has_ghosts = bool(ghosts)
        # pinned leading records per location position: (approximated times, R1 carry)
        pins = {loc: v for loc, v in (pins or {}).items() if loc not in ghosts}
        self.pins: list[tuple[list[float], float]] = [
            (np.asarray(pins[loc][0], dtype=np.float64).tolist(), float(pins[loc][1]))
            if loc in pins else ([], 0.0) for loc in self.loc_ids]
        self._copy: dict[int, float] = {}
        self._cache_copy_costs()
        self._flat_columns()
        #: BufferFlush records inside calls (R6 extended, :mod:`compensate.engine.flushes`)
        self.flushes = FlushIndex(self.kind, self.size, self.tm, self.rovh, self.off,
                                  self.lengths, self.t0)
        # per-message static inputs of R2, vectorised; the eager messages the engine
        # evaluates inline (set by the eager-message handler)
        self.m = _message_inputs(self, matching.table)
        self.fast_rows = np.zeros(0, dtype=np.int64)
        #: fitted bound: fast-path receives whose receiver / message was late
        self.fast_receiver_late = self.fast_message_late = 0

    def set_rules(self, dep_rules: dict[tuple[int, int], list],
                  ghost_reads: np.ndarray | None = None) -> None:
        """Take the pending rules of every dependent record (from the handler table,
        :func:`compensate.engine.kinds.rules_of`) and lay out the anchors.

        With ghost locations, ``dep_rules`` holds only the rules of this rank's
        records (:meth:`own_rules`) and ``ghost_reads`` the global record numbers
        of the ghost records they refer to (:func:`compensate.engine.pending.positions`):
        those become anchors (each its own segment, offset 0, so a value another
        rank sends is read exactly), with every ghost location's first record and the
        sends of this rank's fast-path receives; no other ghost record costs an
        anchor."""
        self._anchors(dep_rules, ghost_reads)

    def own_rules(self, dep_rules: dict[tuple[int, int], list]) -> dict[tuple[int, int], list]:
        """The pending rules of the records of locations that are not ghosts."""
        if not self.has_ghosts:
            return dep_rules
        ghost = self.ghost
        return {key: p for key, p in dep_rules.items() if not ghost[key[0]]}

    def evaluated(self, lis: list[int]) -> list[int]:
        """Which of the location positions ``lis`` (a collective instance's
        members) this graph evaluates, as indices into ``lis``: all but ghosts.
        The handlers build rules only for these members' records, so a rank of the
        distributed run builds its own share of every collective, not every
        member's rule to keep its own (:meth:`own_rules`)."""
        if not self.has_ghosts:
            return list(range(len(lis)))
        ghost = self.ghost
        return [i for i, li in enumerate(lis) if not ghost[li]]

    # -- per-record arrays ----------------------------------------------------------
    def _flat_columns(self) -> None:
        """tm (float ticks from t0: the measured times less each record's overhead
        before its stamp, :func:`compensate.engine.overheads.event_times`) and the
        R1 gaps, all locations end to end; BufferFlush statistics."""
        t0, platform = self.t0, self.platform
        defs = self.trace.definitions
        tms, gaps, devs, rovh = [], [], [], []
        for loc, ev, (pinned, carry), ghost in zip(self.loc_ids, self.evs, self.pins, self.ghost,
                                                   strict=True):
            tm = (ev.time - t0).astype(np.float64)
            n = len(tm)
            written = written_overheads(platform, defs, loc, ev)
            rovh.append(written)  # (rules read them, of ghost locations too)
            pre = before_stamp(platform, defs, loc, ev, written=written)
            info = defs.locations.get(loc)
            device = info is not None and info.is_device
            devs.append(np.full(n, device))
            tms.append(event_times(tm, pre))
            if ghost:  # another rank's: no R1 gaps (never evaluated; no overcompensation
                gaps.append(np.zeros(n))  # or flush counted here: its owner does)
                continue
            self._count_flushes(ev, len(pinned))
            self._count_regions(loc, ev, len(pinned), info)
            o = record_overheads(platform, defs, loc, ev, written=written)
            gap = np.zeros(n)
            if n > 1:
                gap[1:] = r1_gaps(tm, o, pre)
            p = len(pinned)
            if 0 < p < n:  # the first record after the pinned ones: R1 from the last of
                d = tm[p] - tm[p - 1]  # them with the overhead ``carry`` its group left
                gap[p] = d - carry - group_before(tm[p:], pre[p:])[0] if d != 0 else 0.0
            self.stats.add_overhead(o[p:])  # (the context's: with an earlier segment)
            if platform.cold and not device and not (info is not None and info.is_metric):
                # a cold call's extra cost, taken from the gap before its Enter (never
                # more than R1 left of it: Platform.cold_charge)
                cold = on_grid(platform.cold_charge(loc, ev.kind, ev.region, gap, self.res))
                gap -= cold
                self.stats.add_overhead(cold[p:])
            gaps.append(gap)
        self.tm = np.concatenate(tms) if tms else np.zeros(0)
        self.gap = np.concatenate(gaps) if gaps else np.zeros(0)
        #: per record: on an accelerator stream (no tracer overhead, :meth:`kind_ovh`)
        self.device = np.concatenate(devs) if devs else np.zeros(0, bool)
        #: per record: its tracer overhead in ticks (by location, kind and region:
        #: compensate.engine.overheads.written_overheads), without what R1 charges
        #: differently on device and metric locations and for flushes
        self.rovh = np.concatenate(rovh) if rovh else np.zeros(0)
        self.kind = (np.concatenate([ev.kind for ev in self.evs]).astype(np.int64)
                     if self.evs else np.zeros(0, np.int64))
        self.size = (np.concatenate([ev.size for ev in self.evs]).astype(np.int64)
                     if self.evs else np.zeros(0, np.int64))

    def _count_flushes(self, ev: Events, pinned: int) -> None:
        """Count the BufferFlush records of a location (but its first ``pinned``:
        context counted with an earlier segment) and their time removed."""
        flush = np.flatnonzero(ev.kind == BUFFER_FLUSH)
        if flush.size:
            counted = flush[flush >= pinned]
            self.stats.buffer_flushes += int(counted.size)
            self.stats.add_flush_ticks(int(np.sum(ev.size[counted] - ev.time[counted])),
                                       self.trace.definitions.timer_resolution)

    def _count_regions(self, loc: int, ev: Events, pinned: int, info) -> None:
        """Count the records of a location (but its first ``pinned``, counted with
        an earlier segment) charged a by-region cost of the platform, per entry
        (:attr:`Stats.region_records <compensate.engine.Stats.region_records>`):
        Enter/Leave of a named region on a CPU location without an in-situ table.
        An entry whose name the trace does not define is left out (the summary
        tells it from one the trace defines but never calls)."""
        bound = self.platform.region_costs(self.trace.definitions.regions)
        if bound is None:
            return
        found = self.stats.region_records
        n = np.zeros(len(bound.names), np.int64)
        if loc not in self.platform.by_location and (info is None or info.is_cpu):
            n = bound.matches(ev.kind[pinned:], ev.region[pinned:])
        for i, (name, c) in enumerate(zip(bound.names, n.tolist(), strict=True)):
            if i in bound.defined:
                found[name] = found.get(name, 0) + c

    def _count_overcompensation(self, local: np.ndarray) -> None:
        """R1 overcompensation: local records (not dependent, not first) whose gap
        is negative, i.e. the overhead removed does not fit the measured gap. Counted
        in total, by the clamped record's kind, and the largest shortfall in seconds.
        A shortfall below :data:`NOISE_TICKS` is floating-point rounding of the overhead
        in ticks (1e-7 s is 100.00000000000001 ns), not a finding."""
        over = np.flatnonzero(local & (self.gap < -NOISE_TICKS))
        if not over.size:
            return
        stats = self.stats
        stats.overcompensated += int(over.size)
        kinds, counts = np.unique(self.kind[over], return_counts=True)
        for k, c in zip(kinds.tolist(), counts.tolist(), strict=True):
            name = KIND_NAMES[k]
            stats.overcompensated_by_kind[name] = stats.overcompensated_by_kind.get(name, 0) + c
        worst = float(-self.gap[over].min()) / self.res
        stats.overcompensated_max_s = max(stats.overcompensated_max_s, worst)

    # -- copy cost ------------------------------------------------------------------
    def _cache_copy_costs(self) -> None:
        """C(s)·s in ticks for every message size in the trace, in one vectorised call."""
        sizes = [np.unique(e.size[e.size >= 0]) for e in self.evs]
        sizes += [np.unique(e.size_recv[e.size_recv >= 0]) for e in self.evs]
        allsizes = np.unique(np.concatenate(sizes)) if sizes else np.zeros(0, dtype=np.int64)
        costs = on_grid(np.asarray(self.platform.copy_time(allsizes.astype(float))) * self.res)
        self._copy = dict(zip(allsizes.tolist(), np.atleast_1d(costs).tolist(), strict=True))

    def copy(self, size: int) -> float:
        """Ticks to copy a ``size``-byte buffer."""
        c = self._copy.get(size)
        if c is None:
            c = self._copy[size] = on_grid(float(self.platform.copy_time(size)) * self.res)
        return c

    def copy_many(self, sizes: np.ndarray) -> np.ndarray:
        """:meth:`copy` of every element (the same floats, looked up per distinct size)."""
        if not len(sizes):
            return np.zeros(0)
        u, inv = np.unique(sizes, return_inverse=True)
        return np.array([self.copy(s) for s in u.tolist()], dtype=np.float64)[inv.reshape(-1)]

    def network_ticks_many(self, sizes: np.ndarray) -> np.ndarray:
        """The fitted network time in ticks of every size (``network_time(s) * res``,
        the same floats as the engine's per-message hook, called once per distinct
        size)."""
        if not len(sizes):
            return np.zeros(0)
        u, inv = np.unique(sizes, return_inverse=True)
        f, res = self.network_time, self.res
        return on_grid(np.array([f(s) * res for s in u.tolist()],
                                dtype=np.float64))[inv.reshape(-1)]

    def kind_ovh(self, g: int) -> float:
        """The tracer overhead of record ``g`` (ticks): by location and kind, on a
        device the platform's device overhead (default 0)."""
        return self.dev_ovh if self.device[g] else float(self.rovh[g])

    def g(self, li: int, idx: int) -> int:
        """Global record number of record ``idx`` of location position ``li``."""
        return int(self.off[li]) + idx

    def extra(self, li: int, idx: int) -> float:
        """Copy cost of the record before ``idx`` if it is a send (MPI_Sendrecv)."""
        if idx <= 0:
            return 0.0
        g = self.g(li, idx - 1)
        return self.copy(int(self.size[g])) if self.kind[g] in (SEND, ISEND) else 0.0

    def who_was_late(self, li: int, idx: int, cs: float) -> str:
        """In the measurement, which party was late for the receive record ``idx``:
        ``"message"`` if the message clearly arrived after the receiver was ready
        (the criterion the network fit uses, :func:`compensate.engine.lateness.message_was_late`:
        the receive then shows the transfer), ``"receiver"`` if the receive completed
        one copy after the receiver became ready (:func:`compensate.engine.fit.
        receiver_was_late`: the message may have arrived any time before), else
        ``"unclear"``. Ready = the record before plus its overhead (and its copy, if
        a send)."""
        if idx <= 0:
            return "unclear"
        ev = self.evs[li]
        prev = idx - 1
        k = ev.kind[prev]
        gp = self.g(li, prev)
        start = float(ev.size[prev] - self.t0) if k == BUFFER_FLUSH else self.tm[gp]
        free = start + float(self.rovh[gp]) + self.extra(li, idx)
        recv_m = self.tm[gp + 1]
        if message_was_late(recv_m, cs, free, self.tm[gp]):
            return "message"
        return "receiver" if receiver_was_late(recv_m, cs, free) else "unclear"

    # -- anchors --------------------------------------------------------------------------
    def _anchors(self, dep_rules: dict, ghost_reads: np.ndarray | None = None) -> None:
        """Segment the records at the dependent ones, number the anchors, compute the
        R1 running sums, and turn every pending rule into a rule on anchors."""
        off, m = self.off, self.m
        fast = self.fast_rows
        reads = [] if ghost_reads is None else [np.asarray(ghost_reads, dtype=np.int64)]
        if self.has_ghosts and fast.size:  # only this rank's receives; their sends
            ghost = np.array(self.ghost, dtype=bool)  # on ghost locations are anchors
            fast = fast[~ghost[m.recv_li[fast]]]
            remote = ghost[m.send_li[fast]]
            reads.append(off[m.send_li[fast[remote]]] + m.send_idx[fast[remote]])
        fast_g = off[m.recv_li[fast]] + m.recv_idx[fast] if fast.size else np.zeros(0, np.int64)
        gen_g = np.array([int(off[li]) + i for li, i in dep_rules], dtype=np.int64)
        # a collective rule replaced a message rule on the same record: drop the fast one
        if gen_g.size and fast_g.size:
            mark = np.zeros(self.total, dtype=bool)  # (a mask: ~25x faster than np.isin)
            mark[gen_g] = True
            clash = mark[fast_g]
            if clash.any():
                fast, fast_g = fast[~clash], fast_g[~clash]
        starts = off[self.lengths > 0]
        pinned = [off[li] + np.arange(len(v)) for li, (v, _) in enumerate(self.pins) if v]
        self.agpos = _sorted_unique(np.concatenate([starts, fast_g, gen_g, *pinned, *reads]))
        dep_g = _sorted_unique(np.concatenate([fast_g, gen_g]))
        # overcompensation: local records (not dependent, not first) with a negative gap
        local = np.ones(self.total, dtype=bool)
        local[self.agpos] = False
        self._count_overcompensation(local)
        del local
        np.maximum(self.gap, 0.0, out=self.gap)
        self.S = segmented_cumsum(self.gap, self.agpos)
        na = len(self.agpos)
        self.anchor_loc = (np.searchsorted(off, self.agpos, side="right") - 1
                           if na else np.zeros(0, np.int64))
        self.anchor_rec = self.agpos - off[self.anchor_loc] if na else np.zeros(0, np.int64)
        # per location: first and one-past-last anchor
        self.a_first = np.searchsorted(self.agpos, off)
        self.a_end = np.searchsorted(self.agpos, off + self.lengths)
        code = np.full(na, START, dtype=np.int8)
        code[np.searchsorted(self.agpos, dep_g)] = GENERIC
        fast_anchor = np.searchsorted(self.agpos, fast_g)
        code[fast_anchor] = FAST_P2P
        self.code = _array("b", code)
        # R1 inputs of every anchor: a[p-1] = A[k-1] + S[g-1], local = a[p-1] + gap[g]
        has_prev = self.anchor_rec > 0
        prev_s = np.zeros(na)
        prev_s[has_prev] = self.S[self.agpos[has_prev] - 1]
        self.has_prev = _array("b", has_prev)
        self.prev_s = _array("d", prev_s)
        self.tm_at = _array("d", self.tm[self.agpos])
        gap_at = self.gap[self.agpos]
        self._agpos, self._off, self._s = _array("q", self.agpos), off.tolist(), self.S.item
        if self.has_ghosts:  # (a closure over the columns, not a bound method: that
            # would make the graph hold itself, freed only by the cyclic collector)
            self.ref = _ghost_checked_ref(  # type: ignore[method-assign]
                self._off, self._agpos, self._s, self.ghost, self.loc_ids)
        generic: dict[int, tuple] = {}
        for (li, i), pending in dep_rules.items():
            k = bisect_left(self._agpos, self._off[li] + i)
            generic[k] = ([p.build(self) for p in pending], float(gap_at[k]))
        self.generic = generic
        self._fast_fields(fast, fast_anchor, na)

    def anchor_of(self, gidx: np.ndarray) -> np.ndarray:
        """Anchor ids of global records ``gidx``."""
        return np.searchsorted(self.agpos, gidx, side="right") - 1

    def ref(self, li: int, idx: int) -> Ref:
        """Reference (anchor, R1 offset) of record ``idx`` of location position ``li``."""
        g = self._off[li] + idx
        return (bisect_right(self._agpos, g) - 1, self._s(g))

    def need(self, li: int, idx: int) -> Need:
        return (self.ref(li, idx)[0], self.loc_ids[li], idx)

    def _fast_fields(self, fast: np.ndarray, anchors: np.ndarray, na: int) -> None:
        """Per-anchor inputs of the fast-path receives (message rows ``fast`` at
        anchors ``anchors``), as flat typed arrays the engine indexes by anchor:
        send anchor and offset, enter anchor (-1: none) and offset, enter time if
        none, copy of a preceding send, receive copy cost, bound constant (for the
        lower bound the least transfer ``lo``: 2·C(s)·s for a receive, C(s)·s for a
        matched probe; for the upper the observed interval), observed interval,
        overlapped, and the message's table row (to name it in an error). Under the
        fitted bound also the modelled transfer ``fit`` (least transfer + network
        time of the size), with ``overlapped`` already folding in who was late
        (:func:`late_parties`; counted in ``fast_receiver_late`` and
        ``fast_message_late``).
        ``array.array`` rather than lists: no Python object per value to build."""
        m = self.m
        cols = {name: np.zeros(na) for name in ("s_off", "e_off", "enter_c", "extra", "cs",
                                                "bound_c", "observed", "fit")}
        ints = {name: np.full(na, -1, dtype=np.int64) for name in ("s_anchor", "e_anchor",
                                                                   "row")}
        overlapped = np.zeros(na, dtype=np.int8)
        if fast.size:
            sg = self.off[m.send_li[fast]] + m.send_idx[fast]
            has_enter = m.enter_idx[fast] >= 0
            eg = self.off[m.recv_li[fast]] + np.where(has_enter, m.enter_idx[fast], 0)
            ints["s_anchor"][anchors] = self.anchor_of(sg)
            ints["e_anchor"][anchors] = np.where(has_enter, self.anchor_of(eg), -1)
            ints["row"][anchors] = fast
            cols["s_off"][anchors] = self.S[sg]
            cols["e_off"][anchors] = np.where(has_enter, self.S[eg], 0.0)
            cols["enter_c"][anchors] = m.enter_const[fast]
            cols["extra"][anchors] = m.extra[fast]
            cs = m.cs[fast]
            cols["cs"][anchors] = cs
            cols["bound_c"][anchors] = m.observed[fast] if self.bound == "upper" else m.lo[fast]
            cols["observed"][anchors] = m.observed[fast]
            over = m.overlapped[fast]
            if self.bound == "fitted":
                late, message_late = late_parties(self, fast)
                receiver_late = over & late
                message_late &= ~over
                over = (over & ~receiver_late) | message_late
                self.fast_receiver_late = int(receiver_late.sum())
                self.fast_message_late = int(message_late.sum())
                cols["fit"][anchors] = m.lo[fast] + self.network_ticks_many(m.size[fast])
            overlapped[anchors] = over
        for name, values in cols.items():
            setattr(self, "f_" + name, _array("d", values))
        for name, values in ints.items():
            setattr(self, "f_" + name, _array("q", values))
        self.f_overlapped = _array("b", overlapped)

    def message_send(self, row: int) -> tuple[int, int]:
        """(location id, record) of the send of message ``row``."""
        return self.loc_ids[int(self.m.send_li[row])], int(self.m.send_idx[row])


_TYPECODES = {"b": np.int8, "q": np.int64, "d": np.float64}


def _array(typecode: str, values: np.ndarray) -> array:
    """``values`` as a flat ``array.array`` (a copy of the bytes, no Python objects)."""
    out = array(typecode)
    out.frombytes(np.ascontiguousarray(values, dtype=_TYPECODES[typecode]).tobytes())
    return out


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (``np.unique`` of numpy 2.x hashes, which is ~10x slower
    than sorting for 10^6 distinct values)."""
    s = np.sort(values)
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def late_parties(graph: Graph, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Graph.who_was_late` of the receives of message rows ``rows``, all at
    once: (receiver was late, message was late), bool arrays (both false: unclear,
    or the receive opens its location). The same float operations in the same
    order as the scalar method, so the same answers bit for bit."""
    m = graph.m
    rg = graph.off[m.recv_li[rows]] + m.recv_idx[rows]
    has_prev = m.recv_idx[rows] > 0
    gp = np.where(has_prev, rg - 1, rg)
    start = np.where(graph.kind[gp] == BUFFER_FLUSH,
                     (graph.size[gp] - graph.t0).astype(np.float64), graph.tm[gp])
    free = start + graph.rovh[gp] + m.extra[rows]
    recv_m, cs = graph.tm[rg], m.cs[rows]
    message = message_was_late(recv_m, cs, free, graph.tm[gp]) & has_prev
    receiver = receiver_was_late(recv_m, cs, free) & has_prev & ~message
    return receiver, message


class _MessageInputs:
    """Static R2 inputs of every message (numpy columns, indexed by table row)."""

    def __init__(self, **cols: np.ndarray) -> None:
        self.__dict__.update(cols)


def _message_inputs(graph: Graph, t) -> _MessageInputs:
    off, tm = graph.off, graph.tm
    n = len(t)
    if n == 0:
        z = np.zeros(0)
        zi = np.zeros(0, dtype=np.int64)
        return _MessageInputs(send_li=zi, send_idx=zi, recv_li=zi, recv_idx=zi, enter_idx=zi,
                              size=zi, cs=z, lo=z, enter_const=z, observed=z,
                              overlapped=zi.astype(bool), extra=z)
    sg = off[t.send_li] + t.send_idx
    rg = off[t.recv_li] + t.recv_idx
    xg = off[t.send_li] + t.send_exit_idx
    enter_idx = t.recv_enter_idx
    has_enter = enter_idx >= 0
    eg = off[t.recv_li] + np.where(has_enter, enter_idx, 0)
    send_m, recv_m = tm[sg], tm[rg]
    copy = graph.copy_many(t.size)
    # the receive copy (none where the receive record is a matched probe) and the least
    # transfer: the send's copy out plus the receive copy
    cs = np.where(t.no_recv_copy, 0.0, copy)
    lo = copy + cs
    enter_m = np.where(has_enter, tm[eg], recv_m)
    observed = recv_m - send_m - graph.rovh[sg]
    exit_m = tm[xg]
    fl = graph.flushes
    if fl.any:  # R6 extended: a flush in the receive call before the receive moves the
        # receiver's readiness to its end; one in the send call after the send record
        # only delays that call's end (docs/design.md §3 R6)
        enter_m = np.where(has_enter, fl.ready_after(eg, rg, enter_m), enter_m)
        exit_m = exit_m - fl.inside(sg, xg)
    extra = np.zeros(n)
    has_prev = t.recv_idx > 0
    pg = rg[has_prev] - 1
    is_send = np.isin(graph.kind[pg], (SEND, ISEND))
    prev_rows = np.flatnonzero(has_prev)[is_send]
    extra[prev_rows] = graph.copy_many(graph.size[pg[is_send]])
    ex = t.exchange
    arrive = exchange_arrival(graph.platform, graph.res, t.size,
                              send_m + graph.rovh[sg] + copy) if ex.any() else None
    if arrive is not None:  # MPI_Sendrecv with a network model (lateness.exchange_arrival):
        exit_m = np.where(ex, arrive, exit_m)  # its send part ends on arrival, and a
        ps = pg[is_send]  # receive after its call's send is ready after that send part
        enter_m[prev_rows] = np.maximum(enter_m[prev_rows],
                                        tm[ps] + graph.rovh[ps] + extra[prev_rows])
    overlapped = enter_m <= exit_m
    return _MessageInputs(send_li=t.send_li, send_idx=t.send_idx, recv_li=t.recv_li,
                          recv_idx=t.recv_idx, enter_idx=enter_idx, size=t.size, cs=cs, lo=lo,
                          enter_const=recv_m - cs, observed=observed, overlapped=overlapped,
                          extra=extra)


def _ghost_checked_ref(off: list[int], agpos: array, s: Callable[[int], float],
                       ghost: list[bool], loc_ids: list[int]) -> Callable[[int, int], Ref]:
    """:meth:`Graph.ref` where a ghost record must be an anchor of its own (its value
    comes from its owner; a record inside a ghost segment has no offset here)."""
    def ref(li: int, idx: int) -> Ref:
        g = off[li] + idx
        k = bisect_right(agpos, g) - 1
        if ghost[li] and agpos[k] != g:
            raise RuntimeError(f"location {loc_ids[li]}, record {idx}: a ghost record "
                               f"read by a rule is not an anchor")
        return (k, s(g))

    return ref
