"""External tracer probe: per-record overhead of *your* tracer, from a microbenchmark.

The user supplies two commands with ``{n}`` standing for the iteration count:
the microbenchmark built with the tracer (e.g. Score-P) and the same program
built without it. Both run at several ``n``, interleaved and repeated; a least-
squares line ``time = a + slope * n`` is fitted to each (scipy.stats.linregress,
which also gives the slope's standard error). Start-up, finalisation and other
per-run constants land in the intercept, so

    overhead per record = (slope_instrumented - slope_baseline) / K

with ``K`` the records one iteration writes (an instrumented empty-function call
writes an Enter and a Leave: K = 2), and standard error
``sqrt(se_i**2 + se_b**2) / K``.

Time is either the wall time of the process (``timing="wall"``) or the last
number the program prints on stdout (``timing="stdout"``; calibration/microbench.c
prints its loop time), which leaves out the tracer's trace write-out at exit.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from calibration.stats import _scipy_stats
from calibration.timer import TimerCalibration

TIMINGS = ("wall", "stdout")
DEFAULT_NS = (100_000, 200_000, 300_000, 400_000, 500_000)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
Progress = Callable[[float, str], None]


class ProbeError(Exception):
    """A command could not be run or its output not be used (one-line message)."""


@dataclass(frozen=True)
class ExternalSettings:
    """Commands (with ``{n}``), records per iteration, iteration counts, repetitions."""

    command: str
    baseline: str
    events_per_iteration: float
    ns: tuple[int, ...] = DEFAULT_NS
    repeats: int = 5
    timing: str = "wall"
    shell: bool = False
    timeout: float | None = 600.0
    seed: int = 0

    def check(self) -> None:
        """ValueError with a one-line reason if the settings cannot work."""
        for name, cmd in (("--command", self.command), ("--baseline", self.baseline)):
            if "{n}" not in cmd:
                raise ValueError(f"{name} must contain {{n}} (the iteration count), "
                                 f"e.g. \"./microbench {{n}}\"")
        if not self.events_per_iteration > 0:
            raise ValueError("--events-per-iteration must be > 0")
        if any(n < 1 for n in self.ns) or len(set(self.ns)) < 2:
            raise ValueError("need at least two different iteration counts >= 1")
        if self.repeats < 1 or len(self.ns) * self.repeats < 3:
            raise ValueError("need at least 3 runs per command (iteration counts x repeats)")
        if self.timing not in TIMINGS:
            raise ValueError(f"--timing must be one of {', '.join(TIMINGS)}")


@dataclass(frozen=True)
class Fit:
    """A straight line seconds = intercept + slope * n, with the slope's standard error."""

    slope: float
    slope_se: float
    intercept: float
    rvalue: float
    points: int
    medians: dict[int, float] = field(default_factory=dict)  # n -> median seconds

    def to_dict(self) -> dict:
        return {"slope_seconds_per_iteration": self.slope, "slope_stderr": self.slope_se,
                "intercept_seconds": self.intercept, "r": self.rvalue, "runs": self.points,
                "median_seconds_by_n": {str(k): v for k, v in self.medians.items()}}


@dataclass(frozen=True)
class ExternalResult:
    """Overhead per record with its standard error and 95 % confidence interval."""

    settings: ExternalSettings
    instrumented: Fit
    baseline: Fit
    overhead: float
    stderr: float
    ci95: tuple[float, float]

    @property
    def resolved(self) -> bool:
        """True when the overhead is positive and at least twice its standard error."""
        return self.overhead > 0 and self.overhead > 2 * self.stderr

    def to_dict(self) -> dict:
        """Platform-file form (key ``external_probe``)."""
        s = self.settings
        return {"command": s.command, "baseline": s.baseline,
                "events_per_iteration": s.events_per_iteration, "iterations": list(s.ns),
                "repeats": s.repeats, "timing": s.timing,
                "overhead_seconds": self.overhead, "stderr_seconds": self.stderr,
                "ci95": list(self.ci95),
                "instrumented": self.instrumented.to_dict(),
                "baseline_fit": self.baseline.to_dict()}


def _command(template: str, n: int, shell: bool) -> str | list[str]:
    """The command for iteration count ``n``: a shell string or an argv list."""
    text = template.replace("{n}", str(int(n)))
    if shell:
        return text
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise ProbeError(f"cannot parse command {text!r}: {exc}") from None
    if not argv:
        raise ProbeError("empty command")
    return argv


def _last_number(text: str, cmd: str) -> float:
    """The last number in a program's stdout (its own loop time, in seconds)."""
    found = _NUMBER.findall(text)
    if not found:
        raise ProbeError(f"`{cmd}` printed no number on stdout (needed for --timing stdout)")
    return float(found[-1])


def run_once(template: str, n: int, cfg: ExternalSettings, timer: TimerCalibration) -> float:
    """Seconds one run of ``template`` at ``n`` takes (wall or self-reported)."""
    cmd = _command(template, n, cfg.shell)
    shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
    want_out = cfg.timing == "stdout"
    clock = time.perf_counter_ns
    try:
        t0 = clock()
        proc = subprocess.run(cmd, shell=cfg.shell, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE if want_out else subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=cfg.timeout, check=False)
        elapsed = timer.correct(clock() - t0) * 1e-9
    except FileNotFoundError:
        raise ProbeError(f"command not found: {shown.split()[0] if shown else shown}") from None
    except PermissionError:
        raise ProbeError(f"command not executable: {shown}") from None
    except subprocess.TimeoutExpired:
        raise ProbeError(f"`{shown}` did not finish within {cfg.timeout:g} s") from None
    if proc.returncode != 0:
        err = (proc.stderr or b"").decode(errors="replace").strip().splitlines()
        tail = f": {err[-1]}" if err else ""
        raise ProbeError(f"`{shown}` exited with status {proc.returncode}{tail}")
    if want_out:
        return _last_number((proc.stdout or b"").decode(errors="replace"), shown)
    return elapsed


def fit_line(ns: list[int], seconds: list[float]) -> Fit:
    """Least-squares line through (n, seconds) with the slope's standard error."""
    x = np.asarray(ns, dtype=float)
    y = np.asarray(seconds, dtype=float)
    res = _scipy_stats().linregress(x, y)  # imported here: see calibration.stats
    medians = {int(n): float(np.median(y[x == n])) for n in sorted(set(ns))}
    return Fit(float(res.slope), float(res.stderr), float(res.intercept), float(res.rvalue),
               int(x.size), medians)


def combine(instrumented: Fit, baseline: Fit, k: float,
            settings: ExternalSettings) -> ExternalResult:
    """Overhead per record = slope difference / K, error propagated, 95 % CI (Student t)."""
    overhead = (instrumented.slope - baseline.slope) / k
    se = float(np.hypot(instrumented.slope_se, baseline.slope_se) / k)
    dof = max(instrumented.points - 2 + baseline.points - 2, 1)
    half = float(_scipy_stats().t.ppf(0.975, dof)) * se
    return ExternalResult(settings, instrumented, baseline, float(overhead), se,
                          (float(overhead - half), float(overhead + half)))


def run_external_probe(cfg: ExternalSettings, timer: TimerCalibration,
                       progress: Progress | None = None) -> ExternalResult:
    """Run both commands at every ``n``, ``repeats`` times (interleaved), fit, combine."""
    cfg.check()
    ns = [int(n) for n in cfg.ns]
    rng = np.random.default_rng(cfg.seed)
    smallest = min(ns)
    run_once(cfg.baseline, smallest, cfg, timer)      # warm up: binaries, page cache
    run_once(cfg.command, smallest, cfg, timer)
    data: dict[str, tuple[list[int], list[float]]] = {"i": ([], []), "b": ([], [])}
    total = len(ns) * cfg.repeats
    done = 0
    for rep in range(cfg.repeats):
        for j, n in enumerate(rng.permutation(ns)):
            if progress:
                progress(done / total, f"run {done + 1}/{total} (n = {int(n):,})")
            order = ("i", "b") if (rep + j) % 2 == 0 else ("b", "i")
            for which in order:
                template = cfg.command if which == "i" else cfg.baseline
                data[which][0].append(int(n))
                data[which][1].append(run_once(template, int(n), cfg, timer))
            done += 1
    inst = fit_line(*data["i"])
    base = fit_line(*data["b"])
    return combine(inst, base, cfg.events_per_iteration, cfg)
