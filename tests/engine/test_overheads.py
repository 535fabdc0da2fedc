"""compensate/engine/overheads.py: where a record's overhead lies around its stamp
(R1 with ``overhead_before_stamp``): hand-computed cases (tests/cases_before_stamp,
kept out of tests/cases so that the fingerprinted outputs stay those of the model
without the split) and the gap arithmetic of timestamp groups."""

from pathlib import Path

import numpy as np
import pytest

from compensate.engine.overheads import group_before, group_carry, r1_gaps

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
