"""A platform's per-record overhead at the speed the trace was recorded at.

A tracer's cost per record is work of the CPU, so it follows the speed of the core
it ran on. Where cores change speed (shared virtual CPUs, frequency scaling,
another job on the node) a platform measured at one hour over- or under-states
the cost of a trace recorded at another; with EZTrace on a shared machine the
same probe measures a third more or less from one hour to the next.

Some pairs of consecutive records of one location hold the tracer's own work
alone: an MPI wrapper's Enter and the MpiSend it writes before it calls the
library, a receive's MpiRecv and its Leave. The calibration stores their median
gap (the platform file's ``speed_reference``, ``"Enter>MpiSend"`` -> seconds), and
the trace shows the same gaps at its own speed (:class:`PairGaps`). The median
of the trace's gap over the reference's, among the pairs the trace holds at
least :data:`MIN_COUNT` times, is the trace's speed relative to the calibration
(:func:`speed_factor`), and every per-record cost of the platform is scaled by
it (:func:`scaled`): the per-kind and per-region overheads and their parts
before the stamp, not the copy table or the network (memory and the interconnect do not follow
the core's clock the same way).

A factor outside :data:`LIMITS` says the trace was not recorded by the tracer
the platform describes (or not on this machine): the platform is then used as
it is, and the summary says why. ``--speed platform`` (``speed="platform"``)
turns the scaling off. docs/compensation.md, "Which overhead".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

from compensate.model import Definitions, Events
from compensate.overhead import continued
from compensate.platform import Platform, reference_pair

#: a pair enters the factor only with at least this many gaps in the trace
MIN_COUNT = 100
#: the factors accepted as the same tracer on the same machine at another speed: a
#: shared vCPU switches between two speeds about 2x apart (docs/realrun.md, "Each
#: vCPU runs at two speeds"), so a platform measured at one and a trace recorded at
#: the other differ by that much (up to 2.5 in its EZTrace runs)
LIMITS = (1 / 3, 3.0)
#: gaps are counted in 1 ns bins up to this many ns (longer ones in the last bin:
#: a reference pair's median lies far below it)
MAX_NS = 20_000
#: ``--speed`` choices: scale to the trace's speed, or use the platform as it is
CHOICES = ("trace", "platform")


class PairGaps:
    """Gaps of the reference pairs, handed location by location in pieces (a
    stream's chunks, each location's in order), counted in 1 ns bins: the same
    medians as the whole trace's, the gap across two pieces included."""

    def __init__(self, defs: Definitions, pairs: Iterable[str]) -> None:
        self.defs = defs
        self.codes = {reference_pair(p): p for p in pairs}
        if None in self.codes:
            raise ValueError(f"{self.codes[None]!r} is not two OTF2 record kinds joined by '>'")
        self.hist = {p: np.zeros(MAX_NS + 1, dtype=np.int64) for p in self.codes.values()}
        self.last: dict[int, tuple] = {}  # location: (time, kind) of its last record
        self.ns_per_tick = 1e9 / float(defs.timer_resolution)

    def add(self, loc: int, ev: Events) -> None:
        """Take the next records ``ev`` of location ``loc``."""
        info = self.defs.locations.get(loc)
        if not len(ev) or info is not None and not info.is_cpu:
            return
        time, kind = continued(self.last, loc, np.asarray(ev.time, dtype=np.int64), ev.kind)
        if time.size < 2:
            return
        first, then = kind[:-1], kind[1:]
        ns = np.clip(np.rint(np.diff(time) * self.ns_per_tick), 0, MAX_NS).astype(np.int64)
        for (a, b), pair in self.codes.items():
            sel = (first == a) & (then == b)
            if sel.any():
                self.hist[pair] += np.bincount(ns[sel], minlength=MAX_NS + 1)

    def medians(self) -> dict[str, tuple[float, int]]:
        """Per pair seen: (median gap in seconds, number of gaps)."""
        out = {}
        for pair, h in self.hist.items():
            n = int(h.sum())
            if n:
                cum = np.cumsum(h)
                lo = int(np.searchsorted(cum, (n + 1) // 2))  # the two middle gaps' bins
                hi = int(np.searchsorted(cum, n // 2 + 1))
                out[pair] = ((lo + hi) / 2 * 1e-9, n)
        return out


def trace_pairs(defs: Definitions, chunks: Iterable[dict[int, Events]],
                pairs: Iterable[str]) -> dict[str, tuple[float, int]]:
    """:meth:`PairGaps.medians` of a trace handed as chunks (location -> records)."""
    gaps = PairGaps(defs, pairs)
    for chunk in chunks:
        for loc, ev in chunk.items():
            gaps.add(loc, ev)
    return gaps.medians()


def speed_factor(reference: dict[str, float], found: dict[str, tuple[float, int]]
                 ) -> tuple[float | None, dict[str, Any]]:
    """(the trace's cost per record over the platform's, or None to leave the
    platform as it is; the summary's ``speed`` object) from the platform's
    reference gaps and the trace's (:meth:`PairGaps.medians`)."""
    pairs = {p: {"trace_s": found[p][0], "platform_s": ref, "count": found[p][1]}
             for p, ref in sorted(reference.items()) if p in found}
    used = {p: v["trace_s"] / v["platform_s"] for p, v in pairs.items()
            if v["count"] >= MIN_COUNT and v["platform_s"] > 0}
    info: dict[str, Any] = {"pairs": pairs, "used": sorted(used)}
    if not used:
        info["why"] = (f"the trace holds none of the platform's reference pairs "
                       f"({', '.join(sorted(reference))}) {MIN_COUNT} times")
        return None, info
    factor = float(np.median(list(used.values())))
    info["measured"] = factor
    if not LIMITS[0] <= factor <= LIMITS[1]:
        info["why"] = (f"the trace's reference gaps are {factor:.3g} times the platform's, "
                       f"outside {LIMITS[0]:g}..{LIMITS[1]:g}: recorded by another tracer "
                       f"or on another machine than the platform file describes")
        return None, info
    return factor, info


def scaled(platform: Platform, factor: float) -> Platform:
    """``platform`` with every per-record cost (the overhead of each kind, the
    default one, each region's and the parts before the stamp) times ``factor``."""
    def times(by_region: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return {name: {k: v * factor for k, v in entry.items()}
                for name, entry in by_region.items()}

    return dataclasses.replace(
        platform, event_overhead=platform.event_overhead * factor,
        overhead_by_kind={k: v * factor for k, v in platform.overhead_by_kind.items()},
        before_stamp={k: v * factor for k, v in platform.before_stamp.items()},
        overhead_by_region=times(platform.overhead_by_region),
        before_stamp_by_region=times(platform.before_stamp_by_region))


def at_trace_speed(platform: Platform, found: dict[str, tuple[float, int]]
                   ) -> tuple[Platform, dict[str, Any]]:
    """``platform`` scaled to the trace's speed (:func:`speed_factor`) and the
    summary's ``speed`` object (``factor``: what the costs were multiplied by)."""
    factor, info = speed_factor(platform.speed_reference, found)
    info["factor"] = 1.0 if factor is None else factor
    return (platform if factor is None else scaled(platform, factor)), info
