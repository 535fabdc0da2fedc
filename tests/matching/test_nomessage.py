"""Point-to-point records that carry no message the matching can identify
(compensate.matching.nomessage): MPI_PROC_NULL peers, receives whose status no
send fits. Left local, counted, never paired with a wrong send; everything else
is matched as before, and the run verifies on every path."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compensate as c
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.nomessage import last_balance
from compensate.model import IRECV, ISEND, NONE, RECV, SEND, TraceError
from tests.inprocess import run_compensate

DATA = Path(__file__).resolve().parents[1] / "data" / "eztrace"

HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="rank 0"
location 1 group=1 name="rank 1"
region 1 "MPI_Send"
region 2 "{call}"
comm 0 "MPI_COMM_WORLD" 0,1
events
"""


def _trace(tmp_path, call: str, tags: list[int], recv_tags: list[int]):
    """Rank 0 sends one message per tag of ``tags``; rank 1 receives one per tag of
    ``recv_tags``, each in a call of region ``call``, after the sends."""
    lines = []
    for k, tag in enumerate(tags):
        t = 100 + 30 * k
        lines += [f"{t} 0 Enter region=1", f"{t + 5} 0 MpiSend receiver=1 comm=0 tag={tag} "
                  "bytes=8", f"{t + 10} 0 Leave region=1"]
    for k, tag in enumerate(recv_tags):
        t = 1000 + 30 * k
        lines += [f"{t} 1 Enter region=2", f"{t + 5} 1 MpiRecv sender=0 comm=0 tag={tag} "
                  "bytes=8", f"{t + 10} 1 Leave region=2"]
    path = tmp_path / "t.trace"
    path.write_text(HEAD.format(call=call) + "\n".join(sorted(lines, key=lambda x: int(
        x.split()[0]))) + "\n")
    return read_text(str(path))


def _received_tags(trace, m) -> list[int]:
    t = m.table
    return sorted(int(trace.events[1].tag[i]) for i in t.recv_idx[~t.probe].tolist())


@pytest.mark.parametrize("bad", [0, 1, 2])
def test_a_receive_naming_no_rank_leaves_itself_and_its_later_receives(tmp_path, bad):
    """Three messages, tags 1, 2, 3; receive ``bad`` names rank 7 of a 2-rank
    communicator: it and the receives after it stay local, the ones before it are
    matched to their own sends, and the sends they took are unmatched."""
    trace = _trace(tmp_path, "MPI_Waitsome", [1, 2, 3], [1, 2, 3])
    recv = np.flatnonzero(trace.events[1].kind == RECV)
    trace.events[1].peer[recv[bad]] = 7
    m = match(trace)
    assert _received_tags(trace, m) == [1, 2, 3][:bad]
    assert m.unmatched_sends == 3 - bad
    deps = m.counts()
    assert (deps["proc_null_records"], deps["unidentified_receives"],
            deps["receives_left_unmatched"]) == (0, 1, 2 - bad)
    r = c.compensate(trace, bound="lower", overhead=2e-9)
    assert r.summary["verification"]["ok"]


def test_an_undefined_length_is_an_unidentified_receive(tmp_path):
    """A receive whose length OTF2 gives as 2^63 bytes or more (NONE in the column)."""
    trace = _trace(tmp_path, "MPI_Waitsome", [1, 2], [1, 2])
    recv = np.flatnonzero(trace.events[1].kind == RECV)
    trace.events[1].size[recv[1]] = NONE
    m = match(trace)
    assert _received_tags(trace, m) == [1]
    assert m.counts()["unidentified_receives"] == 1


def test_proc_null_sends_and_receives_carry_no_message(tmp_path):
    """A send to and a receive from MPI_PROC_NULL (peer UNDEFINED) between two real
    messages: both stay local and the real messages pair as before."""
    trace = _trace(tmp_path, "MPI_Recv", [1, 5, 2], [1, 6, 2])
    for loc, kind in ((0, SEND), (1, RECV)):
        idx = np.flatnonzero(trace.events[loc].kind == kind)
        trace.events[loc].peer[idx[1]] = NONE
    m = match(trace)
    assert _received_tags(trace, m) == [1, 2]
    assert m.unmatched_sends == 0
    assert m.counts()["proc_null_records"] == 2
    assert c.compensate(trace, bound="lower", overhead=2e-9).summary["verification"]["ok"]


def test_open_mpis_proc_null_is_mpi_proc_null_on_both_readers():
    """Open MPI's MPI_PROC_NULL is -2, which EZTrace's openmpi module writes into
    OTF2's uint32 peer (4294967294; MPICH's -1 is OTF2's UNDEFINED): the same
    program as procnull/, traced with Open MPI, has its PROC_NULL sends and
    receives (and the MpiIrecv completions Open MPI's EZTrace writes for them) as
    records of no message, on the otf2 package's path and on the C path."""
    from compensate.formats import read_chunks
    from compensate.formats.otf2 import native

    anchor = DATA / "procnull-openmpi" / "eztrace_log.otf2"
    trace = c.read(anchor)
    assert match(trace).counts()["proc_null_records"] == _p2p_without_peer(trace) == 16
    if native.available():
        defs, chunks = read_chunks(str(anchor), 1 << 20, payload=False)
        assert defs.otf2.native_source == str(anchor)
        for chunk in chunks:
            for loc, ev in chunk.items():
                assert np.array_equal(ev.peer, trace.events[loc].peer)
    for ev in trace.events.values():
        assert not np.any(ev.peer == -2)


@pytest.mark.parametrize("call, accepted", [("MPI_Waitsome", True), ("MPI_Testall", True),
                                            ("MPI_Recv", False), ("MPI_Wait", False)])
def test_a_receive_without_a_send_is_refused_unless_its_status_came_from_an_array(
        tmp_path, call, accepted):
    """Tag 9 has no send. In a call that completes an array of requests (EZTrace
    2.0's MPI_Waitsome writes statuses no send fits) it is left with the receives
    after it; in a call of one request the trace does not hold its send: refused."""
    trace = _trace(tmp_path, call, [1, 2], [1, 9, 2])
    if not accepted:
        with pytest.raises(TraceError, match="record 4: MpiRecv from location 0 .comm 0, "
                                             "tag 9. has no matching send"):
            match(trace)
        return
    m = match(trace)
    assert _received_tags(trace, m) == [1]
    assert m.unmatched_sends == 1
    assert (m.counts()["unidentified_receives"], m.counts()["receives_left_unmatched"]) \
        == (1, 1)


def _p2p_without_peer(trace) -> int:
    n = 0
    for ev in trace.events.values():
        p2p = np.isin(ev.kind, [SEND, ISEND, RECV, IRECV])
        n += int(np.count_nonzero(p2p & (ev.peer == NONE)))
    return n


@pytest.mark.parametrize("name", ["procnull", "procnull-openmpi", "requests"])
def test_eztrace_archives_compensate_alike_in_memory_streamed_and_by_rank(tmp_path, name):
    """EZTrace 2.0 archives (tests/data/eztrace/README.md): a non-periodic halo whose
    edge ranks send to and receive from MPI_PROC_NULL, and MPI_Waitsome; the counts
    are the trace's own, and every way of running gives the same output."""
    anchor = DATA / name / "eztrace_log.otf2"
    trace = c.read(anchor)
    deps = match(trace).counts()
    assert deps["proc_null_records"] == _p2p_without_peer(trace)
    assert deps["unidentified_receives"] > 0
    outs = {}
    for mode in (["--in-memory"], ["--segment-records", "16"]):
        out = tmp_path / mode[0].strip("-") / "traces.otf2"
        summary = tmp_path / f"{mode[0].strip('-')}.json"
        done = run_compensate(anchor, out, "--overhead", "50ns", "--summary", summary, *mode)
        assert done.returncode == 0, done.stderr
        assert "no send in the trace fits" in done.stderr
        outs[mode[0]] = (c.read(out), summary.read_text())
    (a, sa), (b, sb) = outs.values()
    for loc in a.events:
        assert np.array_equal(a.events[loc].time, b.events[loc].time)
    assert json.loads(sa)["dependencies"] == json.loads(sb)["dependencies"]


@pytest.mark.parametrize("name", ["procnull", "procnull-openmpi", "requests"])
def test_the_eztrace_archives_by_rank_as_in_one_process(name):
    """Each location a thread rank of its own (trimmed views): the one-process output."""
    from compensate.platform import Platform
    from tests.parallel.test_parity import assert_parity, both

    trace = c.read(DATA / name / "eztrace_log.otf2")
    one, par = both(trace, Platform(5e-8), "lower", size=len(trace.events))
    assert_parity(one, par)


#: rank 0 sends 64 bytes, then 32, on one channel; rank 1 receives 32, then 64 (as
#: EZTrace writes an MPI_Isend on a duplicate of MPI_COMM_WORLD and an MPI_Send on
#: MPI_COMM_WORLD itself, received in the other order)
CROSSED = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1
region 1 "MPI_Send"
region 2 "MPI_Recv"
{extra}comm 0 "MPI_COMM_WORLD" 0,1
events
100 0 Enter region=1
110 0 MpiSend receiver=1 comm=0 tag=0 bytes=64
120 0 Leave region=1
130 0 Enter region=1
140 0 MpiSend receiver=1 comm=0 tag=0 bytes=32
150 0 Leave region=1
200 1 Enter region=2
210 1 MpiRecv sender=0 comm=0 tag=0 bytes=32
220 1 Leave region=2
230 1 Enter region=2
240 1 MpiRecv sender=0 comm=0 tag=0 bytes=64
250 1 Leave region=2
"""


@pytest.mark.parametrize("dup", [False, True])
def test_a_receive_of_another_length_than_its_send_is_refused_saying_why(tmp_path, dup):
    """MPI's order pairs the 32-byte receive with the 64-byte send: not one message,
    refused at the receive; where the program calls MPI_Comm_dup the line adds the
    other cause (EZTrace writes a duplicate's messages as its parent's)."""
    path = tmp_path / "t.trace"
    path.write_text(CROSSED.format(extra='region 3 "MPI_Comm_dup"\n' if dup else ""))
    with pytest.raises(TraceError) as err:
        match(read_text(str(path)))
    assert (err.value.location, err.value.record) == (1, 1)
    clause = (" or holds two channels in one (the program calls MPI_Comm_dup, and EZTrace "
              "2.0 writes the messages on a duplicate as on its parent communicator)")
    assert str(err.value).endswith(
        "MpiRecv of 32 bytes pairs by MPI's message order with the MpiSend of 64 bytes on "
        "location 0, record 1: the trace lacks receives or sends of this channel (as "
        "EZTrace writes no receive for an MPI_Irecv completed in MPI_Wait or MPI_Waitall)"
        f"{clause if dup else ''}, so its messages cannot be paired")


def test_last_balance_by_hand():
    """Channel 0: sends 10, 30, 40; receives 25, 60. j = 1 balances in (25, 30];
    j = 2 needs max(30, 60) < 40: no. Channel 1: sends 10, 20, 50; receives 15, 30:
    j = 2 balances in (30, 50] (only its last send is lost). Channel 2: as many
    receives as sends (their count). Channel 3: sends 10, 20, one receive at 25,
    after both: nothing balances (either send may be its)."""
    s_key = np.array([0, 0, 0, 1, 1, 1, 2, 3, 3])
    s_time = np.array([10, 30, 40, 10, 20, 50, 7, 10, 20])
    r_key = np.array([0, 0, 1, 1, 2, 3])
    r_time = np.array([60, 25, 15, 30, 9, 25])
    assert last_balance(s_key, s_time, r_key, r_time, 4).tolist() == [1, 2, 1, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 40), st.booleans()),
                min_size=1, max_size=12))
def test_receives_before_the_last_balance_point_are_their_true_sends(msgs):
    """One channel, simulated: message k is sent at the k-th of increasing times and
    received (in order, non-overtaking) a transfer later, recorded or not. Every
    pair the rule keeps is a true one; where the lost receives are the last ones
    and the last recorded receive comes before the first lost one's send, every
    recorded receive pairs (after that send, the trace cannot tell)."""
    sends, recvs, t, last = [], [], 0, -1
    for gap, transfer, recorded in msgs:
        t += 2 * gap  # (sends at even times, receives at odd ones: no ties)
        sends.append(t)
        last = max(last + 2, t + 2 * transfer + 1)  # (receives complete in order)
        if recorded:
            recvs.append((last, len(sends) - 1))
    r_time = np.array([r for r, _ in recvs], dtype=np.int64)
    m = last_balance(np.zeros(len(sends), np.int64), np.array(sends, np.int64),
                     np.zeros(len(recvs), np.int64), r_time, 1)[0]
    truth = [k for _, k in recvs]
    assert truth[:m] == list(range(m))  # the first m receives took sends 0..m-1
    n = len(truth)
    if truth == list(range(n)) and (n == len(sends) or n == 0 or r_time[-1] < sends[n]):
        assert m == n  # lost only at the end, after the last recorded receive: all pair


@pytest.mark.parametrize("mode", [["--in-memory"], ["--segment-records", "16"]])
def test_a_ring_with_gaps_pairs_only_before_them(tmp_path, mode):
    """gaps/: every channel holds 18 sends and 15 receives, and a receive EZTrace did
    not record in its third iteration: its first 4 receives pair with their own
    sends (the same iteration's), the 11 after the gap are local, on every path;
    streamed, the look-ahead names those receives and the sends after the gap, and
    the stream cuts after the gap too."""
    anchor = DATA / "gaps" / "eztrace_log.otf2"
    trace = c.read(anchor)
    m = match(trace)
    assert m.unrecorded()["receives_past_a_gap"] == 33 and len(m.messages) == 12
    for x in m.messages:  # (the k-th send of a rank is iteration k // 2's)
        ev_s, ev_r = trace.events[x.send_loc], trace.events[x.recv_loc]
        k_s = int(np.count_nonzero(ev_s.kind[:x.send_idx] == SEND))
        k_r = int(np.count_nonzero(ev_r.kind[:x.recv_idx] == RECV))
        assert k_s == k_r < 4
    out, summary = tmp_path / "o" / "traces.otf2", tmp_path / "s.json"
    done = run_compensate(anchor, out, "--overhead", "50ns", "--summary", summary, *mode)
    assert done.returncode == 0, done.stderr
    assert "33 receives come after a gap on their channel" in done.stderr
    s = json.loads(summary.read_text())
    assert s["dependencies"]["receives_past_a_gap"] == 33
    assert s["dependencies"]["messages"] == 12 if "messages" in s["dependencies"] else True
    if mode[0] == "--segment-records":
        assert s["segments"]["count"] > 10 and s["segments"]["largest"] < 100


def test_a_ring_with_gaps_by_rank_as_in_one_process():
    """Each location a thread rank of its own (trimmed views): the one-process output."""
    from compensate.platform import Platform
    from tests.parallel.test_parity import assert_parity, both

    trace = c.read(DATA / "gaps" / "eztrace_log.otf2")
    for size in (len(trace.events), 2):
        one, par = both(trace, Platform(5e-8), "lower", size=size)
        assert_parity(one, par)
