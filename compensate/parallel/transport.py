"""How ranks talk: the three collective operations the distributed run needs.

:class:`Transport` is the interface (rank, size, ``alltoall``, ``allgather``);
:class:`MpiTransport` implements it over mpi4py's ``COMM_WORLD`` (the ``[mpi]``
extra: the MPICH wheel, no system MPI), :class:`ThreadTransport` over ``P`` threads
of one process with a barrier, so that the test suite checks the distributed run
without ``mpiexec``. Payloads are Python objects holding packed numpy arrays
(:mod:`compensate.parallel.exchange` sends one pair of arrays per destination and
round, never one message per value); mpi4py pickles them with protocol 5.

Why collectives only (no point-to-point ``send``/``receive any``): the forward
replay advances in rounds (:mod:`compensate.parallel.exchange`), each one
``alltoall`` that also carries every rank's status, so that a rank that failed or a
dependency cycle that no rank can break is seen by all ranks in the same round and
nobody waits forever.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Transport:
    """``rank`` of ``size`` ranks; every operation is collective (all ranks call it
    in the same order)."""

    rank: int = 0
    size: int = 1

    def alltoall(self, items: list[Any]) -> list[Any]:
        """Send ``items[r]`` to rank ``r``; return what each rank sent to this one."""
        raise NotImplementedError

    def allgather(self, item: Any) -> list[Any]:
        """Every rank's ``item``, by rank."""
        raise NotImplementedError


class MpiTransport(Transport):
    """mpi4py's ``COMM_WORLD`` (imported only when a distributed run starts)."""

    def __init__(self) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()

    def alltoall(self, items: list[Any]) -> list[Any]:
        return self.comm.alltoall(items)

    def allgather(self, item: Any) -> list[Any]:
        return self.comm.allgather(item)


class _Shared:
    """The slots and barrier ``P`` :class:`ThreadTransport` ranks share."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.slots: list[Any] = [None] * size
        self.barrier = threading.Barrier(size)


class ThreadTransport(Transport):
    """One of ``size`` ranks that are threads of this process (tests, no MPI)."""

    def __init__(self, shared: _Shared, rank: int) -> None:
        self.shared, self.rank, self.size = shared, rank, shared.size

    def _exchange(self, item: Any) -> list[Any]:
        sh = self.shared
        sh.slots[self.rank] = item
        sh.barrier.wait()
        got = list(sh.slots)
        sh.barrier.wait()  # everybody has read before the slots are reused
        return got

    def alltoall(self, items: list[Any]) -> list[Any]:
        return [row[self.rank] for row in self._exchange(items)]

    def allgather(self, item: Any) -> list[Any]:
        return self._exchange(item)


def run_threads(size: int, body: Callable[[Transport], Any]) -> list[Any]:
    """Run ``body(transport)`` on ``size`` thread ranks; their results by rank. An
    exception escaping a rank breaks the barrier (the others fail instead of waiting)
    and is re-raised here."""
    shared = _Shared(size)
    results: list[Any] = [None] * size
    errors: list[BaseException | None] = [None] * size

    def main(rank: int) -> None:
        try:
            results[rank] = body(ThreadTransport(shared, rank))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            errors[rank] = exc
            shared.barrier.abort()

    threads = [threading.Thread(target=main, args=(r,), name=f"rank{r}") for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and
                  not isinstance(e, threading.BrokenBarrierError)), None)
    first = first or next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results
