"""Random *valid* traces for property tests: a tiny simulation that keeps every
receive after its send and every collective exit after all its enters."""

from __future__ import annotations

from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OPS,
    ENTER,
    LEAVE,
    RECV,
    SEND,
    Comm,
    Definitions,
    Location,
    RowBuilder,
    Trace,
)

REGIONS = {1: "MPI_Send", 2: "MPI_Recv", 3: "work", 4: "MPI_Allreduce", 5: "MPI_Bcast",
           6: "MPI_Reduce"}
OPS = [("ALLREDUCE", 4), ("BCAST", 5), ("REDUCE", 6), ("BARRIER", 4)]


def random_trace(draw_int, n_locs: int, steps: int) -> Trace:
    """``draw_int(lo, hi)`` supplies every random choice (hypothesis or random)."""
    t = [draw_int(0, 1000) for _ in range(n_locs)]
    b = [RowBuilder() for _ in range(n_locs)]

    def gap() -> int:
        return draw_int(1, 3000)

    for _ in range(steps):
        what = draw_int(0, 3)
        if what == 0:  # local call
            loc = draw_int(0, n_locs - 1)
            b[loc].add(t[loc], ENTER, region=3)
            t[loc] += gap()
            b[loc].add(t[loc], LEAVE, region=3)
            t[loc] += gap()
        elif what in (1, 2):  # blocking message
            s = draw_int(0, n_locs - 1)
            r = (s + draw_int(1, n_locs - 1)) % n_locs
            size = draw_int(0, 1 << 20)
            tag = draw_int(0, 2)
            b[s].add(t[s], ENTER, region=1)
            t[s] += gap()
            ts = t[s]
            b[s].add(ts, SEND, peer=r, comm=0, tag=tag, size=size)
            t[s] += gap()
            b[s].add(t[s], LEAVE, region=1)
            t[s] += gap()
            b[r].add(t[r], ENTER, region=2)
            t[r] = max(t[r] + gap(), ts + gap())
            b[r].add(t[r], RECV, peer=s, comm=0, tag=tag, size=size)
            t[r] += gap()
            b[r].add(t[r], LEAVE, region=2)
            t[r] += gap()
        else:  # collective on everybody
            name, region = OPS[draw_int(0, len(OPS) - 1)]
            root = draw_int(0, n_locs - 1) if name in ("BCAST", "REDUCE") else -1
            size = draw_int(0, 1 << 16)
            begins = []
            for loc in range(n_locs):
                b[loc].add(t[loc], ENTER, region=region)
                t[loc] += gap()
                begins.append(t[loc])
                b[loc].add(t[loc], COLL_BEGIN)
            last = max(begins)
            for loc in range(n_locs):
                t[loc] = max(t[loc], last) + gap()
                b[loc].add(t[loc], COLL_END, peer=root, comm=0, size=size, size_recv=size,
                           op=COLLECTIVE_OPS[name])
                t[loc] += gap()
                b[loc].add(t[loc], LEAVE, region=region)
                t[loc] += gap()
    defs = Definitions(
        timer_resolution=1_000_000_000,
        locations={i: Location(i, f"rank {i}", i) for i in range(n_locs)},
        regions=dict(REGIONS),
        comms={0: Comm(0, "MPI_COMM_WORLD", tuple(range(n_locs)))},
    )
    return Trace(defs, {i: b[i].build() for i in range(n_locs)}, "<random>")
