"""A column grouped by value (compensate/matching/groups.py): one value without
positions, several in increasing order with theirs, and nothing for an empty
column; against np.unique on random columns, of few values and of many."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from compensate.matching.groups import by_value


def test_one_value_several_and_none():
    assert by_value(np.array([7, 7, 7])) == [(7, None)]
    got = by_value(np.array([3, 1, 3, 2]))
    assert [v for v, _ in got] == [1, 2, 3]
    assert [p.tolist() for _, p in got] == [[1], [3], [0, 2]]
    assert by_value(np.zeros(0, dtype=np.int64)) == []


@given(st.lists(st.integers(-3, 3), min_size=1, max_size=40)
       | st.lists(st.integers(-1, 40), min_size=1, max_size=200))
def test_the_groups_are_np_uniques(values):
    """Few values (one comparison each) and many (one sort): the same groups."""
    a = np.array(values, dtype=np.int64)
    got = by_value(a)
    assert [v for v, _ in got] == np.unique(a).tolist()
    for v, pos in got:
        want = np.flatnonzero(a == v)
        np.testing.assert_array_equal(np.arange(len(a)) if pos is None else pos, want)
