"""``mpiexec -n P python -m tests.parallel.stop_rank R ARGS...``: ``compensate ARGS``
on every rank but ``R``, which stops itself (SIGSTOP) as the run begins: a rank that
never answers again (tests/parallel/test_stall.py)."""

from __future__ import annotations

import os
import signal
import sys

from compensate.cli.compensate import main

if __name__ == "__main__":
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGSTOP)
    sys.exit(main(sys.argv[2:]))
