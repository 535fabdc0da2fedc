"""A windowed k-way merge with a watermark: records of several *sources* (locations),
each handed over in runs in its own non-decreasing time order, come out in global
order — by time, ties by source rank, then by per-source order — in bounded memory.

Why: the engine produces records location by location and segment by segment
(:mod:`compensate.pipeline.cuts`), but a ``.trace`` file, and any other
time-ordered consumer (``compensate export`` could be one), wants them in one
global time order. Holding the whole trace would give up the streamed path's
bounded memory; handing records on as they come would give up the order. The
merge holds records in a priority queue and releases those that nothing still to
come can precede. Three facts bound what can still come:

* a source that has pushed records never pushes one earlier than its last
  (:meth:`WindowedMerge.push` checks);
* :meth:`WindowedMerge.finish`: a source pushes nothing more;
* :meth:`WindowedMerge.advance` (the *watermark*): no source that has not pushed
  anything yet will push a record earlier than the given time. Only the producer
  knows this — without it a source that is still silent (a location without
  records, or whose first record comes late) holds back everything.

So the *release bound* is the minimum of the last times of the unfinished sources
that have pushed and, while some unfinished source has pushed nothing, the
watermark; :meth:`WindowedMerge.pop` takes every record strictly before it
(:attr:`WindowedMerge.bound`). A record at the bound itself waits: a source of a
lower rank may still push one at the same time.

The queue holds runs, not records: a :class:`sortedcontainers.SortedKeyList` of
the runs keyed by (next time, source rank, arrival), so a release touches only
the runs that start inside the window below the bound (splitting the last one of
a source at the bound); :func:`merge_order` then interleaves the released pieces
record by record with one ``numpy.lexsort``. The sources' last times sit in a
:class:`sortedcontainers.SortedList`, so the bound costs O(log k) per push for k
sources.

``capacity`` is the memory safety net: when more records are queued than that,
:meth:`WindowedMerge.pop_ready` releases the earliest ones down to half the
capacity whatever the bound says (counted in :attr:`WindowedMerge.forced`). A
source may then push a record earlier than one already released: each source's
own order is always kept, the global order no longer is.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
from sortedcontainers import SortedKeyList, SortedList


class Piece(NamedTuple):
    """Records ``start:stop`` of a run that :meth:`WindowedMerge.push` was given:
    ``times`` and ``item`` as pushed, ``index`` the source's record number of
    ``times[start]`` (records the source pushed before it)."""

    source: Hashable
    rank: int
    item: Any
    times: np.ndarray
    start: int
    stop: int
    index: int


class _Run:
    __slots__ = ("source", "rank", "item", "times", "start", "index", "seq", "key")

    def __init__(self, source: Hashable, rank: int, item: Any, times: np.ndarray,
                 index: int, seq: int) -> None:
        self.source, self.rank, self.item, self.times = source, rank, item, times
        self.start, self.index, self.seq = 0, index, seq
        self.key = (int(times[0]), rank, seq)

    def take(self, stop: int) -> Piece:
        """Records ``start:stop`` as a piece; the run continues at ``stop``."""
        piece = Piece(self.source, self.rank, self.item, self.times, self.start, stop,
                      self.index)
        self.index += stop - self.start
        self.start = stop
        if stop < len(self.times):
            self.key = (int(self.times[stop]), self.rank, self.seq)
        return piece


class WindowedMerge:
    """Merge runs of records from ``sources`` (in rank order: earlier sources win
    ties) into global (time, rank, per-source order) order. See the module
    documentation. ``len()`` is the number of records queued."""

    def __init__(self, sources: Sequence[Hashable], *, capacity: int | None = None) -> None:
        self.capacity = capacity
        self._rank = {s: r for r, s in enumerate(sources)}
        if len(self._rank) != len(sources):
            raise ValueError("sources must be distinct")
        self._runs = SortedKeyList(key=attrgetter("key"))  # every queued run
        self._queues: dict[Hashable, deque[_Run]] = {}  # source -> its runs, in order
        self._count: dict[Hashable, int] = {}  # source -> records pushed
        self._last: dict[Hashable, int] = {}  # source -> time of its last record
        self._frontier = SortedList()  # (last time, rank) of unfinished sources that pushed
        self._silent = set(self._rank)  # unfinished sources that have pushed nothing
        self._finished: set[Hashable] = set()
        self._seq = 0
        self._size = 0
        #: no silent source pushes a record before this (None: nothing known)
        self.watermark: int | None = None
        #: records released by :meth:`pop_ready` ahead of the bound (capacity)
        self.forced = 0

    def __len__(self) -> int:
        return self._size

    def __contains__(self, source: Hashable) -> bool:
        """Whether ``source`` is one of the merge's sources."""
        return source in self._rank

    def rank(self, source: Hashable) -> int:
        return self._rank[source]

    def finished(self, source: Hashable) -> bool:
        """Whether :meth:`finish` was called for ``source``."""
        return source in self._finished

    def count(self, source: Hashable) -> int:
        """Records ``source`` has pushed."""
        return self._count.get(source, 0)

    def last(self, source: Hashable) -> int | None:
        """Time of ``source``'s last pushed record (None: none yet)."""
        return self._last.get(source)

    # -- what the producer says --------------------------------------------------

    def push(self, source: Hashable, times: np.ndarray, item: Any = None) -> None:
        """Queue a run of ``source``'s records: ``times`` (int64, non-decreasing, not
        before the source's last record) and an ``item`` handed back with the
        pieces (e.g. the records themselves). The merge keeps both until the run
        is released: do not modify them. An empty run changes nothing."""
        rank = self._rank.get(source)
        if rank is None:
            raise KeyError(f"unknown source {source!r}")
        n = len(times)
        if not n:
            return
        if source in self._finished:
            raise ValueError(f"source {source!r} was declared finished")
        last = self._last.get(source)
        if (last is not None and int(times[0]) < last) or \
                (n > 1 and bool(np.any(times[1:] < times[:-1]))):
            raise ValueError(f"times of source {source!r} go backwards")
        run = _Run(source, rank, item, times, self._count.get(source, 0), self._seq)
        self._seq += 1
        self._runs.add(run)
        self._queues.setdefault(source, deque()).append(run)
        self._count[source] = run.index + n
        new_last = int(times[-1])
        if last is None:
            self._silent.discard(source)
        else:
            self._frontier.remove((last, rank))
        self._frontier.add((new_last, rank))
        self._last[source] = new_last
        self._size += n

    def advance(self, time: int) -> None:
        """The watermark: no source that has pushed nothing yet will push a record
        earlier than ``time`` (it only ever rises; a lower ``time`` is ignored)."""
        time = int(time)
        if self.watermark is None or time > self.watermark:
            self.watermark = time

    def finish(self, source: Hashable) -> None:
        """``source`` pushes no more records (what it queued stays queued)."""
        if source in self._finished or source not in self._rank:
            return
        self._finished.add(source)
        self._silent.discard(source)
        last = self._last.get(source)
        if last is not None:
            self._frontier.remove((last, self._rank[source]))

    # -- releasing ---------------------------------------------------------------

    @property
    def bound(self) -> int | float:
        """Records strictly before this time can be released: the earliest last time
        of the unfinished sources that pushed, and the watermark while a source is
        silent. ``-inf``: nothing yet (a silent source and no watermark); ``inf``:
        everything (every source finished)."""
        bound: int | float = math.inf
        if self._frontier:
            bound = self._frontier[0][0]
        if self._silent:
            if self.watermark is None:
                return -math.inf
            bound = min(bound, self.watermark)
        return bound

    def pop(self, below: int | float | None = None) -> list[Piece]:
        """Take every queued record before ``below`` (default: :attr:`bound`;
        ``math.inf``: everything), as pieces in (start time, rank) order."""
        below = self.bound if below is None else below
        runs = self._runs
        pieces = []
        if below == math.inf:
            while runs:
                pieces.append(self._take(runs.pop(0), None))
            return pieces
        while runs and runs[0].key[0] < below:
            run = runs.pop(0)
            stop = int(np.searchsorted(run.times, below, side="left"))
            pieces.append(self._take(run, stop))
        return pieces

    def pop_all(self) -> list[Piece]:
        """Take every queued record."""
        return self.pop(math.inf)

    def pop_earliest(self, k: int) -> list[Piece]:
        """Take the ``k`` earliest queued records (time, rank, per-source order),
        whatever the bound says."""
        if k <= 0 or not self._size:
            return []
        runs = [run for queue in self._queues.values() for run in queue]
        times = np.concatenate([run.times[run.start:] for run in runs])
        rank = np.concatenate([np.full(len(run.times) - run.start, run.rank, np.int64)
                               for run in runs])
        index = np.concatenate([np.arange(run.index, run.index + len(run.times) - run.start)
                                for run in runs])
        first = np.lexsort((index, rank, times))[:k]
        per_rank = np.bincount(rank[first], minlength=len(self._rank))
        pieces = []
        for queue in list(self._queues.values()):
            want = int(per_rank[queue[0].rank]) if queue else 0
            while want:
                run = queue[0]
                self._runs.remove(run)
                stop = min(len(run.times), run.start + want)
                want -= stop - run.start
                pieces.append(self._take(run, stop))
        return pieces

    def pop_ready(self) -> list[Piece]:
        """:meth:`pop`, unless more than ``capacity`` records are queued: then the
        earliest down to half the capacity (:attr:`forced` counts them)."""
        if self.capacity is not None and self._size > self.capacity:
            pieces = self.pop_earliest(self._size - self.capacity // 2)
            self.forced += sum(p.stop - p.start for p in pieces)
            return pieces
        return self.pop()

    def _take(self, run: _Run, stop: int | None) -> Piece:
        """Records of ``run`` (already out of ``_runs``) up to ``stop`` (None: all);
        the rest of the run goes back into the queue."""
        n = len(run.times)
        stop = n if stop is None else stop
        piece = run.take(stop)
        self._size -= piece.stop - piece.start
        if stop < n:
            self._runs.add(run)
        else:
            queue = self._queues[run.source]
            queue.popleft()
            if not queue:
                del self._queues[run.source]
        return piece


def merge_order(pieces: Iterable[Piece]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How to interleave the records of ``pieces`` (as concatenated in the given
    order): ``(order, rank, index)``, where ``order`` is the permutation that sorts
    them by time, source rank, per-source record number, and ``rank``/``index``
    are those of every record before permuting."""
    pieces = list(pieces)
    if not pieces:
        z = np.zeros(0, np.int64)
        return z, z, z
    time = np.concatenate([p.times[p.start:p.stop] for p in pieces])
    rank = np.concatenate([np.full(p.stop - p.start, p.rank, np.int64) for p in pieces])
    index = np.concatenate([np.arange(p.index, p.index + p.stop - p.start) for p in pieces])
    return np.lexsort((index, rank, time)), rank, index
