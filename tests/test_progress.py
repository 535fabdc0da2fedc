"""The one progress line (compensate.progress): shown on a terminal after the delay,
with total, percentage and time left; nothing at all when the stream is not a tty."""

import io

from compensate.progress import Progress, format_duration, status_line


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_count_with_total_shows_percentage_rate_and_time_left():
    tty, clock = FakeTty(), Clock()
    p = Progress("compensate", "compensating", 1000, "records", stream=tty, clock=clock)
    clock.now += 4.0  # 4 s in, a quarter done: 12 s left
    p(250)
    line = tty.getvalue()
    assert line.startswith("\r\033[K")
    assert "compensate: compensating  25.0 %  12 s left  250/1,000 records  62 records/s" in line
    p.close()
    assert tty.getvalue().endswith("\r\033[K")


def test_nothing_before_the_delay_and_nothing_off_a_terminal():
    tty, clock = FakeTty(), Clock()
    p = Progress("calibrate", "copy cost", stream=tty, clock=clock)
    clock.now += 1.0
    p.fraction(0.5, "pass 1")
    p.close()
    assert tty.getvalue() == ""  # a short run shows nothing
    pipe = io.StringIO()  # isatty() is False
    q = Progress("calibrate", "copy cost", stream=pipe, clock=clock)
    clock.now += 60.0
    q.fraction(0.5, "pass 1")
    q(10)
    q.close()
    assert pipe.getvalue() == ""


def test_fraction_and_hint_give_time_left_and_rewrites_are_rate_limited():
    tty, clock = FakeTty(), Clock()
    p = Progress("calibrate", "writer probe", stream=tty, clock=clock)
    clock.now += 10.0
    p.fraction(0.8, "repetition 4/5")
    assert "writer probe: repetition 4/5  80.0 %  3 s left" in tty.getvalue()
    n = len(tty.getvalue())
    clock.now += 0.01
    p.fraction(0.81, "repetition 4/5")
    assert len(tty.getvalue()) == n  # at most a few rewrites a second
    clock.now += 1.0
    q = p.phase("streaming", None, "records")  # the run's start carries over: no new delay
    q.hint(0.5)
    clock.now += 2.0
    q(1000)
    line = tty.getvalue()[n:]
    assert "streaming  50.0 %  2 s left  1,000 records  500 records/s" in line


def test_unknown_total_shows_count_and_rate_only():
    assert status_line("x", 10, None, "records", None, 2.0) == "x  10 records  5 records/s"


def test_long_lines_are_cut_to_the_terminal_width():
    tty, clock = FakeTty(), Clock()
    p = Progress("compensate", "writing " + "d/" * 200, 10, "records", stream=tty, clock=clock)
    clock.now += 5
    p(5)
    assert len(tty.getvalue()) <= 4 + 80  # not a terminal fd: 80 columns assumed


def test_format_duration():
    assert [format_duration(s) for s in (0, 0.2, 59, 61, 3599, 3661)] == \
        ["0 s", "1 s", "59 s", "1 min 01 s", "59 min 59 s", "1 h 01 min"]
