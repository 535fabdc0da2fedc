"""Test scaffolding for the pipeline's ways of running: the in-memory run as a
``(result, matching, fit outcome, verification)`` tuple, the streamed run driven
by engine options, and the distributed runs on thread ranks of this process
(without ``mpiexec``, tests/threadranks.py); an in-memory trace as the chunks a
reader yields (:func:`trace_chunks`), and the one-process streamed run's cuts
(:func:`cut_times`), the reference the distributed run's segments are held to.
The product calls :mod:`compensate.pipeline` and :mod:`compensate.parallel`
directly and reads its chunks from files; these shapes keep the tests short."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np

from compensate.engine import EngineOptions, Result
from compensate.model import SEND, Definitions, Events, Trace  # noqa: F401 - re-exported
from compensate.pipeline import RunOptions, in_memory
from compensate.pipeline import fit_pass as _fit_pass
from compensate.pipeline import streamed as _streamed
from compensate.pipeline.counting import CountingCutter  # noqa: F401 - re-exported
from compensate.pipeline.cuts import (  # noqa: F401 - re-exported for the tests
    SEGMENT_RECORDS,
    Cutter,
    NotStreamable,
    SegmentError,
    cut_segments,
)
from compensate.platform import Platform


def run_pipeline(trace: Trace, platform: Platform | None, bound: str, collective_exit: str,
                 eager_limit: int | None, progress: Callable[[int], None] | None = None,
                 phase: Callable[[str], None] | None = None, strict: bool = False) -> tuple:
    """The in-memory run as ``(Result, matching, fit outcome, verification)``."""
    run = in_memory(trace, platform, RunOptions(bound, collective_exit, eager_limit, strict),
                    progress, phase)
    return Result(run.trace, run.stats, run.matching), run.matching, run.fit, run.verification


def split_options(options: EngineOptions, eager_limit: int | None = None,
                  strict: bool = False, segment_records: int | None = None
                  ) -> tuple[RunOptions, Any]:
    """Engine options as the run options and fit outcome that give them (a fitted
    model, or the lower bound with fitted links, becomes a ``fitted`` run)."""
    if options.bound == "fitted" or options.fit_links:
        outcome = SimpleNamespace(fit=options.network_time, links=options.link_latency)
        return RunOptions("fitted", options.collective_exit, eager_limit, strict,
                          segment_records), outcome
    return RunOptions(options.bound, options.collective_exit, eager_limit, strict,
                      segment_records), None


def compensate_stream(defs: Definitions, chunks: Iterable[dict[int, Events]],
                      platform: Platform, options: EngineOptions,
                      write: Callable[[int, Events], None], *, source: str = "",
                      eager_limit: int | None = None,
                      progress: Callable[[int], None] | None = None,
                      segment_records: int = SEGMENT_RECORDS,
                      advance: Callable[[int], None] | None = None,
                      strict: bool = False, cuts: list | None = None,
                      lookahead: Callable | None = None):
    """The streamed run (:func:`compensate.pipeline.streamed`) given engine options."""
    run_options, outcome = split_options(options, eager_limit, strict, segment_records)
    return _streamed(defs, chunks, platform, run_options, write, outcome=outcome,
                     source=source, progress=progress, advance=advance, cuts=cuts,
                     lookahead=lookahead)


def fit_pass(defs: Definitions, chunks: Iterable[dict[int, Events]], platform: Platform,
             source: str, eager_limit: int | None, segment_records: int = SEGMENT_RECORDS,
             strict: bool = False, cuts: list | None = None, segments: list | None = None,
             group: int = 1):
    """The fit pass (:func:`compensate.pipeline.fit_pass`) with separate options."""
    return _fit_pass(defs, chunks, platform,
                     RunOptions("fitted", eager_limit=eager_limit, strict=strict,
                                segment_records=segment_records),
                     source, cuts=cuts, segments=segments, group=group)


def segments(defs: Definitions, chunks: Iterable[dict[int, Events]],
             segment_records: int = SEGMENT_RECORDS):
    """The segments the one-process cutter makes of ``chunks``."""
    return cut_segments(Cutter(defs, segment_records), chunks)


def trace_chunks(trace: Trace, chunk_records: int) -> Iterator[dict[int, Events]]:
    """An in-memory trace as chunks in time order (ties by location), as a reader
    of the global record order yields them."""
    locs = list(trace.events)
    times = np.concatenate([trace.events[loc].time for loc in locs]) if locs else []
    owner = np.concatenate([np.full(len(trace.events[loc]), j) for j, loc in enumerate(locs)]) \
        if locs else []
    order = np.lexsort((owner, times))
    counts = np.zeros(len(locs), dtype=np.int64)
    for start in range(0, len(order), chunk_records):
        per = np.bincount(owner[order[start:start + chunk_records]], minlength=len(locs))
        chunk = {}
        for j in np.flatnonzero(per).tolist():
            a = int(counts[j])
            chunk[locs[j]] = trace.events[locs[j]].slice(a, a + int(per[j]))
            counts[j] += per[j]
        yield chunk


def cut_times(defs: Definitions, chunks: Iterable[dict[int, Events]],
              segment_records: int = SEGMENT_RECORDS, group: int = 1,
              ) -> list[tuple[int | None, int]]:
    """The one-process streamed run's segments, ``(cut, records)`` each (the
    reference the tests hold the distributed run to; the command's ranks agree on
    their own cuts, :mod:`compensate.parallel.cutting`; until they did, rank 0 ran
    this search for them): the segment holds the records measured before ``cut``
    (None: every record left), METRIC samples held back as the cutter holds
    them. ``chunks``: the whole trace (no
    payload needed), read in chunks ``group`` times smaller than the one-process
    run's: the cutter looks for cuts only after every ``group``-th, where the
    one-process run looks after each of its chunks (the same records taken, the
    same cuts; the reader's transient a ``group``-th). Raises
    :class:`NotStreamable` as the one-process run does."""
    cutter = CountingCutter(defs, segment_records)  # (the columns the search reads)
    out: list[tuple[int | None, int]] = []
    k = 0
    for k, chunk in enumerate(chunks, 1):
        for seg in cutter.add(chunk, cut=k % group == 0):
            out.append((cutter.last_cut, sum(len(ev) for ev in seg.values())))
    if k % group:  # the last one-process chunk, shorter: its look for a cut
        for seg in cutter.add({}):
            out.append((cutter.last_cut, sum(len(ev) for ev in seg.values())))
    for seg in cutter.end():
        out.append((cutter.last_cut, sum(len(ev) for ev in seg.values())))
    rest = cutter.rest()
    if rest:
        out.append((None, sum(len(ev) for ev in rest.values())))
    return out


def own_segments(defs: Definitions, chunks: Iterable[dict[int, Events]],
                 cuts: list[tuple[int | None, int]]) -> Iterator[dict[int, Events]]:
    """A rank's part of each segment of ``cuts`` (:func:`cut_times`), from the
    chunks of its own locations, as :func:`compensate.parallel.segments.stream_rank`
    splits them (:class:`~compensate.parallel.segments.OwnSplitter`)."""
    from compensate.parallel.segments import OwnSplitter

    splitter = OwnSplitter(defs, chunks)
    for cut, _ in cuts:
        yield splitter.split(cut)


def fitted_options(outcome: Any, collective_exit: str = "uniform") -> EngineOptions:
    """The engine options a fitted run takes given its fit's ``outcome``."""
    return RunOptions("fitted", collective_exit).engine_options(outcome)


def run_in_threads(trace: Trace, platform: Platform | None, bound: str, size: int,
                   collective_exit: str = "uniform", eager_limit: int | None = None,
                   strict: bool = False) -> tuple:
    """The distributed in-memory run on ``size`` thread ranks: rank 0's result as
    :func:`run_pipeline` gives it, its trace assembled from every rank's own
    locations (which the command never gathers). Each rank works on its trimmed
    view, as the command's ranks do."""
    from compensate.parallel.driver import run_rank
    from compensate.parallel.ghosts import complete_trimmed
    from compensate.parallel.ownership import owners
    from tests.threadranks import run_threads

    options = RunOptions(bound, collective_exit, eager_limit, strict)

    def rank(t):
        owner = owners(trace.definitions, list(trace.events), t.size)
        own = {loc: ev for loc, ev in trace.events.items() if owner[loc] == t.rank}
        view, index = complete_trimmed(trace.definitions, own, t, owner, trace.source)
        return run_rank(view, platform, options, t, owner, index)

    return assemble(trace, run_threads(size, rank))


def assemble(trace: Trace, ranks: list) -> tuple:
    """Rank 0's run as :func:`run_pipeline` gives it, with its trace made whole from
    every rank's own locations."""
    run = ranks[0].run
    events = {}
    for r in ranks:
        events.update(r.own.events)
    whole = Trace(trace.definitions, {loc: events[loc] for loc in trace.events}, trace.source)
    return Result(whole, run.stats, run.matching), run.matching, run.fit, run.verification


def stream_in_threads(trace: Trace, platform: Platform, options: EngineOptions, size: int,
                      segment_records: int = SEGMENT_RECORDS, chunk_records: int = 1 << 16,
                      eager_limit: int | None = None, fit: list | None = None,
                      agreed: bool = False, lookahead: bool = False) -> tuple:
    """The distributed streamed run on ``size`` thread ranks: rank 0's run and every
    location's output records. ``fit``, a list: the ``--bound fitted`` run (of
    ``options`` only the collective exit counts), whose fit the ranks reduce; the
    list receives the fit's outcome. ``agreed``: the ranks agree on the cuts from
    their own locations as they read them, and the segments (under ``fit``, the fit
    pass) take the same read, as the command's ranks do, instead of taking the
    one-process run's cuts; ``lookahead``: and read their own locations ahead where
    they find no cut, as the command's ranks do."""
    from compensate.parallel import segments as rank_segments
    from compensate.parallel.cutting import CutAgreement, share_of
    from compensate.parallel.cutting import chunk_records as cut_chunk_records
    from compensate.parallel.ownership import owners
    from compensate.parallel.reading import OneRead
    from tests.threadranks import run_threads

    defs = trace.definitions
    one = None if agreed else cut_times(
        defs, trace_chunks(trace, chunk_records), segment_records)
    owner = owners(defs, list(trace.events), size)
    if fit is not None:
        run_options, given = RunOptions("fitted", options.collective_exit, eager_limit), None
    else:
        run_options, given = split_options(options, eager_limit)

    def rank(t):
        mine = Trace(defs, {loc: ev for loc, ev in trace.events.items()
                            if owner[loc] == t.rank}, trace.source)
        cuts, chunks, ahead = one, trace_chunks(mine, chunk_records), None
        if cuts is None:  # as the command: the cuts agreed over the one read
            share = share_of(list(mine.events), {loc: len(ev) for loc, ev in
                                                 trace.events.items()})
            read = OneRead(trace_chunks(mine, cut_chunk_records(
                segment_records, share, chunk_records)))
            cuts, chunks = CutAgreement(
                defs, read.first(), t, list(mine.events), share, segment_records,
                rank_segments.RankStream.step_of(t),
                lookahead=(lambda: trace_chunks(mine, chunk_records)) if lookahead else None
            ), read.second()
            ahead = cuts  # (its look-ahead names the receives past a gap)
        outcome = given
        if fit is not None:
            seen: list = []
            outcome = rank_segments.observe_rank(
                defs, chunks, (seen.append(c) or c for c in cuts), t, owner, platform,
                run_options, source=trace.source, ahead=ahead)
            cuts, chunks = seen, trace_chunks(mine, chunk_records)
        got: dict[int, list[Events]] = {}
        res = rank_segments.stream_rank(
            defs, chunks, cuts, t, owner, platform, run_options,
            lambda loc, ev: got.setdefault(loc, []).append(ev), outcome=outcome, ahead=ahead)
        return res, got, outcome

    results = run_threads(size, rank)
    if fit is not None:
        fit[:] = [results[0][2]]
    events: dict[int, Events] = {}
    for _, got, _ in results:
        for loc, parts in got.items():
            events[loc] = Events.concat(parts)
    return results[0][0], events


def run_rank(trace: Trace, platform: Platform | None, bound: str, collective_exit: str,
             eager_limit: int | None, transport: Any, strict: bool = False,
             owner: dict[int, int] | None = None, index: dict | None = None):
    """One rank's share of the in-memory run (:func:`compensate.parallel.driver.run_rank`)
    with separate options."""
    from compensate.parallel.driver import run_rank as rank_share

    return rank_share(trace, platform, RunOptions(bound, collective_exit, eager_limit, strict),
                      transport, owner, index)
