"""MPI-4 partitioned point-to-point in the ground-truth simulator (issue #20).

The simulator (:mod:`compensate.simulate.simulator`) dispatches each op below to
one function here, which takes the rank (its ``_Rank``: clock ``t``, ``emit``,
``sim``). The measurement model, in the notation of the simulator's docstring
("X@t" = record X stamped at t, "[O]" = its overhead is added):

* ``psend_init(dest, tag, nbytes, s, handle)`` / ``precv_init(source, tag, nbytes, r,
  handle)``: Enter(MPI_Psend_init / MPI_Precv_init) [O]; MpiPsendInit /
  MpiPrecvInit with the envelope, ``nbytes`` of the whole buffer and the number
  of partitions [O]; Leave [O]. The k-th send Init from s to d with a tag pairs
  with the k-th receive Init on d from s with that tag (MPI's init order).
* ``pstart(handle)``: Enter(MPI_Start) [O]; MpiPsendRequest / MpiPrecvRequest [O];
  Leave [O]. Starts the next round of the operation.
* ``pready(handle, i)``: Enter(MPI_Pready) [O]; MpiPready@ts [O]; the library
  copies send partition i's share out, ``t += copy(b_i)`` with ``b_i`` its bytes;
  ``arrival_i = t + net(b_i)``; Leave [O]. The transfer does not wait for the
  receiver (the library buffers what arrives before the receive is started).
* ``parrived(handle, j)``: an MPI_Parrived that returns true: Enter(MPI_Parrived)
  [O]; ``ready = t``; for every send partition i sharing ``b_ij`` bytes with
  receive partition j, ``t = max(t, max(ready, arrival_i) + copy(b_ij))`` (the
  poll loop until the data is there, and the copy in, inside the one recorded
  call); MpiParrived@t [O]; Leave [O].
* ``ptest(handle, j)``: an MPI_Parrived that returns false: Enter(MPI_Parrived)
  [O]; MpiPtested [O]; Leave [O]. The program must place it before the data can
  have arrived; the simulator checks that when the partition is observed
  (:class:`SimulationError` otherwise, in either run).
* ``pwait(handle)``: Enter(MPI_Wait) [O]; a send completes at once (every
  partition must have been made ready: R11's assumption that the library needs
  only the sender's own Pready calls) -- MpiPsendComplete [O]; a receive waits
  for every receive partition no ``parrived`` observed, as ``parrived`` does from
  the same ``ready``, then MpiPrecvComplete [O]; Leave [O].

The request id (per rank, counting from 1) is in the ``request`` column, the
partition index (Pready/Parrived/Ptested) or count (Init) in ``size_recv``.
"""

from __future__ import annotations

from typing import Any

from compensate.matching.partitioned import overlap
from compensate.model import (
    ENTER,
    LEAVE,
    PARRIVED,
    PREADY,
    PRECV_COMPLETE,
    PRECV_INIT,
    PRECV_REQUEST,
    PSEND_COMPLETE,
    PSEND_INIT,
    PSEND_REQUEST,
    PTESTED,
)

#: simulator ops handled here, and the MPI regions they use
OPS = ("psend_init", "precv_init", "pstart", "pready", "parrived", "ptest", "pwait")
REGIONS = ("MPI_Psend_init", "MPI_Precv_init", "MPI_Start", "MPI_Pready", "MPI_Parrived")
_COMM = 0  # the simulator's one communicator (MPI_COMM_WORLD)


class _Pair:
    """A matched pair of partitioned operations (shared by both ranks)."""

    __slots__ = ("key", "s", "r", "nbytes", "arrival", "tests")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.s = self.r = self.nbytes = None
        self.arrival: dict[int, dict[int, float]] = {}  # round -> send partition -> time
        self.tests: dict[tuple[int, int], list[float]] = {}  # (round, j) -> poll times


class _Op:
    """One rank's side of a partitioned operation."""

    __slots__ = ("send", "pair", "request", "round", "parts", "readied", "observed", "active")

    def __init__(self, send: bool, pair: _Pair, request: int, parts: int) -> None:
        self.send, self.pair, self.request, self.parts = send, pair, request, parts
        self.round = -1
        self.readied: set[int] = set()
        self.observed: set[int] = set()
        self.active = False


def run(rank: Any, op: tuple):
    """Execute partitioned op ``op`` on ``rank`` (a generator: it may wait)."""
    return _DISPATCH[op[0]](rank, *op[1:])


def _pair(rank: Any, src: int, dst: int, tag: int) -> _Pair:
    sim = rank.sim
    store = sim.partitioned
    side = "s" if src == rank.rank else "r"
    count_key = ("pinit", side, src, dst, tag)
    k = store.get(count_key, 0)
    store[count_key] = k + 1
    key = ("part", src, dst, tag, k)
    pair = store.get(key)
    if pair is None:
        pair = store[key] = _Pair(key)
    return pair


def _init(rank: Any, send: bool, peer: int, tag: int, nbytes: int, parts: int,
          handle: Any):
    sim = rank.sim
    peer = rank.peer(peer, "partitioned peer")
    if parts < 1:
        raise rank.fail(f"{parts} partitions, expected at least 1")
    src, dst = (rank.rank, peer) if send else (peer, rank.rank)
    pair = _pair(rank, src, dst, tag)
    if pair.nbytes is not None and pair.nbytes != nbytes:
        raise rank.fail(f"partitioned buffer of {nbytes} bytes, the peer's has {pair.nbytes}")
    pair.nbytes = nbytes
    if send:
        pair.s = parts
    else:
        pair.r = parts
    req = rank.next_request
    rank.next_request += 1
    region = sim.regions["MPI_Psend_init" if send else "MPI_Precv_init"]
    rank.emit(ENTER, region=region)
    rank.emit(PSEND_INIT if send else PRECV_INIT, peer=peer, comm=_COMM, tag=tag, size=nbytes,
              size_recv=parts, request=req)
    rank.emit(LEAVE, region=region)
    rank.requests[handle] = _Op(send, pair, req, parts)
    sim.notify(pair.key)
    return
    yield  # a generator like the other ops


def _psend_init(rank: Any, dest: int, tag: int, nbytes: int, parts: int, handle: Any):
    return _init(rank, True, dest, tag, nbytes, parts, handle)


def _precv_init(rank: Any, source: int, tag: int, nbytes: int, parts: int, handle: Any):
    return _init(rank, False, source, tag, nbytes, parts, handle)


def _get(rank: Any, handle: Any, active: bool | None = None) -> _Op:
    op = rank.requests.get(handle)
    if not isinstance(op, _Op):
        raise rank.fail(f"no partitioned request {handle!r}")
    if active is not None and op.active != active:
        raise rank.fail(f"partitioned request {handle!r} is "
                        f"{'not started' if active else 'already started'}")
    return op


def _pstart(rank: Any, handle: Any):
    op = _get(rank, handle, active=False)
    op.round += 1
    op.active = True
    op.readied.clear()
    op.observed.clear()
    region = rank.sim.regions["MPI_Start"]
    rank.emit(ENTER, region=region)
    rank.emit(PSEND_REQUEST if op.send else PRECV_REQUEST, request=op.request)
    rank.emit(LEAVE, region=region)
    return
    yield


def _share(nbytes: int, i: int, parts: int) -> int:
    return (i + 1) * nbytes // parts - i * nbytes // parts


def _pready(rank: Any, handle: Any, i: int):
    sim = rank.sim
    op = _get(rank, handle, active=True)
    if not op.send or not 0 <= i < op.parts or i in op.readied:
        raise rank.fail(f"pready of partition {i} of {handle!r}: not a send partition "
                        f"0..{op.parts - 1} that is not yet ready")
    op.readied.add(i)
    region = sim.regions["MPI_Pready"]
    rank.emit(ENTER, region=region)
    rank.emit(PREADY, request=op.request, size_recv=i)
    b = _share(op.pair.nbytes, i, op.parts)
    rank.t += sim.copy(b)
    op.pair.arrival.setdefault(op.round, {})[i] = rank.t + sim.net(b)
    sim.notify(op.pair.key)
    rank.emit(LEAVE, region=region)
    return
    yield


def _receive(rank: Any, op: _Op, j: int, ready: float):
    """Wait for receive partition ``j`` of the current round and copy it in."""
    sim, pair = rank.sim, op.pair
    while pair.s is None:
        yield pair.key
    s, r = pair.s, op.parts
    got = pair.arrival.setdefault(op.round, {})
    for i in range(s * j // r, min(s, -(-s * (j + 1) // r))):
        shares, b = overlap(i, s, j, r, pair.nbytes)
        if not shares:
            continue
        while i not in got:
            yield pair.key
        rank.t = max(rank.t, max(ready, got[i]) + sim.copy(b))
        for polled in pair.tests.get((op.round, j), ()):
            if polled >= got[i]:
                raise rank.fail(f"ptest of partition {j} at {polled:.9g} s, after its data "
                                f"arrived at {got[i]:.9g} s (it would have returned true)")
    op.observed.add(j)


def _unarrived(rank: Any, handle: Any, j: int, call: str) -> Any:
    """The active receive operation of ``handle`` whose partition ``j`` ``call``
    (parrived, ptest) may still ask for: one not observed yet."""
    op = _get(rank, handle, active=True)
    if op.send or not 0 <= j < op.parts or j in op.observed:
        raise rank.fail(f"{call} of partition {j} of {handle!r}: not a receive partition "
                        f"0..{op.parts - 1} that has not arrived yet")
    return op


def _parrived(rank: Any, handle: Any, j: int):
    op = _unarrived(rank, handle, j, "parrived")
    region = rank.sim.regions["MPI_Parrived"]
    rank.emit(ENTER, region=region)
    yield from _receive(rank, op, j, rank.t)
    rank.emit(PARRIVED, request=op.request, size_recv=j)
    rank.emit(LEAVE, region=region)


def _ptest(rank: Any, handle: Any, j: int):
    op = _unarrived(rank, handle, j, "ptest")
    region = rank.sim.regions["MPI_Parrived"]
    rank.emit(ENTER, region=region)
    op.pair.tests.setdefault((op.round, j), []).append(rank.t)
    rank.emit(PTESTED, request=op.request, size_recv=j)
    rank.emit(LEAVE, region=region)
    return
    yield


def _pwait(rank: Any, handle: Any):
    op = _get(rank, handle, active=True)
    if op.send and len(op.readied) != op.parts:
        raise rank.fail(f"pwait on {handle!r} before every partition was made ready")
    region = rank.sim.regions["MPI_Wait"]
    rank.emit(ENTER, region=region)
    if op.send:
        rank.emit(PSEND_COMPLETE, request=op.request)
    else:
        ready = rank.t
        for j in range(op.parts):
            if j not in op.observed:
                yield from _receive(rank, op, j, ready)
        rank.emit(PRECV_COMPLETE, request=op.request)
    rank.emit(LEAVE, region=region)
    op.active = False


_DISPATCH = {"psend_init": _psend_init, "precv_init": _precv_init, "pstart": _pstart,
             "pready": _pready, "parrived": _parrived, "ptest": _ptest, "pwait": _pwait}
