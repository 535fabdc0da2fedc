"""The thread invariants (compensate/verify/threads.py) on EZTrace's Pthread links:
an acquisition not after the release before it and a Pthread barrier left before its
last member entered are violations naming the record; an output compensated without
these links (each thread's records alone) breaks them on a real archive, and the
output with them does not."""

from __future__ import annotations

import compensate.matching.threads as thread_matching
from compensate.engine import EngineOptions, compensate
from compensate.formats import read_trace
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.pthreads import PthreadLinks
from compensate.platform import Platform
from compensate.verify import verify

from ..conftest import ROOT

SYNC = ROOT / "tests" / "data" / "eztrace" / "sync" / "eztrace_log.otf2"
TEXT = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=0
region 1 "pthread_mutex_lock"
region 2 "pthread_mutex_unlock"
region 3 "pthread_barrier_wait"
events
100 0 Enter region=1 object=16
110 0 Leave region=1
150 0 Enter region=2 object=16
160 0 Leave region=2
120 1 Enter region=1 object=16
200 1 Leave region=1
230 1 Enter region=2 object=16
240 1 Leave region=2
300 0 Enter region=3 object=32
380 0 Leave region=3
370 1 Enter region=3 object=32
390 1 Leave region=3
"""


def broken(trace, loc, idx, time):
    times = {k: ev.time.copy() for k, ev in trace.events.items()}
    times[loc][idx] = time
    return trace.with_times(times)


def test_an_acquisition_at_its_release_and_an_early_barrier_exit(tmp_path):
    (tmp_path / "t.trace").write_text(TEXT)
    trace = read_text(str(tmp_path / "t.trace"))
    m = match(trace)
    assert verify(trace, m).ok
    v = verify(broken(trace, 1, 1, 150), m)  # acquired at the unlock's Enter
    assert v.threads == 1
    assert "location 1, record 1: thread lock not after location 0, record 2" in v.examples[0]
    v = verify(broken(trace, 0, 5, 369), m)  # left before location 1 entered
    assert v.threads == 1
    assert "location 0, record 5: left a barrier before the last member entered it " \
           "(Pthread barrier)" in v.examples[0]


def test_compensated_without_the_links_inverts_hand_offs(monkeypatch):
    """sync/ at 1 us per record: each thread's records alone (no Pthread link, as
    before these were modelled) move some acquisitions before their releases and some
    barrier exits before the last entry; with the links, none."""
    trace = read_trace(str(SYNC))
    platform = Platform(1e-6)
    with_links = match(trace)
    out = compensate(trace, platform, EngineOptions("lower"), with_links).trace
    assert verify(out, with_links).ok
    monkeypatch.setattr(thread_matching, "match_pthreads", lambda t: PthreadLinks())
    alone = compensate(trace, platform, EngineOptions("lower"), match(trace)).trace
    v = verify(alone, with_links)
    assert v.threads > 0
    assert any("thread lock not after" in e for e in v.examples)
