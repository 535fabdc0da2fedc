"""The independent verifier (compensate/verify/checks.py) catches each kind of
happened-before violation it is there for, on traces whose times were broken by
hand, and names the record; unbroken traces pass."""

import numpy as np
import pytest

from compensate.families import CHECKS
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.verify import verify

from ..conftest import CASES


def broken(trace, loc, idx, time):
    """``trace`` with record ``idx`` of ``loc`` moved to ``time``."""
    times = {k: ev.time.copy() for k, ev in trace.events.items()}
    times[loc][idx] = time
    return trace.with_times(times)


@pytest.mark.parametrize("path", sorted(CASES.glob("*.trace")), ids=lambda p: p.stem)
def test_measured_cases_verify(path):
    trace = read_text(str(path))
    assert verify(trace, match(trace)).ok


def test_one_check_per_family():
    assert [c.__name__ for c in CHECKS] == ["verify_order", "verify_messages",
                                            "verify_collectives", "verify_threads",
                                            "verify_devices", "verify_tasks",
                                            "verify_partitioned", "verify_rma"]


@pytest.mark.parametrize("loc,idx,time,what", [
    (1, 0, 1100, "fork"),  # the worker's TeamBegin at its fork's time
    (0, 4, 1999, "join"),  # the master's Join before the worker's TeamEnd
])
def test_thread_fork_and_join(loc, idx, time, what):
    trace = read_text(str(CASES / "r8_fork_join.trace"))
    m = match(trace)
    v = verify(broken(trace, loc, idx, time), m)
    assert v.threads == 1 and v.violations == 1
    assert f"location {loc}, record {idx}: thread {what}" in v.examples[0]


def test_thread_lock():
    trace = read_text(str(CASES / "r8_lock.trace"))
    m = match(trace)
    v = verify(broken(trace, 1, 1, 1300), m)  # acquired at the previous release
    assert v.threads == 1
    assert "thread lock not after location 0, record 2" in v.examples[0]


def test_thread_barrier():
    """r8_barrier: the worker (location 1) entered the barrier last (1800); the master
    leaving it (record 4) earlier is a violation, leaving at that very time is not."""
    trace = read_text(str(CASES / "r8_barrier.trace"))
    m = match(trace)
    v = verify(broken(trace, 0, 4, 1799), m)
    assert v.threads == 1 and v.violations == 1
    assert "location 0, record 4: left a barrier before the last member" in v.examples[0]
    assert verify(broken(trace, 0, 4, 1800), m).ok


def test_order_within_a_location():
    trace = read_text(str(CASES / "r2_m1_a1.trace"))
    m = match(trace)
    v = verify(broken(trace, 0, 2, 500), m)  # the Leave before the MpiSend
    assert (v.order, v.messages, v.collectives) == (1, 0, 0)
    assert "location 0, record 2" in v.examples[0]


def test_receive_not_after_its_send():
    trace = read_text(str(CASES / "r2_m1_a1.trace"))
    m = match(trace)
    # the receive (location 1, record 1) at its send's time: not strictly after it
    send_t = int(trace.events[0].time[1])
    bad = broken(trace, 1, 1, send_t)
    bad = broken(bad, 1, 0, send_t - 10)  # keep location 1 in order
    v = verify(bad, m)
    assert (v.order, v.messages) == (0, 1)
    assert "receive not after its send" in v.examples[0]
    assert verify(broken(bad, 1, 1, send_t + 1), m).messages == 0


def test_plain_probe_not_after_the_send_of_its_message():
    """A plain MPI_Probe reports a message that exists: the probe (location 1, record
    5 of r5_probe) at or before the send of the message it found is a violation, and
    the probe, so checked, is not listed as carried local only."""
    trace = read_text(str(CASES / "r5_probe.trace"))
    m = match(trace)
    assert m.counts()["probes"] == 1 and m.counts()["messages"] == 1
    v = verify(trace, m)
    assert v.ok and v.carried_local_only == {}
    send_t = int(trace.events[0].time[1])
    times = {k: ev.time.copy() for k, ev in trace.events.items()}
    times[1][:6] = np.minimum(times[1][:6], send_t)  # the probe and all before it
    v = verify(trace.with_times(times), m)
    assert (v.order, v.messages) == (0, 1)
    assert "location 1, record 5: probe not after the send of the message it found" \
        in v.examples[0]
    # a probe matching leaves out (no message of its key received after it) stays local
    lonely = read_text(str(CASES / "r5_probe.trace"))
    lonely.events[1].tag[5] = 8
    m = match(lonely)
    assert m.counts()["probes"] == 0
    assert verify(lonely, m).carried_local_only == {"MpiProbe": 1}


def test_nton_exit_before_the_last_enter():
    trace = read_text(str(CASES / "r3_nton.trace"))
    m = match(trace)
    # location 2 leaves the Allreduce (record 2) before location 1 entered it (1300)
    v = verify(broken(trace, 2, 2, 1250), m)
    assert v.collectives == 1 and v.order == 0
    assert "collective exit before the enter of location 1" in v.examples[0]


def test_gather_root_exit_before_a_member_enter():
    trace = read_text(str(CASES / "r5_gather.trace"))
    m = match(trace)
    root_end = int(np.flatnonzero(trace.events[0].time == 2500)[0])  # MpiCollectiveEnd
    # the root's exit at location 2's enter (2100): an implied message, so it must be
    # strictly later; location 1's enter (1300) is still before it
    v = verify(broken(trace, 0, root_end, 2100), m)
    assert (v.collectives, v.order) == (1, 0)
    assert "before the enter of location 2" in v.examples[0]
    assert verify(broken(trace, 0, root_end, 2101), m).ok


def test_synchronous_send_returns_before_the_receive_was_posted():
    trace = read_text(str(CASES / "r5_ssend_receiver_late.trace"))
    m = match(trace)
    assert m.table.synchronous.all()
    # the MPI_Ssend's Leave (location 0, record 2) before MPI_Recv was entered (2000)
    v = verify(broken(trace, 0, 2, 1999), m)
    assert (v.order, v.messages) == (0, 1)
    assert "synchronous send returned before its receive was posted" in v.examples[0]
    assert verify(broken(trace, 0, 2, 2000), m).ok


def test_issend_completes_before_the_receive_was_posted():
    """An MPI_Issend's completion (MpiIsendComplete, location 0 record 6) before the
    receive was posted (Enter(MPI_Recv) at 1100) is a violation (issue 16)."""
    trace = read_text(str(CASES / "r5_issend.trace"))
    m = match(trace)
    assert m.table.synchronous.all() and int(m.table.send_exit_idx[0]) == 6
    bad = broken(broken(trace, 0, 6, 1050), 0, 5, 1000)
    v = verify(bad, m)
    assert (v.messages, v.order) == (1, 0)
    assert "synchronous send returned before its receive was posted" in v.examples[0]
    assert verify(broken(trace, 0, 6, 1100), m).ok


def test_create_handle_exit_before_the_last_enter():
    trace = read_text(str(CASES / "r5_handles.trace"))
    m = match(trace)
    # location 1 leaves MPI_Comm_dup (MpiCollectiveEnd, record 4) before location 0's
    # begin (1100): a synchronising creation forbids it
    v = verify(broken(broken(trace, 1, 4, 1050), 1, 3, 1040), m)
    assert v.collectives >= 1 and "collective exit before the enter of location 0" in \
        " ".join(v.examples)


def test_local_free_has_no_dependency():
    """The free of r5_handles.trace did not synchronise: moving location 0's exit far
    before location 1's enter is no violation."""
    trace = read_text(str(CASES / "r5_handles.trace"))
    m = match(trace)
    assert not m.instances[1].synchronising
    assert verify(trace, m).ok


def test_nonblocking_gather_root_completes_before_a_member_request():
    trace = read_text(str(CASES / "r5_igather.trace"))
    m = match(trace)
    (inst,) = m.instances
    assert inst.nonblocking and inst.cls == "n-to-1"
    # the root's completion (location 0, record 4) at location 2's request (2100)
    v = verify(broken(trace, 0, 4, 2100), m)
    assert v.collectives == 1 and "before the enter of location 2" in v.examples[0]
    assert verify(broken(trace, 0, 4, 2101), m).ok


def test_nonblocking_bcast_member_completes_before_the_root_request():
    trace = read_text(str(CASES / "r5_ibcast.trace"))
    m = match(trace)
    # the member's completion (location 1, record 6) at the root's request (1100)
    bad = trace
    for i, t in zip(range(1, 7), (1000, 1001, 1002, 1003, 1004, 1100), strict=True):
        bad = broken(bad, 1, i, t)
    v = verify(bad, m)
    assert v.collectives == 1 and v.order == 0


@pytest.mark.parametrize("name,recv", [("r5_mrecv", 1), ("r5_imrecv", 1)])
def test_matched_receive_before_its_send(name, recv):
    """A matched probe (the MpiProbe of MPI_Mprobe/Improbe) is its message's receive
    record (issue 16): moved (with the records before it) to before the send
    (location 0, record 1), it is a violation."""
    trace = read_text(str(CASES / f"{name}.trace"))
    m = match(trace)
    send_t = int(trace.events[0].time[1])
    bad = trace
    for i in range(recv + 1):
        bad = broken(bad, 1, i, send_t - 10)
    v = verify(bad, m)
    assert v.messages == 1 and f"record {recv}: receive not" in v.examples[0]


def test_thread_lock_implied_is_still_checked():
    """r8_lock_regions: the hand-over from one parallel region to the next is implied
    by the join and the fork (timed as an ordering only) and still verified."""
    trace = read_text(str(CASES / "r8_lock_regions.trace"))
    m = match(trace)
    assert [s.implied for s in m.threads.syncs if s.kind == "lock"] == [True]
    v = verify(broken(trace, 1, 3, 1600), m)  # acquired at the previous release
    assert v.threads == 1  # (and before its own TeamBegin: an order violation too)
    assert any("thread lock not after location 0, record 4" in e for e in v.examples)
