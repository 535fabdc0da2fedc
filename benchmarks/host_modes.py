"""How steady is each CPU of this machine? The speed of one small numpy statement
on every CPU at once, in windows of half a second.

A removal measured to a few per cent, as a ratio of run times of separate
processes, needs CPUs whose speed holds from one run to the next. On a shared VM
it may not: the host can give a vCPU a physical core of its own or one shared
with another guest, and move it between the two. This script
shows whether it does, with nothing else of the project running: one process
pinned to each CPU (``os.sched_setaffinity``), all started together, each timing
``2.0 * a - b`` on 200 doubles (the size of the solver's vectors) back to back
and printing the median per window, in ns. A steady CPU prints one value
(± a few per cent) all along; a CPU the host shares prints two levels and the
switches between them.

Usage: python benchmarks/host_modes.py [--seconds 20] [--window 0.5]

Prints, per CPU, the window medians, then per CPU the fastest and slowest
window, their ratio, the share of windows within 10 % of the fastest ("fast")
and the number of switches between fast and slow windows.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

import numpy as np


def spin(cpu: int, seconds: float, window: float, start: float, out: mp.Queue) -> None:
    """Time the statement on ``cpu`` from ``start`` for ``seconds``: window medians."""
    os.sched_setaffinity(0, {cpu})
    a, b = np.ones(200), np.ones(200)
    pc = time.perf_counter_ns
    while time.monotonic() < start:
        pass
    end, medians = start + seconds, []
    while time.monotonic() < end:
        stop, samples = time.monotonic() + window, []
        while time.monotonic() < stop:
            t = pc()
            _ = 2.0 * a - b
            samples.append(pc() - t)
        medians.append(int(np.median(samples)))
    out.put((cpu, medians))


def summary(medians: list[int]) -> dict:
    """Fastest and slowest window, their ratio, the fast share and the switches."""
    m = np.asarray(medians, dtype=float)
    fast = m <= 1.1 * m.min()
    return {"fastest_ns": int(m.min()), "slowest_ns": int(m.max()),
            "ratio": float(m.max() / m.min()), "fast_share": float(fast.mean()),
            "switches": int(np.count_nonzero(fast[1:] != fast[:-1]))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--window", type=float, default=0.5)
    args = p.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    out: mp.Queue = mp.Queue()
    start = time.monotonic() + 1.0
    procs = [mp.Process(target=spin, args=(cpu, args.seconds, args.window, start, out))
             for cpu in cpus]
    for proc in procs:
        proc.start()
    results = dict(out.get() for _ in procs)
    for proc in procs:
        proc.join()
    print(f"ns per `2.0 * a - b` (200 doubles), median of each {args.window} s window, "
          f"{args.seconds} s, all CPUs at once, load before {os.getloadavg()[0]:.2f}")
    for cpu in cpus:
        print(f"cpu {cpu}: {' '.join(str(v) for v in results[cpu])}")
    print("\n| cpu | fastest ns | slowest ns | slowest/fastest | windows within 10 % of fastest"
          " | fast/slow switches |\n|---:|---:|---:|---:|---:|---:|")
    for cpu in cpus:
        s = summary(results[cpu])
        print(f"| {cpu} | {s['fastest_ns']} | {s['slowest_ns']} | {s['ratio']:.2f} | "
              f"{100 * s['fast_share']:.0f} % | {s['switches']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
