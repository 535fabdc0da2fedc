"""How thorough a ``calibrate run`` is: quick (smoke runs and tests, about half a minute),
default (~30-60 s), thorough (publication numbers, several minutes)."""

from __future__ import annotations

from dataclasses import dataclass

from calibration.copycost import CopySettings
from calibration.overhead import WriterSettings


@dataclass(frozen=True)
class Mode:
    """Settings for the three measurements of one run."""

    name: str
    copy: CopySettings
    writer: WriterSettings
    timer_pairs: int
    n_resamples: int


MODES: dict[str, Mode] = {
    "quick": Mode(
        "quick",
        CopySettings(points_per_octave=2, rel_tol=0.05, min_samples=5, max_samples=15,
                     size_budget=0.03, fresh_min_samples=3, fresh_max_samples=5,
                     fresh_budget=0.03, batch_ns=100_000.0, n_resamples=499,
                     processes=3),
        WriterSettings(records=5_000, repetitions=12, warmup=100, n_resamples=499,
                       processes=6),
        timer_pairs=5_000, n_resamples=499),
    "default": Mode(
        "default",
        CopySettings(),
        WriterSettings(),
        timer_pairs=20_000, n_resamples=1999),
    "thorough": Mode(
        "thorough",
        CopySettings(points_per_octave=8, rel_tol=0.01, min_samples=21, max_samples=301,
                     size_budget=2.0, fresh_min_samples=21, fresh_max_samples=61,
                     fresh_budget=1.0, batch_ns=500_000.0, n_resamples=9999,
                     processes=4),
        WriterSettings(records=50_000, repetitions=30, warmup=1000, n_resamples=9999,
                       processes=10),
        timer_pairs=200_000, n_resamples=9999),
}
