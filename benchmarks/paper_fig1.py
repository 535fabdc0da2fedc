"""The paper's experiment on real MPI: uninstrumented vs traced vs compensated.

For each process count, ``examples/montecarlo_pi.py`` (the Monte-Carlo π
master/worker of Wolf, Malony, Shende, Morris, Fig. 1) runs ``--reps`` times
uninstrumented and ``--reps`` times under the tracer
(``python -m calibration.record``), alternating, so that both see the same load.
Every traced run is compensated with the lower, the upper and the fitted bound,
with the overhead the trace measured itself while the program ran (its in-situ
tables, ``--overhead insitu``; the tracer's ``platform.json`` only for the copy
cost). Printed (markdown, also the table of docs/realrun.md), medians over the
repetitions with [min–max]:

  uninstr. s      span of the program's ``run()`` over all ranks, uninstrumented
                  (the program measures it itself, after a common barrier): the
                  median of the runs, T_u
  instr. s        the same span in the trace (Enter/Leave of ``run``), T_m
  lower/upper/fitted s  the same span in the compensated traces, T_a
  dilation %      (T_m - T_u) / T_u
  dilation ns/record    (T_m - T_u) / records of the busiest rank
  overhead used ns/record  the mean in-situ overhead of the busiest rank's records
  removed %       share of the dilation removed, 1 - |T_a - T_u| / (T_m - T_u)
                  (docs/design.md §7: overshooting below T_u counts against it)
  paired %        the same with T_u the uninstrumented run made right before
                  that traced run (one repetition = one such pair): on a shared
                  VM the host slows both runs of a pair alike for seconds at a
                  time, and a removal is a ratio of times, so the pair's common
                  slow-down cancels where a median T_u does not (docs/realrun.md)

Below the table: all run times, the largest off-CPU time of a rank during
``run()`` (MPICH ranks busy-poll and never sleep, so this is time the OS gave
their core to another process), the busiest rank's run-queue wait the tracer
measured in situ, the worst violations and overcompensated records of any run,
the overhead source, and the machine.

``--overhead insitu,user,platform`` adds columns for the same runs compensated as
a user would, with the tracer's ``platform.json`` alone (``user``: the file says
``prefer_insitu``) and with the file's own per-kind overhead forced (``platform``).

Usage: python benchmarks/paper_fig1.py [--ranks 2,4] [--reps 5] [--rounds 300]
           [--pairs 300] [--overhead insitu,user,platform] [--workdir DIR] [--keep]
       python benchmarks/paper_fig1.py --program examples/mpi/stencil.py
           [--program-args "--steps 300"] ...   (a held-out program, same procedure)
(about 2 minutes on an idle 2-core machine; ``--ranks 2 --reps 3`` for a quick look)
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import compensate as c
from compensate import insitu
from compensate.formats.otf2 import read_otf2
from compensate.model import ENTER, LEAVE

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "examples" / "montecarlo_pi.py"
REGION = "run"


def _run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def region_span(path: Path, region: str = REGION) -> tuple[float, dict]:
    """(seconds from the earliest Enter to the latest Leave of ``region`` over all
    locations, facts about the busiest location: records, the mean overhead per
    record the trace's in-situ tables give it, its run-queue wait)."""
    trace = read_otf2(str(path))
    ids = [i for i, name in trace.definitions.regions.items() if name == region]
    enters, leaves = [], []
    for ev in trace.events.values():
        sel = np.isin(ev.region, ids)
        enters += ev.time[sel & (ev.kind == ENTER)].tolist()
        leaves += ev.time[sel & (ev.kind == LEAVE)].tolist()
    if not enters or not leaves:
        raise RuntimeError(f"{path}: no Enter/Leave of region {region!r}")
    loc, busiest = max(trace.events.items(), key=lambda kv: len(kv[1]))
    info = {"records": len(busiest), "mean_o": float("nan"), "wait": float("nan")}
    plat = insitu.platform_of(trace.definitions)
    if plat is not None:
        info["mean_o"] = float(plat.location_overheads(loc, busiest.kind,
                                                       busiest.region).mean())
        sched = trace.definitions.insitu.get(loc, {}).get("sched") or {}
        info["wait"] = sched.get("runqueue_wait_s", float("nan"))
    return (max(leaves) - min(enters)) / trace.definitions.timer_resolution, info


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


#: ``--overhead`` modes: how each traced run is compensated. ``insitu``: the trace's
#: in-situ tables (``--overhead insitu``, the platform file for the copy cost);
#: ``user``: the documented command, ``--platform run/platform.json`` and nothing
#: else (the file's ``prefer_insitu`` decides); ``platform``: the file's own
#: per-kind overhead forced (``--overhead platform``).
MODES = {"insitu": "insitu", "user": None, "platform": "platform", "cold": "insitu"}


def label(bound: str, mode: str) -> str:
    """The column name of a bound under an overhead mode (``lower``, ``lower/user``)."""
    return bound if mode == "insitu" else f"{bound}/{mode}"


def compensate_run(trace: Path, bounds: list[str],
                   modes: tuple[str, ...] = ("insitu",)) -> dict[str, dict]:
    """Compensate ``trace`` with every bound under every overhead mode (:data:`MODES`),
    in this process (the command's pipeline, :func:`compensate.compensate`): the span
    of ``run`` in each approximated trace and the summary's counts, by
    :func:`label`."""
    measured = c.read(trace)
    ids = [i for i, name in measured.definitions.regions.items() if name == REGION]
    out = {}
    for mode in modes:
        out.update(_compensate_mode(measured, trace, ids, bounds, mode))
    return out


def _compensate_mode(measured: c.Trace, trace: Path, ids: list[int], bounds: list[str],
                     mode: str) -> dict[str, dict]:
    out = {}
    for bound in bounds:
        r = c.compensate(measured, bound=bound, platform=trace.parent / "platform.json",
                         overhead=MODES[mode], cold_calls=mode == "cold")
        enters, leaves = [], []
        for ev in r.trace.events.values():
            sel = np.isin(ev.region, ids)
            enters += ev.time[sel & (ev.kind == ENTER)].tolist()
            leaves += ev.time[sel & (ev.kind == LEAVE)].tolist()
        out[label(bound, mode)] = {"seconds": (max(leaves) - min(enters))
                      / measured.definitions.timer_resolution,
                      "violations": r.summary["verification"]["violations"],
                      "overcompensated": r.summary["overcompensated_records"],
                      "source": r.summary["overhead"]["source"]}
    return out


def experiment(n: int, args: argparse.Namespace, work: Path, bounds: list[str]) -> dict:
    """``--reps`` uninstrumented and traced runs, alternating (so that both see the
    same load); every traced run compensated with every bound."""
    prog = _program(args)
    base = ["mpiexec", "-n", str(n), sys.executable]
    plain, traced = [], []
    for rep in range(args.reps):
        timing = work / f"u{n}-{rep}.json"
        _run([*base, *prog, "--timing", str(timing)])
        plain.append(json.loads(timing.read_text()))
        out = work / f"t{n}-{rep}"
        timing = work / f"t{n}-{rep}.json"
        _run([*base, "-m", "calibration.record", "-o", str(out / "traces.otf2"), "--force",
              "--", *prog, "--timing", str(timing)])
        t_m, info = region_span(out / "traces.otf2")
        traced.append({"timing": json.loads(timing.read_text()), "instr": t_m, **info,
                       "bounds": compensate_run(out / "traces.otf2", bounds,
                                                args.modes)})
        if not args.keep and not args.workdir:
            shutil.rmtree(out, ignore_errors=True)
    return {"ranks": n, "plain": plain, "traced": traced}


def _program(args: argparse.Namespace) -> list[str]:
    """The program and its arguments: the Monte-Carlo program's from ``--rounds``,
    ``--pairs``, ``--check-every``, or ``--program`` with ``--program-args``."""
    if args.program:
        return [args.program, *shlex.split(args.program_args)]
    return [str(PROGRAM), "--rounds", str(args.rounds), "--pairs", str(args.pairs),
            "--check-every", str(args.check_every)]


def removed(t_a: float, t_m: float, t_u: float) -> float:
    return 100.0 * (1.0 - abs(t_a - t_u) / (t_m - t_u)) if t_m != t_u else float("nan")


def _med(values: list[float]) -> str:
    """median [min-max] of a list of numbers."""
    v = [x for x in values if x == x]
    if not v:
        return "n/a"
    return f"{np.median(v):.1f} [{min(v):.1f}–{max(v):.1f}]"


def row_numbers(r: dict, bounds: list[str]) -> dict:
    """Per repetition: dilation, removal per bound (against the median
    uninstrumented time), dilation and overhead per record of the busiest rank."""
    t_u = float(np.median([p["seconds"] for p in r["plain"]]))
    reps = []
    for t, p in zip(r["traced"], r["plain"], strict=True):
        t_m = t["instr"]
        reps.append({"t_m": t_m, "dilation": 100 * (t_m - t_u) / t_u,
                     "per_record_ns": 1e9 * (t_m - t_u) / t["records"],
                     "mean_o_ns": 1e9 * t["mean_o"],
                     "removed": {b: removed(t["bounds"][b]["seconds"], t_m, t_u)
                                 for b in bounds},
                     "paired": {b: removed(t["bounds"][b]["seconds"], t_m, p["seconds"])
                                for b in bounds},
                     "t_a": {b: t["bounds"][b]["seconds"] for b in bounds}})
    return {"t_u": t_u, "reps": reps}


def report(rows: list[dict], bounds: list[str], info: dict) -> str:
    cores = os.cpu_count() or 1
    head = ["ranks", "uninstr. s", "instr. s", *[f"{b} s" for b in bounds], "dilation %",
            "dilation ns/record", "overhead used ns/record",
            *[f"removed {b} %" for b in bounds], *[f"paired {b} %" for b in bounds]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        num = row_numbers(r, bounds)
        reps = num["reps"]
        over = " ⁺" if r["ranks"] > cores else ""
        t_m = float(np.median([x["t_m"] for x in reps]))
        cells = [f"{r['ranks']}{over}", f"{num['t_u']:.4f}", f"{t_m:.4f}",
                 *[f"{np.median([x['t_a'][b] for x in reps]):.4f}" for b in bounds],
                 _med([x["dilation"] for x in reps]),
                 _med([x["per_record_ns"] for x in reps]),
                 _med([x["mean_o_ns"] for x in reps]),
                 *[_med([x["removed"][b] for x in reps]) for b in bounds],
                 *[_med([x["paired"][b] for x in reps]) for b in bounds]]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Medians over the repetitions [min–max]; removed % = 1 − |T_a − T_u| / "
                 "(T_m − T_u) per traced run, T_u the median uninstrumented time; "
                 "paired %: the same with T_u the uninstrumented run just before that "
                 "traced run; "
                 "overhead used = the mean in-situ overhead of the busiest rank's records.")
    if any(r["ranks"] > cores for r in rows):
        lines.append(f"⁺ oversubscribed: more ranks than the machine's {cores} cores")
    lines.append("")
    for r in rows:
        t = r["traced"]
        worst = {b: (max(x["bounds"][b]["violations"] for x in t),
                     max(x["bounds"][b]["overcompensated"] for x in t)) for b in bounds}
        sources = sorted({x["bounds"][b]["source"] for x in t for b in bounds})
        u_min = min(p["seconds"] for p in r["plain"])
        best = min(t, key=lambda x: x["instr"])
        lines.append(
            f"ranks {r['ranks']}: as the paper (the shortest run of each kind): uninstr. "
            f"{u_min:.4f} s, instr. {best['instr']:.4f} s, removed "
            + ", ".join(f"{b} {removed(best['bounds'][b]['seconds'], best['instr'], u_min):.1f} %"
                        for b in bounds))
        lines.append(
            f"ranks {r['ranks']}: busiest rank {t[0]['records']:,} records; all runs: "
            f"uninstr. " + ", ".join(f"{p['seconds']:.4f}" for p in r["plain"])
            + " s; instr. " + ", ".join(f"{x['instr']:.4f}" for x in t) + " s; off-CPU "
            "(largest of a rank): uninstr. "
            + ", ".join(f"{p['off_cpu']:.4f}" for p in r["plain"]) + " s, instr. "
            + ", ".join(f"{x['timing']['off_cpu']:.4f}" for x in t) + " s; removed per run "
            "(against the median uninstr.): "
            + ", ".join(f"{b} " + " ".join(f"{x['removed'][b]:.1f}"
                                          for x in row_numbers(r, bounds)["reps"])
                        for b in bounds) + " %; paired per run: "
            + ", ".join(f"{b} " + " ".join(f"{x['paired'][b]:.1f}"
                                          for x in row_numbers(r, bounds)["reps"])
                        for b in bounds) + " %; run-queue wait "
            "of the busiest rank (in-situ): "
            + ", ".join(f"{x['wait']:.4f}" for x in t) + " s; worst of all runs: "
            + ", ".join(f"{b} {v} violations, {o} overcompensated"
                        for b, (v, o) in worst.items())
            + f"; overhead source: {', '.join(sources)}")
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
    ap.add_argument("--program", help="another mpi4py program with a run() function and "
                    "the --timing FILE.json protocol of examples/montecarlo_pi.py "
                    "(e.g. examples/mpi/stencil.py)")
    ap.add_argument("--program-args", default="", help="its arguments, one string")
    ap.add_argument("--workdir", help="keep runs here (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="do not delete the temporary runs")
    ap.add_argument("--overhead", default="insitu", metavar="MODE,...",
                    help="how to compensate each traced run, comma-separated: insitu "
                         "(the trace's tables, --overhead insitu), user (--platform "
                         "run/platform.json alone, the documented command), platform "
                         "(the file's own per-kind O, --overhead platform), cold (the "
                         "trace's tables and their cold-call curves, --cold-calls); "
                         "default insitu")
    ap.add_argument("--json", help="also write every run's numbers to this file "
                    "(to recompute the statistics)")
    args = ap.parse_args(argv)
    if shutil.which("mpiexec") is None:
        print("realrun: mpiexec not found: pip install -e '.[mpi]'", file=sys.stderr)
        return 2
    work = Path(args.workdir or tempfile.mkdtemp(prefix="realrun-"))
    work.mkdir(parents=True, exist_ok=True)
    args.modes = tuple(m.strip() for m in args.overhead.split(","))
    if not args.modes or any(m not in MODES for m in args.modes):
        print(f"paper_fig1: --overhead: expected modes from {', '.join(MODES)}, got "
              f"{args.overhead!r}", file=sys.stderr)
        return 2
    bounds = ["lower", "upper", "fitted"]
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
    what = (f"--program {args.program} --program-args {shlex.quote(args.program_args)}"
            if args.program else f"--rounds {args.rounds} --pairs {args.pairs} "
            f"--check-every {args.check_every}")
    if args.modes != ("insitu",):
        what += f" --overhead {','.join(args.modes)}"
    print(f"python benchmarks/paper_fig1.py --ranks {args.ranks} --reps {args.reps} {what}\n")
    print(report(rows, [label(b, m) for m in args.modes for b in bounds], info))
    if args.json:
        Path(args.json).write_text(json.dumps({"command": what, "machine": info,
                                               "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
