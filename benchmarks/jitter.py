"""Noisy-network benchmark for ``--bound fitted`` .

Every message of the simulated network gets an exponentially distributed extra
delay of mean J (``compensate.simulate.Network(jitter=J)``); the truth and the
measured run draw the same delay for the same message. For each program, jitter
and seed the measured trace is compensated with the lower, the upper and the
fitted bound, and the table gives the fit and the total-time error of each bound
(|T_approx - T_true|, microseconds):

  fit         fitted network time of the program's message size
  observed    observed transfers the fit used
  MAD         residual spread of the fit
  outside     receives/collective exits where fitted lies outside [lower, upper]
              (±1 tick; must be 0)
  best        fitted error <= the better bound's error (+1 tick)

Usage: python benchmarks/jitter.py [--seeds 0] [--jitters 0.2us,1us,5us]
                                   [--programs stencil,imbalanced,pipeline,collectives]
"""

from __future__ import annotations

import argparse
import platform as pyplatform
import sys
import time

import numpy as np

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import try_fit
from compensate.matching import match
from compensate.model import COLL_END, RECV, Trace
from compensate.platform import parse_duration
from compensate.simulate import Network, simulate

PROGRAMS = ("stencil", "imbalanced", "pipeline", "collectives")


def _relative(trace: Trace) -> dict[int, np.ndarray]:
    t0 = min(int(e.time[0]) for e in trace.events.values() if len(e))
    return {loc: e.time - t0 for loc, e in trace.events.items()}


def outside_envelope(fitted: Trace, lower: Trace, upper: Trace, tol: int = 1) -> int:
    """Dependent records (receives, collective exits) of ``fitted`` outside the
    [lower, upper] interval of the same record, ± ``tol`` ticks."""
    f, lo, up = _relative(fitted), _relative(lower), _relative(upper)
    outside = 0
    for loc, ev in fitted.events.items():
        dep = (ev.kind == RECV) | (ev.kind == COLL_END)
        a = np.minimum(lo[loc][dep], up[loc][dep]) - tol
        b = np.maximum(lo[loc][dep], up[loc][dep]) + tol
        outside += int(np.count_nonzero((f[loc][dep] < a) | (f[loc][dep] > b)))
    return outside


def run_one(program: str, jitter: float, seed: int, ranks: int, overhead: float) -> dict:
    sim = simulate(program, ranks=ranks, seed=seed, overhead=overhead, quantize=True,
                   network=Network(jitter=jitter, seed=seed))
    m = match(sim.measured)
    outcome = try_fit(sim.measured, m, sim.platform)
    if outcome.fit is None:
        raise SystemExit(f"{program}: no fit ({outcome.reason})")
    out = {b: compensate(sim.measured, sim.platform, EngineOptions(b), m).trace
           for b in ("lower", "upper")}
    out["fitted"] = compensate(sim.measured, sim.platform,
                               EngineOptions("fitted", network_time=outcome.fit), m).trace
    t_true = sim.truth.span_seconds
    err = {b: abs(t.span_seconds - t_true) * 1e6 for b, t in out.items()}
    tick_us = 1e6 / sim.measured.definitions.timer_resolution
    size = int(sim.program.params.get("nbytes", sim.program.params.get("item_bytes", 0)))
    return {
        "fit_us": outcome.fit(size) * 1e6, "observed": outcome.observations,
        "mad_ns": outcome.fit.residual_spread * 1e9,
        "dilation_us": (sim.measured.span_seconds - t_true) * 1e6, "err": err,
        "outside": outside_envelope(out["fitted"], out["lower"], out["upper"]),
        "best": err["fitted"] <= min(err["lower"], err["upper"]) + tick_us,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0", help="comma list or range a-b (inclusive)")
    ap.add_argument("--jitters", default="0.2us,1us,5us")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--overhead", default="1us")
    args = ap.parse_args(argv)
    if "-" in args.seeds:
        a, b = args.seeds.split("-")
        seeds = list(range(int(a), int(b) + 1))
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
    jitters = [parse_duration(x) for x in args.jitters.split(",")]
    overhead = parse_duration(args.overhead)
    start = time.monotonic()
    print(f"# jitter benchmark: python benchmarks/jitter.py --seeds {args.seeds} "
          f"--jitters {args.jitters}; ranks={args.ranks}, {overhead * 1e6:g} us/record, "
          f"tick grid; python {pyplatform.python_version()}")
    print()
    print("| program | seed | jitter mean | fit | observed | MAD | dilation | lower | upper "
          "| fitted | outside | best |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|")
    runs = best = envelope = 0
    for program in args.programs.split(","):
        for seed in seeds:
            for j in jitters:
                r = run_one(program, j, seed, args.ranks, overhead)
                e = r["err"]
                print(f"| {program} | {seed} | {j * 1e6:g} µs | {r['fit_us']:.2f} µs | "
                      f"{r['observed']} | {r['mad_ns']:.0f} ns | {r['dilation_us']:.1f} | "
                      f"{e['lower']:.2f} | {e['upper']:.2f} | {e['fitted']:.2f} | "
                      f"{r['outside']} | {'yes' if r['best'] else 'no'} |")
                sys.stdout.flush()
                runs += 1
                best += r["best"]
                envelope += r["outside"] == 0
    print()
    print(f"fitted no worse than the better bound on total time: {best}/{runs} runs; "
          f"within [lower, upper] at every receive and collective exit: {envelope}/{runs}")
    print(f"benchmark time: {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
