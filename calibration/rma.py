"""The MPI library's one-sided protocol: when MPI_Win_unlock sends the lock's
release (the platform file's optional ``rma`` entry, docs/platform-file.md; R10
"Release after completion" in docs/compensation.md says how the compensator uses it).

MPI-4.0 §12.5.3 requires the epoch's operations to be complete when MPI_Win_unlock
*returns*; it does not say whether the release may leave before a fetched result
is back. That is the library's protocol, a platform property like the network's
latency, and the trace does not show it. Rank 1 locks rank 0's window exclusively,
then rank 0 asks for the same lock (it waits in MPI_Win_lock, driving MPI's progress
as a target must); rank 1 does nothing, an MPI_Put or an MPI_Fetch_and_op, and
MPI_Win_unlock; rank 0, once granted, sends rank 1 a note. Rank 1 times from its
unlock's Enter to the note (its own clock only: the ranks may be on two nodes):

* ``empty``, ``put``, ``fetch``: that time after an empty epoch, a put, a fetch;
* ``round_trip``: from the return of MPI_Fetch_and_op to the return of
  MPI_Win_flush, what is left of the fetch's round trip when the unlock is entered.

If the release may leave at once (``eager``) the fetch's result travels back while
the release travels to the target: the grant comes as after an empty epoch,
``fetch ≈ empty``. If it leaves only once the result is back
(``after_completion``) the grant comes the remaining round trip later, ``fetch ≈
empty + round_trip``. :func:`decide` says ``after_completion`` where the delay
exceeds half the round trip.

The epochs are also decided in :data:`~calibration.spread.RMA_BLOCKS` blocks of
consecutive ones; where the blocks disagree the verdict is refused (exit 4, nothing
written): on a busy machine one phase of load decides it, and four runs in a row
said eager, after_completion, eager, after_completion.

Run alone on the ranks the traces come from::

    mpiexec -n 2 python -m calibration.rma --update platform.json

Measured with the mpich wheel (MPICH 5.0.2, ch4, one node): docs/accuracy.md,
issue 19 (``after_completion``; MPICH's MPIDIG unlock waits for the remote
completion of every operation before it sends the release).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from time import perf_counter_ns
from typing import Any

from calibration.spread import EXIT_UNSTEADY, RMA_BLOCKS, Unsteady, check_verdicts

REPEATS = 201  #: timed epochs per variant (after WARMUP untimed ones)
WARMUP = 20


def _spin(seconds: float) -> None:
    end = perf_counter_ns() + int(seconds * 1e9)
    while perf_counter_ns() < end:
        pass


def measure(comm: Any, repeats: int = REPEATS, warmup: int = WARMUP,
            queue_wait: float = 2e-4, win_class: Any = None) -> dict | None:
    """Collective over ``comm`` (>= 2 ranks; the others wait). Returns on rank 0 the
    medians in seconds ``{empty_s, put_s, fetch_s, round_trip_s, n, blocks}``
    (``blocks``: the same medians for runs of consecutive epochs): from rank 1's
    MPI_Win_unlock Enter to the note of rank 0's grant (module docstring), per
    variant, and the fetch's remaining round trip; None on the other ranks.
    ``win_class``: the window class (default ``MPI.Win``; the mpi4py tracer passes
    the untraced one, so that the measurement stays out of the trace)."""
    import numpy as np
    from mpi4py import MPI

    rank = comm.Get_rank()
    buf = np.zeros(4, dtype=np.int64)
    win = (win_class or MPI.Win).Create(buf, comm=comm)
    one, res = np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    note = bytearray(1)
    samples: dict[str, list[float]] = {"empty": [], "put": [], "fetch": [], "round_trip": []}
    for i in range(warmup + repeats):
        for variant in samples:
            comm.Barrier()
            if rank == 0 and variant != "round_trip":
                comm.Recv(note, source=1, tag=11)
                win.Lock(0, MPI.LOCK_EXCLUSIVE)  # queued behind rank 1's epoch
                win.Unlock(0)
                comm.Send(note, dest=1, tag=12)
            elif rank == 1:
                win.Lock(0, MPI.LOCK_EXCLUSIVE)
                if variant != "round_trip":
                    comm.Send(note, dest=0, tag=11)
                    _spin(queue_wait)  # rank 0's request is queued by now
                if variant in ("fetch", "round_trip"):
                    win.Fetch_and_op([one, 1, MPI.INT64_T], [res, 1, MPI.INT64_T], 0, 0,
                                     MPI.SUM)
                elif variant == "put":
                    win.Put([one, 1, MPI.INT64_T], 0, target=(1, 1, MPI.INT64_T))
                t0 = perf_counter_ns()
                if variant == "round_trip":
                    win.Flush(0)
                    t1 = perf_counter_ns()
                    win.Unlock(0)
                else:
                    win.Unlock(0)
                    comm.Recv(note, source=0, tag=12)
                    t1 = perf_counter_ns()
                if i >= warmup:
                    samples[variant].append((t1 - t0) * 1e-9)
    comm.Barrier()
    med = None
    if rank == 1:
        comm.send({**_medians(samples), "blocks": _block_medians(samples)}, dest=0)
    elif rank == 0:
        med = comm.recv(source=1)
    win.Free()
    if rank != 0:
        return None
    return {**med, "n": repeats}


def _medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {f"{k}_s": statistics.median(v) for k, v in samples.items()}


def _block_medians(samples: dict[str, list[float]], blocks: int = RMA_BLOCKS) -> list[dict]:
    """The medians of ``blocks`` runs of consecutive epochs (fewer with fewer epochs):
    what a shorter run would have decided from, :func:`unsteady`."""
    n = min(len(v) for v in samples.values())
    k = max(1, min(blocks, n))
    edges = [round(i * n / k) for i in range(k + 1)]
    return [_medians({key: v[a:b] for key, v in samples.items()})
            for a, b in zip(edges, edges[1:], strict=False) if b > a]


def unsteady(measured: dict) -> Unsteady | None:
    """The refusal of the verdict where the blocks of consecutive epochs of the run
    (``measured["blocks"]``) do not all give the verdict (:func:`decide`): one
    busy phase of the machine then decides it, and four runs in a row said eager,
    after_completion, eager, after_completion. None if they agree (or the blocks
    were not recorded)."""
    blocks = measured.get("blocks") or []
    return check_verdicts("rma release protocol", [decide(b) for b in blocks])


def decide(measured: dict) -> str:
    """``"after_completion"`` if a fetch before the unlock delays the next grant by
    more than half its remaining round trip (module docstring), else ``"eager"``."""
    delay = measured["fetch_s"] - measured["empty_s"]
    return "after_completion" if delay > 0.5 * measured["round_trip_s"] else "eager"


def rma_entry(measured: dict) -> dict:
    """The platform file's ``rma`` entry from :func:`measure`'s medians."""
    return {"release": decide(measured), "measured": measured,
            "method": "calibration.rma: rank 1's MPI_Win_unlock Enter to the note of rank "
                      "0's next grant after an empty epoch, a put and a fetch-and-op, and "
                      "the fetch's remaining round trip (MPI_Win_flush); after_completion "
                      "where the fetch delays the grant by more than half that round trip"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m calibration.rma",
        description="Measure when MPI_Win_unlock sends the lock's release (run under "
                    "mpiexec -n 2) and print it, or write the rma entry into a platform "
                    "file.")
    ap.add_argument("--update", metavar="FILE.json", help="write the rma entry into this "
                                                          "platform file")
    ap.add_argument("--repeats", type=int, default=REPEATS,
                    help=f"epochs per variant ({REPEATS})")
    args = ap.parse_args(argv)
    from calibration.network import failed_on_rank0, library_version, two_ranks
    from calibration.platformfile import update_entry

    comm = two_ranks("calibration.rma")
    if comm is None:
        return 2
    error = None
    if comm.Get_rank() == 0 and args.update:
        from calibration.platformfile import read_platform_dict
        from compensate.platform import PlatformError
        try:  # a regular file only (a FIFO would stall every rank), a platform file
            read_platform_dict(args.update)
        except PlatformError as exc:
            error = str(exc)
    if failed_on_rank0(comm, "calibration.rma", error):
        return 3
    measured = measure(comm, repeats=max(args.repeats, 1))
    if comm.Get_rank() != 0:
        return 0
    found = unsteady(measured)
    if found is not None:
        print(found.message("calibration.rma",
                            then=f"{args.update} left unchanged" if args.update else ""),
              file=sys.stderr)
        return EXIT_UNSTEADY
    entry = rma_entry(measured)
    entry["mpi"] = library_version()
    if args.update and (error := update_entry(args.update, "rma", entry)):
        print(f"calibration.rma: error: {error}", file=sys.stderr)
        return 3
    us = {k: round(v * 1e6, 2) for k, v in measured.items() if k.endswith("_s")}
    print(f"rma: release {entry['release']} (unlock medians in us: {us})"
          + (f" -> {args.update}" if args.update else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
