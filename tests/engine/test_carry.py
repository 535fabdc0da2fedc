"""Links across stream segments (compensate/engine/carry.py): a Pthread mutex handed
over and a kernel launched long before the next thread or the GPU takes them, cut
into many small segments, give the in-memory times and links; without carrying the
senders, both links are lost (the test can fail)."""

import numpy as np
import pytest

from compensate.engine.carry import LinkCarry
from compensate.formats.text import read_text
from compensate.platform import Platform

from .test_stream import both


def _text() -> str:
    lines = ["1000 0 Enter region=1",
             "1100 0 ThreadAcquireLock model=PTHREAD lock_id=0 acquisition_order=1",
             "1200 0 ThreadReleaseLock model=PTHREAD lock_id=0 acquisition_order=1",
             "1300 0 Leave region=1",
             "1400 0 Enter region=3",
             "1450 0 ParameterUnsignedInt parameter_ref=0 value=7",
             "1500 0 Leave region=3"]
    for k in range(20):  # both threads work: many records between hand-over and taker
        t = 1600 + 150 * k
        lines += [f"{t} 0 Enter region=2", f"{t} 1 Enter region=2",
                  f"{t + 100} 0 Leave region=2", f"{t + 100} 1 Leave region=2"]
    lines += ["4700 1 Enter region=1",
              "4800 1 ThreadAcquireLock model=PTHREAD lock_id=0 acquisition_order=2",
              "4900 1 ThreadReleaseLock model=PTHREAD lock_id=0 acquisition_order=2",
              "5000 1 Leave region=1",
              "5000 2 Enter region=4",
              "5000 2 ParameterUnsignedInt parameter_ref=0 value=7",
              "5500 2 Leave region=4"]
    head = ["compensate-trace 1", "timer_resolution 1000000000",
            "location 0 group=0", "location 1 group=0",
            'location 2 group=1 name="GPU" type=ACCELERATOR_STREAM group_type=ACCELERATOR '
            "group_creator=0",
            'region 1 "pthread_mutex_lock"', 'region 2 "work"', 'region 3 "cudaLaunchKernel"',
            'region 4 "kernel"', "events"]
    body = sorted(lines, key=lambda x: (int(x.split()[0]), int(x.split()[1])))
    return "\n".join(head + body) + "\n"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("carry") / "t.trace"
    path.write_text(_text())
    return read_text(str(path))


@pytest.mark.parametrize("bound", ["lower", "upper"])
def test_links_survive_small_segments(trace, bound):
    ref, got, res = both(trace, Platform(1e-7), bound, segment_records=8, chunk_records=3)
    assert res.segments >= 5 and res.verification.ok
    want = ref.matching.counts()
    assert want["threads"]["lock"] == 1 and want["devices"]["launch"] == 1
    assert res.counts["threads"] == want["threads"]
    assert res.counts["devices"] == want["devices"]
    for loc, ev in got.items():
        np.testing.assert_array_equal(ev.time, ref.trace.events[loc].time)


def test_without_carrying_the_links_are_lost(trace, monkeypatch):
    monkeypatch.setattr(LinkCarry, "carried", lambda self: {})
    _, _, res = both(trace, Platform(1e-7), segment_records=8, chunk_records=3)
    assert res.counts["threads"]["lock"] == 0
    assert res.counts["devices"]["launch"] == 0 and res.counts["devices"]["unmatched"] == 1


_REGIONS = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=0
region 0 "!$omp parallel"
comm 0 "team" 0,1
events
1000 0 Enter region=0
1100 0 ThreadFork model=OPENMP number_of_requested_threads=2
1200 0 ThreadTeamBegin thread_team=0
1500 1 ThreadTeamBegin thread_team=0
1550 1 ThreadAcquireLock model=OPENMP lock_id=0 acquisition_order=1
1600 1 ThreadReleaseLock model=OPENMP lock_id=0 acquisition_order=1
1700 0 ThreadTeamEnd thread_team=0
1800 1 ThreadTeamEnd thread_team=0
2000 0 ThreadJoin model=OPENMP
2100 0 Leave region=0
2200 0 Enter region=0
2300 0 ThreadFork model=OPENMP number_of_requested_threads=2
2400 0 ThreadTeamBegin thread_team=0
2450 0 ThreadAcquireLock model=OPENMP lock_id=0 acquisition_order=2
2470 0 ThreadReleaseLock model=OPENMP lock_id=0 acquisition_order=2
2500 0 ThreadTeamEnd thread_team=0
2700 1 ThreadTeamBegin thread_team=0
3200 1 ThreadTeamEnd thread_team=0
3400 0 ThreadJoin model=OPENMP
3500 0 Leave region=0
"""


def test_lock_handed_across_regions_and_a_cut(tmp_path, monkeypatch):
    """The worker's release in region 1 and the master's acquisition in region 2 fall
    in different segments; the join that orders them only in the first. The release
    carries the locations it happened before, so the upper bound marks the link
    implied as in memory; without that it keeps the interval (550 ticks later)."""
    path = tmp_path / "r.trace"
    path.write_text(_REGIONS)
    trace = read_text(str(path))
    ref, got, res = both(trace, Platform(1e-7), "upper", segment_records=2, chunk_records=1)
    assert res.segments >= 2 and res.verification.ok
    assert [s.implied for s in ref.matching.threads.syncs if s.kind == "lock"] == [True]
    for loc, ev in got.items():
        np.testing.assert_array_equal(ev.time, ref.trace.events[loc].time)
    monkeypatch.setattr("compensate.pipeline.context.release_reach", lambda *a, **k: {})
    _, lost, _ = both(trace, Platform(1e-7), "upper", segment_records=2, chunk_records=1)
    assert int(lost[0].time[9] - ref.trace.events[0].time[9]) == 550
