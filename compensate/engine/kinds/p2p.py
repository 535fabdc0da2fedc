"""Eager point-to-point messages (R2; R2f under ``--bound fitted``): MpiSend or
MpiIsend matched to MpiRecv or MpiIrecv, blocking or completed in
Wait/Waitall/Test (the completion call is then the receive call), or taken by a
matched probe (the MpiProbe of MPI_Mprobe/Improbe: R2 with no receive copy, the
``no_recv_copy`` column of the message table).

Matching: :mod:`compensate.matching.p2p`. The receive record depends on the send
record. The common case, a receive that completes one message, is evaluated
inline by the engine from per-message arrays under every bound
(:meth:`compensate.engine.graph.Graph._fast_fields`, the same arithmetic as
:func:`compensate.engine.rules.recv_time`, the fitted bound's who-was-late test
vectorised in :func:`compensate.engine.graph.late_parties`); where one record
completes several messages, through the :class:`P2PRecv` rule. Verified by
:func:`compensate.verify.checks.verify` (every receive at least one tick after its
send).
"""

from __future__ import annotations

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.pending import Pending, PendingRecv
from compensate.engine.rules import Context, Need, RecvParams, Rule, recv_time
from compensate.matching import MessageTable


class P2PRecv(Rule):
    """R2 for a matched eager point-to-point message (generic path)."""

    __slots__ = ("p",)

    def __init__(self, p: RecvParams, needs: list[Need]) -> None:
        self.p, self.needs = p, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        return recv_time(self.p, A, prev_a, ctx)


def targets(graph: Graph, t: MessageTable, rows: np.ndarray) -> np.ndarray:
    """(location position, record) of every record these messages' rules apply to."""
    return np.stack([t.recv_li[rows], t.recv_idx[rows]], axis=1)


def build(graph: Graph, t: MessageTable, rows: np.ndarray, shared: np.ndarray,
          dep_rules: dict) -> None:
    """Rules of the eager messages ``rows``: the fast path (``graph.fast_rows``, any
    bound) where the receive completes only this message; a
    :class:`P2PRecv` rule otherwise (``shared``: global records that several message
    rules apply to; there the later value wins). Of a receive on a ghost location
    (another rank's, in the distributed run) no rule: its owner builds it."""
    is_generic = np.zeros(rows.size, dtype=bool)
    if shared.size:
        rg = graph.off[t.recv_li[rows]] + t.recv_idx[rows]
        is_generic = np.isin(rg, shared)
    graph.fast_rows = rows[~is_generic]
    generic = rows[is_generic]
    if graph.has_ghosts and generic.size:
        generic = generic[~np.asarray(graph.ghost, dtype=bool)[t.recv_li[generic]]]
    for row in np.sort(generic).tolist():
        li, i = int(t.recv_li[row]), int(t.recv_idx[row])
        p = recv_params_of_message(graph, row)
        s_li, s_idx = int(t.send_li[row]), int(t.send_idx[row])
        dep_rules.setdefault((li, i), []).append(Pending(P2PRecv, (p,), [(s_li, s_idx)]))


def recv_params_of_message(graph: Graph, row: int) -> PendingRecv:
    """R2 inputs of message ``row`` from the per-message columns ``graph.m``."""
    m = graph.m
    return PendingRecv(
        send=(int(m.send_li[row]), int(m.send_idx[row])),
        enter=(int(m.recv_li[row]), int(m.enter_idx[row])) if m.enter_idx[row] >= 0
        else None,
        enter_const=float(m.enter_const[row]), cs=float(m.cs[row]), lo=float(m.lo[row]),
        observed=float(m.observed[row]), overlapped=bool(m.overlapped[row]),
        extra=float(m.extra[row]), has_prev=bool(m.recv_idx[row] > 0),
        size=int(m.size[row]), recv=(int(m.recv_li[row]), int(m.recv_idx[row])),
        fitted=graph.bound == "fitted")


def implied_message(graph: Graph, s_li: int, s_idx: int, s_exit: int, r_li: int,
                    enter_idx: int, size: int, recv_idx: int,
                    one_of_many: bool = False) -> PendingRecv:
    """R2 inputs of a collective's implied message (R4, R5): sent at record ``s_idx``
    (its call ends at ``s_exit``), received at ``recv_idx`` in the call entered at
    ``enter_idx``. ``one_of_many``: the receive record completes several messages
    (the root of an n-to-1)."""
    tm = graph.tm
    recv_m = float(tm[graph.g(r_li, recv_idx)])
    send_m = float(tm[graph.g(s_li, s_idx)])
    cs = graph.copy(size)
    enter_m = float(tm[graph.g(r_li, enter_idx)]) if enter_idx >= 0 else recv_m
    send_free = send_m + graph.kind_ovh(graph.g(s_li, s_idx))
    fl = graph.flushes
    if fl.any:  # R6 extended: a flush after the sender's or receiver's begin, inside its
        # call, delays when that member joined (its data left / it was ready)
        sg, rg = graph.g(s_li, s_idx), graph.g(r_li, recv_idx)
        send_free = float(fl.ready_after(sg, graph.g(s_li, s_exit), send_free, True))
        if enter_idx >= 0:
            enter_m = float(fl.ready_after(graph.g(r_li, enter_idx), rg, enter_m))
    observed = recv_m - send_free
    overlapped = enter_m <= float(tm[graph.g(s_li, s_exit)])
    return PendingRecv(
        send=(s_li, s_idx), enter=(r_li, enter_idx) if enter_idx >= 0 else None,
        enter_const=recv_m - cs, cs=cs, observed=observed, overlapped=overlapped,
        extra=graph.extra(r_li, recv_idx), has_prev=recv_idx > 0, size=size,
        recv=(r_li, recv_idx), fitted=graph.bound == "fitted", one_of_many=one_of_many)
