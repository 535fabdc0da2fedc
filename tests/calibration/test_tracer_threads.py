"""The tracer's Python threads: one buffer and one OTF2 location per thread, and
``threading`` threads and locks as Pthread records (calibration/tracer/threads.py,
buffer.py, archive.py).

The invariants are checked on the archive as the OTF2 reader returns it
(:func:`check_threads`), i.e. against the semantics OTF2 defines for the records,
not against the tracer's own bookkeeping: every location's Enter/Leave nest;
ThreadCreate precedes the ThreadBegin of the same sequence count, which is the
first record of its location, and ThreadEnd (its last record) precedes the
ThreadWait of that count; a lock's acquisitions are numbered 1, 2, ... and each
acquire comes after the release of the previous number. The MPI test traces
``examples/mpi/threads.py`` for real under ``mpiexec -n 2``.
"""

from __future__ import annotations

import _thread
import concurrent.futures
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import otf2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.tracer import buffer as tb
from calibration.tracer import threads
from calibration.tracer.archive import RankData, ThreadData, snapshot, write_archive
from calibration.tracer.functions import make_decorator
from tests.conftest import mpiexec as _mpiexec
from tests.inprocess import run_compensate

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "mpi" / "threads.py"
UNDEF64 = 0xFFFFFFFFFFFFFFFF


# ---------------------------------------------------------------------------------
# reading an archive back and checking OTF2's thread semantics

def read_archive(path: Path) -> dict[int, dict]:
    """{location ref: {"name", "group", "events": [(time, kind name, event)]}}."""
    out: dict[int, dict] = {}
    with otf2.reader.open(str(path)) as trace:
        for loc in trace.definitions.locations:
            out[loc._ref] = {"name": loc.name, "group": loc.group.name, "events": [],
                             "type": str(loc.type)}
        for loc, ev in trace.events:
            out[loc._ref]["events"].append((ev.time, type(ev).__name__, ev))
    return out


def check_threads(locs: dict[int, dict]) -> dict[str, dict]:
    """Assert the thread semantics above; returns per location group the
    sequence counts begun and the acquisition orders per lock."""
    by_group: dict[str, list[dict]] = defaultdict(list)
    for loc in locs.values():
        by_group[loc["group"]].append(loc)
        times = [t for t, _, _ in loc["events"]]
        assert times == sorted(times), loc["name"]
        stack = []
        for _, kind, ev in loc["events"]:
            if kind == "Enter":
                stack.append(ev.region.name)
            elif kind == "Leave":
                assert stack and stack.pop() == ev.region.name, (loc["name"], ev)
        assert not stack, (loc["name"], stack)
    summary = {}
    for group, members in by_group.items():
        creates, begins, ends, waits = {}, {}, {}, {}
        acquires: dict[int, dict[int, tuple]] = defaultdict(dict)
        releases: dict[int, dict[int, tuple]] = defaultdict(dict)
        for loc in members:
            evs = loc["events"]
            begin = None
            for i, (t, kind, ev) in enumerate(evs):
                if kind == "ThreadCreate":
                    assert ev.sequence_count not in creates
                    creates[ev.sequence_count] = t
                elif kind == "ThreadBegin":
                    assert i == 0, f"{loc['name']}: ThreadBegin is not its first record"
                    begin = ev.sequence_count
                    begins[begin] = t
                    assert loc["name"] == f"Pthread thread {begin}"
                elif kind == "ThreadEnd":
                    assert i == len(evs) - 1, f"{loc['name']}: ThreadEnd is not last"
                    assert ev.sequence_count in (begin, UNDEF64)
                    ends[begin] = (t, ev.sequence_count)
                elif kind == "ThreadWait":
                    assert ev.sequence_count not in waits
                    waits[ev.sequence_count] = t
                elif kind in ("ThreadAcquireLock", "ThreadReleaseLock"):
                    assert ev.model == otf2.Paradigm.PTHREAD
                    table = acquires if kind == "ThreadAcquireLock" else releases
                    assert ev.acquisition_order not in table[ev.lock_id]
                    table[ev.lock_id][ev.acquisition_order] = (t, loc["name"], i)
            if loc["name"].startswith("Pthread thread"):
                assert begin is not None and begin in ends, loc["name"]
        assert set(begins) == set(creates), (group, creates, begins)
        for seq, t in begins.items():
            assert creates[seq] <= t, f"{group}: ThreadBegin {seq} before its create"
        for seq, t in waits.items():
            assert seq in ends and ends[seq][1] == seq
            assert ends[seq][0] <= t, f"{group}: ThreadWait {seq} before ThreadEnd"
        for seq, (_, linked) in ends.items():
            assert linked == (seq if seq in waits else UNDEF64)
        orders = {}
        for lock, acq in acquires.items():
            assert sorted(acq) == list(range(1, len(acq) + 1)), (lock, sorted(acq))
            rel = releases[lock]
            for k, (t, name, i) in acq.items():
                if k in rel:  # released by the thread that acquired it, later
                    assert rel[k][1] == name and rel[k][2] > i and rel[k][0] >= t
                if k > 1:
                    assert k - 1 in rel and rel[k - 1][0] <= t, (
                        f"{group}: lock {lock} acquired ({k}) before release ({k - 1})")
            orders[lock] = len(acq)
        summary[group] = {"threads": sorted(begins), "locks": orders}
    return summary


# ---------------------------------------------------------------------------------
# the hooks, without MPI

@pytest.fixture
def recorder():
    rec = tb.Recorder()
    threads.install(rec)
    try:
        yield rec
    finally:
        threads.uninstall()


def _write(rec: tb.Recorder, path: Path, warnings: list | None = None) -> dict:
    write_archive(str(path), [RankData.of(0, "node", rec, [], (0, 0))],
                  warnings=warnings)
    return read_archive(path)


def test_each_thread_gets_its_own_location(recorder: tb.Recorder, tmp_path: Path) -> None:
    """Three workers calling traced functions under a shared lock: one location
    each, in creation order, all in the rank's group; nothing of a worker lands on
    the master thread."""
    traced = make_decorator(recorder)
    lock = threading.Lock()

    @traced
    def work(i: int) -> None:
        for _ in range(5):
            with lock:
                time.sleep(0.0002)
            inner(i)

    @traced
    def inner(i: int) -> int:
        return i

    ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in reversed(ts):
        t.join()
    ts[0].join()  # a second join of an ended thread records no second ThreadWait
    locs = _write(recorder, tmp_path / "traces.otf2")
    summary = check_threads(locs)
    assert [loc["name"] for loc in locs.values()] == [
        "Master thread", "Pthread thread 1", "Pthread thread 2", "Pthread thread 3"]
    assert {loc["group"] for loc in locs.values()} == {"MPI Rank 0"}
    assert summary["MPI Rank 0"] == {"threads": [1, 2, 3], "locks": {1: 15}}
    master = [k for _, k, _ in locs[0]["events"]]
    assert master.count("ThreadCreate") == master.count("ThreadWait") == 3
    assert "ThreadAcquireLock" not in master
    for ref in (1, 2, 3):
        kinds = [k for _, k, _ in locs[ref]["events"]]
        assert kinds.count("Enter") == 1 + 5 + 5 + 5  # work, inner, acquire, release
        assert kinds.count("ThreadAcquireLock") == kinds.count("ThreadReleaseLock") == 5


def test_subclasses_timers_pools_and_orphans(recorder: tb.Recorder, tmp_path: Path) -> None:
    """A Thread subclass overriding run(), a Timer and ThreadPoolExecutor workers
    begin and end like any thread (the hook is Thread._bootstrap_inner); a thread
    started with _thread.start_new_thread records on an "Orphan thread" location,
    not on the master's."""
    traced = make_decorator(recorder)

    @traced
    def job(x: int) -> int:
        return x * 2

    class Sub(threading.Thread):
        def run(self) -> None:
            job(1)

    s = Sub()
    s.start()
    s.join()
    timer = threading.Timer(0.0, job, args=(2,))
    timer.start()
    timer.join()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        assert list(pool.map(job, range(4))) == [0, 2, 4, 6]
    done = _thread.allocate_lock()
    done.acquire()

    def orphan() -> None:
        job(3)
        done.release()

    _thread.start_new_thread(orphan, ())
    done.acquire()
    locs = _write(recorder, tmp_path / "traces.otf2")
    summary = check_threads(locs)
    names = [loc["name"] for loc in locs.values()]
    assert names[:3] == ["Master thread", "Pthread thread 1", "Pthread thread 2"]
    assert names[-1] == "Orphan thread 1"
    assert len(summary["MPI Rank 0"]["threads"]) == len(names) - 2
    orphan_kinds = [k for _, k, _ in locs[len(names) - 1]["events"]]
    assert orphan_kinds == ["Enter", "Leave"]
    master_regions = {ev.region.name for _, k, ev in locs[0]["events"] if k == "Enter"}
    assert "job" not in master_regions


def test_locks_conditions_and_what_is_not_traced(recorder: tb.Recorder,
                                                 tmp_path: Path) -> None:
    """RLock: one acquisition per outermost acquire; a failed non-blocking
    acquire records no acquisition; Condition.wait on a traced lock releases and
    re-acquires it; the threading module's own locks (inside Thread, Event,
    Semaphore, a Condition's default RLock) stay plain."""
    lock, rlock = threading.Lock(), threading.RLock()
    assert isinstance(lock, threads.TracedLock) and isinstance(rlock, threads.TracedRLock)
    assert not isinstance(threading.Event()._cond._lock, threads.TracedLock)
    assert not isinstance(threading.Condition()._lock, threads.TracedLock)
    assert not isinstance(threading.Semaphore()._cond._lock, threads.TracedLock)
    with rlock, rlock:
        pass
    lock.acquire()
    got = []
    t = threading.Thread(target=lambda: got.append(lock.acquire(blocking=False)))
    t.start()
    t.join()
    assert got == [False]
    lock.release()
    for cond_lock in (lock, rlock):
        cond = threading.Condition(cond_lock)
        ready = []

        def notify(cond=cond, ready=ready) -> None:
            with cond:
                ready.append(1)
                cond.notify()

        with cond:
            n = threading.Thread(target=notify)
            n.start()
            assert cond.wait_for(lambda ready=ready: ready, timeout=10)
        n.join()
    locs = _write(recorder, tmp_path / "traces.otf2")
    summary = check_threads(locs)
    # lock 1: acquire, cond (main), the notifier, main re-acquires after wait
    assert summary["MPI Rank 0"]["locks"] == {1: 4, 2: 4}


def test_latecomer_thread_is_ended_at_the_snapshot(recorder: tb.Recorder,
                                                   tmp_path: Path) -> None:
    """A daemon thread still inside a traced function when the trace is written:
    its open region is closed and its ThreadEnd written (no ThreadWait, so the
    ThreadEnd's sequence count is OTF2_UNDEFINED_UINT64)."""
    traced = make_decorator(recorder)
    started, stop = threading.Event(), threading.Event()

    @traced
    def forever() -> None:
        started.set()
        stop.wait(10)

    t = threading.Thread(target=forever, daemon=True)
    t.start()
    started.wait(10)
    warnings: list[str] = []
    locs = _write(recorder, tmp_path / "traces.otf2", warnings)
    stop.set()
    t.join()
    check_threads(locs)
    assert warnings == ["rank 0: Pthread thread 1 was still running at the end of the "
                        "program; its 1 open regions end there"]
    last = locs[1]["events"][-1]
    assert last[1] == "ThreadEnd" and last[2].sequence_count == UNDEF64


def test_threads_running_after_the_program_stop_recording(recorder: tb.Recorder,
                                                           tmp_path: Path) -> None:
    """A busy daemon thread still running when the program ends: stopped at its
    next record until the tracer is done (no records, no GIL taken meanwhile),
    then let go recording nothing; its open region ends when it was stopped."""
    traced = make_decorator(recorder)
    done = threading.Event()
    calls = [0]

    @traced
    def tick() -> None:
        calls[0] += 1

    @traced
    def busy() -> None:
        while not done.is_set():
            tick()

    t = threading.Thread(target=busy, daemon=True)
    t.start()
    while calls[0] < 1000:
        time.sleep(0.001)
    recorder.stop_threads()
    buf = recorder.buffers[1]
    time.sleep(0.05)  # the thread reaches its next record and waits there
    stopped, held = calls[0], len(buf.data)
    time.sleep(0.1)
    assert (calls[0], len(buf.data)) == (stopped, held)  # it waits
    warnings: list[str] = []
    locs = _write(recorder, tmp_path / "traces.otf2", warnings)
    recorder.release_threads()
    time.sleep(0.05)
    assert calls[0] > stopped and len(buf.data) <= held + 2  # goes on, unrecorded
    done.set()
    t.join(10)
    check_threads(locs)
    events = locs[1]["events"]
    assert [e[1] for e in events[-3:]] == ["Leave", "Leave", "ThreadEnd"]
    # ended when it was stopped (or at the in-flight call's Leave, if later)
    assert events[-1][0] == events[-2][0] == max(recorder.stopped_at, events[-3][0])
    assert warnings == ["rank 0: Pthread thread 1 was still running at the end of the "
                        "program; its 1 open regions end there"]


def test_a_single_threaded_run_has_no_thread_definitions(tmp_path: Path) -> None:
    rec = tb.Recorder()
    make_decorator(rec)(lambda: None)()
    write_archive(str(tmp_path / "traces.otf2"), [RankData.of(0, "n", rec, [], (0, 0))])
    with otf2.reader.open(str(tmp_path / "traces.otf2")) as trace:
        assert [loc.name for loc in trace.definitions.locations] == ["Master thread"]
        assert not [c for c in trace.definitions.comms if "Pthread" in c.name]


def _rank_with_mpi_on(threads_with_mpi: list[int], rank: int,
                      sending: tuple[int, ...] = ()) -> RankData:
    rec = tb.Recorder()
    rec.comm_id((0, 1))
    out = []
    for i in range(3):
        buf = tb.Buffer("Master thread" if i == 0 else f"Pthread thread {i}", i)
        if i:
            buf.thread_record(tb.THREAD_BEGIN, i)
        if i in threads_with_mpi:
            buf.coll_begin()
            buf.coll_end(2, 0, -1, lambda: (8, 8))  # ALLREDUCE on comm 0
        if i in sending:
            buf.send(1 - rank, 0, 0, 8)
        if i:
            buf.thread_record(tb.THREAD_END, i)
        out.append(ThreadData(buf.name, buf.sequence, buf.data, buf.extra, buf.ints))
    return RankData(rank, "n", out, rec.regions, rec.comms)


def test_mpi_rank_maps_to_the_thread_that_made_its_mpi_calls(tmp_path: Path) -> None:
    """OTF2's MPI COMM_LOCATIONS group names one location per rank: the thread
    that made the rank's point-to-point calls, or the one that made its
    collectives; collectives from two threads of a rank are its own (compensate
    takes them from any thread), messages from two threads are warned about."""
    warnings: list[str] = []
    write_archive(str(tmp_path / "a" / "traces.otf2"),
                  [_rank_with_mpi_on([2], 0), _rank_with_mpi_on([2], 1)],
                  warnings=warnings)
    assert warnings == []
    with otf2.reader.open(str(tmp_path / "a" / "traces.otf2")) as trace:
        world = next(c for c in trace.definitions.comms if c.name == "MPI_COMM_WORLD")
        assert [m.name for m in world.group.members] == ["Pthread thread 2"] * 2
    write_archive(str(tmp_path / "b" / "traces.otf2"),
                  [_rank_with_mpi_on([0, 1], 0, sending=(1,)), _rank_with_mpi_on([0], 1)],
                  warnings=warnings)
    assert warnings == []
    with otf2.reader.open(str(tmp_path / "b" / "traces.otf2")) as trace:
        world = next(c for c in trace.definitions.comms if c.name == "MPI_COMM_WORLD")
        assert [m.name for m in world.group.members] == ["Pthread thread 1", "Master thread"]
    write_archive(str(tmp_path / "c" / "traces.otf2"),
                  [_rank_with_mpi_on([0], 0, sending=(0, 1)), _rank_with_mpi_on([0], 1)],
                  warnings=warnings)
    assert len(warnings) == 1 and warnings[0].startswith(
        "rank 0: point-to-point or one-sided MPI calls from 2 threads (Master thread, "
        "Pthread thread 1)")


# ---------------------------------------------------------------------------------
# property: random thread/lock schedules through buffer -> archive -> reader

_op = st.sampled_from(["lock0", "lock1", "rlock", "call", "spawn"])


@st.composite
def _schedules(draw) -> tuple[list[list[str]], list[int]]:
    """(the ops of each worker, the order the main thread joins the workers in).
    The join order is drawn here, not in the test body: a draw there (it was a
    ``st.randoms()`` shuffled after the workers had started) can end the example
    with hypothesis' StopTest while the workers run, and those workers then start
    and join threads into the next example's recorder (as "Orphan thread"
    locations with sequence counts of their own: the flaky failures)."""
    schedules = draw(st.lists(st.lists(_op, max_size=6), min_size=1, max_size=4))
    return schedules, draw(st.permutations(range(len(schedules))))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_schedules())
def test_random_schedules_give_consistent_sequence_counts_and_orders(
        case: tuple[list[list[str]], list[int]]) -> None:
    """Threads running random mixes of lock sections, traced calls and child
    threads (created and joined by a worker): whatever the interleaving, the
    archive read back has one begun thread per start(), Create < Begin, End <
    Wait, and per lock the orders 1..n with each acquire after the previous
    release."""
    schedules, join_order = case
    rec = tb.Recorder()
    traced = make_decorator(rec)
    threads.install(rec)
    try:
        locks = {"lock0": threading.Lock(), "lock1": threading.Lock(),
                 "rlock": threading.RLock()}

        @traced
        def call() -> None:
            time.sleep(0)

        def run(ops: list[str]) -> None:
            for op in ops:
                if op == "call":
                    call()
                elif op == "spawn":
                    child = threading.Thread(target=call)
                    child.start()
                    child.join()
                else:
                    with locks[op]:
                        call()
                        if op == "rlock":
                            with locks[op]:
                                time.sleep(0)

        ts = [threading.Thread(target=run, args=(ops,)) for ops in schedules]
        try:
            for t in ts:
                t.start()
        finally:  # no thread of this example may outlive it, whatever happened
            for i in join_order:
                if ts[i].ident is not None:
                    ts[i].join()
    finally:
        threads.uninstall()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traces.otf2"
        write_archive(str(path), [RankData.of(0, "n", rec, [], (0, 0))])
        summary = check_threads(read_archive(path))["MPI Rank 0"]
    ops = [op for ops in schedules for op in ops]
    n_threads = len(schedules) + ops.count("spawn")
    assert summary["threads"] == list(range(1, n_threads + 1))
    expect = {i + 1: ops.count(name) for i, name in enumerate(("lock0", "lock1", "rlock"))}
    assert summary["locks"] == {k: v for k, v in expect.items() if v}


def test_fast_path_is_left_before_a_second_thread_records() -> None:
    """The decorator appends to the master's buffer directly while the process is
    single-threaded; starting any thread (here one from _thread.start_new_thread,
    which no Thread.start hook sees) switches every decorator to the per-thread
    lookup first, so the new thread's records go to its own buffer."""
    rec = tb.Recorder()
    traced = make_decorator(rec)(lambda: None)
    traced()
    threads.install(rec)
    try:
        done = _thread.allocate_lock()
        done.acquire()

        def orphan() -> None:
            traced()
            done.release()

        _thread.start_new_thread(orphan, ())
        done.acquire()
    finally:
        threads.uninstall()
    assert rec.threaded
    assert [b.name for b in rec.buffers] == ["Master thread", "Orphan thread 1"]
    # the master: the decoration's BufferFlush and the first call; the orphan: its call
    assert len(rec.main) == 3 and len(rec.buffers[1]) == 2


def test_calibration_times_the_path_the_run_used() -> None:
    from calibration.tracer.overhead import calibrate

    for threaded in (False, True):
        cal = calibrate(n=200, repeats=3, threaded=threaded)["calibration"]
        assert cal["function_path"] == ("threaded" if threaded else "single")
        costs = cal["seconds_per_record"]
        used = costs["function_call_threaded" if threaded else "function_call_single"]
        assert costs["function_call"] == used
        assert {"ThreadCreate", "ThreadAcquireLock", "ThreadReleaseLock"} <= costs.keys()


def test_snapshot_keeps_whole_records() -> None:
    """A copy taken while a thread is between the two appends of a record ends at
    the last whole record."""
    rec = tb.Recorder()
    buf = rec.main
    buf.enter(0)
    buf.leave(0)
    buf.add(123)  # a timestamp whose code is not yet stored
    assert [len(th.data) for th in snapshot(rec)] == [4]


# ---------------------------------------------------------------------------------
# real MPI

@pytest.fixture(scope="module")
def traced_threads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``examples/mpi/threads.py`` traced on 2 ranks with 3 workers each."""
    mpiexec = _mpiexec()
    out = tmp_path_factory.mktemp("threads") / "run" / "traces.otf2"
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "500", "--", str(EXAMPLE)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "threads done" in proc.stdout
    # no warning but a network/rma entry left out as too noisy on a busy machine
    assert not [line for line in proc.stderr.splitlines() if "warning" in line
                and "rerun on a quiet machine" not in line], proc.stderr
    return out


def test_threaded_run_has_a_location_per_thread(traced_threads: Path) -> None:
    locs = read_archive(traced_threads)
    groups = defaultdict(list)
    for loc in locs.values():
        groups[loc["group"]].append(loc["name"])
    assert dict(groups) == {
        f"MPI Rank {r}": ["Master thread", "Pthread thread 1", "Pthread thread 2",
                          "Pthread thread 3"] for r in (0, 1)}
    summary = check_threads(locs)
    platform = json.loads((traced_threads.parent / "platform.json").read_text())
    assert platform["calibration"]["function_path"] == "threaded"
    for r in (0, 1):
        # 3 workers x 4 rounds: the Lock and the RLock acquired 12 times each
        assert summary[f"MPI Rank {r}"] == {"threads": [1, 2, 3], "locks": {1: 12, 2: 12}}
    for loc in locs.values():
        kinds = [k for _, k, _ in loc["events"]]
        regions = {ev.region.name for _, k, ev in loc["events"] if k == "Enter"}
        if loc["name"] == "Master thread":
            assert kinds.count("ThreadCreate") == kinds.count("ThreadWait") == 3
            assert "MpiCollectiveEnd" in kinds and "partial_sum" not in regions
        else:
            assert {"worker", "partial_sum", "add", "count"} <= regions
            assert not [k for k in kinds if k.startswith("Mpi")]
    printed = subprocess.run(["otf2-print", "-Werror", "--silent", str(traced_threads)],
                             capture_output=True, text=True, timeout=60) \
        if shutil.which("otf2-print") else None
    if printed is not None:
        assert printed.returncode == 0, printed.stderr


def test_threaded_run_compensates(traced_threads: Path) -> None:
    """The compensate command (in-process: tests/inprocess.py) times the thread
    records by R8: exit 0, every create -> begin, end -> wait and lock hand-over of
    the run matched (3 threads created and joined per rank, 2 locks x 12
    acquisitions per rank, of which those handed to another thread wait) and 0
    thread violations; the same records per
    location, and otf2-print reads the result."""
    out = traced_threads.parent.parent / "out" / "traces.otf2"
    summary = traced_threads.parent.parent / "out-summary.json"
    proc = run_compensate(traced_threads, out, "--platform",
                          traced_threads.parent / "platform.json", "--quiet",
                          "--summary", summary, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(summary.read_text())
    deps = done["dependencies"]["threads"]
    assert deps["create"] == deps["end"] == 6, deps
    assert 0 < deps["lock"] <= 2 * 2 * 11 and deps["unmatched"] == 0, deps
    assert done["verification"]["ok"] and done["verification"]["threads"] == 0
    before, after = read_archive(traced_threads), read_archive(out)
    assert {r: (v["name"], v["group"], [k for _, k, _ in v["events"]])
            for r, v in before.items()} == {
        r: (v["name"], v["group"], [k for _, k, _ in v["events"]])
        for r, v in after.items()}

    def links(v: dict) -> list:
        return [(k, getattr(ev, "sequence_count", None), getattr(ev, "lock_id", None),
                 getattr(ev, "acquisition_order", None))
                for _, k, ev in v["events"] if k.startswith("Thread")]

    assert {r: links(v) for r, v in before.items()} == {r: links(v) for r, v in after.items()}
    if shutil.which("otf2-print"):
        printed = subprocess.run(["otf2-print", str(out)], capture_output=True, text=True,
                                 timeout=60)
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.count("THREAD_BEGIN") == 6
        assert printed.stdout.count("THREAD_ACQUIRE_LOCK") == 48


def _trace(tmp: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_mpiexec(), "-n", "2", sys.executable, "-m", "calibration.record", "-o",
         str(tmp / "run" / "traces.otf2"), "--calibration-records", "0", "--",
         str(script), *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def _compensated_summary(tmp_path: Path) -> dict:
    """``run/traces.otf2`` compensated (``--bound none``): its ``--summary``."""
    summary = tmp_path / "summary.json"
    done = run_compensate(tmp_path / "run" / "traces.otf2", tmp_path / "out" / "traces.otf2",
                          "--bound", "none", "--quiet", "--summary", summary, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(summary.read_text())


def test_mpi_from_one_worker_thread_is_matched(tmp_path: Path) -> None:
    """All MPI calls from one non-main thread: they are recorded on that thread,
    the rank is mapped to it, and compensate matches the messages."""
    proc = _trace(tmp_path, EXAMPLE, "--mpi-thread")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    locs = read_archive(tmp_path / "run" / "traces.otf2")
    check_threads(locs)
    mpi = {loc["name"] for loc in locs.values()
           if any(k.startswith("Mpi") for _, k, _ in loc["events"])}
    assert mpi == {"Pthread thread 4"}
    s = _compensated_summary(tmp_path)
    assert s["messages_matched"] == 2 and s["collective_instances"] == 1


def _worker_ring(tmp: Path, then: str) -> Path:
    """An mpi4py program whose worker thread makes one ring exchange
    (MPI_Sendrecv), after which the main thread runs ``then``."""
    script = tmp / "two.py"
    script.write_text(
        "import threading\nfrom mpi4py import MPI\ncomm = MPI.COMM_WORLD\n"
        "rank, size = comm.Get_rank(), comm.Get_size()\n"
        "def ring():\n"
        "    comm.sendrecv(rank, dest=(rank + 1) % size, source=(rank - 1) % size)\n"
        f"t = threading.Thread(target=ring)\nt.start()\nt.join()\n{then}\n")
    return script


def test_messages_from_a_worker_and_collectives_from_main_are_matched(tmp_path: Path
                                                                        ) -> None:
    """A rank's messages from a worker thread, its allreduce from the main thread:
    the rank is mapped to the worker, and compensate takes the allreduce from the
    main thread as the rank's (no warning, every message and instance matched)."""
    proc = _trace(tmp_path, _worker_ring(tmp_path, then="comm.allreduce(1)"))
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    s = _compensated_summary(tmp_path)
    assert s["messages_matched"] == 2 and s["collective_instances"] == 1
    assert s["verification"]["violations"] == 0


def test_messages_from_two_threads_of_a_rank_are_reported(tmp_path: Path) -> None:
    """Messages from the main thread and a worker of the same rank: each call stays
    on its thread's location, the tracer warns, and compensate stops with a
    one-line error naming the unmatched record instead of mixing them."""
    proc = _trace(tmp_path, _worker_ring(tmp_path, then="ring()"))
    assert proc.returncode == 0, proc.stderr
    assert "rank 0: point-to-point or one-sided MPI calls from 2 threads (Master thread, " \
        "Pthread thread 1)" in proc.stderr
    done = run_compensate(tmp_path / "run" / "traces.otf2", tmp_path / "out" / "traces.otf2",
                          "--bound", "none", "--quiet", cwd=ROOT)
    assert done.returncode != 0
    assert "has no matching send" in done.stderr and "Traceback" not in done.stderr
    assert "which no MPI communicator has as a member: messages sent or received on " \
        "several threads of one rank" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
