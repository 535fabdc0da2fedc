"""Profiles, wait states and before/after comparison of one trace or two.

Compensation is only useful if one can see what changed: which waiting was real
and which was caused by the tracer, and how overhead on one process shows up as
waiting on another (the paper's Figures 1 and 2). This package answers that for
any :class:`~compensate.model.Trace` the readers load:

* :func:`profile`: per location and in total, the execution time, the time in MPI
  (regions whose name starts with ``MPI_``) and outside, and the time per region
  (inclusive and exclusive, from the Enter/Leave nesting);
* :func:`wait_states`: the KOJAK/Scalasca wait-state patterns Late Sender, Late
  Receiver, Wait at N×N, Wait at Barrier, Late Broadcast and Early Reduce;
* :func:`breakdown`: each location's time split into behaviours (execution, buffer
  flushes, each wait state, other MPI) that add up exactly to its execution time;
* :func:`compare`: the difference between two traces of the same run (measured and
  approximated) broken down by behaviour and by location, as percentages of the
  total difference.

All times are seconds. Definitions (and the rule that detects Late Receiver) are in
docs/analysis.md.
"""

from compensate.analysis.calls import (
    CATEGORIES,
    LABELS,
    WAIT_STATES,
    Calls,
    calls_of,
    is_mpi,
    location_label,
    region_name,
    trace_origin,
)
from compensate.analysis.compare import Breakdown, Comparison, breakdown, compare
from compensate.analysis.profile import LocationProfile, Profile, RegionStat, profile
from compensate.analysis.waitstates import WaitStates, wait_states

__all__ = [
    "CATEGORIES",
    "LABELS",
    "WAIT_STATES",
    "Breakdown",
    "Calls",
    "Comparison",
    "LocationProfile",
    "Profile",
    "RegionStat",
    "WaitStates",
    "breakdown",
    "calls_of",
    "compare",
    "is_mpi",
    "location_label",
    "profile",
    "region_name",
    "trace_origin",
    "wait_states",
]
