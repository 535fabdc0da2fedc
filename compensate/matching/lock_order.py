"""Lock hand-overs that other thread synchronisation already orders (R8, issue #17;
docs/compensation.md "Threads", "Implied lock links").

A lock link (release of acquisition ``k - 1`` -> acquisition ``k``) says the
acquirer could not get the lock before the releaser gave it up. When the release
happened before the acquisition's thread even got there by other edges, that
constraint is redundant: OpenMP's join waits for every member's end of the team
and the next fork precedes every member's begin of the next team; a barrier is
left by nobody before the last member entered it; a Pthread's begin follows its
create and a join (ThreadWait) its end. A lock released in parallel region k and
next taken in region k + 1 (or in the same region after a barrier, or by a thread
created after the releaser ended) was free long before it was requested: its
measured release-to-acquire interval holds the join, the fork and everything in
between, not a hand-over latency. Timing it as an unobserved hand-over (the upper
bound keeps the whole interval) would keep that overhead.

:func:`mark_implied` marks such links ``implied``; the rule then only keeps them
ordered (acquisition at least a tick after the release, the other edges already
give more) and they do not count for the fitted lock latency. They stay in the
matching, so the verifier still checks every acquisition after its release.

Happened-before is computed with vector clocks over the *other* thread edges of
the matching (fork, join, create, end, every barrier member's Leave after every
member's Enter) and program order, never the lock links themselves (so no link
justifies another). Nodes are processed in measured-time order; a sender not yet
processed (a trace whose clocks disagree with the edge) is left out, which can
only keep a link, never mark one wrongly. A stream segment sees only its own edges:
a release carried across a cut brings the locations it already happened before
(:func:`release_reach`, kept by :class:`compensate.engine.carry.LinkCarry`), so a
hand-over across a cut is marked as in memory.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from compensate.model import KIND_CODE, Trace

#: the thread edges that order records besides the lock links
ORDER_KINDS = ("fork", "join", "create", "end")
_RELEASES = (KIND_CODE["ThreadReleaseLock"], KIND_CODE["OmpReleaseLock"])


def _edges(deps) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Receiving record -> the records it comes after (other than its own thread's)."""
    recv: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for s in deps.syncs:
        if s.kind in ORDER_KINDS:
            recv.setdefault(tuple(s.recv), []).extend(tuple(x) for x in s.sends)
    for inst in deps.barriers:
        enters = list(zip(inst.locs, inst.begin_idx, strict=True))
        for loc, e in zip(inst.locs, inst.end_idx, strict=True):
            recv.setdefault((loc, e), []).extend(x for x in enters if x[0] != loc)
    return recv


Seeds = dict[int, dict[int, int]]


def _clocks(trace: Trace, deps, seeds: Seeds | None = None):
    """``clock_at(loc, i)``: per location, the latest record index known to happen
    before record ``i`` of ``loc`` (vector clock of the latest edge-receiving record
    at or before it). ``seeds[loc]``: what every record of ``loc`` comes after (a
    stream segment's carried releases, :func:`release_reach`)."""
    seeds = seeds or {}
    recv = _edges(deps)
    nodes = sorted(recv, key=lambda n: (int(trace.events[n[0]].time[n[1]]), n[0], n[1]))
    done_idx: dict[int, list[int]] = {}  # location -> processed node indices, in order
    done_vc: dict[int, list[dict]] = {}  # location -> their clocks

    def clock_at(loc: int, i: int) -> dict:
        """The clock of the latest processed node on ``loc`` at or before ``i``."""
        idx = done_idx.get(loc)
        j = bisect_right(idx, i) - 1 if idx else -1
        return done_vc[loc][j] if j >= 0 else seeds.get(loc, {})

    for loc, i in nodes:
        idx = done_idx.setdefault(loc, [])
        if idx and idx[-1] > i:  # only if times are not monotone on loc: skip
            continue
        vc = dict(clock_at(loc, i))
        for s_loc, s in recv[(loc, i)]:
            for k, v in clock_at(s_loc, s).items():
                if vc.get(k, -1) < v:
                    vc[k] = v
            if vc.get(s_loc, -1) < s:
                vc[s_loc] = s
        vc[loc] = i
        idx.append(i)
        done_vc.setdefault(loc, []).append(vc)
    return clock_at


def mark_implied(trace: Trace, deps, seeds: Seeds | None = None) -> int:
    """Mark each lock link of ``deps`` (a :class:`~compensate.matching.threads.
    ThreadDeps`) whose release happens before its acquisition by the other thread
    edges (module docstring); returns how many it marked."""
    locks = [s for s in deps.syncs if s.kind == "lock" and not s.implied]
    if not locks:
        return 0
    clock_at = _clocks(trace, deps, seeds)
    n = 0
    for sync in locks:
        (loc, i), (r_loc, r) = sync.recv, sync.sends[0]
        if clock_at(loc, i).get(r_loc, -1) >= r:
            sync.implied = True
            n += 1
    return n


def release_reach(trace: Trace, deps, seeds: Seeds | None = None
                  ) -> dict[tuple[int, int], set[int]]:
    """For each lock release ``(loc, i)`` of ``trace``: the locations whose last
    record happens after it (its own among them). A stream segment's release carried
    into the next segment (:mod:`compensate.engine.carry`) seeds those locations
    there, so that a hand-over across the cut is marked as in memory."""
    rel = [(loc, i) for loc, ev in trace.events.items()
           for i in np.flatnonzero(np.isin(ev.kind, _RELEASES)).tolist()]
    if not rel:
        return {}
    clock_at = _clocks(trace, deps, seeds)
    last = {loc: clock_at(loc, len(ev)) for loc, ev in trace.events.items()}
    return {(loc, i): {x for x, vc in last.items() if vc.get(loc, -1) >= i} | {loc}
            for loc, i in rel}


__all__ = ["ORDER_KINDS", "Seeds", "mark_implied", "release_reach"]
