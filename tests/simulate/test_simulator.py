"""Tests of the ground-truth simulator (compensate.simulate, compensate.simulate.programs)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from compensate.model import (
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OP_NAMES,
    KIND_CODE,
    PROBE,
    RECV,
    SEND,
    Trace,
)
from compensate.platform import Platform
from compensate.simulate import (
    Network,
    SimulationError,
    run_program,
    simulate,
)
from compensate.simulate import programs as P
from compensate.simulate.simulator import N_TO_N_OPS

ALL = sorted(P.PROGRAMS)
SENDS = {SEND, KIND_CODE["MpiIsend"]}
RECVS = {RECV, KIND_CODE["MpiIrecv"]}
NON_TIME = ("kind", "region", "peer", "comm", "tag", "size_recv", "op")


@pytest.fixture(scope="module")
def runs() -> dict:
    """Every program with its defaults (4 ranks), flush every 500 records as well."""
    return {name: simulate(name, overhead=1e-6, flush_every=500) for name in ALL}


def kinds(names: str) -> list[int]:
    return [KIND_CODE[n] for n in names.split()]


def assert_same_records(a: Trace, b: Trace) -> None:
    assert a.events.keys() == b.events.keys()
    for loc in a.events:
        ea, eb = a.events[loc], b.events[loc]
        assert len(ea) == len(eb), loc
        for col in NON_TIME:
            np.testing.assert_array_equal(getattr(ea, col), getattr(eb, col), err_msg=col)
        plain = ea.kind != BUFFER_FLUSH  # size holds the stop time on flushes
        np.testing.assert_array_equal(ea.size[plain], eb.size[plain])
        assert ea.payload == eb.payload


def check_happened_before(trace: Trace) -> None:
    """Per-location order, recv strictly after send, n-to-n End >= latest Begin."""
    d = trace.definitions
    sends = defaultdict(list)
    recvs = defaultdict(list)
    begins = defaultdict(list)
    ends = defaultdict(list)
    for loc, ev in trace.events.items():
        assert np.all(np.diff(ev.time) >= 0), f"time goes backwards on {loc}"
        rank_of = {m: r for r, m in enumerate(d.comms[0].members)}
        me = rank_of[loc]
        for i in range(len(ev)):
            k = int(ev.kind[i])
            if k in SENDS:
                sends[(me, int(ev.peer[i]), int(ev.comm[i]), int(ev.tag[i]))].append(ev.time[i])
            elif k in RECVS or (k == PROBE and ev.size_recv[i] >= 0):
                # a matched probe (MPI_Mprobe) takes the message: it, too, is after the send
                recvs[(int(ev.peer[i]), me, int(ev.comm[i]), int(ev.tag[i]))].append(ev.time[i])
            elif k == COLL_BEGIN:
                begins[loc].append(ev.time[i])
            elif k == COLL_END:
                ends[loc].append((ev.time[i], int(ev.op[i]), int(ev.comm[i])))
    assert sends.keys() == recvs.keys()
    n_msgs = 0
    for key, s in sends.items():
        r = recvs[key]
        assert len(s) == len(r), key
        assert all(rt > st for st, rt in zip(s, r, strict=True)), key
        n_msgs += len(s)
    counts = {len(v) for v in ends.values()}
    assert len(counts) <= 1
    for k in range(counts.pop() if counts else 0):
        ops = {ends[loc][k][1] for loc in ends}
        assert len(ops) == 1
        if COLLECTIVE_OP_NAMES[ops.pop()] in N_TO_N_OPS:
            latest = max(begins[loc][k] for loc in begins)
            assert all(ends[loc][k][0] >= latest for loc in ends)


@pytest.mark.parametrize("name", ALL)
def test_identical_records(runs, name):
    res = runs[name]
    assert_same_records(res.truth, res.measured)
    assert res.truth.record_count > 500


@pytest.mark.parametrize("name", ALL)
def test_happened_before_and_dilation(runs, name):
    res = runs[name]
    check_happened_before(res.truth)
    check_happened_before(res.measured)
    assert res.info["span_measured"] > res.info["span_truth"]


@pytest.mark.parametrize("name", ALL)
def test_zero_overhead_is_truth(name):
    res = simulate(name, overhead=0.0, flush_time=0.0, flush_every=300)
    for loc, ev in res.truth.events.items():
        np.testing.assert_array_equal(ev.time, res.measured.events[loc].time)
        np.testing.assert_array_equal(ev.size, res.measured.events[loc].size)
    assert_same_records(res.truth, res.measured)


def test_definitions(runs):
    res = runs["stencil"]
    d = res.truth.definitions
    assert d.timer_resolution == 10**9
    assert d.comms[0].name == "MPI_COMM_WORLD" and d.comms[0].members == (0, 1, 2, 3)
    assert sorted(d.locations) == [0, 1, 2, 3]
    assert all(loc.group == i for i, loc in d.locations.items())
    names = set(d.regions.values())
    assert {"main", "update", "MPI_Send", "MPI_Recv", "MPI_Allreduce"} <= names
    for ev in res.measured.events.values():
        assert ev.kind[0] == KIND_CODE["ProgramBegin"] and ev.kind[-1] == KIND_CODE["ProgramEnd"]
        assert ev.payload[0] == {"name": "stencil", "args": []}
        assert ev.payload[-1] == {"status": 0}


def test_flushes(runs):
    res = runs["imbalanced"]
    n = 0
    for loc, ev in res.measured.events.items():
        tev = res.truth.events[loc]
        flush = ev.kind == BUFFER_FLUSH
        n += int(flush.sum())
        # measured: stop - start = flush_time (50 us), truth: stop == start
        np.testing.assert_array_equal(ev.size[flush] - ev.time[flush], 50_000)
        np.testing.assert_array_equal(tev.size[flush], tev.time[flush])
    assert n > 4


# --- hand-checked tiny cases ---------------------------------------------------------
# O = 100 ns per record, copy(64) = 6.4 ns, net(64) = 1 us + 64 B / 5 GB/s = 1012.8 ns.

def tiny(ops: list[list[tuple]], **kw):
    platform = Platform(100e-9, {}, np.array([64.0]), np.array([6.4e-9]))
    prog = P.Program("tiny", ops)
    return run_program(prog, platform, network=Network(1e-6, 5e9), **kw)


def times(trace: Trace, loc: int) -> list[int]:
    return trace.events[loc].time.tolist()


def test_hand_checked_eager():
    res = tiny([[P.compute(1e-6), P.send(1, 64, 7)], [P.recv(0, 7)]])
    m, t = res.measured, res.truth
    # rank 0: ProgramBegin, Enter(main), Enter(MPI_Send), MpiSend, Leave(MPI_Send),
    # Leave(main), ProgramEnd
    assert m.events[0].kind.tolist() == kinds("ProgramBegin Enter Enter MpiSend Leave Leave "
                                              "ProgramEnd")
    assert m.events[1].kind.tolist() == kinds("ProgramBegin Enter Enter MpiRecv Leave Leave "
                                              "ProgramEnd")
    # measured: send at 1300; copy ends 1406.4; arrival 2419.2
    assert times(m, 0) == [0, 100, 1200, 1300, 1406, 1506, 1606]
    # receiver ready at 300, recv = 2419.2 + 6.4 = 2425.6
    assert times(m, 1) == [0, 100, 200, 2426, 2526, 2626, 2726]
    # truth: send at 1000; arrival 2019.2; recv 2025.6
    assert times(t, 0) == [0, 0, 1000, 1000, 1006, 1006, 1006]
    assert times(t, 1) == [0, 0, 0, 2026, 2026, 2026, 2026]
    ev = m.events[0]
    assert (ev.peer[3], ev.comm[3], ev.tag[3], ev.size[3]) == (1, 0, 7, 64)
    ev = m.events[1]
    assert (ev.peer[3], ev.comm[3], ev.tag[3], ev.size[3]) == (0, 0, 7, 64)


def test_hand_checked_ssend():
    res = tiny([[P.ssend(1, 64)], [P.compute(5e-6), P.recv(0)]])
    m, t = res.measured, res.truth
    # sender: MpiSend at 300 (t=400); receiver ready at 5300; arrival 5300 + 1019.2;
    # sender leaves at the arrival 6319.2, receiver records at 6325.6
    assert times(m, 0) == [0, 100, 200, 300, 6319, 6419, 6519]
    assert times(m, 1) == [0, 100, 5200, 6326, 6426, 6526, 6626]
    assert times(t, 0) == [0, 0, 0, 0, 6019, 6019, 6019]
    assert times(t, 1) == [0, 0, 5000, 6026, 6026, 6026, 6026]
    assert res.truth.definitions.regions[int(m.events[0].region[2])] == "MPI_Ssend"


def test_hand_checked_eager_limit_makes_send_synchronous():
    res = tiny([[P.send(1, 64)], [P.compute(5e-6), P.recv(0)]], eager_limit=32)
    assert times(res.measured, 0) == [0, 100, 200, 300, 6319, 6419, 6519]
    assert res.truth.definitions.regions[int(res.measured.events[0].region[2])] == "MPI_Send"


def test_hand_checked_barrier():
    res = tiny([[P.compute(2e-6), P.barrier()], [P.barrier()]])
    m, t = res.measured, res.truth
    # D = ceil(log2 2) * 1 us; Enter(main) at 100, work to 2200; Begin at 2300;
    # sync = latest Begin + O = 2400; End = 3400 on both
    assert times(m, 0) == [0, 100, 2200, 2300, 3400, 3500, 3600, 3700]
    assert times(m, 1) == [0, 100, 200, 300, 3400, 3500, 3600, 3700]
    assert times(t, 0) == [0, 0, 2000, 2000, 3000, 3000, 3000, 3000]
    assert times(t, 1) == [0, 0, 0, 0, 3000, 3000, 3000, 3000]
    end = m.events[0]
    assert COLLECTIVE_OP_NAMES[int(end.op[4])] == "BARRIER" and end.peer[4] == -1


def test_hand_checked_bcast_and_gather():
    # copy(64) = 6.4, net(64) = 1012.8 (ns)
    res = tiny([[P.bcast(64, 0), P.gather(64, 0)], [P.bcast(64, 0), P.gather(64, 0)]])
    m, t = res.measured, res.truth
    # root: Enter 200, Begin 300, End = 400 + copy(64) = 406.4;
    # other: Begin 300, ready 400, arrival 400 + 1019.2, End = 1419.2 + 6.4 = 1425.6
    # gather: other Begin 1725.6, End 1825.6 + 6.4 = 1832, arrival 2844.8;
    # root Begin 706.4 (after Leave 506.4, Enter 606.4), ready 806.4, End 2844.8 + 6.4
    assert times(m, 0) == [0, 100, 200, 300, 406, 506, 606, 706, 2851, 2951, 3051, 3151]
    assert times(m, 1) == [0, 100, 200, 300, 1426, 1526, 1626, 1726, 1832, 1932, 2032, 2132]
    assert times(t, 0) == [0, 0, 0, 0, 6, 6, 6, 6, 2051, 2051, 2051, 2051]
    assert times(t, 1) == [0, 0, 0, 0, 1026, 1026, 1026, 1026, 1032, 1032, 1032, 1032]
    e0, e1 = m.events[0], m.events[1]
    assert (e0.peer[4], e0.size[4], e0.size_recv[4]) == (0, 64, 0)
    assert (e1.peer[4], e1.size[4], e1.size_recv[4]) == (0, 0, 64)
    assert (e0.size[8], e0.size_recv[8]) == (0, 64)
    assert (e1.size[8], e1.size_recv[8]) == (64, 0)


def test_hand_checked_nonblocking():
    ops = [[P.isend(1, 64, 3, "s"), P.wait("s")],
           [P.irecv(0, 3, "r"), P.waitall(["r"])]]
    res = tiny(ops)
    m, t = res.measured, res.truth
    # sender: Enter 200, MpiIsend 300, copy -> 406.4 (arrival 1419.2), Leave 406.4,
    # Enter(Wait) 506.4, MpiIsendComplete 606.4, Leave 706.4, Leave(main) 806.4, End 906.4
    assert times(m, 0) == [0, 100, 200, 300, 406, 506, 606, 706, 806, 906]
    # receiver: Enter 200, IrecvRequest 300, Leave 400, Enter(Waitall) 500,
    # MpiIrecv = max(600, 1419.2) + 6.4
    assert times(m, 1) == [0, 100, 200, 300, 400, 500, 1426, 1526, 1626, 1726]
    assert times(t, 1) == [0, 0, 0, 0, 0, 0, 1026, 1026, 1026, 1026]
    ev = m.events[1]
    assert ev.kind[6] == KIND_CODE["MpiIrecv"]
    assert (ev.peer[6], ev.tag[6], ev.size[6]) == (0, 3, 64)
    assert ev.request[3] == ev.request[6] == 1  # the request id column
    assert m.events[0].request[3] == m.events[0].request[6] == 1


def test_hand_checked_flush_and_offsets():
    res = tiny([[P.flush(), P.compute(1e-6)]], flush_time=1e-6, start_offsets=[5e-6])
    m, t = res.measured, res.truth
    # ProgramBegin 5000, Enter 5100, BufferFlush 5200 (stop 6200), Leave 6200+100+1000
    assert times(m, 0) == [5000, 5100, 5200, 7300, 7400]
    assert m.events[0].size[2] == 6200
    assert times(t, 0) == [5000, 5000, 5000, 6000, 6000]
    assert t.events[0].size[2] == 5000


def test_hand_checked_flush_inside_a_receive():
    """flush_after("Enter"): the flush lies between Enter(MPI_Recv) and MpiRecv and
    delays the receiver's readiness (docs/design.md §3 R6)."""
    res = tiny([[P.compute(5e-6), P.send(1, 64)],
                [P.flush_after("Enter"), P.recv(0)]], flush_time=1e-6)
    m, t = res.measured, res.truth
    kinds = m.events[1].kind.tolist()
    assert kinds[2:5] == [KIND_CODE["Enter"], BUFFER_FLUSH, RECV]
    # rank 1: ProgramBegin 0, Enter main 100, Enter MPI_Recv 200, BufferFlush 300
    # (stop 1300); rank 0's MpiSend is at 200 + 5000 + 100 = 5300, the message left
    # at 5300 + 100 + 6.4 and arrives 1012.8 later (6419.2), after the flush ended:
    # absorbed by the wait; MpiRecv = 6419.2 + 6.4 -> 6426
    assert times(m, 1)[:5] == [0, 100, 200, 300, 6426]
    assert m.events[1].size[3] == 1300
    # truth: no overhead, a zero-length flush: arrival 5000 + 6.4 + 1012.8, + 6.4
    assert times(t, 1)[3:5] == [0, 6026]


def test_hand_checked_flush_inside_a_collective():
    """flush_after("MpiCollectiveBegin"): the flushing member joins at the flush's
    end, so a late flush delays every exit."""
    res = tiny([[P.flush_after("MpiCollectiveBegin"), P.barrier()], [P.barrier()]],
               flush_time=1e-6)
    m = res.measured
    assert m.events[0].kind.tolist()[3:6] == [COLL_BEGIN, BUFFER_FLUSH, COLL_END]
    # rank 0: Enter 200, Begin 300, flush 400..1400, joined 1500; barrier of 2 ranks
    # takes 1 latency step (1 us): both exits at 2500
    assert m.events[0].time[5] == m.events[1].time[4] == 2500


# --- wildcards, rendezvous, errors ---------------------------------------------------

def resolved_sources(trace: Trace, tag: int) -> list[int]:
    ev = trace.events[0]
    sel = (ev.kind == RECV) & (ev.tag == tag)
    return ev.peer[sel].tolist()


def test_wildcard_resolution_is_replayed(runs):
    res = runs["montecarlo"]
    measured = resolved_sources(res.measured, P.TAG_REQUEST)
    assert measured == resolved_sources(res.truth, P.TAG_REQUEST)
    assert measured == res.info["wildcard_sources"][0]
    assert len(set(measured)) == 3
    # each reply goes back to the requester
    ev = res.measured.events[0]
    replies = ev.peer[(ev.kind == SEND)].tolist()
    assert replies == measured


def test_wildcard_takes_first_arrival():
    # rank 1 sends late, rank 2 early: the master takes rank 2 first
    ops = [[P.compute(2e-5), P.recv(P.ANY_SOURCE), P.recv(P.ANY_SOURCE)],
           [P.compute(1e-5), P.send(0, 64)],
           [P.send(0, 64)]]
    res = tiny(ops)
    assert resolved_sources(res.measured, 0) == [2, 1]
    assert resolved_sources(res.truth, 0) == [2, 1]


def test_rendezvous_programs():
    res = simulate("pingpong", ranks=4, eager_limit=4096)
    assert_same_records(res.truth, res.measured)
    check_happened_before(res.measured)
    check_happened_before(res.truth)


def test_deadlock_reported():
    with pytest.raises(SimulationError, match="deadlock"):
        simulate("stencil", iterations=2, eager_limit=1024)


def test_start_offsets_and_seed():
    a = simulate("ring", iterations=5, start_offsets=[0, 1e-5, 2e-5, 3e-5])
    assert a.truth.events[3].time[0] == 30_000
    b = simulate("ring", iterations=5, seed=1)
    c = simulate("ring", iterations=5, seed=1)
    assert b.measured.events[0].time.tolist() == c.measured.events[0].time.tolist()


def test_unknown_program():
    with pytest.raises(SimulationError, match="unknown program"):
        simulate("nope")


def test_a_regions_own_overhead():
    """``event_overhead_by_region`` (``overhead_before_stamp_by_region``): an
    Enter/Leave of that region costs the entry's O (pre) instead of its kind's;
    other regions' records their kind's."""
    plat = Platform(1e-7, {"Leave": 6e-8}, overhead_by_region={"f": {"Enter": 3e-7}},
                    before_stamp_by_region={"f": {"Leave": 4e-8}})
    prog = P.Program("one call", [[P.call("f", 1e-6), P.call("g", 2e-6)]], {})
    sim = run_program(prog, plat, quantize=True)
    # ProgramBegin (O 100), Enter main (100), Enter f (300: f's), Leave f (60 by kind,
    # 40 of them before its stamp: f's), Enter g (100), Leave g (60), Leave main (60)
    assert sim.measured.events[0].time.tolist() == [0, 100, 200, 1540, 1560, 3660, 3720, 3780]
    assert sim.truth.events[0].time.tolist() == [0, 0, 0, 1000, 1000, 3000, 3000, 3000]


def test_part_of_the_overhead_before_the_stamp():
    """``overhead_before_stamp``: emitting a record spends that part, stamps, then
    spends the rest; the truth run stamps as before (no overhead)."""
    plat = Platform(1e-7, {"Leave": 6e-8}, before_stamp={"Enter": 3e-8, "Leave": 6e-8})
    prog = P.Program("one call", [[P.call("f", 1e-6), P.call("f", 2e-6)]], {})
    sim = run_program(prog, plat, quantize=True)
    # ProgramBegin (O 100, all after), Enter main, Enter f, Leave f (O 60, all before),
    # Enter f, Leave f, Leave main, ProgramEnd
    assert sim.measured.events[0].time.tolist() == [0, 130, 230, 1360, 1390, 3520, 3580, 3580]
    assert sim.truth.events[0].time.tolist() == [0, 0, 0, 1000, 1000, 3000, 3000, 3000]
