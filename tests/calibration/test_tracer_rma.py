"""The mpi4py tracer records MPI one-sided communication (issue #19): a real
2-rank run of examples/mpi/rma.py under mpiexec (fence halo exchange, PSCW with a
put and a get, a lock-protected counter) opens in otf2-print, every RMA
dependency is matched, and it compensates with 0 violations."""

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

EXAMPLE = ROOT / "examples" / "mpi" / "rma.py"
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
