"""Processes on clocks of their own (compensate.matching.clocks and the pipeline's use).

The trace is a ping-pong whose rank 1 stamps every record 500 ticks early (as EZTrace
2.0 does, counting each process's time from its own start): its receive of the first
message lies 400 ticks before the send. True times: rank 0 sends at 1000, rank 1
receives at 1100, sends back at 2000, rank 0 receives at 2100.
"""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import compensate as c
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.clocks import (
    align_clocks,
    bounds,
    chained_offsets,
    first_offsets,
    inversions,
    process_offsets,
)
from tests.inprocess import run_compensate

HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="rank 0"
location 1 group=1 name="rank 1"
region 1 "MPI_Send"
region 2 "MPI_Recv"
region 3 "MPI_Allreduce"
region 4 "work"
comm 0 "MPI_COMM_WORLD" 0,1
events
"""
SKEWED = """450 1 Enter region=2
900 0 Enter region=1
1000 0 MpiSend receiver=1 comm=0 tag=7 bytes=8
1050 0 Leave region=1
1060 0 Enter region=2
600 1 MpiRecv sender=0 comm=0 tag=7 bytes=8
650 1 Leave region=2
1450 1 Enter region=1
1500 1 MpiSend receiver=0 comm=0 tag=7 bytes=8
1550 1 Leave region=1
2100 0 MpiRecv sender=1 comm=0 tag=7 bytes=8
2150 0 Leave region=2
"""


#: an MPI_Allreduce whose rank 1 stamps its exit (600) before rank 0 entered (1000)
COLLECTIVE = """500 1 Enter region=3
600 1 MpiCollectiveBegin
900 0 Enter region=3
1000 0 MpiCollectiveBegin
1150 0 MpiCollectiveEnd op=ALLREDUCE comm=0 root=- sent=8 received=8
1200 0 Leave region=3
600 1 MpiCollectiveEnd op=ALLREDUCE comm=0 root=- sent=8 received=8
700 1 Leave region=3
"""


def _trace(tmp_path, body=SKEWED):
    path = tmp_path / "t.trace"
    path.write_text(HEAD + body)
    return read_text(str(path)), path


def test_a_receive_before_its_send_gives_the_smallest_shift_that_orders_every_message(tmp_path):
    trace, _ = _trace(tmp_path)
    table = match(trace).table
    assert inversions(trace, table) == (1, 400)
    # a receive at least a tick after its send: 0 -> 1 says d1 - d0 >= 1000 - 600 + 1;
    # 1 -> 0 says d1 - d0 <= 2100 - 1500 - 1; the least shift in [401, 599]: 401
    assert process_offsets(trace, table) == {0: 0, 1: 401}
    aligned, what = align_clocks(trace, table)
    assert what.offsets == {1: 401} and what.inverted == 1 and what.worst == 400
    assert aligned.events[1].time.tolist() == [851, 1001, 1051, 1851, 1901, 1951]
    assert aligned.events[0].time.tolist() == trace.events[0].time.tolist()


def test_clocks_that_agree_with_every_message_are_left_alone(tmp_path):
    shifted = "\n".join(
        f"{int(t) + 500} {rest}" if rest.startswith("1 ") else f"{t} {rest}"
        for t, rest in (line.split(" ", 1) for line in SKEWED.strip().splitlines())) + "\n"
    trace, _ = _trace(tmp_path, shifted)
    assert align_clocks(trace, match(trace).table) is None


def test_compensating_a_skewed_trace_does_not_add_the_skew_to_every_message(tmp_path):
    # with no overhead the output is the aligned input (before the alignment, the
    # receive was pushed behind its send: rank 1's MPI_Recv grew by the skew)
    trace, _ = _trace(tmp_path)
    r = c.compensate(trace, bound="lower", overhead=0.0)
    # rank 1's receive call lasts what it measured (200 ticks), not 401 more
    rank1 = r.trace.events[1].time
    assert rank1[2] - rank1[0] == 200
    assert r.summary["approximated_span_s"] <= r.summary["measured_span_s"]
    assert r.summary["clock_alignment"] == {"receives_before_send": 1, "worst_s": 4e-7,
                                            "offsets_s": {"1": 4.01e-7},
                                            "aligned_span_s": 1.299e-6}
    assert r.trace.events[0].time.tolist() == trace.events[0].time.tolist()


def test_the_command_aligns_a_skewed_trace_it_would_otherwise_stream(tmp_path):
    _, path = _trace(tmp_path)
    out, summary = tmp_path / "out.trace", tmp_path / "s.json"
    proc = run_compensate(path, out, "--overhead", "0", "--summary", summary)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(summary.read_text())
    rank1 = read_text(str(out)).events[1].time
    assert rank1[2] - rank1[0] == 200
    assert got["approximated_span_s"] <= got["measured_span_s"]
    assert got["clock_alignment"]["offsets_s"] == {"1": 4.01e-7}


#: SKEWED with rank 0 first (work from 100) and rank 1 last (work to 2800): the
#: alignment moves rank 1's end 401 ticks later, the run's span from 2,700 to 3,101
LONGER = """100 0 Enter region=4
200 0 Leave region=4
""" + SKEWED + """2700 1 Enter region=4
2800 1 Leave region=4
"""


def test_a_span_the_alignment_lengthens_is_compared_aligned(tmp_path):
    """The compensated span is compared with the measured one with its clocks
    aligned: the offsets alone are no finding of a platform that contradicts the
    trace, and the summary line names both spans."""
    _, path = _trace(tmp_path, LONGER)
    out, summary = tmp_path / "out.trace", tmp_path / "s.json"
    proc = run_compensate(path, out, "--overhead", "0", "--summary", summary)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(summary.read_text())
    assert got["measured_span_s"] == 2.7e-6
    assert got["clock_alignment"]["aligned_span_s"] == 3.101e-6
    assert got["approximated_span_s"] <= 3.101e-6
    assert "longer" not in proc.stderr and "contradicts" not in proc.stderr
    assert "span 2.7e-06 s (3.101e-06 s with its clocks aligned) -> " in proc.stdout


def test_collectives_order_the_clocks_too(tmp_path):
    # an MPI_Allreduce: rank 1 (500 ticks early) stamps its exit at 600, before rank 0
    # entered at 1000; nobody leaves before the last member entered, both ways:
    # rank 0's enter (1000) before rank 1's exit (600): d1 - d0 >= 400; rank 1's
    # enter (600) before rank 0's exit (1150): d1 - d0 <= 550; the least shift, a
    # tick after: 401
    trace, _ = _trace(tmp_path, COLLECTIVE)
    m = match(trace)
    assert len(m.table) == 0 and len(m.instances) == 1
    assert inversions(trace, m.table, m.instances) == (1, 400)
    assert process_offsets(trace, m.table, m.instances) == {0: 0, 1: 401}


def test_clocks_that_drift_take_the_middle_of_what_contradicts():
    from compensate.matching.clocks import _pair_offset
    # 0 -> 1 asks d1 - d0 >= 700, 1 -> 0 allows at most 300: no constant orders both
    assert _pair_offset({(0, 1): 700, (1, 0): -300}, 0, 1) == 500
    # in order both ways: no shift; one way only: the least that orders it
    assert _pair_offset({(0, 1): -50, (1, 0): -80}, 0, 1) == 0
    assert _pair_offset({(1, 0): 30}, 0, 1) == -30


def test_a_fitted_run_of_a_skewed_trace_falls_back_from_streaming_and_writes(tmp_path):
    # the fit pass finds the receive before its send before any output is written:
    # the fallback to the in-memory run must release the first output's lock (it
    # said "another run is writing OUT" and exited 3)
    _, path = _trace(tmp_path)
    out = tmp_path / "fitted.trace"
    proc = run_compensate(path, out, "--overhead", "0", "--bound", "fitted")
    assert proc.returncode == 0, proc.stderr
    assert "another run" not in proc.stderr
    assert out.exists()


def test_a_first_guess_from_the_first_records_pairs_sends_and_receives_by_channel(tmp_path):
    """first_offsets on the ping-pong: 0 -> 1 says d1 - d0 >= 401, 1 -> 0 says
    d1 - d0 <= 599: 401, as process_offsets finds from the matched trace; and
    from the first message alone (the head of a stream) the same."""
    trace, _ = _trace(tmp_path)
    assert first_offsets(trace.definitions, trace.events) == {1: 401}
    head = {0: trace.events[0].slice(0, 3), 1: trace.events[1].slice(0, 3)}
    assert first_offsets(trace.definitions, head) == {1: 401}
    assert first_offsets(trace.definitions, {0: trace.events[0].slice(0, 1)}) == {}


#: a ring of three processes: the spanning tree from process 0 chains 0-1 and 0-2
#: (d1 in [100, 500], d2 in [120, 900]) and never looks at 1 -> 2 (d2 - d1 >= 400)
RING_OF_THREE = {(0, 1): 100, (1, 0): -500, (0, 2): 120, (2, 0): -900, (1, 2): 400}


def test_a_bound_off_the_spanning_tree_is_met_where_offsets_can_meet_every_bound():
    """The tree gives d1 = 100, d2 = 120, which breaks 1 -> 2; fixed in the tree's
    order, each nearest its parent within what the processes fixed before allow:
    d1 = 100, then d2 >= 100 + 400 and <= 900, nearest 0: 500."""
    assert chained_offsets(RING_OF_THREE) == {0: 0, 1: 100, 2: 500}


def test_clocks_that_drift_around_a_ring_keep_the_tree():
    """1 -> 2 asks d2 - d1 >= 1000, which d1 >= 100 and d2 <= 900 forbid: no offsets
    meet every bound, so the tree's (each pair's, the middle where a pair
    contradicts itself)."""
    drifting = dict(RING_OF_THREE)
    drifting[(1, 2)] = 1000
    assert chained_offsets(drifting) == {0: 0, 1: 100, 2: 120}


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 7), st.data())
def test_offsets_meet_every_message_where_constant_clocks_exist(n, data):
    """Property: processes on clocks offset by constants, messages between random
    pairs each received a transfer after it was sent: the offsets found order every
    message (some offsets do: the true ones)."""
    shift = [data.draw(st.integers(-5000, 5000)) for _ in range(n)]
    rows = []
    for _ in range(data.draw(st.integers(1, 25))):
        a = data.draw(st.integers(0, n - 1))
        b = (a + data.draw(st.integers(1, n - 1))) % n
        t = data.draw(st.integers(0, 100_000))
        transfer = data.draw(st.integers(1, 300))
        rows.append((a, b, t - shift[a], t + transfer - shift[b]))
    p_s, p_r, t_s, t_r = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    lower = bounds((p_s, p_r, t_s, t_r))
    found = chained_offsets(lower)
    for (a, b), v in lower.items():
        assert found[b] - found[a] >= v


def test_an_eztrace_ring_of_three_is_aligned_with_no_receive_before_its_send():
    """clockring/ (tests/data/eztrace/README.md): rank 2's clock is about 4 ms behind
    rank 1's. Aligned, no receive lies before its send; each channel then pairs its
    4 receives before its gap (the measured times had put a later balance point 10
    receives past it), and the other 33 receives are past a gap."""
    from pathlib import Path

    trace = c.read(Path(__file__).parents[1] / "data" / "eztrace" / "clockring" /
                   "eztrace_log.otf2")
    m = match(trace)
    aligned, done = align_clocks(trace, m.table, m.instances)
    assert done.inverted > 0 and done.offsets[2] - done.offsets[1] > 3_900_000
    m2 = match(aligned)
    assert inversions(aligned, m2.table, m2.instances) == (0, 0)
    assert len(m2.messages) == 12 and m2.unrecorded()["receives_past_a_gap"] == 33
