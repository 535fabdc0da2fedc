"""Ground-truth simulator: run a model MPI program with and without tracer overhead.

docs/design.md §7 validates the compensator against ground truth: the same program is
simulated twice under the measurement model of §2 — once without tracing overhead
(*truth*) and once with it (*measured*) — and the compensated measured trace is
compared event by event with the truth. :func:`run_program` / :func:`simulate`
produce the two :class:`~compensate.model.Trace` objects. Both have exactly the same
records per location (kinds, regions, peers, tags, sizes, payloads); only the
timestamps (and BufferFlush stop times) differ.

Programs are the op lists of :mod:`compensate.simulate.programs`. Each rank is a coroutine
with its own clock ``t`` (float seconds, starting at its start offset); ranks run
until they block on a remote dependency and are woken when it is satisfied.

Why one module (over 600 lines): the simulator *is* the measurement model, one
rule per operation, and the rules share the rank coroutine, the message channels
and the collective rendezvous; split apart, each half would read the other's
state. Its size is the list of operations, not several concerns.

The measurement model, exactly
------------------------------
``O(k)`` is the per-record overhead of kind ``k`` (``Platform.overhead_table()``,
all zero in the truth run), ``copy(s) = Platform.copy_time(s)`` (``C(s)·s``) and
``net(s) = latency + s / bandwidth``. *Emitting* a record stamps it with the current
``t`` and then does ``t += O(kind)``: the gap after a record holds its own overhead.
Where the platform puts part of a kind's overhead before the stamp
(``overhead_before_stamp``, ``pre(k) <= O(k)``), emitting does ``t += pre(k)``,
stamps, then ``t += O(k) - pre(k)``: the tracer's work before it reads the clock
(EZTrace's MPI_Recv wrapper, which stamps MpiRecv after its own work once the
receive returned). An Enter/Leave of a region the platform names in
``event_overhead_by_region`` (``overhead_before_stamp_by_region``) costs that
entry's ``O`` (``pre``) instead of its kind's. Everything below is unchanged by
it except that each stamp lies ``pre(k)`` after the "@t" it names.
Notation below: "X@t" = record X stamped at t, "[O]" = its overhead is added.

* ``compute(d)``: ``t += d``. ``call(f, d)``: Enter(f) [O], ``t += d``, Leave(f) [O].
* Eager send (MPI_Send, ``s <= eager_limit``): Enter(MPI_Send) [O]; MpiSend@ts [O];
  ``t += copy(s)``; ``arrival = t + net(s)``; Leave(MPI_Send) [O]. So measured
  ``arrival = ts + O(MpiSend) + copy(s) + net(s)``, truth ``ts + copy(s) + net(s)``.
* Blocking receive: Enter(MPI_Recv) [O]; ``ready = t``;
  ``t = max(ready, arrival) + copy(s)``; MpiRecv@t [O]; Leave(MPI_Recv) [O].
  Matching: the k-th receive posted for (sender, receiver, comm, tag) takes the
  k-th message sent on it (non-overtaking). A receive is *posted* at ``ready``.
* Wildcard receive (ANY_SOURCE), measured run: among the messages that could
  match (per sender, the oldest unmatched one with the tag), the one with the
  earliest ``arrival`` (synchronous ones: the arrival they would have with this
  receive), ties by lower sender rank. Resolution is deferred until no rank can
  progress, then the pending wildcard with the globally earliest candidate is
  resolved; every message not yet sent at that point is causally after some
  resolution and so cannot arrive earlier — the choice is the physical "first
  arrived". The truth run replays the measured resolution (the receive becomes a
  receive from that sender), so both record sequences are identical.
* Synchronous send (MPI_Ssend, or MPI_Send with ``s > eager_limit``):
  Enter [O]; MpiSend@ts [O]; ``start = max(t, ready_recv)`` where ``ready_recv`` is
  the matching receive's ``ready`` (``Enter(MPI_Recv) + O(Enter)``; for an Irecv the
  MpiIrecvRequest time + its O); ``arrival = start + copy(s) + net(s)``; the sender
  resumes at ``t = arrival`` (the data is at the receiver; its copy overlaps the
  sender's return); Leave [O]. The receiver's MpiRecv is at
  ``max(ready, arrival) + copy(s) = arrival + copy(s)``, so **Leave(send) =
  MpiRecv − copy(s)** — the sender's exit is a function of the receive.
* n-to-n collective (Barrier, Allreduce, Allgather(v), Alltoall(v/w),
  Reduce_scatter(_block)): Enter [O]; MpiCollectiveBegin@b_i [O];
  ``sync = max_i(b_i + O(MpiCollectiveBegin))``; every member's
  MpiCollectiveEnd@``sync + D`` [O]; Leave [O], with
  ``D = ceil(log2 n)·latency + 2·nbytes/bandwidth`` (the op's per-rank ``nbytes``;
  identical in both runs).
* 1-to-n (Bcast, Scatter(v)), ``s_i`` = bytes member i receives (= nbytes):
  root: Begin@b_r [O], End@``b_r + O(Begin) + copy(size_sent_root)`` (no waiting);
  member i: Begin@b_i [O], ``ready_i = b_i + O(Begin)``,
  ``arrival_i = b_r + O(Begin) + copy(s_i) + net(s_i)``,
  End@``max(ready_i, arrival_i) + copy(s_i)``.
* n-to-1 (Gather(v), Reduce), ``s_i`` = bytes member i sends (= nbytes):
  member i: Begin@b_i [O], End@``b_i + O(Begin) + copy(s_i)`` (local),
  ``arrival_i = End_i + net(s_i)``; root: Begin@b_r [O], ``ready = b_r + O(Begin)``,
  End@``max(ready, max_i (max(ready, arrival_i) + copy(s_i)))`` — per sender the
  receive rule of a P2P message (R2), the root's exit the latest of them
  (``ready`` if it is alone).
* Scan / Exscan: member i ends at ``max_{j<=i} (b_j + O(Begin)) + D``.
* MPI_Sendrecv (eager send part only): Enter [O]; MpiSend@ts [O]; ``t += copy(s)``;
  the receive is posted at that ``t``; ``t = max(t, arrival) + copy(r)``; MpiRecv@t
  [O]; Leave [O].
* MPI_Issend (``issend``): Enter(MPI_Issend) [O]; MpiIsend@ts [O]; Leave [O]; the
  message is synchronous (its arrival is set once the receive is posted, as for
  MPI_Ssend); in a later wait ``t = max(t, arrival)``; MpiIsendComplete@t [O].
* MPI_Mprobe + MPI_Mrecv (``mrecv``): Enter(MPI_Mprobe) [O]; ``t = max(t, arrival)``;
  MpiProbe@t with a message id [O]; Leave [O]; Enter(MPI_Mrecv) [O]; ``t +=
  copy(r)``; MpiMrecv@t [O]; Leave [O].
* MPI_Probe + MPI_Recv (``probe``): Enter(MPI_Probe) [O]; ``t = max(t, arrival)`` of
  the message the next receive of the channel takes (a synchronous one: its
  envelope, sent + net(0)), which stays queued; MpiProbe@t without message id [O];
  Leave [O]; then MPI_Recv as above.
* Score-P's handle collectives (CREATE_HANDLE ... DESTROY_HANDLE_AND_DEALLOCATE):
  as n-to-n operations with ``D`` of 0 bytes, size_sent = size_recv = 0.
* Nonblocking: Isend: Enter(MPI_Isend) [O]; MpiIsend@ts [O]; ``t += copy(s)``;
  ``arrival = t + net(s)``; Leave [O] — always eager, whatever the eager limit.
  Irecv: Enter(MPI_Irecv) [O]; MpiIrecvRequest@t [O]; posted with ``ready = t``
  (after the O); Leave [O]. Wait/Waitall: Enter [O]; for each request in order:
  receive: ``t = max(t, arrival) + copy(s)``, MpiIrecv@t [O]; send:
  MpiIsendComplete@t [O]; Leave [O]. The request id (per rank, counting from 1) is
  in the ``request`` column; MpiIsend/MpiIrecv also fill the
  peer/comm/tag/size columns like MpiSend/MpiRecv.
* Nonblocking n-to-n collective (``icoll``: MPI_Ibarrier, MPI_Iallreduce, ...):
  Enter [O]; NonBlockingCollectiveRequest@r_i [O]; Leave [O]. In a later
  wait, after the records before it: ``t = max(t, max_i(r_i + O(request)) + D)``;
  NonBlockingCollectiveComplete@t [O].
* Nonblocking 1-to-n (MPI_Ibcast, MPI_Iscatter(v)): Enter [O]; request@r_i [O];
  the root copies out (``t += copy(size_sent_root)``); Leave [O]. In a later wait:
  member i, ``arrival_i = r_root + O(request) + copy(s_i) + net(s_i)``,
  ``t = max(t, arrival_i) + copy(s_i)``; the root completes at ``t`` (local);
  NonBlockingCollectiveComplete@t [O].
* Nonblocking n-to-1 (MPI_Igather(v), MPI_Ireduce): Enter [O]; request@r_i [O];
  member i copies out (``t += copy(s_i)``, ``arrival_i = t + net(s_i)``); Leave [O].
  In a later wait: members complete at ``t`` (local); the root, ready at ``t``,
  at ``max(t, max_i (max(t, arrival_i) + copy(s_i)))``;
  NonBlockingCollectiveComplete@t [O] (root in ``peer``).
* Buffer flush (a ``flush()`` op, or automatically before the next op once
  ``flush_every`` records were written since the last flush — never inside an MPI
  call): BufferFlush@t with ``stop_time = t + F`` (measured) or ``t`` (truth) in
  the ``size`` column (ticks); [O(BufferFlush)]; measured ``t += F``.
  A ``flush_after(kind)`` op makes the same flush happen inside the next call,
  right after the rank's next record of that kind (an MPI_Recv's Enter, an
  MpiCollectiveBegin): it delays everything the rank does after it, its
  readiness for the message or the collective included (docs/design.md §3 R6).
* MPI-4 partitioned point-to-point (``psend_init`` ... ``pwait``): see
  :mod:`compensate.simulate.partitioned`.
* MPI one-sided communication (window creation, fences, puts and accumulates,
  post/start/complete/wait, passive-target locks): :mod:`compensate.simulate.rma`,
  whose docstring states the model of each op.
* Each location: ProgramBegin (payload ``{"name": program, "args": []}``),
  Enter(main), the ops, Leave(main), ProgramEnd (payload ``{"status": 0}``).
* Threads and accelerator streams of a process (``Program.threads``): OpenMP
  fork/join, barriers and critical sections, Pthreads create/join and mutexes,
  GPU kernel launches and synchronizations, each op's rule in
  :mod:`compensate.simulate.threads`; a thread's first record is its
  ThreadTeamBegin / ThreadBegin (no ProgramBegin, no main). Lock grants are
  resolved like wildcard receives (the earliest grant when nothing else can go
  on) and replayed in the truth run.

Collective record fields (MpiCollectiveEnd: root or -1 in ``peer``, comm 0, ``size``
= bytes sent, ``size_recv`` = bytes received, ``op``) from the op's ``nbytes`` and
``n`` members: Barrier 0/0; Allreduce nbytes/nbytes; Allgather(v) nbytes/n·nbytes;
Alltoall(v/w) n·nbytes/n·nbytes; Reduce_scatter(_block) n·nbytes/nbytes;
Scan/Exscan nbytes/nbytes; Bcast and Scatter(v) root (n−1)·nbytes/0, others
0/nbytes; Gather(v) and Reduce root 0/(n−1)·nbytes, others nbytes/0.

Times are kept in float seconds and rounded to integer ticks at the end
(``round(t · timer_resolution)``), which keeps every per-location order.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import compensate.simulate.threads as threads
from compensate.model import (
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OPS,
    ENTER,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    KIND_CODE,
    LEAVE,
    MRECV,
    NBC_COMPLETE,
    NBC_REQUEST,
    NONE,
    PROBE,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RECORD_COLUMNS,
    RECV,
    SEND,
    Comm,
    Definitions,
    Events,
    Location,
    Trace,
    Window,
)
from compensate.platform import Platform
from compensate.simulate.hybrid import HYBRID_PROGRAMS
from compensate.simulate.partitioned import OPS as PARTITIONED_OPS
from compensate.simulate.partitioned import REGIONS as PARTITIONED_REGIONS
from compensate.simulate.partitioned import run as run_partitioned
from compensate.simulate.programs import ANY_SOURCE, PROGRAMS, REPLY, Program
from compensate.simulate.rma import RMA_OPS, RMA_REGIONS, WIN
from compensate.simulate.rma import run_op as rma_op

WORLD = 0  #: the one communicator of a simulated trace

#: Default copy-time table: bytes -> seconds (10 GB/s in cache, 5 GB/s, 2 GB/s).
DEFAULT_COPY_TABLE: tuple[tuple[int, float], ...] = (
    (64, 64 / 10e9),
    (1 << 20, (1 << 20) / 5e9),
    (1 << 26, (1 << 26) / 2e9),
)

DEFAULT_FLUSH_TIME = 5e-5  #: seconds a buffer flush stops the program (measured run)

N_TO_N_OPS = frozenset({"BARRIER", "ALLREDUCE", "ALLGATHER", "ALLGATHERV", "ALLTOALL",
                        "ALLTOALLV", "ALLTOALLW", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK"})
ONE_TO_N_OPS = frozenset({"BCAST", "SCATTER", "SCATTERV"})
N_TO_ONE_OPS = frozenset({"GATHER", "GATHERV", "REDUCE"})
SCAN_OPS = frozenset({"SCAN", "EXSCAN"})
SUPPORTED_COLLECTIVES = N_TO_N_OPS | ONE_TO_N_OPS | N_TO_ONE_OPS | SCAN_OPS

#: Score-P's handle collectives, simulated as n-to-n operations (their MPI call is named
#: by :func:`collective_region`: MPI_Create_handle, ...; real traces name the MPI call).
HANDLE_OPS = frozenset({"CREATE_HANDLE", "DESTROY_HANDLE", "ALLOCATE", "DEALLOCATE",
                        "CREATE_HANDLE_AND_ALLOCATE", "DESTROY_HANDLE_AND_DEALLOCATE"})
#: Point-to-point regions added after the first ones (see :func:`_region_table`).
LATER_REGIONS = ("MPI_Issend", "MPI_Mprobe", "MPI_Mrecv", "MPI_Probe")
P2P_REGIONS = ("MPI_Send", "MPI_Recv", "MPI_Ssend", "MPI_Isend", "MPI_Irecv",
               "MPI_Wait", "MPI_Waitall", "MPI_Sendrecv")


def nonblocking_region(op: str) -> str:
    """MPI_Iallreduce, MPI_Ibarrier, ... for an OTF2 op name."""
    return "MPI_I" + collective_region(op)[4:].lower()


def collective_region(op: str) -> str:
    """The MPI function name of a collective op: ``REDUCE_SCATTER`` → ``MPI_Reduce_scatter``."""
    return "MPI_" + op.capitalize()


class SimulationError(Exception):
    """A program the simulator cannot run (deadlock, bad op, mismatched collective)."""


@dataclass
class Network:
    """``net(s) = latency + s / bandwidth`` seconds for an ``s``-byte message.

    ``jitter`` > 0 adds a random delay to every message: exponentially distributed
    with mean ``jitter`` seconds, drawn from a generator seeded with ``seed`` in the
    order of the calls to :meth:`time` (one call per message). :func:`run_program`
    gives the measured and the truth run each a fresh generator of that seed, so both
    draw the same delay for the same message: the simulator's call order depends only
    on the program, not on timing (wildcard receives are resolved as in the measured
    run).

    A harder network (issue #41: ground truth that is not the fit's own model):
    ``switch`` bytes: above it a rendezvous protocol, ``rendezvous`` seconds more
    latency (its handshake) and ``bandwidth2`` (None: ``bandwidth``); ``contention``:
    the share of messages that cross a contended link, ``contended`` times slower
    (drawn like the jitter, in call order).
    """

    latency: float = 1e-6
    bandwidth: float = 5e9
    jitter: float = 0.0
    seed: int = 0
    switch: int | None = None
    rendezvous: float = 0.0
    bandwidth2: float | None = None
    contention: float = 0.0
    contended: float = 1.0

    def __post_init__(self) -> None:
        import random  # local: only the jitter option needs it

        self._rng = random.Random(self.seed)

    def time(self, nbytes: int) -> float:
        if self.switch is not None and nbytes > self.switch:
            base = self.latency + self.rendezvous + nbytes / (self.bandwidth2 or self.bandwidth)
        else:
            base = self.latency + nbytes / self.bandwidth
        if self.contention > 0 and self._rng.random() < self.contention:
            base *= self.contended
        if self.jitter <= 0:
            return base
        return base + self._rng.expovariate(1.0 / self.jitter)


def default_platform(overhead: float = 1e-6,
                     overhead_by_kind: dict[str, float] | None = None,
                     copy_table: Sequence[tuple[int, float]] = DEFAULT_COPY_TABLE) -> Platform:
    """A :class:`Platform` with the given per-record overhead and the default copy table."""
    return Platform(float(overhead), dict(overhead_by_kind or {}),
                    [b for b, _ in copy_table], [s for _, s in copy_table])


@dataclass
class SimResult:
    """The two traces of one program plus everything needed to reproduce or judge them.

    ``info`` holds: ``wildcard_sources`` (rank -> resolved senders of its ANY_SOURCE
    receives, in order), ``span_truth`` / ``span_measured`` (seconds from the
    earliest to the latest record), ``records`` (per trace), ``params`` (the
    program's build parameters) and the simulator settings.
    """

    truth: Trace
    measured: Trace
    platform: Platform
    network: Network
    program: Program
    info: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------
# simulation state

@dataclass(slots=True, eq=False)
class _Msg:
    size: int
    arrival: float | None  # None: synchronous, receive not posted yet
    t0: float  # sender's clock after the MpiSend overhead
    sync: bool


class _Chan:
    """Messages and posted receives of one (sender, receiver, comm, tag)."""

    __slots__ = ("key", "msgs", "ready")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.msgs: list[_Msg] = []
        self.ready: list[float] = []  # ready time of the k-th posted receive


class _Coll:
    """One collective instance on a communicator."""

    __slots__ = ("op", "root", "nbytes", "ready", "arrival", "key")

    def __init__(self, key: tuple, op: str, root: int, nbytes: int) -> None:
        self.key = key
        self.op = op
        self.root = root
        self.nbytes = nbytes
        self.ready: dict[int, float] = {}  # member -> Begin + O(Begin)
        self.arrival: dict[int, float] = {}  # n-to-1: member -> arrival at the root


class _Sim:
    """One run (truth or measured) of a program."""

    def __init__(self, program: Program, overhead: Sequence[float], copy: Callable[[int], float],
                 network: Network, *, eager_limit: int | None, flush_time: float,
                 flush_every: int | None, start_offsets: Sequence[float],
                 regions: dict[str, int], fixed_sources: dict[int, list[int]] | None,
                 quantum: Callable[[float], float] = float,
                 spread: Callable[[float], float] | None = None,
                 before: Sequence[float] | None = None,
                 by_region: dict[int, tuple] | None = None) -> None:
        self.program = program
        self.spread = spread
        self.n = program.ranks
        self.O = list(overhead)
        #: per kind code: the part of O spent before the stamp (module docstring)
        self.pre = list(before) if before is not None else [0.0] * len(self.O)
        #: per region id with its own cost: ((O, pre) of its Enter, of its Leave)
        self.by_region = by_region or {}
        self.copy = copy
        self.q = quantum
        self.net = lambda s: quantum(network.time(s))
        self.latency = network.latency
        self.bandwidth = network.bandwidth
        self.eager_limit = eager_limit
        self.flush_time = flush_time
        self.flush_every = flush_every
        self.start_offsets = start_offsets
        self.regions = regions
        self.fixed_sources = fixed_sources
        self.resolved: dict[int, list[int]] = {r: [] for r in range(self.n)}
        self.chans: dict[tuple, _Chan] = {}
        self.colls: dict[tuple, _Coll] = {}
        self.partitioned: dict[tuple, Any] = {}  # MPI-4 partitioned (simulate.partitioned)
        self.waiting: dict[tuple, list[int]] = {}
        self.runnable: deque[int] = deque()
        self.rows: list[_Records] = [_Records(spread is not None)
                                     for _ in range(self.n + len(program.threads))]

    # -- plumbing --------------------------------------------------------------------
    def chan(self, src: int, dst: int, tag: int) -> _Chan:
        key = ("chan", src, dst, WORLD, tag)
        ch = self.chans.get(key)
        if ch is None:
            ch = self.chans[key] = _Chan(key)
        return ch

    def notify(self, key: tuple) -> None:
        waiters = self.waiting.pop(key, None)
        if waiters:
            self.runnable.extend(waiters)

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        """Run every rank to its end; ``progress(ops)`` gets, now and then, how many
        of the program's ops the ranks have started."""
        n = self.n
        ranks = [_Rank(self, r, slot) for slot, r in enumerate(
            [*range(n), *(rank for rank, _, _ in self.program.threads)])]
        gens = [rk.body() for rk in ranks]
        steps = 0
        n = len(ranks)
        done = [False] * n
        pending: list[Any] = [None] * n
        blocked_on: dict[int, tuple] = {}
        wild: dict[int, tuple] = {}
        self.runnable.extend(range(n))
        while True:
            while self.runnable:
                r = self.runnable.popleft()
                value, pending[r] = pending[r], None
                try:
                    key = gens[r].send(value)
                except StopIteration:
                    done[r] = True
                    blocked_on.pop(r, None)
                    continue
                blocked_on[r] = key
                steps += 1
                if progress is not None and not steps & 1023:
                    progress(sum(rk.op_index + 1 for rk in ranks))
                if key[0] == "wild" or key[0] == "lock":
                    wild[r] = key
                else:
                    self.waiting.setdefault(key, []).append(r)
            if all(done):
                return
            best = self._pick_wildcard(wild)
            lock = threads.pick_lock(self, wild)
            if lock is not None and (best is None or lock < best):
                best = lock
            if best is None:
                what = "; ".join(f"rank {r} waits on {_describe(k)}"
                                 for r, k in sorted(blocked_on.items()))
                raise SimulationError(f"{self.program.name}: deadlock: {what}")
            _, r, src = best
            del wild[r]
            pending[r] = src
            self.runnable.append(r)

    def _pick_wildcard(self, wild: dict[int, tuple]) -> tuple[float, int, int] | None:
        best = None
        for r, (what, tag, ready) in wild.items():
            if what != "wild":
                continue
            for s in range(self.n):
                ch = self.chans.get(("chan", s, r, WORLD, tag))
                if ch is None or len(ch.msgs) <= len(ch.ready):
                    continue
                m = ch.msgs[len(ch.ready)]
                a = m.arrival
                if a is None:
                    a = max(m.t0, ready) + self.copy(m.size) + self.net(m.size)
                cand = (a, s, r)
                if best is None or cand < best:
                    best = cand
        return None if best is None else (best[0], best[2], best[1])

    def trace(self, timer_resolution: int, definitions: Definitions, run: str) -> Trace:
        """The emitted records as a :class:`Trace` (times rounded to ticks); the
        compact record store is released rank by rank as it is converted."""
        events = {}
        ids = [*range(self.n), *(loc for _, loc, _ in threads.slots(self.program))]
        for r, loc in enumerate(ids):
            events[loc] = self.rows[r].events(timer_resolution)
            self.rows[r] = _Records()
        return Trace(definitions, events, source=f"simulate:{self.program.name}:{run}")


class _Records:
    """One rank's emitted records, stored compactly until :meth:`events`.

    ``time``: float seconds, one per record; ``cols``: the nine integer columns
    after ``time`` (kind ... request) row after row; ``payload`` and ``stop``
    (a BufferFlush's stop time, float seconds) only for the few records that have
    one. About 80 bytes a record, where a tuple per record took ~200 (a 4.6 M-record
    trace needed 2.6 GB; benchmarks/simulator_memory.py).
    """

    __slots__ = ("time", "cols", "payload", "stop", "own")

    def __init__(self, own: bool = False) -> None:
        self.time = array("d")
        self.cols = array("q")
        self.payload: dict[int, Any] = {}
        self.stop: dict[int, float] = {}
        #: with ``overhead_spread``: each record's own overhead (seconds, -1: none)
        self.own = array("d") if own else None

    def events(self, res: int) -> Events:
        """Columns in ticks: ``round(t · res)``, half to even as Python's ``round``."""
        n = len(self.time)
        time = np.rint(np.frombuffer(self.time, dtype=np.float64) * res).astype(np.int64) \
            if n else np.zeros(0, dtype=np.int64)
        table = np.frombuffer(self.cols, dtype=np.int64).reshape(n, len(RECORD_COLUMNS) - 1) if n \
            else np.zeros((0, len(RECORD_COLUMNS) - 1), dtype=np.int64)
        cols = {"time": time}
        for j, (name, dtype) in enumerate(RECORD_COLUMNS[1:]):
            cols[name] = np.array(table[:, j], dtype=dtype)
        for i, stop in self.stop.items():
            cols["size"][i] = round(stop * res)
        if self.own is not None:  # whole ticks, as the tracer's ns: NONE where none
            own = np.frombuffer(self.own, dtype=np.float64) if n else np.zeros(0)
            cols["overhead"] = np.where(own >= 0, np.rint(own * res), NONE).astype(np.int32)
        payload: list[Any] = [None] * n
        for i, p in self.payload.items():
            payload[i] = p
        return Events(**cols, payload=payload)


def _describe(key: tuple) -> str:
    if key[0] == "chan":
        _, s, d, _c, tag = key
        return f"channel {s}->{d} tag {tag}"
    if key[0] == "coll":
        return f"collective #{key[2]}"
    if key[0] == "wild":
        return f"ANY_SOURCE receive tag {key[1]} (no message)"
    return repr(key)


class _Rank:
    """The coroutine of one rank: executes its ops, yields wait keys when blocked."""

    def __init__(self, sim: _Sim, rank: int, slot: int | None = None) -> None:
        self.sim = sim
        self.rank = rank
        self.slot = rank if slot is None else slot  # >= sim.n: a thread or stream
        self.t = float(sim.start_offsets[rank])
        self.rows = sim.rows[self.slot]
        self.O = sim.O
        self.pre = sim.pre
        self.by_region = sim.by_region
        self.since_flush = 0
        self.last_source = NONE
        self.next_request = 1
        self.requests: dict[Any, tuple] = {}
        self.coll_index = 0
        self.fixed = list(sim.fixed_sources.get(rank, [])) if sim.fixed_sources else None
        self.op_index = -1
        self.flush_after: int | None = None  # flush right after the next such record

    def emit(self, kind: int, region: int = NONE, peer: int = NONE, comm: int = NONE,
             tag: int = NONE, size: Any = NONE, size_recv: int = NONE, op: int = NONE,
             request: int = NONE, payload: Any = None) -> None:
        rows = self.rows
        if payload is not None or kind == BUFFER_FLUSH:
            i = len(rows.time)
            if payload is not None:
                rows.payload[i] = payload
            if kind == BUFFER_FLUSH:  # the size column holds the stop time (seconds)
                rows.stop[i], size = size, NONE
        o, pre = self.O[kind], self.pre[kind]
        if self.by_region and (kind == ENTER or kind == LEAVE) and region in self.by_region:
            o, pre = self.by_region[region][kind == LEAVE]
        if rows.own is not None:
            o = self.sim.spread(o)
            rows.own.append(o)
        pre = min(pre, o)
        self.t += pre
        rows.time.append(self.t)
        rows.cols.extend((kind, region, peer, comm, tag, size, size_recv, op, request))
        self.t += o - pre
        self.since_flush += 1
        if kind == self.flush_after:  # a flush inside a call (flush_after op)
            self.flush_after = None
            self.flush()

    def fail(self, message: str) -> SimulationError:
        return SimulationError(f"{self.sim.program.name}: rank {self.rank}, "
                               f"op {self.op_index}: {message}")

    def peer(self, p: int, what: str) -> int:
        if p == REPLY:
            if self.last_source == NONE:
                raise self.fail(f"{what} REPLY before any receive")
            return self.last_source
        if not 0 <= p < self.sim.n:
            raise self.fail(f"{what} rank {p} out of range 0..{self.sim.n - 1}")
        return p

    # -- the program -------------------------------------------------------------------
    def body(self) -> Generator[tuple, Any, None]:
        sim = self.sim
        if self.slot >= sim.n:
            yield from threads.thread_body(self)
            return
        regions = sim.regions
        self.emit(PROGRAM_BEGIN, payload={"name": sim.program.name, "args": []})
        self.emit(ENTER, region=regions["main"])
        flush_every = sim.flush_every
        for index, op in enumerate(sim.program.ops[self.rank]):
            self.op_index = index
            if flush_every and self.since_flush >= flush_every:
                self.flush()
            name = op[0]
            if name == "compute":
                self.t += op[1]
            elif name == "call":
                self.emit(ENTER, region=regions[op[1]])
                self.t += op[2]
                self.emit(LEAVE, region=regions[op[1]])
            elif name == "enter":
                self.emit(ENTER, region=regions[op[1]])
            elif name == "leave":
                self.emit(LEAVE, region=regions[op[1]])
            elif name == "send" or name == "ssend":
                _, dest, tag, size = op
                sync = name == "ssend" or (sim.eager_limit is not None
                                           and size > sim.eager_limit)
                yield from self.send(self.peer(dest, "send to"), tag, size,
                                     "MPI_Ssend" if name == "ssend" else "MPI_Send", sync)
            elif name == "recv":
                yield from self.recv(op[1], op[2])
            elif name == "sendrecv":
                yield from self.sendrecv(*op[1:])
            elif name == "mrecv":
                yield from self.mrecv(op[1], op[2])
            elif name == "probe":
                yield from self.probe(op[1], op[2])
            elif name == "isend":
                self.isend(*op[1:])
            elif name == "irecv":
                self.irecv(*op[1:])
            elif name == "issend":
                self.issend(*op[1:])
            elif name == "wait":
                yield from self.wait(op[1], op[2])
            elif name == "coll":
                yield from self.collective(op[1], op[2], op[3])
            elif name == "icoll":
                self.icollective(*op[1:])
            elif name == "flush":
                self.flush()
            elif name == "flush_after":
                self.flush_after = KIND_CODE[op[1]]
            elif name in threads.OPS:
                yield from threads.run_op(self, op)
            elif name in PARTITIONED_OPS:
                yield from run_partitioned(self, op)
            elif name in RMA_OPS:
                yield from rma_op(self, op)
            else:
                raise self.fail(f"unknown op {op!r}")
        self.emit(LEAVE, region=regions["main"])
        self.emit(PROGRAM_END, payload={"status": 0})

    def flush(self) -> None:
        flush_time = self.sim.flush_time
        self.emit(BUFFER_FLUSH, size=self.t + flush_time)  # size column: stop time
        self.t += flush_time
        self.since_flush = 0

    # -- point to point ----------------------------------------------------------------
    def send(self, dest: int, tag: int, size: int, region_name: str,
             sync: bool) -> Generator[tuple, Any, None]:
        sim = self.sim
        region = sim.regions[region_name]
        self.emit(ENTER, region=region)
        self.emit(SEND, peer=dest, comm=WORLD, tag=tag, size=size)
        ch = sim.chan(self.rank, dest, tag)
        k = len(ch.msgs)
        if not sync:
            self.t += sim.copy(size)
            ch.msgs.append(_Msg(size, self.t + sim.net(size), self.t, False))
            sim.notify(ch.key)
        else:
            msg = _Msg(size, None, self.t, True)
            ch.msgs.append(msg)
            if k < len(ch.ready):
                msg.arrival = max(msg.t0, ch.ready[k]) + sim.copy(size) + sim.net(size)
            sim.notify(ch.key)
            while msg.arrival is None:
                yield ch.key
            self.t = msg.arrival
        self.emit(LEAVE, region=region)

    def post(self, src: int, tag: int, ready: float) -> tuple[_Chan, int]:
        """Post a receive: it takes the next message of its channel."""
        sim = self.sim
        ch = sim.chan(src, self.rank, tag)
        k = len(ch.ready)
        ch.ready.append(ready)
        if k < len(ch.msgs):
            m = ch.msgs[k]
            if m.arrival is None:  # a synchronous sender waits for this receive
                m.arrival = max(m.t0, ready) + sim.copy(m.size) + sim.net(m.size)
            sim.notify(ch.key)
        return ch, k

    def arrived(self, ch: _Chan, k: int) -> Generator[tuple, Any, _Msg]:
        """Wait (yielding the channel's key) until message ``k`` of ``ch`` has
        arrived; return it (to ``yield from``: the processes are generators)."""
        while len(ch.msgs) <= k or ch.msgs[k].arrival is None:
            yield ch.key
        return ch.msgs[k]  # noqa: B901 - the value of ``yield from``

    def sendrecv(self, dest: int, size: int, send_tag: int, source: int,
                 recv_tag: int) -> Generator[tuple, Any, None]:
        """MPI_Sendrecv (eager send part): Enter; MpiSend [O]; copy out; the receive
        is posted after that copy; MpiRecv after arrival and copy in; Leave."""
        sim = self.sim
        region = sim.regions["MPI_Sendrecv"]
        self.emit(ENTER, region=region)
        dest = self.peer(dest, "send to")
        self.emit(SEND, peer=dest, comm=WORLD, tag=send_tag, size=size)
        ch = sim.chan(self.rank, dest, send_tag)
        self.t += sim.copy(size)
        ch.msgs.append(_Msg(size, self.t + sim.net(size), self.t, False))
        sim.notify(ch.key)
        src = self.peer(source, "receive from")
        rch, k = self.post(src, recv_tag, self.t)
        m = yield from self.arrived(rch, k)
        self.t = max(self.t, m.arrival) + sim.copy(m.size)
        self.emit(RECV, peer=src, comm=WORLD, tag=recv_tag, size=m.size)
        self.last_source = src
        self.emit(LEAVE, region=region)

    def recv(self, source: int, tag: int) -> Generator[tuple, Any, None]:
        sim = self.sim
        region = sim.regions["MPI_Recv"]
        self.emit(ENTER, region=region)
        ready = self.t
        if source == ANY_SOURCE:
            if self.fixed is not None:
                if not self.fixed:
                    raise self.fail("no recorded resolution for an ANY_SOURCE receive")
                src = self.fixed.pop(0)
            else:
                src = yield ("wild", tag, ready)
            sim.resolved[self.rank].append(src)
        else:
            src = self.peer(source, "receive from")
        ch, k = self.post(src, tag, ready)
        m = yield from self.arrived(ch, k)
        self.t = max(self.t, m.arrival) + sim.copy(m.size)
        self.emit(RECV, peer=src, comm=WORLD, tag=tag, size=m.size)
        self.last_source = src
        self.emit(LEAVE, region=region)

    def mrecv(self, source: int, tag: int) -> Generator[tuple, Any, None]:
        """MPI_Mprobe then MPI_Mrecv: Enter(MPI_Mprobe) [O]; the probe returns once the
        message arrived: MpiProbe@max(t, arrival) with a fresh message id [O]; Leave
        [O]; Enter(MPI_Mrecv) [O]; copy in; MpiMrecv [O]; Leave [O]."""
        sim = self.sim
        src = self.peer(source, "mprobe from")
        self.emit(ENTER, region=sim.regions["MPI_Mprobe"])
        ch, k = self.post(src, tag, self.t)
        m = yield from self.arrived(ch, k)
        self.t = max(self.t, m.arrival)
        message = self.next_request
        self.next_request += 1
        self.emit(PROBE, peer=src, comm=WORLD, tag=tag, size_recv=message)
        self.emit(LEAVE, region=sim.regions["MPI_Mprobe"])
        self.emit(ENTER, region=sim.regions["MPI_Mrecv"])
        self.t += sim.copy(m.size)
        self.emit(MRECV, size_recv=message, size=m.size)
        self.last_source = src
        self.emit(LEAVE, region=sim.regions["MPI_Mrecv"])

    def probe(self, source: int, tag: int) -> Generator[tuple, Any, None]:
        """MPI_Probe then MPI_Recv: Enter(MPI_Probe) [O]; the probe returns once the
        message that the next receive of its channel takes has arrived (its
        envelope, for a synchronous message: sent + net(0)), leaving it queued:
        MpiProbe@max(t, arrival) without message id [O]; Leave [O]; then
        :meth:`recv`."""
        sim = self.sim
        src = self.peer(source, "probe from")
        self.emit(ENTER, region=sim.regions["MPI_Probe"])
        ch = sim.chan(src, self.rank, tag)
        k = len(ch.ready)  # the message the next receive takes
        while len(ch.msgs) <= k:
            yield ch.key
        m = ch.msgs[k]
        self.t = max(self.t, m.arrival if m.arrival is not None else m.t0 + sim.net(0))
        self.emit(PROBE, peer=src, comm=WORLD, tag=tag, size_recv=NONE)
        self.emit(LEAVE, region=sim.regions["MPI_Probe"])
        yield from self.recv(source, tag)

    def isend(self, dest: int, tag: int, size: int, handle: Any) -> None:
        sim = self.sim
        dest = self.peer(dest, "isend to")
        region = sim.regions["MPI_Isend"]
        req = self.next_request
        self.next_request += 1
        self.emit(ENTER, region=region)
        self.emit(ISEND, peer=dest, comm=WORLD, tag=tag, size=size, request=req)
        self.t += sim.copy(size)
        ch = sim.chan(self.rank, dest, tag)
        ch.msgs.append(_Msg(size, self.t + sim.net(size), self.t, False))
        sim.notify(ch.key)
        self.requests[handle] = ("send", req)
        self.emit(LEAVE, region=region)

    def issend(self, dest: int, tag: int, size: int, handle: Any) -> None:
        """MPI_Issend: Enter(MPI_Issend) [O]; MpiIsend@ts [O]; Leave [O]. The transfer
        starts at the handshake ``max(ts + O, ready_recv)``; the request completes in
        a later wait at ``max(t, handshake + copy(s) + net(s))``."""
        sim = self.sim
        dest = self.peer(dest, "issend to")
        region = sim.regions["MPI_Issend"]
        req = self.next_request
        self.next_request += 1
        self.emit(ENTER, region=region)
        self.emit(ISEND, peer=dest, comm=WORLD, tag=tag, size=size, request=req)
        ch = sim.chan(self.rank, dest, tag)
        k = len(ch.msgs)
        msg = _Msg(size, None, self.t, True)
        ch.msgs.append(msg)
        if k < len(ch.ready):
            msg.arrival = max(msg.t0, ch.ready[k]) + sim.copy(size) + sim.net(size)
        sim.notify(ch.key)
        self.requests[handle] = ("ssend", req, ch, msg)
        self.emit(LEAVE, region=region)

    def irecv(self, source: int, tag: int, handle: Any) -> None:
        if source == ANY_SOURCE:
            raise self.fail("irecv needs a specific source")
        src = self.peer(source, "irecv from")
        region = self.sim.regions["MPI_Irecv"]
        req = self.next_request
        self.next_request += 1
        self.emit(ENTER, region=region)
        self.emit(IRECV_REQUEST, request=req)
        ch, k = self.post(src, tag, self.t)
        self.requests[handle] = ("recv", req, ch, k, src, tag)
        self.emit(LEAVE, region=region)

    def wait(self, handles: tuple, region_name: str) -> Generator[tuple, Any, None]:
        sim = self.sim
        region = sim.regions[region_name]
        reqs = []
        for h in handles:
            if h not in self.requests:
                raise self.fail(f"wait on unknown or completed request {h!r}")
            reqs.append(self.requests.pop(h))
        self.emit(ENTER, region=region)
        for r in reqs:
            if r[0] == "send":
                self.emit(ISEND_COMPLETE, request=r[1])
                continue
            if r[0] == "ssend":  # MPI_Issend: complete once the data is at the receiver
                _, req, ch, msg = r
                while msg.arrival is None:
                    yield ch.key
                self.t = max(self.t, msg.arrival)
                self.emit(ISEND_COMPLETE, request=req)
                continue
            if r[0] == "coll":
                _, req, key, op, nbytes, root = r
                inst = sim.colls[key]
                if op in ONE_TO_N_OPS and self.rank != root:
                    while root not in inst.ready:
                        yield key
                    received = _collective_sizes(op, nbytes, sim.n, root, self.rank)[1]
                    arrival = inst.ready[root] + sim.copy(received) + sim.net(received)
                    self.t = max(self.t, arrival) + sim.copy(received)
                elif op in N_TO_ONE_OPS and self.rank == root:
                    while len(inst.arrival) < sim.n - 1:
                        yield key
                    ready = self.t
                    for a in inst.arrival.values():
                        self.t = max(self.t, max(ready, a) + sim.copy(nbytes))
                elif op in N_TO_N_OPS:
                    while len(inst.ready) < sim.n:
                        yield key
                    end = max(inst.ready.values()) + _collective_duration(sim, nbytes)
                    self.t = max(self.t, end)
                sent, received = _collective_sizes(op, nbytes, sim.n, root, self.rank)
                self.emit(NBC_COMPLETE, peer=root, comm=WORLD, size=sent, size_recv=received,
                          op=COLLECTIVE_OPS[op], request=req)
                continue
            _, req, ch, k, src, tag = r
            m = yield from self.arrived(ch, k)
            self.t = max(self.t, m.arrival) + sim.copy(m.size)
            self.emit(IRECV, peer=src, comm=WORLD, tag=tag, size=m.size,
                      request=req)
            self.last_source = src
        self.emit(LEAVE, region=region)

    # -- collectives -------------------------------------------------------------------
    def _instance(self, op: str, root: int, nbytes: int) -> tuple[tuple, _Coll]:
        """The next collective instance on the communicator (shared by all members)."""
        key = ("coll", WORLD, self.coll_index)
        self.coll_index += 1
        inst = self.sim.colls.get(key)
        if inst is None:
            inst = self.sim.colls[key] = _Coll(key, op, root, nbytes)
        elif (inst.op, inst.root, inst.nbytes) != (op, root, nbytes):
            raise self.fail(f"collective #{key[2]} is {op} root {root} nbytes {nbytes} here "
                            f"but {inst.op} root {inst.root} nbytes {inst.nbytes} elsewhere")
        return key, inst

    def icollective(self, op: str, nbytes: int, handle: Any, root: int = NONE) -> None:
        """A nonblocking collective: Enter(MPI_Ixxx) [O];
        NonBlockingCollectiveRequest [O]; (the copy out of a 1-to-n root or an n-to-1
        member;) Leave [O]; it completes in a later wait (see the module docstring)."""
        if op not in N_TO_N_OPS | ONE_TO_N_OPS | N_TO_ONE_OPS:
            raise self.fail(f"nonblocking {op} is not simulated")
        sim = self.sim
        rooted = op in ONE_TO_N_OPS or op in N_TO_ONE_OPS
        root = self.peer(root, f"{op} root") if rooted else NONE
        key, inst = self._instance(op, root, nbytes)
        region = sim.regions[nonblocking_region(op)]
        req = self.next_request
        self.next_request += 1
        self.emit(ENTER, region=region)
        self.emit(NBC_REQUEST, request=req)
        inst.ready[self.rank] = self.t
        sent = _collective_sizes(op, nbytes, sim.n, root, self.rank)[0]
        if op in ONE_TO_N_OPS and self.rank == root:
            self.t += sim.copy(sent)
        elif op in N_TO_ONE_OPS and self.rank != root:
            self.t += sim.copy(sent)
            inst.arrival[self.rank] = self.t + sim.net(sent)
        sim.notify(key)
        self.requests[handle] = ("coll", req, key, op, nbytes, root)
        self.emit(LEAVE, region=region)

    def collective(self, op: str, nbytes: int, root: int) -> Generator[tuple, Any, None]:
        sim = self.sim
        n = sim.n
        if op not in SUPPORTED_COLLECTIVES and op not in HANDLE_OPS:
            raise self.fail(f"collective {op} is not simulated")
        rooted = op in ONE_TO_N_OPS or op in N_TO_ONE_OPS
        if rooted:
            root = self.peer(root, f"{op} root")
        else:
            root = NONE
        sent, received = _collective_sizes(op, nbytes, n, root, self.rank)
        region = sim.regions[collective_region(op)]
        key, inst = self._instance(op, root, nbytes)
        self.emit(ENTER, region=region)
        self.emit(COLL_BEGIN)
        ready = self.t
        me = self.rank
        inst.ready[me] = ready
        if op in N_TO_N_OPS or op in HANDLE_OPS:
            sim.notify(key)
            while len(inst.ready) < n:
                yield key
            end = max(inst.ready.values()) + _collective_duration(sim, nbytes)
        elif op in SCAN_OPS:
            sim.notify(key)
            while any(j not in inst.ready for j in range(me)):
                yield key
            end = max(inst.ready[j] for j in range(me + 1)) + _collective_duration(sim, nbytes)
        elif op in ONE_TO_N_OPS:
            sim.notify(key)
            if me == root:
                end = ready + sim.copy(sent)
            else:
                while root not in inst.ready:
                    yield key
                arrival = inst.ready[root] + sim.copy(received) + sim.net(received)
                end = max(ready, arrival) + sim.copy(received)
        else:  # n-to-1
            if me != root:
                end = ready + sim.copy(sent)
                inst.arrival[me] = end + sim.net(sent)
                sim.notify(key)
            else:
                while len(inst.arrival) < n - 1:
                    yield key
                end = ready
                for a in inst.arrival.values():
                    end = max(end, max(ready, a) + sim.copy(nbytes))
        self.t = end
        self.emit(COLL_END, peer=root, comm=WORLD, size=sent, size_recv=received,
                  op=COLLECTIVE_OPS[op])
        self.emit(LEAVE, region=region)


def _collective_duration(sim: _Sim, nbytes: int) -> float:
    """``D = ceil(log2 n)·latency + 2·nbytes/bandwidth`` of a synchronising collective."""
    steps = math.ceil(math.log2(sim.n)) if sim.n > 1 else 0
    return sim.q(steps * sim.latency + 2.0 * nbytes / sim.bandwidth)


def _collective_sizes(op: str, nbytes: int, n: int, root: int, me: int) -> tuple[int, int]:
    """(size_sent, size_recv) of member ``me`` (see the module docstring)."""
    if op == "BARRIER" or op in HANDLE_OPS:
        return 0, 0
    if op in ("ALLREDUCE", "SCAN", "EXSCAN"):
        return nbytes, nbytes
    if op in ("ALLGATHER", "ALLGATHERV"):
        return nbytes, n * nbytes
    if op in ("ALLTOALL", "ALLTOALLV", "ALLTOALLW"):
        return n * nbytes, n * nbytes
    if op in ("REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK"):
        return n * nbytes, nbytes
    if op in ONE_TO_N_OPS:
        return ((n - 1) * nbytes, 0) if me == root else (0, nbytes)
    if op in N_TO_ONE_OPS:
        return (0, (n - 1) * nbytes) if me == root else (nbytes, 0)
    raise ValueError(op)


# ---------------------------------------------------------------------------------
# public entry points

def _region_costs(platform: Platform, regions: dict[str, int],
                  quantum: Callable[[float], float]) -> dict[int, tuple]:
    """Per region id with an entry in the platform's by-region costs: ((O, pre) of
    its Enter, of its Leave), the kind's where the entry names none."""
    bound = platform.region_costs({rid: name for name, rid in regions.items()})
    if bound is None:
        return {}
    o_kind, pre_kind = platform.overhead_table(), platform.before_stamp_table()
    out = {}
    for j, rid in enumerate(bound.ids.tolist()):
        out[rid] = tuple(
            (quantum(float(o_kind[code] if np.isnan(bound.cost[j, c]) else bound.cost[j, c])),
             quantum(float(pre_kind[code] if np.isnan(bound.pre[j, c]) else bound.pre[j, c])))
            for c, code in enumerate((ENTER, LEAVE)))
    return out


def _region_table(program: Program) -> dict[str, int]:
    names = ["main", *P2P_REGIONS]
    names += [collective_region(op) for op in sorted(SUPPORTED_COLLECTIVES)]
    names += [nonblocking_region(op) for op in sorted(N_TO_N_OPS)]
    seen = set(names)
    for ops in program.ops:
        for op in ops:
            if op[0] in ("call", "enter", "leave") and op[1] not in seen:
                seen.add(op[1])
                names.append(op[1])
    # regions added later go last, and only where the program uses them, so that the
    # definitions of the programs that do not stay as they were
    used = set()
    for ops in program.ops:
        for op in ops:
            if op[0] == "issend":
                used.add("MPI_Issend")
            elif op[0] == "mrecv":
                used.update(("MPI_Mprobe", "MPI_Mrecv"))
            elif op[0] == "probe":
                used.update(("MPI_Probe", "MPI_Recv"))
            elif op[0] == "icoll" and op[1] in ONE_TO_N_OPS | N_TO_ONE_OPS:
                used.add(nonblocking_region(op[1]))
            elif op[0] == "coll" and op[1] in HANDLE_OPS:
                used.add(collective_region(op[1]))
            elif op[0] in PARTITIONED_OPS:
                used.update(PARTITIONED_REGIONS)
            elif op[0] in RMA_OPS:
                used.update(RMA_REGIONS)
    rooted = sorted(ONE_TO_N_OPS | N_TO_ONE_OPS)
    later = [*LATER_REGIONS, *(nonblocking_region(op) for op in rooted),
             *(collective_region(op) for op in sorted(HANDLE_OPS)), *PARTITIONED_REGIONS,
             *RMA_REGIONS]
    names += [x for x in later if x in used and x not in seen]
    names += [x for x in threads.region_names(program) if x not in names]
    return {name: i for i, name in enumerate(names)}


def _definitions(program: Program, regions: dict[str, int],
                 timer_resolution: int) -> Definitions:
    n = program.ranks
    return threads.add_definitions(program, Definitions(
        timer_resolution=timer_resolution,
        locations={r: Location(r, f"rank {r}", r, f"MPI Rank {r}") for r in range(n)},
        regions={i: name for name, i in regions.items()},
        comms={WORLD: Comm(WORLD, "MPI_COMM_WORLD", tuple(range(n)))},
        windows={WIN: Window(WIN, "window", WORLD)} if "MPI_Win_create" in regions else {},
    ))


def run_program(program: Program, platform: Platform, *, network: Network | None = None,
                eager_limit: int | None = None, flush_time: float = DEFAULT_FLUSH_TIME,
                flush_every: int | None = None, start_offsets: Sequence[float] | None = None,
                timer_resolution: int = 10**9, quantize: bool = False,
                overhead_spread: float = 0.0, spread_seed: int = 0,
                progress: Callable[[float], None] | None = None) -> SimResult:
    """Simulate ``program`` twice and return the truth and the measured trace.

    ``quantize``: snap every duration (compute, overheads, copies, network,
    collectives, flushes, start offsets) to whole timer ticks, so that every
    timestamp is exactly representable and rounding adds no error: then any
    difference between a compensated trace and the truth is the engine's.

    ``platform`` gives the per-record overhead (measured run only) and the copy cost
    (both runs). ``eager_limit``: sends above this many bytes are synchronous
    (None: all MPI_Send are eager). ``flush_time``: how long a buffer flush stops
    the program in the measured run. ``flush_every``: insert a flush before the next
    op once that many records were written since the last one (None: only the
    program's own ``flush()`` ops). ``start_offsets``: per-rank start time in seconds
    (default all 0). ``progress(fraction)`` is called now and then with the
    fraction of the work done (the two runs' ops). ``overhead_spread`` s > 0: each
    record of the measured run costs its kind's overhead times a factor drawn
    uniformly from [1 - s, 1 + s] (seeded with ``spread_seed``), as a real tracer's
    records do not cost one constant, and the measured trace carries each record's
    own cost in its ``overhead`` column, as the project's tracer writes it
    (:mod:`compensate.formats.otf2.overheads`). Raises :class:`SimulationError`
    on deadlock or a bad program.
    """
    network = network or Network()
    n = program.ranks
    if n < 1:
        raise SimulationError(f"{program.name}: a program needs at least one rank")
    offsets = [0.0] * n if start_offsets is None else [float(x) for x in start_offsets]
    if len(offsets) != n:
        raise SimulationError(f"start_offsets has {len(offsets)} entries for {n} ranks")
    if flush_time < 0:
        raise SimulationError(f"flush_time must be >= 0, got {flush_time}")
    if not 0.0 <= overhead_spread <= 1.0:
        raise SimulationError(f"overhead_spread must be in [0, 1], got {overhead_spread}")

    def quantum(x: float) -> float:
        return round(x * timer_resolution) / timer_resolution if quantize else float(x)

    if quantize:
        program = _quantized(program, quantum)
        offsets = [quantum(x) for x in offsets]
        flush_time = quantum(flush_time)
    regions = _region_table(program)
    cache: dict[int, float] = {}

    def copy(nbytes: int) -> float:
        c = cache.get(nbytes)
        if c is None:
            c = cache[nbytes] = quantum(float(platform.copy_time(nbytes)))
        return c

    common = dict(eager_limit=eager_limit, flush_every=flush_every,
                  start_offsets=offsets, regions=regions, quantum=quantum)
    spread = None
    if overhead_spread > 0:
        import random  # local: only this option needs it

        rng = random.Random(spread_seed)

        def spread(o: float) -> float:
            return quantum(o * rng.uniform(1.0 - overhead_spread, 1.0 + overhead_spread))

    measured = _Sim(program, [quantum(x) for x in platform.overhead_table()], copy,
                    replace(network),
                    flush_time=flush_time, fixed_sources=None, spread=spread,
                    before=[quantum(x) for x in platform.before_stamp_table()],
                    by_region=_region_costs(platform, regions, quantum), **common)
    total_ops = 2 * max(sum(len(ops) for ops in program.ops), 1)
    measured.run(progress and (lambda ops: progress(ops / total_ops)))
    # convert each run's records as soon as it ends: one run's record store at a time
    m_trace = measured.trace(timer_resolution, _definitions(program, regions, timer_resolution),
                             "measured")
    truth = _Sim(program, [0.0] * len(platform.overhead_table()), copy, replace(network),
                 flush_time=0.0, fixed_sources=measured.resolved, **common)
    threads.replay(measured, truth)
    truth.run(progress and (lambda ops: progress(0.5 + ops / total_ops)))
    t_trace = truth.trace(timer_resolution, _definitions(program, regions, timer_resolution),
                          "truth")
    info = {
        "wildcard_sources": {r: list(s) for r, s in measured.resolved.items() if s},
        "span_truth": t_trace.span_seconds,
        "span_measured": m_trace.span_seconds,
        "records": m_trace.record_count,
        "params": dict(program.params),
        "eager_limit": eager_limit,
        "flush_time": flush_time,
        "flush_every": flush_every,
        "start_offsets": offsets,
        "timer_resolution": timer_resolution,
    }
    return SimResult(t_trace, m_trace, platform, network, program, info)


def _quantized(program: Program, quantum: Callable[[float], float]) -> Program:
    """The program with compute and call durations snapped to whole ticks."""
    def snap(op: tuple) -> tuple:
        if op[0] == "compute":
            return (op[0], quantum(op[1]))
        if op[0] == "call":
            return (op[0], op[1], quantum(op[2]))
        return op
    return Program(program.name, [[snap(op) for op in ops] for ops in program.ops],
                   dict(program.params), program.threads)


def simulate(program_name: str = "montecarlo", ranks: int = 4, iterations: int | None = None,
             overhead: float = 1e-6, seed: int = 0, *, platform: Platform | None = None,
             network: Network | None = None, eager_limit: int | None = None,
             flush_time: float = DEFAULT_FLUSH_TIME, flush_every: int | None = None,
             start_offsets: Sequence[float] | None = None, timer_resolution: int = 10**9,
             quantize: bool = False, progress: Callable[[float], None] | None = None,
             **program_args: Any) -> SimResult:
    """Build a program from :data:`~compensate.simulate.programs.PROGRAMS` and simulate it.

    ``overhead`` is the per-record overhead in seconds (ignored when ``platform`` is
    given); ``iterations=None`` keeps the program's default; ``program_args`` go to
    the builder (message sizes, durations); ``progress`` as for :func:`run_program`.
    """
    try:
        builder = {**PROGRAMS, **HYBRID_PROGRAMS}[program_name]
    except KeyError:
        known = ", ".join(sorted({**PROGRAMS, **HYBRID_PROGRAMS}))
        raise SimulationError(f"unknown program {program_name!r} (known: {known})") from None
    kwargs = dict(program_args)
    if iterations is not None:
        kwargs["iterations"] = iterations
    program = builder(ranks=ranks, seed=seed, **kwargs)
    return run_program(program, platform or default_platform(overhead), network=network,
                       eager_limit=eager_limit, flush_time=flush_time,
                       flush_every=flush_every, start_offsets=start_offsets,
                       timer_resolution=timer_resolution, quantize=quantize,
                       progress=progress)
