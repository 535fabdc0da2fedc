"""Happened-before checks (docs/design.md R7) on a trace about to be written.

Run on every output, independently of how the times were computed: a violation
is a bug in the engine, never something to write out. :data:`CHECKS` is the table
of invariants, one per dependency family, each in a module of this package
(:mod:`~compensate.verify.order`, :mod:`~compensate.verify.messages`, ...); what
they find is a :class:`~compensate.verify.result.Verification`.
"""

from __future__ import annotations

import numpy as np

from compensate.matching import Matching
from compensate.model import Trace
from compensate.verify.collectives import verify_collectives
from compensate.verify.coverage import carried_local_only
from compensate.verify.devices import verify_devices
from compensate.verify.messages import verify_messages
from compensate.verify.metrics import verify_metrics
from compensate.verify.order import verify_order
from compensate.verify.partitioned import verify_partitioned
from compensate.verify.result import COUNTERS, COVERS, Verification, combine
from compensate.verify.rma import verify_rma
from compensate.verify.tasks import verify_tasks
from compensate.verify.threads import verify_threads

__all__ = ["CHECKS", "COUNTERS", "COVERS", "Verification", "combine", "verify"]


def verify(trace: Trace, matching: Matching, measured: Trace | None = None,
           skip: dict[int, int] | None = None, own: set[int] | None = None) -> Verification:
    """Count happened-before violations in ``trace`` given its ``matching``, and list
    the records carried as local only. ``measured``: the input trace (the same
    records with their measured times), which the METRIC check needs; ``skip``:
    leading context records per location (a stream segment) not to count; ``own``:
    check only the dependencies whose dependent end (the record that must come
    after) is on one of these locations, and count only their records (a rank of the
    distributed run; ``trace`` then needs the right times only of those locations and
    of the records their dependencies read: compensate/parallel/verification.py)."""
    v = Verification(own=own)
    for k, check in enumerate(CHECKS):
        v._check = k
        check(trace, matching, v)
    if measured is not None:
        v._check = len(CHECKS)
        verify_metrics(trace, measured, v)
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


#: One check per dependency family, each independent of how the engine computed the
#: times (a new dependency kind adds its invariant here, in a module of its own).
CHECKS = (verify_order, verify_messages, verify_collectives, verify_threads,
          verify_devices, verify_tasks, verify_partitioned, verify_rma)
