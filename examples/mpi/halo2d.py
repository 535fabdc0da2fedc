"""A 2-D Jacobi stencil with a deep halo exchanged by ``Isend``/``Irecv``/``Waitall``:
a held-out program for the real-run benchmark (``benchmarks/paper_fig1.py
--program``), unlike ``examples/montecarlo_pi.py`` and ``examples/mpi/stencil.py``
in what matters to compensation: large messages (``--halo`` rows of ``--cols``
doubles each way, 75 KiB by default: above MPICH's eager limit, so a send
completes only once its receiver is there), nonblocking requests completed
together by one ``Waitall``, and the computation in numpy (C code the tracer
never sees) behind a traced per-row function, so a record pays for
microseconds of work, not for a fraction of one.

Every rank owns ``--rows`` rows of a ``--cols``-wide grid (fixed columns at the
sides, a periodic ring of ranks); each step it exchanges ``--halo`` boundary rows
with both neighbours, then makes ``--halo`` Jacobi sweeps (a deep halo: each
sweep makes one more ghost row stale). Every ``--check-every`` steps an
``Allreduce`` combines the largest change. The work depends only on the
arguments.

Usage::

    mpiexec -n 2 python examples/mpi/halo2d.py [--steps 10] [--rows 40] [--cols 600]
        [--halo 16] [--check-every 5] [--timing FILE.json]

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


def relax_row(u: np.ndarray, new: np.ndarray, i: int) -> float:
    """The five-point update of row ``i`` into ``new``; its largest change."""
    row = new[i, 1:-1]
    row[...] = 0.25 * (u[i - 1, 1:-1] + u[i + 1, 1:-1] + u[i, :-2] + u[i, 2:])
    return float(np.abs(row - u[i, 1:-1]).max())


def sweep(u: np.ndarray, new: np.ndarray, halo: int) -> float:
    """``halo`` Jacobi sweeps of ``u`` (which carries ``halo`` ghost rows above and
    below; sweep ``k`` updates all rows but the ``k`` outermost on each side);
    returns the largest change of the last sweep."""
    change = 0.0
    for k in range(1, halo + 1):
        change = 0.0
        for i in range(k, len(u) - k):
            change = max(change, relax_row(u, new, i))
        u[k:-k] = new[k:-k]
    return change


def exchange(comm: MPI.Intracomm, u: np.ndarray, halo: int, up: int, down: int,
             bufs: tuple[np.ndarray, ...]) -> None:
    """Send my first and last ``halo`` owned rows, receive the neighbours' into the
    ghost rows (nonblocking, completed together)."""
    send_up, send_down, recv_up, recv_down = bufs
    send_up[...] = u[halo:2 * halo]
    send_down[...] = u[-2 * halo:-halo]
    reqs = [comm.Irecv(recv_up, source=up, tag=1), comm.Irecv(recv_down, source=down, tag=2),
            comm.Isend(send_down, dest=down, tag=1), comm.Isend(send_up, dest=up, tag=2)]
    MPI.Request.Waitall(reqs)
    u[:halo] = recv_up
    u[-halo:] = recv_down


def run(comm: MPI.Intracomm, args: argparse.Namespace) -> float:
    """The measured part: ``--steps`` exchanges, each followed by ``--halo`` sweeps;
    returns the last global change."""
    rank, size = comm.Get_rank(), comm.Get_size()
    up, down = (rank - 1) % size, (rank + 1) % size
    h = args.halo
    rng = np.random.default_rng(args.seed + rank)
    u = np.zeros((args.rows + 2 * h, args.cols))
    u[h:-h] = rng.random((args.rows, args.cols))
    new = u.copy()
    bufs = tuple(np.empty((h, args.cols)) for _ in range(4))
    local, total = np.zeros(1), np.zeros(1)
    change = 0.0
    for it in range(args.steps):
        exchange(comm, u, h, up, down, bufs)
        local[0] = sweep(u, new, h)
        if (it + 1) % args.check_every == 0:
            comm.Allreduce(local, total, op=MPI.MAX)
            change = float(total[0])
    return change


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rows", type=int, default=40, help="owned rows per rank")
    p.add_argument("--cols", type=int, default=600)
    p.add_argument("--halo", type=int, default=16,
                   help="ghost rows (and sweeps per exchange)")
    p.add_argument("--check-every", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timing", metavar="FILE.json")
    args = p.parse_args(argv)
    if args.rows < 2 * args.halo:
        p.error("--rows must be at least twice --halo")
    return args


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
