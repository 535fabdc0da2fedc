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

Where the tracer works before the stamp. A gap between two records holds what
the first one costs after its stamp and what the second costs before its own
(the platform's ``overhead_before_stamp``, docs/platform-file.md). Gaps after
records alone cannot tell the two apart (moving a cost from one side of every
stamp to the other leaves every gap as it was), but a record's cost before its
stamp shows where the same record is followed by different kinds, and it decides
what a dependency's observed interval holds:

* **Waiting records** (MpiRecv, a collective's MpiCollectiveEnd). compensate
  keeps a waiting receiver's observed transfer ``recv_m - send_m`` less the send's
  cost after its stamp and the receive's before (R2, m.1), and a collective's
  span from its last begin likewise (R3). EZTrace stamps MpiRecv (and a
  collective's end) only after its own work once the MPI call has returned (the
  count of the status, the communicator's translation), so that work lies in the
  observed transfer. The two-rank variants measure it: in ``pingpong`` (a
  Send/Recv round trip after 1.5 us of work per hop) each hop's path holds the
  sender's MpiSend, the receiver's MpiRecv and Leave, the sender's Enter and the
  transfer. MpiSend costs what MpiIsend costs in the self variants (the same
  wrapper work), and the rest of the hop's dilation (half the round's slope
  difference) less the four kinds' costs is MpiRecv's cost before its stamp
  (:func:`path_costs`); ``allreduce`` likewise gives MpiCollectiveEnd's from each
  iteration's MpiCollectiveBegin (the ``barrier`` variant's cost), Leave and
  Enter. Where the rest is negative the sending kind takes less, as it would
  alone.
* **Opening records** (:data:`OPENING`: ThreadFork). EZTrace's OpenMP module
  does part of a fork's work before stamping it, in the gap after whatever record
  came before. ``ompmpi`` (the ``omp`` region, then an MPI_Wait) shows ThreadJoin
  and Leave each followed both by an Enter and by a ThreadFork, nothing of the
  program's own between them: the fork's cost before its stamp is the median over
  those records of ``gap(a -> ThreadFork) - gap(a -> Enter)``
  (:func:`opening_before`), and a record whose gap was measured before a fork
  (ThreadJoin in ``omp``) is charged that gap less it (:func:`per_kind`).

Per variant, ``closure`` is the per-kind costs summed over one iteration divided
by traced - untraced seconds per iteration (1 when the costs account for all of
the dilation; the two-rank variants use their path, 1 by construction). Kinds
the probe never writes (OpenMP locks and tasks, the Pthread module's ThreadBegin)
get ``event_overhead``, the Enter/Leave mean.

The Pthread module's calls. Its Enter records carry the object's address as an
attribute, and its records cost more than the MPI module's plain Enter and
Leave, so they are costed per region (:data:`REGIONS`, the platform's
``event_overhead_by_region``): ``calibration/eztrace_pthread_probe.c``, a plain
C program run alone under ``eztrace -t pthread`` (that module cannot trace an
MPI program here), repeats one thread's mutex lock and unlock (``mutex``) or a
wait at a barrier of one thread (``pbarrier``). Each region's Enter and Leave
are counted as kinds of their own (``Enter@pthread_mutex_lock``) and go through
the same gaps, closure and fit as the MPI kinds; their Leave is a :data:`PURE`
kind like every Leave. Regions of the module that are not measured (``sem_*``,
``pthread_cond_*``, ``pthread_rwlock_*``, spin locks, create and join) cost
their kind's.

The arithmetic from counts, gaps and dilations to costs is
:mod:`calibration.eztrace_costs`; this module builds and runs the probes and
writes the platform file.

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.external import fit_line
from calibration.eztrace_costs import (
    GAPS_ONLY,
    PATHS,
    REFERENCE_PAIRS,
    ProbeResult,
    by_region,
    solve,
    speed_reference,
)
from calibration.platformfile import OutputError, read_platform_dict, write_platform
from compensate.platform import PlatformError

SOURCE = Path(__file__).with_name("eztrace_probe.c")
#: the Pthread module's probe: a plain C program (EZTrace's ``pthread`` module
#: cannot trace an MPI program here), run without mpirun
PTHREAD_SOURCE = Path(__file__).with_name("eztrace_pthread_probe.c")
PTHREAD_VARIANTS = ("mutex", "pbarrier")
VARIANTS = ("wait", "barrier", "isend", "recv", "pingpong", "allreduce", "omp", "ompmpi",
            *PTHREAD_VARIANTS)
#: regions whose Enter and Leave are costed apart from other regions' (the
#: Pthread module's records carry the object's address as an attribute and cost
#: more): counted as the kinds ``Enter@REGION`` and ``Leave@REGION``, written to
#: the platform's ``event_overhead_by_region`` (:func:`platform_dict`)
REGIONS = ("pthread_mutex_lock", "pthread_mutex_unlock", "pthread_barrier_wait")
#: EZTrace modules a variant is traced with (others: mpich alone)
MODULES = {"omp": "mpich openmp", "ompmpi": "mpich openmp", "mutex": "pthread",
           "pbarrier": "pthread"}
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


def mpich_tool(name: str) -> str:
    """Debian's MPICH ``name`` (``mpicc``, ``mpirun``, ``mpif90``):
    ``/usr/bin/NAME.mpich``, which the mpich packages install whichever MPI the
    alternatives make ``/usr/bin/NAME`` (OpenMPI, once a package that needs it is
    installed: its wrapper builds programs EZTrace's ``mpich`` module does not
    trace, and its mpirun refuses root), else ``/usr/bin/NAME``."""
    own = Path(f"/usr/bin/{name}.mpich")
    return str(own) if own.exists() else f"/usr/bin/{name}"


#: MPICH's compiler wrapper and launcher (:func:`mpich_tool`)
MPICC = mpich_tool("mpicc")
MPIRUN = mpich_tool("mpirun")


@dataclass
class ProbeSettings:
    """Tools, iteration counts, repetitions and ranks of one calibration."""

    ns: tuple[int, ...] = DEFAULT_NS
    repeats: int = 7
    #: repetitions of the two-rank variants (:data:`PATHS`): their dilation per
    #: iteration spreads over a factor of 2-8 between repetitions (two busy-polling
    #: ranks on shared cores), the one-rank variants' over 10-20 %
    path_repeats: int = 21
    ranks: int = 2
    mpicc: str = MPICC
    mpirun: str = MPIRUN
    eztrace: str = "eztrace"
    variants: tuple[str, ...] = VARIANTS
    timeout: float = 120.0


def available(settings: ProbeSettings | None = None) -> str | None:
    """None if EZTrace, the compiler and mpirun are there, else what is missing."""
    s = settings or ProbeSettings()
    for tool in (s.eztrace, s.mpicc, s.mpirun, "otf2-print"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


def build(workdir: Path, settings: ProbeSettings) -> Path:
    """Compile the probes into ``workdir``; the MPI probe's path (the Pthread
    probe lies beside it, :func:`probe_program`)."""
    exe = workdir / "eztrace_probe"
    for source, flag, out in ((SOURCE, "-fopenmp", exe),
                              (PTHREAD_SOURCE, "-pthread", probe_program(exe, "mutex"))):
        proc = subprocess.run([settings.mpicc, "-O2", flag, str(source), "-o", str(out)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise ProbeError(f"{settings.mpicc} cannot build {source.name}: {last}")
    return exe


def probe_program(exe: Path, variant: str) -> Path:
    """The program a variant runs: the Pthread probe beside the MPI probe ``exe``
    for :data:`PTHREAD_VARIANTS`, else ``exe``."""
    return exe.with_name(PTHREAD_SOURCE.stem) if variant in PTHREAD_VARIANTS else exe


def trace_archive(exe: Path, variant: str) -> Path:
    """Where EZTrace writes the traced probe's archive (``PROGRAM_trace``)."""
    program = probe_program(exe, variant)
    return program.with_name(f"{program.name}_trace") / "eztrace_log.otf2"


def run_probe(exe: Path, variant: str, n: int, traced: bool, workdir: Path,
              settings: ProbeSettings) -> float:
    """Loop seconds of one run (the slowest rank's, as the probe prints it)."""
    alone = variant in PTHREAD_VARIANTS  # (one process, no MPI)
    cmd = [] if alone else [settings.mpirun, "-n", str(settings.ranks)]
    if traced:
        cmd += [settings.eztrace, "-t", MODULES.get(variant, "mpich")]
    cmd += [str(probe_program(exe, variant)), variant, str(int(n))]
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


def kind_name(printed: str, line: str = "") -> str:
    """otf2-print's event name (MPI_IRECV_REQUEST) as the OTF2 kind (MpiIrecvRequest);
    an Enter or Leave of one of :data:`REGIONS` (``line``: otf2-print's line, which
    names the region) as ``Enter@REGION``."""
    kind = "".join(part.capitalize() for part in printed.split("_"))
    if kind in ("Enter", "Leave") and (found := _REGION.search(line)) \
            and found.group(1) in REGIONS:
        return f"{kind}@{found.group(1)}"
    return kind


_REGION = re.compile(r'Region: "([^"]*)"')


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
        kinds.append(kind_name(parts[0], line))
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


def pair_medians(kinds: list[str], times: list[int]) -> dict[str, tuple[float, int]]:
    """Per pair of consecutive kinds ``"a>b"``: the median time (ticks) from a record
    ``a`` to the next record, where that is a ``b``, and how often the pair occurs."""
    gaps: dict[str, list[int]] = {}
    for i in range(len(kinds) - 1):
        gaps.setdefault(f"{kinds[i]}>{kinds[i + 1]}", []).append(times[i + 1] - times[i])
    return {k: (float(np.median(v)), len(v)) for k, v in gaps.items()}


def probe_records(exe: Path, variant: str, settings: ProbeSettings, workdir: Path
                  ) -> tuple[dict[str, float], dict[str, float], dict[str, tuple[float, int]]]:
    """Records one iteration writes on one rank, by kind (the count difference of two
    traced runs over their iteration difference, the first location's), the median
    gap in seconds after each kind in the larger run, and per pair of consecutive
    kinds (:func:`pair_medians`) the median gap in seconds and its count there."""
    small, large = 2000, 12000
    per_n, gaps, pairs = [], {}, {}
    for n in (small, large):
        run_probe(exe, variant, n, True, workdir, settings)
        records = read_records(trace_archive(exe, variant))
        if not records:
            raise ProbeError(f"the traced {variant} probe wrote no records")
        kinds, times = records[min(records)]
        per_n.append(Counter(kinds))
        gaps, pairs = gap_medians(kinds, times), pair_medians(kinds, times)
    kinds = set(per_n[0]) | set(per_n[1])
    steps = iterations(large) - iterations(small)
    out = {k: (per_n[1][k] - per_n[0][k]) / steps for k in kinds}
    out = {k: v for k, v in out.items() if v > 0.01}
    tick = 1.0 / ticks_per_second(trace_archive(exe, variant))
    return (out, {k: gaps[k] * tick for k in out if k in gaps},
            {k: (g * tick, c) for k, (g, c) in pairs.items()})


def reference_gaps(archive: Path) -> dict[str, tuple[float, int]]:
    """The speed reference pairs' median gaps (seconds) and counts in one traced
    run, read as compensate reads a trace's (:func:`compensate.speed.trace_pairs`)."""
    from compensate.formats import read_chunks
    from compensate.speed import trace_pairs

    defs, chunks = read_chunks(str(archive), payload=False)
    return trace_pairs(defs, chunks, REFERENCE_PAIRS)


def repeated_gaps(seen: list[dict[str, tuple[float, int]]]) -> dict[str, tuple[float, int]]:
    """Per pair: the median over the repetitions' traced runs of their median gap,
    and the gaps counted in all of them. The repetitions are the runs the slopes
    come from, spread over the variant's minutes: the reference is the speed the
    costs were measured at, not one run's (a run's median gap moves by a third
    with the cores' speed from one second to the next)."""
    out = {}
    for pair in {p for one in seen for p in one}:
        found = [one[pair] for one in seen if pair in one]
        out[pair] = (float(np.median([g for g, _ in found])), sum(c for _, c in found))
    return out


def measure(settings: ProbeSettings, progress=None) -> ProbeResult:
    """Build, count, time (alternating traced/untraced), fit and solve."""
    with tempfile.TemporaryDirectory(prefix="eztrace-probe-") as tmp:
        work = Path(tmp)
        exe = build(work, settings)
        records, gaps, pairs = {}, {}, {}
        for v in settings.variants:
            records[v], gaps[v], pairs[v] = probe_records(exe, v, settings, work)
        delta, base, fits, spread = {}, {}, {}, {}
        for v in settings.variants:
            if v in GAPS_ONLY:
                continue
            data: dict[bool, tuple[list[int], list[float]]] = {True: ([], []), False: ([], [])}
            repeats = settings.path_repeats if v in PATHS else settings.repeats
            seen: list[dict[str, tuple[float, int]]] = []
            for rep in range(repeats):
                for j, n in enumerate(settings.ns):
                    for traced in ((True, False) if (rep + j) % 2 == 0 else (False, True)):
                        data[traced][0].append(timed(n))
                        data[traced][1].append(run_probe(exe, v, n, traced, work, settings))
                        if traced and j == 0:
                            seen.append(reference_gaps(trace_archive(exe, v)))
                if progress:
                    progress(f"{v}: repeat {rep + 1}/{repeats}")
            pairs[v].update(repeated_gaps(seen))
            traced_fit, base_fit = fit_line(*data[True]), fit_line(*data[False])
            base[v] = base_fit.slope
            fits[v] = {"traced": traced_fit.to_dict(), "untraced": base_fit.to_dict()}
            spread[v] = repeat_deltas(data, len(settings.ns))
            delta[v] = (float(np.median(spread[v])) if spread[v]
                        else traced_fit.slope - base_fit.slope)
    busy = [msg for v in delta if (msg := too_busy(v, delta[v], spread.get(v, [])))]
    if busy:
        raise ProbeError("; ".join(busy) + ": other work took the cores; calibrate again "
                                           "when the machine is quiet")
    return solve(records, gaps, pairs, base, delta, fits, spread)


def too_busy(variant: str, delta: float, spread: list[float]) -> str | None:
    """Why a variant's measured dilation per iteration cannot be a tracer's cost,
    or None: it is not positive (tracing made the loop faster), or its
    repetitions' quartiles lie further apart than its median (the repetitions
    measured the machine's load, not EZTrace)."""
    if not delta > 0:
        return f"the {variant} variant's dilation is {delta * 1e9:.0f} ns per iteration"
    if len(spread) >= 4:
        q1, q3 = np.percentile(spread, [25, 75])
        if q3 - q1 > delta:
            return (f"the {variant} variant's dilation spread {q1 * 1e9:.0f}..{q3 * 1e9:.0f} "
                    f"ns per iteration (quartiles of {len(spread)} repetitions) around "
                    f"{delta * 1e9:.0f} ns")
    return None


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
    MpiIsend's cost. ``speed_reference``: :func:`speed_reference` of the probes' pairs
    (:func:`repeated_gaps` of the repetitions where there are some)."""
    costs = {k: v for k, v in result.costs.items() if "@" not in k}
    if "MpiIsend" in costs:
        costs.setdefault("MpiSend", costs["MpiIsend"])
    pair = [costs[k] for k in ("Enter", "Leave") if k in costs]
    base = float(np.mean(pair)) if pair else 0.0
    data = {"format": 1, "event_overhead": base, "event_overhead_by_kind": costs,
            "copy_time": [{"bytes": e["bytes"], "seconds": e["seconds"]}
                          for e in (copy_from or {}).get("copy_time", [])]}
    before = {k: v for k, v in result.before.items() if k in costs and v > 0}
    if before:
        data["overhead_before_stamp"] = before
    for key, values in (("event_overhead_by_region", result.costs),
                        ("overhead_before_stamp_by_region", result.before)):
        regions = by_region(values)
        if regions:
            data[key] = regions
    reference = speed_reference(result.pairs)
    if reference:
        data["speed_reference"] = reference
    if copy_from and "network" in copy_from:
        data["network"] = {k: copy_from["network"][k] for k in ("latency", "per_byte")}
    data["_eztrace_probe"] = {
        "by": "python -m calibration.eztrace", "variants": list(result.records),
        "seconds_after_record": result.costs, "median_gap_seconds": result.gaps,
        "overhead_per_iteration": result.delta, "records_per_iteration": result.records,
        "closure": result.closure, "fits": result.fits,
        "seconds_before_stamp": result.before, "median_pair_gap_seconds_and_count": {
            v: {k: [g, c] for k, (g, c) in per.items()} for v, per in result.pairs.items()},
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
    p.add_argument("--path-repeats", type=int, default=21,
                   help="repetitions of the two-rank variants (pingpong, allreduce)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--mpicc", default=MPICC, help=f"MPICH's compiler wrapper (default {MPICC})")
    p.add_argument("--mpirun", default=MPIRUN, help=f"MPICH's launcher (default {MPIRUN})")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    args = p.parse_args(argv)
    try:
        ns = tuple(int(x) for x in args.n.split(","))
    except ValueError:
        p.error(f"--n: expected comma-separated integers, got {args.n!r}")
    settings = ProbeSettings(ns=ns, repeats=args.repeats, path_repeats=args.path_repeats,
                             ranks=args.ranks,
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
    print(json.dumps({"seconds_after_record": result.costs,
                      "seconds_before_stamp": result.before, "closure": result.closure,
                      "overhead_per_iteration": result.delta,
                      "overhead_per_iteration_by_repeat": result.spread}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
