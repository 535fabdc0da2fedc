"""R8, thread synchronisation (compensate/engine/kinds/threads.py): properties on
random OpenMP-style traces (hypothesis) and the bundled real archives with threads."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.platform import Platform
from compensate.verify import verify

from ..conftest import CASES, TRACES, read_bundled

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _openmp_text(draw) -> str:
    """A measured trace of one process: ``n`` threads run parallel regions (fork,
    team begin, work, up to two barriers, a critical section taken in a random order,
    team end, join)."""
    n = draw(st.integers(2, 4))
    t = [1000] * n
    lines = []
    order = 0

    def rec(loc, time, text):
        lines.append((time, loc, len(lines), f"{time} {loc} {text}"))
        t[loc] = time

    for _ in range(draw(st.integers(1, 4))):
        rec(0, t[0] + draw(st.integers(1, 300)), "ThreadFork model=OPENMP")
        fork = t[0]
        rec(0, fork + draw(st.integers(1, 50)), "ThreadTeamBegin thread_team=0")
        for w in range(1, n):
            rec(w, max(t[w], fork) + draw(st.integers(1, 400)), "ThreadTeamBegin thread_team=0")
        for w in range(n):
            rec(w, t[w] + draw(st.integers(0, 500)), "Enter region=1")
            rec(w, t[w] + draw(st.integers(1, 500)), "Leave region=1")
        for _ in range(draw(st.integers(0, 2))):  # OpenMP barriers: leave after the last enter
            for w in range(n):
                rec(w, t[w] + draw(st.integers(1, 400)), "Enter region=3")
            last = max(t)
            for w in range(n):
                rec(w, last + draw(st.integers(1, 200)), "Leave region=3")
        if draw(st.booleans()):  # a critical section, taken in a random order
            released = 0
            for w in draw(st.permutations(range(n))):
                order += 1
                rec(w, t[w] + draw(st.integers(1, 300)), "Enter region=2")
                rec(w, max(t[w], released) + draw(st.integers(1, 100)),
                    f"ThreadAcquireLock model=OPENMP lock_id=0 acquisition_order={order}")
                rec(w, t[w] + draw(st.integers(1, 200)),
                    f"ThreadReleaseLock model=OPENMP lock_id=0 acquisition_order={order}")
                released = t[w]
                rec(w, t[w] + draw(st.integers(1, 100)), "Leave region=2")
        for w in range(n):
            rec(w, t[w] + draw(st.integers(1, 300)), "ThreadTeamEnd thread_team=0")
        rec(0, max(t) + draw(st.integers(1, 100)), "ThreadJoin model=OPENMP")
    head = ["compensate-trace 1", "timer_resolution 1000000000"]
    head += [f"location {w} group=0" for w in range(n)]
    head += ['region 1 "work"', 'region 2 "!$omp critical"',
             'region 3 "!$omp barrier" role=BARRIER paradigm=OPENMP',
             f'comm 0 "team" {",".join(str(w) for w in range(n))}', "events"]
    return "\n".join(head + [x[3] for x in sorted(lines)]) + "\n"


@st.composite
def openmp_traces(draw):
    return _openmp_text(draw)


def _read(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("omp") / "t.trace"
    path.write_text(text)
    return read_text(str(path))


@SETTINGS
@given(openmp_traces(), st.sampled_from(["lower", "upper"]), st.floats(0.0, 2e-7))
def test_thread_dependencies_hold(tmp_path_factory, text, bound, overhead):
    """After compensation no team member begins before its fork, no join precedes a
    member's team end, no lock is acquired before the previous release, no member
    leaves a barrier before the last one entered (checked directly and by the verifier)."""
    trace = _read(text, tmp_path_factory)
    m = match(trace)
    assert verify(trace, m).ok  # the generator makes valid traces
    assert m.threads.counts()["fork"] == m.threads.counts()["join"] * (
        len(trace.events) - 1)
    result = compensate(trace, Platform(overhead), EngineOptions(bound=bound), m)
    check = verify(result.trace, m)
    assert check.ok and check.threads == 0, check.examples
    assert barrier_violations(result.trace, m) == 0


def barrier_violations(trace, m) -> int:
    """Members that left an OpenMP barrier before its last member entered (counted
    here, independently of the verifier)."""
    bad = 0
    for inst in m.threads.barriers:
        time = [trace.events[loc].time for loc in inst.locs]
        last = max(t[b] for t, b in zip(time, inst.begin_idx, strict=True))
        bad += sum(t[e] < last for t, e in zip(time, inst.end_idx, strict=True))
    return bad


@SETTINGS
@given(openmp_traces(), st.sampled_from(["lower", "upper"]))
def test_no_overhead_is_identity(tmp_path_factory, text, bound):
    """With nothing to remove, both bounds give the measured thread records back."""
    trace = _read(text, tmp_path_factory)
    result = compensate(trace, Platform(0.0), EngineOptions(bound, "per-process"))
    for loc, ev in trace.events.items():
        assert np.array_equal(result.trace.events[loc].time, ev.time)


THREADED = ["jacobi-mpi-openmp-cuda", "jacobi-openmp-tasks-offload"]


@pytest.mark.parametrize("overhead", [1e-7, 3e-6])
@pytest.mark.parametrize("name", THREADED)
def test_real_archives_keep_thread_order(name, overhead):
    """Issue 17's criteria on the bundled archives: no ThreadTeamBegin before its
    fork, no ThreadTeamEnd after its join, no lock acquired before the previous
    release, no member leaving an OpenMP barrier before the last one entered (each
    checked here directly, not through the verifier)."""
    trace = read_bundled(TRACES / name / "traces.otf2")
    m = match(trace)
    kinds = m.threads.counts()
    assert kinds["fork"] > 0 and kinds["join"] > 0 and kinds["unmatched"] == 0
    assert kinds["barrier"] > 0 and barrier_violations(trace, m) == 0
    for bound in ("lower", "upper"):
        out = compensate(trace, Platform(overhead), EngineOptions(bound=bound), m).trace
        time = {loc: ev.time for loc, ev in out.events.items()}
        bad = [s for s in m.threads.syncs
               if any(time[s.recv[0]][s.recv[1]] <= time[loc][i] for loc, i in s.sends)]
        assert not bad, (bound, bad[:3])
        assert barrier_violations(out, m) == 0
        assert verify(out, m).ok


#: members leaving an OpenMP barrier before its last member entered, compensated
#: with every thread on its own (R1 only, no thread rules), at the lower bound
BEFORE = {("jacobi-mpi-openmp-cuda", 1e-7): 44, ("jacobi-mpi-openmp-cuda", 3e-6): 49,
          ("jacobi-openmp-tasks-offload", 1e-7): 3,
          ("jacobi-openmp-tasks-offload", 3e-6): 75}


@pytest.mark.parametrize("overhead", [1e-7, 3e-6])
@pytest.mark.parametrize("name", THREADED)
def test_real_archives_barriers_break_without_r8(name, overhead):
    """The baseline the barrier rule fixes: compensated without thread dependencies,
    members leave barriers before the last one entered, and the verifier says so."""
    import dataclasses

    from compensate.matching.threads import ThreadDeps
    trace = read_bundled(TRACES / name / "traces.otf2")
    m = match(trace)
    alone = dataclasses.replace(m, threads=ThreadDeps())
    out = compensate(trace, Platform(overhead), EngineOptions(bound="lower"), alone).trace
    assert barrier_violations(out, m) == BEFORE[(name, overhead)]
    assert verify(out, m).threads >= BEFORE[(name, overhead)]


@pytest.mark.parametrize("segment_records", [40, 10**6])
def test_streamed_threaded_archive_is_the_in_memory_result(segment_records):
    """A parallel region (fork to join) is never cut into two stream segments and a
    lock hand-over across a cut is carried (compensate/engine/carry.py), so the
    streamed times and links equal the in-memory ones."""
    from .test_stream import both
    trace = read_bundled(TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2")
    ref, got, res = both(trace, Platform(1e-7), segment_records=segment_records,
                         chunk_records=7)
    assert res.verification.ok
    for loc, ev in got.items():
        np.testing.assert_array_equal(ev.time, ref.trace.events[loc].time)
    assert res.counts["threads"] == ref.matching.counts()["threads"]
    if segment_records == 40:
        assert res.segments >= 2


def test_fitted_without_a_network_fit_keeps_the_fitted_link_latency():
    """``--bound fitted`` on a trace with no MPI transfer to fit falls back to the
    lower bound for messages, but R8's links keep their own fitted latency (it needs
    no network fit): in the lock case, acquisition 3 did not wait and takes the 100
    ticks acquisition 2 was observed to take, 1200 + 100, not the lower bound's
    1201 (tests/cases/r8_lock.trace)."""
    import compensate as c
    trace = read_text(str(CASES / "r8_lock.trace"))
    got = {}
    for bound in ("lower", "fitted"):
        result = c.compensate(trace, bound=bound, overhead="100ns")
        got[bound] = result.trace.events[0].time.tolist()[-3:]
    assert got == {"lower": [1201, 1201, 1201], "fitted": [1300, 1300, 1300]}


_EZ_LOCK = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=0
region 1 "pthread_mutex_lock"
region 2 "pthread_mutex_unlock"
events
100 0 Enter region=1 object=16
110 0 Leave region=1
150 0 Enter region=2 object=16
160 0 Leave region=2
120 1 Enter region=1 object=16
200 1 Leave region=1
230 1 Enter region=2 object=16
240 1 Leave region=2
300 1 Enter region=1 object=16
310 1 Leave region=1
"""


@pytest.mark.parametrize("bound", ["lower", "upper"])
def test_eztrace_mutex_hand_off_by_hand(tmp_path, bound):
    """EZTrace's mutex at 0x10, O = 10 ns per record. Location 0 runs alone:
    100, 100, 130, 130. Location 1 asked (Enter at 120, free at 130) before location
    0's unlock Enter was free (150 + 10): it waited, the hand-off latency is observed,
    δ = 200 - 150 - 10 = 40, so its Leave is at 130 + 40 = 170 (its own records alone
    would put it at 190), under both bounds; its third acquisition follows its own
    release (no link) and keeps its gaps: 190, 190, 240, 240."""
    (tmp_path / "t.trace").write_text(_EZ_LOCK)
    trace = read_text(str(tmp_path / "t.trace"))
    m = match(trace)
    assert [(s.kind, s.recv, s.sends) for s in m.threads.syncs] == [
        ("lock", (1, 1), [(0, 2)])]
    out = compensate(trace, Platform(10e-9), EngineOptions(bound), m).trace
    assert out.events[0].time.tolist() == [100, 100, 130, 130]
    assert out.events[1].time.tolist() == [120, 170, 190, 190, 240, 240]
    assert verify(out, m).ok


_EZ_BARRIER = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=0
region 1 "pthread_barrier_wait"
events
100 0 Enter region=1 object=32
260 0 Leave region=1
200 1 Enter region=1 object=32
210 1 Leave region=1
"""


@pytest.mark.parametrize("exit_rule", ["uniform", "per-process"])
def test_pthread_barrier_keeps_each_members_wake_up(tmp_path, exit_rule):
    """A pthread barrier at 0x20, O = 1 ns: location 1 arrives last (200) and leaves
    at once (210); location 0, waiting since 100, is woken 50 ns later (260). Each
    member keeps its own time from the last arrival (eq. 13) whatever
    --collective-exit says: location 0 leaves at 200 + (260 - 200 - 1) = 259,
    location 1 at 200 + 9 = 209 (a common exit would put location 0 at 209, taking out
    a wake-up the untraced run has too)."""
    (tmp_path / "t.trace").write_text(_EZ_BARRIER)
    trace = read_text(str(tmp_path / "t.trace"))
    m = match(trace)
    assert len(m.threads.barriers) == 1
    out = compensate(trace, Platform(1e-9), EngineOptions("lower", exit_rule), m).trace
    assert out.events[0].time.tolist() == [100, 259]
    assert out.events[1].time.tolist() == [200, 209]


@st.composite
def eztrace_pthread_texts(draw):
    """EZTrace-style Pthreads of one process: the main thread (location 0) creates
    ``n`` threads, each takes the mutex at 0x10 a few times (a random holder order,
    each acquisition after the previous release) and meets the others at the
    barrier at 0x20; the main thread joins them."""
    n = draw(st.integers(2, 3))
    t = [0] * (n + 1)
    lines = []

    def rec(loc, gap, text):
        t[loc] += gap
        lines.append((t[loc], loc, len(lines), f"{t[loc]} {loc} {text}"))

    rec(0, 1, "ThreadBegin sequence_count=0")
    for w in range(1, n + 1):
        rec(0, draw(st.integers(1, 50)), "Enter region=3")
        t[w] = t[0] + draw(st.integers(1, 200))
        rec(w, 0, f"ThreadBegin sequence_count={w}")
        rec(0, draw(st.integers(1, 50)), "Leave region=3")
    released = 0
    for _ in range(draw(st.integers(1, 3))):
        for w in draw(st.permutations(range(1, n + 1))):
            rec(w, draw(st.integers(1, 300)), "Enter region=1 object=16")
            t[w] = max(t[w], released) + draw(st.integers(1, 100))
            rec(w, 0, "Leave region=1")
            rec(w, draw(st.integers(1, 100)), "Enter region=2 object=16")
            released = t[w]
            rec(w, draw(st.integers(1, 50)), "Leave region=2")
        for w in range(1, n + 1):
            rec(w, draw(st.integers(1, 100)), "Enter region=5 object=32")
        last = max(t[1:])
        for w in range(1, n + 1):
            t[w] = last + draw(st.integers(1, 100))
            rec(w, 0, "Leave region=5")
    rec(0, draw(st.integers(1, 50)), "Enter region=4")
    for w in range(1, n + 1):
        rec(w, draw(st.integers(1, 50)), f"ThreadEnd sequence_count={w}")
    t[0] = max(t) + draw(st.integers(1, 100))
    rec(0, 0, "Leave region=4")
    head = ["compensate-trace 1", "timer_resolution 1000000000"]
    head += [f"location {w} group=0" for w in range(n + 1)]
    head += ['region 1 "pthread_mutex_lock"', 'region 2 "pthread_mutex_unlock"',
             'region 3 "pthread_create"', 'region 4 "pthread_join"',
             'region 5 "pthread_barrier_wait"', "events"]
    return "\n".join(head + [x[3] for x in sorted(lines)]) + "\n"


@SETTINGS
@given(eztrace_pthread_texts(), st.sampled_from(["lower", "upper"]), st.floats(0.0, 3e-7))
def test_eztrace_pthread_links_hold(tmp_path_factory, text, bound, overhead):
    """After compensation no acquisition of the mutex comes at or before the previous
    holder's release, no thread leaves the barrier before the last one entered, no
    thread begins before the create paired with it and the join returns after the
    end paired with it (the verifier, and the hand-offs counted directly)."""
    trace = _read(text, tmp_path_factory)
    m = match(trace)
    c = m.threads.counts()
    assert c["unmatched"] == 0 and c["local_locks"] == 0 and c["barrier"] > 0
    assert verify(trace, m).ok
    out = compensate(trace, Platform(overhead), EngineOptions(bound=bound), m).trace
    check = verify(out, m)
    assert check.ok and check.threads == 0, check.examples
    assert barrier_violations(out, m) == 0
    for s in m.threads.syncs:
        (loc, i), (s_loc, s_i) = s.recv, s.sends[0]
        assert out.events[loc].time[i] > out.events[s_loc].time[s_i]
