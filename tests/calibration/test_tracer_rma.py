"""The mpi4py tracer records MPI one-sided communication (issue #19): a real
2-rank run of examples/mpi/rma.py under mpiexec (fence halo exchange, PSCW with a
put and a get, a lock-protected counter) opens in otf2-print, every RMA
dependency is matched, and it compensates with 0 violations. A run of
examples/mpi/rma_errors.py, whose failing RMA calls are caught, keeps no record
of them (only their Enter/Leave)."""

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

EXAMPLE = ROOT / "examples" / "mpi" / "rma.py"
ERRORS = ROOT / "examples" / "mpi" / "rma_errors.py"
ITERATIONS = 3


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mpi4py")
    out = tmp_path_factory.mktemp("rma") / "run" / "traces.otf2"
    return trace_example(EXAMPLE, out, [str(ITERATIONS)], "rma done")


def test_rma_calls_are_recorded_and_matched(traced: Path) -> None:
    trace = read_otf2(str(traced))
    assert len(trace.definitions.windows) == 3  # fence, PSCW and lock windows
    counts = match(trace).rma.counts()
    n = ITERATIONS
    # which epoch waits for which holder depends on the run's timing: at least the
    # first hand-over between the ranks, at most one link per later epoch
    assert 1 <= counts.pop("lock") <= 2 * n + 2
    assert counts == {
        "post": 2 * n, "complete": 2 * n,  # one post/start and complete/wait per rank
        "transfer": 2 * n + 2 * n,  # fence puts, PSCW puts (gets stay local)
        "completion": 2 * (2 * n) + 2,  # 2 ops per lock epoch, rank 0's init, Lock_all gets
        "fence": n + 1, "fence (local)": 0,
        "window collectives": 6,  # create and free of 3 windows
        "unmatched": 0}
    for ev in trace.events.values():
        kinds = ev.kind.tolist()
        assert kinds.count(KIND_CODE["RmaRequestLock"]) == kinds.count(
            KIND_CODE["RmaReleaseLock"])
    assert_opens_in_otf2_print(traced)


def test_traced_rma_run_compensates_without_violations(traced: Path) -> None:
    s = compensate_summary(traced)
    assert s["verification"]["ok"] and s["verification"]["rma"] == 0
    local = s["verification"]["carried_local_only"]
    assert not {k for k in local if k.startswith("Rma") and k != "RmaGet"}


def test_report_shows_rma_wait_states_of_the_real_run(traced: Path) -> None:
    """The odd rank works before it posts, so rank 0's MPI_Win_start waits (Late
    Post); the report lists it, measured and approximated."""
    from compensate.analysis import compare
    from compensate.api import compensate
    measured = read_otf2(str(traced))
    approx = compensate(measured, "lower", platform=traced.parent / "platform.json").trace
    c = compare(measured, approx)
    for bd in (c.measured, c.approximated):
        assert bd.waits.by_location["rma_late_post"][0] > 0
        assert bd.waits.count("rma_late_post") >= 1


# -- calls that raise ----------------------------------------------------------------

@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/mpi/rma_errors.py traced: 19 RMA calls per rank raise (it checks
    that each does), then one window's real fence, PSCW and lock epochs."""
    pytest.importorskip("mpi4py")
    out = tmp_path_factory.mktemp("rma_errors") / "run" / "traces.otf2"
    return trace_example(ERRORS, out, [], "rma errors done")


def _counts(trace: object, ev: object) -> tuple[Counter, Counter]:
    """(RMA records by kind name, Enters by MPI region name) of one location."""
    names = {code: name for name, code in KIND_CODE.items()}
    kinds = ev.kind.tolist()
    records = Counter(names[k] for k in kinds if names[k].startswith("Rma"))
    enters = Counter(trace.definitions.regions[r] for k, r in
                     zip(kinds, ev.region.tolist(), strict=True) if k == KIND_CODE["Enter"])
    return records, enters


def test_failed_rma_calls_leave_no_records(failing: Path) -> None:
    """Per rank, the RMA records are those of the successful calls alone: no Begin
    of a window that was never created, of a fence that failed or of a free
    refused inside a lock epoch, no transfer or atomic to a rank that does not
    exist (nor its completion at the closing fence), no group sync of a failed
    post/start/complete/wait, no lock request that MPI refused. The failed calls'
    Enter/Leave stay."""
    trace = read_otf2(str(failing))
    assert len(trace.definitions.windows) == 1
    assert len(trace.events) == 2
    for ev in trace.events.values():
        records, enters = _counts(trace, ev)
        assert records == {
            "RmaWinCreate": 1, "RmaWinDestroy": 1,
            "RmaCollectiveBegin": 4, "RmaCollectiveEnd": 4,  # create, 2 fences, free
            "RmaPut": 2, "RmaGet": 1, "RmaAtomic": 4,  # fence put+get, PSCW put; 4 atomics
            "RmaOpCompleteBlocking": 3,  # closing fence, complete, unlock of rank 0
            "RmaGroupSync": 4,  # post, start, complete, wait
            "RmaRequestLock": 2, "RmaReleaseLock": 2}
        # each failed call is still a region: successful + failed calls
        assert enters["MPI_Win_create"] == 1 + 2 and enters["MPI_Win_allocate"] == 1
        assert enters["MPI_Win_free"] == 1 + 1 and enters["MPI_Win_fence"] == 2 + 1
        assert enters["MPI_Put"] == 2 + 1 and enters["MPI_Compare_and_swap"] == 1 + 1
        assert enters["MPI_Win_lock"] == 2 + 2 and enters["MPI_Win_lock_all"] == 1
        assert enters["MPI_Win_complete"] == 1 + 1 and enters["MPI_Win_start"] == 1 + 1
    counts = match(trace).rma.counts()
    assert 1 <= counts.pop("lock") <= 2
    counts.pop("completion")
    assert counts == {"post": 2, "complete": 2, "transfer": 4, "fence": 2,
                      "fence (local)": 0, "window collectives": 2, "unmatched": 0}
    assert_opens_in_otf2_print(failing)


def test_run_with_failed_rma_calls_compensates(failing: Path) -> None:
    """compensate accepts the archive (before the fix it refused the RmaPut to a
    rank outside the window) and verifies it with no violation."""
    assert_verified_with(failing, "rma")
