"""Calibration benchmark: the full ``calibrate run`` on this machine, printed as tables.

Prints what it measured: the machine, the timer (read cost, resolution), the
OTF2 writer probe per record kind (median, IQR, 95 % CI over the measuring
processes' medians), the copy cost per buffer size (warm median over the size
class with IQR and CI, bandwidth, cache-cold median), the detected cache steps,
and -- if a C compiler is installed -- the external probe's self-test:
calibration/microbench.c with a fake tracer of known cost, and the overhead per
record the probe recovers. With ``--repeat``, a second run of the same mode
follows the first, and what the two disagree on beyond their spreads is printed
(calibration/spread.py ``disagreements``: how far this machine lets two runs a
minute apart differ). The figures in docs/calibration.md come from this script.

Usage: python benchmarks/calibrate_run.py [--quick | --thorough] [-o platform.json]
                                        [--no-selftest] [--repeat]
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from calibration import external
from calibration.copycost import measure_copy_cost
from calibration.machine import machine_facts
from calibration.modes import MODES
from calibration.overhead import run_writer_probe
from calibration.platformfile import build_platform, write_platform
from calibration.report import format_external, format_run
from calibration.spread import disagreements
from calibration.timer import calibrate_timer
from calibration.units import fmt_bytes
from compensate.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
FAKE_NS = 1000.0  # fake tracer: ns per iteration, 2 records per iteration


def run_calibration(mode_name: str) -> dict:
    """The same measurements as ``calibrate run`` in mode ``mode_name``; the platform dict."""
    mode = MODES[mode_name]
    started = time.perf_counter()
    prog = Progress("calibrate", "timer")
    timer = calibrate_timer(mode.timer_pairs, mode.n_resamples)
    prog = prog.phase("copy cost")
    copy = measure_copy_cost(timer, dataclasses.replace(mode.copy), prog.fraction)
    prog = prog.phase("writer probe")
    probe = run_writer_probe(timer, mode.writer, prog.fraction)
    prog.close()
    return build_platform(copy, timer, probe, mode=mode_name,
                          seconds=time.perf_counter() - started)


def selftest(timer_pairs: int = 5000) -> str | None:
    """External probe against microbench.c with FAKE_NS per iteration; None without cc."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "microbench"
        subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "calibration" / "microbench.c")],
                       check=True)
        cfg = external.ExternalSettings(command=f"{exe} {{n}} {FAKE_NS:g}",
                                        baseline=f"{exe} {{n}}", events_per_iteration=2,
                                        ns=(20_000, 40_000, 60_000, 80_000, 100_000),
                                        repeats=5)
        result = external.run_external_probe(cfg, calibrate_timer(timer_pairs, 499))
    expected = FAKE_NS / 2 * 1e-9
    return (f"external probe self-test: microbench.c, fake tracer {FAKE_NS:g} ns per iteration "
            f"= {expected * 1e9:g} ns per record (K = 2), wall timing, "
            f"n = 20k..100k x 5 repeats\n{format_external(result.to_dict())}\n"
            f"recovered / injected = {result.overhead / expected:.3f}")


def machine_lines(m: dict) -> list[str]:
    caches = ", ".join(f"L{c['level']} {c['type'].lower()} {fmt_bytes(c['bytes'])}"
                       for c in m["caches"])
    return [f"machine: {m['hostname']}: {m['cpu_model']}, {m['cpu_count']} CPUs; caches: "
            f"{caches or 'unknown'}",
            f"software: {m['os']}; Python {m['python']}, numpy {m['numpy']}, "
            f"scipy {m['scipy']}, otf2 {m['otf2']}"]


def print_repeat(first: dict, second: dict) -> None:
    """The second run's per-record cost and copy table beside the first's, and where
    they disagree beyond their spreads."""
    o1, o2 = (d["writer_probe"]["event_overhead"]["seconds"] for d in (first, second))
    t1 = {e["bytes"]: e["seconds"] for e in first["copy_time"]}
    t2 = {e["bytes"]: e["seconds"] for e in second["copy_time"]}
    ratios = [t2[b] / t1[b] for b in sorted(set(t1) & set(t2))]
    print(f"second run: per-record cost {o2 * 1e6:.3f} µs (first {o1 * 1e6:.3f} µs, "
          f"ratio {o2 / o1:.3f}); copy time second/first over {len(ratios)} sizes: "
          f"min {min(ratios, default=float('nan')):.2f}, "
          f"median {float(np.median(ratios)) if ratios else float('nan'):.2f}, "
          f"max {max(ratios, default=float('nan')):.2f}")
    found = disagreements(first, second)
    print("the two runs agree within their spreads" if not found else
          "the two runs disagree: " + "; ".join(found))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true")
    speed.add_argument("--thorough", action="store_true")
    p.add_argument("-o", "--output", help="also write the platform file here")
    p.add_argument("--no-selftest", action="store_true", help="skip the external probe test")
    p.add_argument("--repeat", action="store_true",
                   help="run twice and print where the two runs disagree")
    args = p.parse_args(argv)
    mode = "quick" if args.quick else "thorough" if args.thorough else "default"
    flags = (f" --{mode}" if mode != "default" else "") + (" --repeat" if args.repeat else "")
    print(f"command: python benchmarks/calibrate_run.py{flags}")
    print("\n".join(machine_lines(machine_facts())))
    data = run_calibration(mode)
    print(format_run(data))
    if args.repeat:
        print_repeat(data, run_calibration(mode))
    if args.output:
        write_platform(data, args.output, force=True)
        print(f"wrote {args.output}")
    if not args.no_selftest:
        text = selftest()
        print(text if text else "external probe self-test: skipped (no C compiler)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
