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
from compensate.engine.kinds.threads import ThreadWait, build_links
from compensate.matching.devices import DeviceDeps

__all__ = ["ThreadWait", "build_all"]


def build_all(graph: Graph, deps: DeviceDeps, dep_rules: dict) -> None:
    """One :class:`ThreadWait` rule per dependency, as R8 builds its links (a record
    with several keeps all: the latest value wins)."""
    build_links(graph, deps.syncs, dep_rules, "devices")
