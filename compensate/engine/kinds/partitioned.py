"""MPI-4 partitioned point-to-point (R11, docs/compensation.md "Partitioned
point-to-point"; issue #20).

Each :class:`~compensate.matching.partitioned.PartitionMessage` is a message of
its shared bytes from the send partition's ``MpiPready`` (where the library may
start copying that share out) to the record that observes the receive partition:
a successful ``MpiParrived`` or, for a partition no Parrived observed, the
round's ``MpiPrecvComplete`` (the receive completes after its last partition).
The receiving call (MPI_Parrived, MPI_Wait/Test) is the receive call of R2: its
Enter is the receive's ``enter``, the Pready call's Leave the send call's exit;
the least transfer (the lower bound's) is the copy of the whole send partition
out plus the copy of the shared bytes in, ``C(b_i)·b_i + C(b_ij)·b_ij``.
A record that observes several send partitions (a receive partition that
overlaps several send partitions, or a completion that observes every partition
not yet seen) waits for all of them, as the root of an n-to-1 collective (R5):
``r_a = max_i R2(message_i)``, and only the last arrival's transfer can have been
observed (:func:`last`). Lower/upper/fitted are R2's.

The send completion (``MpiPsendComplete``) is local: R11 assumes the library
needs only the sender's own Pready calls (which precede the completion on its
location or on a thread joined before it), as an eager or buffered send does;
it follows its own timeline (R1). Verified by
:func:`compensate.verify.partitioned.verify_partitioned`.

Matching: :mod:`compensate.matching.partitioned`.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.kinds.nonblocking import call_enter, call_leave
from compensate.engine.kinds.ntoone import NToOne
from compensate.engine.kinds.p2p import implied_message
from compensate.engine.pending import Pending
from compensate.matching.partitioned import PartitionedDeps, PartitionMessage

__all__ = ["NToOne", "build_all", "last"]


def last(graph: Graph, msgs: list[PartitionMessage]) -> int:
    """Index in ``msgs`` of the message that reached its receiver last in the
    measured run (only its transfer can show in the receiver's wait): under the
    fitted bound by the fitted model, else by when its data left (Pready +
    overhead + copy)."""
    arrival = []
    for m in msgs:
        g = graph.g(graph.pos_of[m.send[0]], m.send[1])
        net = graph.network_time(m.size) * graph.res if graph.network_time is not None \
            else 0.0
        arrival.append(graph.tm[g] + graph.kind_ovh(g) + 2.0 * graph.copy(m.size) + net)
    return int(np.argmax(arrival))


def build_all(graph: Graph, deps: PartitionedDeps, dep_rules: dict) -> None:
    """One :class:`NToOne` rule per observing record (Parrived or receive
    completion) over the partition messages it observes."""
    by_recv: dict[tuple[int, int], list[PartitionMessage]] = defaultdict(list)
    for m in deps.messages:
        if m.send[0] != m.recv[0]:  # to self: ordered by its own location
            by_recv[m.recv].append(m)
    for (r_loc, r_idx), msgs in by_recv.items():
        r_li = graph.pos_of[r_loc]
        enter = call_enter(graph, r_li, r_idx)
        k = last(graph, msgs) if len(msgs) > 1 else 0
        params = []
        for n, m in enumerate(msgs):
            s_li = graph.pos_of[m.send[0]]
            p = implied_message(graph, s_li, m.send[1], call_leave(graph, s_li, m.send[1]),
                                r_li, enter, m.size, r_idx, one_of_many=n != k)
            # the least transfer: the Pready copies its whole partition out, the
            # receiver copies in the bytes the two partitions share
            p.lo = graph.copy(max(m.send_size, m.size)) + p.cs
            params.append(p)
        needs = [(graph.pos_of[m.send[0]], m.send[1]) for m in msgs]
        dep_rules.setdefault((r_li, r_idx), []).append(Pending(NToOne, (params,), needs))
