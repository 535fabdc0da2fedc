"""The simulator's thread and stream ops (compensate/simulate/threads.py), each on a
tiny program computed by hand from the measurement model in that module's
docstring: O = 100 ns per record on CPU threads, none on streams; latencies fork
500 ns, join 200, barrier 200, lock 100, create 2000, launch 4000, sync 1000."""

from __future__ import annotations

import numpy as np

from compensate.matching import match
from compensate.model import ACCELERATOR_STREAM, CPU_THREAD, KIND_NAMES, Trace
from compensate.platform import Platform
from compensate.simulate import hybrid as H
from compensate.simulate import programs as P
from compensate.simulate import run_program
from compensate.verify import verify

W = 1 << 32  # the first extra location of rank 0


def tiny(ops: list[tuple], threads: list[tuple]):
    platform = Platform(100e-9, {}, np.array([64.0]), np.array([6.4e-9]))
    return run_program(P.Program("tiny", [ops], {}, threads), platform)


def times(trace: Trace, loc: int) -> list[int]:
    return trace.events[loc].time.tolist()


def kinds(trace: Trace, loc: int) -> str:
    d = trace.definitions
    ev = trace.events[loc]
    return " ".join(KIND_NAMES[k] + (f"({d.regions[r]})" if r >= 0 else "")
                    for k, r in zip(ev.kind.tolist(), ev.region.tolist(), strict=True))


def test_openmp_fork_barrier_critical_join():
    master = [H.omp_fork(2), P.call("a", 1e-6), H.omp_barrier(), H.omp_critical(5e-7),
              H.omp_end()]
    worker = [H.omp_begin(), P.call("a", 3e-6), H.omp_barrier(), P.compute(2e-7),
              H.omp_critical(5e-7), H.omp_end()]
    res = tiny(master, [(0, CPU_THREAD, worker)])
    m, t = res.measured, res.truth
    assert kinds(m, 0) == (
        "ProgramBegin Enter(main) ThreadFork ThreadTeamBegin Enter(!$omp parallel) Enter(a) "
        "Leave(a) Enter(!$omp implicit barrier) Leave(!$omp implicit barrier) "
        "Enter(!$omp critical) ThreadAcquireLock Enter(!$omp critical sblock) "
        "Leave(!$omp critical sblock) ThreadReleaseLock Leave(!$omp critical) "
        "Leave(!$omp parallel) ThreadTeamEnd ThreadJoin Leave(main) ProgramEnd")
    assert kinds(m, W).startswith("ThreadTeamBegin Enter(!$omp parallel) Enter(a)")
    # measured: the fork is free at 300, the worker begins at 300 + 500; the barrier
    # ends 200 after the later arrival (the worker's, ready at 4300); the master asks
    # for the lock first (4700) and releases it at 5600, the worker (asking at 4900)
    # gets it at 5600 + 100; the join is 200 after the worker's TeamEnd + O (6900)
    assert times(m, 0) == [0, 100, 200, 300, 400, 500, 1600, 1700, 4500, 4600, 4700, 4800,
                           5400, 5500, 5600, 5700, 5800, 7100, 7200, 7300]
    assert times(m, W) == [800, 900, 1000, 4100, 4200, 4500, 4800, 5700, 5800, 6400, 6500,
                           6600, 6700, 6800]
    assert times(t, 0) == [0, 0, 0, 0, 0, 0, 1000, 1000, 3700, 3700, 3700, 3700, 4200, 4200,
                           4200, 4200, 4200, 5000, 5000, 5000]
    assert times(t, W) == [500, 500, 500, 3500, 3500, 3700, 3900, 4300, 4300, 4800, 4800,
                           4800, 4800, 4800]
    acquire = [p for p in m.events[W].payload if p and "acquisition_order" in p]
    assert acquire == [{"model": "OPENMP", "lock_id": "0", "acquisition_order": "2"}] * 2
    d = m.definitions
    assert d.locations[W].type == CPU_THREAD and d.process_of(W) == 0
    assert d.comms[1].members == (0, W)
    assert m.events[0].payload[3] == {"thread_team": "1"}
    assert match(m).threads.counts() == {"fork": 1, "join": 1, "lock": 1, "create": 0,
                                         "end": 0, "barrier": 1, "task": 0, "taskwait": 0,
                                         "unmatched": 0, "local_locks": 0}


def test_pthreads_create_mutex_join():
    master = [H.pthread_create(1), P.call("m", 1e-6), H.mutex(0, 5e-7), H.pthread_join(1)]
    thread = [H.pthread_begin(1), H.mutex(0, 5e-7), P.call("w", 1e-6), H.pthread_end(1)]
    res = tiny(master, [(0, CPU_THREAD, thread)])
    m, t = res.measured, res.truth
    assert kinds(m, W) == (
        "ThreadBegin Enter(pthread_mutex_lock) ThreadAcquireLock Leave(pthread_mutex_lock) "
        "Enter(pthread_mutex_unlock) ThreadReleaseLock Leave(pthread_mutex_unlock) Enter(w) "
        "Leave(w) ThreadEnd")
    # measured: created at 400, the thread begins 2000 later; the master takes the
    # mutex (asked at 1800) and releases it at 2700, the thread (asked at 2600) gets
    # it at 2800; the join returns 200 after the thread's end + O (5100)
    assert times(m, 0) == [0, 100, 200, 300, 400, 500, 1600, 1700, 1800, 1900, 2500, 2600,
                           2700, 2800, 5300, 5400, 5500, 5600]
    assert times(m, W) == [2400, 2500, 2800, 2900, 3500, 3600, 3700, 3800, 4900, 5000]
    assert times(t, 0) == [0, 0, 0, 0, 0, 0, 1000, 1000, 1000, 1000, 1500, 1500, 1500,
                           1500, 3700, 3700, 3700, 3700]
    assert times(t, W) == [2000, 2000, 2000, 2000, 2500, 2500, 2500, 2500, 3500, 3500]
    assert m.events[W].payload[0] == {"thread_contingent": "1", "sequence_count": "1"}
    counts = match(m).threads.counts()
    assert (counts["create"], counts["end"], counts["lock"]) == (1, 1, 1)


def test_gpu_launch_and_synchronize():
    host = [H.launch("k", 5e-6, 1), P.call("h", 1e-6), H.gpu_sync([1]),
            H.launch("k", 1e-6, 1), P.call("h", 8e-6), H.gpu_sync([1])]
    res = tiny(host, [(0, ACCELERATOR_STREAM, [])])
    m, t = res.measured, res.truth
    # measured: the launch's parameter record is free at 400, the idle stream starts
    # 4000 later and runs 5000 (no overhead on the stream); the first synchronize
    # waits until 9400 + 1000; the second kernel starts 4000 after its launch (10700)
    # and has ended long before the second synchronize (no wait)
    assert times(m, 0) == [0, 100, 200, 300, 400, 500, 1600, 1700, 10400, 10500, 10600,
                           10700, 10800, 18900, 19000, 19100, 19200, 19300]
    assert times(m, W) == [4400, 4400, 9400, 14700, 14700, 15700]
    assert times(t, 0) == [0, 0, 0, 0, 0, 0, 1000, 1000, 10000, 10000, 10000, 10000, 10000,
                           18000, 18000, 18000, 18000, 18000]
    assert times(t, W) == [4000, 4000, 9000, 14000, 14000, 15000]
    assert kinds(m, W) == " ".join(["Enter(k) ParameterUnsignedInt Leave(k)"] * 2)
    d = m.definitions
    assert d.locations[W].type == ACCELERATOR_STREAM and d.process_of(W) == 0
    assert m.events[0].payload[3] == m.events[W].payload[1]  # the same callsite id
    deps = match(m).devices.counts()
    assert deps == {"launch": 2, "synchronize": 2, "unmatched": 0}
    assert verify(m, match(m)).ok and verify(t, match(t)).ok


def test_lock_order_replayed_in_truth():
    """The measured run decides who gets the lock: the worker, asking at 1300 (begin
    800, two records, 300 of work) before the master (1500, after nine records);
    the truth run keeps that order although without overhead the master asks first
    (300, the worker at 800)."""
    master = [H.omp_fork(2), P.call("x", 1e-7), P.call("x", 1e-7), P.call("x", 1e-7),
              H.omp_critical(1e-7), H.omp_end()]
    worker = [H.omp_begin(), P.compute(3e-7), H.omp_critical(1e-7), H.omp_end()]
    res = tiny(master, [(0, CPU_THREAD, worker)])
    for trace in (res.measured, res.truth):
        orders = [p["acquisition_order"] for p in trace.events[W].payload
                  if p and "acquisition_order" in p]
        assert orders == ["1", "1"]
    assert res.measured.events[W].payload == res.truth.events[W].payload


def test_eztrace_create_mutex_join():
    """EZTrace's records (no Thread* record but ThreadBegin/End; the mutex address on
    the Enters). Measured: created inside the create call at 400, the thread begins
    2000 later; the master takes the mutex at 1800 and releases it at 2500 (its
    unlock's Enter + O), the thread asked at 2600 and gets it then; the join returns
    200 after the thread's end + O (4700). Truth: the same with O = 0."""
    master = [H.ez_begin(0), H.ez_create(1), P.call("m", 1e-6), H.ez_mutex(16, 5e-7),
              H.ez_join(1), H.ez_end(0)]
    thread = [H.ez_begin(1, 2e-6), H.ez_mutex(16, 5e-7), P.call("w", 1e-6), H.ez_end(1)]
    res = tiny(master, [(0, CPU_THREAD, thread)])
    m, t = res.measured, res.truth
    assert kinds(m, W) == (
        "ThreadBegin Enter(pthread_mutex_lock) Leave(pthread_mutex_lock) "
        "Enter(pthread_mutex_unlock) Leave(pthread_mutex_unlock) Enter(w) Leave(w) ThreadEnd")
    assert times(m, 0) == [0, 100, 200, 300, 400, 500, 1600, 1700, 1800, 2400, 2500, 2600,
                           4900, 5000, 5100, 5200]
    assert times(m, W) == [2400, 2500, 2600, 3200, 3300, 3400, 4500, 4600]
    assert times(t, 0) == [0, 0, 0, 0, 0, 0, 1000, 1000, 1000, 1500, 1500, 1500, 3700, 3700,
                           3700, 3700]
    assert times(t, W) == [2000, 2000, 2000, 2500, 2500, 2500, 3500, 3500]
    assert m.events[W].request.tolist()[:4] == [-1, 16, -1, 16]
    assert m.events[W].payload[0] == {"sequence_count": "1"}
    links = [(s.kind, s.recv, s.sends) for s in match(m).threads.syncs]
    assert links == [("lock", (W, 2), [(0, 9)]), ("create", (W, 0), [(0, 3)]),
                     ("end", (0, 12), [(W, 7)])]


def test_eztrace_pthreads_program_accuracy(monkeypatch):
    """ez_pthreads (threads begin and end out of creation order, so the create/join
    statistic is weaker than the truth): with the Pthread links most of the dilation
    is removed under both bounds and the output keeps every link (the lower bound
    leaves the create statistic's slack: a thread that began first is paired with the
    first create, so the creator's overhead between the two creates stays in its
    begin); each thread's records alone remove far less. Every lock link the other
    edges imply (a hand-off across a barrier) was free in the truth."""
    import compensate.matching.threads as thread_matching
    from compensate.engine import EngineOptions, compensate
    from compensate.matching.pthreads import PthreadLinks
    from compensate.simulate.validation import accuracy

    platform = Platform(200e-9, {}, np.array([64.0]), np.array([6.4e-9]))
    res = run_program(H.ez_pthreads(seed=1), platform)
    m, t = res.measured, res.truth
    links = match(m)
    c = links.threads.counts()
    assert (c["lock"], c["create"], c["end"], c["barrier"], c["unmatched"],
            c["local_locks"]) == (49, 3, 3, 5, 0, 0)
    removed = {}
    for bound in ("lower", "upper"):
        out = compensate(m, platform, EngineOptions(bound), links).trace
        assert verify(out, links).ok
        removed[bound] = accuracy(t, m, out).removed_total
    assert removed["lower"] > 0.95 and removed["upper"] > 0.9, removed
    implied = [s for s in links.threads.syncs if s.kind == "lock" and s.implied]
    assert implied  # handed across a barrier: free when the next holder asked for it
    for s in implied:
        (loc, i), (r_loc, r) = s.recv, s.sends[0]
        assert t.events[loc].time[i - 1] >= t.events[r_loc].time[r]
    monkeypatch.setattr(thread_matching, "match_pthreads", lambda tr: PthreadLinks())
    alone = compensate(m, platform, EngineOptions("lower"), match(m)).trace
    assert accuracy(t, m, alone).removed_total < 0.5
