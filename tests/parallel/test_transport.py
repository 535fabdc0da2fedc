"""The thread transport (compensate/parallel/transport.py): alltoall and
allgather by rank; a rank that fails does not leave the others waiting."""

from __future__ import annotations

import pytest

from compensate.parallel.transport import run_threads


def test_alltoall_and_allgather():
    def body(t):
        got = t.alltoall([(t.rank, dest) for dest in range(t.size)])
        assert got == [(src, t.rank) for src in range(t.size)]
        return t.allgather(t.rank * 10)

    assert run_threads(3, body) == [[0, 10, 20]] * 3


def test_a_failing_thread_rank_breaks_the_barrier():
    def body(t):
        if t.rank == 1:
            raise ValueError("rank 1 fails")
        t.allgather(None)  # would wait forever for rank 1

    with pytest.raises(ValueError, match="rank 1 fails"):
        run_threads(2, body)
