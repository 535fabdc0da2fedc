"""The stream cutter's look-ahead (compensate.pipeline.unclosed): which requests
and sends a trace never closes, by hand, and the cuts the cutter makes with it."""

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import compensate as c
from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    ENTER,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    LEAVE,
    NONE,
    RECV,
    REQUEST_CANCELLED,
    SEND,
    Comm,
    Definitions,
    Location,
    Trace,
)
from compensate.pipeline.cuts import AHEAD, Cutter, cut_segments
from compensate.pipeline.unclosed import add_counts, scan, scan_part
from tests.pipelines import trace_chunks
from tests.rowbuilder import RowBuilder

REGIONS = {1: "MPI_Send", 2: "MPI_Recv", 3: "MPI_Isend", 4: "MPI_Irecv", 5: "MPI_Wait",
           6: "work", 7: "MPI_Ibarrier"}


def _trace(rows: list[list[tuple]]) -> Trace:
    """A trace of ``rows[loc]``: (kind, keyword columns) each, a time step apart."""
    events = {}
    for loc, records in enumerate(rows):
        b = RowBuilder()
        for t, (kind, cols) in enumerate(records):
            b.add(10 * t + loc, kind, **cols)
        events[loc] = b.build()
    defs = Definitions(timer_resolution=1_000_000_000,
                       locations={i: Location(i, f"rank {i}", i) for i in range(len(rows))},
                       regions=dict(REGIONS),
                       comms={0: Comm(0, "MPI_COMM_WORLD", tuple(range(len(rows))))})
    return Trace(defs, events, "<hand>")


def _call(region, kind, **cols):
    return [(ENTER, {"region": region}), (kind, cols), (LEAVE, {"region": region})]


def test_hand_case():
    """Rank 0 sends three messages on (0 -> 1, tag 5), one to MPI_PROC_NULL, one
    Isend it cancels and one on tag 6; rank 1 receives one on tag 5 and one on tag
    6, posts an Irecv no record completes and reuses an Irecv id while it is open.
    Never closed: the second and third sends on tag 5 (not the cancelled Isend nor
    the MPI_PROC_NULL send), the open Irecv and the first Irecv of the reused id."""
    r0 = [*_call(1, SEND, peer=1, comm=0, tag=5, size=8),              # 0-2: received
          *_call(3, ISEND, peer=1, comm=0, tag=5, size=8, request=9),  # 3-5: cancelled
          (REQUEST_CANCELLED, {"request": 9}),                          # 6
          *_call(1, SEND, peer=1, comm=0, tag=5, size=8),              # 7-9: 8 never
          *_call(1, SEND, peer=NONE, comm=0, tag=5, size=8),           # 10-12: PROC_NULL
          *_call(3, ISEND, peer=1, comm=0, tag=5, size=8, request=4),  # 13-15: 14 never
          (ISEND_COMPLETE, {"request": 4}),                             # 16: completed
          *_call(1, SEND, peer=1, comm=0, tag=6, size=8)]              # 17-19: received
    r1 = [*_call(2, RECV, peer=0, comm=0, tag=5, size=8),              # 0-2
          *_call(4, IRECV_REQUEST, request=7),                          # 3-5: reused open
          *_call(4, IRECV_REQUEST, request=7),                          # 6-8
          (IRECV, {"peer": 0, "comm": 0, "tag": 6, "size": 8, "request": 7}),  # 9
          *_call(4, IRECV_REQUEST, request=3)]                          # 10-12: never
    u = scan(_trace([r0, r1]).definitions, trace_chunks(_trace([r0, r1]), 4))
    assert {k: v.tolist() for k, v in u.sends.items()} == {0: [8, 14]}
    assert {k: v.tolist() for k, v in u.requests.items()} == {1: [4, 11]}
    assert u.of("sends", 0, 10, 20).tolist() == [4]


def test_a_receive_more_than_its_channel_sends_names_no_sends():
    """A receive no send of the trace can have sent (a status the tracer got wrong)
    closes a message in the cutter's busy function: no send is named then."""
    r0 = [*_call(1, SEND, peer=1, comm=0, tag=5, size=8),
          *_call(1, SEND, peer=1, comm=0, tag=5, size=8)]
    r1 = [*_call(2, RECV, peer=0, comm=0, tag=9, size=8)]
    trace = _trace([r0, r1])
    assert scan(trace.definitions, trace_chunks(trace, 4)).sends == {}


def test_a_channel_with_a_gap_names_its_sends_and_receives_past_it():
    """Rank 0 sends twice on tag 5 (records 1 at 10 and 4 at 40) and twice on tag 6
    (7 at 70, 10 at 100); rank 1 receives one of each: tag 5's at 51 (record 5),
    after both its sends (either may be its: a gap before its last balance point,
    which is the channel's start: both sends and the receive are named, the
    receive as past the gap), tag 6's at 91, before the second send (only the last
    send is never received: named). Read in parts (each rank its own location,
    the counts summed), the sender's part finds the gap and the receiver's part its
    balance point, and each names its own location's records as the whole does;
    without the balance, the channel with a gap stays open."""
    r0 = [*_call(1, SEND, peer=1, comm=0, tag=5, size=8),
          *_call(1, SEND, peer=1, comm=0, tag=5, size=8),
          *_call(1, SEND, peer=1, comm=0, tag=6, size=8),
          *_call(1, SEND, peer=1, comm=0, tag=6, size=8)]
    r1 = [(ENTER, {"region": 6}), (LEAVE, {"region": 6}), (ENTER, {"region": 6}),
          (LEAVE, {"region": 6}), *_call(2, RECV, peer=0, comm=0, tag=5, size=8),
          (ENTER, {"region": 6}), *_call(2, RECV, peer=0, comm=0, tag=6, size=8)]
    trace = _trace([r0, r1])
    assert (int(trace.events[1].time[5]), int(trace.events[1].time[9])) == (51, 91)
    u = scan(trace.definitions, trace_chunks(trace, 3))
    assert {k: v.tolist() for k, v in u.sends.items()} == {0: [1, 4, 10]}
    assert {k: v.tolist() for k, v in u.receives.items()} == {1: [5]}
    defs = trace.definitions
    parts = [scan_part(defs, trace_chunks(Trace(defs, {loc: ev}), 3))
             for loc, ev in trace.events.items()]
    totals = add_counts([part.counts() for part in parts])
    gapped = parts[0].gapped(totals)
    assert [t.tolist() for t in gapped.values()] == [[10, 40]] and parts[1].gapped(totals) == {}
    balance = parts[1].balances(gapped)
    assert list(balance.values()) == [0] and parts[0].balances(gapped) == {}
    sender, receiver = (part.unclosed(totals, balance) for part in parts)
    assert {k: v.tolist() for k, v in sender.sends.items()} == {0: [1, 4, 10]}
    assert sender.receives == {} and receiver.sends == {} and sender.gaps
    assert {k: v.tolist() for k, v in receiver.receives.items()} == {1: [5]}
    u = parts[0].unclosed(totals)
    assert {k: v.tolist() for k, v in u.sends.items()} == {0: [10]} and not u.gaps


def _unreceived(n: int) -> Trace:
    """``n`` rounds of: rank 0 Isends to rank 1, whose receive is not recorded
    (MpiIrecvRequest only), then some work on both."""
    r0, r1 = [], []
    for i in range(n):
        r0 += [*_call(3, ISEND, peer=1, comm=0, tag=0, size=8, request=i),
               *_call(5, ISEND_COMPLETE, request=i), (ENTER, {"region": 6}),
               (LEAVE, {"region": 6})]
        r1 += [*_call(4, IRECV_REQUEST, request=i), (ENTER, {"region": 5}),
               (LEAVE, {"region": 5}), (ENTER, {"region": 6}), (LEAVE, {"region": 6})]
    return _trace([r0, r1])


def test_the_cutter_cuts_after_sends_never_received_only_with_the_look_ahead():
    trace = _unreceived(50)
    blind = list(cut_segments(Cutter(trace.definitions, 40), trace_chunks(trace, 10)))
    ahead = Cutter(trace.definitions, 40,
                   lookahead=lambda: scan(trace.definitions, trace_chunks(trace, 7)))
    seen = list(cut_segments(ahead, trace_chunks(trace, 10)))
    total = trace.record_count
    assert max(sum(len(ev) for ev in seg.values()) for seg in blind) >= total - 2
    sizes = [sum(len(ev) for ev in seg.values()) for seg in seen]
    assert len(seen) > 5 and max(sizes) < 4 * 40
    for loc, ev in trace.events.items():  # every record once, in order
        got = np.concatenate([seg[loc].time for seg in seen if loc in seg])
        assert np.array_equal(got, ev.time)


def _collective(end: bool) -> list[tuple]:
    """An MPI_Barrier call (Begin and End) or, without ``end``, an MPI_Ibarrier
    as EZTrace 2.0 writes it (a Begin alone)."""
    cols = {"comm": 0, "op": 0}
    return [(ENTER, {"region": 7}), (COLL_BEGIN, {}), *([(COLL_END, cols)] if end else []),
            (LEAVE, {"region": 7})]


def test_a_collective_begin_no_end_closes_is_named():
    """A Begin followed by another Begin before any End, or by none, is named; a
    Begin its End closes, across a chunk boundary too, is not."""
    r0 = [*_collective(False), *_collective(True), *_collective(False),   # 0-2, 3-6, 7-9
          *_collective(False)]                                            # 10-12
    trace = _trace([r0])
    for size in (1, 3, 100):
        u = scan(trace.definitions, trace_chunks(trace, size))
        assert {k: v.tolist() for k, v in u.begins.items()} == {0: [1, 8, 11]}, size


def test_the_cutter_cuts_after_lone_collective_begins_with_the_look_ahead():
    """Every round an MPI_Ibarrier EZTrace writes as a Begin alone, then work: the
    cutter cuts once it has read ahead (it held the whole trace after the first
    Begin), and every record is handed out once, in order."""
    rounds = [*_collective(False), (ENTER, {"region": 6}), (LEAVE, {"region": 6})] * 60
    trace = _trace([rounds, rounds])
    blind = list(cut_segments(Cutter(trace.definitions, 40), trace_chunks(trace, 10)))
    ahead = Cutter(trace.definitions, 40,
                   lookahead=lambda: scan(trace.definitions, trace_chunks(trace, 7)))
    seen = list(cut_segments(ahead, trace_chunks(trace, 10)))
    assert max(sum(len(ev) for ev in seg.values()) for seg in blind) >= trace.record_count - 2
    sizes = [sum(len(ev) for ev in seg.values()) for seg in seen]
    assert len(seen) > 5 and max(sizes) < 4 * 40
    for loc, ev in trace.events.items():
        got = np.concatenate([seg[loc].time for seg in seen if loc in seg])
        assert np.array_equal(got, ev.time)


def test_a_replay_reads_ahead_where_its_first_pass_did():
    """The gaps archive (tests/data/eztrace): the first pass reads ahead once it
    finds no cut (its attempts mark where, AHEAD); a replay of its attempts (the
    second pass of --bound fitted) reads ahead there too, so that its segments'
    matching knows the receives past a gap, and cuts the same segments."""
    trace = c.read(Path(__file__).parents[1] / "data" / "eztrace" / "gaps" /
                   "eztrace_log.otf2")
    first = Cutter(trace.definitions, 16,
                   lookahead=lambda: scan(trace.definitions, trace_chunks(trace, 64)))
    segs = list(cut_segments(first, trace_chunks(trace, 4)))
    assert AHEAD in first.attempts and first.unclosed.receives
    again = Cutter(trace.definitions, 16, replay=first.attempts,
                   lookahead=lambda: scan(trace.definitions, trace_chunks(trace, 64)))
    replayed = list(cut_segments(again, trace_chunks(trace, 4)))
    assert again.unclosed is not None and len(replayed) == len(segs) > 10
    for a, b in zip(segs, replayed, strict=True):
        assert {loc: len(ev) for loc, ev in a.items()} == {loc: len(ev) for loc, ev in b.items()}


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(2, 4), st.integers(5, 25))
def test_the_slim_scan_moves_as_the_whole_scan(data, n_locs, steps):
    """Property: random traces with never-received sends and gaps, each location's
    times moved by its own shift: what the look-ahead keeps for the passes after
    the clock pass (:meth:`Scanned.slim`, only the channels some of whose sends no
    receive takes) gives what the whole scan gives on the moved times."""
    from tests.randomtrace import random_trace

    def draw(lo: int, hi: int) -> int:
        return data.draw(st.integers(lo, hi))

    trace = random_trace(draw, n_locs, steps, lost=True, gaps=True)
    defs = trace.definitions
    shift = {loc: draw(0, 8000) for loc in trace.events}
    kept = scan(defs, trace_chunks(trace, 7))
    whole = scan_part(defs, trace_chunks(trace, 7))
    for moved, full in ((kept.moved(shift), whole.unclosed(shift=shift)),
                        (kept.moved({}), whole.unclosed())):
        for which in ("requests", "sends", "begins", "receives"):
            a, b = getattr(moved, which), getattr(full, which)
            assert a.keys() == b.keys(), which
            assert all(np.array_equal(a[k], b[k]) for k in a), which
        assert moved.gaps == full.gaps
    receives, sent, _ = whole.counts()
    assert set(kept.scanned.sends) == {c for c, n in sent.items() if receives.get(c, 0) < n}
