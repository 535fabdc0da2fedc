"""Who was late at a message: the criteria the engine's graph (R2) and the
network fit (:mod:`compensate.engine.fit`) share, so that both decide on the same
numbers whether a receive measured its transfer. Its own module because the
graph needs them and the fit builds graphs (zero-byte links,
:func:`compensate.engine.fit.observe_links`).
"""

from __future__ import annotations

import numpy as np

from compensate.engine.span import on_grid
from compensate.platform import Platform

#: A receiver counts as having waited only if the message arrived later than its
#: ready time by more than one tick plus this fraction of the copy time and the
#: overhead the ready time was computed with. Without it, the sub-tick rounding of
#: the copy cost alone admits receives whose receiver was late (measured on the
#: quantized pipeline benchmark: the copy time of 16 KiB is 2434.65 ns, the
#: simulated trace holds 2435).
WAIT_MARGIN = 0.1


def exchange_arrival(platform: Platform, res: float, sizes: np.ndarray,
                     sent: np.ndarray) -> np.ndarray | None:
    """When the messages of MPI_Sendrecv send parts (``sizes`` bytes, copied out
    by ``sent``: the send record plus its overhead and copy, ticks) can have
    arrived by the platform's network model (``latency + s · per_byte``, a
    ping-pong's); None without a model.

    R2 decides by the send call's end whether the receiver saw the transfer (m.1:
    it entered before; docs/design.md §3). An MPI_Sendrecv ends when its *receive*
    part does, so its Leave says nothing of its message: a receiver that came long
    after the message had arrived still "overlapped" it, and its lateness was
    taken for the transfer. The send part ends unrecorded; with a network model
    it ends, for this test, when its message can have arrived. Without one the
    call's Leave stays the paper's proxy (in a ring of Sendrecv whose receivers
    wait for their messages, the send record alone would make most transfers
    unobserved and the lower bound too early)."""
    if platform.network is None:
        return None
    latency, per_byte = platform.network
    return sent + on_grid((latency + np.asarray(sizes, dtype=np.float64) * per_byte) * res)


def message_was_late(recv_m, cs, free_m, before_m):
    """Did the message arrive after the receiver was ready (so the receive time
    measures the transfer)? ``recv_m`` the receive record, ``cs`` its copy time,
    ``free_m`` when the receiver was ready (the record before plus its overhead and,
    after a send, that send's copy), ``before_m`` the record before; ticks, scalars
    or arrays. Clearly after: rounding and calibration error must not admit a late
    receiver (margin 1 tick + :data:`WAIT_MARGIN` of the copy and of what ``free_m``
    added)."""
    margin = 1.0 + WAIT_MARGIN * (cs + free_m - before_m)
    return recv_m - cs > free_m + margin


#: Ticks by which a receive may complete later than one copy after the receiver was
#: ready and still count as "the receiver was late": the copy cost and the timestamps
#: are rounded to whole ticks independently.
RECEIVER_LATE_TICKS = 2.0


def receiver_was_late(recv_m, cs, free_m):
    """Did the receive complete just one copy after the receiver was ready (so the
    message had arrived before, at an unknown time, and the measured interval is only
    an upper bound of the transfer)? The counterpart of :func:`message_was_late`;
    between the two, which party was late is unclear."""
    return recv_m - cs <= free_m + RECEIVER_LATE_TICKS
