"""Happened-before checks (docs/design.md R7) on a trace about to be written.

Run on every output, independently of how the times were computed: a violation
is a bug in the engine, never something to write out. :func:`verify` runs every
dependency family's invariant, in the order of
:data:`compensate.families.CHECKS` (one per family of the registry that has its
own; the invariants live in this package, one module per family:
:mod:`~compensate.verify.order`, :mod:`~compensate.verify.messages`, ...); each
adds its violations to its family's counter of
:class:`~compensate.verify.result.Verification`.

The registry is imported when :func:`verify` runs, not with this module: it imports
the invariant modules, and so this package.
"""

from __future__ import annotations

import numpy as np

from compensate.matching import Matching
from compensate.model import Trace
from compensate.verify.coverage import carried_local_only
from compensate.verify.result import COUNTERS, COVERS, Verification, combine

__all__ = ["COUNTERS", "COVERS", "Verification", "combine", "verify"]


def verify(trace: Trace, matching: Matching, measured: Trace | None = None,
           skip: dict[int, int] | None = None, own: set[int] | None = None) -> Verification:
    """Count happened-before violations in ``trace`` given its ``matching``, and list
    the records carried as local only. ``measured``: the input trace (the same
    records with their measured times), which the METRIC check needs; ``skip``:
    leading context records per location (a stream segment) not to count; ``own``:
    check only the dependencies whose dependent end (the record that must come
    after) is on one of these locations, and count only their records (a rank of the
    distributed run; ``trace`` then needs the right times only of those locations and
    of the records their dependencies read: compensate/parallel/verification.py).

    Each example's key starts with the number of its check: its place in
    :data:`~compensate.families.CHECKS`, then :data:`~compensate.families.MEASURED_CHECKS`."""
    from compensate.families import CHECKS, MEASURED_CHECKS  # (module docstring)

    v = Verification(own=own)
    for k, check in enumerate(CHECKS):
        v._check = k
        check(trace, matching, v)
    if measured is not None:
        for k, measured_check in enumerate(MEASURED_CHECKS, len(CHECKS)):
            v._check = k
            measured_check(trace, measured, v)
    t = matching.table
    tied = {}
    if len(t) and t.probe.any():
        rows = np.flatnonzero(t.probe)
        for li in np.unique(t.recv_li[rows]).tolist():
            tied[t.loc_ids[li]] = t.recv_idx[rows[t.recv_li[rows] == li]]
    v.carried_local_only = carried_local_only(
        trace if own is None else Trace(trace.definitions, {
            loc: ev for loc, ev in trace.events.items() if loc in own}, trace.source), skip,
        tied)
    return v
