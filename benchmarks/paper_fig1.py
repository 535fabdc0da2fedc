"""The paper's experiment on real MPI: uninstrumented vs traced vs compensated.

For each process count, ``examples/montecarlo_pi.py`` (the Monte-Carlo π
master/worker of Wolf, Malony, Shende, Morris, Fig. 1) runs ``--reps`` times
uninstrumented and ``--reps`` times under the tracer
(``python -m calibration.record``), alternating; as in the paper the shortest run
of each kind is kept. The shortest traced run is compensated with its own ``platform.json``
using the lower and the upper bound (and ``fitted`` when this ``compensate``
supports it). Printed (markdown, also the table of docs/realrun.md):

  uninstr. s      span of the program's ``run()`` over all ranks, uninstrumented
                  (the program measures it itself, after a common barrier)
  instr. s        the same span in the trace (Enter/Leave of ``run``)
  lower/upper/fitted s  the same span in the compensated traces
  dilation %      (instr - uninstr) / uninstr
  removed %       share of the dilation removed, 1 - |T_a - T_u| / (T_m - T_u)
                  (docs/design.md §7: overshooting below T_u counts against it)

Below the table: the per-record check (measured dilation per record of the
busiest rank against the calibrated mean O of its records), all run times, the
largest off-CPU time of a rank during ``run()`` in the kept runs (MPICH ranks
busy-poll and never sleep, so this is time the OS gave their core to another
process: waiting that is no tracer overhead), and the machine.

Usage: python benchmarks/paper_fig1.py [--ranks 2,4] [--reps 5] [--rounds 300]
           [--pairs 300] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from compensate.formats.otf2 import read_otf2
from compensate.model import ENTER, LEAVE
from compensate.platform import Platform

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "examples" / "montecarlo_pi.py"
REGION = "run"


def _run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def region_span(path: Path, region: str = REGION) -> tuple[float, int, np.ndarray]:
    """(seconds from the earliest Enter to the latest Leave of ``region`` over all
    locations, record count and record kinds of the busiest location)."""
    trace = read_otf2(str(path))
    ids = [i for i, name in trace.definitions.regions.items() if name == region]
    enters, leaves = [], []
    for ev in trace.events.values():
        sel = np.isin(ev.region, ids)
        enters += ev.time[sel & (ev.kind == ENTER)].tolist()
        leaves += ev.time[sel & (ev.kind == LEAVE)].tolist()
    if not enters or not leaves:
        raise RuntimeError(f"{path}: no Enter/Leave of region {region!r}")
    busiest = max(trace.events.values(), key=len)
    return (max(leaves) - min(enters)) / trace.definitions.timer_resolution, len(busiest), \
        busiest.kind


def mean_overhead(platform: Platform, kinds: np.ndarray) -> float:
    return float(platform.overhead_table()[kinds].mean())


def supports_fitted() -> bool:
    proc = subprocess.run(["compensate", "--help"], capture_output=True, text=True)
    return "fitted" in proc.stdout


def machine() -> dict[str, str]:
    from calibration.machine import cpu_model  # noqa: PLC0415
    cpu = cpu_model()
    import mpi4py  # noqa: PLC0415 - only to name the library

    mpi4py.rc.initialize = False  # MPI_Get_library_version needs no MPI_Init
    from mpi4py import MPI  # noqa: PLC0415

    return {"cores": str(os.cpu_count()), "cpu": cpu,
            "python": pyplatform.python_version(),
            "mpi": MPI.Get_library_version().splitlines()[0].strip(),
            "mpi4py": mpi4py.__version__,
            "os": f"{pyplatform.system()} {pyplatform.release()}"}


def experiment(n: int, args: argparse.Namespace, work: Path, bounds: list[str]) -> dict:
    prog = [str(PROGRAM), "--rounds", str(args.rounds), "--pairs", str(args.pairs),
            "--check-every", str(args.check_every)]
    base = ["mpiexec", "-n", str(n), sys.executable]
    plain, traced = [], []
    for rep in range(args.reps):  # alternate, so that both kinds see the same load
        timing = work / f"u{n}-{rep}.json"
        _run([*base, *prog, "--timing", str(timing)])
        plain.append(json.loads(timing.read_text()))
        out = work / f"t{n}-{rep}"
        timing = work / f"t{n}-{rep}.json"
        _run([*base, "-m", "calibration.record", "-o", str(out / "traces.otf2"), "--force",
              "--", *prog, "--timing", str(timing)])
        traced.append((json.loads(timing.read_text()), out))
    kept_plain = min(plain, key=lambda t: t["seconds"])
    kept, best = min(traced, key=lambda t: t[0]["seconds"])
    t_m, records, kinds = region_span(best / "traces.otf2")
    plat = Platform.load(best / "platform.json")
    row = {"ranks": n, "uninstr": kept_plain["seconds"], "instr": t_m, "records": records,
           "mean_o": mean_overhead(plat, kinds),
           "plain_all": [t["seconds"] for t in plain],
           "traced_all": [t["seconds"] for t, _ in traced],
           "off_cpu": (kept_plain["off_cpu"], kept["off_cpu"]), "bounds": {}}
    for bound in bounds:
        out = work / f"c{n}-{bound}"
        summary = work / f"c{n}-{bound}.json"
        _run(["compensate", str(best / "traces.otf2"), str(out / "traces.otf2"),
              "--platform", str(best / "platform.json"), "--bound", bound,
              "--summary", str(summary), "--quiet", "--force"])
        s = json.loads(summary.read_text())
        row["bounds"][bound] = {"seconds": region_span(out / "traces.otf2")[0],
                                "violations": s["verification"]["violations"],
                                "overcompensated": s["overcompensated_records"]}
    return row


def removed(t_a: float, t_m: float, t_u: float) -> float:
    return 100.0 * (1.0 - abs(t_a - t_u) / (t_m - t_u)) if t_m != t_u else float("nan")


def report(rows: list[dict], bounds: list[str], info: dict) -> str:
    cores = os.cpu_count() or 1
    head = ["ranks", "uninstr. s", "instr. s", *[f"{b} s" for b in bounds], "dilation %",
            *[f"removed {b} %" for b in bounds]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        t_u, t_m = r["uninstr"], r["instr"]
        over = " ⁺" if r["ranks"] > cores else ""
        cells = [f"{r['ranks']}{over}", f"{t_u:.4f}", f"{t_m:.4f}",
                 *[f"{r['bounds'][b]['seconds']:.4f}" for b in bounds],
                 f"{100 * (t_m - t_u) / t_u:.1f}",
                 *[f"{removed(r['bounds'][b]['seconds'], t_m, t_u):.1f}" for b in bounds]]
        lines.append("| " + " | ".join(cells) + " |")
    if any(r["ranks"] > cores for r in rows):
        lines.append(f"\n⁺ oversubscribed: more ranks than the machine's {cores} cores")
    lines.append("")
    for r in rows:
        busiest = (r["instr"] - r["uninstr"]) / r["records"]
        lines.append(
            f"ranks {r['ranks']}: busiest rank {r['records']:,} records, measured dilation "
            f"{busiest * 1e9:.0f} ns/record, calibrated mean O {r['mean_o'] * 1e9:.0f} "
            f"ns/record (ratio {busiest / r['mean_o']:.2f}); all runs: uninstr. "
            + ", ".join(f"{t:.4f}" for t in r["plain_all"]) + " s; instr. "
            + ", ".join(f"{t:.4f}" for t in r["traced_all"]) + " s; off-CPU time of the "
            f"busiest rank in the kept runs: uninstr. {r['off_cpu'][0]:.4f} s, instr. "
            f"{r['off_cpu'][1]:.4f} s; violations "
            + ", ".join(f"{b} {r['bounds'][b]['violations']}" for b in bounds)
            + "; overcompensated records "
            + ", ".join(f"{b} {r['bounds'][b]['overcompensated']}" for b in bounds))
    lines.append("")
    lines.append("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--check-every", type=int, default=2)
    ap.add_argument("--workdir", help="keep runs here (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="do not delete the temporary runs")
    args = ap.parse_args(argv)
    if shutil.which("mpiexec") is None:
        print("realrun: mpiexec not found: pip install -e '.[mpi]'", file=sys.stderr)
        return 2
    work = Path(args.workdir or tempfile.mkdtemp(prefix="realrun-"))
    work.mkdir(parents=True, exist_ok=True)
    bounds = ["lower", "upper"] + (["fitted"] if supports_fitted() else [])
    info = machine()
    info["load before"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    start = time.monotonic()
    try:
        rows = []
        for n in (int(x) for x in args.ranks.split(",")):
            if n > (os.cpu_count() or 1):
                print(f"realrun: {n} ranks on {os.cpu_count()} cores: oversubscribed",
                      file=sys.stderr)
            rows.append(experiment(n, args, work, bounds))
    finally:
        if not (args.workdir or args.keep):
            shutil.rmtree(work, ignore_errors=True)
    info["load after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    info["benchmark"] = f"{time.monotonic() - start:.0f} s"
    print(f"python benchmarks/paper_fig1.py --ranks {args.ranks} --reps {args.reps} "
          f"--rounds {args.rounds} --pairs {args.pairs} --check-every {args.check_every}\n")
    print(report(rows, bounds, info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
