"""Accuracy benchmark: every model program at several tracer overheads, all bounds.

For each (program, overhead) the simulator produces a truth and a measured trace
(docs/design.md §7); the measured trace is compensated with the lower, the upper and the
fitted bound (R2f) and compared with the truth. Prints one table (markdown) of what
it measured:

  dilation %      (T_measured - T_true) / T_true
  lower %/upper % fraction of the dilation removed on total time, 1 - |T_a-T_t|/|T_m-T_t|
  fitted %        the same with --bound fitted (‡: too few observed transfers to fit,
                  the lower bound was used for messages; thread and device links
                  keep their fitted latency)
  min loc %       the worst location's removed fraction (better bound)
  err p50/p99/max per-record absolute error of the better bound, microseconds
  bracketed %     receives/collective exits whose truth lies in [lower, upper]
  total in        whether the true total time lies in [lower, upper]
  viol            happened-before violations in all three outputs (must be 0)

Usage: python benchmarks/accuracy.py [--ranks 8] [--overheads 0.2us,1us,5us] [--seed 0]
       [--programs rma_fence,rma_pscw,...] [--worlds jitter,protocol,...] [--platform FILE.json]

The rows "PROGRAM (WORLD)" run the program in a harder world
(compensate/simulate/world.py): latency jitter, an eager/rendezvous switch, a
contended link, clock offsets between ranks.

``--platform``: the ``network`` entry of this platform file (a platform network
model) is given to the fitted bound; the overheads and copy costs stay the
simulator's. ``benchmarks/simulated-network.json`` holds the simulator's own
network (1 µs + bytes / 5 GB/s). Its ``rma`` entry (the MPI library's one-sided
protocol, R10 "Release after completion") is given to every bound;
``benchmarks/simulated-platform.json`` has both entries as the simulator has them
(its MPI_Win_unlock releases only after the fetched results came back).
"""

from __future__ import annotations

import argparse
import dataclasses
import platform as pyplatform
import sys
import time

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import FitOutcome, clamp_check, try_fit
from compensate.matching import match
from compensate.platform import Platform, parse_duration
from compensate.simulate import SimResult, simulate
from compensate.simulate.hybrid import HYBRID_PROGRAMS, HYBRID_RANKS
from compensate.simulate.programs import PROGRAMS
from compensate.simulate.validation import Accuracy, accuracy, evaluate
from compensate.simulate.world import simulate_in

# Rendezvous variants: every message above the eager limit is synchronous.
RENDEZVOUS = [("ring", 512), ("pipeline", 4096)]
# A harder world (compensate/simulate/world.py): jitter, an eager/rendezvous switch,
# a contended link, clock offsets between ranks; ground truth that is not the fit's
# own model.
WORLD_RUNS = [("stencil", "jitter"), ("mixed", "jitter"), ("mixed", "protocol"),
              ("pingpong", "protocol"), ("stencil", "contended"), ("mixed", "contended"),
              ("stencil", "skewed"), ("mixed", "skewed")]
FALLBACK_NOTE = ("‡ fitted: too few observed transfers to fit, the lower bound was used "
                 "(thread and device links: their fitted latency)")


REJECTED_NOTE = ("† fitted: the trace's fit was rejected as implausible (fit.rejected: "
                 "docs/accuracy.md); the platform model or the lower bound stood in")


def fitted_accuracy(sim: SimResult, eager_limit: int | None = None,
                    network: tuple[float, float] | None = None) -> tuple[Accuracy, str]:
    """Accuracy of ``--bound fitted`` on the measured trace, as the command line
    does it (a rejected fit replaced by the platform model or the lower bound), and
    the row's mark: ‡ fell back to the lower bound, † the trace's fit was rejected
    (fit.rejected); ``network`` a platform network model (latency s, seconds per
    byte) for the fit."""
    m = match(sim.measured, eager_limit=eager_limit)
    plat = dataclasses.replace(sim.platform, network=network) if network else sim.platform
    outcome = try_fit(sim.measured, m, plat)
    r = compensate(sim.measured, sim.platform, _options(outcome), m)
    again = clamp_check(outcome, r.stats.p2p_cases, network)  # as the command does
    if again is not None:
        outcome = again
        r = compensate(sim.measured, sim.platform, _options(outcome), m)
    mark = " ‡" if outcome.fit is None else ""
    if outcome.rejected:
        mark += " †"
    return accuracy(sim.truth, sim.measured, r.trace), mark


def _options(outcome: FitOutcome) -> EngineOptions:
    """The engine's options for ``--bound fitted`` given the fit's outcome."""
    fit = outcome.fit
    return (EngineOptions("fitted", network_time=fit, link_latency=outcome.links) if fit
            else EngineOptions("lower", fit_links=True, link_latency=outcome.links))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--overheads", default="0.2us,1us,5us")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--programs", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--worlds", default=None,
                    help="only the harder worlds given (comma-separated: jitter,protocol,"
                         "contended,skewed; default: every row)")
    ap.add_argument("--platform", metavar="FILE.json",
                    help="give its network entry (a platform network model) to the fitted bound")
    args = ap.parse_args(argv)
    given = Platform.load(args.platform) if args.platform else None
    network = given.network if given else None
    release = given.rma_release if given else None
    overheads = [parse_duration(x) for x in args.overheads.split(",")]
    start = time.monotonic()
    print(f"# accuracy benchmark: ranks={args.ranks} seed={args.seed} "
          f"python {pyplatform.python_version()} on {pyplatform.machine()}"
          + (f"; platform network model {network} from {args.platform}" if network else "")
          + (f"; rma release {release}" if release else ""))
    print()
    print("| program | ranks | overhead | records | dilation % | lower % | upper % | fitted % | "
          "min loc % | err p50 µs | err p99 µs | err max µs | bracketed % | total in | viol |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|---:|")
    fallbacks = rejections = 0
    runs = [(name, name, None, None) for name in PROGRAMS]
    runs += [(f"{name} (rendezvous > {limit} B)", name, limit, None)
             for name, limit in RENDEZVOUS]
    runs += [(name, name, None, None) for name in HYBRID_PROGRAMS]
    runs += [(f"{name} ({world})", name, None, world) for name, world in WORLD_RUNS]
    if args.programs:
        runs = [r for r in runs if r[1] in args.programs.split(",")]
    if args.worlds is not None:
        runs = [r for r in runs if r[3] in args.worlds.split(",")]
    for label, name, limit, world in runs:
        ranks = 2 if name == "pingpong" else args.ranks
        if name in HYBRID_PROGRAMS and HYBRID_RANKS[name] == 1:
            ranks = 1  # one process with threads or streams
        for o in overheads:
            if world is None:
                sim = simulate(name, ranks=ranks, overhead=o, seed=args.seed, quantize=True,
                               eager_limit=limit)
            else:
                sim = simulate_in(world, name, ranks=ranks, overhead=o, seed=args.seed,
                                  quantize=True)
            if release:
                sim = dataclasses.replace(
                    sim, platform=dataclasses.replace(sim.platform, rma_release=release))
            ev = evaluate(sim.truth, sim.measured, sim.platform, eager_limit=limit)
            lo, up = ev["lower"], ev["upper"]
            best = lo if lo.removed_total >= up.removed_total else up
            br = ev["bracket"]
            fi, mark = fitted_accuracy(sim, limit, network)
            fallbacks += "‡" in mark
            rejections += "†" in mark
            print(f"| {label} | {ranks} | {o * 1e6:g} µs | {sim.measured.record_count} | "
                  f"{100 * lo.dilation:.1f} | {100 * lo.removed_total:.1f} | "
                  f"{100 * up.removed_total:.1f} | "
                  f"{100 * fi.removed_total:.1f}{mark} | "
                  f"{100 * best.removed_per_location_min:.1f} | "
                  f"{1e6 * best.error_p50:.3f} | {1e6 * best.error_p99:.3f} | "
                  f"{1e6 * best.error_max:.3f} | {100 * br['fraction']:.1f} | "
                  f"{'yes' if br['total_time_bracketed'] else 'no'} | "
                  f"{lo.violations + up.violations + fi.violations} |")
            sys.stdout.flush()
    print()
    if fallbacks:
        print(FALLBACK_NOTE)
    if rejections:
        print(REJECTED_NOTE)
    print(f"\nbenchmark time: {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
