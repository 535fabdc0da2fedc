"""EZTrace Pthreads: the lock, barrier and create/join links compensate finds, what they
remove, and what compensating without them breaks (docs/eztrace.md, "Pthreads").

Runs ``benchmarks/eztrace/pthreads.c`` (ITERS rounds of WORK steps, a mutex-protected
sum and a pthread barrier per round, NTHREADS threads) untraced and traced by EZTrace
in alternating pairs, and for each trace prints:

* the links found (``dependencies.threads``: lock hand-offs, barrier instances,
  create/end links, lock calls left local);
* the main thread's loop (first pthread_create Enter to last pthread_join Leave)
  traced and compensated with the calibrated platform, each bound: milliseconds
  removed, removed % of this pair's dilation, violations;
* compensated with each thread's records alone (the Pthread links left out, as when
  they were not modelled) at each ``--overheads`` value: how many lock hand-offs and
  barrier instances the output inverts (an acquisition not after its release, a
  member leaving before the last one entered), and with the links.

    python benchmarks/eztrace_pthread_links.py --platform P.json [--pairs 3]
        [--args 20000 200 2] [--overheads 100ns 300ns]

``P.json`` from ``python -m calibration.eztrace P.json``. Where EZTrace or
``otf2-print`` is missing it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eztrace_realrun import (  # noqa: E402
    MPICC,
    MPIRUN,
    PROGRAMS,
    build,
    loop_span,
    missing_tool,
    run,
    seconds,
)

import compensate as c  # noqa: E402
import compensate.matching.threads as thread_matching  # noqa: E402
from compensate.matching import match  # noqa: E402
from compensate.matching.pthreads import PthreadLinks  # noqa: E402

BOUNDS = ("lower", "upper", "fitted")


def inverted(trace: c.Trace, links, out: c.Trace) -> tuple[int, int, int, int]:
    """(inverted lock hand-offs, lock links, barrier instances left early, barrier
    instances) of ``out`` against the links ``links`` of the measured ``trace``."""
    def t(loc: int, i: int) -> int:
        return int(out.events[loc].time[i])
    locks = [s for s in links.syncs if s.kind == "lock"]
    bad_locks = sum(t(*s.recv) <= t(*s.sends[0]) for s in locks)
    bad_bars = sum(min(t(loc, e) for loc, e in zip(b.locs, b.end_idx, strict=True))
                   < max(t(loc, e) for loc, e in zip(b.locs, b.begin_idx, strict=True))
                   for b in links.barriers)
    return bad_locks, len(locks), bad_bars, len(links.barriers)


def alone(trace: c.Trace, overhead: str) -> c.Trace:
    """``trace`` compensated with each thread's records alone (no Pthread link)."""
    keep = thread_matching.match_pthreads
    thread_matching.match_pthreads = lambda t: PthreadLinks()
    try:
        return c.compensate(trace, bound="lower", overhead=overhead).trace
    finally:
        thread_matching.match_pthreads = keep


def report(trace: c.Trace, where, untraced: float, platform: str, overheads: list[str]
           ) -> list[str]:
    """The lines for one traced run (module docstring)."""
    traced, _ = seconds(trace, where)
    links = match(trace).threads
    c_ = links.counts()
    lines = [f"  links: lock {c_['lock']}, barrier {c_['barrier']}, create {c_['create']}, "
             f"end {c_['end']}, lock calls left local {c_['local_locks']}, unmatched "
             f"{c_['unmatched']}; loop untraced {untraced:.4f} s, traced {traced:.4f} s"]
    for bound in BOUNDS:
        try:
            r = c.compensate(trace, bound=bound, platform=platform)
            loop, _ = seconds(r.trace, where)
            lines.append(f"  {bound:6s}: removed {1e3 * (traced - loop):.2f} ms = "
                         f"{100 * (traced - loop) / (traced - untraced):.1f} % of this "
                         f"pair's dilation, violations 0")
        except c.VerificationError as exc:
            lines.append(f"  {bound:6s}: refused, violations "
                         f"{exc.summary['verification'].get('violations')}")
    for text in overheads:
        without = inverted(trace, links, alone(trace, text))
        with_ = inverted(trace, links, c.compensate(trace, bound="lower", overhead=text).trace)
        lines.append(f"  at {text}/record, without the links: {without[0]} of {without[1]} "
                     f"hand-offs and {without[2]} of {without[3]} barriers inverted; with "
                     f"them: {with_[0]} and {with_[2]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--platform", required=True)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--args", nargs=3, default=["20000", "200", "2"],
                    metavar=("ITERS", "WORK", "NTHREADS"))
    ap.add_argument("--overheads", nargs="*", default=["100ns", "300ns"])
    a = ap.parse_args(argv)
    tool = missing_tool(MPICC, MPIRUN)
    if tool is not None:
        print(f"eztrace_pthread_links: {tool} is not installed; nothing measured")
        return 0
    p = next(p for p in PROGRAMS if p.name == "pthreads")
    p = dataclasses.replace(p, args=tuple(a.args))
    print(f"pthreads {' '.join(a.args)} (ITERS WORK NTHREADS), {a.pairs} pairs, "
          f"platform {a.platform}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exe = build(p, work, MPICC)
        for i in range(a.pairs):
            times = {}
            for traced in ((False, True) if i % 2 == 0 else (True, False)):
                cwd = work / f"{i}-{'t' if traced else 'u'}"
                cwd.mkdir()
                times[traced] = run(p, exe, traced, cwd, MPIRUN, False)[0]
            anchor = work / f"{i}-t" / "pthreads_trace" / "eztrace_log.otf2"
            trace = c.read(anchor)
            print(f"pair {i + 1}/{a.pairs}:")
            print("\n".join(report(trace, loop_span(trace, p), times[False], a.platform,
                                   a.overheads)), flush=True)
            shutil.rmtree(anchor.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
