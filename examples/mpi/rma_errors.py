"""MPI one-sided calls that fail, caught, among the real ones, for the mpi4py
tracer's test that a call which raises leaves no RMA record behind (only its
Enter/Leave): every RMA wrapper that writes a record before its MPI call is made
to raise once (a window with a negative displacement unit or size, an
operation to a rank that does not exist, an invalid assertion or lock type,
Complete without Start, Wait without Post, Free inside a lock epoch), then the
program does the real thing on one window:

* a fence epoch with a Put and a Get to the right neighbour;
* PSCW: each rank exposes its window to the left neighbour and puts into the
  right one;
* an exclusive lock epoch on rank 0 with the four atomic operations;
* a shared lock epoch on the rank's own window in which Free fails, then Free.

Each rank prints the number of calls that raised; rank 0 prints "rma errors
done". Runs on 2 or more ranks:

    mpiexec -n 2 python -m calibration.record -o run/traces.otf2 -- examples/mpi/rma_errors.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

BAD_RANK = 1 << 20  # no such rank in any test run
BAD_ASSERT = 12345678  # not a combination of MPI_MODE_* bits

failures = 0


def fails(call: Callable[[], Any]) -> None:
    """Run a call that must raise an MPI error (or a TypeError) and count it."""
    global failures
    try:
        call()
    except (MPI.Exception, TypeError):
        failures += 1
        return
    raise AssertionError("the call was expected to raise")


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    mem = np.zeros(8)
    fails(lambda: MPI.Win.Create(mem, -1, comm=comm))
    fails(lambda: MPI.Win.Create("not a buffer", 1, comm=comm))
    fails(lambda: MPI.Win.Allocate(-1, 1, comm=comm))
    win = MPI.Win.Create(mem, mem.itemsize, comm=comm)
    one, two = np.ones(1), np.ones(2)

    # fence epoch: the failed operations to a rank that does not exist
    fails(lambda: win.Fence(BAD_ASSERT))
    win.Fence()
    fails(lambda: win.Put(two, BAD_RANK))
    fails(lambda: win.Get(two, BAD_RANK))
    fails(lambda: win.Accumulate(two, BAD_RANK))
    fails(lambda: win.Get_accumulate(one, np.empty(1), BAD_RANK))
    fails(lambda: win.Fetch_and_op(one, np.empty(1), BAD_RANK))
    fails(lambda: win.Compare_and_swap(one, one, np.empty(1), BAD_RANK))
    win.Put(two * (rank + 1), right)
    got = np.empty(2)
    win.Get(got, right, 2)
    win.Fence(MPI.MODE_NOSUCCEED)
    assert np.all(mem[:2] == left + 1), "fence put has the wrong data"

    # PSCW
    group = comm.Get_group()
    origins, targets = group.Incl([left]), group.Incl([right])
    fails(lambda: win.Complete())
    fails(lambda: win.Wait())
    fails(lambda: win.Post(origins, BAD_ASSERT))
    fails(lambda: win.Start(targets, BAD_ASSERT))
    win.Post(origins)
    win.Start(targets)
    win.Put(two * (rank + 10), right, 4)
    win.Complete()
    win.Wait()
    assert np.all(mem[4:6] == left + 10), "PSCW put has the wrong data"
    comm.Barrier()

    # passive target
    fails(lambda: win.Lock(BAD_RANK))
    fails(lambda: win.Lock(0, 999))
    fails(lambda: win.Lock_all(BAD_ASSERT))
    fails(lambda: win.Unlock(0))
    win.Lock(0)
    win.Accumulate(one, 0, 7)
    win.Get_accumulate(one, np.empty(1), 0, 7)
    win.Fetch_and_op(one, np.empty(1), 0, 7)
    ints = np.ones(1, dtype=np.int64)  # compare-and-swap takes no floating point
    win.Compare_and_swap(ints, np.zeros(1, dtype=np.int64), np.empty(1, dtype=np.int64), 0, 6)
    win.Unlock(0)
    comm.Barrier()

    win.Lock(rank, MPI.LOCK_SHARED)
    fails(lambda: win.Free())
    win.Unlock(rank)
    win.Free()
    if rank == 0:
        assert mem[7] == 3 * size, "the atomic updates are lost"
    print(f"rank {rank}: {failures} failures", flush=True)
    comm.Barrier()
    if rank == 0:
        print("rma errors done")


if __name__ == "__main__":
    main()
