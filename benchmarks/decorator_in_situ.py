"""What the function decorator costs around a call inside a real program, against a tight loop.

The tracer's decorator (calibration/tracer/functions.py) stamps a function's Enter
and Leave; its cost before the Enter stamp (the call, the wrapper's frame) and
after the Leave stamp (the stores, the return) lies outside the traced interval
and is charged from a calibration made in a tight loop (and, with
``--cold-calls``, a curve of synthetic work between calls). Inside a program the
same code runs cold. This benchmark measures that part in situ: a copy of
``examples/mpi/solver.py`` (made from it at run time) takes a timestamp in the
*caller* right before and right after each call of ``halo``, ``matvec`` and the
two ``dot``; under the tracer,

    X = (caller's after - caller's before) - (Leave - Enter of that call)

is the decorator's cost outside the traced interval plus one timestamp. The same
X is measured for decorated functions of the same signatures called back to back
in a loop. Printed per function: X in the program (median, mean over both ranks
and all runs), X in the tight loop, and their difference, next to the run's
calibrated Enter + Leave overhead.

The same stamps in untraced runs of the copy (one before each traced run) give
the ground truth for the decorator's whole cost per call: the caller's span of
a call traced minus untraced (medians; the traced runs' sampled calls left
out). It is printed next to what the tracer measured itself, the sampled
second layer (``make_decorator(sample=True)``: the tables' ``name/Layer``,
median and mean), which ``compensate`` charges to these functions' records.

Usage: python benchmarks/decorator_in_situ.py [--reps 3] [--iterations 400]
(about 15 seconds)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from time import monotonic_ns

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_fig1 as fig1  # noqa: E402 - the real-run helpers

import compensate as c  # noqa: E402
from calibration.tracer.buffer import Recorder, prefault  # noqa: E402
from calibration.tracer.functions import make_decorator  # noqa: E402
from compensate.model import ENTER, LEAVE  # noqa: E402

SOLVER = fig1.ROOT / "examples" / "mpi" / "solver.py"
#: (source line of examples/mpi/solver.py, the function it calls, its stamp key)
CALLS = (
    ("        halo(comm, p, left, right, edge, ghost)\n", "halo", 0),
    ("        ap = matvec(p) + 1e-3 * p[1:-1]  # shifted: positive definite on the ring\n",
     "matvec", 1),
    ("        pap = dot(comm, p[1:-1], ap, out)\n", "dot", 2),
    ("        rr_new = dot(comm, r, r, out)\n", "dot", 3),
)


def stamped_solver() -> str:
    """examples/mpi/solver.py with caller-side stamps around each call of CALLS
    (``matvec``'s line split so that only the call is inside), the stamps in the
    ``--timing`` file as ``stamps[rank][key]``."""
    src = SOLVER.read_text()
    for line, _, key in CALLS:
        if line not in src:
            raise SystemExit(f"decorator_in_situ: {SOLVER} changed; no line {line.strip()!r}")
        if key == 1:
            src = src.replace(line, f"        _S[{key}].append(_now())\n"
                              "        ap = matvec(p)\n"
                              f"        _S[{key}].append(_now())\n"
                              "        ap = ap + 1e-3 * p[1:-1]\n")
            continue
        src = src.replace(line, f"        _S[{key}].append(_now())\n{line}"
                          f"        _S[{key}].append(_now())\n")
    src = src.replace("from mpi4py import MPI\n", "from mpi4py import MPI\n"
                      "_S = [[], [], [], []]\n_now = time.monotonic_ns\n", 1)
    src = src.replace("    spans = comm.gather(", "    stamps = comm.gather(_S, root=0)\n"
                      "    spans = comm.gather(", 1)
    src = src.replace('"off_cpu": max(s[2] for s in spans) / 1e9}',
                      '"off_cpu": max(s[2] for s in spans) / 1e9, "stamps": stamps}', 1)
    return src


def in_program(reps: int, iterations: int, work: Path) -> dict[str, dict]:
    """Per function name over ``reps`` pairs of runs (untraced, then traced):
    ``x``, X of the traced unsampled calls; ``traced`` and ``untraced``, the
    caller's spans of those calls and of the untraced run's; ``layer``, the
    traced runs' sampled layer costs per location as (n, median, mean) from
    their tables (``name/Layer``); and under ``""`` the runs' calibrated
    Enter + Leave (``calibrated``)."""
    prog = work / "solver_stamped.py"
    prog.write_text(stamped_solver())
    out: dict[str, dict] = {"": {"calibrated": []}}
    for _ in range(reps):
        fig1._run(["mpiexec", "-n", "2", sys.executable, str(prog), "--iterations",
                   str(iterations), "--timing", str(work / "u.json")])
        for stamps in json.loads((work / "u.json").read_text())["stamps"]:
            for _, name, key in CALLS:
                st = np.array(stamps[key], dtype=np.int64).reshape(-1, 2)
                out.setdefault(name, {}).setdefault("untraced", []).append(
                    st[:, 1] - st[:, 0])
        archive = work / "t" / "traces.otf2"
        fig1._run(["mpiexec", "-n", "2", sys.executable, "-m", "calibration.record", "-o",
                   str(archive), "--force", "--", str(prog), "--iterations", str(iterations),
                   "--timing", str(work / "t.json")])
        stamps = json.loads((work / "t.json").read_text())["stamps"]
        trace = c.read(archive)
        names = trace.definitions.regions
        for loc, ev in trace.events.items():
            region = np.array([names.get(int(r), "") for r in ev.region])
            t = ev.time.astype(np.int64)
            table = trace.definitions.insitu[loc]
            out[""]["calibrated"].append(
                (table["by_kind"]["Enter"] + table["by_kind"]["Leave"]) * 1e9)
            for _, name, key in CALLS:
                at = (region == name) & (ev.kind == ENTER)
                enter, leave = t[at], t[(region == name) & (ev.kind == LEAVE)]
                sampled = ev.overhead[at] >= 0  # a sampled call's Enter carries its layer
                if name == "dot":  # the first dot is before the loop; then 2 a step
                    pick = slice(1 + key - 2, None, 2)
                    enter, leave, sampled = enter[pick], leave[pick], sampled[pick]
                st = np.array(stamps[loc][key], dtype=np.int64).reshape(-1, 2)
                n = min(len(st), len(enter))
                keep = ~sampled[:n]
                span = (st[:n, 1] - st[:n, 0])[keep]
                f = out.setdefault(name, {})
                f.setdefault("x", []).append(span - (leave[:n] - enter[:n])[keep])
                f.setdefault("traced", []).append(span)
                m = table["measured"].get(f"{name}/Layer")
                if m and key != 3:  # one entry per location for the two dot lines
                    f.setdefault("layer", []).append(
                        (m["n"], m["median"] * 1e9, m["mean"] * 1e9))
    for f in out.values():
        for k in ("x", "traced", "untraced"):
            if k in f:
                f[k] = np.concatenate(f[k])
    return out


def tight_loop(calls: int = 4000) -> dict[str, np.ndarray]:
    """X for decorated functions of the solver's signatures, called back to back."""
    rec = Recorder()
    dec = make_decorator(rec)

    def halo(comm, p, left, right, edge, ghost):  # noqa: ANN001, ANN202, ARG001
        return None

    def matvec(p):  # noqa: ANN001, ANN202
        return p

    def dot(comm, a, b, out):  # noqa: ANN001, ANN202, ARG001
        return 1.0

    out = {}
    for name, fn, args in (("halo", dec(halo), (None,) * 6), ("matvec", dec(matvec), (1,)),
                           ("dot", dec(dot), (None, 1, 2, 3))):
        rec.main.clear()
        prefault(rec.main.data, 4 * calls)
        stamps = []
        add = stamps.append
        for _ in range(calls):
            add(monotonic_ns())
            fn(*args)
            add(monotonic_ns())
        st = np.array(stamps, dtype=np.int64).reshape(-1, 2)
        tm = np.frombuffer(rec.main.data, dtype=np.int64)[0::2].reshape(-1, 2).copy()
        out[name] = ((st[:, 1] - st[:, 0]) - (tm[:, 1] - tm[:, 0]))[calls // 10:]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--iterations", type=int, default=400)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="decorator-in-situ-") as tmp:
        program = in_program(args.reps, args.iterations, Path(tmp))
    calibrated = program[""]["calibrated"]
    loop = tight_loop()
    print(f"solver, 2 ranks, {args.reps} pairs of runs of {args.iterations} iterations; "
          f"calibrated Enter + Leave of the traced runs: "
          f"{min(calibrated):.0f}-{max(calibrated):.0f} ns\n")
    print("| function | X in the program ns, median (mean) | X in a tight loop ns, median "
          "| difference ns | call traced - untraced ns, median | sampled layer ns, "
          "median (mean) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in ("halo", "matvec", "dot"):
        f = program[name]
        x, y = f["x"], loop[name]
        dil = np.median(f["traced"]) - np.median(f["untraced"])
        lay = np.array(f.get("layer", [(0, np.nan, np.nan)]), dtype=float)
        w = lay[:, 0] / max(lay[:, 0].sum(), 1)
        print(f"| {name} | {np.median(x):.0f} ({x.mean():.0f}) | {np.median(y):.0f} "
              f"| {np.median(x) - np.median(y):+.0f} | {dil:.0f} "
              f"| {(w * lay[:, 1]).sum():.0f} ({(w * lay[:, 2]).sum():.0f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
