"""The paper's Monte-Carlo estimation of π as a master/worker mpi4py program.

Mirrors ``compensate.simulate.programs.montecarlo``, the simulated version (Wolf, Malony,
Shende, Morris, Fig. 1): rank 0 is the master. Each round every worker asks the
master for work (a small request message); the master takes requests in whatever
order they arrive (``Recv`` from ``ANY_SOURCE``), generates a chunk of random
numbers of varying length and sends it to the requester. A worker calls the tiny
function :func:`get_coords` once per pair of numbers — the frequent, cheap call
that causes most of the tracing intrusion — and counts the points inside the unit
circle. Every ``--check-every`` rounds all ranks combine the counts with an
Allreduce and stop once the estimate is within ``--tolerance`` of π (0: run all
``--rounds``). At the end each worker sends one more request and the master
answers with a stop message.

Every round hands out the same chunks whatever order the requests arrive in, so
the estimate and the number of rounds depend only on the seed: an instrumented
and an uninstrumented run do the same work.

Usage::

    mpiexec -n 4 python examples/montecarlo_pi.py [--rounds 300] [--pairs 300]
        [--check-every 2] [--tolerance 0] [--seed 1] [--timing FILE.json]

``--timing`` writes ``{"ranks", "seconds", "pi", "rounds", "off_cpu"}``:
``seconds`` is the span of :func:`run` over all ranks (earliest start to latest
end, after a common barrier), the same interval a trace shows as Enter/Leave of
``run``; ``off_cpu`` the largest time a rank spent in :func:`run` without running
(wall minus the main thread's CPU time). MPICH waits by busy-polling, so a rank never sleeps: its
off-CPU time is time the OS gave its core to someone else.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import numpy.random  # noqa: F401 - loaded here, not by the first np.random use in run()
from mpi4py import MPI

TAG_REQUEST, TAG_WORK, TAG_STOP = 1, 2, 3


def get_coords(chunk: list[float], i: int) -> tuple[float, float]:
    """The i-th random point of a chunk (called once per pair)."""
    return chunk[2 * i], chunk[2 * i + 1]


def generate_chunk(rng: np.random.Generator, pairs: int) -> np.ndarray:
    """Random numbers for between pairs/2 and 3·pairs/2 points."""
    n = int(rng.integers((pairs + 1) // 2, pairs + pairs // 2 + 1))
    return rng.random(2 * n)


def count_inside(chunk: list[float]) -> int:
    inside = 0
    for i in range(len(chunk) // 2):
        x, y = get_coords(chunk, i)
        if x * x + y * y <= 1.0:
            inside += 1
    return inside


def converged(comm: MPI.Intracomm, counts: np.ndarray, tolerance: float) -> tuple[bool, float]:
    """Combine (inside, total) over all ranks; stop when within tolerance of π."""
    total = np.zeros(2, dtype=np.int64)
    comm.Allreduce(counts, total, op=MPI.SUM)
    estimate = 4.0 * total[0] / total[1] if total[1] else 0.0
    return tolerance > 0 and abs(estimate - math.pi) < tolerance, estimate


def master(comm: MPI.Intracomm, args: argparse.Namespace) -> tuple[float, int]:
    rng = np.random.default_rng(args.seed)
    workers = comm.Get_size() - 1
    request = np.zeros(1, dtype=np.int64)
    status = MPI.Status()
    estimate, rounds = 0.0, 0
    zero = np.zeros(2, dtype=np.int64)
    for it in range(args.rounds):
        rounds = it + 1
        for _ in range(workers):
            comm.Recv(request, source=MPI.ANY_SOURCE, tag=TAG_REQUEST, status=status)
            comm.Send(generate_chunk(rng, args.pairs), dest=status.Get_source(), tag=TAG_WORK)
        if rounds % args.check_every == 0:
            done, estimate = converged(comm, zero, args.tolerance)
            if done:
                break
    stop = np.zeros(1, dtype=np.float64)
    for _ in range(workers):
        comm.Recv(request, source=MPI.ANY_SOURCE, tag=TAG_REQUEST, status=status)
        comm.Send(stop, dest=status.Get_source(), tag=TAG_STOP)
    return estimate, rounds


def worker(comm: MPI.Intracomm, args: argparse.Namespace) -> tuple[float, int]:
    request = np.full(1, comm.Get_rank(), dtype=np.int64)
    buf = np.empty(2 * (args.pairs + args.pairs // 2), dtype=np.float64)
    status = MPI.Status()
    counts = np.zeros(2, dtype=np.int64)
    estimate, rounds = 0.0, 0
    for it in range(args.rounds):
        rounds = it + 1
        comm.Send(request, dest=0, tag=TAG_REQUEST)
        comm.Recv(buf, source=0, tag=TAG_WORK, status=status)
        chunk = buf[:status.Get_count(MPI.DOUBLE)].tolist()
        counts[0] += count_inside(chunk)
        counts[1] += len(chunk) // 2
        if rounds % args.check_every == 0:
            done, estimate = converged(comm, counts, args.tolerance)
            if done:
                break
    comm.Send(request, dest=0, tag=TAG_REQUEST)
    comm.Recv(buf, source=0, tag=TAG_STOP)
    return estimate, rounds


def run(comm: MPI.Intracomm, args: argparse.Namespace) -> tuple[float, int]:
    """The measured part: master or worker."""
    return master(comm, args) if comm.Get_rank() == 0 else worker(comm, args)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--pairs", type=int, default=300,
                   help="mean points per chunk (at most 1.5x: 300 keeps chunks below "
                        "MPICH's 8 KiB shared-memory cell, so every send is eager)")
    p.add_argument("--check-every", type=int, default=2)
    p.add_argument("--tolerance", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timing", metavar="FILE.json")
    return p.parse_args(argv)


def main() -> None:
    args = parse()
    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        raise SystemExit("montecarlo.py needs at least 2 ranks (a master and a worker)")
    comm.Barrier()
    cpu0, t0 = time.thread_time_ns(), time.monotonic_ns()
    estimate, rounds = run(comm, args)
    t1, cpu1 = time.monotonic_ns(), time.thread_time_ns()
    spans = comm.gather((t0, t1, max(0, (t1 - t0) - (cpu1 - cpu0))), root=0)
    if comm.Get_rank() == 0:
        seconds = (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e9
        result = {"ranks": comm.Get_size(), "seconds": seconds, "pi": estimate,
                  "rounds": rounds, "off_cpu": max(s[2] for s in spans) / 1e9}
        print(json.dumps(result))
        if args.timing:
            with open(args.timing, "w") as f:
                json.dump(result, f)


if __name__ == "__main__":
    main()
