"""The call around a record (compensate/matching/enclosing.py): against a walk with a
stack over random well-nested locations, records at one depth (its one-level
path) and at many; and a hand case."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.matching.enclosing import closing_leaves, enclosing_enters
from compensate.matching.match import nesting
from compensate.model import ENTER, LEAVE, SEND

#: a location's records: +1 an Enter, -1 a Leave (of the innermost open call), 0 a
#: send; Leaves without an open call and calls left open are allowed in the draw
#: and dropped / kept as they come
steps = st.lists(st.sampled_from([1, -1, 0, 0]), min_size=1, max_size=60)


def _location(draw: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(kind, region) of a well-nested location from ``draw`` (open calls may stay)."""
    kind, depth = [], 0
    for x in draw:
        if x == -1 and depth == 0:
            continue
        depth += x
        kind.append(ENTER if x == 1 else LEAVE if x == -1 else SEND)
    return np.array(kind, dtype=np.int16), np.ones(len(kind), dtype=np.int64)


def _walk(kind: np.ndarray) -> tuple[dict[int, int], dict[int, int]]:
    """{record: its innermost open Enter}, {record: the Leave closing that call}."""
    enter, leave, stack, inside = {}, {}, [], {}
    for i, k in enumerate(kind.tolist()):
        if k == ENTER:
            stack.append(i)
            inside[i] = []
        elif k == LEAVE:
            e = stack.pop()
            for r in inside.pop(e):
                leave[r] = i
        else:
            enter[i] = stack[-1] if stack else -1
            if stack:
                inside[stack[-1]].append(i)
    return enter, leave


@settings(max_examples=300, deadline=None)
@given(steps)
def test_the_call_around_each_record_is_the_walks(draw):
    kind, region = _location(draw)
    nest = nesting(kind, region)
    idx = np.flatnonzero(kind == SEND)
    want_enter, want_leave = _walk(kind)
    got_enter = enclosing_enters(nest.before, nest.enters, idx)
    got_leave = closing_leaves(nest.before, nest.leaves, idx)
    assert got_enter.tolist() == [want_enter[i] for i in idx.tolist()]
    assert got_leave.tolist() == [want_leave.get(i, -1) for i in idx.tolist()]


def test_records_at_one_depth_and_at_several():
    # E S L E E S L S L E S   (the last call open)
    kind = np.array([ENTER, SEND, LEAVE, ENTER, ENTER, SEND, LEAVE, SEND, LEAVE, ENTER, SEND],
                    dtype=np.int16)
    nest = nesting(kind, np.ones(len(kind), dtype=np.int64))
    one = np.array([1, 10])  # (both at depth 1)
    assert enclosing_enters(nest.before, nest.enters, one).tolist() == [0, 9]
    assert closing_leaves(nest.before, nest.leaves, one).tolist() == [2, -1]
    many = np.array([1, 5, 7])  # (depths 1, 2, 1)
    assert enclosing_enters(nest.before, nest.enters, many).tolist() == [0, 4, 3]
    assert closing_leaves(nest.before, nest.leaves, many).tolist() == [2, 6, 8]
