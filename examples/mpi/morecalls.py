"""The mpi4py calls the tracer records beyond ``allcalls.py`` (issue #22), and a
held-out-style program made of them for the real-run benchmark.

``--every-call`` first makes each of these calls at least once (the tracer's test,
2 or more ranks; ranks 0 and 1 exchange the point-to-point messages): buffered and
ready sends, Sendrecv_replace, probes and matched probes, Waitany/Waitsome/Testall/Testany/Testsome
(both cases, some of them failing first), a cancelled receive, persistent
requests (Start, Startall, Free), scans, the v-collectives, reduce-scatters, every
nonblocking collective, and one call the tracer leaves untraced (``Barrier_init``,
twice: it warns once).

Then :func:`run` (``--steps``) is a ring relaxation with overlapped communication:
each step posts receives from both neighbours and sends to both, updates its
interior cells (a traced function per cell) and takes the halos with
``Waitany`` as they arrive; every ``--check-every`` steps an ``Iallreduce`` of the
change overlaps the next step's work and a ``Scan`` numbers the ranks' work.

    mpiexec -n 2 python examples/mpi/morecalls.py [--every-call] [--steps 200]
        [--cells 150] [--check-every 10] [--timing FILE.json]

``--timing`` writes ``{"ranks", "seconds", "off_cpu", "residual"}`` as
``examples/mpi/stencil.py`` does (the span of :func:`run` over all ranks).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from mpi4py import MPI


def _spin(req_test: object) -> None:
    while not req_test():
        time.sleep(1e-4)


def point_to_point(comm: MPI.Intracomm) -> None:
    """Ranks 0 and 1: sends, probes, completion calls on arrays, cancel, persistent."""
    rank = comm.Get_rank()
    if rank > 1:
        return
    other = 1 - rank
    if rank == 0:
        MPI.Attach_buffer(bytearray(1 << 16))
        comm.Bsend(np.arange(3.0), dest=1, tag=1)
        comm.bsend({"b": 1}, dest=1, tag=2)
        comm.Ibsend(np.ones(2), dest=1, tag=3).Wait()
        comm.ibsend("ib", dest=1, tag=4).wait()
        MPI.Detach_buffer()
        comm.recv(source=1, tag=5)  # rank 1 has posted its receives for the ready sends
        comm.Rsend(np.ones(4), dest=1, tag=6)
        comm.Irsend(np.ones(4), dest=1, tag=7).Wait()
        comm.Send(np.ones(2), dest=1, tag=8)  # probed
        comm.send("p", dest=1, tag=9)  # probed, lower case
        comm.Send(np.ones(1), dest=1, tag=10)  # Iprobe polled
        comm.send("ip", dest=1, tag=11)
        comm.Send(np.ones(2), dest=1, tag=40)  # matched probes: Mprobe, mprobe, ...
        comm.send("m", dest=1, tag=41)
        comm.Send(np.ones(2), dest=1, tag=42)
        comm.send("im", dest=1, tag=43)
        comm.send("cm", dest=1, tag=44)
        for tag in (13, 12, 14, 15):  # Waitany / waitany / Waitsome receives
            comm.Send(np.full(2, float(tag)), dest=1, tag=tag)
        comm.recv(source=1, tag=16)  # rank 1 has tested its receives: they fail first
        for tag in (17, 18, 19, 20, 21):
            comm.Send(np.full(2, float(tag)), dest=1, tag=tag)
        comm.send("lower", dest=1, tag=22)
        sends = [comm.Isend(np.ones(2), dest=1, tag=23), comm.Isend(np.ones(2), dest=1, tag=24)]
        while MPI.Request.Waitany(sends) != MPI.UNDEFINED:
            pass
        last = [comm.Isend(np.ones(1), dest=1, tag=25)]
        _spin(lambda: MPI.Request.Testall(last))
    else:
        comm.Recv(np.empty(3), source=0, tag=1)
        comm.recv(source=0, tag=2)
        comm.Recv(np.empty(2), source=0, tag=3)
        comm.recv(source=0, tag=4)
        ready = [comm.Irecv(np.empty(4), source=0, tag=6), comm.Irecv(np.empty(4), source=0, tag=7)]
        comm.send("ready", dest=0, tag=5)
        MPI.Request.Waitall(ready)
        st = MPI.Status()
        comm.Probe(source=0, tag=8, status=st)
        comm.Recv(np.empty(st.Get_count(MPI.DOUBLE)), source=0, tag=8)
        comm.probe(source=0, tag=9)
        comm.recv(source=0, tag=9)
        while not comm.Iprobe(source=0, tag=10):
            time.sleep(1e-4)
        comm.Recv(np.empty(1), source=0, tag=10)
        while not comm.iprobe(source=0, tag=11):
            time.sleep(1e-4)
        comm.recv(source=0, tag=11)
        comm.Mprobe(source=0, tag=40).Recv(np.empty(2))
        comm.mprobe(source=0, tag=41).recv()
        while (msg := comm.Improbe(source=0, tag=42)) is None:
            time.sleep(1e-4)
        msg.Irecv(np.empty(2)).Wait()
        while (msg := comm.improbe(source=0, tag=43)) is None:
            time.sleep(1e-4)
        MPI.Request.waitall([msg.irecv()])
        MPI.Message.probe(comm, source=0, tag=44).recv()  # the class's form
        reqs = [comm.Irecv(np.empty(2), source=0, tag=t) for t in (12, 13)]
        MPI.Request.Waitany(reqs)
        MPI.Request.waitany(reqs)
        some = [comm.Irecv(np.empty(2), source=0, tag=t) for t in (14, 15)]
        while MPI.Request.Waitsome(some) is not None:
            pass
        anyreq = [comm.Irecv(np.empty(2), source=0, tag=17)]
        allreq = [comm.Irecv(np.empty(2), source=0, tag=t) for t in (18, 19)]
        somereq = [comm.Irecv(np.empty(2), source=0, tag=t) for t in (20, 21)]
        low = [comm.irecv(source=0, tag=22)]
        assert not MPI.Request.Testany(anyreq)[1]  # rank 0 sends only after tag 16
        assert not MPI.Request.Testall(allreq)
        assert MPI.Request.Testsome(somereq) == []
        assert not MPI.Request.testall(low)[0]
        comm.send("tested", dest=0, tag=16)
        _spin(lambda: MPI.Request.Testany(anyreq)[1])
        _spin(lambda: MPI.Request.Testall(allreq))
        done: list[int] = []
        _spin(lambda: done.extend(MPI.Request.Testsome(somereq) or []) or len(done) == 2)
        _spin(lambda: MPI.Request.testany(low)[1])
        sends = [comm.Irecv(np.empty(2), source=0, tag=t) for t in (23, 24)]
        MPI.Request.waitsome(sends)
        MPI.Request.Waitall(sends)
        last = [comm.Irecv(np.empty(1), source=0, tag=25)]
        _spin(lambda: MPI.Request.testsome(last)[0])
        cancelled = comm.Irecv(np.empty(1), source=0, tag=99)  # never sent
        cancelled.Cancel()
        cancelled.Wait()
        lower = comm.irecv(source=0, tag=98)  # never sent either: lower-case cancel
        lower.cancel()
        lower.Wait()
    comm.Sendrecv_replace(np.full(2, float(rank)), dest=other, sendtag=30, source=other,
                          recvtag=30)
    # persistent: two rounds by Start, one by Startall, then freed
    buf = np.full(3, float(rank))
    req = (comm.Send_init(buf, dest=1, tag=31) if rank == 0 else
           comm.Recv_init(buf, source=0, tag=31))
    for _ in range(2):
        req.Start()
        req.Wait()
    MPI.Prequest.Startall([req])
    MPI.Request.Waitall([req])
    req.Free()


def collectives(comm: MPI.Intracomm) -> None:
    """Scans, v-collectives, reduce-scatters and the nonblocking collectives."""
    rank, size = comm.Get_rank(), comm.Get_size()
    counts = [i + 1 for i in range(size)]
    displs = [sum(counts[:i]) for i in range(size)]
    total = sum(counts)
    mine = np.full(counts[rank], float(rank))
    comm.scan(rank)
    comm.Scan(np.ones(2), np.empty(2))
    comm.exscan(rank)
    comm.Exscan(np.ones(2), np.empty(2))
    comm.Reduce_scatter(np.ones(total), np.empty(counts[rank]), counts)
    comm.Reduce_scatter_block(np.ones(2 * size), np.empty(2))
    comm.Gatherv(mine, [np.empty(total), counts, displs, MPI.DOUBLE] if rank == 0 else None)
    comm.Scatterv([np.arange(float(total)), counts, displs, MPI.DOUBLE] if rank == 0 else None,
                  np.empty(counts[rank]))
    comm.Allgatherv(mine, [np.empty(total), counts, displs, MPI.DOUBLE])
    ones = [1] * size
    comm.Alltoallv([np.ones(size), ones, list(range(size)), MPI.DOUBLE],
                   [np.empty(size), ones, list(range(size)), MPI.DOUBLE])
    byte = [8 * i for i in range(size)]
    types = [MPI.DOUBLE] * size
    comm.Alltoallw([np.ones(size), ones, byte, types], [np.empty(size), ones, byte, types])
    rbuf = np.empty(2 * size)
    reqs = [comm.Ibarrier(),
            comm.Ibcast(np.arange(3.0) if rank == 0 else np.empty(3), root=0),
            comm.Igather(np.ones(2), rbuf if rank == 0 else None, root=0),
            comm.Igatherv(mine, [np.empty(total), counts, displs, MPI.DOUBLE]
                          if rank == 0 else None, root=0),
            comm.Iscatter(np.ones(2 * size) if rank == 0 else None, np.empty(2), root=0),
            comm.Iscatterv([np.arange(float(total)), counts, displs, MPI.DOUBLE]
                           if rank == 0 else None, np.empty(counts[rank]), root=0),
            comm.Iallgather(np.ones(2), np.empty(2 * size)),
            comm.Iallgatherv(mine, [np.empty(total), counts, displs, MPI.DOUBLE]),
            comm.Ialltoall(np.ones(size), np.empty(size)),
            comm.Ialltoallv([np.ones(size), ones, list(range(size)), MPI.DOUBLE],
                            [np.empty(size), ones, list(range(size)), MPI.DOUBLE]),
            comm.Ialltoallw([np.ones(size), ones, byte, types],
                            [np.empty(size), ones, byte, types]),
            comm.Ireduce(np.ones(2), np.empty(2) if rank == 0 else None, root=0),
            comm.Iallreduce(np.ones(2), np.empty(2)),
            comm.Ireduce_scatter(np.ones(total), np.empty(counts[rank]), counts),
            comm.Ireduce_scatter_block(np.ones(2 * size), np.empty(2)),
            comm.Iscan(np.ones(2), np.empty(2)),
            comm.Iexscan(np.ones(2), np.empty(2))]
    MPI.Request.Waitall(reqs[1:])
    _spin(reqs[0].Test)
    for _ in range(2):  # untraced: warns once
        p = comm.Barrier_init()
        p.Start()
        p.Wait()
        p.Free()


def relax(left: float, mid: float, right: float) -> float:
    """The three-point update of one cell (called once per cell and step)."""
    return 0.25 * left + 0.5 * mid + 0.25 * right


def run(comm: MPI.Intracomm, args: argparse.Namespace) -> float:
    """The measured part (see the module docstring); returns the last global change."""
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    rng = np.random.default_rng(args.seed + rank)
    u = [0.0, *rng.random(args.cells).tolist(), 0.0]
    halo = [np.zeros(1), np.zeros(1)]
    out = [np.zeros(1), np.zeros(1)]
    local, total, count = np.zeros(1), np.zeros(1), np.zeros(1)
    change, pending = 0.0, None
    for it in range(args.steps):
        recvs = [comm.Irecv(halo[0], source=left, tag=1), comm.Irecv(halo[1], source=right, tag=2)]
        out[0][0], out[1][0] = u[1], u[-2]
        sends = [comm.Isend(out[0], dest=left, tag=2), comm.Isend(out[1], dest=right, tag=1)]
        new, diff = [u[0]], 0.0
        for i in range(2, len(u) - 2):  # the interior that needs no halo
            v = relax(u[i - 1], u[i], u[i + 1])
            diff = max(diff, abs(v - u[i]))
            new.append(v)
        for _ in range(2):
            j = MPI.Request.Waitany(recvs)
            if j == 0:
                u[0] = float(halo[0][0])
            else:
                u[-1] = float(halo[1][0])
        first = relax(u[0], u[1], u[2])
        last = relax(u[-3], u[-2], u[-1])
        u = [u[0], first, *new[1:], last, u[-1]]
        MPI.Request.Waitall(sends)
        if pending is not None:
            pending.Wait()
            change, pending = float(total[0]), None
        if (it + 1) % args.check_every == 0:
            local[0] = diff
            pending = comm.Iallreduce(local, total, op=MPI.MAX)
            comm.Scan(np.ones(1), count)
    if pending is not None:
        pending.Wait()
        change = float(total[0])
    return change


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--every-call", action="store_true")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--cells", type=int, default=150, help="interior cells per rank")
    p.add_argument("--check-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timing", metavar="FILE.json")
    return p.parse_args(argv)


def main() -> None:
    args = parse()
    comm = MPI.COMM_WORLD
    if args.every_call:
        point_to_point(comm)
        collectives(comm)
    comm.Barrier()
    cpu0, t0 = time.thread_time_ns(), time.monotonic_ns()
    change = run(comm, args)
    t1, cpu1 = time.monotonic_ns(), time.thread_time_ns()
    spans = comm.gather((t0, t1, max(0, (t1 - t0) - (cpu1 - cpu0))), root=0)
    if comm.Get_rank() == 0:
        seconds = (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e9
        result = {"ranks": comm.Get_size(), "seconds": seconds, "residual": change,
                  "off_cpu": max(s[2] for s in spans) / 1e9}
        print(json.dumps(result))
        print("morecalls done")
        if args.timing:
            with open(args.timing, "w") as f:
                json.dump(result, f)


if __name__ == "__main__":
    main()
