"""The cost model of the distributed run (docs/performance.md "Parallel
replay: measured and modelled"): what is measured on this machine for P = 1, 2,
the constants fitted to it, and the time and memory per rank it predicts for
P = 1 ... 10^4.

MEASURED (this machine, fresh processes, simulated 16-process stencil traces of
``--records`` sizes as ``.trace``): per run the wall seconds of the whole command,
each rank's CPU seconds and peak resident set, and the summary's ``parallel``
counts (records, ghost records, anchors, waits, messages, values, bytes, seconds per phase
per rank; docs/parallel.md). P = 1 is ``mpiexec -n 1 compensate --mpi`` (the
distributed path on one rank, so that its phases are timed the same way); the
one-process ``--in-memory`` run is printed beside it. Microbenchmarks: one replay
round under ``mpiexec -n 2`` as the exchange does it (an ``Alltoall`` of an int64
header and an ``Alltoallv`` of the values' rows; nothing sent, one value, 10^4),
and beside it the version before (mpi4py's pickling ``alltoall``); the Python work
of a round per destination, in one process.

COMPUTED (one process, exact for the given trace): the replay's rounds for any
ownership, from the engine's dependency graph (:func:`replay_rounds`: the depth of
the chain of dependencies that cross ranks, +1 for the last round that moves
nothing): the hops of values between ranks on the critical path, beside the
measured waits (the times a rank had nothing runnable and no value had arrived).

MODELLED: the formulas in :func:`predict` with the fitted constants, for a
weak-scaling trace (10^5 records per process, one process per rank) and a
strong-scaling trace (10^9 records on 10^4 processes), for the current version
(whole-location ghosts, each rank verifying its own dependencies) and for the
design's next steps (trimmed ghosts, point-to-point rounds).

Usage::

    python benchmarks/parallel_model.py [--records 3e4,1e5,3e5] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the stencil's records per process and iteration (benchmarks/parallel_replay.py)
PER_ITERATION = 14
PROCESSES = 16


# -- the critical path, in one process ---------------------------------------------------
def replay_rounds(trace, matching, platform, owner: dict[int, int], bound: str = "lower") -> int:
    """The rounds the forward replay takes with ownership ``owner``: every anchor's
    level is the most dependencies that cross ranks on a chain to it (a value
    computed at level d leaves in round d + 1, docs/parallel.md "The forward
    replay"); the rounds are the highest level + 1 (the last round moves nothing).
    Built on the one-process engine's graph: the same anchors and ``needs`` the
    ranks evaluate."""
    from compensate.engine.graph import FAST_P2P, GENERIC
    from compensate.engine.run import EngineOptions, _Engine

    g = _Engine(trace, platform, EngineOptions(bound=bound), matching, None).graph
    rank_of = np.array([owner[loc] for loc in g.loc_ids], dtype=np.int64)
    a_rank = rank_of[g.anchor_loc].tolist() if len(g.anchor_loc) else []
    code, has_prev, generic = g.code, g.has_prev, g.generic
    s_anchor, e_anchor = g.f_s_anchor, g.f_e_anchor
    level = [-1] * len(g.agpos)
    cur, end = g.a_first.tolist(), g.a_end.tolist()
    waiters: dict[int, list[int]] = {}
    stack = [li for li in range(len(cur)) if cur[li] < end[li]]
    while stack:
        li = stack.pop()
        k = cur[li]
        while k < end[li]:
            if code[k] == FAST_P2P:
                deps = [s_anchor[k]] + ([e_anchor[k]] if e_anchor[k] >= 0 else [])
            elif code[k] == GENERIC:
                deps = [need[0] for rule in generic[k][0] for need in rule.needs]
            else:
                deps = []
            blocked = next((d for d in deps if level[d] < 0), None)
            if blocked is not None:
                waiters.setdefault(blocked, []).append(li)
                break
            lv = level[k - 1] if has_prev[k] else 0
            for d in deps:
                lv = max(lv, level[d] + (a_rank[d] != a_rank[k]))
            level[k] = lv
            stack.extend(waiters.pop(k, ()))
            k += 1
        cur[li] = k
    if any(level[k] < 0 for k in range(len(level))):
        raise RuntimeError("the trace's dependencies form a cycle")
    return max(level, default=0) + 1


# -- measuring --------------------------------------------------------------------------
def _child(args: list[str]) -> None:
    """One rank (or the one process): run the command, then write wall/CPU/peak."""
    from compensate.cli.compensate import main
    status = main(args[1:])
    rank = os.environ.get("PMI_RANK", "0")
    Path(args[0], f"rank{rank}.json").write_text(json.dumps(
        {"cpu": time.process_time(),
         "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    sys.exit(status)


def _alltoall_child(out: str) -> None:
    """Under mpiexec: seconds per replay round at P = 2, as the exchange does it
    (:meth:`compensate.parallel.exchange.Exchange._step` over :class:`MpiTransport`:
    an ``Alltoall`` of the int64 header, then an ``Alltoallv`` of (location, record,
    value) rows unless nobody sends anything): nothing sent, one value and 10^4 values
    to the other rank. Beside it the earlier exchange: mpi4py's pickling
    ``alltoall`` of a status tuple and three arrays per destination, empty and 10^4."""
    from mpi4py import MPI

    from compensate.parallel.exchange import Exchange
    from compensate.parallel.transport import MpiTransport
    comm = MPI.COMM_WORLD
    p, me = comm.Get_size(), comm.Get_rank()

    def payload(n: int):
        return [(("ok", False, n), (np.zeros(n, np.int64), np.zeros(n, np.int64),
                                    np.zeros(n))) for _ in range(p)]

    res: dict[str, float] = {}
    for n, reps in ((0, 2000), (10000, 200)):
        items = payload(n)
        comm.Barrier()
        t = time.perf_counter()
        for _ in range(reps):
            comm.alltoall(items)
        res[f"pickled {n}"] = (time.perf_counter() - t) / reps
    ex = Exchange(MpiTransport(), {})
    for n, reps in ((0, 5000), (1, 5000), (10000, 500)):
        rows = np.zeros((n, 3), np.int64)
        dest = np.full(n, (me + 1) % p, np.int64)
        comm.Barrier()
        t = time.perf_counter()
        for _ in range(reps):
            ex._step(rows, dest)
        res[f"buffers {n}"] = (time.perf_counter() - t) / reps
    if me == 0:
        Path(out).write_text(json.dumps(res))


def _slot_seconds() -> float:
    """Pickling and unpickling one destination's empty round payload (seconds): the
    per-destination cost of the version before (mpi4py's lowercase ``alltoall``)."""
    item = (("ok", False, 0), (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)))
    reps = 20000
    t = time.perf_counter()
    for _ in range(reps):
        pickle.loads(pickle.dumps(item, protocol=5))
    return (time.perf_counter() - t) / reps


def _buffer_slot_seconds(p: int = 4096) -> float:
    """What a round of the buffer exchange costs per destination in Python: the
    header's row and the counts and displacements handed to ``Alltoallv`` (built for
    ``p`` destinations in one process, divided by ``p``). MPI's own per-destination
    cost (MPICH's ``Alltoallv`` posts one send and receive per rank with data) is not
    measurable on 2 cores and not in it."""
    reps = 200
    dest = np.arange(8, dtype=np.int64) % p
    t = time.perf_counter()
    for _ in range(reps):
        counts = np.bincount(dest, minlength=p)
        head = np.empty((p, 3), np.int64)
        head[:, 0], head[:, 1], head[:, 2] = 0, counts, len(dest)
        c = (counts * 3)
        np.concatenate(([0], np.cumsum(c)[:-1])).tolist()
        c.tolist()
        np.concatenate(([0], np.cumsum(c)[:-1])).tolist()
        c.tolist()
    return (time.perf_counter() - t) / reps / p


def _trace(workdir: Path, records: float) -> tuple[Path, Path, int]:
    iterations = max(1, int(records / (PROCESSES * PER_ITERATION)))
    out = workdir / f"stencil_{PROCESSES}x{iterations}"
    if not (out / "measured.trace").exists():
        subprocess.run([sys.executable, "-m", "compensate.cli.simulate", "stencil", str(out),
                        "--ranks", str(PROCESSES), "--iterations", str(iterations),
                        "--format", "trace"], check=True, cwd=ROOT, capture_output=True)
    return out / "measured.trace", out / "platform.json", iterations


def _run(launcher: list[str], trace: Path, platform: Path, out: Path,
         extra: list[str]) -> dict:
    ranks = Path(tempfile.mkdtemp(prefix="ranks"))
    summary = out.with_suffix(".json")
    start = time.monotonic()
    subprocess.run([*launcher, sys.executable, __file__, "--child", str(ranks), str(trace),
                    str(out), "--platform", str(platform), "--quiet", "--force",
                    "--summary", str(summary), *extra], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall = time.monotonic() - start
    per = [json.loads(p.read_text()) for p in sorted(ranks.iterdir())]
    shutil.rmtree(ranks)
    s = json.loads(summary.read_text())
    return {"wall": wall, "cpu": [r["cpu"] for r in per], "peak": [r["peak_mib"] for r in per],
            "summary": s}


def _fit(xs: list[float], ys: list[float]) -> float:
    """Least squares through the origin: y = c x."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    return float((x @ y) / (x @ x)) if (x @ x) > 0 else 0.0


# -- the model --------------------------------------------------------------------------
def predict(c: dict, n_total: float, procs: int, p: int, iterations: float,
            design: bool, p2p: bool | None = None) -> tuple[float, float, float, float]:
    """Seconds and MiB per rank (the busiest: rank 0), the critical path's seconds
    (rounds x per-round cost) and the exchange's (that plus the values' cost) in
    them, for ``n_total`` records of ``procs`` processes on ``p`` ranks.
    ``design``: trimmed ghosts (a rank holds its own records and the boundary
    records its rules read), verification by each rank of its own records, and
    (unless ``p2p`` is False) point-to-point rounds; else the current version
    (whole-location ghosts, verification on rank 0, one alltoall per round)."""
    p2p = design if p2p is None else p2p
    own = n_total / p
    rounds = c["rounds_per_iteration"] * iterations if p > 1 else 1
    # values a rank receives; by design its ghosts are those records with their
    # calls' Enter and Leave (docs/parallel.md, "Trimming the ghosts", amendment 1):
    # 3 per value, independent of p for the stencil's neighbour pattern
    values = c["values_per_iteration"] * iterations if p > 1 else 0
    ghosts = (n_total - own) if not design else 3 * values
    held = own + ghosts
    replay = c["replay"] * held if design or p == 1 else c["replay_now"] * n_total
    compute = (c["startup"] + c["read"] * own + c["ghosts"] * ghosts
               + c["match"] * held + replay + c["times"] * own
               + c["write"] * own + c["verify"] * own)
    if p == 1:
        per_round, once = 0.0, 0.0
    elif p2p:  # a rank takes its neighbours' values when it is blocked: one message
        # latency and 2 items per hop of the chain; termination is detected once at
        # the end (log2 p latencies)
        per_round, once = c["alpha"] + 2 * c["slot"], c["alpha"] * math.log2(p)
    else:  # a collective round: the header's Alltoall in MPICH's log2 p steps (small
        # items), the Alltoallv, and the Python work per destination (header row, counts)
        per_round, once = c["alpha"] * max(1.0, math.log2(p)) + c["slot"] * p, 0.0
    critical = rounds * per_round
    exchange = critical + once + values * c["beta"]
    memory = c["mib0"] + c["mib_per_record"] * held
    return compute + exchange, memory, critical, exchange


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--alltoall":
        _alltoall_child(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", default="3e4,1e5,3e5")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "compensate-model"))
    a = ap.parse_args()
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("mpiexec not found (pip install -e '.[mpi]')")
    from compensate.formats import read_trace
    from compensate.matching import match
    from compensate.parallel.ownership import owners
    from compensate.platform import Platform

    print("MEASURED on this machine (wall: the whole command; cpu, peak: per rank)")
    head = (f"{'records':>9} {'P':>2} {'wall s':>7} {'cpu s/rank':>12} {'peak MiB/rank':>14}"
            f" {'waits':>11} {'(hops)':>7} {'messages':>13} {'values':>11} {'bytes':>13}")
    print(head)
    runs = []
    for size in [float(x) for x in a.records.split(",")]:
        trace_path, plat_path, iterations = _trace(workdir, size)
        one = _run([], trace_path, plat_path, workdir / "one.trace", ["--in-memory"])
        n = one["summary"]["records"]
        print(f"{n:>9,} {'1*':>2} {one['wall']:>7.2f} {one['cpu'][0]:>12.2f} "
              f"{one['peak'][0]:>14.0f}   (one process, --in-memory)")
        trace = read_trace(str(trace_path))
        matching = match(trace)
        plat = Platform.from_dict(json.loads(plat_path.read_text()))
        for p in (1, 2):
            r = _run([mpiexec, "-n", str(p)], trace_path, plat_path, workdir / f"p{p}.trace",
                     ["--mpi", "--in-memory"])  # the whole-share path it models
            par = r["summary"]["parallel"]
            owner = owners(trace.definitions, list(trace.events), p)
            computed = replay_rounds(trace, matching, plat, owner)
            r.update(records=n, p=p, iterations=iterations, par=par, computed=computed,
                     one=one)
            runs.append(r)
            print(f"{n:>9,} {p:>2} {r['wall']:>7.2f} "
                  f"{'/'.join(f'{x:.2f}' for x in r['cpu']):>12} "
                  f"{'/'.join(f'{x:.0f}' for x in r['peak']):>14} "
                  f"{'/'.join(map(str, par['waits'])):>11} {computed:>7} "
                  f"{'/'.join(map(str, par['messages'])):>13} "
                  f"{'/'.join(map(str, par['values_sent'])):>11} "
                  f"{'/'.join(map(str, par['replay']['bytes_sent'])):>13}")
    print("\nMEASURED seconds per phase and rank (summary 'parallel.seconds')")
    phases = ["definitions", "read", "ghosts", "match", "setup", "replay", "times",
              "verify"]
    print(f"{'records':>9} {'P':>2} " + " ".join(f"{ph:>11}" for ph in phases)
          + f" {'coll. s':>9}")
    for r in runs:
        sec = r["par"]["seconds"]
        cells = ["/".join("-" if x is None else f"{x:.2f}" for x in sec.get(ph, []))
                 for ph in phases]
        print(f"{r['records']:>9,} {r['p']:>2} " + " ".join(f"{c:>11}" for c in cells)
              + f" {'/'.join(f'{x:.2f}' for x in r['par']['replay']['collective_seconds']):>9}")

    # the critical path against P on the largest trace (computed, one process)
    trace_path, plat_path, iterations = _trace(workdir, max(float(x) for x in
                                                            a.records.split(",")))
    trace = read_trace(str(trace_path))
    matching = match(trace)
    plat = Platform.from_dict(json.loads(plat_path.read_text()))
    print(f"\nCOMPUTED rounds (critical path) on the {trace.record_count:,}-record trace "
          f"({iterations} iterations), by P:")
    per_it = {}
    for p in (2, 4, 8, 16):
        rounds = replay_rounds(trace, matching, plat, owners(trace.definitions,
                                                             list(trace.events), p))
        per_it[p] = rounds / iterations
        print(f"  P = {p:>2}: {rounds} rounds, {rounds / iterations:.2f} per iteration")

    # microbenchmarks
    res = workdir / "alltoall.json"
    subprocess.run([mpiexec, "-n", "2", sys.executable, __file__, "--alltoall", str(res)],
                   check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    a2a = json.loads(res.read_text())
    pickled_slot, slot = _slot_seconds(), _buffer_slot_seconds()
    print("\nMEASURED microbenchmarks: one replay round at P = 2 (exchange step: Alltoall "
          f"of the header + Alltoallv): {a2a['buffers 0'] * 1e6:.1f} us nothing sent, "
          f"{a2a['buffers 1'] * 1e6:.1f} us one value, {a2a['buffers 10000'] * 1e6:.0f} us "
          f"10^4 values; Python per destination {slot * 1e9:.0f} ns")
    print(f"  before (mpi4py's pickling alltoall): {a2a['pickled 0'] * 1e6:.1f} us empty, "
          f"{a2a['pickled 10000'] * 1e6:.0f} us with 10^4 values; pickle+unpickle of one "
          f"destination's empty payload: {pickled_slot * 1e6:.2f} us")

    # fitting (P = 2 runs for the per-record costs of a rank: the current version's
    # phases over own or whole-trace records as each phase works today)
    two = [r for r in runs if r["p"] == 2]
    one = [r for r in runs if r["p"] == 1]

    def ph(r, name, rank=0):
        return r["par"]["seconds"].get(name, [0] * r["p"])[rank] or 0.0

    c = {
        "read": _fit([r["par"]["records"][0] for r in two], [ph(r, "read") for r in two]),
        "ghosts": _fit([r["par"]["ghost_records"][0] for r in two],
                       [ph(r, "ghosts") for r in two]),
        "match": _fit([r["records"] for r in runs], [ph(r, "match") for r in runs]),
        "replay": _fit([r["records"] for r in one], [ph(r, "replay")
                                                     for r in one]),
        # at P = 2 the engine spans the ghost locations too (every ghost record an
        # anchor): its compute, without the seconds inside the rounds' collectives
        "replay_now": _fit([r["records"] for r in two], [
            ph(r, "replay") - r["par"]["replay"]["collective_seconds"][0] for r in two]),
        "times": _fit([r["par"]["records"][0] for r in runs], [ph(r, "times") for r in runs]),
        "verify": _fit([r["par"]["records"][0] for r in runs], [ph(r, "verify") for r in runs]),
        "beta": (a2a["buffers 10000"] - a2a["buffers 1"]) / 1e4, "slot": slot,
        # the latency of a round that carries values (header + Alltoallv) without
        # its 2 destinations' Python work
        "alpha": a2a["buffers 1"] - 2 * slot,
    }
    # the command's own start-up and what is not in a phase (interpreter, imports,
    # writing): the intercept of wall - phases over the P = 1 runs
    rest = [r["wall"] - sum(x[0] or 0 for x in r["par"]["seconds"].values()) for r in one]
    c["write"] = max(0.0, _fit([r["records"] for r in one],
                               [x - min(rest) for x, r in zip(rest, one, strict=True)]))
    c["startup"] = min(rest)
    # memory: peak per rank against the records it holds (own + ghosts) at P = 1, 2
    held = [r["records"] for r in runs]
    peaks = [max(r["peak"]) for r in runs]
    slope, base = np.polyfit(held, peaks, 1)
    c["mib0"], c["mib_per_record"], c["mib_verify"] = float(base), float(slope), 0.0
    largest = max(two, key=lambda r: r["records"])
    c["rounds_per_iteration"] = per_it[max(per_it)]
    c["values_per_iteration"] = (max(largest["par"]["values_received"])
                                 / largest["iterations"])
    print("\nFITTED constants (where from)")
    rows = [("startup", "s", "wall - phases at P = 1, intercept"),
            ("read", "s/own record", "phase 'read' at P = 2"),
            ("ghosts", "s/ghost record", "phase 'ghosts' at P = 2"),
            ("match", "s/record held", "phase 'match', P = 1, 2"),
            ("replay", "s/record held", "phase 'replay' at P = 1 (no waiting)"),
            ("replay_now", "s/record", "'replay' - collective s at P = 2 (ghost anchors)"),
            ("times", "s/own record", "phase 'times'"),
            ("verify", "s/own record", "phase 'verify' (each rank its own)"),
            ("write", "s/own record", "wall - phases at P = 1, slope (write, rest)"),
            ("alpha", "s/round", "a round with 1 value at P = 2 - 2 slots"),
            ("beta", "s/value", "a round with 10^4 values at P = 2"),
            ("slot", "s/destination", "a round's Python work per destination"),
            ("mib0", "MiB", "peak per rank, intercept"),
            ("mib_per_record", "MiB/record held", "peak per rank, slope"),
            ("rounds_per_iteration", "", "computed critical path, P = 16"),
            ("values_per_iteration", "per rank",
             f"values received at P = 2, {largest['records']:,} records")]
    for name, unit, where in rows:
        print(f"  {name:>22} = {c[name]:.3g} {unit:<18} {where}")

    # the replay's collective seconds at P = 2: measured against the model's terms
    print("\nCHECK: the replay's seconds inside collectives at P = 2 (rank 0), measured vs "
          "waits x (alpha + 2 slot) + values x beta")
    for r in two:
        par = r["par"]
        model = (par["waits"][0] * (c["alpha"] + 2 * c["slot"])
                 + par["values_received"][0] * c["beta"])
        print(f"  {r['records']:>9,}: measured {par['replay']['collective_seconds'][0]:.2f} s,"
              f" modelled {model:.2f} s (the rest is waiting for the other rank's compute"
              f" between rounds, on 2 shared cores)")

    print("\nMODELLED time and memory per rank (rank 0). WEAK: 10^5 records per process,"
          " one process per rank; STRONG: 10^9 records on 10^4 processes.")
    print("  now = this version (whole-location ghosts, verify per rank, alltoall rounds);"
          " design = trimmed ghosts, point-to-point hops;"
          " a2a = design with alltoall rounds; crit = rounds x per-round cost")
    print(f"{'P':>6} | {'weak now s':>10} {'MiB':>8} | {'design s':>8} {'MiB':>5} "
          f"{'crit s':>7} | {'strong now s':>12} {'MiB':>8} | {'design s':>9} {'MiB':>8} "
          f"{'crit s':>7} | {'a2a s':>8} {'crit s':>8}")
    iters = 1e5 / PER_ITERATION
    for p in (1, 10, 100, 1000, 10000):
        wn = predict(c, 1e5 * p, p, p, iters, False)
        wd = predict(c, 1e5 * p, p, p, iters, True)
        sn = predict(c, 1e9, 10**4, p, iters, False)
        sd = predict(c, 1e9, 10**4, p, iters, True)
        sa = predict(c, 1e9, 10**4, p, iters, True, p2p=False)
        print(f"{p:>6} | {wn[0]:>10.3g} {wn[1]:>8.3g} | {wd[0]:>8.3g} {wd[1]:>5.3g} "
              f"{wd[2]:>7.3g} | {sn[0]:>12.3g} {sn[1]:>8.3g} | {sd[0]:>9.3g} {sd[1]:>8.3g} "
              f"{sd[2]:>7.3g} | {sa[0]:>8.3g} {sa[2]:>8.3g}")
    print(f"  rounds = {c['rounds_per_iteration']:.2f} x {iters:.0f} iterations = "
          f"{c['rounds_per_iteration'] * iters:.0f} for every P > 1 (the stencil's chain "
          f"crosses ranks a fixed number of times per iteration)")
    print("  P = 1 is the in-memory model; the one-process command streams "
          "(a few hundred MiB whatever the length, docs/performance.md)")


if __name__ == "__main__":
    main()
