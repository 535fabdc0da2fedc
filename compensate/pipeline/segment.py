"""One segment through match -> compensate -> verify: the step every way of
running takes, stated once.

A *segment* is the whole trace (in memory), a part between two safe cuts (streamed)
or a rank's share of either (distributed). Its records come with their *context*
in front (the records earlier segments left open or pinned,
:mod:`compensate.pipeline.context`; none for a whole trace). Where the segment is
evaluated is a :class:`Share`: all of it in this process (:data:`WHOLE`), or the
locations one rank owns, the others' anchors arriving through an exchange
(:mod:`compensate.parallel.share`). The runner matches the segment, evaluates it
with the engine, maps METRIC samples, rounds the share's own locations' times from
their context, verifies the dependencies the share owns, and counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from compensate.engine import EngineOptions, Stats, approximate, rounded_times
from compensate.engine.metrics import map_metric_samples
from compensate.matching import Matching
from compensate.model import BUFFER_FLUSH, Events, Trace
from compensate.platform import Platform
from compensate.verify import Verification, verify


@dataclass
class Segment:
    """A segment as the steps see it. ``engine``: every location's records with
    their context in front (and, in a rank's share, the other ranks' ghosts);
    ``match``: the view matching takes (context that matching must not pair again
    neutralised); ``pins``: the context's approximated times and the overhead the
    last one left to charge (:func:`compensate.engine.approximate`); ``context``:
    the context records' output timestamps; ``references``: METRIC reference points
    from earlier segments; ``index``: a rank's trimmed ghosts' original indices."""

    engine: Trace
    match: Trace
    pins: dict[int, tuple[np.ndarray, float]] = field(default_factory=dict)
    context: dict[int, list[int]] = field(default_factory=dict)
    references: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
    index: dict[int, np.ndarray] | None = None

    @classmethod
    def whole(cls, trace: Trace) -> Segment:
        """A whole trace as one segment: no context."""
        return cls(trace, trace)

    def head(self, loc: int) -> int:
        """The number of context records in front of location ``loc``."""
        return len(self.pins[loc][0]) if loc in self.pins else 0


@dataclass
class Times:
    """A share's own locations after the engine: ``values`` the approximated float
    ticks from t0 and ``written`` the output timestamps of the segment's records
    (context left out); ``times`` and ``sizes`` the output columns with the context
    in front (``sizes``: only where BufferFlush stop times change)."""

    values: dict[int, np.ndarray] = field(default_factory=dict)
    written: dict[int, np.ndarray] = field(default_factory=dict)
    times: dict[int, np.ndarray] = field(default_factory=dict)
    sizes: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass
class SegmentResult:
    """What one segment gave: its matching, the engine's statistics with the
    matching's counts, the verification (None on a rank that does not hold the
    reduced one), the share's times, and the matching counts for the summary."""

    matching: Matching
    stats: Stats
    verification: Verification | None
    times: Times
    counts: dict


class Share(Protocol):
    """Where a segment is evaluated: the whole of it here, or one rank's share."""

    def step(self, f: Callable[..., Any], *args: Any, phase: str | None = None) -> Any:
        """Run one phase (a rank: every rank hears of a failure at its end; a
        ``phase`` name: its seconds are counted under it)."""

    def own(self, trace: Trace) -> list[int]:
        """The locations of ``trace`` whose times this share computes."""

    def exchange(self, segment: Segment) -> Any:
        """The exchange that brings other shares' anchors (None: all are here)."""

    def evaluate(self, f: Callable[..., Any], *args: Any) -> Any:
        """Run the engine (a rank: the exchange hears of a failure inside it)."""

    def verify(self, segment: Segment, matching: Matching, times: Times) -> Verification | None:
        """Verify the dependencies this share owns; the reduced result or None."""

    def count(self, stats: Stats, matching: Matching, segment: Segment, own: list[int],
              compensated: bool) -> dict:
        """Put the matching's counts into ``stats``; the summary's counts."""


class Whole:
    """The whole segment in this process."""

    def step(self, f: Callable[..., Any], *args: Any, phase: str | None = None) -> Any:
        return f(*args)

    def own(self, trace: Trace) -> list[int]:
        return list(trace.events)

    def exchange(self, segment: Segment) -> None:
        return None

    def evaluate(self, f: Callable[..., Any], *args: Any) -> Any:
        return f(*args)

    def verify(self, segment: Segment, matching: Matching, times: Times) -> Verification:
        out = segment.engine.with_times(times.times, times.sizes)
        skip = {loc: segment.head(loc) for loc in segment.pins}
        return verify(out, matching, measured=segment.engine, skip=skip or None)

    def count(self, stats: Stats, matching: Matching, segment: Segment, own: list[int],
              compensated: bool) -> dict:
        count_matching(stats, matching)
        return matching.counts()


#: the share of a one-process run
WHOLE = Whole()


def count_matching(stats: Stats, matching: Matching) -> None:
    """The summary's counts of a matching, into ``stats``."""
    stats.messages = matching.table.message_count
    stats.unmatched_sends = matching.unmatched_sends
    stats.collective_instances = len(matching.instances)
    stats.unknown_collective_ops = matching.unknown_ops


def run_segment(segment: Segment, share: Share, platform: Platform, options: EngineOptions,
                t0: int | None, match: Callable[[Trace], Matching],
                progress: Callable[[int], None] | None = None,
                errors: type[Exception] | None = None) -> tuple[SegmentResult, int]:
    """Match, compensate, verify and count one segment on ``share``; returns the
    result and t0 (the engine's origin: ``t0``, or the segment's earliest measured
    time). ``errors``: the exception a TraceError of the engine becomes (a
    streamed segment's record numbers are not the trace's)."""
    matching = share.step(match, segment.match)
    own = share.own(segment.engine)
    if t0 is None:
        t0 = min((int(ev.time[0]) for ev in segment.engine.events.values() if len(ev)),
                 default=0)
    approx, stats, exchange = None, Stats(), None
    if options.bound != "none":
        exchange = share.exchange(segment)
        approx, t0, stats = share.evaluate(_evaluate, segment, exchange, platform, options,
                                           matching, t0, progress, errors)
    times = share.step(own_times, segment, own, approx, t0, options.bound != "none",
                       exchange is not None, phase="times")
    check = share.verify(segment, matching, times)
    counts = share.count(stats, matching, segment, own, approx is not None)
    return SegmentResult(matching, stats, check, times, counts), t0


def _evaluate(segment: Segment, exchange: Any, platform: Platform, options: EngineOptions,
              matching: Matching, t0: int, progress: Callable[[int], None] | None,
              errors: type[Exception] | None) -> tuple[dict[int, np.ndarray], int, Stats]:
    from compensate.model import TraceError

    try:
        return approximate(segment.engine, platform, options, matching, progress, t0=t0,
                           pins=segment.pins or None, references=segment.references,
                           exchange=exchange)
    except TraceError as exc:
        if errors is None:
            raise
        raise errors(str(exc)) from exc


def own_times(segment: Segment, own: list[int], approx: dict[int, np.ndarray] | None,
              t0: int, compensated: bool, unmapped: bool) -> Times:
    """The output times of the locations ``own``: rounded from ``approx`` (None:
    the measured times) from each location's last context record on, with the
    context's own timestamps in front. ``unmapped``: the engine left METRIC
    samples to map (a rank's share: their reference may be another rank's)."""
    if approx is not None and unmapped:
        approx = _mapped(segment, own, approx, t0)
    out = Times()
    for loc in own:
        ev = segment.engine.events[loc]
        p = segment.head(loc)
        records = ev.slice(p, len(ev))
        if approx is None:
            out.values[loc] = (records.time - t0).astype(np.float64)
            out.written[loc] = records.time
        else:
            out.values[loc] = approx[loc][p:]
            floor = segment.context[loc][-1] if p else None
            out.written[loc] = (rounded_times(records, out.values[loc], t0, floor)[0]
                                if len(records) else np.zeros(0, np.int64))
        context = np.array(segment.context.get(loc, []), dtype=np.int64)
        out.times[loc] = np.concatenate([context, out.written[loc]]) if p else out.written[loc]
        flush = ev.kind == BUFFER_FLUSH
        if compensated and np.any(flush):
            size = ev.size.copy()
            size[flush] = out.times[loc][flush]
            out.sizes[loc] = size
    return out


def _mapped(segment: Segment, own: list[int], approx: dict[int, np.ndarray],
            t0: int) -> dict[int, np.ndarray]:
    """The own locations' times with their METRIC samples mapped; every own record
    must have a time (a rule reading an anchor it did not list would show here)."""
    part = {loc: approx[loc] for loc in own}
    for loc, x in part.items():
        if np.isnan(x).any():
            i = int(np.flatnonzero(np.isnan(x))[0])
            raise RuntimeError(f"location {loc}, record {i}: no time computed in this "
                               f"rank's share")
    trace = segment.engine
    mine = Trace(trace.definitions, {loc: trace.events[loc] for loc in own}, trace.source)
    map_metric_samples(mine, part, t0, segment.pins or None, segment.references)
    return part


def output_events(segment: Segment, own: list[int], times: Times) -> dict[int, Events]:
    """The segment's records of the locations ``own`` with their output times
    (context left out): what is written."""
    out = {}
    for loc in own:
        ev = segment.engine.events[loc]
        p = segment.head(loc)
        if len(ev) == p:
            continue
        size = times.sizes[loc][p:] if loc in times.sizes else None
        out[loc] = ev.slice(p, len(ev)).with_time(times.written[loc], size)
    return out
