"""Each location's time split into behaviours that add up to it (:func:`breakdown`),
and the difference between two traces of the same run, measured and approximated,
by behaviour and by location (:func:`compare`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compensate.analysis.calls import (
    CATEGORIES,
    WAIT_STATES,
    calls_of,
)
from compensate.analysis.hybrid import HYBRID_STATES, HybridWaits, hybrid_waits
from compensate.analysis.profile import (
    Profile,
    profile,
)
from compensate.analysis.waitstates import (
    WaitStates,
    wait_states,
)
from compensate.matching import Matching, match
from compensate.model import Trace, TraceError


@dataclass
class Breakdown:
    """Each location's execution time split into :data:`CATEGORIES` (seconds).

    ``execution`` = time outside MPI minus buffer flushes there; ``flush`` = all
    buffer-flush time; one entry per wait state; ``other_mpi`` = MPI time minus the
    waits and the flushes inside MPI. Per location the categories add up to
    ``profile.locations[loc].duration`` (``other_mpi`` may be negative if a flush
    falls inside a wait).
    """

    profile: Profile
    waits: WaitStates
    by_location: dict[str, dict[int, float]]
    #: thread and accelerator wait states, outside the categories (analysis.hybrid)
    hybrid: HybridWaits | None = None

    def total(self, category: str) -> float:
        return sum(self.by_location[category].values())

    def to_dict(self) -> dict:
        return {c: {"total": self.total(c),
                    "by_location": {str(k): v for k, v in self.by_location[c].items()}}
                for c in CATEGORIES}


def breakdown(trace: Trace, matching: Matching | None = None, *,
              eager_limit: int | None = None) -> Breakdown:
    """Profile, wait states and the behaviour split of ``trace`` in one pass."""
    calls = calls_of(trace)
    prof = profile(trace, calls)
    matching = matching if matching is not None else match(trace, eager_limit=eager_limit)
    waits = wait_states(trace, matching, eager_limit=eager_limit, calls=calls)
    out: dict[str, dict[int, float]] = {c: {} for c in CATEGORIES}
    for loc, p in prof.locations.items():
        if not p.counted:  # metric samples, device activity: not execution time
            continue
        out["execution"][loc] = p.outside_mpi - (p.flush - p.flush_in_mpi)
        out["flush"][loc] = p.flush
        for s in WAIT_STATES:
            out[s][loc] = waits.by_location[s].get(loc, 0.0)
        out["other_mpi"][loc] = p.mpi - p.flush_in_mpi - waits.at(loc)
    return Breakdown(prof, waits, out, hybrid_waits(trace, matching))


@dataclass
class Comparison:
    """Two breakdowns of the same run (e.g. measured and approximated) and their
    difference ``measured - approximated`` by category and location."""

    measured: Breakdown
    approximated: Breakdown

    @property
    def locations(self) -> list[int]:
        """The locations whose time counts (CPU threads, see
        :attr:`compensate.analysis.profile.LocationProfile.counted`)."""
        return sorted(loc for loc, p in self.measured.profile.locations.items() if p.counted)

    def diff(self, category: str, loc: int | None = None) -> float:
        """Seconds ``category`` lost from measured to approximated (on ``loc`` or all)."""
        m, a = self.measured.by_location[category], self.approximated.by_location[category]
        if loc is not None:
            return m.get(loc, 0.0) - a.get(loc, 0.0)
        return sum(m.values()) - sum(a.values())

    @property
    def total_diff(self) -> float:
        """The whole difference: sum over locations of their execution-time change."""
        return sum(self.diff(c) for c in CATEGORIES)

    @property
    def span_diff(self) -> float:
        return self.measured.profile.span - self.approximated.profile.span

    def location_diff(self, loc: int) -> float:
        return sum(self.diff(c, loc) for c in CATEGORIES)

    def percent(self, category: str) -> float:
        """Share of the total difference due to ``category`` (may be negative or
        above 100 when some behaviour grew; NaN when there is no difference)."""
        return _pct(self.diff(category), self.total_diff)

    def location_percent(self, loc: int) -> float:
        return _pct(self.location_diff(loc), self.total_diff)

    def share(self, category: str, loc: int) -> float:
        """Share of ``category``'s difference that lies on ``loc`` (percent)."""
        return _pct(self.diff(category, loc), self.diff(category))

    def top_location(self, category: str) -> tuple[int, float] | None:
        """The location carrying most of ``category``'s difference and its share."""
        d = self.diff(category)
        if d == 0 or not self.locations:
            return None
        loc = max(self.locations, key=lambda x: self.diff(category, x) * np.sign(d))
        return loc, self.share(category, loc)

    def to_dict(self) -> dict:
        return {
            "span": {"measured": self.measured.profile.span,
                     "approximated": self.approximated.profile.span,
                     "difference": self.span_diff},
            "total_difference": self.total_diff,
            "categories": {
                c: {"measured": self.measured.total(c),
                    "approximated": self.approximated.total(c),
                    "difference": self.diff(c), "percent": _json_num(self.percent(c)),
                    "by_location": {str(loc): {"difference": self.diff(c, loc),
                                               "share": _json_num(self.share(c, loc))}
                                    for loc in self.locations}}
                for c in CATEGORIES},
            "locations": {str(loc): {"difference": self.location_diff(loc),
                                     "percent": _json_num(self.location_percent(loc))}
                          for loc in self.locations},
            "hybrid": {s: {"measured": m, "approximated": a, "difference": m - a}
                       for s, m, a in self.hybrid_rows()},
        }

    def hybrid_rows(self) -> list[tuple[str, float, float]]:
        """(state, measured, approximated seconds) of the thread and accelerator wait
        states (:mod:`compensate.analysis.hybrid`)."""
        m, a = self.measured.hybrid, self.approximated.hybrid
        return [(s, m.total(s) if m else 0.0, a.total(s) if a else 0.0)
                for s in HYBRID_STATES]


def compare(measured: Trace, approximated: Trace, *, eager_limit: int | None = None
            ) -> Comparison:
    """Break the difference between two traces of the same run down by behaviour and
    location (the paper's Figure 2). Both must have the same locations."""
    if set(measured.events) != set(approximated.events):
        raise TraceError(
            f"cannot compare traces with different locations "
            f"({sorted(measured.events)} vs {sorted(approximated.events)} in "
            f"{approximated.source or '<trace>'})", source=measured.source)
    return Comparison(breakdown(measured, eager_limit=eager_limit),
                      breakdown(approximated, eager_limit=eager_limit))


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else float("nan")


def _json_num(x: float) -> float | None:
    return None if x != x else x  # NaN -> null
