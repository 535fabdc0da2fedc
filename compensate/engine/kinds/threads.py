"""Thread synchronisation (R8, docs/compensation.md "Threads"): OpenMP fork ->
team begin, team end -> join, lock release -> next acquisition, Pthreads create
-> begin and end -> wait. Each is R2 for a zero-byte message (``Cs = 0``) from
the sender records to the waiting record, within one process.

With ``s`` a sender record, ``r`` the waiting record, ``p`` the record before
``r`` and the observed latency ``δ = max(0, r_m - s_m - O(s))``:

* the waiter was there first (``p_m + O(p) <= s_m + O(s)``, or ``r`` opens its
  location: a thread that did not exist waited for its fork or create): the
  interval after the sender's record is all hand-over latency, observed (R2 m.1):
  ``r_a = max(p_a, s_a + δ)``;
* the waiter came later: the latency is not observed, only bounded (R2 m.2), and
  the gap before ``r`` was the waiter's own work: ``r_a = max(local_a, s_a + L)``
  with ``L = 0`` (lower bound), ``L = δ`` (upper bound), or under ``--bound
  fitted`` the least latency the trace shows for this kind of dependency where it
  was observed, clamped into ``[0, δ]``;
* always ``r_a >= s_a + 1 tick``.

A lock link the other thread edges already order (``implied``,
:mod:`compensate.matching.lock_order`: the lock was free before its next holder
asked for it, e.g. handed from one parallel region to the next) keeps only
``r_a >= s_a + 1 tick``: its measured interval holds the join, the fork and what
lies between, which those edges' own rules time; it is no hand-over latency and
does not enter the fitted latency.

A join waits for several team ends: only the last to arrive can have been
observed (as the root of an n-to-1, R5); the value is the latest over the
senders.

An OpenMP barrier is an n-to-n among the team's members (R3 with the thread
team as communicator, :func:`compensate.engine.kinds.nton.build`): each
member's Leave of the barrier region after the latest approximated Enter plus
its measured synchronisation time. A Pthread barrier (EZTrace's
``pthread_barrier_wait`` instances, :mod:`compensate.matching.pthreads`; ``op``
:data:`~compensate.matching.pthreads.BARRIER_OP`) is the same n-to-n, but always
with each member's own measured time from the last arrival to its Leave (eq. 13,
``per-process``, whatever ``--collective-exit`` says): the kernel wakes its
waiters one by one, so the spread of their Leaves is their own wake-up latency,
real in the untraced run too, not a measurement artefact that a common exit
(``uniform``) would take out.

Matching: :mod:`compensate.matching.threads`. Verified by
:func:`compensate.verify.checks._verify_threads`.
"""

from __future__ import annotations

from collections.abc import Collection

from compensate.engine.graph import Graph
from compensate.engine.kinds.nton import build as nton_build
from compensate.engine.pending import Pending
from compensate.engine.rules import TICK, Context, Need, Ref, Rule, at
from compensate.matching.pthreads import BARRIER_OP
from compensate.matching.threads import ThreadDeps


class ThreadWait(Rule):
    """R8: a waiting thread record after the records it waits for (module docstring)."""

    __slots__ = ("sends", "waited", "delta", "fit", "first")

    def __init__(self, sends: list[Ref], waited: list[bool], delta: list[float],
                 fit: float, first: bool, needs: list[Need]) -> None:
        self.sends, self.waited, self.delta, self.fit = sends, waited, delta, fit
        self.first, self.needs = first, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        if self.first:  # no record before: the thread only waited
            prev_a = float("-inf")
        best = float("-inf")
        bound = ctx.links or ctx.bound
        for s, waited, delta in zip(self.sends, self.waited, self.delta, strict=True):
            send_a = at(A, s)
            if waited:
                t = max(prev_a, send_a + delta)
            else:
                if bound == "lower":
                    lat = 0.0
                elif bound == "upper":
                    lat = delta
                else:
                    lat = min(self.fit, delta)
                t = max(local, send_a + lat)
            best = max(best, t, send_a + TICK)
        return best


def _inputs(graph: Graph, li: int, idx: int, senders: list[tuple[int, int]]
            ) -> tuple[list[bool], list[float]]:
    """Per sender: whether the waiter was there first, and the observed latency δ.

    δ is ``(r_m - s_m) - O(s)``: the difference of the two measured times first,
    which is exact, so that δ does not depend on the origin ``t0`` of the graph's
    times (a segment of a streamed trace, a rank's view: :func:`link_latencies`
    must find the same value there as in the whole trace)."""
    tm, ovh = graph.tm, graph.kind_ovh
    r = graph.g(li, idx)
    ready = tm[r - 1] + ovh(r - 1) if idx > 0 else float("-inf")
    gs = [graph.g(s_li, s) for s_li, s in senders]
    free = [tm[g] + ovh(g) for g in gs]
    last = max(range(len(senders)), key=free.__getitem__)
    waited = [ready <= free[j] and j == last for j in range(len(senders))]
    delta = [max(0.0, float(tm[r] - tm[g]) - ovh(g)) for g in gs]
    return waited, delta


def build_all(graph: Graph, deps: ThreadDeps, dep_rules: dict) -> None:
    """One :class:`ThreadWait` rule per waiting record, one n-to-n rule per
    member's barrier Leave (a record that also has another rule keeps both: the
    later value wins)."""
    for inst in deps.barriers:
        own: dict = {}
        exit_rule = graph.collective_exit
        if inst.op == BARRIER_OP:  # a Pthread barrier (module docstring): own exits
            graph.collective_exit = "per-process"
        try:
            nton_build(graph, inst, [graph.pos_of[loc] for loc in inst.locs], own)
        finally:
            graph.collective_exit = exit_rule
        for key, pending in own.items():
            dep_rules.setdefault(key, []).extend(pending)
    build_links(graph, deps.syncs, dep_rules, "threads")


def _prepare(graph: Graph, syncs: list) -> list[tuple]:
    """Per waiting record of ``syncs``: ``(sync, location position, senders, waited,
    δ)`` (:func:`_inputs`; an ``implied`` lock link has neither)."""
    prepared = []
    for sync in syncs:
        li = graph.pos_of[sync.recv[0]]
        senders = [(graph.pos_of[loc], i) for loc, i in sync.sends]
        waited, delta = _inputs(graph, li, sync.recv[1], senders)
        if getattr(sync, "implied", False):  # ordered by other edges: no latency
            waited, delta = [False] * len(senders), [0.0] * len(senders)
        prepared.append((sync, li, senders, waited, delta))
    return prepared


def _least_observed(prepared: list[tuple], fit: dict[str, float],
                    receivers: Collection[int] | None = None) -> dict[str, float]:
    """Lower ``fit`` (kind -> ticks) to the least latency ``prepared`` observed per
    kind: where the waiter was there first and has a record before (only waiting
    records on ``receivers``, if given)."""
    for sync, _, _, waited, delta in prepared:
        if sync.recv[1] <= 0 or (receivers is not None and sync.recv[0] not in receivers):
            continue
        for w, d in zip(waited, delta, strict=True):
            if w:
                fit[sync.kind] = min(fit.get(sync.kind, float("inf")), d)
    return fit


def link_latencies(graph: Graph, syncs: list, fit: dict[str, float],
                   receivers: Collection[int] | None = None) -> dict[str, float]:
    """The fitted latency of each kind of ``syncs`` (R8's and R9's links), as far as
    ``graph`` shows it: ``fit`` lowered to the least observed latency per kind
    (ticks). Taken over the whole trace (:func:`compensate.engine.fit.observe_links`:
    the fit pass of a streamed run, every segment; the ranks' shares of a
    distributed one), so that every segment and rank times its links alike."""
    return _least_observed(_prepare(graph, syncs), fit, receivers)


def build_links(graph: Graph, syncs: list, dep_rules: dict, family: str) -> None:
    """One :class:`ThreadWait` rule per waiting record of ``syncs`` (each with
    ``kind``, ``recv`` and ``sends``; R8's and R9's links alike). The fitted latency
    of a kind is the least latency observed where the waiter was there first, in
    the whole trace: ``graph.link_latency[family]`` (``family``: ``"threads"``,
    ``"devices"``) where the caller gave it (a segment of a streamed trace, a rank's
    view), else what ``graph`` (the whole trace) shows; 0 for a kind never
    observed."""
    prepared = _prepare(graph, syncs)
    given = graph.link_latency
    fit = given[family] if given is not None else _least_observed(prepared, {})
    for sync, li, senders, waited, delta in prepared:
        lmin = fit.get(sync.kind, 0.0)
        dep_rules.setdefault((li, sync.recv[1]), []).append(Pending(
            ThreadWait, ([("ref", s_li, s) for s_li, s in senders], waited, delta, lmin,
                         sync.recv[1] == 0),
            senders))
