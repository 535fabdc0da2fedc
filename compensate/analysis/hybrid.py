"""Wait states of threads and accelerators (docs/analysis.md, "Threads and
accelerators"): waiting at OpenMP and Pthread barriers, lock contention, worker threads idle
between parallel regions, and accelerator streams idle between their kernels and
copies. They lie outside MPI, so they are reported beside the MPI wait states and
the behaviour breakdown, not inside it (whose categories add up to each location's
time)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from compensate.matching import Matching, match
from compensate.matching.pthreads import BARRIER_OP
from compensate.model import ENTER, LEAVE, Trace

#: the states, in report order
HYBRID_STATES: tuple[str, ...] = ("omp_barrier_wait", "pthread_barrier_wait",
                                  "lock_contention", "thread_idle", "gpu_idle")
HYBRID_LABELS: dict[str, str] = {
    "omp_barrier_wait": "Wait at OpenMP Barrier",
    "pthread_barrier_wait": "Wait at Pthread Barrier",
    "lock_contention": "Lock Contention",
    "thread_idle": "Idle threads",
    "gpu_idle": "GPU idle",
}


@dataclass
class HybridWaits:
    """Seconds per state and location, and how many waits (or idle gaps) each has.
    ``present``: the trace has thread synchronisation or accelerator streams (the
    text report shows the table only then)."""

    by_location: dict[str, dict[int, float]]
    counts: dict[str, int] = field(default_factory=dict)
    present: bool = False

    def total(self, state: str) -> float:
        return sum(self.by_location[state].values())

    def to_dict(self) -> dict:
        return {s: {"total": self.total(s), "count": self.counts.get(s, 0),
                    "by_location": {str(k): v for k, v in sorted(self.by_location[s].items())}}
                for s in HYBRID_STATES}


def hybrid_waits(trace: Trace, matching: Matching | None = None) -> HybridWaits:
    """The thread and accelerator wait states of ``trace`` (definitions in
    docs/analysis.md)."""
    matching = matching if matching is not None else match(trace)
    res = float(trace.definitions.timer_resolution)
    out = HybridWaits({s: defaultdict(float) for s in HYBRID_STATES},
                      dict.fromkeys(HYBRID_STATES, 0))
    time = {loc: ev.time for loc, ev in trace.events.items()}

    def add(state: str, loc: int, ticks: int) -> None:
        if ticks > 0:
            out.by_location[state][loc] += ticks / res
            out.counts[state] += 1

    threads = matching.threads
    # Wait at OpenMP / Pthread Barrier: a member's time in the barrier before the last
    # member entered, bounded by its own time in it
    for inst in threads.barriers:
        state = "pthread_barrier_wait" if inst.op == BARRIER_OP else "omp_barrier_wait"
        enters = [int(time[loc][b]) for loc, b in zip(inst.locs, inst.begin_idx, strict=True)]
        last = max(enters)
        for loc, b, e in zip(inst.locs, enters, inst.end_idx, strict=True):
            add(state, loc, min(last - b, int(time[loc][e]) - b))
    begins: dict[int, list[int]] = defaultdict(list)  # worker -> its team begins
    ends: dict[int, list[int]] = defaultdict(list)  # worker -> its team ends
    for sync in threads.syncs:
        if sync.kind == "lock":
            # Lock Contention: from the record before the acquisition (the Enter of the
            # critical region or lock call) until the release it waited for
            loc, i = sync.recv
            if i == 0:
                continue
            start, got = int(time[loc][i - 1]), int(time[loc][i])
            s_loc, s = sync.sends[0]
            add("lock_contention", loc, min(int(time[s_loc][s]) - start, got - start))
        elif sync.kind == "fork":
            begins[sync.recv[0]].append(sync.recv[1])
        elif sync.kind == "join":
            for loc, e in sync.sends:
                ends[loc].append(e)
    # Idle threads: a worker's time from the end of one team to its next team begin
    for loc, items in ends.items():
        later = np.sort(np.asarray(begins.get(loc, []), dtype=np.int64))
        for e in items:
            k = int(np.searchsorted(later, e))
            if k < later.size:
                add("thread_idle", loc, int(time[loc][later[k]]) - int(time[loc][e]))
    # GPU idle: on an accelerator stream, the gaps between its top-level Enter/Leave
    defs = trace.definitions
    devices = [loc for loc in trace.events
               if loc in defs.locations and defs.locations[loc].is_device]
    for loc in devices:
        ev = trace.events[loc]
        sel = np.flatnonzero((ev.kind == ENTER) | (ev.kind == LEAVE))
        if not sel.size:
            continue
        step = np.where(ev.kind[sel] == ENTER, 1, -1)
        depth = np.cumsum(step)
        opens = sel[(step == 1) & (depth == 1)]
        closes = sel[(step == -1) & (depth == 0)]
        n = min(len(opens) - 1, len(closes))
        for k in range(max(n, 0)):
            add("gpu_idle", loc, int(ev.time[opens[k + 1]]) - int(ev.time[closes[k]]))
    out.present = bool(threads.syncs or threads.barriers or devices)
    out.by_location = {s: dict(v) for s, v in out.by_location.items()}
    return out


__all__ = ["HYBRID_LABELS", "HYBRID_STATES", "HybridWaits", "hybrid_waits"]
