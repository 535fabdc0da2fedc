"""Matching of MPI-4 partitioned operations (:mod:`compensate.matching.partitioned`):
by envelope in the order of initialisation, rounds by start, partitions by the
seed's I(j)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.partitioned import overlap
from compensate.model import TraceError

HEAD = ("compensate-trace 1\ntimer_resolution 1000000000\nlocation 0\nlocation 1\n"
        "region 0 \"MPI_Start\"\nregion 1 \"MPI_Pready\"\nregion 2 \"MPI_Wait\"\n"
        "comm 0 \"W\" 0,1\nevents\n")


def _trace(tmp_path, body):
    p = tmp_path / "t.trace"
    p.write_text(HEAD + body)
    return read_text(p)


@settings(max_examples=60, deadline=None)
@given(s=st.integers(1, 12), r=st.integers(1, 12), data=st.data())
def test_overlap_is_the_seeds_dependency(s, r, data):
    """Send partition i and receive partition j share elements exactly when i is in
    the seed's I(j) = {floor(s/r·j) .. ceil(s/r·(j+1)) - 1}, and the shared bytes of a
    receive partition add up to its share of the buffer."""
    j = data.draw(st.integers(0, r - 1))
    size = data.draw(st.integers(0, 10**6))
    lo, hi = math.floor(s * j / r), math.ceil(s * (j + 1) / r) - 1
    assert {i for i in range(s) if overlap(i, s, j, r, size)[0]} == set(range(lo, hi + 1))
    assert sum(overlap(i, s, j, r, size)[1] for i in range(s)) == \
        (j + 1) * size // r - j * size // r


def test_init_order_not_start_order(tmp_path):
    """The seed's Figure 3: two operations with one envelope, started in opposite
    orders on the two sides, match by their Init records."""
    t = _trace(tmp_path, """
10 0 MpiPsendInit receiver=1 comm=0 tag=4 bytes=8 partitions=1 request=1
11 0 MpiPsendInit receiver=1 comm=0 tag=4 bytes=8 partitions=1 request=2
10 1 MpiPrecvInit sender=0 comm=0 tag=4 bytes=8 partitions=1 request=5
11 1 MpiPrecvInit sender=0 comm=0 tag=4 bytes=8 partitions=1 request=6
20 0 MpiPsendRequest request=2
21 0 MpiPsendRequest request=1
22 0 MpiPready request=2 partition=0
23 0 MpiPready request=1 partition=0
20 1 MpiPrecvRequest request=5
21 1 MpiPrecvRequest request=6
30 1 MpiPrecvComplete request=5
31 1 MpiPrecvComplete request=6
""")
    m = match(t).partitioned
    pairs = sorted((x.send, x.recv) for x in m.messages)
    # request 1 (first Init, Pready record 5) -> request 5 (first Init, completed at
    # record 4); request 2 (Pready record 4) -> request 6 (completed at record 5); by
    # start order it would be the other way round
    assert pairs == [((0, 4), (1, 5)), ((0, 5), (1, 4))]
    assert m.counts()["transfers"] == 2 and m.unmatched_operations == 0


def test_parrived_observes_before_the_completion(tmp_path):
    """2 send partitions, 1 receive partition: both messages go to the first
    successful Parrived; a second Parrived and an unsuccessful test do not count."""
    t = _trace(tmp_path, """
1 0 MpiPsendInit receiver=1 comm=0 tag=0 bytes=10 partitions=2 request=1
2 0 MpiPsendRequest request=1
3 0 MpiPready request=1 partition=1
4 0 MpiPready request=1 partition=0
1 1 MpiPrecvInit sender=0 comm=0 tag=0 bytes=10 partitions=1 request=1
2 1 MpiPrecvRequest request=1
3 1 MpiPtested request=1 partition=0
9 1 MpiParrived request=1 partition=0
10 1 MpiParrived request=1 partition=0
11 1 MpiPrecvComplete request=1
""")
    msgs = match(t).partitioned.messages
    assert sorted((x.send, x.recv, x.size) for x in msgs) == [((0, 2), (1, 3), 5),
                                                              ((0, 3), (1, 3), 5)]


@pytest.mark.parametrize("body,expected", [
    ("5 0 MpiPready request=3 partition=0\n", "MpiPready of request 3 without its MpiPsendInit"),
    ("1 0 MpiPsendInit receiver=1 comm=0 tag=0 bytes=8 partitions=2 request=1\n"
     "2 0 MpiPsendRequest request=1\n3 0 MpiPready request=1 partition=2\n",
     "partition 2 of request 1, expected 0..1"),
    ("1 0 MpiPsendInit receiver=1 comm=0 tag=0 bytes=8 partitions=2 request=1\n"
     "3 0 MpiPready request=1 partition=0\n", "outside a started round"),
    ("1 0 MpiPsendInit receiver=1 comm=0 tag=0 bytes=8 partitions=0 request=1\n",
     "0 partitions"),
    ("1 0 MpiPrecvInit sender=1 comm=0 tag=0 bytes=8 partitions=1 request=1\n"
     "2 0 MpiPready request=1 partition=0\n", "which is a partitioned receive"),
])
def test_bad_partitioned_records(tmp_path, body, expected):
    with pytest.raises(TraceError) as err:
        match(_trace(tmp_path, body))
    assert expected in str(err.value) and "location 0, record" in str(err.value)
