"""Assemble the platform file from the measurements and write it atomically.

The core keys are exactly what ``compensate.platform.Platform.from_dict`` reads
(``format``, ``event_overhead``, ``event_overhead_by_kind``, ``copy_time``); the
rest (spreads, steps, timer, probe details, machine facts) are keys the schema
``compensate/platform.schema.json`` names as calibration details, which the reader
checks only for their type. Every file is validated with that reader before it is
written, so ``calibrate`` can never produce a file ``compensate`` rejects (a key
added here must be added to the schema and to docs/platform-file.md).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

import compensate.interrupt as interrupt
from calibration.copycost import CopyPoint, CopyResult, is_resolved, monotone_violations
from calibration.machine import machine_facts, now_iso
from calibration.overhead import WriterProbeResult
from calibration.targets import writer_overhead
from calibration.timer import TimerCalibration
from compensate.platform import Platform, PlatformError, read_json

FORMAT = 1
TABLES = ("warm", "fresh")


class OutputError(Exception):
    """The platform file cannot be written (one-line message)."""


def copy_table(copy: CopyResult, table: str = "warm", monotone: bool = False) -> list[dict]:
    """``copy_time`` entries: bytes, seconds (median of the chosen buffer state),
    its IQR, CI and sample count, and the other state's numbers under its name.

    ``monotone`` replaces a median that is below a smaller size's by that running
    maximum (the measured value stays in ``measured_seconds``).
    """
    if table not in TABLES:
        raise ValueError(f"unknown copy table {table!r} (use {', '.join(TABLES)})")
    entries = []
    running = 0.0
    for p in copy.points:
        main = p.warm if table == "warm" or p.fresh is None else p.fresh
        if not is_resolved(main):
            continue
        entry = {"bytes": int(p.nbytes), **main.to_dict(), "batch": p.batch}
        if table == "fresh":
            entry["warm"] = p.warm.to_dict()
        elif p.fresh is not None:
            entry["fresh"] = p.fresh.to_dict()
        if monotone and entry["seconds"] < running:
            entry["measured_seconds"] = entry["seconds"]
            entry["seconds"] = running
        running = max(running, entry["seconds"])
        entries.append(entry)
    return entries


def _non_monotone(points: list[CopyPoint]) -> list[dict]:
    """Neighbouring sizes whose warm copy time drops by more than the spread."""
    by_size = {p.nbytes: p for p in points}
    return [{"from_bytes": a, "to_bytes": b,
             "from_seconds": by_size[a].warm.median, "to_seconds": by_size[b].warm.median}
            for a, b in monotone_violations(points)]


def _size_class(copy: CopyResult) -> dict:
    """How the samples of one table size were varied (``copy_calibration.size_class``)."""
    if not copy.size_class:
        return {"varied": False}
    half = 2.0 ** (0.5 / copy.points_per_octave)
    return {"varied": True, "size_factor": [1.0 / half, half], "align_bytes": copy.align,
            "placement": "uniform over the source and destination buffers",
            "scaled_to_table_size": True}


def build_platform(copy: CopyResult, timer: TimerCalibration,
                   probe: WriterProbeResult | dict, *, mode: str, seconds: float,
                   table: str = "warm", monotone: bool = False) -> dict:
    """The platform file as a dict (format 1 plus calibration details). ``probe``:
    the per-record overhead part of the file (:mod:`calibration.targets`: ``tracer``,
    ``event_overhead``, ``event_overhead_by_kind``, ``overhead_source`` and its
    details), or a writer probe's result (tracer ``python-writer``)."""
    overhead = probe if isinstance(probe, dict) else writer_overhead(probe)
    details = {k: v for k, v in overhead.items()
               if k not in ("event_overhead", "event_overhead_by_kind")}
    return {
        "format": FORMAT,
        "event_overhead": overhead["event_overhead"],
        "event_overhead_by_kind": overhead["event_overhead_by_kind"],
        "copy_time": copy_table(copy, table, monotone),
        "created_by": "calibrate run",
        "date": now_iso(),
        "mode": mode,
        "duration_seconds": seconds,
        "machine": machine_facts(),
        "timer": timer.to_dict(),
        "copy_calibration": {
            "method": f"{copy.method} copy (dst[:] = src is one memcpy)"
            if copy.method == "memoryview" else "numpy.copyto",
            "table": table,
            "monotone_envelope": monotone,
            "sizes_measured": len(copy.points),
            "passes": copy.passes,
            "processes": copy.processes,
            "call_overhead_seconds": copy.call_overhead,
            "evict_bytes": copy.evict_bytes,
            "size_class": _size_class(copy),
            "warmup_bytes": copy.warmup_bytes,
            "steps": copy.steps,
            "non_monotone": _non_monotone(copy.resolved()),
            "unresolved": [{"bytes": p.nbytes, **p.warm.to_dict()} for p in copy.unresolved()],
            "seconds": copy.seconds,
        },
        **details,
    }


def _plain(o):
    """JSON encoder fallback for numpy scalars."""
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def validate(data: dict, source: str = "<calibration>") -> Platform:
    """Check ``data`` with compensate's own reader (PlatformError if it would reject it)."""
    return Platform.from_dict(json.loads(json.dumps(data, default=_plain)), source)


def check_output(path: str | Path, force: bool = False) -> None:
    """Refuse an output path before a long measurement rather than after it."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory")
    if path.exists() and not force:
        raise OutputError(f"{path}: exists (use --force to replace it)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{path}: directory {parent} does not exist")


def write_platform(data: dict, path: str | Path, force: bool = False) -> None:
    """Validate, then write ``data`` to ``path`` under a temporary name and rename.

    An existing file is replaced only with ``force``; a reader never sees half a file.
    """
    path = Path(path)
    try:
        validate(data, str(path))
    except PlatformError as exc:  # a bug in calibrate, never the user's fault
        raise RuntimeError(f"calibrate produced an invalid platform file: {exc}") from None
    check_output(path, force)
    parent = path.parent if str(path.parent) else Path(".")
    text = json.dumps(data, indent=2, default=_plain) + "\n"
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        os.chmod(tmp, _file_mode())  # mkstemp creates 0600; a platform file is shared
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        interrupt.commit_point()  # never moved into place after SIGINT/SIGTERM
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_mode() -> int:
    """0666 minus the process umask: what a plain ``open(path, "w")`` would create."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def read_platform_dict(path: str | Path) -> dict:
    """The JSON object of an existing platform file, validated (PlatformError if bad)."""
    data = read_json(path)  # a regular file, read once: what is checked is what is used
    Platform.from_dict(data, str(path))
    return data


def update_entry(path: str | Path, key: str, entry: dict) -> str | None:
    """Set ``key`` of the platform file at ``path`` to ``entry`` and write it back
    whole under a temporary name (:func:`write_platform`: a reader, or an interrupt,
    never sees half a file); the one-line error, or None."""
    try:
        data = read_platform_dict(path)
        data[key] = entry
        write_platform(data, path, force=True)
    except (PlatformError, OutputError) as exc:
        return f"{exc} ({path} left unchanged)"
    return None


def apply_external(data: dict, probe: dict, tracer: str | None = None) -> dict:
    """Make the external probe's overhead the file's ``event_overhead``, for
    ``tracer`` (the file's ``tracer`` field; None: removed, as the file no longer
    says which tracer its overhead is for).

    ``event_overhead_by_kind`` is emptied: its values came from another tracer
    (the otf2 writer probe) and would override the external number per kind. The
    replaced values are kept under ``external_probe.replaced``.
    """
    replaced = {"event_overhead": data.get("event_overhead"),
                "event_overhead_by_kind": data.get("event_overhead_by_kind") or {},
                "overhead_source": data.get("overhead_source"),
                "tracer": data.get("tracer")}
    data["event_overhead"] = probe["overhead_seconds"]
    data["event_overhead_by_kind"] = {}
    data["overhead_source"] = "external_probe"
    if tracer is None:
        data.pop("tracer", None)
    else:
        data["tracer"] = tracer
    data["external_probe"] = {**probe, "date": now_iso(), "replaced": replaced}
    return data
