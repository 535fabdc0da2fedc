"""Command line: ``compensate IN OUT [--bound lower|upper] [--platform FILE.json] ...``.

Data flow: read -> match -> compensate -> verify -> write (atomically). Exit codes:
0 ok, 2 usage, 3 bad input (including refused output paths), 4 verification
failure (a bug: nothing is written), 1 internal error. Every error is one line on
stderr; set COMPENSATE_DEBUG=1 to see tracebacks of internal errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from compensate import __version__
from compensate.api import build_summary, resolve_platform, run_pipeline
from compensate.engine import BOUNDS, COLLECTIVE_EXITS, EngineOptions
from compensate.formats import OutputError, output_target, read_trace, trace_format, write_trace
from compensate.gcpause import gc_paused
from compensate.model import TraceError
from compensate.platform import Platform, PlatformError

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_INPUT, EXIT_VERIFY = 0, 1, 2, 3, 4

PLATFORM_HINT = ("give --platform FILE.json (write one with `calibrate`, or by hand: "
                 '{"event_overhead": 1e-6, "copy_time": [{"bytes": 1024, "seconds": 1e-7}]}) '
                 "or --overhead DURATION (e.g. 250ns)")


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise _Usage(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="compensate",
        description="Remove tracing overhead from an MPI trace (OTF2 or .trace) and write "
                    "an approximation of the uninstrumented run.")
    p.add_argument("input", metavar="IN", help="OTF2 anchor file (*.otf2) or text trace (*.trace)")
    p.add_argument("output", metavar="OUT",
                   help="output: out/traces.otf2 creates the archive directory out/, or *.trace")
    p.add_argument("--bound", choices=BOUNDS, default="lower",
                   help="communication model for transfers the trace did not observe "
                        "(default: lower; fitted: a latency + bandwidth model fitted to the "
                        "transfers it did observe; none copies the trace unchanged)")
    p.add_argument("--platform", metavar="FILE.json", help="platform file (overhead, copy cost)")
    p.add_argument("--overhead", metavar="DURATION",
                   help="per-record overhead for every record kind, e.g. 250ns, 1.5us, 2e-6; "
                        "overrides the platform file's")
    p.add_argument("--collective-exit", choices=COLLECTIVE_EXITS, default="uniform",
                   help="n-to-n exits: uniform (eq. 12) or per-process (eq. 13)")
    p.add_argument("--eager-limit", metavar="BYTES", type=int, default=None,
                   help="treat MPI_Send messages larger than BYTES as synchronous "
                        "(rendezvous); MPI_Ssend always is (default: off)")
    p.add_argument("--summary", metavar="FILE.json", help="write a JSON summary of the run")
    p.add_argument("--in-memory", action="store_true",
                   help="hold the whole trace in memory instead of streaming it segment by "
                        "segment (same result; for comparison and debugging)")
    p.add_argument("--strict", action="store_true",
                   help="refuse Enter/Leave that do not nest (exit 3) instead of pairing "
                        "each Leave with the latest open Enter of its region")
    p.add_argument("--force", action="store_true", help="replace an existing OUT")
    p.add_argument("--quiet", action="store_true", help="no progress and no summary line")
    p.add_argument("--version", action="version", version=f"compensate {__version__}")
    return p


def load_platform(args: argparse.Namespace) -> Platform | None:
    """``--platform`` with its overhead replaced by ``--overhead`` (as the API does)."""
    return resolve_platform(args.platform or None, args.overhead)


class _Progress:
    """A one-line progress indicator on stderr (only on a terminal)."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total = max(total, 1) if total is not None else None
        self.enabled = enabled
        self.start = time.monotonic()

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        rate = done / max(time.monotonic() - self.start, 1e-9)
        if self.total is None:
            sys.stderr.write(f"\rcompensating: {done:,} records ({rate:,.0f} rec/s)")
        else:
            sys.stderr.write(f"\rcompensating: {done:,}/{self.total:,} records "
                             f"({100 * done / self.total:5.1f} %, {rate:,.0f} rec/s)")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _phase(show: bool, message: str) -> None:
    """Say what a long step is doing (terminal only; an empty message clears)."""
    if show:
        sys.stderr.write(f"\r\033[Kcompensate: {message}" if message else "\r\033[K")
        sys.stderr.flush()


def run(argv: list[str] | None = None) -> int:
    # every record stays alive until written: the cyclic collector would only rescan
    # them again and again (compensate.gcpause)
    with gc_paused():
        return _run(argv)


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        trace_format(args.input)
        trace_format(args.output)
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    target = output_target(args.input, args.output, args.force)
    platform = load_platform(args)
    if platform is None and args.bound != "none":
        raise PlatformError(f"no platform: {PLATFORM_HINT}")
    show = not args.quiet and sys.stderr.isatty()
    if not args.in_memory:
        from compensate.engine.stream import NotStreamable, SegmentError
        try:
            return _run_streaming(args, target, platform, show)
        except (NotStreamable, SegmentError) as exc:
            # not in time order, or a problem whose exact record the whole trace names
            _phase(show, f"cannot stream ({exc}); reading the whole trace ...")
    return _run_in_memory(args, target, platform, show)


def _run_in_memory(args: argparse.Namespace, target: Path, platform: Platform | None,
                   show: bool) -> int:
    """read -> match -> compensate -> verify -> write, the whole trace in memory."""
    t_start = time.monotonic()
    _phase(show, f"reading {args.input} ...")
    trace = read_trace(args.input)
    t_read = time.monotonic()
    progress = _Progress(trace.record_count, show)
    try:
        result, matching, outcome, check = run_pipeline(
            trace, platform, args.bound, args.collective_exit, args.eager_limit, progress,
            lambda message: _phase(show, message), strict=args.strict)
    finally:
        progress.close()
    t_comp = time.monotonic()
    summary = _summary(args, platform, result.stats, check, matching.counts(), outcome,
                       records=trace.record_count, locations=len(trace.events),
                       resolution=trace.definitions.timer_resolution,
                       measured=trace.span_seconds, approximated=result.trace.span_seconds,
                       nesting=matching.nesting_summary())
    summary["seconds"] = {"read": t_read - t_start, "compensate": t_comp - t_read}
    if not check.ok:
        return _verification_failed(args, summary, check)
    _phase(show, f"writing {args.output} ...")
    write_trace(result.trace, args.output, target)
    _phase(show, "")
    summary["seconds"]["write"] = time.monotonic() - t_comp
    return _done(args, summary)


def _run_streaming(args: argparse.Namespace, target: Path, platform: Platform | None,
                   show: bool) -> int:
    """The same pipeline segment by segment (compensate.engine.stream): read a chunk, cut at
    safe points, match -> compensate -> verify -> write each segment."""
    from compensate.engine.stream import compensate_stream, fit_pass
    from compensate.formats import TraceWriter, read_chunks

    t_start = time.monotonic()
    bound, outcome = args.bound, None
    plat = platform or Platform(0.0)
    if args.bound == "fitted":  # R2f needs the fit first: one more pass over the input
        _phase(show, f"fitting the network to the transfers {args.input} observed ...")
        defs, chunks = read_chunks(args.input)
        outcome = fit_pass(defs, chunks, plat, args.input, args.eager_limit,
                           strict=args.strict)
        bound = "fitted" if outcome.fit else "lower"
    t_fit = time.monotonic()
    defs, chunks = read_chunks(args.input)
    progress = _Progress(None, show)
    writer = TraceWriter(args.output, defs, target)
    try:
        result = compensate_stream(
            defs, chunks, plat,
            EngineOptions(bound=bound, collective_exit=args.collective_exit,
                          network_time=outcome.fit if outcome else None),
            writer.write, source=str(args.input), eager_limit=args.eager_limit,
            progress=progress, advance=writer.advance, strict=args.strict)
        progress.close()
        check = result.verification
        res = defs.timer_resolution
        summary = _summary(args, platform, result.stats, check, result.counts, outcome,
                           records=result.records, locations=result.locations,
                           resolution=res, measured=_seconds(result.measured_span, res),
                           approximated=_seconds(result.approximated_span, res),
                           nesting=dict(result.counts.get("nesting", {}),
                                        first=result.nesting_first))
        summary["segments"] = {"count": result.segments, "largest": result.largest_segment}
        if not check.ok:
            writer.abort()
            return _verification_failed(args, summary, check)
        _phase(show, f"finishing {args.output} ...")
        writer.close()
    except BaseException:
        progress.close()
        writer.abort()
        raise
    _phase(show, "")
    summary["seconds"] = {"fit": t_fit - t_start, "compensate_and_write":
                          time.monotonic() - t_fit}
    return _done(args, summary)


def _seconds(span: tuple[int, int] | None, resolution: int) -> float:
    return (span[1] - span[0]) / resolution if span else 0.0


def _summary(args: argparse.Namespace, platform: Platform | None, stats, check, counts: dict,
             outcome, *, records: int, locations: int, resolution: int, measured: float,
             approximated: float, nesting: dict | None = None) -> dict:
    """The ``--summary`` object (built as :func:`compensate.compensate` builds its
    ``summary``) and, under ``_bound_text``, the bound part of the one-line summary."""
    summary = build_summary(
        input=str(args.input), output=str(args.output), bound=args.bound,
        collective_exit=args.collective_exit, eager_limit=args.eager_limit, platform=platform,
        stats=stats, verification=check, counts=counts, fit_outcome=outcome, records=records,
        locations=locations, resolution=resolution, measured=measured,
        approximated=approximated, nesting=nesting)
    summary["_bound_text"] = f"{args.bound} bound"
    if outcome is not None:
        from compensate.engine.fit import summary_phrase
        summary["_bound_text"] = summary_phrase(summary["fit"])
    return summary


def _verification_failed(args: argparse.Namespace, summary: dict, check) -> int:
    summary.pop("_bound_text", None)
    _write_summary(args, summary)
    print(f"compensate: verification failed: {check.violations} happened-before "
          f"violations ({'; '.join(check.examples[:2])}); nothing written — "
          f"this is a bug, please report it", file=sys.stderr)
    return EXIT_VERIFY


def _done(args: argparse.Namespace, summary: dict) -> int:
    bound_text = summary.pop("_bound_text")
    _write_summary(args, summary)
    if not args.quiet:
        m, a = summary["measured_span_s"], summary["approximated_span_s"]
        removed = f"{100 * (m - a) / m:.1f} %" if m > 0 else "n/a"
        over = summary["overcompensated_records"]
        print(f"compensate: {summary['records']:,} records on {summary['locations']} "
              f"locations, {bound_text}: span {m:.6g} s -> {a:.6g} s ({removed} shorter), "
              f"{summary['messages_matched']} messages, {summary['collective_instances']} "
              f"collectives, {over} overcompensated records"
              f"{' (overhead too large for this trace?)' if over else ''}, verified"
              f"{_local_only_note(summary['verification'])}; wrote {args.output}")
        _nesting_note(summary.get("nesting"))
    return EXIT_OK


def _local_only_note(verification: dict) -> str:
    """What "verified" did not cover: records carried as local only, by kind."""
    local = verification.get("carried_local_only") or {}
    if not local:
        return ""
    top = sorted(local.items(), key=lambda kv: -kv[1])
    kinds = ", ".join(f"{k} {n:,}" for k, n in top[:3]) + (", ..." if len(top) > 3 else "")
    return (f" ({verification['carried_local_only_records']:,} records carried as local "
            f"only, not checked: {kinds})")


def _nesting_note(nesting: dict | None) -> None:
    """One line on stderr when Enter/Leave did not nest (tolerated unless --strict)."""
    first = (nesting or {}).get("first")
    if not first:
        return
    n = nesting.get("leaves_out_of_order", 0) + nesting.get("leaves_without_enter", 0)
    print(f"compensate: note: {n} Leave records do not nest (first: {first['file']}: "
          f"location {first['location']}, record {first['index']}: {first['problem']}); "
          f"each Leave closed the latest open Enter of its region (--strict refuses)",
          file=sys.stderr)


def _write_summary(args: argparse.Namespace, summary: dict) -> None:
    if not args.summary:
        return
    path = Path(args.summary)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(summary, indent=2, default=_json_default) + "\n")
    os.replace(tmp, path)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


def main(argv: list[str] | None = None) -> int:
    # `compensate report ...` / `compensate export ...`: subcommands (compensate/reportcli.py)
    sub = list(sys.argv[1:] if argv is None else argv)
    if sub and sub[0] in ("report", "export"):
        from compensate.cli.report import main as subcommand_main
        return subcommand_main(sub)
    try:
        code = run(argv)
    except _Usage as exc:
        print(f"compensate: error: {exc}\nusage: compensate IN OUT "
              f"[--bound lower|upper|fitted|none] [--platform FILE.json] [--overhead DURATION] "
              f"[--collective-exit uniform|per-process] [--eager-limit BYTES] "
              f"[--summary FILE.json] [--in-memory] [--strict] [--force] [--quiet]",
              file=sys.stderr)
        code = EXIT_USAGE
    except (TraceError, PlatformError, OutputError) as exc:
        print(f"compensate: error: {exc}", file=sys.stderr)
        code = EXIT_INPUT
    except KeyboardInterrupt:
        print("compensate: interrupted; nothing written", file=sys.stderr)
        code = 130
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        if os.environ.get("COMPENSATE_DEBUG"):
            raise
        print(f"compensate: internal error: {type(exc).__name__}: {exc} "
              f"(set COMPENSATE_DEBUG=1 for a traceback; please report it)", file=sys.stderr)
        code = EXIT_INTERNAL
    return code


if __name__ == "__main__":
    sys.exit(main())
