"""Tolerant nesting (compensate.matching.match.nesting, docs/design.md §4): a Leave
closes the most recent open Enter of its region; mis-nested traces are compensated,
counted and reported, and ``--strict`` refuses them."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compensate as c
from compensate.cli import main
from compensate.engine import EngineOptions, compensate
from compensate.matching import match, nesting
from compensate.matching.match import _nesting_walk
from compensate.model import ENTER, LEAVE, SEND
from compensate.simulate import default_platform, run_program
from compensate.simulate.programs import Program, compute, enter, leave, recv, send
from compensate.simulate.validation import accuracy
from compensate.verify import verify
from tests import pipelines as stream

from ..conftest import CASES


def _nest(records):
    kind = np.array([k for k, _ in records], dtype=np.int16)
    region = np.array([r for _, r in records], dtype=np.int32)
    return nesting(kind, region)


def test_out_of_order_leave_closes_its_own_region():
    # A B Leave(A) Enter(C) send Leave(C) Leave(B)
    n = _nest([(ENTER, 1), (ENTER, 2), (LEAVE, 1), (ENTER, 3), (SEND, -1), (LEAVE, 3),
               (LEAVE, 2)])
    assert n.out_of_order.tolist() == [2] and n.orphans.tolist() == []
    # the send is inside C (level 3), whose Leave is record 5
    assert n.before[4] == 3 and n.enters[3].tolist() == [3] and n.leaves[3].tolist() == [5]
    assert n.leaves[1].tolist() == [2] and n.leaves[2].tolist() == [6]
    assert n.first[0] == 2 and "region 1" in n.first[1] and "region 2" in n.first[1]


def test_leave_without_enter_closes_nothing():
    n = _nest([(LEAVE, 5), (ENTER, 1), (SEND, -1), (LEAVE, 1), (ENTER, 2)])
    assert n.orphans.tolist() == [0] and n.out_of_order.tolist() == []
    assert n.before.tolist() == [0, 0, 1, 1, 0]
    assert n.open_end.tolist() == [4]  # an Enter never closed stays open
    assert n.first == (0, "Leave of region 5 without an open Enter of that region")


def _random_calls(draw, misnest: bool):
    """Enter/Leave/other records; with ``misnest``, Leaves may pick any open region
    or one never entered."""
    records, stack = [], []
    for _ in range(draw(st.integers(0, 40))):
        choice = draw(st.integers(0, 3))
        if choice == 0 or (not stack and not misnest):
            r = draw(st.integers(0, 4))
            stack.append(r)
            records.append((ENTER, r))
        elif choice == 1 and (stack or misnest):
            if misnest and (not stack or draw(st.booleans())):
                r = draw(st.integers(0, 6))  # any region: open somewhere, or not at all
                if r in stack:
                    stack.remove(stack[len(stack) - 1 - stack[::-1].index(r)])
            else:
                r = stack.pop()
            records.append((LEAVE, r))
        else:
            records.append((SEND, -1))
    return records


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fast_path_and_walk_agree_on_nested_input(data):
    recs = _random_calls(data.draw, misnest=False)
    kind = np.array([k for k, _ in recs], dtype=np.int16)
    region = np.array([r for _, r in recs], dtype=np.int32)
    a, b = nesting(kind, region), _nesting_walk(kind, region, str)
    assert np.array_equal(a.before, b.before) and np.array_equal(a.open_end, b.open_end)
    for d in set(a.enters) | set(b.enters):
        assert np.array_equal(a.enters[d], b.enters[d])
    for d in set(a.leaves) | set(b.leaves):
        assert np.array_equal(a.leaves[d], b.leaves[d])
    assert a.problems == b.problems == 0


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_levels_encode_the_innermost_open_call(data):
    """Whatever the order of Leaves: per level the calls never overlap, and the last
    Enter on a record's level before it is the innermost call open there (a stack
    simulation of the rule is the reference)."""
    recs = _random_calls(data.draw, misnest=True)
    kind = np.array([k for k, _ in recs], dtype=np.int16)
    region = np.array([r for _, r in recs], dtype=np.int32)
    n = nesting(kind, region)
    stack, orphans, late = [], 0, 0
    for i, (k, r) in enumerate(recs):
        if k == ENTER:
            stack.append((r, i))
            continue
        if k == SEND:
            d = int(n.before[i])
            if stack:
                en = n.enters[d]
                assert en[np.searchsorted(en, i) - 1] == stack[-1][1]
            else:
                assert d == 0
            continue
        pos = max((p for p, (sr, _) in enumerate(stack) if sr == r), default=-1)
        if pos < 0:
            orphans += 1
        else:
            late += pos < len(stack) - 1
            stack.pop(pos)
    assert (len(n.orphans), len(n.out_of_order)) == (orphans, late)
    assert n.open_end.tolist() == [i for _, i in stack]
    for d, en in n.enters.items():  # calls on one level are disjoint and in order
        lv = n.leaves.get(d, np.zeros(0, np.int64))
        assert len(lv) <= len(en) and np.all(en[:len(lv)] < lv)
        assert np.all(lv[:-1] < en[1:len(lv)])


# -- simulated ground truth -------------------------------------------------------

def _ring(ranks, iterations, misnested):
    """Each rank: two user regions around its work, left out of order when
    ``misnested`` (Score-P user instrumentation does this), the MPI calls inside
    the inner one; rank 0 starts with a Leave of a region never entered."""
    ops = []
    for r in range(ranks):
        mine = [leave("stray")] if misnested and r == 0 else []
        for i in range(iterations):
            mine += [enter("outer"), enter("inner"), compute(2e-6 * (1 + (r + i) % 3))]
            mine += [leave("outer")] if misnested else []
            mine += [send((r + 1) % ranks, 256, i), recv((r - 1) % ranks, i)]
            mine += [leave("inner")] + ([] if misnested else [leave("outer")])
        ops.append(mine)
    return Program("misnested-ring" if misnested else "nested-ring", ops)


@pytest.mark.parametrize("bound", ["lower", "upper"])
def test_misnested_program_is_compensated_as_its_nested_twin(bound):
    """Against ground truth: the mis-nested program is recovered exactly as well as
    the same program with nested regions (the records differ only in Leave order)."""
    plat = default_platform(1e-6)
    got = {}
    for misnested in (False, True):
        sim = run_program(_ring(4, 30, misnested), plat, quantize=True)
        m = match(sim.measured)
        r = compensate(sim.measured, plat, EngineOptions(bound), m)
        assert verify(r.trace, m, measured=sim.measured).ok
        got[misnested] = (accuracy(sim.truth, sim.measured, r.trace), m)
    (nested, m0), (mis, m1) = got[False], got[True]
    assert m0.leaves_out_of_order == 0 and m1.leaves_out_of_order == 4 * 30
    assert m1.leaves_without_enter == 1
    # (after ProgramBegin and the Enter of main)
    assert m1.nesting_first["location"] == 0 and m1.nesting_first["index"] == 2
    assert mis.removed_total == pytest.approx(nested.removed_total)
    assert mis.error_max == pytest.approx(nested.error_max)
    assert mis.removed_total > 0.9 and mis.violations == 0  # (upper: 92 %, lower: 99.6 %)


@st.composite
def misnested_programs(draw):
    ranks = draw(st.integers(2, 4))
    iterations = draw(st.integers(1, 6))
    ops = []
    injected = 0
    for r in range(ranks):
        mine = []
        for i in range(iterations):
            swap = draw(st.booleans())
            injected += swap
            mine += [enter("a"), enter("b"), compute(draw(st.integers(1, 5)) * 1e-6)]
            mine += [leave("a")] if swap else []
            mine += [send((r + 1) % ranks, 64, i), recv((r - 1) % ranks, i)]
            mine += [leave("b")] + ([] if swap else [leave("a")])
        ops.append(mine)
    return Program("random-misnested", ops), injected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(misnested_programs(), st.sampled_from(["lower", "upper"]),
       st.integers(5, 200))
def test_random_misnesting_never_breaks_verification(case, bound, segment_records):
    program, injected = case
    sim = run_program(program, default_platform(5e-7))
    r = c.compensate(sim.measured, bound=bound, platform=sim.platform)
    assert r.verification.ok
    assert r.summary["nesting"]["leaves_out_of_order"] == injected
    # the streamed result is the in-memory one, record for record
    got = {}
    res = stream.compensate_stream(
        sim.measured.definitions, stream.trace_chunks(sim.measured, 7), sim.platform,
        EngineOptions(bound), lambda loc, ev: got.setdefault(loc, []).append(ev.time),
        segment_records=segment_records, source=sim.measured.source)
    assert res.verification.ok and res.counts["nesting"]["leaves_out_of_order"] == injected
    for loc, parts in got.items():
        assert np.array_equal(np.concatenate(parts), r.trace.events[loc].time)
    if injected:
        assert res.nesting_first == r.summary["nesting"]["first"]


# -- the command ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", [[], ["--in-memory"]], ids=["streaming", "in-memory"])
def test_strict_refuses_what_the_default_compensates(tmp_path, capsys, mode):
    src = CASES / "r2_misnested.trace"
    out, summary = tmp_path / "o.trace", tmp_path / "s.json"
    assert main([str(src), str(out), "--overhead", "100ns", "--summary", str(summary),
                 *mode]) == 0
    err = capsys.readouterr().err
    assert "2 Leave records do not nest" in err and "location 0, record 2" in err
    nest = json.loads(summary.read_text())["nesting"]
    assert nest["leaves_out_of_order"] == 1 and nest["leaves_without_enter"] == 1
    assert nest["first"]["location"] == 0 and nest["first"]["index"] == 2
    strict_out = tmp_path / "strict.trace"
    assert main([str(src), str(strict_out), "--overhead", "100ns", "--strict", *mode]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "location 0, record 2" in err[0] and "--strict" in err[0]
    assert not strict_out.exists()
    for bound in ("lower", "upper", "fitted", "none"):
        assert main([str(src), str(tmp_path / f"{bound}.trace"), "--overhead", "100ns",
                     "--bound", bound, "--quiet", *mode]) == 0
