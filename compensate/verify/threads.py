"""The thread invariants of R7 (R8: OpenMP fork/join and barriers, locks, Pthreads
create/join, EZTrace's Pthread locks, barriers and create/join statistic
(:mod:`compensate.matching.pthreads`), and the task links of
:mod:`compensate.matching.tasks`: a task's first switch after its create, a barrier or
taskwait after the completes it waited for), checked over
:class:`compensate.matching.threads.ThreadDeps`, and what they read of other
locations."""

from __future__ import annotations

from collections.abc import Iterator

from compensate.matching import Matching
from compensate.matching.pthreads import BARRIER_OP
from compensate.matching.threads import ThreadSync
from compensate.model import Trace
from compensate.verify.result import Verification, note


def verify_threads(trace: Trace, matching: Matching, v: Verification) -> None:
    """Count in ``v.threads`` every thread record that waits for another thread (a
    team member's ThreadTeamBegin for its fork, the master's ThreadJoin for each
    member's ThreadTeamEnd, a ThreadAcquireLock for the release before it in
    acquisition order, a ThreadBegin for its ThreadCreate, a ThreadWait for its
    ThreadEnd, a task link) and is not strictly after it, and every member of an
    OpenMP or Pthread barrier that left it before the last member entered it."""
    for n, inst in enumerate(matching.threads.barriers):
        if v.own is not None and not any(map(v.owns, inst.locs)):
            continue
        ev = [trace.events[loc].time for loc in inst.locs]
        last = max(int(t[b]) for t, b in zip(ev, inst.begin_idx, strict=True))
        for m, (loc, t, e) in enumerate(zip(inst.locs, ev, inst.end_idx, strict=True)):
            if v.owns(loc) and t[e] < last:
                v.threads += 1
                what = "Pthread barrier" if inst.op == BARRIER_OP else f"team {inst.comm}"
                note(v, f"location {loc}, record {e}: left a barrier before the "
                        f"last member entered it ({what})", (0, n, m))
    for n, m, sync, s_loc, s in early_links(trace, matching.threads.syncs, v):
        v.threads += 1
        loc, i = sync.recv
        note(v, f"location {loc}, record {i}: thread {sync.kind} not after "
                f"location {s_loc}, record {s}", (1, n, m))


def thread_reads(matching: Matching, own: set[int]) -> Iterator[tuple[int, list[int]]]:
    """``(location, record indices)`` that :func:`verify_threads` reads of other
    locations: every member's begin of a barrier with a member in ``own``,
    and the sends of the links (locks and task links included) whose waiting record
    is in ``own``."""
    for inst in matching.threads.barriers:
        if any(loc in own for loc in inst.locs):
            for loc, b in zip(inst.locs, inst.begin_idx, strict=True):
                yield loc, [b]
    yield from link_reads(matching.threads.syncs, own)


def early_links(trace: Trace, syncs: list[ThreadSync], v: Verification
                ) -> Iterator[tuple[int, int, ThreadSync, int, int]]:
    """``(link number, send number, link, sender location, sender record)`` of each
    send of ``syncs`` whose waiting record, one ``v`` owns, is not strictly after
    it: the violations of a thread or device link."""
    for n, sync in enumerate(syncs):
        loc, i = sync.recv
        if not v.owns(loc):
            continue
        t = trace.events[loc].time[i]
        for m, (s_loc, s) in enumerate(sync.sends):
            if t <= trace.events[s_loc].time[s]:
                yield n, m, sync, s_loc, s


def link_reads(syncs: list[ThreadSync], own: set[int]) -> Iterator[tuple[int, list[int]]]:
    """``(location, record indices)`` of other locations that checking ``syncs``
    reads: the sends of the links whose waiting record is in ``own``."""
    for sync in syncs:
        if sync.recv[0] in own:
            for s_loc, s in sync.sends:
                yield s_loc, [s]
