"""The compensation rules of dependent records (docs/design.md §3: R2–R5 and the
extensions), as small objects the engine evaluates once each.

A rule belongs to one dependent record. Its inputs are approximated times of other
records, given as *references* ``(anchor, offset)``: the record's time is
``A[anchor] + offset``, where ``A[anchor]`` is the approximated time of the first
record of the record's segment (see :mod:`compensate.engine.runsums`) and ``offset`` the
static R1 running sum up to the record. ``needs`` lists the anchors that must be
known before :meth:`value` may run (with the record they were needed for, to name
it in an error). Everything that does not depend on an approximated time is
computed when the rule is built, so evaluation is a handful of float operations.

The most common rule, an eager point-to-point receive completing one message, is
evaluated inline by the engine from per-message arrays instead; both it and
:func:`recv_time` evaluate R2 through :func:`compensate.engine.receive.receive_time`.
These classes cover everything else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from compensate.engine.receive import receive_time

Ref = tuple[int, float]  # (anchor id, R1 offset from the anchor)
Need = tuple[int, int, int]  # (anchor id, location id, record index)

TICK = 1.0
NEG_INF = float("-inf")


def at(A: list, ref: Ref) -> float:
    """Approximated time of the record ``ref`` refers to (its anchor must be known)."""
    return A[ref[0]] + ref[1]


@dataclass(slots=True)
class Context:
    """What rule evaluation needs besides the anchors: the bound, the fitted
    network model (ticks per byte count) and the case counters to update."""

    bound: str
    network_ticks: Callable[[int], float] | None
    cases: dict
    links: str = ""  # the bound of R8/R9's links if not ``bound`` (EngineOptions.fit_links)
    #: R2's cases (:func:`compensate.engine.receive.receive_time`), counted apart
    #: from ``cases`` (the engine adds them to it once the evaluation is done)
    counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])


@dataclass(slots=True)
class RecvParams:
    """R2 for one (possibly implied) message, everything static precomputed.

    ``enter`` is the Enter of the receive call (None if the receive opens its
    location: then it starts at ``enter_const = recv_m - cs``); ``extra`` is the
    buffer copy of the receiver's previous record if that was a send in the same
    call (MPI_Sendrecv); ``has_prev`` whether the receive has a previous record.
    ``cs`` is the receive copy (0 where the receive record is a matched probe), ``lo``
    the least transfer (send copy + receive copy: 2·C(s)·s for a receive, C(s)·s for
    a probe). ``overlapped`` already folds in the fitted bound's receiver-was-late test
    (``receiver_late``)."""

    send: Ref
    enter: Ref | None
    enter_const: float
    cs: float
    lo: float
    observed: float
    overlapped: bool
    receiver_late: bool
    message_late: bool
    extra: float
    has_prev: bool
    size: int


def recv_time(p: RecvParams, A: list, prev_a: float, ctx: Context) -> float:
    """R2 for the message ``p`` (eq. 5-10; R2f for the fitted bound):
    :func:`compensate.engine.receive.receive_time` on its references' times, its
    case counted in ``ctx``."""
    cases = ctx.cases
    if p.receiver_late:
        cases["m1_receiver_late"] += 1
    elif p.message_late:
        cases["m2_message_late"] += 1
    bound = ctx.bound
    fit = p.lo + ctx.network_ticks(p.size) if bound == "fitted" else None
    return receive_time(at(A, p.send),
                        at(A, p.enter) if p.enter is not None else p.enter_const,
                        prev_a if p.has_prev else None, p.extra, p.cs, p.observed,
                        p.overlapped, p.observed if bound == "upper" else p.lo, fit,
                        ctx.counts)


class Rule:
    """A dependent record's rule: ``needs`` and ``value(A, local, prev_a, ctx)``."""

    __slots__ = ("needs",)

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        raise NotImplementedError


class Latest:
    """The latest approximated time of a set of records, computed once and shared
    by every member rule that waits for the same set (n-to-n: all members)."""

    __slots__ = ("refs", "value")

    def __init__(self, refs: list[Ref]) -> None:
        self.refs = refs
        self.value: float | None = None

    def get(self, A: list) -> float:
        if self.value is None:
            self.value = max(at(A, r) for r in self.refs)
        return self.value
