"""Start-up cost of the command: ``compensate --version`` and the import
of the engine, median of several fresh interpreters, by process CPU time (the
children's user + system time) and wall time.

    python benchmarks/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time


def measure(args: list[str], runs: int) -> tuple[float, float]:
    """Median (CPU seconds, wall seconds) of ``python ARGS`` in fresh interpreters."""
    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True)
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    runs = ap.parse_args().runs
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    rows = [
        ("python -c pass (interpreter alone)", ["-c", "pass"]),
        ("compensate --version", ["-m", "compensate", "--version"]),
        ("import compensate.engine", ["-c", "import compensate.engine"]),
        ("import compensate.engine.fit + scipy", ["-c", "import compensate.engine.fit, "
                                                  "scipy.optimize, scipy.stats"]),
    ]
    print(f"{'what':40s} {'CPU s':>8s} {'wall s':>8s}   (median of {runs})")
    for name, args in rows:
        cpu, wall = measure(args, runs)
        print(f"{name:40s} {cpu:8.3f} {wall:8.3f}")


if __name__ == "__main__":
    main()
