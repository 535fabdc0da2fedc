"""Happened-before checks (docs/design.md R7) on a trace about to be written.

Run on every output, independently of how the times were computed: a violation
is a bug in the engine, never something to write out. :data:`CHECKS` is the table
of invariants, one per dependency family; what they find is a
:class:`~compensate.verify.result.Verification`.
"""

from __future__ import annotations

import numpy as np

from compensate.matching import Matching, needed_members
from compensate.matching.collectives import N_TO_ONE, ONE_TO_N
from compensate.model import Trace
from compensate.verify.coverage import carried_local_only
from compensate.verify.partitioned import verify_partitioned
from compensate.verify.result import COUNTERS, COVERS, Verification, combine, note
from compensate.verify.rma import verify_rma
from compensate.verify.tasks import task_violations

__all__ = ["CHECKS", "COUNTERS", "COVERS", "Verification", "combine", "verify"]


def verify(trace: Trace, matching: Matching, measured: Trace | None = None,
           skip: dict[int, int] | None = None, own: set[int] | None = None) -> Verification:
    """Count happened-before violations in ``trace`` given its ``matching``, and list
    the records carried as local only. ``measured``: the input trace (the same
    records with their measured times), which the METRIC check needs; ``skip``:
    leading context records per location (a stream segment) not to count; ``own``:
    check only the dependencies whose dependent end (the record that must come
    after) is on one of these locations, and count only their records (a rank of the
    distributed run; ``trace`` then needs the right times only of those locations and
    of the records their dependencies read: compensate/parallel/verification.py)."""
    v = Verification(own=own)
    for k, check in enumerate(CHECKS):
        v._check = k
        check(trace, matching, v)
    if measured is not None:
        v._check = len(CHECKS)
        _verify_metrics(trace, measured, v)
    t = matching.table
    tied = {}
    if len(t) and t.probe.any():
        rows = np.flatnonzero(t.probe)
        for li in np.unique(t.recv_li[rows]).tolist():
            tied[t.loc_ids[li]] = t.recv_idx[rows[t.recv_li[rows] == li]]
    v.carried_local_only = carried_local_only(
        trace if own is None else Trace(trace.definitions, {
            loc: ev for loc, ev in trace.events.items() if loc in own}, trace.source), skip,
        tied)
    return v


def _verify_order(trace: Trace, matching: Matching, v: Verification) -> None:
    """Timestamps non-decreasing per location, in the original record order."""
    for n, (loc, ev) in enumerate(trace.events.items()):
        if len(ev) > 1 and v.owns(loc):
            bad = np.flatnonzero(np.diff(ev.time) < 0)
            v.order += int(bad.size)
            if bad.size:
                note(v, f"location {loc}, record {int(bad[0]) + 1}: earlier than its "
                         f"predecessor", (n,))


def _verify_collectives(trace: Trace, matching: Matching, v: Verification) -> None:
    """No collective exit before an enter it waits for (by class: every enter for
    n-to-n and handle creation, and for a handle free that synchronised in the
    measurement; the root's for 1-to-n, ranks up to i for scans), strictly after it
    for implied messages (1-to-n, n-to-1) and nonblocking completions (an Ibcast
    member's completion after the root's request, an Igather root's after every
    member's request); an exit that waits is after its own enter."""
    t = {loc: ev.time for loc, ev in trace.events.items()}
    for n, inst in enumerate(matching.instances):
        if v.own is not None and not any(map(v.owns, inst.locs)):
            continue
        begins = [t[loc][b] for loc, b in zip(inst.locs, inst.begin_idx, strict=True)]
        ends = [t[loc][e] if v.owns(loc) else 0  # only the exits this checks are read
                for loc, e in zip(inst.locs, inst.end_idx, strict=True)]
        # (exit member, enter member) that must order: an exit against the latest
        # enter it waits for; n-to-1 roots and nonblocking completions against each
        # (the same pairs, hence the same violation counts, as one branch per class)
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
        # n-to-n and scans: no exit before the enters it waits for, and after its own;
        # 1-to-n and n-to-1 are implied messages: strictly after their send
        strict = inst.cls in (ONE_TO_N, N_TO_ONE) or inst.nonblocking
        for p, (i, j) in enumerate(pairs):
            late = ends[i] <= begins[j] if strict else ends[i] < begins[j]
            if late:
                v.collectives += 1  # the example's key: exit member i, then j's place
                q = p - next(k for k, pair in enumerate(pairs) if pair[0] == i)
                note(v, f"location {inst.locs[i]}, record {inst.end_idx[i]}: collective exit "
                     f"before the enter of location {inst.locs[j]}, record {inst.begin_idx[j]}",
                      (n, 0, i, q))
        waiting = set() if inst.nonblocking else {i for i, _ in pairs}
        for i in sorted(waiting):  # exits that wait (local ones may clamp)
            if ends[i] <= begins[i]:
                v.collectives += 1
                note(v, f"location {inst.locs[i]}, record {inst.end_idx[i]}: collective exit "
                     f"not after its own enter (record {inst.begin_idx[i]})", (n, 1, i))


def _verify_messages(trace: Trace, matching: Matching, v: Verification) -> None:
    """Every receive (a matched probe, where one took the message) strictly after its
    send (at or after it, for a send to self), every plain MPI_Probe/Iprobe that
    found a message strictly after that message's send (the table's ``probe``
    rows: a probe reports a message that exists), and
    a synchronous send's call not ended before its receive was posted (for an
    MPI_Issend: its MpiIsendComplete, which matching puts in ``send_exit_idx``);
    vectorised over the message table."""
    table = matching.table
    if not len(table):
        return
    times = [trace.events[loc].time for loc in table.loc_ids]
    lengths = np.array([len(x) for x in times], dtype=np.int64)
    off = np.r_[0, np.cumsum(lengths)[:-1]]
    flat = np.concatenate(times).astype(np.int64)
    send_t = flat[off[table.send_li] + table.send_idx]
    recv_t = flat[off[table.recv_li] + table.recv_idx]
    to_self = table.send_li == table.recv_li
    ids = table.loc_ids  # the receives (and synchronous sends' exits) checked here
    mine = np.array([v.owns(loc) for loc in ids], dtype=bool)
    bad = np.flatnonzero(np.where(to_self, recv_t < send_t, recv_t <= send_t)
                         & mine[table.recv_li])
    v.messages += int(bad.size)
    for j in bad[:10].tolist():
        what = ("probe not after the send of the message it found" if table.probe[j]
                else "receive not after its send")
        note(v, f"location {ids[table.recv_li[j]]}, record {int(table.recv_idx[j])}: {what} "
             f"(location {ids[table.send_li[j]]}, record {int(table.send_idx[j])})", (0, j))
    # a synchronous send's call cannot end before the receive was posted (counted with
    # the messages)
    sync = np.flatnonzero(table.synchronous & ~to_self & (table.recv_post_idx >= 0)
                          & mine[table.send_li])
    exit_t = flat[off[table.send_li[sync]] + table.send_exit_idx[sync]]
    post_t = flat[off[table.recv_li[sync]] + table.recv_post_idx[sync]]
    early = sync[exit_t < post_t]
    v.messages += int(early.size)
    for j in early[:10].tolist():
        note(v, f"location {ids[table.send_li[j]]}, record {int(table.send_exit_idx[j])}: "
                 f"synchronous send returned before its receive was posted (location "
                 f"{ids[table.recv_li[j]]}, record {int(table.recv_post_idx[j])})", (1, j))


def _verify_threads(trace: Trace, matching: Matching, v: Verification) -> None:
    """Every thread record that waits for another thread (a team member's
    ThreadTeamBegin for its fork, the master's ThreadJoin for each member's
    ThreadTeamEnd, a ThreadAcquireLock for the release before it in acquisition
    order, a ThreadBegin for its ThreadCreate, a ThreadWait for its ThreadEnd) is
    strictly after it; no member of an OpenMP barrier leaves it before the last
    member entered it (counted with the threads)."""
    for n, inst in enumerate(matching.threads.barriers):
        if v.own is not None and not any(map(v.owns, inst.locs)):
            continue
        ev = [trace.events[loc].time for loc in inst.locs]
        last = max(int(t[b]) for t, b in zip(ev, inst.begin_idx, strict=True))
        for m, (loc, t, e) in enumerate(zip(inst.locs, ev, inst.end_idx, strict=True)):
            if v.owns(loc) and t[e] < last:
                v.threads += 1
                note(v, f"location {loc}, record {e}: left an OpenMP barrier before the "
                         f"last member entered it (team {inst.comm})", (0, n, m))
    for n, sync in enumerate(matching.threads.syncs):
        loc, i = sync.recv
        if not v.owns(loc):
            continue
        t = trace.events[loc].time[i]
        for m, (s_loc, s) in enumerate(sync.sends):
            if t <= trace.events[s_loc].time[s]:
                v.threads += 1
                note(v, f"location {loc}, record {i}: thread {sync.kind} not after "
                         f"location {s_loc}, record {s}", (1, n, m))


def _verify_devices(trace: Trace, matching: Matching, v: Verification) -> None:
    """No device activity starts before its host launch (the kernel's Enter strictly
    after the host's callsite parameter record), no host synchronize call returns
    before the device activity that ended while it was in progress (its Leave
    strictly after the device Leave): :mod:`compensate.matching.devices`."""
    for n, sync in enumerate(matching.devices.syncs):
        loc, i = sync.recv
        if not v.owns(loc):
            continue
        t = trace.events[loc].time[i]
        for m, (s_loc, s) in enumerate(sync.sends):
            if t <= trace.events[s_loc].time[s]:
                v.devices += 1
                what = "kernel started before its launch" if sync.kind == "launch" else \
                    "synchronize returned before the device activity ended"
                note(v, f"location {loc}, record {i}: {what} (location {s_loc}, "
                         f"record {s})", (n, m))


def _verify_metrics(trace: Trace, measured: Trace, v: Verification) -> None:
    """Each METRIC sample stays between its reference thread's records: at or after
    the approximated time of the last reference record measured at or before it,
    and at or before that of the first one measured after it (compensate.engine.metrics
    maps it between them; its shift then lies between theirs)."""
    for n, (loc, ref) in enumerate(trace.definitions.metric_references().items()):
        if ref is None or loc not in trace.events or ref not in trace.events \
                or not v.owns(loc):
            continue
        ev, rev = trace.events[loc], trace.events[ref]
        m, rm = measured.events[loc].time, measured.events[ref].time
        if not len(ev) or not len(rev):
            continue
        j = np.searchsorted(rm, m, side="right") - 1
        has_before, has_after = j >= 0, j + 1 < len(rm)
        low = np.where(has_before, rev.time[np.maximum(j, 0)], np.iinfo(np.int64).min)
        high = np.where(has_after, rev.time[np.minimum(j + 1, len(rm) - 1)],
                        np.iinfo(np.int64).max)
        bad = np.flatnonzero((ev.time < low) | (ev.time > high))
        v.metrics += int(bad.size)
        if bad.size:
            i = int(bad[0])
            note(v, f"location {loc}, record {i}: METRIC sample outside its process's "
                     f"records (location {ref}) around it", (n,))


def _verify_tasks(trace: Trace, matching: Matching, v: Verification) -> None:
    """No OpenMP task switched to or completed before its create
    (:mod:`compensate.verify.tasks`, counted with the threads)."""
    bad, notes = task_violations(trace, v.own)
    v.threads += bad
    for key, n in notes:
        note(v, n, key)


#: One check per dependency family, each independent of how the engine computed the
#: times (a new dependency kind adds its invariant here).
CHECKS = (_verify_order, _verify_messages, _verify_collectives, _verify_threads,
          _verify_devices, _verify_tasks, verify_partitioned, verify_rma)
