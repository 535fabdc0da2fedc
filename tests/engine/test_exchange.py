"""The outbox of the distributed run's values (compensate/engine/exchange.py): the
Python ``put`` and the C loop's ``cmp_put`` (loop.c) write the same pairs; with a
wire the C loop sends and takes the messages itself (over fake MPI functions)."""

from __future__ import annotations

import ctypes
import math
from array import array

import pytest

from compensate.engine import native
from compensate.engine.exchange import TALLY, Outbox, Wire
from compensate.nativebuild import compiled

#: (anchor, rank, request id, offset): anchor 2 asked for by ranks 1 and 3, anchor 5
#: by rank 1 twice (two records of its segment), anchor 7 by rank 3
ROUTES = [(5, 1, 4.0, 0.5), (2, 3, 0.0, 0.0), (2, 1, 1.0, 0.25), (7, 3, 2.0, -1.0),
          (5, 1, 9.0, 0.0)]


def _values() -> array:
    return array("d", [10.0 * k + 0.125 for k in range(9)])


def _pairs(ob: Outbox, lo: int, hi: int) -> list[float]:
    return ob.box[lo:hi].tolist()


def test_put_writes_each_asking_ranks_pairs_and_pending_sends_them_once():
    ob, A = Outbox(9, 4, ROUTES), _values()
    ob.put(A, 3)  # (nobody asked for it)
    assert ob.dirty[0] == 0 and ob.pending() == []
    ob.put(A, 5)
    ob.put(A, 2)
    got = {rank: _pairs(ob, lo, hi) for rank, lo, hi in ob.pending()}
    assert got == {1: [4.0, 50.625, 9.0, 50.125, 1.0, 20.375], 3: [0.0, 20.125]}
    assert ob.pending() == []  # (sent: nothing new)
    ob.put(A, 7)
    assert [(r, _pairs(ob, lo, hi)) for r, lo, hi in ob.pending()] == [(3, [2.0, 69.125])]
    assert [ob.wants(k) for k in range(9)] == [k in (2, 5, 7) for k in range(9)]


@pytest.mark.skipif(not native.available(), reason="no C compiler")
def test_the_c_loop_puts_what_python_puts():
    dll = ctypes.CDLL(str(compiled(native.SOURCE.read_bytes(), "engineloop")))
    put = dll.cmp_put
    put.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    put.restype = None
    A = _values()
    py, c = Outbox(9, 4, ROUTES), Outbox(9, 4, ROUTES)
    arrays = [c.first, c.anchor, c.rank, c.ident, c.offset]
    state = native._Sched(*([None] * 8), 0, -1, 0, None, 0,
                          *(a.buffer_info()[0] for a in arrays), len(c.anchor),
                          *(a.buffer_info()[0] for a in (c.box, c.box_n, c.box_sent,
                                                          c.dirty)))
    for k in (5, 3, 2, 7):
        py.put(A, k)
        put(A.buffer_info()[0], ctypes.addressof(state), k)
    assert c.box.tolist() == py.box.tolist()
    assert c.box_n.tolist() == py.box_n.tolist()
    assert c.pending() == py.pending()


class _FakeMpi:
    """``MPI_Isend``, ``MPI_Iprobe``, ``MPI_Recv`` and ``MPI_Get_count`` as C
    callbacks over Python lists (MPICH's ABI: int handles, a status of five ints,
    the source third): ``inbox`` holds (source, pairs) messages for this rank,
    ``sent`` gets (dest, tag, comm, pairs) of every send."""

    def __init__(self, inbox: list[tuple[int, list[float]]]) -> None:
        self.inbox, self.sent = list(inbox), []
        i, p, ip = ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)
        status = ctypes.POINTER(ctypes.c_int * 5)

        @ctypes.CFUNCTYPE(i, p, i, i, i, i, i, ip)
        def isend(buf, count, dtype, dest, tag, comm, request):
            pairs = (ctypes.c_double * count).from_address(buf)
            self.sent.append((dest, tag, comm, list(pairs)))
            request[0] = 100 + len(self.sent)
            return 0

        @ctypes.CFUNCTYPE(i, i, i, i, ip, status)
        def iprobe(source, tag, comm, flag, st):
            flag[0] = int(bool(self.inbox))
            if self.inbox:
                st.contents[2], st.contents[0] = self.inbox[0][0], len(self.inbox[0][1])
            return 0

        @ctypes.CFUNCTYPE(i, status, i, ip)
        def get_count(st, dtype, count):
            count[0] = st.contents[0]
            return 0

        @ctypes.CFUNCTYPE(i, p, i, i, i, i, i, status)
        def recv(buf, count, dtype, source, tag, comm, st):
            src, pairs = self.inbox.pop(0)
            assert source == src and count == len(pairs)
            (ctypes.c_double * count).from_address(buf)[:] = pairs
            return 0

        self._keep = (isend, iprobe, recv, get_count)
        self.functions = tuple(ctypes.cast(f, ctypes.c_void_p).value
                               for f in (isend, iprobe, recv, get_count))


def _two_locations():
    """A graph of four anchors: location 0 (own) holds anchor 0 (known: 0.0) and
    anchor 1, an inline receive whose send is anchor 3 of location 1 (another
    rank's: its value arrives as request id 0); rank 1 asked for anchor 1 (request
    id 6). R2, bounds only: receive = send + the bound 2.0, here 5.0 + 2.0."""
    from types import SimpleNamespace

    def d(*xs):
        return array("d", xs)

    g = SimpleNamespace(
        code=array("b", [0, 1, 0, 0]), has_prev=array("b", [0, 1, 0, 0]),
        prev_s=d(0, 0, 0, 0), f_s_anchor=array("q", [0, 3, 0, 0]), f_s_off=d(0, 0, 0, 0),
        f_e_anchor=array("q", [-1] * 4), f_e_off=d(0, 0, 0, 0), f_enter_c=d(0, 1, 0, 0),
        f_extra=d(0, 0, 0, 0), f_cs=d(0, 0, 0, 0), f_bound_c=d(0, 2, 0, 0),
        f_observed=d(0, 0, 0, 0), f_overlapped=array("b", [0] * 4), f_fit=d(0, 0, 0, 0))
    A = array("d", [0.0, math.nan, math.nan, math.nan])
    return g, A


@pytest.mark.skipif(not native.available(), reason="no C compiler")
@pytest.mark.parametrize("arrived", [[(1, [0.0, 5.0])], [(1, [3.0, 5.0])]])
def test_the_c_loop_sends_and_takes_the_messages_over_a_wire(arrived):
    """With a wire the C loop takes the value its parked location waits for (it
    wakes), evaluates the receive, sends the value rank 1 asked for in one message
    and answers DONE with the counts the exchange's waves read; a pair whose
    request id this rank never gave is an error the tally keeps (-1), not a write
    out of bounds."""
    g, A = _two_locations()
    fake = _FakeMpi(arrived)
    ob = Outbox(4, 2, [(1, 1, 6.0, 0.0)])
    ob.wire = Wire(fake.functions, (7, 9, 21, -2), [3], 2, sends=1, values=1, spin=0.0)
    loop = native.fast_loop(g, A, False)
    loop.watched[1] = 1
    sch = loop.scheduler([1, 4], [2, 4], [0], {}, 1, ob)
    assert sch.step(1 << 40) == native.DONE
    w = ob.wire
    if arrived[0][1][0] == 3.0:  # (rank 0 asked for one value: request id 0)
        assert w.count("error") == -1 and math.isnan(A[1]) and fake.sent == []
        return
    assert (A[1], A[3]) == (7.0, 5.0)  # (the send's value arrived, the receive after it)
    assert fake.sent == [(1, 21, 7, [6.0, 7.0])]
    assert [w.count(n) for n in TALLY[:6]] == [1, 1, 1, 1, 1, 0]
    assert w.sent_to.tolist() == [0, 1] and w.taken_from.tolist() == [0, 1]
    assert w.handles_used() == [101] and sch.cur.tolist() == [2, 4]
