"""Simulator benchmark: peak memory and CPU time of ``compensate-simulate`` by trace size.

Runs ``compensate-simulate stencil OUT --ranks R --iterations N`` (OTF2 output)
in a fresh child process per size and reports, from the child's own
``getrusage``, its peak resident set and CPU time (user + system, interpreter start-up
included), and the bytes of peak memory per record of the measured trace. A
baseline child that only imports the command gives the fixed part, so the
per-record figure is ``(peak - baseline) / records``: constant across sizes
means memory linear in the trace length.

Usage::

    python benchmarks/simulator_memory.py [--iterations 2000,8000,32000] [--ranks 4]
                                         [--program stencil] [--format otf2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_child(code: str, env: dict) -> tuple[float, float, float, str]:
    """Run ``python -c code``; return (peak RSS bytes, CPU seconds, wall seconds, stdout)."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=ROOT)
    out, err = p.communicate()
    wall = time.monotonic() - t0
    # the child reports its own getrusage(RUSAGE_SELF) on its last line
    if p.returncode != 0:
        raise SystemExit(f"child failed ({p.returncode}): {err.decode()[-2000:]}")
    lines = out.decode().strip().splitlines()
    peak_kib, cpu = lines[-1].split()
    return float(peak_kib) * 1024, float(cpu), wall, "\n".join(lines[:-1])


REPORT = ("import resource as _r; _u = _r.getrusage(_r.RUSAGE_SELF); "
          "print(_u.ru_maxrss, _u.ru_utime + _u.ru_stime)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", default="2000,8000,32000",
                    help="comma-separated iteration counts (default %(default)s)")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--program", default="stencil")
    ap.add_argument("--format", choices=("otf2", "trace"), default="otf2")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base_rss, base_cpu, _, _ = run_child(
        "import compensate.cli.simulate, compensate.formats.otf2; " + REPORT, env)
    print(f"compensate-simulate {args.program}, {args.ranks} ranks, {args.format}; "
          f"baseline (imports only): {base_rss / 2**20:.0f} MiB, {base_cpu:.2f} s CPU")
    print(f"{'iterations':>10} {'records':>10} {'peak MiB':>9} {'CPU s':>7} {'wall s':>7} "
          f"{'B/record':>9} {'µs CPU/record':>13}")
    for n in (int(x) for x in args.iterations.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            code = ("import sys; from compensate.cli.simulate import main; "
                    f"rc = main([{args.program!r}, {tmp + '/out'!r}, '--ranks', "
                    f"'{args.ranks}', '--iterations', '{n}', '--format', {args.format!r}]); "
                    "sys.stdout.flush(); " + REPORT)
            rss, cpu, wall, out = run_child(code, env)
        records = int(out.split(" records:")[0].rsplit(" ", 1)[1])
        per = (rss - base_rss) / records
        print(f"{n:>10} {records:>10} {rss / 2**20:>9.0f} {cpu:>7.1f} {wall:>7.1f} "
              f"{per:>9.0f} {1e6 * (cpu - base_cpu) / records:>13.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
