"""The calls around sends that the stream cutter (:mod:`compensate.pipeline.cuts`)
waits for: matching needs a send call's Leave in the segment of the send, so no
cut may fall between a send and the end of the call around it. The end is the
first Leave after the send on its call level (the tolerant nesting rule,
:func:`compensate.matching.nesting`), found across chunks: a location's calls
still open after one chunk go in front of its next one as Enters.

:func:`send_call_ends` finds them for one location's records; :class:`Joined`
for the records of many locations at once, as one flat array, so that the
cutter's cost per chunk does not grow with a few dozen numpy calls per location
(a chunk of a few records on each of many locations).
"""

from __future__ import annotations

import numpy as np

from compensate.matching import nesting
from compensate.model import ENTER, ISEND, LEAVE, SEND


def send_call_ends(kind: np.ndarray, region: np.ndarray, time: np.ndarray,
                   carried_regions: list[int], waits: list[int]
                   ) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """Of one location's records (their ``kind``, ``region`` and ``time``): (times
    of sends inside a call, times of the Leaves that close such calls — of these
    sends or of the calls still waited for, ``waits``), then the calls still waited
    for after them and the regions of the calls open then. The call around a send
    ends with the first Leave after it on the send's call level (the tolerant
    nesting rule of :class:`compensate.matching.Nesting`, continued across chunks:
    the calls still open, ``carried_regions`` in entry order, go in front of the
    records as Enters, on levels 1, 2, ...; ``waits``: the positions among them of
    the calls around earlier sends)."""
    k = kind
    c = len(carried_regions)
    # (np.concatenate, not np.r_: this runs per location and chunk, r_ costs ~10 us)
    nest = nesting(np.concatenate((np.full(c, ENTER, k.dtype), k)),
                   np.concatenate((np.array(carried_regions, dtype=region.dtype), region)))
    before = nest.before[c:]
    sends = np.flatnonzero((k == SEND) | (k == ISEND))
    lvl = before[sends]
    sends, lvl = sends[lvl > 0], lvl[lvl > 0]  # outside any call: no Leave to wait for
    carried = np.array(waits, dtype=np.int64) + 1  # position -> level
    w_lvl = np.concatenate((carried, lvl))
    w_after = np.concatenate((np.full(carried.size, -1, np.int64), sends))
    ends, still = [], []
    for d in np.unique(w_lvl).tolist():
        cand = nest.leaves.get(d, np.zeros(0, np.int64)) - c
        sel = w_lvl == d
        j = np.searchsorted(cand, w_after[sel], side="right")
        ok = j < cand.size
        ends.append(time[cand[j[ok]]])
        still += [d] * int(np.count_nonzero(~ok))
    # the calls open after the records, and the pending send calls by their position
    open_end = nest.open_end
    position = {lv: p for p, lv in enumerate((nest.before[open_end] + 1).tolist())}
    open_now = np.concatenate((np.array(carried_regions, dtype=np.int64),
                               region.astype(np.int64)))[open_end].tolist()
    return (time[sends], np.concatenate(ends) if ends else np.zeros(0, np.int64),
            [position[d] for d in still], open_now)


class Joined:
    """The records of a chunk's locations joined into one array, each location's
    behind an Enter for each call it carries open (as :func:`send_call_ends`
    puts them in front of one location's records), and their call levels: the
    tolerant nesting rule (:func:`compensate.matching.nesting`) of every location
    at once where the location nests. ``owner[i]``: the position in ``carried`` of
    record ``i``'s location (its records in order, the locations' interleaved).
    ``bad[j]``: location ``j`` does not nest; what is found for it here is left
    unused."""

    def __init__(self, kind: np.ndarray, region: np.ndarray, time: np.ndarray,
                 owner: np.ndarray, carried: list[list[int]]) -> None:
        small = len(carried) <= np.iinfo(np.uint16).max  # (16-bit keys: a radix sort)
        order = np.argsort(owner.astype(np.uint16) if small else owner, kind="stable")
        owner = owner[order]
        c = np.array([len(r) for r in carried], np.int64)
        n = np.bincount(owner, minlength=len(carried))
        sizes = c + n
        self.starts = np.cumsum(sizes) - sizes
        self.ends, self.firsts = self.starts + sizes, self.starts + c
        self.seg = np.repeat(np.arange(len(carried)), sizes)
        real = np.arange(owner.size) + np.repeat(np.cumsum(c), n)
        total = int(sizes.sum())
        self.kind = np.full(total, ENTER, kind.dtype)
        self.kind[real] = kind[order]
        self.region = np.empty(total, np.int64)
        self.region[real] = region[order]
        virtual = np.ones(total, bool)
        virtual[real] = False
        self.region[virtual] = [r for regions in carried for r in regions]
        self.time = np.zeros(total, np.int64)
        self.time[real] = time[order]
        step = (self.kind == ENTER).view(np.int8) - (self.kind == LEAVE).view(np.int8)
        total_steps = np.cumsum(step)
        self.after = total_steps - np.repeat(total_steps[self.starts] - step[self.starts],
                                             sizes)
        self.before = self.after - step
        self.lo = int(self.before.min())
        self.width = max(int(self.after.max()), 0) - self.lo + 1
        self.enters = np.flatnonzero(self.kind == ENTER)
        self.leaves = np.flatnonzero(self.kind == LEAVE)
        self.bad = np.minimum.reduceat(self.after, self.starts) < 0
        self._pair()

    def records(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Location ``j``'s records: their kind, region and time."""
        a, b = int(self.firsts[j]), int(self.ends[j])
        return self.kind[a:b], self.region[a:b], self.time[a:b]

    def group(self, seg: np.ndarray, level: np.ndarray) -> np.ndarray:
        """One number per (location, call level)."""
        return seg * self.width + (level - self.lo)

    def _pair(self) -> None:
        """The k-th Leave of each location's level closes its k-th Enter where the
        location nests: a location whose pairs differ in region does not (it is
        marked :attr:`bad`). Keeps the Leaves sorted by (location, level, index)."""
        ge = self.group(self.seg[self.enters], self.after[self.enters])
        gl = self.group(self.seg[self.leaves], self.before[self.leaves])
        oe, ol = np.argsort(ge, kind="stable"), np.argsort(gl, kind="stable")
        ge, en = ge[oe], self.enters[oe]
        self.gl, self.ls = gl[ol], self.leaves[ol]
        # each Leave's rank in its group and where its group starts among the Enters
        # (per group, not per Leave: the groups are few, the Leaves many)
        first = np.flatnonzero(np.r_[True, self.gl[1:] != self.gl[:-1]]) \
            if self.gl.size else np.zeros(0, np.int64)
        sizes = np.diff(np.r_[first, self.gl.size])
        rank = np.arange(self.ls.size) - np.repeat(first, sizes)
        pos = np.repeat(np.searchsorted(ge, self.gl[first], "left"), sizes) + rank
        ok = pos < en.size
        ok[ok] = (ge[pos[ok]] == self.gl[ok]) & \
            (self.region[en[pos[ok]]] == self.region[self.ls[ok]])
        self.bad[self.seg[self.ls[~ok]]] = True

    def send_call_ends(self, waits: list[list[int]]
                       ) -> tuple[np.ndarray, np.ndarray, list[list[int]], list[list[int]]]:
        """Of the locations that nest: (times of the sends inside a call, times of
        the Leaves that close such calls, of these sends or of the calls ``waits[j]``
        (positions among the carried calls) still waited for), and per location the
        positions of the calls still waited for after the chunk and the regions of
        its calls open then (empty for a :attr:`bad` location)."""
        sends = np.flatnonzero((self.kind == SEND) | (self.kind == ISEND))
        sends = sends[self.before[sends] > 0]  # outside any call: no Leave to wait for
        sends = sends[~self.bad[self.seg[sends]]]
        carried = np.repeat(np.arange(len(waits)), [len(w) for w in waits])
        w_seg = np.concatenate((carried, self.seg[sends]))
        w_lvl = np.concatenate((np.array([p for w in waits for p in w], np.int64) + 1,
                                self.before[sends]))
        w_after = np.concatenate((self.starts[carried] - 1, sends))
        good = ~self.bad[w_seg]
        w_seg, w_lvl, w_after = w_seg[good], w_lvl[good], w_after[good]
        span = self.kind.size + 1  # (location, level, index) as one sortable number
        wg = self.group(w_seg, w_lvl)
        q = np.searchsorted(self.gl * span + self.ls, wg * span + w_after, "right")
        ok = q < self.ls.size
        ok[ok] = self.gl[q[ok]] == wg[ok]
        closed = self.time[self.ls[q[ok]]]
        order = np.lexsort((w_lvl[~ok], w_seg[~ok]))
        still = _per_location(w_seg[~ok][order], (w_lvl[~ok][order] - 1).tolist(),
                              len(waits))
        return self.time[sends], closed, still, self._open_at_end(len(waits))

    def _open_at_end(self, locations: int) -> list[list[int]]:
        """Per location, the regions of its calls open after its last record (entry
        order): Enters after which its call level never falls below theirs."""
        shifted = self.after + self.seg * (2 * self.kind.size + 4)  # (per location)
        suffix_min = np.minimum.accumulate(shifted[::-1])[::-1]
        open_end = self.enters[suffix_min[self.enters] >= shifted[self.enters]]
        open_end = open_end[~self.bad[self.seg[open_end]]]
        return _per_location(self.seg[open_end], self.region[open_end].tolist(), locations)


def joined_send_call_ends(kind: np.ndarray, region: np.ndarray, time: np.ndarray,
                          owner: np.ndarray, carried: list[list[int]],
                          waits: list[list[int]]
                          ) -> tuple[np.ndarray, np.ndarray, list[list[int]], list[list[int]]]:
    """:func:`send_call_ends` of the records of several locations at once (``owner[i]``:
    the position in ``carried`` and ``waits`` of record ``i``'s location), their
    calls still waited for and open after them as one list per location: over one
    flat array of all of them (:class:`Joined`), a location whose records do not
    nest (with the calls it carries) alone (the walk: :func:`compensate.matching.nesting`)."""
    x = Joined(kind, region, time, owner, carried)
    opened, closed, still, open_now = x.send_call_ends(waits)
    times, ends = [opened], [closed]
    for j in np.flatnonzero(x.bad).tolist():
        o, c, still[j], open_now[j] = send_call_ends(*x.records(j), carried[j], waits[j])
        times.append(o)
        ends.append(c)
    return np.concatenate(times), np.concatenate(ends), still, open_now


def _per_location(seg: np.ndarray, values: list[int], locations: int) -> list[list[int]]:
    """``values`` (sorted by ``seg``, their locations' positions) as a list per
    location."""
    bounds = np.searchsorted(seg, np.arange(locations + 1)).tolist()
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
