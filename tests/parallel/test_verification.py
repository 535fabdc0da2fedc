"""Each rank verifies the dependencies it owns (compensate/parallel/verification.py):
on outputs broken on purpose (so that every family of check finds violations on
dependencies that cross ranks), the per-rank findings reduced equal the
one-process verification — counts, the first ten examples in the one-process
order, the records carried as local only — at P = 2 and 3; a rank reads of the
other ranks' times only the records its checks need; and a hand trace whose
receives come before their sends is reported by the command exactly as one
process reports it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compensate.cli.compensate import main
from compensate.matching import match
from compensate.parallel.ownership import owners
from compensate.parallel.verification import UNREAD, remote_reads, verify_rank
from compensate.simulate import simulate
from compensate.verify import verify
from tests import pipelines
from tests.pipelines import run_pipeline
from tests.threadranks import run_threads

from ..conftest import TRACES, read_bundled
from .test_command import _thread_command

#: point-to-point (synchronous sends), collectives (nonblocking, rooted), RMA
#: (fences, locks), partitioned, hybrid (threads, locks)
PROGRAMS = ["issend", "nonblocking_rooted", "rma_fence", "rma_lock_counter", "partitioned",
            "hybrid_halo"]


def broken(trace, seed: int, moved: float = 0.0):
    """``trace`` with each location shifted by up to half the span either
    way (violations of the dependencies between locations, the kind a rank checks
    with another rank's times) and a fraction ``moved`` of its records moved earlier
    (order violations too)."""
    rng = np.random.default_rng(seed)
    lo = min(int(ev.time[0]) for ev in trace.events.values() if len(ev))
    hi = max(int(ev.time[-1]) for ev in trace.events.values() if len(ev))
    quarter = max((hi - lo) // 2, 1)
    times = {}
    for loc, ev in trace.events.items():
        t = ev.time + rng.integers(-quarter, quarter)
        hit = rng.random(len(t)) < moved
        t[hit] -= rng.integers(0, quarter, int(hit.sum()))
        times[loc] = t
    return trace.with_times(times)


def per_rank(measured, out, matching, size):
    """Every rank's (verified trace, verification) on ``size`` thread ranks, each
    given only its own locations' times of ``out``."""
    owner = owners(measured.definitions, list(measured.events), size)

    def body(t):
        mine = {loc: out.events[loc].time for loc in out.events if owner[loc] == t.rank}
        return verify_rank(t, owner, measured, matching, mine)

    return owner, run_threads(size, body)


@pytest.fixture(scope="module", params=PROGRAMS)
def case(request):
    sim = simulate(request.param, ranks=4, seed=3, iterations=3)
    result, matching, _, _ = run_pipeline(sim.measured, sim.platform, "lower", "uniform", None)
    return sim.measured, broken(result.trace, 7), matching


def test_reduced_verification_equals_one_process(case):
    measured, out, matching = case
    one = verify(out, matching, measured=measured)
    assert one.violations >= 8  # of dependencies across locations, most across ranks
    for size in (2, 3):
        owner, ranks = per_rank(measured, out, matching, size)
        assert ranks[0][1].to_dict() == one.to_dict(), size
        assert all(v is None for _, v in ranks[1:])
        # what a rank read of the others' times: only what its checks need, each as
        # its owner rounded it; everything else UNREAD
        for rank, (checked, _) in enumerate(ranks):
            own = {loc for loc in owner if owner[loc] == rank}
            reads = remote_reads(matching, own)
            for loc, ev in checked.events.items():
                if loc in own:
                    np.testing.assert_array_equal(ev.time, out.events[loc].time)
                    continue
                known = np.flatnonzero(ev.time != UNREAD)
                want = reads.get(loc, np.zeros(0, dtype=np.int64))
                if rank == 0 and len(ev):  # the summary's span
                    want = np.union1d(want, [0, len(ev) - 1])
                assert set(known.tolist()) <= set(np.asarray(want).tolist())
                np.testing.assert_array_equal(ev.time[known], out.events[loc].time[known])


def test_a_bundled_archive_verified_by_its_owners():
    path = TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2"
    if not path.exists():
        pytest.skip(f"{path} not available")
    trace = read_bundled(path)
    matching = match(trace)
    out = broken(trace, 11, moved=0.01)
    one = verify(out, matching, measured=trace)
    assert one.violations > 10 and one.carried_local_only
    for size in (2, 3):
        assert per_rank(trace, out, matching, size)[1][0][1].to_dict() == one.to_dict()


#: a receive on rank 1's location 2 before its send (a message, found first), and on
#: rank 0's location 0 a collective exit before location 1's enter (found second):
#: rank order alone would name them the other way round
BAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1
location 2 group=2
region 1 "MPI_Send"
region 2 "MPI_Recv"
region 4 "MPI_Allreduce"
comm 0 "MPI_COMM_WORLD" 0,1,2
comm 1 "pair" 0,1
events
1000 0 Enter region=4
1000 1 Enter region=4
1000 2 Enter region=2
1100 0 MpiCollectiveBegin
1150 0 MpiCollectiveEnd op=ALLREDUCE comm=1 root=- sent=8 received=8
1200 0 Leave region=4
1300 0 Enter region=1
1300 1 MpiCollectiveBegin
1400 1 MpiCollectiveEnd op=ALLREDUCE comm=1 root=- sent=8 received=8
1500 1 Leave region=4
2000 2 MpiRecv sender=0 comm=0 tag=0 bytes=8
2050 2 Leave region=2
2100 0 MpiSend receiver=2 comm=0 tag=0 bytes=8
2200 0 Leave region=1
"""


@pytest.mark.parametrize("ranks", [2, 3])
def test_violations_across_ranks_are_reported_as_one_process_reports_them(
        tmp_path, capsys, ranks):
    bad = tmp_path / "bad.trace"
    bad.write_text(BAD)
    args = ["--bound", "none", "--quiet"]
    assert main([str(bad), str(tmp_path / "one.trace"), *args, "--in-memory",
                 "--summary", str(tmp_path / "one.json")]) == 4
    one_err = capsys.readouterr().err
    assert "location 2, record 1: receive not after its send" in one_err
    assert one_err.index("location 2, record 1") < one_err.index("location 0, record 2")
    statuses = _thread_command(tmp_path, [str(bad), str(tmp_path / "par.trace"), *args,
                                          "--summary", str(tmp_path / "par.json")], ranks)
    assert statuses == [4] * ranks
    assert capsys.readouterr().err == one_err
    one, par = (json.loads(Path(tmp_path / f"{x}.json").read_text()) for x in ("one", "par"))
    assert par["verification"] == one["verification"]
    assert one["verification"]["messages"] == 1 and one["verification"]["collectives"] == 1
    assert not (tmp_path / "par.trace").exists()


def _late_violations(together: bool) -> str:
    """:data:`BAD` after 12 rounds of two correct messages to location 1: its
    violations lie in a later segment of a small-segment stream. ``together``: its
    receive and send are moved inside the collective, where no cut can fall, so
    that both violations lie in one segment; else a small-segment stream finds
    them in two."""
    head, events = BAD.split("events\n")
    if together:
        moved = events.replace("2000 2 MpiRecv", "1350 2 MpiRecv").replace(
            "2100 0 MpiSend", "1360 0 MpiSend").splitlines()
        events = "\n".join(sorted(moved, key=lambda line: int(line.split()[0]))) + "\n"
    rounds = []
    for k in range(12):
        t = 100 + 50 * k
        rounds += [f"{t} 0 Enter region=1", f"{t} 1 Enter region=2", f"{t} 2 Enter region=1",
                   f"{t + 10} 0 MpiSend receiver=1 comm=0 tag=0 bytes=8",
                   f"{t + 10} 2 MpiSend receiver=1 comm=0 tag=1 bytes=8",
                   f"{t + 20} 0 Leave region=1", f"{t + 20} 2 Leave region=1",
                   f"{t + 30} 1 MpiRecv sender=0 comm=0 tag=0 bytes=8",
                   f"{t + 31} 1 MpiRecv sender=2 comm=0 tag=1 bytes=8",
                   f"{t + 40} 1 Leave region=2"]
    return head + "events\n" + "\n".join(rounds) + "\n" + events


@pytest.mark.parametrize("together", [True, False], ids=["one-segment", "two-segments"])
def test_violations_in_a_later_segment_name_their_records_in_the_whole_trace(
        tmp_path, capsys, together):
    """A stream cut into small segments, in one process and on 2 and 3 ranks:
    the violations are found in a segment with context records in front, and the
    line names them as the whole trace numbers them, as in memory (it named the
    segment's records). Where they lie in two segments, the stream writes nothing
    from the first failing one on but verifies the rest: the line counts and names
    what memory's does, each check's examples before the next check's (it stopped
    at the first, and counted 1). A copy's clocks
    are not aligned on any path (the stream aligned them, and found 25 violations
    where memory finds 2)."""
    bad = tmp_path / "bad.trace"
    bad.write_text(_late_violations(together))
    args = ["--bound", "none", "--quiet"]
    assert main([str(bad), str(tmp_path / "one.trace"), *args, "--in-memory"]) == 4
    one_err = capsys.readouterr().err
    assert "2 happened-before violations (location 2, record 37: receive not after its " \
        "send (location 0, record 41); location 0, record 38: collective exit before the " \
        "enter of location 1, record 49)" in one_err
    for size in ("8", "16", None):
        extra = ["--segment-records", size] if size else []
        assert main([str(bad), str(tmp_path / "s.trace"), *args, *extra]) == 4
        assert capsys.readouterr().err == one_err, size
    for ranks in (2, 3):
        statuses = _thread_command(tmp_path, [str(bad), str(tmp_path / "par.trace"), *args,
                                              "--segment-records", "8"], ranks, streamed=True)
        assert statuses == [4] * ranks
        assert capsys.readouterr().err == one_err, ranks
    assert not any(tmp_path.glob("[sp]*.trace"))


def test_a_rank_failing_while_verifying_stops_every_rank(monkeypatch):
    """A rank whose checks raise (between the exchange's collectives) stops every
    rank at the phase boundary: it raises its own error, the others RankFailed with
    its line; nobody is left waiting in an alltoall."""
    from compensate.parallel import driver, verification

    sim = simulate("ring", ranks=4, seed=1, iterations=1)
    real, seen = verification.verify, {}

    def verify_(trace, matching, measured=None, own=None):
        if 3 in own:  # rank 1 of 2 owns processes 2 and 3
            raise RuntimeError("boom while verifying")
        return real(trace, matching, measured=measured, own=own)

    monkeypatch.setattr(verification, "verify", verify_)

    def body(t):
        try:
            pipelines.run_rank(sim.measured, sim.platform, "lower", "uniform", None, t)
        except Exception as exc:  # noqa: BLE001 - what each rank saw
            seen[t.rank] = exc

    run_threads(2, body)
    assert isinstance(seen[1], RuntimeError)
    assert isinstance(seen[0], driver.RankFailed) and "boom while verifying" in seen[0].line
