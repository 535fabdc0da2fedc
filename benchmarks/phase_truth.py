"""Where the dilation that compensation leaves sits: each phase of a real program,
compensated, against the same phase untraced.

A copy of the program (made at run time) takes ``time.monotonic_ns()`` stamps in
the caller around its traced calls. Untraced and traced runs alternate (``--reps``
pairs, 2 ranks); the untraced stamps give each phase's true length, the traced
run is compensated (``--bound``, the trace's in-situ overhead) and the same
phase is read off its records (a call's Enter to its Leave, one call's Leave to
the next one's Enter). Printed per phase: untraced, measured and compensated
median (mean) in ns and what compensation left (compensated − untraced); then
the whole runs and their removal as ``benchmarks/paper_fig1.py`` computes it.

Programs:

* ``solver`` (examples/mpi/solver.py): per iteration ``halo`` (two
  MPI_Sendrecv), ``matvec``, two ``dot`` (each an Allreduce) and the numpy
  statements between them;
* ``montecarlo`` (examples/montecarlo_pi.py): per round the worker's request
  (MPI_Send), its wait for the chunk (MPI_Recv), ``tolist``, ``count_inside`` (a
  loop of ~300 traced ``get_coords`` calls) and the rest of the round (the
  Allreduce every second round); the master's wait for a request, its
  ``generate_chunk``, its reply and the rest of its round.

With ``--keep DIR`` the runs stay in DIR; ``--from DIR`` compensates runs kept
earlier again (the same traces, another tree or bound), without running anything.

Usage: python benchmarks/phase_truth.py [--program solver|montecarlo] [--reps 5]
           [--bound lower] [--keep DIR | --from DIR]
(about 20 seconds per 5 pairs)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import decorator_in_situ as dis  # noqa: E402 - the solver copy with caller stamps
from insitu_statistic import run_span  # noqa: E402 - the span of run() in a trace

import compensate as c  # noqa: E402
from compensate.model import ENTER, LEAVE  # noqa: E402

SOLVER_PHASES = ("halo", "halo -> matvec", "matvec", "matvec -> dot", "dot", "dot -> dot",
                 "dot (2nd)", "dot -> halo")
MC = ROOT / "examples" / "montecarlo_pi.py"
# The lines stamped (a stamp before and after each call), per rank role.
MC_STAMPS = {
    "worker": ("        comm.Send(request, dest=0, tag=TAG_REQUEST)\n"
               "        comm.Recv(buf, source=0, tag=TAG_WORK, status=status)\n"
               "        chunk = buf[:status.Get_count(MPI.DOUBLE)].tolist()\n"
               "        counts[0] += count_inside(chunk)\n",
               "        _S.append(_now())\n"
               "        comm.Send(request, dest=0, tag=TAG_REQUEST)\n"
               "        _S.append(_now())\n"
               "        comm.Recv(buf, source=0, tag=TAG_WORK, status=status)\n"
               "        _S.append(_now())\n"
               "        chunk = buf[:status.Get_count(MPI.DOUBLE)].tolist()\n"
               "        _S.append(_now())\n"
               "        _n = count_inside(chunk)\n"
               "        _S.append(_now())\n"
               "        counts[0] += _n\n"),
    "master": ("            comm.Recv(request, source=MPI.ANY_SOURCE, tag=TAG_REQUEST, "
               "status=status)\n"
               "            comm.Send(generate_chunk(rng, args.pairs), "
               "dest=status.Get_source(), tag=TAG_WORK)\n",
               "            _S.append(_now())\n"
               "            comm.Recv(request, source=MPI.ANY_SOURCE, tag=TAG_REQUEST, "
               "status=status)\n"
               "            _S.append(_now())\n"
               "            _c = generate_chunk(rng, args.pairs)\n"
               "            _S.append(_now())\n"
               "            comm.Send(_c, dest=status.Get_source(), tag=TAG_WORK)\n"
               "            _S.append(_now())\n"),
}
# Phases per round, from the stamps above (the last one runs to the next round's
# first stamp): the worker's and the master's.
MC_PHASES = ("w: Send", "w: Send -> Recv done", "w: tolist", "w: count_inside",
             "w: count_inside -> Send", "m: Recv", "m: generate_chunk", "m: Send",
             "m: Send -> Recv")


def stamped_montecarlo() -> str:
    """examples/montecarlo_pi.py with stamps around the worker's and the master's
    calls of each round, written to the file named by $PHASE_STAMPS + rank at exit."""
    src = MC.read_text()
    for old, new in MC_STAMPS.values():
        if old not in src:
            raise SystemExit(f"phase_truth: {MC} changed; no lines {old.strip()!r}")
        src = src.replace(old, new)
    src = src.replace("from mpi4py import MPI\n", "from mpi4py import MPI\n_S = []\n"
                      "_now = time.monotonic_ns\n", 1)
    return src + ("\nimport atexit as _atexit\nimport json as _json\nimport os as _os\n\n"
                  "_atexit.register(lambda: open(_os.environ['PHASE_STAMPS'] + "
                  "str(MPI.COMM_WORLD.Get_rank()), 'w').write(_json.dumps(_S)) "
                  "if _os.environ.get('PHASE_STAMPS') else None)\n")


def _run(cmd: list[str], env: dict | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"phase_truth: {' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")


def collect(program: str, reps: int, work: Path) -> None:
    """``reps`` pairs: untraced run ``u{r}`` (stamps), traced run ``t{r}``."""
    prog = work / "program.py"
    prog.write_text(dis.stamped_solver() if program == "solver" else stamped_montecarlo())
    base = ["mpiexec", "-n", "2", sys.executable]
    for r in range(reps):
        env = dict(os.environ, PHASE_STAMPS=str(work / f"u{r}_rank"))
        _run([*base, str(prog), "--timing", str(work / f"u{r}.json")], env)
        _run([*base, "-m", "calibration.record", "-o", str(work / f"t{r}" / "traces.otf2"),
              "--force", "--", str(prog), "--timing", str(work / f"t{r}.json")])


def _phases(bounds: np.ndarray) -> np.ndarray:
    """Phase lengths per iteration from per-iteration boundary times (columns in
    order; the last phase runs to the next iteration's first boundary)."""
    nxt = np.append(bounds[1:, 0], bounds[-1, 0])[:, None]
    return np.diff(np.concatenate([bounds, nxt], axis=1), axis=1)[:-1]


def _times(ev, names: dict, region: str, kind: int) -> np.ndarray:
    reg = np.array([names.get(int(x), "") for x in ev.region])
    return ev.time[(reg == region) & (ev.kind == kind)].astype(np.int64)


def solver_untraced(work: Path, r: int) -> list[np.ndarray]:
    out = []
    for rank in json.loads((work / f"u{r}.json").read_text())["stamps"]:
        s = [np.array(k, dtype=np.int64).reshape(-1, 2) for k in rank]
        n = min(len(x) for x in s)
        out.append(_phases(np.stack([x[:n, j] for x in s for j in (0, 1)], axis=1)))
    return out


def solver_traced(trace: c.Trace) -> list[np.ndarray]:
    out, names = [], trace.definitions.regions
    for ev in trace.events.values():
        he, hl = _times(ev, names, "halo", ENTER), _times(ev, names, "halo", LEAVE)
        me, ml = _times(ev, names, "matvec", ENTER), _times(ev, names, "matvec", LEAVE)
        de, dl = _times(ev, names, "dot", ENTER)[1:], _times(ev, names, "dot", LEAVE)[1:]
        n = min(len(he), len(me), len(de) // 2)
        out.append(_phases(np.stack([he[:n], hl[:n], me[:n], ml[:n], de[0:2 * n:2],
                                     dl[0:2 * n:2], de[1:2 * n:2], dl[1:2 * n:2]], axis=1)))
    return out


def mc_untraced(work: Path, r: int) -> list[np.ndarray]:
    w = np.array(json.loads((work / f"u{r}_rank1").read_text()), dtype=np.int64)
    m = np.array(json.loads((work / f"u{r}_rank0").read_text()), dtype=np.int64)
    n = min(len(w) // 5, len(m) // 4)
    return [np.concatenate([_phases(w[:5 * n].reshape(n, 5)),
                            _phases(m[:4 * n].reshape(n, 4))], axis=1)]


def mc_traced(trace: c.Trace) -> list[np.ndarray]:
    names = trace.definitions.regions
    m_ev, w_ev = (trace.events[k] for k in sorted(trace.events)[:2])
    w = [_times(w_ev, names, "MPI_Send", ENTER), _times(w_ev, names, "MPI_Send", LEAVE),
         _times(w_ev, names, "MPI_Recv", LEAVE), _times(w_ev, names, "count_inside", ENTER),
         _times(w_ev, names, "count_inside", LEAVE)]
    m = [_times(m_ev, names, "MPI_Recv", ENTER), _times(m_ev, names, "MPI_Recv", LEAVE),
         _times(m_ev, names, "generate_chunk", LEAVE), _times(m_ev, names, "MPI_Send", LEAVE)]
    n = min(len(x) for x in w + m)
    return [np.concatenate([_phases(np.stack([x[:n] for x in w], axis=1)),
                            _phases(np.stack([x[:n] for x in m], axis=1))], axis=1)]


def analyse(program: str, work: Path, bound: str) -> None:
    names = SOLVER_PHASES if program == "solver" else MC_PHASES
    untraced, traced, measured = [], [], []
    t_u, t_m, t_a = [], [], []
    r = 0
    while (work / f"t{r}" / "traces.otf2").exists():
        arch = work / f"t{r}" / "traces.otf2"
        trace = c.read(arch)
        res = c.compensate(trace, bound=bound, platform=arch.parent / "platform.json",
                           overhead="insitu")
        pick = solver_traced if program == "solver" else mc_traced
        measured += pick(trace)
        traced += pick(res.trace)
        untraced += (solver_untraced if program == "solver" else mc_untraced)(work, r)
        t_u.append(json.loads((work / f"u{r}.json").read_text())["seconds"])
        t_m.append(run_span(trace))
        t_a.append(run_span(res.trace))
        r += 1
    if not r:
        raise SystemExit(f"phase_truth: no runs in {work}")
    u, m, a = (np.concatenate(x) for x in (untraced, measured, traced))
    print(f"{program}, 2 ranks, {r} pairs, bound {bound}; ns per iteration\n")
    print("| phase | untraced median (mean) | measured median (mean) | compensated median "
          "(mean) | left: compensated − untraced, median (mean) |")
    print("|---|---:|---:|---:|---:|")
    for i, name in enumerate(names):
        print(f"| {name} | {np.median(u[:, i]):.0f} ({u[:, i].mean():.0f}) "
              f"| {np.median(m[:, i]):.0f} ({m[:, i].mean():.0f}) "
              f"| {np.median(a[:, i]):.0f} ({a[:, i].mean():.0f}) "
              f"| {np.median(a[:, i]) - np.median(u[:, i]):+.0f} "
              f"({a[:, i].mean() - u[:, i].mean():+.0f}) |")
    if program == "montecarlo":
        i = names.index("w: count_inside")
        left = (a[:, i].mean() - u[:, i].mean()) / (m[:, i].mean() - u[:, i].mean())
        print(f"\ncount_inside: {100 * left:.1f} % of its dilation left (means)")
    per = [a[:, i].mean() - u[:, i].mean() for i in range(len(names))]
    dil = [m[:, i].mean() - u[:, i].mean() for i in range(len(names))]
    print("dilation left per round, ns (means; share of the phase's own dilation): "
          + "; ".join(f"{n} {x:+.0f} ({100 * x / d:.0f} %)" if d else f"{n} {x:+.0f}"
                      for n, x, d in zip(names, per, dil, strict=True)))
    tu = float(np.median(t_u))
    removed = [1 - abs(x - tu) / (y - tu) for x, y in zip(t_a, t_m, strict=True)]
    print(f"\nruns s: untraced {' '.join(f'{x:.4f}' for x in t_u)}; traced "
          f"{' '.join(f'{x:.4f}' for x in t_m)}; compensated {' '.join(f'{x:.4f}' for x in t_a)}")
    print(f"removed % (against the median untraced run): median {100 * np.median(removed):.1f}, "
          f"per run {' '.join(f'{100 * x:.1f}' for x in removed)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--program", choices=("solver", "montecarlo"), default="solver")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--bound", choices=("lower", "upper", "fitted"), default="lower")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--keep", metavar="DIR", help="keep the runs in DIR")
    where.add_argument("--from", dest="source", metavar="DIR",
                       help="compensate the runs kept in DIR again; run nothing")
    args = p.parse_args(argv)
    if args.source:
        analyse(args.program, Path(args.source), args.bound)
        return 0
    with tempfile.TemporaryDirectory(prefix="phase-truth-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        collect(args.program, args.reps, work)
        analyse(args.program, work, args.bound)
    return 0


if __name__ == "__main__":
    sys.exit(main())
