"""The METRIC invariant of R7: a METRIC location's samples keep their place among
their process's records (:mod:`compensate.engine.metrics` maps them through the
process's time function). It needs the measured times, and reads only the sample's
own process (which a rank of the distributed run owns whole)."""

from __future__ import annotations

import numpy as np

from compensate.model import Trace
from compensate.verify.result import Verification, note


def verify_metrics(trace: Trace, measured: Trace, v: Verification) -> None:
    """Count in ``v.metrics`` the METRIC samples outside their reference thread's
    records: each must be at or after the approximated time of the last reference
    record measured at or before it, and at or before that of the first one measured
    after it (:mod:`compensate.engine.metrics` maps it between them; its shift then
    lies between theirs)."""
    for n, (loc, ref) in enumerate(trace.definitions.metric_references().items()):
        if ref is None or loc not in trace.events or ref not in trace.events \
                or not v.owns(loc):
            continue
        ev, rev = trace.events[loc], trace.events[ref]
        m, rm = measured.events[loc].time, measured.events[ref].time
        if not len(ev) or not len(rev):
            continue
        j = np.searchsorted(rm, m, side="right") - 1
        has_before, has_after = j >= 0, j + 1 < len(rm)
        low = np.where(has_before, rev.time[np.maximum(j, 0)], np.iinfo(np.int64).min)
        high = np.where(has_after, rev.time[np.minimum(j + 1, len(rm) - 1)],
                        np.iinfo(np.int64).max)
        bad = np.flatnonzero((ev.time < low) | (ev.time > high))
        v.metrics += int(bad.size)
        if bad.size:
            i = int(bad[0])
            note(v, f"location {loc}, record {i}: METRIC sample outside its process's "
                    f"records (location {ref}) around it", (n,))
