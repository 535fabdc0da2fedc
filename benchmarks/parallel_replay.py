"""The distributed run against one process (docs/parallel.md, docs/performance.md):
wall time, CPU seconds and peak memory per rank, and the replay's waits and
messages.

Simulates ``stencil`` (16 processes, a halo exchange every few records; or with
``--program ring`` a wavefront: a token passed 0 -> 1 -> ... -> 15 -> 0, whose
dependency chain crosses ranks at every hop and grows with P; cached in
``--workdir`` as a ``.trace``, or with ``--format otf2`` as an OTF2 archive, with
its platform file; the outputs are in the input's format), then runs, each in
fresh processes, ``compensate IN OUT`` streamed in one process (P = 1) and
``mpiexec -n P compensate IN OUT`` streamed within each rank for each P (``--mpi``
for P = 1; ``--whole`` adds the one-process ``--in-memory`` run and the
whole-share runs), and prints per run: wall seconds (the whole command,
interpreter and MPI start-up included) and their ratio to the one-process
streamed run, each rank's CPU seconds (user + system) and peak resident set
(``ru_maxrss`` at its end) and their ratio to the one-process run's, and from the
summary's ``parallel`` each rank's waits (its replay had nothing runnable and no
value had arrived), their seconds and the point-to-point messages it sent, whether
the output equals the one-process output byte for byte (OTF2: every definition and
event file), each rank's phase seconds and its collective calls with their
seconds (waiting included).

``--times`` adds, for the one-process streamed run and every rank of the largest
P's streamed run, the wall seconds of its steps (:data:`TIMED`: the cut agreement,
reading, the trimmed ghosts, matching, the engine's graph, the replay's setup and
loop and the loop's waiting, verification, writing; of
the one-process run its reading, cutting, context and segments; timers around
them add a little).

``--ceiling`` adds two one-process streamed runs side by side (each in its own
process, started together): their wall time against the one run alone is what
the machine's cores give two processes that never wait for each other, the most
a two-rank run could gain here.

``--pairs N`` adds N pairs of the one-process streamed run and the largest P's
streamed run, their order alternating from pair to pair, so that the machine's
drift (its speed varies by a third within a day) falls on both: each pair's
ratios (wall; the busiest rank's CPU seconds against the one process's; the
same less the seconds the rank waited in collective calls and in the replay) and
their medians, the figure to compare with a target.

``--phases`` adds, for the one process and every rank of the largest P, where the
peak resident set (``VmHWM`` of ``/proc/self/status``, MiB) grows: per phase of
the streamed run (:data:`PROBED`: the cut agreement or the reading and cutting,
the context and trimmed ghosts, matching, the engine's graph, the replay loop,
verification, writing), summed over its calls, with the largest resident set
(``VmRSS``) and C heap in use (glibc's ``mallinfo2``: numpy's arrays and
Python's objects that are live, not the freed heap the resident set still
counts) after it (the wrappers of :func:`_probe`; Linux only). ``--bound B``
runs every command with ``--bound B`` (``fitted``: the streamed runs' first pass
is the fit pass, rank 0's in the distributed one).

Usage::

    python benchmarks/parallel_replay.py [--records 1e5] [--ranks 2,3] [--workdir DIR]
                                         [--format trace|otf2] [--phases] [--bound B]
                                         [--times] [--whole] [--program stencil|ring]
                                         [--ceiling] [--pairs N]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _memory() -> tuple[float, float]:
    """(resident set, its peak) of this process in MiB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def _in_use() -> float:
    """MiB of the C heap in use (glibc ``mallinfo2``: arena blocks in use plus
    mapped blocks; what the process holds live, as against the resident set,
    which also counts freed heap not handed back); -1 where unavailable."""
    import ctypes

    from compensate.pipeline.memory import MallInfo2 as _MallInfo2
    try:
        info = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return -1.0
    info.argtypes, info.restype = [], _MallInfo2
    m = info()
    return (m.uordblks + m.hblkhd) / (1 << 20)


def _wrap_each(table: list[tuple[str, str, str]], wrap) -> None:
    """``wrap(owner, name, label)`` for each (module, attribute path, label) of
    ``table``: the function or method the path names in the module."""
    import importlib

    for module, path, label in table:
        owner = importlib.import_module(module)
        *parents, name = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        wrap(owner, name, label)


def _probe(log: Path) -> None:
    """Wrap the phases of :data:`PROBED` so that each call measures the resident
    set, its peak and the heap in use when it returns; written to ``log`` when the
    process ends, per phase: calls, the peak's growth inside the phase summed over
    its calls (where the peak is made), the largest resident set and heap in use
    after it (``label<TAB>calls<TAB>growth<TAB>rss<TAB>heap`` lines, MiB)."""
    import atexit

    seen: dict[str, list[float]] = {label: [0, 0.0, 0.0, 0.0] for _, _, label in PROBED}

    def wrap(owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def probed(*args, **kwargs):
            before = _memory()[1]
            try:
                return inner(*args, **kwargs)
            finally:
                rss, peak = _memory()
                row = seen[label]
                row[0] += 1
                row[1] += peak - before
                row[2], row[3] = max(row[2], rss), max(row[3], _in_use())
        setattr(owner, name, probed)

    _wrap_each(PROBED, wrap)
    start = _memory()
    atexit.register(lambda: log.write_text(
        f"start\t0\t{start[1]:.0f}\t{start[0]:.0f}\t{_in_use():.0f}\n" + "".join(
            f"{label}\t{n}\t{g:.0f}\t{r:.0f}\t{h:.0f}\n"
            for label, (n, g, r, h) in seen.items() if n)))


#: the steps ``--times`` measures in each rank of a streamed run: (module, attribute
#: path, label); the replay loop's waiting is inside the replay loop
TIMED = [("compensate.parallel.cutting", "CutAgreement.next_cut",
          "cut agreement, reading own records"),
         ("compensate.parallel.cutting", "_look", "  of it looking for a cut"),
         ("compensate.parallel.segments", "OwnSplitter.split", "splitting own records"),
         ("compensate.parallel.segments", "RankStream._views", "context, trimmed ghosts"),
         ("compensate.parallel.trim", "calls_of", "  of it finding the calls"),
         ("compensate.parallel.transport", "MpiTransport.alltoall", "alltoall (objects)"),
         ("compensate.parallel.transport", "MpiTransport.allgather", "allgather (objects)"),
         ("compensate.pipeline.context", "Segmenter.match", "matching"),
         ("compensate.engine.run", "_Engine.__init__", "engine graph and rules"),
         ("compensate.parallel.exchange", "Exchange.start", "replay setup"),
         ("compensate.engine.run", "_Engine._scheduled", "replay loop"),
         ("compensate.parallel.exchange", "Exchange._wait", "  of it waiting"),
         ("compensate.parallel.share", "RankShare.verify", "verification"),
         ("compensate.parallel.segments", "RankStream._hand_over", "writing"),
         # the one-process streamed run's own steps (matching, the graph and the
         # loop are timed above)
         ("compensate.formats.chunks", "ChunkIterator.__next__", "reading (one process)"),
         ("compensate.pipeline.cuts", "Cutter.feed", "cutter taking records (one process)"),
         ("compensate.pipeline.cuts", "Cutter._cut", "cutting (one process)"),
         ("compensate.pipeline.context", "Segmenter.segment", "context (one process)"),
         ("compensate.pipeline.segment", "Whole.verify", "verification (one process)"),
         ("compensate.pipeline.run", "_stream_segment", "every segment (one process)")]


#: the phases ``--phases`` watches in each rank of a streamed run (and in the one
#: process): the steps of :data:`TIMED` that hold a segment's records
PROBED = [row for row in TIMED if row[2] in {
    "cut agreement, reading own records", "context, trimmed ghosts", "matching",
    "engine graph and rules", "replay loop", "verification", "writing",
    "reading (one process)", "cutter taking records (one process)",
    "context (one process)", "verification (one process)"}]


def _timers(out: Path) -> None:
    """Wrap the steps of :data:`TIMED` with wall-clock timers; their sums are written
    to ``out`` when the process ends (``label<TAB>seconds`` lines)."""
    import atexit

    totals = dict.fromkeys([label for _, _, label in TIMED], 0.0)

    def wrap(owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                totals[label] += time.perf_counter() - start
        setattr(owner, name, timed)

    _wrap_each(TIMED, wrap)
    atexit.register(lambda: out.write_text(
        "".join(f"{label}\t{x}\n" for label, x in totals.items())))


def _child(args: list[str]) -> None:
    """One rank (or the one process): run the command, then write its peak RSS."""
    from compensate.cli.compensate import main
    rank = os.environ.get("PMI_RANK", "0")
    if os.environ.get("PARALLEL_REPLAY_PHASES"):
        _probe(Path(args[0], f"phases{rank}"))
    if os.environ.get("PARALLEL_REPLAY_TIMES"):
        _timers(Path(args[0], f"times{rank}"))
    status = main(args[1:])
    use = resource.getrusage(resource.RUSAGE_SELF)
    Path(args[0], f"peak{rank}").write_text(str(use.ru_maxrss))
    Path(args[0], f"cpu{rank}").write_text(str(use.ru_utime + use.ru_stime))
    sys.exit(status)


#: Records per process and iteration of the simulated programs (Enter/Leave, the
#: MPI records): how many iterations make ``--records``
RECORDS_PER_STEP = {"stencil": 14, "ring": 8}


def simulated_trace(workdir: Path, records: float, fmt: str = "trace",
                    program: str = "stencil", ranks: int = 16) -> tuple[Path, Path]:
    """A cached trace of simulated ``program`` on ``ranks`` processes, of about
    ``records`` records (``fmt``: ``trace`` or ``otf2``), and its platform file."""
    iterations = max(1, int(records / (ranks * RECORDS_PER_STEP[program])))
    out = workdir / f"{program}_{ranks}x{iterations}_{fmt}"
    trace = out / ("measured.trace" if fmt == "trace" else "measured/traces.otf2")
    if not trace.exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "compensate.cli.simulate", program, str(out),
                        "--ranks", str(ranks), "--iterations", str(iterations),
                        "--format", fmt], check=True, cwd=ROOT, capture_output=True)
    return trace, out / "platform.json"


def _output(workdir: Path, name: str, fmt: str) -> Path:
    """The output path of run ``name``: a ``.trace`` file or an OTF2 anchor file in a
    fresh directory of its own."""
    if fmt == "trace":
        return workdir / f"{name}.trace"
    shutil.rmtree(workdir / name, ignore_errors=True)
    return workdir / name / "traces.otf2"


def same_output(a: Path, b: Path) -> bool:
    """Whether two outputs are equal: a ``.trace`` file byte for byte, an OTF2
    archive's definition and event files byte for byte (the anchor file holds a
    random trace id and the creation time)."""
    if a.suffix == ".trace":
        return filecmp.cmp(a, b, shallow=False)
    files = sorted(p.relative_to(a.parent) for p in a.parent.rglob("*")
                   if p.suffix in (".def", ".evt"))
    other = sorted(p.relative_to(b.parent) for p in b.parent.rglob("*")
                   if p.suffix in (".def", ".evt"))
    return files == other and all(filecmp.cmp(a.parent / f, b.parent / f, shallow=False)
                                  for f in files)


def _run(launcher: list[str], trace: Path, platform: Path, out: Path,
         extra: list[str], phases: bool = False, times: bool = False
         ) -> tuple[float, list[float], dict, list[float]]:
    peaks = Path(tempfile.mkdtemp(prefix="peaks"))
    summary = out.parent / (out.stem + ".json") if out.suffix == ".trace" \
        else out.parent.with_suffix(".json")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if phases:
        env["PARALLEL_REPLAY_PHASES"] = "1"
    if times:
        env["PARALLEL_REPLAY_TIMES"] = "1"
    start = time.monotonic()
    subprocess.run([*launcher, sys.executable, __file__, "--child", str(peaks), str(trace),
                    str(out), "--platform", str(platform), "--quiet", "--force",
                    "--summary", str(summary), *extra], check=True, cwd=ROOT, env=env)
    wall = time.monotonic() - start
    peak = [int(p.read_text()) / 1024 for p in sorted(peaks.glob("peak*"),
                                                     key=lambda p: int(p.name[4:]))]
    cpu = [float(p.read_text()) for p in sorted(peaks.glob("cpu*"),
                                                key=lambda p: int(p.name[3:]))]
    for log in sorted(peaks.glob("phases*")):
        print(f"    rank {log.name[len('phases'):]}, per phase: calls, MiB the peak grew "
              f"inside it (start: the peak before the run), the largest resident set "
              f"and heap in use after it:")
        for line in log.read_text().splitlines():
            label, n, grew, rss, used = line.split("\t")
            print(f"      {label:<36} {n:>5} {grew:>6} {rss:>6} {used:>6}")
    logs = sorted(peaks.glob("times*"), key=lambda p: int(p.name[5:]))
    if logs:
        rows = [dict(line.split("\t") for line in log.read_text().splitlines())
                for log in logs]
        print(f"{'':>12}   seconds per rank in each step (--times):")
        for label in rows[0]:
            if not any(float(r[label]) for r in rows):  # (the other run's steps)
                continue
            print(f"{'':>12}     {label:<26} {','.join(f'{float(r[label]):.2f}' for r in rows)}")
    shutil.rmtree(peaks)
    return wall, peak, json.loads(summary.read_text()), cpu


def _rank_row(label: str, wall: float, base: float, cpu: list[float], peaks: list[float],
              base_peak: float, par: dict | None, same: str) -> str:
    """One printed row: wall and its ratio to the one-process streamed run, per rank
    CPU seconds, peak MiB and its ratio, the replay's waits, their seconds and the
    messages each rank sent."""
    def per_rank(xs, fmt):
        return ",".join(fmt.format(x) for x in xs)
    waits = per_rank(par["waits"], "{}") if par else "-"
    wait_s = per_rank(par["wait_seconds"], "{:.2f}") if par else "-"
    messages = per_rank(par["messages"], "{}") if par else "-"
    return (f"{label:>12} {wall:>7.2f} {wall / base:>6.2f} {per_rank(cpu, '{:.2f}'):>11} "
            f"{per_rank(peaks, '{:.0f}'):>10} "
            f"{per_rank([x / base_peak for x in peaks], '{:.2f}'):>10} {waits:>13} "
            f"{wait_s:>10} {messages:>13}  {same}")


def _ceiling(trace: Path, platform: Path, workdir: Path, fmt: str, bound: list[str],
             alone: float) -> None:
    """Two one-process streamed runs of the trace at once, each in its own process,
    beside the one run alone (``alone`` wall seconds): what the machine's cores
    give two processes that never wait for each other, the most a two-rank run
    could gain here."""
    import threading

    got: dict[int, tuple[float, list[float]]] = {}

    def one(i: int) -> None:
        wall, _, _, cpu = _run([], trace, platform, _output(workdir, f"twin{i}", fmt), bound)
        got[i] = (wall, cpu)

    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    both = time.monotonic() - start
    each = ", ".join(f"{got[i][0]:.2f} s (CPU {got[i][1][0]:.2f})" for i in range(2))
    print(f"{'2 at once':>12} {both:>7.2f} {both / alone:>6.2f}   two one-process runs "
          f"side by side: {each}")


def _pairs(n: int, launcher: list[str], trace: Path, platform: Path, workdir: Path,
           fmt: str, bound: list[str]) -> None:
    """``n`` pairs of the one-process streamed run and the streamed run under
    ``launcher`` (``mpiexec -n P``), the launched run first in every other pair:
    each pair's wall and CPU ratios (the busiest rank's CPU seconds against the
    one process's; and its CPU seconds less those it spent waiting, in collective
    calls and in the replay, which a rank spends polling: what the rank's own work
    costs, whatever held the other rank up), then their medians."""
    walls, cpus, works = [], [], []
    for i in range(n):
        got = {}
        for which in (("one", "ranks") if i % 2 == 0 else ("ranks", "one")):
            wall, _, summary, cpu = _run([] if which == "one" else launcher, trace,
                                         platform, _output(workdir, f"pair_{which}", fmt),
                                         bound)
            par = summary.get("parallel") or {}
            waited = [a + b for a, b in zip(par.get("collective_seconds", [0.0] * len(cpu)),
                                            par.get("wait_seconds", [0.0] * len(cpu)),
                                            strict=True)]
            got[which] = wall, max(cpu), max(c - w for c, w in zip(cpu, waited, strict=True))
        (w1, c1, _), (wp, cp, kp) = got["one"], got["ranks"]
        walls.append(wp / w1)
        cpus.append(cp / c1)
        works.append(kp / c1)
        print(f"{f'pair {i + 1}':>12}  one process {w1:.2f} s (CPU {c1:.2f}), "
              f"{' '.join(launcher[1:])} {wp:.2f} s (busiest rank's CPU {cp:.2f}, "
              f"{kp:.2f} less its waiting): wall {walls[-1]:.2f}, CPU {cpus[-1]:.2f}, "
              f"less waiting {works[-1]:.2f}")
    print(f"{'median':>12}  of {n} pairs, against one process: wall "
          f"{statistics.median(walls):.2f}, CPU {statistics.median(cpus):.2f}, "
          f"CPU less waiting {statistics.median(works):.2f}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=float, default=1e5)
    ap.add_argument("--ranks", default="2")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "compensate-bench"))
    ap.add_argument("--format", choices=("trace", "otf2"), default="trace",
                    help="the simulated trace's format (and the outputs')")
    ap.add_argument("--phases", action="store_true",
                    help="where each rank's peak memory grows, per phase (one process, largest P)")
    ap.add_argument("--bound", default=None,
                    help="the --bound of every run (default: the command's, lower)")
    ap.add_argument("--times", action="store_true",
                    help="time the steps of each rank's streamed run (largest P)")
    ap.add_argument("--whole", action="store_true",
                    help="also the one-process --in-memory run and the whole-share runs")
    ap.add_argument("--ceiling", action="store_true",
                    help="also two one-process runs at once (what two cores give)")
    ap.add_argument("--pairs", type=int, default=0, metavar="N",
                    help="also N alternating pairs of one process and the largest P")
    ap.add_argument("--program", choices=sorted(RECORDS_PER_STEP), default="stencil",
                    help="the simulated program (ring: a wavefront across the processes)")
    a = ap.parse_args()
    bound = ["--bound", a.bound] if a.bound else []
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    trace, platform = simulated_trace(workdir, a.records, a.format, a.program)
    one = _output(workdir, "streamed", a.format)
    walls, peaks, s1, cpus = _run([], trace, platform, one, bound, a.phases, a.times)
    mib = peaks[0]
    print(f"{s1['records']:,} records on {s1['locations']} locations; ratios against "
          f"the one-process streamed run")
    print(f"{'run':>12} {'wall s':>7} {'ratio':>6} {'CPU s/rank':>11} {'MiB/rank':>10} "
          f"{'ratio':>10} {'waits/rank':>13} {'wait s':>10} {'messages':>13}  same")
    print(_rank_row("1 streamed", walls, walls, cpus, peaks, mib, None, "-"))
    if a.ceiling:
        _ceiling(trace, platform, workdir, a.format, bound, walls)
    if a.whole:
        wall1, peak1, _, cpu1 = _run([], trace, platform, _output(workdir, "one", a.format),
                                     ["--in-memory", *bound])
        print(_rank_row("1 in-memory", wall1, walls, cpu1, peak1, mib, None, "-"))
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        print("mpiexec not found (the [mpi] extra): only P = 1 measured")
        return
    counts = [int(x) for x in a.ranks.split(",")]
    runs = [(p, how) for p in counts for how in (("streamed", "whole") if a.whole
                                                   else ("streamed",))]
    for p, how in runs:
        out = _output(workdir, f"p{p}{how}", a.format)
        extra = (["--mpi"] if p == 1 else []) + (["--in-memory"] if how == "whole" else []) \
            + bound
        last = p == max(counts)
        wall, peak, s, cpu = _run([mpiexec, "-n", str(p)], trace, platform, out,
                                  extra, a.phases and last,
                                  a.times and last and how == "streamed")
        par = s["parallel"]
        print(_rank_row(f"{p} {how}", wall, walls, cpu, peak, mib, par,
                        "yes" if same_output(one, out) else "NO"))
        for phase, xs in par["seconds"].items():
            print(f"{'':>12}   {phase:<12} s/rank {','.join(f'{x:.2f}' for x in xs)}")
        print(f"{'':>12}   collectives  {','.join(map(str, par['collectives']))}, s/rank "
              f"{','.join(f'{x:.2f}' for x in par['collective_seconds'])} (waiting included)")
    if a.pairs:
        _pairs(a.pairs, [mpiexec, "-n", str(max(counts))], trace, platform, workdir,
               a.format, bound)


if __name__ == "__main__":
    main()
