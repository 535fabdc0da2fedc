"""The stream cutter's search for cuts and record counts only
(:class:`CountingCutter`): the base of a distributed rank's cutter
(:mod:`compensate.parallel.cutting`) and of the tests' one-process reference
cuts."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from compensate.model import (
    COLL_END,
    COLUMNS,
    IRECV,
    ISEND,
    NBC_COMPLETE,
    PROBE,
    RECV,
    SEND,
    Definitions,
    Events,
    kind_table,
)
from compensate.pipeline.cuts import Cutter
from compensate.pipeline.unclosed import Unclosed

#: the records :meth:`Cutter.balance` reads, by kind code: every other record's part
#: in a cut is its time
ALIGNED = kind_table(SEND, ISEND, RECV, IRECV, PROBE, COLL_END, NBC_COMPLETE)


class CountingCutter(Cutter):
    """The cutter's search for the segments' cuts and record counts only (the
    base of a distributed rank's cutter, :mod:`compensate.parallel.cutting`, and
    the search of the tests' one-process reference cuts): the
    same attempts and cuts as :class:`Cutter`, but of the records it takes it keeps
    every record's time (the counts, the references of METRIC samples) and, their
    columns without their payloads, only the records :meth:`Cutter.balance` reads
    (:data:`ALIGNED`); the busy
    function is built from each whole chunk as it is taken. A segment is then
    ``{location: measured times of its records}``. The remainder after a cut is
    copied, so that the joined arrays are freed with the segment."""

    def __init__(self, defs: Definitions, segment_records: int) -> None:
        super().__init__(defs, segment_records)
        self.times: dict[int, list[np.ndarray]] = defaultdict(list)
        self.merged_times: dict[int, np.ndarray] = {}
        #: the record numbers (from the location's first) of the kept records, as
        #: ``pending`` holds them: what :meth:`read_ahead` closes among them
        self.numbers: dict[int, list[np.ndarray]] = defaultdict(list)

    def _hold(self, loc: int, ev: Events) -> None:
        self.times[loc].append(ev.time)
        # (ev.copy(mask) by indices: one index array, not a mask per column; no
        # payloads, which balance never reads)
        keep = np.flatnonzero(ALIGNED[ev.kind])
        if keep.size:
            cols = {name: getattr(ev, name).take(keep) for name, _ in COLUMNS}
            self.pending[loc].append(Events(**cols, payload=[None] * keep.size))
            self.numbers[loc].append(keep + self.seen[loc])  # (take: seen is the start)

    def merge(self) -> dict[int, Events]:
        """The kept records as :meth:`Cutter.merge` gives them; every record's time
        joined the same way (:attr:`merged_times`)."""
        self.merged_times = {loc: np.concatenate(parts) if len(parts) > 1 else parts[0]
                             for loc, parts in self.times.items() if parts}
        self.times = defaultdict(list, {loc: [t] for loc, t in self.merged_times.items()})
        self.numbers = defaultdict(list, {loc: [np.concatenate(parts)]
                                          for loc, parts in self.numbers.items() if parts})
        return super().merge()

    def read_ahead(self, unclosed: Unclosed) -> None:
        """:meth:`Cutter.read_ahead` over what this cutter keeps: a never-completed
        request's or collective Begin's time from :attr:`times` (every record's), a
        never-received send and a receive past a gap from the kept records (every
        send and receive is one), by their record numbers."""
        self.unclosed = unclosed
        for loc, parts in self.times.items():
            held = sum(t.size for t in parts)
            if not held:
                continue
            start = self.seen[loc] - held
            times = np.concatenate(parts)
            requests = times[unclosed.opened(loc, start, start + held)]
            kept = self.pending.get(loc)
            rows = Events.concat(kept) if kept else Events.from_rows([])
            numbers = np.concatenate(self.numbers[loc]) if kept else np.zeros(0, np.int64)
            sends = np.flatnonzero(np.isin(numbers, unclosed.sends.get(loc, numbers[:0])))
            self._close(loc, requests, rows, sends)
            self._unpair(loc, rows, np.flatnonzero(
                np.isin(numbers, unclosed.receives.get(loc, numbers[:0]))))

    def pending_times(self, merged: dict[int, Events]) -> list[np.ndarray]:
        """Every pending record's time, not only the kept ones' (after :meth:`merge`)."""
        return list(self.merged_times.values())

    def bounds(self, merged: dict[int, Events]) -> tuple[int, int]:
        """(first, last) measured time of every pending record, not only of the kept
        ones (from :attr:`merged_times`: after :meth:`merge`)."""
        times = self.merged_times.values()
        return min(int(t[0]) for t in times), max(int(t[-1]) for t in times)

    def split(self, merged: dict[int, Events], cut: int, bt: np.ndarray | None,
               bd: np.ndarray | None, done: dict | None) -> dict[int, np.ndarray]:
        seg: dict[int, np.ndarray] = {}
        self.pending = defaultdict(list)
        self.times = defaultdict(list)
        self.count = 0
        ends = self._ends(self.merged_times, cut)
        for loc, t in self.merged_times.items():
            n = ends[loc]
            if n:
                seg[loc] = t[:n]
            if n < len(t):
                self.times[loc].append(t[n:].copy())
                self.count += len(t) - n
            ev = merged.get(loc)
            if ev is not None:  # the kept records of the n: those up to the n-th's time
                m = int(np.searchsorted(ev.time, t[n - 1], "right")) if n else 0
                if m < len(ev):
                    self.pending[loc].append(ev.copy(slice(m, None)))
                    self.numbers[loc] = [self.numbers[loc][0][m:].copy()]
                else:
                    self.numbers[loc] = []
        self.merged_times = {}
        self._cut_at(cut, bt, bd, done)
        return seg

    def rest(self) -> dict[int, np.ndarray] | None:
        if not self.count:
            return None
        seg = {loc: np.concatenate(parts) for loc, parts in self.times.items() if parts}
        self.times.clear()
        self.pending.clear()
        self.numbers.clear()
        self.count = 0
        return seg
