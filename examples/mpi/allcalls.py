"""Every mpi4py call the tracer wraps, at least once (the tracer's smoke test).

Runs on 2 or more ranks; ranks 0 and 1 exchange point-to-point messages with the
lower- (pickled objects) and upper-case (buffers) APIs, blocking and nonblocking,
then every rank joins each wrapped collective in both forms, on MPI_COMM_WORLD
and on communicators made by Split and Dup. Sends and receives pair up by kind
(Isend with Irecv, Send with Recv), and rank 1 tests one receive before its message
can have been sent, so the trace also holds a failed MPI_Test.

    mpiexec -n 2 python -m calibration.record -o run/traces.otf2 -- examples/mpi/allcalls.py
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI


def point_to_point(comm: MPI.Intracomm) -> None:
    """Blocking, nonblocking and combined sends between ranks 0 and 1."""
    rank = comm.Get_rank()
    if rank == 0:
        comm.send({"a": 1}, dest=1, tag=1)
        comm.Send(np.arange(4.0), dest=1, tag=2)
        comm.ssend("sync", dest=1, tag=3)
        comm.Ssend(np.zeros(2), dest=1, tag=4)
        comm.isend([1, 2, 3], dest=1, tag=5).wait()
        comm.Isend(np.arange(8, dtype="i4"), dest=1, tag=6).Wait()
        MPI.Request.Waitall([comm.Isend(np.ones(3), dest=1, tag=7),
                             comm.isend("y", dest=1, tag=8)])
        comm.recv(source=1, tag=10)  # rank 1 has tested its receive of tag 9
        comm.Isend(np.full(5, 9.0), dest=1, tag=9).Wait()
        print("sendrecv", comm.sendrecv("ping", dest=1, sendtag=11, source=1, recvtag=12))
        buf = np.empty(2)
        comm.Sendrecv(np.ones(2), dest=1, sendtag=13, recvbuf=buf, source=1, recvtag=14)
    elif rank == 1:
        status = MPI.Status()
        comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        buf = np.empty(4)
        comm.Recv(buf, source=0, tag=2)
        comm.recv(source=0, tag=3)
        comm.Recv(np.empty(2), source=0, tag=4)
        comm.irecv(source=0, tag=5).wait()
        comm.Irecv(np.empty(8, dtype="i4"), source=0, tag=6).Wait()
        MPI.Request.waitall([comm.Irecv(np.empty(3), source=0, tag=7),
                            comm.irecv(source=0, tag=8)])
        req = comm.Irecv(np.empty(5), source=0, tag=9)
        req.Test()  # fails: rank 0 sends tag 9 only after the next message
        comm.send("go", dest=0, tag=10)
        while not req.Test():
            time.sleep(1e-4)
        comm.sendrecv("pong", dest=0, sendtag=12, source=0, recvtag=11)
        comm.Sendrecv(np.ones(2), dest=0, sendtag=14, recvbuf=np.empty(2), source=0,
                      recvtag=13)


def collectives(comm: MPI.Intracomm) -> None:
    """Each wrapped collective, lower- and upper-case."""
    rank, size = comm.Get_rank(), comm.Get_size()
    comm.barrier()
    comm.Barrier()
    comm.bcast({"root": True} if rank == 0 else None, root=0)
    comm.Bcast(np.arange(4.0) if rank == 0 else np.empty(4), root=0)
    comm.scatter(list(range(size)) if rank == 0 else None, root=0)
    comm.Scatter(np.arange(2.0 * size) if rank == 0 else None, np.empty(2), root=0)
    comm.gather(rank, root=0)
    comm.Gather(np.full(2, float(rank)), np.empty(2 * size) if rank == 0 else None, root=0)
    comm.reduce(rank, op=MPI.SUM, root=0)
    comm.Reduce(np.ones(3), np.empty(3) if rank == 0 else None, op=MPI.SUM, root=0)
    comm.allreduce(rank)
    comm.Allreduce(np.ones(3), np.empty(3))
    comm.allgather(rank)
    comm.Allgather(np.full(2, float(rank)), np.empty(2 * size))
    comm.alltoall(list(range(size)))
    comm.Alltoall(np.arange(float(size)), np.empty(size))


def main() -> None:
    world = MPI.COMM_WORLD
    point_to_point(world)
    collectives(world)
    half = world.Split(color=world.Get_rank() % 2, key=0)
    half.allreduce(1)
    dup = world.Dup()
    dup.Barrier()
    total = dup.allreduce(world.Get_rank())
    if world.Get_rank() == 0:
        print("allcalls done, rank sum", total)


if __name__ == "__main__":
    main()
