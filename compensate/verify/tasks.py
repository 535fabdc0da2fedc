"""Happened-before invariant of OpenMP tasks (R8 tasks, docs/compensation.md
"Threads"), computed from the task records themselves, not from the matching: no
task starts or ends before it was created. Every ``ThreadTaskSwitch`` and
``ThreadTaskComplete`` (and the legacy ``OmpTaskSwitch`` / ``OmpTaskComplete``)
must follow a create of the same task (:func:`compensate.matching.tasks.task_key`):
strictly later in time, or earlier in the same location's record order. The waits
of barriers and taskwaits for task completes are links of the matching
(``taskwait``) and checked with the other thread links
(:func:`compensate.verify.threads.verify_threads`). This invariant reads only the
task's own process (a task never leaves it; a rank of the distributed run owns it
whole).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from compensate.matching import Matching
from compensate.matching.tasks import CREATE, TASK_KINDS, task_key
from compensate.model import Trace
from compensate.verify.result import Verification, note


def verify_tasks(trace: Trace, matching: Matching, v: Verification) -> None:
    """Count in ``v.threads`` (the tasks' counter is the threads') the task switches
    and completes that do not follow a create of their task."""
    bad, notes = task_violations(trace, v.own)
    v.threads += bad
    for key, n in notes:
        note(v, n, key)


def task_violations(trace: Trace, own: set[int] | None = None
                    ) -> tuple[int, list[tuple[tuple, str]]]:
    """(count, up to 10 (place, description)) of task switches and completes that do
    not follow a create of their task (module docstring); the place orders them as
    found. ``own``: only the switches and completes of these locations (a task never
    leaves its process, whose threads a rank of the distributed run owns together)."""
    creates: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)
    uses = []
    for n, (loc, ev) in enumerate(trace.events.items()):
        if own is not None and loc not in own:
            continue
        for i in np.flatnonzero(np.isin(ev.kind, TASK_KINDS)).tolist():
            key = task_key(trace, loc, i)
            if key is None:
                continue
            item = (int(ev.time[i]), loc, i)
            if int(ev.kind[i]) in CREATE:
                creates[key].append(item)
            else:
                uses.append((key,) + item + (n,))
    bad, notes = 0, []
    for key, t, loc, i, n in uses:
        made = creates.get(key)
        if made is None:  # a task created before the trace (or segment) began
            continue
        if any(ct < t or (c_loc == loc and ci < i) for ct, c_loc, ci in made):
            continue
        bad += 1
        if len(notes) < 10:
            notes.append(((n, i), f"location {loc}, record {i}: task switch or complete "
                          f"not after its create (location {made[0][1]}, record "
                          f"{made[0][2]})"))
    return bad, notes
