"""MPI-4 partitioned calls that fail, caught, among the real ones, for the mpi4py
tracer's test that a call which raises leaves no partitioned record behind
(only its Enter/Leave): an init to a rank that does not exist, a Pready before
the Start, a second Start of an active request, Pready / Pready_range /
Pready_list / Parrived of partitions that do not exist; then the real rounds of
a ring exchange (4 send partitions, 2 receive partitions).

Each rank prints the number of calls that raised; rank 0 prints "partitioned
errors done". Runs on 2 or more ranks:

    mpiexec -n 2 python -m calibration.record -o run/traces.otf2 -- \
        examples/mpi/partitioned_errors.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

SEND_PARTS, RECV_PARTS, HALO = 4, 2, 64  # doubles per halo
BAD_RANK = 1 << 20  # no such rank in any test run

failures = 0


def fails(call: Callable[[], Any]) -> None:
    """Run a call that must raise an MPI error and count it."""
    global failures
    try:
        call()
    except MPI.Exception:
        failures += 1
        return
    raise AssertionError("the call was expected to raise")


def main(rounds: int = 2) -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    out, halo = np.zeros(HALO), np.zeros(HALO)
    fails(lambda: comm.Psend_init(out, SEND_PARTS, BAD_RANK, tag=5))
    send = comm.Psend_init(out, SEND_PARTS, right, tag=5)
    recv = comm.Precv_init(halo, RECV_PARTS, left, tag=5)
    fails(lambda: send.Pready(0))  # not started
    for it in range(rounds):
        recv.Start()
        send.Start()
        if it == 0:
            fails(lambda: send.Start())  # active already
            fails(lambda: send.Pready(SEND_PARTS))
            fails(lambda: send.Pready_range(2, SEND_PARTS + 3))
            fails(lambda: send.Pready_list([0, SEND_PARTS]))
            fails(lambda: recv.Parrived(RECV_PARTS))
        out[:] = rank + it
        send.Pready(0)
        send.Pready_range(1, 2)
        send.Pready_list([3])
        for j in range(RECV_PARTS):
            while not recv.Parrived(j):
                pass
        send.Wait()
        recv.Wait()
        assert np.all(halo == left + it), "partitioned halo has the wrong data"
        comm.Barrier()
    send.Free()
    recv.Free()
    print(f"rank {rank}: {failures} failures", flush=True)
    comm.Barrier()
    if rank == 0:
        print("partitioned errors done")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
