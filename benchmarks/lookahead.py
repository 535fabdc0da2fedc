"""The stream cutter's look-ahead (compensate.pipeline.unclosed, docs/design.md §5):
peak memory, CPU seconds and segments of a streamed run with and without it.

A trace whose sends are never received (EZTrace writes no receive for an
MPI_Irecv completed in MPI_Wait, MPI_Waitall or MPI_Test*) keeps the cutter from
cutting after the first such send unless it reads ahead. For the OTF2 archive
``ANCHOR`` this runs, each in a fresh process and alternating ``--pairs`` times,
the one-process streamed pipeline (:func:`compensate.pipeline.clock_pass`, then
:func:`compensate.pipeline.streamed`, lower bound, ``--overhead`` per record,
nothing written) with the look-ahead the command gives it and without, and
prints per run its peak resident set (``ru_maxrss``), CPU seconds (user +
system), the segments (count, largest) and the span of the compensated times;
then the medians and their ratios. Both variants must give the same span.

Usage::

    python benchmarks/lookahead.py ANCHOR [--pairs 3] [--overhead 40e-9]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child(anchor: str, ahead: bool, overhead: float) -> None:
    """One run: print its figures as a JSON line."""
    from compensate.formats import read_chunks
    from compensate.pipeline import RunOptions, clock_pass, streamed
    from compensate.pipeline.unclosed import scan
    from compensate.platform import Platform

    defs, chunks = read_chunks(anchor, payload=False)
    spans: dict[int, tuple[int, int]] = {}
    ahead_of = (lambda: scan(defs, read_chunks(anchor, payload=False)[1])) if ahead else None
    # (the clocks aligned first where the command aligns them: a receive before its send)
    alignment = clock_pass(defs, chunks, RunOptions(), lookahead=ahead_of)
    if not alignment.offsets:
        alignment = None
    chunks = read_chunks(anchor, payload=False)[1]

    def write(loc: int, ev) -> None:
        lo, hi = spans.get(loc, (int(ev.time[0]), int(ev.time[-1])))
        spans[loc] = (min(lo, int(ev.time[0])), max(hi, int(ev.time[-1])))

    run = streamed(defs, chunks, Platform(overhead), RunOptions(), write,
                   lookahead=ahead_of, alignment=alignment)
    use = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({
        "peak_mib": use.ru_maxrss / 1024, "cpu_s": use.ru_utime + use.ru_stime,
        "segments": run.segments, "largest": run.largest_segment,
        "span": max(h for _, h in spans.values()) - min(lo for lo, _ in spans.values())}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("anchor")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--overhead", type=float, default=40e-9)
    a = ap.parse_args()
    rows: dict[bool, list[dict]] = {False: [], True: []}
    print(f"{'run':>12} {'peak MiB':>9} {'CPU s':>7} {'segments':>8} {'largest':>9} span")
    for i in range(a.pairs):
        for ahead in (False, True):
            out = subprocess.run([sys.executable, __file__, "--child", a.anchor, str(int(ahead)),
                                  str(a.overhead)], check=True, capture_output=True,
                                 text=True, cwd=ROOT).stdout
            r = json.loads(out.strip().splitlines()[-1])
            rows[ahead].append(r)
            name = f"{'ahead' if ahead else 'blind'} {i + 1}"
            print(f"{name:>12} {r['peak_mib']:9.0f} {r['cpu_s']:7.2f} {r['segments']:8d} "
                  f"{r['largest']:9d} {r['span']}")
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("peak_mib", "cpu_s")}
           for k, v in rows.items()}
    print(f"medians: blind {med[False]['peak_mib']:.0f} MiB, {med[False]['cpu_s']:.2f} s; "
          f"ahead {med[True]['peak_mib']:.0f} MiB, {med[True]['cpu_s']:.2f} s; ahead/blind "
          f"memory {med[True]['peak_mib'] / med[False]['peak_mib']:.2f}, "
          f"CPU {med[True]['cpu_s'] / med[False]['cpu_s']:.2f}")
    same = len({r["span"] for v in rows.values() for r in v}) == 1
    print("same span in every run" if same else "SPANS DIFFER")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3] == "1", float(sys.argv[4]))
    else:
        main()
