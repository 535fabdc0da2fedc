"""The mpi4py tracer records MPI-4 partitioned calls (issue #20): a real 2-rank run
of examples/mpi/partitioned.py under mpiexec opens in otf2-print and compensates
with 0 violations, every partition matched. A run of
examples/mpi/partitioned_errors.py, whose failing partitioned calls are caught,
keeps no record of them (only their Enter/Leave)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from compensate.formats.otf2 import read_otf2
from compensate.matching import match
from compensate.model import KIND_CODE
from tests.calibration.traced_runs import (
    ROOT,
    assert_opens_in_otf2_print,
    assert_verified_with,
    compensate_summary,
    trace_example,
)

EXAMPLE = ROOT / "examples" / "mpi" / "partitioned.py"
ERRORS = ROOT / "examples" / "mpi" / "partitioned_errors.py"
ITERATIONS = 3
ROUNDS = 2  # of partitioned_errors.py


def _skip_without_partitioned() -> None:
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    if not hasattr(MPI.Comm, "Psend_init"):
        pytest.skip("this mpi4py/MPI has no partitioned communication")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _skip_without_partitioned()
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


# -- calls that raise ----------------------------------------------------------------

@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/mpi/partitioned_errors.py traced: 7 partitioned calls per rank
    raise (it checks that each does), then 2 real rounds."""
    _skip_without_partitioned()
    out = tmp_path_factory.mktemp("partitioned_errors") / "run" / "traces.otf2"
    return trace_example(ERRORS, out, [str(ROUNDS)], "partitioned errors done")


def test_failed_partitioned_calls_leave_no_records(failing: Path) -> None:
    """Per rank, the partitioned records are those of the successful calls alone:
    no MpiPsendRequest of the second Start of an active request, no MpiPready of
    a Pready before the Start or of a partition that does not exist (Pready,
    Pready_range, Pready_list). The failed calls' Enter/Leave stay."""
    trace = read_otf2(str(failing))
    names = {code: name for name, code in KIND_CODE.items()}
    for ev in trace.events.values():
        kinds = ev.kind.tolist()
        records = Counter(names[k] for k in kinds if names[k].startswith("MpiP"))
        enters = Counter(trace.definitions.regions[r] for k, r in
                         zip(kinds, ev.region.tolist(), strict=True) if k == KIND_CODE["Enter"])
        polls = records.pop("MpiPtested")
        assert records == {"MpiPsendInit": 1, "MpiPrecvInit": 1,
                           "MpiPsendRequest": ROUNDS, "MpiPrecvRequest": ROUNDS,
                           "MpiPready": 4 * ROUNDS, "MpiParrived": 2 * ROUNDS,
                           "MpiPsendComplete": ROUNDS, "MpiPrecvComplete": ROUNDS}
        # regions: the successful calls and the failed ones
        assert enters["MPI_Psend_init"] == 1 + 1
        assert enters["MPI_Start"] == 2 * ROUNDS + 1
        assert enters["MPI_Pready"] == 3 * ROUNDS + 4  # Pready, _range, _list a round
        assert enters["MPI_Parrived"] == polls + 2 * ROUNDS + 1  # + the failed one
    assert match(trace).partitioned.counts() == {
        "transfers": 2 * ROUNDS, "partition_messages": 8 * ROUNDS,
        "unmatched_operations": 0, "unmatched_rounds": 0, "unobserved": 0}
    assert_opens_in_otf2_print(failing)


def test_run_with_failed_partitioned_calls_compensates(failing: Path) -> None:
    """compensate accepts the archive (before the fix it refused the Pready
    outside a started round) and verifies it with no violation."""
    assert_verified_with(failing, "partitioned")
