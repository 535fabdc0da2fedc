"""Hybrid model programs for the ground-truth simulator: OpenMP, Pthreads, GPUs and
MPI+OpenMP (issue #17). The ops and their measurement model are those of
:mod:`compensate.simulate.threads`; a program's CPU threads and streams are its
:attr:`Program.threads <compensate.simulate.programs.Program.threads>`.

=========================================  ==============================================
op (constructor)                           meaning
=========================================  ==============================================
``omp_fork(n)`` / ``omp_begin()``          open a parallel region of ``n`` threads: the
                                           master forks, each worker's first op of it
``omp_end()``                              every member: end of the region (the master
                                           then joins the team)
``omp_barrier()``                          every member: an implicit barrier
``omp_critical(d)``                        ``!$omp critical`` around ``d`` s of work
``mutex(lock, d)``                         pthread_mutex_lock, ``d`` s of work, unlock
``pthread_create(seq)`` / ``_join(seq)``   creator: start / join thread ``seq``
``pthread_begin(seq)`` / ``_end(seq)``     that thread's first / last op
``ez_mutex(address, d)``                   as ``mutex``, written as EZTrace does (the
                                           address on the Enters, no lock records)
``ez_create(seq)`` / ``ez_join(seq)``      EZTrace: create / join thread ``seq``
``ez_begin(seq[, latency])`` / ``ez_end``  that thread's first / last op (seq 0: main)
``ez_barrier(address, n)``                 EZTrace: pthread_barrier_wait of ``n`` threads
``launch(kernel, d, stream[, latency])``   host: launch a kernel of ``d`` s on the
                                           rank's ``stream``-th extra location
``gpu_sync(streams[, tail])``              host: cudaStreamSynchronize on those streams
=========================================  ==============================================

These programs are kept apart from :data:`~compensate.simulate.programs.PROGRAMS`
(whose every program the MPI-only tests, the fingerprints and the OTF2 writer go
through: thread records built by the simulator carry text-format fields, which
the OTF2 writer cannot write yet); :func:`compensate.simulate.simulate` runs both.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from compensate.model import ACCELERATOR_STREAM, CPU_THREAD
from compensate.simulate.programs import (
    Op,
    Program,
    _check,
    _jitter,
    allreduce,
    call,
    compute,
    recv,
    send,
)


def omp_fork(threads: int) -> Op:
    """Master: ThreadFork of a team of ``threads``, its own ThreadTeamBegin, Enter."""
    return ("omp_fork", int(threads))


def omp_begin() -> Op:
    """Worker: ThreadTeamBegin of the next team (after the fork), Enter."""
    return ("omp_begin",)


def omp_end() -> Op:
    """Every member: Leave, ThreadTeamEnd; the master then ThreadJoin."""
    return ("omp_end",)


def omp_barrier() -> Op:
    """Every member of the team: an OpenMP (implicit) barrier."""
    return ("omp_barrier",)


def omp_critical(seconds: float) -> Op:
    """``!$omp critical`` (lock 0 of model OPENMP) around ``seconds`` of work."""
    return ("omp_critical", float(seconds))


def mutex(lock: int, seconds: float) -> Op:
    """Pthread mutex ``lock``: lock, ``seconds`` of work, unlock."""
    return ("mutex", int(lock), float(seconds))


def pthread_create(seq: int) -> Op:
    return ("pthread_create", int(seq))


def pthread_begin(seq: int) -> Op:
    return ("pthread_begin", int(seq))


def pthread_end(seq: int) -> Op:
    return ("pthread_end", int(seq))


def pthread_join(seq: int) -> Op:
    return ("pthread_join", int(seq))


def ez_mutex(address: int, seconds: float) -> Op:
    """EZTrace's view of a mutex: lock, ``seconds`` of work, unlock, the mutex's
    ``address`` on both Enters."""
    return ("ez_mutex", int(address), float(seconds))


def ez_create(seq: int) -> Op:
    return ("ez_create", int(seq))


def ez_begin(seq: int, latency: float = 2e-6) -> Op:
    """Thread ``seq``'s ThreadBegin, ``latency`` after its create (seq 0: the main
    thread, no create)."""
    return ("ez_begin", int(seq), float(latency))


def ez_end(seq: int) -> Op:
    return ("ez_end", int(seq))


def ez_join(seq: int) -> Op:
    return ("ez_join", int(seq))


def ez_barrier(address: int, threads: int) -> Op:
    """pthread_barrier_wait on the barrier at ``address`` shared by ``threads``."""
    return ("ez_barrier", int(address), int(threads))


def launch(kernel: str, seconds: float, stream: int, latency: float | None = None) -> Op:
    """Host: launch ``kernel`` (``seconds`` on the device) on extra location ``stream``;
    ``latency``: launch -> an idle stream starts it (default the simulator's
    ``LAUNCH_LATENCY``)."""
    op = ("launch", kernel, float(seconds), int(stream))
    return op if latency is None else (*op, float(latency))


def gpu_sync(streams: Sequence[int], tail: float | None = None) -> Op:
    """Host: synchronize with the given streams (their last launched kernel);
    ``tail``: the last kernel's end -> the call returns (default ``SYNC_LATENCY``)."""
    op = ("gpu_sync", tuple(int(s) for s in streams))
    return op if tail is None else (*op, float(tail))


# --- programs ------------------------------------------------------------------------

def _team(ranks: int, threads: int) -> list[tuple[int, str, list[Op]]]:
    """``threads - 1`` workers per rank (their op lists empty for now)."""
    return [(r, CPU_THREAD, []) for r in range(ranks) for _ in range(threads - 1)]


def _region(ops: list[list[Op]], extra: list, r: int, threads: int,
            body: Callable[[int], list[Op]]) -> None:
    """One parallel region on rank ``r``: member ``i``'s ops are ``body(i)``."""
    workers = [ops_ for rank, _, ops_ in extra if rank == r]
    ops[r].append(omp_fork(threads))
    ops[r].extend(body(0))
    ops[r].append(omp_end())
    for i, w in enumerate(workers[:threads - 1], start=1):
        w.append(omp_begin())
        w.extend(body(i))
        w.append(omp_end())


def omp_loop(ranks: int = 1, iterations: int = 20, seed: int = 0, *, threads: int = 4,
             chunks: int = 4, chunk_time: float = 5e-6, critical_time: float = 5e-7,
             serial_time: float = 1e-5) -> Program:
    """OpenMP fork/join loop: per iteration and process a parallel region whose
    members work ``chunks`` traced chunks each (member ``i`` ``1 + 0.3·i`` times the
    base, jittered), meet in the loop's implicit barrier, add their result in a
    critical section and meet in the region's closing barrier; the master then
    works serially. Processes (``ranks``) do not communicate."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    extra = _team(ranks, threads)
    for _ in range(iterations):
        for r in range(ranks):
            def body(i: int) -> list[Op]:
                out = [call("chunk", _jitter(rng, chunk_time * (1 + 0.3 * i)))
                       for _ in range(chunks)]
                return [*out, omp_barrier(), omp_critical(_jitter(rng, critical_time)),
                        omp_barrier()]
            _region(ops, extra, r, threads, body)
            ops[r].append(call("serial", _jitter(rng, serial_time)))
    return Program("omp_loop", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                         threads=threads), extra)


def hybrid_halo(ranks: int = 4, iterations: int = 20, seed: int = 0, *, threads: int = 3,
                halo_bytes: int = 4096, step_time: float = 1e-5,
                reduce_every: int = 5) -> Program:
    """MPI+OpenMP halo exchange: each iteration a parallel region (the update, in
    ``threads`` jittered traced pieces per member with rank- and thread-dependent
    cost, a barrier, a critical section for the residual, the closing barrier), then
    the master alone exchanges halos with both neighbours (MPI_THREAD_FUNNELED) and
    every ``reduce_every`` iterations joins an Allreduce."""
    _check(ranks, iterations, 2)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    extra = _team(ranks, threads)
    for it in range(iterations):
        for r in range(ranks):
            def body(i: int, r: int = r, it: int = it) -> list[Op]:
                scale = (1 + 0.2 * ((r + it) % 3)) * (1 + 0.15 * i) / threads
                out = [call("update", _jitter(rng, step_time * scale)) for _ in range(3)]
                return [*out, omp_barrier(), omp_critical(_jitter(rng, 3e-7)), omp_barrier()]
            _region(ops, extra, r, threads, body)
            left, right = (r - 1) % ranks, (r + 1) % ranks
            ops[r] += [send(right, halo_bytes, 0), recv(left, 0),
                       send(left, halo_bytes, 1), recv(right, 1)]
            if reduce_every and (it + 1) % reduce_every == 0:
                ops[r].append(allreduce(8))
    return Program("hybrid_halo", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                            threads=threads, halo_bytes=halo_bytes), extra)


def pthreads(ranks: int = 1, iterations: int = 15, seed: int = 0, *, threads: int = 3,
             rounds: int = 2, work_time: float = 4e-6, locked_time: float = 1e-6) -> Program:
    """Pthreads create/join with a mutex: per round the main thread creates
    ``threads`` threads (reusing their locations from round to round), works and
    takes the mutex itself, then joins them; each thread ``iterations`` times works
    (traced, thread-dependent cost) and updates shared data under mutex 0."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    extra = [(r, CPU_THREAD, []) for r in range(ranks) for _ in range(threads)]
    for r in range(ranks):
        mine = [o for rank, _, o in extra if rank == r]
        seq = 0
        for _ in range(rounds):
            seqs = []
            for j, w in enumerate(mine):
                seq += 1
                seqs.append(seq)
                ops[r].append(pthread_create(seq))
                w.append(pthread_begin(seq))
                for _ in range(iterations):
                    w.append(call("work", _jitter(rng, work_time * (1 + 0.25 * j), 0.4)))
                    w.append(mutex(0, _jitter(rng, locked_time)))
                w.append(pthread_end(seq))
            for _ in range(iterations // 3):
                ops[r].append(call("main_work", _jitter(rng, work_time)))
                ops[r].append(mutex(0, _jitter(rng, locked_time)))
            ops[r].extend(pthread_join(s) for s in seqs)
            ops[r].append(call("reduce", _jitter(rng, work_time / 2)))
    return Program("pthreads", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                         threads=threads, rounds=rounds), extra)


def ez_pthreads(ranks: int = 1, iterations: int = 15, seed: int = 0, *, threads: int = 3,
                work_time: float = 4e-6, locked_time: float = 1e-6,
                barrier_every: int = 3, out_of_order: bool = True) -> Program:
    """Pthreads as EZTrace records them (no Thread* record but each thread's
    ThreadBegin/ThreadEnd): the main thread creates ``threads`` threads, works and
    takes mutex 0x10 itself, then joins them in creation order; each thread
    ``iterations`` times works (thread-dependent cost) and updates shared data under
    the mutex, every ``barrier_every`` iterations all threads meet at barrier 0x20.
    ``out_of_order``: later-created threads start sooner (their start latency falls
    with their number) and the last-created works least, so threads begin and end in
    another order than they are created and joined (the create/join statistic the
    matcher links by is then looser than the truth); else every thread starts
    ``2e-6`` after its create and they end in creation order."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[ez_begin(0)] for _ in range(ranks)]
    extra = [(r, CPU_THREAD, []) for r in range(ranks) for _ in range(threads)]
    for r in range(ranks):
        mine = [o for rank, _, o in extra if rank == r]
        for j, w in enumerate(mine, start=1):
            ops[r].append(ez_create(j))
            w.append(ez_begin(j, 2e-6 * ((threads + 1 - j) if out_of_order else 1)))
            for it in range(iterations):
                scale = 1 + 0.3 * ((threads - j + it) % threads) if out_of_order else \
                    1 + 0.3 * (it % threads)
                w.append(call("work", _jitter(rng, work_time * scale, 0.4)))
                w.append(ez_mutex(0x10, _jitter(rng, locked_time)))
                if barrier_every and (it + 1) % barrier_every == 0:
                    w.append(ez_barrier(0x20, threads))
            w.append(ez_end(j))
        for _ in range(iterations // 3):
            ops[r].append(call("main_work", _jitter(rng, work_time)))
            ops[r].append(ez_mutex(0x10, _jitter(rng, locked_time)))
        ops[r].extend(ez_join(j) for j in range(1, threads + 1))
        ops[r] += [call("reduce", _jitter(rng, work_time / 2)), ez_end(0)]
    return Program("ez_pthreads", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                            threads=threads, out_of_order=out_of_order),
                   extra)


def gpu(ranks: int = 1, iterations: int = 20, seed: int = 0, *, streams: int = 2,
        kernel_time: float = 3e-5, host_calls: int = 8, host_time: float = 2e-6) -> Program:
    """Host + GPU: per iteration the host launches a kernel on each stream (every
    third iteration a second, queued kernel on stream 1), does ``host_calls`` traced
    pieces of work, synchronizes with stream 1, works a little more and synchronizes
    with all streams. Kernel durations are jittered; processes do not communicate."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    extra = [(r, ACCELERATOR_STREAM, []) for r in range(ranks) for _ in range(streams)]
    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            for s in range(1, streams + 1):
                prog.append(launch(f"kernel_{s}", _jitter(rng, kernel_time * (1 + 0.5 * s)), s))
            if it % 3 == 2:
                prog.append(launch("kernel_1b", _jitter(rng, kernel_time / 3), 1))
            for _ in range(host_calls):
                prog.append(call("host_work", _jitter(rng, host_time, 0.5)))
                prog.append(compute(_jitter(rng, host_time / 4)))
            prog.append(gpu_sync([1]))
            prog.append(call("host_work", _jitter(rng, host_time)))
            prog.append(gpu_sync(range(1, streams + 1)))
    return Program("gpu", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                    streams=streams), extra)


def gpu_tail(ranks: int = 1, iterations: int = 20, seed: int = 0, *, streams: int = 2,
             launch_latency: tuple[float, ...] = (8e-6, 3e-6), tail: float = 3e-6,
             kernel_time: float = 1.2e-5, host_calls: int = 4, host_time: float = 2.5e-6,
             long: float = 20.0) -> Program:
    """Host + GPU with a launch latency and a synchronize tail the trace shows (issue
    #41): per iteration the host launches a kernel on each stream (stream ``s`` starts
    it ``launch_latency[s - 1]`` after the launch, plus an exponential jitter of a
    tenth of it), every other iteration a second, queued kernel on stream 1, does
    ``host_calls`` traced pieces of work and synchronizes with all streams, which
    returns ``tail`` (jittered alike) after the last kernel's end. Kernel durations
    vary from half to one and a half times ``kernel_time`` times the stream number,
    ``long`` times that every fifth iteration, so the host reaches some synchronize
    calls before the kernels end (it waits: the measured trace shows the tail, at
    any overhead) and some after, and tracer overhead moves calls from one case to
    the other. Processes do not communicate."""
    _check(ranks, iterations)
    rng = random.Random(seed)
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    extra = [(r, ACCELERATOR_STREAM, []) for r in range(ranks) for _ in range(streams)]
    lat = [launch_latency[(s - 1) % len(launch_latency)] for s in range(1, streams + 1)]

    def jit(x: float) -> float:
        return x * (1 + rng.expovariate(10.0))

    for it in range(iterations):
        for r in range(ranks):
            prog = ops[r]
            for s in range(1, streams + 1):
                d = kernel_time * s * rng.uniform(0.5, 1.5) * (long if it % 5 == 4 else 1)
                prog.append(launch(f"kernel_{s}", d, s, jit(lat[s - 1])))
            if it % 2 == 1:
                prog.append(launch("kernel_1b", kernel_time / 4, 1, jit(lat[0])))
            for _ in range(host_calls):
                prog.append(call("host_work", _jitter(rng, host_time, 0.5)))
                prog.append(compute(_jitter(rng, host_time / 4)))
            prog.append(gpu_sync(range(1, streams + 1), jit(tail)))
    return Program("gpu_tail", ops, dict(ranks=ranks, iterations=iterations, seed=seed,
                                         streams=streams), extra)


#: name -> builder(ranks, iterations, seed, **sizes) of the programs with threads or
#: streams (module docstring: why not in ``PROGRAMS``); default ranks per program in
#: :data:`HYBRID_RANKS`
HYBRID_PROGRAMS: dict[str, Callable[..., Program]] = {
    "omp_loop": omp_loop,
    "hybrid_halo": hybrid_halo,
    "pthreads": pthreads,
    "ez_pthreads": ez_pthreads,
    "gpu": gpu,
    "gpu_tail": gpu_tail,
}
HYBRID_RANKS = {"omp_loop": 1, "hybrid_halo": 4, "pthreads": 1, "ez_pthreads": 1, "gpu": 1,
                "gpu_tail": 1}
