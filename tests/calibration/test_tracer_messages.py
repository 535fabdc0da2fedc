"""The tracer's warnings: once per job, the other ranks' added by rank 0 at the end."""

from __future__ import annotations

import io

import pytest

from calibration.tracer import messages


@pytest.fixture
def stream(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(messages, "STREAMS", [out])
    monkeypatch.setattr(messages, "_GIVEN", {})
    monkeypatch.setattr(messages, "_FIRST", [True])
    return out


def test_rank_0_prints_a_warning_once_as_it_happens(stream):
    messages.warn("calibration.record: X is not traced")
    messages.warn("calibration.record: X is not traced")
    assert stream.getvalue() == "calibration.record: X is not traced\n"
    assert messages.given() == ["calibration.record: X is not traced"]


def test_another_rank_keeps_its_warnings_for_the_end(stream):
    messages.set_first_rank(False)
    messages.warn("calibration.record: Y is not traced")
    assert stream.getvalue() == ""
    assert messages.given() == ["calibration.record: Y is not traced"]


def test_rank_0_adds_what_only_other_ranks_warned_of_naming_them(stream):
    per_rank = [["a"], ["a", "b"], ["b", "c"], []]
    assert messages.others(per_rank) == ["b (ranks 1, 2)", "c (rank 2)"]
    messages.say_others(per_rank)
    assert stream.getvalue() == "b (ranks 1, 2)\nc (rank 2)\n"
    assert messages.others([]) == [] and messages.others([["a"]]) == []
