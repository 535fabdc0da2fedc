"""One status line for long runs: what, how far (done/total, percentage), time left.

Shared by ``compensate``, ``compensate-simulate`` and ``calibrate`` (the calibration
package imports it; nothing here imports either command). The line is written only
when the stream (stderr) is a terminal, and only once a run has taken ``delay``
seconds (2 s): runs shorter than that, logs and pipes never see a carriage return.
It is rewritten at most ``interval`` times a second, cut to the terminal's width (a
wrapped line could not be overwritten), and cleared by :meth:`Progress.close`.

A line looks like::

    compensate: compensating  26.8 %  6 s left  1,234,567/4,600,000 records  612,345 records/s

(the most important first: a narrow terminal cuts the end), with the total unknown
``compensating  1,234,567 records  612,345 records/s``, or, where only a fraction is
known (``calibrate``'s steps), ``calibrate: copy cost: pass 2, 64 KiB  45.0 %  12 s left``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

DELAY = 2.0  #: seconds before the first line (short runs show nothing)
INTERVAL = 0.25  #: seconds between two rewrites of the line


def format_duration(seconds: float) -> str:
    """``7 s``, ``2 min 05 s``, ``1 h 02 min`` (rounded up: never promise too little)."""
    s = max(0, int(seconds + 0.999))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def status_line(step: str, done: int | None, total: int | None, unit: str,
                fraction: float | None, elapsed: float, message: str = "") -> str:
    """The text of one progress line (without the program name), for the numbers given.

    ``fraction`` is used when ``total`` is unknown; time left is ``elapsed · (1 -
    f) / f`` for the fraction ``f`` done, shown once something is done.
    """
    parts = [f"{step}: {message}" if message else step]
    count = None
    if total is not None and done is not None:
        fraction = min(done / total, 1.0) if total > 0 else 1.0
        count = f"{done:,}/{total:,} {unit}".rstrip()
    elif done is not None:
        count = f"{done:,} {unit}".rstrip()
    if fraction is not None:
        fraction = max(0.0, min(fraction, 1.0))
        parts.append(f"{100 * fraction:.1f} %")
        if fraction > 0:
            parts.append(f"{format_duration(elapsed * (1 - fraction) / fraction)} left")
    if count is not None:
        parts.append(count)
    if done is not None and unit and elapsed > 0:
        parts.append(f"{done / elapsed:,.0f} {unit}/s")
    return "  ".join(parts)


class Progress:
    """A status line on ``stream`` (default stderr) while a long step runs.

    ``progress(done)`` for a count out of ``total`` (or of an unknown total),
    ``progress.fraction(f, message)`` for a fraction, :meth:`phase` for the next step
    on the same line, :meth:`close` to clear it (call it before printing anything
    else). A no-op unless ``enabled`` and ``stream`` is a terminal.
    """

    def __init__(self, program: str, step: str, total: int | None = None, unit: str = "", *,
                 enabled: bool = True, stream: TextIO | None = None, delay: float = DELAY,
                 interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic,
                 started: float | None = None) -> None:
        self.program, self.step, self.total, self.unit = program, step, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and _isatty(self.stream)
        self.delay, self.interval, self.clock = delay, interval, clock
        self.started = clock() if started is None else started  # the run's start (delay)
        self.step_started = clock()  # this step's start (rate, time left)
        self._last = -float("inf")
        self._shown = False
        self._fraction_hint: float | None = None

    def __call__(self, done: int, message: str = "") -> None:
        self._show(done, None, message)

    def fraction(self, fraction: float, message: str = "") -> None:
        """Report ``fraction`` (0..1) of the step done."""
        self._show(None, fraction, message)

    def hint(self, fraction: float | None) -> None:
        """Where a count of unknown total stands, as a fraction (e.g. from the
        timestamp reached): the next count shows it and the time left."""
        self._fraction_hint = fraction

    def phase(self, step: str, total: int | None = None, unit: str = "") -> Progress:
        """The next step, on the same line (the run's start time carries over)."""
        self.close()
        return Progress(self.program, step, total, unit, enabled=self.enabled,
                        stream=self.stream, delay=self.delay, interval=self.interval,
                        clock=self.clock, started=self.started)

    def close(self) -> None:
        """Clear the line (if one was written)."""
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown = False

    def _show(self, done: int | None, fraction: float | None, message: str) -> None:
        if not self.enabled:
            return
        now = self.clock()
        finished = (fraction is not None and fraction >= 1.0) or (
            done is not None and self.total is not None and done >= self.total)
        if now - self.started < self.delay or (now - self._last < self.interval
                                               and not finished):
            return
        self._last = now
        if fraction is None and self.total is None:
            fraction = self._fraction_hint
        text = f"{self.program}: " + status_line(self.step, done, self.total, self.unit,
                                                 fraction, now - self.step_started, message)
        width = _width(self.stream)
        if len(text) >= width:
            text = text[:max(width - 2, 1)] + "…"
        self.stream.write("\r\033[K" + text)
        self.stream.flush()
        self._shown = True


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _width(stream: TextIO) -> int:
    """Columns of the terminal (80 if unknown)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size().columns or 80


__all__ = ["DELAY", "Progress", "format_duration", "status_line"]
