"""Which tracer a platform file's per-record overhead is for, and how it is measured.

The per-record overhead is a property of the tracer, not of the machine alone: on
the same machine the otf2 Python writer costs about 3.6 µs per record, the
project's mpi4py tracer (``python -m calibration.record``) a few hundred ns, Score-P
what its microbenchmark says. A platform file calibrated for one and used for
another removes the wrong amount (the writer's 3.6 µs overcompensated 98.8 % of the
mpi4py tracer's records). So ``calibrate run --tracer NAME`` measures the cost of
that tracer and writes its name into the file (the ``tracer`` field,
docs/platform-file.md):

``record``
    the project's mpi4py tracer: its record path called back to back and the
    dilation of a decorated call (:func:`calibration.tracer.overhead.record_path_costs`);
``python-writer``
    the otf2 Python writer (:mod:`calibration.overhead`, the writer probe);
``scorep``, ``eztrace``, ``other``
    an external tracer, fitted from an instrumented and an uninstrumented
    microbenchmark (:mod:`calibration.external`); for Score-P the two builds of
    ``calibration/microbench.c`` (``make -C calibration``) are the default commands.

Each measurement returns the overhead part of the platform file (``tracer``,
``event_overhead``, ``event_overhead_by_kind``, ``overhead_source`` and the key
with its details), and :func:`unsteady` says whether any written constant is too
noisy (:mod:`calibration.spread`).
"""

from __future__ import annotations

from pathlib import Path

from calibration.spread import MAX_SPREAD, Unsteady, check_number, check_width
from compensate.platform import TRACERS

__all__ = ["TRACERS", "EXTERNAL", "record_overhead", "writer_overhead", "external_overhead",
           "scorep_commands", "missing_microbench", "unsteady"]
#: Tracers measured by an external probe (commands run as separate processes).
EXTERNAL = ("scorep", "eztrace", "other")
#: Where ``make -C calibration`` builds the microbenchmarks.
MICROBENCH_DIR = Path(__file__).resolve().parent
#: Record-path samples (records per sample, samples) by mode.
RECORD_SAMPLES = {"quick": (1000, 11), "default": (2000, 31), "thorough": (2000, 101)}


def record_overhead(n: int, repeats: int) -> dict:
    """The project's mpi4py tracer: per kind the cost of its record path (10th
    percentile of ``repeats`` samples of ``n`` records), Enter and Leave from the
    dilation of a decorated call (median), ``event_overhead`` half that dilation --
    what ``calibration.record`` writes beside a trace
    (:mod:`calibration.tracer.overhead`)."""
    from calibration.tracer.overhead import (
        FUNCTION_STATISTIC,
        STATISTIC,
        record_path_costs,
    )

    costs = record_path_costs(n, repeats)
    by_kind = {k: v[FUNCTION_STATISTIC if k in ("Enter", "Leave") else STATISTIC]
               for k, v in costs.items() if k[0].isupper()}
    return {"tracer": "record",
            "event_overhead": costs["function_call"][FUNCTION_STATISTIC] / 2,
            "event_overhead_by_kind": by_kind,
            "overhead_source": "record_path",
            "calibration": {
                "by": "calibrate run --tracer record (calibration/tracer/overhead.py)",
                "records_per_sample": n, "repeats": repeats, "statistic": STATISTIC,
                "function_statistic": FUNCTION_STATISTIC, "function_path": "single",
                "seconds_per_record": costs}}


def writer_overhead(probe) -> dict:
    """The otf2 Python writer, from a :class:`calibration.overhead.WriterProbeResult`."""
    return {"tracer": "python-writer",
            "event_overhead": probe.event_overhead.median,
            "event_overhead_by_kind": probe.by_kind(),
            "overhead_source": "writer_probe",
            "writer_probe": probe.to_dict()}


def external_overhead(tracer: str, info: dict) -> dict:
    """An external tracer, from :meth:`calibration.external.ExternalResult.to_dict`."""
    return {"tracer": tracer, "event_overhead": info["overhead_seconds"],
            "event_overhead_by_kind": {}, "overhead_source": "external_probe",
            "external_probe": info}


def scorep_commands(directory: Path | None = None) -> tuple[str, str]:
    """The Score-P probe's instrumented and baseline commands (``{n}`` iterations)
    in ``directory`` (default :data:`MICROBENCH_DIR`)."""
    directory = directory or MICROBENCH_DIR
    return f"{directory / 'microbench-scorep'} {{n}}", f"{directory / 'microbench'} {{n}}"


def missing_microbench(directory: Path | None = None) -> str | None:
    """What is missing for the Score-P probe's default commands in ``directory``
    (default :data:`MICROBENCH_DIR`), as a one-line reason; None when both builds
    are there."""
    directory = directory or MICROBENCH_DIR
    missing = [name for name in ("microbench-scorep", "microbench")
               if not (directory / name).is_file()]
    if not missing:
        return None
    return (f"{directory / missing[0]} not found: build the microbenchmarks with "
            f"`make -C {directory}` (needs Score-P), or give --command and --baseline")


def unsteady(overhead: dict, max_spread: float = MAX_SPREAD) -> Unsteady | None:
    """The first per-record cost of ``overhead`` (the dict of one of the functions
    above) whose spread exceeds ``max_spread`` of its value; None if all are steady."""
    name = overhead["tracer"]
    if "calibration" in overhead:
        costs = overhead["calibration"]["seconds_per_record"]
        for kind in ("function_call", *overhead["event_overhead_by_kind"]):
            c = costs[kind]
            label = "event_overhead" if kind == "function_call" else kind
            found = check_width(f"per-record cost {label} (tracer {name})", c["median"],
                                c["iqr"], max_spread)
            if found:
                return found
        return None
    if "writer_probe" in overhead:
        probe = overhead["writer_probe"]
        for kind, s in [("event_overhead", probe["event_overhead"]), *probe["kinds"].items()]:
            found = check_number(f"per-record cost {kind} (tracer {name})", s["seconds"],
                                 *s["iqr"], max_spread)
            if found:
                return found
        return None
    info = overhead["external_probe"]
    return check_number(f"per-record cost event_overhead (tracer {name})",
                        info["overhead_seconds"], *info["ci95"], max_spread,
                        what="95 % confidence interval")
