"""Accuracy against ground truth (docs/design.md §7).

Given the truth trace of a simulated program, its measured trace, and the
compensated (approximated) versions of the measured trace, report how much of the
dilation the compensation removed, the per-event error, whether the truth lies
between the lower- and upper-bound results, and happened-before violations.
All traces compared must have identical record sequences (the simulator
guarantees it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compensate.engine import EngineOptions, compensate
from compensate.matching import match
from compensate.model import COLL_END, RECV, Trace
from compensate.platform import Platform
from compensate.verify import verify


def span(trace: Trace) -> float:
    """Total execution time in seconds (latest record minus earliest)."""
    return trace.span_seconds


def removed_fraction(t_approx: float, t_measured: float, t_true: float) -> float:
    """``1 - |T_a - T_true| / |T_m - T_true|``: 1 = all dilation removed, 0 = none."""
    dil = abs(t_measured - t_true)
    if dil == 0:
        return 1.0 if t_approx == t_true else 0.0
    return 1.0 - abs(t_approx - t_true) / dil


def _location_ends(trace: Trace) -> np.ndarray:
    lo = min(int(e.time[0]) for e in trace.events.values() if len(e))
    res = trace.definitions.timer_resolution
    return np.array([(int(e.time[-1]) - lo) / res for e in trace.events.values()])


def event_errors(approx: Trace, truth: Trace, signed: bool = False) -> np.ndarray:
    """Absolute error per record in seconds, all locations concatenated. Both traces
    are aligned at their earliest record. ``signed``: how much later than the
    truth each record is (negative: earlier) instead."""
    res = truth.definitions.timer_resolution
    a0 = min(int(e.time[0]) for e in approx.events.values() if len(e))
    t0 = min(int(e.time[0]) for e in truth.events.values() if len(e))
    parts = [((approx.events[loc].time - a0) - (ev.time - t0)) / res
             for loc, ev in truth.events.items()]
    if not parts:
        return np.zeros(0)
    out = np.concatenate(parts)
    return out if signed else np.abs(out)


@dataclass
class Accuracy:
    """Accuracy of one compensated trace against truth."""

    dilation: float  # (T_m - T_true) / T_true
    removed_total: float  # fraction of the dilation removed on total time
    removed_per_location_min: float
    error_p50: float  # seconds
    error_p99: float
    error_max: float
    violations: int


def accuracy(truth: Trace, measured: Trace, approx: Trace) -> Accuracy:
    """Compare one approximated trace with the truth."""
    t_true, t_m, t_a = span(truth), span(measured), span(approx)
    e_true, e_m, e_a = _location_ends(truth), _location_ends(measured), _location_ends(approx)
    per_loc = [removed_fraction(a, m, t) for a, m, t in zip(e_a, e_m, e_true, strict=True)]
    err = event_errors(approx, truth)
    return Accuracy(
        dilation=(t_m - t_true) / t_true if t_true else 0.0,
        removed_total=removed_fraction(t_a, t_m, t_true),
        removed_per_location_min=min(per_loc) if per_loc else 1.0,
        error_p50=float(np.median(err)) if err.size else 0.0,
        error_p99=float(np.percentile(err, 99)) if err.size else 0.0,
        error_max=float(err.max()) if err.size else 0.0,
        violations=verify(approx, match(approx)).violations,
    )


def bracketed(truth: Trace, lower: Trace, upper: Trace, tolerance_ticks: int = 1) -> dict:
    """How often the truth lies within [lower, upper]: per dependent record (every
    MpiRecv and MpiCollectiveEnd) and on total time. Records are aligned at each
    trace's earliest record."""
    def rel(tr: Trace) -> dict:
        t0 = min(int(e.time[0]) for e in tr.events.values() if len(e))
        return {loc: e.time - t0 for loc, e in tr.events.items()}
    rt, rl, ru = rel(truth), rel(lower), rel(upper)
    inside = total = 0
    for loc, ev in truth.events.items():
        dep = (ev.kind == RECV) | (ev.kind == COLL_END)
        lo = np.minimum(rl[loc][dep], ru[loc][dep]) - tolerance_ticks
        hi = np.maximum(rl[loc][dep], ru[loc][dep]) + tolerance_ticks
        t = rt[loc][dep]
        inside += int(np.count_nonzero((t >= lo) & (t <= hi)))
        total += int(dep.sum())
    s_t, s_l, s_u = span(truth), span(lower), span(upper)
    tol = tolerance_ticks / truth.definitions.timer_resolution
    return {
        "receives": total,
        "receives_bracketed": inside,
        "fraction": inside / total if total else 1.0,
        "total_time_bracketed": min(s_l, s_u) - tol <= s_t <= max(s_l, s_u) + tol,
    }


def evaluate(truth: Trace, measured: Trace, platform: Platform,
             collective_exit: str = "uniform", eager_limit: int | None = None) -> dict:
    """Compensate ``measured`` with both bounds and compare each with ``truth``."""
    m = match(measured, eager_limit=eager_limit)
    out = {}
    results = {}
    for bound in ("lower", "upper"):
        r = compensate(measured, platform, EngineOptions(bound, collective_exit), m)
        results[bound] = r.trace
        out[bound] = accuracy(truth, measured, r.trace)
    out["bracket"] = bracketed(truth, results["lower"], results["upper"])
    out["traces"] = results
    return out
