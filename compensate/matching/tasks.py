"""OpenMP tasks: the records that wait for a task on another thread of its team
(docs/compensation.md, "Threads", tasks; issue #17).

OTF2 identifies a task by its thread team, its creating thread (the thread's
number in the team) and that thread's private generation number: the
``ThreadTaskCreate`` on the creating thread, a ``ThreadTaskSwitch`` wherever the
task starts or resumes and a ``ThreadTaskComplete`` where it ends carry the same
three fields. The legacy records of older Score-P (``OmpTaskCreate``,
``OmpTaskSwitch``, ``OmpTaskComplete``, OTF2 1.0/1.1) carry a task id instead.
The key of a task is (process, those fields). A key that repeats (a generation
number that starts again in a later parallel region) is told apart by time: a
switch or complete belongs to the latest create of its key measured at or before
it (the threads of one process share one clock).

Two dependencies, each a :class:`~compensate.matching.threads.ThreadSync` timed by
R8's zero-byte link:

* ``task``: the create -> the task's first ``ThreadTaskSwitch`` when that is on
  another thread (a task cannot start before it was created; later switches to it
  resume it and follow its start).
* ``taskwait``: the ``ThreadTaskComplete`` of every task a synchronisation waited
  for -> the waiting thread's ``Leave`` of it (OpenMP: a barrier completes every
  task of the team generated before it; a taskwait the child tasks the current
  task generated before it):

  - *barrier*: each member's ``Leave`` of the b-th OpenMP barrier of a team
    instance (:attr:`ThreadDeps.barriers`) waits for every task whose create on its
    creating thread lies before that thread's ``Leave`` of barrier b (inside the
    barrier, a task run there may create more) and after its ``Leave`` of barrier
    b - 1, with no team begin or end between the create and the barrier, unless a
    taskwait already waited for it (its creator reached the barrier after that);
  - *taskwait*: the ``Leave`` of a region of role TASK_WAIT waits for the tasks
    created on its thread, while the same task was current there, since the last
    taskwait of that task, barrier or team begin or end of the thread. The
    current task of a thread is the last one switched to that has not completed
    (a stack: a switch to a task pushes it, or returns to it if it is suspended
    below; its complete pops it), the thread's implicit task when the stack is
    empty.

  A task whose complete is on the waiting thread is ordered by the thread itself;
  one whose complete is measured after the waiting ``Leave`` (the trace does not
  show the wait) is left out and counted unmatched.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict

import numpy as np

from compensate.formats.fields import field_of
from compensate.matching.threads import ThreadSync
from compensate.model import (
    BARRIER_ROLES,
    ENTER,
    KIND_CODE,
    LEAVE,
    THREAD_BARRIER_PARADIGMS,
    Trace,
    kind_table,
)

CREATE = (KIND_CODE["ThreadTaskCreate"], KIND_CODE["OmpTaskCreate"])
SWITCH = (KIND_CODE["ThreadTaskSwitch"], KIND_CODE["OmpTaskSwitch"])
COMPLETE = (KIND_CODE["ThreadTaskComplete"], KIND_CODE["OmpTaskComplete"])
TASK_KINDS = CREATE + SWITCH + COMPLETE
_LEGACY = frozenset({KIND_CODE["OmpTaskCreate"], KIND_CODE["OmpTaskSwitch"],
                     KIND_CODE["OmpTaskComplete"]})
_TEAM_EDGES = (KIND_CODE["ThreadTeamBegin"], KIND_CODE["ThreadTeamEnd"])
#: records after which a thread's earlier tasks are complete (its team's end; the
#: legacy fork and join of the master)
_RESETS = _TEAM_EDGES + (KIND_CODE["OmpFork"], KIND_CODE["OmpJoin"])
_TASK = kind_table(TASK_KINDS)
#: OTF2 region role of an OpenMP taskwait
TASKWAIT_ROLES = frozenset({"TASK_WAIT"})


def task_key(trace: Trace, loc: int, i: int) -> tuple | None:
    """(process, identifying fields) of a task record, None if a field is missing."""
    payload = trace.events[loc].payload[i]
    proc = trace.definitions.process_of(loc)
    if int(trace.events[loc].kind[i]) in _LEGACY:
        tid = field_of(payload, "task_id")
        return None if tid is None else (proc, "omp", tid)
    fields = tuple(field_of(payload, n)
                   for n in ("thread_team", "creating_thread", "generation_number"))
    return None if None in fields else (proc,) + fields


def match_tasks(trace: Trace, deps) -> None:
    """Add the task dependencies of ``trace`` to ``deps`` (a
    :class:`~compensate.matching.threads.ThreadDeps` whose barriers are already
    matched): module docstring."""
    roles = trace.definitions.region_roles
    taskwaits = [rid for rid, (role, _) in roles.items() if role in TASKWAIT_ROLES]
    barriers = [rid for rid, (role, paradigm) in roles.items()
                if role in BARRIER_ROLES and paradigm in THREAD_BARRIER_PARADIGMS]
    recs = {}
    for loc, ev in trace.events.items():
        sel = _TASK.take(ev.kind)
        if not sel.any():
            continue
        sel |= np.isin(ev.kind, _RESETS)
        sel |= np.isin(ev.kind, (ENTER, LEAVE)) & np.isin(ev.region, taskwaits + barriers)
        recs[loc] = np.flatnonzero(sel).tolist()
    if not recs:
        return
    taskwaits = set(taskwaits)
    creates: dict[tuple, list] = defaultdict(list)  # key -> [(time, loc, index)] in time
    keys: dict[tuple[int, int], tuple | None] = {}
    for loc, idx in recs.items():
        ev = trace.events[loc]
        for i in idx:
            if int(ev.kind[i]) in TASK_KINDS:
                key = keys[(loc, i)] = task_key(trace, loc, i)
                if key is None:
                    deps.unmatched += 1
                elif int(ev.kind[i]) in CREATE:
                    creates[key].append((int(ev.time[i]), loc, i))
    for items in creates.values():
        items.sort()
    times = {key: [c[0] for c in items] for key, items in creates.items()}
    others: list[tuple] = []  # (task ref, time, loc, index, kind)
    waits: list[tuple] = []  # (loc, Leave index, Leave time, [task refs])
    for loc, idx in recs.items():
        ev = trace.events[loc]
        implicit = ("implicit", loc)
        stack: list = []  # task refs switched to on this thread, innermost last
        pending: dict = defaultdict(list)  # current task -> tasks it created since a wait
        open_waits: list[list] = []
        for i in idx:
            k = int(ev.kind[i])
            t = int(ev.time[i])
            if k in _RESETS or (k == LEAVE and int(ev.region[i]) not in taskwaits):
                pending.clear()  # a parallel region's end or a barrier completed them
                continue
            if k == ENTER:
                if int(ev.region[i]) in taskwaits:
                    cur = stack[-1] if stack else implicit
                    open_waits.append(pending.pop(cur, []))
                continue
            if k == LEAVE:
                if open_waits:
                    waits.append((loc, i, t, open_waits.pop()))
                continue
            key = keys[(loc, i)]
            if key is None:
                continue
            if k in CREATE:
                cur = stack[-1] if stack else implicit
                pending[cur].append((key, creates[key].index((t, loc, i),
                                                             bisect_left(times[key], t))))
                continue
            ref = _instance(times, key, t)
            if ref is None:
                deps.unmatched += 1
                continue
            others.append((ref, t, loc, i, k))
            if k in SWITCH:
                if ref in stack:
                    del stack[stack.index(ref) + 1:]
                else:
                    stack.append(ref)
            elif ref in stack:
                stack.remove(ref)
    complete: dict[tuple, tuple[int, int, int]] = {}  # task ref -> (time, loc, index)
    first_switch: dict[tuple, tuple[int, int, int]] = {}
    for ref, t, loc, i, k in others:
        if k in COMPLETE:
            complete.setdefault(ref, (t, loc, i))
        elif ref not in first_switch or (t, loc, i) < first_switch[ref]:
            first_switch[ref] = (t, loc, i)
    for ref, (_, loc, i) in first_switch.items():
        _, c_loc, c_i = creates[ref[0]][ref[1]]
        if c_loc != loc:
            deps.syncs.append(ThreadSync("task", (loc, i), [(c_loc, c_i)]))
    for loc, i, t, refs in waits:
        _wait(deps, ThreadSync, loc, i, t, refs, complete)
    done = {ref for _, _, _, refs in waits for ref in refs}
    _barrier_waits(trace, deps, ThreadSync, creates, complete, done)


def _instance(times: dict, key: tuple, t: int) -> tuple | None:
    """(key, n): the latest create of ``key`` measured at or before ``t``."""
    n = bisect_right(times.get(key, ()), t) - 1
    return None if n < 0 else (key, n)


def _wait(deps, sync_cls, loc: int, i: int, t: int, refs, complete: dict) -> None:
    sends = []
    for ref in refs:
        c = complete.get(ref)
        if c is None or c[1] == loc:
            continue
        if c[0] > t:  # the trace does not show this wait
            deps.unmatched += 1
            continue
        sends.append((c[1], c[2]))
    if sends:
        deps.syncs.append(sync_cls("taskwait", (loc, i), sends))


def _barrier_waits(trace: Trace, deps, sync_cls, creates: dict, complete: dict,
                   done: set) -> None:
    # per location: its barrier Leaves (index, barrier instance) in order
    leaves: dict[int, list[tuple[int, object, int]]] = defaultdict(list)
    for inst in deps.barriers:
        for loc, b, e in zip(inst.locs, inst.begin_idx, inst.end_idx, strict=True):
            leaves[loc].append((e, inst, b))
    if not leaves:
        return
    for v in leaves.values():
        v.sort(key=lambda x: x[0])
    ends = {loc: np.array([e for e, _, _ in v], dtype=np.int64) for loc, v in leaves.items()}
    edges = {loc: np.flatnonzero(np.isin(ev.kind, _TEAM_EDGES))
             for loc, ev in trace.events.items() if loc in leaves}
    waited: dict[int, list] = defaultdict(list)  # id(inst) -> task refs
    insts = {}
    for key, items in creates.items():
        for n, (_, loc, i) in enumerate(items):
            mine = leaves.get(loc)
            if not mine or (key, n) in done:  # (a taskwait waited for it, before)
                continue
            j = int(np.searchsorted(ends[loc], i, side="right"))
            if j == len(mine):
                continue
            _, inst, begin = mine[j]
            e = edges[loc]
            lo, hi = min(i, begin), max(i, begin)
            # a team begin or end in between: the barrier is another team's
            if np.searchsorted(e, hi, side="left") > np.searchsorted(e, lo, side="right"):
                continue
            waited[id(inst)].append((key, n))
            insts[id(inst)] = inst
    for k, refs in waited.items():
        inst = insts[k]
        for loc, e in zip(inst.locs, inst.end_idx, strict=True):
            _wait(deps, sync_cls, loc, e, int(trace.events[loc].time[e]), refs, complete)


__all__ = ["COMPLETE", "CREATE", "SWITCH", "TASK_KINDS", "TASKWAIT_ROLES", "match_tasks",
           "task_key"]
