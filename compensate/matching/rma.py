"""MPI one-sided communication (RMA): what waits for what across locations
(R10, docs/compensation.md "One-sided communication"; issue #19).

Only MPI windows (:func:`compensate.formats.rma.mpi_windows`: every member of
the window's communicator a CPU thread) on CPU threads; Score-P's device copies,
recorded as RMA on a window with an accelerator stream, stay local records.
MPI's semantics, not one trace, give the dependencies; Score-P's records
(``SCOREP_Mpi_Rma``, read through :func:`compensate.formats.fields.fields_of`) say
where they are. Every RMA record sits inside its MPI call (an Enter/Leave pair) or,
in a hand-written trace, alone.

* **Fence** (and the window's other collectives): on each window, the k-th
  RmaCollectiveEnd of every member of the window's communicator is instance k,
  an :class:`~compensate.matching.collectives.Instance` whose class comes from
  the operation (BARRIER: n-to-n; CREATE_HANDLE: create; DESTROY_HANDLE: free).
  Its *begin* is the RmaCollectiveBegin in the same call (else the call's Enter),
  its *end* the first record of the call after the begin (Score-P writes the
  completions and the end at the call's exit; where it stamps the end with the
  begin's time, the Leave). MPI_Win_fence need not synchronise (MPI_MODE_NOPRECEDE,
  an implementation that knows no process accessed the window): as the seed's
  Wait-at-Fence heuristic, an n-to-n fence is treated as synchronising only if the
  measurement shows it (no member's end before another's begin); else its ends
  are local.
* **PSCW** (general active target). An RmaGroupSync is classified by its call's
  region name (MPI_Win_post, _start, _complete, _wait, _test: the records do not
  say it). Per window, origin ``o`` and target ``t``: the k-th MPI_Win_start of
  ``o`` whose group holds ``t`` matches the k-th MPI_Win_post of ``t`` whose
  group holds ``o``, and likewise the k-th complete the k-th wait (or successful
  test, sync level not NONE). Links (``kind``):

  - ``post`` (Late Post): the post's RmaGroupSync -> the start call, if the
    measured start returned after it (MPI_Win_start blocked, or may have);
    otherwise -> the complete call (which cannot return before every target
    posted);
  - ``complete`` (Early Wait): the complete's RmaGroupSync -> the wait call.
* **Passive target locks** (lock competition). Per window and target, the lock
  epochs of all origins (RmaRequestLock ... RmaReleaseLock on the same remote
  rank; MPI_Win_lock_all's ``remote`` undefined means every rank) in measured
  order of their releases, which under mutual exclusion is the order the lock
  was held in: an exclusive epoch waits for the release of the previous
  exclusive one and of every shared one since; a shared epoch for the previous
  exclusive release only (``lock``). The release happens inside MPI_Win_unlock,
  before the RmaReleaseLock Score-P writes at its exit: the unlock call's Enter is
  the sender (the next grant follows it by at least nothing, at most the measured
  interval). The waiting record is the RmaAcquireLock
  if recorded, else the lock call, else (a lazy lock, granted inside
  MPI_Win_unlock or at the first transfer) the unlock call.
* **Transfers** (``transfer``): an RmaPut, or an RmaAtomic that sends bytes,
  from ``o`` to ``t`` completes at the target's end of the epoch it belongs to:
  the target's closing fence (the fence instance that closes ``o``'s epoch) or
  the wait of the matching exposure epoch. A message of ``bytes`` (copy cost and
  network like R2). Transfers inside lock epochs have no target record; the
  next lock holder's link orders them. Gets move data to the origin, where the
  closing call is on the same location.

"The call" of a waiting record: the first record of that call measured at or
after the record it waits for, so that the waiting record is the first one the
measurement places after the wait; searched after the call's RmaGroupSync (which
Score-P stamps with its Enter's time: it marks where the call began, never where
it stopped waiting), after the fence's begin, after the lock request, and after
the Enter of MPI_Win_complete and MPI_Win_unlock (whose completions are written
at the exit). A call whose records all lie before what it waits for contradicts the
measurement and is left local (counted in :attr:`RmaDeps.unmatched`), as is a
record whose partner is missing (a stream segment, a trace cut short).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import numpy as np

from compensate.formats.fields import fields_of
from compensate.formats.rma import RMA_KINDS, mpi_windows
from compensate.matching.collectives import COLLECTIVE_CLASSES, CREATE, FREE, N_TO_N, Instance
from compensate.matching.threads import ThreadSync
from compensate.model import (
    COLLECTIVE_OPS,
    ENTER,
    KIND_CODE,
    LEAVE,
    Trace,
    TraceError,
    kind_table,
)

C_BEGIN, C_END = KIND_CODE["RmaCollectiveBegin"], KIND_CODE["RmaCollectiveEnd"]
GROUP_SYNC = KIND_CODE["RmaGroupSync"]
REQUEST_LOCK, ACQUIRE_LOCK = KIND_CODE["RmaRequestLock"], KIND_CODE["RmaAcquireLock"]
RELEASE_LOCK = KIND_CODE["RmaReleaseLock"]
PUT, GET, ATOMIC = KIND_CODE["RmaPut"], KIND_CODE["RmaGet"], KIND_CODE["RmaAtomic"]
WIN_CREATE, WIN_DESTROY = KIND_CODE["RmaWinCreate"], KIND_CODE["RmaWinDestroy"]

#: link kinds, in the order of :meth:`RmaDeps.counts`
DEP_KINDS = ("post", "complete", "lock", "transfer", "completion")
#: the PSCW calls, by a part of their (lower-case) region name
PSCW_CALLS = (("win_post", "post"), ("win_start", "start"), ("win_complete", "complete"),
              ("win_wait", "wait"), ("win_test", "wait"))

#: the one-sided records (:func:`match_rma` looks at a location that has one)
_RMA = kind_table(RMA_KINDS)


@dataclass
class RmaLink(ThreadSync):
    """A waiting record and what it waits for (``recv``, ``sends`` as
    ``(location id, record index)``), with the bytes each sender transfers (0 for a
    synchronisation) in ``sizes``."""

    sizes: list[int] = field(default_factory=list)
    #: bytes that come back to the origin (a get, a fetching atomic), per sender
    back: list[int] = field(default_factory=list)
    #: per sender: a *reference* (the previous lock holder's first record at the
    #: unlock's exit): the waiting record keeps its measured offset from it, which may
    #: be negative (the release happened before it); not a happened-before sender
    ref: list[bool] = field(default_factory=list)
    #: records the waiting record waits for by another rule (a fence's begins), which
    #: may be the ones that freed it last: then no sender's interval was observed
    also: list[tuple[int, int]] = field(default_factory=list)
    #: a ``lock`` link's *deposits*: the operations of the previous conflicting
    #: epochs, ``(location, record index, bytes to the target, bytes back)``; the
    #: grant follows each one's arrival at the target (``target``, a location; of a
    #: ``completion`` link the operation's target, -1 if not one location)
    deposits: list[tuple[int, int, int, int]] = field(default_factory=list)
    target: int = -1

    def __post_init__(self) -> None:
        n = len(self.sends)
        self.sizes = self.sizes or [0] * n
        self.back = self.back or [0] * n
        self.ref = self.ref or [False] * n


@dataclass
class RmaDeps:
    """Every RMA dependency of a trace (module docstring)."""

    links: list[RmaLink] = field(default_factory=list)
    #: window collectives (fences, creation, free), one instance each; ``comm`` is
    #: the window id; ``synchronising`` False for a fence the measurement shows local
    collectives: list[Instance] = field(default_factory=list)
    unmatched: int = 0

    def counts(self) -> dict:
        out = {k: 0 for k in DEP_KINDS}
        for s in self.links:
            out[s.kind] += sum(not r for r in s.ref)
        out["fence"] = sum(1 for i in self.collectives if i.cls == N_TO_N and i.synchronising)
        out["fence (local)"] = sum(1 for i in self.collectives
                                   if i.cls == N_TO_N and not i.synchronising)
        out["window collectives"] = sum(1 for i in self.collectives if i.cls != N_TO_N)
        out["unmatched"] = self.unmatched
        return out


@dataclass
class _Rec:
    """One RMA record with its call: Enter and Leave indices (-1 if none)."""

    idx: int
    kind: int
    f: dict
    enter: int
    leave: int
    call: str  # the call's region name, lower case ("" if none)


class _Loc:
    """The RMA records of one location, with their calls and measured times."""

    def __init__(self, trace: Trace, loc: int, mpi: set[int]) -> None:
        ev = trace.events[loc]
        self.loc = loc
        self.time = ev.time
        self.recs: list[_Rec] = []
        regions = trace.definitions.regions
        sel = np.flatnonzero(np.isin(ev.kind, list(RMA_KINDS) + [ENTER, LEAVE]))
        stack: list[int] = []  # open Enters
        waiting: dict[int, list[_Rec]] = defaultdict(list)  # Enter -> records in its call
        kinds, region = ev.kind, ev.region
        for i in sel.tolist():
            k = int(kinds[i])
            if k == ENTER:
                stack.append(i)
            elif k == LEAVE:
                # a Leave closes the latest open Enter of its region (docs/design.md §4)
                for j in range(len(stack) - 1, -1, -1):
                    if region[stack[j]] == region[i]:
                        for r in waiting.pop(stack[j], ()):
                            r.leave = i
                        del stack[j]
                        break
            else:
                name = KIND_NAME[k]
                f = fields_of(name, ev.payload[i], source=trace.source, location=loc, index=i)
                if "win" in f and f["win"] not in trace.definitions.windows:
                    raise TraceError(f"{name} of window {f['win']}, which is not defined"
                                     f"{_UNDEFINED_HINT}", source=trace.source,
                                     location=loc, index=i)
                if "win" in f and f["win"] not in mpi:
                    continue  # a device window (module docstring)
                enter = stack[-1] if stack else -1
                call = regions.get(int(region[enter]), "").lower() if enter >= 0 else ""
                r = _Rec(i, k, f, enter, -1, call)
                self.recs.append(r)
                if enter >= 0:
                    waiting[enter].append(r)

    def waiter(self, r: _Rec, after: int, t_m: int) -> int | None:
        """The first record of ``r``'s call after record ``after`` measured at or
        after ``t_m`` (up to the call's Leave; without a call: ``r`` itself if it
        is), None if there is none (module docstring)."""
        last = r.leave if r.leave >= 0 else r.idx
        first = after + 1 if after < last else last
        times = self.time[first:last + 1]
        hit = np.flatnonzero(times >= t_m)
        return first + int(hit[0]) if hit.size else None


KIND_NAME = {k: n for n, k in KIND_CODE.items()}
#: what a text trace written before R10 (no window lines) needs
_UNDEFINED_HINT = (" (a .trace file needs a line 'window <id> \"<name>\" comm=<comm id>' "
                   "per window; files written before R10 have none)")


def match_rma(trace: Trace) -> RmaDeps:
    """The RMA dependencies of ``trace`` (module docstring)."""
    deps = RmaDeps()
    defs = trace.definitions
    locs = {}
    mpi = mpi_windows(defs)
    for loc, ev in trace.events.items():
        where = defs.locations.get(loc)
        if where is not None and not where.is_cpu:
            continue  # device copies recorded as RMA (CUDA, HIP): R9's, not MPI's
        if len(ev) and _RMA.take(ev.kind).any():
            locs[loc] = _Loc(trace, loc, mpi)
    if not locs:
        return deps

    def target(loc: int, r: _Rec, remote: int) -> list[int]:
        win = defs.windows[r.f["win"]]  # _Loc refused a record of an undefined window
        comm = defs.comms.get(win.comm)
        members = comm.members if comm is not None else ()
        if not members:
            return []  # a window whose group the trace does not give as locations
        if remote < 0:
            return list(members)
        if remote >= len(members):
            raise TraceError(f"{KIND_NAME[r.kind]} remote rank {remote} is not in window "
                             f"{r.f['win']} ({len(members)} members)", source=trace.source,
                             location=loc, index=r.idx)
        return [members[remote]]

    fence_end = _fences(trace, locs, deps)
    fence_locs = {wid: list(defs.comms[w.comm].members) for wid, w in defs.windows.items()
                  if w.comm in defs.comms}
    waits = _pscw(locs, deps)
    _locks(locs, deps, target)
    _transfers(locs, deps, target, fence_end, fence_locs, waits)
    return deps


def _link(deps: RmaDeps, kind: str, loc: _Loc, recv: int, sender: tuple[int, int],
          size: int = 0) -> None:
    if sender[0] == loc.loc:
        return  # ordered by the location itself
    deps.links.append(RmaLink(kind, (loc.loc, recv), [sender], [size]))


def _fences(trace: Trace, locs: dict[int, _Loc], deps: RmaDeps) -> dict:
    """Window collectives; returns ``{(window, location): [end record of instance k]}``
    for the transfers (None where instance k is not there)."""
    defs = trace.definitions
    per: dict[int, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for loc, lr in locs.items():
        begin = -1
        for r in lr.recs:
            if r.kind == C_BEGIN:
                begin = r.idx
            elif r.kind == C_END:
                b = begin if begin >= 0 and (r.enter < 0 or begin > r.enter) else \
                    (r.enter if r.enter >= 0 else r.idx)
                per[r.f["win"]][loc].append((b, r))
                begin = -1
    ends: dict = {}
    for wid, members in per.items():
        win = defs.windows.get(wid)
        comm = defs.comms.get(win.comm) if win is not None else None
        locs_in = list(comm.members) if comm is not None else sorted(members)
        counts = {len(members.get(loc, ())) for loc in locs_in}
        if len(counts) != 1 or not all(loc in locs for loc in locs_in):
            deps.unmatched += sum(len(v) for v in members.values())
            continue
        for k in range(counts.pop()):
            recs = [members[loc][k] for loc in locs_in]
            begins = [b for b, _ in recs]
            end_idx = []
            for loc, (b, r) in zip(locs_in, recs, strict=True):
                lr = locs[loc]
                e = lr.waiter(r, b, int(lr.time[b]))
                end_idx.append(e if e is not None else r.idx)
                ends.setdefault((wid, loc), []).append((end_idx[-1], begins))
            name = recs[0][1].f["op"]
            op = COLLECTIVE_OPS.get(name, -1)
            cls = COLLECTIVE_CLASSES.get(name, N_TO_N)
            if cls not in (CREATE, FREE):
                cls = N_TO_N  # a fence (BARRIER), or an operation of no known class
            bt = [int(locs[loc].time[b]) for loc, b in zip(locs_in, begins, strict=True)]
            et = [int(locs[loc].time[e]) for loc, e in zip(locs_in, end_idx, strict=True)]
            inst = Instance(comm=wid, op=op, cls=cls, known_op=op >= 0, root=-1, locs=locs_in,
                            begin_idx=begins, end_idx=end_idx, size_sent=[0] * len(locs_in),
                            size_recv=[0] * len(locs_in))
            if cls in (N_TO_N, FREE) and len(locs_in) > 1 and min(et) < max(bt):
                inst.synchronising = False  # the measurement shows it did not synchronise
            if len(locs_in) > 1:
                deps.collectives.append(inst)
    return ends


def _call_kind(r: _Rec) -> str:
    for part, kind in PSCW_CALLS:
        if part in r.call:
            return kind
    return ""


def _pscw(locs: dict[int, _Loc], deps: RmaDeps) -> dict:
    """Post/start/complete/wait links; returns ``{(window, origin, target): [the
    target's wait record (its GroupSync) of epoch k]}`` for the transfers, and the
    access epochs of every origin in ``_epochs`` of the result."""
    # (win, me, peer) -> [record] per call kind
    calls: dict[str, dict[tuple, list[_Rec]]] = {k: defaultdict(list) for k in
                                                  ("post", "start", "complete", "wait")}
    for loc, lr in locs.items():
        for r in lr.recs:
            if r.kind != GROUP_SYNC:
                continue
            kind = _call_kind(r)
            if not kind or (kind == "wait" and r.f["sync_level"] == 0):
                continue  # not PSCW, or an MPI_Win_test that found the epoch open
            for peer in r.f["members"]:
                calls[kind][(r.f["win"], loc, peer)].append(r)
    waits: dict = {}
    for (win, o, t), starts in calls["start"].items():
        posts = calls["post"].get((win, t, o), [])
        completes = calls["complete"].get((win, o, t), [])
        for k, s in enumerate(starts):
            if k >= len(posts) or t not in locs:
                deps.unmatched += 1
                continue
            post = posts[k]
            tp = int(locs[t].time[post.idx])
            lo = locs[o]
            w = lo.waiter(s, s.idx, tp)
            if w is None and k < len(completes):
                c = completes[k]
                w = lo.waiter(c, c.enter if c.enter >= 0 else c.idx - 1, tp)
            if w is None:
                deps.unmatched += 1
                continue
            _link(deps, "post", lo, w, (t, post.idx))
    for (win, o, t), completes in calls["complete"].items():
        wl = calls["wait"].get((win, t, o), [])
        for k, c in enumerate(completes):
            if k >= len(wl) or t not in locs:
                deps.unmatched += 1
                waits.setdefault((win, o, t), []).append(None)
                continue
            wr = wl[k]
            lt = locs[t]
            w = lt.waiter(wr, wr.idx, int(locs[o].time[c.idx]))
            waits.setdefault((win, o, t), []).append(w)
            if w is None:
                deps.unmatched += 1
                continue
            _link(deps, "complete", lt, w, (o, c.idx))
    return waits


def _locks(locs: dict[int, _Loc], deps: RmaDeps, target) -> None:
    # (win, target location) -> [(release time, origin, exclusive, grant candidates, release)]
    epochs: dict[tuple, list] = defaultdict(list)
    for loc, lr in locs.items():
        open_: dict[tuple, list] = {}  # (win, remote) -> [request, acquire, operations]
        for r in lr.recs:
            key = (r.f.get("win"), r.f.get("remote"))
            if r.kind == REQUEST_LOCK:
                open_[key] = [r, None, []]
            elif r.kind == ACQUIRE_LOCK and key in open_:
                open_[key][1] = r
            elif r.kind in (PUT, GET, ATOMIC):
                ops = open_.get(key) or open_.get((key[0], -1))
                if ops is not None:
                    ops[2].append(r)
            elif r.kind == RELEASE_LOCK and key in open_:
                req, acq, ops = open_.pop(key)
                excl = req.f["lock_type"] == "EXCLUSIVE"
                for t in target(loc, r, key[1]):
                    mine = [o for o in ops if t in target(loc, o, o.f["remote"])]
                    epochs[(key[0], t)].append((int(lr.time[r.idx]), loc, excl, req, acq, r,
                                                mine))
    for (_win, t), eps in epochs.items():
        eps.sort(key=lambda e: (e[0], e[1]))
        last_x = None
        shared: list = []
        for _, loc, excl, req, acq, rel, ops in eps:
            holders = ([last_x] if last_x else []) + (shared if excl else [])
            holders = [h for h in holders if h[0] != loc]
            senders = [(h[0], h[1]) for h in holders]
            if senders:
                lr = locs[loc]
                t_m = max(int(locs[s[0]].time[s[1]]) for s in senders)
                w = None
                if acq is not None:  # the trace says when the lock was granted
                    w = acq.idx if int(lr.time[acq.idx]) >= t_m else None
                if w is None and acq is None:
                    w = lr.waiter(req, req.idx, t_m) if req.leave >= 0 else None
                if w is None:
                    w = lr.waiter(rel, rel.enter if rel.enter >= 0 else rel.idx - 1, t_m)
                if w is None:
                    deps.unmatched += 1
                else:  # the reference: the exit of the holder that released last
                    n = len(holders)
                    last = max(holders, key=lambda h: int(locs[h[0]].time[h[2]]))
                    deps.links.append(RmaLink(
                        "lock", (loc, w), senders + [(last[0], last[2])],
                        [0] * (n + 1), [0] * (n + 1), [False] * n + [True],
                        deposits=[d for h in holders for d in h[3]], target=t))
            # the lock is released inside MPI_Win_unlock, before Score-P writes the
            # RmaReleaseLock at the call's exit: the call's Enter is the sender, its
            # first record after the Enter (the exit) the reference
            lr_ = locs[loc]
            enter = rel.enter if rel.enter >= 0 else rel.idx
            x = lr_.waiter(rel, enter, int(lr_.time[enter])) if rel.enter >= 0 else rel.idx
            freed = (loc, enter, rel.idx if x is None else x,
                     [(loc, o.idx, *_bytes(o)) for o in ops])
            if excl:
                last_x, shared = freed, []
            else:
                shared.append(freed)


def _transfers(locs: dict[int, _Loc], deps: RmaDeps, target, fence_end: dict,
               fence_locs: dict, waits: dict) -> None:
    for loc, lr in locs.items():
        fences: dict[int, int] = defaultdict(int)  # window -> fences passed
        access: dict[int, dict[int, int]] = {}  # window -> {target: epoch index}
        epoch_no: dict[tuple, int] = defaultdict(int)  # (win, target) -> starts seen
        locked: dict[tuple, list] = {}  # (win, remote) of open lock epochs -> their ops
        for r in lr.recs:
            win = r.f.get("win")
            if r.kind == C_END:
                fences[win] += 1
            elif r.kind == GROUP_SYNC:
                kind = _call_kind(r)
                if kind == "start":
                    access[win] = {}
                    for t in r.f["members"]:
                        access[win][t] = epoch_no[(win, t)]
                        epoch_no[(win, t)] += 1
                elif kind == "complete":
                    access.pop(win, None)
            elif r.kind == REQUEST_LOCK:
                locked[(win, r.f["remote"])] = []
            elif r.kind == RELEASE_LOCK:
                _completions(deps, lr, r, locked.pop((win, r.f["remote"]), []), target)
            elif r.kind == GET or (r.kind in (PUT, ATOMIC) and (
                    (win, r.f["remote"]) in locked or (win, -1) in locked)):
                key = (win, r.f["remote"]) if (win, r.f["remote"]) in locked else (win, -1)
                if key in locked:  # a passive-target epoch: completed by its unlock
                    locked[key].append(r)
            elif r.kind in (PUT, ATOMIC):
                size = r.f["bytes"] if r.kind == PUT else r.f["sent"]
                if size < 0 or (r.kind == ATOMIC and size == 0):
                    continue
                for t in target(loc, r, r.f["remote"]):
                    if t == loc:
                        continue
                    also: list[tuple[int, int]] = []
                    if win in access and t in access[win]:
                        ws = waits.get((win, loc, t), [])
                        k = access[win][t]
                        w = ws[k] if k < len(ws) else None
                    else:
                        ends = fence_end.get((win, t), [])
                        k = fences[win]  # the fence that closes this epoch
                        w, begins = ends[k] if k < len(ends) else (None, None)
                        if begins is not None:  # (no closing fence here: no transfer)
                            also = [(m, b) for m, b in zip(fence_locs[win], begins,
                                                           strict=True) if m != t]
                    if w is None:
                        continue  # a lock epoch (no target record) or no closing record
                    if int(locs[t].time[w]) < int(lr.time[r.idx]):
                        deps.unmatched += 1  # the measurement contradicts the epoch
                        continue
                    if loc != t:
                        deps.links.append(RmaLink("transfer", (t, w), [(loc, r.idx)], [size],
                                                  also=also))


__all__ = ["DEP_KINDS", "RmaDeps", "RmaLink", "match_rma"]


def observed_transfers(trace: Trace, deps: RmaDeps, overhead_ticks: Callable[[int, int], float],
                       copy_ticks, receivers: Collection[int] | None = None,
                       ) -> tuple[list[int], list[float]]:
    """(bytes, network ticks) of the transfers whose whole time the measurement shows
    (for R2f's fit, :func:`compensate.engine.fit.observe_transfers`): a waiting
    record that the transfer freed last and that came clearly after its waiter was
    ready (:func:`was_observed`): ``network = r_m - (s_m + O(s)) - 2·C(b)·b``. The
    post and complete notifications of PSCW, observed the same way, are zero-byte
    messages on the same network: they give the latency. ``overhead_ticks(loc, i)``:
    O of a record, ticks; ``receivers``: only the waits on these locations (default: all)."""
    by_recv: dict[tuple, list] = defaultdict(list)
    also: dict[tuple, set] = defaultdict(set)
    for link in deps.links:
        for s, size, ref in zip(link.sends, link.sizes, link.ref, strict=True):
            if not ref:
                by_recv[link.recv].append((link.kind, s, size))
        also[link.recv].update(link.also)
    ev = trace.events
    wanted = None if receivers is None else set(receivers)
    # ticks from the earliest timestamp: an absolute one near 2^62 is not exact in float64
    origin = min((int(e.time[0]) for e in ev.values() if len(e)), default=0)

    def free(loc: int, i: int) -> float:
        return float(int(ev[loc].time[i]) - origin) + overhead_ticks(loc, i)

    sizes: list[int] = []
    nets: list[float] = []
    for (loc, i), senders in by_recv.items():
        if i == 0 or (wanted is not None and loc not in wanted):
            continue
        # each constraint by the earliest it can free the waiter: a transfer's data
        # leaves after its copy and needs another one at the target
        frees = [free(*s) + (2.0 * copy_ticks(b) if k == "transfer" else 0.0)
                 for k, s, b in senders]
        others = [free(*a) for a in also[(loc, i)]]
        j = max(range(len(frees)), key=frees.__getitem__)
        kind, _, size = senders[j]
        r_m = float(int(ev[loc].time[i]) - origin)
        _, observed = was_observed(kind, frees[j], max(frees + others), free(loc, i - 1), r_m,
                                   copy_ticks(size))
        if kind not in ("transfer", "post", "complete") or not observed \
                or sum(f == frees[j] for f in frees) > 1:
            continue
        sizes.append(size)
        nets.append(r_m - frees[j])
    return sizes, nets


def _completions(deps: RmaDeps, lr: _Loc, rel: _Rec, ops: list[_Rec], target) -> None:
    """``completion`` links of a lock epoch's operations to its unlock: the first
    record of MPI_Win_unlock (after its Enter) at or after the operation cannot come
    before the operation completed at the target (and, for a get or a fetching
    atomic, its result is back): a round trip on the origin's own timeline, which
    R1 alone would shorten by the tracer's overhead written meanwhile."""
    if rel.enter < 0:
        return
    for op in ops:
        w = lr.waiter(rel, rel.enter, int(lr.time[op.idx]))
        if w is None:
            continue
        sent, back = _bytes(op)
        where = target(lr.loc, op, op.f["remote"])
        deps.links.append(RmaLink("completion", (lr.loc, w), [(lr.loc, op.idx)],
                                  [sent], [back], [False],
                                  target=where[0] if len(where) == 1 else -1))


def _bytes(op: _Rec) -> tuple[int, int]:
    """(bytes to the target, bytes back to the origin) of an RMA operation (>= 0)."""
    sent = op.f["bytes"] if op.kind == PUT else (0 if op.kind == GET else op.f["sent"])
    back = op.f["bytes"] if op.kind == GET else (op.f["received"] if op.kind == ATOMIC
                                                 else 0)
    return max(sent, 0), max(back, 0)


def was_observed(kind: str, earliest: float, latest: float, ready: float, r_m: float,
                 cs: float) -> tuple[bool, bool]:
    """(explained, observed) for a waiting record at ``r_m`` whose waiter was ready
    at ``ready``, whose last constraint is a link of ``kind`` that could free it at
    ``earliest`` at the soonest (a sender's record plus its overhead, for a
    transfer also its two copies) and all of whose constraints at ``latest``.
    *Observed*: the interval from that sender to ``r_m`` is its whole latency (R2
    m.1) — for a synchronisation, the waiter was there before it was freed; for a
    transfer, it is the last constraint and the record came clearly after the
    waiter was ready (R2f's "message late": the data, not the waiter, was late); for
    an operation's completion in MPI_Win_unlock (``completion``), whose exit also
    holds the release's round trip, only if the waiter was ready before the data
    could be back.
    *Explained*: the gap before the record is waiting, not the waiter's own time."""
    if kind == "transfer":
        observed = earliest >= latest and r_m > ready + 1.0 + 0.1 * cs
        return observed or ready <= latest, observed
    observed = ready <= latest and earliest >= latest
    return observed, observed
