"""Each rank verifies the dependencies it owns; the findings are reduced to the
one-process run's (issue #21, docs/parallel.md "What each rank reads, writes and
verifies").

A dependency belongs to the rank that owns its *dependent end*: the record that
must come after (a receive, a collective member's exit, a lock grant, a waiter, a
partitioned completion, ...). :func:`compensate.verify.verify` with ``own`` checks
exactly those; they read the other end's *rounded* time, which only its owner
knows (rounding takes a running maximum over a location,
:func:`compensate.engine.run.rounded_times`, so the replay's exchanged float is not
enough). :func:`remote_reads` lists the records of other ranks' locations those
checks read — the same walk over the matching as the checks', restricted the same
way — and :func:`verify_rank` asks their owners for them in one ``alltoall`` (each
owner answers in a second), verifies, and reduces every rank's counts and
examples to one :class:`Verification` on rank 0: counts and records carried as
local only summed, the examples merged by their place in the one-process order
(``Verification.keys``), so the summary and its messages equal the one-process
run's. Rank 0 also asks for every location's first and last record, which the
summary's approximated span reads. No rank holds another's whole time column.

What the ghost columns hold for verification: the requested records' rounded
times; every other record of another rank's location holds :data:`UNREAD`
(``INT64_MAX``), so a check that read a record this module did not list would
report a violation rather than pass silently (the tests compare with the
one-process run).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from compensate.families import BY_NAME, CHECKS, READS
from compensate.matching import Matching
from compensate.model import Trace
from compensate.parallel.transport import Transport
from compensate.parallel.trim import original, remap_text
from compensate.verify import Verification, verify
from compensate.verify.result import COUNTERS

#: the time of a ghost record verification did not ask for
UNREAD = np.iinfo(np.int64).max

#: the counted fields of :class:`Verification` (its counter fields, in their order)
COUNTS = COUNTERS


def remote_reads(matching: Matching, own: set[int]) -> dict[int, np.ndarray]:
    """``{location: record indices}`` of the records of locations not in ``own``
    that the checks of :mod:`compensate.verify` read when they check the
    dependencies whose dependent end is in ``own``: each family's part of it
    (:data:`compensate.families.READS`; e.g. a message's send, every member's begin
    of a collective with a local member, the sends of links whose waiting record is
    local). Per-location order, tasks and METRIC samples read only their own
    process (the rank owns it whole)."""
    reads: dict[int, list] = defaultdict(list)
    for family_reads in READS:
        for loc, idx in family_reads(matching, own):
            if loc not in own:
                reads[loc].append(idx)
    return {loc: np.unique(np.concatenate([np.asarray(x, dtype=np.int64).ravel()
                                           for x in parts]))
            for loc, parts in reads.items()}


def verify_rank(transport: Transport, owner: dict[int, int], trace: Trace,
                matching: Matching, times: dict[int, np.ndarray],
                step: Callable[..., Any] | None = None,
                index: dict[int, np.ndarray] | None = None,
                skip: dict[int, int] | None = None,
                ) -> tuple[Trace, Verification | None]:
    """Verify this rank's dependencies from its own locations' rounded ``times`` and
    the ghosts' rounded times their checks read (asked of their owners), and reduce
    every rank's findings: ``(verified trace, Verification)`` on rank 0 (the
    one-process run's), ``(verified trace, None)`` elsewhere. Collective: every
    rank calls it. The verified trace holds this rank's times, the ghosts' as
    requested and :data:`UNREAD` elsewhere (rank 0's also every location's first
    and last record: the summary's span). ``step(f, *args)`` runs each local part
    between the collectives (the driver's ``agreed``: a rank failing there stops
    every rank at the phase boundary instead of leaving them in an ``alltoall``).
    ``index``: the trimmed ghosts' index map (:mod:`compensate.parallel.trim`): their
    owners are asked for the original records, and the examples name them.
    ``skip``: leading context records of this rank's locations not to check (a
    segment of the streamed run, :mod:`compensate.parallel.segments`)."""
    size, rank = transport.size, transport.rank
    run = step or (lambda f, *a: f(*a))

    def ask() -> tuple[dict, list[dict]]:
        needed = remote_reads(matching, set(times))
        if rank == 0:  # the summary's approximated span: every location's first and last
            for loc, ev in trace.events.items():
                if loc not in times and len(ev):
                    ends = np.array([0, len(ev) - 1], dtype=np.int64)
                    needed[loc] = np.union1d(needed.get(loc, ends), ends)
        asks: list[dict] = [{} for _ in range(size)]
        for loc, idx in needed.items():
            asks[owner[loc]][loc] = original(index or {}, loc, idx)
        return needed, asks

    needed, asks = run(ask)
    asked = transport.alltoall(asks)
    answers = transport.alltoall(run(lambda: [
        {loc: times[loc][idx] for loc, idx in a.items()} for a in asked]))

    def check() -> tuple[Trace, Verification]:
        columns = dict(times)
        for got in answers:
            for loc, values in got.items():
                col = np.full(len(trace.events[loc]), UNREAD, dtype=np.int64)
                col[needed[loc]] = values
                columns[loc] = col
        for loc, ev in trace.events.items():
            if loc not in columns:
                columns[loc] = np.full(len(ev), UNREAD, dtype=np.int64)
        checked = trace.with_times(columns)
        extra = {"skip": skip} if skip else {}  # (only a streamed segment has context)
        return checked, verify(checked, matching, measured=trace, own=set(times), **extra)

    checked, mine = run(check)
    found = transport.alltoall([_portable(mine, matching, checked, index or {})
                                if r == 0 else None for r in range(size)])
    return checked, run(lambda: merge(found) if rank == 0 else None)


def _portable(v: Verification, matching: Matching | None = None, trace: Trace | None = None,
              index: dict[int, np.ndarray] | None = None) -> dict:
    """What a rank sends of its verification: counts, examples with their keys,
    records carried as local only. The examples name original records (trimmed
    ghosts, :func:`compensate.parallel.trim.remap_text`), and a message example's key
    is its place in the one-process message table (:func:`message_key`), which a
    rank's own table, with trimmed ghosts, does not give."""
    examples, keys = v.examples, v.keys
    if matching is not None and trace is not None:
        examples = [remap_text(index or {}, x) for x in examples]
        keys = [(k[0], k[1], *message_key(matching, trace, index or {}, k[2]))
                if k and k[0] == MESSAGE_CHECK else k for k in keys]
    return {"counts": {f: getattr(v, f) for f in COUNTS}, "examples": examples,
            "keys": keys, "carried": v.carried_local_only}


#: the number of the message check in :data:`compensate.families.CHECKS`
MESSAGE_CHECK = CHECKS.index(BY_NAME["message"].check)


def message_key(matching: Matching, trace: Trace, index: dict[int, np.ndarray],
                row: int) -> tuple[int, int, int, int]:
    """The place of message ``row`` of this rank's table in the one-process table,
    as a key every rank computes alike: the one-process table orders messages by
    their receiving location, then by where each (sender, receiver, communicator,
    tag) channel's first receive is in it (plain receives, then matched probes, each
    in record order), then by their order in the channel. Returns (receiving
    location position, probe, original index of the channel's first receive, place
    in the channel)."""
    t = matching.table
    li = int(t.recv_li[row])
    ev = trace.events[t.loc_ids[li]]

    def channel(j: int) -> tuple:
        i = int(t.recv_idx[j])
        return (int(t.send_li[j]), int(t.recv_li[j]), int(ev.comm[i]), int(ev.tag[i]))

    first, key = row, channel(row)
    while first > 0 and int(t.recv_li[first - 1]) == li and channel(first - 1) == key:
        first -= 1
    return (li, int(t.no_recv_copy[first]),
            int(original(index, t.loc_ids[li], int(t.recv_idx[first]))), row - first)


def merge(parts: list[dict]) -> Verification:
    """The one-process :class:`Verification` from every rank's (:func:`_portable`):
    counts and carried records summed, the first ten examples in the one-process
    order (each rank's are its first ten in that order, so their union holds the
    first ten of all; ties of keyless examples go by rank)."""
    v = Verification()
    found = []
    for r, p in enumerate(parts):
        for f in COUNTS:
            setattr(v, f, getattr(v, f) + p["counts"][f])
        for name, n in p["carried"].items():
            v.carried_local_only[name] = v.carried_local_only.get(name, 0) + n
        found += [(key, r, i, msg) for i, (key, msg) in
                  enumerate(zip(p["keys"], p["examples"], strict=True))]
    for key, _, _, msg in sorted(found)[:10]:
        v.examples.append(msg)
        v.keys.append(key)
    return v
