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

Usage: python benchmarks/decorator_in_situ.py [--reps 3] [--iterations 400]
(about 10 seconds)
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


def in_program(reps: int, iterations: int, work: Path) -> tuple[dict, list[float]]:
    """X per function name over ``reps`` traced runs; the runs' Enter + Leave."""
    prog = work / "solver_stamped.py"
    prog.write_text(stamped_solver())
    xs: dict[str, list[np.ndarray]] = {}
    calibrated = []
    for _ in range(reps):
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
            table = trace.definitions.insitu[loc]["by_kind"]
            calibrated.append((table["Enter"] + table["Leave"]) * 1e9)
            for _, name, key in CALLS:
                enter = t[(region == name) & (ev.kind == ENTER)]
                leave = t[(region == name) & (ev.kind == LEAVE)]
                if name == "dot":  # the first dot is before the loop; then 2 a step
                    enter, leave = enter[1:][key - 2::2], leave[1:][key - 2::2]
                st = np.array(stamps[loc][key], dtype=np.int64).reshape(-1, 2)
                n = min(len(st), len(enter))
                xs.setdefault(name, []).append((st[:n, 1] - st[:n, 0])
                                               - (leave[:n] - enter[:n]))
    return {k: np.concatenate(v) for k, v in xs.items()}, calibrated


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
        program, calibrated = in_program(args.reps, args.iterations, Path(tmp))
    loop = tight_loop()
    print(f"solver, 2 ranks, {args.reps} traced runs of {args.iterations} iterations; "
          f"calibrated Enter + Leave of the runs: {min(calibrated):.0f}-{max(calibrated):.0f} ns\n")
    print("| function | X in the program ns, median (mean) | X in a tight loop ns, median "
          "| difference ns |")
    print("|---|---:|---:|---:|")
    for name in ("halo", "matvec", "dot"):
        x, y = program[name], loop[name]
        print(f"| {name} | {np.median(x):.0f} ({x.mean():.0f}) | {np.median(y):.0f} "
              f"| {np.median(x) - np.median(y):+.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
