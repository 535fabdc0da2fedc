"""A record-heavy loop: a tiny function called many times, timed by the program.

Run once plainly and once under the tracer, it shows the per-record dilation the
tracer really causes, to set against the ``O`` its calibration wrote into
``platform.json`` (tests/calibration/test_tracer.py and docs/realrun.md do that)::

    mpiexec -n 1 python examples/mpi/recordloop.py --timing plain.json
    mpiexec -n 1 python -m calibration.record -o run/traces.otf2 -- \\
        examples/mpi/recordloop.py --timing traced.json

``--timing`` writes ``{"calls", "seconds"}``: the shortest of ``--repeats`` loops of
``--calls`` calls (rank 0).
"""

from __future__ import annotations

import argparse
import json
import time

from mpi4py import MPI


def tiny(a: int, b: int) -> int:
    """The function whose Enter/Leave the tracer records, two per call."""
    return a


def loop(calls: int) -> None:
    for i in range(calls):
        tiny(i, calls)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--timing", metavar="FILE.json")
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    comm.Barrier()
    best = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        loop(args.calls)
        best = min(best, time.perf_counter() - t0)
    if comm.Get_rank() == 0:
        result = {"calls": args.calls, "seconds": best}
        print(json.dumps(result))
        if args.timing:
            with open(args.timing, "w") as f:
                json.dump(result, f)


if __name__ == "__main__":
    main()
