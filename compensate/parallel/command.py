"""``mpiexec -n P compensate IN OUT ...``: the command's distributed run.

:func:`launched` tells from the environment alone whether an MPI launcher started
this process with more than one rank (mpi4py is imported only then, or with
``--mpi``: importing it costs start-up time). :func:`run_parallel` runs the
pipeline of :mod:`compensate.parallel.driver` on ``COMM_WORLD``; rank 0 writes the
output and the summary exactly as the ``--in-memory`` run does.

Errors: every rank exits with the same status (the command's documented codes;
SIGINT/SIGTERM, which mpiexec forwards to every rank, are only recorded while the
ranks talk and stop them all at the next phase boundary);
only rank 0 prints, the first failing rank's one line; nothing is written after a
failure (rank 0's output is atomic and discarded). Ranks other than 0 print
nothing at all (:func:`silent_rank`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import compensate.interrupt as interrupt

#: (size, rank) variables of the launchers: MPICH/Hydra and Intel MPI (PMI),
#: Open MPI, MVAPICH2, Slurm's srun
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS")
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")


def _env_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return None


def available() -> bool:
    """Whether mpi4py can be imported (without importing it)."""
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None


def launched() -> bool:
    """Whether an MPI launcher started this process as one of several ranks (and
    mpi4py is there to join them)."""
    size = _env_int(_SIZE_VARS)
    return size is not None and size > 1 and available()


def silent_rank(argv: list[str]) -> bool:
    """Whether this process is a rank other than 0 of a distributed run (then it
    prints nothing: rank 0 reports for all)."""
    if not (launched() or "--mpi" in argv):
        return False
    rank = _env_int(_RANK_VARS)
    return rank is not None and rank > 0


#: set once this rank has taken part in the distributed run to its end
_completed = False


def abort_if_stranded(status: int) -> int:
    """At the end of a distributed rank: after SIGINT/SIGTERM that stopped this rank
    before it took part in the whole run (e.g. during its imports, while the other
    ranks already wait in the first collective step), abort the MPI job so that no
    rank waits forever; otherwise return ``status``."""
    if _completed or status not in (interrupt.exit_status(s) for s in interrupt.SIGNALS):
        return status
    from mpi4py import MPI
    MPI.COMM_WORLD.Abort(status)
    return status


def run_parallel(args, read: Callable, make_outputs: Callable, finish: Callable) -> int:
    """The distributed run of the command. ``read()`` reads the trace, ``make_outputs()``
    creates rank 0's atomic outputs, ``finish(outputs, trace, pipeline, seconds, ranks)`` writes
    them from the pipeline's result and returns the exit status (rank 0 only)."""
    from compensate.parallel.transport import MpiTransport

    transport = MpiTransport()
    global _completed
    with interrupt.deferred():  # a signal is only recorded: the ranks stop together
        status = _run(transport, args, read, make_outputs, finish)
        _completed = True
    # (a signal this rank received raises as the region ends: compensate.interrupt.run
    # reports it, with the status the ranks agreed on)
    return status


def _run(transport, args, read: Callable, make_outputs: Callable, finish: Callable) -> int:
    import sys
    import time

    from compensate.parallel.driver import agreed, describe, run_pipeline_parallel

    status, line = 0, None
    outputs = None
    try:
        t_start = time.monotonic()
        if transport.rank == 0:
            outputs = agreed(transport, make_outputs)
        else:
            agreed(transport, lambda: None)
        # par21io: every rank reads the whole trace for now; with a reader that selects
        # locations, each rank reads its own (ownership.owners of the definitions) and
        # ghosts.complete_trace(defs, own, transport) gives every rank the rest
        trace = agreed(transport, read)
        t_read = time.monotonic()
        pipeline = run_pipeline_parallel(trace, args.platform_used, args.bound,
                                         args.collective_exit, args.eager_limit, transport,
                                         strict=args.strict)
        if transport.rank == 0:
            status = finish(outputs, trace, pipeline,
                            {"read": t_read - t_start, "compensate": time.monotonic() - t_read},
                            transport.size)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line from rank 0,
        # the same status everywhere
        if os.environ.get("COMPENSATE_DEBUG") and transport.rank == 0:
            import traceback
            traceback.print_exc()
        status, line = describe(exc)
    finally:
        if outputs is not None:
            outputs.discard()  # nothing after a commit; everything after a failure
    final = transport.allgather((status, line))
    first = next(((s, ln) for s, ln in final if s != 0), (0, None))
    # rank 0 prints the first failure's line (an interrupt it received itself is
    # reported by compensate.interrupt.run)
    if transport.rank == 0 and first[1] and interrupt.received() is None:
        print(first[1], file=sys.stderr)
    return first[0]
