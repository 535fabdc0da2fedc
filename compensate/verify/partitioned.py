"""Happened-before invariants of MPI-4 partitioned point-to-point (R11; issue #20).

Checked from the matched rounds (:class:`compensate.matching.partitioned.Transfer`)
and the output's times only, independently of the rules that computed them:

* a receive partition observed by a successful ``MpiParrived`` is strictly after
  the ``MpiPready`` of every send partition it shares bytes with (the data cannot
  have arrived before the sender made it ready);
* the receive's completion (``MpiPrecvComplete``) is strictly after the Pready of
  every send partition of its round, i.e. after the last one;
* the send's completion (``MpiPsendComplete``) is not before any Pready of its
  round (on a thread of the sending process other than the completing one, the
  assumption of R11 that the library needs the sender's own Pready calls);
* an unsuccessful test (``MpiPtested``) is not checked: it may lie anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator

from compensate.matching import Matching
from compensate.matching.partitioned import overlap
from compensate.model import Trace
from compensate.verify.result import Verification, note


def verify_partitioned(trace: Trace, matching: Matching, v: Verification) -> None:
    """Add the violations of the invariants above to ``v.partitioned`` (examples to
    ``v.examples``)."""
    for n, tr in enumerate(matching.partitioned.transfers):
        s_op, r_op, s_rnd, r_rnd = tr.send_op, tr.recv_op, tr.send_round, tr.recv_round
        recv, send = v.owns(r_op.loc), v.owns(s_op.loc)  # whose dependent ends are checked
        st = trace.events[s_op.loc].time
        rt = trace.events[r_op.loc].time
        ready = [(i, int(st[x])) for i, x in enumerate(s_rnd.marks) if x >= 0]
        to_self = s_op.loc == r_op.loc
        size = min(s_op.size, r_op.size)
        for j, x in enumerate(r_rnd.marks):
            if x < 0 or not recv:
                continue
            for i, t in ready:
                if overlap(i, s_op.parts, j, r_op.parts, size)[0] and \
                        _early(int(rt[x]), t, to_self):
                    _bad(v, r_op.loc, x, f"Parrived of partition {j} not after the Pready "
                                         f"of send partition {i}", s_op.loc, s_rnd.marks[i],
                         (n, 0, j, i))
        if r_rnd.complete >= 0 and recv:
            for i, t in ready:
                if _early(int(rt[r_rnd.complete]), t, to_self):
                    _bad(v, r_op.loc, r_rnd.complete, "partitioned receive completed before "
                         f"the Pready of send partition {i}", s_op.loc, s_rnd.marks[i],
                         (n, 1, i))
        if s_rnd.complete >= 0 and send:
            for i, t in ready:
                if int(st[s_rnd.complete]) < t:
                    _bad(v, s_op.loc, s_rnd.complete, "partitioned send completed before "
                         f"the Pready of its partition {i}", s_op.loc, s_rnd.marks[i],
                         (n, 2, i))


def _early(recv_t: int, send_t: int, to_self: bool) -> bool:
    return recv_t < send_t if to_self else recv_t <= send_t


def _bad(v: Verification, loc: int, i: int, what: str, s_loc: int, s: int,
         key: tuple = ()) -> None:
    v.partitioned += 1
    note(v, f"location {loc}, record {i}: {what} (location {s_loc}, record {s})", key)


def partitioned_reads(matching: Matching, own: set[int]) -> Iterator[tuple[int, list[int]]]:
    """``(location, record indices)`` that :func:`verify_partitioned` reads of other
    locations: the Preadys of a round whose receive is in ``own`` (a send's
    completion is checked against Preadys of its own location)."""
    for tr in matching.partitioned.transfers:
        if tr.recv_op.loc in own:
            yield tr.send_op.loc, [x for x in tr.send_round.marks if x >= 0]
