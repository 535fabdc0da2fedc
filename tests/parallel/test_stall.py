"""A rank that stops answering (SIGSTOP, a hang) ends the distributed run instead of
stalling it forever (compensate/parallel/transport.py ``timeout``, RankStalled): on
thread ranks (tests/threadranks.py) one rank stops before the run or inside the
replay, and the others end with the one line naming it, exit 3, after the
deadline and without waiting for each other's agreement; a rank slower than the
others but within the deadline changes nothing. Under mpiexec (the mpich wheel),
a rank that stops itself: exit 3, the one line, nothing written."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from compensate.parallel.driver import describe, run_rank
from compensate.parallel.ghosts import complete_trimmed
from compensate.parallel.ownership import owners
from compensate.parallel.transport import RankStalled
from compensate.pipeline.options import RunOptions
from compensate.simulate import simulate
from tests.threadranks import run_threads

from ..conftest import CASES, ROOT, mpiexec

TIMEOUT = 1.0


@pytest.fixture(scope="module")
def program():
    sim = simulate("stencil", ranks=4, seed=1, iterations=3)
    return sim.measured, sim.platform


def stop(release: threading.Event) -> None:
    """The rank stops (as under SIGSTOP) until the test lets it go."""
    release.wait(30)


def ranks(trace, platform, stopped: int | None, where: str, release: threading.Event,
          timeout: float | None = TIMEOUT, size: int = 3) -> list:
    """Each rank's outcome (its run's output or the exception it ended with)."""
    lock, ended = threading.Lock(), []

    def body(t):
        owner = owners(trace.definitions, list(trace.events), t.size)
        own = {loc: ev for loc, ev in trace.events.items() if owner[loc] == t.rank}
        if t.rank == stopped and where == "before":
            stop(release)
        if t.rank == stopped and where == "replay":  # after its first replay message
            send = t.isend_array

            def isend_then_stop(dest, buf):
                req = send(dest, buf)
                stop(release)
                return req
            t.isend_array = isend_then_stop
        if t.rank == stopped and where == "slow":
            time.sleep(TIMEOUT / 2)
        try:
            view, index = complete_trimmed(trace.definitions, own, t, owner, trace.source)
            return run_rank(view, platform, RunOptions("lower"), t, owner, index)
        except RankStalled as exc:
            return exc
        finally:
            if t.rank != stopped:
                with lock:
                    ended.append(t.rank)
                    if len(ended) == size - (stopped is not None):
                        release.set()  # (the stopped rank goes on into the ruins)

    try:
        return run_threads(size, body, timeout)
    except threading.BrokenBarrierError:  # the stopped rank's own, once let go
        return []


@pytest.mark.parametrize("where", ["before", "replay"])
def test_the_others_end_naming_the_stopped_rank(program, where):
    trace, platform = program
    release = threading.Event()
    got: list = []
    start = time.monotonic()

    def run():
        got.append(ranks(trace, platform, 1, where, release))
    th = threading.Thread(target=run)
    th.start()
    th.join(60)
    assert not th.is_alive()
    seconds = time.monotonic() - start
    outcomes = got[0]
    assert len(outcomes) == 3
    stalled = [x for r, x in enumerate(outcomes) if r != 1]  # (1: let go into the ruins)
    assert all(isinstance(x, RankStalled) for x in stalled), outcomes
    for exc in stalled:
        assert exc.ranks == [1]
        status, line = describe(exc)
        assert status == 3
        assert line.startswith("compensate: error: rank(s) 1 did not answer for 1 s (")
        assert "nothing written" in line and "\n" not in line
    assert seconds < 20  # one deadline (and the thread ranks' own start), not a hang


def test_a_slow_rank_within_the_deadline_changes_nothing(program):
    trace, platform = program
    release = threading.Event()
    slow = ranks(trace, platform, 1, "slow", release, timeout=TIMEOUT * 4)
    ref = ranks(trace, platform, None, "", release, timeout=None)
    assert not any(isinstance(x, RankStalled) for x in slow)
    for a, b in zip(slow, ref, strict=True):
        for loc, ev in a.own.events.items():
            assert ev.time.tolist() == b.own.events[loc].time.tolist()


def test_mpiexec_a_stopped_rank_ends_the_job(tmp_path):
    exe = mpiexec()
    out = tmp_path / "out.trace"
    proc = subprocess.run(
        [exe, "-n", "2", sys.executable, "-m", "tests.parallel.stop_rank", "1",
         str(CASES / "r2_m1_a1.trace"), str(out), "--overhead", "100ns",
         "--rank-timeout", "2"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 3, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("compensate:")]
    assert lines == ["compensate: error: rank(s) 1 did not answer for 2 s (allgather): "
                     "stopped or hung; ending the job, nothing written (--rank-timeout "
                     "SECONDS, 0: wait forever)"], proc.stderr
    assert list(tmp_path.iterdir()) == []
