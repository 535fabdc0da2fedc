"""The thread transport (compensate/parallel/transport.py): alltoall and
allgather by rank; a rank that fails does not leave the others waiting."""

from __future__ import annotations

import numpy as np
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


def test_the_buffer_calls_by_rank_with_uneven_counts():
    """alltoall_array's rows and alltoallv_array's blocks arrive by source rank;
    rank s sends rank d (s + d) % 3 items, some of them none."""
    def body(t):
        head = np.array([[t.rank, d] for d in range(t.size)], dtype=np.int64)
        got = t.alltoall_array(head)
        assert got.tolist() == [[s, t.rank] for s in range(t.size)]
        counts = np.array([(t.rank + d) % 3 for d in range(t.size)])
        send = np.concatenate([np.full(c, 10 * t.rank + d, np.int64)
                               for d, c in enumerate(counts)])
        recv = t.alltoallv_array(send, counts, np.array([(s + t.rank) % 3
                                                         for s in range(t.size)]))
        return recv.tolist()

    assert run_threads(3, body) == [[10, 20, 20], [1, 11, 11], [2, 2, 22]]
