"""How ranks talk: the collective operations the distributed run needs.

:class:`Transport` is the interface (rank, size, ``alltoall``, ``allgather`` of
Python objects; ``alltoall_array``, ``alltoallv_array`` of int64 buffers);
:class:`MpiTransport` implements it over mpi4py's ``COMM_WORLD`` (the ``[mpi]``
extra: the MPICH wheel, no system MPI), :class:`ThreadTransport` over ``P`` threads
of one process with a barrier, so that the test suite checks the distributed run
without ``mpiexec``.

Two kinds of call. The object calls (``alltoall``, ``allgather``) take Python
objects, which mpi4py pickles (protocol 5): used once per phase (ghost columns,
statuses, the summary's counts). The buffer calls take numpy int64 arrays and go
through mpi4py's buffer API (``Alltoall``, ``Alltoallv``), nothing pickled: the
forward replay's rounds (:mod:`compensate.parallel.exchange`), thousands per run,
where mpi4py's lowercase ``alltoall`` cost 35 µs a destination to pickle and
unpickle even an empty payload (docs/performance.md, issue #21).

Why collectives only (no point-to-point ``send``/``receive any``): the forward
replay advances in rounds (:mod:`compensate.parallel.exchange`), each one
``alltoall`` that also carries every rank's status, so that a rank that failed or a
dependency cycle that no rank can break is seen by all ranks in the same round and
nobody waits forever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def payload_bytes(obj: Any) -> int:
    """The bytes of ``obj``'s data as the distributed run sends it: numpy arrays'
    ``nbytes``, strings' and bytes' length, 8 per number, containers summed (the
    pickle framing not counted). Cheap next to the pickling itself."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(payload_bytes(x) for x in obj)
    if isinstance(obj, dict):
        return sum(payload_bytes(k) + payload_bytes(v) for k, v in obj.items())
    if isinstance(obj, (str, bytes)):
        return len(obj)
    if isinstance(obj, (int, float, np.generic)):
        return 8
    return 0


class Traffic:
    """What one rank's collective calls cost (docs/parallel.md, the summary's
    ``parallel``): how many, the bytes of data it sent to the other ranks
    (:func:`payload_bytes`: an ``alltoall``'s items for the others, an
    ``allgather``'s item once per other rank) and the seconds spent inside them
    (transfer and waiting for the slowest rank)."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes_sent = 0
        self.seconds = 0.0

    def snapshot(self) -> tuple[int, int, float]:
        return self.calls, self.bytes_sent, self.seconds


class Transport:
    """``rank`` of ``size`` ranks; every operation is collective (all ranks call it
    in the same order)."""

    rank: int = 0
    size: int = 1
    #: this rank's collective calls so far (set by the implementations)
    traffic: Traffic

    def _count(self, nbytes: int, start: float) -> None:
        t = self.traffic
        t.calls += 1
        t.bytes_sent += nbytes
        t.seconds += time.perf_counter() - start

    def _alltoall_bytes(self, items: list[Any]) -> int:
        return sum(payload_bytes(x) for r, x in enumerate(items) if r != self.rank)

    def alltoall(self, items: list[Any]) -> list[Any]:
        """Send ``items[r]`` to rank ``r``; return what each rank sent to this one."""
        raise NotImplementedError

    def allgather(self, item: Any) -> list[Any]:
        """Every rank's ``item``, by rank."""
        raise NotImplementedError

    def alltoall_array(self, send: np.ndarray) -> np.ndarray:
        """``send`` int64 of shape (size, k): row ``r`` goes to rank ``r``. Returns
        the (size, k) rows the ranks sent to this one, by rank (every rank the same
        ``k``)."""
        raise NotImplementedError

    def alltoallv_array(self, send: np.ndarray, counts: np.ndarray,
                        recv_counts: np.ndarray) -> np.ndarray:
        """``send`` 1-D int64, the blocks for rank 0, 1, ... one after the other,
        ``counts[r]`` items for rank ``r``; returns the blocks from each rank, by
        rank, concatenated (``recv_counts[r]`` items from rank ``r``: the counts the
        ranks sent beforehand, e.g. with :meth:`alltoall_array`)."""
        raise NotImplementedError

    def _array_bytes(self, send: np.ndarray, counts: np.ndarray | None = None) -> int:
        """The bytes of a buffer call's data for the other ranks."""
        if counts is None:  # one row per rank
            return int(send.nbytes - send[self.rank].nbytes)
        return int((int(np.sum(counts)) - int(counts[self.rank])) * send.itemsize)


class MpiTransport(Transport):
    """mpi4py's ``COMM_WORLD`` (imported only when a distributed run starts)."""

    def __init__(self) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.traffic = Traffic()

    def alltoall(self, items: list[Any]) -> list[Any]:
        nbytes, start = self._alltoall_bytes(items), time.perf_counter()
        got = self.comm.alltoall(items)
        self._count(nbytes, start)
        return got

    def allgather(self, item: Any) -> list[Any]:
        nbytes, start = payload_bytes(item) * (self.size - 1), time.perf_counter()
        got = self.comm.allgather(item)
        self._count(nbytes, start)
        return got

    def alltoall_array(self, send: np.ndarray) -> np.ndarray:
        from mpi4py import MPI

        send = np.ascontiguousarray(send, dtype=np.int64)
        recv = np.empty_like(send)
        nbytes, start = self._array_bytes(send), time.perf_counter()
        self.comm.Alltoall([send, MPI.INT64_T], [recv, MPI.INT64_T])
        self._count(nbytes, start)
        return recv

    def alltoallv_array(self, send: np.ndarray, counts: np.ndarray,
                        recv_counts: np.ndarray) -> np.ndarray:
        from mpi4py import MPI

        send = np.ascontiguousarray(send, dtype=np.int64)
        counts, recv_counts = np.asarray(counts), np.asarray(recv_counts)
        recv = np.empty(int(recv_counts.sum()), dtype=np.int64)
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rdispls = np.concatenate(([0], np.cumsum(recv_counts)[:-1]))
        nbytes, start = self._array_bytes(send, counts), time.perf_counter()
        self.comm.Alltoallv([send, (counts.tolist(), displs.tolist()), MPI.INT64_T],
                            [recv, (recv_counts.tolist(), rdispls.tolist()), MPI.INT64_T])
        self._count(nbytes, start)
        return recv


#: seconds a thread rank waits for the others in one collective call
BARRIER_TIMEOUT = 120.0


class _Shared:
    """The slots and barrier ``P`` :class:`ThreadTransport` ranks share."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.slots: list[Any] = [None] * size
        # a rank that skips a collective the others call (a bug) breaks the barrier
        # after BARRIER_TIMEOUT instead of hanging the test suite
        self.barrier = threading.Barrier(size, timeout=BARRIER_TIMEOUT)


class ThreadTransport(Transport):
    """One of ``size`` ranks that are threads of this process (tests, no MPI)."""

    def __init__(self, shared: _Shared, rank: int) -> None:
        self.shared, self.rank, self.size = shared, rank, shared.size
        self.traffic = Traffic()

    def _exchange(self, item: Any) -> list[Any]:
        sh = self.shared
        sh.slots[self.rank] = item
        sh.barrier.wait()
        got = list(sh.slots)
        sh.barrier.wait()  # everybody has read before the slots are reused
        return got

    def alltoall(self, items: list[Any]) -> list[Any]:
        nbytes, start = self._alltoall_bytes(items), time.perf_counter()
        got = [row[self.rank] for row in self._exchange(items)]
        self._count(nbytes, start)
        return got

    def allgather(self, item: Any) -> list[Any]:
        nbytes, start = payload_bytes(item) * (self.size - 1), time.perf_counter()
        got = self._exchange(item)
        self._count(nbytes, start)
        return got

    def alltoall_array(self, send: np.ndarray) -> np.ndarray:
        send = np.asarray(send, dtype=np.int64)
        nbytes, start = self._array_bytes(send), time.perf_counter()
        got = np.stack([rows[self.rank] for rows in self._exchange(send)])  # a copy
        self._count(nbytes, start)
        return got

    def alltoallv_array(self, send: np.ndarray, counts: np.ndarray,
                        recv_counts: np.ndarray) -> np.ndarray:
        send, counts = np.asarray(send, dtype=np.int64), np.asarray(counts)
        nbytes, start = self._array_bytes(send, counts), time.perf_counter()
        me = self.rank
        blocks = []
        for buf, cnt in self._exchange((send, counts)):
            lo = int(np.sum(cnt[:me]))
            blocks.append(buf[lo:lo + int(cnt[me])])
        got = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)  # a copy
        if len(got) != int(np.sum(recv_counts)):
            raise ValueError("alltoallv_array: the receive counts disagree with the sends")
        self._count(nbytes, start)
        return got


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
