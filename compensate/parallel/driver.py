"""One rank of the distributed run: match -> compensate (forward replay) -> own times.

:func:`run_rank` is :func:`compensate.api.run_pipeline` on one rank of
``transport.size``: every rank matches its view of the trace (its own locations
and, of the others, what its rules read: :mod:`compensate.parallel.trim`),
under ``--bound fitted`` observes the transfers whose receive it owns for the
network fit that rank 0 makes of them all (:mod:`compensate.parallel.fit`), evaluates the
anchors of the locations it owns (:mod:`compensate.parallel.ownership`) while
:mod:`compensate.parallel.exchange` carries the anchors that cross ranks, maps the
METRIC samples of its locations and rounds their times (its :class:`RankOutput`'s
``own``, which the command writes as this rank's part of the output), and verifies
the dependencies whose dependent end it owns (:mod:`compensate.parallel.verification`:
the rounded times of the other ends come from their owners); the findings are
reduced on rank 0, which returns the same ``(Result, Matching, FitOutcome,
Verification)`` as the one-process pipeline (:func:`run_pipeline_parallel`: the
other ranks return None) without holding any other rank's times.
Each rank also returns its counts and phase seconds (:func:`rank_info`,
:attr:`RankOutput.info`), which the command gathers into the summary's
``parallel`` for the cost model (docs/performance.md, issue #21).

Failures (and SIGINT/SIGTERM, which :mod:`compensate.parallel.command` only records
while the ranks talk, :func:`compensate.interrupt.deferred`): each phase ends in
:func:`agree`, an ``allgather`` of every rank's status; if a rank failed (or
received a signal), every rank raises — the failing rank its own exception, the others
:class:`RankFailed` carrying the first failing rank's one-line message and exit
status — so every rank exits with the same status and no rank waits for one that
is gone (inside the replay, :meth:`compensate.parallel.exchange.Exchange.fail` tells
the others in the setup step or the wave they wait in).
"""

from __future__ import annotations

import gc
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import compensate.interrupt as interrupt
from compensate.engine.run import (
    EngineOptions,
    Result,
    Stats,
    approximate,
    count_trace,
    rounded_times,
)
from compensate.matching import match
from compensate.model import Trace, TraceError
from compensate.parallel.exchange import Exchange, RemoteFailure
from compensate.parallel.ownership import owners
from compensate.parallel.transport import Transport
from compensate.platform import Platform, PlatformError

#: exit statuses (as compensate/cli/failure.py): bad input 3, internal error 1
EXIT_INTERNAL, EXIT_INPUT = 1, 3
#: not an exit: a rank cannot stream (NotStreamable, SegmentError), and every rank
#: falls back to the whole-share path together (compensate/parallel/segments.py)
FALLBACK = -1


class RankFailed(Exception):
    """Another rank failed: ``line`` is its one-line message (``compensate: error:
    ...``), ``status`` its exit status, ``rank`` its number."""

    def __init__(self, rank: int, status: int, line: str) -> None:
        super().__init__(line)
        self.rank, self.status, self.line = rank, status, line


def describe(exc: BaseException, prog: str = "compensate") -> tuple[int, str]:
    """The exit status and one-line message of ``exc`` (as
    :func:`compensate.cli.failure.failure_status` prints them)."""
    from compensate.engine.stream import NotStreamable, SegmentError
    from compensate.formats import OutputError

    if isinstance(exc, (NotStreamable, SegmentError)):
        return FALLBACK, f"{prog}: cannot stream ({exc})"
    if isinstance(exc, RankFailed):
        return exc.status, exc.line
    if isinstance(exc, KeyboardInterrupt):  # SIGINT/SIGTERM (compensate.interrupt)
        signum = getattr(exc, "signum", signal.SIGINT)
        return (interrupt.exit_status(signum),
                f"{prog}: interrupted by {interrupt.signal_name(signum)}; nothing written")
    if isinstance(exc, (TraceError, PlatformError, OutputError)):
        return EXIT_INPUT, f"{prog}: error: {exc}"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return EXIT_INPUT, f"{prog}: error: {where}{exc.strerror or exc}"
    return EXIT_INTERNAL, (f"{prog}: internal error: {type(exc).__name__}: {exc} "
                           f"(set COMPENSATE_DEBUG=1 for a traceback; please report it)")


def agree(transport: Transport, exc: BaseException | None) -> None:
    """A phase boundary: every rank says whether it failed; if one did, every rank
    raises (the first failing rank's own exception there, :class:`RankFailed` on the
    others). A rank that only saw another's failure (RemoteFailure) is not a source."""
    if exc is None and interrupt.received() is not None:  # a signal came (recorded)
        exc = interrupt.Interrupted(interrupt.received())
    mine = None
    if exc is not None and not isinstance(exc, RemoteFailure):
        mine = describe(exc)
    statuses = transport.allgather(mine)
    first = next((r for r, s in enumerate(statuses) if s is not None), None)
    if first is None:
        if exc is not None:  # a RemoteFailure whose source has not reported: cannot be
            raise exc
        return
    if first == transport.rank and exc is not None:
        raise exc
    status, line = statuses[first]
    raise RankFailed(first, status, line)


def agreed(transport: Transport, step: Any, *args: Any,
           exchange: Exchange | None = None) -> Any:
    """``step(*args)`` followed by :func:`agree` (and, if it raised inside the replay,
    the exchange's failure round first)."""
    try:
        out = step(*args)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - every rank must hear of it
        if exchange is not None and not isinstance(exc, RemoteFailure):
            exchange.fail()
        agree(transport, exc)
        raise  # agree always raises for a failure
    agree(transport, None)
    return out


@dataclass
class RankOutput:
    """What one rank of :func:`run_rank` ends with: ``own``, its own locations with
    their compensated times (METRIC samples mapped, rounded, as the one-process run
    writes them; the payloads as read: this rank writes them); ``pipeline``, on rank
    0 the ``(result, matching, fit outcome, verification)`` of the one-process run,
    else None. Rank 0's ``result.trace`` holds its own locations' times; of the
    others' only the records its verification read and each location's first and
    last (the summary's span), the rest
    :data:`compensate.parallel.verification.UNREAD` (:func:`run_in_threads` assembles
    the whole output from every rank's ``own``)."""

    own: Trace
    pipeline: tuple | None
    #: this rank's counts and seconds (:func:`rank_info`), for the summary's ``parallel``
    info: dict = field(default_factory=dict)


def rank_info(trace: Trace, mine: list[int], exchange: Exchange | None) -> dict:
    """What the cost model of docs/performance.md reads of one rank: its records
    (own and ghost), its own anchors (the values its engine computes), and of the
    forward replay the rounds, values sent and received (the exchange's counts)."""
    own = sum(len(trace.events[loc]) for loc in mine)
    info: dict = {"records": own, "ghost_records": trace.record_count - own}
    if exchange is not None:
        if exchange.own_anchors is not None:
            info["anchors"] = exchange.own_anchors
        info.update(rounds=exchange.rounds, values_sent=exchange.sent,
                    values_received=exchange.received)
    return info


def run_pipeline_parallel(trace: Trace, platform: Platform | None, bound: str,
                          collective_exit: str, eager_limit: int | None,
                          transport: Transport, strict: bool = False) -> tuple | None:
    """The distributed :func:`compensate.api.run_pipeline`: on rank 0 ``(result,
    matching, fit outcome, verification)`` equal to the one-process run's (the
    summary's statistics reduced over the ranks), on the other ranks None
    (:func:`run_rank`'s ``pipeline``)."""
    return run_rank(trace, platform, bound, collective_exit, eager_limit, transport,
                    strict).pipeline


def remapped(index: dict | None, step: Any) -> Any:
    """``step`` whose TraceError names the original record of a trimmed ghost."""
    if not index:
        return step

    def run(*args: Any) -> Any:
        from compensate.parallel.trim import remap_text
        try:
            return step(*args)
        except TraceError as exc:
            exc.args = (remap_text(index, str(exc)),)
            raise

    return run


def run_rank(trace: Trace, platform: Platform | None, bound: str, collective_exit: str,
             eager_limit: int | None, transport: Transport, strict: bool = False,
             owner: dict[int, int] | None = None,
             index: dict[int, np.ndarray] | None = None) -> RankOutput:
    """One rank's share of the pipeline (module docstring).

    ``trace`` is the whole trace (read whole, or assembled from every rank's own
    locations by :func:`compensate.parallel.ghosts.complete_trace`) or this rank's
    trimmed view of it (:func:`compensate.parallel.ghosts.complete_trimmed`, with
    ``index``); payloads only where the rank owns the location. ``owner`` (default:
    :func:`compensate.parallel.ownership.owners` by process count) says which rank
    owns which location. Each rank maps the METRIC samples of its own locations,
    rounds their times and verifies the dependencies it owns; rank 0 receives the
    reduced findings (and of the others' times only the few its summary and its
    own verification read).

    ``index`` (the distributed command's and :func:`run_in_threads`' trimmed ghosts,
    :func:`compensate.parallel.ghosts.complete_trimmed`): ``trace`` holds of other
    ranks' locations only what this rank reads, ``index`` maps the trimmed ones'
    positions to their original record indices; the summary's counts of the whole
    trace are then summed from every rank's own (:func:`compensate.parallel.trim.local_counts`)."""
    from compensate.engine.metrics import map_metric_samples
    from compensate.parallel.verification import verify_rank

    plat = platform or Platform(0.0)
    seconds: dict[str, float] = {}
    clock = [time.perf_counter()]

    def lap(name: str) -> None:  # this rank's wall seconds of a phase
        now = time.perf_counter()
        seconds[name] = seconds.get(name, 0.0) + now - clock[0]
        clock[0] = now

    if owner is None:
        owner = owners(trace.definitions, list(trace.events), transport.size)
    mine = [loc for loc in trace.events if owner[loc] == transport.rank]

    def prepare():
        matching = match(trace, eager_limit=eager_limit, strict=strict)
        observed = None
        if bound == "fitted":  # R2f: the transfers whose receive this rank owns
            from compensate.engine.fit import observe_transfers
            observed = observe_transfers(trace, matching, plat, set(mine))
        return matching, observed

    matching, observed = agreed(transport, remapped(index, prepare))
    used, outcome = bound, None
    if observed is not None:  # the fit reduced across ranks (compensate/parallel/fit.py)
        from compensate.parallel.fit import reduced_outcome
        outcome = reduced_outcome(transport, observed, trace.definitions, plat,
                                  lambda f, *a: agreed(transport, f, *a))
        used = "fitted" if outcome.fit else "lower"
    lap("match")
    # t0: the earliest measured timestamp of all (each rank knows its own locations')
    firsts = transport.allgather(min((int(trace.events[loc].time[0]) for loc in mine
                                      if len(trace.events[loc])), default=None))
    t0 = min((x for x in firsts if x is not None), default=0)
    exchange = None
    lap("setup")
    before = transport.traffic.snapshot()
    if bound == "none":
        stats, approx = Stats(), None
    else:
        exchange = Exchange(transport, owner, index)
        opts = EngineOptions(bound=used, collective_exit=collective_exit,
                             network_time=outcome.fit if outcome else None,
                             fit_links=bound == "fitted" and used == "lower",
                             link_latency=outcome.links if outcome else None)
        approx, t0, stats = agreed(
            transport, remapped(index, lambda: approximate(trace, plat, opts, matching, t0=t0,
                                                           exchange=exchange)),
            exchange=exchange)
    # the engine's graph and the rules' closures refer to each other: with the
    # command's cyclic collector paused (compensate.gcpause) they would stay until
    # the exit, ~100 bytes a record of the view, through verification and writing.
    # (Where the collector runs, e.g. under pytest, it frees them itself; a full
    # collection there rescans every object of the process, ~0.1 s per rank.)
    if not gc.isenabled():
        gc.collect()
    lap("replay")
    after = transport.traffic.snapshot()
    replay = {"collectives": after[0] - before[0], "bytes_sent": after[1] - before[1],
              "collective_seconds": after[2] - before[2], "messages": after[3] - before[3],
              "message_bytes": after[4] - before[4], "waves": after[5] - before[5]}
    own_events = Trace(trace.definitions, {loc: trace.events[loc] for loc in mine},
                       trace.source)

    def own_times():
        part = {loc: approx[loc] for loc in mine}
        for loc, times in part.items():  # every owned anchor was computed (a rule
            if np.isnan(times).any():  # reading an anchor it did not list in its
                i = int(np.flatnonzero(np.isnan(times))[0])  # needs would show here)
                raise RuntimeError(f"location {loc}, record {i}: no time computed "
                                   f"on rank {transport.rank}")
        # a METRIC location's reference is a thread of its process: on this rank
        map_metric_samples(own_events, part, t0)
        times, sizes = {}, {}
        for loc in mine:
            times[loc], size = rounded_times(trace.events[loc], part[loc], t0)
            if size is not None:
                sizes[loc] = size
        return times, sizes

    if approx is None:
        own = own_events
        times = {loc: trace.events[loc].time for loc in mine}
    else:
        times, sizes = agreed(transport, own_times)
        own = own_events.with_times(times, sizes)
    lap("times")
    # each rank verifies the dependencies it owns, with the other ends' rounded times
    # from their owners; rank 0 gets the reduced findings (compensate/parallel/verification.py)
    out, check = verify_rank(transport, owner, trace, matching, times,
                             step=lambda f, *a: agreed(transport, f, *a), index=index)
    lap("verify")
    every = None
    if index is not None:  # trimmed ghosts: the whole trace's counts, summed
        from compensate.parallel.trim import local_counts
        every = transport.allgather(agreed(transport, local_counts, trace, matching,
                                           set(mine)))
    info = rank_info(trace, mine, exchange)
    info.update(replay=replay, seconds=seconds)
    if transport.rank != 0:
        return RankOutput(own, None, info)

    def finish():
        count_trace(stats, trace, matching)
        reported = matching
        if every is not None:
            from compensate.parallel.trim import reduced_matching
            reported = reduced_matching(matching, every)
            stats.records = sum(d["records"] for d in every)
            stats.messages = reported.counts()["messages"]
            stats.unmatched_sends = reported.unmatched_sends
            if approx is not None:  # (counted while the rules were built)
                stats.p2p_cases["synchronous"] = sum(d["synchronous_rules"] for d in every)
        result = Result(out, stats, reported)
        return result, reported, outcome, check

    return RankOutput(own, finish(), info)


def run_in_threads(trace: Trace, platform: Platform | None, bound: str, size: int,
                   collective_exit: str = "uniform", eager_limit: int | None = None,
                   strict: bool = False):
    """:func:`run_pipeline_parallel` on ``size`` thread ranks of this process (tests
    and experiments without ``mpiexec``): rank 0's result, its trace assembled from
    every rank's own locations (which the command never gathers). Each rank works
    on its trimmed view, as the command's ranks do."""
    from compensate.parallel.ghosts import complete_trimmed
    from compensate.parallel.transport import run_threads

    def rank(t: Transport) -> RankOutput:
        owner = owners(trace.definitions, list(trace.events), t.size)
        own = {loc: ev for loc, ev in trace.events.items() if owner[loc] == t.rank}
        view, index = complete_trimmed(trace.definitions, own, t, owner, trace.source)
        return run_rank(view, platform, bound, collective_exit, eager_limit, t, strict,
                        owner, index)

    return assemble(trace, run_threads(size, rank))


def assemble(trace: Trace, ranks: list[RankOutput]) -> tuple:
    """Rank 0's pipeline with its result's trace made whole from every rank's own
    locations (tests and experiments on thread ranks: the command never does this,
    each rank writes its own part); ``trace`` gives the location order."""
    result, *rest = ranks[0].pipeline
    events = {}
    for r in ranks:
        events.update(r.own.events)
    whole = Trace(trace.definitions, {loc: events[loc] for loc in trace.events},
                  trace.source)
    return (Result(whole, result.stats, result.matching), *rest)
