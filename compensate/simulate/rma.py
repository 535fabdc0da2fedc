"""The simulator's MPI one-sided operations (R10; issue #19): the measurement model
of :mod:`compensate.simulate.simulator` for one RMA window (id 0) on
MPI_COMM_WORLD. Each function takes the rank coroutine (``_Rank``) and is a
generator where it may block.

Notation as in the simulator: "X@t" = record X stamped at ``t``, "[O]" = its
overhead follows; ``copy(s)``, ``net(s)``; ``D = ceil(log2 n)·latency``. Records
are written the way Score-P's MPI adapter writes them (an RmaGroupSync right after
its call's Enter; completions and the collective end at the call's exit).

* ``win_create`` / ``win_free``: Enter(MPI_Win_create) [O]; RmaCollectiveBegin@b_i
  [O]; ``t = max(t, max_j(b_j + O(Begin)) + D)``; RmaWinCreate [O];
  RmaCollectiveEnd(CREATE_HANDLE) [O]; Leave [O]. The free writes RmaWinDestroy
  right after its Enter and ends with DESTROY_HANDLE. Every window collective
  (create, fence, free) is one instance ``k`` of the window, counted per rank.
Ops (program constructors in :mod:`compensate.simulate.programs`): ``win_create``,
``win_free``, ``win_fence``, ``rma_put``, ``rma_accumulate``, ``rma_fetch_add``,
``win_post``, ``win_start``, ``win_complete``, ``win_wait``, ``win_lock``,
``win_unlock``; below without their prefix.

* ``put(target, s)`` / ``accumulate(target, s)``: Enter(MPI_Put | MPI_Accumulate)
  [O]; RmaPut@tp (RmaAtomic ACCUMULATE, sent ``s``) [O]; ``t += copy(s)``; the data
  is in the target's window at ``deposit = t + net(s) + copy(s)`` (the target's
  copy, done by its NIC/progress engine, not its CPU); Leave [O]. The deposit
  counts for the target's end of the origin's current epoch.
* ``fetch_add(target)``: as accumulate with 8 bytes each way (RmaAtomic
  FETCH_AND_ADD, sent 8, received 8); the old value is copied out at the target and
  back at the origin at ``deposit + copy(8) + net(8) + copy(8)``, which the unlock
  waits for.
* **Self path**: an operation on the origin's own window crosses no network (MPICH
  ch4 does it as a local copy / atomic): ``deposit = t`` after the origin's
  ``copy(s)``, a fetched value is back at ``deposit + copy(8)``. Lock requests,
  grants and releases on one's own window stay messages (``net(0)`` each way): MPICH
  sends them to itself through its progress engine. Measured with the mpich wheel
  (5.0.2, two ranks, one node; ``benchmarks/rma_self.py``, docs/accuracy.md,
  issue 19): MPI_Fetch_and_op +
  MPI_Win_flush 1.5 us on oneself against 3.0-3.2 us on the other rank, an 8 B and a
  4 KiB put the same; MPI_Win_lock + MPI_Win_unlock 3.4-3.5 us either way (0.9-1.0
  us with MPI_MODE_NOCHECK, which sends no lock messages).
* ``fence``: Enter(MPI_Win_fence) [O]; RmaCollectiveBegin@b_i [O];
  ``t = max(t, max_j(b_j + O(Begin)) + D, deposits into this rank's window in the
  epoch the fence closes)``; RmaOpCompleteBlocking per operation this rank issued
  in the epoch [O]; RmaCollectiveEnd(BARRIER, PROCESS|MEMORY) [O]; Leave [O].
* ``post(origins)``: Enter(MPI_Win_post) [O]; RmaGroupSync(PROCESS, origins)@p [O];
  each origin may access at ``p + O(GroupSync) + net(0)``; Leave [O].
* ``start(targets)``: Enter(MPI_Win_start) [O]; RmaGroupSync(PROCESS, targets) [O];
  ``t = max(t, every target's post arrival)`` (a blocking start); Leave [O].
* ``complete``: Enter(MPI_Win_complete) [O]; RmaOpCompleteBlocking per operation
  [O]; RmaGroupSync(PROCESS|MEMORY, targets)@c [O]; each target learns it at
  ``max(c + O(GroupSync) + net(0), the epoch's deposits into that target)`` (the
  notification follows the data); Leave [O].
* ``wait``: Enter(MPI_Win_wait) [O]; RmaGroupSync(PROCESS|MEMORY, origins) [O];
  ``t = max(t, every origin's notification)``; Leave [O].
* ``lock(target, exclusive, ticket)``: the program fixes the order in which the
  lock of ``target`` is granted (``ticket`` 0, 1, ... per target), so that the truth
  and the measured run hold it in the same order. Enter(MPI_Win_lock) [O];
  RmaRequestLock@q [O]; the request is at the target at ``q + O + net(0)``; granted
  at ``g = max(request, release of every earlier ticket that conflicts)`` (an
  exclusive ticket conflicts with all, a shared one with the exclusive ones);
  ``t = max(t, g + net(0))``; Leave [O].
* ``unlock(target)``: Enter(MPI_Win_unlock) [O]; ``t = max(t, fetched results)``;
  the release is at the target at ``r = max(t + net(0), the epoch's deposits)``;
  ``t = max(t, r + net(0))`` (acknowledged); RmaOpCompleteBlocking per operation
  [O]; RmaReleaseLock@t [O]; Leave [O]. The ticket's release time is ``r``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Generator
from typing import Any

from compensate.model import ENTER, KIND_CODE, LEAVE

WIN = 0  #: the simulated window
C_BEGIN, C_END = KIND_CODE["RmaCollectiveBegin"], KIND_CODE["RmaCollectiveEnd"]
WIN_CREATE, WIN_DESTROY = KIND_CODE["RmaWinCreate"], KIND_CODE["RmaWinDestroy"]
GROUP_SYNC, PUT, ATOMIC = KIND_CODE["RmaGroupSync"], KIND_CODE["RmaPut"], KIND_CODE["RmaAtomic"]
OP_DONE = KIND_CODE["RmaOpCompleteBlocking"]
REQUEST_LOCK, RELEASE_LOCK = KIND_CODE["RmaRequestLock"], KIND_CODE["RmaReleaseLock"]
PROCESS, BOTH = 1, 3  # OTF2 RmaSyncLevel bits

#: the MPI calls of the RMA ops (region names)
RMA_REGIONS = ("MPI_Win_create", "MPI_Win_free", "MPI_Win_fence", "MPI_Put", "MPI_Accumulate",
               "MPI_Fetch_and_op", "MPI_Win_post", "MPI_Win_start", "MPI_Win_complete",
               "MPI_Win_wait", "MPI_Win_lock", "MPI_Win_unlock")
RMA_OPS = frozenset({"win_create", "win_free", "win_fence", "rma_put", "rma_accumulate",
                     "rma_fetch_add", "win_post", "win_start", "win_complete", "win_wait",
                     "win_lock", "win_unlock"})


class _State:
    """The window's shared state in one run."""

    def __init__(self) -> None:
        self.ready: dict[int, dict[int, float]] = defaultdict(dict)  # instance -> rank -> t
        self.deposits: dict[tuple, list[float]] = defaultdict(list)  # (target, k) -> times
        self.posts: dict[tuple, list[float]] = defaultdict(list)  # (target, origin) -> times
        self.notes: dict[tuple, list[float]] = defaultdict(list)  # (origin, target) -> times
        self.released: dict[tuple, tuple[float, bool]] = {}  # (target, ticket) -> (r, excl)


class _Mine:
    """One rank's RMA state."""

    def __init__(self) -> None:
        self.k = 0  # window collectives passed
        self.ops: list[int] = []  # matching ids issued in the current epoch
        self.next_id = 1
        self.access: tuple[int, ...] | None = None  # targets of an open PSCW access epoch
        self.epoch_dep: dict[int, float] = {}  # target -> latest deposit (PSCW, lock)
        self.fetched = float("-inf")
        self.lock: tuple[int, int, bool] | None = None  # (target, ticket, exclusive)
        self.posts_seen: dict[int, int] = defaultdict(int)  # target -> posts consumed
        self.notes_seen: dict[int, int] = defaultdict(int)  # origin -> notifications


def _st(rank: Any) -> tuple[_State, _Mine]:
    sim = rank.sim
    if not hasattr(sim, "rma_state"):
        sim.rma_state = _State()
    if not hasattr(rank, "rma_mine"):
        rank.rma_mine = _Mine()
    return sim.rma_state, rank.rma_mine


def _d(rank: Any) -> float:
    n = rank.sim.n
    return rank.sim.q(math.ceil(math.log2(n)) * rank.sim.latency) if n > 1 else 0.0


def _collective(rank: Any, region: str, op: str, level: int,
                marker: int | None, before: bool) -> Generator[tuple, Any, None]:
    st, me = _st(rank)
    sim = rank.sim
    reg = sim.regions[region]
    rank.emit(ENTER, region=reg)
    if marker is not None and before:
        rank.emit(marker, payload={"win": WIN})
    rank.emit(C_BEGIN, payload={})
    k = me.k
    st.ready[k][rank.rank] = rank.t
    key = ("rma", "coll", k)
    sim.notify(key)
    while len(st.ready[k]) < sim.n:
        yield key
    end = max(st.ready[k].values()) + _d(rank)
    if op == "BARRIER":
        end = max([end, *st.deposits.pop((rank.rank, k), [])])
    rank.t = max(rank.t, end)
    me.k += 1
    if op == "BARRIER":
        _completions(rank, me)
    if marker is not None and not before:
        rank.emit(marker, payload={"win": WIN})
    rank.emit(C_END, payload={"op": op, "sync_level": level, "win": WIN, "root": -1,
                              "sent": 0, "received": 0})
    rank.emit(LEAVE, region=reg)


def _completions(rank: Any, me: _Mine) -> None:
    for mid in me.ops:
        rank.emit(OP_DONE, payload={"win": WIN, "matching_id": mid})
    me.ops = []


def win_create(rank: Any) -> Generator[tuple, Any, None]:
    yield from _collective(rank, "MPI_Win_create", "CREATE_HANDLE", 0, WIN_CREATE, False)


def win_free(rank: Any) -> Generator[tuple, Any, None]:
    yield from _collective(rank, "MPI_Win_free", "DESTROY_HANDLE", 0, WIN_DESTROY, True)


def fence(rank: Any) -> Generator[tuple, Any, None]:
    yield from _collective(rank, "MPI_Win_fence", "BARRIER", BOTH, None, False)


def transfer(rank: Any, kind: str, target: int, nbytes: int) -> None:
    """put / accumulate / fetch_add (module docstring)."""
    st, me = _st(rank)
    sim = rank.sim
    region = {"put": "MPI_Put", "accumulate": "MPI_Accumulate",
              "fetch_add": "MPI_Fetch_and_op"}[kind]
    mid = me.next_id
    me.next_id += 1
    rank.emit(ENTER, region=sim.regions[region])
    if kind == "put":
        rank.emit(PUT, payload={"win": WIN, "remote": target, "bytes": nbytes,
                                "matching_id": mid})
    else:
        fetch = kind == "fetch_add"
        nbytes = 8 if fetch else nbytes
        rank.emit(ATOMIC, payload={"win": WIN, "remote": target,
                                   "type": "FETCH_AND_ADD" if fetch else "ACCUMULATE",
                                   "sent": nbytes, "received": 8 if fetch else 0,
                                   "matching_id": mid})
    rank.t += sim.copy(nbytes)
    if target == rank.rank:  # the library's self path: a local copy / atomic
        deposit, back = rank.t, sim.copy(8)
    else:
        deposit = rank.t + sim.net(nbytes) + sim.copy(nbytes)
        back = sim.copy(8) + sim.net(8) + sim.copy(8)
    if kind == "fetch_add":
        me.fetched = max(me.fetched, deposit + back)
    me.ops.append(mid)
    if me.access is not None or me.lock is not None:
        me.epoch_dep[target] = max(me.epoch_dep.get(target, float("-inf")), deposit)
    else:
        st.deposits[(target, me.k)].append(deposit)
    rank.emit(LEAVE, region=sim.regions[region])


def post(rank: Any, origins: tuple[int, ...]) -> None:
    st, _ = _st(rank)
    sim = rank.sim
    rank.emit(ENTER, region=sim.regions["MPI_Win_post"])
    rank.emit(GROUP_SYNC, payload={"sync_level": PROCESS, "win": WIN, "members": origins})
    for o in origins:
        st.posts[(rank.rank, o)].append(rank.t + sim.net(0))
        sim.notify(("rma", "post", rank.rank, o))
    rank.emit(LEAVE, region=sim.regions["MPI_Win_post"])


def _await_each(rank: Any, sent: dict, seen: dict, what: str,
                peers: tuple[int, ...]) -> Generator[tuple, Any, None]:
    """Wait for the next ``what`` ("post" or "note") of each of ``peers`` to this
    rank: the time it arrives, in the order the peer sent them."""
    for p in peers:
        k = seen[p]
        while len(sent[(p, rank.rank)]) <= k:
            yield ("rma", what, p, rank.rank)
        rank.t = max(rank.t, sent[(p, rank.rank)][k])
        seen[p] += 1


def start(rank: Any, targets: tuple[int, ...]) -> Generator[tuple, Any, None]:
    st, me = _st(rank)
    sim = rank.sim
    rank.emit(ENTER, region=sim.regions["MPI_Win_start"])
    rank.emit(GROUP_SYNC, payload={"sync_level": PROCESS, "win": WIN, "members": targets})
    yield from _await_each(rank, st.posts, me.posts_seen, "post", targets)
    me.access, me.epoch_dep = targets, {}
    rank.emit(LEAVE, region=sim.regions["MPI_Win_start"])


def complete(rank: Any) -> None:
    st, me = _st(rank)
    sim = rank.sim
    targets = me.access or ()
    rank.emit(ENTER, region=sim.regions["MPI_Win_complete"])
    _completions(rank, me)
    rank.emit(GROUP_SYNC, payload={"sync_level": BOTH, "win": WIN, "members": targets})
    for t in targets:
        note = max(rank.t + sim.net(0), me.epoch_dep.get(t, float("-inf")))
        st.notes[(rank.rank, t)].append(note)
        sim.notify(("rma", "note", rank.rank, t))
    me.access, me.epoch_dep = None, {}
    rank.emit(LEAVE, region=sim.regions["MPI_Win_complete"])


def wait(rank: Any, origins: tuple[int, ...]) -> Generator[tuple, Any, None]:
    st, me = _st(rank)
    sim = rank.sim
    rank.emit(ENTER, region=sim.regions["MPI_Win_wait"])
    rank.emit(GROUP_SYNC, payload={"sync_level": BOTH, "win": WIN, "members": origins})
    yield from _await_each(rank, st.notes, me.notes_seen, "note", origins)
    rank.emit(LEAVE, region=sim.regions["MPI_Win_wait"])


def lock(rank: Any, target: int, exclusive: bool, ticket: int) -> Generator[tuple, Any, None]:
    st, me = _st(rank)
    sim = rank.sim
    rank.emit(ENTER, region=sim.regions["MPI_Win_lock"])
    rank.emit(REQUEST_LOCK, payload={"win": WIN, "remote": target, "lock_id": 0,
                                     "lock_type": "EXCLUSIVE" if exclusive else "SHARED"})
    grant = rank.t + sim.net(0)
    for j in range(ticket):
        key = ("rma", "release", target, j)
        while (target, j) not in st.released:
            yield key
        r, excl = st.released[(target, j)]
        if exclusive or excl:
            grant = max(grant, r)
    rank.t = max(rank.t, grant + sim.net(0))
    me.lock, me.epoch_dep, me.fetched = (target, ticket, exclusive), {}, float("-inf")
    rank.emit(LEAVE, region=sim.regions["MPI_Win_lock"])


def unlock(rank: Any, target: int) -> None:
    st, me = _st(rank)
    sim = rank.sim
    if me.lock is None or me.lock[0] != target:
        raise rank.fail(f"unlock of target {target} without its lock")
    _, ticket, exclusive = me.lock
    rank.emit(ENTER, region=sim.regions["MPI_Win_unlock"])
    rank.t = max(rank.t, me.fetched)
    r = max(rank.t + sim.net(0), me.epoch_dep.get(target, float("-inf")))
    rank.t = max(rank.t, r + sim.net(0))
    st.released[(target, ticket)] = (r, exclusive)
    sim.notify(("rma", "release", target, ticket))
    _completions(rank, me)
    rank.emit(RELEASE_LOCK, payload={"win": WIN, "remote": target, "lock_id": 0})
    me.lock = None
    rank.emit(LEAVE, region=sim.regions["MPI_Win_unlock"])


def run_op(rank: Any, op: tuple) -> Generator[tuple, Any, None]:
    """Dispatch one RMA op of the program (``op[0]`` in :data:`RMA_OPS`)."""
    name = op[0]
    if name == "win_create":
        yield from win_create(rank)
    elif name == "win_free":
        yield from win_free(rank)
    elif name == "win_fence":
        yield from fence(rank)
    elif name in ("rma_put", "rma_accumulate", "rma_fetch_add"):
        transfer(rank, name[4:], rank.peer(op[1], name), op[2])
    elif name == "win_post":
        post(rank, tuple(op[1]))
    elif name == "win_start":
        yield from start(rank, tuple(op[1]))
    elif name == "win_complete":
        complete(rank)
    elif name == "win_wait":
        yield from wait(rank, tuple(op[1]))
    elif name == "win_lock":
        yield from lock(rank, rank.peer(op[1], "win_lock"), bool(op[2]), int(op[3]))
    elif name == "win_unlock":
        unlock(rank, rank.peer(op[1], "win_unlock"))
