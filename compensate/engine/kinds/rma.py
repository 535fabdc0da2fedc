"""MPI one-sided communication (R10, docs/compensation.md "One-sided
communication (R10)"): fences as n-to-n operations over the window (R3) where the
measurement shows they synchronised; post -> start (or complete), complete ->
wait, the previous conflicting lock release -> the next grant; and transfers
(put, accumulate) -> the target's end of their epoch, as messages.

All links of one waiting record form one rule, R2's receive with several
senders. With ``s`` a sender record, ``r`` the waiting record, ``p`` the record
before ``r``, ``δ = max(0, r_m - s_m - O(s))`` the measured interval and ``lo``
the least transfer (``2·C(b)·b`` for ``b`` bytes, 0 for a synchronisation):

* the waiter was there first (``p_m + O(p) <= s_m + O(s)``) and ``s`` is the
  sender that freed it last: the interval is observed (R2 m.1):
  ``r_a = max(p_a, s_a + δ)``;
* otherwise only bounds (R2 m.2): ``r_a = max(local_a, s_a + L)`` with
  ``L = lo`` (lower), ``L = max(δ, lo)`` (upper) or, under ``--bound fitted``,
  for a transfer ``lo + network(b)`` (R2f's fit) and for a synchronisation the
  least latency the trace observed for that kind of link, clamped into
  ``[lo, max(δ, lo)]``;
* always ``r_a >= s_a + 1 tick``.

**Deposits** (docs/compensation.md, "Passive target: the epoch's operations before
the next grant"): a lock grant also follows every operation ``o`` of the previous
conflicting epochs, by the least time the operation takes to arrive at the target
and the grant to come back: ``r_a >= o_a + max(L, 1 tick)`` with ``L = lo`` (the
operation's two copies, ``2·C(b)·b``; lower and upper bounds) or, under
``--bound fitted``, ``lo + network(b)`` (origin not the target) ``+ network(0)``
(waiter not the target), clamped into ``[lo, max(δ, lo)]``. A lower bound of
the truth under MPI's semantics; never earlier than the rule above would place
the record (the later value wins).

**Release after completion** (the platform file's ``rma.release`` =
``after_completion``: the MPI library sends the release only once the epoch's
operations completed at the origin, as MPICH's ch4 does; a platform property, not
MPI's semantics): for a *fetching* operation (``b'`` > 0 bytes back: a get, a
fetch-and-op, a compare-and-swap, a get-accumulate) ``lo`` also counts the result's
two copies, ``2·C(b')·b'``, and the fitted way to the target becomes
``network(b) + network(b') + network(0)`` (there, back, and the release's way
there), all only where the origin is not the target. The unlock returns with the
release's acknowledgement: its waiting record (the ``completion`` link's) follows
the same operation by that time plus ``network(0)`` back. Without the entry (or
with ``eager``) nothing changes.

A fence instance is n-to-n (:func:`compensate.engine.kinds.handles.build`: only
where it synchronised); window creation and free as the handle collectives.

Matching: :mod:`compensate.matching.rma`. Verified by
:func:`compensate.verify.rma.verify_rma`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection

from compensate.engine.graph import Graph
from compensate.engine.kinds.handles import build as handles_build
from compensate.engine.pending import Pending
from compensate.engine.rules import TICK, Context, Need, Ref, Rule, at
from compensate.matching.rma import RmaDeps, was_observed

_DATA = ("transfer", "completion")  # links that carry bytes (the others synchronise)


class RmaWait(Rule):
    """R10: a waiting record after the records it waits for (module docstring)."""

    __slots__ = ("sends", "waited", "delta", "lo", "sizes", "back", "fit", "ref", "first",
                 "explained")

    def __init__(self, sends: list[Ref], waited: list[bool], delta: list[float],
                 lo: list[float], sizes: list[int], back: list[int], fit: list[float | None],
                 ref: list[bool], first: bool, explained: bool, needs: list[Need]) -> None:
        self.sends, self.waited, self.delta, self.lo = sends, waited, delta, lo
        self.sizes, self.back, self.fit, self.ref = sizes, back, fit, ref
        self.first, self.explained, self.needs = first, explained, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        if self.first:
            prev_a = float("-inf")
        # the gap before the record is the waiter's own time only if nothing it
        # waited for freed it (else the observed sender or the fence explains it)
        own = prev_a if self.explained else local
        best = float("-inf")
        for j, s in enumerate(self.sends):
            send_a = at(A, s)
            if self.ref[j]:  # the release was observed: keep the measured offset from
                if self.waited[j]:  # the holder's unlock exit
                    best = max(best, send_a + self.delta[j])
                continue
            lo, hi = self.lo[j], max(self.delta[j], self.lo[j])
            if self.waited[j]:
                t = max(prev_a, send_a + self.delta[j])
            else:
                if ctx.bound == "lower":
                    lat = lo
                elif ctx.bound == "upper":
                    lat = hi
                else:
                    fit = self.fit[j]
                    if fit is None:  # bytes on the network: R2f's model, each way
                        fit = lo + ctx.network_ticks(self.sizes[j]) + (
                            ctx.network_ticks(self.back[j]) if self.back[j] else 0.0)
                    lat = min(max(fit, lo), hi)
                t = max(own if ctx.bound != "upper" else local, send_a + lat)
            best = max(best, t, send_a + TICK)
        return best


class LockDeposit(Rule):
    """A lock grant after the arrival of the previous epochs' operations at the
    target (module docstring, "Deposits"); with the platform's ``rma.release`` =
    ``after_completion`` after a fetching operation's round trip and the release's
    way to the target ("Release after completion")."""

    __slots__ = ("ops", "lo", "hi", "size", "hops", "ret")

    def __init__(self, ops: list[Ref], lo: list[float], hi: list[float], size: list[int],
                 hops: list[tuple[bool, bool]], ret: list[int], needs: list[Need]) -> None:
        self.ops, self.lo, self.hi, self.size, self.hops = ops, lo, hi, size, hops
        self.ret = ret  # bytes fetched back before the release (-1: not waited for)
        self.needs = needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        best = float("-inf")
        fitted = ctx.bound == "fitted"
        for j, o in enumerate(self.ops):
            lat = lo = self.lo[j]
            if fitted:
                there, back = self.hops[j]
                net = ctx.network_ticks
                way = net(self.size[j])
                if self.ret[j] >= 0:  # the result's way back, then the release's
                    way += net(self.ret[j]) + net(0)
                lat = lo + (way if there else 0.0) + (net(0) if back else 0.0)
                lat = min(lat, self.hi[j])
            best = max(best, at(A, o) + max(lat, lo, TICK))
        return best


def _deposits(graph: Graph, link, dep_rules: dict) -> None:
    """The :class:`LockDeposit` rule of a lock link with deposits."""
    loc, i = link.recv
    li = graph.pos_of[loc]
    r_m = float(graph.tm[graph.g(li, i)])
    after = graph.platform.rma_release == "after_completion"
    pos, lo, hi, size, hops, ret = [], [], [], [], [], []
    for o_loc, o_i, sent, back in link.deposits:
        o_li = graph.pos_of[o_loc]
        g = graph.g(o_li, o_i)
        fetch = after and back > 0
        least = _least(graph, sent, back if fetch else 0, o_loc == link.target)
        pos.append((o_li, o_i))
        lo.append(least)
        hi.append(max(r_m - float(graph.tm[g]) - float(graph.kind_ovh(g)), least))
        size.append(sent)
        hops.append((o_loc != link.target, loc != link.target))
        ret.append(back if fetch else -1)
    dep_rules.setdefault((li, i), []).append(Pending(
        LockDeposit, ([("ref", o_li, o_i) for o_li, o_i in pos], lo, hi, size, hops, ret),
        pos))


def _unlock_return(graph: Graph, link, dep_rules: dict) -> None:
    """Release after completion: the unlock's waiting record after a fetching
    operation's round trip, the release's way to the target and its
    acknowledgement's way back (a :class:`LockDeposit` with the origin as waiter)."""
    loc, i = link.recv
    li = graph.pos_of[loc]
    (o_loc, o_i), sent, back = link.sends[0], link.sizes[0], link.back[0]
    o_li = graph.pos_of[o_loc]
    g = graph.g(o_li, o_i)
    least = _least(graph, sent, back, o_loc == link.target)
    hi = max(float(graph.tm[graph.g(li, i)]) - float(graph.tm[g]) - float(graph.kind_ovh(g)),
             least)
    remote = o_loc != link.target
    dep_rules.setdefault((li, i), []).append(Pending(
        LockDeposit, ([("ref", o_li, o_i)], [least], [hi], [sent], [(remote, remote)], [back]),
        [(o_li, o_i)]))


def _least(graph: Graph, size: int, back: int, local: bool = False) -> float:
    """The least time bytes take: both copies each way (2·C(s)·s), nothing else; one
    copy each way where the origin is the target (``local``: an operation on its own
    window is a local copy / atomic, as MPICH does it; docs/accuracy.md, issue 19)."""
    n = 1.0 if local else 2.0
    return (n * graph.copy(size) if size > 0 else 0.0) + \
        (n * graph.copy(back) if back > 0 else 0.0)


def build_all(graph: Graph, deps: RmaDeps, dep_rules: dict) -> None:
    """The fence rules, then one :class:`RmaWait` per waiting record (a record with
    another rule keeps both: the later value wins)."""
    for inst in deps.collectives:
        own: dict = {}
        handles_build(graph, inst, [graph.pos_of[loc] for loc in inst.locs], own)
        for key, pending in own.items():
            dep_rules.setdefault(key, []).extend(pending)
    for link in deps.links:
        if link.deposits:
            _deposits(graph, link, dep_rules)
        elif link.kind == "completion" and link.back[0] > 0 and link.target >= 0 and \
                graph.platform.rma_release == "after_completion":
            _unlock_return(graph, link, dep_rules)
    prepared = _prepare(graph, *_gather(deps))
    given = graph.link_latency
    fit = given["rma"] if given is not None else _least_observed(prepared, {})
    for recv, li, senders, pos, waited, delta, lo, explained in prepared:
        fits = [None if kind in _DATA else fit.get(kind, 0.0) for kind, *_ in senders]
        dep_rules.setdefault((li, recv[1]), []).append(Pending(
            RmaWait, ([("ref", s_li, s) for s_li, s in pos], waited, delta, lo,
                      [row[2] for row in senders], [row[3] for row in senders], fits,
                      [row[4] for row in senders], recv[1] == 0, explained),
            pos))


def _gather(deps: RmaDeps) -> tuple[dict[tuple, list], dict[tuple, set]]:
    """The links of ``deps`` by waiting record: ``(kind, send, size, back,
    reference)`` rows, and the records it also waits for (``also``)."""
    by_recv: dict[tuple, list] = defaultdict(list)
    also: dict[tuple, set] = defaultdict(set)
    for link in deps.links:
        for row in zip(link.sends, link.sizes, link.back, link.ref, strict=True):
            by_recv[link.recv].append((link.kind, *row))
        also[link.recv].update(link.also)
    return by_recv, also


def _prepare(graph: Graph, by_recv: dict[tuple, list], also: dict[tuple, set]
             ) -> list[tuple]:
    """Per waiting record: ``(recv, location position, senders, their positions,
    waited, δ, lo, explained)`` (module docstring). δ of a sender is ``(r_m - s_m)
    - O(s)``, the exact difference first: it does not depend on the origin of the
    graph's times (:func:`link_latencies`)."""
    tm, ovh = graph.tm, graph.kind_ovh
    prepared = []
    for recv, senders in by_recv.items():
        li = graph.pos_of[recv[0]]
        r = graph.g(li, recv[1])
        pos = [(graph.pos_of[loc], i) for _, (loc, i), _, _, _ in senders]
        lo = [_least(graph, size, back) if kind in _DATA else 0.0
              for kind, _, size, back, _ in senders]
        gs = [graph.g(s_li, s) for s_li, s in pos]
        free = [tm[g] + ovh(g) for g in gs]
        # each constraint by the earliest it can free the waiter (bytes: after their
        # copies), to tell which one freed it last; references are not constraints
        real = [j for j, row in enumerate(senders) if not row[4]]
        earliest = {j: free[j] + lo[j] for j in real}
        other = [tm[graph.g(graph.pos_of[loc], i)] + ovh(graph.g(graph.pos_of[loc], i))
                 for loc, i in also[recv]]
        ready = tm[r - 1] + ovh(r - 1) if recv[1] > 0 else float("-inf")
        last = max(real, key=earliest.__getitem__)
        explained, observed = was_observed(
            senders[last][0], earliest[last], max(list(earliest.values()) + other), ready,
            float(tm[r]), lo[last] / 2.0)
        # a reference counts where the release it follows was observed
        waited = [observed and (j == last or senders[j][4]) for j in range(len(senders))]
        delta = [float(tm[r] - tm[gs[j]]) if senders[j][4]
                 else max(0.0, float(tm[r] - tm[gs[j]]) - ovh(gs[j]))
                 for j in range(len(senders))]
        prepared.append((recv, li, senders, pos, waited, delta, lo, explained))
    return prepared


def _least_observed(prepared: list[tuple], fit: dict[str, float],
                    receivers: Collection[int] | None = None) -> dict[str, float]:
    """Lower ``fit`` (kind -> ticks) to the least latency ``prepared`` observed per
    kind of synchronisation (not the links that carry bytes: R2f's fit times
    those), where the waiter was there first and has a record before (only waiting
    records on ``receivers``, if given)."""
    for recv, _, senders, _, waited, delta, _, _ in prepared:
        if recv[1] <= 0 or (receivers is not None and recv[0] not in receivers):
            continue
        for (kind, *_), w, d in zip(senders, waited, delta, strict=True):
            if w and kind not in _DATA:
                fit[kind] = min(fit.get(kind, float("inf")), d)
    return fit


def link_latencies(graph: Graph, deps: RmaDeps, fit: dict[str, float],
                   receivers: Collection[int] | None = None) -> dict[str, float]:
    """The fitted latency of each kind of RMA synchronisation, as far as ``graph``
    shows it: ``fit`` lowered to the least observed latency per kind (ticks). Taken
    over the whole trace (:func:`compensate.engine.fit.observe_links`), so that
    every segment of a streamed run and every rank times its links alike."""
    return _least_observed(_prepare(graph, *_gather(deps)), fit, receivers)
