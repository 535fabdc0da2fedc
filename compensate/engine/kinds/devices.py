"""Accelerators (R9, docs/compensation.md "Accelerators"): a kernel's Enter after
its host launch, a host synchronize call's Leave after the device activity it was
waiting for. Both are the zero-byte link of R8 (:class:`ThreadWait`, reused by
import): with ``s`` the sender record, ``r`` the waiting record, ``p`` the record
before ``r`` and the observed latency ``δ = max(0, r_m - s_m - O(s))``:

* the waiter was idle first (``p_m + O(p) <= s_m + O(s)``, or ``r`` opens its
  location): the latency is observed and kept, ``r_a = max(p_a, s_a + δ)`` -- a
  device that waited for the launch, a host that waited in the synchronize call;
* else (the device was still busy with earlier work, the host reached the Leave
  after other records in the call): ``r_a = max(local_a, s_a + L)`` with ``L = 0``
  (lower), ``L = δ`` (upper), or under ``fitted`` the least observed latency of
  that kind, clamped into ``[0, δ]``;
* always ``r_a >= s_a + 1 tick``.

Device records carry no tracer overhead (``O = 0`` on ACCELERATOR_STREAM
locations, :class:`compensate.engine.graph.Graph`), so on an idle device the
kernel moves with its launch and keeps its duration.

Matching: :mod:`compensate.matching.devices`. Verified by
:func:`compensate.verify.checks._verify_devices`.
"""

from __future__ import annotations

from compensate.engine.graph import Graph
from compensate.engine.kinds.threads import ThreadWait
from compensate.engine.pending import Pending
from compensate.matching.devices import DEP_KINDS, DeviceDeps


def _inputs(graph: Graph, li: int, idx: int, senders: list[tuple[int, int]]
            ) -> tuple[list[bool], list[float]]:
    """Per sender: whether the waiter was there first, and the observed latency δ."""
    tm, ovh = graph.tm, graph.kind_ovh
    r = graph.g(li, idx)
    ready = tm[r - 1] + ovh(r - 1) if idx > 0 else float("-inf")
    free = [tm[graph.g(s_li, s)] + ovh(graph.g(s_li, s)) for s_li, s in senders]
    last = max(range(len(senders)), key=free.__getitem__)
    waited = [ready <= free[j] and j == last for j in range(len(senders))]
    delta = [max(0.0, float(tm[r] - f)) for f in free]
    return waited, delta


def build_all(graph: Graph, deps: DeviceDeps, dep_rules: dict) -> None:
    """One :class:`ThreadWait` rule per dependency (a record with several keeps all:
    the latest value wins)."""
    prepared = []
    fit = {k: float("inf") for k in DEP_KINDS}
    for sync in deps.syncs:
        li = graph.pos_of[sync.recv[0]]
        senders = [(graph.pos_of[loc], i) for loc, i in sync.sends]
        waited, delta = _inputs(graph, li, sync.recv[1], senders)
        for w, d in zip(waited, delta, strict=True):
            if w and sync.recv[1] > 0:
                fit[sync.kind] = min(fit[sync.kind], d)
        prepared.append((sync, li, senders, waited, delta))
    for sync, li, senders, waited, delta in prepared:
        lmin = fit[sync.kind] if fit[sync.kind] != float("inf") else 0.0
        dep_rules.setdefault((li, sync.recv[1]), []).append(Pending(
            ThreadWait, ([("ref", s_li, s) for s_li, s in senders], waited, delta, lmin,
                         sync.recv[1] == 0),
            senders))
