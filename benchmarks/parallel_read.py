"""Per-process memory of reading only some locations (each rank of the
parallel replay reads only its own locations: a rank's peak at P = 2 against the
one-process peak on a 10^6-record trace).

On a simulated ``stencil`` archive of about ``--records`` records (32 ranks,
generated once with the simulator and cached in ``--workdir``, as
benchmarks/throughput.py makes its archives), each figure in a fresh child
process:

  all            one process reads every location;
  half 1/2       two processes at the same time, each reading one half of the
                 locations (balanced by the record counts of the Location
                 definitions, :func:`compensate.formats.location_record_counts`),
                 with ``read_chunks(..., locations=...)``.

Read modes (``--modes``): ``whole`` reads by the C path
(``read_chunks(path, DEFAULT_CHUNK_RECORDS, payload=False, locations=...)``)
and keeps every chunk (what a rank that holds its locations' columns whole
needs); ``stream`` drops each chunk once counted (what a streaming rank needs
at least); ``package`` is ``read_trace(path, locations)`` through the ``otf2``
package (an event object per record, as ``--in-memory`` and the Python API
read; slow). Printed per process: records read, CPU seconds of
the read (process time, interpreter start-up and imports excluded), peak
resident set (``VmHWM``), the resident set before the read (imports and
definitions' floor), and each half's peak as a share of the one-process peak,
also counting only what lies above the floor (what grows with the records).

Usage::

    python benchmarks/parallel_read.py [--records 1e6] [--modes whole,stream]
                                       [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANKS = 32
OVERHEAD = 1e-6


def _status_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status (Linux), in MiB:
    ``VmRSS`` now, ``VmHWM`` its peak. (``ru_maxrss`` would not do: Linux carries
    the parent's peak at fork over into the child's, across exec.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no {field} in /proc/self/status")


def _read(path: str, mode: str, locations: list[int] | None) -> dict:
    """Child: read ``locations`` of ``path`` in ``mode``; one JSON line."""
    import compensate.formats.otf2.native as native
    from compensate.formats import DEFAULT_CHUNK_RECORDS, read_chunks, read_trace

    if mode == "package":
        os.environ[native.ENV_SWITCH] = "0"
    floor = _status_mib("VmRSS")
    c0 = time.process_time()
    records = 0
    if mode == "package":
        trace = read_trace(path, locations)
        records = trace.record_count
    else:
        _, chunks = read_chunks(path, DEFAULT_CHUNK_RECORDS, payload=False,
                                locations=locations)
        kept = []
        for chunk in chunks:
            records += sum(len(ev) for ev in chunk.values())
            if mode == "whole":
                kept.append(chunk)
    cpu = time.process_time() - c0
    peak = _status_mib("VmHWM")
    return {"records": records, "cpu": cpu, "peak_mib": peak, "floor_mib": floor}


def _generate(records: float, out: Path) -> Path:
    """The cached archive ``out/otf2/traces.otf2`` of about ``records`` records."""
    anchor = out / "otf2" / "traces.otf2"
    if anchor.exists():
        return anchor
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from throughput import _iterations_for  # the same sizing as throughput.py

    from compensate.formats import write_trace
    from compensate.simulate import simulate

    iterations = _iterations_for("stencil", int(records))
    sim = simulate("stencil", ranks=RANKS, iterations=iterations, overhead=OVERHEAD,
                   step_time=2e-6)
    shutil.rmtree(out / "otf2", ignore_errors=True)
    write_trace(sim.measured, anchor)
    return anchor


def _halves(path: Path) -> list[list[int]]:
    """The locations in two halves of (nearly) equal record counts (greedy)."""
    from compensate.formats import location_record_counts

    counts = location_record_counts(path)
    halves: list[list[int]] = [[], []]
    load = [0, 0]
    for loc, n in sorted(counts.items(), key=lambda kv: -(kv[1] or 0)):
        k = 0 if load[0] <= load[1] else 1
        halves[k].append(loc)
        load[k] += n or 0
    return halves


def _spawn(path: Path, mode: str, locations: list[int] | None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    arg = "all" if locations is None else ",".join(map(str, locations))
    return subprocess.Popen([sys.executable, __file__, "_child", str(path), mode, arg],
                            stdout=subprocess.PIPE, text=True, env=env)


def _result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"child failed ({proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        locs = None if argv[3] == "all" else [int(x) for x in argv[3].split(",") if x]
        print(json.dumps(_read(argv[1], argv[2], locs)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=float, default=1e6)
    ap.add_argument("--modes", default="whole,stream")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/compensate-parallel-read"))
    args = ap.parse_args(argv)
    work = args.workdir / f"stencil-{int(args.records)}"
    t0 = time.perf_counter()
    anchor = _generate(args.records, work)
    print(f"archive {anchor} ({time.perf_counter() - t0:.0f} s to make or find)")
    halves = _halves(anchor)
    print(f"{'mode':8} {'process':8} {'records':>9} {'CPU s':>7} {'peak MiB':>9} "
          f"{'floor MiB':>9} {'peak/all':>8} {'above floor/all':>15} {'wall s':>7}")
    for mode in args.modes.split(","):
        t = time.perf_counter()
        whole = _result(_spawn(anchor, mode, None))
        wall_all = time.perf_counter() - t
        t = time.perf_counter()
        procs = [_spawn(anchor, mode, h) for h in halves]  # the two "ranks" at once
        parts = [_result(p) for p in procs]
        wall_half = time.perf_counter() - t
        rows = [("all", whole, wall_all)] + [(f"half {i + 1}/2", r, wall_half)
                                             for i, r in enumerate(parts)]
        for name, r, wall in rows:
            share = r["peak_mib"] / whole["peak_mib"]
            above = (r["peak_mib"] - r["floor_mib"]) / (whole["peak_mib"] - whole["floor_mib"])
            print(f"{mode:8} {name:8} {r['records']:9d} {r['cpu']:7.2f} "
                  f"{r['peak_mib']:9.1f} {r['floor_mib']:9.1f} {share:8.0%} {above:15.0%} "
                  f"{wall:7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
