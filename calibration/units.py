"""Human-readable sizes and durations for tables and messages."""

from __future__ import annotations

import math


def fmt_bytes(n: float) -> str:
    """64 B, 1.5 KiB, 64 MiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{int(n)} B"


def fmt_seconds(s: float) -> str:
    """A duration with a unit that keeps 3-4 significant digits: 1.23 µs, 45.6 ms."""
    if s is None or not math.isfinite(s):
        return "n/a"
    if s == 0:
        return "0 ns"
    a = abs(s)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if a >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-9:.3g} ns"
