"""Run several ``compensate`` commands in one MPI job (each mpiexec launch costs
1-2 s): ``mpiexec -n P python -m tests.parallel.mpi_runs DIR '[[args...], ...]'``.
Every rank writes ``DIR/rank<r>.json``: the exit status of each command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from compensate.cli.compensate import main


def run(out: Path, commands: list[list[str]]) -> None:
    from mpi4py import MPI
    statuses = [main(args) for args in commands]
    (out / f"rank{MPI.COMM_WORLD.Get_rank()}.json").write_text(json.dumps(statuses))


if __name__ == "__main__":
    run(Path(sys.argv[1]), json.loads(sys.argv[2]))
