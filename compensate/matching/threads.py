"""Thread synchronisation: the records one CPU thread waits for on another
(docs/compensation.md, "Threads"; issue #17).

Each dependency is a :class:`ThreadSync`: a record on one location (the
*waiter*) that cannot happen before one or more records on other locations of
the same process (the *senders*), like a zero-byte message:

* ``fork``: OpenMP ThreadFork of the master -> each other member's
  ThreadTeamBegin. The team is the ThreadTeamBegin's thread-team communicator
  within one process (its members are the locations of that process that begin
  it; EZTrace numbers every rank's teams 1, 2, ..., so the same id in two
  processes is two teams); the k-th ThreadTeamBegin of every member on that
  communicator is team instance k; its master is the member whose
  ThreadTeamBegin follows a ThreadFork on its own location (the fork it made).
* ``join``: each other member's ThreadTeamEnd of that instance -> the master's
  ThreadJoin (the first one after the master's ThreadTeamEnd).
* ``lock``: ThreadReleaseLock of acquisition ``k - 1`` -> ThreadAcquireLock of
  acquisition ``k`` of the same lock (model, lock id) within one process
  (OpenMP locks and critical sections, Pthread mutexes alike; the legacy
  OmpReleaseLock / OmpAcquireLock of older Score-P carry the same lock id and
  acquisition order, model OpenMP). A link whose release the other edges already
  order before the acquisition (handed from one parallel region to the next, across
  a barrier, a Pthread join/create) is marked ``implied``
  (:mod:`compensate.matching.lock_order`).
* ``barrier``: an OpenMP barrier (a region of role BARRIER or IMPLICIT_BARRIER
  and paradigm OPENMP, :data:`compensate.model.BARRIER_ROLES`) entered by the
  members of a team instance: the b-th barrier region each member enters inside
  that instance (not inside a nested team) is one n-to-n among the members, like
  an MPI_Barrier (:class:`~compensate.matching.collectives.Instance` of class
  n-to-n, kept in :attr:`ThreadDeps.barriers`): nobody leaves it before the last
  member entered. Members that disagree on the number of barriers leave the
  instance's barriers local (counted as unmatched).
* ``create``: ThreadCreate -> the ThreadBegin with the same thread contingent and
  sequence count; ``end``: ThreadEnd -> the ThreadWait with the same pair
  (Pthreads: create/join). A record whose thread contingent is UNDEFINED (EZTrace
  writes it so for each thread's ThreadBegin/ThreadEnd) links to nothing.
* EZTrace's Pthread calls (Enter/Leave of ``pthread_mutex_lock`` ... with the
  object's address): ``lock`` links from an unlock's Enter to the next
  acquisition's Leave, ``create``/``end`` links by order statistic and barrier
  n-to-n instances (:mod:`compensate.matching.pthreads`).
* ``task``: a task's create -> its first switch on another thread; ``taskwait``:
  the completes of the tasks a barrier or taskwait waited for -> its Leave
  (:mod:`compensate.matching.tasks`, added to these by the matcher).

Dependencies within one location are ordered by the location itself and left
out. The fields are read from the records' payloads through the format layer
(:func:`compensate.formats.fields.field_of`); thread records are few, so
this is off the hot path. A record whose partner is missing (a trace cut short,
a stream segment) is left local and counted in :attr:`ThreadDeps.unmatched`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compensate.formats.fields import field_of
from compensate.matching.collectives import N_TO_N, Instance
from compensate.matching.lock_order import mark_implied
from compensate.matching.pthreads import match_pthreads
from compensate.model import (
    BARRIER_ROLES,
    ENTER,
    KIND_CODE,
    LEAVE,
    THREAD_BARRIER_PARADIGMS,
    Trace,
    TraceError,
    kind_table,
)

FORK, JOIN = KIND_CODE["ThreadFork"], KIND_CODE["ThreadJoin"]
TEAM_BEGIN, TEAM_END = KIND_CODE["ThreadTeamBegin"], KIND_CODE["ThreadTeamEnd"]
ACQUIRE, RELEASE = KIND_CODE["ThreadAcquireLock"], KIND_CODE["ThreadReleaseLock"]
CREATE, BEGIN = KIND_CODE["ThreadCreate"], KIND_CODE["ThreadBegin"]
END, WAIT = KIND_CODE["ThreadEnd"], KIND_CODE["ThreadWait"]
#: the legacy lock records of older Score-P (OTF2 1.0/1.1): OpenMP locks, no model field
OMP_ACQUIRE, OMP_RELEASE = KIND_CODE["OmpAcquireLock"], KIND_CODE["OmpReleaseLock"]
THREAD_KINDS = (FORK, JOIN, TEAM_BEGIN, TEAM_END, ACQUIRE, RELEASE, CREATE, BEGIN, END, WAIT,
                OMP_ACQUIRE, OMP_RELEASE)
_THREAD, _CALL_EDGES = kind_table(THREAD_KINDS), kind_table(ENTER, LEAVE)

#: dependency kinds, in the order of :attr:`ThreadDeps.counts`
DEP_KINDS = ("fork", "join", "lock", "create", "end", "task", "taskwait")


@dataclass
class ThreadSync:
    """One waiting record and the records it waits for: ``recv`` and ``sends`` are
    ``(location id, record index)``; ``kind`` one of :data:`DEP_KINDS`. ``implied``:
    a lock link that the other thread edges already order
    (:mod:`compensate.matching.lock_order`), timed as an ordering only."""

    kind: str
    recv: tuple[int, int]
    sends: list[tuple[int, int]]
    implied: bool = field(default=False, kw_only=True)


@dataclass
class ThreadDeps:
    """Every thread dependency of a trace, and how many records had no partner."""

    syncs: list[ThreadSync] = field(default_factory=list)
    #: OpenMP barriers, one n-to-n instance each (``comm`` the team, ``op`` -1)
    barriers: list[Instance] = field(default_factory=list)
    unmatched: int = 0
    #: calls of Pthread locks left local whole (:mod:`compensate.matching.pthreads`)
    local_locks: int = 0

    def counts(self) -> dict:
        out = {k: 0 for k in DEP_KINDS}
        for s in self.syncs:
            out[s.kind] += 1
        out["barrier"] = len(self.barriers)
        out["unmatched"] = self.unmatched
        out["local_locks"] = self.local_locks
        return out


def _need(trace: Trace, loc: int, i: int, name: str) -> Any:
    v = field_of(trace.events[loc].payload[i], name)
    if v is None:
        kind = trace.events[loc].kind[i]
        from compensate.model import KIND_NAMES
        raise TraceError(f"{KIND_NAMES[kind]} without its {name} field",
                         source=trace.source, location=loc, index=i)
    return v


def match_threads(trace: Trace) -> ThreadDeps:
    """The thread dependencies of ``trace`` (module docstring)."""
    deps = ThreadDeps()
    defs = trace.definitions
    # per location, its thread records in order
    barrier_regions = [rid for rid, (role, paradigm) in defs.region_roles.items()
                       if role in BARRIER_ROLES and paradigm in THREAD_BARRIER_PARADIGMS]
    recs = {loc: np.flatnonzero(_THREAD.take(ev.kind) | (
                _CALL_EDGES.take(ev.kind) & np.isin(ev.region, barrier_regions))
            if barrier_regions else _THREAD.take(ev.kind)).tolist()
            for loc, ev in trace.events.items()}
    recs = {loc: r for loc, r in recs.items() if r}
    _pthreads(trace, deps)
    if not recs:
        mark_implied(trace, deps)
        return deps
    _fork_join(trace, recs, deps)
    recs = {loc: [i for i in r if trace.events[loc].kind[i] in THREAD_KINDS]
            for loc, r in recs.items()}
    _locks(trace, recs, deps, defs.process_of)
    _create_end(trace, recs, deps)
    mark_implied(trace, deps)
    return deps


def _pthreads(trace: Trace, deps: ThreadDeps) -> None:
    """EZTrace's Pthread calls (:mod:`compensate.matching.pthreads`)."""
    found = match_pthreads(trace)
    deps.syncs.extend(ThreadSync(kind, recv, [send]) for kind, recv, send in found.links)
    deps.barriers.extend(found.barriers)
    deps.unmatched += found.unmatched
    deps.local_locks += found.local_locks


def _fork_join(trace: Trace, recs: dict, deps: ThreadDeps) -> None:
    # ((process, comm), location) -> [(TeamBegin, TeamEnd, fork or -1, join or -1, barriers)] in
    # order; barriers: [(Enter, Leave)] of the barrier regions directly in the team
    teams: dict[tuple[int, int], dict[int, list[list]]] = defaultdict(lambda: defaultdict(list))
    for loc, idx in recs.items():
        ev = trace.events[loc]
        fork = -1  # a ThreadFork not yet followed by its team's begin
        open_: list[list] = []  # teams entered, innermost last
        wants_join: list[list] = []
        in_barrier: list[int] = []  # barrier Enters not yet left
        for i in idx:
            k = int(ev.kind[i])
            if k == ENTER:
                in_barrier.append(i)
            elif k == LEAVE:
                if in_barrier:
                    enter = in_barrier.pop()
                    if open_ and open_[-1][0] < enter:
                        open_[-1][4].append((enter, i))
            elif k == FORK:
                fork = i
            elif k == TEAM_BEGIN:
                comm = field_of(ev.payload[i], "thread_team")
                entry = [i, -1, fork, -1, []]
                fork = -1
                if comm is None:  # UNDEFINED (EZTrace's OMPT module): no team to join
                    deps.unmatched += 1
                else:
                    teams[(trace.definitions.process_of(loc), comm)][loc].append(entry)
                open_.append(entry)
            elif k == TEAM_END:
                if open_:
                    entry = open_.pop()
                    entry[1] = i
                    if entry[2] >= 0:
                        wants_join.append(entry)
            elif k == JOIN and wants_join:
                wants_join.pop()[3] = i
    for (_process, comm), per_loc in teams.items():
        counts = {len(v) for v in per_loc.values()}
        if len(counts) != 1:  # members disagree on the number of team instances
            deps.unmatched += sum(len(v) for v in per_loc.values())
            continue
        for k in range(counts.pop()):
            members = {loc: v[k] for loc, v in per_loc.items()}
            _barriers(comm, members, deps)
            masters = [loc for loc, e in members.items() if e[2] >= 0]
            if len(masters) != 1:
                deps.unmatched += len(members) - 1
                continue
            m = masters[0]
            link_team(deps, members, m, members[m][2], members[m][3])


def link_team(deps: ThreadDeps, members: dict, master: int, fork: int, join: int) -> None:
    """R8's fork and join links of one team: the master's ``fork`` record -> each
    other member's first record of the team (``members[loc][0]``), each member's
    last (``members[loc][1]``, -1 if none) -> the master's ``join`` (-1 if none); a
    team with members but no join or no ends counts as unmatched."""
    others = [loc for loc in members if loc != master]
    for loc in others:
        deps.syncs.append(ThreadSync("fork", (loc, members[loc][0]), [(master, fork)]))
    ends = [(loc, members[loc][1]) for loc in others if members[loc][1] >= 0]
    if join >= 0 and ends:
        deps.syncs.append(ThreadSync("join", (master, join), ends))
    elif others:
        deps.unmatched += 1


def _barriers(comm: int, members: dict[int, list], deps: ThreadDeps) -> None:
    """The b-th barrier of every member of one team instance: one n-to-n each."""
    if len(members) < 2:
        return
    locs = sorted(members)
    counts = {len(members[loc][4]) for loc in locs}
    if len(counts) != 1:
        deps.unmatched += sum(len(members[loc][4]) for loc in locs)
        return
    n = len(locs)
    for b in range(counts.pop()):
        deps.barriers.append(Instance(
            comm=comm, op=-1, cls=N_TO_N, known_op=True, root=-1, locs=locs,
            begin_idx=[members[loc][4][b][0] for loc in locs],
            end_idx=[members[loc][4][b][1] for loc in locs],
            size_sent=[0] * n, size_recv=[0] * n))


def _locks(trace: Trace, recs: dict, deps: ThreadDeps, process_of) -> None:
    releases: dict[tuple, tuple[int, int]] = {}
    acquires: list[tuple[tuple, int, int]] = []
    for loc, idx in recs.items():
        ev = trace.events[loc]
        proc = process_of(loc)
        for i in idx:
            k = int(ev.kind[i])
            if k not in (ACQUIRE, RELEASE, OMP_ACQUIRE, OMP_RELEASE):
                continue
            model = "OPENMP" if k in (OMP_ACQUIRE, OMP_RELEASE) else \
                _need(trace, loc, i, "model")
            key = (proc, model, _need(trace, loc, i, "lock_id"))
            order = int(_need(trace, loc, i, "acquisition_order"))
            if k in (RELEASE, OMP_RELEASE):
                releases[key + (order,)] = (loc, i)
            else:
                acquires.append((key + (order - 1,), loc, i))
    for key, loc, i in acquires:
        rel = releases.get(key)
        if rel is None:
            deps.unmatched += int(key[-1] >= 1)  # the first acquisition waits for nobody
        elif rel[0] != loc:
            deps.syncs.append(ThreadSync("lock", (loc, i), [rel]))


def _create_end(trace: Trace, recs: dict, deps: ThreadDeps) -> None:
    senders: dict[tuple, tuple[int, int]] = {}
    waiters: list[tuple[tuple, int, int]] = []
    pair = {BEGIN: CREATE, WAIT: END}
    for loc, idx in recs.items():
        ev = trace.events[loc]
        for i in idx:
            k = int(ev.kind[i])
            if k not in (CREATE, BEGIN, END, WAIT):
                continue
            contingent = field_of(ev.payload[i], "thread_contingent")
            if contingent is None:  # UNDEFINED (OTF2 allows it): a thread of no creator
                continue
            key = (contingent, int(_need(trace, loc, i, "sequence_count")))
            if k in pair:
                waiters.append(((pair[k],) + key, loc, i))
            else:
                senders[(k,) + key] = (loc, i)
    for key, loc, i in waiters:
        s = senders.get(key)
        if s is None:
            deps.unmatched += 1
        elif s[0] != loc:
            deps.syncs.append(ThreadSync("create" if key[0] == CREATE else "end",
                                         (loc, i), [s]))


__all__ = ["DEP_KINDS", "ThreadDeps", "ThreadSync", "match_threads"]
