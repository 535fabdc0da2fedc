"""EZTrace's Pthread calls as thread links (compensate/matching/pthreads.py): lock
hand-offs by address in measured order, locks that cannot be told left local, the
create/join order statistic, barrier instances; on hand-built traces and on the
bundled EZTrace archives; and a property: every link made is a hand-off the
measured order shows, and a lock whose calls do not alternate gets none."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.formats import read_trace
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.pthreads import match_pthreads

from ..conftest import ROOT

EZ = ROOT / "tests" / "data" / "eztrace"
_REGIONS = ["pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock",
            "pthread_create", "pthread_join", "pthread_barrier_wait", "pthread_spin_lock",
            "pthread_spin_unlock"]
LOCK, UNLOCK, TRY, CREATE, JOIN, BARRIER, SPIN, SPIN_UNLOCK = range(1, 9)


def _trace(tmp_path, events, locations=3):
    text = ["compensate-trace 1", "timer_resolution 1000000000"]
    text += [f"location {a} group=0" for a in range(locations)]
    text += [f'region {i} "{name}"' for i, name in enumerate(_REGIONS, start=1)]
    text += ["events", *events]
    p = tmp_path / "t.trace"
    p.write_text("\n".join(text) + "\n")
    return read_text(str(p))


def _call(t, loc, region, length=10, obj=None, ret=None):
    extra = f" object={obj}" if obj is not None else ""
    back = f" ret={ret}" if ret is not None else ""
    return [f"{t} {loc} Enter region={region}{extra}",
            f"{t + length} {loc} Leave region={region}{back}"]


def _links(trace, kind="lock"):
    return [(s.kind, s.recv, s.sends) for s in match(trace).threads.syncs if s.kind == kind]


def test_a_mutex_handed_between_threads(tmp_path):
    """Location 0 holds the mutex at 0x10 from 110 to its unlock's Enter at 150;
    location 1 asked at 120 and got it at 200 (Leave): acquisition 2 waits for the
    release, the unlock's Enter (record 2 of location 0). Location 2's mutex 0x20 is
    its own: no link within a location."""
    ev = [*_call(100, 0, LOCK, obj=16), *_call(150, 0, UNLOCK, obj=16),
          *_call(120, 1, LOCK, 80, obj=16), *_call(230, 1, UNLOCK, obj=16),
          *_call(100, 2, LOCK, obj=32), *_call(120, 2, UNLOCK, obj=32),
          *_call(140, 2, LOCK, obj=32), *_call(160, 2, UNLOCK, obj=32)]
    t = _trace(tmp_path, ev)
    assert _links(t) == [("lock", (1, 1), [(0, 2)])]
    assert match(t).threads.counts()["local_locks"] == 0


def test_spinlocks_and_trylocks_that_succeeded(tmp_path):
    """A trylock that returned 0 is an acquisition, one that returned EBUSY is not;
    spinlocks are handed off alike."""
    ev = [*_call(100, 0, TRY, obj=16, ret=0), *_call(150, 0, UNLOCK, obj=16),
          *_call(120, 1, TRY, obj=16, ret=16),  # busy: acquired nothing
          *_call(200, 1, TRY, obj=16, ret=0), *_call(250, 1, UNLOCK, obj=16),
          *_call(300, 0, SPIN, obj=48), *_call(320, 0, SPIN_UNLOCK, obj=48),
          *_call(330, 1, SPIN, 20, obj=48), *_call(360, 1, SPIN_UNLOCK, obj=48)]
    t = _trace(tmp_path, ev)
    assert _links(t) == [("lock", (1, 3), [(0, 2)]), ("lock", (1, 7), [(0, 6)])]


def test_locks_that_cannot_be_told_are_left_local_and_counted(tmp_path):
    """Twice locked by one location without unlock (recursive), an unlock with no
    lock (released inside a condition wait), a trylock without its return value: each
    lock's calls are left local whole, counted in ``local_locks``."""
    ev = [*_call(100, 0, LOCK, obj=16), *_call(120, 0, LOCK, obj=16),
          *_call(140, 0, UNLOCK, obj=16), *_call(160, 0, UNLOCK, obj=16),
          *_call(200, 1, LOCK, obj=32), *_call(220, 1, UNLOCK, obj=32),
          *_call(230, 2, UNLOCK, obj=32), *_call(240, 1, LOCK, obj=32),
          *_call(300, 2, TRY, obj=48), *_call(320, 2, UNLOCK, obj=48),
          *_call(330, 1, LOCK, obj=48), *_call(350, 1, UNLOCK, obj=48)]
    t = _trace(tmp_path, ev)
    assert _links(t) == []
    assert match(t).threads.counts()["local_locks"] == 4 + 4 + 3


def test_create_and_join_by_order_statistic(tmp_path):
    """Threads 1 and 2 begin after the first and second pthread_create Enter in
    time; the first join's Leave after the first ThreadEnd in time (location 2's),
    the second after the second (location 1's)."""
    ev = ["0 0 ThreadBegin sequence_count=0", *_call(10, 0, CREATE), *_call(30, 0, CREATE),
          "25 1 ThreadBegin sequence_count=1", "45 2 ThreadBegin sequence_count=2",
          "300 1 ThreadEnd sequence_count=1", "200 2 ThreadEnd sequence_count=2",
          *_call(100, 0, JOIN, 250), *_call(360, 0, JOIN), "400 0 ThreadEnd sequence_count=0"]
    t = _trace(tmp_path, ev)
    assert _links(t, "create") == [("create", (1, 0), [(0, 1)]), ("create", (2, 0), [(0, 3)])]
    assert _links(t, "end") == [("end", (0, 6), [(2, 1)]), ("end", (0, 8), [(1, 1)])]


def test_threads_not_created_by_a_traced_call_leave_creates_local(tmp_path):
    """Two threads begin but only one create was recorded: which create made which
    thread cannot be told, so no create link; the counts say so."""
    ev = ["0 0 ThreadBegin sequence_count=0", *_call(10, 0, CREATE),
          "25 1 ThreadBegin sequence_count=1", "45 2 ThreadBegin sequence_count=2"]
    t = _trace(tmp_path, ev)
    assert _links(t, "create") == [] and match(t).threads.counts()["unmatched"] == 2


def test_barrier_instances_by_address(tmp_path):
    """Each location's b-th wait on the barrier at 0x40 is instance b; a barrier
    whose waits disagree with what a barrier does (one left before the last entered)
    stays local."""
    ev = [*_call(100, 1, BARRIER, 50, obj=64), *_call(140, 2, BARRIER, 15, obj=64),
          *_call(200, 1, BARRIER, 10, obj=64), *_call(205, 2, BARRIER, 10, obj=64),
          *_call(300, 1, BARRIER, 10, obj=80), *_call(320, 2, BARRIER, 10, obj=80)]
    t = _trace(tmp_path, ev)
    found = match_pthreads(t)
    assert [(b.locs, b.begin_idx, b.end_idx) for b in found.barriers] == [
        ([1, 2], [0, 0], [1, 1]), ([1, 2], [2, 2], [3, 3])]
    assert found.unmatched == 2


def test_bundled_eztrace_archives():
    """mutex/: thread 1 takes the mutex 20 times, then thread 2: one hand-off; the 4
    lock calls of EZTrace's own start-up (two addresses, each locked twice, never
    unlocked) are left local. sync/: mutex, spinlock and barrier of 3 threads.
    trylock/: trylock, spinlock and barrier of 2 threads (read although its ``ret``
    attribute is typed unlike its definition)."""
    m = match(read_trace(str(EZ / "mutex" / "eztrace_log.otf2"))).threads.counts()
    assert (m["lock"], m["create"], m["end"], m["local_locks"], m["unmatched"]) == \
        (1, 2, 2, 4, 0)
    s = match(read_trace(str(EZ / "sync" / "eztrace_log.otf2"))).threads
    c = s.counts()
    assert (c["lock"], c["create"], c["end"], c["barrier"], c["local_locks"],
            c["unmatched"]) == (22, 3, 3, 4, 4, 0)
    assert all(len(b.locs) == 3 for b in s.barriers)
    t = match(read_trace(str(EZ / "trylock" / "eztrace_log.otf2"))).threads.counts()
    assert (t["lock"], t["create"], t["end"], t["barrier"], t["local_locks"]) == \
        (6, 2, 2, 3, 4)  # trylocks that returned 0 (their Leave's ret) and spinlocks


@st.composite
def _schedules(draw):
    """A lock used by up to 3 locations: each holds it for a while in turn (times
    strictly increasing, as a real mutex shows them), and optionally one call but the
    last is dropped or one unlock is moved to another location."""
    n = draw(st.integers(1, 8))
    holders = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(1, 20), min_size=4 * n, max_size=4 * n))
    calls, t = [], 0
    for k, loc in enumerate(holders):
        t += gaps[4 * k]
        calls.append((loc, LOCK, t, gaps[4 * k + 1]))
        t += gaps[4 * k + 1] + gaps[4 * k + 2]
        calls.append((loc, UNLOCK, t, gaps[4 * k + 3]))
        t += gaps[4 * k + 3]
    damage = draw(st.sampled_from(["none", "drop", "move"]))
    if damage == "drop":
        calls.pop(draw(st.integers(0, len(calls) - 2)))  # (the last: still held)
    elif damage == "move":
        j = 2 * draw(st.integers(0, n - 1)) + 1
        loc, r, tt, d = calls[j]
        calls[j] = ((loc + 1) % 3, r, tt, d)
    return holders, calls, damage


@settings(max_examples=60, deadline=None)
@given(_schedules())
def test_links_follow_the_measured_hand_offs(tmp_path_factory, schedule):
    holders, calls, damage = schedule
    ev = [line for loc, r, tt, d in calls for line in _call(tt, loc, r, d, obj=16)]
    t = _trace(tmp_path_factory.mktemp("p"), ev)
    found = match_pthreads(t)
    links = [x for x in found.links if x[0] == "lock"]
    if damage != "none":  # an unmatched call or a foreign unlock: never guessed
        assert links == [] and found.local_locks == len(calls)
        return
    want = sum(1 for a, b in zip(holders, holders[1:], strict=False) if a != b)
    assert len(links) == want and found.local_locks == 0
    for _, (a_loc, a), (r_loc, r) in links:
        acq, rel = t.events[a_loc], t.events[r_loc]
        assert rel.time[r] < acq.time[a]  # the release before the acquisition
        assert r_loc != a_loc


def test_streamed_runs_cut_nowhere_after_the_first_call_and_equal_in_memory(tmp_path):
    """sync/ streamed in segments of 20 records is one segment (the hand-offs span the
    run, compensate.matching.pthreads.cut_steps) and the in-memory output (Score-P's
    mutex calls carry no object and still stream: tests/engine/test_carry.py)."""
    import json

    import numpy as np

    from compensate.cli import main
    anchor = str(EZ / "sync" / "eztrace_log.otf2")
    outs = {}
    for name, extra in (("memory", ["--in-memory"]), ("stream", ["--segment-records", "20"])):
        out = tmp_path / name / "traces.otf2"
        assert main([anchor, str(out), "--overhead", "1us", "--quiet", "--summary",
                     str(tmp_path / f"{name}.json"), *extra]) == 0
        outs[name] = read_trace(str(out))
    assert json.loads((tmp_path / "stream.json").read_text())["segments"]["count"] == 1
    for loc, ev in outs["memory"].events.items():
        np.testing.assert_array_equal(ev.time, outs["stream"].events[loc].time)


@pytest.mark.parametrize("bound", ["lower", "upper"])
def test_the_distributed_run_gives_the_one_process_output(bound):
    """Two processes of EZTrace-style Pthreads (ez_pthreads, 2 ranks), on two thread
    ranks with trimmed views: the one-process output record for record."""
    from compensate.simulate import simulate
    from tests.parallel.test_parity import assert_parity, both
    sim = simulate("ez_pthreads", ranks=2, overhead=1e-6, iterations=6)
    one, par = both(sim.measured, sim.platform, bound)
    assert one[0][1].threads.counts()["lock"] > 0
    assert_parity(one, par)
