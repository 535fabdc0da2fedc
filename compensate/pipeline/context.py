"""What a segment carries from the segments before it (docs/design.md §5,
"Streaming in segments").

A segment depends on the past only through each location's own history, which R1
summarises in a few *context* records: the calls still open at the cut, the last
record (its approximated time pinned, and the overhead its timestamp group left to
charge), and the senders of thread, device and lock links whose takers come after
the cut (:mod:`compensate.engine.carry`). :class:`Segmenter` puts them in front of
each location's part of the next segment, matches the segment with them, and
takes the segment's result to update them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from compensate.engine import to_ticks
from compensate.engine.carry import LinkCarry, Row
from compensate.engine.overheads import before_stamp, group_carry, record_overheads
from compensate.matching import Matching, match
from compensate.matching.clocks import inversions
from compensate.matching.lock_order import mark_implied, release_reach
from compensate.model import BUFFER_FLUSH, KIND_CODE, LEAVE, Definitions, Events, Trace, TraceError
from compensate.pipeline.cuts import Cutter, NotStreamable, SegmentError
from compensate.pipeline.segment import Segment
from compensate.platform import Platform

#: The kind the last context record gets for matching: one matching ignores (its
#: own dependency was resolved in the segment before; its true kind stays in the
#: trace the engine sees, for R1 and the receive rules).
NEUTRAL = KIND_CODE["Metric"]


@dataclass
class Context:
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



class ClocksDisagree(NotStreamable):
    """A segment in which a receive is stamped before its send: the processes'
    clocks disagree. Streamed again once :func:`compensate.pipeline.run.clock_pass`
    has aligned them (over the whole trace, as one process aligns it in memory)."""

class Segmenter:
    """Every location's context between segments: puts it in front of a segment
    (:meth:`traces`), matches the segment with it (:meth:`match`) and takes the
    segment's result to update it (:meth:`advance`)."""

    def __init__(self, defs: Definitions, platform: Platform, source: str,
                 eager_limit: int | None, strict: bool = False) -> None:
        self.defs = defs
        self.platform = platform
        self.source = source
        self.eager_limit = eager_limit
        self.strict = strict
        #: the processes' clocks were aligned over the whole trace (clock_pass), or
        #: are not to be (``--bound none``, whose copy the in-memory run does not
        #: align either): a receive still before its send is the in-memory run's
        #: too, not a refusal
        self.aligned = False
        self.done: dict[int, int] = defaultdict(int)  # records of earlier segments
        #: the first Enter/Leave that does not nest (record index in the location)
        self.nesting_first: dict | None = None
        self.ctx: dict[int, Context] = defaultdict(Context)
        self.t0: int | None = None
        self.links = LinkCarry(defs)
        #: the stream's cutter (or a rank's cut agreement), whose look-ahead (its
        #: ``unclosed``, once read) names the receives past a gap on their channel
        #: (:mod:`compensate.pipeline.unclosed`)
        self.cutter: Cutter | Any = None
        #: per location, the ticks its records were moved by (a clock pass's first
        #: guess), which the gap rule takes off (:func:`compensate.matching.match`)
        self.gap_shift: dict[int, int] | None = None

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
                kind[len(rows) - 1] = NEUTRAL
                for_match[loc] = replace(events[loc], kind=kind)
            else:
                for_match[loc] = events[loc]
            pins[loc] = (np.array([r[2] for r in rows]), ctx.carry)
        return (Trace(self.defs, events, self.source), Trace(self.defs, for_match, self.source),
                pins)

    def segment(self, seg: dict[int, Events]) -> Segment:
        """The segment ``seg`` with every location's context in front, as the
        segment runner takes it (:class:`compensate.pipeline.segment.Segment`)."""
        trace, mtrace, pins = self.traces(seg)
        context = {loc: [r[3] for r in self.ctx[loc].records()] for loc in pins}
        return Segment(trace, mtrace, pins, context, self.references(seg))

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

    def watermark(self, cutter: Cutter, seg: dict[int, Events], start: int) -> int:
        """No location that has written nothing yet will write a record before the
        returned time (see :func:`compensate.pipeline.run.streamed`). A METRIC
        location's samples may come a segment late (they wait for their reference's next
        record) and take their reference's time function, so for one that has written
        nothing yet the bound is its reference's last written time (every later sample
        maps at or after it), or, while the reference has written nothing either, its
        own earliest sample still to write (a sample before the reference's first record
        keeps that record's shift, which is >= 0)."""
        low = start
        for loc, ref in cutter.refs.items():
            if self.done[loc]:
                continue
            if self.done[ref]:  # (rounded as rounded_times rounds the samples)
                low = min(low, int(to_ticks(self.ctx[ref].records()[-1][2])) + self.t0)
                continue
            firsts = [int(ev.time[0]) for ev in cutter.pending.get(loc, ()) if len(ev)]
            if loc in seg:
                firsts.append(int(seg[loc].time[0]))
            if firsts:
                low = min(low, min(firsts))
        return low

    def past_gaps(self, mtrace: Trace) -> dict[int, np.ndarray]:
        """Per location, the records of this segment (``mtrace``: with its context
        in front) that the look-ahead found past a gap on their channel: matching
        leaves them unpaired, as the whole trace's does."""
        found = self.cutter.unclosed if self.cutter is not None else None
        if found is None or not found.receives:
            return {}
        out = {}
        for loc, ev in mtrace.events.items():
            head = len(self.ctx[loc].records()) if loc in self.ctx else 0
            start = self.done.get(loc, 0)
            past = found.of("receives", loc, start, start + len(ev) - head)
            if past.size:
                out[loc] = past + head
        return out

    def match(self, mtrace: Trace, past: dict[int, np.ndarray] | None = None,
              nests: dict | None = None) -> Matching:
        """The segment ``mtrace`` (with its context in front) matched, leaving the
        receives past a gap unpaired (``past``, default :meth:`past_gaps`);
        ``nests``: call structures already found (:func:`compensate.matching.match`)."""
        try:
            matching = match(mtrace, eager_limit=self.eager_limit, strict=self.strict,
                             past_gaps=self.past_gaps(mtrace) if past is None else past,
                             gap_shift=self.gap_shift, nests=nests)
        except TraceError as exc:
            raise SegmentError(str(exc)) from exc
        if not self.aligned and inversions(mtrace, matching.table, matching.instances)[0]:
            # processes on clocks of their own: aligned over the whole trace, in memory
            raise ClocksDisagree("a receive is stamped before its send: the processes' "
                                 "clocks disagree")
        first = matching.nesting_first
        if first is not None and self.nesting_first is None:
            # segments come in time order: the first segment with one has the first;
            # its index counts the records of earlier segments, not the context
            self.nesting_first = dict(first, index=self.whole_index(first["location"],
                                                                    first["index"]))
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
                        f"location {loc}, record {self.whole_index(loc, i)}: a synchronize "
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
        self.links.reach = {(loc, self.whole_index(loc, i)): locs for (loc, i), locs
                            in release_reach(mtrace, matching.threads, seeds).items()}

    def whole_index(self, loc: int, i: int) -> int:
        """The index in the whole trace of record ``i`` of location ``loc`` in the
        current segment (its context records in front; before :meth:`advance`)."""
        rows = self.ctx[loc].records() if loc in self.ctx else []
        return rows[i][4] if i < len(rows) else self.done.get(loc, 0) + i - len(rows)

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
            o = record_overheads(self.platform, self.defs, loc, ev, first, flushes=False)
            flush = ev.kind[first:] == BUFFER_FLUSH
            carry = group_carry(o, before_stamp(self.platform, self.defs, loc, ev, first))
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
