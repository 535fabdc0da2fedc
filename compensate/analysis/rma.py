"""The seed's MPI one-sided (RMA) wait states (Hermanns, Geimer, Mohr, Wolf,
"Scalable Detection of MPI-2 Remote Memory Access Inefficiency Patterns";
issue #19), for :func:`compensate.analysis.waitstates.wait_states`
(definitions: docs/analysis.md, "One-sided communication"):

* **Late Post**, ``rma_late_post``: an access epoch's MPI_Win_start (or, where the
  start did not block, its MPI_Win_complete) waits for the targets' MPI_Win_post:
  Enter of the latest matching post − Enter of the call, bounded by the call.
* **Early Transfer**, ``rma_early_transfer``: an RMA operation of such an epoch
  during whose call the target's post was entered: post Enter − operation Enter.
* **Early Wait**, ``rma_early_wait``: MPI_Win_wait (or a successful
  MPI_Win_test) entered before the last matching MPI_Win_complete: latest complete
  Enter − wait Enter, bounded by the wait call; **Late Complete**,
  ``rma_late_complete``, its part after the origins' last operation of the epoch
  (exit of the latest RMA operation to this target, else of the MPI_Win_start).
* **Wait at Fence**, ``rma_wait_fence``: a synchronising fence (every Enter
  before any exit): latest Enter − own Enter, bounded by the call; **Early
  Fence**, ``rma_early_fence``, the time a target's fence was entered before the
  latest exit of the puts and accumulates into its window in the epoch it closes
  (every fence, synchronising or not).
* Window creation (MPI_Win_create, _allocate, ...) and a synchronising
  MPI_Win_free add to **Wait at Create** / **Wait at Free**, as communicator
  creation does.
* **Lock Competition**, ``rma_lock_competition``: a passive-target epoch waits
  for the lock a conflicting epoch of another origin holds: Enter of that
  holder's MPI_Win_unlock − Enter of the call that waited (the lock call, or the
  unlock of a lazily granted lock), bounded by the call.

The seed's values are inclusive (a sub-pattern's time is also its parent's); the
behaviour breakdown needs disjoint categories, so here **Early Wait** and **Wait
at Fence** exclude their sub-patterns: the seed's inclusive Early Wait is
Early Wait + Late Complete, its Wait at Fence ``max`` of the two fence values
per call (their sum, where Wait at Fence was detected).

All pairs come from :mod:`compensate.matching.rma` (its ``post``, ``complete``,
``lock`` and ``transfer`` links and its window collectives); gets, which the
matching leaves local, count for Late Complete and Early Transfer (read from the
origin's records) but not for Early Fence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np

from compensate.formats.fields import fields_of
from compensate.matching import Matching
from compensate.matching.collectives import CREATE, FREE, N_TO_N
from compensate.matching.rma import ATOMIC, GET, GROUP_SYNC, PSCW_CALLS, PUT
from compensate.model import KIND_NAMES, Trace

#: the states, in the order :data:`compensate.analysis.calls.WAIT_STATES` lists them
STATES = ("rma_late_post", "rma_early_transfer", "rma_early_wait", "rma_late_complete",
          "rma_wait_fence", "rma_early_fence", "rma_lock_competition")
_OPS = (PUT, GET, ATOMIC)
#: window creation and free count in the handle collectives' states
_HANDLE = {CREATE: "wait_create", FREE: "wait_free"}


def rma_waits(trace: Trace, matching: Matching, calls: dict, call_times: Callable
              ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{state: (location, start tick, waiting ticks)}`` of every candidate (the
    :data:`STATES` and ``wait_create``/``wait_free``; zero
    waits included; the caller keeps the positive ones). ``call_times(calls[loc],
    idx, time)`` gives (enter, end, call position) of the calls around records."""
    out: dict[str, list[tuple[int, int, int]]] = {s: [] for s in (*STATES, *_HANDLE.values())}
    deps = matching.rma
    defs = trace.definitions

    def call(loc: int, idx: int) -> tuple[int, int, int]:
        c = calls[loc]
        t0, t1, pos = call_times(c, np.array([idx], dtype=np.int64), c.events.time)
        return int(t0[0]), int(t1[0]), int(pos[0])

    def kind_of(loc: int, pos: int) -> str:
        name = defs.regions.get(int(calls[loc].region[pos]), "").lower() if pos >= 0 else ""
        return next((k for part, k in PSCW_CALLS if part in name), "fence" if "fence" in name
                    else "")

    def time(loc: int, idx: int) -> int:
        return int(trace.events[loc].time[idx])

    by_kind: dict[str, list] = defaultdict(list)
    for link in deps.links:
        by_kind[link.kind].append(link)
    epochs = _access_epochs(trace, calls, call, kind_of, by_kind["post"])

    # Late Post and Early Transfer: per access epoch, the latest post of each target
    waits: dict[tuple[int, int], tuple[int, int, int]] = {}  # (loc, call) -> t0, t1, P
    for ep in epochs:
        for waiter, p_enter in ep.posts:
            t0, t1, pos = call(ep.loc, waiter)
            key = (ep.loc, pos)
            prev = waits.get(key)
            waits[key] = (t0, t1, max(p_enter, prev[2]) if prev else p_enter)
        post_of = {}
        for _, p_enter, target in ep.post_targets:
            post_of[target] = max(p_enter, post_of.get(target, p_enter))
        for o0, o1, target in ep.ops:
            p = post_of.get(target)
            if p is not None:  # the seed: blocking only if the post fell inside the call
                out["rma_early_transfer"].append((ep.loc, o0, p - o0 if o0 < p < o1 else 0))
    for (loc, _), (t0, t1, p) in waits.items():
        out["rma_late_post"].append((loc, t0, min(max(p - t0, 0), t1 - t0)))

    # Early Wait / Late Complete: per wait call, the latest complete and last operation
    closing = {(ep.loc, ep.complete): ep for ep in epochs}
    per_wait: dict[tuple[int, int], list] = {}
    for link in by_kind["complete"]:
        loc, idx = link.recv
        t0, t1, pos = call(loc, idx)
        row = per_wait.setdefault((loc, pos), [t0, t1, None, None])
        for (o_loc, o_idx), ref in zip(link.sends, link.ref, strict=True):
            if ref:
                continue
            c0, _, c_pos = call(o_loc, o_idx)
            row[2] = c0 if row[2] is None else max(row[2], c0)
            ep = closing.get((o_loc, c_pos))
            last = ep.last_to(loc) if ep is not None else None
            if last is not None:
                row[3] = last if row[3] is None else max(row[3], last)
    for (loc, _), (t0, t1, c, last) in per_wait.items():
        if c is None:
            continue
        early = min(max(c - t0, 0), t1 - t0)
        late = min(max(c - max(last, t0), 0), early) if last is not None else 0
        out["rma_early_wait"].append((loc, t0, early - late))
        out["rma_late_complete"].append((loc, t0, late))

    # Early Fence: per target fence call, the latest exit of the transfers into it
    early_fence: dict[tuple[int, int], int] = {}
    for link in by_kind["transfer"]:
        loc, idx = link.recv
        t0, t1, pos = call(loc, idx)
        if kind_of(loc, pos) != "fence":
            continue
        latest = max(call(s_loc, s_idx)[1] for s_loc, s_idx in link.sends)
        w = min(max(latest - t0, 0), t1 - t0)
        early_fence[(loc, pos)] = max(w, early_fence.get((loc, pos), 0))
    # Wait at Fence: synchronising fences (the matching's n-to-n window collectives);
    # window creation and a synchronising free: Wait at Create / Wait at Free
    for ins in deps.collectives:
        if ins.cls not in (N_TO_N, *_HANDLE) or not ins.synchronising or len(ins.locs) < 2:
            continue
        rows = []
        for loc, b, e in zip(ins.locs, ins.begin_idx, ins.end_idx, strict=True):
            t0, _, pos = call(loc, b)
            rows.append((loc, t0, call(loc, e)[1], pos))
        latest = max(r[1] for r in rows)
        for loc, t0, t1, pos in rows:
            w = min(max(latest - t0, 0), t1 - t0)
            if ins.cls in _HANDLE:
                out[_HANDLE[ins.cls]].append((loc, t0, w))
            else:
                out["rma_wait_fence"].append(
                    (loc, t0, max(w - early_fence.get((loc, pos), 0), 0)))
    for (loc, pos), w in early_fence.items():
        out["rma_early_fence"].append((loc, int(calls[loc].t0[pos]), w))

    # Lock Competition: the waiting call, the latest conflicting release it waited for
    per_lock: dict[tuple[int, int], list] = {}
    for link in by_kind["lock"]:
        loc, idx = link.recv
        t0, t1, pos = call(loc, idx)
        released = [time(s_loc, s_idx) for (s_loc, s_idx), ref
                    in zip(link.sends, link.ref, strict=True) if not ref]
        if not released:
            continue
        row = per_lock.setdefault((loc, pos), [t0, t1, max(released)])
        row[2] = max(row[2], max(released))
    for (loc, _), (t0, t1, r) in per_lock.items():
        out["rma_lock_competition"].append((loc, t0, min(max(r - t0, 0), t1 - t0)))
    return {s: tuple(np.array([x[k] for x in rows], dtype=np.int64) for k in range(3))
            for s, rows in out.items()}


class _Epoch:
    """An access epoch (MPI_Win_start ... MPI_Win_complete) of one origin: its
    operations ``(enter, exit, target location)``, the start call's exit, the
    complete call's position, the posts that gated it."""

    def __init__(self, loc: int, start_exit: int) -> None:
        self.loc = loc
        self.start_exit = start_exit
        self.ops: list[tuple[int, int, int]] = []
        self.complete = -1
        self.first = self.last = -1  # record span: start's GroupSync .. complete's Leave
        self.posts: list[tuple[int, int]] = []  # (waiting record, post Enter)
        self.post_targets: list[tuple[int, int, int]] = []  # (waiter, post Enter, target)

    def last_to(self, target: int) -> int:
        """The exit of the epoch's latest operation to ``target``, else of the start."""
        ends = [o1 for _, o1, t in self.ops if t == target]
        return max(ends) if ends else self.start_exit


def _access_epochs(trace: Trace, calls: dict, call: Callable, kind_of: Callable,
                   post_links: list) -> list[_Epoch]:
    """Every origin's access epochs, with the ``post`` links that gated them."""
    defs = trace.definitions
    out: list[_Epoch] = []
    by_loc: dict[int, list[_Epoch]] = defaultdict(list)
    rma = {GROUP_SYNC, *_OPS}
    for loc, ev in trace.events.items():
        if loc not in calls or not np.isin(ev.kind, list(rma)).any():
            continue
        open_: dict[int, _Epoch] = {}  # window -> its open access epoch
        for i in np.flatnonzero(np.isin(ev.kind, list(rma))).tolist():
            k = int(ev.kind[i])
            f = fields_of(KIND_NAMES[k], ev.payload[i], source=trace.source, location=loc,
                          index=i)
            win = f["win"]
            if k == GROUP_SYNC:
                t0, t1, pos = call(loc, i)
                kind = kind_of(loc, pos)
                if kind == "start":
                    ep = open_[win] = _Epoch(loc, t1)
                    ep.first = i
                elif kind == "complete" and win in open_:
                    ep = open_.pop(win)
                    ep.complete = pos
                    leave = int(calls[loc].leave[pos])
                    ep.last = leave if leave >= 0 else len(ev) - 1
                    out.append(ep)
                    by_loc[loc].append(ep)
            elif win in open_:
                w = defs.windows.get(win)
                comm = defs.comms.get(w.comm) if w is not None else None
                members = comm.members if comm is not None else ()
                if 0 <= f["remote"] < len(members):
                    t0, t1, _ = call(loc, i)
                    open_[win].ops.append((t0, t1, members[f["remote"]]))
    for link in post_links:
        loc, idx = link.recv
        ep = next((e for e in by_loc.get(loc, ()) if e.first <= idx <= e.last), None)
        if ep is None:
            continue
        for (t_loc, t_idx), ref in zip(link.sends, link.ref, strict=True):
            if ref:
                continue
            p = call(t_loc, t_idx)[0]
            ep.posts.append((idx, p))
            ep.post_targets.append((idx, p, t_loc))
    return out
