"""Threads and accelerator streams in the ground-truth simulator (issue #17).

A process (an MPI rank, its *master thread* the rank's own location) may own more
locations: CPU threads (OpenMP team members, Pthreads) and accelerator streams,
declared in :attr:`Program.threads <compensate.simulate.programs.Program.threads>`
as ``(rank, type, ops)``. Each CPU thread runs its own op list as a coroutine of
the simulator, like a rank; an accelerator stream has no op list: its host writes
its records (a kernel's start and end follow from the launch and the stream's
previous kernel). The records are those Score-P writes (compare
``tests/data/traces/jacobi-mpi-openmp-cuda`` and ``hip-two-gpu-metrics`` with
``otf2-print``), with the fields the text format gives them (dicts of strings).

The measurement model, op by op (continuing :mod:`compensate.simulate.simulator`:
``X@t`` = record X stamped at ``t``, ``[O]`` = ``t += O(X)``; the hand-over
latencies ``λ`` are constants of this module, the same in both runs; a CPU thread
pays ``O`` per record, an accelerator stream none):

* OpenMP parallel region, master (``omp_fork``): ThreadFork@f [O] (the runtime
  forks after the record: the team may start at ``f + O``); ThreadTeamBegin [O];
  Enter(!$omp parallel) [O]. Worker (``omp_begin``): ``t = max(t, f + O(Fork) +
  λ_fork)``; ThreadTeamBegin [O]; Enter(!$omp parallel) [O].
* End of the region (``omp_end``), every member: Leave(!$omp parallel) [O];
  ThreadTeamEnd@e_i [O]. The master then joins: ``t = max(t, max_i(e_i + O(TeamEnd))
  + λ_join)`` over the workers; ThreadJoin [O].
* OpenMP barrier (``omp_barrier``), every member: Enter(!$omp implicit barrier)
  [O]; ``ready_i = t``; ``t = max_i ready_i + λ_barrier``; Leave [O] (n-to-n over
  the team, as MPI_Barrier).
* Lock (``omp_critical``: an OpenMP critical section, lock 0 of model OPENMP;
  ``mutex``: a Pthread mutex): Enter(!$omp critical | pthread_mutex_lock) [O];
  requested at ``q = t``; acquisition k is granted at ``g = max(q, r_{k-1} +
  λ_lock)`` with ``r_{k-1}`` the time the previous holder released it (after its
  ThreadReleaseLock's O; ``-inf`` for k = 1); ThreadAcquireLock@g (order k) [O];
  OpenMP: Enter(sblock) [O], ``t += d``, Leave(sblock) [O]; Pthreads: Leave(lock)
  [O], ``t += d``, Enter(pthread_mutex_unlock) [O]; then ThreadReleaseLock (order k)
  [O], released ``r_k = t``; Leave [O]. Which request gets the lock is decided as
  physically: when no location can go on, among the pending requests on free
  locks (and wildcard receives) the one with the earliest grant time ``g`` wins
  (ties: lower location slot); the truth run replays the measured order, as it
  replays wildcard receives, so both traces have the same records.
* Pthreads: ``pthread_create`` (creator): Enter(pthread_create) [O];
  ThreadCreate@c [O]; Leave [O]. The new thread (``pthread_begin``, its first op):
  ``t = max(t, c + O(Create) + λ_create)``; ThreadBegin [O]; ``pthread_end`` (its
  last): ThreadEnd@e [O]. ``pthread_join`` (creator): Enter(pthread_join) [O];
  ``t = max(t, e + O(End) + λ_join)``; ThreadWait [O]; Leave [O].
* EZTrace's Pthread records (``ez_*`` ops: no Thread* record for a lock, a barrier,
  a create or a join; :mod:`compensate.matching.pthreads`): ``ez_mutex`` (address,
  d): Enter(pthread_mutex_lock, request = address) [O]; granted as ``mutex`` above;
  Leave(lock)@g [O], ``t += d``, Enter(pthread_mutex_unlock, request = address) [O];
  released ``r_k = t``; Leave [O]. ``ez_create`` (seq): Enter(pthread_create) [O],
  the thread is created at ``c = t``; Leave [O]. ``ez_begin`` (seq, λ): ``t = max(t,
  c + λ)`` (its own start latency, so threads may begin in another order than they
  were created: the order statistic the matcher links by is then weaker than the
  truth); ThreadBegin (UNDEFINED contingent, sequence count seq) [O]; seq 0 is a
  process's main thread and waits for nobody. ``ez_end``: ThreadEnd@e [O].
  ``ez_join`` (seq): Enter(pthread_join) [O]; ``t = max(t, e + O(End) + λ_join)``;
  Leave [O]. ``ez_barrier`` (address, n): Enter(pthread_barrier_wait, request =
  address) [O]; the ``b``-th call of each of the ``n`` threads that wait on it is
  one instance: ``t = max_i ready_i + λ_barrier``; Leave [O].
* GPU kernel launch (``launch``, host): Enter(cudaLaunchKernel) [O];
  ParameterUnsignedInt@p ("callsite id", one value per kernel name) [O]; on the
  stream: ``start = max(stream free, p + O(Parameter) + λ_launch)`` (``λ_launch``
  the op's own latency where it gives one),
  Enter(kernel)@start, ParameterUnsignedInt@start (same value), Leave(kernel)
  @``start + d`` (no overhead: the device is not slowed by host tracing; ``d`` the
  same in both runs); Leave(cudaLaunchKernel) [O].
* Synchronize (``gpu_sync``, host): Enter(cudaStreamSynchronize) [O]; ``ready =
  t``; with ``z`` the end of the last kernel launched on the streams waited for
  (its completion reaches the host ``λ_sync`` later): ``t = max(ready, z +
  λ_sync)`` (``λ_sync`` the op's own tail where it gives one); Leave [O].

Locations: the rank's master is location ``rank``; its k-th extra location (k = 1,
2, ...) is ``(k << 32) + rank`` (Score-P numbers them so), in the rank's location
group for a CPU thread, or for a stream in an accelerator-context group created by
the rank's group. Each process with threads has a thread-team / thread-contingent
communicator ``1 + rank`` whose members are its CPU threads.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from compensate.matching.threads import (
    ACQUIRE,
    BEGIN,
    CREATE,
    END,
    FORK,
    JOIN,
    RELEASE,
    TEAM_BEGIN,
    TEAM_END,
    WAIT,
)
from compensate.model import (
    ACCELERATOR_STREAM,
    CPU_THREAD,
    ENTER,
    KIND_CODE,
    LEAVE,
    NONE,
    Comm,
    Definitions,
    Location,
)

PARAM = KIND_CODE["ParameterUnsignedInt"]

# hand-over latencies (seconds), the same in the truth and the measured run
FORK_LATENCY = 5e-7  #: fork -> a worker's team begin
JOIN_LATENCY = 2e-7  #: last team end (or a Pthread's end) -> the join
BARRIER_LATENCY = 2e-7  #: last member's arrival -> every member leaves the barrier
LOCK_LATENCY = 1e-7  #: release -> the next holder's acquisition
CREATE_LATENCY = 2e-6  #: pthread_create -> the new thread's begin
LAUNCH_LATENCY = 4e-6  #: launch -> an idle stream starts the kernel
SYNC_LATENCY = 1e-6  #: kernel end -> a waiting synchronize returns

PARALLEL = "!$omp parallel"
BARRIER = "!$omp implicit barrier"
CRITICAL = "!$omp critical"
SBLOCK = "!$omp critical sblock"
#: region -> (OTF2 role, paradigm) of the regions this module writes
ROLES = {PARALLEL: ("PARALLEL", "OPENMP"), BARRIER: ("IMPLICIT_BARRIER", "OPENMP"),
         CRITICAL: ("CRITICAL", "OPENMP"), SBLOCK: ("CRITICAL_SBLOCK", "OPENMP"),
         "pthread_create": ("THREAD_CREATE", "PTHREAD"),
         "pthread_join": ("THREAD_WAIT", "PTHREAD"),
         "pthread_mutex_lock": ("WRAPPER", "PTHREAD"),
         "pthread_mutex_unlock": ("WRAPPER", "PTHREAD"),
         "pthread_barrier_wait": ("BARRIER", "PTHREAD"),
         "cudaLaunchKernel": ("WRAPPER", "CUDA"),
         "cudaStreamSynchronize": ("IMPLICIT_BARRIER", "CUDA")}
#: the ops of this module (dispatched by the simulator to :func:`run_op`)
OPS = frozenset({"omp_fork", "omp_begin", "omp_end", "omp_barrier", "omp_critical",
                 "mutex", "pthread_create", "pthread_begin", "pthread_end", "pthread_join",
                 "launch", "gpu_sync", "ez_mutex", "ez_create", "ez_begin", "ez_end",
                 "ez_join", "ez_barrier"})
_REGIONS = {"omp_fork": (PARALLEL,), "omp_begin": (PARALLEL,), "omp_end": (PARALLEL,),
            "omp_barrier": (BARRIER,), "omp_critical": (CRITICAL, SBLOCK),
            "mutex": ("pthread_mutex_lock", "pthread_mutex_unlock"),
            "pthread_create": ("pthread_create",), "pthread_join": ("pthread_join",),
            "launch": ("cudaLaunchKernel",), "gpu_sync": ("cudaStreamSynchronize",),
            "ez_mutex": ("pthread_mutex_lock", "pthread_mutex_unlock"),
            "ez_create": ("pthread_create",), "ez_join": ("pthread_join",),
            "ez_barrier": ("pthread_barrier_wait",)}


def location_id(rank: int, k: int) -> int:
    """The id of rank ``rank``'s ``k``-th location (0: its master thread)."""
    return (k << 32) + rank


def team_comm(rank: int) -> int:
    """The thread-team / thread-contingent communicator of a process."""
    return 1 + rank


class _State:
    """What the locations of one run share beyond MPI (per run)."""

    def __init__(self) -> None:
        self.forks: dict[tuple, dict] = {}  # (rank, team k) -> instance
        self.locks: dict[tuple, dict] = {}  # (rank, model, id) -> lock
        self.created: dict[tuple, float] = {}  # (rank, seq) -> create time + O
        self.ended: dict[tuple, float] = {}  # (rank, seq) -> end time + O
        self.streams: dict[int, float] = {}  # stream slot -> end of its last kernel
        self.orders: dict[int, list[int]] = {}  # slot -> acquisition orders (measured)
        self.fixed: dict[int, list[int]] | None = None  # truth: the measured orders


def state(sim: Any) -> _State:
    st = sim.__dict__.get("_threads")
    if st is None:
        st = sim.__dict__["_threads"] = _State()
    return st


def replay(measured: Any, truth: Any) -> None:
    """Make the truth run grant every lock in the order of the measured run."""
    state(truth).fixed = {s: list(o) for s, o in state(measured).orders.items()}


# --- definitions ----------------------------------------------------------------------

def region_names(program: Any) -> list[str]:
    """The regions the program's thread ops and thread op lists use, in order of first
    use (after those of the ranks' ``call``/``enter``)."""
    names: list[str] = []
    lists = [*program.ops, *(ops for _, _, ops in program.threads)]
    for ops in lists:
        for op in ops:
            new = _REGIONS.get(op[0], ())
            if op[0] in ("call", "enter", "leave"):
                new = (op[1],)
            elif op[0] == "launch":
                new = ("cudaLaunchKernel", op[1])
            for name in new:
                if name not in names:
                    names.append(name)
    return names


def add_definitions(program: Any, defs: Definitions) -> Definitions:
    """``defs`` with the program's extra locations, accelerator-context groups, team
    communicators and the roles of the OpenMP regions."""
    n = program.ranks
    count: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for j, (rank, kind, _) in enumerate(program.threads):
        k = count[rank] = count.get(rank, 0) + 1
        loc = location_id(rank, k)
        if kind == ACCELERATOR_STREAM:
            defs.locations[loc] = Location(loc, f"CUDA[{rank}:{k}]", n + j, f"CUDA context {j}",
                                           ACCELERATOR_STREAM, "ACCELERATOR", rank)
        else:
            defs.locations[loc] = Location(loc, f"thread {k}", rank, f"MPI Rank {rank}",
                                           CPU_THREAD)
            members.setdefault(rank, [rank]).append(loc)
    for rank, locs in members.items():
        defs.comms[team_comm(rank)] = Comm(team_comm(rank), f"threads of rank {rank}",
                                           tuple(locs))
    for rid, name in defs.regions.items():
        if name in ROLES:
            defs.region_roles[rid] = ROLES[name]
    return defs


def slots(program: Any) -> list[tuple[int, int, str]]:
    """``(slot, location id, type)`` of every extra location; slot ``ranks + j``."""
    out = []
    count: dict[int, int] = {}
    for j, (rank, kind, _) in enumerate(program.threads):
        count[rank] = count.get(rank, 0) + 1
        out.append((program.ranks + j, location_id(rank, count[rank]), kind))
    return out


# --- running ------------------------------------------------------------------------

def _emit_at(rows: Any, t: float, kind: int, region: int = NONE, payload: Any = None) -> None:
    """A record on an accelerator stream: stamped ``t``, no overhead."""
    if payload is not None:
        rows.payload[len(rows.time)] = payload
    rows.time.append(t)
    rows.cols.extend((kind, region, NONE, NONE, NONE, NONE, NONE, NONE, NONE))
    if rows.own is not None:
        rows.own.append(-1.0)


def thread_body(rk: Any) -> Generator[tuple, Any, None]:
    """The coroutine of an extra location: its op list (none for a stream)."""
    sim = rk.sim
    rank, _, ops = sim.program.threads[rk.slot - sim.n]
    regions = sim.regions
    for index, op in enumerate(ops):
        rk.op_index = index
        name = op[0]
        if name == "compute":
            rk.t += sim.q(op[1])
        elif name == "call":
            rk.emit(ENTER, region=regions[op[1]])
            rk.t += sim.q(op[2])
            rk.emit(LEAVE, region=regions[op[1]])
        elif name in ("enter", "leave"):
            rk.emit(ENTER if name == "enter" else LEAVE, region=regions[op[1]])
        elif name in OPS:
            yield from run_op(rk, op)
        else:
            raise rk.fail(f"op {op!r} is not allowed on a thread")


def _rank_of(rk: Any) -> int:
    sim = rk.sim
    return rk.slot if rk.slot < sim.n else sim.program.threads[rk.slot - sim.n][0]


def run_op(rk: Any, op: tuple) -> Generator[tuple, Any, None]:
    """Execute one op of this module on location ``rk`` (module docstring)."""
    sim = rk.sim
    st = state(sim)
    rank = _rank_of(rk)
    name = op[0]
    regions = sim.regions
    if name in ("omp_fork", "omp_begin"):
        k = rk.__dict__.setdefault("teams", 0)
        rk.teams = k + 1
        key = ("omp", rank, k)
        inst = st.forks.setdefault(key, {"fork": None, "size": None, "ends": {},
                                         "bars": {}, "key": key})
        rk.team = inst
        rk.barriers = 0
        if name == "omp_fork":
            rk.emit(FORK, payload={"model": "OPENMP",
                                   "number_of_requested_threads": str(op[1])})
            inst["fork"], inst["size"] = rk.t, op[1]
            sim.notify(key)
        else:
            while inst["fork"] is None:
                yield key
            rk.t = max(rk.t, inst["fork"] + sim.q(FORK_LATENCY))
        rk.emit(TEAM_BEGIN, payload={"thread_team": str(team_comm(rank))})
        rk.emit(ENTER, region=regions[PARALLEL])
    elif name == "omp_end":
        inst = rk.team
        rk.emit(LEAVE, region=regions[PARALLEL])
        rk.emit(TEAM_END, payload={"thread_team": str(team_comm(rank))})
        if rk.slot != rank:
            inst["ends"][rk.slot] = rk.t
            sim.notify(inst["key"])
        else:
            while len(inst["ends"]) < inst["size"] - 1:
                yield inst["key"]
            if inst["ends"]:
                rk.t = max(rk.t, max(inst["ends"].values()) + sim.q(JOIN_LATENCY))
            rk.emit(JOIN, payload={"model": "OPENMP"})
    elif name == "omp_barrier":
        inst = rk.team
        b = rk.barriers
        rk.barriers += 1
        rk.emit(ENTER, region=regions[BARRIER])
        ready = inst["bars"].setdefault(b, {})
        ready[rk.slot] = rk.t
        sim.notify(inst["key"])
        while len(ready) < inst["size"]:
            yield inst["key"]
        rk.t = max(ready.values()) + sim.q(BARRIER_LATENCY)
        rk.emit(LEAVE, region=regions[BARRIER])
    elif name in ("omp_critical", "mutex", "ez_mutex"):
        yield from _locked(rk, st, rank, op)
    elif name.startswith("ez_"):
        yield from _eztrace(rk, st, rank, op)
    elif name == "pthread_create":
        seq = op[1]
        rk.emit(ENTER, region=regions["pthread_create"])
        rk.emit(CREATE, payload=_contingent(rank, seq))
        st.created[(rank, seq)] = rk.t
        sim.notify(("pthread", rank, seq))
        rk.emit(LEAVE, region=regions["pthread_create"])
    elif name == "pthread_begin":
        seq = op[1]
        while (rank, seq) not in st.created:
            yield ("pthread", rank, seq)
        rk.t = max(rk.t, st.created[(rank, seq)] + sim.q(CREATE_LATENCY))
        rk.emit(BEGIN, payload=_contingent(rank, seq))
    elif name == "pthread_end":
        rk.emit(END, payload=_contingent(rank, op[1]))
        st.ended[(rank, op[1])] = rk.t
        sim.notify(("pthread", rank, op[1]))
    elif name == "pthread_join":
        seq = op[1]
        rk.emit(ENTER, region=regions["pthread_join"])
        while (rank, seq) not in st.ended:
            yield ("pthread", rank, seq)
        rk.t = max(rk.t, st.ended[(rank, seq)] + sim.q(JOIN_LATENCY))
        rk.emit(WAIT, payload=_contingent(rank, seq))
        rk.emit(LEAVE, region=regions["pthread_join"])
    elif name == "launch":
        _, kernel, duration, stream = op[:4]
        slot = _stream_slot(rk, rank, stream)
        value = str(1000 + regions[kernel])  # the callsite id: one per kernel name
        rk.emit(ENTER, region=regions["cudaLaunchKernel"])
        rk.emit(PARAM, payload={"parameter_ref": "0", "value": value})
        latency = op[4] if len(op) > 4 else LAUNCH_LATENCY
        start = max(st.streams.get(slot, float("-inf")), rk.t + sim.q(latency))
        end = start + sim.q(duration)
        rows = sim.rows[slot]
        _emit_at(rows, start, ENTER, regions[kernel])
        _emit_at(rows, start, PARAM, payload={"parameter_ref": "0", "value": value})
        _emit_at(rows, end, LEAVE, regions[kernel])
        st.streams[slot] = end
        rk.emit(LEAVE, region=regions["cudaLaunchKernel"])
    elif name == "gpu_sync":
        rk.emit(ENTER, region=regions["cudaStreamSynchronize"])
        done = max((st.streams.get(_stream_slot(rk, rank, s), float("-inf")) for s in op[1]),
                   default=float("-inf"))
        tail = op[2] if len(op) > 2 else SYNC_LATENCY
        rk.t = max(rk.t, done + sim.q(tail))
        rk.emit(LEAVE, region=regions["cudaStreamSynchronize"])
    else:  # pragma: no cover - OPS and this function list the same ops
        raise rk.fail(f"unknown op {op!r}")


def _eztrace(rk: Any, st: _State, rank: int, op: tuple) -> Generator[tuple, Any, None]:
    """EZTrace's create, begin, end, join and barrier (module docstring)."""
    sim, name, regions = rk.sim, op[0], rk.sim.regions
    if name == "ez_create":
        rk.emit(ENTER, region=regions["pthread_create"])
        st.created[(rank, op[1])] = rk.t
        sim.notify(("pthread", rank, op[1]))
        rk.emit(LEAVE, region=regions["pthread_create"])
    elif name == "ez_begin":
        if op[1]:
            while (rank, op[1]) not in st.created:
                yield ("pthread", rank, op[1])
            rk.t = max(rk.t, st.created[(rank, op[1])] + sim.q(op[2]))
        rk.emit(BEGIN, payload={"sequence_count": str(op[1])})
    elif name == "ez_end":
        rk.emit(END, payload={"sequence_count": str(op[1])})
        st.ended[(rank, op[1])] = rk.t
        sim.notify(("pthread", rank, op[1]))
    elif name == "ez_join":
        rk.emit(ENTER, region=regions["pthread_join"])
        while (rank, op[1]) not in st.ended:
            yield ("pthread", rank, op[1])
        rk.t = max(rk.t, st.ended[(rank, op[1])] + sim.q(JOIN_LATENCY))
        rk.emit(LEAVE, region=regions["pthread_join"])
    else:  # ez_barrier
        _, addr, n = op
        count = rk.__dict__.setdefault("ez_barriers", {})
        b = count[addr] = count.get(addr, -1) + 1
        key = ("ezbarrier", rank, addr, b)
        rk.emit(ENTER, region=regions["pthread_barrier_wait"], request=addr)
        ready = st.forks.setdefault(key, {})
        ready[rk.slot] = rk.t
        sim.notify(key)
        while len(ready) < n:
            yield key
        rk.t = max(ready.values()) + sim.q(BARRIER_LATENCY)
        rk.emit(LEAVE, region=regions["pthread_barrier_wait"])


def _contingent(rank: int, seq: int) -> dict:
    return {"thread_contingent": str(team_comm(rank)), "sequence_count": str(seq)}


def _stream_slot(rk: Any, rank: int, stream: int) -> int:
    """The slot of rank ``rank``'s ``stream``-th extra location (1, 2, ...)."""
    sim = rk.sim
    k = 0
    for j, (r, kind, _) in enumerate(sim.program.threads):
        if r == rank:
            k += 1
            if k == stream:
                if kind != ACCELERATOR_STREAM:
                    raise rk.fail(f"location {stream} of rank {rank} is not a stream")
                return sim.n + j
    raise rk.fail(f"rank {rank} has no location {stream}")


def _locked(rk: Any, st: _State, rank: int, op: tuple) -> Generator[tuple, Any, None]:
    """A critical section (OpenMP) or a mutex-protected piece of work (Pthreads)."""
    sim = rk.sim
    regions = sim.regions
    omp = op[0] == "omp_critical"
    ez = op[0] == "ez_mutex"  # EZTrace: the address on the Enters, no lock records
    model = "OPENMP" if omp else "PTHREAD"
    lock_id, duration = (0, op[1]) if omp else (op[1], op[2])
    key = (rank, model, lock_id)
    lock = st.locks.setdefault(key, {"released": [float("-inf")], "held": False})
    addr = lock_id if ez else NONE
    rk.emit(ENTER, region=regions[CRITICAL if omp else "pthread_mutex_lock"], request=addr)
    if st.fixed is None:  # measured run: the scheduler grants (pick_lock)
        order = yield ("lock", key, rk.t)
        st.orders.setdefault(rk.slot, []).append(order)
    else:
        fixed = st.fixed.get(rk.slot)
        if not fixed:
            raise rk.fail("no recorded acquisition order for a lock")
        order = fixed.pop(0)
        while len(lock["released"]) < order:
            yield ("lockrel",) + key
    lock["held"] = True
    rk.t = max(rk.t, lock["released"][order - 1] + sim.q(LOCK_LATENCY))
    fields = {"model": model, "lock_id": str(lock_id), "acquisition_order": str(order)}
    if not ez:
        rk.emit(ACQUIRE, payload=fields)
    if omp:
        rk.emit(ENTER, region=regions[SBLOCK])
        rk.t += sim.q(duration)
        rk.emit(LEAVE, region=regions[SBLOCK])
    else:
        rk.emit(LEAVE, region=regions["pthread_mutex_lock"])
        rk.t += sim.q(duration)
        rk.emit(ENTER, region=regions["pthread_mutex_unlock"], request=addr)
    if not ez:
        rk.emit(RELEASE, payload=dict(fields))
    lock["released"].append(rk.t)
    lock["held"] = False
    sim.notify(("lockrel",) + key)
    rk.emit(LEAVE, region=regions[CRITICAL if omp else "pthread_mutex_unlock"])


def pick_lock(sim: Any, pending: dict[int, tuple]) -> tuple[float, int, int] | None:
    """The lock request to grant next in the measured run: among the pending requests
    (``pending[slot] = ("lock", key, requested)``) on free locks, the earliest grant
    time, ties by slot; returns ``(grant time, slot, acquisition order)``."""
    st = state(sim)
    best = None
    for slot, key in pending.items():
        if key[0] != "lock":
            continue
        lock = st.locks[key[1]]
        if lock["held"]:
            continue
        grant = max(key[2], lock["released"][-1] + sim.q(LOCK_LATENCY))
        cand = (grant, slot, len(lock["released"]))
        if best is None or cand < best:
            best = cand
    return best
