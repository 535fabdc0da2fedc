"""A reduction-heavy iterative solver: conjugate gradients on a 1-D Poisson problem
distributed over the ranks; a held-out program for the real-run benchmark
(``benchmarks/paper_fig1.py --program``). What matters to compensation: two
``Allreduce`` per iteration (the dot products) and a neighbour exchange by
``Sendrecv``, around little computation (numpy on ``--cells`` numbers), so the
run is mostly the MPI wrappers' records and the waits between them; every rank
does the same, and each collective ties the ranks together.

Each rank owns ``--cells`` unknowns of the matrix tridiag(-1, 2, -1) (a periodic
ring of ranks, one ghost value each side). ``--iterations`` iterations are made,
converged or not, so that a traced and an untraced run do the same work.

Usage::

    mpiexec -n 2 python examples/mpi/solver.py [--iterations 400] [--cells 200]
        [--timing FILE.json]

``--timing`` writes ``{"ranks", "seconds", "off_cpu", "residual"}`` as
``examples/montecarlo_pi.py`` does: ``seconds`` is the span of :func:`run` over all
ranks (earliest start to latest end, after a common barrier); ``off_cpu`` the
largest wall-minus-CPU time (of its main thread, at least 0:
the CPU clock's reads enclose the wall clock's) of a rank in :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import numpy.random  # noqa: F401 - loaded here, not by the first np.random use in run()
from mpi4py import MPI


def halo(comm: MPI.Intracomm, p: np.ndarray, left: int, right: int,
         edge: np.ndarray, ghost: np.ndarray) -> None:
    """Fill ``p[0]`` and ``p[-1]`` (the ghosts) from the neighbours."""
    edge[0] = p[-2]
    comm.Sendrecv(edge, dest=right, sendtag=1, recvbuf=ghost, source=left, recvtag=1)
    p[0] = ghost[0]
    edge[0] = p[1]
    comm.Sendrecv(edge, dest=left, sendtag=2, recvbuf=ghost, source=right, recvtag=2)
    p[-1] = ghost[0]


def matvec(p: np.ndarray) -> np.ndarray:
    """tridiag(-1, 2, -1) times the owned part of ``p`` (ghosts included)."""
    return 2.0 * p[1:-1] - p[:-2] - p[2:]


def dot(comm: MPI.Intracomm, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> float:
    """The global dot product: a local one, then an Allreduce."""
    local = np.array([float(a @ b)])
    comm.Allreduce(local, out, op=MPI.SUM)
    return float(out[0])


def run(comm: MPI.Intracomm, args: argparse.Namespace) -> float:
    """The measured part: ``--iterations`` CG iterations; returns the final
    residual norm."""
    rank, size = comm.Get_rank(), comm.Get_size()
    left, right = (rank - 1) % size, (rank + 1) % size
    n = args.cells
    rng = np.random.default_rng(args.seed + rank)
    b = rng.random(n)
    x = np.zeros(n)
    r = b.copy()
    p = np.zeros(n + 2)
    p[1:-1] = r
    edge, ghost, out = np.zeros(1), np.zeros(1), np.zeros(1)
    rr = dot(comm, r, r, out)
    for _ in range(args.iterations):
        halo(comm, p, left, right, edge, ghost)
        ap = matvec(p) + 1e-3 * p[1:-1]  # shifted: positive definite on the ring
        pap = dot(comm, p[1:-1], ap, out)
        alpha = rr / pap if pap else 0.0  # converged to the last bit: keep iterating
        x += alpha * p[1:-1]
        r -= alpha * ap
        rr_new = dot(comm, r, r, out)
        p[1:-1] = r + (rr_new / rr if rr else 0.0) * p[1:-1]
        rr = rr_new
    return rr ** 0.5


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--cells", type=int, default=200, help="unknowns per rank")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timing", metavar="FILE.json")
    return p.parse_args(argv)


def main() -> None:
    args = parse()
    comm = MPI.COMM_WORLD
    comm.Barrier()
    cpu0, t0 = time.thread_time_ns(), time.monotonic_ns()
    residual = run(comm, args)
    t1, cpu1 = time.monotonic_ns(), time.thread_time_ns()
    spans = comm.gather((t0, t1, max(0, (t1 - t0) - (cpu1 - cpu0))), root=0)
    if comm.Get_rank() == 0:
        seconds = (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e9
        result = {"ranks": comm.Get_size(), "seconds": seconds, "residual": residual,
                  "off_cpu": max(s[2] for s in spans) / 1e9}
        print(json.dumps(result))
        if args.timing:
            with open(args.timing, "w") as f:
                json.dump(result, f)


if __name__ == "__main__":
    main()
