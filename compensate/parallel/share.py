"""A rank's share of a segment (:class:`compensate.pipeline.segment.Share`): the
locations this rank owns are evaluated here, the anchors other ranks own arrive
through the exchange (:mod:`compensate.parallel.exchange`), each rank verifies
the dependencies whose dependent end it owns (:mod:`compensate.parallel.verification`)
and rank 0 holds the reduced verification and counts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from compensate.engine import Stats
from compensate.matching import Matching
from compensate.model import Trace
from compensate.parallel.exchange import Exchange
from compensate.parallel.transport import Transport
from compensate.parallel.trim import local_counts, reduced_matching
from compensate.parallel.verification import verify_rank
from compensate.pipeline.segment import Segment, Times, count_matching
from compensate.verify import Verification

#: the transport's traffic counters, in :meth:`Traffic.snapshot`'s order
TRAFFIC = ("collectives", "bytes_sent", "collective_seconds", "messages", "message_bytes",
           "waves")


class RankShare:
    """This rank's share on ``transport``; ``owner``: ``{location: rank}``;
    ``step(f, *args)``: runs a phase so that a failure on any rank raises on every
    rank (:func:`compensate.parallel.driver.agreed`, or the streamed run's
    fallback step); ``evaluate``: the same for the engine with its exchange."""

    def __init__(self, transport: Transport, owner: dict[int, int],
                 step: Callable[..., Any], evaluate: Callable[..., Any]) -> None:
        self.transport = transport
        self.owner = owner
        self._step = step
        self._evaluate = evaluate
        self.current: Exchange | None = None
        #: the verified trace of the last segment (rank 0: every location's first
        #: and last time too, the summary's span)
        self.checked: Trace | None = None
        #: the records of the last segment, summed over the ranks (rank 0)
        self.records = 0
        #: the transport's traffic during the engine's replay, by counter
        self.replay = dict.fromkeys(TRAFFIC, 0)
        #: this rank's wall seconds of the segment step's phases (the summary's
        #: ``parallel``): the replay, the own times, the verification
        self.seconds: dict[str, float] = {}

    def step(self, f: Callable[..., Any], *args: Any, phase: str | None = None) -> Any:
        if phase is None:
            return self._step(f, *args)
        with self._timed(phase):
            return self._step(f, *args)

    @contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        """Adds the wall seconds of the ``with`` block to ``seconds[phase]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = (self.seconds.get(phase, 0.0)
                                   + time.perf_counter() - start)

    def own(self, trace: Trace) -> list[int]:
        return [loc for loc in trace.events if self.owner[loc] == self.transport.rank]

    def exchange(self, segment: Segment) -> Exchange:
        self.current = Exchange(self.transport, self.owner, segment.index)
        return self.current

    def evaluate(self, f: Callable[..., Any], *args: Any) -> Any:
        before = self.transport.traffic.snapshot()
        with self._timed("replay"):
            out = self._evaluate(f, *args, exchange=self.current)
        after = self.transport.traffic.snapshot()
        self.replay = {key: b - a for key, a, b in zip(TRAFFIC, before, after, strict=True)}
        # (no collection here: the engine's graph holds no reference cycle, so the
        # segment's graph and rules are freed by reference counting as in one
        # process, with the command's cyclic collector paused, compensate.gcpause)
        return out

    def verify(self, segment: Segment, matching: Matching, times: Times
               ) -> Verification | None:
        skip = {loc: segment.head(loc) for loc in segment.pins}
        with self._timed("verify"):
            self.checked, check = verify_rank(self.transport, self.owner, segment.engine,
                                              matching, times.times, step=self.step,
                                              index=segment.index, skip=skip or None)
        return check

    def count(self, stats: Stats, matching: Matching, segment: Segment, own: list[int],
              compensated: bool) -> dict:
        counts = self.step(local_counts, segment.match, matching, set(own))
        counts["records"] = sum(len(segment.engine.events[loc]) - segment.head(loc)
                                for loc in own)
        every = self.transport.allgather(counts)
        if self.transport.rank != 0:
            return {}
        reported = reduced_matching(matching, every)
        count_matching(stats, matching)
        stats.messages = reported.counts()["messages"]
        stats.unmatched_sends = reported.unmatched_sends
        self.records = sum(d["records"] for d in every)
        self.reported = reported
        return reported.counts()

