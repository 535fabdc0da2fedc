"""The platform network model: a ping-pong of a few message sizes between two MPI
ranks, fitted to ``network(s) = latency + s · per_byte`` (the platform file's
optional ``network`` entry, docs/platform-file.md; R2f step 5 in
docs/compensation.md says how ``--bound fitted`` uses it).

Rank 0 sends ``s`` bytes to rank 1, which sends them back; half the median round
trip is the one-way time of an ``s``-byte message as the program sees it. The
measurement model (docs/design.md §2) splits that into the sender's copy, the
network and the receiver's copy, ``one_way(s) = 2·C(s)·s + network(s)``: the
copies of the platform's ``copy_time`` table are subtracted (never below 0) and
the line is fitted robustly (:func:`compensate.engine.fit.fit_line`) through the
per-size medians. The other ranks of the communicator wait.

A latency whose zero-byte one-way times scatter by more than ``--max-spread`` of
their median is refused (exit 4, nothing written; :func:`unsteady`).

Run alone on the ranks the traces come from (the network between other nodes
may differ)::

    mpiexec -n 2 python -m calibration.network --update platform.json

or let the project's mpi4py tracer do it (``python -m calibration.record`` on two
or more ranks writes the entry into the platform.json beside its traces).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from time import perf_counter_ns
from typing import Any

from calibration.spread import EXIT_UNSTEADY, MAX_SPREAD, Unsteady, check_number

#: message sizes of the ping-pong (bytes): zero bytes for the latency, then up to
#: 256 KiB (the eager/rendezvous switch of most MPI libraries lies in between; one
#: line through both is what R2f fits to a trace too)
SIZES = (0, 64, 1024, 16384, 262144)
REPEATS = 101  #: timed round trips per size (after WARMUP untimed ones)
WARMUP = 10


def pingpong(comm: Any, sizes: tuple[int, ...] = SIZES, repeats: int = REPEATS,
             warmup: int = WARMUP) -> list[dict] | None:
    """Collective over ``comm`` (>= 2 ranks): rank 0 times ``repeats`` round trips
    per size with rank 1. Returns on rank 0 ``[{"bytes", "seconds", "n"}]``, the
    median one-way time (half the round trip) per size; None on the other ranks."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    out: list[dict] | None = [] if rank == 0 else None
    comm.Barrier()
    for size in sizes:
        buf = bytearray(max(size, 1))
        msg = [buf, size, MPI.BYTE]
        samples = []
        for i in range(warmup + repeats):
            if rank == 0:
                t0 = perf_counter_ns()
                comm.Send(msg, dest=1, tag=7)
                comm.Recv(msg, source=1, tag=7)
                if i >= warmup:
                    samples.append((perf_counter_ns() - t0) * 1e-9 / 2.0)
            elif rank == 1:
                comm.Recv(msg, source=0, tag=7)
                comm.Send(msg, dest=0, tag=7)
        if out is not None:
            q1, _, q3 = statistics.quantiles(samples, n=4) if len(samples) > 1 \
                else (samples[0],) * 3
            out.append({"bytes": size, "seconds": statistics.median(samples),
                        "n": len(samples), "iqr": [q1, q3]})
    comm.Barrier()
    return out


def network_entry(measured: list[dict], copy_time=None) -> dict:
    """The platform file's ``network`` entry from the ping-pong medians: one-way
    time minus the two copies (``copy_time(s)``: seconds to copy ``s`` bytes once;
    None: free), fitted to ``latency + s · per_byte`` (both >= 0)."""
    import numpy as np

    from compensate.engine.fit import fit_line

    sizes = np.array([m["bytes"] for m in measured], dtype=np.int64)
    copies = np.array([2.0 * float(copy_time(int(s))) if copy_time else 0.0 for s in sizes])
    net = np.maximum(np.array([m["seconds"] for m in measured]) - copies, 0.0)
    latency, per_byte = fit_line(sizes, net)
    return {"latency": latency, "per_byte": per_byte,
            "method": "ping-pong between ranks 0 and 1 (calibration.network): half the "
                      "median round trip minus two copies, fitted latency + bytes * per_byte",
            "measured": measured}


def unsteady(measured: list[dict], max_spread: float = MAX_SPREAD) -> Unsteady | None:
    """The refusal of the latency where the one-way times of the smallest message
    scatter by more than ``max_spread`` of their median (:mod:`calibration.spread`):
    on a machine whose cores the ranks share with other work a round trip waits
    for the scheduler, and the fitted latency is that wait (391 µs for 1.7-8.4 µs).
    None if steady, or if the quartiles were not recorded."""
    first = min(measured, key=lambda m: m["bytes"], default=None)
    if first is None or "iqr" not in first:
        return None
    return check_number("network latency", first["seconds"], *first["iqr"], max_spread)


def two_ranks(module: str) -> Any:
    """MPI's COMM_WORLD if it has at least two ranks (a measurement between two
    processes), else None after the one-line usage error naming ``module``."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print(f"{module}: error: needs two ranks (mpiexec -n 2 python -m {module})",
              file=sys.stderr)
        return None
    return comm


def failed_on_rank0(comm: Any, module: str, error: str | None) -> bool:
    """Whether rank 0 found ``error`` (told to every rank, printed once by rank 0 as
    the one-line error of ``module``): every rank then stops with the same status."""
    if comm.bcast(error, root=0):
        if comm.Get_rank() == 0:
            print(f"{module}: error: {error}", file=sys.stderr)
        return True
    return False


def library_version() -> str:
    """The MPI library's version line, recorded beside a measured entry."""
    from mpi4py import MPI

    return MPI.Get_library_version().splitlines()[0].strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m calibration.network",
        description="Measure the network model (ping-pong of ranks 0 and 1; run under "
                    "mpiexec -n 2) and print it, or write it into a platform file.")
    ap.add_argument("--update", metavar="FILE.json",
                    help="write the network entry into this platform file (its copy_time "
                         "table gives the copies subtracted)")
    ap.add_argument("--repeats", type=int, default=REPEATS, help=f"round trips per size "
                                                                 f"({REPEATS})")
    ap.add_argument("--max-spread", type=float, default=MAX_SPREAD, metavar="FRACTION",
                    help="refuse the latency where the interquartile range of the "
                         "zero-byte one-way times exceeds this fraction of their median "
                         f"({MAX_SPREAD:g}; exit {EXIT_UNSTEADY})")
    args = ap.parse_args(argv)
    from calibration.platformfile import update_entry
    from compensate.platform import Platform, PlatformError

    comm = two_ranks("calibration.network")
    if comm is None:
        return 2
    plat, error = None, None
    if comm.Get_rank() == 0 and args.update:
        try:
            plat = Platform.load(args.update)
        except PlatformError as exc:
            error = str(exc)
    if failed_on_rank0(comm, "calibration.network", error):
        return 3
    measured = pingpong(comm, repeats=max(args.repeats, 1))
    if comm.Get_rank() != 0:
        return 0
    found = unsteady(measured, args.max_spread)
    if found is not None:
        print(found.message("calibration.network",
                            then=f"{args.update} left unchanged" if args.update else ""),
              file=sys.stderr)
        return EXIT_UNSTEADY
    entry = network_entry(measured, plat.copy_time if plat else None)
    entry["mpi"] = library_version()
    if args.update and (error := update_entry(args.update, "network", entry)):
        print(f"calibration.network: error: {error}", file=sys.stderr)
        return 3
    print(f"network: latency {entry['latency'] * 1e6:.3g} us, per byte "
          f"{entry['per_byte'] * 1e9:.3g} ns" + (f" -> {args.update}" if args.update else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
