"""A threaded mpi4py program: worker threads per rank sharing a lock (the tracer's
thread test).

Each rank starts ``--workers`` threads (default 3; one of them a ``Thread``
subclass that overrides ``run``), which compute partial sums in traced functions
and add them to a shared total under a ``threading.Lock``; a ``threading.RLock``
guards a nested update. The main thread joins them; then the MPI calls (an allreduce and a
ring exchange) are made by the main thread, or with ``--mpi-thread`` by one more
thread: MPI from one thread per rank, as OTF2 and Score-P expect (the archive maps
each rank to the thread that made its MPI calls).

    mpiexec -n 2 python -m calibration.record -o run/traces.otf2 -- examples/mpi/threads.py
"""

from __future__ import annotations

import argparse
import threading

from mpi4py import MPI

total = 0.0
updates = 0
lock = threading.Lock()
nested = threading.RLock()


def partial_sum(start: int, n: int) -> float:
    """Traced work outside the lock."""
    return sum(1.0 / (k * k) for k in range(start, start + n))


def add(value: float) -> None:
    """The critical section: the lock is contended by all workers."""
    global total
    with lock:
        total += value
        count()


def count() -> None:
    global updates
    with nested:
        with nested:  # re-entered: one acquisition of the RLock
            updates += 1


def worker(index: int, rounds: int, chunk: int) -> None:
    for r in range(rounds):
        add(partial_sum(1 + (r * 8 + index) * chunk, chunk))


class Worker(threading.Thread):
    """A Thread subclass that overrides run(); the tracer sees it begin and end."""

    def __init__(self, index: int, rounds: int, chunk: int) -> None:
        super().__init__(name=f"subclass-{index}")
        self.args_ = (index, rounds, chunk)

    def run(self) -> None:
        worker(*self.args_)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--chunk", type=int, default=2000)
    p.add_argument("--mpi-thread", action="store_true",
                   help="make the MPI calls from a thread other than the main thread")
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    threads = [threading.Thread(target=worker, args=(i, args.rounds, args.chunk))
               for i in range(args.workers - 1)]
    threads.append(Worker(args.workers - 1, args.rounds, args.chunk))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert updates == args.workers * args.rounds, updates
    result = []
    if args.mpi_thread:
        t = threading.Thread(target=communicate, args=(comm, result))
        t.start()
        t.join()
    else:
        communicate(comm, result)
    everything, left = result
    if rank == 0:
        print(f"threads done: {everything:.6f} from {size} ranks x {args.workers} "
              f"threads, left neighbour of 0 is {left}")


def communicate(comm: MPI.Intracomm, result: list) -> None:
    """All MPI calls of the program (after the workers have been joined)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    result.append(comm.allreduce(total))
    result.append(comm.sendrecv(rank, dest=(rank + 1) % size, source=(rank - 1) % size))


if __name__ == "__main__":
    main()
