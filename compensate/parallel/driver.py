"""One rank of the distributed in-memory run: the segment step of the pipeline
(:func:`compensate.pipeline.segment.run_segment`) on this rank's share.

:func:`run_rank` is :func:`compensate.pipeline.in_memory` on one rank of
``transport.size``: every rank matches its view of the trace (its own locations
and, of the others, what its rules read: :mod:`compensate.parallel.trim`),
shifts every process's clock as the one-process run does where a receive is
stamped before its send (:mod:`compensate.parallel.clocks`), under ``--bound
fitted`` observes the transfers whose receive it owns for the network fit that
rank 0 makes of them all (:mod:`compensate.parallel.fit`; a fit clamped on most
of its uses is replaced by its fallback and the share replayed again, as in one
process: :func:`compensate.engine.fit.clamp_check`), evaluates the anchors
of the locations it owns (:mod:`compensate.parallel.ownership`) while
:mod:`compensate.parallel.exchange` carries the anchors that cross ranks, maps the
METRIC samples of its locations and rounds their times (its :class:`RankOutput`'s
``own``, which the command writes as this rank's part of the output), and verifies
the dependencies whose dependent end it owns (:mod:`compensate.parallel.verification`:
the rounded times of the other ends come from their owners); the findings are
reduced on rank 0, which returns the same :class:`~compensate.pipeline.Run` as the
one-process pipeline without holding any other rank's times.
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

import signal
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import compensate.interrupt as interrupt
from compensate.engine.fit import clamp_check
from compensate.errors import Refusal
from compensate.matching import match
from compensate.model import Trace, TraceError
from compensate.parallel.clocks import reduced_alignment
from compensate.parallel.exchange import Exchange, RemoteFailure
from compensate.parallel.ownership import owners
from compensate.parallel.share import RankShare
from compensate.parallel.transport import RankStalled, Transport
from compensate.pipeline.options import RunOptions
from compensate.pipeline.run import Run
from compensate.pipeline.segment import Segment, run_segment
from compensate.platform import Platform, PlatformError

#: exit statuses (as compensate/cli/failure.py): bad input 3, internal error 1
EXIT_INTERNAL, EXIT_INPUT = 1, 3
#: not an exit: a rank cannot stream (NotStreamable, SegmentError), and every rank
#: falls back to the whole-share path together (compensate/parallel/segments.py)
FALLBACK = -1
#: as FALLBACK, because the processes' clocks disagree (ClocksDisagree): the ranks
#: may align them and stream
FALLBACK_CLOCKS = -2


class RankFailed(Exception):
    """Another rank failed: ``line`` is its one-line message (``compensate: error:
    ...``), ``status`` its exit status, ``rank`` its number."""

    def __init__(self, rank: int, status: int, line: str) -> None:
        super().__init__(line)
        self.rank, self.status, self.line = rank, status, line


def describe(exc: BaseException, prog: str = "compensate") -> tuple[int, str]:
    """The exit status and one-line message of ``exc`` (as
    :func:`compensate.cli.failure.failure_status` prints them)."""
    from compensate.formats import OutputError
    from compensate.pipeline.context import ClocksDisagree
    from compensate.pipeline.cuts import NotStreamable, SegmentError

    if isinstance(exc, (NotStreamable, SegmentError)):
        status = FALLBACK_CLOCKS if isinstance(exc, ClocksDisagree) else FALLBACK
        return status, f"{prog}: cannot stream ({exc})"
    if isinstance(exc, RankFailed):
        return exc.status, exc.line
    if isinstance(exc, MemoryError):  # (the one-process run's line)
        from compensate.pipeline.memory import out_of_memory
        exc = out_of_memory(exc)
    if isinstance(exc, (RankStalled, Refusal)):
        return EXIT_INPUT, f"{prog}: error: {exc}"
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
    exc = _with_signal(exc)
    _settle(transport, exc, transport.allgather(_status(exc)))


def _with_signal(exc: BaseException | None) -> BaseException | None:
    """``exc``, or where there is none and a signal came (recorded), its
    Interrupted."""
    if exc is None and interrupt.received() is not None:
        return interrupt.Interrupted(interrupt.received())
    return exc


def _status(exc: BaseException | None) -> tuple[int, str] | None:
    """What this rank tells the others at a phase boundary: None, or the exit status
    and line of its failure (a RemoteFailure is not a source: None)."""
    if exc is None or isinstance(exc, RemoteFailure):
        return None
    return describe(exc)


def _settle(transport: Transport, exc: BaseException | None, statuses: list) -> None:
    """Raise on this rank if any rank failed (``statuses``: every rank's
    :func:`_status`): its own ``exc`` on the first failing rank, RankFailed on the
    others."""
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
    except RankStalled:  # a rank that cannot answer cannot agree: the job ends
        raise
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - every rank must hear of it
        if exchange is not None and not isinstance(exc, RemoteFailure):
            exchange.fail()
        agree(transport, exc)
        raise  # agree always raises for a failure
    agree(transport, None)
    return out


def agreed_gather(transport: Transport, step: Any, *args: Any) -> list[Any]:
    """Every rank's ``step(*args)`` (``transport.allgather`` of it), with the
    phase boundary of :func:`agreed` in the same ``allgather``: a phase whose
    result every rank needs anyway costs one round, not two."""
    exc: BaseException | None = None
    out = None
    try:
        out = step(*args)
    except RankStalled:
        raise
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - every rank must hear of it
        exc = e
    exc = _with_signal(exc)
    every = transport.allgather((_status(exc), out))
    _settle(transport, exc, [s for s, _ in every])
    return [x for _, x in every]


@dataclass
class RankOutput:
    """What one rank of :func:`run_rank` ends with: ``own``, its own locations with
    their compensated times (METRIC samples mapped, rounded, as the one-process run
    writes them; the payloads as read: this rank writes them); ``run``, on rank 0
    the :class:`~compensate.pipeline.Run` of the one-process run, else None. Rank
    0's ``run.trace`` holds its own locations' times; of the others' only the
    records its verification read and each location's first and last (the
    summary's span), the rest :data:`compensate.parallel.verification.UNREAD`."""

    own: Trace
    run: Run | None
    #: this rank's counts and seconds (:func:`rank_info`), for the summary's ``parallel``
    info: dict = field(default_factory=dict)


def rank_info(trace: Trace, mine: list[int], exchange: Exchange | None) -> dict:
    """What the cost model of docs/performance.md reads of one rank: its records
    (own and ghost), its own anchors (the values its engine computes), and of the
    forward replay the values sent and received (the exchange's counts; the waits
    and messages are the transport's, over the whole run)."""
    own = sum(len(trace.events[loc]) for loc in mine)
    info: dict = {"records": own, "ghost_records": trace.record_count - own}
    if exchange is not None:
        if exchange.own_anchors is not None:
            info["anchors"] = exchange.own_anchors
        info.update(values_sent=exchange.sent,
                    values_received=exchange.received)
    return info


def remapped(index: dict | None, step: Any) -> Any:
    """``step`` whose TraceError names the original record of a trimmed ghost."""
    if not index:
        return step

    def run(*args: Any, **kwargs: Any) -> Any:
        from compensate.parallel.trim import remap_text
        try:
            return step(*args, **kwargs)
        except TraceError as exc:
            exc.args = (remap_text(index, str(exc)),)
            raise

    return run


def run_rank(trace: Trace, platform: Platform | None, options: RunOptions,
             transport: Transport, owner: dict[int, int] | None = None,
             index: dict[int, np.ndarray] | None = None) -> RankOutput:
    """One rank's share of the in-memory pipeline (module docstring).

    ``trace`` is this rank's view of the whole trace: its own locations whole, of
    the others what its rules read (:func:`compensate.parallel.ghosts.complete_trimmed`,
    ``index`` mapping the trimmed ghosts' positions to their original record
    indices), or the whole trace read whole. ``owner`` (default:
    :func:`compensate.parallel.ownership.owners` by process count) says which rank
    owns which location. The segment step (:func:`compensate.pipeline.segment.run_segment`)
    runs on this rank's share; rank 0 receives the reduced findings."""
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
    def step(f: Any, *args: Any) -> Any:
        return agreed(transport, remapped(index, f), *args)

    def evaluate(f: Any, *args: Any, exchange: Any) -> Any:
        return agreed(transport, remapped(index, f), *args, exchange=exchange)

    def matched() -> Any:
        return step(lambda: match(trace, eager_limit=options.eager_limit,
                                  strict=options.strict))

    matching, measured, alignment = matched(), trace, None
    if options.bound != "none":  # receives before their sends: one clock per process
        aligned = reduced_alignment(transport, trace, matching, mine, step)
        if aligned is not None:  # (as the one-process run: match the aligned trace)
            trace, alignment = aligned
            matching = matched()
    outcome = None
    if options.fits:  # R2f: the transfers whose receive this rank owns, fit on rank 0
        from compensate.engine.fit import observe_transfers
        from compensate.parallel.fit import reduced_outcome
        observed = step(observe_transfers, trace, matching, plat, set(mine))
        outcome = reduced_outcome(transport, observed, plat, step)
    lap("match")
    # t0: the earliest measured timestamp of all (each rank knows its own locations')
    firsts = transport.allgather(min((int(trace.events[loc].time[0]) for loc in mine
                                      if len(trace.events[loc])), default=None))
    t0 = min((x for x in firsts if x is not None), default=0)
    lap("setup")
    share = RankShare(transport, owner, step, evaluate)
    result, _ = run_segment(Segment(trace, trace, index=index), share, plat,
                            options.engine_options(outcome), t0, lambda _: matching)
    # a fit clamped on most of its uses: again with the fallback (rank 0 decides
    # from the reduced counts, as the one-process run does from its own)
    rejected = transport.allgather(
        clamp_check(outcome, result.stats.p2p_cases, plat.network)
        if transport.rank == 0 else None)[0]
    if rejected is not None:
        outcome = rejected
        share = RankShare(transport, owner, step, evaluate)
        result, _ = run_segment(Segment(trace, trace, index=index), share, plat,
                                options.engine_options(outcome), t0, lambda _: matching)
    seconds.update(share.seconds)
    info = rank_info(trace, mine, share.current)
    info.update(replay=share.replay, seconds=seconds)
    own = Trace(trace.definitions, {loc: trace.events[loc] for loc in mine}, trace.source
                ).with_times(result.times.times, result.times.sizes)
    if transport.rank != 0:
        return RankOutput(own, None, info)
    run = Run(fit=outcome, matching=share.reported, records=share.records,
              locations=len(trace.events), resolution=trace.definitions.timer_resolution)
    run.add(result)
    run.stats.records, run.stats.locations = run.records, run.locations
    for loc, ev in measured.events.items():  # (the span as read: before any alignment)
        run.spans(ev.time, share.checked.events[loc].time, trace.events[loc].time)
    run.nesting_first = matching.nesting_first
    run.clock_alignment = alignment
    run.trace = share.checked
    return RankOutput(own, run, info)
