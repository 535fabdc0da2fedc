"""The registry of dependency families: one :class:`Family` entry per family of
dependencies between locations (docs/design.md §5 "One handler per dependency
kind", §9), with every part the pipeline has of it, so that no part lives only in a
hand-kept list elsewhere:

* ``matcher``: its step of :func:`compensate.matching.match` (an entry of
  :data:`compensate.matching.match.MATCHERS`, which :data:`MATCHERS` here must
  equal, in the same order);
* ``rules``: its rows of the engine's handler table
  (:mod:`compensate.engine.kinds`) and the modules that build them;
* ``check``: its invariant of R7 (:mod:`compensate.verify`, one module per
  family) and ``counter``: the :class:`~compensate.verify.result.Verification`
  counter it adds to;
* ``cut``: the record kinds that open and close a span no stream cut may fall
  inside (:mod:`compensate.pipeline.cuts`), and what the cutter does for the
  family that kinds alone do not say;
* ``reads``: what its check reads of other ranks' locations in the distributed
  run (:func:`compensate.parallel.verification.remote_reads`).

A part another family holds for this one is :class:`Shared` (a lock's matcher is
the thread family's); a part the family has no use for is :class:`Absent`; both
say why. Derived here: :data:`CHECKS` and :data:`MEASURED_CHECKS` (the order in
which :func:`compensate.verify.verify` runs the invariants: an example's key starts
with its check's number, so the order is fixed), :data:`MATCHERS`, :data:`READS`
and :func:`cut_kinds`. A new family is one entry here plus its modules (and its row
in the engine's table, which this module imports and so cannot build;
tests/test_families.py checks that every row belongs to one family).

This module imports matching, the engine's handler table and the invariants; they
do not import it (:func:`compensate.verify.verify` does when it runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from compensate.engine.kinds import (
    devices,
    handles,
    nonblocking,
    nton,
    ntoone,
    oneton,
    p2p,
    partitioned,
    rma,
    scan,
    synchronous,
    threads,
)
from compensate.matching import Matching
from compensate.matching.match import (
    match_collectives,
    match_device_syncs,
    match_messages,
    match_partitioned_ops,
    match_rma_syncs,
    match_thread_syncs,
)
from compensate.model import KIND_CODE, Trace
from compensate.verify.collectives import collective_reads, verify_collectives
from compensate.verify.devices import device_reads, verify_devices
from compensate.verify.messages import message_reads, verify_messages
from compensate.verify.metrics import verify_metrics
from compensate.verify.order import verify_order
from compensate.verify.partitioned import partitioned_reads, verify_partitioned
from compensate.verify.result import Verification
from compensate.verify.rma import rma_reads, verify_rma
from compensate.verify.tasks import verify_tasks
from compensate.verify.threads import thread_reads, verify_threads

#: a step of :func:`compensate.matching.match`: (trace, call structure, posting
#: records, eager limit, the matching it fills)
Matcher = Callable[[Trace, dict, dict, int | None, Matching], None]
#: an invariant over the matching: (output trace, matching, findings)
Check = Callable[[Trace, Matching, Verification], None]
#: an invariant over the measured trace: (output trace, measured trace, findings)
MeasuredCheck = Callable[[Trace, Trace, Verification], None]
#: what a check reads of locations not in ``own``: (matching, own) -> (location,
#: record indices) pairs
Reads = Callable[[Matching, set[int]], Iterable[tuple[int, Any]]]


@dataclass(frozen=True)
class Shared:
    """A part that family ``family`` holds for this one too; ``why``: where and how."""

    family: str
    why: str


@dataclass(frozen=True)
class Absent:
    """A part this family has no use for, and ``why``."""

    why: str


@dataclass(frozen=True)
class Rows:
    """A family's rows of the engine's handler table: ``table``, the name of a table
    of :mod:`compensate.engine.kinds`; ``keys``, its rows (None: the whole table);
    ``modules``, the rule modules whose builders those rows hold."""

    table: str
    keys: tuple | None
    modules: tuple[ModuleType, ...]


@dataclass(frozen=True)
class Cut:
    """What no stream cut may fall inside, for one family: a span opened by a record
    of a kind in ``opens`` and closed by one of a kind in ``closes`` (names of
    :data:`compensate.model.KIND_NAMES`; an opened span with no closing kind is never
    closed, no cut comes after it). ``in_flight``: only for a cutter that counts
    messages in flight (a distributed run's ranks leave them to an exact check).
    ``beyond``: what the cutter does for this family that kinds alone do not say
    ("" if nothing)."""

    opens: tuple[str, ...] = ()
    closes: tuple[str, ...] = ()
    in_flight: bool = False
    beyond: str = ""

    @property
    def open_codes(self) -> tuple[int, ...]:
        return tuple(KIND_CODE[k] for k in self.opens)

    @property
    def close_codes(self) -> tuple[int, ...]:
        return tuple(KIND_CODE[k] for k in self.closes)


@dataclass(frozen=True)
class Family:
    """One family of dependencies and its part in each step (module docstring).
    ``measured``: its check reads the measured trace instead of the matching
    (a :data:`MeasuredCheck`, run only when the measured trace is given)."""

    name: str
    what: str
    matcher: Matcher | Shared | Absent
    rules: Rows | Shared | Absent
    check: Check | MeasuredCheck | Shared | Absent
    counter: str | Shared
    cut: Cut | Shared | Absent
    reads: Reads | Shared | Absent
    measured: bool = False


#: the parts of a :class:`Family` that each family has, shares or says it lacks
PARTS = ("matcher", "rules", "check", "counter", "cut", "reads")

_OWN_PROCESS = "reads only the checked location's own process, which a rank owns whole"

#: Every family, in the order of :data:`CHECKS` (and of :data:`MATCHERS`, and of the
#: engine's handler table): an example's key starts with its check's number.
FAMILIES: tuple[Family, ...] = (
    Family(
        "order", "every location's records in their original order (R1, R7)",
        matcher=Absent("matching checks every location's time order and call "
                       "structure before any family's step (compensate.matching.match."
                       "structure_of)"),
        rules=Absent("R1 times every record as its run's anchor plus a running sum "
                     "(compensate.engine.runsums, compensate.engine.graph): no row"),
        check=verify_order, counter="order",
        cut=Absent("a location's own past crosses every cut as its context records "
                   "(compensate.pipeline.cuts)"),
        reads=Absent(_OWN_PROCESS)),
    Family(
        "message", "point-to-point messages, eager and synchronous (R2, R5)",
        matcher=match_messages,
        rules=Rows("MESSAGE_KINDS", ("eager", "synchronous"), (p2p, synchronous)),
        check=verify_messages, counter="messages",
        cut=Cut(opens=("MpiSend", "MpiIsend"),
                closes=("MpiRecv", "MpiIrecv", "MpiMrecv", "MpiImrecv"), in_flight=True,
                beyond="the call around a send is open until the Leave that closes it "
                       "(found by nesting, across chunks); a request (MpiIsend, "
                       "MpiIrecvRequest) is open until the record of the same request id "
                       "that completes or cancels it (MpiIsendComplete, MpiIrecv, "
                       "MpiRequestCancelled), and a cancelled MpiIsend's message is no "
                       "longer in flight; a cut needs every channel's sends and "
                       "receives before it balanced (Cutter.aligned)"),
        reads=message_reads),
    Family(
        "probe", "MPI_Mprobe/Improbe and the plain probes that found a message (R2)",
        matcher=Shared("message", "compensate.matching.p2p.match_p2p makes a matched "
                                  "probe its message's receive record and ties a plain "
                                  "MPI_Probe/Iprobe to the message it found (probe rows)"),
        rules=Shared("message", "rows of the message table: R2 with no receive copy "
                                "(compensate.engine.kinds.p2p)"),
        check=Shared("message", "verify_messages checks the probe rows"),
        counter=Shared("message", "counted with the messages"),
        cut=Cut(opens=("MpiProbe",), closes=("MpiMrecv", "MpiImrecv"),
                beyond="only an MpiProbe that took its message (a message id in "
                       "size_recv: MPI_Mprobe/Improbe, not MPI_Probe/Iprobe) opens"),
        reads=Shared("message", "message_reads reads the send of every row")),
    Family(
        "collective", "MPI collectives by class, blocking and nonblocking (R3-R5)",
        matcher=match_collectives,
        rules=Rows("COLLECTIVE_KINDS", None,
                   (nton, oneton, ntoone, scan, handles, nonblocking)),
        check=verify_collectives, counter="collectives",
        cut=Cut(opens=("MpiCollectiveBegin",), closes=("MpiCollectiveEnd",),
                beyond="a nonblocking collective is open from its "
                       "NonBlockingCollectiveRequest to the NonBlockingCollectiveComplete "
                       "of the same request id; a cut needs every communicator's members "
                       "through the same number of collectives (Cutter.aligned)"),
        reads=collective_reads),
    Family(
        "thread", "OpenMP fork/join and barriers, Pthreads create/join (R8)",
        matcher=match_thread_syncs,
        rules=Rows("SYNC_KINDS", ("threads",), (threads,)),
        check=verify_threads, counter="threads",
        cut=Cut(opens=("ThreadFork", "ThreadCreate", "ThreadEnd", "OmpFork"),
                closes=("ThreadJoin", "ThreadBegin", "ThreadWait", "OmpJoin")),
        reads=thread_reads),
    Family(
        "lock", "lock release -> next acquisition (R8)",
        matcher=Shared("thread", "compensate.matching.threads.match_threads links each "
                                 "acquisition to the release before it; "
                                 "compensate.matching.lock_order marks implied ones"),
        rules=Shared("thread", "lock links are thread links (threads.build_all)"),
        check=Shared("thread", "verify_threads checks the lock links"),
        counter=Shared("thread", "counted with the threads"),
        cut=Cut(beyond="a ThreadReleaseLock whose acquisition comes after the cut is "
                       "carried among its location's context records (compensate.engine."
                       "carry); in a trace that defines Pthread call regions, an EZTrace "
                       "lock or barrier call's Enter (with its object), a pthread_create/"
                       "_join Enter (closed by a ThreadCreate/ThreadWait where the tracer "
                       "writes one) open a span never closed, no cut after it; a "
                       "ThreadBegin/ThreadEnd with no creator opens and closes nothing "
                       "(compensate.matching.pthreads.cut_steps)"),
        reads=Shared("thread", "thread_reads reads the sends of every thread link")),
    Family(
        "device", "kernel launch -> kernel, device activity -> host synchronize (R9)",
        matcher=match_device_syncs,
        rules=Rows("SYNC_KINDS", ("devices",), (devices,)),
        check=verify_devices, counter="devices",
        cut=Cut(beyond="no cut inside a host synchronize call: its Enter/Leave, known "
                       "by region (compensate.matching.devices.is_synchronize), not by "
                       "kind; a launch whose kernel comes after the cut, and device "
                       "activity a later synchronize needs, are carried "
                       "(compensate.engine.carry)"),
        reads=device_reads),
    Family(
        "task", "OpenMP task create -> switch and complete, completes -> the barrier "
                "or taskwait that waited for them (R8)",
        matcher=Shared("thread", "match_thread_syncs calls "
                                 "compensate.matching.tasks.match_tasks"),
        rules=Shared("thread", "task links are thread links (threads.build_all)"),
        check=verify_tasks,
        counter=Shared("thread", "counted with the threads"),
        cut=Shared("thread", "tasks run inside a parallel region, which no cut falls "
                             "inside"),
        reads=Shared("thread", "thread_reads reads the task links; verify_tasks "
                               + _OWN_PROCESS)),
    Family(
        "partitioned", "MPI-4 partitioned: Pready -> Parrived and completions (R11)",
        matcher=match_partitioned_ops,
        rules=Rows("SYNC_KINDS", ("partitioned",), (partitioned,)),
        check=verify_partitioned, counter="partitioned",
        cut=Cut(opens=("MpiPsendInit", "MpiPrecvInit"),
                beyond="never closed: rounds match by the order of the Inits, so no cut "
                       "after the first one"),
        reads=partitioned_reads),
    Family(
        "rma", "MPI one-sided: fences, post/start/complete/wait, locks, transfers (R10)",
        matcher=match_rma_syncs,
        rules=Rows("SYNC_KINDS", ("rma",), (rma,)),
        check=verify_rma, counter="rma",
        cut=Cut(opens=("RmaWinCreate", "RmaCollectiveBegin"),
                closes=("RmaWinDestroy", "RmaCollectiveEnd")),
        reads=rma_reads),
    Family(
        "metric", "METRIC samples against their process's records (§4)",
        matcher=Absent("a sample's reference thread is in the definitions "
                       "(Definitions.metric_references)"),
        rules=Absent("samples are mapped through their process's time function "
                     "(compensate.engine.metrics): no row"),
        check=verify_metrics, counter="metrics", measured=True,
        cut=Cut(beyond="the cutter holds a sample back until the segment that holds its "
                       "reference thread's record after it (compensate.pipeline.cuts)"),
        reads=Absent(_OWN_PROCESS)),
)

#: the families by name
BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}


def _own(part: str, families: Iterable[Family] = FAMILIES) -> list:
    """The ``part`` of each family that has its own (not :class:`Shared` or
    :class:`Absent`), in family order."""
    return [p for f in families
            if not isinstance(p := getattr(f, part), Shared | Absent)]


#: the invariants :func:`compensate.verify.verify` runs over the matching, in order
CHECKS: tuple[Check, ...] = tuple(_own("check", (f for f in FAMILIES if not f.measured)))
#: the invariants it runs over the measured trace when given, numbered after CHECKS
MEASURED_CHECKS: tuple[MeasuredCheck, ...] = tuple(
    _own("check", (f for f in FAMILIES if f.measured)))
#: the steps of :func:`compensate.matching.match` (its ``MATCHERS``), in order
MATCHERS: tuple[Matcher, ...] = tuple(_own("matcher"))
#: what the checks read of other ranks' locations
READS: tuple[Reads, ...] = tuple(_own("reads"))


def cut_kinds(in_flight: bool = True) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(kind codes that open, kind codes that close) a span no cut may fall inside,
    over every family's :class:`Cut`, in family order; a kind two families name is
    listed twice (an MpiMrecv closes its probe's span and its message's), so the
    cutter can count steps per record. ``in_flight``: with the messages in flight
    (a cutter that counts them). What each family's ``beyond`` says is not in
    these."""
    cuts = [c for c in _own("cut") if in_flight or not c.in_flight]
    return (tuple(k for c in cuts for k in c.open_codes),
            tuple(k for c in cuts for k in c.close_codes))
