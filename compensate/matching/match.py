"""Link the records that depend on each other across locations (docs/design.md §4).

* Point-to-point: per (sender, receiver, communicator, tag) the k-th MpiSend matches
  the k-th MpiRecv (MPI's non-overtaking rule); ranks are mapped to locations
  through the communicator's group.
* Collectives: on each communicator, the k-th MpiCollectiveEnd of every member
  belongs to instance k; its "enter" is the MpiCollectiveBegin before it.
* Call structure: for every send and receive, the Enter of the enclosing MPI call
  (``enter.recv``) and the Leave that ends it (``exit.send``), which the
  compensation rules compare.

Structural problems (time going backwards, a receive without a send, a collective
instance with missing members) raise :class:`TraceError` naming the file, the
location(s) and the record index. Enter/Leave that do not nest are paired by region
and counted (:class:`Nesting`); ``strict`` refuses them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from compensate.matching.collectives import (
    Instance,
    collective_pairs,
    refuse_off_member,
    thread_ranks,
)
from compensate.matching.devices import DeviceDeps, match_devices
from compensate.matching.instances import by_member, instances, operations, undefined_comm
from compensate.matching.legacy import match_legacy
from compensate.matching.nomessage import NO_MESSAGE
from compensate.matching.p2p import Message, MessageTable, match_p2p
from compensate.matching.partitioned import PartitionedDeps, match_partitioned
from compensate.matching.rma import RmaDeps, match_rma
from compensate.matching.tasks import match_tasks
from compensate.matching.threads import ThreadDeps, match_threads
from compensate.matching.unrecorded import communicating_regions, unrecorded_calls
from compensate.model import (
    COLL_END,
    ENTER,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    KIND_NAMES,
    LEAVE,
    NBC_COMPLETE,
    NBC_REQUEST,
    PROBE,
    RECV,
    REQUEST_CANCELLED,
    SEND,
    Events,
    Trace,
    TraceError,
    kind_table,
)


@dataclass
class Matching:
    """The dependencies of a trace: matched messages (as columns, :attr:`table`) and
    collective instances. :attr:`messages` gives the messages as objects."""

    table: MessageTable = field(default_factory=MessageTable.empty)
    instances: list[Instance] = field(default_factory=list)
    #: thread synchronisation: fork/join, locks, create/join (:mod:`.threads`)
    threads: ThreadDeps = field(default_factory=ThreadDeps)
    #: host/device: launch -> kernel, kernel end -> synchronize (:mod:`.devices`)
    devices: DeviceDeps = field(default_factory=DeviceDeps)
    #: MPI-4 partitioned: Pready -> Parrived / receive completion (:mod:`.partitioned`)
    partitioned: PartitionedDeps = field(default_factory=PartitionedDeps)
    #: MPI one-sided: fences, post/start/complete/wait, locks, transfers (:mod:`.rma`)
    rma: RmaDeps = field(default_factory=RmaDeps)
    unmatched_sends: int = 0
    #: given: per location, its receives a stream's look-ahead found past a gap on
    #: their channel (:mod:`compensate.pipeline.unclosed`), left unpaired
    past_gaps: dict = field(default_factory=dict)
    #: given: per location, the ticks its times were moved by (a clock pass's first
    #: guess), taken off where the gap rule compares times: it pairs on the times
    #: as read, as the whole trace's first matching does
    gap_shift: dict = field(default_factory=dict)
    cancelled_requests: int = 0
    unknown_ops: int = 0
    #: what the tracer did not record, per location (only where there is some):
    #: ``{location: (MPI calls that communicate but hold no record of it, by name
    #: (:mod:`compensate.matching.unrecorded`), MpiCollectiveBegin records no End
    #: follows (:func:`collective_pairs`))}``; both are local time. Summed by
    #: :meth:`unrecorded`
    unrecorded_by_location: dict = field(default_factory=dict)
    #: point-to-point records that carry no message the matching can identify, per
    #: location (only where there are some): ``{location: (MPI_PROC_NULL records,
    #: unidentified receives, receives left unmatched after one, receives past a
    #: channel's gap)}``
    #: (:mod:`compensate.matching.nomessage`); local time. Summed by :meth:`unrecorded`
    no_message_by_location: dict = field(default_factory=dict)
    #: Enter/Leave that do not nest (:class:`Nesting`): Leaves closing a call that
    #: was not the innermost one, Leaves without an open Enter of their region
    leaves_out_of_order: int = 0
    leaves_without_enter: int = 0
    #: the first of them in record order (time, then location id): location,
    #: record index, time and what is wrong; None if every location nests
    nesting_first: dict | None = None
    #: per location, its Enters still open after its last record (entry order)
    open_calls: dict = field(default_factory=dict)

    @cached_property
    def messages(self) -> list[Message]:
        """Every matched message as a :class:`Message` (built on first use); not the
        table's rows that tie a plain probe to a message (``probe``)."""
        return [m for m in self.table.rows() if not m.probe]

    def counts(self) -> dict:
        """How many dependencies of each kind the trace has (for the summary)."""
        t = self.table
        by_cls: dict[str, int] = {}
        for inst in self.instances:
            key = inst.cls + (" nonblocking" if inst.nonblocking else "") + (
                "" if inst.synchronising else " (local)")
            by_cls[key] = by_cls.get(key, 0) + 1
        m = ~t.probe  # the messages; the other rows tie a plain probe to one
        return {
            "messages": t.message_count,
            "blocking": int(np.count_nonzero(m & ~t.nonblocking_send & ~t.nonblocking_recv)),
            "nonblocking_send": int(np.count_nonzero(m & t.nonblocking_send)),
            "nonblocking_recv": int(np.count_nonzero(t.nonblocking_recv)),
            "synchronous": int(np.count_nonzero(t.synchronous)),
            "to_self": int(np.count_nonzero(m & (t.send_li == t.recv_li))),
            "probes": int(np.count_nonzero(t.probe)),
            "unmatched_sends": self.unmatched_sends,
            "cancelled_requests": self.cancelled_requests,
            "collectives": dict(sorted(by_cls.items())),
            "unknown_collective_ops": self.unknown_ops,
            **self.unrecorded(),
            "threads": self.threads.counts(),
            "devices": self.devices.counts(),
            "partitioned": self.partitioned.counts(),
            "rma": self.rma.counts(),
            "nesting": {"leaves_out_of_order": self.leaves_out_of_order,
                        "leaves_without_enter": self.leaves_without_enter},
        }

    def unrecorded(self, own: Collection[int] | None = None) -> dict:
        """The summary's ``unrecorded_calls`` (by call name),
        ``collective_begins_without_end``, ``proc_null_records``,
        ``unidentified_receives``, ``receives_left_unmatched`` and
        ``receives_past_a_gap``, over
        :attr:`unrecorded_by_location` and :attr:`no_message_by_location` (only the
        locations ``own``, if given: a distributed rank's)."""
        calls: dict[str, int] = {}
        begins = 0
        for loc, (named, n) in self.unrecorded_by_location.items():
            if own is None or loc in own:
                for name, k in named.items():
                    calls[name] = calls.get(name, 0) + k
                begins += n
        skipped = [0] * len(NO_MESSAGE)
        for loc, counts in self.no_message_by_location.items():
            if own is None or loc in own:
                skipped = [a + b for a, b in zip(skipped, counts, strict=True)]
        return {"collective_begins_without_end": begins,
                "unrecorded_calls": dict(sorted(calls.items())),
                **dict(zip(NO_MESSAGE, skipped, strict=True))}

    def nesting_summary(self) -> dict:
        """What the summary says about Enter/Leave nesting: the counts and the first
        offending record (file, location, record index, regions)."""
        return {"leaves_out_of_order": self.leaves_out_of_order,
                "leaves_without_enter": self.leaves_without_enter,
                "first": self.nesting_first}


def _where(trace: Trace, loc: int, idx: int | None = None) -> dict:
    return {"source": trace.source, "location": loc, "index": idx}


@dataclass
class Nesting:
    """The call structure of one location under the tolerant nesting rule.

    The rule (docs/design.md §4, "Call nesting"): a Leave closes the most recent
    still-open Enter *of its own region*; a Leave with no open Enter of its region
    closes nothing. Records stay where they are. In a well-nested location this is
    the usual stack; Score-P traces whose user regions were left out of order (or
    that start with a Leave) get the same pairs a reader would draw by region.

    The structure is encoded by *levels*, the nesting depth of a well-nested
    location: a call's level is one more than the level of the innermost call open
    when it was entered (the innermost call is the latest-entered one still open).
    Calls on one level never overlap (one entered while another of that level is
    open would have a higher level), so the consumers' lookups by level stay
    valid: the innermost call around a record is the last Enter on the record's
    level before it, and its Leave the first Leave on that level after it.

    ``before``: per record, the level of the innermost open call (for an Enter,
    before it opens; for a Leave, the level of the call it closes); ``enters`` /
    ``leaves``: {level: Enter / closing-Leave indices}, the k-th Leave of a level
    closing its k-th Enter (calls never closed come last on their level);
    ``open_end``: Enters still open after the last record, in entry order;
    ``out_of_order``: Leaves that closed a call that was not the innermost one;
    ``orphans``: Leaves without an open Enter of their region; ``first``: the
    first of these in record order as ``(index, message)``, or None.
    """

    before: np.ndarray
    enters: dict[int, np.ndarray]
    leaves: dict[int, np.ndarray]
    open_end: np.ndarray
    out_of_order: np.ndarray
    orphans: np.ndarray
    first: tuple[int, str] | None = None

    @property
    def problems(self) -> int:
        return len(self.out_of_order) + len(self.orphans)


_NO_INDEX = np.zeros(0, dtype=np.int64)


def nesting(kind: np.ndarray, region: np.ndarray,
            region_name: Callable[[int], str] = str) -> Nesting:
    """The call structure (:class:`Nesting`) of one location's records, given their
    kind and region columns; vectorised when the location nests, a walk over its
    Enter/Leave records when it does not. ``region_name`` names regions in
    :attr:`Nesting.first`."""
    # +1 / -1 / 0 per record (int8 views of the masks: 4x faster than np.where; the
    # cumulative sum is in the platform integer, as before)
    step = (kind == ENTER).view(np.int8) - (kind == LEAVE).view(np.int8)
    after = np.cumsum(step)
    before = after - step
    enters_idx = np.flatnonzero(kind == ENTER)
    leaves_idx = np.flatnonzero(kind == LEAVE)
    enters = _by_level(after[enters_idx], enters_idx)
    leaves = _by_level(before[leaves_idx], leaves_idx)
    nested = not (after.size and after.min() < 0)
    if nested:  # at each depth Enters and Leaves alternate: the k-th Leave closes the k-th
        for d, lv in leaves.items():
            en = enters.get(d, _NO_INDEX)
            if np.any(region[en[:len(lv)]] != region[lv]):
                nested = False
                break
    if not nested:
        return _nesting_walk(kind, region, region_name)
    # Enters still open at the end: after them the depth never falls below theirs
    suffix_min = np.minimum.accumulate(after[::-1])[::-1] if after.size else after
    open_end = enters_idx[suffix_min[enters_idx] >= after[enters_idx]]
    return Nesting(before, enters, leaves, open_end, _NO_INDEX, _NO_INDEX)


def _by_level(levels: np.ndarray, idx: np.ndarray) -> dict[int, np.ndarray]:
    """{level: the indices ``idx`` on that level, in record order}."""
    out: dict[int, np.ndarray] = {}
    if idx.size:  # (slices of one sorted array: np.split costs ~10 us a call)
        order = np.argsort(levels, kind="stable")
        lv, ix = levels[order], idx[order]
        bounds = [0, *(np.flatnonzero(lv[1:] != lv[:-1]) + 1).tolist(), len(lv)]
        for d, a, b in zip(lv[bounds[:-1]].tolist(), bounds[:-1], bounds[1:], strict=True):
            out[d] = ix[a:b]
    return out


def _nesting_walk(kind: np.ndarray, region: np.ndarray,
                  region_name: Callable[[int], str]) -> Nesting:
    """:func:`nesting` for a location that does not nest: one pass over its
    Enter/Leave records with the stack of open calls (entry order)."""
    marks = np.flatnonzero((kind == ENTER) | (kind == LEAVE))
    stack: list[tuple[int, int, int]] = []  # (region, level, Enter index) of open calls
    before_m = np.zeros(len(marks), dtype=np.int64)  # ``before`` of each mark
    inner_m = np.zeros(len(marks), dtype=np.int64)  # innermost level after each mark
    e_lvl: list[int] = []
    e_idx: list[int] = []
    l_lvl: list[int] = []
    l_idx: list[int] = []
    out_of_order: list[int] = []
    orphans: list[int] = []
    first: tuple[int, str] | None = None
    kinds = kind[marks].tolist()
    regions = region[marks].tolist()
    for m, (i, k, r) in enumerate(zip(marks.tolist(), kinds, regions, strict=True)):
        top = stack[-1][1] if stack else 0
        if k == ENTER:
            before_m[m] = top
            stack.append((r, top + 1, i))
            e_lvl.append(top + 1)
            e_idx.append(i)
        else:
            pos = len(stack) - 1
            while pos >= 0 and stack[pos][0] != r:
                pos -= 1
            if pos < 0:
                before_m[m] = top
                orphans.append(i)
                if first is None:
                    first = (i, f"Leave of region {region_name(r)} without an open Enter "
                                f"of that region")
            else:
                _, lvl, _ = stack.pop(pos)
                before_m[m] = lvl
                l_lvl.append(lvl)
                l_idx.append(i)
                if pos < len(stack):  # calls entered after it are still open
                    out_of_order.append(i)
                    if first is None:
                        inner = stack[-1]
                        first = (i, f"Leave of region {region_name(r)} while region "
                                    f"{region_name(inner[0])}, entered after it, is still "
                                    f"open")
        inner_m[m] = stack[-1][1] if stack else 0
    # other records: the innermost level after the last Enter/Leave before them
    n = len(kind)
    pos = np.searchsorted(marks, np.arange(n), side="right") - 1
    before = np.where(pos >= 0, inner_m[np.maximum(pos, 0)] if marks.size else 0, 0)
    before = before.astype(np.int64)
    before[marks] = before_m
    as_array = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return Nesting(before, _by_level(as_array(e_lvl), as_array(e_idx)),
                   _by_level(as_array(l_lvl), as_array(l_idx)),
                   as_array([c[2] for c in stack]), as_array(out_of_order),
                   as_array(orphans), first)


def structure_of(trace: Trace, loc: int, ev: Events, strict: bool = False) -> Nesting:
    """Check time order on one location and find its call structure (:func:`nesting`).

    ``strict``: refuse Enter/Leave that do not nest (a :class:`TraceError` naming the
    first offending record), as ``--strict`` asks."""
    t = ev.time
    if len(t) > 1:
        back = np.flatnonzero(np.diff(t) < 0)
        if back.size:
            i = int(back[0]) + 1
            raise TraceError(
                f"time {int(t[i])} is before the previous record's {int(t[i - 1])}",
                **_where(trace, loc, i))
    names = trace.definitions.regions
    nest = nesting(ev.kind, ev.region, lambda r: repr(names.get(r, str(r))))
    if strict and nest.problems:
        i = nest.first[0]
        if len(nest.orphans) and int(nest.orphans[0]) == i:
            message = "Leave without a matching Enter"
        else:
            message = f"Enter/Leave do not nest: {nest.first[1]}"
        raise TraceError(f"{message} (--strict)", **_where(trace, loc, i))
    return nest


def check_structure(trace: Trace, loc: int, ev: Events,
                    strict: bool = False) -> tuple[np.ndarray, dict, dict]:
    """Check time order and find the call structure of one location.

    Returns (level before each record, {level: Enter indices whose call opens that
    level}, {level: Leave indices closing that level}): in a well-nested location
    the levels are the nesting depths; see :class:`Nesting` for the tolerant rule
    (``strict`` refuses mis-nested Enter/Leave instead).
    """
    nest = structure_of(trace, loc, ev, strict)
    return nest.before, nest.enters, nest.leaves


#: the records :func:`posting_records` reads
_POSTING = kind_table(ISEND, IRECV_REQUEST, IRECV, REQUEST_CANCELLED, NBC_REQUEST, NBC_COMPLETE)


def posting_records(trace: Trace, loc: int, ev: Events) -> tuple[dict, set]:
    """For one location: {MpiIrecv/NonBlockingCollectiveComplete index: index of the
    request record that posted it}, and the indices of cancelled MpiIsend /
    MpiIrecvRequest records. Request ids are reused once a request completes, so the
    posting record is the latest one with that id before the completion."""
    posted: dict[int, int] = {}
    cancelled: set[int] = set()
    open_p2p: dict[int, int] = {}
    open_nbc: dict[int, int] = {}
    kinds = ev.kind
    for i in np.flatnonzero(_POSTING.take(kinds)).tolist():
        k, r = int(kinds[i]), int(ev.request[i])
        if k in (ISEND, IRECV_REQUEST):
            open_p2p[r] = i
        elif k == NBC_REQUEST:
            open_nbc[r] = i
        elif k == IRECV:
            posted[i] = open_p2p.pop(r, i)  # no request record: posted where completed
        elif k == NBC_COMPLETE:
            if r not in open_nbc:
                raise TraceError(f"NonBlockingCollectiveComplete of request {r} without its "
                                 f"NonBlockingCollectiveRequest", **_where(trace, loc, i))
            posted[i] = open_nbc.pop(r)
        elif k == REQUEST_CANCELLED and r in open_p2p:
            cancelled.add(open_p2p.pop(r))
    return posted, cancelled


def match(trace: Trace, eager_limit: int | None = None, strict: bool = False,
          past_gaps: dict | None = None, gap_shift: dict | None = None,
          nests: dict[int, Nesting] | None = None) -> Matching:
    """Check structure and link sends to receives and collective ends into instances.

    ``eager_limit``: blocking MPI_Send messages larger than this many bytes are
    treated as synchronous (rendezvous), like MPI_Ssend always is. Enter/Leave that
    do not nest are counted (:attr:`Matching.leaves_out_of_order`, ...) and paired
    by region (:class:`Nesting`); ``strict`` refuses them instead. ``past_gaps``:
    per location, the records of receives known to lie past a gap on their channel
    (a segment's, from the stream's look-ahead), left unpaired; ``gap_shift``: per
    location, the ticks its times were moved by, which the gap rule takes off.
    ``nests``: the call structure (:func:`nesting`) already found of locations in
    time order whose Enter/Leave nest (a rank of the distributed run found its own
    locations' when it trimmed them for the others).
    """
    defs = trace.definitions
    result = Matching(past_gaps=past_gaps or {}, gap_shift=gap_shift or {})
    structure = {}
    posting = {}
    first: tuple | None = None
    talking = communicating_regions(defs)
    for loc, ev in trace.events.items():
        if loc not in defs.locations:
            raise TraceError("records for an undefined location", **_where(trace, loc))
        calls = unrecorded_calls(defs, ev, talking)
        if calls:
            result.unrecorded_by_location[loc] = (calls, 0)
        nest = nests.get(loc) if nests else None
        if nest is None:
            nest = structure_of(trace, loc, ev, strict)
        structure[loc] = (nest.before, nest.enters, nest.leaves)
        result.open_calls[loc] = nest.open_end
        if nest.problems:
            result.leaves_out_of_order += len(nest.out_of_order)
            result.leaves_without_enter += len(nest.orphans)
            i, what = nest.first
            key = (int(ev.time[i]), loc)
            if first is None or key < first[0]:
                first = (key, {"file": trace.source, "location": loc, "index": i,
                               "time": int(ev.time[i]), "problem": what})
        posting[loc] = posting_records(trace, loc, ev)
        result.cancelled_requests += len(posting[loc][1])
    result.nesting_first = first[1] if first else None
    _refuse_inter_communicators(trace)

    for matcher in MATCHERS:
        matcher(trace, structure, posting, eager_limit, result)
    return result


def _refuse_inter_communicators(trace: Trace) -> None:
    """A message or collective on an MPI inter-communicator (its ranks are those of
    the other group, and its collectives are rooted across the two groups) is not
    modelled: refused at its first record, instead of being taken for a
    communicator without members (MPI_COMM_SELF)."""
    inter = [c for c, comm in trace.definitions.comms.items() if comm.inter]
    if not inter:
        return
    kinds = np.array([SEND, ISEND, RECV, IRECV, PROBE, COLL_END, NBC_REQUEST, NBC_COMPLETE])
    for loc, ev in trace.events.items():
        hit = np.flatnonzero(np.isin(ev.comm, inter) & np.isin(ev.kind, kinds))
        if hit.size:
            i = int(hit[0])
            c = trace.definitions.comms[int(ev.comm[i])]
            raise TraceError(
                f"{KIND_NAMES[ev.kind[i]]} on MPI inter-communicator {c.id} "
                f"(\"{c.name}\"): communication over inter-communicators is not modelled",
                **_where(trace, loc, i))


def match_collectives(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
                      result: Matching) -> None:
    """Collective instances: per communicator, the k-th collective each member posted
    (blocking MpiCollectiveBegin or NonBlockingCollectiveRequest) is instance k
    (:mod:`compensate.matching.instances`)."""
    defs = trace.definitions
    ranks = thread_ranks(defs)  # (a member's process's other threads: the member's)
    ops_of: dict = defaultdict(lambda: defaultdict(list))  # key -> member -> [Ops]
    for loc, ev in trace.events.items():
        begin_idx, end_idx, orphans, stray = collective_pairs(ev.kind, structure[loc][0])
        if stray >= 0:
            raise TraceError("MpiCollectiveEnd without its MpiCollectiveBegin",
                             **_where(trace, loc, stray))
        if orphans:
            calls = result.unrecorded_by_location.get(loc, ({}, 0))[0]
            result.unrecorded_by_location[loc] = (calls, orphans)
        done = np.flatnonzero(ev.kind == NBC_COMPLETE)
        posted = posting[loc][0]
        b = np.concatenate((begin_idx, [posted[x] for x in done.tolist()])).astype(np.int64)
        i = np.concatenate((end_idx, done)).astype(np.int64)
        refuse_off_member(trace, loc, np.sort(i), ranks)
        if not len(i):
            continue
        order = np.lexsort((i, b))
        b, i = b[order], i[order]
        undefined_comm(trace, loc, i)
        ops = operations(trace, loc, b, i)
        comm = ev.comm[i]
        comms, first = np.unique(comm, return_index=True)
        for c in comms[np.argsort(first, kind="stable")].tolist():  # (first seen first)
            key = c if defs.comms[c].members else (c, loc)
            ops_of[key][ranks.get(c, {}).get(loc, loc)].append(ops.take(comm == c))
    for key, per_loc in ops_of.items():
        comm = key if isinstance(key, int) else key[0]
        members = defs.comms[comm].members or (key[1],)
        made, unknown = instances(trace, comm, members,
                                  {m: by_member(parts) for m, parts in per_loc.items()})
        result.instances += made
        result.unknown_ops += unknown


def match_messages(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
                   result: Matching) -> None:
    """Point-to-point: FIFO queues of sends per (sender, receiver, comm, tag), in
    posting order; receives take them in *their* posting order (MPI non-overtaking)."""
    result.table, result.unmatched_sends, result.no_message_by_location = match_p2p(
        trace, structure, posting, eager_limit, result.past_gaps, result.gap_shift)


def match_thread_syncs(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
                       result: Matching) -> None:
    """Thread synchronisation (OpenMP fork/join and locks, Pthreads create/join):
    :func:`compensate.matching.threads.match_threads`."""
    result.threads = match_threads(trace)
    match_legacy(trace, result.threads)
    match_tasks(trace, result.threads)


def match_device_syncs(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
                       result: Matching) -> None:
    """Accelerators (kernel launch -> device Enter, device Leave -> host
    synchronize): :func:`compensate.matching.devices.match_devices`."""
    result.devices = match_devices(trace)


def match_rma_syncs(trace: Trace, structure: dict, posting: dict, eager_limit: int | None,
                    result: Matching) -> None:
    """MPI one-sided communication (R10): :func:`compensate.matching.rma.match_rma`."""
    result.rma = match_rma(trace)


def match_partitioned_ops(trace: Trace, structure: dict, posting: dict,
                          eager_limit: int | None, result: Matching) -> None:
    """MPI-4 partitioned point-to-point (Pready -> Parrived or the receive's
    completion): :func:`compensate.matching.partitioned.match_partitioned`."""
    result.partitioned = match_partitioned(trace)


#: What :func:`match` links, one matcher per family of records, each filling its
#: part of the :class:`Matching`, in the order of the families of
#: :mod:`compensate.families`, whose ``MATCHERS`` must equal this (that registry
#: imports these functions, so this module cannot take the table from it; a new
#: kind of dependency adds its matcher here and its entry there).
MATCHERS = (match_messages, match_collectives, match_thread_syncs, match_device_syncs,
            match_partitioned_ops, match_rma_syncs)


__all__ = ["MATCHERS", "Matching", "Nesting", "check_structure", "match", "nesting",
           "structure_of"]
