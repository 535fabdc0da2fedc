"""Streaming within a rank: the distributed run segment by segment (issue #21,
docs/parallel.md "Streaming within a rank").

A rank holds one segment of its own locations at a time instead of its whole
share. The segments' cuts are agreed by the ranks from their own locations
(:func:`compensate.parallel.cutting.agreed_cuts`, the command's way), or are the
one-process streamed run's (:func:`cut_times`: one process runs the one-process
cutter over the whole trace's columns; the tests' reference). A cut is safe
for the whole trace (nothing crosses it: no message in flight, no collective with
members on both sides, no open request or call around a send), so each segment
is a closed problem on every rank: of each channel both ends' messages and every
collective instance whole. Then every rank, per segment
(:class:`RankStream`):

1. splits its own locations at the cut (:func:`own_segments`, the cutter's own
   split, METRIC samples held back for their reference record as in one
   process: a METRIC location and its reference are in one process, hence on one
   rank) and puts each location's context in front (the one-process
   :class:`~compensate.engine.stream._Segmenter`: open calls, last record, R1
   carry, carried thread links; all inside one process);
2. sends the others the trimmed ghosts (:func:`compensate.parallel.ghosts.complete_trimmed`)
   of the segment *as matching sees it*: the last context record has the neutral
   kind matching ignores (:data:`compensate.engine.stream._NEUTRAL`), so the context
   in front of a location is open Enters (closed in the segment) and one record no
   rule of another process reads, and a simple location stays simple
   (:mod:`compensate.parallel.trim`); the engine's view has the rank's own
   locations with their true kinds;
3. matches its view, runs the forward replay with its own context pinned
   (:func:`compensate.engine.approximate` with ``pins`` and the
   :class:`~compensate.parallel.exchange.Exchange`: a pinned record another rank
   reads is sent as a known value), maps its METRIC samples, rounds from each
   location's floor, verifies its own dependencies (``skip`` = the context), and
   hands its own records to ``write`` (its part of the output);
4. rank 0 sums the statistics, matching counts and verification over the
   segments as :func:`compensate.engine.stream.compensate_stream` does
   (:class:`~compensate.engine.stream.StreamResult`).

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
has (:func:`fitted_options`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from compensate.engine import EngineOptions, Stats, approximate, rounded_times
from compensate.engine.fit import FitOutcome, Observations, observe_transfers
from compensate.engine.metrics import map_metric_samples
from compensate.engine.stream import (
    SEGMENT_RECORDS,
    NotStreamable,
    SegmentError,
    StreamResult,
    _add_stats,
    _add_verification,
    _CountingCutter,
    _Cutter,
    _Segmenter,
    _span,
    _sum_counts,
    release_memory,
)
from compensate.model import BUFFER_FLUSH, Definitions, Events, Trace, TraceError
from compensate.parallel.cutting import agreed_cuts, share_of
from compensate.parallel.cutting import chunk_records as cut_chunk_records
from compensate.parallel.driver import FALLBACK, RankFailed, agreed
from compensate.parallel.exchange import Exchange
from compensate.parallel.fit import reduced_outcome
from compensate.parallel.ghosts import complete_trimmed
from compensate.parallel.transport import Transport
from compensate.parallel.trim import local_counts, reduced_matching
from compensate.parallel.verification import verify_rank
from compensate.platform import Platform


class StreamFallback(Exception):
    """Some rank cannot stream (the one-process command would fall back to the
    in-memory path): every rank raises it, and the caller runs the whole-share path."""


def cut_times(defs: Definitions, chunks: Iterable[dict[int, Events]],
              segment_records: int = SEGMENT_RECORDS, group: int = 1,
              ) -> list[tuple[int | None, int]]:
    """The one-process streamed run's segments, ``(cut, records)`` each (the
    reference the tests hold the distributed run to; the command's ranks agree on
    their own cuts, :mod:`compensate.parallel.cutting`): the segment
    holds the records measured before ``cut`` (None: every record left), METRIC
    samples held back as the cutter holds them. ``chunks``: the whole trace (no
    payload needed), read in chunks ``group`` times smaller than the one-process
    run's: the cutter looks for cuts only after every ``group``-th, where the
    one-process run looks after each of its chunks (the same records taken, the
    same cuts; the reader's transient a ``group``-th). Raises
    :class:`NotStreamable` as the one-process run does."""
    cutter = _CountingCutter(defs, segment_records)  # (the columns the search reads)
    out: list[tuple[int | None, int]] = []
    k = 0
    for k, chunk in enumerate(chunks, 1):
        for seg in cutter.add(chunk, cut=k % group == 0):
            out.append((cutter.last_cut, sum(len(ev) for ev in seg.values())))
    if k % group:  # the last one-process chunk, shorter: its look for a cut
        for seg in cutter.add({}):
            out.append((cutter.last_cut, sum(len(ev) for ev in seg.values())))
    rest = cutter.rest()
    if rest:
        out.append((None, sum(len(ev) for ev in rest.values())))
    return out


def fitted_options(outcome: FitOutcome, collective_exit: str = "uniform") -> EngineOptions:
    """The engine options of the segments under ``--bound fitted`` given the fit's
    ``outcome`` (:func:`observe_rank`), as the one-process command hands them to its
    second pass: the fitted model, or, where there is no fit, the lower bound with
    fitted links."""
    fit = outcome.fit
    return EngineOptions(bound="fitted" if fit else "lower", collective_exit=collective_exit,
                         network_time=fit, fit_links=fit is None, link_latency=outcome.links)


class _OwnSplitter:
    """This rank's own locations, split at the broadcast cut times (the cutter's own
    :meth:`~compensate.engine.stream._Cutter._split`: the same segments as in one
    process, restricted to these locations)."""

    def __init__(self, defs: Definitions, chunks: Iterable[dict[int, Events]]) -> None:
        self.cutter = _Cutter(defs, 1 << 62)  # never searches: it is given the cuts
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
        return c._split(merged, cut, None, None, None)


def own_segments(defs: Definitions, chunks: Iterable[dict[int, Events]],
                 cuts: list[tuple[int | None, int]]) -> Iterator[dict[int, Events]]:
    """This rank's part of each segment of ``cuts`` (:func:`cut_times`), from the
    chunks of its own locations (``read_chunks(..., locations=mine)``)."""
    splitter = _OwnSplitter(defs, chunks)
    for cut, _ in cuts:
        yield splitter.split(cut)


def fallback_step(transport: Transport, f: Callable[..., Any], *args: Any,
                  exchange: Exchange | None = None) -> Any:
    """``f(*args)`` as a phase of the distributed run
    (:func:`compensate.parallel.driver.agreed`: a failure on any rank raises on
    every rank), where a NotStreamable / SegmentError on any rank raises
    :class:`StreamFallback` on every rank."""
    try:
        return agreed(transport, f, *args, exchange=exchange)
    except (NotStreamable, SegmentError) as exc:
        raise StreamFallback(str(exc)) from exc
    except RankFailed as exc:
        if exc.status == FALLBACK:
            raise StreamFallback(exc.line) from exc
        raise


def _guard(step: Callable[..., Any]) -> Callable[..., Any]:
    """``step`` whose TraceError (a segment's record numbers) is a SegmentError."""
    def run(*args: Any) -> Any:
        try:
            return step(*args)
        except TraceError as exc:
            raise SegmentError(str(exc)) from exc
    return run


class RankStream:
    """One rank's side of the streamed distributed run (module docstring)."""

    def __init__(self, defs: Definitions, transport: Transport, owner: dict[int, int],
                 platform: Platform, options: EngineOptions, *, source: str = "",
                 eager_limit: int | None = None, strict: bool = False) -> None:
        self.defs = defs
        self.transport = transport
        self.owner = owner
        self.mine = [loc for loc in defs.locations if owner[loc] == transport.rank]
        self.platform = platform
        self.options = options
        self.source = source
        self.sg = _Segmenter(defs, platform, source, eager_limit, strict)
        self.result = StreamResult(Stats(), _verification(), {})
        self.ok = True
        #: this rank's records and the ghost records its views held, over all segments
        #: (the summary's ``parallel``)
        self.info = {"records": 0, "ghost_records": 0}
        self.own_span: tuple[int, int] | None = None
        self.own_approx: tuple[int, int] | None = None

    def _step(self, f: Callable[..., Any], *args: Any, exchange: Exchange | None = None) -> Any:
        return fallback_step(self.transport, f, *args, exchange=exchange)

    @staticmethod
    def step_of(transport: Transport) -> Callable[..., Any]:
        """:func:`fallback_step` on ``transport``."""
        return lambda f, *args: fallback_step(transport, f, *args)

    def _views(self, seg: dict[int, Events]) -> tuple[Trace, Trace, Trace, dict, dict]:
        """The segment ``seg`` of this rank's own locations with their context in
        front (the engine's trace), this rank's view for matching (with the others'
        trimmed ghosts: collective), the engine's view (the own locations with their
        true kinds, the ghosts), the pins and the ghosts' index map."""
        trace, mtrace, pins = self.sg.traces(seg)
        view, index = complete_trimmed(self.defs, mtrace.events, self.transport, self.owner,
                                       self.source, open_calls=True)
        engine = Trace(self.defs, {loc: trace.events.get(loc, ev)
                                   for loc, ev in view.events.items()}, self.source)
        return trace, view, engine, pins, index

    def observe(self, seg: dict[int, Events], records: int) -> Observations:
        """The transfers of one segment (``records`` records in all) whose receive
        this rank owns, as the one-process fit pass observes them
        (:func:`compensate.engine.stream.fit_pass`, :mod:`compensate.parallel.fit`):
        this rank's view matched, then the context carried on. Collective."""
        if not records:
            return Observations.concat([])
        _, mview, eview, _, _ = self._step(self._views, seg)
        matching = self._step(lambda: self.sg.match(mview))
        obs = self._step(observe_transfers, eview, matching, self.platform, set(self.mine))
        self._step(lambda: self.sg.advance(seg, None, None, matching))
        release_memory()
        return obs

    def segment(self, seg: dict[int, Events], records: int,
                write: Callable[[int, Events], None],
                advance: Callable[[int], None] | None = None,
                splitter: _Cutter | None = None) -> bool:
        """Compensate, verify and write this rank's part ``seg`` of one segment of
        ``records`` records in all. False (on every rank) once a segment fails
        verification: the run stops there, as in one process."""
        t, sg, opts = self.transport, self.sg, self.options
        out = self.result
        firsts = t.allgather(min((int(ev.time[0]) for ev in seg.values() if len(ev)),
                                 default=None))
        start = min((x for x in firsts if x is not None), default=None)
        if start is None:
            return True
        out.segments += 1
        out.largest_segment = max(out.largest_segment, records)
        if sg.t0 is None:
            sg.t0 = start
        own_start = firsts[t.rank]
        if advance is not None and own_start is not None and splitter is not None:
            advance(sg.watermark(splitter, seg, own_start))

        trace, mview, eview, pins, index = self._step(self._views, seg)
        own_n = sum(len(ev) for ev in seg.values())
        self.info["records"] += own_n
        self.info["ghost_records"] += mview.record_count - sum(
            len(ev) for loc, ev in trace.events.items())
        matching = self._step(lambda: sg.match(mview))
        mine = [loc for loc in eview.events if self.owner[loc] == t.rank]
        approx = None
        if opts.bound == "none":
            stats = Stats()
        else:
            exchange = Exchange(t, self.owner, index)
            approx, _, stats = self._step(_guard(lambda: approximate(
                eview, self.platform, opts, matching, t0=sg.t0, pins=pins,
                exchange=exchange)), exchange=exchange)
            if not gc.isenabled():  # (the graph's cycles: driver.run_rank)
                gc.collect()

        def own_times():
            values, written, times, sizes = {}, {}, {}, {}
            if approx is None:
                for loc in mine:
                    ev = trace.events[loc]
                    p = len(pins[loc][0]) if loc in pins else 0
                    values[loc] = (ev.time[p:] - sg.t0).astype(np.float64)
                    written[loc] = ev.time[p:]
            else:
                part = {loc: approx[loc] for loc in mine}
                for loc, x in part.items():
                    if np.isnan(x).any():
                        i = int(np.flatnonzero(np.isnan(x))[0])
                        raise RuntimeError(f"location {loc}, record {i}: no time computed "
                                           f"on rank {t.rank}")
                own = Trace(self.defs, {loc: trace.events[loc] for loc in mine}, self.source)
                map_metric_samples(own, part, sg.t0, pins, sg.references(seg))
                for loc in mine:
                    p = len(pins[loc][0]) if loc in pins else 0
                    values[loc] = part[loc][p:]
                    if not len(seg.get(loc, ())):
                        written[loc] = np.zeros(0, np.int64)
                        continue
                    floor = sg.ctx[loc].records()[-1][3] if p else None
                    written[loc], _ = rounded_times(seg[loc], values[loc], sg.t0, floor)
            for loc in mine:
                ev = trace.events[loc]
                p = len(pins[loc][0]) if loc in pins else 0
                ctx_times = [r[3] for r in sg.ctx[loc].records()] if p else []
                times[loc] = np.concatenate([np.array(ctx_times, dtype=np.int64),
                                             written[loc]])
                flush = ev.kind == BUFFER_FLUSH
                if opts.bound != "none" and np.any(flush):
                    size = ev.size.copy()
                    size[flush] = times[loc][flush]
                    sizes[loc] = size
            return values, written, times, sizes

        values, written, times, sizes = self._step(own_times)
        skip = {loc: len(pins[loc][0]) for loc in pins}
        _, check = verify_rank(t, self.owner, eview, matching, times,
                               step=lambda f, *a: self._step(f, *a), index=index, skip=skip)
        counts = self._step(local_counts, mview, matching, set(mine))
        counts["records"] = own_n
        every = t.allgather(counts)
        ok = True
        if t.rank == 0:
            reported = reduced_matching(matching, every)
            _add_verification(out.verification, check)
            stats.messages = reported.counts()["messages"]
            stats.unmatched_sends = reported.unmatched_sends
            stats.collective_instances = len(matching.instances)
            stats.unknown_collective_ops = matching.unknown_ops
            if approx is not None:
                stats.p2p_cases["synchronous"] = sum(d["synchronous_rules"] for d in every)
            _add_stats(out.stats, stats)
            _sum_counts(out.counts, reported.counts())
            ok = check.ok
        self.ok = t.allgather(ok)[0]
        if not self.ok:
            return False

        def hand_over():
            for loc in mine:
                ev = seg.get(loc)
                if ev is None or not len(ev):
                    continue
                p = len(pins[loc][0]) if loc in pins else 0
                size = sizes[loc][p:] if loc in sizes else None
                write(loc, ev.with_time(written[loc], size))
                self.own_span = _span(self.own_span, int(ev.time[0]), int(ev.time[-1]))
                w = written[loc]
                self.own_approx = _span(self.own_approx, int(w[0]), int(w[-1]))

        self._step(hand_over)
        out.records += records
        self._step(lambda: sg.advance(seg, values, written, matching))
        release_memory()
        return True

    def finish(self) -> StreamResult | None:
        """Rank 0: the run's :class:`StreamResult` (spans over every rank); None
        elsewhere. Collective."""
        spans = self.transport.allgather((self.own_span, self.own_approx))
        nesting = self.transport.allgather(self.sg.nesting_first)
        if self.transport.rank != 0:
            return None
        out = self.result
        for m, a in spans:
            if m is not None:
                out.measured_span = _span(out.measured_span, *m)
                out.approximated_span = _span(out.approximated_span, *a)
        out.stats.records = out.records
        out.locations = out.stats.locations = len(self.defs.locations)
        # every rank's view holds a location that does not nest whole, so every rank
        # finds the same first one; its index counts the earlier segments' records
        # only on its owner (_Segmenter.match)
        out.nesting_first = next((n for r, n in enumerate(nesting)
                                  if n is not None and self.owner[n["location"]] == r), None)
        return out


def _verification():
    from compensate.verify import Verification
    return Verification()


def stream_rank(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                cuts: list[tuple[int | None, int]], transport: Transport,
                owner: dict[int, int], platform: Platform, options: EngineOptions,
                write: Callable[[int, Events], None], *,
                advance: Callable[[int], None] | None = None, source: str = "",
                eager_limit: int | None = None, strict: bool = False,
                info: dict | None = None) -> StreamResult | None:
    """One rank's whole streamed run over the segments ``cuts`` (:func:`cut_times`,
    the same on every rank) of its own locations' chunks; rank 0 returns the
    :class:`StreamResult` (the one-process streamed run's), the others None.
    Raises :class:`StreamFallback` on every rank where the one-process command
    falls back to the in-memory path. ``info`` (if given) receives this rank's
    records and ghost records over all segments."""
    rs = RankStream(defs, transport, owner, platform, options, source=source,
                    eager_limit=eager_limit, strict=strict)
    splitter = _OwnSplitter(defs, own_chunks)
    for cut, records in cuts:
        seg = rs._step(splitter.split, cut)
        if not rs.segment(seg, records, write, advance, splitter.cutter):
            break
        seg = None
    if info is not None:
        info.update(rs.info)
    return rs.finish()


def observe_rank(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                 cuts: list[tuple[int | None, int]], transport: Transport,
                 owner: dict[int, int], platform: Platform, *, source: str = "",
                 eager_limit: int | None = None, strict: bool = False) -> FitOutcome:
    """``--bound fitted``, first pass of the distributed streamed run: every rank
    observes, segment by segment (``cuts``, :func:`cut_times`), the transfers whose
    receive it owns in its own locations' chunks, and the fit is reduced across
    the ranks (:func:`compensate.parallel.fit.reduced_outcome`): the same outcome
    on every rank as the one-process fit pass's
    (:func:`compensate.engine.stream.fit_pass`). Raises :class:`StreamFallback` on
    every rank where the one-process command falls back to the in-memory path."""
    rs = RankStream(defs, transport, owner, platform, EngineOptions(bound="lower"),
                    source=source, eager_limit=eager_limit, strict=strict)
    splitter = _OwnSplitter(defs, own_chunks)
    observed = []
    for cut, records in cuts:
        seg = rs._step(splitter.split, cut)
        observed.append(rs.observe(seg, records))
        seg = None
    return reduced_outcome(transport, Observations.concat(observed), defs, platform,
                           rs._step)


def stream_in_threads(trace: Trace, platform: Platform, options: EngineOptions, size: int,
                      segment_records: int = SEGMENT_RECORDS, chunk_records: int = 1 << 16,
                      eager_limit: int | None = None, fit: list | None = None,
                      agreed: bool = False) -> tuple[StreamResult, dict[int, Events]]:
    """:func:`stream_rank` on ``size`` thread ranks of this process (tests): rank 0's
    result and every location's output records. ``fit``, a list: the ``--bound
    fitted`` run (of ``options`` only the collective exit counts), whose fit is
    :func:`observe_rank`'s; the list receives the fit's outcome. ``agreed``: the
    ranks agree on the cuts from their own locations, as the command's ranks do
    (:func:`compensate.parallel.cutting.agreed_cuts`), instead of taking the
    one-process run's (:func:`cut_times`)."""
    from compensate.engine.stream import trace_chunks
    from compensate.parallel.ownership import owners
    from compensate.parallel.transport import run_threads

    defs = trace.definitions
    one = None if agreed else cut_times(defs, trace_chunks(trace, chunk_records),
                                        segment_records)
    owner = owners(defs, list(trace.events), size)

    def rank(t: Transport) -> tuple[StreamResult | None, dict[int, list[Events]], Any]:
        mine = Trace(defs, {loc: ev for loc, ev in trace.events.items()
                            if owner[loc] == t.rank}, trace.source)
        cuts = one
        if cuts is None:
            share = share_of(list(mine.events), {loc: len(ev) for loc, ev in
                                                 trace.events.items()})
            cuts = agreed_cuts(defs, trace_chunks(mine, cut_chunk_records(
                segment_records, share, chunk_records)), t, list(mine.events), share,
                segment_records, RankStream.step_of(t))
        opts, outcome = options, None
        if fit is not None:
            outcome = observe_rank(defs, trace_chunks(mine, chunk_records), cuts, t, owner,
                                   platform, source=trace.source, eager_limit=eager_limit)
            opts = fitted_options(outcome, options.collective_exit)
        got: dict[int, list[Events]] = {}
        res = stream_rank(defs, trace_chunks(mine, chunk_records), cuts, t, owner, platform,
                          opts, lambda loc, ev: got.setdefault(loc, []).append(ev),
                          eager_limit=eager_limit)
        return res, got, outcome

    results = run_threads(size, rank)
    if fit is not None:
        fit[:] = [results[0][2]]
    events: dict[int, Events] = {}
    for _, got, _ in results:
        for loc, parts in got.items():
            events[loc] = Events.concat(parts)
    return results[0][0], events
