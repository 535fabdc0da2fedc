"""MPI records on a location its communicator does not list (a rank's other
thread, as EZTrace records MPI_THREAD_SERIALIZED or MULTIPLE calls): refused at
the first, in one line, instead of a collective left out of every instance or a
receive paired with the main thread's send alone
(compensate.matching.collectives.refuse_off_member)."""

import pytest

from compensate.formats import read_trace
from compensate.formats.text import read_text
from compensate.matching import match
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


@pytest.mark.parametrize("body, kind, index", [(SENDS, "MpiSend", 1),
                                               (BARRIER, "MpiCollectiveEnd", 2)])
def test_a_record_on_a_thread_its_communicator_does_not_list_is_refused(tmp_path, body,
                                                                        kind, index):
    path = tmp_path / "t.trace"
    path.write_text(HEAD + body)
    with pytest.raises(TraceError) as err:
        match(read_text(str(path)))
    assert err.value.location == 2 and err.value.record == index
    assert str(err.value).endswith(
        f"{kind} on communicator 0 (\"MPI_COMM_WORLD\") on location 2, which is not one "
        "of its members (0, 1): MPI called from several threads of one rank (a rank is "
        "one location: the thread that holds all its MPI records); not modelled")


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
    with pytest.raises(TraceError, match="MPI called from several threads of one rank"):
        match(read_trace(path))


def test_the_same_records_on_the_listed_locations_match(tmp_path):
    path = tmp_path / "t.trace"
    path.write_text(HEAD + SENDS.replace(" 2 ", " 0 ").replace("200 0", "130 0")
                    .replace("210 0", "140 0").replace("220 0", "150 0")
                    + "330 1 Enter region=2\n340 1 MpiRecv sender=0 comm=0 tag=5 bytes=8\n"
                    "350 1 Leave region=2\n")
    assert match(read_text(str(path))).counts()["messages"] == 2
