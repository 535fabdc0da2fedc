"""benchmarks/eztrace_pthread_links.py (docs/eztrace.md, "Pthreads"): its count of
inverted hand-offs on the bundled sync/ archive (the runs take minutes)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import eztrace_pthread_links as pl  # noqa: E402

import compensate as c  # noqa: E402
from compensate.matching import match  # noqa: E402


def test_without_the_links_hand_offs_are_inverted_and_with_them_none():
    trace = c.read(ROOT / "tests" / "data" / "eztrace" / "sync" / "eztrace_log.otf2")
    links = match(trace).threads
    bad_locks, locks, bad_bars, bars = pl.inverted(trace, links, pl.alone(trace, "1us"))
    assert (locks, bars) == (22, 4) and bad_locks > 0 and bad_bars > 0
    with_ = c.compensate(trace, bound="lower", overhead="1us").trace
    assert pl.inverted(trace, links, with_)[::2] == (0, 0)
    assert match(trace).threads.counts()["lock"] == 22  # (the links are back)
