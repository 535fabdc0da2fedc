"""Command line: ``calibrate run|overhead|check`` (``calibrate -o FILE`` means ``run``).

Exit codes: 0 ok; 2 usage error; 3 bad input (unreadable trace or platform file,
an output that may not be written, a probe command that fails); 4 the
measurement says no (``check``: the platform's overhead would overcompensate
the trace; ``overhead``: the overhead could not be resolved from the noise);
1 internal error; 130 interrupted. Every error is one line on stderr; set
CALIBRATE_DEBUG=1 to see the traceback of an internal error.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import time

import numpy as np

import compensate.cli.values as values
import compensate.interrupt as interrupt
from calibration import external, overhead, platformfile, targets, tracecheck, workers
from calibration.copycost import COPY_METHODS, measure_copy_cost
from calibration.modes import MODES
from calibration.report import format_external, format_run
from calibration.spread import MAX_SPREAD, Unsteady
from calibration.timer import calibrate_timer
from calibration.units import fmt_bytes, fmt_seconds
from compensate.model import TraceError
from compensate.platform import Platform, PlatformError, parse_duration
from compensate.progress import Progress

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_INPUT, EXIT_REFUSED = 0, 1, 2, 3, 4
SUBCOMMANDS = ("run", "overhead", "check")
USAGE = ("usage: calibrate run -o FILE.json [--tracer NAME] [--quick|--thorough] "
         "[--force] ...\n"
         "       calibrate overhead --command \"CMD {n}\" --baseline \"CMD0 {n}\" "
         "--events-per-iteration K [--tracer NAME --update FILE.json] ...\n"
         "       calibrate check TRACE [--platform FILE.json | --overhead DURATION]")


class _Usage(Exception):
    """A usage error (exit 2)."""


class _Unsteady(Exception):
    """A constant too noisy to write (exit 4); the message is the whole line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise _Usage(message)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|K|M|G)?\s*$", re.IGNORECASE)
_SIZE_UNIT = {"b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
              "g": 1 << 30, "gib": 1 << 30}


def parse_size(text: str) -> int:
    """``64MiB``, ``512K``, ``65536`` -> bytes (argparse type)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"cannot parse size {text!r} (examples: 64MiB, 4096)")
    return int(float(m.group(1)) * _SIZE_UNIT[(m.group(2) or "b").lower()])


def parse_counts(text: str) -> tuple[int, ...]:
    """``100000,200000`` or ``1e5,2e5`` -> iteration counts (argparse type)."""
    try:
        counts = tuple(int(float(x)) for x in text.split(",") if x.strip())
        if not all(1 <= n <= values.INT64_MAX for n in counts):
            raise ValueError("out of range")
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"cannot parse iteration counts {text!r}: whole numbers >= 1 (example: "
            f"100000,200000,400000)") from None
    if not counts:
        raise argparse.ArgumentTypeError("no iteration counts given")
    return counts


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="calibrate",
                description="Measure the platform constants compensate needs (per-record "
                            "tracer overhead, buffer copy cost) and write the platform file.")
    p.add_argument("--version", action="version", version="calibrate (compensate 0.1.0)")
    sub = p.add_subparsers(dest="subcommand", metavar="{run,overhead,check}")

    r = sub.add_parser("run", help="copy cost + timer + a tracer's overhead -> platform file",
                       description="Measure the timer, the copy cost of 64 B .. 64 MiB buffers "
                                   "and the per-record cost of the tracer named by --tracer; "
                                   "write a platform file that names that tracer.")
    r.add_argument("-o", "--output", required=True, metavar="FILE.json", help="platform file")
    r.add_argument("--tracer", choices=targets.TRACERS, default="record",
                   help="whose per-record cost to measure: record (the project's mpi4py "
                        "tracer, python -m calibration.record; the default), python-writer "
                        "(the otf2 Python writer), scorep (calibration/microbench-scorep, "
                        "make -C calibration), eztrace or other (--command/--baseline)")
    r.add_argument("--command", metavar="\"CMD {n}\"",
                   help="external tracers: the instrumented microbenchmark (default for "
                        "scorep: calibration/microbench-scorep {n})")
    r.add_argument("--baseline", metavar="\"CMD0 {n}\"",
                   help="external tracers: the same without the tracer (default for "
                        "scorep: calibration/microbench {n})")
    r.add_argument("--events-per-iteration", metavar="K", default=2.0,
                   type=values.real(0, 1e9, "records", open_low=True),
                   help="external tracers: records one iteration writes (default 2)")
    r.add_argument("--timing", choices=external.TIMINGS, default="stdout",
                   help="external tracers: stdout (the last number the program prints; "
                        "the default, as microbench.c prints its loop time) or wall")
    _max_spread_option(r)
    r.add_argument("--force", action="store_true", help="replace an existing FILE.json")
    speed = r.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="a few seconds (tests, smoke runs)")
    speed.add_argument("--thorough", action="store_true",
                       help="publication-quality numbers (several minutes)")
    r.add_argument("--table", choices=platformfile.TABLES, default="warm",
                   help="which copy times go into copy_time: warm (cache-resident, the "
                        "default) or fresh (cache-cold) buffers")
    r.add_argument("--copy-method", choices=COPY_METHODS, default="memoryview",
                   help="memoryview (one memcpy per copy, default) or numpy (np.copyto)")
    r.add_argument("--max-size", type=parse_size, default=None, metavar="SIZE",
                   help="largest buffer (default 64MiB; at least 64 B)")
    r.add_argument("--monotone", action="store_true",
                   help="write the running maximum of the copy time (keep measured values in "
                        "measured_seconds) where a larger buffer copied faster")
    r.add_argument("--seed", type=values.whole(0), default=0,
                   help="bootstrap seed (default 0)")
    r.add_argument("--quiet", action="store_true", help="no progress and no report")

    o = sub.add_parser("overhead", help="per-record overhead of an external tracer",
                       description="Run an instrumented and an uninstrumented microbenchmark "
                                   "at several iteration counts and fit the overhead per record "
                                   "from the difference of the slopes.")
    o.add_argument("--command", required=True, metavar="\"CMD {n}\"",
                   help="the instrumented microbenchmark; {n} = iteration count")
    o.add_argument("--baseline", required=True, metavar="\"CMD0 {n}\"",
                   help="the same microbenchmark without the tracer")
    o.add_argument("--events-per-iteration", required=True, metavar="K",
                   type=values.real(0, 1e9, "records", open_low=True),
                   help="records one iteration writes (2 for an instrumented call)")
    o.add_argument("--n", type=parse_counts, default=external.DEFAULT_NS, metavar="N1,N2,...",
                   help="iteration counts (default 100000,...,500000)")
    o.add_argument("--repeats", type=values.whole(1, 1 << 20, "runs"), default=5,
                   help="runs per command and count (5)")
    o.add_argument("--timing", choices=external.TIMINGS, default="wall",
                   help="wall: process wall time; stdout: the last number the program prints "
                        "(calibration/microbench.c prints its loop time)")
    o.add_argument("--shell", action="store_true", help="run the commands through /bin/sh")
    o.add_argument("--timeout", type=values.real(0, 1e7, "seconds", open_low=True),
                   default=600.0, help="seconds per run (600)")
    o.add_argument("--update", metavar="FILE.json",
                   help="write the fitted overhead into this platform file as event_overhead "
                        "(and drop event_overhead_by_kind, which came from another probe); "
                        "needs --tracer")
    o.add_argument("--tracer", choices=targets.EXTERNAL,
                   help="the tracer the command runs under (scorep, eztrace, other): "
                        "written into the --update file")
    _max_spread_option(o)
    o.add_argument("--quiet", action="store_true", help="no progress and no report")

    c = sub.add_parser("check", help="does the platform's overhead fit a trace?",
                       description="Per record kind, the smallest gap to the next record bounds "
                                   "the overhead; warn if the platform's overhead exceeds it.")
    c.add_argument("trace", metavar="TRACE", help="OTF2 anchor file (*.otf2) or *.trace")
    c.add_argument("--platform", metavar="FILE.json", help="platform file to check")
    c.add_argument("--overhead", metavar="DURATION", type=values.duration(),
                   help="check this overhead for every kind instead (e.g. 250ns)")
    c.add_argument("--quiet", action="store_true", help="only the verdict line")
    return p


def _max_spread_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-spread", type=values.real(0, 1e6, "fraction", open_low=True),
                   default=MAX_SPREAD, metavar="FRACTION",
                   help=f"refuse to write a constant whose spread (interquartile range, "
                        f"or 95 %% confidence interval of a fitted overhead) exceeds this "
                        f"fraction of its value (default {MAX_SPREAD:g})")


# ---------------------------------------------------------------------------
# run


def cmd_run(args: argparse.Namespace) -> int:
    mode = MODES["quick" if args.quick else "thorough" if args.thorough else "default"]
    copy_cfg = dataclasses.replace(mode.copy, method=args.copy_method, seed=args.seed)
    if args.max_size is not None:
        if args.max_size < copy_cfg.min_bytes:
            raise _Usage(f"--max-size must be at least {copy_cfg.min_bytes} B")
        copy_cfg = dataclasses.replace(copy_cfg, max_bytes=args.max_size)
    probe_cfg = _external_settings(args, mode.name)
    platformfile.check_output(args.output, args.force)
    show = not args.quiet
    started = time.perf_counter()
    prog = Progress("calibrate", "timer", enabled=show)
    try:
        prog.fraction(0.0, "clock read cost")
        timer = calibrate_timer(mode.timer_pairs, mode.n_resamples, args.seed)
        prog = prog.phase("copy cost")
        copy = measure_copy_cost(timer, copy_cfg, prog.fraction)
        prog = prog.phase(f"per-record cost of {args.tracer}")
        cost = _tracer_cost(args, mode, timer, probe_cfg, prog.fraction)
        _refuse_unsteady(targets.unsteady(cost, args.max_spread), args.output)
    finally:
        prog.close()
    data = platformfile.build_platform(copy, timer, cost, mode=mode.name,
                                       seconds=time.perf_counter() - started,
                                       table=args.table, monotone=args.monotone)
    platformfile.write_platform(data, args.output, args.force)
    if show:
        print(format_run(data, args.output))
    return EXIT_OK


def _external_settings(args: argparse.Namespace, mode: str) -> external.ExternalSettings | None:
    """The external probe of ``run --tracer scorep|eztrace|other`` (checked before
    the long measurements); None for the tracers measured in this process."""
    if args.tracer not in targets.EXTERNAL:
        if args.command or args.baseline:
            raise _Usage(f"--command and --baseline are for external tracers "
                         f"({', '.join(targets.EXTERNAL)}), not --tracer {args.tracer}")
        return None
    command, baseline = args.command, args.baseline
    if args.tracer == "scorep" and not (command or baseline):
        missing = targets.missing_microbench()
        if missing:
            raise external.ProbeError(missing)
        command, baseline = targets.scorep_commands()
    if not (command and baseline):
        raise _Usage(f"--tracer {args.tracer} needs --command and --baseline (the "
                     f"microbenchmark with and without the tracer; docs/calibration.md)")
    quick = mode == "quick"
    cfg = external.ExternalSettings(
        command=command, baseline=baseline, events_per_iteration=args.events_per_iteration,
        ns=(20000, 40000, 60000, 80000) if quick else external.DEFAULT_NS,
        repeats=3 if quick else 5, timing=args.timing)
    try:
        cfg.check()
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    return cfg


def _tracer_cost(args: argparse.Namespace, mode, timer, probe_cfg, progress) -> dict:
    """The overhead part of the platform file for ``args.tracer``
    (:mod:`calibration.targets`)."""
    if args.tracer == "record":
        progress(0.0, "record path")
        return targets.record_overhead(*targets.RECORD_SAMPLES[mode.name])
    if args.tracer == "python-writer":
        writer_cfg = dataclasses.replace(mode.writer, seed=args.seed)
        return targets.writer_overhead(overhead.run_writer_probe(timer, writer_cfg, progress))
    result = external.run_external_probe(probe_cfg, timer, progress)
    if not result.resolved:
        raise _Unsteady(f"calibrate: error: per-record cost event_overhead (tracer "
                        f"{args.tracer}) not resolved ({fmt_seconds(result.overhead)} +- "
                        f"{fmt_seconds(result.stderr)}); rerun on a quiet machine or with "
                        f"larger iteration counts; {args.output} not written")
    return targets.external_overhead(args.tracer, result.to_dict())


def _refuse_unsteady(found: Unsteady | None, target: str, written: str = "not written") -> None:
    """Stop (exit 4) with the one-line refusal of a constant too noisy to write."""
    if found is not None:
        raise _Unsteady(found.message("calibrate", then=f"{target} {written}"))


# ---------------------------------------------------------------------------
# overhead


def cmd_overhead(args: argparse.Namespace) -> int:
    cfg = external.ExternalSettings(command=args.command, baseline=args.baseline,
                                    events_per_iteration=args.events_per_iteration,
                                    ns=tuple(args.n), repeats=args.repeats, timing=args.timing,
                                    shell=args.shell, timeout=args.timeout)
    try:
        cfg.check()
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    if args.update:
        if args.tracer is None:
            raise _Usage("--update needs --tracer (scorep, eztrace or other): the platform "
                         "file names the tracer its overhead is for")
        platformfile.read_platform_dict(args.update)  # fail before the long runs
    prog = Progress("calibrate", "external probe", enabled=not args.quiet)
    timer = calibrate_timer(5000, 499)
    try:
        result = external.run_external_probe(cfg, timer, prog.fraction)
    finally:
        prog.close()
    info = result.to_dict()
    if not args.quiet:
        print(format_external(info))
    if not result.resolved:
        print(f"calibrate: the overhead is not resolved ({fmt_seconds(result.overhead)} +- "
              f"{fmt_seconds(result.stderr)}); use larger --n or more --repeats"
              f"{'; ' + args.update + ' left unchanged' if args.update else ''}",
              file=sys.stderr)
        return EXIT_REFUSED
    if args.update:
        _refuse_unsteady(targets.unsteady(targets.external_overhead(args.tracer, info),
                                          args.max_spread), args.update, "left unchanged")
        data = platformfile.read_platform_dict(args.update)
        platformfile.apply_external(data, info, args.tracer)
        platformfile.write_platform(data, args.update, force=True)
        if not args.quiet:
            print(f"calibrate: event_overhead = {fmt_seconds(result.overhead)} written to "
                  f"{args.update}")
    return EXIT_OK


# ---------------------------------------------------------------------------
# check


def _check_platform(args: argparse.Namespace) -> tuple[Platform, str]:
    """The platform to check and how to name it."""
    if args.overhead is not None:
        o = parse_duration(args.overhead)
        return Platform(o), f"--overhead {fmt_seconds(o)}"
    if args.platform:
        return Platform.load(args.platform), args.platform
    return Platform(0.0), ""


def cmd_check(args: argparse.Namespace) -> int:
    from compensate.formats import read_blocks, trace_format

    try:
        trace_format(args.trace)
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    platform, name = _check_platform(args)
    trace = read_blocks(args.trace, payload=False)  # (the columns: OTF2 by the C path)
    verdicts = tracecheck.check(trace, platform)
    if not verdicts:
        print(f"calibrate check: {args.trace}: no location has two records; nothing to bound")
        return EXIT_OK
    if not args.quiet:
        print(f"calibrate check: {args.trace}: {trace.record_count:,} records on "
              f"{len(trace.events)} locations, timer {trace.definitions.timer_resolution:,} "
              f"ticks/s")
        width = max(22, *(len(v.gaps.kind) for v in verdicts))
        print(f"{'kind':<{width}} {'gaps':>7} {'min gap':>10} {'1% gap':>10} {'median':>10} "
              f"{'platform O':>11}  verdict")
        for v in verdicts:
            g = v.gaps
            p1, med = (float(x) for x in np.percentile(g.gaps, [1, 50]))
            status = "ok" if v.ok else (f"OVER: {v.overcompensated} of {len(g.gaps)} gaps "
                                        f"shorter (min at location {g.where()[0]}, "
                                        f"record {g.where()[1]})")
            shown_o = fmt_seconds(v.overhead) if name else "-"
            line = (f"{g.kind:<{width}} {len(g.gaps):>7} {fmt_seconds(g.bound):>10} "
                    f"{fmt_seconds(p1):>10} {fmt_seconds(med):>10} {shown_o:>11}  "
                    f"{status if name else ''}")
            print(line.rstrip())
    if not name:
        return EXIT_OK
    bad = [v for v in verdicts if not v.ok]
    if not bad:
        print(f"calibrate check: ok: {name} fits {args.trace} (every overhead <= its kind's "
              f"smallest gap)")
        return EXIT_OK
    worst = ", ".join(f"{v.gaps.kind} (O {fmt_seconds(v.overhead)} > min gap "
                      f"{fmt_seconds(v.gaps.bound)}, {v.overcompensated} records)" for v in bad)
    zero = any(v.gaps.bound == 0 for v in bad)
    hint = (" Records that share a timestamp with the next record (Score-P stamps a Metric "
            "with its event's time) allow no overhead of their own: set "
            "event_overhead_by_kind for them to 0." if zero else "")
    print(f"calibrate check: warning: {name} would overcompensate {args.trace}: {worst}; "
          f"compensate would clamp these gaps to zero.{hint}", file=sys.stderr)
    return EXIT_REFUSED


# ---------------------------------------------------------------------------
# entry point


def _normalise(argv: list[str]) -> list[str]:
    """``calibrate -o FILE`` (no subcommand) means ``calibrate run -o FILE``."""
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        return ["run", *argv]
    return argv


def run(argv: list[str] | None = None) -> int:
    argv = _normalise(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    handler = {"run": cmd_run, "overhead": cmd_overhead, "check": cmd_check}[args.subcommand]
    return handler(args)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: one-line errors, never a traceback; 130/143 after
    SIGINT/SIGTERM (compensate.interrupt)."""
    return interrupt.run("calibrate", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    try:
        return run(argv)
    except _Usage as exc:
        print(f"calibrate: error: {exc}\n{USAGE}", file=sys.stderr)
        return EXIT_USAGE
    except _Unsteady as exc:
        print(exc, file=sys.stderr)
        return EXIT_REFUSED
    except (TraceError, PlatformError, platformfile.OutputError, external.ProbeError) as exc:
        print(f"calibrate: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except (overhead.WriterProbeError, workers.WorkerError) as exc:
        print(f"calibrate: error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        raise  # interrupt.run says so, once
    except MemoryError:
        print(f"calibrate: error: out of memory (the copy-cost buffers need about "
              f"3 x {fmt_bytes(64 << 20)}; try --max-size)", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        if os.environ.get("CALIBRATE_DEBUG"):
            raise
        print(f"calibrate: internal error: {type(exc).__name__}: {exc} "
              f"(set CALIBRATE_DEBUG=1 for a traceback; please report it)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
