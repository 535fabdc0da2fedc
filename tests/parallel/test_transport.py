"""The thread transport (tests/threadranks.py, the tests' ranks): alltoall and
allgather by rank; a rank that fails does not leave the others waiting. The MPI
transport's choice of the C loop's message path (mpich_functions)."""

from __future__ import annotations

import ctypes.util

import numpy as np
import pytest

from tests.threadranks import run_threads


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


def test_point_to_point_messages_and_waves():
    """Thread ranks' point-to-point calls: messages from one rank arrive in the
    order sent, from any rank; a wait with a timeout and nothing sent returns None;
    recv_array takes the next message of one source; a wave is the sum of every
    rank's vector, the same on every rank, and ends a wait_message."""
    def body(t):
        assert t.wait_message(None, 0.001) is None  # nothing sent to anybody yet
        t.allgather(None)  # (nobody sends before every rank has checked)
        nxt = (t.rank + 1) % t.size
        for i in range(3):
            t.isend_array(nxt, np.array([t.rank, i], np.int64))
        t.isend_array(0, np.array([t.rank, 9], np.int64))
        wave = t.iallreduce_sum(np.array([1, t.rank], np.int64))
        got = []
        while True:
            msg = t.wait_message(wave)
            if msg is None:
                break
            got.append((msg[0], msg[1].tolist()))
        # the wave completed (every rank joined it) but not every message need
        # have been taken: take the rest of the previous rank's, in order
        prev = (t.rank - 1) % t.size
        while sum(1 for s, m in got if s == prev and m[1] < 9) < 3:
            got.append((prev, t.recv_array(prev).tolist()))
        got += [(s, m.tolist()) for s, m in t.poll_arrays()]
        t.wait_sends([])
        return wave.wait().tolist(), sorted(got), [m for s, m in got if s == prev and m[1] < 9]

    out = run_threads(3, body)
    for rank, (total, got, ordered) in enumerate(out):
        assert total == [3, 3]
        prev = (rank - 1) % 3
        assert ordered == [[prev, 0], [prev, 1], [prev, 2]]
        nines = [[s, 9] for s in range(3)] if rank == 0 else []
        assert sorted(m for _, m in got) == sorted([[prev, i] for i in range(3)] + nines)


def test_the_c_loops_message_path_only_for_mpichs_abi(tmp_path):
    """mpich_functions gives the C loop the MPI functions only where the handles
    are MPICH's C ints and a status is twenty bytes; any other MPI (the standard
    ABI's handles, Open MPI's pointers) or a library without the symbols keeps the
    messages on mpi4py (None)."""
    from types import SimpleNamespace

    from compensate.parallel.transport import MPICH_COMM_WORLD, MPICH_INT64_T, mpich_functions

    def fake(comm, i64, status, lib):
        return SimpleNamespace(
            COMM_WORLD=SimpleNamespace(handle=comm), INT64_T=SimpleNamespace(handle=i64),
            Status=lambda: SimpleNamespace(tomemory=lambda: memoryview(bytes(status))),
            __file__=lib)

    libc = ctypes.util.find_library("c")
    assert mpich_functions(fake(0x101, MPICH_INT64_T, 20, libc)) is None
    assert mpich_functions(fake(MPICH_COMM_WORLD, MPICH_INT64_T, 24, libc)) is None
    assert mpich_functions(fake(MPICH_COMM_WORLD, MPICH_INT64_T, 20, libc)) is None  # no MPI_*
    assert mpich_functions(fake(MPICH_COMM_WORLD, MPICH_INT64_T, 20,
                                str(tmp_path / "missing.so"))) is None
