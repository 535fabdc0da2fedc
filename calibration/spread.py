"""Is a calibrated constant steady enough to be written?

A constant measured on a busy machine can be off by orders of magnitude (a
ping-pong between two ranks sharing a core with two others gave a network
latency of 391 µs where quiet runs gave 1.7-8.4 µs) or flip between two answers
from run to run (the one-sided release protocol). What a run sees of that is the
spread of its own samples. Each check here turns a constant and its spread into
``None`` (steady: write it) or a :class:`Unsteady` finding, whose one-line
:meth:`Unsteady.message` names the constant, its spread and the limit, and says to
rerun on a quiet machine.

The spread of a number is its interquartile range over the repetitions divided by
its median (``(q3 - q1) / median``); a constant is refused where that exceeds
:data:`MAX_SPREAD` (a stated fraction, ``--max-spread`` on the command line). The
one-sided verdict is a choice, not a number: it is split into :data:`RMA_BLOCKS`
blocks of consecutive epochs and refused unless every block gives the same verdict.
The checks take the measurements as arguments, so that tests inject them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from calibration.units import fmt_seconds

#: Largest interquartile range, as a fraction of the median, of a constant that is
#: written (0.5: the middle half of the samples lies within +-25 % of the median).
MAX_SPREAD = 0.5
#: Blocks of consecutive epochs whose one-sided verdicts must agree.
RMA_BLOCKS = 5
#: The exit status of a refusal (calibrate's "the measurement says no").
EXIT_UNSTEADY = 4


@dataclass(frozen=True)
class Unsteady:
    """A constant too noisy to write: its name, what its spread was, the limit."""

    constant: str
    why: str

    def message(self, program: str, level: str = "error", then: str = "") -> str:
        """The one line ``program: LEVEL: CONSTANT not written: WHY; rerun on a quiet
        machine[; THEN]``."""
        return (f"{program}: {level}: {self.constant} not written: {self.why}; the machine "
                f"was too busy to measure it, rerun on a quiet machine"
                f"{'; ' + then if then else ''}")


def relative_spread(samples: Sequence[float]) -> float:
    """``(q3 - q1) / median`` of ``samples`` (inf where the median is not above 0
    or there are fewer than three samples)."""
    x = np.asarray(samples, dtype=float)
    if x.size < 3:
        return float("inf")
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else float("inf")


def check_number(constant: str, median: float, q1: float, q3: float,
                 max_spread: float = MAX_SPREAD,
                 what: str = "interquartile range") -> Unsteady | None:
    """A number given by its median and quartiles (or another interval ``what``
    around it): refused if ``(q3 - q1) / median`` exceeds ``max_spread`` (or the
    median is not above 0 while the quartiles differ)."""
    width = q3 - q1
    if median > 0 and width <= max_spread * median:
        return None
    if median <= 0 and width <= 0:
        return None  # a zero measured without scatter is a zero
    rel = f"{width / median * 100:.0f} % of" if median > 0 else "around"
    return Unsteady(constant, f"its {what} {fmt_seconds(q1)} .. {fmt_seconds(q3)} is {rel} "
                              f"its value {fmt_seconds(median)} "
                              f"(limit {max_spread * 100:.0f} %)")


def check_width(constant: str, median: float, width: float,
                max_spread: float = MAX_SPREAD) -> Unsteady | None:
    """:func:`check_number` for a median and the width of its interquartile range."""
    if median > 0 and width <= max_spread * median or median <= 0 and width <= 0:
        return None
    rel = f"{width / median * 100:.0f} % of" if median > 0 else "around"
    return Unsteady(constant, f"its interquartile range {fmt_seconds(width)} is {rel} its "
                              f"median {fmt_seconds(median)} (limit {max_spread * 100:.0f} %)")


def check_samples(constant: str, samples: Sequence[float],
                  max_spread: float = MAX_SPREAD) -> Unsteady | None:
    """:func:`check_number` on the quartiles of ``samples`` (seconds)."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        return Unsteady(constant, "no samples")
    q1, med, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    return check_number(constant, med, q1, q3, max_spread)


def check_verdicts(constant: str, verdicts: Sequence[str]) -> Unsteady | None:
    """A choice made once per block of repetitions: refused unless every block made
    the same one."""
    if len(set(verdicts)) <= 1:
        return None
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    said = ", ".join(f"{v} in {n}" for v, n in counts.items())
    return Unsteady(constant, f"the {len(verdicts)} blocks of the run disagree ({said}; "
                              f"every block must agree)")


#: How far this shared machine's speed drifts between two runs a minute apart,
#: beyond what one run's interval shows (docs/calibration.md, "Run-to-run
#: variation"): each run's per-record interval is widened to at least this
#: fraction of its median before two runs are compared.
HOST_DRIFT = 0.10
#: Largest ratio of two runs' warm copy times at one size that still agrees.
COPY_RATIO = 2.0


def _widened(o: dict, drift: float) -> tuple[float, float]:
    """``o``'s 95 % CI, widened to at least ``±drift`` of its median."""
    m = o["seconds"]
    return min(o["ci95"][0], m * (1 - drift)), max(o["ci95"][1], m * (1 + drift))


def disagreements(a: dict, b: dict, drift: float = HOST_DRIFT,
                  copy_ratio: float = COPY_RATIO) -> list[str]:
    """Where two platform files written by ``calibrate run`` disagree beyond their
    spreads (empty where they agree): the writer probe's per-record intervals, each
    widened to ``±drift`` of its median, must overlap; at least 60 % of the copy
    sizes must be resolved in both; the warm copy medians at every size both list
    must lie within ``copy_ratio`` of each other."""
    found = []
    oa, ob = a["writer_probe"]["event_overhead"], b["writer_probe"]["event_overhead"]
    (lo_a, hi_a), (lo_b, hi_b) = _widened(oa, drift), _widened(ob, drift)
    if not (lo_a <= hi_b and lo_b <= hi_a):
        found.append(f"event_overhead {fmt_seconds(oa['seconds'])} [{fmt_seconds(lo_a)} .. "
                     f"{fmt_seconds(hi_a)}] vs {fmt_seconds(ob['seconds'])} "
                     f"[{fmt_seconds(lo_b)} .. {fmt_seconds(hi_b)}]")
    ta = {e["bytes"]: e["seconds"] for e in a["copy_time"]}
    tb = {e["bytes"]: e["seconds"] for e in b["copy_time"]}
    common = sorted(set(ta) & set(tb))
    if len(common) < 0.6 * max(len(ta), len(tb)):
        found.append(f"only {len(common)} copy sizes resolved in both "
                     f"({len(ta)} and {len(tb)})")
    for size in common:
        x, y = ta[size], tb[size]
        if max(x, y) > copy_ratio * min(x, y):
            found.append(f"copy of {size} B: {fmt_seconds(x)} vs {fmt_seconds(y)}")
    return found
