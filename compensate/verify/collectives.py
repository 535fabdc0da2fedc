"""The collective invariants of R7 (R3-R5: n-to-n, 1-to-n, n-to-1, scans, handle
creation and freeing, their nonblocking forms), checked over the instances of
:mod:`compensate.matching.collectives`, and what they read of other locations."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from compensate.matching import Matching, needed_members
from compensate.matching.collectives import EXSCAN, N_TO_ONE, ONE_TO_N, SCAN, Instance
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
    clean = _clean(t, matching.instances, v)
    for n, inst in enumerate(matching.instances):
        if n in clean or (v.own is not None and not any(map(v.owns, inst.locs))):
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


#: the classes whose every exit waits for every member's enter (needed_members)
_NOT_ALL = (ONE_TO_N, N_TO_ONE, SCAN, EXSCAN)


def _clean(t: dict[int, np.ndarray], instances: list[Instance], v: Verification) -> set[int]:
    """The numbers of the blocking instances whose exits wait for every member
    (n-to-n, handle creation, a synchronising free) in which no exit of ``v``'s
    locations comes before the latest enter or not after its own: checked as one
    array per member count, so that the per-instance loop of
    :func:`verify_collectives` sees only the rest (the same counts and examples)."""
    groups: dict[int, list[int]] = {}
    for n, inst in enumerate(instances):
        if inst.synchronising and not inst.nonblocking and inst.cls not in _NOT_ALL:
            groups.setdefault(len(inst.locs), []).append(n)
    out: set[int] = set()
    for numbers in groups.values():
        locs = np.array([instances[n].locs for n in numbers], dtype=np.int64)
        begin = np.array([instances[n].begin_idx for n in numbers], dtype=np.int64)
        end = np.array([instances[n].end_idx for n in numbers], dtype=np.int64)
        tb = np.zeros(begin.shape, dtype=np.int64)  # (Events.time: int64, exact)
        te = np.zeros(end.shape, dtype=np.int64)
        for loc in np.unique(locs).tolist():
            at = locs == loc
            tb[at], te[at] = t[loc][begin[at]], t[loc][end[at]]
        owned = np.ones(locs.shape, dtype=bool) if v.own is None else \
            np.isin(locs, np.array(sorted(v.own), dtype=np.int64))
        latest = tb.max(axis=1, keepdims=True)
        bad = owned & ((te < latest) | (te <= tb))
        out.update(np.array(numbers)[~bad.any(axis=1)].tolist())
    return out


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
    locations: every member's begin of an instance with a member in ``own``, one
    list per location (not one per member: a segment holds thousands)."""
    begins: dict[int, list[int]] = {}
    for inst in matching.instances:
        if any(loc in own for loc in inst.locs):
            for loc, b in zip(inst.locs, inst.begin_idx, strict=True):
                begins.setdefault(loc, []).append(b)
    yield from begins.items()
