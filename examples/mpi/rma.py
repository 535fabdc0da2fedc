"""MPI one-sided communication (issue #19), for the mpi4py tracer: the three
synchronisation modes of MPI RMA on a ring, a few iterations each.

* **Fence halo exchange**: every rank puts its halo into the right neighbour's
  window between two MPI_Win_fence calls (after rank-dependent work, so that the
  fences wait: Wait at Fence).
* **PSCW exchange**: each rank exposes its window to the left neighbour
  (MPI_Win_post ... MPI_Win_wait) and accesses the right one (MPI_Win_start, a put
  and a get, MPI_Win_complete); the odd ranks post late (Late Post).
* **Lock-protected counter**: every rank adds to a counter in rank 0's window
  under an exclusive lock (MPI_Fetch_and_op, then an accumulate), so the lock is
  contended (lock competition); a shared Lock_all epoch reads it back at the end.

Checks its results and prints "rma done". Runs on 2 or more ranks:

    mpiexec -n 2 python -m calibration.record -o run/traces.otf2 -- examples/mpi/rma.py
    compensate run/traces.otf2 out/traces.otf2 --overhead insitu
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

HALO = 512  # doubles


def work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def fence_halo(comm: MPI.Intracomm, iterations: int) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    halo = np.zeros(HALO)
    win = MPI.Win.Create(halo, halo.itemsize, comm=comm)
    out = np.empty(HALO)
    win.Fence()
    for it in range(iterations):
        work(1e-4 * (1 + (rank + it) % 2))
        out[:] = rank + it
        win.Put(out, right)
        win.Fence()
        assert np.all(halo == left + it), "fence halo has the wrong data"
    win.Free()


def pscw(comm: MPI.Intracomm, iterations: int) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    group = comm.Get_group()
    origins, targets = group.Incl([left]), group.Incl([right])
    mem = np.zeros(2 * HALO)
    win = MPI.Win.Create(mem, mem.itemsize, comm=comm)
    out, back = np.empty(HALO), np.empty(HALO)
    for it in range(iterations):
        mem[HALO:] = rank * 100 + it
        if rank % 2:
            work(2e-4)  # a late post: the left neighbour's start waits
        win.Post(origins)
        win.Start(targets)
        out[:] = rank + it
        win.Put(out, right)
        win.Get(back, right, target=[HALO, HALO, MPI.DOUBLE])
        win.Complete()
        win.Wait()
        assert np.all(mem[:HALO] == left + it), "PSCW put has the wrong data"
        assert np.all(back == right * 100 + it), "PSCW get has the wrong data"
    win.Free()
    origins.Free()
    targets.Free()
    group.Free()


def lock_counter(comm: MPI.Intracomm, iterations: int) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    win = MPI.Win.Allocate(8 if rank == 0 else 0, 8, comm=comm)
    if rank == 0:
        win.Lock(0)
        np.frombuffer(win.tomemory(), dtype=np.int64)[:] = 0
        win.Unlock(0)
    comm.Barrier()
    one, old = np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    for _ in range(iterations):
        win.Lock(0, MPI.LOCK_EXCLUSIVE)
        win.Fetch_and_op(one, old, 0)
        win.Flush(0)
        work(1e-4)  # hold the lock: the other ranks wait for it
        win.Accumulate(one, 0)
        win.Unlock(0)
    comm.Barrier()
    total = np.zeros(1, dtype=np.int64)
    win.Lock_all()
    win.Get(total, 0)
    win.Unlock_all()
    assert total[0] == 2 * iterations * size, f"counter {total[0]}"
    win.Free()


def main(iterations: int = 4) -> None:
    comm = MPI.COMM_WORLD
    fence_halo(comm, iterations)
    pscw(comm, iterations)
    lock_counter(comm, iterations)
    comm.Barrier()
    if comm.Get_rank() == 0:
        print("rma done")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
