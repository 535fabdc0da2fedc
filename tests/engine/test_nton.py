"""compensate.engine.kinds.nton: the synchronisation times of blocking n-to-n
instances computed together (``sync_table``) equal the per-instance
``sync_times``, bit for bit, whatever the members record inside their calls."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.engine.graph import Graph
from compensate.engine.kinds.nton import sync_table, sync_times
from compensate.engine.run import Stats
from compensate.matching import match
from compensate.matching.collectives import N_TO_N
from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OPS,
    ENTER,
    LEAVE,
    Comm,
    Definitions,
    Location,
    Trace,
)
from compensate.platform import Platform
from tests.rowbuilder import RowBuilder

_OPS = [COLLECTIVE_OPS["ALLREDUCE"], COLLECTIVE_OPS["BARRIER"], COLLECTIVE_OPS["ALLGATHER"]]


@st.composite
def _programs(draw):
    """Locations running rounds of one n-to-n collective each, some members with
    0-3 nested calls inside theirs (records between begin and end, some stamped
    before the latest enter), at random times; the overheads are fractions of a
    tick, by kind."""
    n = draw(st.integers(2, 5))
    rows = [RowBuilder() for _ in range(n)]
    t = [draw(st.integers(0, 50)) for _ in range(n)]
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(_OPS))
        enters = []
        for loc in range(n):
            t[loc] += draw(st.integers(1, 40))
            rows[loc].add(t[loc], ENTER, region=1)
            t[loc] += draw(st.integers(0, 3))
            rows[loc].add(t[loc], COLL_BEGIN)
            enters.append(t[loc])
        latest = max(enters)
        for loc in range(n):
            for _ in range(draw(st.integers(0, 3))):
                t[loc] += draw(st.integers(0, 9))
                rows[loc].add(t[loc], ENTER, region=2)
                t[loc] += draw(st.integers(0, 9))
                rows[loc].add(t[loc], LEAVE, region=2)
            t[loc] = max(t[loc], latest) + draw(st.integers(0, 20))
            rows[loc].add(t[loc], COLL_END, comm=0, op=op, peer=-1)
            t[loc] += draw(st.integers(0, 3))
            rows[loc].add(t[loc], LEAVE, region=1)
    defs = Definitions(timer_resolution=10**9,
                       locations={i: Location(i, f"rank {i}", i) for i in range(n)},
                       regions={1: "MPI_Allreduce", 2: "inner"},
                       comms={0: Comm(0, "MPI_COMM_WORLD", tuple(range(n)))})
    tenth = st.integers(1, 90).map(lambda x: x * 1e-10)
    platform = Platform(draw(tenth), {k: draw(tenth) for k in
                                      ("Enter", "Leave", "MpiCollectiveBegin")})
    return Trace(defs, {i: rows[i].build() for i in range(n)}), platform


@settings(max_examples=60, deadline=None)
@given(_programs(), st.sampled_from(["uniform", "per-process"]))
def test_the_table_equals_each_instances_sync_times(program, exit_):
    trace, platform = program
    matching = match(trace)
    graph = Graph(trace, platform, "lower", exit_, None, matching, Stats())
    table = sync_table(graph, matching.instances)
    blocking = [n for n, inst in enumerate(matching.instances)
                if inst.cls == N_TO_N and not inst.nonblocking]
    assert sorted(table) == blocking and blocking
    for n in blocking:
        inst = matching.instances[n]
        lis = [graph.pos_of[loc] for loc in inst.locs]
        members = list(range(len(lis)))
        one = sync_times(graph, inst, lis, members, members)
        got = np.array(table[n])
        want = np.array([one[i] for i in members])
        assert got.tobytes() == want.tobytes()  # (bit for bit, the sign of zero too)
