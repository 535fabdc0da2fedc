"""compensate/engine/run.py: rounding the approximated times to ticks keeps every
"at least one tick after" the rules give."""

from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate, to_ticks
from compensate.formats.text import read_text
from compensate.platform import Platform
from compensate.verify import verify


def test_halves_round_up():
    assert to_ticks(np.array([0.5, 1.5, 2.5, -0.5, 2.4999])).tolist() == [1, 2, 3, 0, 2]


@given(st.floats(-1e12, 1e12, allow_nan=False))
def test_one_tick_later_rounds_at_least_one_tick_later(x):
    """What the rules' TICK needs. (Not always exactly one: 1.4999999999999998 rounds
    to 1, and adding 1.0 to it gives 2.5 in floating point, which rounds to 3.)"""
    assert int(to_ticks(x + 1.0)) >= int(to_ticks(x)) + 1


def test_a_float_just_below_a_half_may_round_two_ticks_on():
    x = 1.4999999999999998
    assert (int(to_ticks(x)), int(to_ticks(x + 1.0))) == (1, 3)


def test_a_last_member_on_a_half_tick_still_exits_after_its_own_enter(tmp_path: Path):
    """Hypothesis's example (tests/engine/test_overheads.py): location 2 enters an
    MPI_Comm_dup last, 1 ns before the exits. With 500 ns per record and 62.5 ns of
    each begin's before its stamp, its begin approximates to 1.5 ns and its exit to
    its own enter + 1 tick, 2.5 ns; rounded halves to even both were 2 (a
    verification failure), rounded halves up they are 2 and 3."""
    lines = ["compensate-trace 1", "timer_resolution 1000000000", "location 0 group=0",
             "location 1 group=1", "location 2 group=2", 'region 9 "MPI_Comm_dup"',
             'comm 0 "MPI_COMM_WORLD" 0,1,2', "events"]
    rows = []
    for loc, begin in ((0, 1), (1, 1), (2, 564)):
        rows += [(0, loc, "Enter region=9"), (begin, loc, "MpiCollectiveBegin"),
                 (565, loc, "MpiCollectiveEnd op=CREATE_HANDLE comm=0 root=- sent=0 "
                            "received=0"), (566, loc, "Leave region=9")]
    lines += [f"{t} {loc} {what}" for t, loc, what in sorted(rows)]
    path = tmp_path / "dup.trace"
    path.write_text("\n".join(lines) + "\n")
    trace = read_text(path)
    platform = Platform(5e-7, before_stamp={"MpiCollectiveBegin": 6.25e-8})
    for bound in ("lower", "upper"):
        for exit_ in ("uniform", "per-process"):
            result = compensate(trace, platform,
                                EngineOptions(bound=bound, collective_exit=exit_))
            assert result.trace.events[2].time[1:3].tolist() == [2, 3]
            check = verify(result.trace, result.matching)
            assert check.ok, check.examples
