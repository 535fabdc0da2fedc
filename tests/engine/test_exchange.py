"""The outbox of the distributed run's values (compensate/engine/exchange.py): the
Python ``put`` and the C loop's ``cmp_put`` (loop.c) write the same pairs."""

from __future__ import annotations

import ctypes
from array import array

import pytest

from compensate.engine import native
from compensate.engine.exchange import Outbox
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
