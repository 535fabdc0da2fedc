"""Random *valid* traces for property tests: a tiny simulation that keeps every
receive after its send and every collective exit after all its enters."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from compensate.model import (
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OPS,
    ENTER,
    IMRECV,
    IMRECV_REQUEST,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    LEAVE,
    MRECV,
    NBC_COMPLETE,
    NBC_REQUEST,
    NONE,
    PROBE,
    RECV,
    SEND,
    Comm,
    Definitions,
    Location,
    Trace,
)
from compensate.platform import Platform
from tests.rowbuilder import RowBuilder

REGIONS = {1: "MPI_Send", 2: "MPI_Recv", 3: "work", 4: "MPI_Allreduce", 5: "MPI_Bcast",
           6: "MPI_Reduce", 7: "MPI_Issend", 8: "MPI_Wait", 9: "MPI_Comm_dup",
           10: "MPI_Comm_free", 11: "MPI_Ibcast", 12: "MPI_Igather", 13: "MPI_Mprobe",
           14: "MPI_Mrecv", 15: "MPI_Improbe", 16: "MPI_Imrecv", 17: "MPI_Ssend",
           18: "MPI_Probe", 19: "MPI_Irecv", 20: "MPI_Isend"}
OPS = [("ALLREDUCE", 4), ("BCAST", 5), ("REDUCE", 6), ("BARRIER", 4)]


def random_trace(draw_int, n_locs: int, steps: int, extended: bool = False,
                 lost: bool = False, gaps: bool = False) -> Trace:
    """``draw_int(lo, hi)`` supplies every random choice (hypothesis or random).
    ``extended`` adds the kinds of issue 16: MPI_Issend completed in MPI_Wait, handle
    collectives (a synchronising MPI_Comm_dup, an MPI_Comm_free that may be local),
    MPI_Ibcast and MPI_Igather completed in MPI_Wait, MPI_Send or MPI_Ssend received by
    a matched probe (MPI_Mprobe + MPI_Mrecv, or MPI_Improbe + MPI_Imrecv + MPI_Wait) or
    found by a plain MPI_Probe and received by MPI_Recv. ``lost`` adds what EZTrace
    writes for an MPI_Irecv completed in MPI_Wait: the receiver's MpiIrecvRequest,
    never completed, and the sender's MPI_Send or MPI_Isend (its request completed
    or not), which no receive record takes; on tags of their own, or with ``gaps``
    on the recorded messages' tags too (a gap among a channel's recorded receives:
    :mod:`compensate.matching.nomessage`)."""
    t = [draw_int(0, 1000) for _ in range(n_locs)]
    b = [RowBuilder() for _ in range(n_locs)]
    req = [0] * n_locs

    def gap() -> int:
        return draw_int(1, 3000)

    for _ in range(steps):
        what = draw_int(0, 8 if extended else 3)
        if lost and draw_int(0, 3) == 0:
            _lost_step(draw_int, gap, t, b, req, n_locs, gaps)
            continue
        if what >= 4:
            _extended_step(what, draw_int, gap, t, b, req, n_locs)
            continue
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
    return _trace(b, n_locs)


def _lost_step(draw_int, gap, t, b, req, n_locs, gaps: bool = False) -> None:
    """A message whose receive the tracer did not record (``lost``): the receiver
    posts an MPI_Irecv and waits; the send is blocking or an MPI_Isend completed
    in an MPI_Wait, or never completed by a record."""
    s = draw_int(0, n_locs - 1)
    r = (s + draw_int(1, n_locs - 1)) % n_locs
    # (tags of their own, unless ``gaps``: a recorded receive on the channel after
    # the lost one is then left unpaired)
    size, how = draw_int(0, 1 << 20), draw_int(0, 2)
    tag = draw_int(0, 4) if gaps else 3 + draw_int(0, 1)
    req[r] += 1
    _one_call(b[r], t, r, gap, 19, IRECV_REQUEST, request=req[r])
    region, kind = (1, SEND) if how == 0 else (20, ISEND)
    req[s] += how > 0
    ts = _one_call(b[s], t, s, gap, region, kind, peer=r, comm=0, tag=tag, size=size,
                   request=req[s] if how else NONE)
    if how == 1:
        _one_call(b[s], t, s, gap, 8, ISEND_COMPLETE, request=req[s])
    b[r].add(t[r], ENTER, region=8)
    t[r] = max(t[r] + gap(), ts + gap())
    b[r].add(t[r], LEAVE, region=8)
    t[r] += gap()


def _one_call(b, t, loc, gap, region, kind, **cols) -> int:
    """A call of ``region`` on ``loc`` holding one record of ``kind``: its time."""
    b.add(t[loc], ENTER, region=region)
    t[loc] += gap()
    at = t[loc]
    b.add(at, kind, **cols)
    t[loc] += gap()
    b.add(t[loc], LEAVE, region=region)
    t[loc] += gap()
    return at


def _extended_step(what, draw_int, gap, t, b, req, n_locs) -> None:
    if what == 4:  # MPI_Issend ... MPI_Wait, received by MPI_Recv
        s = draw_int(0, n_locs - 1)
        r = (s + draw_int(1, n_locs - 1)) % n_locs
        size, tag = draw_int(0, 1 << 20), draw_int(0, 2)
        req[s] += 1
        b[s].add(t[s], ENTER, region=7)
        t[s] += gap()
        ts = t[s]
        b[s].add(ts, ISEND, peer=r, comm=0, tag=tag, size=size, request=req[s])
        t[s] += gap()
        b[s].add(t[s], LEAVE, region=7)
        t[s] += gap()
        b[s].add(t[s], ENTER, region=8)
        b[r].add(t[r], ENTER, region=2)
        post = t[r]
        t[s] = max(t[s] + gap(), post + gap())  # not before the receive was posted
        b[s].add(t[s], ISEND_COMPLETE, request=req[s])
        t[s] += gap()
        b[s].add(t[s], LEAVE, region=8)
        t[s] += gap()
        t[r] = max(t[r] + gap(), ts + gap())
        b[r].add(t[r], RECV, peer=s, comm=0, tag=tag, size=size)
        t[r] += gap()
        b[r].add(t[r], LEAVE, region=2)
        t[r] += gap()
    elif what in (5, 6):  # handle creation (synchronising) or a free (maybe local)
        op, region = ("CREATE_HANDLE", 9) if what == 5 else ("DESTROY_HANDLE", 10)
        begins = []
        for loc in range(n_locs):
            b[loc].add(t[loc], ENTER, region=region)
            t[loc] += gap()
            begins.append(t[loc])
            b[loc].add(t[loc], COLL_BEGIN)
        last = max(begins)
        local = what == 6 and draw_int(0, 1) == 1
        for loc in range(n_locs):
            t[loc] = (t[loc] if local else max(t[loc], last)) + gap()
            b[loc].add(t[loc], COLL_END, comm=0, size=0, size_recv=0, op=COLLECTIVE_OPS[op])
            t[loc] += gap()
            b[loc].add(t[loc], LEAVE, region=region)
            t[loc] += gap()
    elif what == 8:  # matched probe: the probe waits for the message, the receive copies
        s = draw_int(0, n_locs - 1)
        r = (s + draw_int(1, n_locs - 1)) % n_locs
        size, tag = draw_int(0, 1 << 20), draw_int(0, 2)
        sync, how = draw_int(0, 1) == 1, draw_int(0, 2)
        nonblocking, plain = how == 1, how == 2
        b[s].add(t[s], ENTER, region=17 if sync else 1)
        t[s] += gap()
        ts = t[s]
        b[s].add(ts, SEND, peer=r, comm=0, tag=tag, size=size)
        t[s] += gap()
        req[r] += 1
        message = NONE if plain else req[r]  # a plain MPI_Probe names no message
        probe_region = 18 if plain else 15 if nonblocking else 13
        b[r].add(t[r], ENTER, region=probe_region)
        t[r] = max(t[r] + gap(), ts + gap())
        b[r].add(t[r], PROBE, peer=s, comm=0, tag=tag, size_recv=message)
        t[r] += gap()
        b[r].add(t[r], LEAVE, region=probe_region)
        t[r] += gap()
        if plain:  # MPI_Probe, then MPI_Recv takes the message
            post = t[r]
            b[r].add(t[r], ENTER, region=2)
            t[r] += gap()
            b[r].add(t[r], RECV, peer=s, comm=0, tag=tag, size=size)
            t[r] += gap()
            b[r].add(t[r], LEAVE, region=2)
        elif nonblocking:
            req[r] += 1
            b[r].add(t[r], ENTER, region=16)
            t[r] += gap()
            post = t[r]
            b[r].add(t[r], IMRECV_REQUEST, size_recv=message, request=req[r])
            t[r] += gap()
            b[r].add(t[r], LEAVE, region=16)
            t[r] += gap()
            b[r].add(t[r], ENTER, region=8)
            t[r] += gap()
            b[r].add(t[r], IMRECV, request=req[r], size=size)
            t[r] += gap()
            b[r].add(t[r], LEAVE, region=8)
        else:
            post = t[r]
            b[r].add(t[r], ENTER, region=14)
            t[r] += gap()
            b[r].add(t[r], MRECV, size_recv=message, size=size)
            t[r] += gap()
            b[r].add(t[r], LEAVE, region=14)
        t[r] += gap()
        # a synchronous send ends after the receive was posted
        t[s] = max(t[s], post + gap()) if sync else t[s]
        b[s].add(t[s], LEAVE, region=17 if sync else 1)
        t[s] += gap()
    else:  # nonblocking Ibcast / Igather, completed in MPI_Wait
        name, region = ("BCAST", 11) if draw_int(0, 1) == 0 else ("GATHER", 12)
        root = draw_int(0, n_locs - 1)
        size = draw_int(0, 1 << 16)
        requests = []
        for loc in range(n_locs):
            req[loc] += 1
            b[loc].add(t[loc], ENTER, region=region)
            t[loc] += gap()
            requests.append(t[loc])
            b[loc].add(t[loc], NBC_REQUEST, request=req[loc])
            t[loc] += gap()
            b[loc].add(t[loc], LEAVE, region=region)
            t[loc] += gap()
        for loc in range(n_locs):
            b[loc].add(t[loc], ENTER, region=8)
            waits = (loc != root) if name == "BCAST" else (loc == root)
            after = requests[root] if name == "BCAST" else max(requests)
            t[loc] = max(t[loc], after) + gap() if waits else t[loc] + gap()
            b[loc].add(t[loc], NBC_COMPLETE, peer=root, comm=0, size=size, size_recv=size,
                       op=COLLECTIVE_OPS[name], request=req[loc])
            t[loc] += gap()
            b[loc].add(t[loc], LEAVE, region=8)
            t[loc] += gap()


def _trace(b, n_locs: int) -> Trace:
    defs = Definitions(
        timer_resolution=1_000_000_000,
        locations={i: Location(i, f"rank {i}", i) for i in range(n_locs)},
        regions=dict(REGIONS),
        comms={0: Comm(0, "MPI_COMM_WORLD", tuple(range(n_locs)))},
    )
    return Trace(defs, {i: b[i].build() for i in range(n_locs)}, "<random>")


@st.composite
def fractional_platforms(draw):
    """Overheads that are no whole number of nanosecond ticks (a calibrated
    platform's: 141.9 ns), each kind's part before its stamp a random fraction."""
    tenth = st.integers(1, 6000).map(lambda x: x * 1e-10)
    kinds = ["Enter", "Leave", "MpiSend", "MpiRecv", "MpiCollectiveBegin",
             "MpiCollectiveEnd"]
    by_kind = {k: draw(tenth) for k in kinds}
    before = {k: by_kind[k] * draw(st.floats(0, 1)) for k in kinds if draw(st.booleans())}
    return Platform(draw(tenth), by_kind, np.array([64.0, 1 << 20]),
                    np.array([1.7e-9, 2.3e-4]), before_stamp=before)
