"""EZTrace per-record cost: a microbenchmark pair run untraced and traced -> platform file.

EZTrace is a tracer we cannot change or ask for its own costs, so its overhead
is measured from outside, as ``calibration.external`` does for Score-P:
``calibration/eztrace_probe.c`` repeats one MPI operation ``n`` times and prints
its loop time (21 times its median 21st part, so that a part in which the
process lost its core does not count). Each variant runs at several ``n``, untraced and under
``eztrace -t mpich``, in alternating order; a least-squares line per (variant,
traced) gives seconds per iteration, and the difference traced - untraced is
what one iteration's records cost (start-up and trace write-out fall outside the
loop). The same difference from each repetition's runs alone gives its
spread, and their median is the variant's dilation per iteration (a
repetition during which other processes took the cores is one outlier, not a
shift of the pooled slope).

Which records an iteration writes is *counted in the traced archive*
(``otf2-print``, at two ``n``), not assumed. compensate charges a record's cost
to the gap *after* it (R1), so for a record that only the program's own
timeline follows, what the platform needs is how much longer the gap after it
is traced than untraced. The self variants (``wait``, ``recv``, ``isend``,
``barrier``: every rank alone on MPI_COMM_SELF; ``omp``: an empty OpenMP
parallel region of one thread) give that: the traced probe's median gap after
each kind, less that gap's share of the untraced iteration (spread evenly: at
most tens of ns for the short variants), then closed on the slopes
(:func:`closed_costs`).

A send record and a collective's begin record are different: compensate keeps a
waiting receiver's observed transfer ``recv_m - send_m`` less ``O(MpiSend)``
(R2, m.1) and a collective's span from its last begin less ``O(begin)`` (R3), so
their cost is whatever the tracer adds between the sender's record and the
receiver's. EZTrace adds more there than the send record's own writing: it
stamps MpiRecv (and a collective's end) only after its own work once the MPI call
has returned (the count of the status, the communicator's translation), and that
work lies in the observed transfer. The two-rank variants measure it: in
``pingpong`` (a Send/Recv round trip after 1.5 us of work per hop) each hop's
path holds the receiver's MpiRecv and Leave, the sender's Enter and the
transfer, so ``MpiSend`` costs the hop's dilation (half the round's slope
difference) less the other three kinds' costs; ``allreduce`` likewise gives
``MpiCollectiveBegin`` from each iteration's MpiCollectiveEnd, Leave and Enter.
Per variant, ``closure`` is the per-kind costs summed over one iteration divided
by traced - untraced seconds per iteration (1 when the costs account for all of
the dilation; the two-rank variants use their path, 1 by construction). Kinds
the probe never writes (the Pthreads module's, OpenMP locks and tasks) get
``event_overhead``, the Enter/Leave mean.

Usage::

    python -m calibration.eztrace OUT.json [--copy-from PLATFORM.json] [--n 10000,20000,40000]

Needs ``eztrace``, an MPI C compiler (``--mpicc``) and ``mpirun`` (``--mpirun``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from calibration.external import fit_line
from calibration.platformfile import OutputError, read_platform_dict, write_platform
from compensate.platform import PlatformError

SOURCE = Path(__file__).with_name("eztrace_probe.c")
VARIANTS = ("wait", "barrier", "isend", "recv", "pingpong", "allreduce", "omp")
#: EZTrace modules a variant is traced with (others: mpich alone)
MODULES = {"omp": "mpich openmp"}
#: two-rank variants: the kind whose cost is the rest of the path's dilation, the
#: other kinds on the path of one step, and steps (messages, collectives) per
#: iteration
PATHS = {"pingpong": ("MpiSend", ("MpiRecv", "Leave", "Enter"), 2),
         "allreduce": ("MpiCollectiveBegin", ("MpiCollectiveEnd", "Leave", "Enter"), 1)}
#: the probe times its loop in this many equal parts (CHUNKS in eztrace_probe.c)
CHUNKS = 21


def timed(n: int) -> int:
    """Iterations the probe times when asked for ``n`` (whole parts only)."""
    return n // CHUNKS * CHUNKS


def iterations(n: int) -> int:
    """Iterations the probe runs when asked for ``n``: its warm-up and the timed loop."""
    return n // 10 + 1 + timed(n)
DEFAULT_NS = (10000, 20000, 40000)
_LOOP = re.compile(r"loop_seconds\s+([0-9.eE+-]+)")


class ProbeError(Exception):
    """The probe could not be built, run or read (one-line message)."""


@dataclass
class ProbeSettings:
    """Tools, iteration counts, repetitions and ranks of one calibration."""

    ns: tuple[int, ...] = DEFAULT_NS
    repeats: int = 7
    ranks: int = 2
    mpicc: str = "/usr/bin/mpicc"
    mpirun: str = "/usr/bin/mpirun"
    eztrace: str = "eztrace"
    variants: tuple[str, ...] = VARIANTS
    timeout: float = 120.0


@dataclass
class ProbeResult:
    """Per-kind costs (seconds in the gap after a record) and the measurements behind them."""

    costs: dict[str, float]
    delta: dict[str, float]            # variant -> traced - untraced seconds per iteration
    records: dict[str, dict[str, float]]  # variant -> kind -> records per iteration (a rank)
    fits: dict[str, dict] = field(default_factory=dict)
    closure: dict[str, float] = field(default_factory=dict)  # variant -> sum of costs / delta
    gaps: dict[str, dict[str, float]] = field(default_factory=dict)  # variant -> kind -> s
    spread: dict[str, list[float]] = field(default_factory=dict)  # variant -> per-repeat delta


def available(settings: ProbeSettings | None = None) -> str | None:
    """None if EZTrace, the compiler and mpirun are there, else what is missing."""
    s = settings or ProbeSettings()
    for tool in (s.eztrace, s.mpicc, s.mpirun, "otf2-print"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


def build(workdir: Path, settings: ProbeSettings) -> Path:
    """Compile the probe into ``workdir``; its path."""
    exe = workdir / "eztrace_probe"
    proc = subprocess.run([settings.mpicc, "-O2", "-fopenmp", str(SOURCE), "-o", str(exe)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise ProbeError(f"{settings.mpicc} cannot build {SOURCE.name}: {last}")
    return exe


def run_probe(exe: Path, variant: str, n: int, traced: bool, workdir: Path,
              settings: ProbeSettings) -> float:
    """Loop seconds of one run (the slowest rank's, as the probe prints it)."""
    cmd = [settings.mpirun, "-n", str(settings.ranks)]
    if traced:
        cmd += [settings.eztrace, "-t", MODULES.get(variant, "mpich")]
    cmd += [str(exe), variant, str(int(n))]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=settings.timeout, check=False)
    except subprocess.TimeoutExpired:
        shown = " ".join(cmd)
        raise ProbeError(f"`{shown}` did not finish within {settings.timeout:g} s") from None
    found = _LOOP.findall(proc.stdout)
    if proc.returncode != 0 or not found:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError(f"`{' '.join(cmd)}` failed (status {proc.returncode}): {last}")
    return float(found[-1])


def kind_name(printed: str) -> str:
    """otf2-print's event name (MPI_IRECV_REQUEST) as the OTF2 kind (MpiIrecvRequest)."""
    return "".join(part.capitalize() for part in printed.split("_"))


def read_records(archive: Path) -> dict[int, tuple[list[str], list[int]]]:
    """Per location, the kinds and timestamps of its records, as ``otf2-print`` lists
    them (the ``otf2`` bindings refuse some valid EZTrace archives; otf2-print is the
    reference reader)."""
    proc = subprocess.run(["otf2-print", str(archive)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise ProbeError(f"otf2-print cannot read {archive}")
    out: dict[int, tuple[list[str], list[int]]] = {}
    started = False
    for line in proc.stdout.splitlines():
        if line.startswith("-----"):
            started = True
            continue
        parts = line.split()
        if not started or len(parts) < 3 or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        kinds, times = out.setdefault(int(parts[1]), ([], []))
        kinds.append(kind_name(parts[0]))
        times.append(int(parts[2]))
    return out


def ticks_per_second(archive: Path) -> int:
    """The archive's timer resolution (its ClockProperties, as ``otf2-print -G`` shows)."""
    proc = subprocess.run(["otf2-print", "-G", str(archive)], capture_output=True, text=True,
                          check=False)
    found = re.search(r"Ticks per Seconds:\s*(\d+)", proc.stdout)
    if proc.returncode != 0 or not found:
        raise ProbeError(f"otf2-print -G shows no clock properties in {archive}")
    return int(found.group(1))


def count_records(archive: Path) -> dict[int, Counter]:
    """Records per location and kind in an OTF2 archive."""
    return {loc: Counter(kinds) for loc, (kinds, _) in read_records(archive).items()}


def gap_medians(kinds: list[str], times: list[int]) -> dict[str, float]:
    """Median time (in the trace's ticks) from a record of each kind to the next record."""
    gaps: dict[str, list[int]] = {}
    for i in range(len(kinds) - 1):
        gaps.setdefault(kinds[i], []).append(times[i + 1] - times[i])
    return {k: float(np.median(v)) for k, v in gaps.items()}


def probe_records(exe: Path, variant: str, settings: ProbeSettings, workdir: Path
                  ) -> tuple[dict[str, float], dict[str, float]]:
    """Records one iteration writes on one rank, by kind (the count difference of two
    traced runs over their iteration difference, the first location's), and the median
    gap in seconds after each kind in the larger run."""
    small, large = 2000, 12000
    per_n, gaps = [], {}
    for n in (small, large):
        run_probe(exe, variant, n, True, workdir, settings)
        records = read_records(workdir / "eztrace_probe_trace" / "eztrace_log.otf2")
        if not records:
            raise ProbeError(f"the traced {variant} probe wrote no records")
        kinds, times = records[min(records)]
        per_n.append(Counter(kinds))
        gaps = gap_medians(kinds, times)
    kinds = set(per_n[0]) | set(per_n[1])
    steps = iterations(large) - iterations(small)
    out = {k: (per_n[1][k] - per_n[0][k]) / steps for k in kinds}
    out = {k: v for k, v in out.items() if v > 0.01}
    tick = 1.0 / ticks_per_second(workdir / "eztrace_probe_trace" / "eztrace_log.otf2")
    return out, {k: gaps[k] * tick for k in out if k in gaps}


def per_kind(records: dict[str, dict[str, float]], gaps: dict[str, dict[str, float]],
             untraced: dict[str, float]) -> dict[str, float]:
    """Seconds the tracer adds in the gap after a record of each kind: the traced
    probe's median gap after it, less its share of the untraced iteration (the
    untraced time spread evenly over the iteration's gaps); per kind, from the
    variant whose iteration is shortest untraced (the least to subtract). The
    two-rank variants (:data:`PATHS`) are left out: their gaps hold the waits."""
    best: dict[str, tuple[float, float]] = {}
    for v, per in records.items():
        if v in PATHS:
            continue
        n = sum(per.values())
        share = untraced[v] / n if n else 0.0
        for k, g in gaps[v].items():
            if k in per and (k not in best or untraced[v] < best[k][1]):
                best[k] = (max(g - share, 0.0), untraced[v])
    return {k: c for k, (c, _) in sorted(best.items())}


#: kinds after which EZTrace's MPI wrappers run no MPI work (what follows is the
#: call's own Leave, or the program): their median gap is their cost as measured
PURE = ("Leave", "MpiRecv", "MpiCollectiveEnd")


def closed_costs(records: dict[str, dict[str, float]], costs: dict[str, float],
                 delta: dict[str, float]) -> dict[str, float]:
    """``costs`` (the gap estimates) changed as little as possible, relative to each
    kind's own cost, so that every self variant's records add up to its measured
    dilation per iteration (closure 1). Only kinds whose gap also holds the MPI
    call's own work change (an Enter, a send or request record: the untraced share
    subtracted there is a guess, and EZTrace's work around the call, such as
    registering a request, lies there too); the :data:`PURE` kinds' gaps hold
    tracer work alone and stay as measured. Kinds stay >= 0."""
    variants = [v for v in records if v not in PATHS and v in delta]
    kinds = sorted(costs)
    if not variants or not kinds:
        return dict(costs)
    n = np.array([[records[v].get(k, 0.0) for k in kinds] for v in variants])
    g = np.array([costs[k] for k in kinds])
    w = np.diag([0.0 if k in PURE else max(costs[k], 1e-9) for k in kinds])
    resid = np.array([delta[v] for v in variants]) - n @ g
    c = g + w @ n.T @ np.linalg.lstsq(n @ w @ n.T, resid, rcond=None)[0]
    return {k: max(float(x), 0.0) for k, x in zip(kinds, c, strict=True)}


def path_costs(costs: dict[str, float], delta: dict[str, float]) -> dict[str, float]:
    """``costs`` with the cost of each two-rank variant's kind (:data:`PATHS`): one
    step's dilation (``delta`` / steps) less the other kinds on its path, at
    least 0. Variants not measured leave their kind as it was."""
    out = dict(costs)
    for v, (kind, others, steps) in PATHS.items():
        if v in delta:
            rest = sum(out.get(k, 0.0) for k in others)
            out[kind] = max(delta[v] / steps - rest, 0.0)
    return out


def closure(records: dict[str, dict[str, float]], costs: dict[str, float],
            delta: dict[str, float]) -> dict[str, float]:
    """Per variant, the per-kind costs summed over one iteration / the measured
    traced - untraced time per iteration (1: the gaps account for the slope); for
    a two-rank variant, the costs of its path (:data:`PATHS`)."""
    out = {}
    for v, per in records.items():
        if v in PATHS:
            kind, others, steps = PATHS[v]
            total = steps * sum(costs.get(k, 0.0) for k in (kind, *others))
        else:
            total = sum(n * costs.get(k, 0.0) for k, n in per.items())
        out[v] = total / delta[v] if delta[v] > 0 else float("nan")
    return out


def measure(settings: ProbeSettings, progress=None) -> ProbeResult:
    """Build, count, time (alternating traced/untraced), fit and solve."""
    with tempfile.TemporaryDirectory(prefix="eztrace-probe-") as tmp:
        work = Path(tmp)
        exe = build(work, settings)
        records, gaps = {}, {}
        for v in settings.variants:
            records[v], gaps[v] = probe_records(exe, v, settings, work)
        delta, base, fits, spread = {}, {}, {}, {}
        for v in settings.variants:
            data: dict[bool, tuple[list[int], list[float]]] = {True: ([], []), False: ([], [])}
            for rep in range(settings.repeats):
                for j, n in enumerate(settings.ns):
                    for traced in ((True, False) if (rep + j) % 2 == 0 else (False, True)):
                        data[traced][0].append(timed(n))
                        data[traced][1].append(run_probe(exe, v, n, traced, work, settings))
                if progress:
                    progress(f"{v}: repeat {rep + 1}/{settings.repeats}")
            traced_fit, base_fit = fit_line(*data[True]), fit_line(*data[False])
            base[v] = base_fit.slope
            fits[v] = {"traced": traced_fit.to_dict(), "untraced": base_fit.to_dict()}
            spread[v] = repeat_deltas(data, len(settings.ns))
            delta[v] = (float(np.median(spread[v])) if spread[v]
                        else traced_fit.slope - base_fit.slope)
    costs = path_costs(closed_costs(records, per_kind(records, gaps, base), delta), delta)
    return ProbeResult(costs, delta, records, fits, closure(records, costs, delta), gaps,
                       spread)


def repeat_deltas(data: dict[bool, tuple[list[int], list[float]]], per_repeat: int
                  ) -> list[float]:
    """Traced - untraced seconds per iteration from each repetition's runs alone
    (``per_repeat`` consecutive points of each line): the spread of ``delta``."""
    if per_repeat < 2:  # (one point a repetition: no line through it alone)
        return []
    out = []
    for i in range(0, len(data[True][0]), per_repeat):
        part = {t: (ns[i:i + per_repeat], ys[i:i + per_repeat]) for t, (ns, ys) in data.items()}
        out.append(fit_line(*part[True]).slope - fit_line(*part[False]).slope)
    return out


def platform_dict(result: ProbeResult, copy_from: dict | None) -> dict:
    """A platform file: the per-kind costs, the Enter/Leave mean as ``event_overhead``
    (for the kinds the MPI probe does not write), the copy table (and network model)
    of ``copy_from`` if given. Without the ``pingpong`` variant MpiSend takes
    MpiIsend's cost."""
    costs = dict(result.costs)
    if "MpiIsend" in costs:
        costs.setdefault("MpiSend", costs["MpiIsend"])
    pair = [costs[k] for k in ("Enter", "Leave") if k in costs]
    base = float(np.mean(pair)) if pair else 0.0
    data = {"format": 1, "event_overhead": base, "event_overhead_by_kind": costs,
            "copy_time": [{"bytes": e["bytes"], "seconds": e["seconds"]}
                          for e in (copy_from or {}).get("copy_time", [])]}
    if copy_from and "network" in copy_from:
        data["network"] = {k: copy_from["network"][k] for k in ("latency", "per_byte")}
    data["_eztrace_probe"] = {
        "by": "python -m calibration.eztrace", "variants": list(result.records),
        "seconds_after_record": result.costs, "median_gap_seconds": result.gaps,
        "overhead_per_iteration": result.delta, "records_per_iteration": result.records,
        "closure": result.closure, "fits": result.fits,
        "overhead_per_iteration_by_repeat": result.spread,
        "note": "kinds not named cost event_overhead (the Enter/Leave mean); "
                "copy_time and network come from --copy-from"}
    return data


def main(argv: list[str] | None = None) -> int:
    """``python -m calibration.eztrace OUT.json``: measure and write a platform file."""
    p = argparse.ArgumentParser(prog="python -m calibration.eztrace",
                                description=__doc__.split("\n")[0])
    p.add_argument("output")
    p.add_argument("--copy-from", help="platform file whose copy_time (and network) to keep")
    p.add_argument("--n", default=",".join(map(str, DEFAULT_NS)), help="iteration counts")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--mpicc", default="/usr/bin/mpicc")
    p.add_argument("--mpirun", default="/usr/bin/mpirun")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    args = p.parse_args(argv)
    try:
        ns = tuple(int(x) for x in args.n.split(","))
    except ValueError:
        p.error(f"--n: expected comma-separated integers, got {args.n!r}")
    settings = ProbeSettings(ns=ns, repeats=args.repeats, ranks=args.ranks,
                             mpicc=args.mpicc, mpirun=args.mpirun)
    missing = available(settings)
    if missing:
        print(f"calibration.eztrace: {missing}: cannot measure EZTrace", file=sys.stderr)
        return 3
    try:
        copy_from = read_platform_dict(args.copy_from) if args.copy_from else None
        result = measure(settings, lambda msg: print(msg, file=sys.stderr))
        data = platform_dict(result, copy_from)
        write_platform(data, args.output, force=args.force)
    except (ProbeError, OutputError, PlatformError, OSError) as exc:
        print(f"calibration.eztrace: error: {exc}", file=sys.stderr)
        return 3
    print(json.dumps({"seconds_after_record": result.costs, "closure": result.closure,
                      "overhead_per_iteration": result.delta,
                      "overhead_per_iteration_by_repeat": result.spread}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
