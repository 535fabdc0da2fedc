"""Traces of many processes: what one more location costs each segment. The same
number of records of the simulated stencil on 16 up to hundreds of processes,
each compensated by the one-process streamed command (OTF2 in and out) in a
fresh process, the runs of the sizes alternated ``--repeat`` times.

    python benchmarks/wide_traces.py [--processes 16,64,256,512] [--records 2e6]
        [--repeat 2] [--workdir DIR]

Prints per size the wall and CPU seconds (median of the repeats), the peak
resident set, the segments, and the CPU seconds each location beyond the
smallest size adds per segment. Every communicator here holds every process
(MPI_COMM_WORLD), so work done per location for each of its communicators'
members grows with the square of the processes: this is where it shows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.parallel_replay import simulated_trace  # noqa: E402

#: the command in a child that prints its own CPU seconds and peak (``ru_maxrss`` of
#: the children would be the largest child's so far, not this one's)
_CHILD = ("import resource, sys\n"
          "from compensate.cli import main\n"
          "status = main(sys.argv[1:])\n"
          "use = resource.getrusage(resource.RUSAGE_SELF)\n"
          "print(use.ru_utime + use.ru_stime, use.ru_maxrss / 1024, file=sys.stderr)\n"
          "sys.exit(status)\n")


def _run(trace: tuple[Path, Path], out: Path) -> tuple[float, float, float, dict]:
    """Wall s, CPU s, peak MiB and the summary of one streamed run of ``trace``
    (its anchor file and platform file)."""
    summary = out / "summary.json"
    t = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", _CHILD, str(trace[0]),
                          str(out / "o" / "traces.otf2"), "--platform", str(trace[1]),
                          "--quiet", "--force", "--summary", str(summary)],
                         check=True, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    cpu, peak = (float(x) for x in run.stderr.split()[-2:])
    return wall, cpu, peak, json.loads(summary.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default="16,64,256,512")
    ap.add_argument("--records", type=float, default=2e6)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    sizes = [int(x) for x in args.processes.split(",")]
    workdir = args.workdir or Path(tempfile.gettempdir()) / "compensate-wide"
    workdir.mkdir(parents=True, exist_ok=True)
    traces = {p: simulated_trace(workdir, args.records, "otf2", ranks=p) for p in sizes}
    runs: dict[int, list[tuple[float, float, float, dict]]] = {p: [] for p in sizes}
    for i in range(args.repeat):
        for p in sizes if i % 2 == 0 else sizes[::-1]:
            runs[p].append(_run(traces[p], workdir / f"out_{p}"))
    print(f"(machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"{args.repeat} runs a size, alternated; peak: the largest of the runs)")
    print(f"{'processes':>9} {'records':>11} {'segments':>8} {'wall s':>7} {'CPU s':>7} "
          f"{'peak MiB':>8}  {'CPU ms per added location and segment':>38}")
    base = None
    for p in sizes:
        wall = statistics.median(r[0] for r in runs[p])
        cpu = statistics.median(r[1] for r in runs[p])
        peak = max(r[2] for r in runs[p])
        summary = runs[p][0][3]
        segments = summary["segments"]["count"]
        added = ""
        if base is None:
            base = (p, cpu)
        else:
            added = f"{(cpu - base[1]) / ((p - base[0]) * segments) * 1e3:.2f}"
        print(f"{p:>9} {summary['records']:>11,} {segments:>8} {wall:>7.2f} {cpu:>7.2f} "
              f"{peak:>8.0f}  {added:>38}")


if __name__ == "__main__":
    main()
