"""Point-to-point matching (compensate.matching.p2p): matched probes, and the
peer ranks' locations looked up per communicator."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.p2p import members_of, peer_locations
from compensate.model import Comm, Definitions, Location, TraceError

HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1
region 1 "MPI_Mprobe"
comm 0 "MPI_COMM_WORLD" 0,1
events
"""


def _match(tmp_path, body):
    path = tmp_path / "t.trace"
    path.write_text(HEAD + body)
    return match(read_text(str(path)))


def test_matched_probe_takes_its_place_in_the_non_overtaking_order(tmp_path):
    # the Mprobe (record 0) comes before the MpiRecv (1): it takes the first send and
    # is that message's receive record (no receive copy: the MpiMrecv (3) that names its
    # message copies it in, locally, and holds its size); a plain probe (2) matches nothing
    m = _match(tmp_path, """10 0 MpiSend receiver=1 comm=0 tag=7 bytes=1
20 0 MpiSend receiver=1 comm=0 tag=7 bytes=2
30 1 MpiProbe sender=0 comm=0 tag=7 message=9
40 1 MpiRecv sender=0 comm=0 tag=7 bytes=2
45 1 MpiProbe sender=0 comm=0 tag=7 message=-1
50 1 MpiMrecv message=9 bytes=1
""")
    got = sorted((x.send_idx, x.recv_idx, x.nonblocking_recv, x.no_recv_copy, x.size)
                 for x in m.messages)
    assert got == [(0, 0, False, True, 1), (1, 1, False, False, 2)]


def test_imrecv_is_a_nonblocking_receive_posted_at_its_request(tmp_path):
    # the probe (0) is the receive record; the MpiImrecvRequest (1) posted the receive
    m = _match(tmp_path, """10 0 MpiSend receiver=1 comm=0 tag=7 bytes=1
30 1 MpiProbe sender=0 comm=0 tag=7 message=9
40 1 MpiImrecvRequest message=9 request=4
50 1 MpiImrecv request=4 bytes=1
""")
    (x,) = m.messages
    assert (x.send_idx, x.recv_idx, x.nonblocking_recv, x.recv_post_idx, x.no_recv_copy,
            x.size) == (0, 0, True, 1, True, 1)


def test_mrecv_posting_is_the_enter_of_its_call(tmp_path):
    # a synchronous sender waits for the MPI_Mrecv's posting (its Enter, 3), not the probe
    path = tmp_path / "t.trace"
    path.write_text(HEAD.replace('events', 'region 2 "MPI_Ssend"\nregion 3 "MPI_Mprobe"\n'
                                 'region 4 "MPI_Mrecv"\nevents') + """10 0 Enter region=2
15 0 MpiSend receiver=1 comm=0 tag=7 bytes=1
20 1 Enter region=3
30 1 MpiProbe sender=0 comm=0 tag=7 message=9
35 1 Leave region=3
40 1 Enter region=4
50 1 MpiMrecv message=9 bytes=1
55 1 Leave region=4
60 0 Leave region=2
""")
    (x,) = match(read_text(str(path))).messages
    assert (x.recv_idx, x.recv_enter_idx, x.recv_post_idx, x.synchronous) == (1, 0, 3, True)


@pytest.mark.parametrize("body,problem", [
    ("50 1 MpiMrecv message=9 bytes=1\n", "MpiMrecv of message 9 without the MpiProbe"),
    ("50 1 MpiImrecv request=4 bytes=1\n", "MpiImrecv of request 4 without its"),
    ("30 1 MpiProbe sender=0 comm=0 tag=7 message=-1\n50 1 MpiMrecv message=-1 bytes=1\n",
     "MpiMrecv of message -1 without"),
])
def test_receive_of_an_unknown_message_is_a_one_line_error(tmp_path, body, problem):
    with pytest.raises(TraceError, match=problem) as e:
        _match(tmp_path, body)
    assert "location 1" in str(e.value) and "\n" not in str(e.value)


def test_a_receive_after_a_lost_one_is_not_paired(tmp_path):
    """Rank 1's first message was received by an MPI_Irecv the tracer did not record
    (EZTrace in MPI_Waitall): the recorded receive comes after both sends, so MPI's
    order cannot say which it took (the k-th receive with the k-th send would pair it
    with the 8-byte one): a local record, counted, its send and the other unmatched."""
    m = _match(tmp_path, """10 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
20 0 MpiSend receiver=1 comm=0 tag=7 bytes=16
30 1 MpiIrecvRequest request=3
40 1 MpiRecv sender=0 comm=0 tag=7 bytes=16
""")
    assert m.messages == [] and m.unmatched_sends == 2
    assert m.unrecorded()["receives_past_a_gap"] == 1


def test_receives_before_the_last_balance_point_pair_in_order(tmp_path):
    """Send 0 is received (25) before send 1 is made: the channel balances between
    them, so receive 1 pairs with send 0; the receive at 60 comes after sends 1 and 2,
    one of which a receive the tracer did not record took: local."""
    m = _match(tmp_path, """10 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
25 1 MpiRecv sender=0 comm=0 tag=7 bytes=8
30 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
40 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
50 1 MpiIrecvRequest request=3
60 1 MpiRecv sender=0 comm=0 tag=7 bytes=8
""")
    assert [(x.send_idx, x.recv_idx) for x in m.messages] == [(0, 0)]
    assert m.unmatched_sends == 2 and m.unrecorded()["receives_past_a_gap"] == 1


def test_a_channel_missing_only_its_last_receives_pairs_every_receive(tmp_path):
    """The last send is never received (no gap): every receive pairs, as before."""
    m = _match(tmp_path, """10 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
20 1 MpiRecv sender=0 comm=0 tag=7 bytes=8
30 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
40 1 MpiRecv sender=0 comm=0 tag=7 bytes=8
50 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
""")
    assert [(x.send_idx, x.recv_idx) for x in m.messages] == [(0, 0), (1, 1)]
    assert m.unmatched_sends == 1 and m.unrecorded()["receives_past_a_gap"] == 0


SELF_HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1
region 1 "MPI_Recv"
region 2 "MPI_Send"
REGION_EXTRA
comm 0 "MPI_COMM_WORLD" 0,1
comm 5 "MPI_COMM_5" 0
events
"""

#: location 0 receives from its own rank 0 on comm 5, then sends to it: by MPI's
#: order the receive takes the later send (an inter-communicator's side written as
#: an intra-communicator of its own group, as EZTrace 2.0 writes one)
SELF_BODY = """10 0 Enter region=1
20 0 MpiRecv sender=0 comm=5 tag=5 bytes=8
30 0 Leave region=1
40 0 Enter region=2
50 0 MpiSend receiver=0 comm=5 tag=5 bytes=8
60 0 Leave region=2
"""


@pytest.mark.parametrize("intercomm", [False, True])
def test_a_message_to_self_received_before_it_is_sent_is_refused(tmp_path, intercomm):
    """A receive record is written once its message has arrived: one from its own
    location that comes before the send MPI's order gives it cannot be, and is
    refused at the receive (verification caught it as exit 4 before); where the
    program created inter-communicators, the line says what likely happened."""
    path = tmp_path / "t.trace"
    extra = 'region 3 "MPI_Intercomm_create"' if intercomm else ""
    path.write_text(SELF_HEAD.replace("REGION_EXTRA", extra) + SELF_BODY)
    with pytest.raises(TraceError) as err:
        match(read_text(str(path)))
    e = err.value
    assert (e.location, e.record) == (0, 1)
    assert "pairs by MPI's message order with the MpiSend at record 4, after it: a message " \
        "to self cannot be received before it is sent" in str(e)
    assert ("MPI_Intercomm_create" in str(e)) == intercomm


def test_a_message_to_self_sent_first_is_matched(tmp_path):
    path = tmp_path / "t.trace"
    body = SELF_BODY.replace("20 0 MpiRecv sender=0 comm=5 tag=5 bytes=8\n", "") \
        .replace("60 0 Leave region=2\n", "60 0 Leave region=2\n"
                 "70 0 Enter region=1\n80 0 MpiRecv sender=0 comm=5 tag=5 bytes=8\n"
                 "90 0 Leave region=1\n")
    path.write_text(SELF_HEAD.replace("REGION_EXTRA", "") + body)
    (x,) = match(read_text(str(path))).messages
    assert (x.send_idx, x.recv_idx) == (3, 6)


#: three locations on a world communicator, MPI_COMM_SELF (no members) and
#: communicator 8, which is not defined
_DEFS = Definitions(timer_resolution=10**9,
                    locations={i: Location(i, f"rank {i}", i) for i in (10, 11, 12)},
                    comms={0: Comm(0, "MPI_COMM_WORLD", (10, 11, 12)),
                           1: Comm(1, "MPI_COMM_SELF", ())})


@given(st.lists(st.tuples(st.sampled_from([0, 1, 8]), st.integers(-1, 4),
                          st.sampled_from([10, 11, 12])), max_size=30))
def test_peer_locations_equal_each_records_members(rows):
    """One members table per communicator gives, record by record, what
    ``members_of`` gives (MPI_COMM_SELF's one rank is the record's own location;
    a rank out of range or an undefined communicator: -1)."""
    comm, peer, here = (np.array([r[j] for r in rows], dtype=np.int64) for j in range(3))
    want = []
    for c, p, loc in rows:
        members = members_of(_DEFS, c, loc)
        want.append(members[p] if 0 <= p < len(members) else -1)
    assert peer_locations(_DEFS, comm, peer, here).tolist() == want
