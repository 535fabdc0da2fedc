"""EZTrace real runs: how much of EZTrace's dilation compensate removes (docs/realrun.md).

For each C program of benchmarks/eztrace/ (blocking ring, the same ring from a
communication thread, nonblocking halo with collectives, master/worker,
MPI+OpenMP, Pthreads) this runs the program untraced
and traced by EZTrace in alternating pairs (untraced first in even pairs, traced
first in odd ones), on 2 ranks (the Pthreads program: one process of 2 threads).
Every program prints its loop's time (``loop_seconds``: between two barriers, or
from the first pthread_create to the last pthread_join); the traced run's loop is
the same interval in its trace (rank 0's first and last MPI_Barrier Leave; the
main thread's first pthread_create Enter and last pthread_join Leave). The MPI
programs also end each 21st of their loop with an MPI_Barrier
(benchmarks/eztrace/parts.h) and print 21 times their median part
(``part_seconds``); the same parts are read from rank 0's MPI_Barrier Leave
records of the traced and the compensated trace. On a machine shared with other
work a part during which a process lost its core does not count, which the
whole loop cannot offer (the Pthreads program has one part: its whole loop).
Each trace is compensated with the calibrated platform (``python -m
calibration.eztrace``, scaled to the trace's speed) and with ``--overhead
estimate`` (``--configs``; "unscaled": the platform as measured; "per-process":
the calibrated platform with per-process collective exits), for each bound, and

    removed % = (traced loop - compensated loop) / (traced loop - untraced loop)

per pair ("paired", then its median over the ``--pairs``) and from the medians of
the three loops ("median"), of the loops timed in parts; the whole loops' paired median beside
them. Violations (outputs refused by the happened-before check) and
overcompensated records are counted over the pairs.

    python benchmarks/eztrace_realrun.py [--pairs 11] [--platform eztrace-platform.json]
                                         [--configs calibrated,estimate] [--bounds ...]
                                         [--compare other-platform.json]

``--compare`` compensates every trace also with another platform file (rows
"compared", and with "unscaled" also "compared unscaled"): two platforms on
the same traces differ only by what they remove,
whatever the spread between runs. Under the table, per program and overhead
source: each trace's ``speed x`` over the pairs and its correlation with the
traced loop, and the pairs' removed %, its standard deviation and its
correlation with ``speed x`` (a scaling that follows the trace's speed leaves
none). ``--rows FILE`` prints both tables again from the rows a ``--json FILE``
run wrote.

Without ``--platform`` it calibrates first (2-4 minutes here). Where EZTrace,
MPICH's compiler wrapper (``/usr/bin/mpicc.mpich``) or ``otf2-print`` is missing it
prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import compensate as c  # noqa: E402
from calibration.eztrace import MPICC, MPIRUN  # noqa: E402
from compensate.model import ENTER, LEAVE  # noqa: E402

SOURCES = Path(__file__).resolve().parent / "eztrace"
BOUNDS = ("lower", "upper", "fitted")


@dataclass(frozen=True)
class Program:
    """One program: source, build flags, EZTrace modules, arguments, ranks (0: no
    mpirun), environment, and the regions that mark its loop in the trace."""

    name: str
    cflags: tuple[str, ...] = ()
    modules: str = "mpich"
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()
    ranks: int = 2
    env: dict = field(default_factory=dict)
    start: tuple[str, int] = ("MPI_Barrier", LEAVE)  # first record of this region and kind
    end: tuple[str, int] = ("MPI_Barrier", LEAVE)    # last one


# Dense loops (a fraction of a µs of work between records), so that EZTrace's cost
# per record is a dilation of 1.3-2x: the traced and the untraced loop each vary by
# 10-40 % between runs on these shared cores, and a removed % is that spread divided
# by the dilation (with 1.5-12 µs of work between records, a dilation of 1.1x, one
# pair's removed % moved by +-30 points).
PROGRAMS = (
    Program("ring", args=("40000", "100"), quick_args=("2000", "100")),
    # the ring from a communication thread (all MPI from one Pthread per rank)
    Program("commring", ("-pthread",), args=("40000", "100"), quick_args=("2000", "100")),
    Program("halo", args=("20000", "400", "64"), quick_args=("1000", "400", "64")),
    Program("master_worker", args=("40000", "200"), quick_args=("2000", "200")),
    Program("hybrid", ("-fopenmp",), "mpich openmp", args=("10000", "800"),
            quick_args=("500", "800"),
            env={"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive"}),
    Program("pthreads", ("-pthread",), "pthread", args=("20000", "400"),
            quick_args=("1000", "400"), ranks=0,
            start=("pthread_create", ENTER), end=("pthread_join", LEAVE)),
)


def missing_tool(mpicc: str, mpirun: str) -> str | None:
    """The first tool that is not installed, or None."""
    for tool in ("eztrace", mpicc, mpirun, "otf2-print"):
        if shutil.which(tool) is None:
            return tool
    return None


def build(p: Program, work: Path, mpicc: str) -> Path:
    """Compile ``p`` into ``work`` (MPI programs with ``mpicc``, Pthreads with cc)."""
    exe = work / p.name
    cc = mpicc if p.ranks else "cc"
    subprocess.run([cc, "-O2", *p.cflags, str(SOURCES / f"{p.name}.c"), "-o", str(exe)],
                   check=True, capture_output=True)
    return exe


def run(p: Program, exe: Path, traced: bool, cwd: Path, mpirun: str, quick: bool
        ) -> tuple[float, float]:
    """One run's (loop seconds, parts seconds) as the program prints them (``cwd``
    receives the trace, ``<name>_trace/``); a program not timed in parts gives
    its loop twice."""
    cmd = [mpirun, "-n", str(p.ranks)] if p.ranks else []
    if traced:
        cmd += ["eztrace", "-t", p.modules]
    cmd += [str(exe), *(p.quick_args if quick else p.args)]
    env = dict(os.environ, **p.env)
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        if line.startswith(("loop_seconds", "part_seconds")):
            key, value = line.split()[:2]
            found[key] = float(value)
    return found["loop_seconds"], found.get("part_seconds", found["loop_seconds"])


def loop_span(trace: c.Trace, p: Program) -> tuple[int, np.ndarray]:
    """(location, indices of the loop's marks): the first location holding the start
    region (rank 0, or the main thread); the marks are its start and end records
    and, where the start and end are one region and kind (MPI_Barrier Leave), every
    such record between them (the ends of the program's parts, benchmarks/eztrace/
    parts.h)."""
    names = trace.definitions.regions
    for loc in sorted(trace.events):
        ev = trace.events[loc]
        region = [names.get(int(r)) if hasattr(names, "get") else None for r in ev.region]
        starts = [i for i, (r, k) in enumerate(zip(region, ev.kind, strict=True))
                  if r == p.start[0] and k == p.start[1]]
        ends = [i for i, (r, k) in enumerate(zip(region, ev.kind, strict=True))
                if r == p.end[0] and k == p.end[1]]
        if starts and ends:
            if p.start == p.end:
                return loc, np.array(starts)
            return loc, np.array([starts[0], ends[-1]])
    raise SystemExit(f"{trace.source}: no {p.start[0]} .. {p.end[0]} loop found")


def seconds(trace: c.Trace, where: tuple[int, np.ndarray]) -> tuple[float, float]:
    """The loop's length in ``trace`` (seconds) and its parts' (the number of parts
    times their median, as the program computes it untraced)."""
    loc, idx = where
    t = np.asarray(trace.events[loc].time, dtype=np.int64)[idx]
    res = trace.definitions.timer_resolution
    parts = np.diff(t)
    return float(t[-1] - t[0]) / res, float(parts.size * np.median(parts)) / res


CONFIGS = ("calibrated", "unscaled", "estimate", "per-process")


def configs(platform: str, compare: str | None, wanted: tuple[str, ...] = CONFIGS
            ) -> list[tuple[str, dict]]:
    """The ways every trace is compensated, of those ``wanted``: the calibrated
    platform at the trace's speed ("calibrated", the command's default), the same
    as measured (``--speed platform``: "unscaled"), ``--overhead estimate``, the
    calibrated platform with ``--collective-exit per-process`` ("per-process"); with
    ``--compare`` another platform file at the trace's speed ("compared") and, where
    "unscaled" is wanted, as measured ("compared unscaled")."""
    every = {"calibrated": {"platform": platform},
             "unscaled": {"platform": platform, "speed": "platform"},
             "estimate": {"platform": platform, "overhead": "estimate"},
             "per-process": {"platform": platform, "collective_exit": "per-process"}}
    if compare:
        every["compared"] = {"platform": compare}
        every["compared unscaled"] = {"platform": compare, "speed": "platform"}
    keep = set(wanted) | ({"compared"} if compare else set())
    if compare and "unscaled" in wanted:
        keep.add("compared unscaled")
    return [(name, kw) for name, kw in every.items() if name in keep]


def compensate_all(trace: c.Trace, where, platform: str, compare: str | None = None,
                   wanted: tuple[str, ...] = CONFIGS, bounds: tuple[str, ...] = BOUNDS) -> dict:
    """(config, bound) -> {loop, violations, overcompensated} for one trace."""
    out = {}
    for config, kw in configs(platform, compare, wanted):
        for bound in bounds:
            try:
                r = c.compensate(trace, bound=bound, **kw)
                whole, parts = seconds(r.trace, where)
                out[config, bound] = {"loop": parts, "whole": whole, "violations": 0,
                                      "over": r.summary["overcompensated_records"],
                                      "speed": r.summary["overhead"].get("speed",
                                                                         {}).get("factor")}
            except c.VerificationError as exc:
                out[config, bound] = {"loop": float("nan"), "whole": float("nan"), "over": 0,
                                      "violations": exc.summary["verification"].get(
                                          "violations", 1) or 1}
    return out


@dataclass(frozen=True)
class Settings:
    """What every program's pairs share: the command line's choices."""

    pairs: int
    platform: str
    mpirun: str
    mpicc: str
    quick: bool = False
    compare: str | None = None
    configs: tuple[str, ...] = CONFIGS
    bounds: tuple[str, ...] = BOUNDS


def measure(p: Program, work: Path, s: Settings, log) -> list[dict]:
    """``s.pairs`` alternating untraced/traced runs of ``p``, each trace compensated."""
    exe = build(p, work, s.mpicc)
    rows = []
    for i in range(s.pairs):
        row: dict = {}
        for traced in ((False, True) if i % 2 == 0 else (True, False)):
            cwd = work / f"{p.name}-{i}-{'t' if traced else 'u'}"
            cwd.mkdir()
            whole, parts = run(p, exe, traced, cwd, s.mpirun, s.quick)
            if traced:
                row["traced_printed"] = whole
                trace = c.read(cwd / f"{p.name}_trace" / "eztrace_log.otf2")
                where = loop_span(trace, p)
                row["traced_whole"], row["traced"] = seconds(trace, where)
                row["results"] = compensate_all(trace, where, s.platform, s.compare,
                                                s.configs, s.bounds)
                shutil.rmtree(cwd / f"{p.name}_trace")
            else:
                row["untraced_whole"], row["untraced"] = whole, parts
        log(f"{p.name} pair {i + 1}/{s.pairs}: untraced {row['untraced']:.4f} s, "
            f"traced {row['traced']:.4f} s", i + 1)
        rows.append(row)
    return rows


def paired_removed(rows: list[dict], config: str, bound: str, whole: bool = False
                   ) -> np.ndarray:
    """Each pair's removed %, of the loops timed in parts or (``whole``) of the whole
    loops."""
    t, u, loop = ("traced_whole", "untraced_whole", "whole") if whole else \
        ("traced", "untraced", "loop")
    return np.array([100 * (r[t] - r["results"][config, bound][loop]) / (r[t] - r[u])
                     for r in rows])


def removed(rows: list[dict], config: str, bound: str, whole: bool = False
            ) -> tuple[float, float]:
    """(median of the paired removed %, removed % of the medians), of the loops
    timed in parts or (``whole``) of the whole loops."""
    t, u, loop = ("traced_whole", "untraced_whole", "whole") if whole else \
        ("traced", "untraced", "loop")
    paired = paired_removed(rows, config, bound, whole)
    med = [statistics.median(r[k] for r in rows) for k in (t, u)]
    comp = statistics.median(r["results"][config, bound][loop] for r in rows)
    return float(np.nanmedian(paired)), 100 * (med[0] - comp) / (med[0] - med[1])


def quartiles(rows: list[dict], config: str, bound: str) -> str:
    """The paired removed % of the loops timed in parts: first to third quartile
    (the spread between pairs that the median hides)."""
    q1, q3 = np.nanpercentile(paired_removed(rows, config, bound), [25, 75])
    return f"{q1:.0f}..{q3:.0f}"


def speed_of(rows: list[dict], config: str, bound: str) -> str:
    """The median over the pairs of the factor the platform was scaled by to each
    trace's speed (compensate.speed), "-" where nothing was scaled."""
    found = [r["results"][config, bound].get("speed") for r in rows]
    found = [f for f in found if f is not None]
    return f"{statistics.median(found):.3f}" if found else "-"


def trace_speeds(rows: list[dict]) -> np.ndarray | None:
    """Each pair's trace speed: the factor its trace's platform was scaled by
    (compensate.speed), from the first scaled configuration; None if none was."""
    for key in rows[0]["results"]:
        found = [r["results"][key].get("speed") for r in rows]
        if all(f is not None for f in found):
            return np.array(found, dtype=float)
    return None


def _corr(a: np.ndarray, b: np.ndarray) -> str:
    """Pearson's correlation of ``a`` and ``b``, "-" where either is constant."""
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return "-"
    return f"{np.corrcoef(a, b)[0, 1]:.2f}"


def spread_table(results: dict[str, list[dict]]) -> list[str]:
    """Per program and configuration (its first bound): how the pairs spread and
    whether the speed scaling follows the trace's speed. ``speed x`` is each
    trace's factor (the same trace for every configuration); a scaling that
    follows the speed leaves the removed % uncorrelated with it."""
    lines = ["| program | overhead | bound | speed x over the pairs | corr(speed x, traced "
             "loop) | removed %: standard deviation over the pairs | corr(speed x, "
             "removed %) |", "|---|---|---|---|---|---|---|"]
    for name, rows in results.items():
        speeds = trace_speeds(rows)
        if speeds is None or len(rows) < 3 or np.ptp(speeds) == 0:
            continue
        traced = np.array([r["traced"] for r in rows])
        seen = set()
        for config, bound in rows[0]["results"]:
            if config in seen:
                continue
            seen.add(config)
            pct = paired_removed(rows, config, bound)
            lines.append(f"| {name} | {config} | {bound} | {speeds.min():.2f}..{speeds.max():.2f}"
                         f" | {_corr(speeds, traced)} | {np.nanstd(pct):.1f} | "
                         f"{_corr(speeds, pct)} |")
    return lines


def table(results: dict[str, list[dict]]) -> list[str]:
    """The markdown table: per program, overhead source and bound."""
    lines = ["| program | untraced s | traced s | dilation | overhead | speed x | bound | "
             "removed % (paired median) | paired quartiles | removed % (medians) | "
             "whole loops: removed % (paired median) | violations | overcompensated |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in results.items():
        u = statistics.median(r["untraced"] for r in rows)
        t = statistics.median(r["traced"] for r in rows)
        for config, bound in rows[0]["results"]:
            paired, med = removed(rows, config, bound)
            whole, _ = removed(rows, config, bound, whole=True)
            viol = sum(r["results"][config, bound]["violations"] for r in rows)
            over = sum(r["results"][config, bound]["over"] for r in rows)
            lines.append(f"| {name} | {u:.4f} | {t:.4f} | {t / u:.2f}x | {config} | "
                         f"{speed_of(rows, config, bound)} | {bound} | {paired:.1f} | "
                         f"{quartiles(rows, config, bound)} | {med:.1f} | {whole:.1f} | "
                         f"{viol} | {over:,} |")
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=11)
    ap.add_argument("--programs", default=",".join(p.name for p in PROGRAMS))
    ap.add_argument("--platform", help="EZTrace platform file (default: calibrate first)")
    ap.add_argument("--configs", default="calibrated,estimate",
                    help=f"overhead sources, of {','.join(CONFIGS)} (default: "
                         "calibrated,estimate)")
    ap.add_argument("--bounds", default=",".join(BOUNDS))
    ap.add_argument("--mpicc", default=MPICC, help=f"MPICH's compiler wrapper (default {MPICC})")
    ap.add_argument("--mpirun", default=MPIRUN, help=f"MPICH's launcher (default {MPIRUN})")
    ap.add_argument("--quick", action="store_true", help="short loops (a smoke test)")
    ap.add_argument("--json", help="write the per-pair rows here")
    ap.add_argument("--compare", help="another platform file, compensating the same traces "
                                      "(rows \"compared\")")
    ap.add_argument("--rows", help="print the tables of the rows a --json run wrote, "
                                   "running nothing")
    args = ap.parse_args(argv)
    for name, given, known in (("program", args.programs, [p.name for p in PROGRAMS]),
                               ("overhead source", args.configs, CONFIGS),
                               ("bound", args.bounds, BOUNDS)):
        unknown = set(given.split(",")) - set(known)
        if unknown:
            ap.error(f"unknown {name}(s): {', '.join(sorted(unknown))}")
    return args


def calibrated(args: argparse.Namespace, work: Path, log) -> str | None:
    """The platform file: ``--platform``, or one calibrated now (None: it failed,
    said on stderr)."""
    if args.platform:
        return args.platform
    from calibration import eztrace as ezcal
    from calibration.platformfile import write_platform
    log("calibrating EZTrace (python -m calibration.eztrace) ...")
    try:
        result = ezcal.measure(ezcal.ProbeSettings(mpicc=args.mpicc, mpirun=args.mpirun))
    except ezcal.ProbeError as exc:
        print(f"eztrace_realrun: calibration failed: {exc}", file=sys.stderr)
        return None
    platform = work / "eztrace-platform.json"
    write_platform(ezcal.platform_dict(result, None), platform)  # (as calibration.eztrace)
    return str(platform)


def print_tables(results: dict[str, list[dict]], refused: dict[str, str]) -> None:
    """The removed % table, the spread table under it, the refused programs."""
    print("\n".join(table(results)))
    spread = spread_table(results)
    if len(spread) > 2:
        print()
        print("\n".join(spread))
    for name, why in refused.items():
        print(f"{name}: refused: {why}")


def rows_json(results: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The rows as ``--json`` writes them: each result keyed ``"config/bound"``
    (:func:`read_rows` reads them back)."""
    return {name: [dict(r, results={f"{k[0]}/{k[1]}": v for k, v in r["results"].items()})
                   for r in rows] for name, rows in results.items()}


def read_rows(path: str) -> dict[str, list[dict]]:
    """The rows a ``--json`` run wrote (:func:`rows_json`), with their results keyed
    (config, bound)."""
    data = json.loads(Path(path).read_text())
    return {name: [dict(r, results={tuple(k.split("/", 1)): v for k, v in r["results"].items()})
                   for r in rows] for name, rows in data.items()}


def main(argv: list[str] | None = None) -> int:
    """Run, compensate, print the table (and ``--json`` the raw rows)."""
    args = parse(argv)
    if args.rows:
        print_tables(read_rows(args.rows), {})
        return 0
    tool = missing_tool(args.mpicc, args.mpirun)
    if tool:
        print(f"eztrace_realrun: skipped: {tool} is not installed (needs EZTrace 2.0, "
              f"MPICH and otf2-tools)")
        return 0
    wanted = [p for p in PROGRAMS if p.name in args.programs.split(",")]
    started, done = time.monotonic(), [0]

    def log(msg: str, pair: int = 0) -> None:
        if pair:  # a pair ended: the time left, from the pairs so far
            done[0] += 1
            left = (time.monotonic() - started) / done[0] * (len(wanted) * args.pairs - done[0])
            msg += f" (about {left / 60:.0f} min left)"
        print(msg, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="eztrace-realrun-") as tmp:
        work = Path(tmp)
        platform = calibrated(args, work, log)
        if platform is None:
            return 3
        started = time.monotonic()
        s = Settings(args.pairs, platform, args.mpirun, args.mpicc, args.quick, args.compare,
                     tuple(args.configs.split(",")), tuple(args.bounds.split(",")))
        results, refused = {}, {}
        for p in wanted:
            try:
                results[p.name] = measure(p, work, s, log)
            except c.TraceError as exc:  # a trace compensate refuses: say so, go on
                refused[p.name] = str(exc)
    print_tables(results, refused)
    if args.json:
        Path(args.json).write_text(json.dumps(rows_json(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
