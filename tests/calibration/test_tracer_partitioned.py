"""The mpi4py tracer records MPI-4 partitioned calls (issue #20): a real 2-rank run
of examples/mpi/partitioned.py under mpiexec opens in otf2-print and compensates
with 0 violations, every partition matched."""

from __future__ import annotations

from pathlib import Path

import pytest

from compensate.formats.otf2 import read_otf2
from compensate.matching import match
from compensate.model import KIND_CODE
from tests.calibration.traced_runs import (
    ROOT,
    assert_opens_in_otf2_print,
    compensate_summary,
    trace_example,
)

EXAMPLE = ROOT / "examples" / "mpi" / "partitioned.py"
ITERATIONS = 3


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    if not hasattr(MPI.Comm, "Psend_init"):
        pytest.skip("this mpi4py/MPI has no partitioned communication")
    out = tmp_path_factory.mktemp("partitioned") / "run" / "traces.otf2"
    return trace_example(EXAMPLE, out, [str(ITERATIONS)], "partitioned done")


def test_partitioned_calls_are_recorded(traced: Path) -> None:
    trace = read_otf2(str(traced))
    m = match(trace).partitioned
    # 2 ranks x 3 rounds, 4 send and 2 receive partitions: each pair (i, i // 2)
    assert m.counts() == {"transfers": 2 * ITERATIONS, "partition_messages": 8 * ITERATIONS,
                          "unmatched_operations": 0, "unmatched_rounds": 0, "unobserved": 0}
    for ev in trace.events.values():
        kinds = ev.kind.tolist()
        assert kinds.count(KIND_CODE["MpiPready"]) == 4 * ITERATIONS
        assert kinds.count(KIND_CODE["MpiParrived"]) == 2 * ITERATIONS
        assert kinds.count(KIND_CODE["MpiPtested"]) >= ITERATIONS  # the early polls
    assert_opens_in_otf2_print(traced)


def test_traced_partitioned_run_compensates_without_violations(traced: Path) -> None:
    s = compensate_summary(traced)
    assert s["verification"]["ok"] and s["verification"]["partitioned"] == 0
    assert "MpiPready" not in s["verification"]["carried_local_only"]
