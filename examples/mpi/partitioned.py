"""MPI-4 partitioned halo exchange on a ring (issue #20), for the mpi4py tracer.

Each rank sends its halo to the right neighbour in 4 partitions, each made ready
after its own piece of work (rank- and partition-dependent, so partitions become
ready at different times), and receives the left neighbour's halo in 2 partitions:
it polls the last one once right after the start (MPI_Parrived returns false:
the sender is still working), then observes each partition with MPI_Parrived
before using it, completes both requests with MPI_Wait and ends the iteration
with an MPI_Allreduce. Runs on 2 or more ranks:

    mpiexec -n 2 python -m calibration.record -o run/traces.otf2 -- examples/mpi/partitioned.py
    compensate run/traces.otf2 out/traces.otf2 --overhead 1us
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

SEND_PARTS, RECV_PARTS, HALO = 4, 2, 4096  # doubles per halo


def work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main(iterations: int = 5) -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    out, halo = np.zeros(HALO), np.zeros(HALO)
    send = comm.Psend_init(out, SEND_PARTS, right, tag=11)
    recv = comm.Precv_init(halo, RECV_PARTS, left, tag=11)
    comm.Barrier()
    for it in range(iterations):
        recv.Start()
        send.Start()
        early = recv.Parrived(RECV_PARTS - 1)  # the left neighbour is still working
        chunk = HALO // SEND_PARTS
        for i in range(SEND_PARTS):
            work(2e-4 * (1 + (rank + it + i) % 3))
            out[i * chunk:(i + 1) * chunk] = rank + it
            send.Pready(i)
        for j in range(RECV_PARTS):
            while not recv.Parrived(j):
                pass
        send.Wait()
        recv.Wait()
        assert np.all(halo == left + it), "partitioned halo has the wrong data"
        comm.allreduce(float(early))
    send.Free()
    recv.Free()
    if rank == 0:
        print("partitioned done")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
