"""What the distributed run's deadline costs (``--rank-timeout``, docs/parallel.md):
the same ``mpiexec -n P compensate IN OUT`` with the default deadline (collective
calls nonblocking, tested in a loop) and with ``--rank-timeout 0`` (the blocking
calls, no deadline), alternated, wall seconds each and the median ratio.

Simulates ``stencil`` with about ``--records`` records (cached in ``--workdir``).

Usage::

    python benchmarks/parallel_deadline.py [--records 2e5] [--ranks 2] [--rounds 5]
                                           [--in-memory]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(records: int, work: Path) -> tuple[Path, Path]:
    import json

    from compensate.formats.text import write_text
    from compensate.simulate import simulate

    trace, plat = work / f"stencil_{records}.trace", work / f"stencil_{records}.json"
    if not trace.exists():
        small = simulate("stencil", ranks=4, iterations=10, seed=1)
        iterations = max(1, round(10 * records / small.measured.record_count))
        sim = simulate("stencil", ranks=4, iterations=iterations, seed=1)
        write_text(sim.measured, str(trace))
        plat.write_text(json.dumps(sim.platform.to_dict()))
    return trace, plat


def run(args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(args)}\n{proc.stderr}")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=float, default=2e5)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--in-memory", action="store_true")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "compensate-bench"))
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    trace, plat = generate(int(a.records), work)
    mpiexec = shutil.which("mpiexec") or sys.exit("mpiexec not found (the [mpi] extra)")
    out = work / "deadline_out.trace"
    base = [mpiexec, "-n", str(a.ranks), sys.executable, "-m", "compensate", str(trace),
            str(out), "--platform", str(plat), "--force", "--quiet",
            *(["--in-memory"] if a.in_memory else [])]
    ratios = []
    print(f"{trace.name}, P = {a.ranks}{', --in-memory' if a.in_memory else ''}")
    print("| round | deadline (default) s | --rank-timeout 0 s | ratio |")
    print("|---|---|---|---|")
    for k in range(a.rounds):
        pair = {}
        for name in (("deadline", "none") if k % 2 == 0 else ("none", "deadline")):
            pair[name] = run(base + (["--rank-timeout", "0"] if name == "none" else []))
        ratios.append(pair["deadline"] / pair["none"])
        print(f"| {k} | {pair['deadline']:.2f} | {pair['none']:.2f} | {ratios[-1]:.3f} |")
    print(f"median ratio (deadline / none): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
