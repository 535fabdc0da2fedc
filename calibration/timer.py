"""The clock every calibration interval is timed with: its read cost and resolution.

All intervals are taken with ``time.perf_counter_ns`` (monotonic, integer
nanoseconds, no float rounding). An interval ``t1 - t0`` contains, besides the
work, the part of one clock read that lies between the two sampling instants;
that is what ``back-to-back`` pairs ``t0 = clock(); t1 = clock()`` measure, and
what :meth:`TimerCalibration.correct` subtracts from every timed interval.

Long samples (the writer probe's, milliseconds each) are also timed with the
thread's CPU clock, ``time.thread_time_ns``: on a shared machine the scheduler
hands the CPU to other processes every few milliseconds, which inflates wall
time but not the CPU time of the probing thread. Its read cost is measured the
same way and subtracted by :meth:`TimerCalibration.correct_cpu`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from calibration.stats import Summary, summarize

CLOCK_NAME = "time.perf_counter_ns"
CPU_CLOCK_NAME = "time.thread_time_ns"


@dataclass(frozen=True)
class TimerCalibration:
    """Cost of one clock read (seconds), as seen inside an interval, and resolution."""

    read: Summary            # back-to-back pair difference, seconds
    call: float              # one call in a tight loop, seconds (includes loop overhead)
    resolution: float        # what the OS declares, seconds
    observed_min_step: float     # smallest positive back-to-back difference, seconds
    cpu_read: Summary | None = None  # the thread CPU clock's read cost, seconds

    @property
    def read_ns(self) -> float:
        """Median read cost in nanoseconds (what is subtracted from intervals)."""
        return self.read.median * 1e9

    def correct(self, elapsed_ns: float) -> float:
        """An interval in ns with the clock's own read cost removed (never below 0)."""
        return max(float(elapsed_ns) - self.read_ns, 0.0)

    def correct_cpu(self, elapsed_ns: float) -> float:
        """A thread-CPU-time interval in ns with that clock's read cost removed."""
        cost = self.cpu_read.median * 1e9 if self.cpu_read is not None else 0.0
        return max(float(elapsed_ns) - cost, 0.0)

    def to_dict(self) -> dict:
        """Platform-file form (key ``timer``)."""
        return {"clock": CLOCK_NAME,
                "read_seconds": self.read.median,
                "read_iqr": [self.read.q1, self.read.q3],
                "read_ci95": [self.read.ci_low, self.read.ci_high],
                "read_samples": self.read.n,
                "call_seconds": self.call,
                "resolution_seconds": self.resolution,
                "observed_min_step_seconds": self.observed_min_step,
                "cpu_clock": CPU_CLOCK_NAME,
                "cpu_read_seconds": self.cpu_read.median if self.cpu_read else None,
                "cpu_resolution_seconds": float(time.get_clock_info("thread_time").resolution)}


def _pair_differences(pairs: int, clock=time.perf_counter_ns) -> np.ndarray:
    """``pairs`` back-to-back read differences of ``clock`` in ns."""
    out = np.empty(pairs, dtype=np.int64)
    for i in range(pairs):
        a = clock()
        b = clock()
        out[i] = b - a
    return out


def _loop_call_ns(calls: int, rounds: int = 5) -> float:
    """Median over ``rounds`` of the per-call time of ``calls`` reads in a loop, ns."""
    clock = time.perf_counter_ns
    per_call = []
    for _ in range(rounds):
        t0 = clock()
        for _ in range(calls):
            clock()
        per_call.append((clock() - t0) / calls)
    return float(np.median(per_call))


def calibrate_timer(pairs: int = 20000, n_resamples: int = 1999, seed: int = 0) -> TimerCalibration:
    """Measure the clock's read cost and resolution (about 10 ms per 20000 pairs)."""
    if pairs < 3:
        raise ValueError("need at least 3 timer pairs")
    _pair_differences(min(pairs, 1000))  # warm up the interpreter path
    diffs = _pair_differences(pairs)
    positive = diffs[diffs > 0]
    observed = float(positive.min()) * 1e-9 if positive.size else float("nan")
    read = summarize(diffs * 1e-9, n_resamples, seed)
    call = _loop_call_ns(max(pairs // 4, 100)) * 1e-9
    resolution = float(time.get_clock_info("perf_counter").resolution)
    cpu = _pair_differences(max(pairs // 10, 3), time.thread_time_ns)
    return TimerCalibration(read=read, call=call, resolution=resolution,
                            observed_min_step=observed,
                            cpu_read=summarize(cpu * 1e-9, n_resamples, seed))
