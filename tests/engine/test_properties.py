"""Invariants of the engine on random valid traces (hypothesis)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate
from compensate.matching import match
from compensate.model import NONE, PROBE
from compensate.platform import Platform
from compensate.verify import verify

from ..randomtrace import random_trace

PLATFORM = Platform(5e-7, {"MpiSend": 1e-6}, np.array([64.0, 1 << 20]),
                    np.array([1e-8, 2e-4]))
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def traces(draw, extended=False):
    n = draw(st.integers(2, 5))
    steps = draw(st.integers(1, 25))
    return random_trace(lambda lo, hi: draw(st.integers(lo, hi)), n, steps, extended)


@SETTINGS
@given(traces(), st.sampled_from(["lower", "upper"]),
       st.sampled_from(["uniform", "per-process"]))
def test_happened_before_and_records_preserved(trace, bound, exit_):
    assert verify(trace, match(trace)).ok  # the generator makes valid traces
    result = compensate(trace, PLATFORM, EngineOptions(bound=bound, collective_exit=exit_))
    out = result.trace
    check = verify(out, result.matching)
    assert check.ok, check.examples
    assert out.record_count == trace.record_count
    for loc, ev in trace.events.items():
        got = out.events[loc]
        assert np.all(np.diff(got.time) >= 0)  # per-location order
        assert np.array_equal(got.kind, ev.kind)  # same record sequence
        assert np.array_equal(got.region, ev.region)
        assert np.array_equal(got.peer, ev.peer)
        assert np.array_equal(got.size, ev.size)
    for m in result.matching.messages:  # every receive strictly after its send
        assert out.events[m.recv_loc].time[m.recv_idx] > out.events[m.send_loc].time[m.send_idx]


@SETTINGS
@given(traces())
def test_no_overhead_no_copy_upper_is_identity(trace):
    """With nothing to remove, the upper bound with per-process exits (which trusts
    every measured interval) must give the measured trace back exactly."""
    result = compensate(trace, Platform(0.0), EngineOptions("upper", "per-process"))
    for loc, ev in trace.events.items():
        assert np.array_equal(result.trace.events[loc].time, ev.time)


@SETTINGS
@given(traces())
def test_never_later_than_measured_without_copy_cost(trace):
    """Removing overhead can only move records earlier when copies cost nothing."""
    result = compensate(trace, Platform(3e-7), EngineOptions("upper", "per-process"))
    for loc, ev in trace.events.items():
        assert np.all(result.trace.events[loc].time <= ev.time)


@SETTINGS
@given(traces(extended=True), st.sampled_from(["lower", "upper"]),
       st.sampled_from(["uniform", "per-process"]))
def test_issue16_kinds_keep_happened_before(trace, bound, exit_):
    """MPI_Issend, handle collectives (creation synchronising, free maybe local),
    nonblocking Ibcast/Igather, matched probes (MPI_Mprobe/Improbe with MPI_Ssend or
    MPI_Send) and plain probes (MPI_Probe, then MPI_Recv): the output verifies, a
    synchronous send (an Issend's completion) ends no earlier than its receive was
    posted, a matched probe (the receive record) and a plain one come after their
    send, and nothing is an unknown collective op."""
    m = match(trace)
    assert verify(trace, m).ok and m.unknown_ops == 0
    result = compensate(trace, PLATFORM, EngineOptions(bound=bound, collective_exit=exit_), m)
    out = result.trace
    check = verify(out, result.matching)
    assert check.ok, check.examples
    t = result.matching.table
    for j in np.flatnonzero(t.synchronous).tolist():
        s_loc, r_loc = t.loc_ids[t.send_li[j]], t.loc_ids[t.recv_li[j]]
        assert out.events[s_loc].time[t.send_exit_idx[j]] >= \
            out.events[r_loc].time[t.recv_post_idx[j]]
    for j in np.flatnonzero(t.no_recv_copy).tolist():
        s_loc, r_loc = t.loc_ids[t.send_li[j]], t.loc_ids[t.recv_li[j]]
        ev, probe = out.events[r_loc], int(t.recv_idx[j])
        assert trace.events[r_loc].kind[probe] == PROBE
        assert ev.time[probe] > out.events[s_loc].time[t.send_idx[j]]
    # every plain MPI_Probe the generator wrote found a message (it was sent before
    # the probe, and MPI_Recv took it after): each has its row, and comes after
    # that message's send
    plain = sum(int(np.count_nonzero((ev.kind == PROBE) & (ev.size_recv == NONE)))
                for ev in trace.events.values())
    assert int(np.count_nonzero(t.probe)) == plain == m.counts()["probes"]
    assert not any(k.startswith("MpiProbe") for k in check.carried_local_only)
