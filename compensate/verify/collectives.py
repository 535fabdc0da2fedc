"""The collective invariants of R7 (R3-R5: n-to-n, 1-to-n, n-to-1, scans, handle
creation and freeing, their nonblocking forms), checked over the instances of
:mod:`compensate.matching.collectives`, and what they read of other locations."""

from __future__ import annotations

from collections.abc import Iterator

from compensate.matching import Matching, needed_members
from compensate.matching.collectives import N_TO_ONE, ONE_TO_N, Instance
from compensate.model import Trace
from compensate.verify.result import Verification, note


def verify_collectives(trace: Trace, matching: Matching, v: Verification) -> None:
    """Count in ``v.collectives`` the collective exits before an enter they wait for
    (by class: every enter for n-to-n and handle creation, and for a handle free
    that synchronised in the measurement; the root's for 1-to-n, ranks up to i for
    scans), not strictly after it for implied messages (1-to-n, n-to-1) and
    nonblocking completions (an Ibcast member's completion after the root's
    request, an Igather root's after every member's request), and the exits that
    wait but are not after their own enter."""
    t = {loc: ev.time for loc, ev in trace.events.items()}
    for n, inst in enumerate(matching.instances):
        if v.own is not None and not any(map(v.owns, inst.locs)):
            continue
        begins = [t[loc][b] for loc, b in zip(inst.locs, inst.begin_idx, strict=True)]
        ends = [t[loc][e] if v.owns(loc) else 0  # only the exits this checks are read
                for loc, e in zip(inst.locs, inst.end_idx, strict=True)]
        pairs = _pairs(inst, begins, v)
        # n-to-n and scans: no exit before the enters it waits for, and after its own;
        # 1-to-n and n-to-1 are implied messages: strictly after their send
        strict = inst.cls in (ONE_TO_N, N_TO_ONE) or inst.nonblocking
        for p, (i, j) in enumerate(pairs):
            late = ends[i] <= begins[j] if strict else ends[i] < begins[j]
            if late:
                v.collectives += 1  # the example's key: exit member i, then j's place
                q = p - next(k for k, pair in enumerate(pairs) if pair[0] == i)
                note(v, f"location {inst.locs[i]}, record {inst.end_idx[i]}: collective exit "
                        f"before the enter of location {inst.locs[j]}, record "
                        f"{inst.begin_idx[j]}", (n, 0, i, q))
        waiting = set() if inst.nonblocking else {i for i, _ in pairs}
        for i in sorted(waiting):  # exits that wait (local ones may clamp)
            if ends[i] <= begins[i]:
                v.collectives += 1
                note(v, f"location {inst.locs[i]}, record {inst.end_idx[i]}: collective exit "
                        f"not after its own enter (record {inst.begin_idx[i]})", (n, 1, i))


def _pairs(inst: Instance, begins: list, v: Verification) -> list[tuple[int, int]]:
    """(exit member, enter member) that must order: an exit against the latest enter
    it waits for; n-to-1 roots and nonblocking completions against each (the same
    pairs, hence the same violation counts, as one branch per class). Only the exits
    of ``v``'s locations."""
    per_pair = inst.cls == N_TO_ONE or inst.nonblocking
    pairs: list[tuple[int, int]] = []
    for i in range(len(inst.locs)):
        if not v.owns(inst.locs[i]):  # an exit on another rank's location
            continue
        needed = [j for j in needed_members(inst, i) if not (inst.nonblocking and j == i)]
        if per_pair:
            pairs += [(i, j) for j in needed]
        elif needed:
            pairs.append((i, max(needed, key=begins.__getitem__)))
    return pairs


def collective_reads(matching: Matching, own: set[int]) -> Iterator[tuple[int, list[int]]]:
    """``(location, record indices)`` that :func:`verify_collectives` reads of other
    locations: every member's begin of an instance with a member in ``own``."""
    for inst in matching.instances:
        if any(loc in own for loc in inst.locs):
            for loc, b in zip(inst.locs, inst.begin_idx, strict=True):
                yield loc, [b]
