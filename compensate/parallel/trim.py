"""Trimmed ghosts: of another rank's location, only the calls this rank's rules read
(issue #21, docs/parallel.md "Trimmed ghosts").

A rank needs of a location it does not own only what its own dependencies read
there, and what its matching needs to pair them: the calls that exchange messages
with its own locations (a send's call for a receive it owns, a receive's call for
a synchronous send it owns: the call's Enter, the record, the record before it,
the call's Leave), and every collective call (its members' begins, and on the
member that exits first every record between its begin and end). The rest of the
location — compute regions, messages between two other ranks' locations — is
never read here. Keeping whole calls (Enter to matching Leave) keeps what the
rules find by nesting depth (``call_enter``/``call_leave``, the "record before"
of a receive, R3's records inside the call) the same in the trimmed location as
in the whole one.

This is done only for *simple* locations (:func:`calls_of`), where the rule is easy
to check: records of the kinds Enter, Leave, MpiSend, MpiRecv,
MpiCollectiveBegin/End, ProgramBegin/End and Metric only (a Metric record — a
PAPI counter on a CPU location, a METRIC location's sample — is read by no rule
of another process: METRIC samples map through their own process's time
function, which the owner applies), in time order, well nested and
balanced, every MPI record inside a call, every call that holds MPI records
holding either collective records or point-to-point records with one peer
location, and no other call's MPI records. Any other location (threads,
nonblocking requests, RMA, a call mixing peers, a Leave without Enter, ...) is
sent whole to every rank, as before (nonblocking receives, for one: a synchronous
message's rules read the record before the receive, which in an ``MPI_Waitall``
may be another peer's completion; docs/parallel.md "Limits"), and so is every
location of a run under ``--bound fitted`` (the network fit reads every observed
transfer). A message
channel then stays complete in every rank's view: a pair of locations is kept on
both ends if one end is the rank's own or sent whole, and dropped on both ends
otherwise.

Each trimmed location carries its *index map*: the original record indices of the
kept records, in order (``{location: indices}``, which
:func:`compensate.parallel.ghosts.complete_trimmed` returns). Matching, the rules and
verification work on trimmed positions; whatever leaves the rank names original
indices: the exchange's (location, record) rows, verification's requests, the
example lines and error messages (:func:`original`, :func:`remap_text`). What the
summary counts over the whole trace (records, messages, unmatched sends,
synchronous messages) each rank counts for its own locations, and rank 0 sums them
(:func:`local_counts`, :class:`ReducedMatching`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from compensate.errors import Refusal, renumber
from compensate.matching import Matching
from compensate.matching.devices import DEP_KINDS, PARAM
from compensate.matching.enclosing import closing_leaves, enclosing_enters
from compensate.matching.groups import by_value
from compensate.matching.match import nesting, posting_records
from compensate.matching.nomessage import NO_MESSAGE, message_peers
from compensate.matching.p2p import members_of
from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    ENTER,
    ISEND,
    LEAVE,
    METRIC,
    NONE,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RECV,
    SEND,
    Definitions,
    Events,
    Trace,
    kind_table,
)
from compensate.pipeline.totals import add_counts

#: the record kinds of a location that may be trimmed
SIMPLE_KINDS = np.array([ENTER, LEAVE, SEND, RECV, COLL_BEGIN, COLL_END, PROGRAM_BEGIN,
                         PROGRAM_END, METRIC], dtype=np.int64)
_MPI = np.array([SEND, RECV, COLL_BEGIN, COLL_END], dtype=np.int64)
_P2P = np.array([SEND, RECV], dtype=np.int64)


_IS_SIMPLE, _IS_MPI, _IS_P2P = kind_table(SIMPLE_KINDS), kind_table(_MPI), kind_table(_P2P)
_NONE = np.zeros(0, dtype=np.int64)


@dataclass
class Calls:
    """The MPI calls of a simple location: ``start`` / ``end`` (the Enter and its
    Leave, inclusive) and ``peer`` (the one peer location of its point-to-point
    records, -1 for a collective call) of each; ``always``: the records every rank
    keeps (the first and the last, for the summary's span, with their Enter/Leave
    partners, so that the trimmed location still nests); ``nest``: the location's
    :func:`~compensate.matching.match.nesting` (None if empty), which the owner's
    matching takes instead of finding it again."""

    start: np.ndarray
    end: np.ndarray
    peer: np.ndarray
    always: np.ndarray
    nest: Any = None


def calls_of(defs: Definitions, loc: int, ev: Events, locations: set[int],
             open_calls: bool = False) -> Calls | None:
    """The calls of ``loc`` (:class:`Calls`), or None if the location is not simple
    (module docstring) and is sent whole. ``locations``: the trace's locations (a
    peer outside it, or an undefined communicator or rank, makes the location
    whole: matching then reports it as it does in one process).

    ``open_calls`` (a segment of the streamed run, :mod:`compensate.parallel.segments`,
    whose calls around the cut, ``main`` for one, close in a later segment): calls
    still open after the last record are allowed if they hold no MPI record of
    their own, and every rank keeps their Enters (the view then has the same open
    calls as the whole location)."""
    kind = ev.kind
    n = len(kind)
    if n == 0:
        return Calls(_NONE, _NONE, _NONE, _NONE)
    if not _IS_SIMPLE.take(kind).all():  # (take: 10x faster than indexing by int16)
        return None
    if n > 1 and bool((ev.time[1:] < ev.time[:-1]).any()):
        return None
    nest = nesting(kind, ev.region)
    if nest.problems or (len(nest.open_end) and not open_calls):
        return None
    mpi = np.flatnonzero(_IS_MPI.take(kind))
    # (the innermost call around each: its Enter and the Leave closing it)
    enter = enclosing_enters(nest.before, nest.enters, mpi)
    leave = closing_leaves(nest.before, nest.leaves, mpi)
    if bool(np.any(enter < 0)) or bool(np.any(leave < 0)):
        return None
    peer = np.full(len(mpi), -1, dtype=np.int64)
    p2p = np.flatnonzero(_IS_P2P.take(kind[mpi]))
    comm, rank = ev.comm[mpi[p2p]], ev.peer[mpi[p2p]].astype(np.int64)
    if bool(np.any((kind[mpi[p2p]] == RECV) & (ev.size[mpi[p2p]] == NONE))):
        return None  # (an unidentified receive: matching.nomessage reads the whole location)
    for c, sel in by_value(comm):
        members = members_of(defs, c, loc)
        if c not in defs.comms or not members:
            return None
        r = rank if sel is None else rank[sel]
        if len(r) and (int(r.min()) < 0 or int(r.max()) >= len(members)):
            return None
        table = np.asarray(members, dtype=np.int64)
        if len(members) <= max(len(r), 64):  # (each member once, not each record)
            outside = np.array([m not in locations for m in members], dtype=bool)
            if outside.any() and bool(outside[r].any()):
                return None
        elif not all(m in locations for m in set(table[r].tolist())):
            return None
        peer[p2p if sel is None else p2p[sel]] = table[r]
    always = {0, n - 1, *nest.open_end.tolist()}
    for i in (0, n - 1):  # the Enter/Leave partner of the first and last record
        before = int(nest.before[i])
        if kind[i] == ENTER:
            k = int(np.searchsorted(nest.enters[before + 1], i))
            closing = nest.leaves.get(before + 1, _NONE)
            if k < len(closing):  # (an open call has none)
                always.add(int(closing[k]))
        elif kind[i] == LEAVE:
            k = int(np.searchsorted(nest.leaves[before], i))
            always.add(int(nest.enters[before][k]))
    if not len(mpi):
        return Calls(_NONE, _NONE, _NONE, np.array(sorted(always), dtype=np.int64), nest)
    calls = _disjoint_calls(enter, leave, peer)
    if calls is None:
        return None
    return Calls(*calls, np.array(sorted(always), dtype=np.int64), nest)


def _disjoint_calls(enter: np.ndarray, leave: np.ndarray, peer: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(Enter, Leave, peer) of each call holding MPI records, given per MPI record (in
    record order) its call's Enter and Leave and its peer; None where a call holds
    another call's MPI records or records of several peers. A call holds only its
    own MPI records exactly when the runs of records of one call follow one another
    in record order without overlapping: a call entered before the previous run's
    call left is nested in it (calls nest) or holds it (a call met again after
    another's records), so one of the two holds the other's records."""
    first = np.flatnonzero(np.concatenate(([True], enter[1:] != enter[:-1])))
    starts, ends = enter[first], leave[first]
    if len(first) > 1 and bool(np.any(starts[1:] <= ends[:-1])):
        return None
    lo, hi = np.minimum.reduceat(peer, first), np.maximum.reduceat(peer, first)
    if bool(np.any(lo != hi)):  # a call with records of several peers (or kinds)
        return None
    return starts, ends, lo


def kept(calls: Calls, n: int, wanted: np.ndarray) -> np.ndarray:
    """The record indices a rank keeps of a location of ``n`` records: the calls
    ``wanted`` marks, whole, and the records every rank keeps."""
    mark = np.zeros(n + 1, dtype=np.int64)
    mark[calls.start[wanted]] += 1  # (distinct calls: distinct Enters, distinct Leaves)
    mark[calls.end[wanted] + 1] -= 1
    mask = np.cumsum(mark[:-1]) > 0
    mask[calls.always] = True
    return np.flatnonzero(mask)


def keep_for(calls: Calls | None, n: int, rank_locs: np.ndarray,
             whole: np.ndarray) -> np.ndarray | None:
    """What rank ``r`` keeps of another rank's location: None (whole) if it is not
    simple, else the indices of its collective calls and of its point-to-point
    calls with a peer that is one of ``r``'s locations (``rank_locs``) or a location
    sent whole (``whole``)."""
    if calls is None:
        return None
    wanted = (calls.peer < 0) | np.isin(calls.peer, np.concatenate((rank_locs, whole)))
    return kept(calls, n, wanted)


# -- the index map -------------------------------------------------------------------

def original(index: dict[int, np.ndarray], loc: int, idx: Any) -> Any:
    """The original record indices of trimmed positions ``idx`` of ``loc`` (``idx``
    itself for a location that is not trimmed)."""
    m = index.get(loc)
    if m is None:
        return idx
    out = m[np.asarray(idx, dtype=np.int64)]
    return int(out) if np.ndim(out) == 0 else out


def _original_record(index: dict[int, np.ndarray], loc: int, idx: int) -> int:
    """The original index of position ``idx`` of ``loc`` if ``loc`` is trimmed and
    has that position, else ``idx``."""
    m = index.get(loc)
    return int(m[idx]) if m is not None and 0 <= idx < len(m) else idx


def _remapped_fields(index: dict[int, np.ndarray], exc: Refusal) -> dict[str, Any]:
    """The fields of ``exc`` that name original records: its record (by its
    location), and the reason's text, which may name further records ("location
    L, record R": :func:`compensate.errors.renumber`)."""
    changes: dict[str, Any] = {"reason": remap_text(index, exc.reason)}
    if exc.location is not None and exc.record is not None:
        changes["record"] = _original_record(index, int(exc.location), int(exc.record))
    return changes


def remap_text(index: dict[int, np.ndarray], text: str | BaseException) -> str:
    """``text`` with every "location L, record R" of a trimmed location naming the
    original record (error messages and verification examples). An exception
    gives its message: a :class:`~compensate.errors.Refusal` (TraceError, ...)
    renamed by its fields (its ``record`` mapped through its ``location``'s index
    map), any other over the whole message (:func:`compensate.errors.renumber`)."""
    if isinstance(text, Refusal):
        return text.message(**_remapped_fields(index, text)) if index else str(text)
    if isinstance(text, BaseException):
        text = str(text)
    if not index:
        return text
    return renumber(text, lambda loc, r: _original_record(index, loc, r))


def remap_error(index: dict[int, np.ndarray], exc: BaseException) -> None:
    """Rename, in place, the records ``exc``'s message names to the original ones
    (:func:`remap_text`): a :class:`~compensate.errors.Refusal`'s fields and
    message together, the message of any other exception made of one string."""
    if not index:
        return
    if isinstance(exc, Refusal):
        exc.update(**_remapped_fields(index, exc))
    elif len(exc.args) == 1 and isinstance(exc.args[0], str):
        exc.args = (remap_text(index, exc.args[0]),)


# -- the counts of the whole trace -----------------------------------------------------

#: the message counts of :meth:`compensate.matching.Matching.counts` each rank counts
#: of the messages its own locations receive
MESSAGE_COUNTS = ("messages", "blocking", "nonblocking_send", "nonblocking_recv",
                  "synchronous", "to_self", "probes")


def local_counts(trace: Trace, matching: Matching, own: set[int]) -> dict[str, int]:
    """What this rank counts for the summary (summed over the ranks they are the
    one-process counts): its own records; of its matching's messages those its own
    locations receive (every rank's view holds all of them), by
    :data:`MESSAGE_COUNTS`; ``unmatched_sends``: the
    sends of its own locations that no receive matched (their sends, less the
    cancelled ones, less the messages its matching has from them)."""
    t = matching.table
    ids = t.loc_ids
    mine = np.array([loc in own for loc in ids], dtype=bool)
    own_rows = mine[t.recv_li] if len(t) else np.zeros(0, dtype=bool)
    recv = own_rows & ~t.probe  # (a probe's row ties a plain probe to a message)
    out = {"records": sum(len(trace.events[loc]) for loc in own),
           "messages": int(np.count_nonzero(recv)),
           "blocking": int(np.count_nonzero(recv & ~t.nonblocking_send & ~t.nonblocking_recv)),
           "nonblocking_send": int(np.count_nonzero(recv & t.nonblocking_send)),
           "nonblocking_recv": int(np.count_nonzero(recv & t.nonblocking_recv)),
           "synchronous": int(np.count_nonzero(recv & t.synchronous)),
           "to_self": int(np.count_nonzero(recv & (t.send_li == t.recv_li))),
           "probes": int(np.count_nonzero(own_rows & t.probe))}
    pos = {loc: li for li, loc in enumerate(ids)}
    from_li = (np.bincount(t.send_li[~t.probe], minlength=len(ids)) if len(t)
               else np.zeros(len(ids)))
    unmatched = 0
    for loc in own:
        ev = trace.events[loc]
        sends = message_peers(ev, np.flatnonzero((ev.kind == SEND) | (ev.kind == ISEND)))
        if not sends.size:
            continue
        cancelled = posting_records(trace, loc, ev)[1] if np.any(ev.kind == ISEND) else ()
        n = sends.size - int(np.count_nonzero(np.isin(sends, list(cancelled))))
        unmatched += n - int(from_li[pos[loc]]) if loc in pos else n
    out["unmatched_sends"] = unmatched
    out["devices"] = _own_device_counts(trace, matching, own)
    out.update(matching.unrecorded(own))  # (a trimmed ghost's call lost its records)
    return out


def _own_device_counts(trace: Trace, matching: Matching, own: set[int]) -> dict[str, int]:
    """The host/device links whose waiting record is on this rank's locations, by
    kind, and its launched device activities no host record launched: summed over
    the ranks, the one-process ``devices`` counts (a rank's view may hold another
    process's host thread trimmed, without its synchronize calls)."""
    out = {k: 0 for k in DEP_KINDS}
    for s in matching.devices.syncs:
        if s.recv[0] in own:
            out[s.kind] += 1
    launched = 0
    for loc in own:
        d = trace.definitions.locations.get(loc)
        if d is not None and d.is_device:
            k = trace.events[loc].kind
            launched += int(np.count_nonzero((k[:-1] == ENTER) & (k[1:] == PARAM)))
    out["unmatched"] = launched - out["launch"]
    return out


@dataclass
class ReducedMatching(Matching):
    """Rank 0's matching with the summary's counts of the whole trace
    (:meth:`counts`), when its view holds trimmed ghosts: ``reduced`` replaces the
    message counts of its own view."""

    reduced: dict = field(default_factory=dict)

    def counts(self) -> dict:
        out = super().counts()
        out.update(self.reduced)
        return out


def reduced_matching(matching: Matching, every: list[dict]) -> ReducedMatching:
    """Rank 0's :class:`ReducedMatching` from every rank's :func:`local_counts`."""
    reduced = {name: sum(d[name] for d in every) for name in MESSAGE_COUNTS}
    reduced["unmatched_sends"] = sum(d["unmatched_sends"] for d in every)
    reduced["devices"] = {k: sum(d["devices"][k] for d in every)
                          for k in every[0]["devices"]}
    for name in ("collective_begins_without_end", *NO_MESSAGE):
        reduced[name] = sum(d[name] for d in every)
    calls: dict[str, int] = {}
    for d in every:
        add_counts(calls, d["unrecorded_calls"])
    reduced["unrecorded_calls"] = dict(sorted(calls.items()))
    m = ReducedMatching(**{f.name: getattr(matching, f.name) for f in fields(Matching)},
                        reduced=reduced)
    m.unmatched_sends = reduced["unmatched_sends"]
    return m
