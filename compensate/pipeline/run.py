"""The ways of running, each a loop over :func:`compensate.pipeline.segment.run_segment`:
the whole trace in memory (one segment), or streamed (segments cut at safe cuts,
:mod:`compensate.pipeline.cuts`, each with its context,
:mod:`compensate.pipeline.context`). ``--bound fitted`` first fits the network
(R2f): in memory from the matched trace, streamed in a pass of its own over the
same segments (:func:`fit_pass`). The distributed run
(:mod:`compensate.parallel`) runs the same segment step on each rank's share.

Every way ends in a :class:`Run`, the totals the summary and the refusal policy
(:mod:`compensate.pipeline.outcome`) read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from itertools import chain

import numpy as np

import compensate.pipeline.totals as totals
from compensate.engine import Stats
from compensate.engine.fit import (
    FitOutcome,
    Observations,
    clamp_check,
    observe_transfers,
    outcome_of,
)
from compensate.engine.span import check_span
from compensate.errors import renumber
from compensate.matching import Matching, match
from compensate.matching.clocks import (
    ClockAlignment,
    align_clocks,
    bounds,
    chained_offsets,
    counted,
    first_offsets,
    normalised,
    orders,
    shifted_times,
)
from compensate.model import Definitions, Events, Trace, TraceError
from compensate.overhead import KindGaps, ShortestTransfer, transfer_of
from compensate.pipeline.context import ClocksDisagree, Segmenter
from compensate.pipeline.cuts import (
    SEGMENT_RECORDS,
    Cutter,
    SegmentError,
    cut_segments,
)
from compensate.pipeline.memory import (
    OutOfMemory,
    available_memory,
    gib,
    memory_guard,
    release_memory,
    room_for,
)
from compensate.pipeline.options import RunOptions
from compensate.pipeline.segment import (
    WHOLE,
    Segment,
    SegmentResult,
    Share,
    output_events,
    run_segment,
)
from compensate.pipeline.unclosed import Unclosed
from compensate.platform import Platform
from compensate.verify import Verification


@dataclass
class Run:
    """What a run did, summed over its segments (and ranks): the engine's
    statistics, the verification, the matching's counts, records and locations,
    the measured and approximated spans in ticks, and the first Enter/Leave that
    does not nest. An in-memory run also holds the approximated ``trace`` and its
    ``matching``; a streamed run counts its ``segments``."""

    stats: Stats = field(default_factory=Stats)
    verification: Verification = field(default_factory=Verification)
    counts: dict = field(default_factory=dict)
    fit: FitOutcome | None = None
    records: int = 0
    locations: int = 0
    measured_span: tuple[int, int] | None = None
    approximated_span: tuple[int, int] | None = None
    #: the measured span with the processes' clocks aligned (:attr:`clock_alignment`):
    #: what the compensated span is compared with
    aligned_span: tuple[int, int] | None = None
    nesting_first: dict | None = None
    resolution: int = 1
    segments: int | None = None  # (None: not streamed)
    #: processes whose clocks were aligned to their messages (None: none needed)
    clock_alignment: ClockAlignment | None = None
    largest_segment: int = 0
    trace: Trace | None = None
    matching: Matching | None = None

    def add(self, result: SegmentResult) -> None:
        """Take in one segment's statistics, verification and counts."""
        totals.add(self.stats, result.stats)
        if result.verification is not None:
            self.verification.add(result.verification)
        totals.add_counts(self.counts, result.counts)

    def spans(self, measured: np.ndarray, written: np.ndarray,
              aligned: np.ndarray | None = None) -> None:
        """Widen the spans by one location's measured (as read), written and aligned
        (None: as read) times."""
        if len(measured):
            self.measured_span = totals.span(self.measured_span, int(measured[0]),
                                             int(measured[-1]))
            self.approximated_span = totals.span(self.approximated_span, int(written[0]),
                                                 int(written[-1]))
            at = measured if aligned is None else aligned
            self.aligned_span = totals.span(self.aligned_span, int(at[0]), int(at[-1]))

    @property
    def nesting(self) -> dict:
        """The summary's ``nesting``: the counts and the first one."""
        return dict(self.counts.get("nesting", {}), first=self.nesting_first)


def in_memory(trace: Trace, platform: Platform | None, options: RunOptions,
              progress: Callable[[int], None] | None = None,
              phase: Callable[[str], None] | None = None) -> Run:
    """match -> (fit) -> compensate -> verify of a whole trace in memory. ``phase``
    hears what a long step is doing, ``progress`` the engine's records done."""
    if phase:
        phase(f"matching {trace.record_count:,} records ...")
    with memory_guard("matching"):  # (a MemoryError: one line, exit 3)
        matching = match(trace, eager_limit=options.eager_limit, strict=options.strict)
        measured, alignment = trace, None
        aligned = (align_clocks(trace, matching.table, matching.instances)
                   if options.bound != "none" else None)
        if aligned is not None:  # receives before their sends: one clock per process
            trace, alignment = aligned
            matching = match(trace, eager_limit=options.eager_limit, strict=options.strict)
    plat = platform or Platform(0.0)
    outcome = None
    if options.fits:  # R2f: fit the network to the observed transfers
        from compensate.engine.fit import try_fit
        if phase:
            phase("fitting the network to the observed transfers ...")
        with memory_guard("fitting the network"):
            outcome = try_fit(trace, matching, plat)
    with memory_guard("compensating"):
        result, _ = run_segment(Segment.whole(trace), WHOLE, plat,
                                options.engine_options(outcome), None, lambda _: matching,
                                progress)
        rejected = clamp_check(outcome, result.stats.p2p_cases, plat.network)
        if rejected is not None:  # clamped on most uses: no model of this network
            if phase:
                phase("the fit was clamped on most of its uses; compensating again ...")
            outcome = rejected
            result, _ = run_segment(Segment.whole(trace), WHOLE, plat,
                                    options.engine_options(outcome), None,
                                    lambda _: matching, progress)
        run = whole_run(trace, result, outcome, measured)
        run.clock_alignment = alignment
        return run


def whole_run(trace: Trace, result: SegmentResult, outcome: FitOutcome | None,
              measured: Trace | None = None) -> Run:
    """The :class:`Run` of a whole trace evaluated as one segment; ``measured``: the
    trace as read, where ``trace`` has its clocks aligned (its measured span)."""
    run = Run(fit=outcome, matching=result.matching, records=trace.record_count,
              locations=len(trace.events), resolution=trace.definitions.timer_resolution)
    run.add(result)
    run.stats.records, run.stats.locations = run.records, run.locations
    run.trace = trace.with_times(result.times.times, result.times.sizes)
    for loc, ev in (measured or trace).events.items():
        run.spans(ev.time, result.times.written.get(loc, ev.time), trace.events[loc].time)
    run.nesting_first = result.matching.nesting_first
    return run


def fit_pass(defs: Definitions, chunks: Iterable[dict[int, Events]], platform: Platform,
             options: RunOptions, source: str = "", cuts: list | None = None,
             segments: list | None = None, group: int = 1,
             alignment: ClockAlignment | None = None,
             lookahead: Callable[[], Unclosed] | None = None) -> FitOutcome:
    """``--bound fitted``, first pass: observe the transfers segment by segment and fit.

    The outcome's ``links`` are the least latency per kind of thread, device and
    RMA link over all segments: the second pass must be given them, else each
    segment would time its links by its own and the result would depend on the cuts.
    ``cuts``, a list, receives the cutter's attempts (:func:`streamed` given them and
    the same chunks cuts the same segments without searching again); ``segments``,
    a list, each segment's ``(cut, records)``; ``group``: chunks ``group`` times
    smaller, a cut looked for after every ``group``-th (the same segments);
    ``alignment``, ``lookahead``: as for :func:`streamed`."""
    sg = Segmenter(defs, platform, source, options.eager_limit, options.strict)
    sg.aligned = alignment is not None
    cutter = Cutter(defs, options.segment_records or SEGMENT_RECORDS,
                    lookahead=moved_lookahead(defs, lookahead, alignment))
    sg.cutter = cutter
    observed: list[Observations] = []
    t0: int | None = None
    with memory_guard("fitting the network"):
        for seg, cut in _grouped(cutter, held_in_bounds(
                cutter, checked_chunks(defs, chunks, alignment, options), source), group):
            if segments is not None:
                segments.append((cut, sum(len(ev) for ev in seg.values())))
            if t0 is None:  # the engine's origin of times (streamed's)
                t0 = min(int(ev.time[0]) for ev in seg.values())
            trace, mtrace, _ = sg.traces(seg)
            matching = sg.match(mtrace)
            observed.append(observe_transfers(trace, matching, platform, t0=t0))
            sg.advance(seg, None, None, matching)
            seg = trace = mtrace = matching = None
            release_memory()
    if cuts is not None:
        cuts[:] = cutter.attempts
    return outcome_of(Observations.concat(observed), platform.network)


def clock_pass(defs: Definitions, chunks: Iterable[dict[int, Events]], options: RunOptions,
               source: str = "", segments: list | None = None,
               lookahead: Callable[[], Unclosed] | None = None) -> ClockAlignment:
    """A streamed trace whose processes' clocks disagree (a receive stamped before
    its send, :class:`compensate.pipeline.context.ClocksDisagree`): the offsets that
    align them, as :func:`compensate.matching.clocks.align_clocks` finds them in
    memory, from one pass over the segments (``inverted`` 0 and no offset if every
    order holds).

    The records are moved first by a guess from the first chunks
    (:func:`compensate.matching.clocks.first_offsets`), so that the cutter finds
    times with no message in flight (with clocks apart by more than a message's
    round trip it would find none). The cuts fall where no message is in flight
    and every communicator's members completed as many collectives
    (:mod:`compensate.pipeline.cuts`), so each segment matches as the whole trace
    does; each order counts in the segment that holds its later record (not in
    the context records in front of it), on the times as read, and the pairwise
    bounds merge by their largest. The offsets may all be 0 (no constant shift
    orders more): the receives left before their sends are then timed as in
    memory. ``segments``, a list, receives each segment's number of records;
    ``lookahead``: as for :func:`streamed`."""
    head, chunks = first_chunks(chunks, options.segment_records or SEGMENT_RECORDS)
    guess = first_offsets(defs, head)
    found = ClockBounds()
    moved = aligned_chunks(defs, chunks, ClockAlignment(0, 0, guess))
    with memory_guard("streaming the trace"):
        for seg, mtrace, matching in _matched_segments(defs, moved, options, source,
                                                       lookahead, shift_of(defs, guess)):
            if segments is not None:
                segments.append(sum(len(ev) for ev in seg.values()))
            found.add(mtrace, matching, seg, guess)
    return found.alignment()


def shift_of(defs: Definitions, offsets: dict[int, int]) -> dict[int, int]:
    """Per location, its process's offset (ticks; ``offsets``: per process)."""
    return {loc: offsets.get(defs.process_of(loc), 0) for loc in defs.locations} \
        if offsets else {}


def moved_lookahead(defs: Definitions, lookahead: Callable[[], Unclosed] | None,
                    alignment: ClockAlignment | None) -> Callable[[], Unclosed] | None:
    """``lookahead`` on the times ``alignment`` moves the records to: a gap's last
    balance point compares times across processes (:meth:`Unclosed.moved`)."""
    if lookahead is None or alignment is None or not alignment.offsets:
        return lookahead
    shift = shift_of(defs, alignment.offsets)
    return lambda: lookahead().moved(shift)


@dataclass
class ClockBounds:
    """What :func:`clock_pass` gathers over the segments (on the times as read):
    the receives stamped before their sends, the largest such gap, and the
    pairwise bounds of the processes' offsets. Parts of a trace (a distributed
    rank's, :mod:`compensate.parallel.clocks`) merge (:meth:`merge`): each order
    is counted in one segment and on the rank that owns its later record. (A
    channel with a gap pairs on the times as read too: the segments' matching takes
    the guess off, ``gap_shift``.)"""

    count: int = 0
    worst: int = 0
    lower: dict[tuple[int, int], int] = field(default_factory=dict)

    def add(self, mtrace: Trace, matching: Matching, seg: dict[int, Events],
            guess: dict[int, int], own: set[int] | None = None) -> None:
        """The orders of one segment (``mtrace``: it with its context, matched),
        whose records were moved by ``guess``; with ``own``, those whose later
        record is on one of these locations."""
        p_s, p_r, t_s, t_r = _segment_orders(mtrace, matching, seg, own)
        found = (p_s, p_r, t_s - _moved(guess, p_s), t_r - _moved(guess, p_r))
        self.merge(ClockBounds(*counted(found), bounds(found)))

    def merge(self, other: ClockBounds) -> None:
        self.count += other.count
        self.worst = max(self.worst, other.worst)
        for pair, value in other.lower.items():
            self.lower[pair] = max(value, self.lower.get(pair, value))

    def alignment(self) -> ClockAlignment:
        """The offsets that align the processes (none where no order is inverted)."""
        return ClockAlignment(self.count, self.worst,
                              normalised(chained_offsets(self.lower)) if self.count else {})


def estimate_pass(defs: Definitions, chunks: Iterable[dict[int, Events]],
                  options: RunOptions, source: str = "",
                  lookahead: Callable[[], Unclosed] | None = None
                  ) -> tuple[dict[str, tuple[float, int]], float | None]:
    """``--overhead estimate`` over a stream: each kind's smallest gap
    (:class:`compensate.overhead.KindGaps`) and the shortest observed transfer of
    the segments' messages (:func:`compensate.overhead.transfer_of`), what
    :func:`compensate.overhead.estimate_from` needs, from one pass that holds a
    segment at a time. Where a receive is stamped before its send (in the first
    chunks, or in any segment) no transfer bounds anything (None); with clocks
    that disagree from the start the records are not cut at all."""
    head, chunks = first_chunks(chunks, options.segment_records or SEGMENT_RECORDS)
    gaps = KindGaps(defs)
    if first_offsets(defs, head):
        for chunk in chunks:
            for loc, ev in chunk.items():
                gaps.add(loc, ev)
        return gaps.bounds(), None
    shortest = ShortestTransfer()
    with memory_guard("streaming the trace"):
        for seg, mtrace, matching in _matched_segments(defs, chunks, options, source,
                                                       lookahead):
            for loc, ev in seg.items():
                gaps.add(loc, ev)
            shortest.add(transfer_of(mtrace, matching))
    return gaps.bounds(), shortest.value


def _matched_segments(defs: Definitions, chunks: Iterable[dict[int, Events]],
                      options: RunOptions, source: str,
                      lookahead: Callable[[], Unclosed] | None = None,
                      gap_shift: dict[int, int] | None = None
                      ) -> Iterator[tuple[dict[int, Events], Trace, Matching]]:
    """The segments of ``chunks`` each with its context in front, matched as they
    are (no check of the clocks): (segment, trace for matching, its matching),
    the context advanced past each; for the passes that read the matching only
    (:func:`clock_pass`, :func:`estimate_pass`). A segment that does not match
    raises :class:`SegmentError`: the whole trace names the record exactly.
    ``gap_shift``: per location, the ticks its records were moved by, which the gap
    rule takes off (:func:`compensate.matching.match`)."""
    sg = Segmenter(defs, Platform(0.0), source, options.eager_limit, options.strict)
    sg.cutter = cutter = Cutter(defs, options.segment_records or SEGMENT_RECORDS,
                                lookahead=lookahead)
    for seg in cut_segments(cutter, held_in_bounds(cutter, chunks, source)):
        _, mtrace, _ = sg.traces(seg)
        try:
            matching = match(mtrace, eager_limit=options.eager_limit, strict=options.strict,
                             past_gaps=sg.past_gaps(mtrace), gap_shift=gap_shift)
        except TraceError as exc:  # its record numbers are the segment's
            raise SegmentError(str(exc)) from exc
        yield seg, mtrace, matching
        sg.advance(seg, None, None, matching)
        seg = mtrace = matching = None
        release_memory()


def _segment_orders(mtrace: Trace, matching: Matching, seg: dict[int, Events],
                    own: set[int] | None = None):
    """The orders (:func:`compensate.matching.clocks.orders`) of a segment whose
    later record is one of the segment's own, not of the context in front of it;
    with ``own``, on one of these locations (a rank's: the other ranks' locations
    in its view are ghosts, whose records ``seg`` does not hold)."""
    table = matching.table
    head = np.array([len(mtrace.events[loc]) - len(seg[loc]) if loc in seg else 0
                     for loc in table.loc_ids] or [0], dtype=np.int64)
    keep = table.recv_idx >= head[table.recv_li] if len(table) else np.zeros(0, bool)
    instances = [inst for inst in matching.instances
                 if all(i >= len(mtrace.events[loc]) - len(seg.get(loc, ()))
                        for loc, i in zip(inst.locs, inst.end_idx, strict=True)
                        if own is None or loc in own)]
    if len(table):
        table = replace(table, **{f.name: getattr(table, f.name)[keep] for f in fields(table)
                                  if f.name != "loc_ids"})
    return orders(mtrace, table, instances, own)


def _moved(offsets: dict[int, int], processes: np.ndarray) -> np.ndarray:
    """Each of ``processes``' offset of ``offsets`` (0 where it has none)."""
    if not offsets or not processes.size:
        return np.zeros(processes.size, dtype=np.int64)
    ids, at = np.unique(processes, return_inverse=True)
    return np.array([offsets.get(int(p), 0) for p in ids], dtype=np.int64)[at]


def first_chunks(chunks: Iterable[dict[int, Events]], records: int
                  ) -> tuple[dict[int, Events], Iterator[dict[int, Events]]]:
    """Each location's records of the first chunks of ``chunks`` holding at least
    ``records`` records, and all the chunks again (the first ones held)."""
    it = iter(chunks)
    first: list[dict[int, Events]] = []
    n = 0
    for chunk in it:
        first.append(chunk)
        n += sum(len(ev) for ev in chunk.values())
        if n >= records:
            break
    head: dict[int, list[Events]] = {}
    for chunk in first:
        for loc, ev in chunk.items():
            head.setdefault(loc, []).append(ev)
    return ({loc: Events.concat(parts) for loc, parts in head.items()},
            chain(first, it))


def checked_chunks(defs: Definitions, chunks: Iterable[dict[int, Events]],
                   alignment: ClockAlignment | None, options: RunOptions
                   ) -> Iterator[dict[int, Events]]:
    """The chunks a streamed run cuts: moved by ``alignment`` (:func:`clock_pass`),
    or, where there is none yet, refused at once (:class:`ClocksDisagree`) if
    their first chunks already show a receive before its send
    (:func:`compensate.matching.clocks.first_offsets`): clocks far apart would
    leave the cutter no cut to find before the first segment's matching saw it."""
    if alignment is not None:
        return aligned_chunks(defs, chunks, alignment)
    if options.bound == "none":  # a copy, whose clocks in memory are not aligned either
        return iter(chunks)
    head, chunks = first_chunks(chunks, options.segment_records or SEGMENT_RECORDS)
    if first_offsets(defs, head):
        raise ClocksDisagree("a receive is stamped before its send: the processes' "
                             "clocks disagree")
    return iter(chunks)


def aligned_chunks(defs: Definitions, chunks: Iterable[dict[int, Events]],
                   alignment: ClockAlignment | None) -> Iterator[dict[int, Events]]:
    """``chunks`` with each process's records moved by its offset of ``alignment``
    (unchanged where None), still in time order across locations, as the cutter
    takes them: the chunks come in time order, so after one whose latest record is
    at ``u`` no location has a record before ``u`` to come, and a moved record
    (offsets are not negative) is handed on once it lies before ``u``."""
    if alignment is None or not alignment.offsets:
        yield from chunks
        return
    shift = shift_of(defs, alignment.offsets)
    held: dict[int, Events] = {}
    for chunk in chunks:
        if not chunk:
            continue
        until = max(int(ev.time[-1]) for ev in chunk.values() if len(ev))
        for loc, ev in chunk.items():
            time, size = shifted_times(ev, shift.get(loc, 0))
            ev = ev if time is ev.time else ev.with_time(time, size)
            held[loc] = Events.concat([held[loc], ev]) if loc in held else ev
        out = {}
        for loc, ev in list(held.items()):
            n = int(np.searchsorted(ev.time, until, side="left"))
            if n:
                out[loc] = ev.slice(0, n) if n < len(ev) else ev
                if n < len(ev):
                    held[loc] = ev.slice(n, len(ev))
                else:
                    del held[loc]
        if out:
            yield out
    if held:
        yield held


def held_in_bounds(cutter: Cutter, chunks: Iterable[dict[int, Events]], source: str = ""
                   ) -> Iterator[dict[int, Events]]:
    """``chunks`` for ``cutter``, refused (:class:`OutOfMemory`, exit 3, one line)
    once the records it holds without finding a safe cut would need more memory
    than the machine has available (:func:`compensate.pipeline.memory.room_for`):
    a segment that grows without bound (clocks that drift apart by more than a
    message's round trip, a message never received) is otherwise killed by the
    kernel with no word."""
    available = available_memory()
    for chunk in chunks:
        if not room_for(cutter.count, available):
            raise OutOfMemory(
                f"{source or 'the trace'}: no safe cut in {cutter.count:,} records (a "
                f"message or call open across all of them: processes whose clocks drift "
                f"apart, a message never received, ...), and holding them needs more "
                f"than the {gib(available)} available; nothing written")
        yield chunk


def _grouped(cutter: Cutter, chunks: Iterable[dict[int, Events]], group: int
             ) -> Iterator[tuple[dict[int, Events], int | None]]:
    """The segments of ``chunks`` and the cut each ends at (None: the rest), the
    cutter looking for a cut after every ``group``-th chunk."""
    k = 0
    for k, chunk in enumerate(chunks, 1):
        for seg in cutter.add(chunk, cut=k % group == 0):
            yield seg, cutter.last_cut
    if k % group:  # the last one-process chunk, shorter: its look for a cut
        for seg in cutter.add({}):
            yield seg, cutter.last_cut
    for seg in cutter.end():
        yield seg, cutter.last_cut
    rest = cutter.rest()
    if rest:
        yield rest, None


def streamed(defs: Definitions, chunks: Iterable[dict[int, Events]], platform: Platform,
             options: RunOptions, write: Callable[[int, Events], None], *,
             outcome: FitOutcome | None = None, source: str = "",
             progress: Callable[[int], None] | None = None,
             advance: Callable[[int], None] | None = None,
             cuts: list | None = None, alignment: ClockAlignment | None = None,
             lookahead: Callable[[], Unclosed] | None = None) -> Run:
    """Compensate the records of ``chunks`` segment by segment and hand each
    location's output records to ``write(location, events)`` in order.

    ``advance(time)`` gets, before each segment, a watermark: no location handed
    nothing yet will be handed a record earlier than ``time``. ``cuts``: the cut
    attempts :func:`fit_pass` recorded over the same chunks (the same segments,
    NotStreamable if the chunks are not the same). ``alignment``: the processes'
    clock offsets (:func:`clock_pass`), added to the records as they are read.
    ``lookahead()``: what the whole trace never closes
    (:func:`compensate.pipeline.unclosed.scan` over a fresh read), for the cutter
    to call where it finds no cut (without it, such a trace is one segment from
    its first never-received send on). Nothing is passed to ``write`` from the
    first segment that fails verification on; the run still compensates and
    verifies the rest, so that its verification counts what the in-memory run's
    does. Raises NotStreamable / SegmentError where the in-memory path must run
    instead."""
    sg = Segmenter(defs, platform, source, options.eager_limit, options.strict)
    cutter = Cutter(defs, options.segment_records or SEGMENT_RECORDS, replay=cuts,
                    lookahead=moved_lookahead(defs, lookahead, alignment))
    sg.cutter = cutter
    eopts = options.engine_options(outcome)
    sg.aligned = alignment is not None or options.bound == "none"
    run = Run(fit=outcome, resolution=defs.timer_resolution, segments=0,
              clock_alignment=alignment if alignment is not None and alignment.offsets
              else None)
    with memory_guard("streaming the trace"):
        for seg in cut_segments(cutter, held_in_bounds(
                cutter, checked_chunks(defs, chunks, alignment, options), source)):
            n_seg = sum(len(ev) for ev in seg.values())
            start = min(int(ev.time[0]) for ev in seg.values())
            if sg.t0 is None:
                sg.t0 = start
            if options.bound != "none":  # (a copy computes nothing: exact at any span)
                check_span(seg, sg.t0, defs.timer_resolution, source, sg.done)
            if advance is not None:
                advance(sg.watermark(cutter, seg, start))
            _stream_segment(sg, seg, n_seg, WHOLE, platform, eopts, run, write)
            seg = None  # this segment's arrays go before the freed heap is handed back
            release_memory()
            if progress:
                progress(run.records)
    run.stats.records = run.records
    run.locations = run.stats.locations = len(defs.locations)  # as in memory: all defined
    run.nesting_first = sg.nesting_first
    return run


def _stream_segment(sg: Segmenter, seg: dict[int, Events], n_seg: int, share: Share,
                    platform: Platform, eopts, run: Run,
                    write: Callable[[int, Events], None]) -> None:
    """One streamed segment: run it, add it to ``run``, write it (unless this or
    an earlier segment failed verification) and carry its context on."""
    segment = sg.segment(seg)
    result, _ = run_segment(segment, share, platform, eopts, sg.t0, sg.match,
                            errors=SegmentError)
    run.segments += 1
    run.largest_segment = max(run.largest_segment, n_seg)
    if result.verification is not None and not result.verification.ok:
        v = result.verification  # its examples name the records as the whole trace does
        v.examples = [renumber(x, sg.whole_index) for x in v.examples]
    run.add(result)
    offsets = run.clock_alignment.offsets if run.clock_alignment is not None else {}
    for loc, ev in output_events(segment, list(result.times.written), result.times).items():
        if run.verification.ok:
            write(loc, ev)
        shift = offsets.get(sg.defs.process_of(loc), 0)  # the span measured: as read
        run.spans(seg[loc].time - shift if shift else seg[loc].time,
                  result.times.written[loc], seg[loc].time)
    run.records += n_seg
    sg.advance(seg, result.times.values, result.times.written, result.matching)
