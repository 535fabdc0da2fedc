"""A pipeline (wavefront) of ranks: a held-out program for the real-run benchmark
(``benchmarks/paper_fig1.py --program``). What matters to compensation: a chain
of dependencies through every rank (rank r can work on a block only once rank
r-1 has sent it, and a sweep starts only once the last rank has finished the
previous one: a token travels back to rank 0), so each rank's waits are the
upstream ranks' work and tracing overhead, and removing too little or too much
on one rank shifts every rank after it; blocking ``Send``/``Recv`` of small
(eager) messages; a traced function per element.

Each of ``--sweeps`` sweeps streams ``--blocks`` blocks of ``--block`` numbers
from rank 0 down the chain; every rank applies a running recurrence to each
block (one traced call per element) and passes it on; the last rank sends the
sweep's total back to rank 0. The work depends only on the arguments.

Usage::

    mpiexec -n 2 python examples/mpi/pipeline.py [--sweeps 20] [--blocks 16]
        [--block 64] [--timing FILE.json]

``--timing`` writes ``{"ranks", "seconds", "off_cpu", "total"}`` as
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

TAG_BLOCK, TAG_TOKEN = 1, 2


def advance(state: float, x: float) -> float:
    """One step of the recurrence (called once per element and rank)."""
    return 0.5 * state + 0.25 * x + 0.125


def stage(block: list[float], state: float) -> tuple[list[float], float]:
    """This rank's stage: the recurrence over a block; the new values and state."""
    out = []
    for x in block:
        state = advance(state, x)
        out.append(state)
    return out, state


def run(comm: MPI.Intracomm, args: argparse.Namespace) -> float:
    """The measured part: ``--sweeps`` sweeps of ``--blocks`` blocks down the
    chain; returns the last sweep's total (on rank 0)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    first, last = rank == 0, rank == size - 1
    rng = np.random.default_rng(args.seed)
    source = rng.random((args.blocks, args.block))
    buf = np.empty(args.block)
    token = np.zeros(1)
    state, total = 0.0, 0.0
    for _ in range(args.sweeps):
        acc = 0.0
        for b in range(args.blocks):
            if first:
                block = source[b].tolist()
            else:
                comm.Recv(buf, source=rank - 1, tag=TAG_BLOCK)
                block = buf.tolist()
            out, state = stage(block, state)
            acc += out[-1]
            if not last:
                comm.Send(np.asarray(out), dest=rank + 1, tag=TAG_BLOCK)
        if size > 1 and last:
            token[0] = acc
            comm.Send(token, dest=0, tag=TAG_TOKEN)
        if size > 1 and first:
            comm.Recv(token, source=size - 1, tag=TAG_TOKEN)
            total = float(token[0])
    return total


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--blocks", type=int, default=16)
    p.add_argument("--block", type=int, default=64, help="numbers per block (message)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timing", metavar="FILE.json")
    return p.parse_args(argv)


def main() -> None:
    args = parse()
    comm = MPI.COMM_WORLD
    comm.Barrier()
    cpu0, t0 = time.thread_time_ns(), time.monotonic_ns()
    total = run(comm, args)
    t1, cpu1 = time.monotonic_ns(), time.thread_time_ns()
    spans = comm.gather((t0, t1, max(0, (t1 - t0) - (cpu1 - cpu0))), root=0)
    if comm.Get_rank() == 0:
        seconds = (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e9
        result = {"ranks": comm.Get_size(), "seconds": seconds, "total": total,
                  "off_cpu": max(s[2] for s in spans) / 1e9}
        print(json.dumps(result))
        if args.timing:
            with open(args.timing, "w") as f:
                json.dump(result, f)


if __name__ == "__main__":
    main()
