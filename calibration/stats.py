"""Robust summaries of repeated measurements: median, IQR, bootstrap CI of the median.

Timing samples on a shared machine have long right tails (interrupts, other
tenants), so every calibrated number is a median with a spread, never a mean of
one run. The bootstrap confidence interval (scipy.stats.bootstrap, percentile
method) says how well the median itself is determined; the IQR says how much
single measurements scatter.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

# scipy.stats is imported where it is used: it takes ~0.5 s, and the measuring
# processes (calibration.workers) need only numpy.


def _scipy_stats():
    from scipy import stats

    return stats


#: Confidence level of every reported interval.
CONFIDENCE = 0.95
#: Above this many samples the CI of the median comes from order statistics (exact,
#: distribution-free, O(n log n)) instead of the bootstrap, whose resample matrix
#: would need n x n_resamples floats (200 000 timer pairs x 9999: 16 GB).
BOOTSTRAP_MAX_SAMPLES = 1000


@dataclass(frozen=True)
class Summary:
    """Median, quartiles, bootstrap CI of the median and sample count (seconds)."""

    median: float
    q1: float
    q3: float
    ci_low: float
    ci_high: float
    n: int

    def to_dict(self) -> dict:
        """JSON form used in the platform file: seconds, [q1, q3], [ci_low, ci_high], n."""
        return {"seconds": self.median, "iqr": [self.q1, self.q3],
                "ci95": [self.ci_low, self.ci_high], "n": self.n}


def median_rel_se(samples: np.ndarray) -> float:
    """Approximate relative standard error of the sample median.

    Uses the normal-theory formula se(median) ~ 1.2533 * sigma / sqrt(n) with
    sigma estimated robustly as IQR / 1.349; cheap enough to decide after every
    sample whether more repetitions are needed. Infinite if undefined.
    """
    x = np.asarray(samples, dtype=float)
    if x.size < 3:
        return float("inf")
    med = float(np.median(x))
    if med <= 0:
        return float("inf")
    q1, q3 = np.percentile(x, [25, 75])
    sigma = (q3 - q1) / 1.349
    return float(1.2533 * sigma / np.sqrt(x.size) / med)


def order_statistic_median_ci(samples: np.ndarray) -> tuple[float, float]:
    """95 % distribution-free confidence interval of the median from order statistics.

    The number of samples below the median is Binomial(n, 1/2); the j-th and k-th
    smallest values with j, k at its 2.5 % and 97.5 % quantiles bracket the median
    with at least 95 % probability.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    _st = _scipy_stats()
    j = int(_st.binom.ppf((1 - CONFIDENCE) / 2, n, 0.5))
    k = int(_st.binom.isf((1 - CONFIDENCE) / 2, n, 0.5))
    return float(x[max(j - 1, 0)]), float(x[min(k, n - 1)])


def bootstrap_median_ci(samples: np.ndarray, n_resamples: int = 1999,
                        seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap confidence interval of the median.

    Percentile rather than BCa: BCa is undefined for the degenerate samples a
    coarse timer produces (all values equal), percentile just returns them. Above
    BOOTSTRAP_MAX_SAMPLES samples the order-statistic interval is used instead.
    """
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan")
    if x.size == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    if x.size > BOOTSTRAP_MAX_SAMPLES:
        return order_statistic_median_ci(x)
    kwargs = dict(n_resamples=n_resamples, confidence_level=CONFIDENCE,
                  method="percentile", vectorized=True, axis=-1,
                  batch=max(1, 4_000_000 // x.size))  # at most ~32 MB per resample batch
    _st = _scipy_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = _st.bootstrap((x,), np.median, rng=np.random.default_rng(seed), **kwargs)
        except TypeError:  # scipy < 1.15 spells it random_state
            res = _st.bootstrap((x,), np.median,
                                random_state=np.random.default_rng(seed), **kwargs)
    ci = res.confidence_interval
    return float(ci.low), float(ci.high)


def summarize(samples, n_resamples: int = 1999, seed: int = 0) -> Summary:
    """Median, IQR and bootstrap CI of the median of ``samples``."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    lo, hi = bootstrap_median_ci(x, n_resamples, seed)
    return Summary(float(med), float(q1), float(q3), lo, hi, int(x.size))


def _median_of_medians(*groups, axis=-1):
    """The median of the groups' medians (vectorised for scipy.stats.bootstrap)."""
    return np.median(np.stack([np.median(g, axis=axis) for g in groups]), axis=0)


def summarize_groups(groups, n_resamples: int = 1999, seed: int = 0) -> Summary:
    """Like :func:`summarize` for samples from several processes: the median is the
    median of the per-process medians (one odd process cannot move it), the IQR
    that of all samples pooled, and the CI a bootstrap that resamples within each
    process (scipy.stats.bootstrap with one sample per process)."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not groups:
        raise ValueError("no samples to summarize")
    if len(groups) == 1 or min(g.size for g in groups) < 2:  # nothing to stratify
        return summarize(np.concatenate(groups), n_resamples, seed)
    pooled = np.concatenate(groups)
    q1, q3 = np.percentile(pooled, [25, 75])
    med = float(_median_of_medians(*groups))
    if all(g.size == 1 or np.all(g == g[0]) for g in groups) or \
            pooled.size > BOOTSTRAP_MAX_SAMPLES:
        lo, hi = order_statistic_median_ci(pooled)
    else:
        kwargs = dict(n_resamples=n_resamples, confidence_level=CONFIDENCE,
                      method="percentile", vectorized=True, axis=-1,
                      batch=max(1, 4_000_000 // pooled.size))
        _st = _scipy_stats()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                res = _st.bootstrap(tuple(groups), _median_of_medians,
                                    rng=np.random.default_rng(seed), **kwargs)
            except TypeError:  # scipy < 1.15 spells it random_state
                res = _st.bootstrap(tuple(groups), _median_of_medians,
                                    random_state=np.random.default_rng(seed), **kwargs)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Summary(med, float(q1), float(q3), lo, hi, int(pooled.size))


#: Fewest independent rounds whose order-statistic interval of the median reaches
#: CONFIDENCE: with 6, [min, max] covers the median with 1 - 2 / 2**6 = 96.9 %.
MIN_ROUNDS = 6


def summarize_rounds(groups, n_resamples: int = 1999, seed: int = 0) -> Summary:
    """Like :func:`summarize_groups`, for groups that are independent *rounds* of
    one measurement (here: fresh processes): the median is the median of the
    round medians, the IQR that of all samples pooled, and the CI the
    distribution-free order-statistic interval of the median computed over the
    round medians, so it describes how much a whole round varies -- what a repeated
    run sees -- rather than the noise within one round. With fewer than
    MIN_ROUNDS rounds that interval would not reach 95 %; the CI is then the
    within-round one of :func:`summarize_groups` (and says less)."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if len(groups) < MIN_ROUNDS:
        return summarize_groups(groups, n_resamples, seed)
    medians = np.array([np.median(g) for g in groups])
    pooled = np.concatenate(groups)
    q1, q3 = np.percentile(pooled, [25, 75])
    lo, hi = order_statistic_median_ci(medians)
    return Summary(float(np.median(medians)), float(q1), float(q3), lo, hi, int(pooled.size))
