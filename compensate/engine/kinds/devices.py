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
  (lower), ``L = δ`` (upper), or under ``--bound fitted`` the link's *device
  latency* (below) clamped into ``[0, δ]``;
* always ``r_a >= s_a + 1 tick``.

Under ``--bound fitted`` a link that the measured order shows as observed (1.
below) also counts as one where the waiter was idle first: a host whose last
record came before the kernel's end returned ``δ`` after it whatever the overhead
given says of when it was ready.

The device latency of a link, per stream and direction (``launch``: launch ->
kernel start on that stream; ``synchronize``: that stream's kernel end -> the
host call's return), in this order:

1. *learned* from the trace (:func:`learn_latencies`): the low quantile
   (:data:`~compensate.engine.netmodel.ENVELOPE_QUANTILE`) of the gaps the
   measured trace shows where the waiter was idle, decided from the measured
   order alone (so the observations do not depend on the overhead given): a
   launch whose stream's previous record is not later than the launch's record
   (or that opens the stream), gap ``r_m - s_m - O(s)``; a synchronize whose
   host's record before the Leave is not later than the stream's kernel end (the
   latest of the link's senders), gap ``r_m - s_m - O(s)``; per stream, else
   over all streams (a synchronize tail is the host runtime's as much as the
   stream's). A link that is itself an observation takes its own gap for every
   sender: the tail of a synchronize call that waited is what it shows, whichever
   stream ends last in the compensated run;
2. else the platform file's ``device`` entry for the direction (a latency a user
   measured, :attr:`compensate.platform.Platform.device`);
3. else as for thread links: the least latency observed for the kind of link (R8).

Like the platform's ``network`` entry, the device latencies are read by ``--bound
fitted`` alone; the lower and the upper bound keep R8's ``0`` and ``δ``. A
streamed or distributed run takes them from its fit pass over the whole trace
(:func:`compensate.engine.fit.observe_links`, family :data:`LEARNED`).

A launch latency and a synchronize tail are properties of the device and its
runtime, not of the tracer: leaving them out (``L = 0``) makes the compensated
run end early where a host that arrived late in the measured run would have
waited in the uninstrumented one.

Device records carry no tracer overhead (``O = 0`` on ACCELERATOR_STREAM
locations, :class:`compensate.engine.graph.Graph`), so on an idle device the
kernel moves with its launch and keeps its duration.

Matching: :mod:`compensate.matching.devices`. Verified by
:func:`compensate.verify.devices.verify_devices`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.kinds.threads import ThreadWait, _least_observed, _prepare
from compensate.engine.netmodel import ENVELOPE_QUANTILE
from compensate.engine.pending import Pending
from compensate.engine.rules import TICK, Context, at
from compensate.matching.devices import DeviceDeps

__all__ = ["LEARNED", "DeviceWait", "ThreadWait", "add_gaps", "build_all", "device_gaps",
           "learn_latencies", "learned_key", "quantiles", "summary_latencies"]

#: the ``link_latency`` family of the device links' observed gaps (keys
#: :func:`learned_key`, sorted lists of ticks: the parts of a streamed or
#: distributed run merge exactly, :func:`compensate.engine.fit.least_links`)
LEARNED = "device_learned"


#: the :func:`learned_key` stream of a direction's latency over all streams
ANY = "any"


def learned_key(kind: str, stream: int | str) -> str:
    """The key of the learned latency of direction ``kind`` on stream location id
    ``stream``: ``"launch@<id>"``, ``"synchronize@<id>"``; ``"launch@any"``,
    ``"synchronize@any"``: over every stream of the trace."""
    return f"{kind}@{stream}"


class DeviceWait(ThreadWait):
    """R9: :class:`ThreadWait` with a device latency per sender (module docstring);
    a sender without one is timed as a thread link."""

    __slots__ = ("device", "observed")

    def __init__(self, sends: list, waited: list[bool], delta: list[float], fit: float,
                 first: bool, device: list[float | None], observed: list[bool],
                 needs: list) -> None:
        super().__init__(sends, waited, delta, fit, first, needs)
        self.device, self.observed = device, observed

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        if (ctx.links or ctx.bound) != "fitted":
            return super().value(A, local, prev_a, ctx)
        prev = float("-inf") if self.first else prev_a
        best = float("-inf")
        for s, waited, delta, lat, obs in zip(self.sends, self.waited, self.delta,
                                              self.device, self.observed, strict=True):
            send_a = at(A, s)
            if waited or obs:
                t = max(prev, send_a + delta)
            else:
                t = max(local, send_a + min(self.fit if lat is None else lat, delta))
            best = max(best, t, send_a + TICK)
        return best


def _observation(graph: Graph, sync) -> tuple[int, int, int, bool]:
    """``(waiting record, latest sender, its stream, observed)`` of one link, all
    global record numbers but the stream's location id; observed from the measured
    order alone (module docstring, 1.)."""
    tm = graph.tm
    li, i = graph.pos_of[sync.recv[0]], sync.recv[1]
    r = graph.g(li, i)
    s, s_loc = max(((graph.g(graph.pos_of[loc], j), loc) for loc, j in sync.sends),
                   key=lambda x: tm[x[0]])
    if sync.kind == "launch":
        return r, s, sync.recv[0], bool(i == 0 or tm[r - 1] <= tm[s])
    return r, s, s_loc, bool(i > 0 and tm[r - 1] <= tm[s])


def _gap(graph: Graph, r: int, s: int) -> float:
    """The observed latency of an observed link from sender ``s`` to waiting record
    ``r`` (global record numbers): ``r_m - s_m - O(s)``, at least 0."""
    return max(0.0, float(graph.tm[r] - graph.tm[s]) - graph.kind_ovh(s))


def device_gaps(graph: Graph, syncs: list,
                receivers: Collection[int] | None = None) -> dict[str, list[float]]:
    """The observed gaps (ticks, sorted) per :func:`learned_key` (module docstring,
    1.): which links are observations follows from the measured order alone. Only
    links waited for on ``receivers`` (location ids), if given (a distributed run's
    rank: :func:`compensate.engine.fit.observe_links`)."""
    gaps: dict[str, list[float]] = defaultdict(list)
    for sync in syncs:
        if receivers is not None and sync.recv[0] not in receivers:
            continue
        r, s, stream, observed = _observation(graph, sync)
        if observed:
            gap = _gap(graph, r, s)
            gaps[learned_key(sync.kind, stream)].append(gap)
            gaps[learned_key(sync.kind, ANY)].append(gap)
    return {key: sorted(v) for key, v in gaps.items()}


def add_gaps(links: dict, graph: Graph, syncs: list,
             receivers: Collection[int] | None = None) -> None:
    """Put :func:`device_gaps` into ``links`` (an observe_links result) as family
    :data:`LEARNED`, where there are device links."""
    if syncs:
        links[LEARNED] = device_gaps(graph, syncs, receivers)


def quantiles(gaps: dict[str, list[float]]) -> dict[str, float]:
    """Per key the :data:`ENVELOPE_QUANTILE` quantile of its gaps: robust to a few
    gaps shortened by clock noise or a misjudged overhead."""
    return {key: float(np.quantile(np.asarray(v), ENVELOPE_QUANTILE, method="lower"))
            for key, v in gaps.items() if v}


def learn_latencies(graph: Graph, syncs: list) -> dict[str, float]:
    """The learned device latency per :func:`learned_key` (ticks) over ``graph``."""
    return quantiles(device_gaps(graph, syncs))


def _device_latency(graph: Graph, learned: dict[str, float], kind: str,
                    stream: int) -> float | None:
    """Module docstring's order: learned, else the platform's ``device`` entry."""
    for key in (learned_key(kind, stream), learned_key(kind, ANY)):
        if key in learned:
            return learned[key]
    given = (graph.platform.device or {}).get(kind)
    return None if given is None else given * graph.res


def build_all(graph: Graph, deps: DeviceDeps, dep_rules: dict) -> None:
    """One :class:`DeviceWait` rule per dependency (a record with several keeps all:
    the latest value wins). The learned latencies and the kinds' least observed
    latency are ``graph.link_latency``'s (:data:`LEARNED`, ``"devices"``) where the
    caller gave them (a segment of a streamed trace, a rank's view), else what
    ``graph`` (the whole trace) shows."""
    prepared = _prepare(graph, deps.syncs)
    given = graph.link_latency
    fit = given["devices"] if given is not None else _least_observed(prepared, {})
    gaps = given.get(LEARNED) if given is not None else None
    learned = quantiles(gaps) if gaps is not None else learn_latencies(graph, deps.syncs)
    for sync, li, senders, waited, delta in prepared:
        streams = ([sync.recv[0]] * len(senders) if sync.kind == "launch"
                   else [graph.loc_ids[s_li] for s_li, _ in senders])
        device = [_device_latency(graph, learned, sync.kind, st) for st in streams]
        r, s, _, observed = _observation(graph, sync)
        obs = [observed and graph.g(s_li, j) == s for s_li, j in senders]
        if observed:  # the gap to the latest sender is this call's latency
            device = [_gap(graph, r, s)] * len(senders)
        dep_rules.setdefault((li, sync.recv[1]), []).append(Pending(
            DeviceWait, ([("ref", s_li, s) for s_li, s in senders], waited, delta,
                         fit.get(sync.kind, 0.0), sync.recv[1] == 0, device, obs),
            senders))


def summary_latencies(links: dict | None, resolution: float) -> dict:
    """The summary's ``fit.device_latency``: per :func:`learned_key` the learned
    latency (seconds) and how many observed gaps it rests on; empty without device
    links."""
    gaps = (links or {}).get(LEARNED) or {}
    return {key: {"latency_s": q / resolution, "observations": len(gaps[key])}
            for key, q in sorted(quantiles(gaps).items())}
