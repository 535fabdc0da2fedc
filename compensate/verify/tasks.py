"""Happened-before invariant of OpenMP tasks (R8 tasks, docs/compensation.md
"Threads"), computed from the task records themselves, not from the matching: no
task starts or ends before it was created. Every ``ThreadTaskSwitch`` and
``ThreadTaskComplete`` (and the legacy ``OmpTaskSwitch`` / ``OmpTaskComplete``)
must follow a create of the same task (:func:`compensate.matching.tasks.task_key`):
strictly later in time, or earlier in the same location's record order. The waits
of barriers and taskwaits for task completes are links of the matching
(``taskwait``) and checked with the other thread links (``_verify_threads``).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from compensate.matching.tasks import CREATE, TASK_KINDS, task_key
from compensate.model import Trace


def task_violations(trace: Trace) -> tuple[int, list[str]]:
    """(count, up to 10 descriptions) of task switches and completes that do not
    follow a create of their task (module docstring)."""
    creates: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)
    uses = []
    for loc, ev in trace.events.items():
        for i in np.flatnonzero(np.isin(ev.kind, TASK_KINDS)).tolist():
            key = task_key(trace, loc, i)
            if key is None:
                continue
            item = (int(ev.time[i]), loc, i)
            if int(ev.kind[i]) in CREATE:
                creates[key].append(item)
            else:
                uses.append((key,) + item)
    bad, notes = 0, []
    for key, t, loc, i in uses:
        made = creates.get(key)
        if made is None:  # a task created before the trace (or segment) began
            continue
        if any(ct < t or (c_loc == loc and ci < i) for ct, c_loc, ci in made):
            continue
        bad += 1
        if len(notes) < 10:
            notes.append(f"location {loc}, record {i}: task switch or complete not after "
                         f"its create (location {made[0][1]}, record {made[0][2]})")
    return bad, notes
