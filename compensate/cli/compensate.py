"""Command line: ``compensate IN OUT [--bound lower|upper] [--platform FILE.json] ...``.

Data flow: read -> match -> compensate -> verify -> write (atomically). Exit codes:
0 ok, 2 usage (including no platform), 3 bad input or an output that cannot be
written (refused, read-only, no space, ...), 4 verification failure (a bug:
nothing is written), 5 more overcompensated records than ``--max-overcompensated``
allows (nothing is written), 130 / 143 interrupted by SIGINT / SIGTERM (nothing is
written; :mod:`compensate.interrupt`), 1 internal error. Every error is one line on
stderr; set COMPENSATE_DEBUG=1 to see tracebacks of internal errors.

Why one module (over 600 lines): the command's runs — in memory, streamed, and
rank 0's end of the distributed run, whole-share or streamed
(:mod:`compensate.parallel.command`) — end the same way: one summary, the same
checks that refuse an output, the same atomic outputs (``_Outputs``) and exit
statuses; split apart, that contract would be stated once per run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import compensate.cli.values as values
import compensate.interrupt as interrupt
import compensate.overhead as overhead_choice
import compensate.parallel.command as parallel
import compensate.speed as speed_scaling
from compensate.api import resolve_platform
from compensate.cli.failure import EXIT_OK, EXIT_USAGE, after_commit, failure_status
from compensate.cli.usage import (
    OVERVIEW,
    SUBCOMMANDS,
    Parser,
    Usage,
    exit_status,
    synopsis,
    version_line,
)
from compensate.engine import BOUNDS, COLLECTIVE_EXITS
from compensate.formats import (
    AtomicFile,
    AtomicOutput,
    OutputError,
    format_of,
    is_part_of_input,
    output_target,
    read_blocks,
    trace_format,
    write_trace,
)
from compensate.formats.otf2.library import marker_count
from compensate.formats.paths import OutputLock
from compensate.gcpause import gc_paused
from compensate.matching.nomessage import NO_MESSAGE
from compensate.parallel.timeout import DEFAULT_RANK_TIMEOUT, rank_timeout
from compensate.pipeline import Outcome, Run, RunOptions, decide, fit_pass, in_memory, streamed
from compensate.pipeline.options import EstimateLater, Job
from compensate.pipeline.outcome import EXIT_OVERCOMPENSATED, EXIT_VERIFY
from compensate.pipeline.unclosed import Unclosed, scan
from compensate.platform import Platform
from compensate.producer import tracer_warning
from compensate.progress import Progress

__all__ = ["EXIT_OVERCOMPENSATED", "EXIT_VERIFY", "main", "run"]

PLATFORM_HINT = ("give --platform FILE.json (write one with `calibrate`, or by hand: "
                 '{"event_overhead": 1e-6, "copy_time": [{"bytes": 1024, "seconds": 1e-7}]}) '
                 "or --overhead DURATION (e.g. 250ns), or --overhead estimate (from the "
                 "trace's own records)")


def build_parser() -> argparse.ArgumentParser:
    """The main job's parser (``compensate IN OUT``); its help lists the
    subcommands too (:data:`compensate.cli.usage.SUBCOMMANDS`)."""
    width = max(map(len, SUBCOMMANDS))
    p = Parser(
        prog="compensate", usage=OVERVIEW,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Remove tracing overhead from an MPI trace (OTF2 or .trace) and write\n"
                    "an approximation of the uninstrumented run.",
        epilog="subcommands (compensate SUBCOMMAND --help for their options):\n" + "\n".join(
            f"  {name:<{width}}  {what}" for name, (_, what) in SUBCOMMANDS.items()))
    p.add_argument("input", metavar="IN", help="OTF2 anchor file (*.otf2) or text trace (*.trace)")
    p.add_argument("output", metavar="OUT",
                   help="output: out/traces.otf2 creates the archive directory out/, or *.trace")
    p.add_argument("--bound", choices=BOUNDS, default="lower",
                   help="communication model for transfers the trace did not observe "
                        "(default: lower; fitted: a latency + bandwidth model fitted to the "
                        "transfers it did observe; none copies the trace unchanged)")
    p.add_argument("--platform", metavar="FILE.json", help="platform file (overhead, copy cost)")
    p.add_argument("--overhead", metavar="DURATION",
                   type=values.duration(overhead_choice.KEYWORDS),
                   help="per-record overhead for every record kind, e.g. 250ns, 1.5us, 2e-6; "
                        "overrides the platform file's and the trace's in-situ one; "
                        "'insitu': the trace's in-situ overhead (the default when no "
                        "--platform is given, or the platform file prefers it); "
                        "'platform': the platform file's overhead even where the file "
                        "prefers the trace's in-situ one; 'estimate': estimated from the "
                        "trace's records (for traces without one)")
    p.add_argument("--speed", choices=speed_scaling.CHOICES, default="trace",
                   help="trace (default): scale the platform file's overhead to the speed "
                        "the trace was recorded at, where the file has a speed_reference "
                        "(python -m calibration.eztrace writes one); platform: use it as "
                        "measured (docs/compensation.md)")
    p.add_argument("--cold-calls", action="store_true",
                   help="also charge the cold-call curves of the trace's in-situ tables: "
                        "what a traced call and the program's work after it cost more "
                        "between untraced work than in the tracer's tight-loop "
                        "calibration (off by default; docs/calibration.md)")
    p.add_argument("--collective-exit", choices=COLLECTIVE_EXITS, default="uniform",
                   help="n-to-n exits: uniform (eq. 12) or per-process (eq. 13)")
    p.add_argument("--eager-limit", metavar="BYTES", type=values.whole(0, what="bytes"),
                   default=None,
                   help="treat MPI_Send messages larger than BYTES as synchronous "
                        "(rendezvous); MPI_Ssend always is (default: off)")
    p.add_argument("--summary", metavar="FILE.json", help="write a JSON summary of the run")
    p.add_argument("--max-overcompensated", metavar="N|P%", type=_limit, default=None,
                   help="refuse the output (exit 5, nothing written) if more than N records, "
                        "or more than P %% of the records, were overcompensated "
                        "(default: no limit)")
    p.add_argument("--in-memory", action="store_true",
                   help="hold the whole trace in memory instead of streaming it segment by "
                        "segment (same result; for comparison and debugging)")
    p.add_argument("--segment-records", metavar="N", type=values.whole(1, what="records"),
                   default=None,
                   help="streaming: cut a segment once N records are pending (default "
                        "2^18; smaller holds less memory, for tests and tuning)")
    p.add_argument("--strict", action="store_true",
                   help="refuse Enter/Leave that do not nest (exit 3) instead of pairing "
                        "each Leave with the latest open Enter of its region")
    p.add_argument("--force", action="store_true", help="replace an existing OUT")
    p.add_argument("--quiet", action="store_true", help="no progress and no summary line")
    p.add_argument("--mpi", action="store_true",
                   help="run distributed over MPI (mpiexec -n P compensate ...; found "
                        "without it when an MPI launcher started more than one rank; "
                        "needs the [mpi] extra; docs/parallel.md)")
    p.add_argument("--rank-timeout", metavar="SECONDS", type=rank_timeout,
                   default=DEFAULT_RANK_TIMEOUT,
                   help="distributed run: end the job (exit 3, nothing written) when "
                        "no rank made progress for SECONDS, naming the ranks that did "
                        f"not answer (default {DEFAULT_RANK_TIMEOUT:g}; 0: wait forever)")
    p.add_argument("--version", action="version", version=version_line("compensate"))
    return p


def _limit(text: str) -> tuple[float, bool]:
    """``--max-overcompensated``: ``N`` records or ``P%`` of the records, as
    (value, is_percentage)."""
    percent = text.strip().endswith("%")
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number) if percent else int(number)
    except ValueError:
        value = -1
    if value < 0 or value != value or (percent and value > 100):
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: a number of records (e.g. 10) or a percentage "
            f"of the records (e.g. 0.5%)")
    return float(value), percent


def load_platform(args: argparse.Namespace) -> Platform | None:
    """``--platform`` with its overhead replaced by ``--overhead`` (as the API does;
    an ``--overhead`` keyword such as ``insitu`` replaces nothing here)."""
    keyword = args.overhead in overhead_choice.KEYWORDS
    platform = resolve_platform(args.platform or None, None if keyword else args.overhead)
    if note := tracer_warning(platform, args.input, args.platform):  # once, before the run
        print(f"compensate: {note}", file=sys.stderr)
    return platform


def estimate_whole(args: argparse.Namespace, base: Platform | None
                   ) -> tuple[Platform, dict]:
    """``--overhead estimate`` in one process: the pass over the input's segments
    (:func:`compensate.pipeline.run.estimate_pass`), or over the whole trace in
    memory where a segment does not match (as ``--in-memory``: the run that
    follows names the record exactly, or matches)."""
    from compensate.formats import read_chunks
    from compensate.pipeline.cuts import SegmentError
    from compensate.pipeline.run import estimate_pass
    defs, chunks = read_chunks(args.input, payload=False)
    try:
        return overhead_choice.estimate_from(
            *estimate_pass(defs, interrupt.checkpoints(chunks, "estimate"),
                           run_options(args), str(args.input), lookahead_of(args)), base)
    except SegmentError:
        chunks.close()
        return overhead_choice.estimate(read_blocks(args.input, payload=False), base)


def estimate_later(args: argparse.Namespace) -> EstimateLater:
    """``--overhead estimate`` of a distributed run, made on the ranks
    (:class:`~compensate.pipeline.options.EstimateLater`): the platform and the
    summary object ``choose_overhead`` gives, from the ranks' pass or, where the
    run does not stream, from :func:`estimate_whole`."""
    base = load_platform(args)

    def labelled(found: tuple[Platform, dict]) -> tuple[Platform, dict]:
        return found[0], {"source": "estimate", **found[1]}

    return EstimateLater(
        whole=lambda: labelled(estimate_whole(args, base)),
        finish=lambda bounds, transfer: labelled(
            overhead_choice.estimate_from(bounds, transfer, base)))


def choose_overhead(args: argparse.Namespace) -> tuple[Platform | None, dict]:
    """The platform to use and the summary's ``overhead`` object
    (:func:`compensate.overhead.choose`: command line, platform file, the trace's
    in-situ tables, or an estimate)."""
    from compensate.formats import read_chunks

    def definitions():
        defs, chunks = read_chunks(args.input)
        chunks.close()
        return defs

    def at_speed(platform: Platform):
        defs, chunks = read_chunks(args.input, payload=False)
        found = speed_scaling.trace_pairs(defs, interrupt.checkpoints(chunks, "speed"),
                                          platform.speed_reference)
        scaled, info = speed_scaling.at_trace_speed(platform, found)
        if "why" in info:
            print(f"compensate: note: the platform file's overhead is used as measured, "
                  f"not scaled to the trace's speed: {info['why']}", file=sys.stderr)
        return scaled, info

    try:
        return overhead_choice.choose(load_platform(args), args.overhead, definitions,
                                      lambda base: estimate_whole(args, base),
                                      args.bound != "none",
                                      cold_calls=getattr(args, "cold_calls", False),
                                      speed=at_speed if getattr(args, "speed", "trace")
                                      == "trace" else None)
    except ValueError as exc:
        raise Usage(str(exc), synopsis=False) from None


def _time_fraction(defs) -> Callable[[int], float | None]:
    """Where a streamed OTF2 trace stands, from a timestamp and the archive's clock
    properties (global offset, trace length); None for a text trace."""
    otf2 = getattr(defs, "otf2", None)
    offset, length = getattr(otf2, "global_offset", 0), getattr(otf2, "trace_length", 0)
    return lambda t: (t - offset) / length if length > 0 else None


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


class _Outputs:
    """The outputs of one run, created before the work so that a path that cannot
    be written fails first: the trace's temporary output and the ``--summary``
    file's. Nothing of them stays unless :meth:`commit` moves them into place.
    ``in_parts`` (the distributed run): instead of the trace's temporary output, the
    directory every rank writes its part into (:func:`compensate.formats.parts.begin`;
    ``parts_tmp``), under the output's lock (``lock``, as an AtomicOutput holds
    it), which :meth:`check` uses to check the output again right before the
    commit."""

    def __init__(self, args: argparse.Namespace, target: Path, in_parts: bool = False) -> None:
        self.summary: AtomicFile | None = None
        self.trace: AtomicOutput | None = None
        self.parts_tmp: Path | None = None
        self.lock: OutputLock | None = None
        if args.summary:
            _check_summary_path(args)
            self.summary = AtomicFile(args.summary)
        try:
            if in_parts:
                from compensate.formats import parts
                self.lock = OutputLock(args.output, target, args.force)
                self.parts_tmp = parts.begin(args.output, target)
            else:
                self.trace = AtomicOutput(args.output, target, force=args.force)
        except BaseException:
            self.discard()
            raise

    def check(self) -> None:
        """Right before the distributed run's commit: may the output still be
        replaced (:meth:`OutputLock.check`; an AtomicOutput checks itself)?"""
        if self.lock is not None:
            self.lock.check()

    def write_summary(self, summary: dict) -> None:
        if self.summary is not None:
            self.summary.write_text(json.dumps(summary, indent=2, default=_json_default) + "\n")

    def commit_summary(self) -> None:
        if self.summary is not None:
            self.summary.commit()

    def discard(self) -> None:
        if self.summary is not None:
            self.summary.discard()
        if getattr(self, "trace", None) is not None:
            self.trace.discard()
        if getattr(self, "parts_tmp", None) is not None:
            from compensate.formats import parts
            parts.abort(self.parts_tmp)  # (nothing left to remove after a commit)
        if getattr(self, "lock", None) is not None:
            self.lock.release()  # (after a commit the directories hold the output)


def _check_summary_path(args: argparse.Namespace) -> None:
    """``--summary`` may not be the input, nor inside the output (or be it)."""
    path = Path(args.summary).absolute()
    if is_part_of_input(path, args.input):
        raise OutputError(f"{args.summary}: the summary would overwrite the input {args.input}")
    out = Path(args.output).absolute()
    inside = out.parent if format_of(args.output).archive else out
    if path == inside or inside in path.parents:
        raise OutputError(f"{args.summary}: the summary would be written into the output "
                          f"{args.output}")


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        trace_format(args.input)
        trace_format(args.output)
    except ValueError as exc:
        raise Usage(str(exc)) from None
    distributed = args.mpi or parallel.launched()
    if not distributed:  # (each rank checks its own locations: parallel.command)
        from compensate.pipeline.memory import refuse_read_buffers
        refuse_read_buffers(str(args.input), remedy="; `mpiexec -n P compensate` reads "
                            "each rank's locations only (docs/parallel.md)")
    later = None
    if distributed and args.overhead == "estimate" and args.bound != "none":
        later = estimate_later(args)  # (made on the ranks: docs/parallel.md)
        platform, overhead_info = None, None
    else:
        platform, overhead_info = choose_overhead(args)
        if platform is None and args.bound != "none":
            raise Usage(f"no platform: {PLATFORM_HINT}", synopsis=False)
    args.overhead_info = overhead_info
    target = output_target(args.input, args.output, args.force)
    show = not args.quiet and sys.stderr.isatty()
    if distributed:  # mpiexec -n P compensate ...: docs/parallel.md
        if not parallel.available():
            raise Usage("--mpi needs mpi4py: pip install 'compensate[mpi]'", synopsis=False)
        job = Job(str(args.input), str(args.output), run_options(args), platform,
                  args.in_memory, args.rank_timeout or None, estimate=later)

        def finish_ranks(outputs, run, seconds, extra, write) -> int:
            if later is not None:  # (estimated on the ranks)
                args.overhead_info = later.info
            return finish(args, outputs, platform if later is None else later.platform,
                          False, run, seconds, write, extra)

        return parallel.run_parallel(job, lambda: _Outputs(args, target, in_parts=True),
                                     finish_ranks)
    outputs = _Outputs(args, target)
    try:
        if not args.in_memory:
            from compensate.pipeline.context import ClocksDisagree
            from compensate.pipeline.cuts import NotStreamable, SegmentError
            try:
                try:
                    return _stream_refit(args, outputs, target, platform, show)
                except ClocksDisagree:  # align the processes' clocks first, in a pass
                    alignment = _align(args, show)
                    _renew(args, outputs, target)
                    return _stream_refit(args, outputs, target, platform, show, alignment)
            except (NotStreamable, SegmentError) as exc:
                # not in time order, or a problem whose exact record the whole trace names
                _phase(show, f"cannot stream ({exc}); reading the whole trace ...")
                args.not_streamed = str(exc)
                # discarded by the writer, or never written to (the fit pass found it)
                outputs.trace.discard()  # (releases its lock: idempotent)
                outputs.trace = AtomicOutput(args.output, target, force=args.force)
        return _run_in_memory(args, outputs, platform, show)
    finally:
        outputs.discard()  # nothing after a commit; everything after a failure


def _renew(args: argparse.Namespace, outputs: _Outputs, target) -> None:
    """A new output in place of a streamed one that was discarded."""
    outputs.trace.discard()  # (releases its lock: idempotent)
    outputs.trace = AtomicOutput(args.output, target, force=args.force)


def _stream_refit(args: argparse.Namespace, outputs: _Outputs, target,
                  platform: Platform | None, show: bool, alignment=None) -> int:
    """:func:`_run_streaming`, and again with the fallback where the fitted model was
    clamped on most of its uses."""
    try:
        return _run_streaming(args, outputs, platform, show, alignment=alignment)
    except _Refit as refit:  # the fit clamped on most uses: again without it
        _renew(args, outputs, target)
        return _run_streaming(args, outputs, platform, show, refit.outcome,
                              alignment=alignment)


def _align(args: argparse.Namespace, show: bool):
    """The processes' clock offsets of a trace whose clocks disagree, from a pass
    over its segments (:func:`compensate.pipeline.run.clock_pass`)."""
    from compensate.formats import read_chunks
    from compensate.pipeline.cuts import chunk_records_for
    from compensate.pipeline.run import clock_pass

    _phase(show, f"aligning the processes' clocks to the messages of {args.input} ...")
    chunk = [chunk_records_for(args.segment_records)] if args.segment_records else []
    defs, chunks = read_chunks(args.input, *chunk, payload=False)
    return clock_pass(defs, interrupt.checkpoints(chunks, "align"), run_options(args),
                      str(args.input), lookahead=lookahead_of(args))


def lookahead_of(args: argparse.Namespace, show: bool = False) -> Callable[[], Unclosed]:
    """The stream cutter's look-ahead over ``args.input``: what the trace never
    closes (:mod:`compensate.pipeline.unclosed`), read at most once per command
    (kept on ``args``) and only when a pass finds no cut."""
    def read() -> Unclosed:
        found = getattr(args, "unclosed", None)
        if found is None:
            from compensate.formats import read_chunks  # (where tests replace it)
            _phase(show, f"no safe cut found: reading {args.input} ahead for sends never "
                         f"received and requests never completed ...")
            defs, chunks = read_chunks(args.input, payload=False)
            found = args.unclosed = scan(defs, interrupt.checkpoints(chunks, "look ahead"))
        return found
    return read


def run_options(args: argparse.Namespace) -> RunOptions:
    """The run's options from the command line."""
    return RunOptions(bound=args.bound, collective_exit=args.collective_exit,
                      eager_limit=args.eager_limit, strict=args.strict,
                      segment_records=getattr(args, "segment_records", None))


def _run_in_memory(args: argparse.Namespace, outputs: _Outputs, platform: Platform | None,
                   show: bool) -> int:
    """read -> match -> compensate -> verify -> write, the whole trace in memory."""
    t_start = time.monotonic()
    _room_for_whole(args)
    _phase(show, f"reading {args.input} ...")
    interrupt.checkpoint("read")
    # an OTF2 output copies the records from the input: no payload objects needed
    trace = read_blocks(args.input, payload=format_of(args.output).needs_payload)
    t_read = time.monotonic()
    progress = Progress("compensate", "compensating", trace.record_count, "records", enabled=show)

    def on_progress(done: int) -> None:
        interrupt.checkpoint("compensate")
        progress(done)

    def on_phase(message: str) -> None:
        interrupt.checkpoint("phase")
        _phase(show, message)

    try:
        run = in_memory(trace, platform, run_options(args), on_progress, on_phase)
    finally:
        progress.close()
    interrupt.checkpoint("verified")
    seconds = {"read": t_read - t_start, "compensate": time.monotonic() - t_read}
    return finish(args, outputs, platform, show, run, seconds, lambda before_commit: write_trace(
        run.trace, args.output, output=outputs.trace, before_commit=before_commit))


def _room_for_whole(args: argparse.Namespace) -> None:
    """Refuse (exit 3, one line) to read a trace whole that cannot fit in the memory
    this machine has available, before the kernel kills the process with no word:
    the records the input declares or its files' sizes suggest
    (:func:`compensate.pipeline.memory.room_for`)."""
    from compensate.formats import location_record_counts
    from compensate.model import TraceError
    from compensate.pipeline.memory import (
        HELD_RECORD_BYTES,
        OutOfMemory,
        available_memory,
        gib,
        room_for,
    )

    available = available_memory()
    if available is None or args.bound == "none":
        return
    try:
        records = sum(n for n in location_record_counts(args.input).values() if n)
    except (OSError, ValueError, TraceError):
        return  # (the read says what is wrong)
    if room_for(records, available):
        return
    why = getattr(args, "not_streamed", None)
    why = f"it cannot be streamed ({why})" if why else "--in-memory"
    raise OutOfMemory(
        f"{args.input}: reading the whole trace ({why}) needs about "
        f"{gib(records * HELD_RECORD_BYTES)} for its ~{records:,} records, more than the "
        f"{gib(available)} available; nothing written")


def finish(args: argparse.Namespace, outputs: _Outputs, platform: Platform | None,
           show: bool, run: Run, seconds: dict,
           write: Callable[[Callable[[], None]], None], extra: dict | None = None,
           abort: Callable[[], None] | None = None) -> int:
    """The end of every way of running: the summary and the refusal policy
    (:func:`compensate.pipeline.decide`), then ``write(before_commit)`` and the
    summary line. ``seconds``: the summary's phase seconds (the write's are added
    at the commit); ``extra``: more summary keys (the distributed run's);
    ``abort``: a streamed output, written as the run went, which a refusal
    discards and a commit only closes (its ``write`` fills ``seconds`` itself)."""
    outcome = decide(run, input=str(args.input), output=str(args.output),
                     options=run_options(args), platform=platform,
                     overhead=getattr(args, "overhead_info", None),
                     max_overcompensated=args.max_overcompensated)
    outcome = copy_finding(args, platform, outcome)
    summary = outcome.summary
    summary.update(seconds=seconds, **(extra or {}))
    if not outcome.writes:
        if abort is not None:
            abort()
        return _refuse(args, outputs, outcome)
    step, doing = ("write", "writing") if abort is None else ("finish", "finishing")
    _phase(show, f"{doing} {args.output} ...")
    interrupt.checkpoint(step)
    _markers(args, summary)
    t_write = time.monotonic()

    def before_commit() -> None:
        if abort is None:
            seconds["write"] = time.monotonic() - t_write
        _commit_summary(outputs, summary)

    write(before_commit)
    # the output is in place: nothing from here on makes the status non-zero
    try:
        _phase(show, "")
        return _done(args, summary, _bound_text(args, summary))
    except Exception as exc:  # noqa: BLE001 - e.g. stdout a full device, a closed pipe
        return after_commit("compensate", str(args.output), exc)


class _Refit(Exception):  # noqa: N818 - not an error: run again with ``outcome``
    """A streamed run whose fitted model was clamped on most of its uses
    (:func:`compensate.engine.fit.clamp_check`): its output is discarded and the run
    streams again with ``outcome`` (the fallback)."""

    def __init__(self, outcome) -> None:
        super().__init__("refit")
        self.outcome = outcome


def _run_streaming(args: argparse.Namespace, outputs: _Outputs, platform: Platform | None,
                   show: bool, outcome=None, alignment=None) -> int:
    """The same pipeline segment by segment (compensate.pipeline.run.streamed): read a
    chunk, cut at safe points, match -> compensate -> verify -> write each segment.
    ``outcome``: the fit to use (a fallback), instead of a fit pass; ``alignment``:
    the processes' clock offsets (:func:`_align`)."""
    from compensate.formats import TraceWriter, read_chunks
    from compensate.pipeline.cuts import SEGMENT_RECORDS, chunk_records_for
    from compensate.pipeline.memory import heap_to_keep, steady_malloc

    steady_malloc(heap_to_keep(args.segment_records or SEGMENT_RECORDS))
    t_start = time.monotonic()
    options = run_options(args)
    plat = platform or Platform(0.0)
    # an OTF2 output copies the records from the input: no payload objects needed
    payload = format_of(args.output).needs_payload
    # the second pass reads the same chunks as the fit pass (no payload): it cuts the
    # segments where the fit pass cut them
    cuts: list | None = None
    chunk = [chunk_records_for(args.segment_records)] if args.segment_records else []
    if options.fits and outcome is None:  # R2f needs the fit first: one more pass
        _phase(show, f"fitting the network to the transfers {args.input} observed ...")
        defs, chunks = read_chunks(args.input, *chunk, payload=False)
        cuts = None if payload else []
        outcome = fit_pass(defs, interrupt.checkpoints(chunks, "fit"), plat, options,
                           args.input, cuts=cuts, alignment=alignment,
                           lookahead=lookahead_of(args, show))
    t_fit = time.monotonic()
    interrupt.checkpoint("open")
    defs, chunks = read_chunks(args.input, *chunk, payload=payload)
    progress = Progress("compensate", "compensating", None, "records", enabled=show)
    where = _time_fraction(defs)
    writer = TraceWriter(args.output, defs, output=outputs.trace)

    def write(loc: int, events) -> None:
        interrupt.checkpoint("write")
        writer.write(loc, events)

    def advance(t: int) -> None:  # the segment's start time: how far the run is
        interrupt.checkpoint("segment")
        progress.hint(where(t))
        writer.advance(t)

    def on_progress(done: int) -> None:
        interrupt.checkpoint("compensate")
        progress(done)

    try:
        run = streamed(defs, interrupt.checkpoints(chunks, "read"), plat, options, write,
                       outcome=outcome, source=str(args.input), progress=on_progress,
                       advance=advance, cuts=cuts, alignment=alignment,
                       lookahead=lookahead_of(args, show))
        progress.close()
        from compensate.engine.fit import clamp_check
        rejected = clamp_check(outcome, run.stats.p2p_cases, plat.network)
        if rejected is not None:
            writer.abort()
            raise _Refit(rejected)
        seconds: dict = {}

        def close(before_commit: Callable[[], None]) -> None:
            def commit() -> None:
                seconds.update({"fit": t_fit - t_start,
                                "compensate_and_write": time.monotonic() - t_fit})
                before_commit()
            writer.close(commit)

        return finish(args, outputs, platform, show, run, seconds, close,
                      abort=writer.abort)
    except BaseException:
        progress.close()
        writer.abort()
        raise


#: How much longer than the measured span a compensated one may come out before it
#: is a finding (0.1 %; plus a tick per message and collective, :func:`copy_finding`).
LONGER_TOLERANCE = 1e-3


def copy_finding(args: argparse.Namespace, platform: Platform | None,
                 outcome: Outcome) -> Outcome:
    """A platform that contradicts the trace (docs/messages.md, "A platform that
    contradicts the trace"): removing overhead never lengthens a run whose platform fits it, so a
    compensated span longer than the measured one is a finding. Then, and whenever
    ``--max-overcompensated`` is given, the input is read once more to count the
    message records whose measured gap cannot hold the platform's copy
    (:func:`compensate.overhead.copy_contradictions`): summary key
    ``copy_contradictions``, a warning line, and those records count against
    ``--max-overcompensated`` (exit 5) like overcompensated ones. Other runs pay
    nothing."""
    summary = outcome.summary
    if platform is None or args.bound == "none" or not outcome.writes:
        return outcome
    measured, approx = span_reference(summary), summary["approximated_span_s"]
    ticks = (summary["messages_matched"] + summary["collective_instances"] + 1) \
        / summary["timer_resolution"]  # the rules' one-tick steps may add that much
    longer = approx > measured * (1 + LONGER_TOLERANCE) + ticks
    if not longer and (args.max_overcompensated is None or not np.any(platform.copy_seconds)):
        return outcome  # nothing to look for: no finding, or no copy that could not fit
    from compensate.formats import read_chunks
    defs, chunks = read_chunks(args.input, payload=False)
    found = overhead_choice.copy_contradictions(
        defs, interrupt.checkpoints(chunks, "read"), platform)
    found["output_longer"] = bool(longer)
    summary["copy_contradictions"] = found
    if longer or found["records"]:
        print(copy_line(summary), file=sys.stderr)
    if args.max_overcompensated is None:
        return outcome
    value, percent = args.max_overcompensated
    n, records = summary["overcompensated_records"] + found["records"], summary["records"]
    if n <= (value * records / 100 if percent else value):
        return outcome
    limit = f"{value:g} % of {records:,} records" if percent else f"{int(value):,} records"
    return Outcome(summary, outcome.verification, EXIT_OVERCOMPENSATED, (
        f"{n:,} records overcompensated ({found['records']:,} of them message records "
        f"whose measured gap cannot hold the platform's copy), more than "
        f"--max-overcompensated {limit}"))


#: :func:`model_note`: a span shorter than the measured one by more than this
#: many times the overhead removed, and by this share of it, is the models' doing
MODEL_TIMES, MODEL_SHARE = 2.0, 0.01


def model_note(summary: dict) -> str:
    """The note where the compensated span is shorter than the measured one by
    more than :data:`MODEL_TIMES` the tracer overhead taken out of all records
    (``overhead_removed_s``) and by :data:`MODEL_SHARE` of the span: the rest is not
    overhead but what the models make of the measured waits (docs/compensation.md,
    "Shorter than the overhead explains"); '' otherwise. The upper bound with
    per-process exits never shortens a span by more than that overhead."""
    if summary["bound"] == "none":
        return ""
    removed = summary["overhead_removed_s"]
    ref, approx = span_reference(summary), summary["approximated_span_s"]
    shorter = ref - approx
    if shorter <= max(MODEL_TIMES * removed, MODEL_SHARE * ref):
        return ""
    why = []
    if summary["bound"] != "upper":
        why.append(f"the {summary['bound']} bound times each transfer whose calls did "
                   f"not overlap by its model, not as measured")
    nton = summary.get("dependencies", {}).get("collectives", {}).get("n-to-n", 0)
    if summary.get("collective_exit") == "uniform" and nton:
        why.append("every member of an n-to-n collective leaves with the first to leave "
                   "(--collective-exit uniform, the default), which takes out how far "
                   "apart they left (a busy or oversubscribed machine); --collective-exit "
                   "per-process keeps each member's own exit")
    ratio = shorter / removed if removed > 0 else 0.0
    times = (f"{ratio:,.0f} times" if ratio >= 10 else f"{ratio:.2g} times" if ratio
             else "more than")
    return (f"compensate: note: the compensated span is {_duration(shorter)} shorter than "
            f"the measured one, {times} the {_duration(removed)} of tracer overhead taken "
            f"out of all records: the rest is what the models make of the measured waits"
            + (": " + "; ".join(why) if why else "")
            + " (docs/compensation.md, \"Shorter than the overhead explains\")")


def span_reference(summary: dict) -> float:
    """The measured span the compensated one is compared with: as read, or with
    the processes' clocks aligned where they were (``clock_alignment``; the
    alignment alone may lengthen the run by the offsets it adds)."""
    aligned = summary.get("clock_alignment", {}).get("aligned_span_s")
    return summary["measured_span_s"] if aligned is None else aligned


def span_text(summary: dict) -> str:
    """``span M s -> A s (X % shorter)`` of the summary line; with the clocks
    aligned, the aligned span too, which X compares with."""
    m, a, ref = summary["measured_span_s"], summary["approximated_span_s"], \
        span_reference(summary)
    aligned = f" ({ref:.6g} s with its clocks aligned)" if "clock_alignment" in summary else ""
    if ref <= 0:
        change = "n/a"
    elif a <= ref:
        change = f"{100 * (ref - a) / ref:.1f} % shorter"
    else:
        change = f"{100 * (a - ref) / ref:.1f} % longer"
    return f"span {m:.6g} s{aligned} -> {a:.6g} s ({change})"


def copy_line(summary: dict) -> str:
    """The warning of :func:`copy_finding`: how much longer the output is, and the
    message records whose gap cannot hold the platform's copy, the worst named."""
    found = summary["copy_contradictions"]
    m, a = span_reference(summary), summary["approximated_span_s"]
    parts = []
    if found["output_longer"]:
        times = ("longer than" if m <= 0 else f"{a / m:.3g}x as long as" if a >= 2 * m
                 else f"{100 * (a / m - 1):.2g} % longer than")
        aligned = " with its clocks aligned" if "clock_alignment" in summary else ""
        parts.append(f"the compensated trace is {times} the measured one{aligned} "
                     f"({_duration(a)} vs {_duration(m)})")
    n = found["records"]
    if n:
        kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(
            found["by_kind"].items(), key=lambda kv: (-kv[1], kv[0])))
        w = found["worst"]
        parts.append(
            f"{n:,} of {found['checked']:,} message records ({kinds}) have a measured gap "
            f"shorter than the platform's copy_time, by up to {_duration(found['max_s'])} "
            f"({w['kind']} of {w['bytes']:,} bytes on location {w['location']}, record "
            f"{w['record']}: copy {_duration(w['copy_s'])}, gap {_duration(w['gap_s'])})")
        cause = ("the platform's copy_time contradicts the trace (was it measured on this "
                 "machine, in seconds?)")
    else:
        cause = ("the platform contradicts the trace, though its copy_time fits every "
                 "message record's gap (check its overheads and network entry)")
    return f"compensate: warning: {'; '.join(parts)}: {cause}"


def _commit_summary(outputs: _Outputs, summary: dict) -> None:
    """Write the ``--summary`` file and move it into place (right before the trace)."""
    outputs.write_summary(summary)
    outputs.commit_summary()


def overcompensation_line(summary: dict) -> str:
    """The finding printed (even with ``--quiet``) when records were overcompensated:
    how many, by record kind, and the largest overhead that did not fit."""
    n, records = summary["overcompensated_records"], summary["records"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(
        summary["overcompensated_by_kind"].items(), key=lambda kv: (-kv[1], kv[0])))
    share = f"{100 * n / records:.3g} %" if records else "n/a"
    return (f"compensate: warning: {n:,} of {records:,} records ({share}) overcompensated "
            f"({kinds}): the overhead removed did not fit the measured gap, by up to "
            f"{_duration(summary['overcompensated_max_s'])}; these records were clamped "
            f"to their predecessor (is the overhead too large for this trace? "
            f"see `calibrate check`)")


def _duration(seconds: float) -> str:
    """``999.8 us``, ``50 ns``, ``1.2 ms``: four significant digits at most."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def _refuse(args: argparse.Namespace, outputs: _Outputs, outcome: Outcome) -> int:
    """A refused output: the summary is written, the trace is not."""
    interrupt.commit_point()
    _commit_summary(outputs, outcome.summary)
    if outcome.status == EXIT_VERIFY:
        print(f"compensate: {outcome.reason}; nothing written — this is a bug, please "
              f"report it", file=sys.stderr)
    else:
        print(f"compensate: error: {outcome.reason}; nothing written to {args.output}",
              file=sys.stderr)
    return outcome.status


def _bound_text(args: argparse.Namespace, summary: dict) -> str:
    """The bound part of the one-line summary."""
    text = f"{args.bound} bound"
    if "fit" in summary:
        from compensate.engine.fit import summary_phrase
        text = summary_phrase(summary["fit"])
    if summary.get("overhead") and args.bound != "none":
        text += ", " + overhead_choice.phrase(summary["overhead"])
    return text


def _done(args: argparse.Namespace, summary: dict, bound_text: str) -> int:
    over = summary["overcompensated_records"]
    from compensate.engine.fit import warning_line
    if fit_warning := warning_line(summary.get("fit")):  # a fitted model not used: why
        print(fit_warning, file=sys.stderr)
    if over:
        print(overcompensation_line(summary), file=sys.stderr)
    if unmatched := unmatched_regions_line(summary):
        print(unmatched, file=sys.stderr)
    if not args.quiet:
        print(f"compensate: {summary['records']:,} records on {summary['locations']} "
              f"locations, {bound_text}: {span_text(summary)}, "
              f"{summary['messages_matched']} messages, {summary['collective_instances']} "
              f"collectives, {over} overcompensated records, verified"
              f"{_local_only_note(summary['verification'])}; wrote {args.output}")
        sys.stdout.flush()  # (a stdout that cannot be written fails here, not at exit)
        _nesting_note(summary.get("nesting"))
        _unmatched_note(summary.get("unmatched_sends", 0))
        deps = summary.get("dependencies", {})
        _unended_note(deps.get("collective_begins_without_end", 0))
        _unrecorded_note(deps.get("unrecorded_calls", {}))
        _no_message_note(deps)
        if note := model_note(summary):
            print(note, file=sys.stderr)
    _markers_note(summary)
    return EXIT_OK


def unmatched_regions_line(summary: dict) -> str:
    """The warning where entries of the platform's per-region costs name regions
    the trace does not define while others name regions it does (a misspelt
    name): '' otherwise. A region defined but never called (a program that locks
    but has no barrier), and a platform none of whose regions the trace defines
    (an MPI trace, a platform that also measured Pthread calls), are no mistake;
    the summary's counts still say so."""
    counts = summary.get("region_overhead_records", {})
    undefined = summary.get("region_overhead_undefined", [])
    if not undefined or len(undefined) == len(counts):
        return ""
    names = ", ".join(json.dumps(name) for name in undefined)
    return (f"compensate: warning: the platform's per-region overhead for {names} names "
            f"no region the trace defines, while its other entries do (is the region name "
            f"spelt as the trace defines it?)")


def _markers(args: argparse.Namespace, summary: dict) -> None:
    """``markers_not_carried``: the markers of an OTF2 input (its ``.marker`` file,
    added by tools such as Scalasca and Vampir), which the output does not hold
    (-1: a marker file that could not be read). Only where there are some."""
    n = marker_count(str(args.input))
    if n:
        summary["markers_not_carried"] = n


def _markers_note(summary: dict) -> None:
    """One line on stderr when the input's markers were left out of the output."""
    n = summary.get("markers_not_carried", 0)
    if n:
        some = f"{n:,} markers" if n > 0 else "markers (its marker file was unreadable)"
        print(f"compensate: note: the input holds {some}, which the output does not: "
              f"their times are measured ones, on the input's time axis", file=sys.stderr)


def _unmatched_note(sends: int) -> None:
    """One line on stderr when sends have no receive: they are kept and
    compensated as local records, but no dependency of theirs was modelled."""
    if sends:
        print(f"compensate: note: {sends:,} sends have no matching receive in the trace "
              f"(a receive that failed or was never made, a message still in flight at "
              f"the end, or a receive the tracer did not record, as EZTrace 2.0 records "
              f"no completion of MPI_Irecv); they are compensated as local records and "
              f"what their receivers waited for is not modelled", file=sys.stderr)


def _unended_note(begins: int) -> None:
    """One line on stderr when collectives have a Begin but no End record: a
    tracer that did not record their completion; they stay local records."""
    if begins:
        print(f"compensate: note: {begins:,} MpiCollectiveBegin records have no "
              f"MpiCollectiveEnd (a nonblocking collective whose completion the tracer "
              f"did not record); they are compensated as local records", file=sys.stderr)


def _no_message_note(deps: dict) -> None:
    """One line on stderr each for point-to-point records that carry no message the
    matching can identify (:mod:`compensate.matching.nomessage`): local records."""
    null, bad, left, gap = (deps.get(k, 0) for k in NO_MESSAGE)
    if null:
        print(f"compensate: note: {null:,} sends and receives name MPI_PROC_NULL (their "
              f"peer is UNDEFINED, or Open MPI's -2): no message; they are compensated as "
              f"local records",
              file=sys.stderr)
    if bad:
        print(f"compensate: note: {bad:,} receives have a status no send in the trace "
              f"fits (a sender outside their communicator, an undefined length, or a "
              f"channel no send has; EZTrace 2.0's MPI_Waitsome writes such): "
              f"they and the {left:,} receives their locations posted after them on the "
              f"same communicators are compensated as local records, their messages not "
              f"modelled", file=sys.stderr)
    if gap:
        print(f"compensate: note: {gap:,} receives come after a gap on their channel (it "
              f"holds more sends than receives, and a receive the tracer did not record, "
              f"as EZTrace 2.0 records no MPI_Irecv completed in MPI_Wait or MPI_Test, lies "
              f"before them): which send each took is unknown, so they are compensated as "
              f"local records, their messages not modelled", file=sys.stderr)


def _unrecorded_note(calls: dict) -> None:
    """One line on stderr when MPI calls that communicate hold no record of it
    (:mod:`compensate.matching.unrecorded`): their dependencies are not modelled."""
    if calls:
        top = sorted(calls.items(), key=lambda kv: -kv[1])
        named = ", ".join(f"{name} {n:,}" for name, n in top[:4]) + \
            (", ..." if len(top) > 4 else "")
        print(f"compensate: note: {sum(calls.values()):,} MPI calls hold no record of "
              f"their communication ({named}): the tracer did not record it, so what "
              f"they waited for is not modelled; they are compensated as local time",
              file=sys.stderr)


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


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


def _main(argv: list[str] | None) -> int:
    """The run with every failure turned into one line on stderr and an exit code.
    A failure caused by an interrupt is left to :func:`compensate.interrupt.run`."""
    try:
        return run(argv)
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:  # --help, --version: argparse printed them
        return exit_status(exc)
    except BaseException as exc:  # noqa: BLE001 - one line, never a traceback
        if isinstance(exc, Usage):
            interrupt.check()  # an error an interrupt caused is reported as the interrupt
            line = f"\n{synopsis(build_parser())}" if exc.synopsis else ""
            print(f"compensate: error: {exc}{line}", file=sys.stderr)
            return EXIT_USAGE
        return failure_status("compensate", exc)


def main(argv: list[str] | None = None) -> int:
    # `compensate report ...` / `compensate export ...`: subcommands (compensate/cli/report.py)
    sub = list(sys.argv[1:] if argv is None else argv)
    if sub and sub[0] in ("report", "export"):
        from compensate.cli.report import main as subcommand_main
        return subcommand_main(sub)
    if parallel.silent_rank(sub):  # a distributed run's rank > 0: rank 0 reports for all
        with contextlib.redirect_stderr(io.StringIO()):
            return interrupt.run("compensate", lambda: _main(argv))
    return interrupt.run("compensate", lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main())
