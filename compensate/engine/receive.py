"""R2, the blocking receive rule (docs/design.md §3; R2f under the fitted bound), once.

:func:`receive_time` is the rule's arithmetic for one message whose send and
receive-call times are known. Every Python evaluation of R2 goes through it: the
engine's inline receives (:mod:`compensate.engine.run`) and the rule objects
(:func:`compensate.engine.rules.recv_time`: receives completing several messages,
the implied messages of n-to-1 collectives). Its C twin is ``fast_value`` in
``loop.c`` (:mod:`compensate.engine.native`), which must stay the same double
operations in the same order, so that both loops give the same values bit for
bit: a change here is a change there. ``max(a, b)`` is spelled ``b if b > a else
a`` (as in C), which decides which operand is returned when they are equal.
"""

from __future__ import annotations

#: :func:`receive_time`'s case counters, the order of ``cnt`` in ``loop.c``: m.1
#: with the send deciding (a1), m.1 with the receiver deciding (a2), m.2, m.2
#: under the fitted bound with the modelled transfer clamped (the receive time not
#: the model's), and of those the ones where the model itself fell outside [least,
#: upper] (overridden by a bound; a receiver that came after the modelled arrival
#: agrees with the model and is not counted: the fit's plausibility rule)
A1, A2, M2, CLAMPED, OVERRIDDEN = range(5)


def receive_time(send_a: float, enter_a: float, prev_a: float | None, extra: float,
                 cs: float, observed: float, overlapped: int, least: float,
                 fit: float | None, counts: list[int]) -> float:
    """The approximated time of a receive (R2: eq. 3-10; R2f where ``fit`` is given),
    never before the previous record (as every record, R1). Counts its case in
    ``counts`` (:data:`A1`, :data:`A2`, :data:`M2`, :data:`CLAMPED`).

    ``send_a``: the send record's approximated time; ``enter_a``: the receive
    call's Enter's (or, if the receive opens its location, the receive's measured
    time less its copy); ``prev_a``: the previous record's, None if none;
    ``extra``: that record's buffer copy if it is a send of the same call
    (MPI_Sendrecv); ``cs``: the receive copy; ``observed``: the measured transfer
    ``recv_m - send_m - O(MpiSend)``; ``overlapped``: case m.1 (the transfer was
    observed); ``least``: the least transfer m.2 allows (the lower bound's
    ``2·C(s)·s``, the upper bound's ``observed``); ``fit``: the fitted bound's
    modelled transfer (least transfer plus network time), clamped into [lower,
    upper]."""
    if prev_a is not None:  # ready: the previous record written (and its copy)
        ready = prev_a + extra
        if not ready > enter_a:
            ready = enter_a
    else:
        ready = enter_a
    if overlapped:  # m.1: the calls overlapped, transfer observed (eq. 3, 4)
        x = send_a + observed
        y = ready + cs
        if y > x:
            recv_a = y
            counts[A2] += 1
        else:
            recv_a = x
            counts[A1 if x > y else A2] += 1
    else:  # m.2: only bounds (eq. 8-10)
        comm_min = (ready - send_a) + cs
        lo = comm_min if comm_min > least else least
        if fit is None:
            recv_a = send_a + lo
        else:  # R2f: the modelled transfer clamped into [lower, upper]
            hi = comm_min if comm_min > observed else observed
            comm = lo if lo > fit else fit
            if hi < comm:
                comm = hi
            if comm != fit:
                counts[CLAMPED] += 1
                if fit < least or fit > hi:
                    counts[OVERRIDDEN] += 1
            recv_a = send_a + comm
        counts[M2] += 1
    # eq. 7: after the send, and after the receive was entered
    x = send_a + 1.0
    if x > recv_a:
        recv_a = x
    x = enter_a + 1.0
    if x > recv_a:
        recv_a = x
    if prev_a is not None and prev_a > recv_a:  # R1
        recv_a = prev_a
    return recv_a
