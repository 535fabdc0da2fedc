"""Communicators with a topology, an intercommunicator, MPI calls that fail and a
typecode buffer spec: the tracer's test (``tests/calibration/test_tracer_calls.py``).

* Halo exchanges (``Sendrecv``) on a periodic Cartesian ring (``Create_cart``, its
  ``Shift`` and ``Get_coords``), on its ``Sub``, on a graph (``Create_graph``) and
  on distributed graphs (``Create_dist_graph_adjacent``, ``Create_dist_graph``),
  an ``Allreduce`` on the Cartesian one, one untraced neighbour collective, and
  ``Free`` of each.
* An intercommunicator between the even and the odd ranks (``Create_intercomm``):
  one message on it (untraced), then ``Merge`` and a message on the merged one.
* Calls that raise, caught as a program may: sends to a rank that does not
  exist (``send``, ``Isend``), a receive from one (``Irecv``), a ``Send`` whose
  typecode mpi4py does not know before the real ``Send``, a ``Bcast`` from a
  root that does not exist before the real one.
* ``Send([buf, 4, 'i'])``: 4 of the buffer's 8 ints.

    mpiexec -n 2 python examples/mpi/topologies.py
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

CELLS = 100


def halo(comm: MPI.Intracomm, src: int, dst: int, steps: int) -> float:
    """``steps`` exchanges of a row with the neighbours; the value received."""
    out = np.full(CELLS, float(comm.Get_rank()))
    got = np.empty(CELLS)
    for _ in range(steps):
        comm.Sendrecv(out, dst, 0, got, src, 0)
    return float(got[0])


def topologies(world: MPI.Intracomm) -> None:
    """Messages on Cartesian, graph and distributed graph communicators."""
    n, rank = world.Get_size(), world.Get_rank()
    cart = world.Create_cart([n], periods=[True])
    src, dst = cart.Shift(0, 1)
    assert cart.Get_coords(rank) == [rank] and cart.Get_topo()[0] == [n]
    assert halo(cart, src, dst, 3) == src
    sub = cart.Sub([True])
    assert halo(sub, *sub.Shift(0, 1), 1) == src
    total = np.zeros(1)
    cart.Allreduce(np.ones(1), total)
    assert total[0] == n
    cart.Neighbor_allgather(np.ones(1), np.zeros(2))  # untraced: warned once
    ring = [[(r - 1) % n, (r + 1) % n] for r in range(n)]
    graph = world.Create_graph(np.cumsum([len(e) for e in ring]), sum(ring, []))
    assert halo(graph, src, dst, 1) == src
    adjacent = world.Create_dist_graph_adjacent([src], [dst])
    assert halo(adjacent, src, dst, 1) == src
    dist = world.Create_dist_graph([rank], [1], [dst])
    dist.Barrier()
    for comm in (cart, sub, graph, adjacent, dist):
        comm.Free()  # local: no warning


def intercomm(world: MPI.Intracomm) -> None:
    """Even and odd ranks joined by an intercommunicator, then merged."""
    rank = world.Get_rank()
    local = world.Split(rank % 2, rank)
    inter = local.Create_intercomm(0, world, 1 - rank % 2, tag=7)
    if rank < 2:
        if rank == 0:
            inter.send("untraced", 0, tag=8)
        else:
            assert inter.recv(source=0, tag=8) == "untraced"
    merged = inter.Merge(high=rank % 2 == 1)
    peer = 1 - merged.Get_rank() if merged.Get_rank() < 2 else MPI.PROC_NULL
    assert merged.sendrecv(merged.Get_rank(), peer, 9, source=peer, recvtag=9) in (peer, None)
    for comm in (merged, inter, local):
        comm.Free()


def failures(world: MPI.Intracomm) -> None:
    """Calls that raise and are caught; then the real ones."""
    n, rank = world.Get_size(), world.Get_rank()
    for call in (lambda: world.send("x", dest=n, tag=3),
                 lambda: world.Isend(np.zeros(2), dest=n, tag=3),
                 lambda: world.Irecv(np.zeros(2), source=n, tag=3)):
        try:
            call()
        except MPI.Exception:
            pass
        else:
            raise AssertionError("a call to rank n succeeded")
    a = np.zeros(4)
    try:
        world.Bcast(a, root=n)
    except MPI.Exception:
        pass
    world.Bcast(a, root=0)
    if rank == 0:
        try:
            world.Send([np.zeros(4), "not-a-type"], dest=1, tag=1)
        except (KeyError, ValueError):
            pass
        world.Send(np.ones(4), dest=1, tag=1)
    elif rank == 1:
        world.Recv(a, source=0, tag=1)
        assert a.sum() == 4


def typecodes(world: MPI.Intracomm) -> None:
    """A send of 4 of 8 ints, its count and type given as ``[buf, 4, 'i']``."""
    a = np.arange(8, dtype="i")
    if world.Get_rank() == 0:
        world.Send([a, 4, "i"], dest=1, tag=2)
    elif world.Get_rank() == 1:
        a[:] = -1
        world.Recv([a, 4, "i"], source=0, tag=2)
        assert a.tolist() == [0, 1, 2, 3, -1, -1, -1, -1]


def main() -> None:
    world = MPI.COMM_WORLD
    topologies(world)
    intercomm(world)
    failures(world)
    typecodes(world)
    world.Barrier()
    print(f"{world.Get_rank()} topologies done")


if __name__ == "__main__":
    main()
