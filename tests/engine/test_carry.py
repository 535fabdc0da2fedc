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
