"""EZTrace's per-record costs from the probes' counts, gaps and dilations.

The arithmetic of :mod:`calibration.eztrace` (whose docstring gives the method),
apart from running the probes: each kind's cost from the median gap after it
(:func:`per_kind`), closed on the measured dilations (:func:`closed_costs`), the
two-rank paths' costs before the waiting records' stamps (:func:`path_costs`),
an opening record's part before its stamp (:func:`opening_before`), the speed
reference and the per-region entries of the platform file. Pure functions of
measurements, so that they are tested on made-up numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: variants run for the gaps between their records alone (traced, not timed)
GAPS_ONLY = ("ompmpi",)
#: two-rank variants: the sending kind, the self-variant kind whose cost it takes,
#: the other kinds on the path of one step (the waiting kind first), and steps
#: (messages, collectives) per iteration; the rest of the path's dilation is the
#: waiting kind's cost before its stamp (:func:`path_costs`)
PATHS = {"pingpong": ("MpiSend", "MpiIsend", ("MpiRecv", "Leave", "Enter"), 2),
         "allreduce": ("MpiCollectiveBegin", "MpiCollectiveBegin",
                       ("MpiCollectiveEnd", "Leave", "Enter"), 1)}
#: kinds that open a call as an Enter does (EZTrace's GOMP_parallel wrapper stamps
#: ThreadFork where another wrapper stamps its Enter), and the records that end a
#: call: in the probes nothing of the program's own runs between a record of
#: CLOSING and the next call's first record, so the gap ``a -> b`` less ``a ->
#: Enter`` is what ``b`` costs before its stamp beyond an Enter (:func:`opening_before`)
OPENING = ("ThreadFork",)
CLOSING = ("Leave", "ThreadJoin")
#: pairs of consecutive kinds whose gap holds EZTrace's work alone, whatever the
#: program (a wrapper's Enter and the record it writes before calling MPI; a
#: receive's or a collective's last record and its Leave): the platform's
#: ``speed_reference`` (:func:`speed_reference`, :mod:`compensate.speed`)
REFERENCE_PAIRS = ("Enter>MpiSend", "Enter>MpiIsend", "Enter>MpiIrecvRequest",
                   "Enter>MpiCollectiveBegin", "MpiRecv>Leave", "MpiCollectiveEnd>Leave",
                   "MpiIrecvRequest>Leave", "ThreadTeamEnd>Leave")
#: a pair's median enters the reference only from a variant that shows it this often
REFERENCE_COUNT = 100


@dataclass
class ProbeResult:
    """Per-kind costs (seconds in the gap after a record) and the measurements behind them."""

    costs: dict[str, float]
    delta: dict[str, float]            # variant -> traced - untraced seconds per iteration
    records: dict[str, dict[str, float]]  # variant -> kind -> records per iteration (a rank)
    fits: dict[str, dict] = field(default_factory=dict)
    closure: dict[str, float] = field(default_factory=dict)  # variant -> sum of costs / delta
    gaps: dict[str, dict[str, float]] = field(default_factory=dict)  # variant -> kind -> s
    spread: dict[str, list[float]] = field(default_factory=dict)  # variant -> per-repeat delta
    #: kind -> seconds of its cost before its stamp (at most its cost)
    before: dict[str, float] = field(default_factory=dict)
    #: variant -> "a>b" -> (median seconds from a record a to the next, b; count)
    pairs: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)


def base_kind(kind: str) -> str:
    """The OTF2 kind of a counted kind (``Enter@pthread_mutex_lock``: ``Enter``)."""
    return kind.split("@", 1)[0]


def opening_before(pairs: dict[str, dict[str, tuple[float, int]]]) -> dict[str, float]:
    """Seconds each :data:`OPENING` kind costs before its stamp beyond what an Enter
    does (module docstring): over the :data:`CLOSING` kinds ``a`` followed, in any
    variants, both by it and by an Enter, the median of ``gap(a -> kind) - gap(a ->
    Enter)`` (each pair's gap from the variant that shows it most often: a pair
    seen once, at start-up or around the loop, holds other work); at least 0;
    kinds without such an ``a`` left out."""
    best: dict[str, tuple[int, float]] = {}
    for per in pairs.values():
        for key, (g, c) in per.items():
            if key not in best or c > best[key][0]:
                best[key] = (c, g)
    med = {k: g for k, (_, g) in best.items()}
    out = {}
    for b in OPENING:
        diffs = [med[f"{a}>{b}"] - med[f"{a}>Enter"] for a in CLOSING
                 if f"{a}>{b}" in med and f"{a}>Enter" in med]
        if diffs:
            out[b] = max(float(np.median(diffs)), 0.0)
    return out


def successor(per: dict[str, tuple[float, int]], kind: str) -> str | None:
    """The kind that most often follows ``kind`` in one variant's pairs."""
    after = [(c, key.split(">", 1)[1]) for key, (_, c) in per.items()
             if key.split(">", 1)[0] == kind]
    return max(after)[1] if after else None


def per_kind(records: dict[str, dict[str, float]], gaps: dict[str, dict[str, float]],
             untraced: dict[str, float],
             pairs: dict[str, dict[str, tuple[float, int]]] | None = None,
             before: dict[str, float] | None = None) -> dict[str, float]:
    """Seconds the tracer adds per record of each kind: the traced probe's median
    gap after it, less its share of the untraced iteration (the untraced time
    spread evenly over the iteration's gaps; none for a :data:`PURE` kind, whose
    gap holds no work of the program's) and less what the record that mostly
    follows it there costs before its stamp (``before``, :func:`opening_before`;
    ``pairs`` tells which it is), plus its own cost before its stamp; per kind,
    from the variant whose iteration is shortest untraced (the least to subtract).
    The two-rank variants (:data:`PATHS`) are left out: their gaps hold the waits;
    so are variants without an untraced time (:data:`GAPS_ONLY`)."""
    before = before or {}
    best: dict[str, tuple[float, float]] = {}
    for v, per in records.items():
        if v in PATHS or v not in untraced:
            continue
        n = sum(per.values())
        share = untraced[v] / n if n else 0.0
        for k, g in gaps[v].items():
            if k in per and (k not in best or untraced[v] < best[k][1]):
                nxt = successor(pairs[v], k) if pairs and v in pairs else None
                own = 0.0 if base_kind(k) in PURE else share  # (PURE: tracer work alone)
                after = max(g - own - before.get(nxt, 0.0), 0.0)
                best[k] = (after + before.get(k, 0.0), untraced[v])
    return {k: c for k, (c, _) in sorted(best.items())}


#: kinds after which EZTrace's wrappers run no work of the call's (what follows is
#: the call's own Leave, the first record inside a parallel region, or the
#: program's next call): their median gap is their cost as measured (less the next
#: record's part before its stamp)
PURE = ("Leave", "MpiRecv", "MpiCollectiveEnd", "ThreadTeamBegin", "ThreadTeamEnd",
        "ThreadJoin")


def closed_costs(records: dict[str, dict[str, float]], costs: dict[str, float],
                 delta: dict[str, float]) -> dict[str, float]:
    """``costs`` (the gap estimates) changed as little as possible, relative to each
    kind's own cost, so that every self variant's records add up to its measured
    dilation per iteration (closure 1). Only kinds whose gap also holds the MPI
    call's own work change (an Enter, a send or request record: the untraced share
    subtracted there is a guess, and EZTrace's work around the call, such as
    registering a request, lies there too); the :data:`PURE` kinds' gaps hold
    tracer work alone and stay as measured. Kinds stay >= 0."""
    variants = [v for v in records if v not in PATHS and v in delta]
    kinds = sorted(costs)
    if not variants or not kinds:
        return dict(costs)
    n = np.array([[records[v].get(k, 0.0) for k in kinds] for v in variants])
    g = np.array([costs[k] for k in kinds])
    w = np.diag([0.0 if base_kind(k) in PURE else max(costs[k], 1e-9) for k in kinds])
    resid = np.array([delta[v] for v in variants]) - n @ g
    c = g + w @ n.T @ np.linalg.lstsq(n @ w @ n.T, resid, rcond=None)[0]
    return {k: max(float(x), 0.0) for k, x in zip(kinds, c, strict=True)}


def path_costs(costs: dict[str, float], delta: dict[str, float]
               ) -> tuple[dict[str, float], dict[str, float]]:
    """``costs`` with the kinds of each measured two-rank variant (:data:`PATHS`),
    and the waiting kinds' costs before their stamps (module docstring). Of one
    step's dilation (``delta`` / steps) less the other kinds on its path, the
    sending kind takes its self variant's cost (all of the rest where that is
    less, at least 0; all of it where the self variant was not measured), and the
    waiting kind the remainder, before its stamp, on top of its own cost."""
    out, before = dict(costs), {}
    rests = {v: delta[v] / steps - sum(costs.get(k, 0.0) for k in others)
             for v, (_, _, others, steps) in PATHS.items() if v in delta}
    for v, rest in rests.items():
        kind, own, others, _ = PATHS[v]
        rest = max(rest, 0.0)
        out[kind] = min(costs[own], rest) if own in costs else rest
        if rest > out[kind]:
            before[others[0]] = rest - out[kind]
            out[others[0]] = costs.get(others[0], 0.0) + before[others[0]]
    return out, before


def closure(records: dict[str, dict[str, float]], costs: dict[str, float],
            delta: dict[str, float]) -> dict[str, float]:
    """Per variant, the per-kind costs summed over one iteration / the measured
    traced - untraced time per iteration (1: the gaps account for the slope); for
    a two-rank variant, the costs of its path (:data:`PATHS`)."""
    out = {}
    for v, per in records.items():
        if v in PATHS:
            kind, _, others, steps = PATHS[v]
            total = steps * sum(costs.get(k, 0.0) for k in (kind, *others))
        else:
            total = sum(n * costs.get(k, 0.0) for k, n in per.items())
        out[v] = total / delta[v] if delta[v] > 0 else float("nan")
    return out


def solve(records: dict[str, dict[str, float]], gaps: dict[str, dict[str, float]],
          pairs: dict[str, dict[str, tuple[float, int]]], base: dict[str, float],
          delta: dict[str, float], fits: dict | None = None,
          spread: dict[str, list[float]] | None = None) -> ProbeResult:
    """Per-kind costs and their parts before the stamp from the probes' counts, gaps
    and slopes (module docstring): :func:`opening_before`, :func:`per_kind`,
    :func:`closed_costs`, :func:`path_costs`; a part before the stamp never more
    than its kind's cost."""
    timed_records = {v: r for v, r in records.items() if v not in GAPS_ONLY}
    opening = opening_before(pairs)
    costs = per_kind(timed_records, gaps, base, pairs, opening)
    costs, waiting = path_costs(closed_costs(timed_records, costs, delta), delta)
    before = {k: min(v, costs[k]) for k, v in {**opening, **waiting}.items()
              if k in costs and v > 0}
    return ProbeResult(costs, delta, timed_records, fits or {},
                       closure(timed_records, costs, delta), gaps, spread or {}, before, pairs)


def speed_reference(pairs: dict[str, dict[str, tuple[float, int]]]) -> dict[str, float]:
    """Per :data:`REFERENCE_PAIRS` pair: the median over the variants that show it
    at least :data:`REFERENCE_COUNT` times of its median gap (seconds), the speed
    the costs were measured at (:mod:`compensate.speed`)."""
    out = {}
    for pair in REFERENCE_PAIRS:
        found = [per[pair][0] for per in pairs.values()
                 if pair in per and per[pair][1] >= REFERENCE_COUNT and per[pair][0] > 0]
        if found:
            out[pair] = float(np.median(found))
    return out


def by_region(values: dict[str, float]) -> dict[str, dict[str, float]]:
    """The ``KIND@REGION`` entries of ``values`` as the platform file's by-region
    object: region -> kind -> seconds (zeros left out)."""
    out: dict[str, dict[str, float]] = {}
    for key, v in values.items():
        if "@" in key and v > 0:
            kind, region = key.split("@", 1)
            out.setdefault(region, {})[kind] = v
    return {r: dict(sorted(k.items())) for r, k in sorted(out.items())}
