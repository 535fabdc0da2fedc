"""Matching of thread synchronisation (compensate/matching/threads.py): teams by
their thread-team communicator, the master by its fork, locks by acquisition
order within a process, Pthreads create/join by contingent and sequence count."""

import pytest

from compensate.formats.fields import field_of
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import TraceError

from ..conftest import CASES, TRACES, read_bundled


def _trace(tmp_path, events, locs=((0, 0), (1, 0)), comm="comm 0 \"team\" 0,1"):
    text = ["compensate-trace 1", "timer_resolution 1000000000"]
    text += [f"location {a} group={g}" for a, g in locs]
    text += [comm, "events", *events]
    p = tmp_path / "t.trace"
    p.write_text("\n".join(text) + "\n")
    return read_text(str(p))


def test_fork_join_case():
    m = match(read_text(str(CASES / "r8_fork_join.trace")))
    assert [(s.kind, s.recv, s.sends) for s in m.threads.syncs] == [
        ("fork", (1, 0), [(0, 1)]), ("join", (0, 4), [(1, 1)])]


def test_barrier_case():
    """The OpenMP barrier (paradigm OPENMP) is one n-to-n of the team; the CUDA
    region of the same role on the master is not a barrier."""
    m = match(read_text(str(CASES / "r8_barrier.trace")))
    [inst] = m.threads.barriers
    assert (inst.locs, inst.begin_idx, inst.end_idx, inst.cls) == ([0, 1], [3, 3], [4, 4],
                                                                   "n-to-n")


_TEAM = ('region 1 "!$omp barrier" role=BARRIER paradigm=OPENMP\n'
         'comm 0 "team" 0,1\ncomm 1 "inner" 1,2')


def test_barriers_by_team_instance_and_nesting(tmp_path):
    """The k-th barrier of each member in one team instance; a barrier inside a nested
    team belongs to that team; members that disagree on the count stay local."""
    ev = ["100 0 ThreadFork model=OPENMP", "110 0 ThreadTeamBegin thread_team=0",
          "120 1 ThreadTeamBegin thread_team=0",
          "130 0 Enter region=1", "140 1 Enter region=1", "150 0 Leave region=1",
          "150 1 Leave region=1",
          # location 1 forks an inner team with location 2; its barrier is theirs
          "160 1 ThreadFork model=OPENMP", "170 1 ThreadTeamBegin thread_team=1",
          "175 2 ThreadTeamBegin thread_team=1", "180 1 Enter region=1",
          "185 2 Enter region=1", "190 1 Leave region=1", "190 2 Leave region=1",
          "195 2 ThreadTeamEnd thread_team=1", "200 1 ThreadTeamEnd thread_team=1",
          "210 1 ThreadJoin model=OPENMP",
          "300 0 ThreadTeamEnd thread_team=0", "300 1 ThreadTeamEnd thread_team=0",
          "310 0 ThreadJoin model=OPENMP",
          # second instance of team 0: location 0 enters a barrier, location 1 not
          "400 0 ThreadFork model=OPENMP", "410 0 ThreadTeamBegin thread_team=0",
          "420 1 ThreadTeamBegin thread_team=0", "430 0 Enter region=1",
          "440 0 Leave region=1", "450 0 ThreadTeamEnd thread_team=0",
          "450 1 ThreadTeamEnd thread_team=0", "460 0 ThreadJoin model=OPENMP"]
    m = match(_trace(tmp_path, ev, locs=((0, 0), (1, 0), (2, 0)), comm=_TEAM))
    got = sorted((inst.comm, inst.locs, inst.begin_idx, inst.end_idx)
                 for inst in m.threads.barriers)
    assert got == [(0, [0, 1], [2, 1], [3, 2]), (1, [1, 2], [5, 1], [6, 2])]
    assert m.threads.counts()["unmatched"] == 1


def test_region_without_openmp_paradigm_is_no_barrier(tmp_path):
    ev = ["100 0 ThreadFork model=OPENMP", "110 0 ThreadTeamBegin thread_team=0",
          "120 1 ThreadTeamBegin thread_team=0", "130 0 Enter region=1",
          "140 1 Enter region=1", "150 0 Leave region=1", "150 1 Leave region=1",
          "300 0 ThreadTeamEnd thread_team=0", "300 1 ThreadTeamEnd thread_team=0",
          "310 0 ThreadJoin model=OPENMP"]
    team = 'region 1 "cudaSynchronize" role=IMPLICIT_BARRIER paradigm=CUDA\ncomm 0 "team" 0,1'
    assert match(_trace(tmp_path, ev, comm=team)).threads.barriers == []


def test_lock_order_and_scope(tmp_path):
    """Acquisition k waits for release k-1 of the same lock in the same process; the
    same lock id in another process is another lock."""
    ev = ["100 0 ThreadAcquireLock model=OPENMP lock_id=3 acquisition_order=1",
          "200 0 ThreadReleaseLock model=OPENMP lock_id=3 acquisition_order=1",
          "150 2 ThreadAcquireLock model=OPENMP lock_id=3 acquisition_order=1",
          "250 2 ThreadReleaseLock model=OPENMP lock_id=3 acquisition_order=1",
          "300 1 ThreadAcquireLock model=OPENMP lock_id=3 acquisition_order=2",
          "400 1 ThreadReleaseLock model=OPENMP lock_id=3 acquisition_order=2"]
    m = match(_trace(tmp_path, ev, locs=((0, 0), (1, 0), (2, 9))))
    assert [(s.kind, s.recv, s.sends) for s in m.threads.syncs] == [
        ("lock", (1, 0), [(0, 1)])]


def test_pthread_create_and_join(tmp_path):
    ev = ["100 0 ThreadCreate thread_contingent=0 sequence_count=1",
          "150 1 ThreadBegin thread_contingent=0 sequence_count=1",
          "250 1 ThreadEnd thread_contingent=0 sequence_count=1",
          "300 0 ThreadWait thread_contingent=0 sequence_count=1"]
    m = match(_trace(tmp_path, ev))
    assert sorted((s.kind, s.recv, s.sends) for s in m.threads.syncs) == [
        ("create", (1, 0), [(0, 0)]), ("end", (0, 1), [(1, 1)])]


def test_missing_field_is_a_one_line_error(tmp_path):
    ev = ["100 0 ThreadAcquireLock model=OPENMP acquisition_order=1"]
    with pytest.raises(TraceError, match=r"location 0, record 0: ThreadAcquireLock without "
                                         r"its lock_id field"):
        match(_trace(tmp_path, ev))


def test_a_team_begin_of_no_team_joins_no_team(tmp_path):
    """ThreadTeamBegin/End with the thread team UNDEFINED (EZTrace's OMPT module
    writes them on the master alone, and no fork or join): OTF2 allows it, so it is
    read; with no team it links nothing, counted as unmatched, and the barrier
    inside it is no instance. The defined team after it is matched as ever."""
    ev = ["100 0 ThreadTeamBegin", "130 0 Enter region=1", "140 1 Enter region=1",
          "150 0 Leave region=1", "150 1 Leave region=1", "200 0 ThreadTeamEnd",
          "300 0 ThreadFork model=OPENMP", "310 0 ThreadTeamBegin thread_team=0",
          "320 1 ThreadTeamBegin thread_team=0", "330 0 ThreadTeamEnd thread_team=0",
          "340 1 ThreadTeamEnd thread_team=0", "350 0 ThreadJoin model=OPENMP"]
    team = 'region 1 "!$omp barrier" role=BARRIER paradigm=OPENMP\ncomm 0 "team" 0,1'
    m = match(_trace(tmp_path, ev, comm=team))
    assert m.threads.barriers == []
    assert [(s.kind, s.recv, s.sends) for s in m.threads.syncs] == [
        ("fork", (1, 2), [(0, 4)]), ("join", (0, 7), [(1, 3)])]
    assert m.threads.counts()["unmatched"] == 1


def test_real_archive_teams():
    """jacobi-mpi-openmp-cuda: two ranks with two OpenMP threads each; every parallel
    region's worker begins after its master's fork, the master joins after the
    worker's end; 40 lock acquisitions, of which the 34 not first on their lock in
    their process and not after a release by the same thread wait for another."""
    t = read_bundled(TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2")
    m = match(t)
    assert m.counts()["threads"] == {"fork": 49, "join": 49, "lock": 34, "create": 0,
                                     "end": 0, "task": 0, "taskwait": 0, "barrier": 49,
                                     "unmatched": 0, "local_locks": 0}
    # the OpenMP implicit barriers, never cudaSynchronize (IMPLICIT_BARRIER of CUDA)
    names = {t.definitions.regions[int(t.events[inst.locs[0]].region[inst.begin_idx[0]])]
             for inst in m.threads.barriers}
    assert names and all(n.startswith("!$omp implicit barrier") for n in names)
    ev = t.events
    for s in m.threads.syncs:
        assert all(t.definitions.process_of(loc) == t.definitions.process_of(s.recv[0])
                   for loc, _ in s.sends)
        assert all(ev[s.recv[0]].time[s.recv[1]] >= ev[loc].time[i] for loc, i in s.sends)
    assert field_of(ev[0].payload[198], "model") == "OPENMP"


def test_one_team_id_in_two_processes_is_two_teams(tmp_path):
    """EZTrace numbers every rank's OpenMP teams 1, 2, ...: thread team 1 of
    process 0 (locations 0, 1) and of process 1 (locations 2, 3) are two teams,
    each paired with its own master's fork and join."""
    ev = []
    for master, worker, t in ((0, 1, 100), (2, 3, 150)):
        ev += [f"{t} {master} ThreadFork model=OPENMP number_of_requested_threads=2",
               f"{t + 10} {master} ThreadTeamBegin thread_team=1",
               f"{t + 20} {worker} ThreadTeamBegin thread_team=1",
               f"{t + 300} {master} ThreadTeamEnd thread_team=1",
               f"{t + 310} {worker} ThreadTeamEnd thread_team=1",
               f"{t + 320} {master} ThreadJoin model=OPENMP"]
    ev.sort(key=lambda line: int(line.split()[0]))
    trace = _trace(tmp_path, ev, locs=((0, 0), (1, 0), (2, 1), (3, 1)),
                   comm='comm 1 "OpenMP Thread Team" 0,1')
    m = match(trace)
    assert sorted((s.kind, s.recv, s.sends) for s in m.threads.syncs) == [
        ("fork", (1, 0), [(0, 0)]), ("fork", (3, 0), [(2, 0)]),
        ("join", (0, 3), [(1, 1)]), ("join", (2, 3), [(3, 1)])]
    assert m.threads.counts()["unmatched"] == 0
