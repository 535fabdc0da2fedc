"""The MPI one-sided wait states (:mod:`compensate.analysis.rma`) on the
hand-computed cases tests/cases/r10_*.trace and a PSCW trace below (times in ns),
and in ``compensate report`` before and after compensation."""

import json

import pytest

from compensate.analysis import compare, wait_states
from compensate.api import compensate
from compensate.cli.report import format_comparison, report_dict
from compensate.formats.text import read_text

from ..conftest import CASES
from .test_analysis import _check_report_json


def _waits(state: str, w) -> list[tuple[int, float]]:
    return sorted((loc, round(s * 1e9)) for loc, _, s in w.instances[state])


def test_pscw_early_wait_and_late_complete():
    """r10_pscw: the wait (entered 1300) waits for the complete (entered 2000): 700 ns
    inclusive; the origin's last operation (the put) left at 1900, so 100 ns of it
    are Late Complete and 600 ns the rest of Early Wait. The post (1000) was not
    later than the start (1000): no Late Post."""
    w = wait_states(read_text(CASES / "r10_pscw.trace"))
    assert _waits("rma_early_wait", w) == [(1, 600)]
    assert _waits("rma_late_complete", w) == [(1, 100)]
    assert w.count("rma_late_post") == 0 and w.count("rma_early_transfer") == 0


def test_fence_wait_at_fence_and_early_fence():
    """r10_fence: in the second fence location 1 entered at 1500, location 0 at 1900
    (both enters before either exit: synchronising): 400 ns Wait at Fence, of which
    the put into location 1's window (its call left at 1800) is 1800 - 1500 = 300 ns
    of Early Fence. The first fence was entered at 1000 by both."""
    w = wait_states(read_text(CASES / "r10_fence.trace"))
    assert _waits("rma_early_fence", w) == [(1, 300)]
    assert _waits("rma_wait_fence", w) == [(1, 100)]


def test_lock_competition():
    """r10_lock: location 1 asks for the lock at 1000 while location 0 holds it until
    it enters MPI_Win_unlock at 1300: 300 ns. Location 0's second lock (2000) comes
    after location 1's release (1700): no waiting."""
    w = wait_states(read_text(CASES / "r10_lock.trace"))
    assert _waits("rma_lock_competition", w) == [(1, 300)]


PSCW = """compensate-trace 1
timer_resolution 1000000000
location 0
location 1
region 1 "MPI_Win_post"
region 2 "MPI_Win_wait"
region 3 "MPI_Win_start"
region 4 "MPI_Put"
region 5 "MPI_Win_complete"
comm 0 "W" 0,1
window 0 "win" comm=0
events
100 0 Enter region=3
110 0 RmaGroupSync sync_level=PROCESS win=0 members=1
1200 0 Leave region=3
1300 0 Enter region=4
1310 0 RmaPut win=0 remote=1 bytes=8 matching_id=1
1400 0 Leave region=4
1500 0 Enter region=5
1510 0 RmaGroupSync sync_level=PROCESS|MEMORY win=0 members=1
1600 0 Leave region=5
2000 0 Enter region=3
2010 0 RmaGroupSync sync_level=PROCESS win=0 members=1
2050 0 Leave region=3
2900 0 Enter region=4
2910 0 RmaPut win=0 remote=1 bytes=8 matching_id=2
3100 0 Leave region=4
3200 0 Enter region=5
3210 0 RmaGroupSync sync_level=PROCESS|MEMORY win=0 members=1
3300 0 Leave region=5
1000 1 Enter region=1
1010 1 RmaGroupSync sync_level=PROCESS win=0 members=0
1100 1 Leave region=1
1150 1 Enter region=2
1160 1 RmaGroupSync sync_level=PROCESS|MEMORY win=0 members=0
1700 1 Leave region=2
3000 1 Enter region=1
3010 1 RmaGroupSync sync_level=PROCESS win=0 members=0
3050 1 Leave region=1
3400 1 Enter region=2
3410 1 RmaGroupSync sync_level=PROCESS|MEMORY win=0 members=0
3500 1 Leave region=2
"""


def test_late_post_and_early_transfer(tmp_path):
    """Epoch 1: MPI_Win_start (100-1200) returned after the post was entered (1000):
    it blocked, Late Post 900 ns; the wait (1150) waits for the complete (1500):
    350 ns, after the put left (1400) 100 ns Late Complete. Epoch 2: the start
    (2000-2050) returned before the post (3000), which was entered during the put
    (2900-3100): Early Transfer 100 ns; the complete (3200) came after it: no Late
    Post; the wait (3400) after the complete: no Early Wait."""
    p = tmp_path / "pscw.trace"
    p.write_text(PSCW)
    w = wait_states(read_text(p))
    assert _waits("rma_late_post", w) == [(0, 900)]
    assert _waits("rma_early_transfer", w) == [(0, 100)]
    assert _waits("rma_early_wait", w) == [(1, 250)]
    assert _waits("rma_late_complete", w) == [(1, 100)]


def test_report_shows_rma_states_before_and_after(tmp_path):
    """r10_pscw compensated (lower bound, its platform): the wait is entered at 1000
    and the complete at 1400 (the case's expected times), so Early Wait drops from
    600 to 400 ns and Late Complete (the put left at 1400) from 100 to 0."""
    platform = tmp_path / "platform.json"
    platform.write_text(json.dumps({"event_overhead": 1e-7,
                                    "copy_time": [{"bytes": 1000, "seconds": 5e-8}]}))
    measured = read_text(CASES / "r10_pscw.trace")
    approx = compensate(measured, "lower", platform=platform).trace
    c = compare(measured, approx)
    assert c.measured.total("rma_early_wait") == pytest.approx(600e-9)
    assert c.approximated.total("rma_early_wait") == pytest.approx(400e-9)
    assert c.diff("rma_late_complete") == pytest.approx(100e-9)
    doc = json.loads(json.dumps(report_dict([(measured, c.measured),
                                             (approx, c.approximated)], c), allow_nan=False))
    _check_report_json(doc)
    assert doc["traces"][0]["wait_states"]["rma_early_wait"]["total"] == pytest.approx(600e-9)
    text = format_comparison(c)
    assert "Early Wait" in text and "Late Complete" in text


def test_window_creation_counts_as_wait_at_create(tmp_path):
    """MPI_Win_create entered at 100 by location 0 and at 500 by location 1 (both
    leave after 600): location 0 waits 400 ns at Create; the free, where location 0
    left (800) before location 1 entered (900), did not synchronise."""
    p = tmp_path / "create.trace"
    p.write_text("""compensate-trace 1
timer_resolution 1000000000
location 0
location 1
region 1 "MPI_Win_create"
region 2 "MPI_Win_free"
comm 0 "W" 0,1
window 0 "win" comm=0
events
100 0 Enter region=1
110 0 RmaCollectiveBegin
600 0 RmaWinCreate win=0
610 0 RmaCollectiveEnd op=CREATE_HANDLE sync_level=NONE win=0 root=- sent=0 received=0
620 0 Leave region=1
700 0 Enter region=2
710 0 RmaWinDestroy win=0
720 0 RmaCollectiveBegin
790 0 RmaCollectiveEnd op=DESTROY_HANDLE sync_level=NONE win=0 root=- sent=0 received=0
800 0 Leave region=2
500 1 Enter region=1
510 1 RmaCollectiveBegin
600 1 RmaWinCreate win=0
610 1 RmaCollectiveEnd op=CREATE_HANDLE sync_level=NONE win=0 root=- sent=0 received=0
620 1 Leave region=1
900 1 Enter region=2
910 1 RmaWinDestroy win=0
920 1 RmaCollectiveBegin
990 1 RmaCollectiveEnd op=DESTROY_HANDLE sync_level=NONE win=0 root=- sent=0 received=0
1000 1 Leave region=2
""")
    w = wait_states(read_text(p))
    assert _waits("wait_create", w) == [(0, 400)]
    assert w.count("wait_free") == 0
