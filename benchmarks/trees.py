"""Before/after in one run: the command's records per CPU-second and peak memory,
the same input compensated by two source trees, alternating.

    python benchmarks/trees.py --base ../before [--sizes 1e6,1e7] [--bounds lower,fitted]
        [--programs stencil] [--repeat 3]

``--base`` is another checkout of this repository (e.g. ``git worktree add
../before HEAD~1``); this checkout is "after". Each run is a fresh process that
imports ``compensate`` from its tree (``throughput.run_child``) and runs the
command on the OTF2 archive of ``benchmarks/throughput.py``'s generated program
(cached in ``--workdir``), streamed, as a user runs it. Runs alternate base,
after, base, ... so that a change of the host's speed falls on both; the table
shows each tree's median CPU seconds, records per CPU-second, peak RSS, the
after/base ratios of the medians and the median of the per-pair ratios (each
after run against the base run just before it). Process CPU time, not wall
time: this machine's cores are shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import throughput  # noqa: E402 - the generator and worker of the throughput benchmark

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other checkout (before)")
    ap.add_argument("--sizes", default="1e6")
    ap.add_argument("--programs", default="stencil")
    ap.add_argument("--bounds", default="lower")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default="/tmp/compensate-throughput")
    args = ap.parse_args(argv)
    base = Path(args.base).resolve()
    work = Path(args.workdir)
    print(f"# python benchmarks/trees.py {' '.join(argv or sys.argv[1:])}")
    print(f"# machine: {throughput.machine_line()}")
    print(f"# base {base}, after {ROOT}; median of {args.repeat} alternating runs each")
    print("\n| program | records | bound | tree | CPU s | records/CPU-s | peak MiB |")
    print("|---|---:|---|---|---:|---:|---:|")
    for program in args.programs.split(","):
        for size in (throughput.parse_size(s) for s in args.sizes.split(",")):
            case = work / f"{program}-{size}"
            if not (case / "info.json").exists():
                throughput.run_child(["generate", program, str(size), str(case)])
            for bound in args.bounds.split(","):
                _compare(program, case, bound, base, args.repeat, work)
    return 0


def _compare(program: str, case: Path, bound: str, base: Path, repeat: int,
             work: Path) -> None:
    src = str(case / "otf2" / "traces.otf2")
    records = int(throughput.json.loads((case / "info.json").read_text())["records"])
    got: dict[str, list[tuple[float, float]]] = {"base": [], "after": []}
    for _ in range(repeat):
        for name, root in (("base", base), ("after", ROOT)):
            out = work / f"trees-{name}" / "traces.otf2"
            res, peak = throughput.run_child(
                ["e2e", src, str(out), str(case / "platform.json"), bound], root=root)
            if res["exit"] != 0:
                raise SystemExit(f"{name}: exit {res['exit']}")
            got[name].append((res["cpu"], peak))
    med = {}
    for name in ("base", "after"):
        cpu = statistics.median(c for c, _ in got[name])
        peak = statistics.median(p for _, p in got[name])
        med[name] = (cpu, peak)
        print(f"| {program} | {records:,} | {bound} | {name} | {cpu:.2f} | "
              f"{records / cpu:,.0f} | {peak:.0f} |")
    (cb, pb), (ca, pa) = med["base"], med["after"]
    print(f"| {program} | {records:,} | {bound} | after/base | {ca / cb:.3f} | "
          f"{cb / ca:.3f} | {pa / pb:.3f} |")
    # each after run with the base run just before it: the host's speed changes
    # less within a pair than across the whole series
    paired = statistics.median(a[0] / b[0] for a, b in zip(got["after"], got["base"],
                                                              strict=True))
    print(f"| {program} | {records:,} | {bound} | paired after/base | {paired:.3f} | "
          f"{1 / paired:.3f} | |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
