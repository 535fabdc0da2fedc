"""Which tracer wrote a trace, and the warning where a platform file was calibrated
for another: the per-record overhead is the tracer's, so a Score-P platform applied
to an EZTrace trace removes the wrong amount."""

from __future__ import annotations

from pathlib import Path

from compensate.platform import Platform

_CREATORS = ((b"Score-P", "scorep"), (b"calibration.record", "record"),
             (b"EZTrace", "eztrace"), (b"eztrace", "eztrace"))


def trace_producer(trace: str | Path) -> str | None:
    """The tracer (:data:`TRACERS`) that wrote the OTF2 archive whose anchor file is
    ``trace``, from the creator string near its start, or where that is empty
    (EZTrace 2.0 leaves it so) from the start of the global definitions file
    (EZTrace names a region "EZTrace finalize"); None for a text trace, an unknown
    producer or a file that cannot be read. Reads at most 4 KiB and 64 KiB."""
    path = Path(trace)
    if path.suffix != ".otf2" or not path.is_file():
        return None
    head = _head(path, 4096)
    if b"OTF2" not in head[:16]:
        return None
    found = next((name for mark, name in _CREATORS if mark in head), None)
    if found is None and b"EZTrace" in _head(path.with_suffix(".def"), 1 << 16):
        found = "eztrace"
    return found


def _head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of the regular file ``path`` (empty if unreadable)."""
    try:
        if not path.is_file():
            return b""
        with path.open("rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def tracer_warning(platform: Platform | None, trace: str | Path,
                   source: str = "the platform file") -> str | None:
    """The one-line warning (without the program's prefix) where ``platform`` was
    calibrated for one known tracer and ``trace`` was written by another; None
    where they match or either is unknown."""
    mine = getattr(platform, "tracer", None)
    if mine in (None, "other"):
        return None
    producer = trace_producer(trace)
    if producer is None or producer == mine:
        return None
    return (f"warning: {source} holds the per-record overhead of tracer {mine!r}, but "
            f"{trace} was written by {producer!r}: the overhead removed may not fit "
            f"(calibrate for {producer}: docs/calibration.md)")
