"""The command line: ``compensate`` (:mod:`~compensate.cli.compensate`), its
``report`` and ``export`` subcommands (:mod:`~compensate.cli.report`) and
``compensate-simulate`` (:mod:`~compensate.cli.simulate`).

:func:`main` installs the SIGINT/SIGTERM handlers (:mod:`compensate.interrupt`)
before it imports the command, whose imports (numpy, scipy, otf2) take about a
second: an interrupt meanwhile is one line and exit 130/143 as any other.
The same holds for a signal before that (in the first imports, :func:`early_interrupt`)
and for ``compensate-simulate`` (:func:`simulate_main`) and ``calibrate``
(:func:`calibration.main`), whose modules are imported under the handlers
(:func:`compensate.interrupt.launch`).
``compensate --version`` alone is answered before that (the same line argparse
prints), so that it takes a Python start-up, not the command's imports.

``compensate`` dispatches on its first word: ``report``, ``export``, ``simulate``
(``compensate-simulate``) and ``calibrate`` (the ``calibrate`` command) are
subcommands (:data:`compensate.cli.usage.SUBCOMMANDS`); a word that is none of them,
no path and close to one (``rport``) is a usage error naming the nearest; anything
else is the main job ``compensate IN OUT``. Every entry point runs with a stdout
that a closed pipe silences (:func:`compensate.cli.usage.quiet_closed_pipe`).
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    """The ``compensate`` command (console-script entry point). Called without
    ``argv`` (the console script, ``python -m compensate``), the command is the
    whole process: once its output is in place, SIGINT and SIGTERM stay ignored
    to the process's end, and stdout is flushed before the interpreter would
    (:func:`compensate.cli.failure.flush_stdout`)."""
    from compensate.cli.usage import quiet_closed_pipe

    try:
        with quiet_closed_pipe():
            status = _main(argv)
    except KeyboardInterrupt:  # before interrupt.run installed its handlers
        return early_interrupt("compensate")
    if argv is None:
        from compensate.cli.failure import flush_stdout
        status = flush_stdout(_prog(sys.argv[1:]), status)
    return status


def _prog(args: list[str]) -> str:
    """The name a command's lines start with: ``compensate``, ``compensate report``."""
    return f"compensate {args[0]}" if args and args[0] in ("report", "export", "simulate") \
        else "compensate"


def simulate_main(argv: list[str] | None = None) -> int:
    """The ``compensate-simulate`` command (console-script entry point)."""
    return launch("compensate-simulate", "compensate.cli.simulate", argv)


def launch(prog: str, module: str, argv: list[str] | None = None,
           entry: str = "main") -> int:
    """A console-script entry point: ``module.ENTRY(argv)``, its module imported
    with the signals handled (as :func:`compensate.interrupt.launch` does), an
    interrupt even before that one line and 130 (:func:`early_interrupt`), stdout
    silenced by a closed pipe (:func:`compensate.cli.usage.quiet_closed_pipe`)."""
    try:
        import importlib

        from compensate import interrupt
        from compensate.cli.usage import exit_status, quiet_closed_pipe

        loaded: list = []

        def load() -> int:
            with interrupt.deferred("import"):
                loaded.append(importlib.import_module(module))
            return 0

        with quiet_closed_pipe():
            if _asks_version(sys.argv[1:] if argv is None else argv):
                from compensate.cli.usage import version_line
                print(version_line(prog))
                return 0
            code = interrupt.run(prog, load)
            return getattr(loaded[0], entry)(argv) if loaded and code == 0 else code
    except KeyboardInterrupt:
        return early_interrupt(prog)
    except SystemExit as exc:  # argparse's --help and --version: a status, as the others
        return exit_status(exc)


def _asks_version(args: list[str]) -> bool:
    """Whether ``--version`` is among a command's options (before a ``--``): it is
    answered whatever else is given, by every subcommand too (``calibrate run
    --version``, whose parser has no such option)."""
    return "--version" in args[:args.index("--")] if "--" in args else "--version" in args


def early_interrupt(prog: str) -> int:
    """A command's status after a KeyboardInterrupt that came before its handlers
    were installed (during its first imports): the line
    :func:`compensate.interrupt.run` prints, and 130."""
    print(f"{prog}: interrupted by SIGINT; nothing written", file=sys.stderr)
    sys.stderr.flush()
    return 130


def _main(argv: list[str] | None) -> int:
    from compensate import interrupt

    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:  # what argparse prints, without importing the command
        from compensate import __version__
        try:
            print(f"compensate {__version__}")
            sys.stdout.flush()
        except OSError as exc:  # (> /dev/full): one line, not a traceback
            from compensate.cli.failure import EXIT_INPUT, say, silence_stdout
            silence_stdout()
            say(f"compensate: error: stdout: {exc.strerror or exc}")
            return EXIT_INPUT
        return 0
    if args and args[0] == "simulate":
        return launch("compensate simulate", "compensate.cli.simulate", args[1:],
                      entry="subcommand")
    if args and args[0] == "calibrate":  # the calibrate command (calibration.cli)
        return launch("calibrate", "calibration.cli", args[1:])
    from compensate.cli.usage import nearest_subcommand
    if args and (near := nearest_subcommand(args[0])):
        return _mistyped(args[0], near)
    prog = _prog(args)
    process = argv is None  # the whole process: signals stay ignored after a commit
    single_threaded_blas()

    def body() -> int:
        # extension modules' initialisation can turn a KeyboardInterrupt into an
        # ImportError: during the imports a signal is only recorded
        with interrupt.deferred("import"):
            from compensate.cli.compensate import main as command_main
            from compensate.formats.otf2.limits import raise_open_files_limit
        raise_open_files_limit()  # an OTF2 archive holds a file open per location
        return command_main(argv)

    from compensate.parallel import command as parallel

    if prog != "compensate" or not (parallel.launched() or "--mpi" in args):
        return interrupt.run(prog, body, process=process)
    # a distributed run (docs/parallel.md): ranks > 0 print nothing, rank 0 reports
    # for all; a rank a signal stopped before it joined the others aborts the job
    if parallel.silent_rank(args):
        import contextlib
        import io
        with contextlib.redirect_stderr(io.StringIO()):
            return parallel.abort_if_stranded(interrupt.run(prog, body, process=process))
    return parallel.abort_if_stranded(interrupt.run(prog, body, process=process))


def _mistyped(word: str, near: str) -> int:
    """``compensate rport x``: a usage error (2) that names the nearest subcommand,
    rather than a trace format ``rport`` does not have."""
    from compensate.cli.usage import OVERVIEW
    from compensate.parallel import command as parallel
    if parallel.launched() and (parallel.launcher_rank() or 0) > 0:
        return 2  # mpiexec -n P compensate rport ...: rank 0 says it, once per job
    print(f"compensate: error: {word!r} is neither a subcommand nor an existing input "
          f"(did you mean 'compensate {near}'?)\nusage: {OVERVIEW}", file=sys.stderr)
    return 2


def single_threaded_blas() -> None:
    """Ask numpy's OpenBLAS for no worker threads, unless the user chose a number
    (``OPENBLAS_NUM_THREADS``) or numpy is already loaded (then it is too late).

    compensate does no linear algebra large enough to share out (the fitted
    bound's least-squares fits are small), but OpenBLAS starts one thread per
    further core when numpy is imported, and each spins for a while before it
    sleeps: ~0.1 CPU-second per extra core on every run (0.19 -> 0.08 s of CPU for
    ``import numpy`` on 2 cores; docs/performance.md). Child processes (parallel
    workers, MPI ranks started by this command) inherit the setting."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


__all__ = ["early_interrupt", "launch", "main", "simulate_main", "single_threaded_blas"]
