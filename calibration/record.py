"""Trace an mpi4py program into one OTF2 archive, plus the platform file for it.

Usage (every rank runs the same command)::

    mpiexec -n 4 python -m calibration.record -o run/traces.otf2 \\
        [--functions MODULE,...] [--force] -- prog.py ARGS

Records Enter/Leave of the functions of ``prog.py`` and of the ``--functions``
modules (:mod:`calibration.tracer.functions`; one call in ``--layer-period`` of
each runs through a second layer that measures the decorator's cost in this
run), every mpi4py communication call
(:mod:`calibration.tracer.mpi`), and the program's ``threading`` threads and locks
as Pthread records (:mod:`calibration.tracer.threads`), in memory, per rank and
thread (:mod:`calibration.tracer.buffer`); each thread becomes its own location.
When the script returns, the tracer waits for its non-daemon threads, as the
interpreter would. At the end the buffers are gathered on rank 0
and written as ``run/traces.otf2`` with ClockOffset definitions from a ping-pong
at start and end (:mod:`calibration.tracer.clock`, :mod:`calibration.tracer.archive`);
then rank 0 calibrates the tracer's own per-record cost while the other ranks
sleep, and writes ``run/platform.json`` (:mod:`calibration.tracer.overhead`; on two
or more ranks, ranks 0 and 1 first measure the network by a ping-pong after the
program, :mod:`calibration.network`, for its ``network`` entry), so
that ``compensate run/traces.otf2 out/traces.otf2 --platform run/platform.json``
removes a measured overhead: the file says ``prefer_insitu``, so that command uses
the trace's own in-situ tables, and its per-kind O is attributed as they are
(stamps first, capped by the trace's bounds: :mod:`calibration.tracer.attribution`)
for ``--overhead platform`` and ``calibrate check``.

Exit status: the program's (0 if it ended normally), 2 for usage errors, 1 for
a script that does not compile (Python's message, printed once) or outputs that
cannot be written, 130 for an interrupt (SIGINT, which mpiexec forwards to every
rank) after the program: no archive is left then. A program that ends its process
with ``os._exit(status)`` skips the tracer's finalization: no trace is written,
the tracer says so, and the process exits with that status, or 1 for a status 0
(:data:`calibration.program_env.OS_EXIT_STATUS`). An uncaught exception in the
program goes to the program's ``sys.excepthook`` (the default one prints its
traceback, without the tracer's frames), then the MPI job aborts with status 1,
like ``python -m mpi4py`` does. The tracer's own messages go to the process's
stderr as it was at start, whatever the program did with ``sys.stderr``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
import types
from typing import Any

from calibration import program_env
from calibration.recordplatform import attribute, calibrate, network_and_rma
from calibration.spread import MAX_SPREAD
from calibration.tracer import messages
from calibration.tracer.functions import LAYER_PERIOD, WRAPPER_CODES, WRAPPER_FILE
from calibration.tracer.messages import say

USAGE = ("mpiexec -n N python -m calibration.record -o DIR/NAME.otf2 "
         "[--functions MODULE,...] [--force] -- prog.py ARGS")
#: Records (and traced calls) per calibration sample by default.
CALIBRATION_RECORDS = 2000
#: Exit status after an interrupt (128 + SIGINT, as a shell reports it).
INTERRUPTED_STATUS = 130
#: What rank 0 broadcasts when an interrupt stopped its writing.
INTERRUPTED = "interrupted"
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m calibration.record", usage=USAGE,
        description="Trace an mpi4py program (function Enter/Leave and MPI calls) into "
                    "an OTF2 archive, and write the calibrated platform file beside it.")
    p.add_argument("-o", "--output", required=True, metavar="DIR/NAME.otf2",
                   help="OTF2 anchor file to write; platform.json goes into the same "
                        "directory")
    p.add_argument("--functions", default="", metavar="MODULE,...",
                   help="also record the functions of these modules (and their "
                        "submodules); the script's own functions are always recorded")
    p.add_argument("--force", action="store_true",
                   help="replace an existing archive of that name")
    p.add_argument("--clock-offsets", choices=("auto", "measured"), default="auto",
                   help="auto: offset 0 for ranks on rank 0's host (same clock), the "
                        "ping-pong estimate elsewhere; measured: the estimate everywhere")
    p.add_argument("--calibration-records", type=int, default=CALIBRATION_RECORDS,
                   metavar="N",
                   help="records (and traced calls) per calibration sample (default "
                        f"{CALIBRATION_RECORDS}; 0 skips the calibration and platform.json)")
    p.add_argument("--layer-period", type=int, default=LAYER_PERIOD, metavar="N",
                   help="one call in N of each recorded function runs through a second "
                        "recording layer that measures the decorator's cost in this run "
                        f"(1-256, default {LAYER_PERIOD}; 0: never, the calibrated cost "
                        "is used)")
    p.add_argument("--max-spread", type=float, default=MAX_SPREAD, metavar="FRACTION",
                   help="leave the network and rma entries out of platform.json (with a "
                        "warning) where their spread exceeds this fraction of their value "
                        f"(default {MAX_SPREAD:g}; docs/calibration.md)")
    p.add_argument("program", help="the mpi4py script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def _first_rank() -> bool:
    """Whether this process prints the errors found before MPI is initialised:
    rank 0 of the job, as its launcher set it (every rank finds the same error in
    the same arguments: the job prints it once), or a process no launcher
    started."""
    from compensate.parallel.command import launcher_rank

    return (launcher_rank() or 0) == 0


def _early_error(message: str) -> None:
    """One of the errors found before the ranks meet, printed once per job
    (:func:`_first_rank`); every rank still exits with its status."""
    if _first_rank():
        say(message)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line; its usage errors (argparse's, exit 2) printed by the first
    rank only (:func:`_first_rank`)."""
    if _first_rank():
        return build_parser().parse_args(argv)
    import contextlib
    import io
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        return build_parser().parse_args(argv)


def _idle_barrier(comm: Any) -> None:
    """A barrier that sleeps instead of spinning (MPICH busy-polls in blocking
    calls, which would steal the CPU from rank 0's calibration when ranks share
    cores)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.0005)


def _is_zip(path: str) -> bool:
    """Whether ``path`` is a zip archive (a zipapp ``python app.pyz`` runs)."""
    import zipfile  # noqa: PLC0415 - only for this check

    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _run_script(path: str, args: list[str], code: Any, functions: Any,
                argv0: str | None = None) -> int:
    """Execute the compiled script as ``__main__``; returns its exit status.
    ``sys.argv[0]`` is ``argv0``, the script as the command line named it (as
    ``python prog.py`` sets it; ``__file__`` is the absolute ``path``)."""
    module = types.ModuleType("__main__")
    module.__dict__.update(functions.script_globals(path))
    saved_argv = list(sys.argv)
    sys.modules["__main__"] = module
    sys.argv = [path if argv0 is None else argv0, *args]
    try:
        exec(code, module.__dict__)
        return 0
    except SystemExit as exc:
        code_ = exc.code
        if code_ is None:
            return 0
        if isinstance(code_, int):
            return code_
        try:  # to the program's stderr, as the interpreter prints it
            print(code_, file=sys.stderr)
        except (AttributeError, OSError, ValueError):
            pass
        return 1
    finally:
        # the program's module stays __main__ (as under python prog.py), so that
        # its atexit handlers, finalizers and threads still find its classes
        # (pickle looks them up there); only sys.argv is the tracer's again
        sys.argv = saved_argv


def main(argv: list[str] | None = None) -> int:
    """Run the tracer (see the module docstring); returns the exit status."""
    messages.STREAMS.append(messages.open_stream())
    try:
        return _main(argv)
    finally:
        stream = messages.STREAMS.pop()
        if stream is not sys.stderr:
            try:
                stream.close()
            except (OSError, ValueError):
                pass


def _main(argv: list[str] | None) -> int:
    """:func:`main`, with the tracer's stderr open."""
    args = _parse(argv)
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    if not 0 <= args.layer_period <= 256:
        _early_error(f"calibration.record: error: --layer-period must be within 0..256, got "
             f"{args.layer_period}")
        return 2
    script = os.path.abspath(args.program)
    if os.path.isdir(script):  # python DIR runs DIR/__main__.py, DIR first on sys.path
        script = os.path.join(script, "__main__.py")
        if not os.path.isfile(script):
            _early_error(f"calibration.record: error: {args.program} is a directory without a "
                "__main__.py")
            return 2
    elif args.program == "-m":  # python -m MODULE: a module, not a script
        _early_error("calibration.record: error: -m MODULE is not supported: give the module's "
            "script (python -c 'import M; print(M.__file__)' names it), or a directory "
            "with a __main__.py")
        return 2
    elif not os.path.isfile(script):
        _early_error(f"calibration.record: error: no such program: {args.program}")
        return 2
    elif _is_zip(script):
        _early_error(f"calibration.record: error: {args.program} is a zip application, which "
            "the tracer cannot instrument: unpack it and trace its directory")
        return 2
    if os.path.splitext(args.output)[1] != ".otf2":
        _early_error(f"calibration.record: error: -o must name an anchor file NAME.otf2, "
             f"got {args.output}")
        return 2
    # resolved once, before the program runs: a program that changes its working
    # directory (os.chdir) must not move the archive, nor escape the --force check
    args.output = os.path.abspath(args.output)

    from mpi4py import MPI

    from calibration.tracer import archive, clock, insitu, mpiinit, threads
    from calibration.tracer import mpi as mpi_calls
    from calibration.tracer.buffer import Recorder
    from calibration.tracer.functions import FunctionTracing

    world = MPI.COMM_WORLD
    private = world.Dup()  # the tracer's own traffic: base class, never recorded
    rank = private.Get_rank()
    host = MPI.Get_processor_name()
    messages.set_first_rank(rank == 0)  # the tracer's warnings: once per job

    problem = None
    if rank == 0:
        if archive.archive_exists(args.output) and not args.force:
            # (with --force the old archive stays until the new one is complete)
            problem = f"{args.output} already exists (use --force to replace it)"
    problem = private.bcast(problem, root=0)
    if problem:
        if rank == 0:
            say(f"calibration.record: error: {problem}")
        return 2

    recorder = Recorder(reserve=True)
    functions = FunctionTracing(recorder, [m.strip() for m in args.functions.split(",")],
                                sample=args.layer_period > 0,
                                period=args.layer_period or LAYER_PERIOD)
    if rank == 0:
        for m in functions.already_imported():
            say(f"calibration.record: warning: {m} was imported before tracing "
                 f"started; its functions are not recorded")
    code, failed = _compile(functions, script, args.program)
    failed = next((f for f in private.allgather(failed) if f), None)  # no rank waits
    if failed:
        if rank == 0:
            say(failed[1], end="")
        return failed[0]
    realtime = (time.monotonic_ns(), time.time_ns())
    trust = args.clock_offsets == "auto"
    offsets = [clock.clock_offsets(private, trust_host=trust)]

    mpi_calls.install(recorder)
    threads.install(recorder)
    functions.install()
    program = program_env.enter(script, MPI, args.layer_period)  # the program's view
    private.Barrier()
    sched0, wall0 = insitu.sched_now(), time.monotonic_ns()
    recorder.program_begin(os.path.basename(script), args.args)
    pid = os.getpid()
    try:
        status = _run_script(script, args.args, code, functions, args.program)
    except BaseException as exc:
        _program_excepthook(exc)
        if os.getpid() != pid:
            _end_forked_child(1)
        world.Abort(1)
        return 1
    if os.getpid() != pid:
        _end_forked_child(status)
    threads.wait_for_threads()
    mpiinit.note_rc_thread_level()  # (if the program never asked MPI.Query_thread)
    recorder.program_end(status)
    recorder.stop_threads()  # daemon threads still running wait until we are done
    sched1, wall1 = insitu.sched_now(), time.monotonic_ns()
    if rank == 0:  # with the program's sys.path, where its modules are found
        for line in functions.unrecorded():
            say(f"calibration.record: warning: {line}")
    program_env.leave(program, MPI)  # before the tracer's own communication
    functions.uninstall()
    threads.uninstall()

    interrupt, previous = _defer_interrupts()
    try:
        return _finish(args, private, MPI, host, recorder, offsets, realtime, status,
                       (sched0, sched1, wall0, wall1), interrupt)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        recorder.release_threads()


def _end_forked_child(status: int) -> None:
    """End a process the program forked (``os.fork``) that ran to the end of the
    script: it holds a copy of the tracer, whose finalization (MPI calls, writing
    the archive to the parent's path) must happen once, in the parent. The
    child's output is flushed and it exits with the program's status, as the
    tracer's ``os._exit`` would (the program's atexit handlers do not run)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(status)


def _finish(args: argparse.Namespace, private: Any, MPI: Any, host: str, recorder: Any,
            offsets: list, realtime: tuple[int, int], status: int,
            sched: tuple, interrupt: dict[str, bool]) -> int:
    """After the program: the closing clock offsets, the network and rma
    measurements, each rank's calibration data, the gather; rank 0 writes the
    outputs while the others sleep; every rank returns the same verdict (the
    program's ``status``, 1 after an error, :data:`INTERRUPTED_STATUS` after an
    interrupt), so that none waits for a rank that left."""
    from calibration.tracer import archive, clock, insitu

    rank = private.Get_rank()
    trust = args.clock_offsets == "auto"
    sched0, sched1, wall0, wall1 = sched
    offsets.append(clock.clock_offsets(private, trust_host=trust))
    pingpong = unlock = None  # network model and rma protocol, after the program
    if args.calibration_records > 0 and private.Get_size() >= 2:
        from calibration.network import pingpong as measure_network
        from calibration.rma import measure as measure_rma
        from calibration.tracer.rma import UNTRACED_WIN
        pingpong = measure_network(private)
        unlock = measure_rma(private, repeats=51, win_class=UNTRACED_WIN)  # the rma entry
    mine = archive.RankData.of(rank, host, recorder, offsets, realtime)
    mine.back_ns = insitu.back_cost()
    if args.calibration_records > 0:
        from calibration.tracer.overhead import COLD_BLOCKS, cold_ladder, wrapper_residues
        mine.residues = wrapper_residues(mine.back_ns)
        # a small calibration (--calibration-records below the default: tests,
        # quick looks) takes a small ladder too: 3 pairs of blocks per step
        blocks = COLD_BLOCKS if args.calibration_records >= CALIBRATION_RECORDS else 3
        mine.cold = cold_ladder(mine.back_ns, threaded=recorder.threaded, blocks=blocks)
    if sched0 and sched1:
        mine.sched = {"cpu_s": (sched1[0] - sched0[0]) * 1e-9,
                      "runqueue_wait_s": (sched1[1] - sched0[1]) * 1e-9,
                      "wall_s": (wall1 - wall0) * 1e-9}
    warned = private.gather(messages.given(), root=0)
    gathered = private.gather(mine, root=0)
    error: str | None = None
    if rank == 0:
        messages.say_others(warned)  # the warnings rank 0 did not give itself
        error = _guarded_outputs(args, gathered, MPI, pingpong, unlock, interrupt)
        del gathered
        private.Ibarrier().Wait()
    else:
        _idle_barrier(private)  # sleep while rank 0 writes and calibrates
    error = private.bcast(error, root=0)
    if error == INTERRUPTED or interrupt["seen"]:
        if rank == 0 and error == INTERRUPTED:
            say("calibration.record: interrupted; no trace written")
        return INTERRUPTED_STATUS
    if error:
        if rank == 0:
            say(f"calibration.record: error: {error}")
        return 1
    return status


def _defer_interrupts() -> tuple[dict[str, bool], Any]:
    """After the program: a SIGINT handler that notes the interrupt (``seen``)
    and raises KeyboardInterrupt only while ``armed`` (rank 0 writing its outputs,
    :func:`_guarded_outputs`), once; elsewhere the ranks finish their collective
    calls and then leave together with :data:`INTERRUPTED_STATUS`, where an
    exception in the middle of one would leave the others waiting. Returns the
    state and the handler to put back (None if none was installed: not the main
    thread)."""
    state = {"seen": False, "armed": False}

    def handler(signum: int, frame: Any) -> None:
        """Note the interrupt; raise it if rank 0's writing is armed."""
        state["seen"] = True
        if state["armed"]:
            state["armed"] = False  # its cleanup is not interrupted again
            raise KeyboardInterrupt

    try:
        return state, signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: interrupts stay as they were
        return state, None


def _guarded_outputs(args: argparse.Namespace, gathered: list, MPI: Any,
                     pingpong: list[dict] | None, unlock: dict | None,
                     interrupt: dict[str, bool]) -> str | None:
    """Rank 0: :func:`_write_outputs`, interruptible, and never raising, so that
    the other ranks' barrier and broadcast complete: an interrupt removes what
    was written of the archive and returns :data:`INTERRUPTED`, any other
    exception (printed with its traceback: a bug of the tracer) its message."""
    from calibration.tracer import archive

    if interrupt["seen"]:
        return INTERRUPTED
    interrupt["armed"] = True
    try:
        return _write_outputs(args, gathered, MPI, pingpong, unlock, interrupt)
    except KeyboardInterrupt:
        interrupt["armed"], interrupt["seen"] = False, True
        if interrupt.get("placed"):  # complete, and platform.json was next
            archive.remove_archive(args.output)
        return INTERRUPTED
    except BaseException as exc:  # noqa: BLE001 - reported, then every rank fails
        interrupt["armed"] = False
        say("".join(traceback.format_exception(exc)), end="")
        return f"{type(exc).__name__}: {exc}"
    finally:
        interrupt["armed"] = False


def _compile(functions: Any, script: str, name: str) -> tuple[Any, tuple[int, str] | None]:
    """The instrumented code of ``script``, or None and (status, message) for a
    script Python would not run: what ``python prog.py`` prints for a syntax
    error, null bytes or undecodable source (status 1), or one line for a file
    that cannot be read (status 2)."""
    try:
        return functions.compile_script(script), None
    except (SyntaxError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        return None, (1, "".join(traceback.format_exception_only(exc)))
    except OSError as exc:
        return None, (2, f"calibration.record: error: cannot read {name}: "
                         f"{exc.strerror or exc}\n")


def _program_frames(exc: BaseException, seen: set[int] | None = None) -> None:
    """Take the tracer's frames out of ``exc``'s traceback (and of the exceptions
    it chains), as the untraced run shows it: record.py's frames at its head
    (:func:`main`, :func:`_run_script`) and the decorator's wrappers
    (:data:`calibration.tracer.functions.WRAPPER_CODES`) and the MPI, lock and
    thread wrappers (``calibration/tracer/``) between the program's frames."""
    seen = set() if seen is None else seen
    if id(exc) in seen:
        return
    seen.add(id(exc))
    here = _run_script.__code__.co_filename
    tracer = os.path.dirname(messages.__file__) + os.sep
    kept = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        name = code.co_filename
        if code not in WRAPPER_CODES and name != WRAPPER_FILE and \
                not name.startswith(tracer) and not (not kept and name == here):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for tb in reversed(kept):
        new = types.TracebackType(new, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    exc.__traceback__ = new
    for other in (exc.__cause__, exc.__context__):
        if other is not None:
            _program_frames(other, seen)


def _program_excepthook(exc: BaseException) -> None:
    """Report the program's uncaught ``exc`` as the interpreter would: through
    the ``sys.excepthook`` the program left (which may print its own way, or end
    the job itself), with the program's frames only; a hook that fails is
    reported as Python reports it."""
    _program_frames(exc)
    hook = getattr(sys, "excepthook", None)
    if hook is None:
        say("sys.excepthook is missing")
        say("".join(traceback.format_exception(exc)), end="")
        return
    try:
        hook(type(exc), exc, exc.__traceback__)
    except BaseException as err:  # noqa: BLE001 - reported as the interpreter does
        say("Error in sys.excepthook:\n" + "".join(traceback.format_exception(err))
             + "\nOriginal exception was:\n" + "".join(traceback.format_exception(exc)),
             end="")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def _write_outputs(args: argparse.Namespace, gathered: list, MPI: Any,
                   pingpong: list[dict] | None = None,
                   unlock: dict | None = None,
                   state: dict | None = None) -> str | None:
    """Rank 0: calibrate, write the archive (with each location's in-situ overhead
    table, whose unbracketed records take the calibrated values), then
    platform.json (with the network model of the ranks' ``pingpong``, if measured:
    :mod:`calibration.network`, and the one-sided protocol of ``unlock``:
    :mod:`calibration.rma`); returns an error message or None. ``state["placed"]``
    is set once the archive is in place."""
    from calibration.tracer import archive

    platform = None
    if args.calibration_records > 0:
        extra = {"ranks": len(gathered), "hosts": sorted({d.host for d in gathered}),
                 "mpi": MPI.Get_library_version().splitlines()[0].strip(),
                 "mpi4py": __import__("mpi4py").__version__,
                 "clock_offsets_ns": {
                     "columns": ["time", "offset", "error", "measured"],
                     "ranks": {d.rank: [[o.time, o.offset, o.error, o.measured]
                                        for o in d.offsets] for d in gathered}}}
        threaded = any(d.threaded for d in gathered)
        platform = calibrate(args, MPI.Status(), extra, threaded)
        network_and_rma(platform, pingpong, unlock, extra["mpi"],
                         [gathered[0].host, gathered[1].host] if len(gathered) > 1 else [],
                         getattr(args, "max_spread", MAX_SPREAD))
    defaults = {}
    if platform is not None:
        # every kind the file does not list costs its event_overhead, in the tables
        # as in the file (partitioned and program records are not calibrated one by
        # one; a table that did not name them would charge them nothing). Not
        # BufferFlush: its interval is removed exactly (R6), and the table's bound
        # would not take that interval off the gap.
        from calibration.tracer.buffer import KIND_NAMES

        defaults = dict(platform["event_overhead_by_kind"])
        for kind in KIND_NAMES:
            if kind != "BufferFlush":
                defaults.setdefault(kind, platform["event_overhead"])
    warnings: list[str] = []
    tables: list[dict] = []
    try:
        n = archive.write_archive(args.output, gathered,
                                  " ".join([args.program, *args.args]), warnings, defaults,
                                  tables)
    except Exception as exc:  # noqa: BLE001 - reported, then every rank fails
        return f"cannot write {args.output}: {type(exc).__name__}: {exc}"
    if state is not None:
        state["placed"] = True  # an interrupt from here on removes it again
    for w in warnings:
        say(f"calibration.record: warning: {w}")
    threads = sum(len(d.threads) for d in gathered)
    say(f"calibration.record: {n:,} records of {len(gathered)} ranks ({threads} "
         f"threads) -> {args.output}")
    if platform is None:
        return None
    attribute(platform, tables, gathered)
    path = os.path.join(os.path.dirname(os.path.abspath(args.output)), "platform.json")
    partial = f"{path}.{os.getpid()}.partial"  # never a half-written platform.json
    try:
        with open(partial, "w") as f:
            json.dump(platform, f, indent=2)
            f.write("\n")
        os.replace(partial, path)
    except OSError as exc:
        return f"cannot write {path}: {exc}"
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return None


if __name__ == "__main__":
    sys.exit(main())
