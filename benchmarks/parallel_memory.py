"""Memory per rank of the streamed distributed run against one process
(docs/parallel.md "Streaming within a rank"): peak resident set, its fixed part,
the trace-dependent rest, and the segments the ranks agreed on.

For each program and size, simulates an 8-process OTF2 trace of about
``--records`` records (cached in ``--workdir`` with its platform file):
``stencil`` (the project's: every process the same step in lock step) and the
differently interleaved programs of tests/parallel/interleaved.py (``skewed``:
own rates, start offsets and message orders; ``wavefront``; ``bursts``;
``halves``: one half of the processes denser in time than the other, in turn). Then
runs ``compensate IN OUT`` streamed in one process and ``mpiexec -n P compensate
IN OUT`` (streamed within each rank, the default), each in fresh processes, and
prints per rank: the peak resident set (``VmHWM``), the fixed part (the
resident set when the first chunk of records is asked for: interpreter,
imports, MPI, definitions, the reader opened), the trace-dependent part (peak
less fixed) and its ratio to the one-process run's, the CPU seconds, the
seconds of the segments (the summary's ``parallel.seconds.segments``: reading,
agreeing the cuts and compensating, which one read interleaves), and the
segments (count, largest) of the summary; and whether the output equals the
one-process output (every definition and event file, byte for byte).
``--archives A.otf2,...`` adds real OTF2 archives (another tracer's, e.g. an
EZTrace trace whose processes' clocks disagree), compensated with
``--overhead DURATION`` (default 20ns) where they have no platform file.

Usage::

    python benchmarks/parallel_memory.py [--records 1e6,1e7] [--programs stencil,skewed]
                                         [--ranks 2] [--workdir DIR]
                                         [--archives A.otf2,...] [--overhead 20ns]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.parallel_replay import same_output  # noqa: E402

PROCESSES = 8


def _status_mib(key: str = "VmRSS") -> float:
    """``key`` of ``/proc/self/status`` in MiB (-1 where there is none)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return -1.0


def _rss_mib() -> float:
    return _status_mib("VmRSS")


class _FirstRead:
    """A reader's chunks that note the resident set when the first is asked for."""

    def __init__(self, chunks, note) -> None:
        self._chunks, self._it, self._note = chunks, None, note

    def __iter__(self):
        return self

    def __next__(self):
        if self._it is None:
            self._note()
            self._it = iter(self._chunks)
        return next(self._it)

    def __getattr__(self, name: str):
        return getattr(self._chunks, name)


def _child(args: list[str]) -> None:
    """One rank (or the one process): the command, with the resident set before its
    first record noted; then its peak, fixed part and CPU seconds into files."""
    import compensate.formats as formats
    from compensate.cli.compensate import main

    rank = os.environ.get("PMI_RANK", "0")
    fixed: list[float] = []
    inner = formats.read_chunks

    def read_chunks(*a, **kw):
        defs, chunks = inner(*a, **kw)
        return defs, _FirstRead(chunks, lambda: fixed or fixed.append(_rss_mib()))

    formats.read_chunks = read_chunks
    status = main(args[1:])
    use = resource.getrusage(resource.RUSAGE_SELF)
    # the peak of this process's own memory (VmHWM): ru_maxrss would also hold the
    # parent's resident set at the fork (Linux keeps it across exec), and the
    # benchmark's parent may have simulated a large trace in-process
    Path(args[0], f"rank{rank}.json").write_text(json.dumps(
        {"peak": _status_mib("VmHWM"), "fixed": fixed[0] if fixed else -1.0,
         "cpu": use.ru_utime + use.ru_stime}))
    sys.exit(status)


def _trace(workdir: Path, program: str, records: float) -> tuple[Path, Path]:
    """A cached 8-process OTF2 trace of ``program`` of about ``records`` records, and
    its platform file."""
    from tests.parallel.interleaved import RECORDS_PER_STEP

    per = RECORDS_PER_STEP.get(program, 14)
    iterations = max(1, int(records / (PROCESSES * per)))
    out = workdir / f"{program}_{PROCESSES}x{iterations}"
    trace = out / "measured" / "traces.otf2"
    if trace.exists():
        return trace, out / "platform.json"
    from compensate.cli.simulate import write_windows
    from compensate.simulate import simulate
    from tests.parallel.interleaved import PROGRAMS, simulate_interleaved

    shutil.rmtree(out, ignore_errors=True)
    sim = simulate_interleaved(program, PROCESSES, iterations) if program in PROGRAMS \
        else simulate(program, ranks=PROCESSES, iterations=iterations)
    write_windows(sim.measured, trace)
    (out / "platform.json").write_text(json.dumps(sim.platform.to_dict()))
    return trace, out / "platform.json"


def _run(launcher: list[str], trace: Path, platform: list[str], out: Path
         ) -> tuple[float, list[dict], dict]:
    """(wall seconds, per rank {peak, fixed, cpu}, the summary)."""
    notes = Path(tempfile.mkdtemp(prefix="memory"))
    shutil.rmtree(out.parent, ignore_errors=True)
    summary = out.parent.with_suffix(".json")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.monotonic()
    subprocess.run([*launcher, sys.executable, __file__, "--child", str(notes), str(trace),
                    str(out), *platform, "--quiet", "--force",
                    "--summary", str(summary)], check=True, cwd=ROOT, env=env)
    wall = time.monotonic() - start
    ranks = [json.loads(p.read_text()) for p in
             sorted(notes.glob("rank*.json"), key=lambda p: int(p.stem[4:]))]
    shutil.rmtree(notes)
    return wall, ranks, json.loads(summary.read_text())


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", default="1e6,1e7")
    ap.add_argument("--programs", default="stencil,skewed")
    ap.add_argument("--ranks", default="2")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "compensate-memory"))
    ap.add_argument("--archives", default="",
                    help="real OTF2 archives (anchor files) to measure as well")
    ap.add_argument("--overhead", default="20ns", help="the archives' --overhead")
    a = ap.parse_args()
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    mpiexec = shutil.which("mpiexec")
    print(f"{'trace':>18} {'P':>2} {'rank':>4} {'peak MiB':>9} {'fixed':>6} {'trace-dep':>9} "
          f"{'vs P=1':>7} {'CPU s':>6} {'seg s':>6} {'wall s':>7} {'segments':>8} "
          f"{'largest':>9}  same")
    cases = [(program, records) for records in (float(x) for x in a.records.split(","))
             for program in a.programs.split(",") if program]
    cases += [(Path(x).resolve(), 0.0) for x in a.archives.split(",") if x]
    for program, records in cases:
        if isinstance(program, Path):
            trace, platform = program, ["--overhead", a.overhead]
        else:
            trace, plat = _trace(workdir, program, records)
            platform = ["--platform", str(plat)]
        one = workdir / "one" / "traces.otf2"
        runs = [(1, *_run([], trace, platform, one))]
        if mpiexec is not None:
            for p in (int(x) for x in a.ranks.split(",")):
                out = workdir / f"p{p}" / "traces.otf2"
                runs.append((p, *_run([mpiexec, "-n", str(p)], trace, platform, out)))
        base = runs[0][2][0]["peak"] - runs[0][2][0]["fixed"]
        name = program.parent.name if isinstance(program, Path) else program
        label = f"{name[:12]} {runs[0][3]['records'] / 1e6:.2f}M"
        for p, wall, ranks, s in runs:
            same = "-" if p == 1 else ("yes" if same_output(one, workdir / f"p{p}" /
                                                      "traces.otf2") else "NO")
            cut = s.get("parallel", {}).get("seconds", {}).get("segments",
                                                                [None] * len(ranks))
            seg = s.get("segments") or {"count": "whole", "largest": "-"}
            for r, m in enumerate(ranks):
                dep = m["peak"] - m["fixed"]
                c = f"{cut[r]:.2f}" if cut[r] is not None else "-"
                print(f"{label:>18} {p:>2} {r:>4} {m['peak']:>9.0f} {m['fixed']:>6.0f} "
                      f"{dep:>9.0f} {dep / base:>7.2f} {m['cpu']:>6.1f} {c:>6} "
                      f"{wall:>7.2f} {seg['count']:>8} {seg['largest']:>9}  {same}")
    if mpiexec is None:
        print("mpiexec not found (the [mpi] extra): only P = 1 measured")


if __name__ == "__main__":
    main()
