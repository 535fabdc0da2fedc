"""compensate/engine/overheads.py: where a record's overhead lies around its stamp
(R1 with ``overhead_before_stamp``): hand-computed cases (tests/cases_before_stamp,
kept out of tests/cases so that the fingerprinted outputs stay those of the model
without the split) and the gap arithmetic of timestamp groups; per-region costs
(``event_overhead_by_region``, ``overhead_before_stamp_by_region``) by hand and as
properties."""

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate
from compensate.engine.overheads import group_before, group_carry, r1_gaps
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import KIND_CODE
from compensate.platform import Platform
from compensate.verify import verify

from ..randomtrace import random_trace
from . import test_cases

CASES = sorted((Path(__file__).resolve().parents[1] / "cases_before_stamp").glob("*.trace"))


def test_cases_present():
    assert {p.stem for p in CASES} == {"r1_before_stamp", "r8_before_stamp"}


@pytest.mark.parametrize("bound,exit_", test_cases.VARIANTS, ids=lambda v: str(v))
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_before_stamp_case(path, bound, exit_):
    test_cases.test_case(path, bound, exit_)


def test_r1_gaps_split():
    tm = np.array([0.0, 100.0, 250.0])
    o = np.array([10.0, 20.0, 30.0])
    pre = np.array([1.0, 5.0, 7.0])
    # gap before record 1: 100 - post(0) - pre(1) = 100 - 9 - 5; before 2: 150 - 15 - 7
    assert r1_gaps(tm, o, pre).tolist() == [86.0, 128.0]


def test_r1_gaps_no_split_is_the_whole_overhead_after():
    tm = np.array([0.0, 100.0, 100.0, 250.0, 400.0])
    o = np.array([10.0, 20.0, 30.0, 5.0, 1.0])
    assert np.array_equal(r1_gaps(tm, o, np.zeros(5)), r1_gaps(tm, o))
    assert r1_gaps(tm, o).tolist() == [90.0, 0.0, 100.0, 145.0]


def test_group_sharing_a_stamp():
    """Records 1 and 2 share a stamp: both their parts before it lie in the gap
    before the group, both parts after it in the gap after."""
    tm = np.array([0.0, 100.0, 100.0, 250.0])
    o = np.array([10.0, 20.0, 30.0, 5.0])
    pre = np.array([0.0, 4.0, 6.0, 2.0])
    assert group_before(tm, pre).tolist() == [0.0, 10.0, 0.0, 2.0]
    # 100 - 10 - (4 + 6); 0; 150 - (16 + 24) - 2
    assert r1_gaps(tm, o, pre).tolist() == [80.0, 0.0, 108.0]
    assert group_carry(o[1:3], pre[1:3]) == 40.0
    assert sum(r1_gaps(tm, o, pre)) + o.sum() - group_carry(o[3:], pre[3:]) \
        == pytest.approx(tm[-1] - tm[0] - pre[0])


# -- properties (hypothesis) ------------------------------------------------------------

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
BASE = Platform(5e-7, {"MpiSend": 1e-6, "Leave": 3e-7}, np.array([64.0, 1 << 20]),
                np.array([1e-8, 2e-4]))


def _split(platform: Platform, fractions: dict[str, float]) -> Platform:
    """``platform`` with each named kind's overhead that fraction before the stamp."""
    table = platform.overhead_table()
    return replace(platform, before_stamp={k: f * float(table[KIND_CODE[k]])
                                           for k, f in fractions.items()})


@st.composite
def traces(draw, extended=False):
    n = draw(st.integers(2, 4))
    steps = draw(st.integers(1, 20))
    return random_trace(lambda lo, hi: draw(st.integers(lo, hi)), n, steps, extended)


FRACTIONS = st.dictionaries(st.sampled_from(["Enter", "Leave", "MpiSend", "MpiRecv",
                                             "MpiCollectiveBegin", "MpiCollectiveEnd",
                                             "MpiIsend", "MpiIrecv"]),
                            st.floats(0.0, 1.0))


@SETTINGS
@given(traces(extended=True), st.sampled_from(["lower", "upper"]))
def test_zero_split_is_the_output_without_it(trace, bound):
    """Naming kinds with 0 before the stamp changes nothing, bit for bit."""
    kinds = {"Enter": 0.0, "MpiRecv": 0.0, "MpiSend": 0.0}
    a = compensate(trace, BASE, EngineOptions(bound=bound))
    b = compensate(trace, _split(BASE, kinds), EngineOptions(bound=bound))
    for loc, ev in a.trace.events.items():
        assert np.array_equal(ev.time, b.trace.events[loc].time)


@SETTINGS
@given(traces(extended=True), FRACTIONS, st.sampled_from(["lower", "upper"]),
       st.sampled_from(["uniform", "per-process"]))
def test_any_split_keeps_happened_before(trace, fractions, bound, exit_):
    m = match(trace)
    result = compensate(trace, _split(BASE, fractions),
                        EngineOptions(bound=bound, collective_exit=exit_), m)
    check = verify(result.trace, result.matching)
    assert check.ok, check.examples
    for loc, ev in trace.events.items():
        assert np.all(np.diff(result.trace.events[loc].time) >= 0)
        assert np.array_equal(result.trace.events[loc].kind, ev.kind)


def _reference(times: list[int], kinds: list[str], o: dict, pre: dict) -> list[int]:
    """One location without dependencies, by hand: the first record at its time less
    its own part before the stamp (no gap before it); each gap that is not 0 loses
    what the group before it wrote after its stamp and what its own group wrote
    before (never below 0)."""
    groups: list[list[int]] = []
    for i, t in enumerate(times):
        if groups and times[groups[-1][0]] == t:
            groups[-1].append(i)
        else:
            groups.append([i])
    out = [0.0] * len(times)
    at = times[0] - pre[kinds[0]]
    for g, members in enumerate(groups):
        if g:
            prev = groups[g - 1]
            after = sum(o[kinds[i]] - pre[kinds[i]] for i in prev)
            before = sum(pre[kinds[i]] for i in members)
            at += max(0.0, times[members[0]] - times[prev[0]] - after - before)
        for i in members:
            out[i] = at
    return [int(round(x)) for x in out]


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 400), st.booleans()), min_size=1, max_size=30),
       st.integers(0, 100), st.integers(0, 60))
def test_one_location_follows_the_split_by_hand(steps, pre_enter, pre_leave):
    """Independent of the engine's arithmetic: every gap loses exactly the parts of
    the overhead the split puts in it (o and pre in whole ns: exact ticks)."""
    o = {"Enter": 100, "Leave": 60}
    pre = {"Enter": pre_enter, "Leave": pre_leave}
    times, kinds, t = [], [], 1000
    for gap, leave in steps:
        t += gap
        times.append(t)
        kinds.append("Leave" if leave else "Enter")
    text = ["compensate-trace 1", "timer_resolution 1000000000",
            'location 0 group=0 name="rank 0"', 'region 1 "work"', "events"]
    text += [f"{t} 0 {k} region=1" for t, k in zip(times, kinds, strict=True)]
    platform = Platform(1e-7, {"Leave": 6e-8}, before_stamp={
        k: v / 1e9 for k, v in pre.items()})
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "one.trace"
        path.write_text("\n".join(text) + "\n")
        trace = read_text(str(path))
    result = compensate(trace, platform, EngineOptions(bound="lower"))
    got = result.trace.events[0].time.tolist()
    want = _reference(times, kinds, o, pre)
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) <= 1, (got, want)


# -- per-region overheads (event_overhead_by_region) ------------------------------------

REGION_TRACE = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="rank 0"
region 1 "A"
region 2 "B"
events
1000 0 Enter region=1
2000 0 Leave region=1
3000 0 Enter region=2
4000 0 Leave region=2
5000 0 Enter region=1
5500 0 Leave region=1
"""


def _region_trace(tmp_path):
    path = tmp_path / "regions.trace"
    path.write_text(REGION_TRACE)
    return read_text(str(path))


def test_a_regions_cost_replaces_its_kinds_by_hand(tmp_path):
    """Enter 100 ns and Leave 60 ns by kind, region A's Enter 300 ns and Leave
    200 ns: each gap loses the cost of the record before it, A's where A's."""
    trace = _region_trace(tmp_path)
    kinds = Platform(1e-7, {"Leave": 6e-8})
    by_region = replace(kinds, overhead_by_region={"A": {"Enter": 3e-7, "Leave": 2e-7}})
    plain = compensate(trace, kinds, EngineOptions(bound="lower"))
    assert plain.trace.events[0].time.tolist() == [1000, 1900, 2840, 3740, 4680, 5080]
    got = compensate(trace, by_region, EngineOptions(bound="lower"))
    # 1000; +1000-300; +1000-200 (A's Leave); +1000-100 (B's Enter: its kind's);
    # +1000-60 (B's Leave); +500-300
    assert got.trace.events[0].time.tolist() == [1000, 1700, 2500, 3400, 4340, 4540]
    assert got.stats.region_records == {"A": 4}


def test_a_regions_part_before_the_stamp_by_hand(tmp_path):
    """A's Leave: 200 ns, 50 of them before its stamp (the gap before it loses 50,
    the gap after it 150)."""
    trace = _region_trace(tmp_path)
    plat = Platform(1e-7, {"Leave": 6e-8}, overhead_by_region={"A": {"Enter": 3e-7,
                                                                     "Leave": 2e-7}},
                    before_stamp_by_region={"A": {"Leave": 5e-8}})
    got = compensate(trace, plat, EngineOptions(bound="lower"))
    assert got.trace.events[0].time.tolist() == [1000, 1650, 2500, 3400, 4340, 4490]


def test_a_region_named_only_before_the_stamp_keeps_its_kinds_overhead(tmp_path):
    trace = _region_trace(tmp_path)
    plat = Platform(1e-7, before_stamp_by_region={"B": {"Enter": 4e-8}})
    got = compensate(trace, plat, EngineOptions(bound="lower"))
    # B's Enter: 40 ns before its stamp, 60 after; every other record 100 ns after
    assert got.trace.events[0].time.tolist() == [1000, 1900, 2760, 3700, 4600, 5000]
    assert got.stats.region_records == {"B": 2}


@SETTINGS
@given(traces(extended=True), st.sampled_from(["lower", "upper"]))
def test_region_entries_that_change_nothing_give_the_output_without_them(trace, bound):
    """Entries equal to the kinds' costs, or naming regions the trace does not
    define, leave every output bit as the platform without them gives it."""
    same = replace(BASE, overhead_by_region={"MPI_Send": {"Enter": 5e-7, "Leave": 3e-7},
                                             "no such region": {"Enter": 1e-3}},
                   before_stamp_by_region={"MPI_Recv": {"Enter": 0.0}})
    a = compensate(trace, BASE, EngineOptions(bound=bound))
    b = compensate(trace, same, EngineOptions(bound=bound))
    for loc, ev in a.trace.events.items():
        assert np.array_equal(ev.time, b.trace.events[loc].time)


REGION_COSTS = st.dictionaries(
    st.sampled_from(["MPI_Send", "MPI_Recv", "work", "MPI_Allreduce", "MPI_Wait"]),
    st.fixed_dictionaries({}, optional={"Enter": st.floats(0, 3e-6),
                                        "Leave": st.floats(0, 3e-6)}))


@SETTINGS
@given(traces(extended=True), REGION_COSTS, st.sampled_from(["lower", "upper"]),
       st.sampled_from(["uniform", "per-process"]))
def test_any_region_costs_keep_happened_before(trace, costs, bound, exit_):
    plat = replace(BASE, overhead_by_region=costs, before_stamp_by_region={
        name: {k: v / 2 for k, v in entry.items()} for name, entry in costs.items()})
    m = match(trace)
    result = compensate(trace, plat, EngineOptions(bound=bound, collective_exit=exit_), m)
    check = verify(result.trace, result.matching)
    assert check.ok, check.examples
    for loc in trace.events:
        assert np.all(np.diff(result.trace.events[loc].time) >= 0)
