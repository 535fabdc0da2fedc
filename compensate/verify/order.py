"""The per-location order invariant of R7: every location's timestamps are
non-decreasing in its original record order. It reads nothing of another location
(a rank of the distributed run checks its own)."""

from __future__ import annotations

import numpy as np

from compensate.matching import Matching
from compensate.model import Trace
from compensate.verify.result import Verification, note


def verify_order(trace: Trace, matching: Matching, v: Verification) -> None:
    """Count in ``v.order`` the records earlier than their predecessor on the same
    location (one example per location)."""
    for n, (loc, ev) in enumerate(trace.events.items()):
        if len(ev) > 1 and v.owns(loc):
            bad = np.flatnonzero(np.diff(ev.time) < 0)
            v.order += int(bad.size)
            if bad.size:
                note(v, f"location {loc}, record {int(bad[0]) + 1}: earlier than its "
                        f"predecessor", (n,))
