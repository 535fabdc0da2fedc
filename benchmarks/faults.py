"""The fault campaign: run ``compensate`` against damaged inputs and hostile
filesystems, kills, limits, concurrent writers, fuzzed platform files and options,
failing stdout and killed MPI ranks, and count what went wrong (docs/faults.md).

    python benchmarks/faults.py [--tree DIR] [--seed N] [--runs N] [--family NAME ...]
                                [--timeout S] [--quick] [--keep]

Prints one line per run that failed (FAIL) or drew a note (note), then per family:
runs, clean runs, the count of each failure class (exit0-wrong, modified-input,
partial-output, hang) and of each note (traceback, no-filename, bad-status,
refused-valid, accepted-invalid), then the totals, the fraction of clean runs and
the wall time. Exit status 1 if any run failed, 0 otherwise. The parts live in benchmarks/faults/.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from faults import fam_corrupt, fam_fs, fam_kills, fam_misc
from faults.oracles import FAILURES, NOTES, Outcome
from faults.runner import REPO, Ctx

FAMILIES = {
    "corrupt-otf2": fam_corrupt.corrupt_otf2,
    "corrupt-text": fam_corrupt.corrupt_text,
    "filesystem": fam_fs.filesystem,
    "kills": fam_kills.kills,
    "limits": fam_misc.limits,
    "concurrency": fam_misc.concurrency,
    "platform": fam_misc.platform,
    "stdout": fam_misc.stdout,
    "mpi": fam_misc.mpi,
}
SHORT = {"exit0-wrong": "exit0-wrong", "modified-input": "mod-input",
         "partial-output": "partial", "hang": "hang", "traceback": "traceback",
         "no-filename": "no-file", "bad-status": "bad-status",
         "refused-valid": "refused-ok", "accepted-invalid": "accepted-bad"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, default=REPO,
                   help="source tree to test (PYTHONPATH of every run; default: this one)")
    p.add_argument("--seed", type=int, default=39, help="seed of every family (default 39)")
    p.add_argument("--runs", type=int, default=None,
                   help="runs per family (default: each family's own count)")
    p.add_argument("--family", action="append", choices=sorted(FAMILIES),
                   help="run only this family (repeatable; default: all)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per run before it counts as a hang (default 60)")
    p.add_argument("--quick", action="store_true", help="a few runs per family")
    p.add_argument("--keep", action="store_true",
                   help="keep every case's files and print every run")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) /
                   "compensate-faults-cache", help="where generated inputs are kept")
    return p.parse_args(argv)


def report_run(o: Outcome, keep: bool, work: Path) -> None:
    """One line for a run that failed or drew a note (every run with --keep); the
    work directory's path is shortened to WORK."""
    if o.skipped:
        print(f"  skip  {o.family}: {o.skipped}", flush=True)
    elif o.failures or o.notes or keep:
        what = "; ".join(f"{k}: {v}" for k, v in {**o.failures, **o.notes}.items())
        mark = "FAIL" if o.failures else "note" if o.notes else "ok  "
        line = f"  {mark}  {o.family}: {o.case} -> {what or 'clean'}"
        print(line.replace(str(work), "WORK"), flush=True)


def table(results: dict[str, list[Outcome]], seconds: dict[str, float]) -> int:
    """Print the per-family table and the totals; the number of failing runs."""
    cols = [*FAILURES, *NOTES]
    head = f"{'family':<13}{'runs':>5}{'clean':>6}" + "".join(
        f"{SHORT[c]:>{len(SHORT[c]) + 2}}" for c in cols) + f"{'skip':>5}{'s':>7}"
    print(head)
    total = {c: 0 for c in ["runs", "clean", *cols, "skip"]}
    for fam, outs in results.items():
        runs = [o for o in outs if not o.skipped]
        row = {"runs": len(runs), "skip": len(outs) - len(runs),
               "clean": sum(1 for o in runs if not o.failures and not o.notes)}
        for c in cols:
            row[c] = sum(1 for o in runs if c in o.failures or c in o.notes)
        for k in total:
            total[k] += row[k]
        print(f"{fam:<13}{row['runs']:>5}{row['clean']:>6}" + "".join(
            f"{row[c]:>{len(SHORT[c]) + 2}}" for c in cols) +
            f"{row['skip']:>5}{seconds[fam]:>7.0f}")
    print(f"{'total':<13}{total['runs']:>5}{total['clean']:>6}" + "".join(
        f"{total[c]:>{len(SHORT[c]) + 2}}" for c in cols) +
        f"{total['skip']:>5}{sum(seconds.values()):>7.0f}")
    frac = total["clean"] / total["runs"] if total["runs"] else 1.0
    failing = sum(1 for outs in results.values() for o in outs if o.failures)
    print(f"clean runs: {total['clean']} of {total['runs']} ({100 * frac:.1f} %); "
          f"runs with a failure: {failing}")
    return failing


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="compensate-faults-"))
    args.cache.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(args.tree.resolve(), args.seed, args.runs, args.timeout, args.quick,
              work, args.cache, args.keep)
    print(f"fault campaign: tree {ctx.tree}, seed {ctx.seed}, work {work}", flush=True)
    t0 = time.monotonic()
    results: dict[str, list[Outcome]] = {}
    seconds: dict[str, float] = {}
    try:
        for fam in args.family or list(FAMILIES):
            t = time.monotonic()
            results[fam] = []
            for o in FAMILIES[fam](ctx):
                results[fam].append(o)
                report_run(o, args.keep, work)
            seconds[fam] = time.monotonic() - t
    finally:
        fam_fs.unmount_all(work)  # mounts never outlive the campaign, even with --keep
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    failing = table(results, seconds)
    print(f"wall time {time.monotonic() - t0:.0f} s", flush=True)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
