"""The seed's partitioned wait states (Thärigen, Hermanns, Geimer, SC-W 2023;
issue #20), for :func:`compensate.analysis.waitstates.wait_states`:

* **Late Sender (partitioned)**, ``partitioned_late_sender``: a call that observes
  receive partitions (a successful MPI_Parrived, or the MPI_Wait/Test that
  completes the receive) was entered before the last MPI_Pready it depends on:
  waiting = Enter of the latest such MPI_Pready call − Enter of the observing
  call, bounded by the observing call's duration. At the completion these are
  the partitions no Parrived observed before (the seed's prototype takes every
  Pready of the round; the ones observed earlier precede the completion call).
* **Late Receiver (partitioned)**, ``partitioned_late_receiver``: the call that
  completes a partitioned send was entered before the receiver started the
  matching round (its MPI_Start): waiting = Enter of the receiver's MPI_Start −
  Enter of the send's completion call, bounded by that call (a library that
  transfers only into a started receive keeps the sender there).

Both come from the matched rounds of :mod:`compensate.matching.partitioned`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np

from compensate.matching import Matching

#: the two states, in the order :data:`compensate.analysis.calls.WAIT_STATES` lists them
STATES = ("partitioned_late_sender", "partitioned_late_receiver")


def partitioned_waits(matching: Matching, calls: dict, call_times: Callable
                      ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{state: (location, start tick, waiting ticks)}`` of every candidate (zero
    waits included; the caller keeps the positive ones). ``call_times(calls[loc],
    idx, time)`` gives (enter, end, call position) of the calls around records."""
    out: dict[str, list[tuple[int, int, int]]] = {s: [] for s in STATES}
    deps = matching.partitioned

    def call(loc: int, idx: int) -> tuple[int, int]:
        c = calls[loc]
        t0, t1, _ = call_times(c, np.array([idx], dtype=np.int64), c.events.time)
        return int(t0[0]), int(t1[0])

    by_recv: dict[tuple[int, int], list] = defaultdict(list)
    for m in deps.messages:
        if m.send[0] != m.recv[0]:
            by_recv[m.recv].append(m)
    for (r_loc, r_idx), msgs in by_recv.items():
        t0, t1 = call(r_loc, r_idx)
        latest = max(call(*m.send)[0] for m in msgs)
        out["partitioned_late_sender"].append((r_loc, t0, min(max(latest - t0, 0), t1 - t0)))
    for tr in deps.transfers:
        if tr.send_op.loc == tr.recv_op.loc or tr.send_round.complete < 0:
            continue
        t0, t1 = call(tr.send_op.loc, tr.send_round.complete)
        start = call(tr.recv_op.loc, tr.recv_round.start)[0]
        out["partitioned_late_receiver"].append(
            (tr.send_op.loc, t0, min(max(start - t0, 0), t1 - t0)))
    return {s: tuple(np.array([x[k] for x in rows], dtype=np.int64) for k in range(3))
            for s, rows in out.items()}
