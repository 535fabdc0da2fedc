"""Synchronous (rendezvous) sends: MPI_Ssend always, MPI_Send above
``--eager-limit``. The transfer starts at the handshake, when both the send was
issued and the receive posted; after it the sender's call ends and the receive
completes (docs/design.md §2, "synchronous"). Both intervals after the handshake are
measured, so both bounds use them.

Matching: :mod:`compensate.matching.p2p` (``MessageTable.synchronous``). The send
call's Leave depends on the receive's posting record; the receive on the send.
"""

from __future__ import annotations

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.pending import Pending
from compensate.engine.rules import TICK, Context, Need, Ref, Rule, at
from compensate.matching import MessageTable


class SyncExit(Rule):
    """The sender's call ends ``to_exit`` after the handshake."""

    __slots__ = ("send", "post", "to_exit")

    def __init__(self, send: Ref, post: Ref, to_exit: float, needs: list[Need]) -> None:
        self.send, self.post, self.to_exit, self.needs = send, post, to_exit, needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        return max(at(A, self.send), at(A, self.post)) + self.to_exit


class SyncRecv(Rule):
    """The receive completes ``to_recv`` after the handshake, strictly after the send
    and after the receive call's Enter."""

    __slots__ = ("send", "post", "to_recv", "enter")

    def __init__(self, send: Ref, post: Ref, to_recv: float, enter: Ref | None,
                 needs: list[Need]) -> None:
        self.send, self.post, self.to_recv, self.enter = send, post, to_recv, enter
        self.needs = needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        send_a = at(A, self.send)
        t = max(max(send_a, at(A, self.post)) + self.to_recv, send_a + TICK)
        if self.enter is not None:
            t = max(t, at(A, self.enter) + TICK)
        return t


def targets(graph: Graph, t: MessageTable, rows: np.ndarray) -> np.ndarray:
    """(location position, record) of every record these messages' rules apply to."""
    return np.concatenate([np.stack([t.send_li[rows], t.send_exit_idx[rows]], axis=1),
                           np.stack([t.recv_li[rows], t.recv_idx[rows]], axis=1)])


def build(graph: Graph, t: MessageTable, rows: np.ndarray, shared: np.ndarray,
          dep_rules: dict) -> None:
    """A :class:`SyncExit` and a :class:`SyncRecv` rule per synchronous message."""
    graph.stats.p2p_cases["synchronous"] += int(rows.size)
    for row in rows.tolist():
        s_li, s_idx = int(t.send_li[row]), int(t.send_idx[row])
        r_li, post = int(t.recv_li[row]), int(t.recv_post_idx[row])
        exit_idx, recv_idx = int(t.send_exit_idx[row]), int(t.recv_idx[row])
        enter_idx = int(t.recv_enter_idx[row])
        sg, pg = graph.g(s_li, s_idx), graph.g(r_li, post)
        ts_m, post_m = graph.tm[sg], graph.tm[pg]
        handshake_m = max(ts_m + graph.kind_ovh(sg), post_m + graph.kind_ovh(pg))
        to_exit = max(0.0, graph.tm[graph.g(s_li, exit_idx)] - handshake_m)
        to_recv = max(0.0, graph.tm[graph.g(r_li, recv_idx)] - handshake_m)
        dep_rules.setdefault((s_li, exit_idx), []).append(
            Pending(SyncExit, (("ref", s_li, s_idx), ("ref", r_li, post), to_exit),
                    [(r_li, post)]))
        enter = ("ref", r_li, enter_idx) if enter_idx >= 0 else None
        dep_rules.setdefault((r_li, recv_idx), []).append(
            Pending(SyncRecv, (("ref", s_li, s_idx), ("ref", r_li, post), to_recv, enter),
                    [(s_li, s_idx)]))
