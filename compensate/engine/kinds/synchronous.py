"""Synchronous (rendezvous) sends: MPI_Ssend and MPI_Issend always, MPI_Send above
``--eager-limit``. The transfer starts at the handshake, when both the send was
issued and the receive posted; after it the sender's call ends and the receive
completes (docs/design.md §2, "synchronous"). Both intervals after the handshake are
measured, so both bounds use them.

MPI_Issend: the sender's dependent record is the MpiIsendComplete in the
MPI_Wait/Test that completes the request, not the Leave of the MPI_Issend call.
It happens once the sender is ready (the record before it) and the transfer that
began at the handshake is done (:class:`IssendComplete`). If the sender waited in
that call (the completion is later than the record before it plus its overhead),
the transfer is measured: ``complete_m - handshake_m``; if the receiver waited for
the data instead, its receive shows the arrival: ``recv_m - C(s)·s - handshake_m``.
If neither, it is only bounded: lower the copy ``C(s)·s`` (no network time), upper
``complete_m - handshake_m``, fitted ``C(s)·s + network(s)`` clamped between them.
A nonblocking receive of a synchronous message (:class:`SyncIrecv`) is treated the
same way on the receiving side.

Matching: :mod:`compensate.matching.p2p` (``MessageTable.synchronous``). The send
call's Leave (an MPI_Issend's MpiIsendComplete) depends on the receive's posting
record; the receive on the send.
"""

from __future__ import annotations

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.kinds.p2p import P2PRecv, recv_params_of_message
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


class IssendComplete(Rule):
    """An MPI_Issend's completion: when the sender is ready and ``transfer`` after the
    handshake (``waited``: the measured completion showed the transfer, so the ready
    time is the record before it, without the measured wait; else R1)."""

    __slots__ = ("send", "post", "transfer", "waited")

    def __init__(self, send: Ref, post: Ref, transfer: float, waited: bool,
                 needs: list[Need]) -> None:
        self.send, self.post, self.transfer, self.waited = send, post, transfer, waited
        self.needs = needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        ready = prev_a if self.waited else local
        return max(ready, max(at(A, self.send), at(A, self.post)) + self.transfer)


class SyncIrecv(Rule):
    """The completion (MpiIrecv, in MPI_Wait/Test) of a nonblocking receive of a
    synchronous message: when the receiver is ready and ``to_recv`` after the
    handshake, strictly after the send. ``waited``: the measured completion showed
    the arrival (``to_recv`` measured; ready = the record before plus the copy);
    else the receiver was late and ``to_recv`` is a bound (R1 gives the ready time)."""

    __slots__ = ("send", "post", "to_recv", "waited", "cs")

    def __init__(self, send: Ref, post: Ref, to_recv: float, waited: bool, cs: float,
                 needs: list[Need]) -> None:
        self.send, self.post, self.to_recv, self.waited, self.cs = send, post, to_recv, waited, cs
        self.needs = needs

    def value(self, A: list, local: float, prev_a: float, ctx: Context) -> float:
        send_a = at(A, self.send)
        ready = prev_a + self.cs if self.waited else local
        return max(ready, max(send_a, at(A, self.post)) + self.to_recv, send_a + TICK)


def _issend_transfer(graph: Graph, s_li: int, exit_idx: int, size: int,
                     handshake_m: float) -> tuple[float, bool]:
    """(transfer time after the handshake, whether the measurement shows it) of an
    MPI_Issend whose completion is record ``exit_idx``."""
    gc = graph.g(s_li, exit_idx)
    measured = max(0.0, graph.tm[gc] - handshake_m)
    before = gc - 1
    waited = exit_idx > 0 and graph.tm[gc] - graph.tm[before] - graph.kind_ovh(before) > 1.0
    if waited:
        return measured, True
    return _bounded(graph, graph.copy(size), size, measured), False


def _bounded(graph: Graph, copies: float, size: int, measured: float) -> float:
    """A transfer the trace did not show, after the handshake: lower ``copies`` (no
    network time), upper the ``measured`` interval, fitted ``copies + network(size)``
    between the two."""
    if graph.bound == "lower":
        return min(copies, measured)
    if graph.bound == "fitted" and graph.network_time is not None:
        return min(copies + graph.network_time(size) * graph.res, measured)
    return measured


def targets(graph: Graph, t: MessageTable, rows: np.ndarray) -> np.ndarray:
    """(location position, record) of every record these messages' rules apply to."""
    return np.concatenate([np.stack([t.send_li[rows], t.send_exit_idx[rows]], axis=1),
                           np.stack([t.recv_li[rows], t.recv_idx[rows]], axis=1)])


def build(graph: Graph, t: MessageTable, rows: np.ndarray, shared: np.ndarray,
          dep_rules: dict) -> None:
    """A :class:`SyncExit` and a :class:`SyncRecv` rule per synchronous message, of
    the ends the graph evaluates (not on ghost locations, whose owners build theirs);
    a message is counted where its receive is evaluated (summed over the ranks of
    the distributed run, the one-process count)."""
    s_own = r_own = np.ones(rows.size, dtype=bool)
    if graph.has_ghosts and rows.size:
        ghost = np.asarray(graph.ghost, dtype=bool)
        s_own, r_own = ~ghost[t.send_li[rows]], ~ghost[t.recv_li[rows]]
    graph.stats.p2p_cases["synchronous"] += int(np.count_nonzero(r_own))
    for row, sends, receives in zip(rows.tolist(), s_own.tolist(), r_own.tolist(),
                                    strict=True):
        if not (sends or receives):
            continue
        s_li, s_idx = int(t.send_li[row]), int(t.send_idx[row])
        r_li, post = int(t.recv_li[row]), int(t.recv_post_idx[row])
        exit_idx, recv_idx = int(t.send_exit_idx[row]), int(t.recv_idx[row])
        enter_idx = int(t.recv_enter_idx[row])
        sg, pg = graph.g(s_li, s_idx), graph.g(r_li, post)
        ts_m, post_m = graph.tm[sg], graph.tm[pg]
        handshake_m = max(ts_m + graph.kind_ovh(sg), post_m + graph.kind_ovh(pg))
        to_exit = max(0.0, graph.tm[graph.g(s_li, exit_idx)] - handshake_m)
        to_recv = max(0.0, graph.tm[graph.g(r_li, recv_idx)] - handshake_m)
        cs = graph.copy(int(t.size[row]))
        nb_recv = bool(t.nonblocking_recv[row]) and post != recv_idx  # in MPI_Wait/Test
        # the receive shows the arrival (recv = arrival + copy) if it waited for the data,
        # which a blocking receive of a synchronous message always does
        recv_waited = not nb_recv or graph.who_was_late(r_li, recv_idx, cs) == "message"
        if t.nonblocking_send[row]:  # MPI_Issend: its completion in MPI_Wait/Test
            transfer, waited = _issend_transfer(graph, s_li, exit_idx, int(t.size[row]),
                                                handshake_m)
            if not waited and recv_waited:
                transfer = max(0.0, to_recv - cs)
            exit_rule = Pending(IssendComplete, (("ref", s_li, s_idx), ("ref", r_li, post),
                                                 transfer, waited), [(r_li, post)])
        else:
            exit_rule = Pending(SyncExit, (("ref", s_li, s_idx), ("ref", r_li, post),
                                           to_exit), [(r_li, post)])
        if sends:
            dep_rules.setdefault((s_li, exit_idx), []).append(exit_rule)
        if not receives:
            continue
        if t.no_recv_copy[row]:
            # a matched probe took the message: it waits for the message as for an eager
            # one (R2 without a receive copy); the posting the sender waits for is the
            # MPI_Mrecv/Imrecv after it
            dep_rules.setdefault((r_li, recv_idx), []).append(
                Pending(P2PRecv, (recv_params_of_message(graph, row),), [(s_li, s_idx)]))
            continue
        enter = ("ref", r_li, enter_idx) if enter_idx >= 0 else None
        if nb_recv:
            if not recv_waited:  # the receiver was late: only bounds of the transfer + copy
                to_recv = _bounded(graph, 2.0 * cs, int(t.size[row]), to_recv)
            dep_rules.setdefault((r_li, recv_idx), []).append(
                Pending(SyncIrecv, (("ref", s_li, s_idx), ("ref", r_li, post), to_recv,
                                    recv_waited, cs), [(s_li, s_idx)]))
            continue
        dep_rules.setdefault((r_li, recv_idx), []).append(
            Pending(SyncRecv, (("ref", s_li, s_idx), ("ref", r_li, post), to_recv, enter),
                    [(s_li, s_idx)]))
