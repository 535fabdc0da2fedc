"""How much of a real run's dilation each way of using the in-situ samples removes.

The tracer brackets every MPI and lock wrapper and so knows what each of their
records cost in this run (calibration/tracer/insitu.py). It writes each such
record's own cost into the trace (the OTF2 attribute ``COMPENSATE::OVERHEAD``)
and, per location, record kind and region, the mean of those costs (the in-situ
table). This benchmark compensates the *same* traced runs four ways and prints
how much of the dilation each removes (bound ``lower``; ``removed %`` and
``paired %`` as in ``benchmarks/paper_fig1.py``):

  record   what ``compensate`` does: each record's own cost where it carries one,
           the table elsewhere (the decorated functions' records, valued by the
           decorator's sampled layers where a function has enough samples)
  no-layers  the same, with the decorated functions' records at the calibrated
           Enter/Leave (as before the decorator measured its layers)
  mean     the tables alone (the trace's ``overhead`` column cleared)
  median   the tables alone with the median of each key's samples instead of the
           mean (the other statistic a tracer could write),
           rebuilt from the tables' ``measured``

Every variant also reports its worst count of violations and overcompensated
records. docs/calibration.md, "Mean, not median", has the figures.

Usage: python benchmarks/insitu_statistic.py [--program examples/mpi/solver.py]
           [--program-args "..."] [--ranks 2] [--reps 5]
(the Monte-Carlo program by default; about 1 minute per 5 repetitions)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_fig1 as fig1  # noqa: E402 - the real-run procedure and its helpers

import compensate as c  # noqa: E402
from compensate.model import ENTER, LEAVE  # noqa: E402

VARIANTS = ("record", "no-layers", "mean", "median")


def without_layers(trace: c.Trace) -> None:
    """Charge the decorated functions' records as before the decorator measured
    its layer (calibration/tracer/insitu.py, ``split_layers``): their tables'
    ``by_region`` values go, so they take the calibrated ``by_kind`` Enter and
    Leave again; a sampled call's records keep their extra layer time, with the
    table part swapped the same way."""
    names = trace.definitions.regions
    for loc, table in trace.definitions.insitu.items():
        layered = {label[:-len("/Layer")] for label, st in table.get("measured", {}).items()
                   if label.endswith("/Layer") and st.get("used") is not None}
        ev = trace.events[loc]
        for name in layered:
            values = table["by_region"].pop(name)
            ids = [i for i, n in names.items() if n == name]
            for kind, code in (("Enter", ENTER), ("Leave", LEAVE)):
                sel = (ev.overhead >= 0) & (ev.kind == code) & np.isin(ev.region, ids)
                delta = round((table["by_kind"].get(kind, 0.0) - values[kind]) * 1e9)
                ev.overhead[sel] = np.maximum(ev.overhead[sel] + delta, 0)


def median_tables(trace: c.Trace) -> None:
    """Replace every in-situ value of ``trace``'s tables by the median of its
    samples (+ residue on a wrapper's Leave), capped by its bound, whole ns."""
    for table in trace.definitions.insitu.values():
        for label, st in table.get("measured", {}).items():
            if label.endswith("/Layer"):  # a decorator layer, not one record's key
                continue
            v = st["median"] + st.get("residue", 0.0)
            if st.get("bound") is not None:
                v = min(v, st["bound"])
            v = round(v * 1e9) * 1e-9
            if "/" in label:
                name, kind = label.rsplit("/", 1)
                table["by_region"][name][kind] = v
            else:
                table["by_kind"][label] = v


def run_span(trace: c.Trace) -> float:
    """Seconds from the earliest Enter to the latest Leave of ``run``."""
    ids = [i for i, n in trace.definitions.regions.items() if n == fig1.REGION]
    enters, leaves = [], []
    for ev in trace.events.values():
        sel = np.isin(ev.region, ids)
        enters += ev.time[sel & (ev.kind == ENTER)].tolist()
        leaves += ev.time[sel & (ev.kind == LEAVE)].tolist()
    return (max(leaves) - min(enters)) / trace.definitions.timer_resolution


def one_pair(prog: list[str], ranks: int, work: Path) -> dict:
    """An uninstrumented run, then a traced one compensated every way."""
    base = ["mpiexec", "-n", str(ranks), sys.executable]
    fig1._run([*base, *prog, "--timing", str(work / "u.json")])
    out = {"t_u": json.loads((work / "u.json").read_text())["seconds"]}
    archive = work / "t" / "traces.otf2"
    fig1._run([*base, "-m", "calibration.record", "-o", str(archive), "--force", "--",
               *prog, "--timing", str(work / "t.json")])
    for variant in VARIANTS:
        trace = c.read(archive)
        out.setdefault("t_m", run_span(trace))
        if variant == "no-layers":
            without_layers(trace)
        elif variant != "record":
            for ev in trace.events.values():
                ev.overhead[:] = -1
        if variant == "median":
            median_tables(trace)
        r = c.compensate(trace, bound="lower", platform=archive.parent / "platform.json",
                         overhead="insitu")
        out[variant] = {"t_a": run_span(r.trace),
                        "bad": r.summary["verification"]["violations"]
                        + r.summary["overcompensated_records"]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--program", default=str(fig1.PROGRAM))
    p.add_argument("--program-args", default="")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    prog = [args.program, *shlex.split(args.program_args)]
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="insitu-statistic-") as tmp:
        for rep in range(args.reps):
            rows.append(one_pair(prog, args.ranks, Path(tmp)))
            r = rows[-1]
            print(f"rep {rep}: uninstr. {r['t_u']:.4f} s, instr. {r['t_m']:.4f} s, "
                  + ", ".join(f"{v} {r[v]['t_a']:.4f} s" for v in VARIANTS), flush=True)
    t_u = float(np.median([r["t_u"] for r in rows]))
    print(f"\n{Path(args.program).name}, {args.ranks} ranks, {args.reps} pairs, bound lower; "
          f"uninstr. median {t_u:.4f} s, instr. median "
          f"{np.median([r['t_m'] for r in rows]):.4f} s\n")
    print("| statistic | compensated s | removed % median [min–max] | paired % "
          "| violations + overcompensated (worst) |")
    print("|---|---:|---:|---:|---:|")
    for v in VARIANTS:
        rem = [fig1.removed(r[v]["t_a"], r["t_m"], t_u) for r in rows]
        pair = [fig1.removed(r[v]["t_a"], r["t_m"], r["t_u"]) for r in rows]
        print(f"| {v} | {np.median([r[v]['t_a'] for r in rows]):.4f} | {fig1._med(rem)} "
              f"| {np.median(pair):.1f} | {max(r[v]['bad'] for r in rows)} |")
    print(f"\nload before {' '.join(f'{x:.2f}' for x in load0)}, after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
