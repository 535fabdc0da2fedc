"""MPI records on a location its communicator does not list (a rank's other
thread, as EZTrace records MPI_THREAD_SERIALIZED or MULTIPLE calls): a
collective there is its process's rank's, in the time order of the process's
calls (compensate.matching.collectives.thread_ranks); a message there is refused
at the first, in one line, instead of a receive paired with the main thread's
send alone (compensate.matching.collectives.refuse_off_member)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.formats import read_trace
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.collectives import thread_ranks
from compensate.model import TraceError

HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="P#0T#0"
location 1 group=1 name="P#1T#0"
location 2 group=0 name="P#0T#1"
region 1 "MPI_Send"
region 2 "MPI_Recv"
region 3 "MPI_Barrier"
comm 0 "MPI_COMM_WORLD" 0,1
events
"""

#: rank 0's main thread and its second thread each send rank 1 a message of tag
#: 5; rank 1 receives one of them
SENDS = """100 0 Enter region=1
110 0 MpiSend receiver=1 comm=0 tag=5 bytes=8
120 0 Leave region=1
200 2 Enter region=1
210 2 MpiSend receiver=1 comm=0 tag=5 bytes=8
220 2 Leave region=1
300 1 Enter region=2
310 1 MpiRecv sender=0 comm=0 tag=5 bytes=8
320 1 Leave region=2
"""

#: the barrier of rank 0 called from its second thread, rank 1's from its main one
BARRIER = """100 2 Enter region=3
110 2 MpiCollectiveBegin
120 2 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0
130 2 Leave region=3
100 1 Enter region=3
110 1 MpiCollectiveBegin
120 1 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0
130 1 Leave region=3
"""


@pytest.mark.parametrize("body, kind, index", [(SENDS, "MpiSend", 1)])
def test_a_record_on_a_thread_its_communicator_does_not_list_is_refused(tmp_path, body,
                                                                        kind, index):
    """A message from a thread the communicator does not list: its rank's other
    sends lie on the listed thread (a collective there is the rank's: below)."""
    path = tmp_path / "t.trace"
    path.write_text(HEAD + body)
    with pytest.raises(TraceError) as err:
        match(read_text(str(path)))
    assert err.value.location == 2 and err.value.record == index
    assert str(err.value).endswith(
        f"{kind} on communicator 0 (\"MPI_COMM_WORLD\") on location 2, which is not one "
        "of its members (0, 1): messages sent or received on several threads of one "
        "rank (a rank's messages are one location's: the thread that holds them all); "
        "not modelled")


def test_a_rank_whose_mpi_records_lie_on_one_other_thread_is_that_thread(tmp_path):
    """As read by the readers (compensate.formats.mpithreads): rank 0's barrier on
    its second thread, its main thread holding no MPI record, is rank 0's; rank 0
    sending from both threads stays refused."""
    path = tmp_path / "t.trace"
    path.write_text(HEAD + BARRIER + "90 0 Enter region=1\n95 0 Leave region=1\n")
    trace = read_trace(path)
    assert trace.definitions.comms[0].members == (2, 1)
    assert match(trace).counts()["collectives"] == {"n-to-n": 1}
    path.write_text(HEAD + SENDS)
    with pytest.raises(TraceError, match="messages sent or received on several threads"):
        match(read_trace(path))


def test_the_same_records_on_the_listed_locations_match(tmp_path):
    path = tmp_path / "t.trace"
    path.write_text(HEAD + SENDS.replace(" 2 ", " 0 ").replace("200 0", "130 0")
                    .replace("210 0", "140 0").replace("220 0", "150 0")
                    + "330 1 Enter region=2\n340 1 MpiRecv sender=0 comm=0 tag=5 bytes=8\n"
                    "350 1 Leave region=2\n")
    assert match(read_text(str(path))).counts()["messages"] == 2


#: rank 0's first barrier from its main thread, its second from its second thread
#: (MPI_THREAD_SERIALIZED, ``omp single``); rank 1's both from its main thread
TWO_BARRIERS = """100 0 Enter region=3
110 0 MpiCollectiveBegin
120 0 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0
130 0 Leave region=3
200 2 Enter region=3
210 2 MpiCollectiveBegin
220 2 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0
230 2 Leave region=3
100 1 Enter region=3
105 1 MpiCollectiveBegin
125 1 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0
130 1 Leave region=3
200 1 Enter region=3
205 1 MpiCollectiveBegin
225 1 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0
230 1 Leave region=3
"""


def test_a_ranks_collectives_from_two_threads_are_its_instances_in_time_order(tmp_path):
    """The k-th collective of a rank is the k-th in time over its process's threads:
    instance 0 holds location 0's barrier, instance 1 location 2's, each beside
    rank 1's; the verifier checks each exit against the other member's enter."""
    path = tmp_path / "t.trace"
    path.write_text(HEAD + TWO_BARRIERS)
    m = match(read_trace(path))
    assert [(i.locs, i.begin_idx, i.end_idx) for i in m.instances] == [
        ([0, 1], [1, 1], [2, 2]), ([2, 1], [1, 5], [2, 6])]
    assert thread_ranks(read_trace(path).definitions) == {0: {2: 0}}


def spread(trace, rank: int, every: int):
    """``trace`` with every ``every``-th collective call (its Enter to its Leave) of
    ``rank``'s location moved to a new CPU thread of the same process, as
    ``omp single`` spreads a rank's calls over its threads; and the new id."""
    import dataclasses

    import numpy as np

    from compensate.model import COLL_END, ENTER, LEAVE

    defs = trace.definitions
    m = defs.comms[0].members[rank]
    ev = trace.events[m]
    ends = np.flatnonzero(ev.kind == COLL_END)[::every]
    move = np.zeros(len(ev), dtype=bool)
    for e in ends.tolist():
        s = e
        while ev.kind[s] != ENTER:
            s -= 1
        t = e
        while ev.kind[t] != LEAVE:
            t += 1
        move[s:t + 1] = True
    new = max(defs.locations) + 1
    loc = dataclasses.replace(defs.locations[m], id=new, name="thread 1")
    events = {**trace.events, m: ev.copy(~move), new: ev.copy(move)}
    return type(trace)(dataclasses.replace(defs, locations={**defs.locations, new: loc}),
                       events, trace.source), new


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=st.sampled_from(["collectives", "mixed", "stencil"]),
       rank=st.integers(0, 2), every=st.integers(2, 3), seed=st.integers(0, 3))
def test_collectives_spread_over_a_ranks_threads_verify_alike_on_every_path(
        tmp_path_factory, program, rank, every, seed):
    """A simulated rank's collective calls spread over two threads of its process:
    as many instances as before, 0 violations, and the same output in memory,
    streamed, in small segments (which still cut) and on 2 thread ranks."""
    import json

    from compensate.cli import main
    from compensate.formats import write_trace
    from compensate.simulate import simulate
    from tests.parallel.test_command import _thread_command

    tmp = tmp_path_factory.mktemp("spread")
    sim = simulate(program, ranks=3, overhead=1e-6, seed=seed)
    moved, new = spread(sim.measured, rank, every)
    write_trace(moved, tmp / "in.trace")
    before = match(sim.measured).counts()["collectives"]
    assert match(read_trace(tmp / "in.trace")).counts()["collectives"] == before
    outs = []
    for name, mode in (("memory", ["--in-memory"]), ("stream", []),
                       ("small", ["--segment-records", "200"])):
        out, summary = tmp / f"{name}.trace", tmp / f"{name}.json"
        assert main([str(tmp / "in.trace"), str(out), "--overhead", "1us", "--quiet",
                     "--summary", str(summary), *mode]) == 0
        s = json.loads(summary.read_text())
        assert s["verification"]["violations"] == 0
        if name == "small":
            assert s["segments"]["count"] > 1
        outs.append(out.read_bytes())
    argv = [str(tmp / "in.trace"), str(tmp / "par.trace"), "--overhead", "1us", "--quiet"]
    assert _thread_command(tmp, argv, 2, streamed=True) == [0, 0]
    outs.append((tmp / "par.trace").read_bytes())
    assert all(o == outs[0] for o in outs[1:])


#: an MPI_Bcast whose members name no root rank (OTF2's NONE, SELF, THIS_GROUP)
NO_ROOT = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1
region 1 "MPI_Bcast"
{extra}comm 0 "MPI_COMM_WORLD" 0,1
events
1000 0 Enter region=1
1000 1 Enter region=1
1100 0 MpiCollectiveBegin
1100 1 MpiCollectiveBegin
1150 0 MpiCollectiveEnd op=BCAST comm=0 root=- sent=8 received=0
1150 1 MpiCollectiveEnd op=BCAST comm=0 root=- sent=0 received=8
1200 0 Leave region=1
1200 1 Leave region=1
"""


@pytest.mark.parametrize("intercomm", [False, True])
def test_a_rooted_collective_naming_no_root_rank_says_why(tmp_path, intercomm):
    """A rooted collective whose first member names no rank (EZTrace 2.0 writes
    MPI_ROOT and MPI_PROC_NULL so on an inter-communicator it defines as an
    intra-communicator): refused saying what such a root means, with the
    inter-communicator clause where the program creates one (was "rank -1")."""
    path = tmp_path / "t.trace"
    extra = 'region 2 "MPI_Intercomm_create"\n' if intercomm else ""
    path.write_text(NO_ROOT.format(extra=extra))
    with pytest.raises(TraceError) as err:
        match(read_text(str(path)))
    assert (err.value.location, err.value.record) == (0, 2)
    assert str(err.value).endswith(": location 0, record 2: BCAST instance 0 on "
                                   "communicator 0 has no valid root (the member names no "
                                   "rank: OTF2's root NONE, SELF or THIS_GROUP, which a "
                                   "rooted collective names only on an inter-communicator, "
                                   "for MPI_ROOT and MPI_PROC_NULL)" +
                                   ("; the program creates inter-communicators "
                                    "(MPI_Intercomm_create) and the trace defines none: "
                                    "communicator 0 may be one written as an "
                                    "intra-communicator of its own group, whose ranks then "
                                    "name the wrong group (EZTrace 2.0 writes them so); not "
                                    "modelled" if intercomm else ""))
