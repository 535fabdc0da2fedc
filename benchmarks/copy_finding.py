"""What the copy-table check costs: ``compensate`` with and without
``--max-overcompensated`` (which reads the input a second time to count the message
records whose measured gap cannot hold the platform's copy,
:func:`compensate.overhead.copy_contradictions`; docs/messages.md, "A platform that
contradicts the trace"), and the second read alone.

Simulates a stencil (OTF2, ``--ranks`` x ``--iterations``), then runs each command
``--repeats`` times alternately in fresh interpreters and prints the median wall
times and the pass alone (in this interpreter).

Usage: python benchmarks/copy_finding.py [--ranks 8] [--iterations 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _wall(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sim = Path(tmp) / "sim"
        subprocess.run([sys.executable, "-m", "compensate.cli.simulate", "stencil", str(sim),
                        "--ranks", str(args.ranks), "--iterations", str(args.iterations)],
                       check=True, stdout=subprocess.DEVNULL)
        trace, platform = sim / "measured" / "traces.otf2", sim / "platform.json"
        base = [sys.executable, "-m", "compensate", str(trace), str(Path(tmp) / "o" /
                "traces.otf2"), "--platform", str(platform), "--force", "--quiet"]
        plain, checked = [], []
        for _ in range(args.repeats):
            plain.append(_wall(base))
            checked.append(_wall([*base, "--max-overcompensated", "0"]))
        from compensate.formats import read_chunks
        from compensate.overhead import copy_contradictions
        from compensate.platform import Platform
        t = time.perf_counter()
        defs, chunks = read_chunks(trace, payload=False)
        found = copy_contradictions(defs, chunks, Platform.load(platform))
        alone = time.perf_counter() - t
    print(f"stencil {args.ranks} ranks x {args.iterations} iterations, "
          f"{found['checked']:,} message records checked, {found['records']} contradictions")
    print(f"compensate: median {statistics.median(plain):.2f} s; with --max-overcompensated: "
          f"{statistics.median(checked):.2f} s; the second read alone: {alone:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
