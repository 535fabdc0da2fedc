"""``compensate-simulate PROGRAM OUTDIR``: write a ground-truth pair for validation.

Simulates a model MPI program (compensate.simulate.programs) without and with tracer
overhead and writes ``OUTDIR/truth``, ``OUTDIR/measured`` (OTF2 archives or
``.trace`` files) and ``OUTDIR/platform.json``, the exact platform the measured
run used, so that ``compensate OUTDIR/measured/traces.otf2 ... --platform
OUTDIR/platform.json`` can be compared with the truth.

On a terminal, a run longer than a couple of seconds shows its progress
(:mod:`compensate.progress`): the two simulated runs, then each trace written in
time windows (the output is the same as written at once).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

import compensate.cli.values as values
import compensate.interrupt as interrupt
from compensate.cli.failure import EXIT_USAGE, failure_status
from compensate.cli.usage import Parser, Usage, exit_status, synopsis, version_line
from compensate.formats import TRACE_FORMATS, Format, TraceWriter
from compensate.model import Trace
from compensate.platform import PlatformError, parse_duration
from compensate.progress import Progress
from compensate.simulate import SimulationError, simulate
from compensate.simulate.programs import PROGRAMS
from compensate.simulate.validation import evaluate

#: ``--format``'s choices: each format by its suffix without the dot (``otf2``, ``trace``)
FORMAT_CHOICES: dict[str, Format] = {f.suffix.lstrip("."): f for f in TRACE_FORMATS}


def build_parser(prog: str = "compensate-simulate") -> argparse.ArgumentParser:
    """The command's parser; ``prog``: ``compensate-simulate`` or ``compensate
    simulate`` (the same command)."""
    p = Parser(
        prog=prog,
        description="Simulate a model MPI program without (truth) and with (measured) "
                    "tracer overhead and write both traces plus the platform file.")
    p.add_argument("program", metavar="PROGRAM", choices=sorted(PROGRAMS),
                   help=f"the model program: {', '.join(sorted(PROGRAMS))}")
    p.add_argument("outdir", metavar="OUTDIR",
                   help="output directory (created; must be empty or absent)")
    p.add_argument("--ranks", metavar="N", type=values.whole(1, 1 << 16, "ranks"), default=4,
                   help="simulated ranks (default 4)")
    p.add_argument("--iterations", metavar="N", type=values.whole(1, what="iterations"),
                   default=None, help="default: the program's")
    p.add_argument("--overhead", metavar="DURATION", default="1us", type=values.duration(),
                   help="per-record tracer overhead (default 1us; e.g. 250ns)")
    p.add_argument("--seed", metavar="N", type=int, default=0,
                   help="random seed (default 0)")
    p.add_argument("--format", choices=tuple(FORMAT_CHOICES), default="otf2",
                   help="trace format of the pair (default otf2)")
    p.add_argument("--report", action="store_true",
                   help="also compensate with both bounds and print the accuracy")
    p.add_argument("--version", action="version", version=version_line(prog))
    return p


def _output_path(out: Path, name: str, fmt: Format) -> Path:
    """Where trace ``name`` (``truth``, ``measured``) goes in ``out`` in format ``fmt``:
    an archive in a directory of its own (``out/truth/traces.otf2``), a file beside
    the others (``out/truth.trace``)."""
    return out / name / f"traces{fmt.suffix}" if fmt.archive else out / f"{name}{fmt.suffix}"


def write_windows(trace: Trace, path: Path, progress=None, windows: int = 64) -> None:
    """Write ``trace`` to ``path`` through a :class:`TraceWriter`, all locations
    window by window in time (so a text output's merge buffer stays small), and
    ``progress(records written)`` after each window. The output equals
    :func:`compensate.formats.write_trace`'s."""
    events = trace.events
    starts = [int(ev.time[0]) for ev in events.values() if len(ev)]
    ends = [int(ev.time[-1]) for ev in events.values() if len(ev)]
    bounds = (np.linspace(min(starts), max(ends) + 1, windows + 1).astype(np.int64).tolist()
              if starts else [0, 1])
    pos = dict.fromkeys(events, 0)
    done = 0
    with TraceWriter(path, trace.definitions) as writer:
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            writer.advance(lo)
            for loc, ev in events.items():
                end = len(ev) if hi == bounds[-1] else int(np.searchsorted(ev.time, hi))
                if end > pos[loc]:
                    writer.write(loc, ev.slice(pos[loc], end))
                    done += end - pos[loc]
                    pos[loc] = end
            if progress is not None:
                progress(done)


def main(argv: list[str] | None = None, prog: str = "compensate-simulate") -> int:
    """Run the command and return its exit status (2: a usage error, one line and
    the usage line; 3: the simulation or its outputs refused)."""
    # SIGINT/SIGTERM: exit 130/143, and what this run wrote is removed (OUTDIR was
    # absent or empty): OUTDIR if it created it, else its contents
    written: list[Path] = []
    return interrupt.run(prog, lambda: _usage_checked(argv, written, prog),
                         cleanup=lambda: _remove(written))


def subcommand(argv: list[str] | None = None) -> int:
    """``compensate simulate ARGS``: the same command as ``compensate-simulate``."""
    return main(argv, prog="compensate simulate")


def _usage_checked(argv: list[str] | None, written: list[Path], prog: str) -> int:
    """:func:`_main`, its failures one line and an exit status: a usage error (2,
    with the usage line), an output that cannot be written (3), --help and
    --version (0)."""
    try:
        return _main(argv, written, prog)
    except SystemExit as exc:  # --help, --version: argparse printed them
        return exit_status(exc)
    except Usage as exc:
        interrupt.check()  # an error an interrupt caused is reported as the interrupt
        print(f"{prog}: error: {exc}\n{synopsis(build_parser(prog))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return failure_status(prog, exc)


def _remove(written: list[Path]) -> None:
    for p in written:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()


def _main(argv: list[str] | None, written: list[Path], command: str) -> int:
    args = build_parser(command).parse_args(argv)
    out = Path(args.outdir)
    prog = Progress(command, f"simulating {args.program}")
    try:
        if out.exists() and any(out.iterdir()):
            raise SimulationError(f"{out}: exists and is not empty")
        written.append(out if not out.exists() else out / "truth")
        written += [out / n for n in ("measured", "truth.trace", "measured.trace",
                                      "platform.json")]
        sim = simulate(args.program, ranks=args.ranks, iterations=args.iterations,
                       overhead=parse_duration(args.overhead), seed=args.seed,
                       progress=prog.fraction)
    except (SimulationError, PlatformError, ValueError) as exc:
        prog.close()
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 3
    out.mkdir(parents=True, exist_ok=True)
    try:
        for name, trace in (("truth", sim.truth), ("measured", sim.measured)):
            path = _output_path(out, name, FORMAT_CHOICES[args.format])
            prog = prog.phase(f"writing {name}", trace.record_count, "records")
            write_windows(trace, path, prog)
    finally:
        prog.close()
    (out / "platform.json").write_text(json.dumps(sim.platform.to_dict(), indent=2) + "\n")
    t, m = sim.info["span_truth"], sim.info["span_measured"]
    print(f"{command}: {args.program}, {args.ranks} ranks, "
          f"{sim.measured.record_count} records: truth {t:.6g} s, measured {m:.6g} s "
          f"(+{100 * (m - t) / t:.1f} %); wrote {out}/")
    if args.report:
        ev = evaluate(sim.truth, sim.measured, sim.platform)
        for bound in ("lower", "upper"):
            a = ev[bound]
            print(f"  {bound}: {100 * a.removed_total:.1f} % of the dilation removed, "
                  f"error p50 {1e6 * a.error_p50:.3f} µs, max {1e6 * a.error_max:.3f} µs, "
                  f"{a.violations} violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
