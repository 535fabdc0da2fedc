"""How a run ends, stated once for every way of running: its summary (the
``--summary`` object) and the refusal policy — what is written and with which exit
status. The command and the Python API turn an :class:`Outcome` into messages, an
exit status or an exception; neither decides on its own.

Refusals: a verification that found a happened-before violation (a bug in the
engine) writes nothing, exit 4; more overcompensated records than
``--max-overcompensated`` allows writes nothing but the summary, exit 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compensate.platform import Platform

if TYPE_CHECKING:
    from compensate.engine import Stats
    from compensate.engine.fit import FitOutcome
    from compensate.pipeline.options import RunOptions
    from compensate.pipeline.run import Run
    from compensate.verify import Verification

#: exit statuses of the refusals (docs/messages.md)
EXIT_VERIFY, EXIT_OVERCOMPENSATED = 4, 5


@dataclass
class Outcome:
    """A run's summary and whether its output may be written: ``status`` 0 (write),
    :data:`EXIT_VERIFY` or :data:`EXIT_OVERCOMPENSATED`; ``reason`` the refusal in
    words (without the program's name)."""

    summary: dict
    verification: Verification
    status: int = 0
    reason: str = ""

    @property
    def writes(self) -> bool:
        return self.status == 0


def decide(run: Run, *, input: str, output: str | None, options: RunOptions,
           platform: Platform | None, overhead: dict | None = None,
           max_overcompensated: tuple[float, bool] | None = None) -> Outcome:
    """The summary of ``run`` and the refusal policy applied to it.
    ``max_overcompensated``: ``(value, percent)`` of ``--max-overcompensated``."""
    summary = summarize(run, input=input, output=output, options=options, platform=platform,
                        overhead=overhead)
    check = run.verification
    if not check.ok:
        return Outcome(summary, check, EXIT_VERIFY, (
            f"verification failed: {check.violations} happened-before violations "
            f"({'; '.join(check.examples[:2])})"))
    if max_overcompensated is not None:
        value, percent = max_overcompensated
        n, records = summary["overcompensated_records"], summary["records"]
        if n > (value * records / 100 if percent else value):
            limit = f"{value:g} % of {records:,} records" if percent else f"{int(value):,} records"
            return Outcome(summary, check, EXIT_OVERCOMPENSATED, (
                f"{n:,} records overcompensated, more than --max-overcompensated {limit}"))
    return Outcome(summary, check)


def summarize(run: Run, *, input: str, output: str | None, options: RunOptions,
              platform: Platform | None, overhead: dict | None = None) -> dict:
    """The ``--summary`` object of ``run`` (before the timings the command adds)."""
    res = run.resolution
    summary = build_summary(
        input=input, output=output, bound=options.bound,
        collective_exit=options.collective_exit, eager_limit=options.eager_limit,
        platform=platform, stats=run.stats, verification=run.verification,
        counts=run.counts, fit_outcome=run.fit, records=run.records,
        locations=run.locations, resolution=res, measured=_seconds(run.measured_span, res),
        approximated=_seconds(run.approximated_span, res), nesting=run.nesting,
        overhead=overhead)
    if run.clock_alignment is not None:
        summary["clock_alignment"] = dict(run.clock_alignment.to_dict(res),
                                          aligned_span_s=_seconds(run.aligned_span, res))
    if run.segments is not None:
        summary["segments"] = {"count": run.segments, "largest": run.largest_segment}
    return summary


def _seconds(span: tuple[int, int] | None, resolution: int) -> float:
    return (span[1] - span[0]) / resolution if span else 0.0


def build_summary(*, input: str, output: str | None, bound: str, collective_exit: str,
                  eager_limit: int | None, platform: Platform | None, stats: Stats,
                  verification: Verification, counts: dict, fit_outcome: FitOutcome | None,
                  records: int, locations: int, resolution: int, measured: float,
                  approximated: float, nesting: dict | None = None,
                  overhead: dict | None = None) -> dict:
    """The run summary, key by key as the command's ``--summary`` writes it (before the
    timings it adds): shared by the command and :func:`compensate`. ``nesting``:
    Enter/Leave that do not nest (``Matching.nesting_summary()``); ``overhead``:
    which overhead was used and where it came from (:func:`compensate.overhead.choose`).
    ``region_overhead_records``, where the platform states costs per region: per
    entry (region name), the Enter/Leave records charged its cost;
    ``region_overhead_undefined``: the entries whose name the trace defines no
    region of."""
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
        "overhead_removed_s": stats.overhead_seconds(resolution),
        "platform": platform.to_dict() if platform else None,
        "overhead": overhead,
        "verification": verification.to_dict(),
    }
    if nesting is not None:  # Enter/Leave that do not nest: counts and the first one
        summary["nesting"] = nesting
    if platform is not None and platform.has_regions:  # (only then: others unchanged)
        names = sorted(set(platform.overhead_by_region) | set(platform.before_stamp_by_region))
        summary["region_overhead_records"] = {n: int(stats.region_records.get(n, 0))
                                              for n in names}
        summary["region_overhead_undefined"] = [n for n in names
                                                if n not in stats.region_records]
    if fit_outcome is not None:
        from compensate.engine.fit import summary_object
        summary["fit"] = summary_object(fit_outcome, stats.p2p_cases)
        from compensate.engine.kinds.devices import summary_latencies
        learned = summary_latencies(fit_outcome.links, resolution)
        if learned:  # only where the trace has device links: other summaries unchanged
            summary["fit"]["device_latency"] = learned
    return summary
