"""The heap kept between segments (compensate/pipeline/memory.py, docs/performance.md):
the one-process streamed run at several ``--segment-records`` (``default``: without
the option), keeping what its segments free
(:func:`~compensate.pipeline.memory.heap_to_keep`, 512 bytes a segment record, at
least 64 MiB) against always 64 MiB, alternated ``--repeat`` times in fresh
processes. Prints per run kind the medians of user and system CPU
seconds, minor page faults and the peak resident set (``wait4``'s rusage).

Simulates the 16-process ``stencil`` of benchmarks/parallel_replay.py as an OTF2
archive (cached in ``--workdir``, the same name, so either benchmark reuses it).

Usage::

    python benchmarks/segment_heap.py [--records 1e7]
                                      [--segments default,131072,262144,524288]
                                      [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parallel_replay import simulated_trace  # noqa: E402  (the benchmarks' shared trace)

from compensate.pipeline.cuts import SEGMENT_RECORDS  # noqa: E402


def _child(args: list[str]) -> None:
    """One run; with ``SEGMENT_HEAP_FIXED`` set, the 64 MiB rule of before."""
    import compensate.pipeline.memory as memory
    from compensate.cli.compensate import main

    if os.environ.get("SEGMENT_HEAP_FIXED"):
        memory.heap_to_keep = lambda records: memory.KEEP_FREE_HEAP
    sys.exit(main(args))


def _run(trace: Path, platform: Path, out: Path, records: int | None, fixed: bool) -> tuple:
    """(user s, system s, minor faults, peak MiB) of one run in a fresh process
    (``records`` None: without ``--segment-records``)."""
    env = dict(os.environ, SEGMENT_HEAP_FIXED="1" if fixed else "")
    cmd = [sys.executable, __file__, "--child", str(trace), str(out), "--platform",
           str(platform), "--quiet", "--force"]
    if records is not None:
        cmd += ["--segment-records", str(records)]
    proc = subprocess.Popen(cmd, env=env)
    _, status, use = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"segment_heap: the run failed: {' '.join(cmd)}")
    return use.ru_utime, use.ru_stime, use.ru_minflt, use.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=float, default=1e7)
    ap.add_argument("--segments", default="default,131072,262144,524288")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "compensate-bench"))
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    trace, platform = simulated_trace(work, args.records, "otf2")
    out = work / "segment_heap" / "traces.otf2"
    print(f"{trace} ({args.records:.0e} records), medians of {args.repeat} alternated runs")
    print(f"{'segment records':>20} {'heap kept':>14} {'user s':>7} {'sys s':>6} "
          f"{'minor faults':>13} {'peak MiB':>9}")
    for name in args.segments.split(","):
        records = None if name == "default" else int(name)
        runs: dict[bool, list] = {False: [], True: []}
        for i in range(args.repeat):
            for fixed in ((False, True) if i % 2 == 0 else (True, False)):
                runs[fixed].append(_run(trace, platform, out, records, fixed))
        for fixed in (False, True):
            med = [statistics.median(r[k] for r in runs[fixed]) for k in range(4)]
            size = SEGMENT_RECORDS if records is None else records
            kept = "64 MiB" if fixed else f"{max(64, 512 * size >> 20)} MiB"
            label = f"{size:,}" + (" (default)" if records is None else "")
            print(f"{label:>20} {kept:>14} {med[0]:>7.2f} {med[1]:>6.2f} "
                  f"{int(med[2]):>13,} {med[3]:>9.0f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
