"""One-line progress on stderr for the long steps, only when stderr is a terminal."""

from __future__ import annotations

import sys
import time


class Progress:
    """``progress(fraction, message)`` rewrites one status line; ``close()`` clears it.

    Disabled (a no-op) unless enabled and stderr is a terminal, so that logs and
    pipes never fill with carriage returns.
    """

    def __init__(self, step: str, enabled: bool = True) -> None:
        self.step = step
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.monotonic()
        self._last = 0.0

    def __call__(self, fraction: float, message: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and fraction < 1.0:
            return  # at most ten updates a second
        self._last = now
        pct = max(0.0, min(fraction, 1.0)) * 100
        sys.stderr.write(f"\r\033[Kcalibrate: {self.step}: {message} "
                         f"[{pct:3.0f} %, {now - self.start:.0f} s]")
        sys.stderr.flush()

    def phase(self, step: str) -> Progress:
        """Start the next step on the same line."""
        self.close()
        return Progress(step, self.enabled)

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
