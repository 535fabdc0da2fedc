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

Exit status: the program's (0 if it ended normally), 2 for usage errors; an
uncaught exception in the program prints its traceback and aborts the MPI job,
like ``python -m mpi4py`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import types
from typing import Any

from calibration.tracer.functions import LAYER_PERIOD

USAGE = ("mpiexec -n N python -m calibration.record -o DIR/NAME.otf2 "
         "[--functions MODULE,...] [--force] -- prog.py ARGS")
#: Records (and traced calls) per calibration sample by default.
CALIBRATION_RECORDS = 2000


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
    p.add_argument("program", help="the mpi4py script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def _idle_barrier(comm: Any) -> None:
    """A barrier that sleeps instead of spinning (MPICH busy-polls in blocking
    calls, which would steal the CPU from rank 0's calibration when ranks share
    cores)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.0005)


#: Python frames a traced call may take per frame of the program: the decorator's
#: wrapper and the function, and the measuring layer on sampled calls.
FRAMES_PER_CALL = 3
#: Frames for the tracer's own code below and inside the program's calls.
FRAME_MARGIN = 100
_INT_MAX = 2**31 - 1
#: The tracer's top-level packages, which a program's own module may shadow.
PACKAGES = ("calibration", "compensate")


def _depth() -> int:
    """Python frames on the current thread's stack."""
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def _scale_recursion_limit() -> tuple[Any, Any, int]:
    """Give the program its own recursion limit: a traced call takes up to
    :data:`FRAMES_PER_CALL` frames, so the interpreter's limit becomes that many
    times the program's, plus the tracer's frames, and ``sys.setrecursionlimit``
    and ``sys.getrecursionlimit`` set and read the program's number (a program
    that recurses 900 deep under the default 1000 does so traced as well).
    Returns what :func:`_restore_recursion_limit` puts back."""
    real_set, real_get = sys.setrecursionlimit, sys.getrecursionlimit
    saved = real_get()
    margin = _depth() + FRAME_MARGIN
    program = [saved]

    def setrecursionlimit(limit: int, /) -> None:
        """sys.setrecursionlimit as the program calls it: scaled for the tracer's
        frames; a limit Python refuses raises as it would untraced."""
        if not isinstance(limit, int) or not 1 <= limit <= _INT_MAX:
            real_set(limit)  # raises TypeError, ValueError or OverflowError
        real_set(min(FRAMES_PER_CALL * limit + margin, _INT_MAX))
        program[0] = limit

    def getrecursionlimit() -> int:
        """sys.getrecursionlimit as the program calls it: its own number."""
        return program[0]

    setrecursionlimit.__doc__ = real_set.__doc__
    getrecursionlimit.__doc__ = real_get.__doc__
    setrecursionlimit(saved)
    sys.setrecursionlimit, sys.getrecursionlimit = setrecursionlimit, getrecursionlimit
    return real_set, real_get, saved


def _restore_recursion_limit(saved: tuple[Any, Any, int]) -> None:
    """Undo :func:`_scale_recursion_limit`: the real functions and the limit."""
    real_set, real_get, limit = saved
    sys.setrecursionlimit, sys.getrecursionlimit = real_set, real_get
    real_set(limit)


def _program_path(script: str) -> list[str]:
    """sys.path as ``python prog.py`` gives it: the script's directory first, and
    not the working directory that ``python -m calibration.record`` put there
    (when this module runs as ``__main__``, sys.path[0] is that entry)."""
    rest = list(sys.path)
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if (spec is not None and spec.name == __spec__.name and not sys.flags.safe_path
            and rest and rest[0] in ("", os.getcwd())):
        del rest[0]
    return [os.path.dirname(os.path.realpath(script)), *rest]


def _shadowed(path: list[str]) -> list[str]:
    """The tracer's packages (:data:`PACKAGES`) for which the program, on ``path``,
    would import a module of its own: untraced its ``import calibration`` finds
    that one, so traced it must too."""
    import importlib.machinery  # noqa: PLC0415 - once, before the program

    names = []
    for name in PACKAGES:
        mine = sys.modules.get(name)
        if mine is None:
            continue
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            continue
        theirs = spec.origin or "".join(spec.submodule_search_locations or ())
        ours = getattr(mine, "__file__", None) or "".join(getattr(mine, "__path__", ()))
        if os.path.realpath(theirs) != os.path.realpath(ours):
            names.append(name)
    return names


def _hide_modules(names: list[str]) -> dict[str, Any]:
    """Take the tracer's modules ``names`` and their submodules out of sys.modules
    while the program runs, so that its own modules of those names are imported.
    The tracer's code holds its modules by reference and imports nothing while the
    program runs; returns the modules for :func:`_unhide_modules`."""
    hidden = {}
    for key in list(sys.modules):
        if key.partition(".")[0] in names:
            hidden[key] = sys.modules.pop(key)
    return hidden


def _unhide_modules(hidden: dict[str, Any]) -> None:
    """Put the tracer's modules back, dropping the program's of the same names."""
    names = {key.partition(".")[0] for key in hidden}
    for key in list(sys.modules):
        if key.partition(".")[0] in names:
            del sys.modules[key]
    sys.modules.update(hidden)


def _enter_program(script: str, MPI: Any) -> dict[str, Any]:
    """Make the interpreter look to the program as under ``python prog.py``: its
    sys.path, its own modules named like the tracer's packages, its recursion
    limit. Saves what the tracer needs back after the program, including mpi4py's
    serializer settings (the program may install its own and leave it)."""
    saved_path = list(sys.path)
    sys.path[:] = _program_path(script)
    hidden = _hide_modules(_shadowed(sys.path))
    return {"path": saved_path, "hidden": hidden, "recursion": _scale_recursion_limit(),
            "pickle": (MPI.pickle.PROTOCOL, MPI.pickle.THRESHOLD)}


def _leave_program(saved: dict[str, Any], MPI: Any) -> None:
    """Undo :func:`_enter_program` once the program and its threads are done,
    before the tracer communicates: its gathers go through ``MPI.pickle``, which
    must be the standard pickle again whatever the program configured."""
    _restore_recursion_limit(saved["recursion"])
    _unhide_modules(saved["hidden"])
    sys.path[:] = saved["path"]
    protocol, threshold = saved["pickle"]
    MPI.pickle.__init__(None, None, protocol, threshold)


def _run_script(path: str, args: list[str], code: Any, functions: Any) -> int:
    """Execute the compiled script as ``__main__``; returns its exit status."""
    module = types.ModuleType("__main__")
    module.__dict__.update(functions.script_globals(path))
    saved = sys.modules.get("__main__"), list(sys.argv)
    sys.modules["__main__"] = module
    sys.argv = [path, *args]
    try:
        exec(code, module.__dict__)
        return 0
    except SystemExit as exc:
        code_ = exc.code
        if code_ is None:
            return 0
        if isinstance(code_, int):
            return code_
        print(code_, file=sys.stderr)
        return 1
    finally:
        sys.modules["__main__"], sys.argv = saved


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    if not 0 <= args.layer_period <= 256:
        print(f"calibration.record: error: --layer-period must be within 0..256, got "
              f"{args.layer_period}", file=sys.stderr)
        return 2
    script = os.path.abspath(args.program)
    if not os.path.isfile(script):
        print(f"calibration.record: error: no such program: {args.program}", file=sys.stderr)
        return 2
    if os.path.splitext(args.output)[1] != ".otf2":
        print(f"calibration.record: error: -o must name an anchor file NAME.otf2, "
              f"got {args.output}", file=sys.stderr)
        return 2

    from mpi4py import MPI

    from calibration.tracer import archive, clock, insitu, threads
    from calibration.tracer import mpi as mpi_calls
    from calibration.tracer.buffer import Recorder
    from calibration.tracer.functions import FunctionTracing

    world = MPI.COMM_WORLD
    private = world.Dup()  # the tracer's own traffic: base class, never recorded
    rank = private.Get_rank()
    host = MPI.Get_processor_name()

    problem = None
    if rank == 0:
        if archive.archive_exists(args.output):
            if args.force:
                archive.remove_archive(args.output)
            else:
                problem = f"{args.output} already exists (use --force to replace it)"
    problem = private.bcast(problem, root=0)
    if problem:
        if rank == 0:
            print(f"calibration.record: error: {problem}", file=sys.stderr)
        return 2

    recorder = Recorder(reserve=True)
    functions = FunctionTracing(recorder, [m.strip() for m in args.functions.split(",")],
                                sample=args.layer_period > 0,
                                period=args.layer_period or LAYER_PERIOD)
    if rank == 0:
        for m in functions.already_imported():
            print(f"calibration.record: warning: {m} was imported before tracing "
                  f"started; its functions are not recorded", file=sys.stderr)
    code = functions.compile_script(script)
    realtime = (time.monotonic_ns(), time.time_ns())
    trust = args.clock_offsets == "auto"
    offsets = [clock.clock_offsets(private, trust_host=trust)]

    mpi_calls.install(recorder)
    threads.install(recorder)
    functions.install()
    program = _enter_program(script, MPI)  # from here on, the program's view
    private.Barrier()
    sched0, wall0 = insitu.sched_now(), time.monotonic_ns()
    recorder.program_begin(os.path.basename(script), args.args)
    try:
        status = _run_script(script, args.args, code, functions)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        world.Abort(1)
        return 1
    threads.wait_for_threads()
    recorder.program_end(status)
    sched1, wall1 = insitu.sched_now(), time.monotonic_ns()
    _leave_program(program, MPI)  # before the tracer's own communication
    functions.uninstall()
    threads.uninstall()

    offsets.append(clock.clock_offsets(private, trust_host=trust))
    pingpong = unlock = None  # network model and rma protocol, after the program
    if args.calibration_records > 0 and private.Get_size() >= 2:
        from calibration.network import pingpong as measure_network
        from calibration.rma import measure as measure_rma
        from calibration.tracer.rma import _Win
        pingpong = measure_network(private)
        unlock = measure_rma(private, repeats=51, win_class=_Win)  # the rma entry
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
    gathered = private.gather(mine, root=0)
    error: str | None = None
    if rank == 0:
        error = _write_outputs(args, gathered, MPI, pingpong, unlock)
        del gathered
        private.Ibarrier().Wait()
    else:
        _idle_barrier(private)  # sleep while rank 0 writes and calibrates
    error = private.bcast(error, root=0)
    if error:
        if rank == 0:
            print(f"calibration.record: error: {error}", file=sys.stderr)
        return 1
    return status


def _write_outputs(args: argparse.Namespace, gathered: list, MPI: Any,
                   pingpong: list[dict] | None = None,
                   unlock: dict | None = None) -> str | None:
    """Rank 0: calibrate, write the archive (with each location's in-situ overhead
    table, whose unbracketed records take the calibrated values), then
    platform.json (with the network model of the ranks' ``pingpong``, if measured:
    :mod:`calibration.network`, and the one-sided protocol of ``unlock``:
    :mod:`calibration.rma`); returns an error message or None."""
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
        platform = _calibrate(args, MPI.Status(), extra, threaded)
        if pingpong:
            from calibration.network import network_entry
            from compensate.platform import Platform
            copy = Platform.from_dict(platform).copy_time
            platform["network"] = network_entry(pingpong, copy)
            platform["network"]["mpi"] = extra["mpi"]
            platform["network"]["ranks"] = [gathered[0].host, gathered[1].host]
        if unlock:
            from calibration.rma import rma_entry
            platform["rma"] = {**rma_entry(unlock), "mpi": extra["mpi"]}
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
    for w in warnings:
        print(f"calibration.record: warning: {w}", file=sys.stderr)
    threads = sum(len(d.threads) for d in gathered)
    print(f"calibration.record: {n:,} records of {len(gathered)} ranks ({threads} "
          f"threads) -> {args.output}", file=sys.stderr)
    if platform is None:
        return None
    _attribute(platform, tables, gathered)
    path = os.path.join(os.path.dirname(os.path.abspath(args.output)), "platform.json")
    try:
        with open(path, "w") as f:
            json.dump(platform, f, indent=2)
            f.write("\n")
    except OSError as exc:
        return f"cannot write {path}: {exc}"
    return None


def _attribute(platform: dict, tables: list[dict], gathered: list) -> None:
    """Make ``platform`` describe the trace just written: its per-kind O with the
    in-situ tables' stamps-first attribution, capped by the trace's bounds
    (:mod:`calibration.tracer.attribution`), and ``prefer_insitu`` so that
    ``compensate --platform`` uses the trace's own tables where it has them."""
    from calibration.tracer.attribution import stamps_first, trace_bounds

    by_kind, note = stamps_first(platform["event_overhead_by_kind"], tables,
                                 trace_bounds(gathered))
    platform["event_overhead_by_kind"] = by_kind
    platform["prefer_insitu"] = True
    platform["calibration"]["attribution"] = {
        "rule": "stamps first: per kind the median over locations of the in-situ "
                "tables' value, capped by the trace's smallest gap after such a "
                "record; kinds absent from the trace keep the record-path cost "
                "(calibration/tracer/attribution.py)",
        "by_kind": note}


def _calibrate(args: argparse.Namespace, status: Any, extra: dict, threaded: bool) -> dict:
    """Rank 0 calibrates for all ranks: the multi-threaded decorator path if any
    rank started threads (one O per kind in a platform file)."""
    from calibration.tracer.overhead import calibrate

    return calibrate(n=args.calibration_records, status=status, extra=extra,
                     threaded=threaded)


if __name__ == "__main__":
    sys.exit(main())
