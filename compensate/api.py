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
the command's ``--summary`` object (built by :func:`build_summary`, which the command
uses too), with ``output`` None and ``seconds`` the time :func:`compensate` took.

The engine (and the scipy it fits with) is imported on the first call of
:func:`compensate`, so that reading, writing and the analyses start quickly.
"""

from __future__ import annotations

import numbers
import operator
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compensate.formats import OutputError, output_target, read_trace, write_trace
from compensate.model import Trace, TraceError
from compensate.platform import Platform, PlatformError, parse_duration

if TYPE_CHECKING:
    from compensate.analysis import compare, profile, wait_states
    from compensate.analysis.frame import to_dataframe
    from compensate.engine import Result, Stats
    from compensate.engine.fit import FitOutcome
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
               cold_calls: bool = False) -> CompensationResult:
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
    default, docs/calibration.md "Cold calls").

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

    keyword = isinstance(overhead, str) and overhead in overhead_choice.KEYWORDS
    plat = resolve_platform(platform, None if keyword else overhead)
    plat, overhead_info = overhead_choice.choose(
        plat, overhead, lambda: trace.definitions, lambda: trace, bound != "none",
        cold_calls=cold_calls)
    if plat is None and bound != "none":
        raise PlatformError(f"no platform: {PLATFORM_HINT}")

    from compensate.gcpause import gc_paused

    start = time.monotonic()
    with gc_paused():  # as the command: the records stay alive, no cycles to find
        result, matching, outcome, check = run_pipeline(trace, plat, bound, collective_exit,
                                                        eager_limit, strict=strict)
    summary = build_summary(
        input=trace.source, output=None, bound=bound, collective_exit=collective_exit,
        eager_limit=eager_limit, platform=plat, stats=result.stats, verification=check,
        counts=matching.counts(), fit_outcome=outcome, records=trace.record_count,
        locations=len(trace.events), resolution=trace.definitions.timer_resolution,
        measured=trace.span_seconds, approximated=result.trace.span_seconds,
        nesting=matching.nesting_summary(), overhead=overhead_info)
    summary["seconds"] = {"compensate": time.monotonic() - start}
    summary = _plain(summary)
    if not check.ok:
        raise VerificationError(
            f"verification failed: {check.violations} happened-before violations "
            f"({'; '.join(check.examples[:2])}); this is a bug, please report it",
            check, summary)
    return CompensationResult(result.trace, summary, result.stats, matching, check)


def run_pipeline(trace: Trace, platform: Platform | None, bound: str, collective_exit: str,
                 eager_limit: int | None, progress: Callable[[int], None] | None = None,
                 phase: Callable[[str], None] | None = None, strict: bool = False
                 ) -> tuple[Result, Matching, FitOutcome | None, Verification]:
    """match -> compensate -> verify of a whole trace in memory, shared by
    :func:`compensate` and the command's ``--in-memory`` path: the engine's result,
    the matching, the network fit (``bound="fitted"``; the lower bound is used where
    too few transfers were observed) and the happened-before check. ``phase`` hears
    what a long step is doing, ``progress`` the engine's records done; ``strict``
    refuses Enter/Leave that do not nest."""
    from compensate.engine import EngineOptions
    from compensate.engine import compensate as run_engine
    from compensate.matching import match
    from compensate.verify import verify

    if phase:
        phase(f"matching {trace.record_count:,} records ...")
    matching = match(trace, eager_limit=eager_limit, strict=strict)
    used, outcome = bound, None
    if bound == "fitted":  # R2f: fit the network to the observed transfers
        from compensate.engine.fit import try_fit
        if phase:
            phase("fitting the network to the observed transfers ...")
        outcome = try_fit(trace, matching, platform)
        used = "fitted" if outcome.fit else "lower"  # too few observations: fall back
    result = run_engine(trace, platform or Platform(0.0),
                        EngineOptions(bound=used, collective_exit=collective_exit,
                                      network_time=outcome.fit if outcome else None,
                                      fit_links=bound == "fitted" and used == "lower",
                                      link_latency=outcome.links if outcome else None),
                        matching, progress)
    return result, matching, outcome, verify(result.trace, matching, measured=trace)


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
    except OutputError as exc:
        raise OutputError(str(exc).replace("--force", "force=True")) from None
    write_trace(trace, path, target)


def build_summary(*, input: str, output: str | None, bound: str, collective_exit: str,
                  eager_limit: int | None, platform: Platform | None, stats: Stats,
                  verification: Verification, counts: dict, fit_outcome: FitOutcome | None,
                  records: int, locations: int, resolution: int, measured: float,
                  approximated: float, nesting: dict | None = None,
                  overhead: dict | None = None) -> dict:
    """The run summary, key by key as the command's ``--summary`` writes it (before the
    timings it adds): shared by the command and :func:`compensate`. ``nesting``:
    Enter/Leave that do not nest (``Matching.nesting_summary()``); ``overhead``:
    which overhead was used and where it came from (:func:`compensate.overhead.choose`)."""
    summary: dict[str, Any] = {
        "input": input,
        "output": output,
        "bound": bound,
        "collective_exit": collective_exit,
        "records": records,
        "locations": locations,
        "timer_resolution": resolution,
        "measured_span_s": measured,
        "approximated_span_s": approximated,
        "overcompensated_records": stats.overcompensated,
        "overcompensated_by_kind": dict(sorted(stats.overcompensated_by_kind.items())),
        "overcompensated_max_s": stats.overcompensated_max_s,
        "messages_matched": stats.messages,
        "unmatched_sends": stats.unmatched_sends,
        "collective_instances": stats.collective_instances,
        "unknown_collective_ops": stats.unknown_collective_ops,
        "p2p_cases": stats.p2p_cases,
        "dependencies": counts,
        "eager_limit": eager_limit,
        "buffer_flushes": stats.buffer_flushes,
        "flush_seconds_removed": stats.flush_seconds_removed,
        "platform": platform.to_dict() if platform else None,
        "overhead": overhead,
        "verification": verification.to_dict(),
    }
    if nesting is not None:  # Enter/Leave that do not nest: counts and the first one
        summary["nesting"] = nesting
    if fit_outcome is not None:
        from compensate.engine.fit import summary_object
        summary["fit"] = summary_object(fit_outcome, stats.p2p_cases)
    return summary


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
