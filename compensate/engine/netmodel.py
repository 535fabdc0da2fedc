"""The network model of ``--bound fitted`` (docs/compensation.md, R2f) and how it
is fitted and judged: :class:`NetworkFit`, the lower-envelope fit
(:func:`fit_envelope`) and the plausibility rule (:func:`implausible`).
:mod:`compensate.engine.fit` observes the transfers and decides what to use.

Why a module of its own: the model and its fitting are pure numbers (no trace, no
matching), the observing of transfers is the trace's side; together they were
one module too long to read.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NetworkFit:
    """``network(s) = latency + s · per_byte`` seconds, fitted to observed transfers."""

    latency: float  # seconds, >= 0
    per_byte: float  # seconds per byte, >= 0
    observations: int
    residual_spread: float  # median absolute deviation of the residuals, seconds
    size_min: int  # smallest observed message, bytes
    size_max: int  # largest observed message, bytes
    distinct_sizes: int
    #: "linear" | "constant" (a single message size: latency only) | "piecewise"
    #: (a protocol switch: above ``threshold`` bytes ``latency2 + s · per_byte2``) |
    #: "platform slope" | "platform" (the platform network model: module docstring)
    model: str
    threshold: int | None = None  # bytes: the last size of the first piece
    latency2: float = 0.0
    per_byte2: float = 0.0

    @property
    def bandwidth(self) -> float:
        """Bytes per second (``inf`` when the fit has no per-byte cost)."""
        return 1.0 / self.per_byte if self.per_byte > 0 else math.inf

    def pieces(self) -> list[tuple[float, float]]:
        """``(latency, per_byte)`` of each piece (one, or two for "piecewise")."""
        if self.threshold is None:
            return [(self.latency, self.per_byte)]
        return [(self.latency, self.per_byte), (self.latency2, self.per_byte2)]

    def __call__(self, nbytes: int) -> float:
        """Network time in seconds of an ``nbytes`` message (the engine's hook)."""
        if self.threshold is not None and nbytes > self.threshold:
            return self.latency2 + float(nbytes) * self.per_byte2
        return self.latency + float(nbytes) * self.per_byte

    def to_dict(self) -> dict:
        """JSON-ready description; ``bandwidth_Bps`` is null when not measurable."""
        bw = self.bandwidth
        extra = {} if self.threshold is None else {"above": {
            "threshold_bytes": self.threshold, "latency_s": self.latency2,
            "bandwidth_Bps": 1.0 / self.per_byte2 if self.per_byte2 > 0 else None,
            "per_byte_s": self.per_byte2}}
        return extra | {
            "model": self.model,
            "latency_s": self.latency,
            "bandwidth_Bps": bw if math.isfinite(bw) else None,
            "per_byte_s": self.per_byte,
            "observations": self.observations,
            "residual_spread_s": self.residual_spread,
            "sizes_bytes": [self.size_min, self.size_max],
            "distinct_sizes": self.distinct_sizes,
        }


#: A network's latency lies in this range, seconds: no interconnect or memory copy
#: answers in less than 10 ns, and a transfer that needs a millisecond before its
#: first byte arrives is a run's waiting, not its network.
LATENCY_RANGE = (10e-9, 1e-3)
#: ... and its bandwidth in this range, bytes per second (10 MB/s to 1 TB/s).
BANDWIDTH_RANGE = (10e6, 1e12)
#: A fit overridden by [lower, upper] on more than this share of its uses is no
#: model of the network the run had (``m2_fitted_overridden``: the modelled
#: transfer below the least one or above the measured interval; a receiver that
#: came after the modelled arrival agrees with the model and does not count).
CLAMPED_MAJORITY = 0.5


def implausible(fit: NetworkFit) -> str | None:
    """Why ``fit`` is no model of a physical network, or None if it may be one:
    its latency outside :data:`LATENCY_RANGE`, its bandwidth (a linear fit's)
    outside :data:`BANDWIDTH_RANGE`, or the residuals' spread larger than the
    latency (the model explains less than the noise around it). The platform's own
    model (``"platform"``) is a measurement and is not judged."""
    if fit.model == "platform":
        return None
    lo, hi = LATENCY_RANGE
    blo, bhi = BANDWIDTH_RANGE
    for i, (latency, per_byte) in enumerate(fit.pieces()):
        if not lo <= latency <= hi:
            return (f"fitted latency {latency:.3g} s outside the physical range "
                    f"{lo:g}-{hi:g} s")
        if fit.model in ("linear", "piecewise"):
            bandwidth = 1.0 / per_byte if per_byte > 0 else math.inf
            # faster than 1 TB/s is judged only where the sizes could show it: the
            # largest observed message at 1 TB/s takes a tenth of the latency or
            # more (the per-byte cost of 64-byte messages is below any timer)
            top = fit.size_max if i or fit.threshold is None else fit.threshold
            shows = top / bhi >= 0.1 * latency
            if bandwidth < blo or (shows and bandwidth > bhi):
                return (f"fitted bandwidth {bandwidth:.3g} B/s outside the physical range "
                        f"{blo:g}-{bhi:g} B/s")
    if fit.residual_spread > fit.latency:
        return (f"residual spread {fit.residual_spread:.3g} s larger than the fitted "
                f"latency {fit.latency:.3g} s")
    return None


#: Upper ends of the size classes of :func:`size_classes`, bytes (the last: open).
SIZE_CLASS_EDGES = (1, 64, 4096, 256 * 1024)
SIZE_CLASS_NAMES = ("0 B", "1-63 B", "64 B-4 KiB", "4-256 KiB", ">=256 KiB")


def size_classes(sizes: np.ndarray) -> dict[str, int]:
    """How many observations fall in each size class (every class listed, empty
    ones with 0): where the fit's latency and its slope were measured."""
    counts = np.bincount(np.searchsorted(SIZE_CLASS_EDGES, np.asarray(sizes), side="right"),
                         minlength=len(SIZE_CLASS_NAMES))
    return dict(zip(SIZE_CLASS_NAMES, (int(c) for c in counts), strict=True))


# -- fitting ------------------------------------------------------------------------

def _mad(x: np.ndarray) -> float:
    """Median absolute deviation (unscaled)."""
    return float(np.median(np.abs(x - np.median(x)))) if x.size else 0.0


def _robust_start(u: np.ndarray, y: np.ndarray, groups: int = 300) -> np.ndarray:
    """Theil–Sen line through group medians: one group per message size, or, with
    more sizes than ``groups``, that many equal-count groups of neighbouring sizes.
    A start that outliers cannot drag, and cheap for millions of observations."""
    order = np.argsort(u, kind="stable")
    us, ys = u[order], y[order]
    if np.unique(us).size <= groups:
        cuts = np.flatnonzero(np.diff(us)) + 1
    else:
        cuts = np.linspace(0, us.size, groups + 1).round().astype(np.int64)[1:-1]
    gx = np.array([np.median(g) for g in np.split(us, cuts)])
    gy = np.array([np.median(g) for g in np.split(ys, cuts)])
    from scipy.stats import theilslopes  # ~0.3 s to import: only runs that fit pay it
    slope, icpt, _, _ = theilslopes(gy, gx)
    return np.array([max(float(icpt), 0.0), max(float(slope), 0.0)])


def fit_line(sizes: np.ndarray, seconds: np.ndarray, tick: float = 1e-9) -> tuple[float, float]:
    """Robust ``seconds ≈ latency + sizes · per_byte`` with both parameters >= 0.

    Soft-L1 least squares (scipy), on rescaled variables so that microseconds and
    megabytes are both of order one, started from a Theil–Sen line through
    per-size medians. The loss's scale is the residuals' spread (1.4826 · MAD, at
    least one timer tick), re-estimated once, so that points further off than the
    typical residual lose their pull.
    """
    x = sizes.astype(np.float64)
    xs = max(float(x.max()), 1.0)
    ys = max(float(np.median(np.abs(seconds))), tick)
    u, y = x / xs, seconds / ys
    p = _robust_start(u, y)
    from scipy.optimize import least_squares  # imported where used (start-up time)
    for _ in range(2):
        scale = max(1.4826 * _mad(y - (p[0] + p[1] * u)), tick / ys)
        p = least_squares(lambda q: q[0] + q[1] * u - y, p, loss="soft_l1", f_scale=scale,
                          bounds=([0.0, 0.0], [np.inf, np.inf])).x
    return float(p[0]) * ys, float(p[1]) * ys / xs


#: The envelope's quantile: per size group the observation below which this
#: share lies. Every observation is at least the network time (a receiver that
#: came late only adds to it, a flush or a preemption too), so the lower part of
#: each group is the network; a low quantile rather than the minimum, so that a
#: few too-early points (timer rounding, clocks aligned only approximately) do
#: not set it.
ENVELOPE_QUANTILE = 0.2
#: A second line (a protocol switch: eager to rendezvous) is taken only if it
#: leaves less than this share of the single line's error on the envelope.
PIECEWISE_GAIN = 0.25
#: ... and only where one line misses the envelope by more than this share of its
#: values (timer rounding alone must not split an exact line)
PIECEWISE_MISFIT = 0.02


def _envelope(sizes: np.ndarray, seconds: np.ndarray, pairs: np.ndarray | None = None,
              groups: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """The lower envelope: per message size (or, with more sizes than ``groups``,
    per group of neighbouring sizes) its median size and the
    :data:`ENVELOPE_QUANTILE` quantile of its times (:func:`_group_floor`).
    ``sizes`` sorted, ``pairs`` in the same order (None: not known)."""
    if np.unique(sizes).size <= groups:
        cuts = np.flatnonzero(np.diff(sizes)) + 1
    else:
        cuts = np.linspace(0, sizes.size, groups + 1).round().astype(np.int64)[1:-1]
    gx = np.array([np.median(g) for g in np.split(sizes.astype(np.float64), cuts)])
    if pairs is None:
        pairs = np.full(sizes.size, -1, np.int64)
    gy = np.array([_group_floor(y, p) for y, p in
                   zip(np.split(seconds, cuts), np.split(pairs, cuts), strict=True)])
    return gx, gy


def _q(y: np.ndarray) -> float:
    return float(np.quantile(y, ENVELOPE_QUANTILE, method="lower"))


def _group_floor(y: np.ndarray, pairs: np.ndarray) -> float:
    """One size group's envelope value. Where processes exchanged messages both
    ways, a clock offset between them adds to one direction what it takes from the
    other: per such pair the mean of the two directions' quantiles, and the same
    quantile over the pairs (a pair whose receivers were late in both directions
    is above the network too; a process's messages to itself count as such a
    pair); else the quantile of all."""
    known = pairs >= 0
    if not known.any():
        return _q(y)
    keys, inverse = np.unique(pairs[known], return_inverse=True)
    if keys.size > 20000:  # (too many pairs to be worth it: the plain quantile)
        return _q(y)
    yk = y[known]
    floor = {int(k): _q(yk[inverse == i]) for i, k in enumerate(keys.tolist())}
    both = []
    for k, v in floor.items():
        a, b = k >> 32, k & 0xFFFFFFFF
        back = floor.get((b << 32) | a)
        if back is not None and a <= b:
            both.append((v + back) / 2)
    return _q(np.array(both)) if both else _q(y)


def _line(gx: np.ndarray, gy: np.ndarray) -> tuple[float, float]:
    """Theil–Sen line through envelope points (both parameters >= 0): the median of
    the pairwise slopes, then the median intercept; one point: a constant."""
    if gx.size < 2:
        return max(float(gy[0]), 0.0), 0.0
    i, j = np.triu_indices(gx.size, 1)
    apart = gx[j] > gx[i]
    i, j = i[apart], j[apart]
    if not i.size:
        return max(float(np.median(gy)), 0.0), 0.0
    slope = max(float(np.median((gy[j] - gy[i]) / (gx[j] - gx[i]))), 0.0)
    latency = float(np.median(gy - slope * gx))
    if latency < 0:  # through the origin's side: the least slope that keeps it >= 0
        latency = 0.0
    return latency, slope


def _piecewise(gx: np.ndarray, gy: np.ndarray) -> tuple[int, tuple, tuple] | None:
    """The best split of the envelope into two lines (each of >= 2 points), if it
    leaves less than :data:`PIECEWISE_GAIN` of one line's error: (index of the first
    point of the second piece, line below, line above)."""
    if gx.size < 4:
        return None

    def err(x, y, line):
        return float(np.abs(y - (line[0] + line[1] * x)).sum())

    one = err(gx, gy, _line(gx, gy))
    if one <= PIECEWISE_MISFIT * float(np.abs(gy).sum()):  # one line fits well enough
        return None
    best = None
    for k in range(2, gx.size - 1):
        lo, hi = _line(gx[:k], gy[:k]), _line(gx[k:], gy[k:])
        e = err(gx[:k], gy[:k], lo) + err(gx[k:], gy[k:], hi)
        if best is None or e < best[0]:
            best = (e, k, lo, hi)
    if best is None or not best[0] < PIECEWISE_GAIN * one:
        return None
    return best[1], best[2], best[3]


def _without_offsets(resid: np.ndarray, pairs: np.ndarray | None) -> np.ndarray:
    """``resid`` less the clock offset between processes that exchanged messages
    both ways: half the difference of the two directions' median residuals (an
    offset adds to one direction what it takes from the other)."""
    if pairs is None or not (pairs >= 0).any():
        return resid
    out = resid.copy()
    keys = np.unique(pairs[pairs >= 0]).tolist()
    if len(keys) > 20000:
        return resid
    med = {k: float(np.median(resid[pairs == k])) for k in keys}
    for k in keys:
        back = med.get(((k & 0xFFFFFFFF) << 32) | (k >> 32))
        if back is not None:
            out[pairs == k] -= (med[k] - back) / 2
    return out


def _lower_spread(resid: np.ndarray) -> float:
    """The residual spread of a lower-envelope fit: the median absolute residual of
    the lower half of the observations (the upper half holds what came on top of
    the network: late receivers, waits), 0 for none."""
    if not resid.size:
        return 0.0
    low = resid[resid <= np.median(resid)]
    return float(np.median(np.abs(low)))


def fit_envelope(sizes: np.ndarray, seconds: np.ndarray,
                 pairs: np.ndarray | None = None) -> NetworkFit:
    """The network model of observed transfers (``sizes`` bytes, ``seconds``, per
    observation its processes ``pairs`` or None; at least one).

    A lower-envelope fit (:func:`_envelope`): a line through the low quantile of
    each size group (Theil–Sen), two lines where the envelope breaks (an eager /
    rendezvous switch: :func:`_piecewise`); one size: that quantile as a constant.
    In a fixed order: the same fit however the observations were collected."""
    n = int(sizes.size)
    order = np.lexsort((seconds, sizes))
    sizes, seconds = sizes[order], seconds[order]
    pairs = pairs[order] if pairs is not None else None
    gx, gy = _envelope(sizes, seconds, pairs)
    distinct = int(np.unique(sizes).size)
    common = (n, 0.0, int(sizes[0]), int(sizes[-1]), distinct)
    if distinct < 2:
        fit = NetworkFit(max(float(gy[0]), 0.0), 0.0, *common, "constant")
    elif (split := _piecewise(gx, gy)) is not None:
        k, lo, hi = split
        threshold = int(sizes[np.searchsorted(sizes, gx[k], side="left") - 1])
        fit = NetworkFit(lo[0], lo[1], *common, "piecewise", threshold, hi[0], hi[1])
    else:
        latency, per_byte = _line(gx, gy)
        fit = NetworkFit(latency, per_byte, *common, "linear")
    resid = seconds - np.array([fit(int(s)) for s in np.unique(sizes)])[
        np.searchsorted(np.unique(sizes), sizes)]
    resid = _without_offsets(resid, pairs)
    return dataclasses.replace(fit, residual_spread=_lower_spread(resid))
