"""A 1-D Jacobi stencil with halo exchange by ``Sendrecv``: a held-out program for
the real-run benchmark (``benchmarks/paper_fig1.py --program``), unlike the
Monte-Carlo master/worker in every respect that matters to compensation: all
ranks compute the same amount, they exchange with both neighbours every step
(``Sendrecv`` in a periodic ring, buffers, eager), and the traced function is a
three-point update called once per cell (two records per call).

Every ``--check-every`` steps all ranks combine the change of the step with an
``Allreduce``. The work depends only on the arguments: a traced and an untraced
run do the same computation.

Usage::

    mpiexec -n 2 python examples/mpi/stencil.py [--steps 300] [--cells 150]
        [--check-every 10] [--timing FILE.json]

``--timing`` writes ``{"ranks", "seconds", "off_cpu", "residual"}`` as
``examples/montecarlo_pi.py`` does: ``seconds`` is the span of :func:`run` over all
ranks (earliest start to latest end, after a common barrier), the interval a trace
shows as Enter/Leave of ``run``; ``off_cpu`` the largest wall-minus-CPU time (of its
main thread) of a rank in :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import numpy.random  # noqa: F401 - loaded here, not by the first np.random use in run()
from mpi4py import MPI


def relax(left: float, mid: float, right: float) -> float:
    """The three-point update of one cell (called once per cell and step)."""
    return 0.25 * left + 0.5 * mid + 0.25 * right


def step(u: list[float]) -> tuple[list[float], float]:
    """One Jacobi step of the interior of ``u`` (``u[0]``, ``u[-1]``: halos); the
    new values and the largest change."""
    new = [u[0]]
    change = 0.0
    for i in range(1, len(u) - 1):
        v = relax(u[i - 1], u[i], u[i + 1])
        change = max(change, abs(v - u[i]))
        new.append(v)
    new.append(u[-1])
    return new, change


def run(comm: MPI.Intracomm, args: argparse.Namespace) -> float:
    """The measured part: ``--steps`` exchanges and updates; returns the last
    global change."""
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    rng = np.random.default_rng(args.seed + rank)
    u = [0.0, *rng.random(args.cells).tolist(), 0.0]
    out, inn = np.zeros(1), np.zeros(1)
    local, total = np.zeros(1), np.zeros(1)
    change = 0.0
    for it in range(args.steps):
        out[0] = u[-2]  # my last interior cell goes right, the left halo comes in
        comm.Sendrecv(out, dest=right, sendtag=1, recvbuf=inn, source=left, recvtag=1)
        u[0] = float(inn[0])
        out[0] = u[1]
        comm.Sendrecv(out, dest=left, sendtag=2, recvbuf=inn, source=right, recvtag=2)
        u[-1] = float(inn[0])
        u, local[0] = step(u)
        if (it + 1) % args.check_every == 0:
            comm.Allreduce(local, total, op=MPI.MAX)
            change = float(total[0])
    return change


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--cells", type=int, default=150, help="interior cells per rank")
    p.add_argument("--check-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timing", metavar="FILE.json")
    return p.parse_args(argv)


def main() -> None:
    args = parse()
    comm = MPI.COMM_WORLD
    comm.Barrier()
    cpu0, t0 = time.thread_time_ns(), time.monotonic_ns()
    change = run(comm, args)
    t1, cpu1 = time.monotonic_ns(), time.thread_time_ns()
    spans = comm.gather((t0, t1, max(0, (t1 - t0) - (cpu1 - cpu0))), root=0)
    if comm.Get_rank() == 0:
        seconds = (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e9
        result = {"ranks": comm.Get_size(), "seconds": seconds, "residual": change,
                  "off_cpu": max(s[2] for s in spans) / 1e9}
        print(json.dumps(result))
        if args.timing:
            with open(args.timing, "w") as f:
                json.dump(result, f)


if __name__ == "__main__":
    main()
