"""Platform constants: per-record tracer overhead ``O(kind)`` and buffer copy cost ``C(s)·s``.

The platform file is JSON (documented in docs/platform-file.md)::

    {"format": 1,
     "event_overhead": 1e-6,                       # seconds per record
     "event_overhead_by_kind": {"Metric": 2e-6},   # optional, OTF2 record kind -> seconds
     "copy_time": [{"bytes": 64, "seconds": 2e-8}, ...]}

Unknown keys are ignored so that calibration can add information freely.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compensate.model import KIND_CODE, KIND_NAMES

SUPPORTED_FORMATS = (1,)


class PlatformError(Exception):
    """A platform file or overhead value that cannot be used (one-line message)."""


@dataclass
class Platform:
    """Per-record overhead (seconds) and a copy-time table (bytes -> seconds)."""

    event_overhead: float
    overhead_by_kind: dict[str, float] = field(default_factory=dict)
    copy_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    copy_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        if not (self.event_overhead >= 0 and math.isfinite(self.event_overhead)):
            raise PlatformError(f"event_overhead must be a finite number >= 0, "
                                f"got {self.event_overhead!r}")
        for k, v in self.overhead_by_kind.items():
            if k not in KIND_CODE:
                raise PlatformError(f"event_overhead_by_kind: unknown record kind {k!r}")
            if not (v >= 0 and math.isfinite(v)):
                raise PlatformError(f"event_overhead_by_kind[{k!r}] must be >= 0, got {v!r}")
        b = np.asarray(self.copy_bytes, dtype=float)
        s = np.asarray(self.copy_seconds, dtype=float)
        if b.shape != s.shape or b.ndim != 1:
            raise PlatformError("copy_time: bytes and seconds must pair up")
        if np.any(b <= 0) or np.any(s < 0) or not np.all(np.isfinite(s)):
            raise PlatformError("copy_time: bytes must be > 0 and seconds >= 0")
        order = np.argsort(b)
        b, s = b[order], s[order]
        if np.any(np.diff(b) == 0):
            raise PlatformError("copy_time: duplicate sizes")
        self.copy_bytes, self.copy_seconds = b, s
        # per-byte cost C(s) at the table points, interpolated log-log in between
        self._per_byte = s / b

    # -- overhead ---------------------------------------------------------------
    def overhead_table(self) -> np.ndarray:
        """Seconds of overhead per record kind code (index = kind code)."""
        table = np.full(len(KIND_NAMES), self.event_overhead, dtype=float)
        for name, v in self.overhead_by_kind.items():
            table[KIND_CODE[name]] = v
        return table

    # -- copy cost --------------------------------------------------------------
    def copy_time(self, nbytes):
        """``C(s)·s``: seconds to copy ``nbytes`` (scalar or array).

        C is interpolated log-log between table sizes and held constant beyond the
        table ends (never extrapolated, never negative). No table means zero cost.
        """
        s = np.asarray(nbytes, dtype=float)
        if self._per_byte.size == 0:
            out = np.zeros_like(s)
        else:
            pos = s > 0
            out = np.zeros_like(s)
            if np.any(pos):
                x = np.log(np.where(pos, s, 1.0))
                lb = np.log(self.copy_bytes)
                pb = self._per_byte
                if np.any(pb == 0):
                    # log of zero cost is undefined: interpolate linearly in C instead
                    c = np.interp(x, lb, pb)
                else:
                    c = np.exp(np.interp(x, lb, np.log(pb)))
                out = np.where(pos, c * s, 0.0)
        return float(out) if np.ndim(out) == 0 else out

    # -- JSON -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict, source: str = "<platform>") -> Platform:
        if not isinstance(data, dict):
            raise PlatformError(f"{source}: expected a JSON object")
        fmt = data.get("format", 1)
        if fmt not in SUPPORTED_FORMATS:
            raise PlatformError(f"{source}: unsupported platform format {fmt!r} "
                                f"(this version reads {SUPPORTED_FORMATS})")
        if "event_overhead" not in data:
            raise PlatformError(f"{source}: missing key 'event_overhead' (seconds per record)")
        if "copy_time" not in data:
            raise PlatformError(f"{source}: missing key 'copy_time' "
                                f"(list of {{\"bytes\": N, \"seconds\": T}})")
        try:
            overhead = float(data["event_overhead"])
            by_kind = {str(k): float(v)
                       for k, v in (data.get("event_overhead_by_kind") or {}).items()}
            table = data["copy_time"]
            if not isinstance(table, list):
                raise TypeError("copy_time must be a list")
            b = [float(e["bytes"]) for e in table]
            s = [float(e["seconds"]) for e in table]
        except (TypeError, ValueError, KeyError) as exc:
            raise PlatformError(f"{source}: malformed platform file ({exc})") from None
        try:
            return cls(overhead, by_kind, np.array(b), np.array(s))
        except PlatformError as exc:
            raise PlatformError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> Platform:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise PlatformError(f"{path}: platform file not found") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise PlatformError(f"{path}: cannot read platform file ({exc})") from None
        return cls.from_dict(data, str(path))

    def to_dict(self) -> dict:
        return {
            "format": 1,
            "event_overhead": self.event_overhead,
            "event_overhead_by_kind": dict(self.overhead_by_kind),
            "copy_time": [{"bytes": int(b), "seconds": float(s)}
                          for b, s in zip(self.copy_bytes, self.copy_seconds, strict=True)],
        }


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")
_UNIT = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """Parse ``250ns``, ``1.5us``, ``2e-6`` (seconds) into seconds."""
    m = _DURATION.match(str(text))
    if not m:
        raise PlatformError(f"cannot parse duration {text!r} (examples: 250ns, 1.5us, 2e-6)")
    return float(m.group(1)) * _UNIT[m.group(2)]
