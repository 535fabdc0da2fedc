"""Lock links that other thread edges already order (compensate/matching/lock_order.py):
handed from one parallel region to the next, across a barrier, across a Pthread
join and create; not within one region without a barrier between."""

from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.formats.text import read_text
from compensate.matching import match

from ..conftest import CASES


def _write(tmp_path, n, events, name="t.trace"):
    text = ["compensate-trace 1", "timer_resolution 1000000000"]
    text += [f"location {a} group=0" for a in range(n)]
    text += ['region 1 "!$omp barrier" role=BARRIER paradigm=OPENMP',
             f'comm 0 "team" {",".join(map(str, range(n)))}', "events"]
    text += [f"{10 * (k + 1)} {e}" for k, e in enumerate(events)]
    p = tmp_path / name
    p.write_text("\n".join(text) + "\n")
    return read_text(str(p))


def _locks(m):
    return [(s.recv, s.sends[0], s.implied) for s in m.threads.syncs if s.kind == "lock"]


def test_case_handed_across_regions():
    m = match(read_text(str(CASES / "r8_lock_regions.trace")))
    assert _locks(m) == [((1, 3), (0, 4), True)]


def test_within_one_region_not_implied():
    m = match(read_text(str(CASES / "r8_lock.trace")))
    assert [x[2] for x in _locks(m)] == [False, False]


def test_pthread_join_then_create(tmp_path):
    """Thread 1 releases, ends, is joined; thread 2 created afterwards acquires: the
    lock was free. Thread 3, created before the release, is not ordered after it."""
    ev = ["0 ThreadCreate thread_contingent=0 sequence_count=1",
          "0 ThreadCreate thread_contingent=0 sequence_count=3",
          "1 ThreadBegin thread_contingent=0 sequence_count=1",
          "3 ThreadBegin thread_contingent=0 sequence_count=3",
          "1 ThreadAcquireLock model=PTHREAD lock_id=0 acquisition_order=1",
          "1 ThreadReleaseLock model=PTHREAD lock_id=0 acquisition_order=1",
          "3 ThreadAcquireLock model=PTHREAD lock_id=0 acquisition_order=2",
          "3 ThreadReleaseLock model=PTHREAD lock_id=0 acquisition_order=2",
          "1 ThreadEnd thread_contingent=0 sequence_count=1",
          "0 ThreadWait thread_contingent=0 sequence_count=1",
          "0 ThreadCreate thread_contingent=0 sequence_count=2",
          "2 ThreadBegin thread_contingent=0 sequence_count=2",
          "2 ThreadAcquireLock model=PTHREAD lock_id=0 acquisition_order=3",
          "2 ThreadReleaseLock model=PTHREAD lock_id=0 acquisition_order=3"]
    m = match(_write(tmp_path, 4, ev))
    assert sorted(_locks(m)) == [((2, 1), (3, 2), False), ((3, 1), (1, 2), False)]
    ev[6:8] = []  # without thread 3's hold, thread 2 takes it from thread 1
    ev = [e.replace("acquisition_order=3", "acquisition_order=2") for e in ev]
    m = match(_write(tmp_path, 4, ev, "u.trace"))
    assert _locks(m) == [((2, 1), (1, 2), True)]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 3), data=st.data())
def test_implied_iff_a_fork_join_or_barrier_lies_between(tmp_path_factory, n, data):
    """A team of ``n`` threads runs 1-3 parallel regions, each with or without a
    barrier, the master holding the lock between regions: a hand-over between two
    different threads is implied exactly when the release and the acquisition lie in
    different segments (serial part, region before or after its barrier)."""
    holders = st.lists(st.integers(0, n - 1), max_size=3)
    events, segs, order = [], [], [0]

    def hold(t, seg):
        order[0] += 1
        segs.append((t, seg))
        events.extend([f"{t} ThreadAcquireLock model=OPENMP lock_id=7 "
                       f"acquisition_order={order[0]}",
                       f"{t} ThreadReleaseLock model=OPENMP lock_id=7 "
                       f"acquisition_order={order[0]}"])

    for r in range(data.draw(st.integers(1, 3))):
        for _ in data.draw(st.lists(st.just(0), max_size=2)):
            hold(0, ("serial", r))
        events += ["0 ThreadFork model=OPENMP"]
        events += [f"{t} ThreadTeamBegin thread_team=0" for t in range(n)]
        for t in data.draw(holders):
            hold(t, (r, 0))
        if data.draw(st.booleans()):
            events += [f"{t} Enter region=1" for t in range(n)]
            events += [f"{t} Leave region=1" for t in range(n)]
            for t in data.draw(holders):
                hold(t, (r, 1))
        events += [f"{t} ThreadTeamEnd thread_team=0" for t in range(n)]
        events += ["0 ThreadJoin model=OPENMP"]
    trace = _write(tmp_path_factory.mktemp("lo"), n, events)
    m = match(trace)
    got = sorted((s.sends[0], s.recv, s.implied) for s in m.threads.syncs
                 if s.kind == "lock")
    expect = [(segs[k - 1][0], segs[k][0], segs[k - 1][1] != segs[k][1])
              for k in range(1, len(segs)) if segs[k - 1][0] != segs[k][0]]
    assert sorted((a[0], b[0], x) for a, b, x in got) == sorted(expect)
