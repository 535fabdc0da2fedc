"""Model MPI programs for the ground-truth simulator (:mod:`compensate.simulate`).

A program is a :class:`Program`: one list of *ops* per rank, executed in order by
the simulator. Ops are plain tuples whose first element names the operation; build
them with the constructor functions below rather than by hand. All ranks are ranks
of MPI_COMM_WORLD (communicator 0); every message and collective uses it.

=====================================  ==================================================
op (constructor)                       meaning
=====================================  ==================================================
``compute(d)``                         ``d`` seconds of untraced work (no records)
``call(name, d)``                      user function: Enter(name), ``d`` s work, Leave(name)
``enter(name)`` / ``leave(name)``      open / close a user region (may nest around ops)
``send(dest, nbytes, tag)``            MPI_Send (eager; rendezvous above the eager limit)
``ssend(dest, nbytes, tag)``           MPI_Ssend (always rendezvous)
``recv(source, tag)``                  MPI_Recv; ``source`` may be :data:`ANY_SOURCE`
``isend(dest, nbytes, tag, handle)``   MPI_Isend; ``handle`` is any hashable local name
``issend(dest, nbytes, tag, handle)``  MPI_Issend (synchronous: completes in the wait
                                       once the receive was posted and the data arrived)
``irecv(source, tag, handle)``         MPI_Irecv (specific source only)
``mrecv(source, tag)``                 MPI_Mprobe then MPI_Mrecv (specific source only)
``probe(source, tag)``                 MPI_Probe then MPI_Recv of the message it found
                                       (specific source only)
``wait(handle)``                       MPI_Wait on one request
``waitall(handles)``                   MPI_Waitall, completing the requests in list order
``collective(op, nbytes, root)``       MPI collective on COMM_WORLD; ``op`` is a key of
                                       :data:`compensate.model.COLLECTIVE_OPS`; see the
                                       shortcuts ``barrier()``, ``allreduce(n)``, ...
``flush()``                            a trace BufferFlush at this point
``flush_after(kind)``                  a BufferFlush inside the next call, right after
                                       the rank's next record of ``kind`` (``"Enter"``,
                                       ``"MpiCollectiveBegin"``)
``psend_init(dest, nbytes, parts,      MPI-4 partitioned send / receive setup; then
tag, handle)``, ``precv_init(...)``    ``pstart(handle)``, ``pready(handle, i)``,
                                       ``parrived(handle, j)`` (returns true),
                                       ``ptest(handle, j)`` (returns false),
                                       ``pwait(handle)``
                                       (:mod:`compensate.simulate.partitioned`)
``win_create()`` / ``win_free()``      MPI_Win_create / MPI_Win_free of the one RMA window
``win_fence()``                        MPI_Win_fence on it
``rma_put(target, nbytes)``            MPI_Put (``rma_accumulate``: MPI_Accumulate;
                                       ``rma_fetch_add(target)``: MPI_Fetch_and_op)
``win_post(origins)`` ...              MPI_Win_post / ``win_start(targets)`` /
                                       ``win_complete()`` / ``win_wait(origins)``
``win_lock(target, excl, ticket)``     MPI_Win_lock; ``ticket`` fixes the grant order per
                                       target; ``win_unlock(target)`` MPI_Win_unlock
=====================================  ==================================================

A destination or source may be :data:`REPLY`: the sender of this rank's most recent
completed receive. That is how a master answers the worker whose request it took
with ``recv(ANY_SOURCE)`` although the op lists are fixed before the run.

Message sizes are bytes. A receive takes its size from the matched send. For
collectives ``nbytes`` is the per-rank contribution (per-pair block for all-to-all,
per-member block for scatter/gather/reduce-scatter); the simulator derives the
``size_sent``/``size_recv`` record fields from it (see :mod:`compensate.simulate`).

Every builder takes ``ranks``, ``iterations`` and ``seed`` plus its own sizes and
durations; work durations are drawn from ``random.Random(seed)`` when the program is
built, so the truth and the measured run execute exactly the same work.

Why one module (over 600 lines): it is the library of model programs, one short
builder per program on top of the op constructors they all share, and the
:data:`PROGRAMS` table that the simulator, the benchmarks and the tests iterate;
its size is the number of programs, not several concerns.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compensate.model import COLLECTIVE_OPS

ANY_SOURCE = -1  #: wildcard source of :func:`recv`
REPLY = -2  #: the source of this rank's most recent completed receive

Op = tuple  # ("name", args...)


@dataclass
class Program:
    """Per-rank op lists plus a name and the parameters it was built with."""

    name: str
    ops: list[list[Op]]
    params: dict[str, Any] = field(default_factory=dict)
    #: extra locations of the processes: ``(rank, "CPU_THREAD" | "ACCELERATOR_STREAM",
    #: ops)`` (:mod:`compensate.simulate.threads`; a stream's ops are empty)
    threads: list[tuple[int, str, list[Op]]] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        return len(self.ops)


# --- op constructors ---------------------------------------------------------------

def compute(seconds: float) -> Op:
    """Untraced local work of ``seconds``."""
    return ("compute", float(seconds))


def call(name: str, seconds: float) -> Op:
    """A traced user function: Enter(name), ``seconds`` of work, Leave(name)."""
    return ("call", name, float(seconds))


def enter(name: str) -> Op:
    """Enter a user region (the matching :func:`leave` comes later in the list)."""
    return ("enter", name)


def leave(name: str) -> Op:
    """Leave a user region."""
    return ("leave", name)


def send(dest: int, nbytes: int, tag: int = 0) -> Op:
    """MPI_Send of ``nbytes`` to ``dest`` (or :data:`REPLY`)."""
    return ("send", dest, tag, int(nbytes))


def ssend(dest: int, nbytes: int, tag: int = 0) -> Op:
    """MPI_Ssend: synchronous (rendezvous) send."""
    return ("ssend", dest, tag, int(nbytes))


def recv(source: int, tag: int = 0) -> Op:
    """MPI_Recv from ``source`` (a rank, :data:`ANY_SOURCE` or :data:`REPLY`)."""
    return ("recv", source, tag)


def sendrecv(dest: int, nbytes: int, source: int, send_tag: int = 0,
             recv_tag: int = 0) -> Op:
    """MPI_Sendrecv: send ``nbytes`` to ``dest`` and receive from ``source``."""
    return ("sendrecv", dest, int(nbytes), send_tag, source, recv_tag)


def isend(dest: int, nbytes: int, tag: int, handle: Hashable) -> Op:
    """MPI_Isend; complete it later with :func:`wait`/:func:`waitall` on ``handle``."""
    return ("isend", dest, tag, int(nbytes), handle)


def issend(dest: int, nbytes: int, tag: int, handle: Hashable) -> Op:
    """MPI_Issend (nonblocking synchronous); complete it with :func:`wait`/:func:`waitall`."""
    return ("issend", dest, tag, int(nbytes), handle)


def mrecv(source: int, tag: int) -> Op:
    """MPI_Mprobe from ``source`` (or :data:`REPLY`), then MPI_Mrecv of that message."""
    return ("mrecv", source, tag)


def probe(source: int, tag: int) -> Op:
    """MPI_Probe from ``source`` (or :data:`REPLY`), then MPI_Recv of the message the
    probe found (it stays queued until that receive)."""
    return ("probe", source, tag)


def irecv(source: int, tag: int, handle: Hashable) -> Op:
    """MPI_Irecv from a specific ``source`` (or :data:`REPLY`)."""
    return ("irecv", source, tag, handle)


def wait(handle: Hashable) -> Op:
    """MPI_Wait on one request."""
    return ("wait", (handle,), "MPI_Wait")


def waitall(handles: Sequence[Hashable]) -> Op:
    """MPI_Waitall; the requests complete (and are recorded) in list order."""
    return ("wait", tuple(handles), "MPI_Waitall")


def collective(op: str, nbytes: int = 0, root: int = -1) -> Op:
    """A collective on COMM_WORLD. ``root`` is required for rooted operations."""
    op = op.upper()
    if op not in COLLECTIVE_OPS:
        raise ValueError(f"unknown collective operation {op!r}")
    return ("coll", op, int(nbytes), int(root))


def icollective(op: str, nbytes: int, handle: Hashable, root: int = -1) -> Op:
    """A nonblocking collective (MPI_Ibarrier, MPI_Iallreduce, MPI_Ibcast,
    MPI_Igather, ...) that a later :func:`wait` / :func:`waitall` on ``handle``
    completes; ``root`` for rooted (1-to-n, n-to-1) operations."""
    return ("icoll", op.upper(), int(nbytes), handle, int(root))


def barrier() -> Op:
    return collective("BARRIER")


def allreduce(nbytes: int) -> Op:
    return collective("ALLREDUCE", nbytes)


def allgather(nbytes: int) -> Op:
    return collective("ALLGATHER", nbytes)


def alltoall(nbytes: int) -> Op:
    return collective("ALLTOALL", nbytes)


def bcast(nbytes: int, root: int) -> Op:
    return collective("BCAST", nbytes, root)


def scatter(nbytes: int, root: int) -> Op:
    return collective("SCATTER", nbytes, root)


def reduce(nbytes: int, root: int) -> Op:
    return collective("REDUCE", nbytes, root)


def gather(nbytes: int, root: int) -> Op:
    return collective("GATHER", nbytes, root)


def psend_init(dest: int, nbytes: int, parts: int, tag: int, handle: Hashable) -> Op:
    """MPI_Psend_init of an ``nbytes`` buffer in ``parts`` partitions to ``dest``."""
    return ("psend_init", dest, tag, nbytes, parts, handle)


def precv_init(source: int, nbytes: int, parts: int, tag: int, handle: Hashable) -> Op:
    """MPI_Precv_init of an ``nbytes`` buffer in ``parts`` partitions from ``source``."""
    return ("precv_init", source, tag, nbytes, parts, handle)


def pstart(handle: Hashable) -> Op:
    """MPI_Start of a partitioned request."""
    return ("pstart", handle)


def pready(handle: Hashable, partition: int) -> Op:
    """MPI_Pready of one send partition."""
    return ("pready", handle, partition)


def parrived(handle: Hashable, partition: int) -> Op:
    """MPI_Parrived polled until it returns true (one recorded call)."""
    return ("parrived", handle, partition)


def ptest(handle: Hashable, partition: int) -> Op:
    """MPI_Parrived that returns false (the program polls before the data can be there)."""
    return ("ptest", handle, partition)


def pwait(handle: Hashable) -> Op:
    """MPI_Wait on a partitioned request."""
    return ("pwait", handle)


def flush() -> Op:
    """A tracer buffer flush (its duration is a simulator parameter)."""
    return ("flush",)


def flush_after(kind: str) -> Op:
    """A tracer buffer flush inside the next call: right after this rank's next
    record of ``kind`` (an OTF2 record kind name, e.g. ``"Enter"`` before a
    receive, ``"MpiCollectiveBegin"`` before a collective)."""
    return ("flush_after", kind)


def win_create() -> Op:
    """MPI_Win_create of the RMA window (collective over COMM_WORLD)."""
    return ("win_create",)


def win_free() -> Op:
    """MPI_Win_free of the RMA window."""
    return ("win_free",)


def win_fence() -> Op:
    """MPI_Win_fence: closes the epoch of the puts before it, opens the next."""
    return ("win_fence",)


def rma_put(target: int, nbytes: int) -> Op:
    """MPI_Put of ``nbytes`` into ``target``'s window."""
    return ("rma_put", target, nbytes)


def rma_accumulate(target: int, nbytes: int) -> Op:
    """MPI_Accumulate of ``nbytes`` into ``target``'s window."""
    return ("rma_accumulate", target, nbytes)


def rma_fetch_add(target: int) -> Op:
    """MPI_Fetch_and_op (8 bytes each way) on ``target``'s window."""
    return ("rma_fetch_add", target, 8)


def win_post(origins: Sequence[int]) -> Op:
    """MPI_Win_post: expose the window to ``origins``."""
    return ("win_post", tuple(origins))


def win_start(targets: Sequence[int]) -> Op:
    """MPI_Win_start: an access epoch to ``targets`` (blocks until they posted)."""
    return ("win_start", tuple(targets))


def win_complete() -> Op:
    """MPI_Win_complete: ends the access epoch."""
    return ("win_complete",)


def win_wait(origins: Sequence[int]) -> Op:
    """MPI_Win_wait: ends the exposure epoch once every origin completed."""
    return ("win_wait", tuple(origins))


def win_lock(target: int, exclusive: bool, ticket: int) -> Op:
    """MPI_Win_lock of ``target``; the ``ticket``-th grant of that target's lock."""
    return ("win_lock", target, bool(exclusive), int(ticket))


def win_unlock(target: int) -> Op:
    """MPI_Win_unlock of ``target``."""
    return ("win_unlock", target)


# --- helpers -------------------------------------------------------------------------

def _jitter(rng: random.Random, mean: float, spread: float = 0.2) -> float:
    """``mean`` ± ``spread``·mean, uniformly."""
    return mean * (1.0 + spread * (2.0 * rng.random() - 1.0))


def _check(ranks: int, iterations: int, minimum: int = 1) -> None:
    if ranks < minimum:
        raise ValueError(f"this program needs at least {minimum} ranks, got {ranks}")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")


# --- programs -------------------------------------------------------------------------

TAG_REQUEST, TAG_WORK, TAG_STOP = 1, 2, 3


def montecarlo(ranks: int = 4, iterations: int = 10, seed: int = 0, *,
               pairs: int = 50, chunk_bytes: int = 800, request_bytes: int = 8,
               coords_time: float = 2e-7, check_time: float = 5e-8,
               generate_time: float = 2e-6, check_every: int = 2) -> Program:
    """The paper's master/worker Monte-Carlo estimation of pi.

    Rank 0 is the master. Each round a worker sends a request to the master, which
    takes requests with ``recv(ANY_SOURCE)``, generates a chunk of random numbers and
    replies to the requester. The worker then calls the tiny traced function
    ``get_coords`` once per pair (the main intrusion) and tests the point; how many
    pairs a chunk holds varies (uniform in [pairs/2, 3·pairs/2]), so the order in
    which requests reach the master varies too. Every
    ``check_every`` rounds everybody joins an Allreduce (convergence check). At the
    end each worker sends one more request and the master answers with a stop
    message. Each worker has at most one request outstanding, so every round the
    master serves ``ranks - 1`` requests, though not necessarily one per worker.
    """
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    workers = ranks - 1
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    master = ops[0]
    master.append(enter("master"))
    for it in range(iterations):
        for _ in range(workers):
            master.append(recv(ANY_SOURCE, TAG_REQUEST))
            master.append(call("generate_chunk", _jitter(rng, generate_time)))
            master.append(send(REPLY, chunk_bytes, TAG_WORK))
        if (it + 1) % check_every == 0:
            master.append(allreduce(8))
    for _ in range(workers):
        master.append(recv(ANY_SOURCE, TAG_REQUEST))
        master.append(send(REPLY, 4, TAG_STOP))
    master.append(leave("master"))
    for w in range(1, ranks):
        prog = ops[w]
        prog.append(enter("worker"))
        for it in range(iterations):
            prog.append(send(0, request_bytes, TAG_REQUEST))
            prog.append(recv(0, TAG_WORK))
            for _ in range(rng.randint((pairs + 1) // 2, pairs + pairs // 2)):
                prog.append(call("get_coords", _jitter(rng, coords_time)))
                prog.append(compute(_jitter(rng, check_time)))
            if (it + 1) % check_every == 0:
                prog.append(allreduce(8))
        prog.append(send(0, request_bytes, TAG_REQUEST))
        prog.append(recv(0, TAG_STOP))
        prog.append(leave("worker"))
    return Program("montecarlo", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                           pairs=pairs, chunk_bytes=chunk_bytes,
                                           check_every=check_every))


def stencil(ranks: int = 4, iterations: int = 100, seed: int = 0, *,
            halo_bytes: int = 4096, step_time: float = 2e-5,
            reduce_every: int = 10) -> Program:
    """1-D periodic halo exchange with blocking eager sends.

    Each iteration: ``update`` (traced function with jittered work), send right /
    receive from left (tag 0), send left / receive from right (tag 1); every
    ``reduce_every`` iterations an 8-byte Allreduce. With an eager limit below
    ``halo_bytes`` every rank blocks in its first send: a real deadlock, reported
    as such by the simulator.
    """
    return _stencil("stencil", ranks, iterations, seed, halo_bytes, step_time,
                    reduce_every, imbalance=0.0, flush_every=0)


def imbalanced(ranks: int = 4, iterations: int = 100, seed: int = 0, *,
               halo_bytes: int = 4096, step_time: float = 2e-5,
               reduce_every: int = 10, imbalance: float = 0.5,
               flush_every: int = 25) -> Program:
    """:func:`stencil` with load imbalance and buffer flushes.

    Rank ``r`` works ``1 + imbalance·r/(ranks-1)`` times the base step, and every
    ``flush_every`` iterations one rank (rotating) flushes its trace buffer, so
    the flush delay travels to its neighbours.
    """
    return _stencil("imbalanced", ranks, iterations, seed, halo_bytes, step_time,
                    reduce_every, imbalance=imbalance, flush_every=flush_every)


def _stencil(name: str, ranks: int, iterations: int, seed: int, halo_bytes: int,
             step_time: float, reduce_every: int, *, imbalance: float,
             flush_every: int) -> Program:
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            left, right = (r - 1) % ranks, (r + 1) % ranks
            factor = 1.0 + (imbalance * r / (ranks - 1) if ranks > 1 else 0.0)
            prog.append(call("update", _jitter(rng, step_time * factor)))
            if flush_every and (it + 1) % flush_every == 0 and r == (it // flush_every) % ranks:
                prog.append(flush())
            prog.append(send(right, halo_bytes, 0))
            prog.append(recv(left, 0))
            prog.append(send(left, halo_bytes, 1))
            prog.append(recv(right, 1))
            if reduce_every and (it + 1) % reduce_every == 0:
                prog.append(allreduce(8))
    return Program(name, ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                   halo_bytes=halo_bytes, imbalance=imbalance,
                                   flush_every=flush_every))


def flush_in_calls(ranks: int = 4, iterations: int = 40, seed: int = 0, *,
                   nbytes: int = 1024, work_time: float = 2e-5, lead: float = 1e-4,
                   reduce_every: int = 4) -> Program:
    """Buffer flushes inside communication calls (R6 extended, docs/design.md §3).

    Every rank sends to its right neighbour and receives from its left. Even ranks
    work longer (by up to ``lead``, drawn per iteration), so odd ranks wait in
    their receive, and an odd rank flushes inside every receive, right after its
    Enter(MPI_Recv): where the message arrived after the flush ended the wait
    absorbed the flush, where it arrived before (or during) it the flush delayed
    the receive. Every ``reduce_every`` iterations an Allreduce in which one rank
    (rotating) flushes right after its MpiCollectiveBegin: absorbed when another
    member joined after the flush ended, delaying every exit otherwise.
    """
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            extra = rng.uniform(0.0, lead) if r % 2 == 0 else 0.0
            prog.append(call("work", _jitter(rng, work_time) + extra))
            prog.append(send((r + 1) % ranks, nbytes))
            if r % 2:
                prog.append(flush_after("Enter"))
            prog.append(recv((r - 1) % ranks))
            if reduce_every and (it + 1) % reduce_every == 0:
                if r == (it // reduce_every) % ranks:
                    prog.append(flush_after("MpiCollectiveBegin"))
                prog.append(allreduce(8))
    return Program("flush_in_calls", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                               nbytes=nbytes, lead=lead,
                                               reduce_every=reduce_every))


def ring(ranks: int = 4, iterations: int = 150, seed: int = 0, *,
         token_bytes: int = 1024, work_time: float = 1e-5) -> Program:
    """A token travels 0 → 1 → … → n-1 → 0; each holder works before passing it."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for _ in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            nxt, prev = (r + 1) % ranks, (r - 1) % ranks
            if r == 0:
                prog.append(call("work", _jitter(rng, work_time)))
                prog.append(send(nxt, token_bytes))
                prog.append(recv(prev))
            else:
                prog.append(recv(prev))
                prog.append(call("work", _jitter(rng, work_time)))
                prog.append(send(nxt, token_bytes))
    return Program("ring", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                     token_bytes=token_bytes))


def sendrecv_ring(ranks: int = 4, iterations: int = 100, seed: int = 0, *,
                  nbytes: int = 8192, work_time: float = 1e-5,
                  reduce_every: int = 10) -> Program:
    """Every rank shifts a buffer to its right neighbour with MPI_Sendrecv, then
    works (rank-dependent), with a periodic Allreduce."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            prog.append(sendrecv((r + 1) % ranks, nbytes, (r - 1) % ranks))
            prog.append(call("work", _jitter(rng, work_time * (1 + 0.2 * r))))
            if it % reduce_every == reduce_every - 1:
                prog.append(allreduce(8))
    return Program("sendrecv_ring", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                              nbytes=nbytes))


def mixed(ranks: int = 4, iterations: int = 20, seed: int = 0, *,
          nbytes: int = 4096, big_bytes: int = 65536, work_time: float = 1e-5) -> Program:
    """Every construct in one run: eager and synchronous (MPI_Ssend) point-to-point,
    MPI_Sendrecv, Isend/Irecv with Waitall, a nonblocking Iallreduce overlapped with
    work, Gather, Reduce, Bcast, Scan, Allreduce and a buffer flush now and then."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            right, left = (r + 1) % ranks, (r - 1) % ranks
            partner = r + 1 if r % 2 == 0 else r - 1

            def work(scale: float = 1.0, prog=prog, r=r) -> None:
                prog.append(call("work", _jitter(rng, work_time * scale * (1 + 0.15 * r))))
            prog.append(sendrecv(right, nbytes, left))
            work()
            if partner >= ranks:
                pass  # odd rank count: the last rank has no partner
            elif r % 2 == 0:  # synchronous exchange between partners
                prog += [ssend(partner, big_bytes, tag=1), recv(partner, tag=2)]
            else:
                prog += [recv(partner, tag=1), send(partner, nbytes, tag=2)]
            prog += [irecv(left, 3, "l"), irecv(right, 4, "r"), isend(right, nbytes, 3, "sr"),
                     isend(left, nbytes, 4, "sl")]
            work(0.5)
            prog.append(waitall(["l", "r", "sr", "sl"]))
            prog.append(icollective("ALLREDUCE", 64, "ar"))
            work()
            prog.append(wait("ar"))
            prog.append([gather(nbytes, 0), reduce(64, 0), bcast(nbytes, 0),
                         collective("SCAN", 8), allreduce(8)][it % 5])
            if it % 7 == 6:
                prog.append(flush())
    return Program("mixed", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                      nbytes=nbytes, big_bytes=big_bytes))


def pipeline(ranks: int = 4, iterations: int = 150, seed: int = 0, *,
             item_bytes: int = 16384, stage_time: float = 1e-5) -> Program:
    """Rank i receives an item from i-1, processes it, and sends it on to i+1."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for _ in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            if r > 0:
                prog.append(recv(r - 1))
            prog.append(call("stage", _jitter(rng, stage_time * (1 + 0.1 * r))))
            if r < ranks - 1:
                prog.append(send(r + 1, item_bytes))
    return Program("pipeline", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                         item_bytes=item_bytes))


def collectives(ranks: int = 4, iterations: int = 40, seed: int = 0, *,
                nbytes: int = 4096, work_time: float = 1e-5) -> Program:
    """Compute phases separated by every kind of collective, with rotating roots."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        root = it % ranks
        for r in range(ranks):
            prog = ops[r]

            def work(prog: list[Op] = prog, r: int = r) -> None:
                prog.append(call("work", _jitter(rng, work_time * (1 + 0.2 * r), 0.5)))

            work()
            prog.append(barrier())
            work()
            prog.append(allreduce(nbytes))
            work()
            prog.append(bcast(nbytes, root))
            work()
            prog.append(reduce(nbytes, root))
            work()
            prog.append(gather(nbytes, root))
            if it % 4 == 3:
                work()
                prog.append(scatter(nbytes, root))
                prog.append(allgather(nbytes // 4))
                prog.append(alltoall(nbytes // 8))
    return Program("collectives", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                            nbytes=nbytes))


def nonblocking(ranks: int = 4, iterations: int = 60, seed: int = 0, *,
                halo_bytes: int = 8192, step_time: float = 2e-5,
                reduce_every: int = 10) -> Program:
    """Halo exchange with Irecv/Isend to both neighbours, overlapped work, Waitall.

    Every third iteration the requests are completed by individual MPI_Wait calls
    instead of one MPI_Waitall.
    """
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            left, right = (r - 1) % ranks, (r + 1) % ranks
            prog.append(irecv(left, 0, "rl"))
            prog.append(irecv(right, 1, "rr"))
            prog.append(isend(right, halo_bytes, 0, "sr"))
            prog.append(isend(left, halo_bytes, 1, "sl"))
            prog.append(call("interior", _jitter(rng, step_time)))
            handles = ("rl", "rr", "sr", "sl")
            if it % 3 == 2:
                prog.extend(wait(h) for h in handles)
            else:
                prog.append(waitall(handles))
            prog.append(call("boundary", _jitter(rng, step_time / 10)))
            if reduce_every and (it + 1) % reduce_every == 0:
                prog.append(allreduce(8))
    return Program("nonblocking", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                            halo_bytes=halo_bytes))


def pingpong(ranks: int = 2, iterations: int = 40, seed: int = 0, *,
             sizes: Sequence[int] = (64, 4096, 65536, 1 << 20),
             think_time: float = 5e-6) -> Program:
    """Pairs (0,1), (2,3), … exchange messages of each size in ``sizes``, alternating
    MPI_Send and MPI_Ssend, so that rendezvous transfers (and, with an eager limit,
    large-message MPI_Send) are exercised. An odd last rank only computes."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        size = sizes[it % len(sizes)]
        sender = send if it % 2 == 0 else ssend
        for a in range(0, ranks - 1, 2):
            b = a + 1
            ops[a].append(call("think", _jitter(rng, think_time)))
            ops[a].append(sender(b, size, 5))
            ops[a].append(recv(b, 6))
            ops[b].append(recv(a, 5))
            ops[b].append(call("think", _jitter(rng, think_time)))
            ops[b].append(sender(a, size, 6))
        if ranks % 2:
            ops[ranks - 1].append(call("think", _jitter(rng, think_time)))
    return Program("pingpong", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                         sizes=list(sizes)))


def gather_program(ranks: int = 8, iterations: int = 60, seed: int = 0, *,
                   nbytes: int = 65536, work_time: float = 1e-5) -> Program:
    """Workers compute (four traced calls) and MPI_Gather ``nbytes`` each to rank 0,
    which does half their work in one call; every fourth iteration an MPI_Reduce.
    Only n-to-1 collectives, no point-to-point message: a fitted network model can
    come only from the root's waits. The root waits for the last worker's data in
    every instance, so its wait shows that transfer (issue 16: the lower bound, which
    drops the network time, removed 167 % of the dilation here)."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            if r == 0:
                prog.append(call("process", _jitter(rng, work_time / 2)))
            else:
                for _ in range(4):
                    prog.append(call("work", _jitter(rng, work_time * (1 + 0.05 * r) / 4)))
            prog.append(reduce(64, 0) if it % 4 == 3 else gather(nbytes, 0))
    return Program("gather", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                       nbytes=nbytes))


def nonblocking_rooted(ranks: int = 8, iterations: int = 40, seed: int = 0, *,
                       nbytes: int = 4096, work_time: float = 1e-5) -> Program:
    """Nonblocking 1-to-n and n-to-1 collectives overlapped with work: MPI_Ibcast from a
    rotating root, then MPI_Igather (every third iteration MPI_Ireduce, every fourth
    MPI_Iscatter) to it, each completed by MPI_Wait after rank-dependent work."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        root = it % ranks
        for r in range(ranks):
            prog = ops[r]

            def work(scale: float, prog: list[Op] = prog, r: int = r) -> None:
                prog.append(call("work", _jitter(rng, work_time * scale * (1 + 0.3 * r), 0.5)))

            work(1.0)
            prog.append(icollective("SCATTER" if it % 4 == 3 else "BCAST", nbytes, "b", root))
            work(0.3)
            prog.append(wait("b"))
            work(1.0)
            prog.append(icollective("REDUCE" if it % 3 == 2 else "GATHER", nbytes, "g", root))
            work(0.3)
            prog.append(wait("g"))
    return Program("nonblocking_rooted", ops, dict(ranks=ranks, iterations=iterations,
                                                   seed=seed, nbytes=nbytes))


def issend_program(ranks: int = 8, iterations: int = 60, seed: int = 0, *,
                   nbytes: int = 16384, work_time: float = 1e-5) -> Program:
    """Halo exchange with MPI_Issend to the right neighbour and MPI_Irecv from the
    left, rank-dependent work in between and MPI_Waitall; every third iteration the
    receive is a blocking MPI_Recv posted after the work (so the Issend waits for
    it). Communicator creation (CREATE_HANDLE) at the start and its release
    (DESTROY_HANDLE) at the end, as Score-P >= 7 records them."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[collective("CREATE_HANDLE")] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            right, left = (r + 1) % ranks, (r - 1) % ranks
            scale = 1 + 0.2 * ((r + it) % 3)
            if it % 3 == 2:
                prog.append(issend(right, nbytes, 7, "s"))
                prog.append(call("work", _jitter(rng, work_time * scale)))
                prog.append(recv(left, 7))
                prog.append(wait("s"))
            else:
                prog.append(irecv(left, 7, "r"))
                prog.append(issend(right, nbytes, 7, "s"))
                prog.append(call("work", _jitter(rng, work_time * scale)))
                prog.append(waitall(["r", "s"]))
    for prog in ops:
        prog.append(collective("DESTROY_HANDLE"))
    return Program("issend", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                       nbytes=nbytes))


def mprobe_program(ranks: int = 8, iterations: int = 60, seed: int = 0, *,
                   nbytes: int = 4096, work_time: float = 1e-5) -> Program:
    """Ring with matched probes: each rank sends to the right neighbour after
    rank-dependent work and receives from the left with MPI_Mprobe + MPI_Mrecv (every
    third iteration a plain MPI_Recv, so both kinds share the channel's order)."""
    return _probe_ring("mprobe", mrecv, 0, ranks, iterations, seed, nbytes, work_time)


def probe_program(ranks: int = 8, iterations: int = 60, seed: int = 0, *,
                  nbytes: int = 4096, work_time: float = 1e-5) -> Program:
    """Ring with plain probes: each rank sends to the right neighbour after
    rank-dependent work, then makes a rank-dependent number (0-12) of short calls
    and receives from the left with MPI_Probe + MPI_Recv (every third iteration a
    plain MPI_Recv). The receivers' records before a probe, and so the overhead
    removed before it, differ from their senders': without the probe's dependency
    on the send, a probe that waited would come out before the message existed."""
    return _probe_ring("probe", probe, 4, ranks, iterations, seed, nbytes, work_time)


def _probe_ring(name: str, take: Callable[[int, int], Op], short: int, ranks: int,
                iterations: int, seed: int, nbytes: int, work_time: float) -> Program:
    """The ring of :func:`mprobe_program` and :func:`probe_program`: ``take`` receives
    two iterations in three, after ``short`` × ((rank + iteration) mod 4) short calls."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            right, left = (r + 1) % ranks, (r - 1) % ranks
            prog.append(call("work", _jitter(rng, work_time * (1 + 0.3 * ((r + it) % 4)))))
            prog.append(send(right, nbytes, 5))
            for _ in range(short * ((r + it) % 4)):
                prog.append(call("step", _jitter(rng, work_time / 50)))
            prog.append(recv(left, 5) if it % 3 == 2 else take(left, 5))
    return Program(name, ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                   nbytes=nbytes))


def partitioned_halo(ranks: int = 8, iterations: int = 10, seed: int = 0, *,
                     nbytes: int = 32768, send_parts: int = 4, recv_parts: int = 2,
                     work_time: float = 1e-5, poll: bool = False) -> Program:
    """Periodic 1-D halo exchange with MPI-4 partitioned communication: each rank
    sends its halo to the right neighbour in ``send_parts`` partitions, each made
    ready after its own piece of work (rank-, iteration- and partition-dependent,
    so partitions become ready at different times), and receives the left
    neighbour's halo in ``recv_parts`` partitions; an MPI_Allreduce ends every
    iteration (and a barrier follows the Inits). With ``poll`` the receiver polls
    its last partition once right after the start (MPI_Parrived returns false: the
    sender is still working on it) and then
    observes every partition with MPI_Parrived before processing it, before the
    waits; without, it processes after completing the receive in MPI_Wait."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = []
    for r in range(ranks):
        right, left = (r + 1) % ranks, (r - 1) % ranks
        ops.append([precv_init(left, nbytes, recv_parts, 11, "r"),
                    psend_init(right, nbytes, send_parts, 11, "s"), barrier()])
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            prog += [pstart("r"), pstart("s")]
            if poll:  # the last partition: its sender is still working
                prog.append(ptest("r", recv_parts - 1))
            for i in range(send_parts):
                scale = 0.5 + 0.5 * ((r + it + 2 * i) % 4)
                prog.append(call("work", _jitter(rng, work_time * scale)))
                prog.append(pready("s", i))
            if poll:
                for j in range(recv_parts):
                    prog.append(parrived("r", j))
                    prog.append(call("process", _jitter(rng, 0.2 * work_time)))
                prog += [pwait("s"), pwait("r")]
            else:
                prog += [pwait("s"), pwait("r"),
                         call("process", _jitter(rng, 0.2 * work_time * recv_parts))]
            prog.append(allreduce(8))
    return Program("partitioned_poll" if poll else "partitioned", ops,
                   dict(ranks=ranks, iterations=iterations, seed=seed, nbytes=nbytes,
                        send_parts=send_parts, recv_parts=recv_parts, poll=poll))


def partitioned_poll(ranks: int = 8, iterations: int = 10, seed: int = 0, *,
                     nbytes: int = 32768, work_time: float = 1e-5) -> Program:
    """:func:`partitioned_halo` with 4 send and 4 receive partitions, polled early."""
    return partitioned_halo(ranks, iterations, seed, nbytes=nbytes, send_parts=4,
                            recv_parts=4, work_time=work_time, poll=True)


#: name -> builder(ranks, iterations, seed, **sizes)
def rma_fence(ranks: int = 4, iterations: int = 30, seed: int = 0, *,
              halo_bytes: Sequence[int] = (8192, 65536, 262144),
              step_time: float = 2e-5) -> Program:
    """1-D halo exchange with MPI_Put between fences (active target, R10): each
    iteration works, puts its halo into both neighbours' windows and fences. The
    halo size cycles through ``halo_bytes`` (grid levels)."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[win_create(), win_fence()] for _ in range(ranks)]
    for it in range(iterations):
        size = halo_bytes[it % len(halo_bytes)]
        for r in range(ranks):
            ops[r] += [call("interior", _jitter(rng, step_time, 0.5)),
                       rma_put((r + 1) % ranks, size),
                       rma_put((r - 1) % ranks, size), win_fence()]
    for r in range(ranks):
        ops[r].append(win_free())
    return Program("rma_fence", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                          halo_bytes=tuple(halo_bytes)))


def rma_pscw(ranks: int = 4, iterations: int = 40, seed: int = 0, *,
             halo_bytes: Sequence[int] = (8192, 65536), step_time: float = 2e-5) -> Program:
    """Neighbour exchange with post/start/complete/wait (general active target):
    each rank exposes its window to its neighbours, puts into theirs, and waits
    for them; imbalanced work makes Late Post and Early Wait. The halo size cycles
    through ``halo_bytes``."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[win_create()] for _ in range(ranks)]
    for it in range(iterations):
        size = halo_bytes[it % len(halo_bytes)]
        for r in range(ranks):
            nb = sorted({(r - 1) % ranks, (r + 1) % ranks})
            ops[r] += [call("interior", _jitter(rng, step_time, 0.6)), win_post(nb),
                       win_start(nb), *(rma_put(t, size) for t in nb), win_complete(),
                       call("boundary", _jitter(rng, step_time / 4, 0.6)), win_wait(nb)]
    for r in range(ranks):
        ops[r].append(win_free())
    return Program("rma_pscw", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                         halo_bytes=tuple(halo_bytes)))


def rma_lock_counter(ranks: int = 4, iterations: int = 30, seed: int = 0, *,
                     step_time: float = 1e-5) -> Program:
    """A shared counter on rank 0 under lock contention (passive target): each rank
    works, then MPI_Fetch_and_op under an exclusive lock; every third round an
    MPI_Accumulate under a shared lock. The grant order is round by round, rank by
    rank (the ``ticket``)."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[win_create()] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            ticket = it * ranks + r
            ops[r].append(call("work", _jitter(rng, step_time, 0.8)))
            if it % 3 == 2:
                ops[r] += [win_lock(0, False, ticket), rma_accumulate(0, 64), win_unlock(0)]
            else:
                ops[r] += [win_lock(0, True, ticket), rma_fetch_add(0), win_unlock(0)]
    for r in range(ranks):
        ops[r].append(win_free())
    return Program("rma_lock_counter", ops, dict(ranks=ranks, iterations=iterations, seed=seed))


PROGRAMS: dict[str, Callable[..., Program]] = {
    "montecarlo": montecarlo,
    "stencil": stencil,
    "ring": ring,
    "pipeline": pipeline,
    "collectives": collectives,
    "nonblocking": nonblocking,
    "imbalanced": imbalanced,
    "pingpong": pingpong,
    "sendrecv_ring": sendrecv_ring,
    "mixed": mixed,
    "gather": gather_program,
    "nonblocking_rooted": nonblocking_rooted,
    "issend": issend_program,
    "mprobe": mprobe_program,
    "probe": probe_program,
    "partitioned": partitioned_halo,
    "partitioned_poll": partitioned_poll,
    "rma_fence": rma_fence,
    "rma_pscw": rma_pscw,
    "rma_lock_counter": rma_lock_counter,
    "flush_in_calls": flush_in_calls,
}
