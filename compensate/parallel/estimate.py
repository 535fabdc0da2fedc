"""``--overhead estimate`` of the distributed run, made on the ranks
(docs/parallel.md, "``--overhead estimate``: the estimate reduced across ranks").

The one-process estimate (:func:`compensate.pipeline.run.estimate_pass`) takes
each kind's smallest gap after its records and the shortest observed transfer of
the trace's messages. Each gap belongs to one location and each message to its
receiver, so every rank takes those of its own locations over cuts the ranks
agree, and one ``allgather`` merges them into the one-process figures, bit for
bit. Where the one-process pass takes the gaps alone (its first records show
clocks that disagree), or the run does not stream, every rank makes the
one-process estimate itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from compensate.model import Definitions, Events
from compensate.overhead import KindGaps, ShortestTransfer
from compensate.parallel.segments import OwnSplitter, RankStream, StreamFallback
from compensate.parallel.transport import Transport
from compensate.pipeline.options import Job, RunOptions
from compensate.platform import Platform

__all__ = ["estimate_rank", "made_on_ranks"]


def made_on_ranks(transport: Transport, job: Job, plan: Callable[[], Any] | None) -> Job:
    """``job`` with the platform ``job.estimate`` makes (its summary object in
    ``job.estimate.info``), on every rank the one-process command's. ``plan()``:
    the streamed passes' plan (``compensate.parallel.command._plan``), None where
    the run does not stream. Collective."""
    from compensate.parallel.driver import agreed
    from compensate.parallel.reading import OneRead, guessed_offsets
    from compensate.pipeline.cuts import SEGMENT_RECORDS

    def skewed() -> bool:  # (rank 0: the one-process pass's first records)
        return bool(guessed_offsets(job.input, job.options.segment_records
                                    or SEGMENT_RECORDS))

    later, found = job.estimate, None
    if plan is not None:
        try:
            p = plan()
            if not transport.allgather(p.fallback(skewed if transport.rank == 0
                                                  else lambda: False))[0]:
                read = OneRead(p.read()[1])
                found = estimate_rank(p.defs, read.second(), p.agreeing(read, []),
                                      transport, p.owner, job.options, source=str(job.input),
                                      ahead=p)
        except StreamFallback:
            found = None
    later.platform, later.info = (agreed(transport, later.whole) if found is None
                                  else agreed(transport, later.finish, *found))
    return replace(job, platform=later.platform, estimate=None)


def estimate_rank(defs: Definitions, own_chunks: Iterable[dict[int, Events]],
                  cuts: Iterable[tuple[int | None, int]], transport: Transport,
                  owner: dict[int, int], options: RunOptions, *, source: str = "",
                  ahead: Any = None) -> tuple[dict[str, tuple[float, int]], float | None]:
    """What :func:`compensate.pipeline.run.estimate_pass` finds over the whole
    trace (each kind's smallest gap, the shortest observed transfer; None where a
    receive is stamped before its send), from every rank's own locations over
    the segments ``cuts``, merged (one ``allgather``). Raises
    :class:`~compensate.parallel.segments.StreamFallback` on every rank where the
    one-process pass would not stream. ``ahead``: as for
    :func:`~compensate.parallel.segments.stream_rank`."""
    rs = RankStream(defs, transport, owner, Platform(0.0), options, source=source,
                    ahead=ahead)
    rs.sg.aligned = True  # (a receive before its send ends the transfer bound, no more)
    splitter = OwnSplitter(defs, own_chunks)
    gaps, shortest = KindGaps(defs), ShortestTransfer()
    for cut, records in cuts:
        seg = rs.share.step(splitter.split, cut)
        shortest.add(rs.gaps_and_transfer(seg, records, gaps))
        seg = None
    all_gaps, all_shortest = KindGaps(defs), ShortestTransfer()
    for part, found in transport.allgather((gaps.best, shortest)):
        all_gaps.merge(part)
        all_shortest.merge(found)
    return all_gaps.bounds(), all_shortest.value
