"""What verification finds (compensate/verify/result.py): every counter counts, in
``ok``, ``violations``, the summary and the distributed run's reduction; every field
says how two partial results combine, and :meth:`Verification.add` combines them
so; the summary's keys are those it always had, in their order."""

from __future__ import annotations

from dataclasses import fields

import pytest

from compensate.parallel.verification import COUNTS, merge
from compensate.verify import Verification
from compensate.verify.result import COUNTERS, EXAMPLES, combine

#: the summary's "verification" keys, in their order (the summary JSON must not change)
SUMMARY_KEYS = ["ok", "violations", "order", "messages", "collectives", "threads", "devices",
                "rma", "metrics", "partitioned", "examples", "covers", "carried_local_only",
                "carried_local_only_records"]


def test_summary_keys_unchanged():
    assert list(Verification().to_dict()) == SUMMARY_KEYS
    assert COUNTS == COUNTERS == tuple(SUMMARY_KEYS[2:10])


@pytest.mark.parametrize("counter", COUNTERS)
def test_one_violation_in_any_counter_fails(counter):
    v = Verification(**{counter: 1})
    assert not v.ok
    assert v.violations == 1
    summary = v.to_dict()
    assert summary["violations"] == 1 and not summary["ok"] and summary[counter] == 1


@pytest.mark.parametrize("counter", COUNTERS)
def test_a_counter_survives_add_and_merge(counter):
    """The sum of a streamed run's segments and the distributed run's reduction keep
    a violation of any family (a streamed run's sum once dropped ``rma``)."""
    total = Verification()
    total.add(Verification(**{counter: 1}))
    assert total.violations == 1 and getattr(total, counter) == 1
    part = {"counts": {c: int(c == counter) for c in COUNTS}, "examples": [], "keys": [],
            "carried": {}}
    assert merge([part, part]).violations == 2


def test_every_field_says_how_it_combines():
    for f in fields(Verification):
        assert "combine" in f.metadata, f.name
        how = f.metadata["combine"]
        assert how is None or callable(how), f.name
        assert f.metadata.get("counter", False) == (f.name in COUNTERS)
    # (the examples and their keys: together, in Verification.add)
    assert {f.name for f in fields(Verification) if f.metadata["combine"] is None} == \
        {"own", "examples", "keys", "_check"}


def test_a_later_segments_examples_come_by_check():
    """A later segment's examples of an earlier check come before the total's of a
    later check, as one verification of the whole trace lists them; within a
    check, the earlier segment's first; the first ten kept, with their keys."""
    total = Verification(messages=1, collectives=6, examples=["m0"] + [f"c{i}" for i in range(6)],
                         keys=[(1, 5)] + [(2, i) for i in range(6)])
    part = Verification(order=1, messages=4, examples=["o0", "m1", "m2", "m3", "m4"],
                        keys=[(0,), (1, 0), (1, 1), (1, 2), (1, 3)])
    total.add(part)
    assert total.violations == 12
    assert total.examples == ["o0", "m0", "m1", "m2", "m3", "m4", "c0", "c1", "c2", "c3"]
    assert total.keys == [(0,), (1, 5), (1, 0), (1, 1), (1, 2), (1, 3),
                          (2, 0), (2, 1), (2, 2), (2, 3)]


def test_add_combines_every_field():
    total = Verification(examples=[f"t{i}" for i in range(7)],
                         carried_local_only={"A": 1, "B": 2}, own={1}, keys=[(0,)])
    part = Verification(examples=[f"p{i}" for i in range(5)],
                        carried_local_only={"B": 3, "C": 4}, own={2}, keys=[(1,)])
    for n, counter in enumerate(COUNTERS, 1):
        setattr(total, counter, n)
        setattr(part, counter, 10 * n)
    assert combine(total, part) is total
    for n, counter in enumerate(COUNTERS, 1):
        assert getattr(total, counter) == 11 * n
    assert total.examples == [f"t{i}" for i in range(7)] + ["p0", "p1", "p2"]
    assert len(total.examples) == EXAMPLES
    assert total.carried_local_only == {"A": 1, "B": 5, "C": 4}
    assert total.own == {1} and total.keys == [(0,)]  # (examples without keys: in order)
    assert part.carried_local_only == {"B": 3, "C": 4}  # the part is left as it was
