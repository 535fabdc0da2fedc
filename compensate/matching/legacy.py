"""OpenMP fork/join in the legacy records of older Score-P (OTF2 1.0/1.1):
``OmpFork`` / ``OmpJoin`` (docs/compensation.md, "Threads", legacy records).

The legacy records were written only by the master thread: ``OmpFork`` (with the
number of requested threads) when it forks a team, ``OmpJoin`` when the team is
joined and only the master continues. There are no ThreadTeamBegin/End records
and no team communicator: the members show their part of the team as the
parallel region itself (OPARI2's ``!$omp parallel``), which every member,
master included, enters when the team begins and leaves at its end. So:

* the team's *parallel region* is the region of the master's first ``Enter``
  after its ``OmpFork``; the fork's *join* is the master's first ``OmpJoin`` after
  the ``Leave`` of that region at the same depth;
* a *member* is another CPU thread of the same process that enters that region
  at its top level (not nested in an open instance of it) no earlier than the
  fork (measured: the threads of one process share one clock) and no later than
  the join; of several forks of that region, the latest before the ``Enter``;
* ``fork``: the ``OmpFork`` -> the member's ``Enter`` of the parallel region;
  ``join``: every member's matching ``Leave`` -> the ``OmpJoin``;
* OpenMP barriers (:data:`compensate.model.BARRIER_ROLES`, paradigm OPENMP) that
  every member, master included, enters inside its parallel region instance are
  that team's barriers, the b-th of each member one n-to-n, as with team records.

The legacy lock records are matched with the others
(:func:`compensate.matching.threads._locks`), the legacy task records with the
task ones (:mod:`compensate.matching.tasks`, keyed by task id).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict

import numpy as np

from compensate.matching.threads import ThreadDeps, _barriers, link_team
from compensate.model import (
    BARRIER_ROLES,
    ENTER,
    KIND_CODE,
    LEAVE,
    THREAD_BARRIER_PARADIGMS,
    Trace,
)

OMP_FORK, OMP_JOIN = KIND_CODE["OmpFork"], KIND_CODE["OmpJoin"]


def match_legacy(trace: Trace, deps: ThreadDeps) -> None:
    """Add the fork, join and barrier dependencies of legacy OmpFork/OmpJoin teams
    to ``deps`` (module docstring)."""
    masters = [loc for loc, ev in trace.events.items() if np.any(ev.kind == OMP_FORK)]
    if not masters:
        return
    defs = trace.definitions
    barrier_regions = {rid for rid, (role, paradigm) in defs.region_roles.items()
                       if role in BARRIER_ROLES and paradigm in THREAD_BARRIER_PARADIGMS}
    # (process, region) -> [(fork time, master, fork, join time, join, enter, leave)]
    forks: dict[tuple, list] = defaultdict(list)
    for loc in masters:
        for f in _forks(trace, loc):
            forks[(defs.process_of(loc), f[0])].append(f[1:] + (loc,))
    for v in forks.values():
        v.sort()
    fork_times = {key: [f[0] for f in v] for key, v in forks.items()}
    regions = {r for _, r in forks}
    # instance -> {member: (enter, leave)}; the master's own span included
    teams: dict[tuple, dict[int, tuple[int, int]]] = defaultdict(dict)
    for (proc, region), items in forks.items():
        for ft, _fork, _jt, _join, enter, leave, m in items:
            teams[(proc, region, ft, m)][m] = (enter, leave)
    for loc, ev in trace.events.items():
        if loc not in defs.locations or not defs.locations[loc].is_cpu:
            continue
        proc = defs.process_of(loc)
        for region, enter, leave in _spans(ev, regions):
            items = forks.get((proc, region), [])
            t = int(ev.time[enter])
            j = bisect_right(fork_times[(proc, region)], t) - 1 if items else -1
            while j >= 0 and items[j][6] == loc:  # its own fork (a nested team's master)
                j -= 1
            best = items[j] if j >= 0 else None
            if best is None or t > best[2]:
                continue
            team = teams[(proc, region, best[0], best[6])]
            if loc not in team:
                team[loc] = (enter, leave)
    for (proc, region, ft, m), members in teams.items():
        fork, join = next((f[1], f[3]) for f in forks[(proc, region)]
                          if f[0] == ft and f[6] == m)
        link_team(deps, members, m, fork, join)
        entries = {loc: [b, e, -1, -1, _barrier_spans(trace.events[loc], b, e, barrier_regions)]
                   for loc, (b, e) in members.items()}
        _barriers(-1, entries, deps)


def _forks(trace: Trace, loc: int) -> list[tuple]:
    """(region, fork time, fork, join time, join, enter, leave) per OmpFork of
    ``loc`` whose parallel region is entered (join -1 if there is none)."""
    ev = trace.events[loc]
    k = ev.kind
    enters = np.flatnonzero(k == ENTER)
    joins = np.flatnonzero(k == OMP_JOIN)
    by_region: dict[int, np.ndarray] = {}
    out = []
    for f in np.flatnonzero(k == OMP_FORK).tolist():
        e = int(np.searchsorted(enters, f, side="right"))
        if e == len(enters):
            continue
        enter = int(enters[e])
        region = int(ev.region[enter])
        if region not in by_region:
            by_region[region] = np.flatnonzero(((k == ENTER) | (k == LEAVE))
                                               & (ev.region == region))
        leave = _leave_of(ev, by_region[region], enter)
        join = -1
        if leave >= 0:
            j = int(np.searchsorted(joins, leave, side="right"))
            join = int(joins[j]) if j < len(joins) else -1
        out.append((region, int(ev.time[f]), f,
                    int(ev.time[join]) if join >= 0 else int(ev.time[-1]), join,
                    enter, leave))
    return out


def _leave_of(ev, sel: np.ndarray, enter: int) -> int:
    """The Leave that closes the Enter at ``enter`` (same region, same depth; ``sel``
    the region's Enter/Leave positions), -1."""
    depth = 0
    for i in sel[np.searchsorted(sel, enter):].tolist():
        depth += 1 if ev.kind[i] == ENTER else -1
        if depth == 0:
            return i
    return -1


def _spans(ev, regions: set) -> list[tuple[int, int, int]]:
    """(region, Enter, Leave or -1) of each top-level instance of ``regions``."""
    sel = np.flatnonzero(((ev.kind == ENTER) | (ev.kind == LEAVE))
                         & np.isin(ev.region, list(regions)))
    out = []
    depth: dict[int, int] = defaultdict(int)
    open_: dict[int, int] = {}
    for i in sel.tolist():
        r = int(ev.region[i])
        if ev.kind[i] == ENTER:
            if depth[r] == 0:
                open_[r] = i
            depth[r] += 1
        elif depth[r] > 0:
            depth[r] -= 1
            if depth[r] == 0:
                out.append((r, open_.pop(r), i))
    out += [(r, i, -1) for r, i in open_.items()]
    return out


def _barrier_spans(ev, begin: int, end: int, regions: set) -> list[tuple[int, int]]:
    """(Enter, Leave) of the barrier regions between ``begin`` and ``end``."""
    if not regions:
        return []
    stop = end if end >= 0 else len(ev.kind)
    k, r = ev.kind[begin + 1:stop], ev.region[begin + 1:stop]
    sel = begin + 1 + np.flatnonzero(((k == ENTER) | (k == LEAVE)) & np.isin(r, list(regions)))
    out, open_ = [], []
    for i in sel.tolist():
        if ev.kind[i] == ENTER:
            open_.append(i)
        elif open_:
            out.append((open_.pop(), i))
    return out


__all__ = ["match_legacy"]
