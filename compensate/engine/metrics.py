"""METRIC locations: samples take their process's time function (docs/design.md §4).

A METRIC location (OTF2 location type METRIC, e.g. a Score-P metric plugin's
asynchronous samples of power, memory or device counters) is not a program
timeline: nothing the tracer writes there slows the program down, and its sample
times are not dilated by records of its own. What the samples describe happened
in the process, and the process's timeline is what compensation moves. So a
sample measured at ``m`` is placed where its process's timeline puts ``m``: the
measured -> approximated function of the process's *reference* CPU thread
(:meth:`compensate.model.Definitions.reference_of`: the master thread of the
location group), interpolated linearly between the reference records just before
and just after ``m`` in measured time (the last record at or before ``m`` and the
first after it); before the first reference record and after the last the sample
keeps that record's shift (``a - m``). The function is non-decreasing (the
reference's times are, in measured and in approximated time), so the samples keep
their order; and each sample's shift lies between the shifts of its two reference
records, which is what ``tests/engine/test_metrics.py`` checks on every archive.

A trace without any CPU thread, or whose reference thread has no records, leaves
the samples at their measured times.

The streamed run (:mod:`compensate.pipeline.cuts`) holds a sample back until
the segment that contains the reference record after it, so that every segment
maps its samples with both neighbours at hand, exactly as the whole trace would.
"""

from __future__ import annotations

import numpy as np

from compensate.model import Trace

#: (measured times, approximated times) of a reference location's records, in
#: float ticks from the engine's ``t0``
Points = tuple[np.ndarray, np.ndarray]


def interpolate(m: np.ndarray, ref_m: np.ndarray, ref_a: np.ndarray) -> np.ndarray:
    """The approximated times of measured times ``m`` through the piecewise-linear
    function of the reference points ``(ref_m, ref_a)`` (both non-decreasing, in
    record order), clamped to the end points' shifts outside them."""
    m = np.asarray(m, dtype=np.float64)
    if not len(ref_m):
        return m.copy()
    j = np.searchsorted(ref_m, m, side="right") - 1  # last reference record at or before
    n = len(ref_m)
    out = np.empty(len(m))
    before = j < 0
    out[before] = m[before] + (ref_a[0] - ref_m[0])
    after = j >= n - 1
    out[after] = m[after] + (ref_a[-1] - ref_m[-1])
    mid = ~before & ~after
    jm = j[mid]
    m0, m1 = ref_m[jm], ref_m[jm + 1]  # m0 <= m < m1
    a0, a1 = ref_a[jm], ref_a[jm + 1]
    out[mid] = a0 + (m[mid] - m0) * ((a1 - a0) / (m1 - m0))
    return out


def map_metric_samples(trace: Trace, approx: dict[int, np.ndarray], t0: int,
                       pins: dict[int, tuple[np.ndarray, float]] | None = None,
                       context: dict[int, Points] | None = None) -> None:
    """Replace, in ``approx`` (float ticks from ``t0``, per location), the times of
    every METRIC location's samples by its reference's time function (module
    docstring). The first ``len(pins[loc][0])`` records of a location are context
    from earlier segments and keep their values; ``context`` gives the points of a
    reference location that has no records in ``trace`` (a stream segment)."""
    refs = trace.definitions.metric_references()
    for loc, ref in refs.items():
        ev = trace.events.get(loc)
        if ev is None or loc not in approx:
            continue
        p = len(pins[loc][0]) if pins and loc in pins else 0
        if len(ev) <= p:
            continue
        m = (ev.time[p:] - t0).astype(np.float64)
        if ref is not None and ref in approx and len(trace.events[ref]):
            ref_m = (trace.events[ref].time - t0).astype(np.float64)
            ref_a = approx[ref]
        elif ref is not None and context and ref in context:
            ref_m, ref_a = context[ref]
        else:  # no CPU thread anywhere: nothing to map through
            ref_m = ref_a = np.zeros(0)
        approx[loc][p:] = interpolate(m, ref_m, ref_a)
