"""EZTrace's Pthread calls as thread dependencies (docs/eztrace.md, docs/compensation.md
"Threads").

EZTrace's ``pthread`` module writes no Thread* record for a mutex, a spinlock, a
barrier, a create or a join: each call is the Enter and Leave of a region named
after it, the object's address on the Enter and a trylock's return value on the
Leave (both read into the ``request`` column, :mod:`compensate.formats.otf2.
syncobjects`). Within one process (regions named as below):

* ``lock``: per lock (process, address; mutexes and spinlocks alike) its calls in
  measured time order. Acquisition ``k`` is the Leave of the ``k``-th
  ``pthread_mutex_lock`` / ``pthread_spin_lock`` call, or of a trylock that
  returned 0 (its Leave's ``ret``; a trylock that returned anything else acquired
  nothing); its release is the Enter of the holder's next ``*_unlock`` call (the
  latest record known to precede the release). Acquisition ``k`` waits for
  release ``k - 1``. A lock whose calls do not alternate acquisition, release on
  the same location (a recursive or nested lock, an unlock with no lock, calls
  nesting inside each other, a trylock with no return value) is left local whole:
  its calls are counted in :attr:`~compensate.matching.threads.ThreadDeps.
  local_locks`, never guessed.
* ``create`` and ``end``: EZTrace's ThreadBegin/ThreadEnd carry no creator (their
  thread contingent is UNDEFINED; only such records are used here) and
  ``pthread_create``/``pthread_join`` no thread, so which call created or joined
  which thread is unknown. What is known without guessing is an order statistic:
  every thread but the process's first begins after the Enter of the
  ``pthread_create`` that made it, so the ``k``-th ThreadBegin after the process's
  first ``pthread_create`` Enter comes after the ``k``-th ``pthread_create`` Enter
  (a thread that began before the first create, the process's first thread among
  them, was not made by a traced call); every ``pthread_join`` returns after its own
  thread's end, so the ``k``-th join Leave comes after the ``k``-th ThreadEnd of
  those threads. These are the links made (a thread created and a
  thread joined first in time are paired, which is exact when threads start and
  end in the order they are created and joined, and a weaker true bound
  otherwise). A process where the counts do not fit (threads created by calls not
  traced: more ThreadBegins than creates; more joins than ends) or where the
  measured times break the statistic is left local and counted in ``unmatched``.
* ``barrier``: per ``pthread_barrier_wait`` object (process, address), the
  ``b``-th call of every location that waits on it is instance ``b``, an n-to-n
  among them (:attr:`ThreadDeps.barriers`), if every such location calls it the
  same number of times and in every instance the last Enter comes before the
  first Leave in measured time (what a barrier does); otherwise local, counted in
  ``unmatched``. (A barrier initialised for fewer threads than wait on it would
  need its count, which the trace does not hold.)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from compensate.formats.fields import field_of
from compensate.matching.collectives import N_TO_N, Instance
from compensate.model import ENTER, KIND_CODE, LEAVE, NONE, Events, Trace

LOCKS = ("pthread_mutex_lock", "pthread_spin_lock")
TRYLOCKS = ("pthread_mutex_trylock", "pthread_spin_trylock")
UNLOCKS = ("pthread_mutex_unlock", "pthread_spin_unlock")
CREATE, JOIN, BARRIER = "pthread_create", "pthread_join", "pthread_barrier_wait"
#: every region name this module reads (and the stream cutter looks for)
CALLS = (*LOCKS, *TRYLOCKS, *UNLOCKS, CREATE, JOIN, BARRIER)
#: the ``op`` of a Pthread barrier's :class:`Instance` (OpenMP barriers: -1): no
#: team, its exits timed per member (:mod:`compensate.engine.kinds.threads`)
BARRIER_OP = -2
_BEGIN, _END = KIND_CODE["ThreadBegin"], KIND_CODE["ThreadEnd"]
_CREATED, _WAITED = KIND_CODE["ThreadCreate"], KIND_CODE["ThreadWait"]


@dataclass
class PthreadLinks:
    """What :func:`match_pthreads` found: links as ``(kind, waiting record, sending
    record)`` with records ``(location, index)``, barrier instances, and how many
    records it left local."""

    links: list[tuple[str, tuple[int, int], tuple[int, int]]] = field(default_factory=list)
    barriers: list[Instance] = field(default_factory=list)
    #: calls of locks left local whole (not alternating, nested, unknown trylock)
    local_locks: int = 0
    unmatched: int = 0


def _calls(trace: Trace, names: dict[int, str]) -> dict[int, list[tuple]]:
    """Per location, its calls of :data:`CALLS` regions as ``(name, Enter index,
    Leave index, Enter's request, Leave's request)``, in order; a call whose Leave
    does not close it directly (another call inside) has Leave index -1."""
    out: dict[int, list[tuple]] = {}
    regions = np.array(sorted(names), dtype=np.int64)
    for loc, ev in trace.events.items():
        idx = np.flatnonzero(np.isin(ev.kind, (ENTER, LEAVE)) & np.isin(ev.region, regions))
        if not idx.size:
            continue
        calls, open_ = [], []
        for i in idx.tolist():
            r = int(ev.region[i])
            if int(ev.kind[i]) == ENTER:
                open_.append((r, i))
            elif open_ and open_[-1][0] == r:
                _, e = open_.pop()
                nested = bool(open_)
                calls.append((names[r], e, -1 if nested else i, int(ev.request[e]),
                              int(ev.request[i])))
        calls.extend((names[r], e, -1, int(ev.request[e]), NONE) for r, e in open_)
        out[loc] = sorted(calls, key=lambda c: c[1])
    return out


def match_pthreads(trace: Trace) -> PthreadLinks:
    """The Pthread dependencies of ``trace`` (module docstring)."""
    found = PthreadLinks()
    names = {rid: name for rid, name in trace.definitions.regions.items() if name in CALLS}
    if not names:
        return found
    calls = _calls(trace, names)
    process_of = trace.definitions.process_of
    by_proc: dict[int, dict[int, list[tuple]]] = defaultdict(dict)
    for loc, c in calls.items():
        by_proc[process_of(loc)][loc] = c
    for proc, per_loc in by_proc.items():
        _locks(trace, per_loc, found)
        _create_join(trace, proc, per_loc, found)
        _barriers(trace, per_loc, found)
    return found


def _locks(trace: Trace, per_loc: dict[int, list[tuple]], found: PthreadLinks) -> None:
    """Lock links of one process's calls (module docstring)."""
    # address -> [(time, order, location, index, is acquisition)]
    steps: dict[int, list[tuple]] = defaultdict(list)
    broken: set[int] = set()
    for loc, calls in per_loc.items():
        t = trace.events[loc].time
        for name, e, lv, addr, ret in calls:
            if name not in LOCKS + TRYLOCKS + UNLOCKS or addr == NONE:
                continue
            if lv < 0 or (name in TRYLOCKS and ret == NONE):
                broken.add(addr)
            elif name in UNLOCKS:
                steps[addr].append((int(t[e]), 1, loc, e, False))
            elif name in LOCKS or ret == 0:
                steps[addr].append((int(t[lv]), 0, loc, lv, True))
    for addr, seq in steps.items():
        seq.sort()
        if addr in broken or not _alternates(seq):
            found.local_locks += len(seq)
            continue
        for k in range(2, len(seq), 2):
            (_, _, r_loc, r, _), (_, _, a_loc, a, _) = seq[k - 1], seq[k]
            if r_loc != a_loc:
                found.links.append(("lock", (a_loc, a), (r_loc, r)))


def _alternates(seq: list[tuple]) -> bool:
    """Whether ``seq`` (time order) is acquisition, release by the same location,
    acquisition, ... with every time strictly after the one before."""
    for k, (t, _, loc, _, acq) in enumerate(seq):
        if acq != (k % 2 == 0):
            return False
        if k and (t <= seq[k - 1][0] or (not acq and loc != seq[k - 1][2])):
            return False
    return True


def _create_join(trace: Trace, proc: int, per_loc: dict[int, list[tuple]],
                 found: PthreadLinks) -> None:
    """Order-statistic create and end links of one process (module docstring)."""
    creates = [(int(trace.events[loc].time[e]), loc, e) for loc, calls in per_loc.items()
               for name, e, _, _, _ in calls if name == CREATE]
    joins = [(int(trace.events[loc].time[lv]), loc, lv) for loc, calls in per_loc.items()
             for name, _, lv, _, _ in calls if name == JOIN and lv >= 0]
    if not creates and not joins:
        return
    begins, ends = [], []
    for loc, ev in trace.events.items():
        if trace.definitions.process_of(loc) != proc:
            continue
        for i in np.flatnonzero((ev.kind == _BEGIN) | (ev.kind == _END)).tolist():
            if field_of(ev.payload[i], "thread_contingent") is None:  # EZTrace's
                (begins if ev.kind[i] == _BEGIN else ends).append((int(ev.time[i]), loc, i))
    if not begins:  # threads with a creator (ThreadCreate records): threads.py links them
        return
    # the threads a traced call created begin after the process's first create (its
    # first thread, the one that creates, began before: left out, as in a stream
    # segment that starts after its begin)
    first = min(t for t, _, _ in creates) if creates else None
    created = sorted(b for b in begins if first is not None and b[0] > first)
    mine = {loc for _, loc, _ in created}
    ends = sorted(x for x in ends if x[1] in mine)
    _statistic("create", sorted(creates), created, len(created) == len(creates), found)
    _statistic("end", ends, sorted(joins), len(joins) <= len(ends), found)


def _statistic(kind: str, senders: list[tuple], waiters: list[tuple], fits: bool,
               found: PthreadLinks) -> None:
    """``waiters[k]`` after ``senders[k]`` for every k, if ``fits`` and the measured
    times agree; else every waiter counted as unmatched."""
    if not waiters:
        return
    if not fits or any(w[0] <= s[0] for s, w in zip(senders, waiters, strict=False)):
        found.unmatched += len(waiters)
        return
    for (_, s_loc, s), (_, w_loc, w) in zip(senders, waiters, strict=False):
        if s_loc != w_loc:
            found.links.append((kind, (w_loc, w), (s_loc, s)))


def _barriers(trace: Trace, per_loc: dict[int, list[tuple]], found: PthreadLinks) -> None:
    """One n-to-n per barrier instance of one process (module docstring)."""
    waits: dict[int, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for loc, calls in per_loc.items():
        for name, e, lv, addr, _ in calls:
            if name == BARRIER and addr != NONE:
                waits[addr][loc].append((e, lv))
    for members in waits.values():
        locs = sorted(members)
        n = {len(members[loc]) for loc in locs}
        total = sum(len(members[loc]) for loc in locs)
        if len(locs) < 2 or len(n) != 1 or any(lv < 0 for loc in locs for _, lv in members[loc]):
            found.unmatched += total if len(locs) > 1 else 0
            continue
        insts = []
        for b in range(n.pop()):
            enter = [members[loc][b][0] for loc in locs]
            leave = [members[loc][b][1] for loc in locs]
            last_in = max(int(trace.events[loc].time[e]) for loc, e in zip(locs, enter,
                                                                           strict=True))
            first_out = min(int(trace.events[loc].time[lv]) for loc, lv in zip(locs, leave,
                                                                               strict=True))
            if last_in >= first_out:
                insts = None
                break
            insts.append(Instance(comm=-1, op=BARRIER_OP, cls=N_TO_N, known_op=True, root=-1,
                                  locs=locs, begin_idx=enter, end_idx=leave,
                                  size_sent=[0] * len(locs), size_recv=[0] * len(locs)))
        if insts is None:
            found.unmatched += total
        else:
            found.barriers.extend(insts)


def cut_regions(regions: dict[int, str]) -> tuple[np.ndarray, np.ndarray] | None:
    """For the stream cutter (:mod:`compensate.pipeline.cuts`): the region ids of the
    lock and barrier calls and of ``pthread_create``/``pthread_join`` among
    ``regions`` (id -> name), None if there are none."""
    objects = [r for r, n in regions.items() if n in CALLS and n not in (CREATE, JOIN)]
    spawn = [r for r, n in regions.items() if n in (CREATE, JOIN)]
    return (np.array(objects, np.int64), np.array(spawn, np.int64)) if objects or spawn \
        else None


def cut_steps(ev: Events, regions: tuple[np.ndarray, np.ndarray], plus: np.ndarray,
              minus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cutter's busy steps ``plus``/``minus`` (masks over ``ev``) with these
    calls': their links span the whole run and no record closes them, so each opens a
    span never closed (no cut after it) — a lock or barrier call's Enter with its
    object (EZTrace's; Score-P's have none), a ``pthread_create``/``_join`` Enter,
    which a ThreadCreate/ThreadWait closes again where the tracer writes one inside
    the call (Score-P; EZTrace writes none) (called only for traces that define
    such regions)."""
    enter = ev.kind == ENTER
    plus = plus | (enter & (ev.request >= 0) & np.isin(ev.region, regions[0])) \
        | (enter & np.isin(ev.region, regions[1]))
    # (a ThreadBegin/ThreadEnd with no creator opens and closes nothing: the cutter's
    # own rule, compensate.pipeline.cuts)
    return plus, minus | (ev.kind == _CREATED) | (ev.kind == _WAITED)


__all__ = ["BARRIER_OP", "CALLS", "PthreadLinks", "cut_regions", "cut_steps",
           "match_pthreads"]
