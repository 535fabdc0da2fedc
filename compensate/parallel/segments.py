"""Streaming within a rank: the distributed run segment by segment (issue #21,
docs/parallel.md "Streaming within a rank").

A rank holds one segment of its own locations at a time instead of its whole
share. The segments' cuts are agreed by the ranks from their own locations as
they read them (:class:`compensate.parallel.cutting.CutAgreement`, the command's
way: one read feeds the agreement and the segments,
:class:`compensate.parallel.reading.OneRead`), or are the
one-process streamed run's (the tests' reference: ``cut_times`` in
tests/pipelines.py runs the one-process cutter over the whole trace's columns).
A cut is safe
for the whole trace (nothing crosses it: no message in flight, no collective with
members on both sides, no open request or call around a send), so each segment
is a closed problem on every rank: of each channel both ends' messages and every
collective instance whole. Then every rank, per segment
(:class:`RankStream`):

1. splits its own locations at the cut (:class:`OwnSplitter`, the cutter's own
   split, METRIC samples held back for their reference record as in one
   process: a METRIC location and its reference are in one process, hence on one
   rank) and puts each location's context in front (the one-process
   :class:`~compensate.pipeline.context.Segmenter`: open calls, last record, R1
   carry, carried thread links; all inside one process);
2. sends the others the trimmed ghosts (:func:`compensate.parallel.ghosts.complete_trimmed`)
   of the segment *as matching sees it*: the last context record has the neutral
   kind matching ignores (:data:`compensate.pipeline.context.NEUTRAL`), so the context
   in front of a location is open Enters (closed in the segment) and one record no
   rule of another process reads, and a simple location stays simple
   (:mod:`compensate.parallel.trim`); the engine's view has the rank's own
   locations with their true kinds;
3. runs the pipeline's segment step (:func:`compensate.pipeline.segment.run_segment`)
   on its share (:class:`~compensate.parallel.share.RankShare`): matches its view,
   runs the forward replay with its own context pinned (a pinned record another
   rank reads is sent as a known value), maps its METRIC samples, rounds from each
   location's floor, verifies its own dependencies (``skip`` = the context), and
   hands its own records to ``write`` (its part of the output);
4. rank 0 sums the statistics, matching counts and verification over the
   segments as the one-process streamed run does (:class:`~compensate.pipeline.Run`).

Where the one-process command cannot stream (:class:`NotStreamable`: input not in
time order; :class:`SegmentError`: a problem whose exact record the whole trace
names) every rank raises :class:`StreamFallback` together and the caller runs the
whole-share path (:func:`compensate.parallel.driver.run_rank`), as the
one-process command falls back to the in-memory path.

``--bound fitted`` streams too, in two passes over the same segments as the
one-process command's: in the first (:func:`observe_rank`) every rank observes the
transfers whose receive it owns and the network fit is reduced across the ranks
(:mod:`compensate.parallel.fit`: the one-process fit pass's outcome); the second
runs the segments with the engine options the one-process command's second pass
has (:meth:`compensate.pipeline.RunOptions.engine_options`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from compensate.engine.fit import FitOutcome, Observations, observe_transfers
from compensate.engine.span import check_span
from compensate.errors import records_named, renumber
from compensate.matching.clocks import ClockAlignment
from compensate.model import Definitions, Events, Trace
from compensate.overhead import KindGaps, transfer_of
from compensate.parallel.driver import (
    FALLBACK,
    FALLBACK_CLOCKS,
    RankFailed,
    agreed,
    agreed_gather,
)
from compensate.parallel.exchange import Exchange
from compensate.parallel.fit import reduced_outcome
from compensate.parallel.ghosts import complete_trimmed
from compensate.parallel.share import RankShare
from compensate.parallel.transport import Transport
from compensate.pipeline.context import ClocksDisagree, Segmenter
from compensate.pipeline.cuts import (
    Cutter,
    NotStreamable,
    SegmentError,
)
from compensate.pipeline.memory import release_memory
from compensate.pipeline.options import RunOptions
from compensate.pipeline.run import ClockBounds, Run, shift_of
from compensate.pipeline.segment import Segment, output_events, run_segment
from compensate.platform import Platform
from compensate.verify import Verification


class StreamFallback(Exception):
    """Some rank cannot stream (the one-process command would fall back to the
    in-memory path): every rank raises it, and the caller runs the whole-share path.
    ``clocks``: because the processes' clocks disagree (a receive stamped before its
    send), which the caller may align first and then stream (as one process
    does)."""

    def __init__(self, message: str, clocks: bool = False) -> None:
        super().__init__(message)
        self.clocks = clocks


class OwnSplitter:
    """This rank's own locations, split at the cut times every rank has (the cutter's
    own :meth:`~compensate.pipeline.cuts.Cutter.split`: the same segments as in one
    process, restricted to these locations)."""

    def __init__(self, defs: Definitions, chunks: Iterable[dict[int, Events]]) -> None:
        self.cutter = Cutter(defs, 1 << 62)  # never searches: it is given the cuts
        self.chunks = iter(chunks)
        self.horizon: int | None = None  # the latest time read
        self.ended = False

    def _read(self) -> bool:
        chunk = next(self.chunks, None)
        if chunk is None:
            self.ended = True
            return False
        c = self.cutter
        for loc, ev in chunk.items():
            if not c.take(loc, ev):
                continue
            last = int(ev.time[-1])
            self.horizon = last if self.horizon is None else max(self.horizon, last)
        return True

    def split(self, cut: int | None) -> dict[int, Events]:
        """The own records of the segment that ends at ``cut`` (None: all the rest)."""
        c = self.cutter
        if cut is None:
            while self._read():
                pass
            return c.rest() or {}
        # every own record before the cut is read once one at or after it is (the
        # readers give time order)
        while not self.ended and (self.horizon is None or self.horizon < cut):
            self._read()
        merged = {loc: Events.concat(parts) for loc, parts in c.pending.items() if parts}
        return c.split(merged, cut, None, None, None)


def fallback_step(transport: Transport, f: Callable[..., Any], *args: Any,
                  exchange: Exchange | None = None) -> Any:
    """``f(*args)`` as a phase of the distributed run
    (:func:`compensate.parallel.driver.agreed`: a failure on any rank raises on
    every rank), where a NotStreamable / SegmentError on any rank raises
    :class:`StreamFallback` on every rank."""
    with _fallback():
        return agreed(transport, f, *args, exchange=exchange)


def fallback_gather(transport: Transport, f: Callable[..., Any], *args: Any) -> list[Any]:
    """Every rank's ``f(*args)``, gathered, as a phase of :func:`fallback_step`
    (:func:`compensate.parallel.driver.agreed_gather`: the phase boundary rides in
    the one ``allgather``)."""
    with _fallback():
        return agreed_gather(transport, f, *args)


@contextmanager
def _fallback() -> Iterator[None]:
    """A phase's failure that means "stream no further" (NotStreamable,
    SegmentError here, or status FALLBACK from another rank) as StreamFallback."""
    try:
        yield
    except (NotStreamable, SegmentError) as exc:
        raise StreamFallback(str(exc), isinstance(exc, ClocksDisagree)) from exc
    except RankFailed as exc:
        if exc.status in (FALLBACK, FALLBACK_CLOCKS):
            raise StreamFallback(exc.line, exc.status == FALLBACK_CLOCKS) from exc
        raise


class RankStream:
    """One rank's side of the streamed distributed run (module docstring)."""

    def __init__(self, defs: Definitions, transport: Transport, owner: dict[int, int],
                 platform: Platform, options: RunOptions, *, source: str = "",
                 outcome: FitOutcome | None = None,
                 alignment: ClockAlignment | None = None, ahead: Any = None) -> None:
        self.defs = defs
        self.transport = transport
        self.owner = owner
        self.mine = [loc for loc in defs.locations if owner[loc] == transport.rank]
        self.platform = platform
        self.engine_options = options.engine_options(outcome)
        self.source = source
        self.sg = Segmenter(defs, platform, source, options.eager_limit, options.strict)
        self.sg.cutter = ahead  # (the cut agreement: what its look-ahead found)
        # the processes' clock offsets (the ranks' clock pass's, or its first
        # estimate), added to the own chunks as they are read: the records carry
        # the aligned times (none to align for a copy, as in memory)
        self.sg.aligned = alignment is not None or options.bound == "none"
        offsets = alignment.offsets if alignment is not None else {}
        self.shift = {loc: offsets.get(defs.process_of(loc), 0) for loc in self.mine}
        self.run = Run(fit=outcome, resolution=defs.timer_resolution, segments=0,
                       clock_alignment=alignment if offsets else None)
        self.share = RankShare(transport, owner, self._step, self._evaluate)
        #: this rank's records and the ghost records its views held, over all segments
        #: (the summary's ``parallel``)
        self.info = {"records": 0, "ghost_records": 0}
        self.own_span: tuple[int, int] | None = None  # (as read)
        self.own_approx: tuple[int, int] | None = None
        self.own_aligned: tuple[int, int] | None = None
        #: a segment failed verification: nothing more is written (:meth:`segment`)
        self.failed = False

    def _step(self, f: Callable[..., Any], *args: Any) -> Any:
        return fallback_step(self.transport, f, *args)

    def _evaluate(self, f: Callable[..., Any], *args: Any,
                  exchange: Exchange | None = None) -> Any:
        return fallback_step(self.transport, f, *args, exchange=exchange)

    @staticmethod
    def step_of(transport: Transport) -> Callable[..., Any]:
        """:func:`fallback_step` on ``transport``."""
        return lambda f, *args: fallback_step(transport, f, *args)

    @staticmethod
    def gather_of(transport: Transport) -> Callable[..., list[Any]]:
        """:func:`fallback_gather` on ``transport``."""
        return lambda f, *args: fallback_gather(transport, f, *args)

    def _views(self, seg: dict[int, Events]) -> tuple[Segment, Trace, dict, dict]:
        """The segment ``seg`` of this rank's own locations with their context in
        front, as the segment step takes it (the engine's view: the own locations
        with their true kinds and the others' trimmed ghosts; matching's view: the
        ghosts sent as matching sees them: collective), this rank's own trace, the
        view's receives past a gap (:meth:`_past_gaps`) and the call structures the
        trimming found of the own locations (matching takes them)."""
        own = self.sg.segment(seg)
        nests: dict = {}
        view, index = complete_trimmed(self.defs, own.match.events, self.transport, self.owner,
                                       self.source, open_calls=True, one_call=True,
                                       nests=nests)
        engine = Trace(self.defs, {loc: own.engine.events.get(loc, ev)
                                   for loc, ev in view.events.items()}, self.source)
        return (Segment(engine, view, own.pins, own.context, own.references, index),
                own.engine, self._past_gaps(own.match, view, index), nests)

    def _past_gaps(self, own: Trace, view: Trace, index: dict[int, np.ndarray]
                   ) -> dict[int, np.ndarray]:
        """The receives of this rank's view that the look-ahead found past a gap on
        their channel (:meth:`Segmenter.past_gaps`; matching leaves them unpaired):
        its own (``own``: its segment with the context in front), and the ghosts'
        of ``view`` as their owners name them, at their positions in the trimmed
        ghost (``index``: the trimmed ghosts' original indices). One ``allgather``
        a segment, once the look-ahead found a channel with a gap. Collective."""
        found = self.sg.cutter.unclosed if self.sg.cutter is not None else None
        if found is None or not found.gaps:
            return {}
        out: dict[int, np.ndarray] = {}
        for part in self.transport.allgather(self.sg.past_gaps(own)):
            for loc, past in part.items():
                kept = index.get(loc)
                if loc not in view.events:
                    continue
                if kept is None:  # (its own, or a ghost sent whole: the same numbers)
                    out[loc] = past
                    continue
                at = np.searchsorted(kept, past)
                hit = at < kept.size
                hit[hit] = kept[at[hit]] == past[hit]
                if hit.any():  # (a receive from another rank's sender is not here)
                    out[loc] = at[hit]
        return out

    def observe(self, seg: dict[int, Events], records: int) -> Observations:
        """The transfers of one segment (``records`` records in all) whose receive
        this rank owns, as the one-process fit pass observes them
        (:func:`compensate.pipeline.fit_pass`, :mod:`compensate.parallel.fit`):
        this rank's view matched, then the context carried on. Collective."""
        if not records:
            return Observations.concat([])
        return self._matched(seg, lambda segment, matching: observe_transfers(
            segment.engine, matching, self.platform, set(self.mine)))

    def clock_bounds(self, seg: dict[int, Events], records: int, guess: dict[int, int]
                     ) -> ClockBounds:
        """The clock pass's bounds of one segment (``records`` records in all; its
        records moved by ``guess``): of the orders whose later record this rank
        owns, as the one-process pass gathers them
        (:class:`~compensate.pipeline.run.ClockBounds`), the context carried on.
        Collective."""
        found = ClockBounds()
        if records:
            self._matched(seg, lambda segment, matching: found.add(
                segment.match, matching, seg, guess, set(self.mine)))
        return found

    def gaps_and_transfer(self, seg: dict[int, Events], records: int, gaps: KindGaps
                          ) -> float | None:
        """``--overhead estimate``'s look at one segment (``records`` records in
        all), as the one-process pass takes it
        (:func:`compensate.pipeline.run.estimate_pass`): the gaps of this rank's
        own records added to ``gaps``, and the shortest observed transfer of the
        messages whose receive it owns (NaN where one of its receives or
        collective exits is stamped before what it waits for). Collective."""
        if not records:
            return None
        for loc, ev in seg.items():
            gaps.add(loc, ev)
        return self._matched(seg, lambda segment, matching: transfer_of(
            segment.match, matching, set(self.mine)))

    def _matched(self, seg: dict[int, Events], read: Callable[[Segment, Any], Any]) -> Any:
        """``read(segment, matching)`` of this rank's view of one segment, matched,
        then the context carried on (a pass that compensates nothing: the fit's
        observations, the clock bounds, the estimate's transfers); every step a phase of
        :func:`fallback_step`. Collective."""
        segment, _, past, nests = self._step(self._views, seg)
        matching = self._step(lambda: self.sg.match(segment.match, past, nests))
        out = self._step(read, segment, matching)
        self._step(lambda: self.sg.advance(seg, None, None, matching))
        release_memory()
        return out

    def _whole_records(self, v: Verification | None) -> None:
        """Rank 0's examples ``v`` of a segment that failed verification naming the
        records as the whole trace numbers them: each rank maps those of its own
        locations (:meth:`Segmenter.whole_index`). Collective."""
        t = self.transport
        named = t.allgather([p for x in v.examples for p in records_named(x)]
                            if t.rank == 0 else None)[0]
        mine = {(loc, r): self.sg.whole_index(loc, r) for loc, r in named
                if self.owner.get(loc) == t.rank}
        whole = {k: x for part in t.allgather(mine) for k, x in part.items()}
        if t.rank == 0:
            v.examples = [renumber(x, lambda loc, r: whole.get((loc, r), r))
                          for x in v.examples]

    def segment(self, seg: dict[int, Events], records: int,
                write: Callable[[int, Events], None],
                advance: Callable[[int], None] | None = None,
                splitter: Cutter | None = None) -> None:
        """Compensate, verify and write this rank's part ``seg`` of one segment of
        ``records`` records in all. From the first segment that fails verification
        (on any rank) on, nothing is written, and the rest is still compensated and
        verified, as in one process."""
        t, sg, run = self.transport, self.sg, self.run
        firsts = t.allgather(min((int(ev.time[0]) for ev in seg.values() if len(ev)),
                                 default=None))
        start = min((x for x in firsts if x is not None), default=None)
        if start is None:
            return
        run.segments += 1
        run.largest_segment = max(run.largest_segment, records)
        if sg.t0 is None:
            sg.t0 = start
        if self.engine_options.bound != "none":  # (a copy is exact at any span)
            self._step(check_span, seg, sg.t0, self.defs.timer_resolution, self.source,
                       sg.done)
        if advance is not None and firsts[t.rank] is not None and splitter is not None:
            advance(sg.watermark(splitter, seg, firsts[t.rank]))
        segment, own, past, nests = self._step(self._views, seg)
        self.info["records"] += sum(len(ev) for ev in seg.values())
        self.info["ghost_records"] += segment.match.record_count - own.record_count
        result, _ = run_segment(segment, self.share, self.platform, self.engine_options,
                                sg.t0, lambda mtrace: sg.match(mtrace, past, nests),
                                errors=SegmentError)
        if not t.allgather(result.verification.ok if t.rank == 0 else True)[0]:
            self._whole_records(result.verification if t.rank == 0 else None)
            self.failed = True
        if t.rank == 0:
            run.add(result)
        self._step(self._hand_over, segment, seg, result.times,
                   None if self.failed else write)
        run.records += records
        self._step(lambda: sg.advance(seg, result.times.values, result.times.written,
                                      result.matching))
        release_memory()

    def _hand_over(self, segment: Segment, seg: dict[int, Events], times,
                   write: Callable[[int, Events], None] | None) -> None:
        """Write this rank's records of the segment (``write`` None: a segment
        failed verification, nothing is written), and widen its spans."""
        from compensate.pipeline.totals import span

        for loc, ev in output_events(segment, list(times.written), times).items():
            if write is not None:
                write(loc, ev)
            m, w = seg[loc].time, times.written[loc]
            shift = self.shift.get(loc, 0)
            self.own_span = span(self.own_span, int(m[0]) - shift, int(m[-1]) - shift)
            self.own_approx = span(self.own_approx, int(w[0]), int(w[-1]))
            self.own_aligned = span(self.own_aligned, int(m[0]), int(m[-1]))

    def finish(self) -> Run | None:
        """Rank 0: the run's :class:`~compensate.pipeline.Run` (spans over every
        rank); None elsewhere. Collective."""
        from compensate.pipeline.totals import span

        spans = self.transport.allgather((self.own_span, self.own_approx, self.own_aligned))
        nesting = self.transport.allgather(self.sg.nesting_first)
        if self.transport.rank != 0:
            return None
        run = self.run
        for m, a, at in spans:
            if m is not None:
                run.measured_span = span(run.measured_span, *m)
                run.approximated_span = span(run.approximated_span, *a)
                run.aligned_span = span(run.aligned_span, *at)
        run.stats.records = run.records
        run.locations = run.stats.locations = len(self.defs.locations)
        # every rank's view holds a location that does not nest whole, so every rank
        # finds the same first one; its index counts the earlier segments' records
        # only on its owner (Segmenter.match)
        run.nesting_first = next((n for r, n in enumerate(nesting)
                                  if n is not None and self.owner[n["location"]] == r), None)
        return run


def stream_rank(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                cuts: list[tuple[int | None, int]], transport: Transport,
                owner: dict[int, int], platform: Platform, options: RunOptions,
                write: Callable[[int, Events], None], *,
                outcome: FitOutcome | None = None,
                advance: Callable[[int], None] | None = None, source: str = "",
                info: dict | None = None,
                alignment: ClockAlignment | None = None, ahead: Any = None) -> Run | None:
    """One rank's whole streamed run over the segments ``cuts`` (the same on every
    rank: :func:`compensate.parallel.cutting.agreed_cuts`, or a
    :class:`~compensate.parallel.cutting.CutAgreement` that agrees each cut as the
    run comes to it, whose reading ``own_chunks`` then takes over:
    :class:`~compensate.parallel.reading.OneRead`) of its own locations' chunks;
    rank 0 returns the
    :class:`~compensate.pipeline.Run` (the one-process streamed run's), the others
    None. ``outcome``: the fit of ``--bound fitted`` (:func:`observe_rank`). Raises
    :class:`StreamFallback` on every rank where the one-process command falls back
    to the in-memory path. ``info`` (if given) receives this rank's records and
    ghost records over all segments. ``alignment``: the processes' clock offsets
    the own chunks were moved by (:func:`compensate.pipeline.run.aligned_chunks`).
    ``ahead``: the :class:`~compensate.parallel.cutting.CutAgreement` the cuts
    come from, whose look-ahead names the receives past a gap on their channel
    (its ``unclosed``), which the segments' matching leaves unpaired."""
    rs = RankStream(defs, transport, owner, platform, options, source=source,
                    outcome=outcome, alignment=alignment, ahead=ahead)
    splitter = OwnSplitter(defs, own_chunks)
    for cut, records in cuts:
        seg = rs.share.step(splitter.split, cut)
        rs.segment(seg, records, write, advance, splitter.cutter)
        seg = None
    if info is not None:
        info.update(rs.info)
    return rs.finish()


def align_rank(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
               cuts: Iterable[tuple[int | None, int]], transport: Transport,
               owner: dict[int, int], platform: Platform, options: RunOptions, *,
               guess: dict[int, int], source: str = "", ahead: Any = None) -> ClockAlignment:
    """The clock pass of the distributed streamed run, where the processes' clocks
    disagree (:func:`compensate.pipeline.run.clock_pass`): every rank goes over
    the segments ``cuts`` (as :func:`stream_rank` takes them) of its own chunks,
    moved by the first estimate ``guess`` so that the cuts can be found, and
    bounds the offsets from the orders whose later record it owns; the ranks merge
    their bounds (one ``allgather``) into the one-process pass's offsets, on every
    rank. Raises :class:`StreamFallback` on every rank where the one-process
    command falls back to the in-memory path. ``ahead``: as for :func:`stream_rank`."""
    rs = RankStream(defs, transport, owner, platform, options, source=source,
                    alignment=ClockAlignment(0, 0, guess), ahead=ahead)
    rs.sg.gap_shift = shift_of(defs, guess)  # (the gap rule on the times as read)
    splitter = OwnSplitter(defs, own_chunks)
    found = ClockBounds()
    for cut, records in cuts:
        seg = rs.share.step(splitter.split, cut)
        found.merge(rs.clock_bounds(seg, records, guess))
        seg = None
    total = ClockBounds()
    for part in transport.allgather(found):
        total.merge(part)
    return total.alignment()


def observe_rank(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                 cuts: list[tuple[int | None, int]], transport: Transport,
                 owner: dict[int, int], platform: Platform, options: RunOptions, *,
                 source: str = "", alignment: ClockAlignment | None = None,
                 ahead: Any = None) -> FitOutcome:
    """``--bound fitted``, first pass of the distributed streamed run: every rank
    observes, segment by segment (``cuts``, as :func:`stream_rank` takes them), the
    transfers whose
    receive it owns in its own locations' chunks, and the fit is reduced across
    the ranks (:func:`compensate.parallel.fit.reduced_outcome`): the same outcome
    on every rank as the one-process fit pass's (:func:`compensate.pipeline.fit_pass`).
    Raises :class:`StreamFallback` on every rank where the one-process command
    falls back to the in-memory path. ``alignment``, ``ahead``: as for
    :func:`stream_rank`."""
    rs = RankStream(defs, transport, owner, platform, options, source=source,
                    alignment=alignment, ahead=ahead)
    splitter = OwnSplitter(defs, own_chunks)
    observed = []
    for cut, records in cuts:
        seg = rs.share.step(splitter.split, cut)
        observed.append(rs.observe(seg, records))
        seg = None
    return reduced_outcome(transport, Observations.concat(observed), platform,
                           rs.share.step)
