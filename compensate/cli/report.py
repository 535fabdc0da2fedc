"""``compensate report`` and ``compensate export``: look at a trace, or at two.

* ``compensate report TRACE [TRACE2] [--json FILE] [--eager-limit BYTES] [--top N]
  [--strict]``
  prints a terse table: for one trace its profile and wait states, for two (the
  measured and the approximated trace of one run) both side by side with the
  difference broken down by behaviour and location (:func:`compensate.analysis.compare`).
* ``compensate export TRACE OUT.json [--force]`` writes the Chrome/Perfetto
  trace-event JSON of a trace (:mod:`compensate.analysis.export`).

:func:`compensate.cli.main` dispatches here when its first argument is ``report``
or ``export``. Exit codes as for the main command: 0 ok, 2 usage, 3 bad input or an
output that cannot be written, 130 / 143 interrupted (nothing written), 1 internal
error; every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import compensate.cli.values as values
import compensate.interrupt as interrupt
from compensate.analysis import (
    CATEGORIES,
    LABELS,
    WAIT_STATES,
    Breakdown,
    Comparison,
    Profile,
    breakdown,
    compare,
)
from compensate.analysis.hybrid import HYBRID_LABELS, HYBRID_STATES
from compensate.cli.failure import EXIT_OK, EXIT_USAGE, failure_status
from compensate.cli.usage import Parser, Usage, exit_status, synopsis, version_line
from compensate.formats import (
    AtomicFile,
    OutputError,
    is_part_of_input,
    read_blocks,
    read_trace,
    trace_format,
)
from compensate.model import METRIC, Trace, TraceError

SCHEMA_ID = "compensate-report/1"

# ---------------------------------------------------------------------------------
# text tables

def _unit(seconds: float) -> tuple[str, float]:
    """A readable unit for times up to ``seconds``: (name, scale)."""
    seconds = abs(seconds)
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    return "us", 1e6


def _pct(x: float) -> str:
    return "     -" if x != x else f"{x:6.1f}"


def _row_label(loc: int, label: str) -> str:
    """``"0 MPI Rank 0"``; just ``"location 0"`` for an unnamed location."""
    return label if label == f"location {loc}" else f"{loc} {label}"


def _h(name: str, unit: str, width: int = 12) -> str:
    """A right-aligned column header with its unit: ``  time [ms]``."""
    return f"{f'{name} [{unit}]':>{width}}"


def format_profile(bd: Breakdown, top: int = 10) -> str:
    """The one-trace report: locations, wait states, the top regions. Each table has
    its own time unit (in its header) so that small times stay visible."""
    p: Profile = bd.profile
    unit, k = _unit(max([p.span, *(lp.duration for lp in p.locations.values())]))
    lines = [f"{p.source or '<trace>'}: {len(p.locations)} locations, "
             f"span {p.span * k:.3f} {unit}", ""]
    w = max([len("location"), *(len(_row_label(loc, lp.label)) for loc, lp in p.locations.items())])
    lines.append(f"{'location':<{w}}  {_h('time', unit)}  {_h('MPI', unit)}  "
                 f"{_h('outside MPI', unit, 17)}  {_h('waiting', unit)}  {'MPI %':>6}")
    # CPU threads only: metric samples and device activity are not execution time
    rows = [(_row_label(loc, lp.label), lp.duration, lp.mpi, lp.outside_mpi, bd.waits.at(loc))
            for loc, lp in p.locations.items() if lp.counted]
    rows.append(("total", p.duration, p.mpi, p.outside_mpi,
                 sum(bd.waits.total(s) for s in WAIT_STATES)))
    for label, dur, mpi, outside, waiting in rows:
        lines.append(f"{label:<{w}}  {dur * k:12.3f}  {mpi * k:12.3f}  {outside * k:17.3f}  "
                     f"{waiting * k:12.3f}  "
                     f"{_pct(100 * mpi / dur if dur else float('nan'))}")
    lines += _uncounted(p)
    lines.append("")
    wunit, wk = _unit(max(bd.waits.total(s) for s in WAIT_STATES) or p.span)
    lines.append(f"{'wait state':<16}  {_h('time', wunit)}  {'% of MPI':>8}  {'count':>7}  "
                 f"most on")
    for s in WAIT_STATES:
        t = bd.waits.total(s)
        most = ""
        if t > 0:
            loc = max(bd.waits.by_location[s], key=bd.waits.by_location[s].get)
            most = f"location {loc} ({100 * bd.waits.by_location[s][loc] / t:.0f} %)"
        share = _pct(100 * t / p.mpi if p.mpi else float("nan"))
        lines.append(f"{LABELS[s]:<16}  {t * wk:12.3f}  {share:>8}  {bd.waits.count(s):7d}  "
                     f"{most}".rstrip())
    lines += _hybrid_table(bd)
    regions = p.region_totals()
    if regions and top > 0:
        lines.append("")
        shown = regions[:top]
        runit, rk = _unit(max(r.inclusive for r in shown))
        rw = max(len("region"), *(len(r.name) for r in shown))
        more = f"   (top {top} by exclusive time)" if len(regions) > top else ""
        lines.append(f"{'region':<{rw}}  {'visits':>8}  {_h('inclusive', runit, 15)}  "
                     f"{_h('exclusive', runit, 15)}{more}")
        for r in shown:
            lines.append(f"{r.name:<{rw}}  {r.visits:8d}  {r.inclusive * rk:15.3f}  "
                         f"{r.exclusive * rk:15.3f}")
    return "\n".join(lines)


def _hybrid_table(bd: Breakdown) -> list[str]:
    """Thread and accelerator wait states (docs/analysis.md), for a trace that has
    thread synchronisation or accelerator streams (else no lines)."""
    h = bd.hybrid
    if h is None or not h.present:
        return []
    hunit, hk = _unit(max(h.total(s) for s in HYBRID_STATES) or bd.profile.span)
    w = max(len(HYBRID_LABELS[s]) for s in HYBRID_STATES)
    lines = ["", f"{'threads and accelerators':<{w}}  {_h('time', hunit)}  {'count':>7}  most on"]
    for s in HYBRID_STATES:
        t = h.total(s)
        most = ""
        if t > 0:
            loc = max(h.by_location[s], key=h.by_location[s].get)
            most = f"location {loc} ({100 * h.by_location[s][loc] / t:.0f} %)"
        lines.append(f"{HYBRID_LABELS[s]:<{w}}  {t * hk:12.3f}  {h.counts.get(s, 0):7d}  "
                     f"{most}".rstrip())
    return lines


def _uncounted(p: Profile) -> list[str]:
    """A line naming the locations left out of the totals, by type (none: no line)."""
    by_type: dict[str, int] = {}
    for lp in p.locations.values():
        if not lp.counted:
            by_type[lp.type] = by_type.get(lp.type, 0) + 1
    if not by_type:
        return []
    what = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items()))
    plural = "s" if sum(by_type.values()) > 1 else ""
    return [f"(not counted as execution time: {what} location{plural})"]


def format_comparison(cmp: Comparison) -> str:
    """The two-trace report: side by side, differences, shares of the difference.
    The difference column has its own unit, chosen for the differences."""
    m, a = cmp.measured.profile, cmp.approximated.profile
    unit, k = _unit(max(m.duration, a.duration, m.span, a.span))
    diffs = [cmp.span_diff, cmp.total_diff, *(cmp.diff(c) for c in CATEGORIES)]
    dunit, dk = _unit(max(abs(d) for d in diffs) or 1.0)
    lines = [f"measured:     {m.source or '<trace>'}",
             f"approximated: {a.source or '<trace>'}", ""]
    w = max([len(LABELS[c]) for c in CATEGORIES] + [len("total execution time (span)")]
            + [len(_row_label(loc, lp.label)) for loc, lp in m.locations.items()])

    def row(label: str, mv: float, av: float, dv: float, pct: float | None,
            most: str = "") -> str:
        p = f"{_pct(pct):>9}" if pct is not None else " " * 9
        return (f"{label:<{w}}  {mv * k:14.3f}  {av * k:18.3f}  {dv * dk:16.3f}  {p}  "
                f"{most}").rstrip()

    lines.append(f"{'':<{w}}  {_h('measured', unit, 14)}  {_h('approximated', unit, 18)}  "
                 f"{_h('difference', dunit, 16)}  {'% of diff':>9}")
    lines.append(row("total execution time (span)", m.span, a.span, cmp.span_diff, None))
    lines.append(row("summed over locations", m.duration, a.duration, cmp.total_diff,
                     100.0 if cmp.total_diff else float("nan")))
    lines.append("")
    lines.append(f"{'by behaviour':<{w}}  {'':14}  {'':18}  {'':16}  {'':9}  most on")
    for c in CATEGORIES:
        top = cmp.top_location(c)
        most = f"location {top[0]} ({top[1]:.0f} %)" if top else ""
        lines.append(row(LABELS[c], cmp.measured.total(c), cmp.approximated.total(c),
                         cmp.diff(c), cmp.percent(c), most))
    lines.append("")
    lines.append("by location")
    for loc in cmp.locations:
        lm, la = m.locations[loc], a.locations[loc]
        lines.append(row(_row_label(loc, lm.label), lm.duration, la.duration,
                         cmp.location_diff(loc), cmp.location_percent(loc)))
    if any(b.hybrid is not None and b.hybrid.present
           for b in (cmp.measured, cmp.approximated)):
        lines.append("")
        lines.append("threads and accelerators (outside the sum above)")
        for s, mv, av in cmp.hybrid_rows():
            lines.append(row(HYBRID_LABELS[s], mv, av, mv - av, None))
    lines.append("(difference = measured - approximated)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------
# JSON

#: JSON Schema of ``compensate report --json`` (documented in docs/analysis.md).
_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_PER_LOC = {"type": "object", "additionalProperties": _NUM}
REPORT_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "compensate report --json",
    "type": "object",
    "required": ["schema", "unit", "traces", "comparison"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "unit": {"const": "s"},
        "traces": {
            "type": "array", "minItems": 1, "maxItems": 2,
            "items": {
                "type": "object",
                "required": ["path", "records", "profile", "wait_states", "breakdown"],
                "properties": {
                    "path": {"type": "string"},
                    "records": {"type": "integer"},
                    "profile": {
                        "type": "object",
                        "required": ["span", "duration", "mpi", "outside_mpi", "locations",
                                     "regions", "timer_resolution"],
                        "properties": {
                            "span": _NUM, "duration": _NUM, "mpi": _NUM, "outside_mpi": _NUM,
                            "timer_resolution": {"type": "integer"},
                            "locations": {"type": "array", "items": {
                                "type": "object",
                                "required": ["location", "label", "start", "end", "duration",
                                             "mpi", "outside_mpi", "flush", "flush_in_mpi"]}},
                            "regions": {"type": "array", "items": {
                                "type": "object",
                                "required": ["name", "visits", "inclusive", "exclusive", "mpi"]}},
                        },
                    },
                    "wait_states": {
                        "type": "object", "required": list(WAIT_STATES),
                        "additionalProperties": {
                            "type": "object", "required": ["total", "count", "by_location"],
                            "properties": {"total": _NUM, "count": {"type": "integer"},
                                           "by_location": _PER_LOC}}},
                    "hybrid": {"oneOf": [{"type": "null"}, {
                        "type": "object", "required": list(HYBRID_STATES),
                        "additionalProperties": {
                            "type": "object", "required": ["total", "count", "by_location"],
                            "properties": {"total": _NUM, "count": {"type": "integer"},
                                           "by_location": _PER_LOC}}}]},
                    "breakdown": {
                        "type": "object", "required": list(CATEGORIES),
                        "additionalProperties": {
                            "type": "object", "required": ["total", "by_location"],
                            "properties": {"total": _NUM, "by_location": _PER_LOC}}},
                },
            },
        },
        "comparison": {
            "oneOf": [
                {"type": "null"},
                {"type": "object",
                 "required": ["span", "total_difference", "categories", "locations"],
                 "properties": {
                     "span": {"type": "object",
                              "required": ["measured", "approximated", "difference"]},
                     "total_difference": _NUM,
                     "categories": {
                         "type": "object", "required": list(CATEGORIES),
                         "additionalProperties": {
                             "type": "object",
                             "required": ["measured", "approximated", "difference", "percent",
                                          "by_location"],
                             "properties": {
                                 "percent": _NUM_OR_NULL,
                                 "by_location": {"type": "object", "additionalProperties": {
                                     "type": "object", "required": ["difference", "share"],
                                     "properties": {"difference": _NUM,
                                                    "share": _NUM_OR_NULL}}}}}},
                     "locations": {"type": "object", "additionalProperties": {
                         "type": "object", "required": ["difference", "percent"],
                         "properties": {"difference": _NUM, "percent": _NUM_OR_NULL}}},
                     "hybrid": {"type": "object", "additionalProperties": {
                         "type": "object",
                         "required": ["measured", "approximated", "difference"]}},
                 }},
            ],
        },
    },
}


def report_dict(traces: list[tuple[Trace, Breakdown]], cmp: Comparison | None) -> dict:
    """The ``--json`` document (see :data:`REPORT_SCHEMA`)."""
    return {
        "schema": SCHEMA_ID,
        "unit": "s",
        "traces": [{"path": t.source, "records": t.record_count,
                    "profile": bd.profile.to_dict(), "wait_states": bd.waits.to_dict(),
                    "breakdown": bd.to_dict(),
                    "hybrid": bd.hybrid.to_dict() if bd.hybrid is not None else None}
                   for t, bd in traces],
        "comparison": cmp.to_dict() if cmp is not None else None,
    }


# ---------------------------------------------------------------------------------
# commands

def _check_trace_path(path: str) -> None:
    """A trace the command can read: its format, and room for its reader's
    buffers (:func:`compensate.pipeline.memory.refuse_read_buffers`)."""
    from compensate.pipeline.memory import refuse_read_buffers

    try:
        trace_format(path)
    except ValueError as exc:
        raise Usage(str(exc)) from None
    refuse_read_buffers(path)


def _check_nesting(trace: Trace, strict: bool) -> None:
    """Enter/Leave that do not nest: refused with ``--strict`` (TraceError, exit 3),
    else one note on stderr (the analyses pair each Leave with the latest open Enter
    of its region, :class:`compensate.matching.Nesting`)."""
    from compensate.matching.match import structure_of

    count, first = 0, None
    for loc, ev in trace.events.items():
        nest = structure_of(trace, loc, ev, strict)
        if nest.problems:
            count += nest.problems
            i = nest.first[0]
            key = (int(ev.time[i]), loc)
            if first is None or key < first[0]:
                first = (key, loc, i, nest.first[1])
    if first is not None:
        _, loc, i, what = first
        print(f"compensate report: note: {count} Leave records do not nest (first: "
              f"{trace.source}: location {loc}, record {i}: {what}); each Leave closed the "
              f"latest open Enter of its region (--strict refuses)", file=sys.stderr)


def report_parser() -> argparse.ArgumentParser:
    """``compensate report``'s parser."""
    p = Parser(prog="compensate report",
               description="Profile and wait states of a trace, or the before/after "
                           "comparison of two traces of the same run.")
    p.add_argument("trace", metavar="TRACE", help="OTF2 anchor file or .trace (measured)")
    p.add_argument("trace2", metavar="TRACE2", nargs="?",
                   help="second trace of the same run (approximated) to compare with")
    p.add_argument("--json", metavar="FILE", help="also write the full report as JSON")
    p.add_argument("--eager-limit", metavar="BYTES", type=values.whole(0, what="bytes"),
                   help="MPI_Send above this size is synchronous (Late Receiver); "
                        "default: inferred from the timing")
    p.add_argument("--top", metavar="N", type=values.whole(1, what="regions"), default=10,
                   help="regions listed in the one-trace report (default 10)")
    p.add_argument("--strict", action="store_true",
                   help="refuse Enter/Leave that do not nest (exit 3) instead of pairing "
                        "each Leave with the latest open Enter of its region")
    p.add_argument("--version", action="version", version=version_line(p.prog))
    return p


def run_report(argv: list[str]) -> int:
    args = report_parser().parse_args(argv)
    paths = [args.trace] + ([args.trace2] if args.trace2 else [])
    for path in paths:
        _check_trace_path(path)
    json_out = None
    if args.json:
        if any(is_part_of_input(args.json, path) for path in paths):
            raise OutputError(f"{args.json}: would overwrite the input")
        json_out = AtomicFile(args.json)  # an unusable path fails before the work
    try:
        return _report(args, paths, json_out)
    finally:
        if json_out is not None:
            json_out.discard()  # nothing after the commit


def _report(args: argparse.Namespace, paths: list[str], json_out: AtomicFile | None) -> int:
    traces = [read_blocks(path, payload=False) for path in paths]  # (the columns)
    for trace in traces:
        _check_nesting(trace, args.strict)
    cmp = None
    if len(traces) == 2:
        cmp = compare(traces[0], traces[1], eager_limit=args.eager_limit)
        bds = [cmp.measured, cmp.approximated]
        print(format_comparison(cmp))
    else:
        bds = [breakdown(traces[0], eager_limit=args.eager_limit)]
        print(format_profile(bds[0], top=args.top))
    if json_out is not None:
        doc = report_dict(list(zip(traces, bds, strict=True)), cmp)
        json_out.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        json_out.commit()
    return EXIT_OK


def export_parser() -> argparse.ArgumentParser:
    """``compensate export``'s parser."""
    p = Parser(prog="compensate export",
               description="Write a trace as Chrome/Perfetto trace-event JSON "
                           "(open it in ui.perfetto.dev or chrome://tracing).")
    p.add_argument("trace", metavar="TRACE", help="OTF2 anchor file or .trace")
    p.add_argument("output", metavar="OUT.json", help="trace-event JSON file to write")
    p.add_argument("--force", action="store_true", help="replace an existing OUT.json")
    p.add_argument("--version", action="version", version=version_line(p.prog))
    return p


#: each subcommand's parser
PARSERS = {"report": report_parser, "export": export_parser}


def run_export(argv: list[str]) -> int:
    from compensate.analysis.export import write_trace_events

    args = export_parser().parse_args(argv)
    _check_trace_path(args.trace)
    out = Path(args.output)
    if out.suffix.lower() != ".json":
        raise Usage(f"{args.output}: the output must be a .json file")
    if out.exists() and out.resolve() == Path(args.trace).resolve():
        raise TraceError("output would overwrite the input", source=args.output)
    if out.is_dir():
        raise TraceError("is a directory", source=args.output)
    if out.exists() and not args.force:
        raise TraceError("exists (use --force to replace it)", source=args.output)
    # an unusable path fails before the work; without --force, an OUT.json written
    # meanwhile is not replaced
    target = AtomicFile(out, force=args.force)
    try:
        trace = read_blocks(args.trace, payload=False)  # (the C path: no values kept)
        if any(bool(np.any(ev.kind == METRIC)) for ev in trace.events.values()):
            trace = read_trace(args.trace)  # a metric sample's values: its payload
        n = write_trace_events(trace, target)
    finally:
        target.discard()  # nothing after the commit
    print(f"compensate: exported {trace.record_count:,} records on {len(trace.events)} "
          f"locations as {n:,} trace events to {args.output}")
    return EXIT_OK


def main(argv: list[str]) -> int:
    """Run ``report`` or ``export`` (``argv[0]``) and return the exit code (130 / 143
    after SIGINT / SIGTERM, :func:`compensate.interrupt.run`)."""
    return interrupt.run(f"compensate {argv[0]}", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    command, rest = argv[0], list(argv[1:])
    runner = {"report": run_report, "export": run_export}[command]
    try:
        return runner(rest)
    except KeyboardInterrupt:  # interrupt.run reports
        raise
    except SystemExit as exc:  # --help, --version: argparse printed them
        return exit_status(exc)
    except BaseException as exc:  # noqa: BLE001 - one line, never a traceback
        if isinstance(exc, Usage):
            interrupt.check()  # an error an interrupt caused is reported as the interrupt
            print(f"compensate {command}: error: {exc}\n{synopsis(PARSERS[command]())}",
                  file=sys.stderr)
            return EXIT_USAGE
        return failure_status(f"compensate {command}", exc)
