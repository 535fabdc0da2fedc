"""What a rank reads beyond its own records' blocks (compensate/parallel/reading.py):
the one read the cut agreement and the segment pass share."""

from __future__ import annotations

import pytest


def test_one_read_hands_the_segment_pass_each_chunk_the_agreement_read():
    """The agreement's reading holds each chunk for the segment pass, which gets
    them in order, each once, and ends with the input; asking for a chunk the
    agreement has not read yet is an error, not a second read."""
    from compensate.parallel.reading import OneRead

    source = [{0: i} for i in range(4)]
    pulled = []

    def chunks():
        for c in source:
            pulled.append(c)
            yield c

    read = OneRead(chunks())
    first, second = read.first(), read.second()
    assert [next(first), next(first)] == source[:2]
    assert [next(second), next(second)] == source[:2]
    with pytest.raises(RuntimeError, match="past the records"):
        next(second)
    second = read.second()
    assert list(first) == source[2:]
    assert list(second) == source[2:] and not read.held
    assert pulled == source  # every chunk read from the input once
