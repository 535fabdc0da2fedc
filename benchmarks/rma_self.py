"""MPI one-sided operations and locks on one's own window against the other rank's
(docs/accuracy.md: the evidence for the simulator's RMA self path).

Run with two ranks on the MPI library the traces come from::

    mpiexec -n 2 python benchmarks/rma_self.py [REPEATS]

Each rank in turn is the origin and times, on its own window and on the other
rank's, MPI_Win_lock / MPI_Win_unlock (exclusive, uncontended; also with
MPI_MODE_NOCHECK, which sends no lock messages), MPI_Fetch_and_op and the unlock
after it, and inside one held lock a fetch, an 8 B and a 4 KiB put each with its
MPI_Win_flush, and an empty flush. The other rank waits in a blocking MPI_Recv
(it drives MPI's progress, as a passive target must). Prints medians in µs over
REPEATS (3000) after 200 untimed, and a 0-byte ping-pong's half round trip.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

WARMUP = 200


def _median_us(fn: Callable[[], Any], repeats: int) -> float:
    s = []
    for i in range(WARMUP + repeats):
        t0 = perf_counter_ns()
        fn()
        t1 = perf_counter_ns()
        if i >= WARMUP:
            s.append((t1 - t0) * 1e-3)
    return statistics.median(s)


def _as_origin(comm: Any, win: Any, actor: int, target: int, repeats: int) -> dict:
    """``actor`` times its calls on ``target``'s window; the other rank waits."""
    import numpy as np
    from mpi4py import MPI

    if comm.Get_rank() != actor:
        comm.Recv(bytearray(1), source=actor, tag=5)
        return {}
    x = MPI.LOCK_EXCLUSIVE
    one, res = np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    big = np.ones(512, dtype=np.int64)

    def fetch() -> None:
        win.Fetch_and_op([one, 1, MPI.INT64_T], [res, 1, MPI.INT64_T], target, 0, MPI.SUM)

    out = {"lock+unlock": _median_us(lambda: (win.Lock(target, x), win.Unlock(target)),
                                     repeats)}
    lk, ul, fc, uf = [], [], [], []
    for i in range(WARMUP + repeats):
        t0 = perf_counter_ns()
        win.Lock(target, x)
        t1 = perf_counter_ns()
        win.Unlock(target)
        t2 = perf_counter_ns()
        win.Lock(target, x)
        t3 = perf_counter_ns()
        fetch()
        t4 = perf_counter_ns()
        win.Unlock(target)
        t5 = perf_counter_ns()
        if i >= WARMUP:
            lk.append((t1 - t0) * 1e-3)
            ul.append((t2 - t1) * 1e-3)
            fc.append((t4 - t3) * 1e-3)
            uf.append((t5 - t4) * 1e-3)
    out.update({"lock": statistics.median(lk), "unlock (empty)": statistics.median(ul),
                "fetch_and_op (call)": statistics.median(fc),
                "unlock (after fetch)": statistics.median(uf)})
    win.Lock(target, x)
    out["fetch+flush"] = _median_us(lambda: (fetch(), win.Flush(target)), repeats)
    out["put 8 B+flush"] = _median_us(lambda: (
        win.Put([one, 1, MPI.INT64_T], target, target=(1, 1, MPI.INT64_T)),
        win.Flush(target)), repeats)
    out["put 4 KiB+flush"] = _median_us(lambda: (
        win.Put([big, 512, MPI.INT64_T], target, target=(0, 512, MPI.INT64_T)),
        win.Flush(target)), repeats)
    out["flush (empty)"] = _median_us(lambda: win.Flush(target), repeats)
    win.Unlock(target)
    # last: MPICH 5.0.2 hangs in a checked MPI_Win_lock after a MODE_NOCHECK epoch
    out["lock+unlock NOCHECK"] = _median_us(
        lambda: (win.Lock(target, x, MPI.MODE_NOCHECK), win.Unlock(target)), repeats)
    comm.Send(bytearray(1), dest=1 - actor, tag=5)
    return out


def _ping_pong_us(comm: Any, repeats: int) -> float | None:
    b, s = bytearray(1), []
    rank = comm.Get_rank()
    for i in range(WARMUP + repeats):
        comm.Barrier()
        if rank == 0:
            t0 = perf_counter_ns()
            comm.Send(b, 1, 3)
            comm.Recv(b, 1, 4)
            if i >= WARMUP:
                s.append((perf_counter_ns() - t0) * 1e-3 / 2)
        elif rank == 1:
            comm.Recv(b, 0, 3)
            comm.Send(b, 0, 4)
    return statistics.median(s) if rank == 0 else None


def main(argv: list[str]) -> int:
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        if comm.Get_rank() == 0:
            print("rma_self: error: run with two ranks (mpiexec -n 2)", file=sys.stderr)
        return 2
    repeats = int(argv[0]) if argv else 3000
    rank = comm.Get_rank()
    buf = np.zeros(1024, dtype=np.int64)
    win = MPI.Win.Create(buf, comm=comm)
    pp = _ping_pong_us(comm, repeats)
    mine = {}
    for actor in (0, 1):
        for target, name in ((1 - actor, "other"), (actor, "self")):
            comm.Barrier()
            r = _as_origin(comm, win, actor, target, repeats)
            if rank == actor:
                mine[f"r{actor}->{name}"] = r
    merged: dict = {}
    for part in comm.gather(mine, root=0) or []:
        merged.update(part)
    win.Free()
    if rank == 0:
        cols = sorted(merged)
        print(f"{MPI.Get_library_version().splitlines()[0].strip()}; 0-byte ping-pong, "
              f"half the round trip: {pp:.2f} us")
        print(f"{'median, us':22s}" + "".join(f"{c:>12s}" for c in cols))
        for k in merged[cols[0]]:
            print(f"{k:22s}" + "".join(f"{merged[c][k]:12.2f}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
