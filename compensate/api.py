"""The Python API: what the ``compensate`` command does, as functions on traces.

Re-exported by :mod:`compensate` (``import compensate as c``)::

    t = c.read("run/traces.otf2")                    # or a .trace text file
    r = c.compensate(t, bound="lower", platform="platform.json")
    r.summary["approximated_span_s"], r.verification.ok
    c.write(r.trace, "out/traces.otf2")              # never over an existing output
    c.compare(t, r.trace)                            # what changed, by behaviour and location

:func:`compensate` runs the command's pipeline on a trace in memory: match, fit the
network for ``bound="fitted"``, compensate, verify happened-before order; it raises
:class:`VerificationError` where the command refuses to write. Its ``summary`` is
the command's ``--summary`` object (:mod:`compensate.pipeline.outcome`, which the
command uses too), with ``output`` None and ``seconds`` the time :func:`compensate` took.

The engine (and the scipy it fits with) is imported on the first call of
:func:`compensate`, so that reading, writing and the analyses start quickly.
"""

from __future__ import annotations

import numbers
import operator
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compensate.formats import (
    AtomicOutput,
    OutputError,
    output_target,
    read_trace,
    write_trace,
)
from compensate.model import Trace, TraceError
from compensate.platform import Platform, PlatformError, parse_duration

if TYPE_CHECKING:
    from compensate.analysis import compare, profile, wait_states
    from compensate.analysis.frame import to_dataframe
    from compensate.engine import Stats
    from compensate.matching import Matching
    from compensate.verify import Verification

__all__ = ["CompensationResult", "OutputError", "Platform", "PlatformError", "Trace",
           "TraceError", "VerificationError", "compare", "compensate", "profile", "read",
           "to_dataframe", "wait_states", "write"]

#: the analyses, imported on first use (the command's run does not need them)
_ANALYSES = {"compare": "compensate.analysis", "profile": "compensate.analysis",
             "wait_states": "compensate.analysis", "to_dataframe": "compensate.analysis.frame"}


def __getattr__(name: str) -> Any:
    module = _ANALYSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # next time a plain attribute
    return value


# the engine's BOUNDS and COLLECTIVE_EXITS, without importing the engine to check them
BOUNDS = ("lower", "upper", "fitted", "none")
COLLECTIVE_EXITS = ("uniform", "per-process")

PLATFORM_HINT = ("give platform= (a compensate.Platform or a platform file written by "
                 "`calibrate`, e.g. 'platform.json') or overhead= (seconds per record, "
                 "e.g. 1e-6 or '250ns'), or overhead='estimate' (from the trace's records)")


class VerificationError(RuntimeError):
    """The compensated trace breaks happened-before order (a bug in the engine: the
    command writes nothing then). ``verification`` says where, ``summary`` is the
    summary of the run."""

    def __init__(self, message: str, verification: Verification, summary: dict) -> None:
        super().__init__(message)
        self.verification = verification
        self.summary = summary


@dataclass
class CompensationResult:
    """What :func:`compensate` returns.

    ``trace``: the approximated trace (the same records, new timestamps);
    ``summary``: the command's ``--summary`` object (plain JSON types);
    ``stats``: the engine's counts (:class:`compensate.engine.Stats`);
    ``matching``: the message and collective matching it used;
    ``verification``: the happened-before check of ``trace`` (always ``ok``: a
    failed check raises :class:`VerificationError` instead).
    """

    trace: Trace = field(repr=False)
    summary: dict = field(repr=False)
    stats: Stats = field(repr=False)
    matching: Matching = field(repr=False)
    verification: Verification = field(repr=False)

    def __repr__(self) -> str:  # the trace would print every record
        s = self.summary
        return (f"<CompensationResult: {s['bound']} bound, {s['records']:,} records on "
                f"{s['locations']} locations, span {s['measured_span_s']:.6g} s -> "
                f"{s['approximated_span_s']:.6g} s, "
                f"{'verified' if self.verification.ok else 'NOT verified'}>")


def read(path: str | os.PathLike) -> Trace:
    """Read a trace: an OTF2 anchor file (``run/traces.otf2``) or a text trace
    (``*.trace``). Raises :class:`TraceError` for a missing or bad file and
    ValueError for another suffix."""
    return read_trace(os.fspath(path))


def resolve_platform(platform: Platform | str | os.PathLike | None,
                     overhead: float | str | None) -> Platform | None:
    """The platform the command's ``--platform``/``--overhead`` would give: ``platform``
    (a :class:`Platform` or a platform file) with its per-record overhead replaced by
    ``overhead`` (seconds, or a duration such as ``"250ns"``) when that is given;
    None when neither is."""
    if platform is None:
        plat = None
    elif isinstance(platform, Platform):
        plat = platform
    elif isinstance(platform, (str, os.PathLike)):
        plat = Platform.load(platform)
    else:
        raise TypeError(f"platform must be a compensate.Platform or the path of a platform "
                        f"file, got {type(platform).__name__}")
    if overhead is None:
        return plat
    if isinstance(overhead, str):
        seconds = parse_duration(overhead)
    elif isinstance(overhead, numbers.Real) and not isinstance(overhead, bool):
        seconds = float(overhead)
    else:
        raise TypeError(f"overhead must be seconds (a number) or a duration such as '250ns', "
                        f"got {type(overhead).__name__}")
    if plat is None:
        return Platform(seconds)
    return Platform(seconds, {}, plat.copy_bytes, plat.copy_seconds, plat.device_overhead,
                    network=plat.network)


def compensate(trace: Trace, bound: str = "lower",
               platform: Platform | str | os.PathLike | None = None,
               overhead: float | str | None = None, collective_exit: str = "uniform",
               eager_limit: int | None = None, strict: bool = False,
               cold_calls: bool = False, speed: str = "trace") -> CompensationResult:
    """Remove the tracer overhead from ``trace``: the command's pipeline in memory.

    ``bound``: ``"lower"``, ``"upper"``, ``"fitted"`` (a latency + bandwidth model fitted
    to the transfers the trace observed; the lower bound where too few were, as
    ``summary["fit"]`` says) or ``"none"`` (times unchanged).
    ``platform``: a :class:`Platform` or the path of a platform file; ``overhead``:
    seconds per record (``1e-6``) or a duration (``"250ns"``), replacing the
    platform's per-record overhead, or ``"insitu"`` (the trace's own in-situ
    overhead, :mod:`compensate.insitu`), ``"platform"`` (the platform file's
    overhead even where the file has ``prefer_insitu``) or ``"estimate"`` (from the
    trace's records, :func:`compensate.overhead.estimate`). Without either, the
    trace's in-situ overhead is used if it carries one (also with a platform file
    that has ``prefer_insitu``); otherwise one of them is needed (except for
    ``bound="none"``); without a platform, copies cost nothing.
    ``summary["overhead"]`` says which overhead was used and where it came from.
    ``collective_exit``: ``"uniform"`` or ``"per-process"``; ``eager_limit``: treat
    ``MPI_Send`` messages larger than this many bytes as synchronous. ``strict``:
    refuse Enter/Leave that do not nest (TraceError) instead of pairing them by
    region and counting them (``summary["nesting"]``). ``cold_calls``: also charge
    the cold-call curves of the trace's in-situ tables (``--cold-calls``; off by
    default, docs/calibration.md "Cold calls"). ``speed``: ``"trace"`` scales a
    platform file's overhead to the trace's own speed where the file has a
    ``speed_reference`` (:mod:`compensate.speed`), ``"platform"`` uses it as it is
    (``--speed``).

    Raises ValueError for a bad argument, :class:`PlatformError` for a bad or missing
    platform, :class:`TraceError` for records that do not match up, and
    :class:`VerificationError` if the result breaks happened-before order.
    """
    if not isinstance(trace, Trace):
        hint = (".measured of a simulation" if hasattr(trace, "measured")
                else "read one with compensate.read(path)")
        raise TypeError(f"trace must be a compensate.Trace ({hint}), "
                        f"got {type(trace).__name__}")
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {', '.join(BOUNDS)}; got {bound!r}")
    if collective_exit not in COLLECTIVE_EXITS:
        raise ValueError(f"collective_exit must be one of {', '.join(COLLECTIVE_EXITS)}; "
                         f"got {collective_exit!r}")
    if eager_limit is not None:
        eager_limit = _bytes(eager_limit)
    import compensate.overhead as overhead_choice
    import compensate.speed as speed_scaling

    if speed not in speed_scaling.CHOICES:
        raise ValueError(f"speed must be one of {', '.join(speed_scaling.CHOICES)}; "
                         f"got {speed!r}")

    def at_speed(base: Platform):
        found = speed_scaling.trace_pairs(trace.definitions, [trace.events],
                                          base.speed_reference)
        return speed_scaling.at_trace_speed(base, found)

    keyword = isinstance(overhead, str) and overhead in overhead_choice.KEYWORDS
    plat = resolve_platform(platform, None if keyword else overhead)
    plat, overhead_info = overhead_choice.choose(
        plat, overhead, lambda: trace.definitions,
        lambda base: overhead_choice.estimate(trace, base), bound != "none",
        cold_calls=cold_calls, speed=at_speed if speed == "trace" else None)
    if plat is None and bound != "none":
        raise PlatformError(f"no platform: {PLATFORM_HINT}")

    from compensate.gcpause import gc_paused
    from compensate.pipeline import RunOptions, decide, in_memory
    from compensate.pipeline.outcome import EXIT_VERIFY

    options = RunOptions(bound, collective_exit, eager_limit, strict)
    start = time.monotonic()
    with gc_paused():  # as the command: the records stay alive, no cycles to find
        run = in_memory(trace, plat, options)
    outcome = decide(run, input=trace.source, output=None, options=options, platform=plat,
                     overhead=overhead_info)
    summary = outcome.summary
    summary["seconds"] = {"compensate": time.monotonic() - start}
    summary = _plain(summary)
    if outcome.status == EXIT_VERIFY:
        raise VerificationError(f"{outcome.reason}; this is a bug, please report it",
                                run.verification, summary)
    return CompensationResult(run.trace, summary, run.stats, run.matching, run.verification)


def write(trace: Trace, path: str | os.PathLike, force: bool = False) -> None:
    """Write ``trace`` to ``path`` atomically (under a temporary name, renamed when
    complete): an OTF2 archive (``out/traces.otf2`` creates the directory ``out/``)
    or a text trace (``*.trace``). An existing output is replaced only with
    ``force=True``, and never the file the trace was read from (OutputError)."""
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a compensate.Trace, got {type(trace).__name__} "
                        f"(a compensate() result's trace is .trace)")
    path = os.fspath(path)
    # the rules of the command's output (formats.paths); a trace not read from a file
    # (simulated, or renamed) has no input to protect: the null device stands in
    source = trace.source if trace.source and os.path.isfile(trace.source) else os.devnull
    try:
        target = output_target(source, path, force)
        # (the same rules again at the commit, under the output's lock)
        write_trace(trace, path, output=AtomicOutput(path, target, force=force))
    except OutputError as exc:
        raise OutputError(str(exc).replace("--force", "force=True")) from None


def _bytes(value: Any) -> int:
    """``value`` as a number of bytes >= 0 (an int or a numpy integer, not a bool)."""
    try:
        n = operator.index(value)
    except TypeError:
        n = -1
    if n < 0 or isinstance(value, bool):
        raise ValueError(f"eager_limit must be a number of bytes >= 0 or None; got {value!r}")
    return n


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers and fresh dicts/lists (so that
    ``json.dumps(result.summary)`` works and the summary shares nothing with stats)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalar (numpy is imported already)
    if item is not None and type(value).__module__ == "numpy":
        return item()
    return value
